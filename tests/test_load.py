"""Loading rank files: what the ``.tiktoken`` parser accepts and how it words each
fault, and tokenizers built straight in the core (vocab and merges made only when asked
for) against tokenizers built the general way."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import formats
from bytepair.formats import bundled
from bytepair.tokenizer import Tokenizer

from conftest import DATA, EOT

BUNDLED_FILES = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]


def outcome(data: bytes, path: str = "f"):
    """("ok", items in order) or ("error", message) of parsing ``data``."""
    try:
        return "ok", list(formats.tiktoken.parse(data, path).items())
    except ValueError as e:
        return "error", str(e)


def plain_parse(data: bytes) -> dict[bytes, int]:
    """A reading of a well-formed file, independent of the one under test."""
    ranks = {}
    for line in data.splitlines():
        if line.split():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@pytest.mark.parametrize("file", BUNDLED_FILES)
def test_bundled_files_parse_as_a_plain_reading_does(file):
    data = bundled.rank_file_text(file)
    ranks = formats.tiktoken.parse(data, file)
    assert list(ranks.items()) == list(plain_parse(data).items())


def good_lines() -> list[bytes]:
    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)]
    return lines + [b"YWI= 256", b"YWJj 257"]


def with_line_7(line: bytes) -> bytes:
    lines = good_lines()
    lines.insert(6, line)
    return b"\n".join(lines) + b"\n"


# A bad line inserted as line 7 of good_lines(), and the message (after "<path>, line ").
MALFORMED = [
    (b"!!!notbase64 300", "7: '!!!notbase64' is not valid base64"),
    (b"YWI 300", "7: 'YWI' is not valid base64"),  # missing padding
    (b"YWJjZ 300", "7: 'YWJjZ' is not valid base64"),  # 5 characters
    (b"YQ= 300", "7: 'YQ=' is not valid base64"),  # 2 characters need "=="
    (b"YWJ== 300", "7: 'YWJ==' is not valid base64"),  # 3 characters take one "="
    (b"YQ=== 300", "7: 'YQ===' is not valid base64"),
    (b"== 300", "7: '==' is not valid base64"),  # padding alone
    (b"=YQ= 300", "7: '=YQ=' is not valid base64"),
    (b"YQ==YQ== 300", "7: 'YQ==YQ==' is not valid base64"),
    (b"\xc3\xa9 300", "7: '\u00e9' is not valid base64"),  # non-ASCII
    (b"\xff\xfe 300", "7: '\ufffd\ufffd' is not valid base64"),  # not UTF-8
    (b"YWI=", "7: expected 'base64-token rank', got 'YWI='"),  # missing rank
    (b"YWI= ", "7: expected 'base64-token rank', got 'YWI= '"),  # trailing space
    (b"YWI= 300 9", "7: expected 'base64-token rank', got 'YWI= 300 9'"),
    (b"YWI= x1", "7: rank 'x1' is not a non-negative integer"),
    (b"YWI= 3=", "7: rank '3=' is not a non-negative integer"),
    (b"YWI= -3", "7: rank '-3' is not a non-negative integer"),
    # Accepted by the old fast path (Python's int() takes them), not by the format:
    (b"YWI= +300", "7: rank '+300' is not a non-negative integer"),
    (b"YWI= 1_0", "7: rank '1_0' is not a non-negative integer"),
    (b"YWI= \xef\xbc\x93", "7: rank '\uff13' is not a non-negative integer"),  # fullwidth 3
    (b"eHk= 2147483648", "7: rank '2147483648' is too large: ranks go up to 2147483647"),
    (
        b"eHk= 99999999999999999999",
        "7: rank '99999999999999999999' is too large: ranks go up to 2147483647",
    ),
    (b"AA== 300", "7: token b'\\x00' was already given on line 1"),  # duplicate token
    (b"YWJj 300", "259: token b'abc' was already given on line 7"),  # repeated later
    (b"YR== 300", "99: token b'a' was already given on line 7"),  # YQ== is a too
    (b"eHk= 3", "7: rank 3 was already given on line 4"),  # duplicate rank
]


@pytest.mark.parametrize("bad_line, message", MALFORMED)
def test_malformed_line_is_an_error_naming_file_and_line(bad_line, message):
    path = "dir/bad.tiktoken"
    assert outcome(with_line_7(bad_line), path) == ("error", f"{path}, line {message}")


# Unusual lines that are well-formed, and the token and rank they give.
UNUSUAL = [
    (b"eHk=\t300", (b"xy", 300)),  # tab between the fields
    (b"eHk= 300\x0c", (b"xy", 300)),  # form feed after
    (b"\x1feHk=\xe3\x80\x80300\xc2\x85", (b"xy", 300)),  # Python's str.split() spaces
    (b"eHl= 300", (b"xy", 300)),  # spare bits set in the last character: ignored
    (b"eHl6= 300", (b"xyz", 300)),  # padding after a full group
    (b"eHl6== 300", (b"xyz", 300)),
    (b"eHk= 0000300", (b"xy", 300)),  # leading zeros
    (b"eHk= 2147483647", (b"xy", 2147483647)),  # the largest rank: ids are below 2**31
]


@pytest.mark.parametrize("line, entry", UNUSUAL)
def test_unusual_but_well_formed_line_is_read(line, entry):
    kind, items = outcome(with_line_7(line))
    assert kind == "ok" and items[6] == entry and len(items) == 259


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"", ("ok", [])),
        (b"\n\n", ("ok", [])),
        (b"AA== 0\r\nAQ== 1\r\n", ("ok", [(b"\x00", 0), (b"\x01", 1)])),  # CRLF
        (b"AA== 0\rAQ== 1\r", ("ok", [(b"\x00", 0), (b"\x01", 1)])),  # CR
        (b"AA== 0\n\n   \nAQ== 1", ("ok", [(b"\x00", 0), (b"\x01", 1)])),  # blank, no final \n
        (b"  AA==   0  \nAQ== 1\n", ("ok", [(b"\x00", 0), (b"\x01", 1)])),  # spaces
        (b"AA== 5\nAQ== 3\n", ("ok", [(b"\x00", 5), (b"\x01", 3)])),  # out of order, gaps
        (
            b"AA== 0\r\n\r\nAA== 1\r\n",  # duplicate token after a blank CRLF line
            ("error", "f, line 3: token b'\\x00' was already given on line 1"),
        ),
        (
            b"AA== 0\r\rAQ== 0\n",  # duplicate rank: line numbers count the empty line
            ("error", "f, line 3: rank 0 was already given on line 1"),
        ),
        (b"AA== 7\nAQ== 007\n", ("error", "f, line 2: rank 7 was already given on line 1")),
    ],
)
def test_line_ends_blank_lines_and_spacing(data, expected):
    assert outcome(data) == expected


@st.composite
def well_formed_files(draw) -> bytes:
    """A random well-formed file: random tokens and ranks, line ends, blank lines and
    spacing."""
    tokens = draw(st.lists(st.binary(min_size=1, max_size=12), unique=True, max_size=40))
    ranks = draw(
        st.lists(st.integers(0, 2**31 - 1), unique=True, min_size=len(tokens), max_size=len(tokens))
    )
    spaces = st.sampled_from([b" ", b"  ", b"\t", b" \t "])
    lines = []
    for token, rank in zip(tokens, ranks):
        lead = draw(st.sampled_from([b"", b" ", b"\t"]))
        zeros = b"0" * draw(st.integers(0, 2))
        lines.append(lead + base64.b64encode(token) + draw(spaces) + zeros + b"%d" % rank)
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from([b"", b" ", b"\t \t"])))
    ends = [draw(st.sampled_from([b"\n", b"\r\n", b"\r"])) for _ in lines]
    return b"".join(line + end for line, end in zip(lines, ends))


@settings(max_examples=300, deadline=None)
@given(well_formed_files())
def test_well_formed_files_parse_as_a_plain_reading_does(data):
    assert list(formats.tiktoken.parse(data, "f").items()) == list(plain_parse(data).items())


def test_errors_name_file_and_line_for_crlf_files(tmp_path):
    path = tmp_path / "crlf.tiktoken"
    lines = good_lines()
    lines.insert(9, b"AA== 400")
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    with pytest.raises(ValueError, match=r"crlf.tiktoken, line 10: token b'\\x00' was already"):
        bytepair.Tokenizer.from_tiktoken(path, "gpt2")


def eager_encoding(name: str) -> Tokenizer:
    """The bundled encoding built the general way: parse, merges_from_ranks,
    Tokenizer(vocab, merges, ...)."""
    file, pattern, specials = bundled.ENCODINGS[name]
    ranks = formats.tiktoken.parse(bundled.rank_file_text(file), file)
    vocab = {rank: token for token, rank in ranks.items()}
    return Tokenizer(vocab, formats.tiktoken.merges_from_ranks(ranks), specials, pattern)


def fresh_encoding(name: str) -> Tokenizer:
    """The bundled encoding as get_encoding builds it, not shared with other tests."""
    file, pattern, specials = bundled.ENCODINGS[name]
    data = bundled.rank_file_text(file)
    return Tokenizer.from_model(
        formats.tiktoken.from_bytes(data, bundled.rank_file_path(file), pattern, specials)
    )


@pytest.mark.parametrize("name", ["gpt2", "p50k_base", "cl100k_base", "o200k_base"])
def test_lazy_vocab_and_merges_equal_eager_ones(name):
    tok = fresh_encoding(name)
    eager = eager_encoding(name)
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8") + " 12345 é中😀 " + EOT
    # Encoding, metadata and repr need no Python vocab or merges.
    assert tok.encode(text, allowed_special="all") == eager.encode(text, allowed_special="all")
    assert tok.encode_ordinary(text) == eager.encode_ordinary(text)
    assert tok.vocab_size == eager.vocab_size
    assert tok.n_vocab == eager.n_vocab
    assert tok.max_token_value == eager.max_token_value
    assert repr(tok) == repr(eager)
    assert tok.special_tokens == eager.special_tokens
    assert tok.pattern == eager.pattern
    assert tok.model._vocab is None and tok.model._merges is None
    # Made on first use, equal to the eager ones.
    assert tok.vocab == eager.vocab
    assert list(tok.vocab) == list(eager.vocab)  # same order too (the files are sorted)
    assert tok.merges == eager.merges
    assert tok.vocab_size == eager.vocab_size and tok.n_vocab == eager.n_vocab
    assert repr(tok) == repr(eager)
    assert tok.decode_single_token_bytes(300) == eager.decode_single_token_bytes(300)


def test_get_encoding_builds_no_python_vocab():
    tok = bytepair.get_encoding("r50k_base")
    assert tok.encode("hello world") == [31373, 995]
    assert tok.n_vocab == 50257 and tok.name == "r50k_base"
    assert "merges=50000" in repr(tok)


def test_lazy_tokenizer_round_trips_through_files(tmp_path):
    tok = fresh_encoding("gpt2")
    text = (DATA / "address.txt").read_text(encoding="utf-8")
    tok.save(tmp_path / "g.bytepair")
    loaded = bytepair.Tokenizer.load(tmp_path / "g.bytepair")
    assert loaded.vocab == tok.vocab and loaded.merges == tok.merges
    assert loaded.encode(text) == tok.encode(text)
    tok = fresh_encoding("gpt2")
    tok.save_tiktoken(tmp_path / "g.tiktoken")
    again = bytepair.Tokenizer.from_tiktoken(tmp_path / "g.tiktoken", "gpt2", {EOT: 50256})
    assert again.vocab == tok.vocab and again.merges == tok.merges
    assert again.encode(text) == tok.encode(text)


@pytest.mark.parametrize(
    "specials",
    [
        None,
        {EOT: 258},
        [EOT],
        {"ab": 256},  # a special id that is also a rank (same bytes): the general way
        {EOT: 256},  # a special id that is also a rank (other bytes): the same error
        {EOT: 258, "<|pad|>": 258},  # two specials, one id: the same error
        {"<|pad|>": 300, EOT: 258},  # vocab order: ordinary tokens, then specials as given
    ],
)
def test_from_tiktoken_fast_and_general_ways_agree(tmp_path, specials):
    path = tmp_path / "s.tiktoken"
    path.write_bytes(b"\n".join(good_lines()) + b"\n")
    ranks = formats.tiktoken.parse(path.read_bytes(), str(path))
    try:
        eager = Tokenizer(
            {r: t for t, r in ranks.items()},
            formats.tiktoken.merges_from_ranks(ranks),
            specials,
            "gpt2",
        )
    except ValueError as e:
        with pytest.raises(ValueError) as info:
            bytepair.Tokenizer.from_tiktoken(path, "gpt2", specials)
        assert str(info.value) == f"{path}: {e}"
        return
    tok = bytepair.Tokenizer.from_tiktoken(path, "gpt2", specials)
    text = "abc ab abcab " + EOT
    assert tok.encode(text, allowed_special="all") == eager.encode(text, allowed_special="all")
    assert (tok.vocab_size, tok.n_vocab, repr(tok)) == (
        eager.vocab_size,
        eager.n_vocab,
        repr(eager),
    )
    assert tok.vocab == eager.vocab and tok.merges == eager.merges
    assert list(tok.vocab) == list(eager.vocab)
    assert tok.special_tokens == eager.special_tokens


@pytest.mark.parametrize(
    "specials, message",
    [
        ({EOT: 256}, f"special token {EOT!r} has id 256, which the vocabulary gives to b'ab'"),
        (
            {EOT: 258, "<|pad|>": 258},
            "special token '<|pad|>' has id 258, which the vocabulary gives to b'<|endoftext|>'",
        ),
        # The same bytes share the id, which takes the token from the merges or bytes.
        ({"ab": 256}, "merge #0 (b'a', b'b') uses b'ab', which is not in the vocabulary"),
        (["a"], "merge #0 (b'a', b'b') uses b'a', which is not in the vocabulary"),
        (
            ["x"],
            "the vocabulary has no token for the single byte 0x78; byte-level BPE needs "
            "all 256 bytes",
        ),
    ],
)
def test_special_ids_held_by_other_tokens_are_errors_naming_the_file(tmp_path, specials, message):
    path = tmp_path / "s.tiktoken"
    path.write_bytes(b"\n".join(good_lines()) + b"\n")
    with pytest.raises(ValueError) as info:
        bytepair.Tokenizer.from_tiktoken(path, "gpt2", specials)
    assert str(info.value) == f"{path}: {message}"


def test_merges_from_ranks_words_bad_tables():
    ranks = {bytes([b]): b for b in range(256)}
    with pytest.raises(ValueError, match=r"^tokens b'a' and b'ab' have the same rank 97$"):
        formats.tiktoken.merges_from_ranks(ranks | {b"ab": 97})
    with pytest.raises(ValueError, match=r"^token b'ab' has rank -1, outside 0\.\.2147483647$"):
        formats.tiktoken.merges_from_ranks(ranks | {b"ab": -1})
    del ranks[b"a"]
    with pytest.raises(ValueError, match=r"^the single byte b'a' has no rank"):
        formats.tiktoken.merges_from_ranks(ranks)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_an_encoding_loads_in_a_forked_child():
    # Recovering merges runs on threads of its own each time (no global pool, whose
    # threads a forked child would not have: it would wait for them forever).
    script = """
import os, bytepair
bytepair.get_encoding("gpt2")
pid = os.fork()
if pid == 0:
    tok = bytepair.get_encoding("cl100k_base")
    os._exit(0 if tok.encode("hello world") == [15339, 1917] else 1)
_, status = os.waitpid(pid, 0)
raise SystemExit(os.waitstatus_to_exitcode(status))
"""
    subprocess.run([sys.executable, "-c", script], timeout=300, check=True)


def test_loading_pauses_the_garbage_collector_and_restores_it_even_on_error(tmp_path, monkeypatch):
    import gc

    from bytepair import formats

    during = []
    read_file = formats._read_file

    def noting(*args):
        during.append(gc.isenabled())
        return read_file(*args)

    monkeypatch.setattr(formats, "_read_file", noting)
    good = tmp_path / "t.bytepair"
    bytepair.get_encoding("gpt2").save(good)
    bad = tmp_path / "bad.bytepair"
    bad.write_text('{"format": "bytepair", "version": 1', encoding="utf-8")
    assert gc.isenabled()
    bytepair.load(good)
    with pytest.raises(ValueError, match="bad.bytepair"):
        bytepair.load(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        bytepair.load(good)
        assert not gc.isenabled()  # a caller's choice is left as it was
    finally:
        gc.enable()
    assert during == [False, False, False]
