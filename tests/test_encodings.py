"""The bundled OpenAI encodings against tiktoken itself.

tiktoken is pointed at a cache folder filled from bytepair's own bundled files (plus
GPT-2's files from tests/data), so it never downloads; tiktoken checks each file's
sha256 against the hash it pins, which also proves the bundled data is OpenAI's.
"""

from __future__ import annotations

import lzma
import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair

from conftest import DATA, texts

NAMES = ["gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base"]


@pytest.fixture(scope="session", params=NAMES)
def pair(request, tiktoken_offline):
    """(bytepair encoding, tiktoken encoding) of the same name."""
    return bytepair.get_encoding(request.param), tiktoken_offline.get_encoding(request.param)


def test_list_encodings_names_all_six():
    assert bytepair.list_encodings() == NAMES


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown encoding 'cl100k'.*cl100k_base"):
        bytepair.get_encoding("cl100k")


def test_encodings_are_cached_per_process():
    assert bytepair.get_encoding("gpt2") is bytepair.get_encoding("gpt2")


def test_vocabulary_metadata_equals_tiktoken(pair):
    ours, theirs = pair
    assert ours.n_vocab == theirs.n_vocab
    assert ours.max_token_value == theirs.max_token_value
    assert ours.eot_token == theirs.eot_token
    assert ours.special_tokens_set == theirs.special_tokens_set
    assert ours.token_byte_values() == theirs.token_byte_values()
    assert ours.pattern == theirs._pat_str
    assert ours.name == theirs.name


def test_fixture_texts_encode_like_tiktoken(pair):
    ours, theirs = pair
    for path in sorted(DATA.glob("*.txt")) + [DATA / "corpus.en"]:
        text = path.read_text(encoding="utf-8")
        assert ours.encode(text, allowed_special="all") == theirs.encode(
            text, allowed_special="all"
        )
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


@settings(max_examples=60)
@given(text=texts)
def test_generated_text_encodes_like_tiktoken(pair, text):
    ours, theirs = pair
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert ours.encode_ordinary(text) == ours.encode(text, disallowed_special=())
    assert ours.decode(ours.encode_ordinary(text)) == text


@pytest.mark.parametrize("c", ["^", "0", "a", "'s", " ", "\n"])
def test_catastrophically_repetitive_text(pair, c):
    ours, theirs = pair
    for text in (c * 10_000, " " + c * 10_000, c * 10_000 + "\n", " " + c * 10_000 + "\n"):
        ids = ours.encode(text)
        assert ids == theirs.encode(text)
        assert ours.decode(ids) == text


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_long_pieces_merge_exactly(pair, data):
    # Pieces over 64 bytes take the long-piece merge loop (rank buckets for these
    # vocabularies): words, digit runs and punctuation runs of a few hundred bytes.
    ours, theirs = pair
    alphabet = data.draw(
        st.sampled_from(["ab", "aeiou", "xyz'", "-=_*", "0123456789", "éa", "\t "])
    )
    text = data.draw(st.text(alphabet=alphabet, min_size=65, max_size=3000))
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_a_million_x(tiktoken_offline, name):
    text = "x" * 1_000_000
    ids = bytepair.get_encoding(name).encode(text)
    assert ids == tiktoken_offline.get_encoding(name).encode(text)


def test_runs_of_zeros(pair):
    ours, theirs = pair
    for n in list(range(1, 40)) + [100, 1000, 4097]:
        assert ours.encode("0" * n) == theirs.encode("0" * n)


def test_surrogate_pairs_and_lone_surrogates(pair):
    ours, theirs = pair
    assert ours.encode("👍") == theirs.encode("👍")
    assert ours.encode(
        "\ud83d\udc4d".encode("utf-16", "surrogatepass").decode("utf-16")
    ) == theirs.encode("👍")
    for text in ("\ud83d", "a\udc4db", "\ud83d\ud83d x"):
        assert ours.encode(text) == theirs.encode(text)
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
        assert ours.count_tokens(text) == len(theirs.encode(text))


def test_special_token_matrix(pair):
    ours, theirs = pair
    for special in sorted(ours.special_tokens_set):
        text = f"a{special}b {special}"
        for kwargs in (
            {"allowed_special": "all"},
            {"allowed_special": {special}},
            {"disallowed_special": ()},
            {"allowed_special": set(), "disallowed_special": ()},
            {"allowed_special": {special}, "disallowed_special": ()},
        ):
            assert ours.encode(text, **kwargs) == theirs.encode(text, **kwargs), kwargs
        for kwargs in ({}, {"disallowed_special": {special}}, {"allowed_special": set()}):
            with pytest.raises(ValueError):
                theirs.encode(text, **kwargs)
            with pytest.raises(ValueError, match="special token"):
                ours.encode(text, **kwargs)


def test_tiktoken_surface_methods(pair):
    ours, theirs = pair
    text = (DATA / "german.txt").read_text(encoding="utf-8")
    ids = theirs.encode(text)
    assert ours.encode_to_numpy(text).tolist() == ids
    assert ours.encode_to_numpy(text).dtype.name == "uint32"
    assert ours.count_tokens(text) == len(ids)
    assert ours.decode_tokens_bytes(ids) == theirs.decode_tokens_bytes(ids)
    assert ours.decode_single_token_bytes(ids[0]) == theirs.decode_single_token_bytes(ids[0])
    assert ours.decode(ids) == theirs.decode(ids)
    docs = text.split(". ")
    assert ours.encode_batch(docs) == theirs.encode_batch(docs)
    assert ours.encode_ordinary_batch(docs) == theirs.encode_ordinary_batch(docs)
    ids, offsets = ours.encode_batch_to_numpy(docs, num_threads=2)
    assert [ids[a:b].tolist() for a, b in zip(offsets, offsets[1:])] == theirs.encode_batch(docs)
    assert ours.decode_batch(ours.encode_batch(docs)) == docs


def test_stream_decoder_waits_for_complete_characters():
    gpt2 = bytepair.get_encoding("gpt2")
    ids = [19567, 255, 19567, 109]
    assert gpt2.decode(ids) == "อั"
    decoder = bytepair.StreamDecoder(gpt2)
    assert [decoder.step(i) for i in ids] == ["", "อ", "", "ั"]
    assert decoder.flush() == ""
    assert "".join(gpt2.decode_stream(ids)) == "อั"
    assert list(gpt2.decode_stream([19567])) == ["\ufffd"]  # unfinished at the end


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "gpt-4o-mini-2024-07-18",
        "gpt-4",
        "gpt-3.5-turbo-0125",
        "text-embedding-3-small",
        "text-davinci-003",
        "davinci",
        "gpt2",
        "o1-preview",
    ],
)
def test_encoding_for_model_follows_tiktoken(tiktoken_offline, model):
    assert (
        bytepair.encoding_for_model(model).name == tiktoken_offline.encoding_for_model(model).name
    )


def test_unknown_model_is_a_clear_error():
    with pytest.raises(KeyError, match="no known encoding for model 'llama'"):
        bytepair.encoding_for_model("llama")


# -- the shared corpora (BYTEPAIR_SHARED) ------------------------------------------------

SHARED = os.environ.get("BYTEPAIR_SHARED")


def _corpus_texts() -> dict[str, str]:
    root = Path(SHARED) / "corpora"
    out = {}
    files = sorted(root.glob("multilingual/*.txt.xz")) + sorted(root.glob("code/*.txt.xz"))
    for path in files + [root / "english_gutenberg.txt.xz"]:
        with lzma.open(path, "rt", encoding="utf-8", newline="") as f:
            out[path.name] = f.read() if "multilingual" in str(path) else f.read(12_000_000)
    return out


@pytest.fixture(scope="session")
def corpus_texts():
    return _corpus_texts()


@pytest.mark.skipif(not SHARED, reason="BYTEPAIR_SHARED is not set: no path to the shared corpora")
def test_every_corpus_encodes_like_tiktoken(pair, corpus_texts):
    ours, theirs = pair
    rng = random.Random(1234)
    checked_docs = checked_slices = 0
    for name, text in corpus_texts.items():
        docs = text.split("\n<|endoftext|>\n")
        # whole documents (up to 3 MB per corpus), then the joined text with specials
        budget = 3_000_000
        for doc in docs:
            if budget <= 0:
                break
            budget -= len(doc)
            assert ours.encode_ordinary(doc) == theirs.encode_ordinary(doc), (name, doc[:80])
            checked_docs += 1
        head = text[:1_000_000]
        assert ours.encode(head, allowed_special="all") == theirs.encode(
            head, allowed_special="all"
        )
        # random slices of 1-10,000 bytes (cut characters at the edges dropped)
        data = text.encode("utf-8")
        for _ in range(60):
            start = rng.randrange(len(data))
            piece = data[start : start + rng.randint(1, 10_000)].decode("utf-8", "ignore")
            assert ours.encode(piece, disallowed_special=()) == theirs.encode(
                piece, disallowed_special=()
            ), (name, start)
            checked_slices += 1
    print(f"{ours.name}: {checked_docs} documents and {checked_slices} slices identical")
    assert checked_docs > 500 and checked_slices == 60 * len(corpus_texts)


def test_network_is_off_during_tests():
    import socket

    with pytest.raises(RuntimeError, match="tests must run offline"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_every_simd_level_of_the_pre_tokenizer_gives_the_ids_of_the_scalar_one(tmp_path):
    # BYTEPAIR_SCALAR=1 turns the SIMD code off (CI also runs this file's tiktoken
    # comparisons that way) and BYTEPAIR_SIMD caps the level; every level must give
    # the same ids on text that exercises them.
    import json
    import platform
    import subprocess
    import sys

    rnd = random.Random(11)
    alphabet = ["a", "Z", "é", "中", " ", "\n", "'", "s", "1", ".", "\u0301", "ſ", "\u00a0"]
    texts = [
        "".join(
            rnd.choice(alphabet) if rnd.random() < 0.2 else chr(rnd.randrange(97, 123))
            for _ in range(rnd.randrange(300))
        )
        for _ in range(200)
    ] + ["x" * 70, "Supercalifragilisticexpialidocious" * 3 + "é", "ABCdefGHI's"]
    path = tmp_path / "texts.json"
    path.write_text(json.dumps(texts))
    script = (
        "import json, sys, bytepair\n"
        "from bytepair import _core\n"
        "texts = json.load(open(sys.argv[1]))\n"
        "ids = {n: [bytepair.get_encoding(n).encode_ordinary(t) for t in texts]"
        " for n in ('gpt2', 'cl100k_base', 'o200k_base')}\n"
        "print(json.dumps([_core.simd_in_use(), _core.simd_level(), ids]))\n"
    )
    runs = {}
    for name, extra in [
        ("scalar", {"BYTEPAIR_SCALAR": "1"}),
        ("sse2", {"BYTEPAIR_SIMD": "sse2"}),
        ("widest", {}),
    ]:
        env = {k: v for k, v in os.environ.items() if k not in ("BYTEPAIR_SCALAR", "BYTEPAIR_SIMD")}
        env.update(extra)
        done = subprocess.run(
            [sys.executable, "-c", script, str(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        runs[name] = json.loads(done.stdout)
    x86 = platform.machine() in ("x86_64", "AMD64")
    assert runs["scalar"][:2] == [False, "scalar"]
    assert runs["sse2"][:2] == ([True, "sse2"] if x86 else [False, "scalar"])
    assert runs["widest"][1] in (("sse2", "avx2") if x86 else ("scalar",))
    if x86 and Path("/proc/cpuinfo").exists():
        flags = Path("/proc/cpuinfo").read_text().split()
        has_avx2 = all(f in flags for f in ("avx2", "bmi1", "bmi2", "abm", "popcnt"))
        assert runs["widest"][1] == ("avx2" if has_avx2 else "sse2")
    assert runs["sse2"][2] == runs["scalar"][2]
    assert runs["widest"][2] == runs["scalar"][2]
