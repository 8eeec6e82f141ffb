"""SentencePiece-family ``tokenizer.json`` files decode exactly as ``tokenizers`` does
(``Tokenizer.decode(ids, skip_special_tokens=False)``), by the file's decoder: Llama 2's
and Mistral's ``Replace, ByteFallback, Fuse, Strip``, Gemma's without Strip,
``Metaspace`` with each prepend scheme, and none; a ``.model`` still decodes as
sentencepiece does. ``surfaces``, ``decode_with_offsets`` and ``decode_stream`` say
the same text; the decoder survives ``.bytepair``, pickle and ``save_hf``; other
decoders are refused by name.

The small files are built as in ``test_hf_sentencepiece``; the Mistral v0.3 tests need
BYTEPAIR_SHARED.
"""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hf_sentencepiece import (
    EXAMPLES,
    MISTRAL,
    SHAPES,
    SPACE,
    corpus_lines,
    load_both,
    needs_shared,
    reshape,
    train_tiny,
)

import bytepair
from bytepair.formats.hf_sentencepiece import EMBEDDED, tokenizer_json
from bytepair.web.tokens import encode_view

from conftest import DATA, shared_corpus_files

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed")

REPLACE = {"type": "Replace", "pattern": {"String": SPACE}, "content": " "}
STRIP = {"type": "Strip", "content": " ", "start": 1, "stop": 0}
CHAIN = [REPLACE, {"type": "ByteFallback"}, {"type": "Fuse"}]
DECODERS = {
    "llama2-mistral": {"type": "Sequence", "decoders": [*CHAIN, STRIP]},
    "gemma": {"type": "Sequence", "decoders": CHAIN},
    "nested": {
        "type": "Sequence",
        "decoders": [{"type": "Sequence", "decoders": CHAIN[:2]}, CHAIN[2], STRIP],
    },
    "metaspace-first": {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first"},
    "metaspace-always": {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always"},
    "metaspace-never": {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "never"},
    "metaspace-legacy": {"type": "Metaspace", "replacement": SPACE, "add_prefix_space": True},
    "none": None,
}


def theirs_decode(theirs, batch: list[list[int]]) -> list[str]:
    return theirs.decode_batch(batch, skip_special_tokens=False)


def assert_decodes_as(ours, theirs, batch: list[list[int]]) -> None:
    """Every way bytepair decodes each id list gives ``tokenizers``' text."""
    want = theirs_decode(theirs, batch)
    assert ours.decode_batch(batch) == want
    for ids, text in zip(batch, want):
        assert ours.model.decode(ids) == text
        assert ours.decode_bytes(ids) == text.encode("utf-8")
        assert b"".join(ours.model.surfaces(ids)) == text.encode("utf-8")
        assert ours.decode_with_offsets(ids)[0] == text
        assert "".join(ours.decode_stream(ids)) == text


def crafted(model) -> list[list[int]]:
    """Id lists with <s>, </s>, <unk>, a control token and byte pieces forming valid
    and invalid UTF-8 at the start, in the middle and at the end."""
    piece = model.piece_to_id
    bos, eos, unk = model.bos_id, model.eos_id, model.unk_id
    b = {x: piece(f"<0x{x:02X}>") for x in (0x20, 0x61, 0xE2, 0x9C, 0x93, 0xFF, 0x0A)}
    check = [b[0xE2], b[0x9C], b[0x93]]  # "✓"
    word, space = piece(SPACE + "the"), piece(SPACE)
    controls = [i for i, (_, _, kind) in enumerate(model.pieces) if kind == "CONTROL"]
    return [
        [],
        [bos],
        [bos, word, eos],
        [unk],
        [word, unk, word],
        [unk, word],
        controls,
        [word, *controls, word],
        check,
        [*check, word],
        [word, *check],
        [word, *check, word],
        check[:2],
        [word, *check[:2]],
        [*check[:2], word],
        [b[0x61], b[0xFF], word],  # "a" then an invalid byte: the whole run is U+FFFD
        [b[0xFF]],
        [b[0x20], word],  # a space byte at the start: Strip cuts it
        [b[0x20], b[0xFF], word],
        [space, word],
        [space, space],
        [bos, space, word],
        [b[0x0A], word, b[0x0A]],
        [word, b[0x61], unk, b[0xE2], eos, b[0x93]],
    ]


# -- Mistral v0.3 --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mistral_pair():
    path = MISTRAL / "tokenizer.json"
    return bytepair.load(path), tokenizers.Tokenizer.from_file(str(path))


@needs_shared
def test_mistral_special_and_unknown_ids_decode_as_tokenizers_not_as_sentencepiece(
    mistral_pair,
):
    ours, theirs = mistral_pair
    for ids, want in [
        ([1, 1500, 2], "<s> /</s>"),
        ([0], "<unk>"),
        ([1500, 0, 1500], "/<unk> /"),
    ]:
        assert ours.decode(ids) == want == theirs.decode(ids, skip_special_tokens=False)
    # The .model beside it still decodes as sentencepiece.
    model = bytepair.load(MISTRAL / "tokenizer.model")
    processor = spm.SentencePieceProcessor(model_file=str(MISTRAL / "tokenizer.model"))
    for ids in ([1, 1500, 2], [0], [1500, 0, 1500]):
        assert model.decode(ids) == processor.decode(ids)
    assert [model.decode(ids) for ids in ([1, 1500, 2], [0])] == ["/", " ⁇ "]
    assert_decodes_as(ours, theirs, crafted(ours.model))


@needs_shared
@pytest.mark.parametrize("path", shared_corpus_files(), ids=lambda p: p.name)
def test_mistral_decodes_every_corpus_line_as_tokenizers(mistral_pair, path):
    ours, theirs = mistral_pair
    lines = corpus_lines(path)
    batch = [e.ids for e in theirs.encode_batch(lines)]  # <s> first, as the file says
    got, want = ours.decode_batch(batch), theirs_decode(theirs, batch)
    bad = [line for line, a, b in zip(lines, got, want) if a != b]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:3]}"
    assert all(ours.decode_bytes(ids) == t.encode("utf-8") for ids, t in zip(batch, want))
    assert_decodes_as(ours, theirs, batch[:100])


@needs_shared
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_hypothesis_id_lists_decode_as_tokenizers_in_mistral(mistral_pair, data):
    ours, theirs = mistral_pair
    assert_decodes_as(ours, theirs, [data.draw(id_lists(ours.model))])


def id_lists(model) -> st.SearchStrategy[list[int]]:
    """Lists of ids weighted towards what decoders treat apart: special and unknown
    ids, byte pieces (of UTF-8 starts, continuations and invalid bytes), "▁"."""
    piece = model.piece_to_id
    byte_ids = [piece(f"<0x{x:02X}>") for x in (0x20, 0x41, 0x80, 0xA9, 0xC3, 0xE2, 0xF0, 0xFF)]
    odd = [model.bos_id, model.eos_id, model.unk_id, piece(SPACE), *byte_ids]
    ids = st.one_of(st.sampled_from(odd), st.integers(0, model.vocab_size - 1))
    return st.lists(ids, max_size=12)


@needs_shared
def test_a_mistral_encode_view_places_the_frame_bos_outside_the_text(mistral_pair):
    ours, _ = mistral_pair
    view = encode_view(ours, "Hello world")
    spans = [(t["text"], t["start"], t["end"]) for t in view["tokens"]]
    assert spans == [("<s>", 0, 0), (" Hello", 0, 5), (" world", 5, 11)]


# -- small files of each decoder shape -----------------------------------------------------


@pytest.fixture(scope="module")
def small_doc(tmp_path_factory) -> dict:
    model = train_tiny(tmp_path_factory.mktemp("spm"), "tiny", control_symbols=["[INST]"])
    doc = tokenizer_json(bytepair.load(model, add_bos=True).model)
    del doc["model"][EMBEDDED]
    return reshape(doc, *SHAPES["metaspace-first"])


def with_decoder(doc: dict, decoder) -> dict:
    doc = copy.deepcopy(doc)
    doc["decoder"] = copy.deepcopy(decoder)
    return doc


_PAIRS: dict = {}


def pair(small_doc, tmp_path_factory, shape: str):
    if shape not in _PAIRS:
        folder = tmp_path_factory.mktemp(shape.replace("-", "_"))
        _PAIRS[shape] = load_both(with_decoder(small_doc, DECODERS[shape]), folder)
    return _PAIRS[shape]


@pytest.mark.parametrize("shape", DECODERS)
def test_each_decoder_shape_decodes_as_tokenizers(small_doc, tmp_path_factory, shape):
    ours, theirs = pair(small_doc, tmp_path_factory, shape)
    lines = (DATA / "corpus.en").read_text(encoding="utf-8").splitlines()[:300]
    texts = [t.replace("<unk>", "") for t in EXAMPLES] + lines
    batch = [e.ids for e in theirs.encode_batch(texts)]
    assert_decodes_as(ours, theirs, batch + crafted(ours.model))


def test_the_decoder_shapes_differ_where_tokenizers_says(small_doc, tmp_path_factory):
    # Pinned: Strip cuts the one leading space of the text; Gemma's chain keeps it;
    # Metaspace drops the marks of the first token (even "<s>" first), "never" none;
    # without a decoder the tokens are joined with spaces.
    got = {}
    for shape in ("llama2-mistral", "gemma", "metaspace-first", "metaspace-never", "none"):
        ours, _ = pair(small_doc, tmp_path_factory, shape)
        piece = ours.model.piece_to_id
        ids = [piece(SPACE + "the"), piece(SPACE + "the"), piece("<0x41>"), ours.model.bos_id]
        got[shape] = ours.decode(ids)
    assert got == {
        "llama2-mistral": "the theA<s>",
        "gemma": " the theA<s>",
        "metaspace-first": "the the<0x41><s>",
        "metaspace-never": " the the<0x41><s>",
        "none": f"{SPACE}the {SPACE}the <0x41> <s>",
    }


@settings(max_examples=150, deadline=None)
@given(data=st.data(), shape=st.sampled_from(sorted(DECODERS)))
def test_hypothesis_id_lists_decode_as_tokenizers_in_every_shape(
    small_doc, tmp_path_factory, data, shape
):
    ours, theirs = pair(small_doc, tmp_path_factory, shape)
    assert_decodes_as(ours, theirs, [data.draw(id_lists(ours.model))])


def test_a_stream_holds_a_run_of_byte_pieces_until_it_ends(small_doc, tmp_path_factory):
    ours, _ = pair(small_doc, tmp_path_factory, "llama2-mistral")
    piece = ours.model.piece_to_id
    a, ff, word = piece("<0x61>"), piece("<0xFF>"), piece(SPACE + "the")
    decoder = bytepair.StreamDecoder(ours)
    # "a" alone would be "a"; the invalid byte after it makes the run two U+FFFD.
    assert [decoder.step(i) for i in (word, a, ff, word)] == ["the", "", "", "\ufffd\ufffd the"]
    assert decoder.flush() == ""
    check = [piece("<0xE2>"), piece("<0x9C>"), piece("<0x93>")]
    decoder = bytepair.StreamDecoder(ours)
    assert [decoder.step(i) for i in [word, *check]] == ["the", "", "", ""]
    assert decoder.flush() == "\u2713"
    # Cut short at the end: U+FFFD for each byte, as decode gives.
    assert list(ours.decode_stream([word, *check[:2]])) == ["the", "\ufffd\ufffd"]


# -- kept and written back -----------------------------------------------------------------


@pytest.mark.parametrize("shape", ["metaspace-never", "none", "gemma"])
def test_the_decoder_survives_bytepair_files_pickle_and_save_hf(
    small_doc, tmp_path_factory, tmp_path, shape
):
    ours, theirs = pair(small_doc, tmp_path_factory, shape)
    batch = crafted(ours.model)
    want = theirs_decode(theirs, batch)
    ours.save(tmp_path / "t.bytepair")
    again = bytepair.load(tmp_path / "t.bytepair")
    assert again.model.hf["decoder"] == ours.model.hf["decoder"]
    assert again.decode_batch(batch) == want
    assert pickle.loads(pickle.dumps(ours)).decode_batch(batch) == want
    ours.save_hf(tmp_path / "folder")
    written = json.loads((tmp_path / "folder" / "tokenizer.json").read_text(encoding="utf-8"))
    assert written["decoder"] == ours.model.hf["decoder"]
    reread = tokenizers.Tokenizer.from_file(str(tmp_path / "folder" / "tokenizer.json"))
    assert theirs_decode(reread, batch) == want
    assert bytepair.load(tmp_path / "folder").decode_batch(batch) == want


def test_a_model_file_exported_decodes_in_tokenizers_as_bytepair_reads_it_back(tmp_path):
    model = train_tiny(tmp_path, "tiny", control_symbols=["[INST]"])
    tok = bytepair.load(model, add_bos=True)
    tok.save(tmp_path / "tokenizer.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    back = bytepair.load(tmp_path / "tokenizer.json")
    assert back.model.to_bytes() == tok.model.to_bytes()  # the embedded .model
    assert_decodes_as(back, theirs, crafted(back.model))
    # Text decodes as sentencepiece decodes the .model (skipping <s>: the .model writes
    # nothing for it, tokenizers "<s>").
    processor = spm.SentencePieceProcessor(model_file=str(model))
    lines = (DATA / "corpus.en").read_text(encoding="utf-8").splitlines()[:200]
    batch = [processor.encode(t) for t in [*lines, " a", "  b c "]]
    assert theirs.decode_batch(batch) == processor.decode(batch) == tok.decode_batch(batch)
    assert tok.decode([tok.model.bos_id]) == "" and back.decode([back.model.bos_id]) == "<s>"


# -- refused -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decoder", "named"),
    [
        ({"type": "Replace", "pattern": {"String": "_"}, "content": " "}, "decoder Replace of"),
        ({"type": "Replace", "pattern": {"Regex": SPACE}, "content": " "}, "decoder Replace of"),
        ({"type": "WordPiece", "prefix": "##", "cleanup": True}, "decoder WordPiece"),
        ({"type": "CTC", "pad_token": "<pad>"}, "decoder CTC"),
        ({"type": "BPEDecoder", "suffix": "</w>"}, "decoder BPEDecoder"),
        ({"type": "ByteLevel"}, "decoder ByteLevel"),
        (
            {"type": "Sequence", "decoders": [*CHAIN, {**STRIP, "stop": 1}]},
            r"decoder Strip\(' ', 1, 1\)",
        ),
        ({"type": "Sequence", "decoders": [{"type": "CTC"}, *CHAIN]}, "decoder CTC"),
    ],
)
def test_a_decoder_we_cannot_reproduce_is_refused_naming_the_file_and_it(
    small_doc, tmp_path, decoder, named
):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(with_decoder(small_doc, decoder)), encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{path}: {named}"):
        bytepair.load(path)


def test_a_bytepair_file_with_a_decoder_we_cannot_reproduce_is_refused(
    small_doc, tmp_path_factory, tmp_path
):
    ours, _ = pair(small_doc, tmp_path_factory, "gemma")
    ours.save(tmp_path / "t.bytepair")
    doc = json.loads((tmp_path / "t.bytepair").read_text(encoding="utf-8"))
    doc["hf"]["decoder"] = {"type": "WordPiece"}
    path = Path(tmp_path / "bad.bytepair")
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{path}: decoder WordPiece"):
        bytepair.load(path)
