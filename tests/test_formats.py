"""Saving and loading: our own file format and GPT-2 style files."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.formats.byte_table import (
    bytes_to_unicode,
    str_to_token,
    token_to_str,
    unicode_to_bytes,
)

from conftest import DATA, EOT, GPT2_DIR


def test_save_load_round_trip_gives_identical_ids(tmp_path, tinystories_tokenizer):
    tok = tinystories_tokenizer
    path = tmp_path / "t.bytepair"
    tok.save(path)
    loaded = bytepair.Tokenizer.load(path)
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
    assert loaded.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")
    assert loaded.vocab == tok.vocab
    assert loaded.merges == tok.merges
    assert loaded.special_tokens == tok.special_tokens
    assert loaded.pattern == tok.pattern


def test_saved_file_is_readable_versioned_json(tmp_path, tinystories_tokenizer):
    path = tmp_path / "t.bytepair"
    tinystories_tokenizer.save(path)
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert doc["format"] == "bytepair" and doc["version"] == 1
    assert doc["special_tokens"] == {EOT: 598, "<|pad|>": 599}
    assert "vocab" not in doc  # ids follow the merges: nothing more to store
    first = tinystories_tokenizer.merges[0]
    assert doc["merges"][0] == token_to_str(first[0]) + " " + token_to_str(first[1])
    assert text.count("\n") > len(doc["merges"])  # one merge per line


def test_non_canonical_vocab_round_trips(tmp_path, gpt2):
    # CS336 form: special token at id 0, bytes shifted to 1..256
    raw = json.loads((DATA / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    vocab = {i: str_to_token(t) for t, i in raw.items()}
    lines = (DATA / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    merges = [tuple(str_to_token(p) for p in line.split(" ")) for line in lines]
    tok = bytepair.Tokenizer(vocab, merges, [EOT])
    path = tmp_path / "cs336.bytepair"
    tok.save(path)
    assert "vocab" in json.loads(path.read_text(encoding="utf-8"))
    loaded = bytepair.Tokenizer.load(path)
    text = (DATA / "address.txt").read_text(encoding="utf-8")
    assert loaded.encode(text) == tok.encode(text)
    assert loaded.vocab == tok.vocab


def test_pattern_none_and_custom_survive_save(tmp_path):
    for pattern in (None, r"\w+|\s+|[^\w\s]+"):
        tok = bytepair.train_from_iterator(["ab ab abc"], 258, pattern=pattern, progress=False)
        tok.save(tmp_path / "p.bytepair")
        assert bytepair.Tokenizer.load(tmp_path / "p.bytepair").pattern == pattern


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda t: t[: len(t) // 2], "not a valid bytepair tokenizer file: .* at line"),
        (lambda t: "", "not a valid bytepair tokenizer file"),
        (lambda t: t.replace('"version": 1', '"version": 99'), "version 99 is not supported"),
        (lambda t: t.replace('"format": "bytepair"', '"format": "other"'), "not a bytepair"),
        (lambda t: t.replace('"Ġ t"', '"Ġt"', 1), 'merge #0 is .*expected "left right"'),
        (lambda t: t.replace('"Ġ t"', '"Ġ \u4e2d"', 1), "not in GPT-2's byte-to-unicode table"),
        (
            lambda t: t.replace('"special_tokens"', '"specials"'),
            '"special_tokens" field is missing',
        ),
    ],
)
def test_corrupted_or_truncated_files_raise_clear_errors(tmp_path, mangle, message):
    tok = bytepair.train(DATA / "corpus.en", 300, special_tokens=[EOT], progress=False)
    good = tmp_path / "good.bytepair"
    tok.save(good)
    assert tok.merges[0] == (b" ", b"t")
    bad = tmp_path / "bad.bytepair"
    bad.write_text(mangle(good.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        bytepair.Tokenizer.load(bad)
    assert "bad.bytepair" in str(info.value)


def test_failed_save_leaves_no_partial_file(tmp_path, tinystories_tokenizer, monkeypatch):
    import bytepair.formats.bytepair as bytepair_format

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(bytepair_format, "dumps", boom)
    with pytest.raises(RuntimeError):
        tinystories_tokenizer.save(tmp_path / "x.bytepair")
    assert list(tmp_path.iterdir()) == []


def test_gpt2_files_load_with_and_without_version_header(gpt2):
    # the HF merges.txt starts with "#version: 0.2"; CS336's copy does not
    assert len(gpt2.merges) == 50000
    assert gpt2.vocab_size == 50257 and gpt2.special_tokens == {EOT: 50256}
    assert gpt2.merges[0] == (b" ", b"t")


def test_gpt2_merges_without_header(tmp_path, gpt2):
    lines = (GPT2_DIR / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    (tmp_path / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tok = bytepair.Tokenizer.from_files(GPT2_DIR / "vocab.json", tmp_path / "merges.txt", [EOT])
    assert tok.merges == gpt2.merges


def test_bad_gpt2_merges_line_is_named(tmp_path):
    (tmp_path / "merges.txt").write_text("#version: 0.2\nĠ t\nbroken\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges.txt, line 3: expected 'left right'"):
        bytepair.Tokenizer.from_files(GPT2_DIR / "vocab.json", tmp_path / "merges.txt")


def test_merge_outside_the_vocab_is_named():
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(ValueError, match=r"merge #0 \(b'a', b'b'\) uses b'ab'"):
        bytepair.Tokenizer(vocab, [(b"a", b"b")])


def test_vocab_without_all_bytes_is_rejected():
    vocab = {i: bytes([i]) for i in range(255)}
    with pytest.raises(ValueError, match="single byte 0xff"):
        bytepair.Tokenizer(vocab, [])


def test_byte_to_unicode_table_is_gpt2s():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"
    assert str_to_token(token_to_str(bytes(range(256)))) == bytes(range(256))


def test_every_character_outside_gpt2s_table_is_refused_by_name():
    # Below U+0100 too: a space, a control byte or a soft hyphen is written as "Ġ", "Ċ"...
    # in a byte-level file, never as itself.
    table = set(bytes_to_unicode().values())
    for c in [*map(chr, range(0x200)), "中", "😀", "\uffff"]:
        if c in table:
            assert str_to_token("a" + c) == b"a" + bytes([unicode_to_bytes()[c]])
        else:
            with pytest.raises(
                ValueError, match=f"^at: token .* has the character {re.escape(repr(c))}, which"
            ):
                str_to_token("Ġa" + c + "b", "at: ")


@settings(max_examples=200)
@given(st.binary(max_size=40))
def test_any_bytes_round_trip_through_gpt2s_notation(token):
    assert str_to_token(token_to_str(token)) == token
    assert token_to_str(token) == "".join(bytes_to_unicode()[b] for b in token)


@pytest.mark.parametrize(
    ("name", "mangle", "message"),
    [
        ("t.json", lambda d: d["model"]["merges"].__setitem__(2, "Ġ a b"), r"model.merges\[2\] is"),
        (
            "t.json",
            lambda d: d["model"]["merges"].__setitem__(3, "Ġ a\n"),
            r"model.merges\[3\]: token",
        ),
        (
            "t.json",
            lambda d: d["model"]["merges"].__setitem__(1, {"Ġ": 0, "t": 1}),
            r"model.merges\[1\] is",
        ),
        (
            "t.json",
            lambda d: d["model"]["vocab"].__setitem__("a b", 99_999),
            "model.vocab: token 'a b'",
        ),
        ("t.json", lambda d: d["model"]["vocab"].__setitem__("zz", True), "entry 'zz' has id True"),
        ("t.bytepair", lambda d: d["merges"].__setitem__(4, "Ġ x\ty"), "merge #4: token"),
    ],
)
def test_a_damaged_entry_is_named_with_its_file_and_place(
    tmp_path, tinystories_tokenizer, name, mangle, message
):
    tinystories_tokenizer.save(tmp_path / name)
    doc = json.loads((tmp_path / name).read_text(encoding="utf-8"))
    mangle(doc)
    (tmp_path / name).write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        bytepair.load(tmp_path / name)
    assert str(info.value).startswith(str(tmp_path / name))


def test_a_gpt2_merges_file_names_the_line_of_a_bad_token(tmp_path):
    (tmp_path / "vocab.json").write_bytes((GPT2_DIR / "vocab.json").read_bytes())
    lines = (GPT2_DIR / "merges.txt").read_text(encoding="utf-8").split("\n")
    lines[5] = "Ġ a\x7f"
    (tmp_path / "merges.txt").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges.txt, line 6: token 'a\\x7f' has the character"):
        bytepair.load(tmp_path)


def test_a_tokenizer_json_with_ignore_merges_loads_with_it_not_as_plain_merges(
    tmp_path, tinystories_tokenizer
):
    # (Every shape of it against tokenizers: tests/test_hf_pre_tokenizers.py.)
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path / "t.json"
    tinystories_tokenizer.save(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["model"]["ignore_merges"] = True
    path.write_text(json.dumps(doc), encoding="utf-8")
    tok = bytepair.load(path)
    assert tok.model.ignore_merges is True
    text = "Once upon a time, a little girl named Lily found 12 shiny stones."
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_json_files_hold_the_same_value_with_long_lists_one_entry_a_line():
    from bytepair.formats.gpt2 import LONG, json_bytes

    small = {"a": [1, "x", {"y": None, "z": [True, 1.5]}], "b": {}, "c": [], "d": 'é\n"\\'}
    assert json_bytes(small).decode() == json.dumps(small, ensure_ascii=False, indent=2) + "\n"
    big = {
        "vocab": {f"t{i}\u0120": i for i in range(LONG + 1)},
        "merges": [["Ġ", f"x{i}"] for i in range(LONG + 1)] + [[1, True], {"k": [2]}],
        "flags": [True, None, 0.5],
    }
    text = json_bytes(big).decode()
    assert json.loads(text) == big
    assert '\n    "t0Ġ": 0,\n' in text and '\n    ["Ġ", "x0"],\n' in text
    # Braces and keys: 11 lines; the entries of the two long ones: a line each.
    assert len(text.splitlines()) == 11 + 2 * (LONG + 1) + 2
