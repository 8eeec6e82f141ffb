"""Byte-level BPE tokenizer.json files whose normalizer rewrites the text — Replace (a
string or a regex), Prepend, Strip, in any order with NFC and Lowercase in a Sequence —
encode exactly as ``tokenizers`` does. ``tokenizers`` normalizes each text between
added tokens on its own, so Prepend and Strip act at every added token: the files
encode on every path (encode_file, streaming) as whole, cut only at special tokens.
The files are built here from GPT-2's tokenizer.json."""

from __future__ import annotations

import copy
import json
import pickle
import random
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.formats.hf import added_token
from bytepair.normalizers import Prepend, Replace, Strip
from bytepair.shards import one_file
from bytepair.sources import part_chars_for

from conftest import (
    assert_every_path_encodes_as,
    corpus_sample,
    needs_shared,
    shared_corpus_files,
)

tokenizers = pytest.importorskip("tokenizers")

GPT2_JSON = Path(__file__).parent / "data" / "gpt2" / "tokenizer.json"

#: Added tokens after GPT-2's 50257 ids: (content, special).
ADDED = [("<tool_call>", False), ("<|im_end|>", True)]


def replace(pattern: str, content: str, regex: bool = False) -> dict:
    return {
        "type": "Replace",
        "pattern": {"Regex" if regex else "String": pattern},
        "content": content,
    }


def strip(left: bool, right: bool) -> dict:
    return {"type": "Strip", "strip_left": left, "strip_right": right}


def sequence(*steps: dict) -> dict:
    return {"type": "Sequence", "normalizers": list(steps)}


PREPEND = {"type": "Prepend", "prepend": "▁"}

NORMALIZERS = {
    "replace_multi_char": replace("ab", "XYZ"),
    "replace_overlapping": replace("aa", "b"),
    "replace_with_nothing": replace(" ", ""),
    "replace_regex": replace(r"\s{2,}", " ", regex=True),
    "replace_regex_unicode": replace(r"[\p{P}\d]+", "#", regex=True),
    "prepend": PREPEND,
    "strip_left": strip(True, False),
    "strip_right": strip(False, True),
    "strip_both": strip(True, True),
    "llama2_like": sequence(PREPEND, replace(" ", "▁")),
    "strip_nfc_prepend_lowercase": sequence(
        strip(True, True),
        {"type": "NFC"},
        {"type": "Prepend", "prepend": " "},
        {"type": "Lowercase"},
    ),
    "lowercase_replace_strip": sequence(
        {"type": "Lowercase"}, replace("hello", "  bye  "), strip(False, True), {"type": "NFKC"}
    ),
    "replace_then_prepend": sequence(replace("a", ""), PREPEND),
}

#: The steps bytepair reads for some of them.
STEPS = {
    "replace_overlapping": (Replace("aa", "b"),),
    "replace_regex": (Replace(r"\s{2,}", " ", True),),
    "prepend": (Prepend("▁"),),
    "strip_left": (Strip(True, False),),
    "strip_nfc_prepend_lowercase": (Strip(True, True), "NFC", Prepend(" "), "Lowercase"),
}

TRICKY = "aab ab  Hello HELLO \u3000\u00a0\u2003\u0085\u200b\t\n\r e\u0301 ﬁ İ ,.;!? 12 ▁"
ALPHABET = st.sampled_from([*TRICKY, "<tool_call>", "<|im_end|>", "aa", "ab"]) | st.characters(
    codec="utf-8"
)
TEXT = st.lists(ALPHABET, max_size=40).map("".join)
EXAMPLES = [
    "",
    " ",
    "   \n\t ",
    "\u3000",
    "aaa aaaa ab aab",
    "  Hello  World  ",
    "<|im_end|>",
    "<|im_end|><|im_end|>",
    " <|im_end|> ",
    "<|im_end|>x",
    "x<|im_end|>",
    "a<tool_call>b",
    "<tool_call> aa <|im_end|>  <tool_call>",
    "  <tool_call>  ",
    "Ünïcödé  \n\n ﬁ\u0301x  HELLO, world!!  42  ",
]


def write_json(tmp_path: Path, normalizer: dict | None, name: str = "tokenizer.json") -> Path:
    """GPT-2's tokenizer.json with `normalizer` and the ADDED tokens (matched on the
    raw text)."""
    doc = json.loads(GPT2_JSON.read_text(encoding="utf-8"))
    doc["added_tokens"][0]["normalized"] = False
    for n, (content, special) in enumerate(ADDED):
        doc["added_tokens"].append(added_token(50257 + n, content, special))
    doc["normalizer"] = copy.deepcopy(normalizer)
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(ours, tokenizers', path) for each normalizer."""
    tmp = tmp_path_factory.mktemp("rewriting_normalizers")
    out = {}
    for name, normalizer in NORMALIZERS.items():
        path = write_json(tmp, normalizer, f"{name}.json")
        out[name] = (bytepair.load(path), tokenizers.Tokenizer.from_file(str(path)), path)
    return out


def hf_ids(hf, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", list(NORMALIZERS))
def test_each_normalizer_encodes_as_tokenizers_does(pairs, name):
    tok, hf, _ = pairs[name]
    for text in EXAMPLES:
        assert tok.encode(text, allowed_special="all") == hf_ids(hf, text), text

    @settings(max_examples=150, deadline=None, database=None)
    @given(TEXT)
    def check(text):
        assert tok.encode(text, allowed_special="all") == hf_ids(hf, text)

    check()


@pytest.mark.parametrize("name", list(STEPS))
def test_the_file_reads_as_these_steps(pairs, name):
    assert pairs[name][0].model.normalizer == STEPS[name]


def test_the_steps_change_the_ids_as_tokenizers_documents_them(pairs):
    def ids(name, text):
        return pairs[name][0].encode(text, allowed_special="all")

    gpt2 = bytepair.load(GPT2_JSON)
    # "aa" in "aaa" is the first two: "ba".
    assert ids("replace_overlapping", "aaa") == gpt2.encode("ba") == [7012]
    assert ids("replace_with_nothing", "a b c") == gpt2.encode("abc")
    assert ids("replace_regex", "a    b") == gpt2.encode("a b")
    # Prepend and Strip act on each text between added tokens: "▁x" + token + "▁y".
    assert ids("prepend", "x<|im_end|>y") == [*gpt2.encode("▁x"), 50258, *gpt2.encode("▁y")]
    assert ids("prepend", "<|im_end|>") == [50258]  # nothing to prepend to
    assert ids("strip_both", " x <tool_call> y ") == [87, 50257, 88]
    assert ids("strip_left", " x <tool_call> y ") == [*gpt2.encode("x "), 50257, *gpt2.encode("y ")]
    assert ids("strip_right", " x ") == gpt2.encode(" x")
    # Whitespace as char::is_whitespace: U+3000 and U+0085 yes, U+200B no.
    assert ids("strip_both", "\u3000\u0085x\u200b") == gpt2.encode("x\u200b")
    # A text Replace empties gets nothing prepended.
    assert ids("replace_then_prepend", "aa<|im_end|>ab") == [50258, *gpt2.encode("▁b")]
    assert ids("strip_both", "   ") == ids("strip_both", "") == []


@pytest.mark.parametrize("name", ["prepend", "strip_both", "llama2_like", "replace_regex"])
def test_every_path_gives_the_ids_of_tokenizers(pairs, tmp_path, name):
    """Batches, numpy, encode_file in 16-byte blocks and streaming in chunks: the ids of
    the whole text, though Prepend and Strip see only where texts between added tokens
    start and end."""
    tok, hf, _ = pairs[name]
    rng = random.Random(11)

    @settings(
        max_examples=30,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(TEXT, min_size=1, max_size=20))
    def check(parts):
        text = "".join(p + rng.choice([" ", "\n", " a", "x ", "<tool_call>"]) for p in parts)
        text = text.replace("<|im_end|>", "")  # the default policy refuses special tokens
        assert_every_path_encodes_as(tok, text, lambda t: hf_ids(hf, t), tmp_path, rng)

    check()


@pytest.mark.parametrize("name", ["prepend", "strip_both", "replace_with_nothing"])
def test_a_long_file_is_cut_only_at_special_tokens(pairs, tmp_path, name):
    """Text with many newline and space cuts and few special tokens: encode_file in
    small blocks and streaming give what tokenizers gives for the whole, where cutting
    at the text cuts would add a "▁" (Prepend), drop a space (Strip) or keep one
    (Replace " " -> "")."""
    tok, hf, _ = pairs[name]
    line = "Hello world.\nNext line has words in it\n"
    text = line * 300 + "<|im_end|>" + line * 300 + "<tool_call> end "
    want = hf_ids(hf, text)
    assert tok.encode(text, allowed_special="all") == want
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    with mock.patch.object(one_file, "BLOCK_BYTES", 1000):
        n = tok.encode_file(src, tmp_path / "out.npy", num_threads=2, allowed_special="all")
    assert n == len(want)
    assert np.load(tmp_path / "out.npy").tolist() == want
    chunks = [text[i : i + 97] for i in range(0, len(text), 97)]
    assert list(tok.encode_iterable(chunks, allowed_special="all")) == want
    # Long documents are not cut into parts either (shards, count).
    assert part_chars_for(tok) is None
    assert part_chars_for(bytepair.load(write_json(tmp_path, {"type": "NFC"}))) is not None


@pytest.mark.parametrize("name", ["llama2_like", "strip_nfc_prepend_lowercase", "replace_regex"])
def test_normalizer_survives_bytepair_json_save_hf_and_pickle(pairs, tmp_path, name):
    tok, hf, _ = pairs[name]
    text = "".join(EXAMPLES[4:])
    want = hf_ids(hf, text)
    tok.save(tmp_path / "t.bytepair")
    raw = json.loads((tmp_path / "t.bytepair").read_text(encoding="utf-8"))
    nodes = NORMALIZERS[name].get("normalizers", [NORMALIZERS[name]])
    assert raw["normalizer"] == [n["type"] if len(n) == 1 else n for n in nodes]
    tok.save(tmp_path / "t.json")
    tok.save_hf(tmp_path / "folder")
    for back in (
        bytepair.load(tmp_path / "t.bytepair"),
        bytepair.load(tmp_path / "t.json"),
        bytepair.load(tmp_path / "folder"),
        pickle.loads(pickle.dumps(tok)),
        tok.with_special_tokens(["<|x|>"]),
    ):
        assert back.model.normalizer == tok.model.normalizer
        assert back.encode(text, allowed_special="all") == want
    # Our exports load in tokenizers with the same normalizer and give the same ids.
    for exported in (tmp_path / "t.json", tmp_path / "folder" / "tokenizer.json"):
        doc = json.loads(exported.read_text(encoding="utf-8"))
        assert doc["normalizer"] == NORMALIZERS[name]
        assert hf_ids(tokenizers.Tokenizer.from_file(str(exported)), text) == want


def test_the_model_takes_steps_directly(tmp_path):
    gpt2 = bytepair.load(GPT2_JSON)
    model = bytepair.models.BPE(
        {i: t for i, t in gpt2.model.vocab.items() if i != 50256},
        gpt2.model.merges,
        normalizer=["NFC", Replace("a+", "b", regex=True), Prepend("▁"), Strip(False, True)],
    )
    tok = bytepair.Tokenizer.from_model(model)
    assert tok.encode("e\u0301aaa x ") == gpt2.encode("▁éb x")  # "aaa" is one match
    assert "normalizer=NFC+Replace(regex 'a+' -> 'b')+Prepend('▁')+Strip(right)" in repr(tok)
    with pytest.raises(ValueError, match=r"normalizer step #0 is Prepend\(prepend=1\)"):
        bytepair.models.BPE({i: bytes([i]) for i in range(256)}, [], normalizer=[Prepend(1)])


@pytest.mark.parametrize(
    ("normalizer", "message"),
    [
        (
            replace(r"\w+", "x", regex=True),
            r"normalizer Replace pattern '\\\\w\+' uses \\w, which matches other characters",
        ),
        (
            replace(r"^ +", "", regex=True),
            "uses \\^, which Oniguruma matches at the start of every line",
        ),
        (
            replace(r"x$", "", regex=True),
            "uses \\$, which Oniguruma matches at the end of every line",
        ),
        (replace(r"(?m)a.b", "", regex=True), "uses the flag m, s or x"),
        (replace(r"\h", "", regex=True), "uses \\\\h, which Oniguruma reads otherwise"),
        (replace(r"\d{1,3}+", "", regex=True), r"uses \{n,m\}\+"),
        (replace("", "x"), 'normalizer Replace pattern "" matches the empty string: not supported'),
        (replace("x*", "y", regex=True), r'pattern "x\*" matches the empty string: not supported'),
        (replace("(", "y", regex=True), r'normalizer Replace: invalid regex "\("'),
        ({"type": "Replace", "pattern": {"Glob": "a"}, "content": "b"}, "normalizer Replace has"),
        ({"type": "Strip", "strip_left": True}, "normalizer Strip has settings bytepair cannot"),
        ({"type": "StripAccents"}, "normalizer StripAccents changes the text before encoding"),
        (sequence({"type": "NFC"}, {"type": "BertNormalizer"}), "normalizer BertNormalizer"),
    ],
)
def test_normalizers_we_cannot_reproduce_are_refused_naming_file_and_component(
    tmp_path, normalizer, message
):
    path = write_json(tmp_path, normalizer)
    with pytest.raises(ValueError, match=message) as e:
        bytepair.load(path)
    assert str(e.value).startswith(f"{path}: ")


def test_an_empty_match_of_a_lookahead_fails_the_encode_naming_it(tmp_path):
    tok = bytepair.load(write_json(tmp_path, replace("(?=b)", "x", regex=True)))
    assert tok.encode("aaa") == bytepair.load(GPT2_JSON).encode("aaa") == [46071]
    with pytest.raises(ValueError, match=r'regex "\(\?=b\)" matched the empty string at byte 1'):
        tok.encode("ab")


def test_normalized_added_tokens_are_refused_under_prepend(tmp_path):
    path = write_json(tmp_path, sequence({"type": "NFC"}, PREPEND))
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["added_tokens"].append(added_token(50300, "    ", special=False) | {"normalized": True})
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"added token '    ' has normalized true with normalizer NFC\+Prepend"
    ):
        bytepair.load(path)


def test_a_bytepair_file_with_a_bad_step_is_refused_naming_it(tmp_path):
    path = tmp_path / "bad.bytepair"
    path.write_text(
        '{"format": "bytepair", "version": 1, "pattern": null, "special_tokens": {},'
        ' "normalizer": ["NFC", {"type": "Prepend", "prepend": 3}], "merges": []}',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=f'{path}: "normalizer": normalizer Prepend has'):
        bytepair.load(path)


@needs_shared
@pytest.mark.parametrize("path", shared_corpus_files(), ids=lambda p: p.name)
def test_shared_corpus_lines_encode_as_tokenizers(pairs, path):
    """Every shared corpus, sampled lines one call each and the sample as one text:
    0 mismatches with tokenizers under the Llama 2-like Prepend+Replace, Strip with NFC,
    and a Replace regex."""
    lines = corpus_sample(path, lines=150)
    for name in ["llama2_like", "strip_nfc_prepend_lowercase", "replace_regex"]:
        tok, hf, _ = pairs[name]
        want = [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
        got = tok.encode_batch(lines, num_threads=2, allowed_special="all")
        bad = [line for line, a, b in zip(lines, got, want) if a != b]
        assert not bad, (name, len(bad), bad[:3])
        whole = "\n".join(lines)
        assert tok.encode(whole, allowed_special="all") == hf_ids(hf, whole), name
