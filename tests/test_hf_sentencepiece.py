"""SentencePiece-family ``tokenizer.json`` files encode exactly as ``tokenizers`` does
(issue 24): Metaspace with each ``prepend_scheme`` and ``split``, Llama 2's legacy
``Prepend`` + ``Replace`` normalizer, Gemma's ``Replace`` alone with non-special added
tokens; and what bytepair writes for a ``.model`` encodes in ``tokenizers`` as the
``.model`` does in bytepair (sentencepiece's dummy prefix, BOS kept).

The small files are made here: a tiny model trained with ``sentencepiece``, written by
bytepair's writer, then reshaped. The Mistral v0.3 tests need BYTEPAIR_SHARED.
"""

from __future__ import annotations

import copy
import json
import lzma
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.formats.hf_sentencepiece import EMBEDDED

from conftest import DATA, shared_corpus_files

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed")

SHARED = os.environ.get("BYTEPAIR_SHARED")
needs_shared = pytest.mark.skipif(
    not SHARED, reason="BYTEPAIR_SHARED is not set: no path to the Mistral files and corpora"
)
MISTRAL = Path(SHARED or ".") / "vocab" / "hf" / "mistral-7b-instruct-v0.3"
#: Per corpus file, at most this many bytes of lines are compared.
CAP = 2 << 20
SPACE = "\u2581"

SPECIALS = ["<s>", "</s>", "[INST]", "<unk>"]
GEMMA_ADDED = ["ing", SPACE + "of", "k"]  # "k": made by no merge, a part of some
EXAMPLES = [
    "",
    " ",
    "  ",
    "a",
    " a",
    "  a",
    "Hello world",
    " Hello world",
    "\tx = 1",
    "    def f(x):\n        return x\n",
    "\n  x",
    "\n\nnew lines",
    "trailing  ",
    "▁x",
    " ▁x",
    "a▁b",
    "emoji 😀 and 中文 é",
    "x\u0301\u00a0y",
]
# Every special token at the start, in the middle, at the end, next to another and
# alone, with and without spaces around it.
for _s in SPECIALS:
    EXAMPLES += [
        _s,
        f"{_s}a",
        f"{_s} a",
        f" {_s}",
        f"a{_s}",
        f"a {_s} b",
        f"a{_s}b",
        f"{_s}{_s}  x",
        f"<s>{_s}\n  y</s>",
        f"  {_s}  ",
    ]


def hf_ids(tok, text: str) -> list[int]:
    return tok.encode(text).ids


def mismatches(ours, theirs, texts) -> list[str]:
    got = ours.encode_batch(texts, allowed_special="all")
    want = [e.ids for e in theirs.encode_batch(texts)]
    return [t for t, a, b in zip(texts, got, want) if a != b]


# -- a small SentencePiece-family file, built here -----------------------------------------


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("spm"))


def tiny_model(folder: Path) -> Path:
    """A tiny BPE model trained by sentencepiece: byte fallback, <s> and [INST]."""
    return train_tiny(folder, "tiny", control_symbols=["[INST]"])


def train_tiny(folder: Path, name: str, **symbols) -> Path:
    """``folder/name.model``: a 400-piece BPE with byte fallback that sentencepiece
    trains on tests/data/corpus.en, with the given control or user-defined symbols."""
    spm.SentencePieceTrainer.train(
        input=str(DATA / "corpus.en"),
        model_prefix=str(folder / name),
        model_type="bpe",
        vocab_size=400,
        byte_fallback=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        num_threads=1,
        minloglevel=2,
        **symbols,
    )
    return folder / f"{name}.model"


@pytest.fixture(scope="module")
def small_doc(small_model) -> dict:
    return tiny_doc(small_model)


def tiny_doc(model: Path) -> dict:
    """bytepair's tokenizer.json of a tiny model (add_bos), without the embedded
    .model, so the file is read as tokenizers reads it."""
    from bytepair.formats.hf_sentencepiece import tokenizer_json

    doc = tokenizer_json(bytepair.load(model, add_bos=True).model)
    del doc["model"][EMBEDDED]
    return doc


METASPACE = {"type": "Metaspace", "replacement": SPACE}
REPLACE = {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}
PREPEND = {"type": "Prepend", "prepend": SPACE}


def reshape(doc: dict, normalizer, pre_tokenizer, added=()) -> dict:
    """``doc`` with this normalizer and pre-tokenizer; added tokens unnormalized, and
    ``added`` appended as non-special added tokens (their ids from the vocab)."""
    doc = copy.deepcopy(doc)
    doc["normalizer"] = copy.deepcopy(normalizer)
    doc["pre_tokenizer"] = copy.deepcopy(pre_tokenizer)
    for entry in doc["added_tokens"]:
        entry["normalized"] = False
    for content in added:
        doc["added_tokens"].append(
            {
                "id": doc["model"]["vocab"][content],
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
            }
        )
    return doc


SHAPES = {
    "metaspace-first": (None, {**METASPACE, "prepend_scheme": "first", "split": False}),
    "metaspace-always": (None, {**METASPACE, "prepend_scheme": "always", "split": False}),
    "metaspace-never": (None, {**METASPACE, "prepend_scheme": "never", "split": False}),
    "metaspace-first-split": (None, {**METASPACE, "prepend_scheme": "first", "split": True}),
    "metaspace-always-split": (None, {**METASPACE, "prepend_scheme": "always", "split": True}),
    "metaspace-old-defaults": (None, {**METASPACE, "add_prefix_space": True}),
    "llama2-legacy": ({"type": "Sequence", "normalizers": [PREPEND, REPLACE]}, None),
    "gemma-replace": (REPLACE, None),
    # transformers' Gemma files: a Split on " " after the normalizer (a no-op).
    "gemma-split": (
        REPLACE,
        {
            "type": "Split",
            "pattern": {"String": " "},
            "behavior": "MergedWithPrevious",
            "invert": False,
        },
    ),
}


def load_both(doc: dict, tmp_path: Path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return bytepair.load(path), tokenizers.Tokenizer.from_file(str(path))


@pytest.mark.parametrize("shape", SHAPES)
def test_each_sentencepiece_shape_encodes_as_tokenizers(small_doc, tmp_path, shape):
    normalizer, pre = SHAPES[shape]
    # "ing" and "▁of" are pieces of the model: as non-special added tokens they are
    # matched in every text (the literal "▁of" too), before the model sees it.
    doc = reshape(small_doc, normalizer, pre, added=GEMMA_ADDED if "gemma" in shape else [])
    ours, theirs = load_both(doc, tmp_path)
    texts = EXAMPLES + [
        "singing of",
        " ing",
        "ingot",
        "<s>ing",
        "a▁of b",
        " of",
        "▁of",
        "k",
        " like",
        "kk ",
    ]
    assert mismatches(ours, theirs, texts) == []
    lines = (DATA / "corpus.en").read_text(encoding="utf-8").splitlines()[:300]
    assert mismatches(ours, theirs, lines) == []
    # Written back, tokenizers reads our ids out of it too, and so do we.
    ours.save(tmp_path / "again.json")
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "again.json"))
    assert mismatches(ours, again, texts + lines) == []
    assert mismatches(bytepair.load(tmp_path / "again.json"), again, texts) == []


def test_the_prefix_rules_differ_where_tokenizers_says(small_doc, tmp_path):
    # Pinned: " a" has one "▁" under Metaspace "first" and two under the legacy
    # normalizer; after a special token "always" and the legacy normalizer add one.
    first, _ = load_both(reshape(small_doc, *SHAPES["metaspace-first"]), tmp_path)
    legacy, _ = load_both(reshape(small_doc, *SHAPES["llama2-legacy"]), tmp_path)
    always, _ = load_both(reshape(small_doc, *SHAPES["metaspace-always"]), tmp_path)
    piece = first.model.piece_to_id
    bos = piece("<s>")
    assert first.encode(" a") == [bos, piece(SPACE + "a")]
    assert legacy.encode(" a") == [bos, piece(SPACE), piece(SPACE + "a")]
    assert first.encode("<s>a", allowed_special="all") == [bos, bos, piece("a")]
    assert always.encode("<s>a", allowed_special="all") == [bos, bos, piece(SPACE + "a")]
    assert legacy.encode("<s>a", allowed_special="all") == [bos, bos, piece(SPACE + "a")]
    assert (first.model.prefix, always.model.prefix, legacy.model.prefix) == (
        "first",
        "always",
        "each",
    )


TEXT = st.lists(
    st.sampled_from(
        [" ", "  ", "\n", "\t", "a", "the", "ing", "of", "like", "▁", "é", "😀", *SPECIALS]
    ),
    max_size=12,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=8), shape=st.sampled_from(sorted(SHAPES)))
def test_hypothesis_texts_encode_as_tokenizers_in_every_shape(
    small_doc, tmp_path_factory, texts, shape
):
    normalizer, pre = SHAPES[shape]
    doc = reshape(small_doc, normalizer, pre, added=GEMMA_ADDED if "gemma" in shape else [])
    ours, theirs = _cached_pair(doc, tmp_path_factory, shape)
    assert mismatches(ours, theirs, texts) == []


_PAIRS: dict = {}


def _cached_pair(doc, tmp_path_factory, key):
    if key not in _PAIRS:
        _PAIRS[key] = load_both(doc, tmp_path_factory.mktemp(key.replace("-", "_")))
    return _PAIRS[key]


@pytest.mark.parametrize("shape", ["metaspace-always-split", "gemma-replace"])
def test_a_bytepair_file_keeps_the_tokenizer_json_rules(small_doc, tmp_path, shape):
    doc = reshape(small_doc, *SHAPES[shape], added=GEMMA_ADDED if "gemma" in shape else [])
    ours, theirs = load_both(doc, tmp_path)
    ours.save(tmp_path / "t.bytepair")
    again = bytepair.load(tmp_path / "t.bytepair")
    assert again.model.hf == ours.model.hf and again.model.prefix == ours.model.prefix
    assert mismatches(again, theirs, EXAMPLES) == []
    # Pickled (to worker processes) through the same format: the rules go along.
    assert mismatches(pickle.loads(pickle.dumps(ours)), theirs, EXAMPLES) == []


def test_every_encode_path_gives_tokenizers_ids(small_doc, tmp_path):
    ours, theirs = load_both(reshape(small_doc, *SHAPES["metaspace-first"]), tmp_path)
    texts = ["  indented line", " x", "\n  y", "plain"]
    want = [e.ids for e in theirs.encode_batch(texts)]
    assert [ours.encode(t) for t in texts] == want
    assert ours.encode_batch(texts, num_threads=2) == want
    flat, offsets = ours.encode_batch_to_numpy(texts)
    assert [flat[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == want
    assert [ours.encode_to_numpy(t).tolist() for t in texts] == want
    # A stream of chunks is one text: "  indented line" from three pieces.
    assert list(ours.encode_iterable([" ", " inden", "ted line"])) == want[0]
    src, dst = tmp_path / "one.txt", tmp_path / "one.npy"
    src.write_text(texts[0], encoding="utf-8")
    ours.encode_file(src, dst, format="npy")
    assert np.load(dst).tolist() == want[0]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["pre_tokenizer"].update(replacement="_"), "Metaspace replacement"),
        (lambda d: d.update(normalizer={"type": "NFKC"}), "normalizer NFKC"),
        (
            lambda d: d.update(
                pre_tokenizer={
                    "type": "Sequence",
                    "pretokenizers": [{"type": "Digits"}, d["pre_tokenizer"]],
                }
            ),
            r"pre-tokenizer Digits\+Metaspace",
        ),
        (
            lambda d: d["added_tokens"][0].update(lstrip=True, normalized=True),
            "'<s>' has lstrip true and normalized true",
        ),
        (lambda d: d["model"].update(dropout=0.1), "model.dropout"),
    ],
)
def test_a_shape_we_cannot_encode_exactly_is_refused_by_name(small_doc, tmp_path, change, named):
    doc = reshape(small_doc, *SHAPES["metaspace-first"])
    change(doc)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=named):
        bytepair.load(path)


def legacy_normalized(small_doc: dict, which: tuple[str, ...]) -> dict:
    """The legacy shape with the added tokens ``which`` ``normalized: true`` (old Llama 2
    files): tokenizers matches them as normalized, "▁" + the token."""
    doc = reshape(small_doc, *SHAPES["llama2-legacy"])
    for entry in doc["added_tokens"]:
        entry["normalized"] = entry["content"] in which
    return doc


NORMALIZED = {"all": ("<s>", "</s>", "[INST]"), "mixed": ("<s>",)}


@pytest.mark.parametrize("which", NORMALIZED)
def test_normalized_added_tokens_under_the_legacy_normalizer_match_as_tokenizers(
    small_doc, tmp_path, which
):
    ours, theirs = load_both(legacy_normalized(small_doc, NORMALIZED[which]), tmp_path)
    texts = EXAMPLES + ["Hey</s>sir", "Hey </s>sir", "Hey  </s> sir", "▁<s>x", "a ▁<s>"]
    assert mismatches(ours, theirs, texts) == []
    piece = ours.model.piece_to_id
    bos = piece("<s>")
    # Pinned: a normalized token takes the space (or the prefix) before it; elsewhere
    # it is text.
    assert ours.encode("<s>a", allowed_special="all") == [bos, bos, piece("a")]
    assert ours.encode(" <s>", allowed_special="all") == [bos, piece(SPACE), bos]
    assert bos not in ours.encode("a<s>", allowed_special="all")[1:]
    # Saved again, tokenizers reads the same flags back.
    ours.save(tmp_path / "again.json")
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "again.json"))
    assert mismatches(ours, again, texts) == []


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=8), which=st.sampled_from(sorted(NORMALIZED)))
def test_hypothesis_texts_with_normalized_tokens_encode_as_tokenizers(
    small_doc, tmp_path_factory, texts, which
):
    doc = legacy_normalized(small_doc, NORMALIZED[which])
    ours, theirs = _cached_pair(doc, tmp_path_factory, f"normalized-{which}")
    assert mismatches(ours, theirs, texts) == []


def test_a_normalized_added_token_holding_a_space_is_refused(small_doc, tmp_path):
    doc = legacy_normalized(small_doc, ("<s>",))
    doc["added_tokens"].append(
        {"id": doc["model"]["vocab"][SPACE + "of"], "content": SPACE + "of", "normalized": True}
    )
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=r"added token '▁of' has normalized true and holds"):
        bytepair.load(path)


# -- what bytepair writes for a .model ----------------------------------------------------


@pytest.mark.parametrize("add_bos", [False, True])
def test_a_saved_model_encodes_in_tokenizers_as_the_model_does(small_model, tmp_path, add_bos):
    tok = bytepair.load(small_model, add_bos=add_bos)
    tok.save(tmp_path / "tokenizer.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert mismatches(tok, theirs, [t for t in EXAMPLES if "<unk>" not in t]) == []
    # sentencepiece's dummy prefix, kept: " a" is "▁ ▁a" in both.
    processor = spm.SentencePieceProcessor(model_file=str(small_model))
    bos = [tok.model.piece_to_id("<s>")] if add_bos else []
    assert hf_ids(theirs, " a") == bos + processor.encode(" a")
    assert hf_ids(theirs, "    def f") == bos + processor.encode("    def f")


def test_save_hf_of_a_model_loaded_with_bos_keeps_it(small_model, tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    tok = bytepair.load(small_model, add_bos=True)
    tok.save_hf(tmp_path / "folder")
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "folder"))
    assert auto("  x")["input_ids"] == tok.encode("  x")
    assert auto("  x")["input_ids"][0] == tok.model.piece_to_id("<s>")
    # transformers re-adds the special tokens from tokenizer_config.json: still the
    # same ids, special tokens anywhere (its "<unk>" role is matched, the .model's not).
    texts = [t for t in EXAMPLES if "<unk>" not in t]
    assert auto(texts)["input_ids"] == tok.encode_batch(texts, allowed_special="all")
    assert bytepair.load(tmp_path / "folder").encode("  x") == tok.encode("  x")


@settings(max_examples=100, deadline=None)
@given(text=TEXT)
def test_hypothesis_texts_of_a_saved_model_encode_as_in_tokenizers(
    small_model, tmp_path_factory, text
):
    key = "saved"
    if key not in _PAIRS:
        folder = tmp_path_factory.mktemp("saved")
        tok = bytepair.load(small_model, add_bos=True)
        tok.save(folder / "tokenizer.json")
        _PAIRS[key] = tok, tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    ours, theirs = _PAIRS[key]
    if "<unk>" in text:
        text = text.replace("<unk>", "")  # a .model's <unk> is no special token
    assert mismatches(ours, theirs, [text]) == []


def test_a_piece_of_millions_of_characters_loads_in_time_not_in_minutes(small_doc, tmp_path):
    # Checking the merges cut every piece everywhere: quadratic in a piece's length, hours
    # for this one (a damaged file had one). In a child with a time limit, so that a hang
    # fails the test instead of stalling the run.
    doc = copy.deepcopy(small_doc)
    vocab = doc["model"]["vocab"]
    added = {t["id"] for t in doc["added_tokens"]}
    vocab[SPACE + "x" * 2_000_000] = max([*vocab.values(), *added]) + 1
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    code = (
        "import sys, bytepair; tok = bytepair.load(sys.argv[1]); "
        "print(tok.decode(tok.encode(' x' * 3)))"
    )
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.rstrip("\n").endswith(" x x x")


def test_a_model_with_user_defined_pieces_is_not_saved_as_tokenizer_json(tmp_path):
    folder = tmp_path
    tok = bytepair.load(train_tiny(folder, "user", user_defined_symbols=["<x>"]))
    with pytest.raises(ValueError, match=r"user-defined piece '<x>'"):
        tok.save(folder / "tokenizer.json")
    assert not (folder / "tokenizer.json").exists()


# -- Mistral v0.3 --------------------------------------------------------------------------


def corpus_lines(path: Path) -> list[str]:
    """The lines of a shared corpus, up to CAP bytes."""
    lines, size = [], 0
    with lzma.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            lines.append(line.rstrip("\n"))
            size += len(line)
            if size >= CAP:
                break
    return lines


@pytest.fixture(scope="module")
def mistral_pair():
    path = MISTRAL / "tokenizer.json"
    return bytepair.load(path), tokenizers.Tokenizer.from_file(str(path))


@needs_shared
@pytest.mark.parametrize("path", shared_corpus_files(), ids=lambda p: p.name)
def test_mistral_tokenizer_json_matches_tokenizers_on_every_corpus_line(mistral_pair, path):
    ours, theirs = mistral_pair
    lines = corpus_lines(path)
    got = ours.encode_batch(lines, allowed_special="all", num_threads=2)
    want = [e.ids for e in theirs.encode_batch(lines)]
    bad = [line for line, a, b in zip(lines, got, want) if a != b]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:3]}"


@needs_shared
def test_mistral_examples_and_added_tokens_match_tokenizers(mistral_pair):
    ours, theirs = mistral_pair
    assert mismatches(ours, theirs, EXAMPLES) == []
    # "<unk>" is one of the file's special added tokens: matched when allowed.
    assert ours.encode("a <unk>", allowed_special="all") == hf_ids(theirs, "a <unk>")
    with pytest.raises(ValueError, match="special token"):
        ours.encode("[INST] a")


@needs_shared
@pytest.mark.parametrize("shape", [s for s in SHAPES if "gemma" not in s])
def test_mistral_in_each_shape_matches_tokenizers(tmp_path, shape):
    doc = json.loads((MISTRAL / "tokenizer.json").read_text(encoding="utf-8"))
    normalizer, pre = SHAPES[shape]
    ours, theirs = load_both(reshape(doc, normalizer, pre), tmp_path)
    lines = corpus_lines(Path(SHARED) / "corpora" / "code" / "code_python.txt.xz")[:2000]
    assert mismatches(ours, theirs, EXAMPLES + lines) == []


def test_a_bpe_trained_by_tokenizers_with_metaspace_is_refused_naming_a_piece(tmp_path):
    # Its merges are not every cut of every piece: tokenizers merges by rank what
    # sentencepiece would merge by score, so the ids would differ (not loaded silently).
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>"])
    tok.train([str(DATA / "corpus.en")], trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match=r"which is not a merge \(not a converted SentencePiece"):
        bytepair.load(tmp_path / "tokenizer.json")


@pytest.mark.parametrize(
    ("change", "named"),
    [
        # A merge listed twice: tokenizers ranks it by its last place, bytepair its first.
        (lambda m: m["merges"].append(m["merges"][5]), "are not one after"),
        (lambda m: m.update(byte_fallback=False, fuse_unk=False), "fuse_unk false"),
    ],
)
def test_merges_or_unknowns_tokenizers_treats_otherwise_are_refused(
    small_doc, tmp_path, change, named
):
    doc = reshape(small_doc, *SHAPES["metaspace-first"])
    change(doc["model"])
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=named):
        bytepair.load(path)
