"""SentencePiece BPE models (`bytepair._core.SentencePieceModel`) against the real
`sentencepiece` library: the same ids, the same decoded text, the same normalized
text, on real corpora, on generated text and on small models trained here with
every normalizer option.

Needs `sentencepiece` (skipped without it). The Mistral model and the corpora come
from the shared folder: set BYTEPAIR_SHARED=path/to/shared (those tests are skipped
without it).
"""

from __future__ import annotations

import io
import lzma
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bytepair._core import SentencePieceModel

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

DATA = Path(__file__).parent / "data"
SHARED = os.environ.get("BYTEPAIR_SHARED")
needs_shared = pytest.mark.skipif(
    not SHARED, reason="BYTEPAIR_SHARED is not set: no path to the Mistral model and corpora"
)
MISTRAL_DIR = Path(SHARED or ".") / "vocab" / "hf" / "mistral-7b-instruct-v0.3"
MISTRAL = MISTRAL_DIR / "tokenizer.model"
CORPORA = Path(SHARED or ".") / "corpora"
ENGLISH_PREFIX_CHARS = 20_000_000


def load_both(data: bytes, name: str = "<test model>"):
    """(ours, sentencepiece's) for the same model bytes."""
    return SentencePieceModel.from_bytes(data, name), spm.SentencePieceProcessor(model_proto=data)


@pytest.fixture(scope="module")
def mistral():
    if not SHARED:
        pytest.skip("BYTEPAIR_SHARED is not set: no path to the Mistral model")
    return load_both(MISTRAL.read_bytes(), str(MISTRAL))


# -- small models trained here, one per normalizer / vocabulary option -------------------

TRAINING_TEXT = [
    line
    for name in ("corpus.en", "german.txt", "address.txt", "tinystories_sample.txt")
    for line in (DATA / name).read_text(encoding="utf-8").splitlines()
    if line.strip()
] + [
    "Ünïcödé ½ ﬁ ｆｕｌｌｗｉｄｔｈ ① Ⅻ ㈱ — “quotes” ‘x’ … ¼",
    "  leading and   inner   spaces\tand\ttabs  ",
    "中文字符和日本語のテキスト 한국어 텍스트",
    "def f(x):\n    return x  # indented code",
]

VARIANTS = {
    # sentencepiece's defaults: NFKC rules, extra whitespace removed.
    "nfkc_bytes": dict(normalization_rule_name="nmt_nfkc", byte_fallback=True),
    # No byte fallback: unknown characters become <unk>, runs of them one <unk>.
    "identity_unk": dict(
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        user_defined_symbols=["<x>", "@@", "ab"],
    ),
    "suffix_nfkc_cf": dict(
        normalization_rule_name="nfkc_cf",
        treat_whitespace_as_suffix=True,
        byte_fallback=True,
    ),
    "no_dummy_prefix": dict(
        normalization_rule_name="identity",
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        byte_fallback=True,
    ),
    # Pieces may span words: merges cross whitespace, so words cannot be cached apart.
    "across_words": dict(
        normalization_rule_name="identity",
        split_by_whitespace=False,
        allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False,
        byte_fallback=True,
    ),
}


def train(**options) -> bytes:
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAINING_TEXT),
        model_writer=out,
        vocab_size=options.pop("vocab_size", 700),
        model_type=options.pop("model_type", "bpe"),
        hard_vocab_limit=False,
        character_coverage=0.98,
        minloglevel=2,
        **options,
    )
    return out.getvalue()


def with_unused_pieces(data: bytes) -> bytes:
    """The model with every 5th multi-character normal piece marked UNUSED."""
    model_pb2 = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    proto = model_pb2.ModelProto()
    proto.ParseFromString(data)
    normal = [p for p in proto.pieces if p.type == p.NORMAL and len(p.piece) > 1]
    for p in normal[::5]:
        p.type = p.UNUSED
    return proto.SerializeToString()


@pytest.fixture(scope="module")
def trained():
    """{variant: model bytes}, the UNUSED variant included."""
    models = {name: train(**dict(options)) for name, options in VARIANTS.items()}
    models["unused"] = with_unused_pieces(models["nfkc_bytes"])
    return models


@pytest.fixture(scope="module")
def trained_pairs(trained):
    return {name: load_both(data, name) for name, data in trained.items()}


# -- exactness on text --------------------------------------------------------------------

WHITESPACE = [" ", "  ", " " * 17, "\t", "\n", "\r\n", "\x0b", "\x0c", "\u00a0", "\u2028"]
WHITESPACE += ["\u3000", "\u200b", "\u2581", "\u2581\u2581", "\u1680", "\u2009"]
ATOMS = WHITESPACE + [
    "a",
    "b",
    "ab",
    "the",
    "The",
    "x" * 40,
    "ab" * 15,
    "é",
    "e\u0301",
    "\u0301\u0302",
    "ß",
    "ﬁ",
    "½",
    "①",
    "中",
    "文",
    "ก",
    "😀",
    "👍🏽",
    "👨‍👩‍👧",
    "\x00",
    "\x01",
    "\x7f",
    "\x9f",
    "\ufeff",
    "\ufffd",
    "0",
    "42",
    "12345",
    ".",
    "<x>",
    "@@",
    "<s>",
    "</s>",
    "[INST]",
    "<unk>",
    "<0x41>",
]
TEXTS = st.one_of(
    st.lists(st.sampled_from(ATOMS), max_size=30).map("".join),
    st.text(max_size=60),
    st.text(st.characters(categories=["Zs", "Cc", "Mn", "Cf"]), max_size=30),
)


def check_same(ours, theirs, text: str) -> None:
    ids = theirs.encode(text)
    assert ours.encode(text) == ids, f"encode({text!r})"
    assert ours.decode(ids) == theirs.decode(ids), f"decode(encode({text!r}))"
    assert ours.normalize(text) == theirs.normalize(text), f"normalize({text!r})"


@given(TEXTS)
def test_generated_text_encodes_and_decodes_as_sentencepiece_on_trained_models(trained_pairs, text):
    for ours, theirs in trained_pairs.values():
        check_same(ours, theirs, text)


@needs_shared
@given(TEXTS)
def test_generated_text_encodes_and_decodes_as_sentencepiece_on_mistral(mistral, text):
    check_same(*mistral, text)


@pytest.mark.parametrize(
    "text",
    ["", " ", "   ", "\n", "a", " a", "a ", "  a  b  ", "\t\n", "▁", "▁a", "x" * 5000],
)
def test_edge_cases_match_sentencepiece(trained_pairs, text):
    for ours, theirs in trained_pairs.values():
        check_same(ours, theirs, text)


def test_bos_and_eos_are_added_as_sentencepiece_adds_them(trained_pairs):
    for ours, theirs in trained_pairs.values():
        for bos, eos in [(True, False), (False, True), (True, True)]:
            with_options = SentencePieceModel.from_bytes(ours.to_bytes(), add_bos=bos, add_eos=eos)
            got = with_options.encode("a b")
            assert got == theirs.encode("a b", add_bos=bos, add_eos=eos)


def test_encode_batch_equals_encode_one_by_one(trained_pairs):
    ours, _ = trained_pairs["nfkc_bytes"]
    texts = TRAINING_TEXT[:300]
    assert ours.encode_batch(texts, num_threads=2) == [ours.encode(t) for t in texts]


# -- decoding arbitrary ids ---------------------------------------------------------------


@given(st.data())
def test_any_id_sequence_decodes_as_sentencepiece_decodes_it(trained_pairs, data):
    for name, (ours, theirs) in trained_pairs.items():
        n = len(ours)
        # Bias towards the interesting ids: control, unk, bytes and ▁-pieces come first.
        ids = data.draw(st.lists(st.integers(0, min(n - 1, 300)) | st.integers(0, n - 1)))
        assert ours.decode(ids) == theirs.decode(ids), f"{name}: decode({ids})"


def test_an_id_outside_the_vocabulary_raises_index_error(trained_pairs):
    ours, theirs = trained_pairs["nfkc_bytes"]
    for bad in [len(ours), -1]:
        with pytest.raises(IndexError):
            theirs.decode([bad])
        with pytest.raises(IndexError):
            ours.decode([bad])


# -- the vocabulary -----------------------------------------------------------------------


def test_pieces_scores_and_types_are_sentencepieces(trained_pairs):
    kinds = {
        "CONTROL": "is_control",
        "UNKNOWN": "is_unknown",
        "UNUSED": "is_unused",
        "BYTE": "is_byte",
    }
    for ours, theirs in trained_pairs.values():
        pieces = ours.pieces()
        assert len(pieces) == len(ours) == theirs.get_piece_size()
        for i, (piece, score, kind) in enumerate(pieces):
            assert piece == theirs.id_to_piece(i) == ours.id_to_piece(i)
            assert score == pytest.approx(theirs.get_score(i), abs=0)
            for name, method in kinds.items():
                assert (kind == name) == getattr(theirs, method)(i), (i, piece, kind)
            assert ours.piece_to_id(piece) == theirs.piece_to_id(piece)
        assert ours.piece_to_id("no such piece") == theirs.piece_to_id("no such piece")


# -- reading and writing the file ---------------------------------------------------------


def test_an_unchanged_model_is_written_back_byte_for_byte(trained):
    for name, data in trained.items():
        assert SentencePieceModel.from_bytes(data, name).to_bytes() == data, name


@needs_shared
def test_mistral_is_written_back_byte_for_byte(mistral):
    assert mistral[0].to_bytes() == MISTRAL.read_bytes()


def test_a_unigram_model_is_refused_with_a_clear_error():
    data = train(model_type="unigram", vocab_size=300)
    with pytest.raises(ValueError, match="unigram.model: Unigram models are not supported"):
        SentencePieceModel.from_bytes(data, "unigram.model")


@pytest.mark.parametrize("cut", [1, 2, 7, 1000, -3])
def test_a_truncated_model_names_the_path_and_the_byte_offset(trained, cut):
    data = trained["nfkc_bytes"]
    with pytest.raises(ValueError, match=r"^cut\.model: corrupt SentencePiece model at byte \d+"):
        SentencePieceModel.from_bytes(data[:cut], "cut.model")


def test_a_corrupt_length_names_its_offset(trained):
    data = bytearray(trained["nfkc_bytes"])
    # The first field is piece 0: tag 0x0a at byte 0, its length at byte 1.
    assert data[0] == 0x0A
    data[1] = 0x7F
    with pytest.raises(ValueError) as info:
        SentencePieceModel.from_bytes(bytes(data), "bad.model")
    message = str(info.value)
    assert re.match(r"bad\.model: corrupt SentencePiece model at byte \d+: ", message), message


def test_bytes_that_are_not_protobuf_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not.model: corrupt SentencePiece model at byte 0"):
        SentencePieceModel.from_bytes(b"\xff" * 20, "not.model")


# -- every line of the shared corpora -----------------------------------------------------


def corpus_files():
    if not SHARED:
        return []
    files = sorted((CORPORA / "code").glob("*.txt.xz"))
    files += sorted((CORPORA / "multilingual").glob("*.txt.xz"))
    return [CORPORA / "english_gutenberg.txt.xz", *files]


def read_lines(path: Path) -> list[str]:
    with lzma.open(path, "rt", encoding="utf-8") as f:
        if path.name.startswith("english_gutenberg"):
            # The first 20 MB, whole lines only.
            return f.read(ENGLISH_PREFIX_CHARS).rsplit("\n", 1)[0].split("\n")
        return f.read().split("\n")


@needs_shared
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_every_corpus_line_encodes_and_decodes_as_sentencepiece(mistral, path):
    ours, theirs = mistral
    lines = read_lines(path)
    want = theirs.encode(lines, num_threads=2)
    got = ours.encode_batch(lines, num_threads=2)
    bad = [(i, line) for i, (line, a, b) in enumerate(zip(lines, got, want)) if a != b]
    shown = "\n".join(f"line {i + 1}: {line[:200]!r}" for i, line in bad[:5])
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g.\n{shown}"
    decoded = theirs.decode(want, num_threads=2)
    bad = [i for i, ids in enumerate(want) if ours.decode(ids) != decoded[i]]
    shown = "\n".join(f"line {i + 1}: {lines[i][:200]!r}" for i in bad[:5])
    assert not bad, f"decode differs on {len(bad)} lines, e.g.\n{shown}"


# -- Hugging Face tokenizers' conversion of the same model -------------------------------


@pytest.fixture(scope="module")
def mistral_hf():
    tokenizers = pytest.importorskip("tokenizers")
    if not SHARED:
        pytest.skip("BYTEPAIR_SHARED is not set: no path to the Mistral tokenizer.json")
    return tokenizers.Tokenizer.from_file(str(MISTRAL_DIR / "tokenizer.json"))


@needs_shared
def test_hf_tokenizers_agrees_except_on_leading_spaces_and_special_tokens(mistral, mistral_hf):
    """HF's `tokenizer.json` for Mistral differs from sentencepiece in exactly two ways:
    its Metaspace pre-tokenizer adds no dummy "▁" to a text that already starts with
    a space (" a": sentencepiece ["▁", "▁a"], HF ["▁a"]), and it matches added tokens
    such as "[INST]" and "<s>" inside the text, where sentencepiece spells them out.
    Everywhere else the ids are the same."""
    ours, _ = mistral
    specials = [t.content for t in mistral_hf.get_added_tokens_decoder().values()]
    lines = [
        line
        for path in corpus_files()
        for line in read_lines(path)[:3000]
        if not line.startswith((" ", "\u2581")) and not any(s in line for s in specials)
    ]
    hf_ids = [e.ids for e in mistral_hf.encode_batch(lines, add_special_tokens=False)]
    bad = [
        line for line, a, b in zip(lines, ours.encode_batch(lines, num_threads=2), hf_ids) if a != b
    ]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:3]}"
    hf = lambda t: mistral_hf.encode(t, add_special_tokens=False).ids  # noqa: E731
    assert ours.encode(" a") == [ours.piece_to_id("\u2581"), *hf(" a")]
    assert ours.encode("[INST]") != hf("[INST]") == [ours.piece_to_id("[INST]")]
