"""`bytepair decode` of .bin/.npy files: read in chunks, so memory stays flat whatever
the file size, and a character whose bytes span two chunks still decodes exactly."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import bytepair
from bytepair.cli import decode

# A child that decodes with CHUNK_IDS set and prints its peak RSS (bytes) on stderr:
# VmHWM, the peak of this program's own memory (ru_maxrss would start at the forking
# test process's RSS, which Linux carries across exec).
DECODE_CHILD = """
import re, sys
from bytepair.cli import decode, main
decode.CHUNK_IDS = int(sys.argv[1])
code = main(sys.argv[2:])
status = open("/proc/self/status").read()
print(int(re.search(r"VmHWM:\\s*(\\d+) kB", status).group(1)) * 1024, file=sys.stderr)
sys.exit(code)
"""


def decode_cli(chunk_ids: int, *args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", DECODE_CHILD, str(chunk_ids), "decode", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, timeout=300)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("suffix", [".bin", ".npy"])
def test_decoding_a_large_file_keeps_peak_memory_flat(tmp_path, suffix):
    """160 MB of ids (80 M tokens) costs about what 2 MB does: before, the file was
    memory-mapped and every page read stayed in the process's memory (RSS grew by
    about the file's size)."""
    chunk = 1 << 20
    small, big = tmp_path / f"small{suffix}", tmp_path / f"big{suffix}"
    for path, n in ((small, chunk), (big, 80 * chunk)):
        ids = np.full(n, 64, dtype="<u2")  # gpt2 id 64 is "a"
        np.save(path, ids) if suffix == ".npy" else ids.tofile(path)

    def peak(path) -> int:
        r = decode_cli(chunk, "-t", "gpt2", path, "-o", tmp_path / "out.txt")
        assert r.returncode == 0, r.stderr
        return int(r.stderr.decode().splitlines()[-1])

    base = peak(small)
    rss = peak(big)
    assert (tmp_path / "out.txt").stat().st_size == 80 * chunk
    assert rss - base < 60 << 20, (base, rss)


@pytest.mark.parametrize("suffix", [".bin", ".npy"])
def test_characters_split_across_chunks_decode_exactly(tmp_path, suffix):
    tok = bytepair.get_encoding("gpt2")
    text = "naïve café — 日本語のテキスト 🙂 " * 50
    ids = tok.encode(text)
    # Byte-level ids: every byte of "日" is its own token, so chunk edges fall inside
    # characters.
    byte_ids = [tok.encode_single_token(bytes([b])) for b in text.encode("utf-8")]
    for i, seq in enumerate((ids, byte_ids)):
        path = tmp_path / f"ids{i}{suffix}"
        arr = np.array(seq, dtype="<u2")
        np.save(path, arr) if suffix == ".npy" else arr.tofile(path)
        for chunk in (1, 2, 3, 7):
            r = decode_cli(chunk, "-t", "gpt2", path)
            assert r.returncode == 0, r.stderr
            assert r.stdout.decode("utf-8") == text, (i, chunk)


def test_chunks_never_exceed_chunk_ids_and_cover_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(decode, "CHUNK_IDS", 1000)
    path = tmp_path / "ids.npy"
    np.save(path, np.arange(3005, dtype="<u4"))
    chunks = list(decode.id_chunks(str(path), 2))
    assert [len(c) for c in chunks] == [1000, 1000, 1000, 5]
    assert np.concatenate(chunks).tolist() == list(range(3005))


def test_a_truncated_npy_is_refused_naming_it(tmp_path):
    path = tmp_path / "ids.npy"
    np.save(path, np.arange(100, dtype="<u2"))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"ids.npy: its header says 100 ids \(200 bytes\)"):
        list(decode.id_chunks(str(path), 2))


def test_a_big_endian_npy_decodes_its_values(tmp_path):
    path = tmp_path / "ids.npy"
    np.save(path, np.array([31373, 995], dtype=">u2"))
    assert [c.tolist() for c in decode.id_chunks(str(path), 2)] == [[31373, 995]]
