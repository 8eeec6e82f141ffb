"""The Tokenizer contract, one suite over every kind of model we load: each public
method either works — and agrees with ``encode`` / ``decode`` — or raises one clear
error (``bytepair.models.Unsupported``, a ValueError) saying why this kind cannot.

Kinds: a bundled encoding (cl100k_base), a trained byte-level BPE, a Hugging Face
byte-level ``tokenizer.json`` (GPT-2's), tiktoken ranks that merges cannot build (the
trained BPE's, plus " café", which no merge makes), and a SentencePiece BPE loaded from
its ``.model`` and from its ``tokenizer.json`` (trained here by the sentencepiece
library).
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import formats
from bytepair.models import RankBPE, Unsupported
from bytepair.models import ranks as ranks_models

from conftest import DATA, EOT, assert_every_path_encodes_as

TEXTS = [
    "",
    "Hello world",
    " leading space and  two  spaces",
    "tabs\tand\nnew lines\n\n",
    "unicode: café, 日本語, emoji 🎉 and ﷽",
    "numbers 1234567 and code: def f(x): return x**2",
    "   ",
]


@pytest.fixture(scope="session")
def spm_model_path(tmp_path_factory) -> Path:
    """A small SentencePiece BPE, trained by the sentencepiece library itself."""
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
    folder = tmp_path_factory.mktemp("spm")
    spm.SentencePieceTrainer.train(
        input=str(DATA / "tinystories_sample.txt"),
        model_prefix=str(folder / "small"),
        model_type="bpe",
        vocab_size=400,
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        control_symbols=["<ctl>"],
        minloglevel=2,
    )
    return folder / "small.model"


def _spm_json(spm_model_path: Path, folder: Path) -> bytepair.Tokenizer:
    path = folder / "spm.json"
    bytepair.load(spm_model_path).save(path)
    return bytepair.load(path)


def _rank_bpe(trained: bytepair.Tokenizer) -> bytepair.Tokenizer:
    special_ids = set(trained.special_tokens.values())
    ranks = {t: i for i, t in trained.vocab.items() if i not in special_ids}
    ranks[" café".encode()] = trained.max_token_value + 1
    model = ranks_models.from_ranks(ranks, trained.special_tokens, "gpt2")
    assert isinstance(model, RankBPE) and model.unbuildable == [" café".encode()]
    return bytepair.Tokenizer.from_model(model)


KINDS = ["bundled-bpe", "trained-bpe", "hf-bpe", "rank-bpe", "spm-model", "spm-json"]
#: The kinds whose special tokens are pieces of the model file (not added later), and
#: which have add_bos / add_eos.
SENTENCEPIECE = ("spm-model", "spm-json")


@pytest.fixture(scope="session", params=KINDS)
def tok(request, tinystories_tokenizer, tmp_path_factory) -> bytepair.Tokenizer:
    kind = request.param
    if kind == "bundled-bpe":
        return bytepair.get_encoding("cl100k_base")
    if kind == "trained-bpe":
        return tinystories_tokenizer
    if kind == "hf-bpe":
        return bytepair.load(DATA / "gpt2" / "tokenizer.json")
    if kind == "rank-bpe":
        return _rank_bpe(tinystories_tokenizer)
    path = request.getfixturevalue("spm_model_path")
    if kind == "spm-model":
        return bytepair.load(path)
    return _spm_json(path, tmp_path_factory.mktemp("spm-json"))


@pytest.fixture
def kind(request) -> str:
    """The kind of the ``tok`` a test runs on."""
    return request.node.callspec.params["tok"]


def has_merges(tok) -> bool:
    return tok.model.merges is not None


# -- encoding ----------------------------------------------------------------------------


@pytest.mark.parametrize("text", TEXTS)
def test_every_encode_variant_gives_the_ids_of_encode(tok, text):
    ids = tok.encode(text)
    assert tok.encode_ordinary(text) == ids
    assert tok.count_tokens(text) == len(ids)
    assert tok.encode_to_numpy(text).tolist() == ids
    assert tok.encode_batch([text, text], num_threads=2) == [ids, ids]
    assert tok.encode_ordinary_batch([text]) == [ids]
    flat, offsets = tok.encode_batch_to_numpy([text, "x", text], num_threads=2)
    assert flat[offsets[0] : offsets[1]].tolist() == ids
    assert flat[offsets[2] : offsets[3]].tolist() == ids
    assert list(tok.encode_iterable(iter(text))) == ids  # one character at a time
    assert [i for chunk in tok.encode_chunks([text[:3], text[3:]]) for i in chunk] == ids


def test_text_spelling_a_special_token_is_refused_by_default_and_encoded_when_allowed(tok):
    if not tok.special_tokens:
        pytest.skip("this tokenizer has no special tokens")
    special, i = next(iter(tok.special_tokens.items()))
    with pytest.raises(ValueError, match="special token .* is not allowed here"):
        tok.encode(f"a {special} b")
    assert i in tok.encode(f"a {special} b", allowed_special="all")
    assert i not in tok.encode(f"a {special} b", disallowed_special=())
    assert tok.encode_single_token(special) == i
    assert tok.is_special_token(i)


def test_a_single_token_round_trips_through_encode_single_token(tok):
    data = tok.decode_single_token_bytes(tok.encode("Hello")[0])
    assert tok.encode_single_token(data) in tok.encode("Hello") or tok.decode_bytes(
        [tok.encode_single_token(data)]
    ).endswith(data.strip())
    with pytest.raises(KeyError, match="not a single token"):
        tok.encode_single_token(b"\x00not a token\x00" * 3)


def test_encode_with_unstable_is_tiktokens_or_refused_by_name(tok):
    if has_merges(tok) or hasattr(tok.model, "ranks"):
        stable, completions = tok.encode_with_unstable("Hello wor")
        ids = tok.encode("Hello wor")
        assert ids[: len(stable)] == stable
        assert ids[len(stable) :] in completions
        assert all(isinstance(c, list) for c in completions)
    else:
        with pytest.raises(Unsupported, match="tiktoken's, for byte-level BPE"):
            tok.encode_with_unstable("Hello wor")


def test_encode_file_writes_the_ids_of_encode(tok, tmp_path):
    text = "\n".join(TEXTS[1:]) * 3
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    n = tok.encode_file(src, tmp_path / "out.bin", num_threads=2)
    dtype = np.uint16 if tok.n_vocab <= 1 << 16 else np.uint32
    got = np.fromfile(tmp_path / "out.bin", dtype=dtype).tolist()
    assert n == len(got) and got == tok.encode(text)


# -- decoding ----------------------------------------------------------------------------


@pytest.mark.parametrize("text", TEXTS)
def test_decode_variants_agree_with_decode(tok, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.decode_bytes(ids) == text.encode("utf-8")
    assert tok.decode_batch([ids, ids]) == [text, text]
    assert tok.decode_bytes_batch([ids]) == [text.encode("utf-8")]
    assert tok.decode(np.array(ids, dtype=np.uint32)) == text
    assert b"".join(tok.model.surfaces(ids)) == tok.decode_bytes(ids)
    assert "".join(tok.decode_stream(ids)) == text
    decoded, offsets = tok.decode_with_offsets(ids)
    assert decoded == text
    assert len(offsets) == len(ids)
    assert offsets == sorted(offsets) and all(0 <= o <= len(text) for o in offsets)


def test_decoding_an_unknown_id_names_it(tok):
    bad = tok.n_vocab + 7
    with pytest.raises(KeyError, match=str(bad)):
        tok.decode_bytes([bad])
    with pytest.raises(KeyError, match=str(bad)):
        tok.decode_single_token_bytes(bad)
    with pytest.raises(KeyError, match=str(bad)):
        tok.decode_with_offsets([bad])


def test_decode_with_offsets_points_each_token_at_its_first_character(tok):
    text = "Hello wide world"
    ids = tok.encode(text)
    decoded, offsets = tok.decode_with_offsets(ids)
    surfaces = tok.model.surfaces(ids)
    for o, surface in zip(offsets, surfaces):
        if surface.strip():
            assert decoded[o:].encode("utf-8").startswith(surface.lstrip(b" ")) or decoded[
                o:
            ].encode("utf-8").startswith(surface)


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=60))
def test_generated_text_round_trips_in_every_kind(tok, text):
    ids = tok.encode(text, disallowed_special=())
    assert tok.decode(ids) == text
    assert "".join(tok.decode_stream(ids)) == text
    assert tok.decode_with_offsets(ids)[0] == text


# -- the model's data ----------------------------------------------------------------------


def test_the_data_properties_are_consistent(tok):
    vocab = tok.vocab
    assert tok.vocab_size == len(vocab)
    assert tok.max_token_value == max(vocab) and tok.n_vocab == tok.max_token_value + 1
    assert all(vocab[i] == t.encode("utf-8") for t, i in tok.special_tokens.items())
    assert tok.special_tokens_set == set(tok.special_tokens)
    assert tok.token_byte_values() == sorted(
        t for i, t in vocab.items() if i not in tok.special_tokens.values()
    )
    assert tok.model.kind in repr(tok) or "merges=" in repr(tok)
    if has_merges(tok):
        assert len(tok.merges) == tok.model.merge_count
    else:
        with pytest.raises(AttributeError, match="no merges"):
            _ = tok.merges


def test_with_special_tokens_adds_them_or_says_why_not(tok, kind):
    if kind not in SENTENCEPIECE:
        more = tok.with_special_tokens(["<|new|>"])
        new_id = more.special_tokens["<|new|>"]
        assert new_id == tok.max_token_value + 1
        assert more.encode("a<|new|>", allowed_special="all")[-1] == new_id
        assert "<|new|>" not in tok.special_tokens  # the original is unchanged
    else:
        with pytest.raises(Unsupported, match="CONTROL pieces"):
            tok.with_special_tokens(["<|new|>"])


def framed(tok: bytepair.Tokenizer) -> bytepair.Tokenizer:
    """``tok`` putting a BOS and an EOS around every text: its own (SentencePiece), or
    two of its special tokens named for it."""
    model = tok.model
    if model.bos_token is None:
        first, *rest = model.special_tokens
        model = model.with_options(bos_token=first, eos_token=(rest or [first])[-1])
    return bytepair.Tokenizer.from_model(model.with_options(add_bos=True, add_eos=True))


def test_add_bos_and_add_eos_need_a_named_token_and_frame_every_path_for_every_kind(
    tok, kind, tmp_path
):
    if kind not in SENTENCEPIECE:
        with pytest.raises(ValueError, match="names no BOS token.*bos_token="):
            tok.model.with_options(add_bos=True)
        with pytest.raises(ValueError, match="eos_token 'nope' is not a special token"):
            tok.model.with_options(eos_token="nope", add_eos=True)
    with_frame = framed(tok)
    assert with_frame.model.add_bos and with_frame.model.add_eos
    assert not tok.model.add_bos and not tok.model.add_eos  # the model it came from
    bos = tok.special_tokens[with_frame.model.bos_token]
    eos = tok.special_tokens[with_frame.model.eos_token]
    assert (bos, eos) == (
        (tok.model.bos_id, tok.model.eos_id) if kind in SENTENCEPIECE else (bos, eos)
    )
    rng = random.Random(5)
    for text in [*TEXTS, ""]:
        assert_every_path_encodes_as(
            with_frame, text, lambda t: [bos, *tok.encode(t), eos], tmp_path, rng
        )
        assert with_frame.count_tokens(text) == len(tok.encode(text)) + 2
        flat, offsets = with_frame.encode_batch_to_numpy([text, "x"], num_threads=2)
        assert flat[offsets[0] : offsets[1]].tolist() == [bos, *tok.encode(text), eos]
    off = with_frame.with_options(add_bos=False, add_eos=False)
    assert off.encode("Hello") == tok.encode("Hello")


@pytest.mark.parametrize("fmt", ["bytepair", "hf"])
def test_the_frame_is_kept_by_formats_that_hold_it_and_by_pickle(tok, kind, fmt, tmp_path):
    with_frame = framed(tok)
    path = tmp_path / ("t.bytepair" if fmt == "bytepair" else "t.json")
    if fmt == "hf" and kind == "rank-bpe":
        with pytest.raises(Unsupported, match="cannot hold"):  # no merge list holds it
            with_frame.save(path)
        return
    with_frame.save(path)
    for back in (bytepair.load(path), pickle.loads(pickle.dumps(with_frame))):
        assert (back.model.bos_token, back.model.eos_token) == (
            with_frame.model.bos_token,
            with_frame.model.eos_token,
        )
        assert back.encode("Hello world") == with_frame.encode("Hello world")
        assert back.with_options(add_bos=False, add_eos=False).encode("Hi") == tok.encode("Hi")


# -- files and pickles -------------------------------------------------------------------


def test_pickle_gives_back_an_equal_tokenizer(tok):
    back = pickle.loads(pickle.dumps(tok))
    text = "Hello world, café 🎉"
    assert back.encode(text) == tok.encode(text)
    assert back.special_tokens == tok.special_tokens
    assert back.vocab == tok.vocab


@pytest.mark.parametrize("fmt", formats.FORMATS)
def test_save_and_load_round_trip_in_every_format_that_holds_the_kind(tok, fmt, tmp_path):
    names = {
        "bytepair": "t.bytepair",
        "tiktoken": "t.tiktoken",
        "hf": "t.json",
        "gpt2": "folder",
        "sentencepiece": "t.model",
        "tekken": "t.tekken.json",
    }
    path = tmp_path / names[fmt]
    try:
        formats.writer(fmt, tok.model)
    except Unsupported as e:
        assert "format=" in str(e) and "bytepair" in str(e)
        with pytest.raises(Unsupported, match="cannot hold this"):
            tok.save(path, format=fmt)
        assert not path.exists()
        return
    try:
        tok.save(path, format=fmt)
    except ValueError as e:
        # Some files of a kind cannot be written in a format (ids that are not ranks):
        # the error says why, and nothing is written.
        assert str(path) in str(e)
        assert not path.exists()
        return
    # tiktoken and GPT-2 files keep no pattern (and .tiktoken no special tokens).
    extra = {
        "tiktoken": {"pattern": tok.pattern, "special_tokens": tok.special_tokens},
        "gpt2": {"pattern": tok.pattern},
    }.get(fmt, {})
    back = bytepair.load(path, **extra)
    for text in TEXTS:
        assert back.encode(text, disallowed_special=()) == tok.encode(
            text, disallowed_special=()
        ), text


def test_a_name_whose_suffix_belongs_to_another_kind_says_what_to_do(tok, kind, tmp_path):
    suffix = ".tiktoken" if kind in SENTENCEPIECE else ".model"
    with pytest.raises(Unsupported, match=r"\.bytepair.*format="):
        tok.save(tmp_path / f"x{suffix}")
    assert not (tmp_path / f"x{suffix}").exists()


def test_minbpe_style_model_name_saves_with_format_bytepair(tinystories_tokenizer, tmp_path):
    path = tmp_path / "toy.model"
    tinystories_tokenizer.save(path, format="bytepair")
    assert bytepair.load(path).encode("Once upon a time") == tinystories_tokenizer.encode(
        "Once upon a time"
    )
    assert EOT in bytepair.load(path).special_tokens
