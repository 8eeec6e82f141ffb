"""Training SentencePiece BPE models (`bytepair.train_sentencepiece`) against
sentencepiece's own trainer: for the same corpus and options, the same pieces in
the same order, with the same scores and types; and the trained model encodes the
same in bytepair and in sentencepiece.

The comparisons need `sentencepiece` (skipped without it); they run on the small
corpora in tests/data and on generated text mixing scripts.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

import bytepair
from bytepair._core import SentencePieceModel

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus.en"


def sentencepiece():
    return pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")


def pieces_of(model: bytes | bytepair.Tokenizer) -> list[tuple[str, float, str]]:
    """(piece, score, type) of every piece of a `.model` (or a trained tokenizer's),
    read by bytepair."""
    data = model.model.to_bytes() if isinstance(model, bytepair.Tokenizer) else model
    return SentencePieceModel.from_bytes(data).pieces()


def sentencepiece_trains(path, vocab_size, *, normalization="identity", **options) -> bytes:
    spm = sentencepiece()
    out = io.BytesIO()
    options.setdefault("input_sentence_size", 0)
    spm.SentencePieceTrainer.train(
        input=str(path),
        model_writer=out,
        model_type="bpe",
        vocab_size=vocab_size,
        normalization_rule_name=normalization,
        minloglevel=2,
        **options,
    )
    return out.getvalue()


def both_train(path, vocab_size, **options) -> tuple[bytes, bytepair.Tokenizer]:
    """(sentencepiece's model, ours) for the same corpus and options."""
    options.setdefault("byte_fallback", False)  # sentencepiece's default
    options.setdefault("normalization", "identity")
    theirs = sentencepiece_trains(path, vocab_size, **options)
    if "max_sentencepiece_length" in options:
        options["max_piece_length"] = options.pop("max_sentencepiece_length")
    ours = bytepair.train_sentencepiece(path, vocab_size, num_threads=2, progress=False, **options)
    return theirs, ours


def mixed_scripts(path: Path, lines: int = 3000, seed: int = 7) -> Path:
    """Generated sentences mixing Latin, Cyrillic, Greek, Han, kana, Arabic, Hangul,
    digits, punctuation and combining marks: where script and number rules decide."""
    rng = random.Random(seed)
    alphabets = [
        "abcdefghij",
        "абвгдежзик",
        "αβγδεζηθ",
        "日本語中文字漢",
        "ひらがなカタカナー",
        "مرحباكتب",
        "한국어글자",
        "0123456789",
        "０１２３",
        ".,!?-'\"()",
        "e\u0301a\u0300o\u0308",
    ]
    words = [
        "".join(rng.choice(a) for _ in range(rng.randint(1, 6)))
        for a in alphabets
        for _ in range(40)
    ]
    words += [
        "".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(2, 8)))
        for _ in range(200)
    ]
    text = "\n".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(lines)
    )
    path.write_text(text + "\n", encoding="utf-8")
    return path


OPTION_SETS = {
    "defaults": {},
    "byte_fallback": {"byte_fallback": True},
    "split_digits": {"split_digits": True},
    "user_defined_and_control_symbols": {
        "user_defined_symbols": ["the", "<sep>"],
        "control_symbols": ["<cls>", "<mask>"],
    },
    "no_dummy_prefix": {"add_dummy_prefix": False},
    "whitespace_as_suffix": {"treat_whitespace_as_suffix": True},
    "whole_lines": {"split_by_whitespace": False},
    "numbers_and_scripts_unsplit": {"split_by_number": False, "split_by_unicode_script": False},
    "short_pieces_and_pad": {"max_sentencepiece_length": 4, "pad_id": 3},
    "extra_whitespace_kept": {"remove_extra_whitespaces": False},
}


@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_pieces_scores_and_types_equal_sentencepieces_on_english(options):
    theirs, ours = both_train(CORPUS, 1500, **options)
    assert pieces_of(ours) == pieces_of(theirs)


@pytest.mark.parametrize(
    "options",
    [{}, {"byte_fallback": True, "split_digits": True}, {"split_by_unicode_script": False}],
    ids=["defaults", "bytes_and_digits", "scripts_unsplit"],
)
def test_pieces_equal_sentencepieces_on_mixed_scripts(tmp_path, options):
    corpus = mixed_scripts(tmp_path / "mixed.txt")
    theirs, ours = both_train(corpus, 1500, character_coverage=1.0, **options)
    assert pieces_of(ours) == pieces_of(theirs)


def test_rare_characters_become_unknown_as_in_sentencepiece(tmp_path):
    corpus = mixed_scripts(tmp_path / "mixed.txt", seed=11)
    theirs, ours = both_train(corpus, 1200, character_coverage=0.98)
    assert pieces_of(ours) == pieces_of(theirs)


def test_reserved_text_is_a_boundary_and_tabs_are_characters(tmp_path):
    corpus = tmp_path / "tabs.txt"
    corpus.write_text("xy\txy\tq zz<s>zz the<s>\n" * 50 + "hello world\n" * 30, encoding="utf-8")
    theirs, ours = both_train(corpus, 40)
    assert pieces_of(ours) == pieces_of(theirs)
    normal = [p for p, _, kind in pieces_of(ours) if kind == "NORMAL"]
    assert "\t" in normal and not any("s>" in p for p in normal)


def test_nmt_nfkc_normalization_equals_sentencepieces():
    theirs, ours = both_train(DATA / "german.txt", 500, normalization="nmt_nfkc")
    assert pieces_of(ours) == pieces_of(theirs)


def test_a_model_given_lends_its_normalizer(tmp_path):
    theirs = sentencepiece_trains(DATA / "german.txt", 500, normalization="nfkc_cf")
    ours = bytepair.train_sentencepiece(
        DATA / "german.txt", 500, normalizer_model=theirs, byte_fallback=False, progress=False
    )
    assert pieces_of(ours) == pieces_of(theirs)


def test_the_trained_tokenizer_encodes_held_out_text_as_sentencepiece_does(tmp_path):
    spm = sentencepiece()
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    train, held_out = lines[: len(lines) * 4 // 5], lines[len(lines) * 4 // 5 :]
    (tmp_path / "train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    tok = bytepair.train_sentencepiece(
        tmp_path / "train.txt", 2000, output=tmp_path / "m.model", progress=False
    )
    assert isinstance(tok, bytepair.Tokenizer) and tok.vocab_size == 2000
    assert (tmp_path / "m.model").read_bytes() == tok.model.to_bytes()
    theirs = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    held_out += ["Ünïcödé ☃ 12345 — tabs\tand  spaces", "日本語のテキスト"]
    for line in held_out:
        assert tok.encode(line) == theirs.encode(line), line
        assert tok.decode(tok.encode(line)) == theirs.decode(theirs.encode(line))


def test_without_output_nothing_is_written_and_the_tokenizer_loads_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tok = bytepair.train_sentencepiece(CORPUS, 600, normalization="identity", progress=False)
    assert list(tmp_path.iterdir()) == []
    tok.save(tmp_path / "again.model")
    again = bytepair.load(tmp_path / "again.model")
    assert again.encode("Hello, world.") == tok.encode("Hello, world.")


def test_the_result_does_not_depend_on_the_number_of_threads():
    one = bytepair.train_sentencepiece(
        CORPUS, 1000, normalization="identity", num_threads=1, progress=False
    )
    two = bytepair.train_sentencepiece(
        CORPUS, 1000, normalization="identity", num_threads=2, progress=False
    )
    assert pieces_of(one) == pieces_of(two)


def test_a_vocabulary_too_large_for_the_corpus_names_the_largest_possible(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("ab ab abc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab_size=500 is too high .*set vocab_size <= 13\b"):
        bytepair.train_sentencepiece(corpus, 500, normalization="identity", byte_fallback=False)


def test_a_vocabulary_smaller_than_the_alphabet_says_so(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("abcdefgh\n", encoding="utf-8")
    with pytest.raises(ValueError, match="smaller than the alphabet"):
        bytepair.train_sentencepiece(corpus, 6, normalization="identity", byte_fallback=False)


def test_invalid_utf8_names_the_file_and_offset(tmp_path):
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"hello\nwor\xffld\n")
    with pytest.raises(ValueError, match=r"bad.txt: invalid UTF-8 at byte offset 9"):
        bytepair.train_sentencepiece(corpus, 300, normalization="identity")


def test_options_out_of_sentencepieces_ranges_are_refused():
    with pytest.raises(ValueError, match="character_coverage"):
        bytepair.train_sentencepiece(CORPUS, 100, character_coverage=0.5)
    with pytest.raises(ValueError, match="normalization must be one of"):
        bytepair.train_sentencepiece(CORPUS, 100, normalization="nfd")
    with pytest.raises(ValueError, match="unk_id"):
        bytepair.train_sentencepiece(CORPUS, 1000, normalization="identity", unk_id=-1)


def test_the_cli_trains_a_sentencepiece_model(tmp_path):
    from bytepair.cli import main

    out = tmp_path / "m.model"
    main(
        ["train", "--model", "sentencepiece", "--normalization", "identity", "--vocab-size", "800"]
        + ["-o", str(out), "-q", str(CORPUS)]
    )
    expected = bytepair.train_sentencepiece(CORPUS, 800, normalization="identity", progress=False)
    assert pieces_of(out.read_bytes()) == pieces_of(expected)


def test_an_unwritable_or_input_output_fails_before_training_and_leaves_nothing(tmp_path):
    copy = tmp_path / "corpus.txt"
    copy.write_bytes(CORPUS.read_bytes())
    with pytest.raises(FileNotFoundError, match="the folder .* does not exist"):
        bytepair.train_sentencepiece(copy, 500, output=tmp_path / "no" / "m.model")
    with pytest.raises(ValueError, match="is also an input"):
        bytepair.train_sentencepiece(copy, 500, output=copy)
    with pytest.raises(ValueError, match="is also an input"):
        bytepair.train_sentencepiece(tmp_path, 500, output=copy)  # the folder holds it
    assert copy.read_bytes() == CORPUS.read_bytes()
    with pytest.raises(IsADirectoryError, match="is a directory"):
        bytepair.train_sentencepiece(copy, 500, output=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


# -- inputs: everything `bytepair.train` reads, through the same sources --------------


def identity_train(inputs, vocab_size=800, **options) -> bytepair.Tokenizer:
    options = {"byte_fallback": False, "num_threads": 2, "progress": False} | options
    return bytepair.train_sentencepiece(inputs, vocab_size, normalization="identity", **options)


def corpus_lines() -> list[str]:
    return CORPUS.read_text(encoding="utf-8").splitlines()


def records(lines: list[str], per_record: int = 7) -> list[str]:
    """The lines as multi-line documents: the sentences stay the same lines."""
    return ["\n".join(lines[i : i + per_record]) for i in range(0, len(lines), per_record)]


def write_jsonl(path: Path, texts: list[str], field: str = "text") -> None:
    import json

    data = "".join(json.dumps({field: t, "id": n}) + "\n" for n, t in enumerate(texts))
    write_compressed(path, data.encode("utf-8"))


def write_compressed(path: Path, data: bytes) -> None:
    import bz2
    import gzip
    import lzma

    compress = {".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress}
    if path.suffix == ".zst":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    elif path.suffix in compress:
        data = compress[path.suffix](data)
    path.write_bytes(data)


def text_gz(tmp_path: Path, kw: dict) -> object:
    write_compressed(tmp_path / "corpus.txt.gz", CORPUS.read_bytes())
    return tmp_path / "corpus.txt.gz"


def text_zst(tmp_path: Path, kw: dict) -> object:
    write_compressed(tmp_path / "corpus.txt.zst", CORPUS.read_bytes())
    return tmp_path / "corpus.txt.zst"


def jsonl_gz_of_multiline_records(tmp_path: Path, kw: dict) -> object:
    write_jsonl(tmp_path / "corpus.jsonl.gz", records(corpus_lines()))
    return tmp_path / "corpus.jsonl.gz"


def jsonl_nested_field(tmp_path: Path, kw: dict) -> object:
    import json

    with open(tmp_path / "c.jsonl", "w", encoding="utf-8") as f:
        for line in corpus_lines():
            f.write(json.dumps({"meta": {"body": line}}) + "\n")
    kw["text_field"] = "meta.body"
    return tmp_path / "c.jsonl"


def parquet(tmp_path: Path, kw: dict) -> object:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.table({"text": records(corpus_lines(), 13)}), tmp_path / "c.parquet")
    return tmp_path / "c.parquet"


def folder_of_mixed_files(tmp_path: Path, kw: dict) -> object:
    lines = corpus_lines()
    half = len(lines) // 2
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    write_jsonl(tmp_path / "docs" / "b.jsonl.xz", lines[half:])
    (tmp_path / "docs" / "skipped.md").write_text("not matched by the glob\n", encoding="utf-8")
    kw["glob"] = "[ab].*"
    return tmp_path / "docs"


def stdin_gzip(tmp_path: Path, kw: dict) -> object:
    import gzip
    import sys

    stdin = io.TextIOWrapper(io.BytesIO(gzip.compress(CORPUS.read_bytes())))
    kw["_monkeypatch"].setattr(sys, "stdin", stdin)
    return "-"


def hf_dataset(tmp_path: Path, kw: dict) -> object:
    datasets = pytest.importorskip("datasets")
    return datasets.Dataset.from_dict({"text": records(corpus_lines(), 5)})


def text_with_doc_separator(tmp_path: Path, kw: dict) -> object:
    path = tmp_path / "docs.txt"
    docs = records(corpus_lines(), 3)
    path.write_text("<|endoftext|>".join(docs), encoding="utf-8")
    kw["doc_separator"] = "<|endoftext|>"
    return path


SOURCES = [
    text_gz,
    text_zst,
    jsonl_gz_of_multiline_records,
    jsonl_nested_field,
    parquet,
    folder_of_mixed_files,
    stdin_gzip,
    hf_dataset,
    text_with_doc_separator,
]


@pytest.mark.parametrize("make", SOURCES, ids=[f.__name__ for f in SOURCES])
def test_every_source_gives_the_model_its_lines_give_as_plain_text(tmp_path, monkeypatch, make):
    kw = {"_monkeypatch": monkeypatch}
    inputs = make(tmp_path, kw)
    del kw["_monkeypatch"]
    assert pieces_of(identity_train(inputs, **kw)) == pieces_of(identity_train(CORPUS))


@pytest.mark.parametrize("given", ["file", "stdin", "plain stdin"])
def test_a_compressed_text_is_read_by_the_core_into_pythons_model(tmp_path, monkeypatch, given):
    # Python only decompresses (or hands stdin's bytes over); the model is the one
    # Python's reading of the lines gives, byte for byte (the input's name is recorded
    # in both), and progress runs to the bytes read (compressed).
    import sys

    from bytepair.sources import text

    path = tmp_path / "corpus.txt.xz"
    write_compressed(path, CORPUS.read_bytes())
    data = CORPUS.read_bytes() if given == "plain stdin" else path.read_bytes()

    def source():
        if given == "file":
            return path
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        return "-"

    with monkeypatch.context() as patch:
        patch.setattr(text.TextSource, "core_reads", property(lambda self: False))
        python = identity_train(source()).model.to_bytes()

    def refuse(self, *args):
        raise AssertionError("read by Python")

    monkeypatch.setattr(text.TextSource, "parts", refuse)
    seen = []
    core = identity_train(source(), progress=seen.append).model.to_bytes()
    assert core == python
    assert max(seen) == len(data)


def test_compressed_json_lines_give_sentencepieces_model_of_the_same_lines(tmp_path):
    write_jsonl(tmp_path / "c.jsonl.gz", records(corpus_lines()))
    theirs = sentencepiece_trains(CORPUS, 1000, byte_fallback=True)
    ours = bytepair.train_sentencepiece(
        tmp_path / "c.jsonl.gz", 1000, normalization="identity", progress=False
    )
    assert pieces_of(ours) == pieces_of(theirs)


def test_lines_cut_between_decompressed_pieces_and_overlong_lines_count_as_in_plain_text(
    tmp_path,
):
    # Lines of every length up to 5000 bytes (max_sentence_length is 4192: the longest
    # are skipped), random enough that the decompressor's pieces end inside lines.
    rng = random.Random(3)
    words = [w for line in corpus_lines() for w in line.split()]
    lines = [" ".join(rng.choices(words, k=rng.randint(1, 900)))[:5000] for _ in range(300)]
    plain = tmp_path / "long.txt"
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_compressed(tmp_path / "long.txt.gz", plain.read_bytes())
    write_jsonl(tmp_path / "long.jsonl", records(lines, 50))
    assert sum(len(line.encode()) > 4192 for line in lines) > 10
    theirs = sentencepiece_trains(plain, 700)
    assert pieces_of(identity_train(plain, 700)) == pieces_of(theirs)
    assert pieces_of(identity_train(tmp_path / "long.txt.gz", 700)) == pieces_of(theirs)
    assert pieces_of(identity_train(tmp_path / "long.jsonl", 700)) == pieces_of(theirs)


def test_a_compressed_text_without_cut_points_streams_in_bounded_pieces(tmp_path):
    from bytepair.sources import open_sources
    from bytepair.training_spm import _parts, _whole_lines

    # Han lines ending in an ideographic space: no space, and no newline after a
    # visible character, so no point where pre-token parts are cut.
    rng = random.Random(5)
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    lines = ("".join(rng.choices(han, k=rng.randint(5, 80))) + "\u3000" for _ in range(40_000))
    text = "\n".join(lines)
    assert bytepair._core.pattern_cuts(text[:20_000].encode()) == []
    write_compressed(tmp_path / "han.txt.gz", text.encode("utf-8"))
    (src,) = open_sources(tmp_path / "han.txt.gz").sources
    pieces = list(_whole_lines(_parts(src, None), 4192))
    assert "".join(pieces) == text
    assert len(pieces) > 10 and max(map(len, pieces)) < len(text) // 10
    assert all(p.endswith("\n") for p in pieces[:-1])


def test_lone_surrogates_in_documents_train_as_replacement_characters():
    datasets = pytest.importorskip("datasets")
    lines = corpus_lines()

    def streamed(prefix):
        # A generator-backed dataset hands its strings over as made: surrogates too.
        return datasets.IterableDataset.from_generator(
            lambda: ({"text": prefix + t} for t in lines)
        )

    with_surrogates = identity_train(streamed("\ud800 "))
    assert pieces_of(with_surrogates) == pieces_of(identity_train(streamed("\ufffd ")))


def test_input_sentence_size_takes_the_first_sentences_of_any_source(tmp_path):
    write_jsonl(tmp_path / "c.jsonl.gz", records(corpus_lines()))
    theirs = sentencepiece_trains(
        CORPUS, 500, input_sentence_size=400, shuffle_input_sentence=False
    )
    plain = identity_train(CORPUS, 500, input_sentence_size=400)
    assert pieces_of(plain) == pieces_of(theirs)
    from_jsonl = identity_train(tmp_path / "c.jsonl.gz", 500, input_sentence_size=400)
    assert pieces_of(from_jsonl) == pieces_of(theirs)
    assert pieces_of(plain) != pieces_of(identity_train(CORPUS, 500))


def test_once_the_first_sentences_are_taken_later_inputs_are_not_read(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    taken = identity_train([CORPUS, bad], 500, input_sentence_size=400)
    assert pieces_of(taken) == pieces_of(identity_train(CORPUS, 500, input_sentence_size=400))
    m = pb.ModelProto()
    m.ParseFromString(taken.model.to_bytes())
    assert list(m.trainer_spec.input) == [str(CORPUS)]  # what was read
    with pytest.raises(ValueError, match=r"bad.jsonl: line 1: "):
        identity_train([CORPUS, bad], 500)


def test_invalid_utf8_in_a_compressed_file_names_it_and_the_offset_unless_replaced(tmp_path):
    data = CORPUS.read_bytes()
    bad = data[:1000] + b"\xff" + data[1000:]
    (tmp_path / "bad.txt").write_bytes(bad)
    write_compressed(tmp_path / "bad.txt.gz", bad)
    with pytest.raises(ValueError, match=r"bad.txt.gz: invalid UTF-8 at byte offset 1000\b"):
        identity_train(tmp_path / "bad.txt.gz")
    replaced = identity_train(tmp_path / "bad.txt.gz", errors="replace")
    assert pieces_of(replaced) == pieces_of(identity_train(tmp_path / "bad.txt", errors="replace"))


def test_a_bad_record_names_its_file_and_line_unless_skipped(tmp_path):
    import json

    lines = corpus_lines()
    good = "".join(json.dumps({"text": t}) + "\n" for t in lines)
    (tmp_path / "c.jsonl").write_text(good + '{"body": "no text"}\n', encoding="utf-8")
    n = len(lines) + 1
    with pytest.raises(ValueError, match=rf"c.jsonl: line {n}: no field 'text'"):
        identity_train(tmp_path / "c.jsonl")
    with pytest.warns(UserWarning, match=r"skipped 1 bad record\(s\): .*c.jsonl \(1\)"):
        skipped = identity_train(tmp_path / "c.jsonl", skip_bad_records=True)
    assert pieces_of(skipped) == pieces_of(identity_train(CORPUS))


def test_the_model_records_the_inputs_it_read(tmp_path):
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    write_jsonl(tmp_path / "c.jsonl.gz", records(corpus_lines()))
    tok = identity_train([CORPUS, tmp_path / "c.jsonl.gz"])
    m = pb.ModelProto()
    m.ParseFromString(tok.model.to_bytes())
    assert list(m.trainer_spec.input) == [str(CORPUS), str(tmp_path / "c.jsonl.gz")]


def test_docstring_examples_run(monkeypatch):
    import doctest
    import importlib

    monkeypatch.chdir(Path(__file__).parent.parent)  # the examples name tests/data files
    result = doctest.testmod(importlib.import_module("bytepair.training_spm"))
    assert result.failed == 0 and result.attempted >= 5


# -- the CLI: one set of input options for both models --------------------------------


def test_the_cli_reads_compressed_json_lines_with_a_text_field(tmp_path):
    from bytepair.cli import main

    write_jsonl(tmp_path / "c.jsonl.gz", records(corpus_lines()), field="body")
    out = tmp_path / "m.model"
    code = main(
        ["train", "--model", "sentencepiece", "--normalization", "identity", "--vocab-size", "800"]
        + ["--text-field", "body", "-o", str(out), "-q", str(tmp_path / "c.jsonl.gz")]
    )
    assert code == 0
    expected = identity_train(CORPUS, byte_fallback=True)
    assert pieces_of(out.read_bytes()) == pieces_of(expected)


def test_the_cli_reads_stdin_and_a_doc_separator(tmp_path, monkeypatch):
    import sys

    from bytepair.cli import main

    text = "<|endoftext|>".join(records(corpus_lines(), 4))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    out = tmp_path / "m.model"
    code = main(
        ["train", "--model", "sentencepiece", "--normalization", "identity", "--vocab-size", "800"]
        + ["--doc-separator", "<|endoftext|>", "-o", str(out), "-q", "-"]
    )
    assert code == 0
    expected = identity_train(CORPUS, byte_fallback=True)
    assert pieces_of(out.read_bytes()) == pieces_of(expected)


@pytest.mark.parametrize(
    ("model", "option", "flag"),
    [
        ("sentencepiece", ["--pattern", "cl100k"], "--pattern applies to --model bpe only"),
        ("sentencepiece", ["--min-frequency", "2"], "--min-frequency applies to --model bpe"),
        ("sentencepiece", ["--format", "hf"], "--format applies to --model bpe"),
        ("sentencepiece", ["--engine", "ray"], "--engine applies to --model bpe"),
        ("bpe", ["--normalization", "nfkc"], "--normalization applies to --model sentencepiece"),
    ],
)
def test_the_cli_refuses_an_option_of_the_other_model(tmp_path, capsys, model, option, flag):
    from bytepair.cli import main

    out = tmp_path / "m.model"
    code = main(
        ["train", "--model", model, "--vocab-size", "800", "-o", str(out), "-q", str(CORPUS)]
        + option
    )
    assert code == 1
    assert flag in capsys.readouterr().err
    assert not out.exists()


def test_a_progress_callback_sees_the_bytes_of_every_input_then_the_pieces(tmp_path):
    write_compressed(tmp_path / "c.txt.gz", CORPUS.read_bytes())
    seen = []
    identity_train([CORPUS, tmp_path / "c.txt.gz"], progress=seen.append)
    plain, gz = CORPUS.stat().st_size, (tmp_path / "c.txt.gz").stat().st_size
    assert seen[:3] == [plain, plain + gz, 0]  # one block each; then pieces from 0
    assert seen[3:] == sorted(seen[3:]) and seen[-1] > 0
