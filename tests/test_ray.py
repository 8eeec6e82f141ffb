"""Training on a real Ray cluster: two nodes started with ``ray start`` on loopback
addresses, merges identical to local training, and a task whose worker dies is retried.

Ray maps ``--node-ip-address 127.0.0.1`` to the machine's outward address, so the nodes
use 127.0.0.2 and 127.0.0.3: still loopback, nothing leaves the machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import bytepair
from bytepair.runners import feed
from bytepair.sources import _stream, open_sources

from conftest import DATA, EOT, folder_bytes

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'bytepair[ray]')")
RAY = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
HEAD, NODE = "127.0.0.2", "127.0.0.3"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HEAD, 0))
        return s.getsockname()[1]


def ray_cmd(*args: str) -> None:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    r = subprocess.run([RAY, *args], capture_output=True, text=True, env=env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def cluster():
    if RAY is None:
        pytest.skip("the ray command is not on PATH")
    # On a loaded machine Ray's own start-up wait can run out: stop and try again, twice
    # at most (the test loop stays bounded).
    for attempt in range(2):
        port = free_port()
        try:
            ray_cmd(
                "start",
                "--head",
                f"--port={port}",
                "--num-cpus=1",
                f"--node-ip-address={HEAD}",
                "--include-dashboard=false",
                "--disable-usage-stats",
            )
            break
        except AssertionError:
            subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
            if attempt == 1:
                raise
    try:
        ray_cmd("start", f"--address={HEAD}:{port}", "--num-cpus=1", f"--node-ip-address={NODE}")
        yield f"{HEAD}:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A few hundred KB of text with documents and lines to cut at."""
    path = tmp_path_factory.mktemp("ray") / "corpus.txt"
    text = (DATA / "corpus.en").read_text(encoding="utf-8")
    story = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
    path.write_text((text + EOT + story) * 3, encoding="utf-8")
    return path


def connect(address: str) -> None:
    ray.init(address=address, _node_ip_address=HEAD, log_to_driver=False)


def kill_one_task(monkeypatch, module, name: str, tmp_path: Path) -> Path:
    """Replaces the task function ``module.name`` with one whose first run, on whichever
    worker, kills its own worker process (Ray must retry the task); returns the marker
    file that run creates. The replacement is a closure, so Ray ships it by value: the
    workers need not import this test module."""
    import inspect

    task = getattr(module, name)
    marker = str(tmp_path / "killed-once")

    def die_the_first_time() -> None:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(1)

    if inspect.isgeneratorfunction(task):

        def dying(*args, **kwargs):
            die_the_first_time()
            yield from task(*args, **kwargs)
    else:

        def dying(*args, **kwargs):
            die_the_first_time()
            return task(*args, **kwargs)

    monkeypatch.setattr(module, name, dying)
    return Path(marker)


def test_the_cluster_has_two_nodes_on_loopback(cluster):
    connect(cluster)
    try:
        nodes = [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]]
    finally:
        ray.shutdown()
    assert sorted(nodes) == [HEAD, NODE]


def test_ray_training_gives_the_merges_of_local_training(cluster, corpus, monkeypatch, tmp_path):
    import bytepair.runners.ray as ray_runner

    monkeypatch.setattr(ray_runner, "PART_BYTES", 40_000)  # many parts, on both nodes
    local = bytepair.train(corpus, 700, special_tokens=[EOT], progress=False)
    jsonl = tmp_path / "docs.jsonl"
    docs = corpus.read_text(encoding="utf-8").split(EOT)
    import json

    jsonl.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    connect(cluster)
    try:
        remote = bytepair.train(corpus, 700, special_tokens=[EOT], progress=False, engine="ray")
        from_jsonl = bytepair.train(jsonl, 700, special_tokens=[EOT], progress=False, engine="ray")
    finally:
        ray.shutdown()
    assert remote.merges == local.merges and remote.vocab == local.vocab
    assert (
        from_jsonl.merges == bytepair.train(jsonl, 700, special_tokens=[EOT], progress=False).merges
    )


def test_a_task_whose_worker_dies_is_retried_and_the_result_is_the_same(
    cluster, corpus, monkeypatch, tmp_path
):
    import bytepair.runners.ray as ray_runner

    monkeypatch.setattr(ray_runner, "PART_BYTES", 60_000)
    marker = kill_one_task(monkeypatch, ray_runner, "_count_part", tmp_path)
    connect(cluster)
    try:
        remote = bytepair.train(corpus, 600, special_tokens=[EOT], progress=False, engine="ray")
    finally:
        ray.shutdown()
    assert marker.exists()  # a worker did die
    monkeypatch.undo()
    assert remote.merges == bytepair.train(corpus, 600, special_tokens=[EOT], progress=False).merges


def test_an_error_in_a_task_reads_as_it_does_locally(cluster, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text\n" * 10 + b"\xff")
    connect(cluster)
    try:
        with pytest.raises(ValueError, match=r"bad.txt: invalid UTF-8 at byte offset 100"):
            bytepair.train(bad, 300, progress=False, engine="ray")
    finally:
        ray.shutdown()


def test_without_ray_the_error_names_the_extra(monkeypatch):
    import bytepair.runners.ray as ray_runner

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'pip install "bytepair\[ray\]"'):
        ray_runner._import_ray()


def test_ray_training_splits_record_files_into_tasks_with_the_local_merges(
    cluster, inputs, monkeypatch, tmp_path
):
    """Uncompressed JSON Lines by ranges of lines, Parquet by runs of row groups: many
    tasks per file, the merges of local training; bad records skipped in the tasks are
    reported on the driver, counted as locally."""
    import bytepair.runners.ray as ray_runner
    from bytepair.runners.plan import record_parts
    from bytepair.sources import open_sources as sources

    monkeypatch.setattr(ray_runner, "PART_BYTES", 20_000)
    jsonl = tmp_path / "with-bad.jsonl"
    lines = inputs["jsonl"].read_text("utf-8").splitlines(keepends=True)
    lines[150:150] = ["not json\n", '{"text": 7}\n']
    jsonl.write_text("".join(lines), "utf-8")
    paths = [jsonl, inputs["parquet"]]
    assert [len(record_parts(s, 20_000)) > 3 for s in sources(paths).sources] == [True, True]
    options = {"special_tokens": [EOT], "progress": False, "skip_bad_records": True}
    with pytest.warns(UserWarning, match=r"skipped 2 bad record\(s\)") as local_warnings:
        local = bytepair.train(paths, 600, **options)
    connect(cluster)
    try:
        with pytest.warns(UserWarning, match=r"skipped 2 bad record\(s\)") as ray_warnings:
            remote = bytepair.train(paths, 600, engine="ray", **options)
    finally:
        ray.shutdown()
    assert remote.merges == local.merges
    assert remote.training_stats.records_skipped == local.training_stats.records_skipped == 2
    first_local = [str(w.message) for w in local_warnings if "skipped" in str(w.message)]
    first_ray = [str(w.message) for w in ray_warnings if "skipped" in str(w.message)]
    assert first_ray == first_local and "line 151" in first_ray[0]


# ---- encoding shards on Ray: the folder is byte-identical to the local run's ----


@pytest.fixture(scope="module")
def documents(corpus) -> list[str]:
    """A few hundred documents of 1 to 12 lines of the corpus."""
    lines = corpus.read_text(encoding="utf-8").replace(EOT, "").splitlines(keepends=True)
    docs, i = [], 0
    while i < len(lines) and len(docs) < 400:
        docs.append("".join(lines[i : i + 1 + i % 12]))
        i += 1 + i % 12
    return docs


@pytest.fixture(scope="module")
def inputs(documents, tmp_path_factory) -> dict[str, Path]:
    """The documents as text (joined by EOT), as JSON Lines and as Parquet."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("encode")
    txt, jsonl, parquet = folder / "docs.txt", folder / "docs.jsonl", folder / "docs.parquet"
    txt.write_text(EOT.join(documents), encoding="utf-8")
    jsonl.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents), "utf-8")
    pq.write_table(pa.table({"text": documents}), parquet, row_group_size=25)
    return {"txt": txt, "jsonl": jsonl, "parquet": parquet}


def shards_of(paths, out: Path, **options) -> dict[str, bytes]:
    # Long documents are read in parts locally (Ray's tasks read them whole).
    corpus = open_sources(paths, special_tokens=[EOT], part_chars=400)
    options = {"shard_tokens": 3000, "progress": False, **options}
    inputs = [{"path": s.name, "bytes": s.size} for s in corpus.sources]
    bytepair.write_shards(bytepair.get_encoding("gpt2"), corpus, out, inputs=inputs, **options)
    return folder_bytes(out)


ENCODE_OPTIONS = [
    {},
    {"val_fraction": 0.2, "shuffle_docs": 3, "format": "npy"},
    {"val_tokens": 5000, "bos": EOT, "eot": None},
]


@pytest.mark.parametrize("kind", ["txt", "jsonl", "parquet"])
@pytest.mark.parametrize("options", ENCODE_OPTIONS, ids=["plain", "val+shuffle", "val_tokens"])
def test_ray_encoded_shards_are_the_local_bytes(
    cluster, inputs, kind, options, monkeypatch, tmp_path
):
    import bytepair.runners.ray_encode as ray_encode

    monkeypatch.setattr(ray_encode, "PART_BYTES", 20_000)  # many tasks, on both nodes
    monkeypatch.setattr(feed, "BATCH_CHARS", 7000)  # many batches per task
    monkeypatch.setattr(_stream, "_RAW_CHUNK", 700)  # text read locally in small pieces
    paths = [inputs[kind], inputs["txt"]] if kind != "txt" else [inputs[kind]]
    local = shards_of(paths, tmp_path / "local", **options)
    connect(cluster)
    try:
        remote = shards_of(paths, tmp_path / "ray", engine="ray", **options)
    finally:
        ray.shutdown()
    assert len(local) > 6 and remote == local


def test_a_bad_record_in_a_ray_task_names_its_line_in_the_file(
    cluster, inputs, monkeypatch, tmp_path
):
    import bytepair.runners.ray_encode as ray_encode

    monkeypatch.setattr(ray_encode, "PART_BYTES", 20_000)
    bad = tmp_path / "bad.jsonl"
    lines = inputs["jsonl"].read_text(encoding="utf-8").splitlines(keepends=True)
    bad.write_text("".join(lines[:300]) + "{oops\n" + "".join(lines[300:]), encoding="utf-8")
    assert len(ray_encode.units(open_sources([bad], part_chars=None), 20_000)) > 5
    connect(cluster)
    try:
        with pytest.raises(ValueError, match=r"bad.jsonl: line 301: not JSON"):
            shards_of([bad], tmp_path / "o", engine="ray")
        with pytest.warns(UserWarning, match=r"skipped 1 bad record.*line 301"):
            corpus = open_sources([bad], part_chars=None, skip_bad_records=True)
            bytepair.write_shards(
                bytepair.get_encoding("gpt2"), corpus, tmp_path / "p", engine="ray", progress=False
            )
    finally:
        ray.shutdown()


def test_ray_encoding_cuts_text_files_between_documents(inputs):
    from bytepair.runners.plan import document_parts

    parts = document_parts(inputs["txt"], EOT, 20_000)
    data = inputs["txt"].read_bytes()
    assert len(parts) > 5 and parts[0][1] == 0 and parts[-1][2] == len(data)
    for (_, _, end), (_, start, _) in zip(parts, parts[1:]):
        assert end == start and data[:end].endswith(EOT.encode())
    assert len(document_parts(inputs["txt"], "\n\n", 20_000)) == 1  # could overlap itself


def test_a_worker_dying_during_ray_encoding_changes_no_byte(cluster, inputs, monkeypatch, tmp_path):
    import bytepair.runners.ray_encode as ray_encode

    monkeypatch.setattr(ray_encode, "PART_BYTES", 30_000)
    local = shards_of([inputs["txt"]], tmp_path / "local", val_fraction=0.3)
    marker = kill_one_task(monkeypatch, ray_encode, "_encode_unit", tmp_path)
    connect(cluster)
    try:
        remote = shards_of([inputs["txt"]], tmp_path / "ray", engine="ray", val_fraction=0.3)
    finally:
        ray.shutdown()
    assert marker.exists()  # a worker did die
    assert remote == local


class Interrupt(Exception):
    pass


@pytest.mark.parametrize(
    "options", [{"val_fraction": 0.2, "shuffle_docs": 1}, {"val_fraction": 0.2}]
)
def test_an_interrupted_ray_run_resumes_to_the_same_bytes(
    cluster, inputs, options, monkeypatch, tmp_path
):
    import bytepair.runners.ray_encode as ray_encode
    from bytepair.runners import local

    monkeypatch.setattr(ray_encode, "PART_BYTES", 20_000)
    monkeypatch.setattr(feed, "BATCH_CHARS", 5000)
    monkeypatch.setattr(local, "BLOCK_BYTES", 5000)  # the local engine's text files
    clean = shards_of([inputs["txt"]], tmp_path / "clean", **options)

    def stop_at(k):
        calls = []

        def progress(done):
            calls.append(done)
            if len(calls) == k:
                raise Interrupt

        return progress

    connect(cluster)
    try:
        for k, engines in ((8, ("ray", "ray")), (15, ("ray", "local")), (4, ("local", "ray"))):
            out = tmp_path / f"cut{k}"
            with pytest.raises(Interrupt):
                shards_of([inputs["txt"]], out, engine=engines[0], **options, progress=stop_at(k))
            assert (out / "resume-state.json").exists() and not (out / "manifest.json").exists()
            assert shards_of([inputs["txt"]], out, engine=engines[1], **options) == clean, k
        from bytepair.cli import main

        assert main(["encode", "-t", "gpt2", str(inputs["txt"]), "-o", f"{tmp_path}/cli/",
                     "--shard-tokens", "3000", "--engine", "ray", "-q"]) in (0, None)  # fmt: skip
    finally:
        ray.shutdown()
    assert (
        folder_bytes(tmp_path / "cli").keys()
        == shards_of([inputs["txt"]], tmp_path / "cli-local").keys()
    )


def test_a_resumed_ray_run_only_counts_the_parts_before_its_resume_point(
    cluster, inputs, monkeypatch
):
    import bytepair.runners.ray_encode as ray_encode

    tok = bytepair.get_encoding("gpt2")
    corpus = open_sources([inputs["txt"]], special_tokens=[EOT], part_chars=None)
    options = {"dtype": "<u2", "allowed": set(), "disallowed": (), "batch_chars": 5000}
    options["part_bytes"] = 20_000
    connect(cluster)
    try:
        whole = list(ray_encode.encoded_documents(tok, corpus, **options))
        resumed = list(ray_encode.encoded_documents(tok, corpus, skip_docs=250, **options))
    finally:
        ray.shutdown()
    assert len(resumed) == len(whole) == 400
    encoded = [bool(len(d.ids)) or not len(w.ids) for d, w in zip(resumed, whole)]
    boundary = encoded.index(True)  # the first document of the unit holding document 250
    assert 150 < boundary <= 250 and all(encoded[boundary:])
    assert all(
        d.ids.tolist() == w.ids.tolist() for d, w in zip(resumed[boundary:], whole[boundary:])
    )
    assert sum(d.nbytes for d in resumed) == sum(w.nbytes for w in whole)


def test_ray_encoding_takes_files_not_iterables(tmp_path):
    with pytest.raises(TypeError, match="open_sources"):
        bytepair.write_shards(bytepair.get_encoding("gpt2"), ["a doc"], tmp_path, engine="ray")
