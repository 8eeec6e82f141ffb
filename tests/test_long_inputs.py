"""One long pre-token (a run of one character, a line with no spaces): every path is
linear in its input, memory is a small constant per byte, and running out of memory
is a MemoryError, never a crash."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
import bytepair.reference as ref

from conftest import EOT

SPECIALS = [EOT, "<|pad|>"]


@pytest.fixture(scope="module")
def runs_tok():
    """A tokenizer whose merges build long runs ("aaaaaaaa", "        ", "éééé")."""
    corpus = ["a" * 300 + " " * 300 + "é" * 100 + " ab aab\n\n" + "-" * 50] * 3
    return bytepair.train_from_iterator(
        corpus, 300, special_tokens=SPECIALS, pattern="gpt2", progress=False
    )


def run_python(code: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_encode_chunks_hands_the_core_each_character_a_bounded_number_of_times(
    runs_tok, monkeypatch
):
    # 1 MB of "a" in 4 KB chunks is one pre-token that never ends before the last
    # chunk: re-encoding the carry per chunk handed the core 128 MB (quadratic).
    text = "a" * (1 << 20)
    handed = []
    run = runs_tok._run

    def counting_run(method, text, *args):
        if method == "encode_prefix":
            handed.append(len(text))
        return run(method, text, *args)

    monkeypatch.setattr(runs_tok, "_run", counting_run)
    chunks = [text[i : i + 4096] for i in range(0, len(text), 4096)]
    streamed = [i for ids in runs_tok.encode_chunks(chunks) for i in ids]
    monkeypatch.undo()
    assert streamed == runs_tok.encode(text)
    assert sum(handed) <= 3 * len(text)
    assert len(handed) <= 2 * 20  # a call each time the carry doubles, about


def test_encode_chunks_with_ordinary_text_still_encodes_as_chunks_arrive(runs_tok):
    # Short pieces: the carry stays a small tail and each chunk yields its ids.
    chunks = ["ab aab " * 100] * 10
    out = list(runs_tok.encode_chunks(chunks))
    assert len(out) >= 10
    assert [i for ids in out for i in ids] == runs_tok.encode("".join(chunks))


RUNS = st.sampled_from(["a", " ", "é", "-", "\n", "ab", "\u3042", " a"]).flatmap(
    lambda unit: st.integers(1, 300).map(lambda n: unit * n)
)
PARTS = st.lists(RUNS | st.sampled_from(SPECIALS) | st.text(max_size=8), max_size=6)


@settings(max_examples=60, deadline=None)
@given(parts=PARTS, cuts=st.lists(st.integers(0, 2000), max_size=10))
def test_long_runs_stream_and_encode_exactly_as_the_reference(runs_tok, parts, cuts):
    text = "".join(parts)
    expected = ref.encode(text, runs_tok.vocab, runs_tok.merges, runs_tok.special_tokens, "gpt2")
    assert runs_tok.encode(text, allowed_special="all") == expected
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    assert list(runs_tok.encode_iterable(chunks, allowed_special="all")) == expected
    assert runs_tok.count_tokens(text, allowed_special="all") == len(expected)


@pytest.mark.parametrize("unit", ["a", " ", "\u00e9"])
def test_a_two_megabyte_run_streamed_in_small_chunks_equals_encode(unit):
    tok = bytepair.get_encoding("gpt2")
    text = unit * (1 << 20) + " tail"
    chunks = [text[i : i + 1000] for i in range(0, len(text), 1000)]
    assert list(tok.encode_iterable(chunks)) == tok.encode(text)


def test_count_of_a_20mb_run_of_one_letter_finishes(tmp_path):
    # It took about two minutes (quadratic); now a few seconds. No timing assert: the
    # timeout only stops a run that hangs.
    path = tmp_path / "run.txt"
    path.write_text("a" * 20_000_000)
    done = subprocess.run(
        [sys.executable, "-m", "bytepair", "count", "-t", "gpt2", str(path)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"5000000\t{path}\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")
def test_encoding_one_20mb_pre_token_needs_under_14_bytes_per_byte():
    # The merge loop kept ids, next and prev links and every pair position: about
    # 20 bytes per byte (a 500 MB run needed 10 GB); now about 10, ids returned included.
    done = run_python(
        """
        import resource, bytepair
        tok = bytepair.get_encoding("gpt2")
        tok.encode("warm up " * 1000)
        text = "a" * 20_000_000
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        ids = tok.encode(text)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert len(ids) == 5_000_000, len(ids)
        print((after - before) * 1024 / len(text))
        """,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 14, done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux-only here")
def test_encoding_a_run_too_large_for_the_memory_cap_is_a_memory_error_not_a_crash():
    # Under an address-space cap, the core's failed allocation aborted the process
    # (SIGABRT); it is now a MemoryError the caller can catch.
    done = run_python(
        """
        import resource, bytepair
        tok = bytepair.get_encoding("gpt2")
        tok.encode("warm up " * 1000)
        text = "a" * 40_000_000
        with open("/proc/self/status") as f:
            vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (vm + (150 << 20), resource.RLIM_INFINITY))
        try:
            tok.encode(text)
        except MemoryError as e:
            print("MemoryError:", e)
        else:
            print("encoded")
        """,
        timeout=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.startswith("MemoryError"), done.stdout


# -- one giant line of prose (no newline at all) ----------------------------------------

WORDS = ["the", "cat", "sat", "on", "mats", "and", "don't", "you", "Know", "it", "x"]


def one_line_of_words(n_bytes: int, seed: int = 0) -> str:
    """About ``n_bytes`` of words joined by spaces (some doubled), with no newline."""
    import random

    rng = random.Random(seed)
    out, size = [], 0
    while size < n_bytes:
        word = rng.choice(WORDS) + rng.choice(["", "", "", ",", "."])
        sep = rng.choice([" "] * 9 + ["  "])
        out.append(word + sep)
        size += len(word) + len(sep)
    return "".join(out)


def peak_bytes_of(args: list[str]) -> int:
    """The peak RSS (VmHWM) of ``python -m bytepair ARGS`` run as a child, in bytes."""
    done = run_python(
        f"""
        import resource, subprocess, sys
        done = subprocess.run([sys.executable, "-m", "bytepair", *{args!r}],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
        """,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.fixture(scope="module")
def giant_line(tmp_path_factory):
    """A 50 MB file of one line (no newline) of words, and a 1 KB one to measure the
    process's own size by."""
    folder = tmp_path_factory.mktemp("giant")
    big, small = folder / "line.txt", folder / "small.txt"
    line = one_line_of_words(1_000_000)
    big.write_text(line * 50, "utf-8")
    small.write_text(line[:1000], "utf-8")
    return big, small


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")
def test_training_on_one_50mb_line_needs_under_3_bytes_per_byte(giant_line, tmp_path):
    # A line had no safe cut, so the block reader held it whole (and the counter its
    # parts): 6.5 bytes per byte (a 300 MB line took 1.9 GB). It is now cut before
    # spaces between letters, in blocks: about 0.5.
    big, small = giant_line
    out = tmp_path / "t.bytepair"
    base = peak_bytes_of(["train", str(small), "--vocab-size", "300", "-o", str(out), "-q"])
    peak = peak_bytes_of(["train", str(big), "--vocab-size", "300", "-o", str(out), "-q"])
    per_byte = (peak - base) / big.stat().st_size
    assert per_byte < 3, per_byte


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")
def test_sharding_one_50mb_line_needs_under_3_bytes_per_byte(giant_line, tmp_path):
    # The document was held whole as a str, joined, then encoded in one call: 6.3
    # bytes per byte (a 300 MB line took 1.8 GB). It is now read in parts cut before
    # spaces between letters: about 0.5 (the ids themselves are 0.5 per byte as uint16).
    big, small = giant_line
    args = ["encode", "-t", "gpt2", "-q", "-o"]
    base = peak_bytes_of([*args, str(tmp_path / "small") + "/", str(small)])
    peak = peak_bytes_of([*args, str(tmp_path / "big") + "/", str(big)])
    per_byte = (peak - base) / big.stat().st_size
    assert per_byte < 3, per_byte


def test_one_line_trains_to_the_merges_of_its_whole_pretokenization(tmp_path, monkeypatch):
    # Read in 64 KB blocks on 2 threads, the line is cut at many spaces; the merges
    # equal those of counting the reference's pre-tokens of the whole text.
    from collections import Counter

    import bytepair.shards.one_file as one_file

    text = one_line_of_words(600_000, seed=1) + " é ab"
    path = tmp_path / "line.txt"
    path.write_text(text, "utf-8")
    for pattern in ["gpt2", "cl100k", "o200k"]:
        counts = Counter(p.encode() for p in ref.pretokenize(text, pattern))
        whole = bytepair.train_from_counts(counts, 400, pattern=pattern, progress=False)
        with monkeypatch.context() as m:
            m.setattr(one_file, "BLOCK_BYTES", 1 << 16)
            cut = bytepair.train(path, 400, pattern=pattern, num_threads=2, progress=False)
        assert cut.merges == whole.merges, pattern
        assert len(cut.merges) > 20  # the words run out of pairs before 400


def test_one_line_shards_to_the_ids_of_encoding_it_whole(tmp_path):
    import numpy as np

    from bytepair.sources import open_sources

    from conftest import gpt2_tiktoken

    text = one_line_of_words(300_000, seed=2)
    path = tmp_path / "line.txt"
    path.write_text(text, "utf-8")
    tok = bytepair.get_encoding("gpt2")
    docs = open_sources(path, part_chars=5000)
    assert len([p for p, _ in docs.parts()]) >= 4  # cut in parts (at spaces: no newline)
    bytepair.write_shards(tok, docs, tmp_path / "out", eot=None)
    ids = np.fromfile(tmp_path / "out" / "train_000000.bin", dtype="<u2").tolist()
    assert ids == gpt2_tiktoken().encode_ordinary(text)


# -- training on one giant pre-token ------------------------------------------------------

GIANT_UNITS = st.sampled_from(["a", "ab", "aab", " ", "é", "abc", "\n"])
GIANT_WORDS = st.lists(
    st.tuples(GIANT_UNITS, st.integers(1, 1500)).map(lambda t: t[0] * t[1]), min_size=1, max_size=4
)


@settings(max_examples=25, deadline=None)
@given(
    docs=st.lists(GIANT_WORDS.map("".join), min_size=1, max_size=3),
    pattern=st.sampled_from([None, "gpt2"]),
)
def test_training_on_long_runs_and_mixed_giant_words_equals_the_reference(docs, pattern):
    # Runs of over 1000 occurrences of a pair in one word: the pairs a merge forms are
    # compacted as they are listed; ties (CS336) and overlaps ("aaa") stay exact.
    vocab, merges = ref.train(docs, 256 + 40, pattern=pattern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short text may run out of pairs
        tok = bytepair.train_from_iterator(docs, 256 + 40, pattern=pattern, progress=False)
    assert tok.merges == merges
    assert {i: tok.vocab[i] for i in vocab} == vocab


def test_a_70000_byte_word_trains_to_the_reference_merges_as_its_ids_shrink():
    # Past 65,536 ids a word's buffer is given back as merges halve it.
    doc = "a" * 40_000 + "ab" * 10_000 + "é" * 5_000 + "a" * 333
    vocab, merges = ref.train([doc], 256 + 30, pattern=None)
    tok = bytepair.train_from_iterator([doc], 256 + 30, pattern=None, progress=False)
    assert tok.merges == merges
    assert [tok.vocab[256 + i] for i in range(30)] == [vocab[256 + i] for i in range(30)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")
def test_training_merges_on_one_20mb_run_need_under_14_bytes_per_byte(tmp_path):
    # The merge loop listed every pair a merge formed (16 bytes per occurrence) and
    # held the vocabulary twice more while returning it: about 27 bytes per byte. Now
    # the ids (4, given back as merges shorten the run) and the tokens themselves,
    # as long as the runs they stand for (8.6 bytes per byte here): about 11.
    path = tmp_path / "run.txt"
    path.write_text("a" * 20_000_000)
    done = run_python(
        f"""
        import resource
        from bytepair import _core
        from bytepair.patterns import resolve_pattern
        warm = _core.PreTokenCounter(resolve_pattern("gpt2"), [], 1)
        warm.add_documents(["warm up " * 1000])
        warm.train(40)
        counter = _core.PreTokenCounter(resolve_pattern("gpt2"), [], 1)
        counter.add_file({str(path)!r}, "strict", None)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        merges, vocab = counter.train(44)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert len(merges) == 31 and len(vocab[-1]) == 20_000_000, (len(merges), len(vocab[-1]))
        print((after - before) * 1024 / 20_000_000)
        """,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 14, done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux-only here")
def test_training_on_a_run_too_large_for_the_memory_cap_is_a_memory_error_not_a_crash(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("a" * 40_000_000)
    done = run_python(
        f"""
        import resource
        from bytepair import _core
        from bytepair.patterns import resolve_pattern
        counter = _core.PreTokenCounter(resolve_pattern("gpt2"), [], 1)
        counter.add_file({str(path)!r}, "strict", None)
        with open("/proc/self/status") as f:
            vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (vm + (100 << 20), resource.RLIM_INFINITY))
        try:
            counter.train(44)
        except MemoryError as e:
            print("MemoryError:", e)
        else:
            print("trained")
        """,
        timeout=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.startswith("MemoryError: out of memory while training"), done.stdout


@pytest.mark.parametrize("mb", [3, 9])  # one release of the GIL, and blocks of 4 MB
@pytest.mark.parametrize("call", ["encode_ordinary", "count_tokens"])
def test_other_threads_run_while_a_long_text_is_encoded(mb, call):
    """A long text is encoded without the GIL (a short one holding it, which costs less
    than releasing it): another Python thread runs during the call. Holding the GIL,
    the call would let no other thread run from its start to its end."""
    import threading
    import time

    tok = bytepair.get_encoding("gpt2")
    text = "hello world, what a day. " * (mb * 40_000)
    run = getattr(tok, call)
    run(text)  # warm: the call's time is then all encoding
    ticks: list[float] = []
    started, done = threading.Event(), threading.Event()

    def tick():
        started.set()
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline and len(ticks) < 10**6:
            ticks.append(time.perf_counter())
            time.sleep(0)

    other = threading.Thread(target=tick)
    other.start()
    calls = []  # (start, end) of each call
    try:
        assert started.wait(10)
        # Up to five calls: on a loaded machine the other thread may not be scheduled
        # within one call of a few milliseconds; a call holding the GIL lets it run in
        # none of them.
        for _ in range(5):
            t0 = time.perf_counter()
            run(text)
            calls.append((t0, time.perf_counter()))
            if any(t0 < t < calls[-1][1] for t in list(ticks)):
                break
    finally:
        done.set()
        other.join(10)
    during = [t for t in ticks for t0, t1 in calls if t0 < t < t1]
    spent = sum(t1 - t0 for t0, t1 in calls)
    assert during, (
        f"no other thread ran during {len(calls)} calls ({1000 * spent:.1f} ms) of {call}"
    )
