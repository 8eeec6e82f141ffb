"""Corpora as they really are (bytepair.sources): every kind of input gives the same
documents, and so the same merges; bad input is an error naming file and line/offset."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import random
import sys
import unicodedata
import warnings

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import bytepair
from bytepair import training
from bytepair.sources import open_sources
from bytepair.sources.text import last_cut, split_documents

from conftest import DATA, EOT


def documents() -> list[str]:
    """The TinyStories sample's stories, then corpus.en in documents of 40 lines."""
    stories = [d for d in (DATA / "tinystories_sample.txt").read_text("utf-8").split(EOT) if d]
    lines = (DATA / "corpus.en").read_text("utf-8").splitlines(keepends=True)
    return stories + ["".join(lines[i : i + 40]) for i in range(0, len(lines), 40)]


def jsonl(docs: list[str], field: str = "text") -> bytes:
    return "".join(json.dumps({field: d}) + "\n" for d in docs).encode()


def write_parquet(path, columns: dict, row_group_size: int = 4) -> None:
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)


def write_folder(path, docs: list[str]) -> None:
    # Sorted order is the documents' order: 00.txt, 01.txt, ... (one nested folder too).
    for i, doc in enumerate(docs):
        sub = path / "b" if i >= len(docs) // 2 else path / "a"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{i:02d}.txt").write_text(doc, "utf-8")


def write(path, text: str):
    path.write_text(text, "utf-8")
    return path


def error_reading(src, **options) -> str:
    """The one-line error that reading ``src`` gives."""
    with pytest.raises(ValueError) as e:
        list(open_sources(src, **options))
    return str(e.value)


def make_input(kind: str, docs: list[str], tmp_path):
    joined = EOT.join(docs).encode()
    if kind == "txt":
        (tmp_path / "c.txt").write_bytes(joined)
        return tmp_path / "c.txt"
    if kind == "txt.gz":
        (tmp_path / "c.txt.gz").write_bytes(gzip.compress(joined))
        return tmp_path / "c.txt.gz"
    if kind == "txt.xz":
        (tmp_path / "c.txt.xz").write_bytes(lzma.compress(joined))
        return tmp_path / "c.txt.xz"
    if kind == "txt.bz2":
        (tmp_path / "c.txt.bz2").write_bytes(bz2.compress(joined))
        return tmp_path / "c.txt.bz2"
    if kind == "jsonl.zst":
        (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl(docs)))
        return tmp_path / "c.jsonl.zst"
    if kind == "parquet":
        write_parquet(tmp_path / "c.parquet", {"text": docs})
        return tmp_path / "c.parquet"
    if kind == "folder":
        write_folder(tmp_path / "docs", docs)
        return tmp_path / "docs"
    if kind == "dataset":
        return datasets.Dataset.from_dict({"text": docs})
    raise AssertionError(kind)


KINDS = ["txt", "txt.gz", "txt.xz", "txt.bz2", "jsonl.zst", "parquet", "folder", "dataset"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_input_yields_the_same_documents(kind, tmp_path):
    docs = documents()
    src = make_input(kind, docs, tmp_path)
    assert list(open_sources(src, special_tokens=[EOT])) == docs


@pytest.mark.parametrize("kind", KINDS[1:])
def test_the_same_documents_give_identical_merges_whatever_the_source(kind, tmp_path):
    docs = documents()
    expected = bytepair.train(
        make_input("txt", docs, tmp_path), 600, special_tokens=[EOT], progress=False
    )
    assert len(expected.merges) == 600 - 257
    src = make_input(kind, docs, tmp_path)
    tok = bytepair.train(src, 600, special_tokens=[EOT], progress=False)
    assert tok.merges == expected.merges
    assert tok.special_tokens == {EOT: 599}


def test_train_from_iterator_reads_a_dataset_through_its_text_field():
    docs = documents()
    ds = datasets.Dataset.from_dict({"id": list(range(len(docs))), "body": docs})
    expected = bytepair.train_from_iterator(docs, 400, progress=False)
    assert bytepair.train_from_iterator(ds, 400, text_field="body", progress=False).merges == (
        expected.merges
    )


def test_a_datasetdict_split_is_chosen_by_name_or_by_indexing():
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": ["a b", "c"]}),
            "test": datasets.Dataset.from_dict({"text": ["z"]}),
        }
    )
    assert list(open_sources((dd, "train"))) == ["a b", "c"]
    assert list(open_sources(dd["test"])) == ["z"]
    with pytest.raises(ValueError) as e:
        open_sources(dd)
    assert str(e.value) == (
        "a DatasetDict holds splits (train, test); pass one: dd['train'] or (dd, 'train')"
    )


def test_an_iterable_dataset_is_read_like_a_dataset():
    ds = datasets.Dataset.from_dict({"text": ["one", "two"]}).to_iterable_dataset()
    assert list(open_sources(ds)) == ["one", "two"]


def test_text_is_split_at_special_tokens_or_at_doc_separator(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("one<|endoftext|>two\n---\nthree<|endoftext|><|endoftext|>", "utf-8")
    assert list(open_sources(path, special_tokens=[EOT])) == ["one", "two\n---\nthree"]
    assert list(open_sources(path, doc_separator="\n---\n")) == [
        "one<|endoftext|>two",
        "three<|endoftext|><|endoftext|>",
    ]
    assert list(open_sources(path)) == [path.read_text("utf-8")]


def test_a_separator_split_across_read_chunks_is_still_found():
    pieces = iter(["ab<|end", "of", "text|>cd<", "|endoftext|", ">"])
    assert list(split_documents(pieces, [EOT])) == [("ab", True), ("cd", True)]


def test_long_text_is_cut_only_where_no_pretoken_continues():
    text = (DATA / "corpus.en").read_text("utf-8")
    pieces = (text[i : i + 1000] for i in range(0, len(text), 1000))
    items = list(split_documents(pieces, [EOT], part_chars=2000))
    # One document, in parts: only the last says it ends there.
    assert [last for _, last in items] == [False] * (len(items) - 1) + [True]
    parts = [part for part, _ in items]
    assert "".join(parts) == text
    # A part is tried once 2000 chars are held, so it is never longer than 2000 + a piece.
    assert len(parts) > 30 and max(map(len, parts)) < 3000

    def visible(ch: str) -> bool:  # neither whitespace nor a control
        return not ch.isspace() and unicodedata.category(ch) != "Cc"

    for left, right in zip(parts, parts[1:]):
        # the cut rules: "<visible>\n" | "<letter or digit>", or "<visible>" | " "
        if left[-1] == "\n":
            assert visible(left[-2]) and right[0].isalnum()
        else:
            assert visible(left[-1]) and right[0] == " "


def test_last_cut_examples():
    assert last_cut("end.\nNext") == 5
    assert last_cut("end \nNext") == 3  # not after " \n" (one piece under cl100k)
    assert last_cut("end.\n/x") == 0  # ".\n/" is one piece under o200k
    assert last_cut("a.\nb.\nc") == 6
    assert last_cut("one two  three") == 7  # not between the two spaces
    assert last_cut("née abc") == 3  # in characters, not bytes
    assert last_cut("one. two 3") == 8  # before a space after a visible character
    assert last_cut("слово два") == 5  # in any script
    assert last_cut("a\u3000 b") == 0  # not after other whitespace


def test_training_on_long_streamed_text_cut_in_parts_equals_the_whole(tmp_path, monkeypatch):
    text = (DATA / "corpus.en").read_text("utf-8")
    plain = tmp_path / "c.txt"
    plain.write_text(text, "utf-8")
    packed = tmp_path / "c.txt.xz"
    packed.write_bytes(lzma.compress(text.encode()))
    expected = bytepair.train(plain, 500, progress=False)
    monkeypatch.setattr(training, "_PART_CHARS", 3000)
    assert bytepair.train(packed, 500, progress=False).merges == expected.merges


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_long_records_are_counted_in_parts_with_the_merges_of_the_whole(
    kind, tmp_path, monkeypatch
):
    from bytepair.sources.text import in_parts

    text = (DATA / "corpus.en").read_text("utf-8")
    docs = [text, text[:5000]]  # one long record
    path = tmp_path / f"c.{kind}"
    if kind == "jsonl":
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), "utf-8")
    else:
        write_parquet(path, {"text": docs})
    expected = bytepair.train_from_iterator(docs, 500, progress=False)
    monkeypatch.setattr(training, "_PART_CHARS", 3000)
    assert len(list(in_parts(text, 3000))) > 10
    assert "".join(part for part, _ in in_parts(text, 3000)) == text
    assert bytepair.train(path, 500, progress=False).merges == expected.merges
    # Encoding (part_chars=None) keeps records whole; so do custom patterns.
    assert list(open_sources([path], part_chars=None)) == docs
    custom = bytepair.train(path, 300, pattern=r"\w+|\W", progress=False)
    assert (
        custom.merges
        == bytepair.train_from_iterator(docs, 300, pattern=r"\w+|\W", progress=False).merges
    )


def test_compression_is_detected_by_content_not_by_suffix(tmp_path):
    path = tmp_path / "looks-plain.txt"
    path.write_bytes(gzip.compress(b"hello<|endoftext|>world"))
    assert list(open_sources(path, special_tokens=[EOT])) == ["hello", "world"]


def test_concatenated_gzip_members_are_read_through(tmp_path):
    path = tmp_path / "c.gz"
    path.write_bytes(gzip.compress(b"first ") + gzip.compress(b"second"))
    assert list(open_sources(path)) == ["first second"]


def test_jsonl_dotted_text_field_reaches_nested_objects(tmp_path):
    path = write(
        tmp_path / "c.jsonl", '{"meta": {"body": "one"}}\n\n{"meta": {"body": "two", "x": 1}}\n'
    )
    assert list(open_sources(path, text_field="meta.body")) == ["one", "two"]


def test_jsonl_line_that_is_not_json_names_file_and_line(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"text": "ok"}\n{"text": "cut\n')
    assert error_reading(path) == (
        f"{path}: line 2: not JSON (Unterminated string starting at: line 1 column 10 "
        "(char 9)) (skip_bad_records=True / --skip-bad-records skips it)"
    )


def test_missing_or_non_string_field_names_field_file_and_line(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"text": "ok"}\n{"body": "x", "id": 1}\n')
    assert error_reading(path) == (
        f"{path}: line 2: no field 'text' (the record has: body, id) "
        "(skip_bad_records=True / --skip-bad-records skips it)"
    )
    path.write_text('{"meta": {"body": 7}}\n', "utf-8")
    assert error_reading(path, text_field="meta.body").startswith(
        f"{path}: line 1: field 'meta.body' is of type int, not a string"
    )


def test_skipped_bad_records_are_counted_and_reported_at_the_end(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"text": "a"}\nnot json\n{"text": null}\n{"text": "b"}\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = list(open_sources(path, skip_bad_records=True))
    assert docs == ["a", "b"]
    assert [str(w.message) for w in caught] == [
        f"skipped 2 bad record(s): {path} (2); first: {path}: line 2: not JSON "
        f"(Expecting value: line 1 column 1 (char 0)); {path}: line 3: field 'text' is null, "
        "not a string"
    ]


def test_training_records_how_many_bad_records_it_skipped(tmp_path):
    path = write(tmp_path / "c.jsonl", '{"text": "low lower"}\n{oops\n{"text": "lowest"}\n')
    with pytest.warns(UserWarning, match=r"skipped 1 bad record\(s\)"):
        tok = bytepair.train(path, 258, pattern=None, skip_bad_records=True, progress=False)
    assert tok.merges == [(b"o", b"w"), (b"l", b"ow")]
    assert tok.training_stats.records_skipped == 1


def test_a_json_array_file_is_told_apart_from_json_lines(tmp_path):
    path = write(tmp_path / "c.json", '[{"text": "a"},\n {"text": "b"}]\n')
    with pytest.raises(ValueError, match=r"line 1: .*a JSON array is not JSON Lines"):
        list(open_sources(path))


def damaged(data: bytes, at: int) -> bytes:
    return data[:at] + bytes(b ^ 0xFF for b in data[at : at + 10]) + data[at + 10 :]


def random_text(n: int) -> bytes:
    rng = random.Random(0)
    return bytes(rng.randrange(32, 127) for _ in range(n))


def test_corrupt_zst_names_the_file_and_the_compressed_offset(tmp_path):
    # As the zstd tool writes it: with a checksum, which notices the damage at the end.
    data = zstandard.ZstdCompressor(write_checksum=True).compress(random_text(300_000))
    path = tmp_path / "c.txt.zst"
    path.write_bytes(damaged(data, 150_000))
    last_piece = (len(data) - 1) // 65536 * 65536
    assert error_reading(path).startswith(
        f"{path}: corrupt zstd data near compressed byte offset {last_piece} ("
    )


def test_corrupt_gz_names_the_file_and_the_compressed_offset(tmp_path):
    # A second gzip member whose header is damaged: noticed in the piece where it starts.
    first = gzip.compress(random_text(300_000))
    path = tmp_path / "c.txt.gz"
    path.write_bytes(first + damaged(gzip.compress(b"more"), 0))
    piece = len(first) // 65536 * 65536
    assert error_reading(path) == (
        f"{path}: corrupt gzip data near compressed byte offset {piece} (Error -3 while "
        "decompressing data: incorrect header check); the file is damaged or truncated"
    )


def test_truncated_gz_names_where_the_file_ends(tmp_path):
    data = gzip.compress(EOT.join(documents()).encode())
    path = tmp_path / "c.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    assert error_reading(path) == (
        f"{path}: truncated gzip data: the file ends at compressed byte offset "
        f"{len(data) // 2} before the end of its stream"
    )


def test_truncated_zst_is_an_error_not_a_short_corpus(tmp_path):
    data = zstandard.ZstdCompressor().compress(jsonl(documents()))
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(data[:-5])
    with pytest.raises(ValueError, match=r"truncated zstd data: the file ends at compressed"):
        list(open_sources(path))


def test_invalid_utf8_in_compressed_text_names_the_decompressed_offset(tmp_path):
    path = tmp_path / "c.txt.gz"
    path.write_bytes(gzip.compress(b"hello \xff world"))
    assert error_reading(path) == f"{path}: invalid UTF-8 at byte offset 6 (byte 0xff)"


def test_parquet_without_the_column_lists_its_columns(tmp_path):
    path = tmp_path / "c.parquet"
    write_parquet(path, {"id": [1, 2], "content": ["a", "b"]})
    assert error_reading(path) == (
        f"{path}: no column 'text'; its columns: id, content "
        "(choose one with text_field= / --text-field)"
    )
    assert list(open_sources(path, text_field="content")) == ["a", "b"]


def test_parquet_null_rows_are_bad_records_naming_the_row(tmp_path):
    path = tmp_path / "c.parquet"
    write_parquet(path, {"text": ["a", None, "c"]}, row_group_size=2)
    with pytest.raises(ValueError, match=r"c.parquet: row 2: field 'text' is null"):
        list(open_sources(path))


def test_parquet_batches_hold_about_a_fixed_amount_of_text_never_past_a_row_group(
    tmp_path, monkeypatch
):
    from bytepair.sources import parquet

    path = tmp_path / "c.parquet"
    rows = [" ".join(map(str, range(i, i + 250))) for i in range(40)]  # ~1 KB each
    write_parquet(path, {"text": rows}, row_group_size=16)
    group = pq.ParquetFile(path).metadata.row_group(0)
    assert parquet.batch_rows(group) == 16  # a row group: small rows
    monkeypatch.setattr(parquet, "_BATCH_BYTES", 5000)
    assert 2 <= parquet.batch_rows(group) <= 8  # long rows: a few per batch
    assert list(open_sources([path])) == rows


def test_reading_ahead_on_a_thread_raises_the_readers_error_and_stops_early():
    import threading

    from bytepair._read_ahead import read_ahead as _read_ahead

    def failing():
        yield ["a"]
        raise ValueError("bad record at line 2")

    it = _read_ahead(failing())
    assert next(it) == ["a"]
    with pytest.raises(ValueError, match="line 2"):
        next(it)
    endless = _read_ahead(iter(lambda: ["x"], None))
    assert next(endless) == ["x"]
    endless.close()  # the consumer stops: the thread ends too
    assert not [t for t in threading.enumerate() if t.name == "bytepair-read-ahead"]


def test_folders_are_read_recursively_in_sorted_order_with_an_optional_glob(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "z").mkdir(parents=True)
    (tmp_path / "b" / "1.txt").write_text("b1", "utf-8")
    (tmp_path / "a" / "z" / "2.txt").write_text("az2", "utf-8")
    (tmp_path / "a" / "3.md").write_text("a3", "utf-8")
    (tmp_path / "a" / "0.jsonl").write_text('{"text": "a0"}\n', "utf-8")
    (tmp_path / ".hidden").write_text("never", "utf-8")
    assert list(open_sources(tmp_path)) == ["a0", "a3", "az2", "b1"]
    assert list(open_sources(tmp_path, glob="*.txt")) == ["az2", "b1"]
    with pytest.raises(FileNotFoundError, match=r"no files matching '\*.csv' in this folder"):
        open_sources(tmp_path, glob="*.csv")


def test_dash_reads_stdin_compressed_or_not(monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO(gzip.compress(b"one<|endoftext|>two")))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert list(open_sources("-", special_tokens=[EOT])) == ["one", "two"]


def test_kinds_still_unknown_are_a_clear_error(tmp_path):
    path = tmp_path / "c.zip"
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 30)
    with pytest.raises(ValueError) as e:
        open_sources(path)
    assert str(e.value) == (
        f"{path}: is a zip archive, not a corpus bytepair reads; unpack or convert it"
    )


def test_a_missing_extra_names_what_to_install(tmp_path, monkeypatch):
    path = tmp_path / "c.txt.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"text"))
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(ImportError) as e:
        list(open_sources(path))
    assert str(e.value) == (
        'reading .zst files needs the zstandard package: pip install "bytepair[corpora]"'
    )


@pytest.fixture
def cli(monkeypatch, capsys):
    """Runs ``bytepair ARGS...`` in this process: (exit status, stdout, stderr)."""
    from bytepair.cli import main

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # main() replaces it

    def run(*args):
        status = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return status, out, err

    return run


def test_cli_trains_on_jsonl_zst_with_a_text_field_like_on_text(cli, tmp_path):
    docs = documents()
    (tmp_path / "c.txt").write_text(EOT.join(docs), "utf-8")
    packed = zstandard.ZstdCompressor().compress(jsonl(docs, field="body"))
    (tmp_path / "c.jsonl.zst").write_bytes(packed)
    common = ["--vocab-size", 500, "--special", EOT, "-q"]
    assert cli("train", tmp_path / "c.txt", *common, "-o", tmp_path / "a.bytepair")[0] == 0
    status, _, err = cli(
        "train", tmp_path / "c.jsonl.zst", "--text-field", "body", *common,
        "-o", tmp_path / "b.bytepair",
    )  # fmt: skip
    assert status == 0, err
    assert "bytes/token" in err
    a, b = (bytepair.Tokenizer.load(tmp_path / f"{n}.bytepair") for n in "ab")
    assert a.merges == b.merges


def test_cli_bad_record_is_a_one_line_error_or_skipped_with_a_warning(cli, tmp_path):
    path = write(tmp_path / "c.jsonl", '{"text": "low lower"}\n{"txt": "lowest"}\n')
    out = tmp_path / "t.bytepair"
    status, _, err = cli("train", path, "--vocab-size", 258, "--pattern", "none", "-q", "-o", out)
    assert status == 1
    assert err == (
        f"bytepair train: error: {path}: line 2: no field 'text' (the record has: txt) "
        "(skip_bad_records=True / --skip-bad-records skips it)\n"
    )
    assert not out.exists()
    status, _, err = cli(
        "train", path, "--vocab-size", 258, "--pattern", "none", "-q", "-o", out,
        "--skip-bad-records",
    )  # fmt: skip
    assert status == 0
    assert err.splitlines()[0] == (
        f"bytepair: warning: skipped 1 bad record(s): {path} (1); first: {path}: line 2: "
        "no field 'text' (the record has: txt)"
    )


def test_cli_count_reads_compressed_text_jsonl_and_folders(cli, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt.gz").write_bytes(gzip.compress(b"hello world<|endoftext|>"))
    (tmp_path / "in" / "b.jsonl").write_text('{"text": "hello"}\n{"text": "world"}\n', "utf-8")
    status, out, err = cli("count", "-t", "gpt2", tmp_path / "in")
    assert status == 0, err
    assert out == (
        f"3\t{tmp_path / 'in' / 'a.txt.gz'}\n2\t{tmp_path / 'in' / 'b.jsonl'}\n5\ttotal\n"
    )


def test_documents_are_read_in_parts_only_for_tokenizers_a_cut_cannot_change():
    from bytepair.sources import Options, part_chars_for

    for name in ("gpt2", "cl100k_base", "o200k_base"):
        assert part_chars_for(bytepair.get_encoding(name)) == Options.part_chars
    for pattern in ("llama3", "qwen2", "tekken"):  # run by splitters, cut as the GPT ones
        model = bytepair.train_from_iterator(["a b\nc"] * 3, 260, pattern=pattern, progress=False)
        assert part_chars_for(model) == Options.part_chars
    custom = bytepair.train_from_iterator(["a b\nc"] * 3, 260, pattern=r"\S+|\s", progress=False)
    assert part_chars_for(custom) is None  # a custom pattern: newline cuts are not proven safe
    newline_special = bytepair.train_from_iterator(
        ["a b"], 260, special_tokens=["<|a\nb|>"], progress=False
    )
    assert part_chars_for(newline_special) is None  # a cut could split the special token
