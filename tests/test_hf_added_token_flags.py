"""Hugging Face added tokens with ``lstrip``, ``rstrip`` and ``single_word`` encode as
``tokenizers`` encodes them: a byte-level file (GPT-2's plus added tokens, built with
``tokenizers``) and a SentencePiece-family one (the shared Mistral file), on every path,
in blocks, streamed, and through ``.bytepair``, pickles and ``save_hf``."""

from __future__ import annotations

import json
import os
import pickle
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair

from conftest import GPT2_DIR, assert_every_path_encodes_as

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Tokenizer  # noqa: E402

#: One token per flag alone and combined; "qqzk" holds word characters only, so
#: single_word has letters to look at on both sides.
FLAGGED = {
    "<mask>": {"lstrip": True},
    "<end>": {"rstrip": True},
    "qqzk": {"single_word": True},
    "<both>": {"lstrip": True, "rstrip": True},
    "zzw": {"lstrip": True, "rstrip": True, "single_word": True},
    "<mask><mask>": {},  # overlaps two <mask>: the longest wins
}
#: Special (refused unless allowed); the others are non-special added tokens (always
#: matched).
SPECIAL = {"<mask>", "<both>", "<mask><mask>"}
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u0085", "\u2028", " \t\n "]
TEXTS = [
    "hello   <mask> world",
    "<mask>",
    " <mask>",
    "<mask> ",
    "a<end>",
    "a<end>  \t\nb",
    "<end>\n\n",
    "x<end>\u00a0\u0085y",
    "qqzk qqzkqqzk qqzk_ qqzk. éqqzk 1qqzk qqzk1 _qqzk (qqzk) 漢qqzk",
    "a <both> b",
    "a<both>b",
    "<mask><mask>  <mask>",
    "<mask><mask><mask>",
    "<end> <mask>",
    "<end><mask>",
    "zzw zzwa a zzw  zzw\tzzw",
    "<|endoftext|> <mask> <end> <|endoftext|>",
    "qqzkq qqzk",
]


def build_gpt2_file(folder: Path) -> Path:
    """GPT-2's tokenizer.json with :data:`FLAGGED` added by ``tokenizers``."""
    tok = Tokenizer.from_file(str(GPT2_DIR / "tokenizer.json"))
    for content, flags in FLAGGED.items():
        token = AddedToken(content, normalized=False, special=content in SPECIAL, **flags)
        if token.special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])
    path = folder / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def gpt2_flagged(tmp_path_factory) -> Path:
    return build_gpt2_file(tmp_path_factory.mktemp("flags"))


def ids_of(path: Path):
    theirs = Tokenizer.from_file(str(path))
    return lambda text: theirs.encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="module")
def gpt2_pair(gpt2_flagged):
    """(ours, tokenizers' ids) of the flagged GPT-2 file, loaded once for all the
    generated examples (loading it twice an example was most of their time)."""
    return bytepair.load(gpt2_flagged), ids_of(gpt2_flagged)


def test_each_flag_alone_and_combined_encodes_as_tokenizers(gpt2_flagged):
    ours, theirs = bytepair.load(gpt2_flagged), ids_of(gpt2_flagged)
    assert ours.model.token_flags["<mask>"] == ("lstrip",)
    assert ours.model.token_flags["zzw"] == ("lstrip", "rstrip", "single_word")
    for text in TEXTS:
        assert ours.encode(text, allowed_special="all") == theirs(text), text
    # The whitespace taken is not encoded: <mask> takes the spaces before it.
    assert ours.encode("hello   <mask>", allowed_special="all") == [31373, 50257]


@pytest.mark.parametrize("space", SPACES)
def test_every_kind_of_whitespace_is_taken_as_tokenizers_takes_it(gpt2_flagged, space):
    ours, theirs = bytepair.load(gpt2_flagged), ids_of(gpt2_flagged)
    for text in [
        f"a{space}<mask>{space}b",
        f"a{space}<end>{space}b",
        f"{space}<both>{space}",
        f"a{space}zzw{space}b",
        f"{space}<mask>",
        f"<end>{space}",
    ]:
        assert ours.encode(text, allowed_special="all") == theirs(text), repr(text)


def test_single_word_is_refused_next_to_letters_digits_underscore_and_non_ascii(gpt2_flagged):
    ours = bytepair.load(gpt2_flagged)
    qqzk = ours.encode("qqzk")
    assert qqzk == [50259]
    for glued in ["aqqzk", "qqzka", "1qqzk", "qqzk1", "_qqzk", "qqzk_", "éqqzk", "qqzkж", "漢qqzk"]:
        assert 50259 not in ours.encode(glued), glued
    for apart in ["-qqzk", "qqzk.", " qqzk ", "(qqzk)", "\nqqzk\n"]:
        assert 50259 in ours.encode(apart), apart


def test_flags_do_not_change_what_a_call_allows(gpt2_flagged):
    ours = bytepair.load(gpt2_flagged)
    with pytest.raises(ValueError, match="<mask>"):
        ours.encode("a  <mask>")  # a special token with lstrip is still refused
    # Encoded as text, nothing is taken: "a", " ", " <", "mask", ">".
    assert ours.encode("a  <mask>", disallowed_special=()) == [64, 220, 1279, 27932, 29]
    # A non-special added token is matched whatever the call allows.
    assert ours.encode("a<end>  b", disallowed_special=()) == [64, 50258, 65]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([*FLAGGED, "<|endoftext|>", *SPACES, "a", "1", "_", "é", ".", "q"]),
            st.text(alphabet="qzkw <>\t\n\u3000a1_.", max_size=6),
        ),
        max_size=14,
    )
)
def test_hypothesis_texts_around_the_tokens_encode_as_tokenizers(gpt2_pair, parts):
    ours, theirs = gpt2_pair
    text = "".join(parts)
    assert ours.encode(text, allowed_special="all") == theirs(text)


def test_every_encode_path_gives_tokenizers_ids(gpt2_flagged, tmp_path):
    # Non-special added tokens: matched on every path whatever the call allows.
    ours, theirs = bytepair.load(gpt2_flagged), ids_of(gpt2_flagged)
    rng = random.Random(24)
    for text in ["a <end>   qqzk b\n  zzw  c zzwq", "x\n\n  <end>\n  y qqzk1 qqzk \u3000zzw"]:
        assert_every_path_encodes_as(ours, text, theirs, tmp_path, rng)


def test_long_texts_cut_in_blocks_encode_as_whole(gpt2_flagged, tmp_path, monkeypatch):
    """Blocks of a file, parts of a batch and streamed chunks are cut where no token's
    whitespace or single_word neighbour is: the ids are those of the whole text."""
    ours, theirs = bytepair.load(gpt2_flagged), ids_of(gpt2_flagged)
    rng = random.Random(7)
    words = ["one", "two", "qqzk", "zzw", "<end>", "\n", "  ", "\u3000", "x.", "qqzk1", "<end>"]
    text = " ".join(rng.choice(words) for _ in range(60_000))
    text += "   " + "<end>" + " " * 300 + "qqzk" + "\n" * 50
    want = theirs(text)
    assert ours.encode(text) == want
    assert ours.encode_batch([text, text[:5000]], num_threads=2) == [want, theirs(text[:5000])]
    src, dst = tmp_path / "long.txt", tmp_path / "long.npy"
    src.write_text(text, encoding="utf-8", newline="")
    from unittest import mock

    import numpy as np

    from bytepair.shards import one_file

    with mock.patch.object(one_file, "BLOCK_BYTES", 4096):
        ours.encode_file(src, dst, format="npy", num_threads=2)
    assert np.load(dst).tolist() == want
    chunks = [text[i : i + 777] for i in range(0, len(text), 777)]
    assert list(ours.encode_iterable(chunks)) == want


def test_streaming_holds_back_whitespace_an_lstrip_token_may_take(gpt2_flagged):
    ours, theirs = bytepair.load(gpt2_flagged), ids_of(gpt2_flagged)
    text = "word" + " " * 500 + "zzw end"
    chunks = ["word", " " * 250, " " * 250 + "zz", "w end"]
    assert list(ours.encode_iterable(chunks)) == theirs(text)
    assert theirs(text)[:2] == [4775, 50261]  # "word", then zzw with the 500 spaces


def test_flags_survive_bytepair_files_pickles_and_save_hf(gpt2_flagged, tmp_path):
    ours, theirs = bytepair.load(gpt2_flagged), ids_of(gpt2_flagged)
    text = "a  <mask> b<end>  qqzk zzw  c"
    want = theirs(text)
    ours.save(tmp_path / "t.bytepair")
    doc = (tmp_path / "t.bytepair").read_text(encoding="utf-8")
    assert '"token_flags"' in doc and '"<mask>": ["lstrip"]' in doc
    assert bytepair.load(tmp_path / "t.bytepair").encode(text, allowed_special="all") == want
    assert pickle.loads(pickle.dumps(ours)).encode(text, allowed_special="all") == want
    ours.save(tmp_path / "out.json")
    assert ids_of(tmp_path / "out.json")(text) == want
    ours.save_hf(tmp_path / "folder")
    config = json.loads((tmp_path / "folder" / "tokenizer_config.json").read_text())
    mask = next(e for e in config["added_tokens_decoder"].values() if e["content"] == "<mask>")
    assert (mask["lstrip"], mask["rstrip"], mask["single_word"]) == (True, False, False)
    assert ids_of(tmp_path / "folder" / "tokenizer.json")(text) == want


def test_the_hf_drop_in_matches_autotokenizer_on_a_folder_with_flags(gpt2_flagged, tmp_path):
    transformers = pytest.importorskip("transformers")
    from bytepair import hf_compat

    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(gpt2_flagged.read_bytes())
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    ours = hf_compat.from_pretrained(folder)
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    assert ours(TEXTS)["input_ids"] == theirs(TEXTS)["input_ids"]


def edited(path: Path, folder: Path, edit) -> Path:
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    out = folder / "edited.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    return out


def set_flags(doc: dict, flags: dict[str, dict]) -> None:
    for entry in doc["added_tokens"]:
        entry.update(flags.get(entry["content"], {}))


def test_refusals_name_the_file_and_token(gpt2_flagged, tmp_path):
    normalized = edited(
        gpt2_flagged, tmp_path, lambda d: set_flags(d, {"qqzk": {"normalized": True}})
    )
    with pytest.raises(ValueError, match="added token 'qqzk' has single_word true and normalized"):
        bytepair.load(normalized)
    spaced = tmp_path / "spaced"
    spaced.mkdir()
    tok = Tokenizer.from_file(str(gpt2_flagged))
    tok.add_tokens([AddedToken("\n<x>", normalized=False)])
    tok.save(str(spaced / "tokenizer.json"))
    with pytest.raises(ValueError, match=r"'\\n<x>' starts with whitespace.*rstrip token") as e:
        bytepair.load(spaced / "tokenizer.json")
    assert str(spaced) in str(e.value)


MISTRAL = os.environ.get("BYTEPAIR_SHARED")
MISTRAL_FLAGS = {
    "[INST]": {"rstrip": True},
    "[/INST]": {"lstrip": True},
    "[TOOL_CALLS]": {"single_word": True},
    # Non-special: matched whatever a call allows (so on every path by default).
    "[control_8]": {"lstrip": True, "rstrip": True, "single_word": True, "special": False},
    "[control_9]": {"rstrip": True, "special": False},
}


@pytest.fixture(scope="module")
def mistral_flagged(tmp_path_factory) -> Path:
    if not MISTRAL:
        pytest.skip("BYTEPAIR_SHARED is not set: the shared Mistral tokenizer.json is not at hand")
    source = Path(MISTRAL) / "vocab/hf/mistral-7b-instruct-v0.3/tokenizer.json"
    return edited(source, tmp_path_factory.mktemp("mistral"), lambda d: set_flags(d, MISTRAL_FLAGS))


@pytest.fixture(scope="module")
def mistral_pair(mistral_flagged):
    """(ours without BOS, tokenizers' ids) of the flagged Mistral file, loaded once."""
    return without_bos(mistral_flagged), ids_of(mistral_flagged)


def without_bos(path: Path):
    """The file's tokenizer without the BOS its post-processor adds (as
    ``add_special_tokens=False``)."""
    return bytepair.load(path).with_options(add_bos=False)


def test_a_sentencepiece_family_file_with_flags_encodes_as_tokenizers(mistral_flagged, tmp_path):
    ours, theirs = without_bos(mistral_flagged), ids_of(mistral_flagged)
    texts = [
        "[INST]   hello [/INST] there",
        "a\t[INST]\n\nb  \u3000[/INST]",
        "x[TOOL_CALLS] [TOOL_CALLS]a ([TOOL_CALLS])",
        " [control_8]  b a[control_8] [control_8]_",
        "[INST][/INST]",
        "  [/INST]",
        "[INST]   ",
    ]
    for text in texts:
        assert ours.encode(text, allowed_special="all") == theirs(text), repr(text)
    rng = random.Random(3)
    for text in ["a [control_8]  b\n[control_9]\t c", " [control_9]  [control_8]x [control_8]"]:
        assert_every_path_encodes_as(ours, text, theirs, tmp_path, rng)
    # Round trips keep the flags.
    ours.save(tmp_path / "m.bytepair")
    again = bytepair.load(tmp_path / "m.bytepair")
    assert again.encode(texts[0], allowed_special="all") == theirs(texts[0])
    assert pickle.loads(pickle.dumps(ours)).encode(texts[1], allowed_special="all") == theirs(
        texts[1]
    )
    ours.save(tmp_path / "m.json")
    assert ids_of(tmp_path / "m.json")(texts[3]) == theirs(texts[3])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [*MISTRAL_FLAGS, " ", "  ", "\n", "\t", "a", "b1", "_", "é", ".", "\u3000"]
        ),
        max_size=12,
    )
)
def test_hypothesis_texts_in_a_sentencepiece_family_file_encode_as_tokenizers(mistral_pair, parts):
    ours, theirs = mistral_pair
    text = "".join(parts)
    assert ours.encode(text, allowed_special="all") == theirs(text)
