"""Mistral's Tekken JSON files: read as mistral-common's ``Tekkenizer.from_file`` reads
them (special tokens first, ranks shifted after them, the vocabulary cut at
``default_vocab_size``), encoded exactly as ``Tekkenizer.encode``, and written back so
that mistral-common loads our file and encodes the same.

The real files come from the ``mistral-common`` package (a test extra), found through
``importlib.resources``; the small files are made here. With BYTEPAIR_SHARED set, every
shared corpus sample (and its NFD form) is compared too.
"""

from __future__ import annotations

import base64
import json
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import formats
from bytepair.formats.tekken import STANDARD_SPECIAL_TOKENS
from bytepair.patterns import TEKKEN_PATTERN

from conftest import corpus_sample, needs_shared, shared_corpus_files, texts

NO_MISTRAL = "mistral-common is not installed (a test extra: pip install '.[test]')"
FILES = ["tekken_240718.json", "tekken_240911.json"]


def tekken_doc(
    tokens: list[bytes],
    num_special=4,
    vocab_size=None,
    specials: tuple[str, ...] | None = ("<unk>", "<s>", "</s>"),
    version="v3",
):
    """A small Tekken document: the 256 bytes, then ``tokens``, in rank order
    (``specials=None``: no "special_tokens" list)."""
    vocab = [bytes([b]) for b in range(256)] + tokens
    doc = {
        "config": {
            "pattern": TEKKEN_PATTERN,
            "num_vocab_tokens": len(vocab),
            "default_vocab_size": vocab_size or num_special + len(vocab),
            "default_num_special_tokens": num_special,
            "version": version,
        },
        "vocab": [
            {"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": None}
            for i, t in enumerate(vocab)
        ],
    }
    if specials is not None:
        doc["special_tokens"] = [
            {"rank": i, "token_str": s, "is_control": True} for i, s in enumerate(specials)
        ]
    return doc


def write_doc(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# -- small files -------------------------------------------------------------------------


def test_special_tokens_take_the_first_ids_and_ranks_follow_them(tmp_path):
    path = write_doc(tmp_path / "t.json", tekken_doc([b"ab", b"abc"], specials=["<unk>", "<s>"]))
    assert formats.detect(path) == "tekken"
    tok = bytepair.load(path)
    assert tok.special_tokens == {"<unk>": 0, "<s>": 1, "<SPECIAL_2>": 2, "<SPECIAL_3>": 3}
    assert tok.encode("abcab") == [4 + 257, 4 + 256]
    assert tok.encode("<s>ab", allowed_special="all") == [1, 260]
    assert tok.decode([1, 260]) == "<s>ab"


def test_a_file_without_special_tokens_has_mistrals_twenty_then_fillers(tmp_path):
    path = write_doc(tmp_path / "t.json", tekken_doc([b"ab"], num_special=25, specials=None))
    tok = bytepair.load(path)
    assert list(tok.special_tokens)[:20] == list(STANDARD_SPECIAL_TOKENS)
    assert tok.special_tokens["</s>"] == 2 and tok.special_tokens["<SPECIAL_24>"] == 24
    assert tok.encode("ab") == [25 + 256]


def test_the_vocabulary_is_cut_at_default_vocab_size(tmp_path):
    doc = tekken_doc([b"ab", b"abc", b"abcd"], num_special=4, vocab_size=4 + 258)
    tok = bytepair.load(write_doc(tmp_path / "t.json", doc))
    assert tok.n_vocab == 262
    assert tok.encode("abcd") == [4 + 257, 4 + 100]  # "abcd" (rank 258) was cut


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["vocab"][290].update(rank=7), r"vocab\[290\] is .*; expected rank 290"),
        (lambda d: d["vocab"][256].update(token_bytes="YW!="), r"vocab\[256\]\.token_bytes"),
        (
            lambda d: d["vocab"][258].update(token_bytes="YWI="),
            r"vocab\[258\] .* b'ab' of rank 256",
        ),
        (lambda d: d["config"].update(version="v99"), r"config\.version 'v99'"),
        (lambda d: d.pop("special_tokens"), r"20 special tokens, but .* is 4"),
        (
            lambda d: d["config"].update(version="v11") or d.pop("special_tokens"),
            r"a v11 Tekken file must list",
        ),
        (lambda d: d["config"].update(default_vocab_size=10**6), r"default_vocab_size 1000000"),
        (lambda d: d["config"].pop("pattern"), r"config\.pattern is None"),
    ],
)
def test_a_faulty_file_is_refused_naming_the_file_and_the_entry(tmp_path, change, message):
    doc = tekken_doc([b"ab", b"abc"] + [bytes([97, b]) for b in range(100, 140)])
    change(doc)
    path = write_doc(tmp_path / "bad.json", doc)
    with pytest.raises(ValueError, match=message) as info:
        bytepair.load(path)
    assert str(path) in str(info.value)


def test_writing_needs_special_tokens_first_and_writes_nothing_otherwise(tmp_path):
    path = tmp_path / "cl100k.json"
    with pytest.raises(ValueError, match="the first ids 0 to 4") as info:
        bytepair.get_encoding("cl100k_base").save(path, format="tekken")
    assert str(path) in str(info.value) and not path.exists()


def test_a_written_file_reads_back_the_same(tmp_path):
    tok = bytepair.load(
        write_doc(tmp_path / "t.json", tekken_doc([b"ab", b"xyz"], specials=["<s>"]))
    )
    assert tok.model.unbuildable == [b"xyz"]  # tiktoken's rule survives the round trip
    tok.save(tmp_path / "out.json", format="tekken")
    back = bytepair.load(tmp_path / "out.json")
    assert back.special_tokens == tok.special_tokens
    assert back.encode("xyz ab", allowed_special="all") == tok.encode("xyz ab") == [261, 36, 260]


# -- mistral-common's own files --------------------------------------------------------------


@pytest.fixture(scope="module", params=FILES)
def pair(request):
    """(our tokenizer, mistral-common's Tekkenizer) for a file the package ships."""
    tekken = pytest.importorskip("mistral_common.tokens.tokenizers.tekken", reason=NO_MISTRAL)
    path = Path(str(resources.files("mistral_common") / "data" / request.param))
    return bytepair.load(path), tekken.Tekkenizer.from_file(path)


def test_mistral_files_load_with_their_special_tokens_and_size(pair):
    ours, theirs = pair
    assert ours.n_vocab == theirs.n_words == 131072
    assert ours.special_tokens["<s>"] == theirs.bos_id == 1
    assert ours.special_tokens["[INST]"] == theirs.get_special_token("[INST]")
    assert len(ours.special_tokens) == theirs.num_special_tokens == 1000
    assert ours.model.pattern == TEKKEN_PATTERN


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(texts, st.text(max_size=80)))
def test_mistral_files_encode_generated_text_as_tekkenizer(pair, text):
    ours, theirs = pair
    ids = theirs.encode(text, bos=False, eos=False)
    assert ours.encode_ordinary(text) == ids
    assert ours.decode_bytes(ids) == text.encode("utf-8", "surrogatepass")


@needs_shared
@pytest.mark.parametrize("path", shared_corpus_files(), ids=lambda p: p.name)
def test_mistral_files_encode_every_shared_corpus_sample_as_tekkenizer(pair, path):
    ours, theirs = pair
    lines = corpus_sample(path)
    want = [theirs.encode(line, bos=False, eos=False) for line in lines]
    got = ours.encode_ordinary_batch(lines)
    bad = [line for line, a, b in zip(lines, got, want) if a != b]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:3]}"


def test_mistral_common_loads_our_written_file_and_encodes_the_same(pair, tmp_path):
    ours, theirs = pair
    tekken = pytest.importorskip("mistral_common.tokens.tokenizers.tekken", reason=NO_MISTRAL)
    path = tmp_path / "tekken_ours.json"
    ours.save(path, format="tekken")
    again = tekken.Tekkenizer.from_file(path)
    assert again.n_words == theirs.n_words and again.num_special_tokens == 1000
    assert [again.id_to_piece(i) for i in range(0, 1000, 97)] == [
        theirs.id_to_piece(i) for i in range(0, 1000, 97)
    ]
    text = "Hello, wörld! 日本語 🎉 [INST] def f(x):\n    return x**2\n"
    assert again.encode(text, bos=True, eos=True) == theirs.encode(text, bos=True, eos=True)
    assert bytepair.load(path).encode_ordinary(text) == ours.encode_ordinary(text)
