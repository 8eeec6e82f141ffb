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

from conftest import DATA, EOT

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
    port = free_port()
    ray_cmd(
        "start",
        "--head",
        f"--port={port}",
        "--num-cpus=1",
        f"--node-ip-address={HEAD}",
        "--include-dashboard=false",
        "--disable-usage-stats",
    )
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
    marker = tmp_path / "killed-once"
    monkeypatch.setenv("BYTEPAIR_TEST_KILL_ONE_TASK", str(marker))
    connect(cluster)
    try:
        remote = bytepair.train(corpus, 600, special_tokens=[EOT], progress=False, engine="ray")
    finally:
        ray.shutdown()
    assert marker.exists()  # a worker did die
    monkeypatch.delenv("BYTEPAIR_TEST_KILL_ONE_TASK")
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
