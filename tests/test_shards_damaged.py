"""Shard folders a careless or hostile hand changed, and two writers on one folder:
every damage is refused on open with an error naming the file, never read short."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import blake3
import numpy as np
import pytest
import xxhash

import bytepair
from bytepair.shards.lock import LOCK, FolderLock

from conftest import folder_bytes


@pytest.fixture(scope="module")
def gpt2():
    return bytepair.get_encoding("gpt2")


@pytest.fixture
def folder(gpt2, tmp_path) -> Path:
    """Three train shards of 500 tokens and one val shard (bin), 60 documents."""
    docs = [f"Document number {i} says hello to the world. " * (3 + i % 5) for i in range(60)]
    out = tmp_path / "shards"
    bytepair.write_shards(gpt2, docs, out, shard_tokens=500, val_tokens=300, progress=False)
    return out


def edit_manifest(folder: Path, change) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def test_a_truncated_shard_is_refused_on_open_naming_the_file(folder):
    shards = bytepair.open_shards(folder)
    whole = len(shards.tokens("train"))
    path = folder / "train_000001.bin"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        ValueError, match=r"train_000001.bin: 500 bytes, .*manifest.json says 500 tokens"
    ):
        bytepair.open_shards(folder)
    assert whole == json.loads((folder / "manifest.json").read_text())["splits"]["train"]["tokens"]


def test_a_shard_truncated_after_opening_is_refused_when_read_not_read_short(folder):
    shards = bytepair.open_shards(folder)
    path = folder / "train_000000.bin"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="train_000000.bin: 100 bytes"):
        shards.tokens("train")
    with pytest.raises(ValueError, match="train_000000.bin: 100 bytes"):
        next(shards.batches(block_size=8, batch_size=2))


def test_an_odd_length_shard_is_refused_naming_it(folder):
    path = folder / "train_000000.bin"
    path.write_bytes(path.read_bytes() + b"\x00")
    with pytest.raises(ValueError, match=r"train_000000.bin: 1,001 bytes.*holds 500.5\)"):
        bytepair.open_shards(folder)


def test_a_corrupt_index_is_refused_naming_it(folder):
    (folder / "train_000002.idx.npy").write_bytes(b"not a numpy file at all")
    with pytest.raises(ValueError, match=r"train_000002.idx.npy: not a readable .npy file"):
        bytepair.open_shards(folder)


def test_an_index_of_the_wrong_length_is_refused_naming_it(folder):
    path = folder / "train_000000.idx.npy"
    np.save(path, np.load(path)[:-1])
    with pytest.raises(ValueError, match=r"train_000000.idx.npy: holds shape \(\d+,\), .* says"):
        bytepair.open_shards(folder)


def test_verify_covers_the_index_files(folder):
    bytepair.open_shards(folder).verify()
    path = folder / "train_000000.idx.npy"
    offsets = np.load(path)
    offsets[1] += 1  # same size, other content
    np.save(path, offsets)
    shards = bytepair.open_shards(folder)  # sizes all agree
    with pytest.raises(ValueError, match=r"train_000000.idx.npy: xxh3_128 differs"):
        shards.verify()


def test_the_manifest_holds_the_xxh3_128_digest_of_every_file(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["version"] == 3
    for shard in manifest["shards"]:
        assert {"blake3", "sha256"}.isdisjoint(shard)
        for name, key in ((shard["file"], "xxh3_128"), (shard["index"], "index_xxh3_128")):
            assert shard[key] == xxhash.xxh3_128((folder / name).read_bytes()).hexdigest()


def test_verify_names_a_changed_shard(folder):
    path = folder / "train_000001.bin"
    data = bytearray(path.read_bytes())
    data[7] ^= 1  # same size, one bit changed
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"train_000001.bin: xxh3_128 differs from manifest.json"):
        bytepair.open_shards(folder).verify()


OLD_DIGESTS = {1: ("sha256", lambda b: hashlib.sha256(b).hexdigest()),
               2: ("blake3", lambda b: blake3.blake3(b).hexdigest())}  # fmt: skip


def as_older_version(manifest: dict, folder: Path, version: int, shards=None) -> None:
    """The manifest as an earlier bytepair wrote it: version 1's SHA-256 digests or
    version 2's BLAKE3 ones (for ``shards``, the indices of the shards to change: all
    by default; a folder resumed across versions holds both kinds)."""
    key, digest = OLD_DIGESTS[version]
    manifest["version"] = version
    for k, shard in enumerate(manifest["shards"]):
        if shards is None or k in shards:
            del shard["xxh3_128"], shard["index_xxh3_128"]
            shard[key] = digest((folder / shard["file"]).read_bytes())
            shard[f"index_{key}"] = digest((folder / shard["index"]).read_bytes())


def test_a_version_2_folder_with_blake3_digests_still_opens_and_verifies(folder):
    edit_manifest(folder, lambda m: as_older_version(m, folder, 2))
    bytepair.open_shards(folder).verify()
    path = folder / "train_000002.bin"
    path.write_bytes(path.read_bytes()[::-1])
    with pytest.raises(ValueError, match=r"train_000002.bin: blake3 differs from manifest.json"):
        bytepair.open_shards(folder).verify()


def test_a_folder_holding_both_kinds_of_digest_has_each_file_checked_by_its_own(folder):
    # Shards 0 and 1 keep BLAKE3 digests, as a version 2 run resumed by this one leaves.
    edit_manifest(folder, lambda m: as_older_version(m, folder, 2, shards={0, 1}))
    edit_manifest(folder, lambda m: m.update(version=3))
    manifest = json.loads((folder / "manifest.json").read_text())
    kinds = [("blake3" in s) + 2 * ("xxh3_128" in s) for s in manifest["shards"]]
    assert kinds[:2] == [1, 1] and set(kinds[2:]) == {2}
    bytepair.open_shards(folder).verify()
    for name, algorithm in (("train_000001.bin", "blake3"), ("train_000002.bin", "xxh3_128")):
        path = folder / name
        good = path.read_bytes()
        path.write_bytes(good[::-1])
        with pytest.raises(ValueError, match=rf"{name}: {algorithm} differs from manifest.json"):
            bytepair.open_shards(folder).verify()
        path.write_bytes(good)


def test_a_run_of_version_2_resumed_by_this_one_finishes_with_both_kinds(
    gpt2, tmp_path, monkeypatch
):
    # A run interrupted under version 2 left finished shards with BLAKE3 digests in its
    # state; this version finishes it: those keep theirs, the new ones get XXH3-128,
    # and the folder verifies, with the clean run's shards.
    from bytepair.runners import local
    from bytepair.shards.writer import ShardWriter
    from bytepair.sources import open_sources

    monkeypatch.setattr(local, "BLOCK_BYTES", 700)  # a block per call of add
    path = tmp_path / "docs.txt"
    eot = "<|endoftext|>"
    path.write_text(eot.join(f"Document {i} says hello. " * (3 + i % 5) for i in range(60)))

    def write(out):
        corpus = open_sources([str(path)], special_tokens=[eot])
        return bytepair.write_shards(gpt2, corpus, out, shard_tokens=500, progress=False)

    write(tmp_path / "clean")
    add = ShardWriter.add

    def failing(self, *args):
        if len(self.splits["train"].shards) == 2:
            raise KeyboardInterrupt
        return add(self, *args)

    out = tmp_path / "cut"
    with monkeypatch.context() as patch:
        patch.setattr(ShardWriter, "add", failing)
        with pytest.raises(KeyboardInterrupt):
            write(out)
    state = json.loads((out / "resume-state.json").read_text())
    finished = state["splits"]["train"]["shards"]
    assert state["version"] == 3 and len(finished) == 2
    state["version"] = 2
    for shard in finished:
        for name, key in ((shard["file"], "blake3"), (shard["index"], "index_blake3")):
            del shard[key.replace("blake3", "xxh3_128")]
            shard[key] = blake3.blake3((out / name).read_bytes()).hexdigest()
    (out / "resume-state.json").write_text(json.dumps(state))
    write(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["version"] == 3
    kinds = [("blake3" in s) + 2 * ("xxh3_128" in s) for s in manifest["shards"]]
    assert kinds[:2] == [1, 1] and set(kinds[2:]) == {2}
    bytepair.open_shards(out).verify()
    assert folder_bytes(out).keys() == folder_bytes(tmp_path / "clean").keys()
    for name, data in folder_bytes(tmp_path / "clean").items():
        if name.endswith((".bin", ".idx.npy")):
            assert (out / name).read_bytes() == data, name


def test_a_version_1_folder_with_sha256_digests_still_opens_and_verifies(folder):
    edit_manifest(folder, lambda m: as_older_version(m, folder, 1))
    shards = bytepair.open_shards(folder)
    shards.verify()
    assert len(shards) > 0
    path = folder / "val_000000.bin"
    path.write_bytes(path.read_bytes()[::-1])
    with pytest.raises(ValueError, match=r"val_000000.bin: sha256 differs from manifest.json"):
        bytepair.open_shards(folder).verify()


def test_a_manifest_of_a_version_to_come_is_refused_naming_the_versions_read(folder):
    edit_manifest(folder, lambda m: m.update(version=4))
    with pytest.raises(
        ValueError, match=r"manifest.json: not a bytepair-shards manifest of version 1, 2 or 3"
    ):
        bytepair.open_shards(folder)


@pytest.mark.parametrize(
    "name", ["../../../../etc/passwd", "/etc/passwd", "sub/train_000000.bin", "..", ""]
)
def test_manifest_file_names_must_be_plain_names_inside_the_folder(folder, name):
    edit_manifest(folder, lambda m: m["shards"][0].update(file=name))
    with pytest.raises(ValueError, match=r"manifest.json: shard 'file' .* not a plain file name"):
        bytepair.open_shards(folder)


def test_null_shards_in_the_manifest_is_a_value_error_naming_it(folder):
    edit_manifest(folder, lambda m: m.update(shards=None))
    with pytest.raises(ValueError, match=r"manifest.json: 'shards' must be a list of shards"):
        bytepair.open_shards(folder)


def test_split_counts_that_do_not_add_up_are_refused(folder):
    edit_manifest(folder, lambda m: m["splits"]["train"].update(tokens=10**9))
    with pytest.raises(ValueError, match=r"manifest.json: split 'train' says 1000000000 tokens"):
        bytepair.open_shards(folder)


def test_a_missing_shard_is_named(folder):
    (folder / "val_000000.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"val_000000.bin: no such file"):
        bytepair.open_shards(folder)


# -- one writer per folder ---------------------------------------------------------------


HOLD_LOCK = """
import sys, time
from bytepair.shards.lock import FolderLock
lock = FolderLock(sys.argv[1]); lock.acquire()
print("locked", flush=True)
time.sleep(60)
"""


def test_a_second_writer_is_refused_naming_the_folder_and_the_first_ones_pid(gpt2, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    other = tmp_path / "x"
    (out / ".train_000000.bin.abcd1234.tmp").write_bytes(b"the first writer's")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(BlockingIOError) as e:
            bytepair.write_shards(gpt2, ["a", "b"], out, progress=False)
        assert str(e.value) == (
            f"{out}: another bytepair process (pid {holder.pid}) is writing shards here; "
            "wait for it to finish or stop it, then rerun to continue"
        )
        # The first writer's temporary file is still there.
        assert (out / ".train_000000.bin.abcd1234.tmp").read_bytes() == b"the first writer's"
        bytepair.write_shards(gpt2, ["a", "b"], other, progress=False)  # others are free
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_lock_left_by_a_killed_writer_does_not_block(gpt2, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "locked\n"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert (out / LOCK).read_text() == f"{holder.pid}\n"  # the file stays; nobody holds it
    manifest = bytepair.write_shards(gpt2, ["a", "b"], out, progress=False)
    assert manifest["splits"]["train"]["documents"] == 2
    assert not (out / LOCK).exists()


def test_the_lock_is_released_when_a_write_fails(gpt2, tmp_path):
    def failing():
        yield "a"
        raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError):
        bytepair.write_shards(gpt2, failing(), tmp_path / "o", progress=False)
    assert not (tmp_path / "o" / LOCK).exists()
    with FolderLock(tmp_path / "o"):  # free again
        pass


def test_the_cli_second_writer_exits_1_with_one_line(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("hello world<|endoftext|>again")
    out = tmp_path / "o"
    out.mkdir()
    with FolderLock(out):
        r = subprocess.run(
            [sys.executable, "-m", "bytepair", "encode", "-t", "gpt2", text, "-o", f"{out}/"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert r.returncode == 1
    assert r.stderr == (
        f"bytepair encode: error: {out}: another bytepair process (pid {os.getpid()}) is "
        "writing shards here; wait for it to finish or stop it, then rerun to continue\n"
    )


def test_rerunning_a_finished_cli_encode_says_complete_and_exits_0(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("hello world<|endoftext|>again<|endoftext|>and again")
    cmd = [sys.executable, "-m", "bytepair", "encode", "-t", "gpt2", text, "-o", f"{tmp_path}/o/"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and first.stderr.startswith("wrote 1 train shard")
    stamp = (tmp_path / "o" / "manifest.json").stat().st_mtime_ns
    time.sleep(0.01)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stderr == (
        f"{tmp_path}/o/: already complete (1 train shard (8 tokens, 3 documents)); nothing to do\n"
    )
    assert (tmp_path / "o" / "manifest.json").stat().st_mtime_ns == stamp


def test_the_cores_running_digest_is_xxh3_128_of_the_bytes_fed_in_any_pieces(tmp_path):
    from bytepair import _core
    from bytepair.shards import manifest as mf

    data = np.arange(100_000, dtype="<u4")  # 400,000 bytes: past the size hashed without the GIL
    expected = xxhash.xxh3_128(data.tobytes()).hexdigest()
    # Pieces shorter than, equal to and longer than XXH3's 256-byte stripe buffer and
    # 1,024-byte block, and past the size hashed holding the GIL.
    for cuts in ([], [3], [255, 256, 1280, 1281], [1000, 65_536, 65_537, 300_000]):
        digest = _core.Checksum()
        raw = memoryview(data).cast("B")
        for a, b in zip([0, *cuts], [*cuts, len(raw)]):
            digest.update(raw[a:b])
        assert digest.hexdigest() == expected
    for n in (0, 1, 16, 17, 128, 129, 240, 241, 1024):  # XXH3's short-input branches
        digest = _core.Checksum()
        digest.update(data.tobytes()[:n])
        assert digest.hexdigest() == xxhash.xxh3_128(data.tobytes()[:n]).hexdigest()
    (tmp_path / "ids.bin").write_bytes(data.tobytes())
    assert mf.digest_of(tmp_path / "ids.bin") == expected
    assert mf.digest_of(tmp_path / "ids.bin", "blake3") == blake3.blake3(data.tobytes()).hexdigest()
    assert (
        mf.digest_of(tmp_path / "ids.bin", "sha256") == hashlib.sha256(data.tobytes()).hexdigest()
    )
    with pytest.raises(ValueError, match='no digest named "md5"'):
        mf.digest_of(tmp_path / "ids.bin", "md5")
    with pytest.raises(ValueError, match="contiguous"):
        _core.Checksum().update(data.reshape(1000, 100)[:, ::2])
    with pytest.raises(OSError, match="missing.bin"):
        mf.digest_of(tmp_path / "missing.bin")
