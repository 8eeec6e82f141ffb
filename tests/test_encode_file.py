"""Tokenizer.encode_file: whole files to uint16/uint32 shards, exactly encode()'s ids."""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.shards import one_file

from conftest import DATA, EOT, texts

EXAMPLE = DATA.parent.parent / "examples" / "books.txt"


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_encode_file_equals_encode_on_the_example_books(tmp_path, name):
    tok = bytepair.get_encoding(name)
    text = EXAMPLE.read_text(encoding="utf-8")
    expected = tok.encode(text, allowed_special="all")
    with mock.patch.object(one_file, "BLOCK_BYTES", 65536):
        n = tok.encode_file(EXAMPLE, tmp_path / "b.bin", allowed_special="all", num_threads=2)
    ids = np.fromfile(tmp_path / "b.bin", dtype=np.uint16 if tok.n_vocab <= 65536 else np.uint32)
    assert n == len(expected)
    assert ids.tolist() == expected


@settings(max_examples=60)
@given(
    text=texts,
    block=st.sampled_from(["5", "64", "100000"]),
    name=st.sampled_from(["gpt2", "cl100k_base", "o200k_base"]),
    threads=st.sampled_from([1, 2]),
)
def test_encode_file_equals_encode_for_any_block_size(tmp_path_factory, text, block, name, threads):
    tok = bytepair.get_encoding(name)
    folder = tmp_path_factory.mktemp("ef")
    src = folder / "in.txt"
    src.write_text(text, encoding="utf-8", newline="")
    with mock.patch.object(one_file, "BLOCK_BYTES", int(block)):
        tok.encode_file(src, folder / "out.npy", allowed_special="all", num_threads=threads)
    assert np.load(folder / "out.npy").tolist() == tok.encode(text, allowed_special="all")


def test_npy_output_has_the_right_dtype_and_shape(tmp_path, tinystories_tokenizer):
    tok = tinystories_tokenizer
    src = DATA / "tinystories_sample.txt"
    n = tok.encode_file(src, tmp_path / "t.npy", allowed_special="all")
    arr = np.load(tmp_path / "t.npy")
    assert arr.dtype == np.uint16 and arr.shape == (n,)
    assert arr.tolist() == tok.encode(src.read_text(encoding="utf-8"), allowed_special="all")


def test_disallowed_special_in_file_names_token_and_offset(tmp_path, tinystories_tokenizer):
    src = tmp_path / "in.txt"
    src.write_text("hello " * 10 + EOT + " bye", encoding="utf-8")
    with pytest.raises(ValueError, match=r"'<\|endoftext\|>' at byte offset 60 is not allowed"):
        tinystories_tokenizer.encode_file(src, tmp_path / "out.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
    # as plain text instead
    n = tinystories_tokenizer.encode_file(src, tmp_path / "out.bin", disallowed_special=())
    assert n == len(tinystories_tokenizer.encode_ordinary(src.read_text(encoding="utf-8")))


def test_invalid_utf8_in_file_names_offset_and_leaves_nothing(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"abc " * 100 + b"\xc3(")
    with pytest.raises(ValueError, match="invalid UTF-8 at byte offset 400"):
        bytepair.get_encoding("gpt2").encode_file(src, tmp_path / "out.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


@pytest.mark.filterwarnings("ignore:training stopped early")
def test_custom_pattern_file_encoding_is_exact(tmp_path):
    tok = bytepair.train_from_iterator(["ab ab, cd"], 270, pattern=r"\w+|[^\w]", progress=False)
    text = "ab ab, cd\n" * 500
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    with mock.patch.object(one_file, "BLOCK_BYTES", 37):
        tok.encode_file(src, tmp_path / "o.bin", num_threads=2)
    assert np.fromfile(tmp_path / "o.bin", dtype=np.uint16).tolist() == tok.encode(text)


@pytest.mark.parametrize("threads", [1, 2])
def test_progress_reports_each_block_in_order_up_to_the_file_size(tmp_path, threads):
    tok = bytepair.get_encoding("gpt2")
    src = tmp_path / "in.txt"
    text = "Some words here.\nAnd more words.\n" * 3000  # ~100 KB: many 4 KiB blocks
    src.write_text(text, encoding="utf-8")
    seen: list[int] = []
    with mock.patch.object(one_file, "BLOCK_BYTES", 4096):
        n = tok.encode_file(src, tmp_path / "o.bin", num_threads=threads, progress=seen.append)
    assert len(seen) >= len(text) // 8192
    assert seen == sorted(set(seen)) and seen[-1] == src.stat().st_size
    assert n == len(tok.encode(text))
    assert np.fromfile(tmp_path / "o.bin", dtype=np.uint16).tolist() == tok.encode(text)


@pytest.mark.parametrize("threads", [1, 2])
def test_failure_in_a_late_block_names_its_offset_and_leaves_nothing(tmp_path, threads):
    # Earlier blocks are already encoded and written when the bad one is read.
    tok = bytepair.get_encoding("gpt2")
    src = tmp_path / "in.txt"
    src.write_text("hello world.\n" * 2000 + EOT + " tail", encoding="utf-8")
    with mock.patch.object(one_file, "BLOCK_BYTES", 4096):
        with pytest.raises(ValueError, match=r"'<\|endoftext\|>' at byte offset 26000 "):
            tok.encode_file(src, tmp_path / "out.bin", num_threads=threads)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_an_exception_in_progress_stops_encoding_and_leaves_nothing(tmp_path):
    tok = bytepair.get_encoding("gpt2")
    src = tmp_path / "in.txt"
    src.write_text("hello world.\n" * 5000, encoding="utf-8")
    calls: list[int] = []

    def progress(done: int) -> None:
        calls.append(done)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with mock.patch.object(one_file, "BLOCK_BYTES", 4096):
        with pytest.raises(KeyboardInterrupt):
            tok.encode_file(src, tmp_path / "out.bin", num_threads=2, progress=progress)
    assert len(calls) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


# -- `bytepair encode FILE -o x.bin` reads inputs as `count` and `-o dir/` do ---------------


def cli(*args, stdin: bytes | None = None):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "bytepair", *map(str, args)]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=120)


def test_a_jsonl_file_to_bin_holds_its_records_texts_not_the_raw_json(tmp_path):
    import json

    docs = ["hello world", "second doc", "naïve café"]
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(docs)))
    tok = bytepair.get_encoding("gpt2")
    expected = [i for d in docs for i in tok.encode(d)]
    for out in ("x.bin", "x.npy"):
        r = cli("encode", "-t", "gpt2", jsonl, "-o", tmp_path / out)
        assert r.returncode == 0, r.stderr
    assert np.fromfile(tmp_path / "x.bin", dtype="<u2").tolist() == expected
    assert np.load(tmp_path / "x.npy").tolist() == expected
    counted = cli("count", "-t", "gpt2", jsonl)
    assert counted.stdout.decode() == f"{len(expected)}\t{jsonl}\n"
    printed = cli("encode", "-t", "gpt2", jsonl)
    assert printed.stdout.decode().splitlines() == [" ".join(map(str, tok.encode(d))) for d in docs]
    shards = cli("encode", "-t", "gpt2", jsonl, "-o", f"{tmp_path}/dir/", "--eot", "none")
    assert shards.returncode == 0, shards.stderr
    assert bytepair.open_shards(tmp_path / "dir").tokens()[:].tolist() == expected


def test_the_text_field_option_applies_to_a_bin_output(tmp_path):
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text('{"body": "hello world"}\n')
    r = cli("encode", "-t", "gpt2", jsonl, "-o", tmp_path / "x.bin", "--text-field", "body")
    assert r.returncode == 0, r.stderr
    assert np.fromfile(tmp_path / "x.bin", dtype="<u2").tolist() == [31373, 995]


def test_a_compressed_text_file_to_bin_is_read_unpacked(tmp_path):
    import gzip

    text = "hello world<|endoftext|>again\n"
    path = tmp_path / "t.txt.gz"
    path.write_bytes(gzip.compress(text.encode()))
    r = cli("encode", "-t", "gpt2", path, "-o", tmp_path / "x.bin")
    assert r.returncode == 0, r.stderr
    expected = bytepair.get_encoding("gpt2").encode(text, allowed_special="all")
    assert np.fromfile(tmp_path / "x.bin", dtype="<u2").tolist() == expected


@pytest.mark.parametrize("name, dtype", [("gpt2", "<u2"), ("o200k_base", "<u4")])
def test_records_and_compressed_text_to_bin_take_the_vocabularys_width(tmp_path, name, dtype):
    # The ids of each batch are narrowed (or not) by the core, whatever their source.
    import gzip
    import json

    tok = bytepair.get_encoding(name)
    docs = ["hello world", "", "naïve café 日本語 " * 30, "x" * 5000]
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    text = "<|endoftext|>".join(docs)
    gz = tmp_path / "t.txt.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    for src, expected in (
        (jsonl, [i for d in docs for i in tok.encode(d)]),
        (gz, tok.encode(text, allowed_special="all")),
    ):
        r = cli("encode", "-t", name, src, "-o", tmp_path / "x.bin")
        assert r.returncode == 0, r.stderr
        assert np.fromfile(tmp_path / "x.bin", dtype=dtype).tolist() == expected


def test_invalid_utf8_on_stdin_with_errors_strict_fails_naming_stdin_and_the_offset():
    r = cli("encode", "-t", "gpt2", "--errors", "strict", stdin=b"hello\xffworld")
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr.decode() == (
        "bytepair encode: error: <stdin>: invalid UTF-8 at byte offset 5 (byte 0xff)\n"
    )
    replaced = cli("encode", "-t", "gpt2", "--errors", "replace", stdin=b"hello\xffworld")
    assert replaced.stdout.decode().split() == ["31373", "4210", "6894"]


# -- text through the core's file pipeline: `count`, and text among other inputs ---------


def core_text_only(monkeypatch) -> None:
    """Python's own reading of a text source fails: the core's file pipeline must read
    it (its bytes handed over by Python when compressed or on stdin)."""
    from bytepair.sources.text import TextSource

    def refuse(self):
        raise AssertionError("text read by Python")

    monkeypatch.setattr(TextSource, "text_chunks", refuse)
    monkeypatch.setattr(one_file, "BLOCK_BYTES", 700)  # many blocks, cut at safe cuts


def stdin_of(monkeypatch, data: bytes) -> str:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    return "-"


COUNT_TEXT = EXAMPLE.read_text(encoding="utf-8")[:60_000] + EOT + "naïve café 日本語\n" * 50


@pytest.mark.parametrize("given", ["plain", "gz", "stdin", "zst stdin"])
@pytest.mark.parametrize("specials", ["allow", "text"])
def test_count_of_text_is_the_length_of_encode_read_by_the_core(
    tmp_path, monkeypatch, capsys, given, specials
):
    import gzip

    import zstandard

    from bytepair.cli import main

    data = COUNT_TEXT.encode()
    core_text_only(monkeypatch)
    if given == "plain":
        src = tmp_path / "t.txt"
        src.write_bytes(data)
    elif given == "gz":
        src = tmp_path / "t.txt.gz"
        src.write_bytes(gzip.compress(data))
    else:
        packed = zstandard.ZstdCompressor().compress(data) if given == "zst stdin" else data
        src = stdin_of(monkeypatch, packed)
    tok = bytepair.get_encoding("cl100k_base")
    kwargs = {"allowed_special": "all"} if specials == "allow" else {"disallowed_special": ()}
    assert main(["count", "-t", "cl100k_base", "--specials", specials, str(src)]) == 0
    name = "<stdin>" if src == "-" else str(src)
    assert capsys.readouterr().out == f"{len(tok.encode(COUNT_TEXT, **kwargs))}\t{name}\n"


def test_count_refuses_a_disallowed_special_token_naming_the_input(tmp_path, monkeypatch, capsys):
    from bytepair.cli import main

    core_text_only(monkeypatch)
    src = stdin_of(monkeypatch, COUNT_TEXT.encode())
    assert main(["count", "-t", "gpt2", "--specials", "disallow", src]) == 1
    assert capsys.readouterr().err == (
        "bytepair count: error: <stdin>: the text contains the special token "
        "'<|endoftext|>'; pass --specials allow to encode it as a special token, or "
        "--specials text to encode it as plain text\n"
    )


@pytest.mark.parametrize("fmt", ["bin", "npy"])
def test_compressed_text_among_other_inputs_is_appended_by_the_core(tmp_path, monkeypatch, fmt):
    # Python writes a record file's ids, the core appends the text's to the same file,
    # and Python goes on after them: the ids of each input in turn, the header last.
    import gzip
    import json

    from bytepair.sources import open_sources

    tok = bytepair.get_encoding("o200k_base")
    docs = ["hello world", "naïve café", "x" * 3000]
    first, last = tmp_path / "a.jsonl", tmp_path / "c.jsonl"
    for path in (first, last):
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    text = tmp_path / "b.txt.gz"
    text.write_bytes(gzip.compress(COUNT_TEXT.encode()))
    core_text_only(monkeypatch)
    corpus = open_sources([str(first), str(text), str(last)])
    seen = []
    out = tmp_path / f"x.{fmt}"
    n = one_file.encode_documents(tok, corpus, out, allowed_special="all", progress=seen.append)
    records = [i for d in docs for i in tok.encode(d)]
    expected = records + tok.encode(COUNT_TEXT, allowed_special="all") + records
    ids = np.load(out) if fmt == "npy" else np.fromfile(out, dtype="<u4")
    assert n == len(expected) and ids.tolist() == expected
    # Progress runs through each input in turn (the compressed one's compressed bytes).
    assert seen == sorted(seen) and seen[-1] == sum(p.stat().st_size for p in (first, text, last))


# -- a full disk is the output's fault --------------------------------------------------


@pytest.fixture
def full_disk_output(monkeypatch):
    """Temporary outputs go to /dev/full, whose every write fails with ENOSPC."""
    import contextlib

    from bytepair.shards import one_file

    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")

    @contextlib.contextmanager
    def to_dev_full(path):
        yield "/dev/full"

    monkeypatch.setattr(one_file, "temporary_output", to_dev_full)


@pytest.mark.parametrize("suffix", [".bin", ".npy"])
def test_a_full_disk_while_encoding_a_file_names_the_output_not_the_input(
    tmp_path, full_disk_output, suffix
):
    import errno

    src = tmp_path / "in.txt"
    src.write_text("hello world " * 100_000)
    dst = tmp_path / f"out{suffix}"
    with pytest.raises(OSError) as e:
        bytepair.get_encoding("gpt2").encode_file(src, dst)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(dst)
    assert str(src) not in str(e.value)


def test_a_full_disk_while_encoding_records_names_the_output(tmp_path, full_disk_output):
    import errno

    from bytepair.shards.one_file import encode_documents
    from bytepair.sources import open_sources

    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "hello world"}\n' * 1000)
    dst = tmp_path / "out.bin"
    with pytest.raises(OSError) as e:
        encode_documents(bytepair.get_encoding("gpt2"), open_sources([src]), dst)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(dst)
