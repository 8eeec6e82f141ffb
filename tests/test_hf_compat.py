"""The Hugging Face drop-in (bytepair.hf_compat, Tokenizer.as_hf): every output equal
to transformers' own fast tokenizer on the same folder (AutoTokenizer.from_pretrained).

The bundled GPT-2 files need nothing; the shared GPT-2 and Mistral v0.3 folders need
BYTEPAIR_SHARED. Neither shared folder has a tokenizer_config.json (so no chat template
and no named roles): the tests copy each tokenizer.json into a folder with a config that
names bos/eos/pad and a chat template, and load both tokenizers from that same folder.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair

from conftest import DATA, GPT2_DIR

transformers = pytest.importorskip("transformers")
from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: E402

from bytepair import hf_compat  # noqa: E402

SHARED = os.environ.get("BYTEPAIR_SHARED")
needs_shared = pytest.mark.skipif(
    not SHARED, reason="BYTEPAIR_SHARED is not set: no path to the shared Hugging Face folders"
)
MISTRAL = Path(SHARED or ".") / "vocab" / "hf" / "mistral-7b-instruct-v0.3"
SHARED_GPT2 = Path(SHARED or ".") / "vocab" / "hf" / "gpt2"

# A Mistral-style template ([INST] ... [/INST] answer</s>): the shared folder ships none.
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
    "{{ '[INST] ' + m['content'] + '[/INST]' }}{% else %}{{ ' ' + m['content'] + eos_token }}"
    "{% endif %}{% endfor %}"
)
GPT2_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}"
)
CHAT = [
    {"role": "user", "content": "Hi there, what is 2+2?"},
    {"role": "assistant", "content": " It is 4."},
    {"role": "user", "content": "  and 3+3 ▁?"},
]

# Varied texts: English, code indentation, leading spaces and "▁", special tokens and
# their look-alikes in text, byte fallback, empty and whitespace-only texts.
TEXTS = [
    "Hello world",
    " Hello world",
    "  two leading spaces",
    "    def f(x):\n        return x",
    "\tx = 1",
    "\n\nnew lines first",
    "trailing space ",
    "",
    " ",
    "  ",
    "▁x",
    " ▁x",
    "<s> a </s>",
    " <s>",
    "a<s>b",
    "[INST] What? [/INST] Fine.</s>",
    " [INST] hi",
    "a <unk> b",
    "<unk>",
    "<|endoftext|>",
    "text<|endoftext|>more <|endoftext|>",
    "<|endoftext",
    "emoji 😀👍🏽 and 中文 and ё",
    "numbers 12345 67.89",
    "it's they're we'LL",
    "a" * 300,
    "x\u0301\u00a0y\u3000z",
    "\x00\x01 control",
]


def make_folder(tmp_path: Path, source: Path, config: dict) -> Path:
    """A folder with ``source``'s tokenizer.json and the given tokenizer_config.json."""
    folder = tmp_path / source.name
    folder.mkdir()
    shutil.copy(source / "tokenizer.json", folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def pair(folder: Path, **options):
    """(bytepair's drop-in, transformers' own) for one folder."""
    return hf_compat.from_pretrained(folder, **options), AutoTokenizer.from_pretrained(
        folder, **options
    )


def same(a, b) -> None:
    """Two BatchEncodings hold the same keys and values (numpy arrays compared exactly)."""
    assert sorted(a.keys()) == sorted(b.keys())
    for key in a:
        if isinstance(b[key], np.ndarray):
            assert isinstance(a[key], np.ndarray), key
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert (a[key] == b[key]).all(), key
        else:
            assert a[key] == b[key], key


GPT2_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<|endoftext|>",
    "eos_token": "<|endoftext|>",
    "pad_token": "<|endoftext|>",
    "chat_template": GPT2_TEMPLATE,
}
MISTRAL_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": "</s>",
    "chat_template": MISTRAL_TEMPLATE,
}


@pytest.fixture(
    params=[
        pytest.param((GPT2_DIR, GPT2_CONFIG), id="bundled-gpt2"),
        pytest.param((SHARED_GPT2, GPT2_CONFIG), id="shared-gpt2", marks=needs_shared),
        pytest.param((MISTRAL, MISTRAL_CONFIG), id="mistral-v0.3", marks=needs_shared),
    ]
)
def tokenizers(request, tmp_path):
    source, config = request.param
    return pair(make_folder(tmp_path, source, config))


# -- what it is --------------------------------------------------------------------------


def test_drop_in_is_a_fast_tokenizer_whose_ids_are_bytepairs(tokenizers, monkeypatch):
    ours, _ = tokenizers
    assert isinstance(ours, PreTrainedTokenizerFast) and ours.is_fast
    expected = ours(["Hello world", "  x"])["input_ids"]

    # With the Hugging Face backend's encoder broken, bytepair still encodes them.
    def refuse(*args, **kwargs):
        raise AssertionError("the Hugging Face backend encoded a text")

    monkeypatch.setattr(ours, "_tokenizer", _Broken(ours._tokenizer, refuse))
    assert ours(["Hello world", "  x"])["input_ids"] == expected


class _Broken:
    """A backend whose encode_batch fails; everything else passes through."""

    def __init__(self, backend, encode_batch):
        self._backend, self.encode_batch = backend, encode_batch

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def __setattr__(self, name, value):
        if name in ("_backend", "encode_batch"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._backend, name, value)


# -- equal to transformers --------------------------------------------------------------


@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_ids_and_masks_equal_transformers_on_varied_texts(tokenizers, add_special_tokens):
    ours, theirs = tokenizers
    same(
        ours(TEXTS, add_special_tokens=add_special_tokens),
        theirs(TEXTS, add_special_tokens=add_special_tokens),
    )
    for text in TEXTS:  # one text at a time: no batch dimension, as transformers
        same(ours(text), theirs(text))
        assert ours.encode(text) == theirs.encode(text)
        assert ours.tokenize(text) == theirs.tokenize(text)


@pytest.mark.parametrize(
    "options",
    [
        {"padding": True},
        {"padding": "longest", "padding_side": "left"},
        {"padding": "max_length", "max_length": 40},
        {"padding": True, "pad_to_multiple_of": 8, "return_tensors": "np"},
        {"padding": True, "truncation": True, "max_length": 6},
        {"padding": True, "truncation": True, "max_length": 6, "return_tensors": "np"},
        {"truncation": True, "max_length": 1},
        {"truncation": "only_first", "max_length": 5, "return_length": True},
        {
            "padding": True,
            "truncation": True,
            "max_length": 7,
            "stride": 3,
            "return_overflowing_tokens": True,
        },
        {"return_special_tokens_mask": True, "return_token_type_ids": True, "padding": True},
        {"return_attention_mask": False, "padding": True},
    ],
    ids=repr,
)
def test_padded_and_truncated_batches_equal_transformers(tokenizers, options):
    ours, theirs = tokenizers
    same(ours(TEXTS, **options), theirs(TEXTS, **options))
    same(ours(TEXTS[3], **options), theirs(TEXTS[3], **options))


def test_left_truncation_with_overflow_equals_transformers(tokenizers):
    ours, theirs = tokenizers
    ours.truncation_side = theirs.truncation_side = "left"
    options = {"truncation": True, "max_length": 5, "stride": 2, "return_overflowing_tokens": True}
    same(ours(TEXTS, **options), theirs(TEXTS, **options))


def test_decode_and_batch_decode_equal_transformers(tokenizers):
    ours, theirs = tokenizers
    batch = theirs(TEXTS, padding=True)["input_ids"]
    for skip in (False, True):
        assert ours.batch_decode(batch, skip_special_tokens=skip) == theirs.batch_decode(
            batch, skip_special_tokens=skip
        )
        assert ours.decode(batch[12], skip_special_tokens=skip) == theirs.decode(
            batch[12], skip_special_tokens=skip
        )


def test_chat_template_equals_transformers(tokenizers):
    ours, theirs = tokenizers
    text = ours.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert text == theirs.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    ids = ours.apply_chat_template(CHAT, tokenize=True)
    assert ids == theirs.apply_chat_template(CHAT, tokenize=True)
    # The rendered chat holds special tokens (</s> or <|endoftext|>) matched as such.
    eos = ours.convert_tokens_to_ids(ours.eos_token)
    assert eos in ids["input_ids"]
    same(
        ours.apply_chat_template([CHAT, CHAT[:1]], tokenize=True, padding=True),
        theirs.apply_chat_template([CHAT, CHAT[:1]], tokenize=True, padding=True),
    )


def test_split_special_tokens_encodes_them_as_text_as_transformers(tokenizers):
    ours, theirs = tokenizers
    texts = ["<s> a </s>", "x<|endoftext|>", " [INST] hi"]
    same(ours(texts, split_special_tokens=True), theirs(texts, split_special_tokens=True))


def test_add_bos_token_follows_the_post_processor(tmp_path):
    folder = make_folder(tmp_path, GPT2_DIR, GPT2_CONFIG)
    ours, theirs = pair(folder, add_bos_token=True, add_eos_token=True)
    same(ours(["a b", ""]), theirs(["a b", ""]))
    assert ours("a b")["input_ids"] == [50256, 64, 275, 50256]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(
                [" ", "  ", "▁", "\n", "\t", "a", "bc", "Hello", "中", "😀", "'s", "1", "."]
                + ["<s>", "</s>", "[INST]", "<unk>", "<|endoftext|>", "<s", "\x00"]
            ),
            max_size=12,
        ).map("".join),
        min_size=1,
        max_size=6,
    )
)
def test_hypothesis_texts_equal_transformers_on_bundled_gpt2(texts):
    ours, theirs = _bundled_gpt2()
    same(ours(texts, padding=True), theirs(texts, padding=True))


@needs_shared
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(
                [" ", "  ", "▁", "\n", "\t", "a", "bc", "Hello", "中", "😀", "'s", "1", "."]
                + ["<s>", "</s>", "[INST]", "[/INST]", "<unk>", "<s", "\x00", "\u0301"]
            ),
            max_size=12,
        ).map("".join),
        min_size=1,
        max_size=6,
    )
)
def test_hypothesis_texts_equal_transformers_on_mistral(texts):
    ours, theirs = _mistral()
    same(ours(texts, padding=True), theirs(texts, padding=True))


_CACHE: dict = {}


def _bundled_gpt2():
    if "gpt2" not in _CACHE:
        _CACHE["gpt2"] = pair(GPT2_DIR, pad_token="<|endoftext|>")
    return _CACHE["gpt2"]


def _mistral():
    if "mistral" not in _CACHE:
        _CACHE["mistral"] = pair(MISTRAL, pad_token="</s>")
    return _CACHE["mistral"]


@needs_shared
@pytest.mark.parametrize(
    "corpus",
    ["code/code_python", "code/code_c", "multilingual/ud_gsd_ja", "multilingual/ud_gsd_ru"],
)
def test_shared_corpus_lines_equal_transformers_on_mistral(corpus):
    path = Path(SHARED) / "corpora" / f"{corpus}.txt.xz"
    with lzma.open(path, "rt", encoding="utf-8") as f:
        lines = [f.readline() for _ in range(1500)]
    ours, theirs = _mistral()
    assert ours(lines)["input_ids"] == theirs(lines)["input_ids"]


def test_bundled_english_lines_equal_transformers_on_gpt2():
    lines = (DATA / "corpus.en").read_text(encoding="utf-8").splitlines()[:1500]
    ours, theirs = _bundled_gpt2()
    assert ours(lines)["input_ids"] == theirs(lines)["input_ids"]


# -- as_hf: a bytepair tokenizer made into one ----------------------------------------------


def test_as_hf_of_a_loaded_tokenizer_equals_transformers_on_its_saved_folder(tmp_path):
    tok = bytepair.load(GPT2_DIR / "tokenizer.json")
    ours = tok.as_hf(pad_token="<|endoftext|>", chat_template=GPT2_TEMPLATE, padding_side="left")
    tok.save_hf(tmp_path / "saved", pad_token="<|endoftext|>")
    theirs = AutoTokenizer.from_pretrained(
        tmp_path / "saved", chat_template=GPT2_TEMPLATE, padding_side="left"
    )
    same(ours(TEXTS, padding=True), theirs(TEXTS, padding=True))
    assert ours.apply_chat_template(CHAT) == theirs.apply_chat_template(CHAT)
    assert ours("hi", padding="max_length", max_length=3)["input_ids"] == [50256, 50256, 5303]


def test_as_hf_of_a_bundled_encoding_encodes_as_bytepair_with_all_specials():
    tok = bytepair.get_encoding("cl100k_base")
    hf = tok.as_hf()
    text = "hello <|endoftext|> world"
    assert hf(text)["input_ids"] == tok.encode(text, allowed_special="all")
    assert hf.decode(hf(text)["input_ids"]) == text


@needs_shared
def test_as_hf_of_a_sentencepiece_model_adds_bos_from_its_template(tmp_path):
    # A .model says nothing of BOS (issue 24 item 4): asked for here, as Mistral does.
    # It encodes as sentencepiece (" Hello" keeps the dummy "▁"), and so does
    # transformers on the folder save_hf writes for it.
    tok = bytepair.load(MISTRAL / "tokenizer.model", add_bos=True)
    hf = tok.as_hf()
    tok.save_hf(tmp_path / "saved")
    theirs = AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert hf(TEXTS)["input_ids"] == theirs(TEXTS)["input_ids"]
    assert hf("Hello")["input_ids"][0] == 1
    assert hf(" Hello")["input_ids"] == tok.encode(" Hello") == [1, 29473, 23325]


def test_as_hf_refuses_a_role_that_is_not_a_special_token():
    tok = bytepair.load(GPT2_DIR / "tokenizer.json")
    with pytest.raises(ValueError, match=r"pad_token '<pad>' is not one of the special tokens"):
        tok.as_hf(pad_token="<pad>")


# -- never silently different ---------------------------------------------------------------


def test_a_token_added_later_gives_transformers_ids(tmp_path):
    folder = make_folder(tmp_path, GPT2_DIR, GPT2_CONFIG)
    ours, theirs = pair(folder)
    for tok in (ours, theirs):
        tok.add_tokens(["<tool>", "hello"])
        tok.add_special_tokens({"additional_special_tokens": ["<|sep|>"]})
    texts = ["say hello<tool>", "a<|sep|>b", "plain"]
    same(ours(texts), theirs(texts))
    assert ours("<tool>")["input_ids"] == [50257]  # the first id after GPT-2's 50,257


def test_a_normalized_folder_qwen2_style_gives_transformers_ids(tmp_path):
    # NFC, non-special added tokens matched on the raw text: bytepair's model applies
    # both itself, so the drop-in equals transformers on text NFC changes.
    folder = make_folder(tmp_path, GPT2_DIR, GPT2_CONFIG)
    doc = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    doc["normalizer"] = {"type": "NFC"}
    doc["added_tokens"][0]["normalized"] = False
    doc["added_tokens"].append(
        {
            "id": 50257,
            "content": "<tool_call>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": False,
        }
    )
    (folder / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    ours, theirs = pair(folder)
    texts = ["e\u0301te\u0301 <tool_call>x", "A\u030a<|endoftext|>", "plain", "\u1100\u1161 ok"]
    got = ours(texts)["input_ids"]
    assert got == theirs(texts)["input_ids"]
    assert got[0][:2] == ours._bytepair.encode("\u00e9t\u00e9")  # composed by NFC


def test_normalizer_in_the_file_is_refused_naming_it(tmp_path):
    folder = make_folder(tmp_path, GPT2_DIR, GPT2_CONFIG)
    doc = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    doc["normalizer"] = {"type": "NFC"}
    (folder / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match="normalizer NFC"):
        hf_compat.from_pretrained(folder)  # the loader: <|endoftext|> is normalized
    # A bytepair tokenizer that does not normalize, with a file that does.
    with pytest.raises(ValueError, match="normalizer NFC: bytepair's model does not"):
        hf_compat.from_pretrained(folder, bytepair_tokenizer=bytepair.get_encoding("gpt2"))


@needs_shared
def test_metaspace_always_equals_transformers(tmp_path):
    folder = make_folder(tmp_path, MISTRAL, MISTRAL_CONFIG)
    doc = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    doc["pre_tokenizer"]["prepend_scheme"] = "always"
    (folder / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    ours, theirs = pair(folder)
    same(ours(TEXTS), theirs(TEXTS))
    assert ours("a[INST]b")["input_ids"] == [1, 1032, 3, 1055]  # "▁b" after [INST]


def test_an_added_token_with_lstrip_is_refused_naming_it(tmp_path):
    from tokenizers import AddedToken

    ours = hf_compat.from_pretrained(make_folder(tmp_path, GPT2_DIR, GPT2_CONFIG))
    with pytest.raises(ValueError, match=r"added token '<mask>' has lstrip"):
        ours.add_tokens([AddedToken("<mask>", lstrip=True)])


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"text_pair": "b"}, "text_pair"),
        ({"return_offsets_mapping": True}, "return_offsets_mapping"),
        ({"is_split_into_words": True}, "is_split_into_words"),
    ],
)
def test_unsupported_options_are_refused_by_name(options, name):
    ours, _ = _bundled_gpt2()
    text = ["a", "b"] if name == "is_split_into_words" else "a"
    with pytest.raises(NotImplementedError, match=name):
        ours(text, **options)


def test_windows_cut_as_tokenizers_encoding_truncate():
    assert hf_compat._windows([1, 2, 3, 4, 5, 6], 4, 2, "right") == [[1, 2, 3, 4], [3, 4, 5, 6]]
    assert hf_compat._windows([1, 2, 3, 4, 5, 6], 4, 2, "left") == [[3, 4, 5, 6], [1, 2, 3, 4]]
    assert hf_compat._windows([1, 2, 3], 0, 0, "right") == [[], [1, 2, 3]]
    with pytest.raises(ValueError, match="stride 4 must be smaller"):
        hf_compat._windows([1, 2, 3, 4, 5, 6], 4, 4, "right")
