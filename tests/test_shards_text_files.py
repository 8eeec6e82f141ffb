"""Shard folders from plain text files: the core reads, splits and encodes them
(``bytepair.runners.local.encode_files_into``, ``DocumentBatches``), and the
folder is byte for byte the one the Python road (sources read in Python, batches
encoded with ``encode_batch_to_numpy``) writes from the same files."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bytepair
from bytepair.runners import local
from bytepair.sources import open_sources, part_chars_for

from conftest import EOT, core_threads, folder_bytes, shard_road

EXAMPLE = Path(__file__).parent.parent / "examples" / "books.txt"


class Interrupt(Exception):
    pass


def text_files(tmp_path: Path, seed: int = 0) -> list[Path]:
    """Three files of the example books' text in documents of random lengths, with
    what splitting must get right: separators at the start and end, two in a row, a
    document of 40,000 characters, non-ASCII text, a file without separators, and a
    separator's prefix that is not one."""
    text = EXAMPLE.read_text(encoding="utf-8")
    rnd = random.Random(seed)

    def doc(most: int) -> str:
        start = rnd.randrange(len(text) - most)
        return text[start : start + rnd.randrange(1, most)]

    first = [doc(3000) for _ in range(40)] + ["héllo wörld ñ 日本語 ", "", doc(40_000)]
    second = ["", *(doc(2000) for _ in range(25)), "x <|endoftext", ""]
    files = [
        (tmp_path / "a.txt", EOT.join(first)),
        (tmp_path / "b.txt", EOT.join(second) + EOT + EOT),
        (tmp_path / "c.txt", doc(5000)),
    ]
    for path, content in files:
        path.write_text(content, encoding="utf-8")
    return [path for path, _ in files]


def write(tok, paths, out, *, core: bool, separators=(EOT,), errors="strict", **options):
    """``write_shards`` of the files, by the core's road or by Python's."""
    corpus = open_sources(
        [str(p) for p in paths],
        special_tokens=separators,
        errors=errors,
        part_chars=part_chars_for(tok),
    )
    with shard_road(core) as used:
        return bytepair.write_shards(tok, corpus, out, progress=False, **options), used


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 700 bytes: documents span many blocks, blocks hold many documents."""
    monkeypatch.setattr(local, "BLOCK_BYTES", 700)


SHARD_OPTIONS = [
    {"shard_tokens": 700},
    {"shard_tokens": 900, "val_fraction": 0.3, "format": "npy", "bos": EOT},
    {"shard_tokens": 800, "val_tokens": 6000, "eot": None, "bos": EOT},
    {"shard_tokens": 100_000_000},
]


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
@pytest.mark.parametrize(
    "options", SHARD_OPTIONS, ids=["train", "val_fraction", "val_tokens", "one_shard"]
)
def test_the_cores_road_writes_the_folder_pythons_writes(tmp_path, small_blocks, name, options):
    tok = bytepair.get_encoding(name)
    paths = text_files(tmp_path)
    _, used = write(tok, paths, tmp_path / "core", core=True, **options)
    assert used == [True]
    _, used = write(tok, paths, tmp_path / "python", core=False, **options)
    assert used == [False]
    assert folder_bytes(tmp_path / "core") == folder_bytes(tmp_path / "python")
    manifest = bytepair.open_shards(tmp_path / "core").manifest
    # 43 documents in a.txt less its empty one, 25 in b.txt (the "x <|endoftext" one
    # included), one in c.txt.
    assert sum(s["documents"] for s in manifest["splits"].values()) == 42 + 26 + 1


def test_the_documents_read_back_as_the_encoding_of_the_text_between_separators(tmp_path):
    tok = bytepair.get_encoding("gpt2")
    paths = text_files(tmp_path, seed=3)
    write(tok, paths, tmp_path / "out", core=True, shard_tokens=1000)
    shards = bytepair.open_shards(tmp_path / "out")
    ids = np.concatenate(
        [np.fromfile(tmp_path / "out" / s["file"], "<u2") for s in shards.manifest["shards"]]
    )
    want = []
    for path in paths:
        for doc in path.read_text(encoding="utf-8").split(EOT):
            if doc:
                want += tok.encode_ordinary(doc) + [tok.special_tokens[EOT]]
    assert ids.tolist() == want


def test_a_framed_tokenizer_and_a_doc_separator_take_the_cores_road_alike(tmp_path, small_blocks):
    base = bytepair.get_encoding("gpt2").with_special_tokens(["<|b|>", "<|e|>"])
    framed = base.with_options(bos_token="<|b|>", eos_token="<|e|>", add_bos=True, add_eos=True)
    paths = text_files(tmp_path, seed=5)
    for sep in ((EOT,), ("\n\n",)):
        folders = []
        for core in (True, False):
            out = tmp_path / f"{core}{len(sep[0])}"
            _, used = write(framed, paths, out, core=core, separators=sep, shard_tokens=600)
            assert used == [core]
            folders.append(folder_bytes(out))
        assert folders[0] == folders[1]


def test_invalid_utf8_is_replaced_as_python_replaces_it_or_named_by_offset(tmp_path, small_blocks):
    tok = bytepair.get_encoding("gpt2")
    path = tmp_path / "bad.txt"
    good = EXAMPLE.read_bytes()[:3000]
    path.write_bytes(good + b"\xff\xfe ok \xe2\x82" + EOT.encode() + good + b"\xc3")
    folders = []
    for core in (True, False):
        out = tmp_path / f"r{core}"
        write(tok, [path], out, core=core, errors="replace", shard_tokens=500)
        folders.append(folder_bytes(out))
    assert folders[0] == folders[1]
    out = tmp_path / "strict"
    with pytest.raises(ValueError, match=rf"bad\.txt: invalid UTF-8 at byte offset {len(good)}\b"):
        write(tok, [path], out, core=True, shard_tokens=500)
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_special_token_the_run_refuses_is_named_by_file_and_offset(tmp_path):
    tok = bytepair.get_encoding("gpt2")
    path = tmp_path / "t.txt"
    path.write_text("a b c\n" * 500 + "<|fim|>" + " d", encoding="utf-8")
    tok = tok.with_special_tokens(["<|fim|>"])
    with pytest.raises(
        ValueError, match=r"t\.txt: the special token '<\|fim\|>' at byte offset 3000"
    ):
        write(tok, [path], tmp_path / "o", core=True, disallowed_special="all")
    assert not [p for p in (tmp_path / "o").iterdir() if p.name.endswith(".tmp")]


def test_a_run_interrupted_on_the_cores_road_resumes_to_the_same_bytes(
    tmp_path, small_blocks, monkeypatch
):
    tok = bytepair.get_encoding("gpt2")
    paths = text_files(tmp_path, seed=7)
    options = {"shard_tokens": 700, "val_fraction": 0.25}
    write(tok, paths, tmp_path / "clean", core=True, **options)
    clean = folder_bytes(tmp_path / "clean")
    from bytepair.shards.writer import ShardWriter

    add = ShardWriter.add
    for k in (3, 17, 60):
        calls = []

        def failing(self, *args, k=k, calls=calls):
            calls.append(1)
            if len(calls) == k:
                raise Interrupt
            return add(self, *args)

        monkeypatch.setattr(ShardWriter, "add", failing)
        out = tmp_path / f"cut{k}"
        with pytest.raises(Interrupt):
            write(tok, paths, out, core=True, **options)
        monkeypatch.setattr(ShardWriter, "add", add)
        assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
        assert (out / "resume-state.json").exists()
        # The resumed run skips documents by number: Python's road.
        _, used = write(tok, paths, out, core=True, **options)
        assert used == [False]
        assert folder_bytes(out) == clean, k
    # No thread of an interrupted run is left behind.
    assert not core_threads()


def test_shuffled_documents_take_pythons_road(tmp_path):
    # (stdin takes the core's road: test_shards_compressed.py.)
    tok = bytepair.get_encoding("gpt2")
    plain = text_files(tmp_path)
    _, used = write(tok, plain, tmp_path / "shuffled", core=True, shuffle_docs=3)
    assert used == [False]


NUMPY_FREE = """
import sys
from bytepair.cli import main
code = main(["encode", "-t", "gpt2", "-q", *sys.argv[1:]])
print(code, "numpy" in sys.modules)
"""


def test_the_cli_writes_a_folder_from_text_files_without_importing_numpy(tmp_path):
    # numpy's import was a tenth of a 200 MB file's shard folder: the core's road,
    # the writer and the CLI leave it out (reading shards still uses it).
    paths = text_files(tmp_path)
    out = tmp_path / "out"
    args = [*map(str, paths), "-o", f"{out}/", "--shard-tokens", "5000", "--val-fraction", "0.2"]
    r = subprocess.run(
        [sys.executable, "-c", NUMPY_FREE, *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "False"]
    # And the shards are the ones the Python road writes.
    tok = bytepair.get_encoding("gpt2")
    expected, _ = write(
        tok, paths, tmp_path / "py", core=False, shard_tokens=5000, val_fraction=0.2
    )
    got = folder_bytes(out)
    assert json.loads(got.pop("manifest.json"))["shards"] == expected["shards"]
    assert got == {k: v for k, v in folder_bytes(tmp_path / "py").items() if k != "manifest.json"}
    assert {s["split"] for s in expected["shards"]} == {"train", "val"}


def test_the_cli_writes_a_folder_from_jsonl_without_importing_numpy(tmp_path):
    # JSON Lines take the Python road (documents read in Python, batches encoded by the
    # core into its own buffers): no numpy there either, whose import also started
    # BLAS threads that took CPU from the encoding.
    records = ["héllo wörld ñ 日本語", "", "the cat " * 400, "text that says <|endoftext|>"]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": r}) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out"
    args = [str(path), "-o", f"{out}/", "--shard-tokens", "300"]
    r = subprocess.run(
        [sys.executable, "-c", NUMPY_FREE, *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "False"]
    tok = bytepair.get_encoding("gpt2")
    shards = bytepair.open_shards(out)
    assert len(shards.manifest["shards"]) > 1
    for i, text in enumerate(records):
        expected = tok.encode(text, disallowed_special=()) + [tok.special_tokens[EOT]]
        assert shards.doc(i).tolist() == expected
