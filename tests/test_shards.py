"""Training shard folders: write_shards, resume, open_shards, and `encode -o OUT/`."""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import _core
from bytepair.runners import feed
from bytepair.shards import writer

from conftest import EOT, folder_bytes, sigint_default

EXAMPLE = Path(__file__).parent.parent / "examples" / "books.txt"
GPT2_EOT = 50256


def make_documents(n: int, seed: int = 0, max_chars: int = 3000) -> list[str]:
    """Slices of the example books, of random lengths (some empty-ish, some long)."""
    text = EXAMPLE.read_text(encoding="utf-8")
    rnd = random.Random(seed)
    docs = []
    for _ in range(n):
        start = rnd.randrange(len(text) - max_chars)
        docs.append(text[start : start + rnd.randrange(1, max_chars)])
    return docs


@pytest.fixture(scope="module")
def gpt2_tok():
    return bytepair.get_encoding("gpt2")


@pytest.fixture(scope="module")
def docs():
    return make_documents(120)


@pytest.mark.parametrize("fmt", ["bin", "npy"])
def test_every_document_reads_back_as_its_encoding_plus_eot(gpt2_tok, docs, tmp_path, fmt):
    out = tmp_path / "out"
    manifest = bytepair.write_shards(
        gpt2_tok, docs, out, shard_tokens=5000, format=fmt, progress=False
    )
    shards = bytepair.open_shards(out)
    assert len(shards) == len(docs)
    for i, doc in enumerate(docs):
        assert shards[i].tolist() == gpt2_tok.encode(doc) + [GPT2_EOT]
    sizes = [s["tokens"] for s in manifest["shards"]]
    assert len(sizes) > 3 and set(sizes[:-1]) == {5000} and 0 < sizes[-1] <= 5000
    assert manifest["dtype"] == "uint16" and manifest["eot_id"] == GPT2_EOT
    assert manifest["tokenizer"] == {"name": "gpt2"}
    first = out / f"train_000000.{fmt}"
    raw = np.load(first) if fmt == "npy" else np.memmap(first, dtype=np.uint16, mode="r")
    assert raw.dtype == np.uint16 and len(raw) == 5000
    shards.verify()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("train_")) == [
        "manifest.json"
    ]


def test_a_trained_tokenizer_is_rebuilt_exactly_from_the_manifest(tmp_path):
    tok = bytepair.train_from_iterator(
        make_documents(50), 300, special_tokens=[EOT, "<|bos|>"], progress=False
    )
    docs = make_documents(10, seed=1)
    bytepair.write_shards(tok, docs, tmp_path / "o", bos="<|bos|>", progress=False)
    shards = bytepair.open_shards(tmp_path / "o")
    assert shards.tokenizer.merges == tok.merges
    assert shards.tokenizer.special_tokens == tok.special_tokens
    bos, eot = tok.special_tokens["<|bos|>"], tok.special_tokens[EOT]
    assert [shards[i].tolist() for i in range(10)] == [[bos, *tok.encode(d), eot] for d in docs]


def test_bos_alone_and_no_eot(gpt2_tok, tmp_path):
    docs = ["hello", "", "world"]
    bytepair.write_shards(gpt2_tok, docs, tmp_path / "o", eot=None, bos=EOT, progress=False)
    shards = bytepair.open_shards(tmp_path / "o")
    assert [shards[i].tolist() for i in range(3)] == [[50256, 31373], [50256], [50256, 6894]]


def test_val_tokens_takes_the_first_whole_documents_until_n_tokens(gpt2_tok, docs, tmp_path):
    lengths = [len(gpt2_tok.encode(d)) + 1 for d in docs]
    manifest = bytepair.write_shards(
        gpt2_tok, docs, tmp_path / "o", shard_tokens=4000, val_tokens=10_000, progress=False
    )
    n_val = next(k for k in range(1, len(docs) + 1) if sum(lengths[:k]) >= 10_000)
    shards = bytepair.open_shards(tmp_path / "o")
    assert shards.num_documents("val") == n_val and len(shards) == len(docs) - n_val
    assert manifest["splits"]["val"]["tokens"] == sum(lengths[:n_val])
    assert shards.doc(n_val - 1, split="val").tolist() == gpt2_tok.encode(docs[n_val - 1]) + [
        GPT2_EOT
    ]
    assert shards[0].tolist() == gpt2_tok.encode(docs[n_val]) + [GPT2_EOT]
    assert [s["file"] for s in manifest["shards"] if s["split"] == "val"] == [
        "val_000000.bin",
        "val_000001.bin",
        "val_000002.bin",
    ]


def test_val_fraction_is_a_deterministic_choice_of_whole_documents(gpt2_tok, docs, tmp_path):
    for name in ("a", "b"):
        bytepair.write_shards(
            gpt2_tok, docs, tmp_path / name, shard_tokens=3000, val_fraction=0.25, progress=False
        )
    assert folder_bytes(tmp_path / "a") == folder_bytes(tmp_path / "b")
    shards = bytepair.open_shards(tmp_path / "a")
    train = [gpt2_tok.decode(shards[i][:-1]) for i in range(len(shards))]
    val = [gpt2_tok.decode(shards.doc(i, "val")[:-1]) for i in range(shards.num_documents("val"))]
    assert 10 < len(val) < 50 and len(train) + len(val) == len(docs)
    is_val = [writer.in_val(i, 0.25, 0) for i in range(len(docs))]
    assert val == [d for d, v in zip(docs, is_val) if v]
    assert train == [d for d, v in zip(docs, is_val) if not v]


@given(
    seed=st.integers(-(2**70), 2**70),
    indices=st.lists(st.integers(0, 2**63), max_size=40),
    fraction=st.one_of(st.floats(0, 1), st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0**-64])),
)
@settings(max_examples=300, deadline=None)
def test_the_cores_val_choices_are_in_vals(seed, indices, fraction):
    # The writer asks the core for a batch's choices at once; in_val (hashlib) is the
    # reference, to the last float: the fraction at a document's own digest too.
    import hashlib

    digests = [
        int.from_bytes(hashlib.blake2b(f"{seed}:{i}".encode(), digest_size=8).digest(), "little")
        for i in indices[:3]
    ]
    for fr in [
        fraction,
        *(d / 2.0**64 for d in digests),
        *(math.nextafter(d / 2.0**64, 1) for d in digests),
    ]:
        got = _core.val_choices(f"{seed}:".encode(), indices, fr)
        assert got == [writer.in_val(i, fr, seed) for i in indices]


def test_shuffle_is_deterministic_for_a_seed_and_keeps_every_document(gpt2_tok, docs, tmp_path):
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        bytepair.write_shards(gpt2_tok, docs, tmp_path / name, shuffle_docs=seed, progress=False)
    assert folder_bytes(tmp_path / "a") == folder_bytes(tmp_path / "b")
    a, c = (bytepair.open_shards(tmp_path / n) for n in "ac")
    order_a = [gpt2_tok.decode(a[i][:-1]) for i in range(len(a))]
    order_c = [gpt2_tok.decode(c[i][:-1]) for i in range(len(c))]
    assert order_a != docs and order_a != order_c
    assert sorted(order_a) == sorted(order_c) == sorted(docs)


def test_the_shuffle_buffer_holds_a_bounded_amount_of_text():
    docs = make_documents(300, max_chars=500)
    held = []
    consumed = [0]

    def source():
        for d in docs:
            consumed[0] += len(d)
            yield d

    out_chars = 0
    for d in writer.shuffled(source(), seed=3, limit=5000):
        out_chars += len(d)
        held.append(consumed[0] - out_chars)
    assert max(held) <= 5000 + 500 and out_chars == sum(map(len, docs))


def test_the_writers_batches_hold_a_bounded_amount_of_text(gpt2_tok, tmp_path, monkeypatch):
    monkeypatch.setattr(feed, "BATCH_CHARS", 2000)
    docs = make_documents(200, max_chars=900)
    batches = []

    class Recording:
        def __getattr__(self, name):
            return getattr(gpt2_tok, name)

        def _encode_batch_flat(self, texts, *args):
            batches.append([len(t) for t in texts])
            return gpt2_tok._encode_batch_flat(texts, *args)

    bytepair.write_shards(Recording(), docs, tmp_path / "o", progress=False)
    assert len(batches) > 20
    # A batch closes as soon as it reaches the limit: all but its last document are below it.
    assert all(sum(b[:-1]) < 2000 for b in batches) and max(map(sum, batches)) < 2000 + 900


def test_batches_are_random_windows_with_y_shifted_by_one(gpt2_tok, docs, tmp_path):
    bytepair.write_shards(gpt2_tok, docs, tmp_path / "o", shard_tokens=700, progress=False)
    shards = bytepair.open_shards(tmp_path / "o")
    flat = np.concatenate(list(shards.tokens()))
    assert len(shards.tokens()) == len(flat)
    windows = np.lib.stride_tricks.sliding_window_view(flat, 65)
    got = list(shards.batches(block_size=64, batch_size=8, seed=1, steps=10))
    assert len(got) == 10
    for x, y in got:
        assert x.shape == y.shape == (8, 64) and x.dtype == y.dtype == np.int64
        assert (x[:, 1:] == y[:, :-1]).all()
        for row_x, row_y in zip(x, y):  # x then y's last token: 65 consecutive ids
            window = np.concatenate([row_x, row_y[-1:]])
            assert (windows == window).all(axis=1).any()
    again = next(shards.batches(block_size=64, batch_size=8, seed=1))
    assert (again[0] == got[0][0]).all()
    with pytest.raises(ValueError, match="too few"):
        next(shards.batches(block_size=len(flat), batch_size=1))


def test_a_window_across_a_shard_boundary_is_read_whole(gpt2_tok, docs, tmp_path):
    bytepair.write_shards(gpt2_tok, docs, tmp_path / "o", shard_tokens=1000, progress=False)
    view = bytepair.open_shards(tmp_path / "o").tokens()
    flat = np.concatenate(list(view))
    assert (view[990:1010] == flat[990:1010]).all() and view[1000] == flat[1000]
    assert (view[-5:] == flat[-5:]).all()


class Interrupt(Exception):
    pass


class Recording:
    """A tokenizer that records the texts the writer hands it to encode."""

    def __init__(self, tok, encoded: list):
        self._tok, self._encoded = tok, encoded

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def _encode_batch_flat(self, texts, *args):
        self._encoded.extend(texts)
        return self._tok._encode_batch_flat(texts, *args)


def interrupted_after(docs, k):
    for i, d in enumerate(docs):
        if i == k:
            raise Interrupt
        yield d


@pytest.mark.parametrize(
    "options",
    [
        {"shard_tokens": 2000},
        {"shard_tokens": 1500, "val_fraction": 0.2, "format": "npy"},
        {"shard_tokens": 1500, "val_tokens": 7000, "shuffle_docs": 5},
    ],
    ids=["train", "val_fraction", "val_tokens+shuffle"],
)
def test_an_interrupted_run_resumes_to_the_same_bytes(gpt2_tok, tmp_path, monkeypatch, options):
    monkeypatch.setattr(feed, "BATCH_CHARS", 3000)
    docs = make_documents(80, seed=2)
    bytepair.write_shards(gpt2_tok, docs, tmp_path / "clean", progress=False, **options)
    clean = folder_bytes(tmp_path / "clean")
    for k in (5, 23, 41, 79):
        out = tmp_path / f"cut{k}"
        with pytest.raises(Interrupt):
            bytepair.write_shards(
                gpt2_tok, interrupted_after(docs, k), out, progress=False, **options
            )
        assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
        assert (out / "resume-state.json").exists() and not (out / "manifest.json").exists()
        bytepair.write_shards(gpt2_tok, docs, out, progress=False, **options)
        assert folder_bytes(out) == clean, k


def test_a_resumed_run_does_not_encode_what_finished_shards_hold(gpt2_tok, tmp_path, monkeypatch):
    monkeypatch.setattr(feed, "BATCH_CHARS", 3000)
    docs = make_documents(80, seed=2)
    with pytest.raises(Interrupt):
        bytepair.write_shards(
            gpt2_tok, interrupted_after(docs, 60), tmp_path / "o", shard_tokens=2000, progress=False
        )
    encoded = []
    recording = Recording(gpt2_tok, encoded)
    bytepair.write_shards(recording, docs, tmp_path / "o", shard_tokens=2000, progress=False)
    assert 20 <= len(encoded) < 40 and encoded == docs[-len(encoded) :]


def test_resuming_with_other_settings_is_refused_naming_what_differs(gpt2_tok, tmp_path):
    docs = make_documents(40)
    inputs = [{"path": "a.txt", "bytes": 1000}]
    with pytest.raises(Interrupt):
        bytepair.write_shards(
            gpt2_tok, interrupted_after(docs, 30), tmp_path / "o", shard_tokens=2000,
            inputs=inputs, progress=False,
        )  # fmt: skip
    cl100k = bytepair.get_encoding("cl100k_base")
    cases = [
        (cl100k, {}, "the tokenizer was gpt2, now cl100k_base"),
        (gpt2_tok, {"inputs": [{"path": "a.txt", "bytes": 1001}]}, "input a.txt was 1,000 bytes, now 1,001"),
        (gpt2_tok, {"inputs": [{"path": "b.txt", "bytes": 1000}]}, "the inputs were ['a.txt'], now ['b.txt']"),
        (gpt2_tok, {"shard_tokens": 3000}, "shard_tokens was 2000, now 3000"),
    ]  # fmt: skip
    for tok, change, message in cases:
        kwargs = {"shard_tokens": 2000, "inputs": inputs, "progress": False, **change}
        with pytest.raises(ValueError, match="other settings") as e:
            bytepair.write_shards(tok, docs, tmp_path / "o", **kwargs)
        assert message in str(e.value)
    bytepair.write_shards(gpt2_tok, docs, tmp_path / "o", shard_tokens=2000, inputs=inputs)
    with pytest.raises(FileExistsError, match="finished shards made with other settings") as e:
        bytepair.write_shards(gpt2_tok, docs, tmp_path / "o", shard_tokens=3000, inputs=inputs)
    assert "shard_tokens was 2000, now 3000" in str(e.value)


def test_rerunning_a_finished_folder_writes_nothing_and_says_it_is_complete(gpt2_tok, tmp_path):
    docs = make_documents(40)
    first = bytepair.write_shards(gpt2_tok, docs, tmp_path / "o", shard_tokens=2000)
    before = folder_bytes(tmp_path / "o")
    encoded = []
    again = bytepair.write_shards(
        Recording(gpt2_tok, encoded), docs, tmp_path / "o", shard_tokens=2000
    )
    assert (first["complete"], again["complete"]) == (False, True)
    assert encoded == [] and again["shards"] == first["shards"]
    assert folder_bytes(tmp_path / "o") == before


def test_a_folder_finished_by_an_older_version_is_still_refused(gpt2_tok, tmp_path):
    bytepair.write_shards(gpt2_tok, ["a", "b"], tmp_path / "o")
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    del manifest["options"]  # what versions before the options were recorded wrote
    (tmp_path / "o" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FileExistsError, match="already holds finished shards"):
        bytepair.write_shards(gpt2_tok, ["a", "b"], tmp_path / "o")


def test_bad_options_are_named(gpt2_tok, tmp_path):
    with pytest.raises(ValueError, match="'<\\|im_start\\|>' is not a special token"):
        bytepair.write_shards(gpt2_tok, ["a"], tmp_path / "o", bos="<|im_start|>")
    with pytest.raises(ValueError, match="not both"):
        bytepair.write_shards(gpt2_tok, ["a"], tmp_path / "o", val_tokens=1, val_fraction=0.1)
    with pytest.raises(FileNotFoundError, match="unfinished run"):
        with pytest.raises(Interrupt):
            bytepair.write_shards(gpt2_tok, interrupted_after(["a"] * 9, 3), tmp_path / "p")
        bytepair.open_shards(tmp_path / "p")


# -- the command line, with real signals -------------------------------------------------


# The CLI with small batches on the Python road and small blocks on the core's (a text
# file's), and 10 ms after each shard it finishes, so that shards finish all through a
# run and a signal sent on seeing two of them lands in its midst. (With the core's 3 MB
# blocks the 4 MB corpus's shards came nearly all at once, within 8 ms of the manifest,
# and a signal could land after the manifest was written.)
SMALL_BATCHES_CLI = (
    "import sys, time; from bytepair.runners import feed, local; "
    "from bytepair.shards import writer; from bytepair.cli import main; "
    "feed.BATCH_CHARS = 20_000; local.BLOCK_BYTES = 1 << 16; "
    "finish = writer._Split._finish; "
    "writer._Split._finish = lambda split: (finish(split), time.sleep(0.01))[0]; "
    "sys.exit(main(sys.argv[1:]))"
)


def bytepair_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "bytepair", *map(str, args)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """About 4 MB of documents separated by <|endoftext|>, and its uninterrupted shards."""
    folder = tmp_path_factory.mktemp("corpus")
    path = folder / "corpus.txt"
    path.write_text("<|endoftext|>".join(make_documents(2600, seed=9)), encoding="utf-8")
    clean = folder / "clean"
    args = ("encode", "-t", "gpt2", path, "-o", f"{clean}/", "--shard-tokens", 40_000)
    r = subprocess.run(bytepair_cmd(*args, "--val-fraction", 0.01), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("wrote ") and "val shard" in r.stderr
    return path, clean


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGKILL, -9), (signal.SIGINT, 130), (signal.SIGTERM, 143)]
)
def test_a_signalled_cli_run_resumes_to_the_same_bytes(corpus, tmp_path, sig, code):
    path, clean = corpus
    out = tmp_path / "out"
    args = bytepair_cmd(
        "encode", "-t", "gpt2", path, "-o", f"{out}/", "--shard-tokens", 40_000,
        "--val-fraction", 0.01, "--num-threads", 1,
    )  # fmt: skip
    # The CLI with shards finishing all through the run (SMALL_BATCHES_CLI).
    small_batches = [sys.executable, "-c", SMALL_BATCHES_CLI, *args[3:]]
    proc = subprocess.Popen(
        small_batches, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(out.glob("train_*.bin"))) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "no shards appeared"
            time.sleep(0.005)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert not (out / "manifest.json").exists()
    if sig != signal.SIGKILL:
        assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert folder_bytes(out) == folder_bytes(clean)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"] == [{"path": str(path), "bytes": path.stat().st_size}]


def test_the_cli_refuses_to_resume_with_another_tokenizer(corpus, tmp_path):
    path, _ = corpus
    out = tmp_path / "out"
    out.mkdir()
    (out / "resume-state.json").write_text(
        json.dumps({"fingerprint": {"tokenizer": "gpt2", "options": {}, "inputs": []}})
    )
    r = subprocess.run(
        bytepair_cmd("encode", "-t", "r50k_base", path, "-o", out), capture_output=True, text=True
    )
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "the tokenizer was gpt2, now r50k_base" in r.stderr
    assert f"the inputs were [], now ['{path}']" in r.stderr


# Long documents arrive in parts (sources cut them where the ids cannot change): the
# writer frames only whole documents, so the folder is the one whole documents give.


def long_documents_file(tmp_path, n: int = 12, seed: int = 4) -> Path:
    path = tmp_path / "long.txt"
    docs = make_documents(n, seed=seed, max_chars=20_000)
    path.write_text(EOT.join(docs), encoding="utf-8")
    return path


class Parts:
    """A corpus's parts, optionally interrupted before item ``stop``; records them."""

    def __init__(self, path, part_chars, stop=None):
        from bytepair.sources import open_sources

        self.corpus = open_sources([path], special_tokens=[EOT], part_chars=part_chars)
        self.stop, self.seen = stop, []

    def parts(self):
        for k, item in enumerate(self.corpus.parts()):
            if k == self.stop:
                raise Interrupt
            self.seen.append(item)
            yield item


@pytest.fixture
def small_reads(monkeypatch):
    """Text read 700 bytes at a time and batches of 1,500 characters: documents of up
    to 20,000 characters come in many parts, spread over many batches."""
    from bytepair.sources import _stream

    monkeypatch.setattr(_stream, "_RAW_CHUNK", 700)
    monkeypatch.setattr(feed, "BATCH_CHARS", 1500)


SHARD_OPTIONS = [
    {"shard_tokens": 700},
    {"shard_tokens": 900, "val_fraction": 0.3, "format": "npy", "bos": EOT},
    {"shard_tokens": 800, "val_tokens": 6000, "eot": None, "bos": EOT},
]


@pytest.mark.parametrize("options", SHARD_OPTIONS, ids=["train", "val_fraction", "val_tokens"])
def test_documents_in_parts_give_the_folder_of_whole_documents(
    gpt2_tok, tmp_path, small_reads, options
):
    path = long_documents_file(tmp_path)
    whole = Parts(path, None)
    bytepair.write_shards(gpt2_tok, whole, tmp_path / "whole", progress=False, **options)
    parted = Parts(path, 600)
    bytepair.write_shards(gpt2_tok, parted, tmp_path / "parts", progress=False, **options)
    assert sum(not last for _, last in parted.seen) > 50  # many documents came in parts
    assert folder_bytes(tmp_path / "parts") == folder_bytes(tmp_path / "whole")
    shards = bytepair.open_shards(tmp_path / "parts")
    assert shards.manifest["splits"] == bytepair.open_shards(tmp_path / "whole").manifest["splits"]


def test_a_tokenizers_bos_and_eos_frame_each_whole_document_inside_bos_and_eot(
    gpt2_tok, tmp_path, small_reads
):
    # The model's frame (add_bos/add_eos) goes around the document once, however many
    # parts it came in, inside the writer's own bos and eot.
    framed = gpt2_tok.with_special_tokens(["<|b|>", "<|e|>"]).with_options(
        bos_token="<|b|>", eos_token="<|e|>", add_bos=True, add_eos=True
    )
    b, e = framed.special_tokens["<|b|>"], framed.special_tokens["<|e|>"]
    path = long_documents_file(tmp_path, n=6)
    parted = Parts(path, 600)
    bytepair.write_shards(framed, parted, tmp_path / "o", bos=EOT, progress=False)
    assert sum(not last for _, last in parted.seen) > 20
    shards = bytepair.open_shards(tmp_path / "o")
    docs = path.read_text(encoding="utf-8").split(EOT)
    assert [shards[i].tolist() for i in range(len(docs))] == [
        [GPT2_EOT, b, *gpt2_tok.encode(d), e, GPT2_EOT] for d in docs
    ]
    assert shards.tokenizer.model.add_bos and shards.tokenizer.model.bos_token == "<|b|>"


@pytest.mark.parametrize("options", SHARD_OPTIONS, ids=["train", "val_fraction", "val_tokens"])
def test_a_run_interrupted_inside_a_long_document_resumes_to_the_same_bytes(
    gpt2_tok, tmp_path, small_reads, options
):
    path = long_documents_file(tmp_path)
    bytepair.write_shards(
        gpt2_tok, Parts(path, None), tmp_path / "clean", progress=False, **options
    )
    clean = folder_bytes(tmp_path / "clean")
    n_items = len(list(Parts(path, 600).corpus.parts()))
    for stop in (7, n_items // 3, n_items // 2 + 1, n_items - 2):
        out = tmp_path / f"cut{stop}"
        with pytest.raises(Interrupt):
            bytepair.write_shards(gpt2_tok, Parts(path, 600, stop), out, progress=False, **options)
        assert (out / "resume-state.json").exists()
        bytepair.write_shards(gpt2_tok, Parts(path, 600), out, progress=False, **options)
        assert folder_bytes(out) == clean, stop


def test_parts_are_joined_for_a_tokenizer_whose_ids_a_cut_could_change(tmp_path, small_reads):
    path = long_documents_file(tmp_path, n=4)
    custom = bytepair.train(path, 400, pattern=r"[^\n]+\n?|\n", progress=False)
    encoded = []
    parted = Parts(path, 600)
    recording = Recording(custom, encoded)
    bytepair.write_shards(recording, parted, tmp_path / "o", eot=None, progress=False)
    assert any(not last for _, last in parted.seen)
    assert encoded == path.read_text("utf-8").split(EOT)  # whole documents only


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")
def test_sharding_one_huge_document_holds_a_bounded_part_of_it(tmp_path):
    """40 MB with no separator is one document: encoded in parts, it costs little more
    memory than a small file does (whole, it cost about 8 bytes per character)."""
    text = EXAMPLE.read_text(encoding="utf-8")
    small, big = tmp_path / "small.txt", tmp_path / "big.txt"
    small.write_text(text, encoding="utf-8")
    with open(big, "w", encoding="utf-8") as f:
        while f.tell() < 40 << 20:
            f.write(text)
    child = (
        "import resource, sys, bytepair\n"
        "from bytepair.sources import open_sources, part_chars_for\n"
        "tok = bytepair.get_encoding('gpt2')\n"
        "corpus = open_sources([sys.argv[1]], part_chars=part_chars_for(tok))\n"
        "m = bytepair.write_shards(tok, corpus, sys.argv[2], progress=False)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, m['splits']['train'])\n"
    )

    def peak(path):
        out = tmp_path / f"out-{path.stem}"
        r = subprocess.run(
            [sys.executable, "-c", child, str(path), str(out)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        rss, split = r.stdout.split(" ", 1)
        return int(rss), split

    base, _ = peak(small)
    rss, split = peak(big)
    assert "'documents': 1" in split
    assert rss - base < 60 << 20, (base, rss)


def test_our_sources_are_read_on_a_thread_a_callers_iterator_is_not(gpt2_tok, tmp_path):
    import threading

    path = long_documents_file(tmp_path, n=3)
    readers = set()

    def docs():
        for doc in path.read_text("utf-8").split(EOT):
            readers.add(threading.current_thread().name)
            yield doc

    bytepair.write_shards(gpt2_tok, docs(), tmp_path / "a", progress=False)
    assert readers == {threading.current_thread().name}

    class Recorded(Parts):
        def parts(self):
            for item in super().parts():
                readers.add(threading.current_thread().name)
                yield item

    readers.clear()
    bytepair.write_shards(gpt2_tok, Recorded(path, None), tmp_path / "b", progress=False)
    assert readers == {"bytepair-read-ahead"}
    assert folder_bytes(tmp_path / "b") == folder_bytes(tmp_path / "a")


def test_batches_are_encoded_on_a_thread_while_the_writer_writes_unless_val_tokens(
    gpt2_tok, tmp_path, monkeypatch
):
    # The next batch is encoded while the one before it is written; with val_tokens
    # where a document goes depends on the batches written before it: not then.
    import threading

    monkeypatch.setattr(feed, "BATCH_CHARS", 2000)
    docs = make_documents(60, seed=4)
    folders = {}
    for name, options in (("train", {}), ("val_tokens", {"val_tokens": 3000})):
        threads: set[str] = set()

        class Where:
            def __init__(self, threads):
                self.threads = threads

            def __getattr__(self, attr):
                return getattr(gpt2_tok, attr)

            def _encode_batch_flat(self, texts, *args):
                self.threads.add(threading.current_thread().name)
                return gpt2_tok._encode_batch_flat(texts, *args)

        bytepair.write_shards(Where(threads), docs, tmp_path / name, progress=False, **options)
        folders[name] = threads
        bytepair.write_shards(gpt2_tok, docs, tmp_path / f"{name}-again", progress=False, **options)
        assert folder_bytes(tmp_path / name) == folder_bytes(tmp_path / f"{name}-again")
    assert folders["train"] and all(t.startswith("bytepair-encode") for t in folders["train"])
    assert folders["val_tokens"] == {threading.main_thread().name}


def test_an_error_while_a_batch_is_encoded_ahead_stops_the_run_resumably(
    gpt2_tok, tmp_path, monkeypatch
):
    monkeypatch.setattr(feed, "BATCH_CHARS", 2000)
    docs = make_documents(80, seed=2)
    bytepair.write_shards(gpt2_tok, docs, tmp_path / "clean", shard_tokens=1500, progress=False)
    calls = []

    class Failing:
        def __getattr__(self, attr):
            return getattr(gpt2_tok, attr)

        def _encode_batch_flat(self, texts, *args):
            calls.append(len(texts))
            if len(calls) == 9:
                raise Interrupt("the ninth batch")
            return gpt2_tok._encode_batch_flat(texts, *args)

    with pytest.raises(Interrupt, match="the ninth batch"):
        bytepair.write_shards(Failing(), docs, tmp_path / "o", shard_tokens=1500, progress=False)
    assert len(calls) in (9, 10)  # at most the batch gathered ahead, then it stops
    assert not [p for p in (tmp_path / "o").iterdir() if p.name.endswith(".tmp")]
    bytepair.write_shards(gpt2_tok, docs, tmp_path / "o", shard_tokens=1500, progress=False)
    assert folder_bytes(tmp_path / "o") == folder_bytes(tmp_path / "clean")


def test_framing_a_batch_refuses_what_it_cannot_write_by_name():
    from array import array

    from bytepair.shards.writer import framed

    ids, offsets = array("I", [5, 70_000]), array("q", [0, 2])
    with pytest.raises(ValueError, match="id 70000 does not fit the shards' 2-byte ids"):
        framed(ids, offsets, b"\1", b"\1", [], [], 2)
    with pytest.raises(ValueError, match="offsets must rise from 0 to at most the 2 ids"):
        framed(ids, array("q", [0, 3]), b"\1", b"\1", [], [], 4)
    with pytest.raises(ValueError, match="ids must be 2 or 4 bytes wide, not 1"):
        framed(bytes(8), offsets, b"\1", b"\1", [], [], 4)
    # Wide ids that fit are narrowed, framed once per document.
    got, lengths = framed(array("I", [5, 6, 7]), offsets, b"\1", b"\1", [1], [2], 2)
    assert (got.tolist(), got.itemsize, lengths) == ([1, 5, 6, 2], 2, [4])


def test_a_progress_callback_sees_the_utf8_bytes_of_the_documents(gpt2_tok, tmp_path):
    # Counted only for a bar or a callback (counting encodes each non-ASCII text again).
    docs = make_documents(30, seed=4) + ["naïve café 日本語"]
    seen: list[int] = []
    bytepair.write_shards(gpt2_tok, docs, tmp_path / "o", progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == sum(len(d.encode()) for d in docs)
