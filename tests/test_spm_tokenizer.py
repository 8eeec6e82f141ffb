"""SentencePiece models behind ``bytepair.Tokenizer``: ``bytepair.load`` of a
``.model`` or a SentencePiece-family ``tokenizer.json``, every encode entry point,
the special-token policy, the formats it converts between, and the reports.

The small model is built here (no downloads). The Mistral v0.3 files and corpora come
from the shared folder: set BYTEPAIR_SHARED=path/to/shared (those tests are skipped
without it). ``tests/test_spm.py`` checks the core on every corpus line; a sample of
each corpus is enough here.
"""

from __future__ import annotations

import lzma
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bytepair
from bytepair.formats import detect
from bytepair.formats.sentencepiece import build
from bytepair.web.server import Registry, api_encode

SHARED = os.environ.get("BYTEPAIR_SHARED")
needs_shared = pytest.mark.skipif(
    not SHARED, reason="BYTEPAIR_SHARED is not set: no path to the Mistral files and corpora"
)
MISTRAL_DIR = Path(SHARED or ".") / "vocab" / "hf" / "mistral-7b-instruct-v0.3"
MISTRAL = MISTRAL_DIR / "tokenizer.model"
MISTRAL_JSON = MISTRAL_DIR / "tokenizer.json"
CORPORA = Path(SHARED or ".") / "corpora"
LINES_PER_CORPUS = 400

# -- a small model, built here ------------------------------------------------------------

BYTES = [(f"<0x{b:02X}>", 0.0, "BYTE") for b in range(256)]
WORDS = ["\u2581", "a", "b", "c", "\u2581a", "ab", "\u2581ab", "\u2581c", "bc"]
SMALL_PIECES = [
    ("<unk>", 0.0, "UNKNOWN"),
    ("<s>", 0.0, "CONTROL"),
    ("</s>", 0.0, "CONTROL"),
    *BYTES,
    *[(w, -float(n), "NORMAL") for n, w in enumerate(WORDS)],
]


@pytest.fixture
def small_model(tmp_path) -> Path:
    path = tmp_path / "small.model"
    path.write_bytes(build(SMALL_PIECES, byte_fallback=True))
    return path


def ids_of(tok, *pieces: str) -> list[int]:
    return [tok.model.piece_to_id(p) for p in pieces]


def test_a_model_file_is_recognised_by_its_content(small_model, tmp_path):
    renamed = tmp_path / "tokenizer.bin"
    renamed.write_bytes(small_model.read_bytes())
    assert detect(small_model) == detect(renamed) == "sentencepiece"
    assert bytepair.load(renamed).model.kind == "sentencepiece"


def test_a_small_model_encodes_by_piece_score_with_byte_fallback(small_model):
    tok = bytepair.load(small_model)
    # "▁ab" outscores nothing longer; "é" has no piece: its two UTF-8 bytes.
    assert tok.encode("ab cé") == ids_of(tok, "\u2581ab", "\u2581c", "<0xC3>", "<0xA9>")
    assert tok.decode(tok.encode("ab cé")) == "ab cé"
    assert tok.decode_single_token_bytes(tok.model.piece_to_id("\u2581ab")) == b" ab"
    assert tok.decode_single_token_bytes(tok.model.piece_to_id("<0x0A>")) == b"\n"
    assert tok.special_tokens == {"<s>": 1, "</s>": 2}
    assert tok.vocab_size == len(SMALL_PIECES) and tok.max_token_value == len(SMALL_PIECES) - 1


def test_a_special_token_in_text_raises_unless_allowed(small_model):
    tok = bytepair.load(small_model)
    with pytest.raises(ValueError, match="special token '<s>'"):
        tok.encode("a<s>b")
    # Allowed: its id; only the text before it gets the dummy prefix (HF's "first").
    assert tok.encode("a<s>b", allowed_special="all") == ids_of(tok, "\u2581a", "<s>", "b")
    # As text: what sentencepiece gives ("<" and ">" have no pieces: bytes).
    assert tok.encode("<s>", disallowed_special=()) == ids_of(
        tok, "\u2581", "<0x3C>", "<0x73>", "<0x3E>"
    )


def test_add_bos_and_add_eos_are_model_options(small_model):
    tok = bytepair.load(small_model, add_bos=True, add_eos=True)
    assert tok.model.add_bos and tok.model.add_eos
    assert tok.encode("ab") == [1, *ids_of(tok, "\u2581ab"), 2]
    assert tok.decode(tok.encode("ab")) == "ab"
    ids, offsets = tok.encode_batch_to_numpy(["ab", "c"])
    assert ids[offsets[1] : offsets[2]].tolist() == [1, *ids_of(tok, "\u2581c"), 2]
    with pytest.raises(ValueError, match="names no BOS token; name one of its special tokens"):
        bytepair.load("gpt2", add_bos=True)
    # A SentencePiece model's BOS / EOS are its own <s> / </s>: no other may be named.
    assert (tok.model.bos_token, tok.model.eos_token) == ("<s>", "</s>")
    with pytest.raises(ValueError, match="bos_token '</s>': a SentencePiece model's is its own"):
        tok.model.with_options(bos_token="</s>", add_bos=True)
    assert tok.with_options(bos_token="<s>", add_eos=False).encode("ab")[-1] != 2


def test_every_encode_entry_point_gives_the_ids_of_encode(small_model, tmp_path):
    tok = bytepair.load(small_model, add_bos=True)
    texts = ["ab c", "", "  cab\n\nbé ", "c" * 300]
    want = [tok.encode(t) for t in texts]
    assert tok.encode_batch(texts, num_threads=2) == want
    ids, offsets = tok.encode_batch_to_numpy(texts, num_threads=2)
    assert [ids[a:b].tolist() for a, b in zip(offsets, offsets[1:])] == want
    assert [tok.count_tokens(t) for t in texts] == [len(w) for w in want]
    assert tok.encode_to_numpy(texts[2]).tolist() == want[2]
    whole = "".join(texts)
    assert list(tok.encode_iterable(texts)) == tok.encode(whole)
    # A file is one text: no cut inside a SentencePiece text is exact in general.
    src, dst = tmp_path / "in.txt", tmp_path / "out.bin"
    src.write_text(whole * 50, encoding="utf-8")
    n = tok.encode_file(src, dst, num_threads=2)
    assert np.fromfile(dst, dtype="<u2").tolist() == tok.encode(whole * 50)
    assert n == len(tok.encode(whole * 50))


def test_our_own_file_and_pickle_keep_the_model_and_its_options(small_model, tmp_path):
    tok = bytepair.load(small_model, add_bos=True)
    tok.save(tmp_path / "t.bytepair")
    again = bytepair.load(tmp_path / "t.bytepair")
    assert again.model.to_bytes() == small_model.read_bytes() and again.model.add_bos
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.encode("ab c") == tok.encode("ab c") and copy.model.add_bos


def test_a_unigram_model_is_refused_and_a_corrupt_one_names_its_offset(small_model, tmp_path):
    data = small_model.read_bytes()
    cut = tmp_path / "cut.model"
    cut.write_bytes(data[:50])
    with pytest.raises(ValueError, match=r"cut\.model: corrupt SentencePiece model at byte \d+"):
        bytepair.load(cut)
    unigram = tmp_path / "unigram.model"
    # model_type is field 3 of the trainer spec (before vocab_size, field 4): BPE (2)
    # -> UNIGRAM (1).
    at = data.rindex(b"\x18\x02\x20")
    unigram.write_bytes(data[:at] + b"\x18\x01" + data[at + 2 :])
    with pytest.raises(ValueError, match="Unigram models are not supported"):
        bytepair.load(unigram)


def run(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    cmd = [sys.executable, "-m", "bytepair", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def test_the_cli_converts_shows_and_reports_on_a_model(small_model, tmp_path):
    out = run("convert", small_model, tmp_path / "t.json")
    assert out.returncode == 0, out.stderr
    back = run("convert", tmp_path / "t.json", tmp_path / "back.model")
    assert back.returncode == 0, back.stderr
    assert (tmp_path / "back.model").read_bytes() == small_model.read_bytes()
    show = run("show", "-t", small_model, "ab c")
    assert show.returncode == 0 and "[ ab][ c]" in show.stdout, show.stdout + show.stderr
    corpus = tmp_path / "c.txt"
    corpus.write_text("ab c abc\ncab\n", encoding="utf-8")
    stats = run("stats", "-t", small_model, corpus)
    assert stats.returncode == 0 and "no merges" in stats.stdout, stats.stderr
    audit = run("audit", "-t", small_model, corpus)
    assert audit.returncode == 0 and "note: a SentencePiece model has no merges" in audit.stdout


def test_the_web_page_places_tokens_on_the_text(small_model):
    tok = bytepair.load(small_model, add_bos=True)
    view = api_encode(Registry({"small": tok}), {"text": "ab c", "tokenizer": "small"})
    spans = [(t["text"], t["start"], t["end"]) for t in view["tokens"]]
    assert spans == [("<s>", 0, 0), (" ab", 0, 2), (" c", 2, 4)]


# -- Mistral v0.3 and the shared corpora --------------------------------------------------


def corpus_files() -> list[Path]:
    if not SHARED:
        return []
    files = sorted((CORPORA / "code").glob("*.txt.xz"))
    files += sorted((CORPORA / "multilingual").glob("*.txt.xz"))
    return [CORPORA / "english_gutenberg.txt.xz", *files]


def sample_lines(path: Path) -> list[str]:
    """The first lines of a corpus and an even spread of the rest."""
    with lzma.open(path, "rt", encoding="utf-8") as f:
        lines = f.read(4_000_000).split("\n")[:-1]
    step = max(1, len(lines) // LINES_PER_CORPUS)
    return lines[:100] + lines[100::step]


@pytest.fixture(scope="module")
def mistral():
    if not SHARED:
        pytest.skip("BYTEPAIR_SHARED is not set: no path to the Mistral model")
    return bytepair.load(MISTRAL)


@pytest.fixture(scope="module")
def sentencepiece_processor():
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
    return spm.SentencePieceProcessor(model_file=str(MISTRAL))


@pytest.fixture(scope="module")
def hf_mistral():
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed")
    return tokenizers.Tokenizer.from_file(str(MISTRAL_JSON))


@needs_shared
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_a_loaded_model_encodes_and_decodes_as_sentencepiece(
    mistral, sentencepiece_processor, path
):
    lines = sample_lines(path)
    want = sentencepiece_processor.encode(lines)
    got = mistral.encode_batch(lines, num_threads=2, disallowed_special=())
    bad = [line for line, a, b in zip(lines, got, want) if a != b]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:3]}"
    decoded = sentencepiece_processor.decode(want)
    assert [mistral.decode(ids) for ids in want] == decoded


def hf_comparable(line: str, specials) -> bool:
    """Not spelling a special token, which HF matches in any text (bytepair: when
    allowed)."""
    return not any(s in line for s in specials)


@needs_shared
def test_a_loaded_tokenizer_json_encodes_as_hf_tokenizers(hf_mistral):
    tok = bytepair.load(MISTRAL_JSON)
    assert tok.model.add_bos and not tok.model.add_eos  # its post-processor adds <s>
    lines = [line for path in corpus_files() for line in sample_lines(path)]
    want = [e.ids for e in hf_mistral.encode_batch(lines)]
    got = tok.encode_batch(lines, num_threads=2, allowed_special="all")
    bad = [line for line, a, b in zip(lines, got, want) if a != b]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:3]}"
    # HF's Metaspace "first": no dummy "▁" before a leading space (sentencepiece has one).
    hf = lambda t: hf_mistral.encode(t).ids  # noqa: E731
    assert tok.encode(" a") == hf(" a") == [1, tok.model.piece_to_id("\u2581a")]
    assert tok.encode("[INST] a", allowed_special="all") == hf("[INST] a")
    assert tok.encode("<unk>", allowed_special="all") == hf("<unk>") == [1, 0]
    with pytest.raises(ValueError, match="special token"):
        tok.encode("[INST] a")


@needs_shared
def test_model_to_tokenizer_json_to_model_is_byte_for_byte(mistral, hf_mistral, tmp_path):
    mistral.save(tmp_path / "tokenizer.json")
    assert bytepair.load(tmp_path / "tokenizer.json").model.to_bytes() == MISTRAL.read_bytes()
    # HF's own file has no scores: they come back from the merge order, encoding the same.
    rebuilt = bytepair.load(MISTRAL_JSON)
    rebuilt.save(tmp_path / "rebuilt.model")
    again = bytepair.load(tmp_path / "rebuilt.model")
    lines = sample_lines(CORPORA / "english_gutenberg.txt.xz")
    assert again.encode_batch(lines, disallowed_special=()) == mistral.encode_batch(
        lines, disallowed_special=()
    )
    # And what we write, tokenizers loads to the same ids.
    tokenizers = pytest.importorskip("tokenizers")
    ours = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    specials = list(mistral.special_tokens)
    lines = [line for line in lines if hf_comparable(line, specials)]
    assert [e.ids for e in ours.encode_batch(lines)] == mistral.encode_batch(lines)
    # sentencepiece's dummy prefix, which Metaspace alone would not add, is kept.
    for text in (" a", "    indented", "\n  x", "▁x"):
        assert ours.encode(text).ids == mistral.encode(text)


@needs_shared
@pytest.mark.parametrize("add_bos", [True, False])
def test_a_saved_hf_folder_loads_in_transformers_with_the_same_ids(mistral, tmp_path, add_bos):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    tok = mistral if not add_bos else bytepair.load(MISTRAL, add_bos=True)
    tok.save_hf(tmp_path / "folder")
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "folder"))
    assert (auto.bos_token, auto.eos_token, auto.unk_token) == ("<s>", "</s>", "<unk>")
    lines = [
        line
        for line in sample_lines(CORPORA / "english_gutenberg.txt.xz")[:200]
        if hf_comparable(line, tok.special_tokens)
    ]
    assert [auto(line)["input_ids"] for line in lines] == tok.encode_batch(lines)
    # A .model loaded with add_bos keeps its <s> in the saved folder (issue 24).
    assert (auto("  Hi")["input_ids"][:1] == [1]) is add_bos
    assert auto("  Hi")["input_ids"] == tok.encode("  Hi")
    assert auto.decode(tok.encode("Hello world"), skip_special_tokens=True) == "Hello world"


def test_sentencepiece_documents_are_encoded_whole(small_model):
    from bytepair.sources import part_chars_for

    # The dummy prefix and the whitespace rules depend on where a text starts.
    assert part_chars_for(bytepair.load(small_model)) is None


def test_a_changed_metaspace_is_followed_or_refused_not_the_embedded_model(small_model, tmp_path):
    import json

    path = tmp_path / "t.json"
    bytepair.load(small_model).save(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    # The exact .model stays embedded, but the file's components rule: sentencepiece's
    # prefix needs the normalizer written with it, so without it Metaspace "first" is
    # tokenizers' (" ab" one "▁"), and with it "always" is refused by name.
    normalizer = doc["normalizer"]
    doc["normalizer"] = None
    path.write_text(json.dumps(doc), encoding="utf-8")
    tok = bytepair.load(path)
    assert tok.model.prefix == "first"
    assert tok.encode(" ab") == ids_of(tok, "\u2581ab")
    doc["normalizer"] = normalizer
    doc["pre_tokenizer"]["prepend_scheme"] = "always"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=r"normalizer Replace\+Replace before a Metaspace"):
        bytepair.load(path)
