"""Compressed text and JSON Lines files on the core's road: Python decompresses them
(``bytepair.sources._stream``), a piece per call on the core's reading thread
(``FileSource.core_input``), and the core reads the bytes as it reads a plain file's.
Shard folders, files of ids and training come out as on Python's road (which reads the
same files in Python throughout), and a damaged file fails with Python's message,
naming the compressed byte offset, leaving no folder behind. stdin, compressed or not,
takes the same road."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import sys
import warnings
from pathlib import Path

import pytest
import zstandard
from test_shards_jsonl import records
from test_shards_text_files import text_files

import bytepair
from bytepair.runners import local
from bytepair.sources import _stream, jsonl, open_sources, part_chars_for, text

from conftest import EOT, core_threads, folder_bytes, shard_road

COMPRESS = {
    "gz": gzip.compress,
    "xz": lzma.compress,
    "bz2": bz2.compress,
    "zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 700 bytes, and decompressed pieces of 64 KiB of compressed bytes:
    a piece holds many blocks, and blocks cross pieces."""
    monkeypatch.setattr(local, "BLOCK_BYTES", 700)


def compressed(path: Path, suffix: str, *, streams: int = 1) -> Path:
    """``path`` compressed to ``path.suffix``; with ``streams``, as that many streams
    one after another (``cat a.gz b.gz``)."""
    data = path.read_bytes()
    cut = [len(data) * k // streams for k in range(streams + 1)]
    out = path.with_name(f"{path.name}.{suffix}")
    out.write_bytes(b"".join(COMPRESS[suffix](data[a:b]) for a, b in zip(cut, cut[1:])))
    return out


def write(tok, paths, out, *, core: bool, **options):
    """``write_shards`` of the files by the core's road or Python's: the warnings, and
    whether the core's road was taken."""
    corpus = open_sources(
        [str(p) for p in paths],
        special_tokens=[EOT],
        skip_bad_records=True,
        part_chars=part_chars_for(tok),
    )
    with shard_road(core) as used, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bytepair.write_shards(tok, corpus, out, progress=False, **options)
    return [str(w.message) for w in caught], used


def mixed_files(tmp_path: Path, suffix: str) -> tuple[list[Path], list[Path]]:
    """Text and JSON Lines files (odd lines included), plain and compressed."""
    plain = text_files(tmp_path)[:2]
    lines = tmp_path / "r.jsonl"
    lines.write_bytes(b"\n".join(records(3, 120)))
    plain.append(lines)
    return plain, [compressed(p, suffix, streams=2) for p in plain]


@pytest.mark.parametrize("suffix", COMPRESS)
@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_compressed_files_give_pythons_folder_on_the_cores_road(tmp_path, suffix, name):
    tok = bytepair.get_encoding(name)
    plain, packed = mixed_files(tmp_path, suffix)
    options = {"shard_tokens": 3000, "val_fraction": 0.2}
    core_warned, used = write(tok, packed, tmp_path / "core", core=True, **options)
    assert used == [True]
    python_warned, used = write(tok, packed, tmp_path / "python", core=False, **options)
    assert used == [False]
    assert folder_bytes(tmp_path / "core") == folder_bytes(tmp_path / "python")
    assert core_warned == python_warned and "skipped" in core_warned[0]
    # The ids are the plain files' (the manifests differ only in the inputs named).
    write(tok, plain, tmp_path / "plain", core=True, **options)
    core, ones = folder_bytes(tmp_path / "core"), folder_bytes(tmp_path / "plain")
    assert {k: v for k, v in core.items() if k.endswith((".bin", ".idx.npy"))} == {
        k: v for k, v in ones.items() if k.endswith((".bin", ".idx.npy"))
    }


def refuse_python(self, *args):
    """A source's ``parts`` when Python must not read it."""
    raise AssertionError("read by Python")


def test_the_core_reads_a_compressed_file_through_pythons_decompression_alone(
    tmp_path, monkeypatch
):
    # Neither the text nor the records go through Python's reading; only the odd
    # JSON lines do, as for plain files.
    tok = bytepair.get_encoding("gpt2")
    _, packed = mixed_files(tmp_path, "gz")
    monkeypatch.setattr(text.TextSource, "parts", refuse_python)
    monkeypatch.setattr(jsonl.JsonlSource, "parts", refuse_python)
    _, used = write(tok, packed, tmp_path / "core", core=True)
    assert used == [True]


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda data: data[:-20], r"truncated gzip data: the file ends at compressed byte offset"),
        (
            lambda data: data[:300] + bytes(64) + data[364:],
            r"corrupt gzip data near compressed byte offset 0 ",
        ),
    ],
    ids=["truncated", "corrupt"],
)
def test_a_damaged_compressed_file_fails_as_pythons_reading_says_and_leaves_no_folder(
    tmp_path, damage, said
):
    tok = bytepair.get_encoding("gpt2")
    path = compressed(text_files(tmp_path)[0], "gz")
    path.write_bytes(damage(path.read_bytes()))
    raised = []
    for core in (True, False):
        out = tmp_path / f"out-{core}"
        with pytest.raises(ValueError, match=rf"a\.txt\.gz: {said}") as e:
            write(tok, [path], out, core=core)
        raised.append(str(e.value))
        # What a run leaves to resume from, and no shard nor temporary file.
        assert [p.name for p in out.iterdir()] == ["resume-state.json"]
    assert raised[0] == raised[1]


def test_one_file_of_ids_from_compressed_json_lines_is_the_plain_files(tmp_path):
    from bytepair.shards import one_file

    tok = bytepair.get_encoding("cl100k_base")
    plain, packed = mixed_files(tmp_path, "zst")
    done = []
    for paths, out in ((plain[2:], "plain.bin"), (packed[2:], "packed.bin")):
        corpus = open_sources([str(p) for p in paths], skip_bad_records=True)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            one_file.encode_documents(tok, corpus, tmp_path / out, progress=done.append)
    assert (tmp_path / "plain.bin").read_bytes() == (tmp_path / "packed.bin").read_bytes()
    # The progress of the compressed file counts its compressed bytes, to the end.
    assert done[-1] == packed[2].stat().st_size


@pytest.mark.parametrize("suffix", ["gz", "zst"])
def test_training_on_compressed_files_learns_what_python_reading_them_learns(
    tmp_path, monkeypatch, suffix
):
    _, packed = mixed_files(tmp_path, suffix)

    def train(core: bool):
        with monkeypatch.context() as patch:
            if not core:
                patch.setattr(text.TextSource, "core_reads", property(lambda self: False))
                patch.setattr(jsonl.JsonlSource, "core_reads", property(lambda self: False))
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                seen = []
                tok = bytepair.train(
                    [str(p) for p in packed],
                    700,
                    special_tokens=[EOT],
                    skip_bad_records=True,
                    progress=seen.append,
                )
        # The counting's progress (bytes) runs to the end; the merges' follows it.
        return tok.merges, tok.training_stats.records_skipped, max(seen)

    core, python = train(True), train(False)
    assert core == python
    assert core[2] == sum(p.stat().st_size for p in packed)  # progress: compressed bytes


def test_training_reports_the_decompressed_bytes_of_a_compressed_text(tmp_path):
    plain = text_files(tmp_path)[0]
    packed = compressed(plain, "xz")
    stats = bytepair.train(str(packed), 300, progress=False).training_stats
    assert stats.bytes_read == plain.stat().st_size


class Interrupt(Exception):
    pass


def test_a_run_stopped_while_reading_a_compressed_file_stops_its_threads_first(
    tmp_path, monkeypatch
):
    # The writer fails mid-file: the run's own error comes out (not one of closing the
    # file under the reading thread), its threads are stopped, and a rerun resumes to
    # the clean folder's bytes.
    from bytepair.shards.writer import ShardWriter

    tok = bytepair.get_encoding("gpt2")
    _, packed = mixed_files(tmp_path, "zst")
    options = {"shard_tokens": 700}
    write(tok, packed, tmp_path / "clean", core=True, **options)
    add, calls = ShardWriter.add, []

    def failing(self, *args):
        calls.append(core_threads())
        if len(calls) == 5:
            raise Interrupt
        return add(self, *args)

    # When the file is closed, the core's threads must be done.
    running_at_close = []
    leave = _stream.Pieces.__exit__

    def closed(self, *exc):
        running_at_close.append(core_threads())
        return leave(self, *exc)

    monkeypatch.setattr(_stream.Pieces, "__exit__", closed)
    monkeypatch.setattr(ShardWriter, "add", failing)
    with pytest.raises(Interrupt):
        write(tok, packed, tmp_path / "cut", core=True, **options)
    assert "bytepair-read" in calls[-1]  # running while the blocks are written
    assert running_at_close == [[]]
    assert not core_threads()
    monkeypatch.setattr(ShardWriter, "add", add)
    write(tok, packed, tmp_path / "cut", core=False, **options)
    assert folder_bytes(tmp_path / "cut") == folder_bytes(tmp_path / "clean")


# stdin: read by the core, its bytes handed over by Python (decompressed if compressed),
# as a compressed file's are.


def on_stdin(monkeypatch, data: bytes) -> None:
    """``data`` as this process's stdin (``sys.stdin.buffer``), for one reading."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize("suffix", [None, "gz"])
def test_stdin_gives_pythons_folder_on_the_cores_road(tmp_path, monkeypatch, suffix):
    tok = bytepair.get_encoding("cl100k_base")
    path = text_files(tmp_path)[0]
    data = path.read_bytes() if suffix is None else compressed(path, suffix).read_bytes()
    options = {"shard_tokens": 3000, "val_fraction": 0.2}
    folders = {}
    for core in (True, False):
        on_stdin(monkeypatch, data)
        with monkeypatch.context() as patch:
            if core:
                patch.setattr(text.TextSource, "parts", refuse_python)
            _, used = write(tok, ["-"], tmp_path / f"stdin-{core}", core=core, **options)
        assert used == [core]
        folders[core] = folder_bytes(tmp_path / f"stdin-{core}")
    assert folders[True] == folders[False]
    # The ids are the file's.
    write(tok, [path], tmp_path / "file", core=True, **options)
    ids = {k: v for k, v in folder_bytes(tmp_path / "file").items() if k.endswith(".bin")}
    assert ids and ids == {k: v for k, v in folders[True].items() if k.endswith(".bin")}


def test_invalid_utf8_on_stdin_names_stdin_and_the_offset_and_leaves_no_shard(
    tmp_path, monkeypatch
):
    tok = bytepair.get_encoding("gpt2")
    data = ("x" * 5000 + EOT).encode() * 3 + b"ab\xffcd"
    said, left = [], []
    for core in (True, False):
        on_stdin(monkeypatch, data)
        out = tmp_path / f"out-{core}"
        with pytest.raises(ValueError, match=r"^<stdin>: invalid UTF-8 at byte offset") as e:
            write(tok, ["-"], out, core=core, shard_tokens=700)
        said.append(str(e.value))
        left.append(folder_bytes(out))
    # Both name the same byte (the core's message adds how to get past it).
    assert all(
        f"<stdin>: invalid UTF-8 at byte offset {len(data) - 3} (byte 0xff)" in m for m in said
    )
    # What a run leaves to resume from (and shards finished before the bad byte, here
    # the core's road's, which reads in smaller blocks), and no temporary file.
    for files in left:
        assert "resume-state.json" in files
        assert not [name for name in files if name.endswith(".tmp")]
    assert not core_threads()


@pytest.mark.parametrize("suffix", [None, "zst"])
def test_training_on_stdin_is_counted_by_the_core_into_the_files_merges(
    tmp_path, monkeypatch, suffix
):
    from bytepair import training

    path = text_files(tmp_path)[1]
    data = path.read_bytes() if suffix is None else compressed(path, suffix).read_bytes()
    from_file = bytepair.train(str(path), 600, special_tokens=[EOT], progress=False)

    def refuse(*args, **kwargs):
        raise AssertionError("counted from Python's reading")

    monkeypatch.setattr(training, "_count_documents", refuse)
    on_stdin(monkeypatch, data)
    seen = []
    tok = bytepair.train("-", 600, special_tokens=[EOT], progress=seen.append)
    assert tok.merges == from_file.merges
    assert tok.training_stats.bytes_read == path.stat().st_size
    assert max(seen) == len(data)  # progress: the bytes read from stdin
