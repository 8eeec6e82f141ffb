"""A ``tokenizer.json``'s post-processor is the frame of every text (BOS / EOS), for
byte-level files as for the SentencePiece family: encoded as ``tokenizers`` encodes
with ``add_special_tokens=True`` (its default), off with ``add_bos=False`` /
``add_eos=False`` (``add_special_tokens=False``), kept by ``save_hf``, and refused by
name where one BOS and one EOS cannot say what it does.

Files are GPT-2's ``tokenizer.json`` with two more special tokens and each
post-processor shape, and Llama 3's as Meta publishes it (``Sequence[ByteLevel,
TemplateProcessing(<|begin_of_text|> $A)]``), built from llama-models' file.
"""

from __future__ import annotations

import copy
import json
import lzma
import random
import unicodedata
from importlib import resources
from pathlib import Path

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair

from conftest import DATA, assert_every_path_encodes_as, needs_shared, shared_corpus_files

BOS, EOS = "<|bos|>", "<|eos|>"
BOS_ID, EOS_ID = 50257, 50258


def special(token: str, type_id: int = 0) -> dict:
    return {"SpecialToken": {"id": token, "type_id": type_id}}


def text(name: str = "A", type_id: int = 0) -> dict:
    return {"Sequence": {"id": name, "type_id": type_id}}


def template(single: list[dict], ids: dict[str, int]) -> dict:
    return {
        "type": "TemplateProcessing",
        "single": single,
        "pair": single + single,
        "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in ids.items()},
    }


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False}
SHAPES = {
    "bos": template([special(BOS), text()], {BOS: BOS_ID}),
    "eos": template([text(), special(EOS)], {EOS: EOS_ID}),
    "bos_eos": template([special(BOS), text(), special(EOS)], {BOS: BOS_ID, EOS: EOS_ID}),
    "byte_level_then_template": {
        "type": "Sequence",
        "processors": [BYTE_LEVEL, template([special(BOS), text()], {BOS: BOS_ID})],
    },
    "roberta": {"type": "RobertaProcessing", "cls": [BOS, BOS_ID], "sep": [EOS, EOS_ID]},
    "bert": {"type": "BertProcessing", "cls": [BOS, BOS_ID], "sep": [EOS, EOS_ID]},
    "byte_level_only": BYTE_LEVEL,
}
#: What each shape puts around a text: (BOS, EOS) or None.
FRAMES = {
    "bos": (BOS, None),
    "eos": (None, EOS),
    "bos_eos": (BOS, EOS),
    "byte_level_then_template": (BOS, None),
    "roberta": (BOS, EOS),
    "bert": (BOS, EOS),
    "byte_level_only": (None, None),
}
TEXTS = ["", "Hello world", "  two  spaces\n\nand lines ", "café 🎉 <|endoftext|> x"]


def gpt2_doc(post_processor: dict | None) -> dict:
    """GPT-2's tokenizer.json with <|bos|> and <|eos|> and this post-processor."""
    doc = json.loads((DATA / "gpt2" / "tokenizer.json").read_text(encoding="utf-8"))
    for token, i in ((BOS, BOS_ID), (EOS, EOS_ID)):
        entry = dict(doc["added_tokens"][0], content=token, id=i, normalized=False)
        doc["added_tokens"].append(entry)
        doc["model"]["vocab"][token] = i
    doc["post_processor"] = copy.deepcopy(post_processor)
    return doc


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[bytepair.Tokenizer, tokenizers.Tokenizer]]:
    tmp = tmp_path_factory.mktemp("post")
    out = {}
    for name, post in SHAPES.items():
        path = write(tmp / f"{name}.json", gpt2_doc(post))
        out[name] = (bytepair.load(path), tokenizers.Tokenizer.from_file(str(path)))
    return out


@pytest.mark.parametrize("name", SHAPES)
def test_each_post_processor_frames_every_path_as_tokenizers_does(files, name, tmp_path):
    tok, hf = files[name]
    bos, eos = FRAMES[name]
    assert (tok.model.add_bos, tok.model.add_eos) == (bos is not None, eos is not None)
    assert tok.model.bos_token == bos and tok.model.eos_token == eos
    rng = random.Random(3)
    for t in TEXTS:
        want = hf.encode(t).ids  # add_special_tokens=True, tokenizers' default
        if "<|" not in t:  # (the default policy refuses text spelling a special token)
            assert_every_path_encodes_as(tok, t, lambda s: hf.encode(s).ids, tmp_path, rng)
        assert tok.encode(t, allowed_special="all") == want, t
        assert tok.count_tokens(t, allowed_special="all") == len(want)
    bare = tok.with_options(add_bos=False, add_eos=False)
    for t in TEXTS:
        want = hf.encode(t, add_special_tokens=False).ids
        assert bare.encode(t, allowed_special="all") == want, t


def test_the_frame_wraps_a_long_text_once_however_it_is_cut(files, tmp_path):
    tok, hf = files["bos_eos"]
    long = "Some words, and more words.\n" * 40_000  # > 1 MB: cut in batches and blocks
    want = hf.encode(long).ids
    assert want[0] == BOS_ID and want[-1] == EOS_ID
    assert tok.encode(long) == want
    assert tok.encode_batch([long, "x", long], num_threads=2) == [want, hf.encode("x").ids, want]
    flat, offsets = tok.encode_batch_to_numpy([long, long], num_threads=2)
    assert flat[offsets[1] : offsets[2]].tolist() == want
    assert list(tok.encode_iterable(long[i : i + 4096] for i in range(0, len(long), 4096))) == want
    src = tmp_path / "long.txt"
    src.write_text(long, encoding="utf-8")
    assert tok.encode_file(src, tmp_path / "out.npy", num_threads=2) == len(want)


@settings(max_examples=120, deadline=None, database=None)
@given(st.text(st.characters(codec="utf-8"), max_size=60))
def test_hypothesis_text_is_framed_as_tokenizers_frames_it(files, t):
    tok, hf = files["bos_eos"]
    assert tok.encode(t, disallowed_special=()) == hf.encode(t).ids


def test_save_hf_writes_the_template_that_transformers_and_tokenizers_follow(files, tmp_path):
    from transformers import AutoTokenizer

    tok, hf = files["bos_eos"]
    tok.save_hf(tmp_path / "folder")
    theirs = AutoTokenizer.from_pretrained(str(tmp_path / "folder"))
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "folder" / "tokenizer.json"))
    for t in TEXTS[:3]:
        assert theirs(t)["input_ids"] == again.encode(t).ids == tok.encode(t) == hf.encode(t).ids
        assert theirs(t, add_special_tokens=False)["input_ids"] == tok.with_options(
            add_bos=False, add_eos=False
        ).encode(t)
    assert (theirs.bos_token, theirs.eos_token) == (BOS, EOS)
    drop_in = tok.as_hf()  # bytepair's ids, the frame from its own post-processor
    for t in TEXTS[:3]:
        assert drop_in(t)["input_ids"] == tok.encode(t)
        assert (
            drop_in(t, add_special_tokens=False)["input_ids"]
            == hf.encode(t, add_special_tokens=False).ids
        )
    back = bytepair.load(tmp_path / "folder")
    assert (back.model.bos_token, back.model.eos_token) == (BOS, EOS)


def test_a_frame_asked_for_at_load_overrides_the_file(files, tmp_path):
    path = write(tmp_path / "t.json", gpt2_doc(SHAPES["bos"]))
    assert bytepair.load(path).encode("hi") == [BOS_ID, 5303]
    assert bytepair.load(path, add_bos=False).encode("hi") == [5303]
    with_eos = bytepair.load(path, eos_token=EOS, add_eos=True)
    assert with_eos.encode("hi") == [BOS_ID, 5303, EOS_ID]


@pytest.mark.parametrize(
    ("post", "message"),
    [
        (
            template([special(BOS), special(EOS), text()], {BOS: BOS_ID, EOS: EOS_ID}),
            "puts 2 tokens before the text",
        ),
        (template([special(BOS), text()], {BOS: 7}), r"adds '<\|bos\|>' as ids \[7\]"),
        (template([special(BOS)], {BOS: BOS_ID}), "has no \\$A"),
        (template([special("<|nope|>"), text()], {}), "adds '<\\|nope\\|>'"),
        ({"type": "Sequence", "processors": [SHAPES["bos"], SHAPES["eos"]]}, "both add tokens"),
        ({"type": "Frobnicate"}, "post_processor Frobnicate is not supported"),
    ],
)
def test_post_processors_one_bos_and_one_eos_cannot_say_are_refused_by_name(
    tmp_path, post, message
):
    path = write(tmp_path / "t.json", gpt2_doc(post))
    with pytest.raises(ValueError, match=message) as e:
        bytepair.load(path)
    assert str(path) in str(e.value)


def test_byte_fallback_in_a_byte_level_file_is_read_it_never_applies(tmp_path):
    # Every byte is a token of a byte-level BPE: tokenizers never falls back.
    doc = gpt2_doc(None)
    doc["model"].update(byte_fallback=True, unk_token="<|endoftext|>", fuse_unk=True)
    path = write(tmp_path / "t.json", doc)
    hf = tokenizers.Tokenizer.from_file(str(path))
    tok = bytepair.load(path)
    for t in ["plain", "\x00\x7f é 🎉", "中文"]:
        assert tok.encode(t) == hf.encode(t).ids


def meta_llama3_json(tmp_path: Path) -> Path | None:
    """Llama 3's tokenizer.json as Meta publishes it: transformers' conversion of
    llama-models' file, with the post-processor that puts <|begin_of_text|> first."""
    try:
        from transformers.convert_slow_tokenizer import TikTokenConverter

        model = resources.files("llama_models") / "llama3" / "tokenizer.model"
    except ImportError:
        return None
    from bytepair.patterns import LLAMA3_PATTERN

    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    converter = TikTokenConverter(
        vocab_file=str(model), pattern=LLAMA3_PATTERN, extra_special_tokens=specials
    )
    path = tmp_path / "llama3.json"
    converter.converted().save(str(path))
    doc = json.loads(path.read_text(encoding="utf-8"))
    bos = "<|begin_of_text|>"
    bos_id = next(e["id"] for e in doc["added_tokens"] if e["content"] == bos)
    single = [special(bos), text()]
    doc["post_processor"] = {
        "type": "Sequence",
        "processors": [
            dict(BYTE_LEVEL, use_regex=True),
            {
                "type": "TemplateProcessing",
                "single": single,
                "pair": [*single, special(bos, 1), text("B", 1)],
                "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
            },
        ],
    }
    return write(path, doc)


@pytest.fixture(scope="module")
def meta_llama3(tmp_path_factory) -> tuple[bytepair.Tokenizer, tokenizers.Tokenizer]:
    path = meta_llama3_json(tmp_path_factory.mktemp("llama3"))
    if path is None:
        pytest.skip("llama-models or transformers is not installed: no Llama 3 file to build")
    return bytepair.load(path), tokenizers.Tokenizer.from_file(str(path))


def test_llama3_as_meta_publishes_it_starts_every_text_with_begin_of_text(meta_llama3):
    tok, hf = meta_llama3
    assert tok.model.bos_token == "<|begin_of_text|>" and not tok.model.add_eos
    for t in [*TEXTS[:3], "việc làm ở Hà Nội"]:
        assert tok.encode(t) == hf.encode(t).ids
        assert tok.encode(t)[0] == 128000
    assert (
        tok.with_options(add_bos=False).encode("Hello")
        == hf.encode("Hello", add_special_tokens=False).ids
    )


@needs_shared
def test_llama3_as_meta_publishes_it_frames_every_shared_corpus_line_as_tokenizers(meta_llama3):
    tok, hf = meta_llama3
    mismatches = {}
    for corpus in shared_corpus_files():
        with lzma.open(corpus, "rt", encoding="utf-8", newline="") as f:
            lines = f.read(1_000_000).splitlines()
        lines += [unicodedata.normalize("NFD", line) for line in lines[:2000]]
        ours = tok.encode_batch(lines, allowed_special="all", num_threads=2)
        theirs = [e.ids for e in hf.encode_batch(lines)]  # add_special_tokens=True
        bad = [line for line, a, b in zip(lines, ours, theirs) if a != b]
        if bad:
            mismatches[corpus.name] = (len(bad), bad[0][:80])
    assert mismatches == {}
