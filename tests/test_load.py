"""Loading rank files fast: the native ``.tiktoken`` parser against the Python reader,
and tokenizers built straight in the core (vocab and merges made only when asked for)
against tokenizers built the general way."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys

import pytest

import bytepair
from bytepair import _core, encodings, formats
from bytepair.tokenizer import Tokenizer

from conftest import DATA, EOT

BUNDLED_FILES = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]


def outcome(parse, data: bytes, path: str):
    """("ok", items in order) or ("error", message) of a parse."""
    try:
        return "ok", list(parse(data, path).items())
    except ValueError as e:
        return "error", str(e)


@pytest.mark.parametrize("file", BUNDLED_FILES)
def test_native_parser_agrees_with_python_reader_on_bundled_files(file):
    data = encodings._bundled_data(file)
    native = _core.parse_tiktoken(data)
    python = formats.tiktoken._parse_tiktoken_py(data, file)
    assert list(native.items()) == list(python.items())
    assert formats.tiktoken.parse(data, file) == python


def good_lines() -> list[bytes]:
    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)]
    return lines + [b"YWI= 256", b"YWJj 257"]


# (bad line inserted as line 7, does the native parser word the error itself?)
MALFORMED = [
    (b"!!!notbase64 300", False),  # not the base64 alphabet: the Python reader decides
    (b"YWI 300", True),  # bad base64: missing padding
    (b"YWJjZ 300", True),  # bad base64: 5 characters
    (b"YWI=", True),  # missing rank
    (b"YWI= ", True),  # missing rank, trailing space
    (b"YWI= 300 9", True),  # one field too many
    (b"YWI= x1", True),  # rank not an integer
    (b"YWI= 3=", True),
    (b"AA== 300", True),  # duplicate token
    (b"YWJj 300", True),  # a token a later line repeats: the error is on that line
    (b"YWI= 3", True),  # duplicate rank
    (b"YWI= -3", False),
    (b"YWI= +300", False),  # int() takes the sign: accepted by the Python reader
    (b"YWI= 1_0", False),
    (b"YWI=\t300", False),
    (b"YWI= 300\x0c", False),
    (b"\xc3\xa9 300", False),  # non-ASCII
    (b"YR== 300", False),  # unused base64 bits set: Python ignores them
    (b"YQ=== 300", False),
    (b"=YQ= 300", False),
    (b"YQ==YQ== 300", False),
    (b"YWI= 99999999999999999999", False),
]


@pytest.mark.parametrize("bad_line, native_words_it", MALFORMED)
def test_native_parser_agrees_with_python_reader_on_malformed_lines(bad_line, native_words_it):
    lines = good_lines()
    lines.insert(6, bad_line)
    data = b"\n".join(lines) + b"\n"
    path = "dir/bad.tiktoken"
    expected = outcome(formats.tiktoken._parse_tiktoken_py, data, path)
    assert outcome(formats.tiktoken.parse, data, path) == expected
    try:
        _core.parse_tiktoken(data)
    except ValueError as e:
        deferred = e.args == ("unsure",)
        assert deferred != native_words_it
        if not deferred:
            assert expected[0] == "error"
            assert str(formats.tiktoken._tiktoken_error(e.args, data, path)) == expected[1]
            assert re.match(rf"{path}, line (7|259): ", expected[1])
    else:
        assert expected[0] == "ok" and not native_words_it


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n",
        b"AA== 0\r\nAQ== 1\r\n",  # CRLF
        b"AA== 0\rAQ== 1\r",  # CR
        b"AA== 0\n\n   \nAQ== 1",  # blank lines, no final newline
        b"  AA==   0  \nAQ== 1\n",  # spaces around and between fields
        b"AA== 0\r\n\r\nAA== 1\r\n",  # duplicate token after a blank CRLF line
        b"AA== 0\r\rAQ== 0\n",  # duplicate rank: line numbers count the empty line
        b"AA== 7\nAQ== 007\n",  # leading zeros
        b"AA== 5\nAQ== 3\n",  # ranks out of order, with gaps
    ],
)
def test_native_parser_agrees_on_line_ends_blank_lines_and_spacing(data):
    assert outcome(formats.tiktoken.parse, data, "f") == outcome(
        formats.tiktoken._parse_tiktoken_py, data, "f"
    )
    try:
        _core.parse_tiktoken(data)
    except ValueError as e:
        assert e.args != ("unsure",)  # all plain form: the native parser decides


def test_native_errors_name_file_and_line_for_crlf_files(tmp_path):
    path = tmp_path / "crlf.tiktoken"
    lines = good_lines()
    lines.insert(9, b"AA== 400")
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    with pytest.raises(ValueError, match=r"crlf.tiktoken, line 10: token b'\\x00' was already"):
        bytepair.Tokenizer.from_tiktoken(path, "gpt2")


def eager_encoding(name: str) -> Tokenizer:
    """The bundled encoding built the general way: Python reader, merges_from_ranks,
    Tokenizer(vocab, merges, ...)."""
    file, pattern, specials = encodings._ENCODINGS[name]
    ranks = formats.tiktoken._parse_tiktoken_py(encodings._bundled_data(file), file)
    vocab = {rank: token for token, rank in ranks.items()}
    return Tokenizer(vocab, formats.tiktoken.merges_from_ranks(ranks), specials, pattern)


def fresh_encoding(name: str) -> Tokenizer:
    """The bundled encoding as get_encoding builds it, not shared with other tests."""
    file, pattern, specials = encodings._ENCODINGS[name]
    data = encodings._bundled_data(file)
    return formats.tiktoken.from_bytes(data, encodings._bundled_path(file), pattern, specials)


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
    ranks = formats.tiktoken._parse_tiktoken_py(path.read_bytes(), str(path))
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
