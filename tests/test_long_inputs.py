"""One long pre-token (a run of one character, a line with no spaces): every path is
linear in its input, memory is a small constant per byte, and running out of memory
is a MemoryError, never a crash."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
