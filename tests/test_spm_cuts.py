"""SentencePiece models whose text may be cut before a space (``cuts_words``: Llama
2's and Mistral's ``.model``, Metaspace ``prepend_scheme: "first"`` files) encode a
long text in parts: a file a block at a time on every core, a long text of a batch on
every thread, a shard folder's documents a block at a time. The parts give exactly
the ids sentencepiece (or ``tokenizers``) gives the whole text; the models where a cut
could change the ids (extra whitespace removed, pieces joining a word to the space
after it, UNUSED pieces, a prefix on every segment) are encoded whole.

The small models are trained here with sentencepiece; the Mistral tests need
BYTEPAIR_SHARED.
"""

from __future__ import annotations

import random
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.runners import local
from bytepair.shards import one_file
from bytepair.sources import open_sources, part_chars_for

from conftest import DATA, folder_bytes, needs_shared, shard_road, shared_corpus_files

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed")

from test_hf_sentencepiece import SHAPES, load_both, reshape, tiny_doc, tiny_model  # noqa: E402
from test_spm import MISTRAL, MISTRAL_DIR, train, with_unused_pieces  # noqa: E402

SPACE = "\u2581"
IDENTITY = dict(normalization_rule_name="identity", remove_extra_whitespaces=False)

#: name: (training options, whether the model cuts words).
VARIANTS = {
    "llama_like": (dict(IDENTITY, byte_fallback=True), True),
    "no_dummy_prefix": (dict(IDENTITY, byte_fallback=True, add_dummy_prefix=False), True),
    "user_defined": (dict(IDENTITY, user_defined_symbols=["<x>", "@@"]), True),
    "nfkc": (dict(normalization_rule_name="nmt_nfkc", byte_fallback=True), False),
    "remove_extra": (dict(IDENTITY, remove_extra_whitespaces=True, byte_fallback=True), False),
    "suffix": (dict(IDENTITY, treat_whitespace_as_suffix=True, byte_fallback=True), False),
    "user_defined_space": (dict(IDENTITY, user_defined_symbols=["a b"]), False),
    # Pieces across words ("s▁of"): a merge may join a word to the space after it.
    "spanning": (dict(IDENTITY, byte_fallback=True, split_by_whitespace=False), False),
}


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    trained = {name: train(**dict(options)) for name, (options, _) in VARIANTS.items()}
    trained["unused"] = with_unused_pieces(trained["llama_like"])
    return trained


def tokenizer(data: bytes, folder: Path, name: str):
    path = folder / f"{name}.model"
    path.write_bytes(data)
    return bytepair.load(path)


def long_text() -> str:
    """About 200 KB: real lines, runs of spaces, tabs, `▁`, spaces at line ends."""
    lines = [
        line
        for name in ("corpus.en", "german.txt", "tinystories_sample.txt")
        for line in (DATA / name).read_text(encoding="utf-8").splitlines()
    ]
    rng = random.Random(7)
    odd = ["  ", "   ", "\t", f" {SPACE}", SPACE, " \n", "\n ", "  \n\n  ", " 😀 ", "中文 字"]
    text = "\n".join(line + (rng.choice(odd) if i % 3 == 0 else "") for i, line in enumerate(lines))
    return (text + "\n") * max(1, 200_000 // len(text) + 1)


def test_which_models_cut_words(models, tmp_path):
    for name, data in models.items():
        expected = VARIANTS[name][1] if name in VARIANTS else False  # "unused": whole
        assert tokenizer(data, tmp_path, name).model.core.cuts_words is expected, name
    # The spanning variant is a fair case: it has pieces joining a word to a space.
    proto = spm.SentencePieceProcessor(model_proto=models["spanning"])
    pieces = [proto.id_to_piece(i) for i in range(proto.get_piece_size())]
    assert any(SPACE in p.strip(SPACE) for p in pieces)


def test_a_file_a_batch_and_a_count_in_parts_give_sentencepieces_ids(models, tmp_path):
    text = long_text()
    src = tmp_path / "long.txt"
    src.write_text(text, encoding="utf-8", newline="")
    for name, data in models.items():
        tok = tokenizer(data, tmp_path, name)
        want = spm.SentencePieceProcessor(model_proto=data).encode(text)
        assert tok.encode(text) == want, name
        # Texts of more than two 64 KB units are cut into parts among the threads.
        head = text[:1000]
        got = tok.encode_batch([text, head], num_threads=2)
        assert got == [want, tok.encode(head)], name
        flat, offsets = tok.encode_batch_to_numpy([head, text], num_threads=2)
        assert flat[offsets[1] : offsets[2]].tolist() == want, name
        with mock.patch.object(one_file, "BLOCK_BYTES", 4096):
            n = tok.encode_file(src, tmp_path / f"{name}.npy", format="npy", num_threads=2)
            assert np.load(tmp_path / f"{name}.npy").tolist() == want, name
            source = open_sources([str(src)]).sources[0]
            assert one_file.text_tokens(tok, source, None, 2, 2, {}, None) == n == len(want)


def test_a_model_that_cuts_words_reads_a_file_a_block_at_a_time(models, tmp_path):
    # Progress comes block by block: a cutting model's file is many blocks, a
    # whole-text model's (extra whitespace removed) one, however small the blocks.
    src = tmp_path / "long.txt"
    src.write_text(long_text(), encoding="utf-8", newline="")
    steps = {}
    for name in ("llama_like", "remove_extra"):
        tok = tokenizer(models[name], tmp_path, name)
        seen: list[int] = []
        with mock.patch.object(one_file, "BLOCK_BYTES", 16384):
            tok.encode_file(src, tmp_path / "out.bin", progress=seen.append)
        assert seen[-1] == src.stat().st_size
        steps[name] = len(set(seen))
    assert steps["llama_like"] >= src.stat().st_size // 16384 - 1
    assert steps["remove_extra"] == 1


@pytest.fixture(scope="module")
def loaded(models, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("loaded")
    return {name: tokenizer(data, folder, name) for name, data in models.items()}


def test_a_stream_is_encoded_as_it_comes_by_a_model_that_cuts_words(models, loaded):
    text = long_text()[:100_000]
    chunks = [text[i : i + 4096] for i in range(0, len(text), 4096)]
    for name, yields in (("llama_like", True), ("no_dummy_prefix", True), ("nfkc", False)):
        got = list(loaded[name].encode_chunks(chunks))
        want = spm.SentencePieceProcessor(model_proto=models[name]).encode(text)
        assert [i for ids in got for i in ids] == want, name
        assert list(loaded[name].encode_iterable(iter(chunks))) == want, name
        # Ids as text comes (a list for nearly every chunk), or all at the end.
        assert (len(got) > len(chunks) // 2) is yields, (name, len(got))


@settings(max_examples=60, deadline=None)
@given(
    text=st.lists(
        st.sampled_from([" ", "  ", "ab", "b", "é", "中", "\n", SPACE, f" {SPACE}", "</s>"]),
        min_size=20,
        max_size=300,
    ).map("".join),
    cuts=st.lists(st.integers(0, 900), min_size=1, max_size=8),
)
def test_any_stream_of_a_model_that_cuts_words_gives_the_whole_texts_ids(loaded, text, cuts):
    tok = loaded["llama_like"]
    bounds = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)])]
    for allowed in ((), "all"):
        want = tok.encode(text, allowed_special=allowed, disallowed_special=())
        got = tok.encode_iterable(chunks, allowed_special=allowed, disallowed_special=())
        assert list(got) == want


@settings(max_examples=80, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            [" ", "  ", "a", "b", "the", "é", "中", "😀", "\n", "\t", SPACE, f" {SPACE}", "."]
        ),
        max_size=120,
    ).map("".join),
    block=st.sampled_from([8, 16, 64]),
    threads=st.sampled_from([1, 2]),
)
def test_any_text_in_tiny_blocks_encodes_as_sentencepiece(
    models, tmp_path_factory, text, block, threads
):
    folder = tmp_path_factory.mktemp("tiny")
    src = folder / "in.txt"
    src.write_text(text, encoding="utf-8", newline="")
    for name in ("llama_like", "no_dummy_prefix", "user_defined"):
        tok = tokenizer(models[name], folder, name)
        want = spm.SentencePieceProcessor(model_proto=models[name]).encode(text)
        with mock.patch.object(one_file, "BLOCK_BYTES", block):
            tok.encode_file(src, folder / "out.npy", format="npy", num_threads=threads)
        assert np.load(folder / "out.npy").tolist() == want, name


def test_parts_around_control_tokens_keep_the_whole_texts_prefix(models, tmp_path):
    # A block may end at a control token: the text after it gets no dummy prefix in
    # the whole, nor in its part.
    tok = tokenizer(models["llama_like"], tmp_path, "llama_like")
    text = "".join(f"word{i} </s> next{i}  {SPACE}x</s></s>y " for i in range(300))
    src = tmp_path / "c.txt"
    src.write_text(text, encoding="utf-8")
    want = tok.encode(text, allowed_special="all")
    for block in (16, 50, 4096):
        with mock.patch.object(one_file, "BLOCK_BYTES", block):
            tok.encode_file(src, tmp_path / "c.npy", format="npy", allowed_special="all")
        assert np.load(tmp_path / "c.npy").tolist() == want, block
    many = text * 50  # a batch cuts a text of more than two 64 KB units
    whole = tok.encode(many, allowed_special="all")
    assert tok.encode_batch([many], allowed_special="all", num_threads=2) == [whole]


def test_a_shard_folder_of_long_documents_holds_sentencepieces_ids(models, tmp_path):
    # Both roads: the core's reads the file in 700-byte blocks (documents in many
    # parts), Python's encodes each document as one text (a long one cut in a batch).
    data = models["llama_like"]
    tok = tokenizer(data, tmp_path, "llama_like")
    text = long_text()  # TinyStories' stories are separated by <|endoftext|> too
    joined = text[:60_000] + "<|endoftext|>" + text[60_000:]
    src = tmp_path / "docs.txt"
    src.write_text(joined, encoding="utf-8", newline="")
    docs = [d for d in joined.split("<|endoftext|>") if d]
    assert max(map(len, docs)) > 50_000  # documents of many blocks
    want = [i for d in docs for i in spm.SentencePieceProcessor(model_proto=data).encode(d)]
    folders = {}
    for core in (True, False):
        out = tmp_path / f"out-{core}"
        corpus = open_sources(
            [str(src)], special_tokens=["<|endoftext|>"], part_chars=part_chars_for(tok)
        )
        with mock.patch.object(local, "BLOCK_BYTES", 700), shard_road(core) as used:
            bytepair.write_shards(tok, corpus, out, eot=None, format="npy", progress=False)
        assert used == [core]
        shards = sorted(p for p in out.glob("*.npy") if not p.name.endswith(".idx.npy"))
        assert np.concatenate([np.load(p) for p in shards]).tolist() == want
        folders[core] = folder_bytes(out)
    assert folders[True] == folders[False]


@pytest.mark.parametrize(
    ("shape", "cuts"),
    [
        ("metaspace-first", True),
        ("metaspace-never", True),
        ("metaspace-first-split", True),
        ("metaspace-always", False),
        ("llama2-legacy", False),
    ],
)
def test_tokenizer_json_shapes_cut_where_tokenizers_allows(small_doc, tmp_path, shape, cuts):
    ours, theirs = load_both(reshape(small_doc, *SHAPES[shape]), tmp_path)
    assert ours.model.core.cuts_words is cuts
    text = long_text()[:150_000]
    want = theirs.encode(text).ids
    assert ours.encode_batch([text], num_threads=2) == [want]
    src = tmp_path / "t.txt"
    src.write_text(text, encoding="utf-8", newline="")
    with mock.patch.object(one_file, "BLOCK_BYTES", 2048):
        ours.encode_file(src, tmp_path / "t.npy", format="npy", num_threads=2)
    assert np.load(tmp_path / "t.npy").tolist() == want


@needs_shared
@pytest.mark.parametrize("path", shared_corpus_files(), ids=lambda p: p.name)
def test_mistral_files_in_parts_give_sentencepieces_and_tokenizers_ids(tmp_path, path):
    import lzma

    text = lzma.decompress(path.read_bytes()).decode("utf-8")[:1_500_000]
    src = tmp_path / "c.txt"
    src.write_text(text, encoding="utf-8", newline="")
    model = bytepair.load(MISTRAL)
    assert model.model.core.cuts_words
    want = spm.SentencePieceProcessor(model_file=str(MISTRAL)).encode(text)
    hf_json = bytepair.load(MISTRAL_DIR / "tokenizer.json")
    hf_want = tokenizers.Tokenizer.from_file(str(MISTRAL_DIR / "tokenizer.json")).encode(text).ids
    with mock.patch.object(one_file, "BLOCK_BYTES", 65536):
        model.encode_file(src, tmp_path / "m.npy", format="npy", num_threads=2)
        hf_json.encode_file(src, tmp_path / "h.npy", format="npy", num_threads=2)
    assert np.load(tmp_path / "m.npy").tolist() == want
    assert np.load(tmp_path / "h.npy").tolist() == hf_want
    assert model.encode_batch([text], num_threads=2) == [want]


@pytest.fixture(scope="module")
def small_doc(tmp_path_factory) -> dict:
    """test_hf_sentencepiece's tiny model as a tokenizer.json, to reshape."""
    return tiny_doc(tiny_model(tmp_path_factory.mktemp("spm")))
