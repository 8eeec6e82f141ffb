"""Byte-level BPE tokenizer.json files with a Unicode normalizer (Qwen2/2.5/3 and
GPT-NeoX use NFC; others NFKC, NFD, NFKD, Lowercase or a Sequence of them) and with
non-special added tokens (Qwen2.5's ``<tool_call>``) encode exactly as ``tokenizers``
does, on every path: encode, batches, numpy, encode_file (cut into blocks) and
streaming. The files are built here from GPT-2's tokenizer.json."""

from __future__ import annotations

import copy
import json
import pickle
import random
import unicodedata
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.formats.hf import added_token, to_oniguruma
from bytepair.patterns import MODEL_PATTERNS
from bytepair.shards import one_file

from conftest import (
    assert_every_path_encodes_as,
    corpus_sample,
    needs_shared,
    shared_corpus_files,
)

tokenizers = pytest.importorskip("tokenizers")

GPT2_JSON = Path(__file__).parent / "data" / "gpt2" / "tokenizer.json"

#: Added tokens: (content, special). The ids follow GPT-2's 50257.
ADDED = [("<tool_call>", False), ("</tool_call>", False), ("<|im_end|>", True)]

NORMALIZERS = {
    "NFC": {"type": "NFC"},
    "NFKC": {"type": "NFKC"},
    "NFD": {"type": "NFD"},
    "NFKD": {"type": "NFKD"},
    "Lowercase": {"type": "Lowercase"},
    "NFKC+Lowercase": {
        "type": "Sequence",
        "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}],
    },
}

#: Characters normalizers change: composed and combining forms, compatibility
#: characters (ligatures, circled and fullwidth forms), Turkish İ and final sigma,
#: Hangul, and the ASCII neighbours of the safe cuts.
TRICKY = (
    "e\u0301\u00e9A\u030a\u00c5\u0327\u0323\u0307\ufb01\ufb02\u2460\u2461\uff21\uff42"
    "\uff10\u00bd\u2126\u212b\u0130I\u0131\u03a3\u03c3\u03c2\u1e9e\u00df\uac00\u1100"
    "\u1161\u11a8\u0915\u093c\u0958\u3000\u00a0\u2003"
)
ALPHABET = st.sampled_from(list(TRICKY + "aZ q  \n\n\t.,'!9<>_/lt")) | st.characters(codec="utf-8")
TEXT = st.text(ALPHABET, max_size=60) | st.text(ALPHABET, max_size=60).map(
    lambda t: unicodedata.normalize("NFD", t)
)
EXAMPLES = [
    "",
    "ﬁne ① Ｈｅｌｌｏ e\u0301te\u0301 İstanbul ΣΑΣ",
    "Ünïcödé  \n\n ﬁ\u0301x",
    unicodedata.normalize("NFD", "Qwen déjà vu: ça coûte 10 €.\nÅngström"),
    'a<tool_call>{"x": 1}</tool_call> b<|im_end|>\n',
    "<tool_call" + "\u0301" + ">",
]


def write_json(
    tmp_path: Path,
    normalizer: dict | None,
    pattern: str | None = None,
    added=ADDED,
    name: str = "tokenizer.json",
) -> Path:
    """GPT-2's tokenizer.json with `normalizer`, the `added` tokens (matched on the
    raw text) and, with `pattern`, a Split pre-tokenizer of it before ByteLevel."""
    doc = json.loads(GPT2_JSON.read_text(encoding="utf-8"))
    doc["added_tokens"][0]["normalized"] = False
    for n, (content, special) in enumerate(added):
        doc["added_tokens"].append(added_token(50257 + n, content, special))
    doc["normalizer"] = copy.deepcopy(normalizer)
    if pattern is not None:
        split = {
            "type": "Split",
            "pattern": {"Regex": to_oniguruma(pattern)},
            "behavior": "Isolated",
            "invert": False,
        }
        byte_level = {**doc["pre_tokenizer"], "use_regex": False}
        doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, byte_level]}
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(ours, tokenizers') for each normalizer, with GPT-2's regex and Qwen2's Split."""
    tmp = tmp_path_factory.mktemp("normalizers")
    out = {}
    for name, normalizer in NORMALIZERS.items():
        for pattern in ("gpt2", "qwen2"):
            regex = MODEL_PATTERNS["qwen2"] if pattern == "qwen2" else None
            path = write_json(tmp, normalizer, regex, name=f"{name}-{pattern}.json")
            out[name, pattern] = (bytepair.load(path), tokenizers.Tokenizer.from_file(str(path)))
    return out


def hf_ids(hf, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("pattern", ["gpt2", "qwen2"])
@pytest.mark.parametrize("name", list(NORMALIZERS))
def test_normalized_files_encode_as_tokenizers_does(pairs, name, pattern):
    tok, hf = pairs[name, pattern]
    assert tok.model.normalizer == tuple(
        step["type"] for step in NORMALIZERS[name].get("normalizers", [NORMALIZERS[name]])
    )
    for text in EXAMPLES:
        assert tok.encode(text, allowed_special="all") == hf_ids(hf, text), text

    @settings(max_examples=150, deadline=None, database=None)
    @given(TEXT)
    def check(text):
        assert tok.encode(text, allowed_special="all") == hf_ids(hf, text)

    check()


def test_a_normalizer_changes_the_ids_as_tokenizers_does(pairs):
    # The same text, three ids: NFKC folds the ligature, NFD splits the accent.
    plain = bytepair.load(GPT2_JSON)
    text = "\ufb01 \u00e9"
    assert plain.encode(text) == [171, 105, 223, 38251]  # the ligature's bytes, " é"
    assert pairs["NFKC", "gpt2"][0].encode(text) == [12463, 38251]  # "fi", " é"
    assert pairs["NFD", "gpt2"][0].encode(text) == [171, 105, 223, 304, 136, 223]
    assert pairs["Lowercase", "gpt2"][0].encode("HeLLo İ") == [31373, 1312, 136, 229]


@pytest.mark.parametrize("name", ["NFD", "NFKC+Lowercase", "NFC"])
def test_every_path_gives_the_ids_of_encode(pairs, tmp_path, name):
    """Batches, numpy, encode_file in small blocks and streaming in small chunks cut
    the text at safe cuts: exact under normalization, NFD-decomposed text included."""
    tok, hf = pairs[name, "gpt2"]
    rng = random.Random(7)

    @settings(
        max_examples=40,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(TEXT, min_size=1, max_size=30))
    def check(parts):
        text = "".join(p + rng.choice([" ", "\n", " a", "x ", "b\nc"]) for p in parts)
        assert_every_path_encodes_as(tok, text, lambda t: hf_ids(hf, t), tmp_path, rng)

    check()


def test_long_text_in_blocks_equals_tokenizers(pairs, tmp_path):
    """A text of several safe-cut blocks (shared corpora style) through encode_file and
    a long streamed text: the same ids as tokenizers gives the whole."""
    tok, hf = pairs["NFD", "gpt2"]
    line = "Ça coûte ﬁve ① euros, DÉJÀ VU\n" + unicodedata.normalize("NFD", "Ångström été ")
    text = (line * 400) + "end"
    want = hf_ids(hf, text)
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    with mock.patch.object(one_file, "BLOCK_BYTES", 1000):
        assert tok.encode_file(src, tmp_path / "out.npy", num_threads=2) == len(want)
    assert np.load(tmp_path / "out.npy").tolist() == want
    chunks = [text[i : i + 97] for i in range(0, len(text), 97)]
    assert list(tok.encode_iterable(chunks)) == want


def test_non_special_added_tokens_are_matched_whatever_is_allowed(pairs):
    tok, hf = pairs["NFC", "qwen2"]
    text = "x<tool_call>y</tool_call>"
    want = hf_ids(hf, text)
    assert want == [87, 50257, 88, 50258]
    # Matched under the default policy, which never raises for them ...
    assert tok.encode(text) == want
    assert tok.encode(text, allowed_special=set()) == want
    assert tok.encode(text, allowed_special={"<|im_end|>"}) == want
    assert tok.encode(text, disallowed_special=()) == want
    assert tok.encode_batch([text]) == [want]
    assert list(tok.encode_iterable([text[:4], text[4:]])) == want
    # ... while the special ones still raise unless allowed.
    with pytest.raises(ValueError, match="<|im_end|>"):
        tok.encode("a<|im_end|>")
    assert tok.encode("a<|im_end|>", allowed_special="all") == [64, 50259]
    assert tok.special_tokens == {"<|endoftext|>": 50256, "<|im_end|>": 50259}
    assert tok.model.added_tokens == {"<tool_call>": 50257, "</tool_call>": 50258}
    assert tok.decode(want) == text


def test_added_tokens_are_matched_on_the_raw_text(pairs):
    tok, hf = pairs["NFKC", "gpt2"]
    # Fullwidth brackets normalize to "<tool_call>" only after matching: plain text.
    text = "\uff1ctool_call\uff1e<tool_call>"
    assert tok.encode(text) == hf_ids(hf, text)
    assert tok.encode(text)[-1] == 50257
    assert 50257 not in tok.encode(text)[:-1]


def test_decode_gives_the_normalized_text(pairs):
    tok, hf = pairs["NFKC", "qwen2"]
    ids = tok.encode("ﬁne ①")
    assert tok.decode(ids) == "fine 1" == hf.decode(ids)


@pytest.mark.parametrize("name", list(NORMALIZERS))
def test_normalizer_and_added_tokens_survive_bytepair_json_and_pickle(pairs, tmp_path, name):
    tok, hf = pairs[name, "qwen2"]
    text = EXAMPLES[1] + EXAMPLES[3] + EXAMPLES[4]
    want = hf_ids(hf, text)
    tok.save(tmp_path / "t.bytepair")
    raw = json.loads((tmp_path / "t.bytepair").read_text(encoding="utf-8"))
    assert raw["normalizer"] == list(tok.model.normalizer)
    assert raw["added_tokens"] == {"<tool_call>": 50257, "</tool_call>": 50258}
    tok.save(tmp_path / "t.json")
    for back in (
        bytepair.load(tmp_path / "t.bytepair"),
        bytepair.load(tmp_path / "t.json"),
        pickle.loads(pickle.dumps(tok)),
    ):
        assert back.model.normalizer == tok.model.normalizer
        assert back.model.added_tokens == tok.model.added_tokens
        assert back.special_tokens == tok.special_tokens
        assert back.encode(text, allowed_special="all") == want
    more = tok.with_special_tokens(["<|x|>"])
    assert (more.model.normalizer, more.model.added_tokens) == (
        tok.model.normalizer,
        tok.model.added_tokens,
    )
    assert more.encode(text + "<|x|>", allowed_special="all") == [*want, 50260]
    # Our export loads in tokenizers and gives the same ids.
    exported = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    assert hf_ids(exported, text) == want


def test_a_bytepair_file_without_the_new_fields_loads_as_before(tmp_path):
    path = tmp_path / "old.bytepair"
    path.write_text(
        '{"format": "bytepair", "version": 1, "pattern": null, "special_tokens": {},'
        ' "merges": ["a b"]}',
        encoding="utf-8",
    )
    tok = bytepair.load(path)
    assert (tok.model.normalizer, tok.model.added_tokens) == ((), {})
    assert tok.encode("abA") == [256, 65]


@pytest.mark.parametrize(
    ("normalizer", "named"),
    [
        ({"type": "StripAccents"}, "StripAccents"),
        ({"type": "BertNormalizer", "lowercase": True}, "BertNormalizer"),
        ({"type": "Precompiled", "precompiled_charsmap": ""}, "Precompiled"),
        (
            {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nmt"}]},
            "Nmt",
        ),
    ],
)
def test_other_normalizers_are_refused_by_name(tmp_path, normalizer, named):
    path = write_json(tmp_path, normalizer)
    with pytest.raises(ValueError, match=f"normalizer {named} changes the text") as e:
        bytepair.load(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("lstrip", "has lstrip true and normalized true: not supported"),
        ("rstrip", "has rstrip true and normalized true: not supported"),
        ("single_word", "has single_word true and normalized true: not supported"),
        ("normalized", "has normalized true with normalizer NFC: not supported"),
    ],
)
def test_added_tokens_we_cannot_match_exactly_are_refused(tmp_path, field, message):
    path = write_json(tmp_path, {"type": "NFC"})
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["added_tokens"][1].update({field: True, "normalized": True})
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=f"added token '<tool_call>' {message}"):
        bytepair.load(path)


def test_the_core_refuses_an_unknown_normalizer_by_name():
    with pytest.raises(ValueError, match='normalizer "NFX" is not supported'):
        bytepair.models.BPE({i: bytes([i]) for i in range(256)}, [], normalizer=["NFX"])


@needs_shared
@pytest.mark.parametrize("path", shared_corpus_files(), ids=lambda p: p.name)
def test_shared_corpus_lines_encode_as_tokenizers_under_each_normalizer(pairs, path):
    """Every shared corpus (English, code, each multilingual file), sampled lines and
    the same lines NFD-decomposed, one call per line and the sample as one text:
    0 mismatches with tokenizers for Qwen2's shape (NFC, its Split) and NFKC, NFD and
    Lowercase."""
    lines = corpus_sample(path, lines=150)
    for key in [("NFC", "qwen2"), ("NFKC", "gpt2"), ("NFD", "qwen2"), ("Lowercase", "gpt2")]:
        tok, hf = pairs[key]
        want = [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
        got = tok.encode_batch(lines, num_threads=2, allowed_special="all")
        bad = [line for line, a, b in zip(lines, got, want) if a != b]
        assert not bad, (key, len(bad), bad[:3])
        whole = "\n".join(lines)
        assert tok.encode(whole, allowed_special="all") == hf_ids(hf, whole), key


# -- GPT-NeoX / Pythia: indentation tokens matched in the normalized text ---------------

#: NeoX's added tokens past its vocabulary: runs of spaces, ``normalized: true``.
NEOX_RUNS = [" " * n for n in range(24, 1, -1)] + ["\t\t", "\t\t\t\t"]


def neox_json(tmp_path: Path, normalizer: dict, extra: list[dict] = ()) -> Path:
    doc = json.loads(GPT2_JSON.read_text(encoding="utf-8"))
    doc["added_tokens"][0]["normalized"] = False
    for n, run in enumerate(NEOX_RUNS):
        doc["added_tokens"].append(
            added_token(50257 + n, run, special=False) | {"normalized": True}
        )
    doc["added_tokens"] += list(extra)
    doc["normalizer"] = normalizer
    path = tmp_path / "neox.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("normalizer", ["NFC", "NFD", "Lowercase"])
def test_neox_indentation_tokens_matched_in_normalized_text_encode_as_tokenizers(
    tmp_path, normalizer
):
    path = neox_json(tmp_path, {"type": normalizer})
    tok, hf = bytepair.load(path), tokenizers.Tokenizer.from_file(str(path))
    code = "def f(x):\n" + "".join(f"{' ' * k}x{k} = 'É\u0301'\n" for k in range(0, 30, 3))
    texts = [code, "a" + " " * 50 + "b\t\t\tc\t\t\t\t\td", " \u0301  \u3000  e\u0301"]
    for text in texts:
        assert tok.encode(text, allowed_special="all") == hf_ids(hf, text), text
    assert 50257 + NEOX_RUNS.index(" " * 8) in tok.encode(" " * 8 + "x")

    @settings(max_examples=150, deadline=None, database=None)
    @given(st.text(st.sampled_from([" ", " ", " ", "\t", "\n", "x", "É", "\u0301", "\u3000"])))
    def check(text):
        assert tok.encode(text, allowed_special="all") == hf_ids(hf, text)

    check()
    # Written back with normalized false (the same matches), it loads in tokenizers
    # with the same ids.
    tok.save(tmp_path / "back.json")
    back = tokenizers.Tokenizer.from_file(str(tmp_path / "back.json"))
    assert hf_ids(back, code) == hf_ids(hf, code)


@pytest.mark.parametrize(
    ("normalizer", "extra"),
    [
        ({"type": "NFKC"}, []),  # U+3000 becomes a space in the normalized text
        (
            {"type": "NFC"},
            [  # a raw-matched token with spaces, found before the runs in tokenizers
                {"id": 50300, "content": "a  b", "special": True, "normalized": False},
            ],
        ),
    ],
    ids=["NFKC", "raw token with spaces"],
)
def test_normalized_added_tokens_found_elsewhere_in_normalized_text_are_refused(
    tmp_path, normalizer, extra
):
    with pytest.raises(ValueError, match=r"added token '\s+' has normalized true with normalizer"):
        bytepair.load(neox_json(tmp_path, normalizer, extra))


@pytest.mark.parametrize("name", ["NFC", "NFKC", "NFD", "NFKD", "Lowercase"])
def test_every_code_point_normalizes_as_tokenizers_does(pairs, name):
    # tokenizers normalizes with Unicode 9.0's tables: a character assigned later (U+1F16C,
    # U+1CCD6...) is left as it is, and so is it here (Lowercase: Rust's own tables, in
    # both). Each code point alone, and
    # between a letter and a combining mark (its combining class, its compositions).
    tok, hf = pairs[name, "gpt2"]
    # Planes 0-3 up to the last CJK extension, and the tags and variation selectors:
    # every character ever assigned (planes 4-13 hold none; 15-16 are private use).
    codes = [*range(0x80, 0xD800), *range(0xE000, 0x32400), *range(0xE0000, 0xE0200)]
    points = [chr(c) for c in codes]
    for k in range(0, len(points), 1 << 16):
        chunk = points[k : k + (1 << 16)]
        for text in ("\n".join(chunk), "\n".join(f"a{c}\u0316" for c in chunk)):
            assert tok.encode(text) == hf_ids(hf, text), (name, hex(ord(chunk[0])))
