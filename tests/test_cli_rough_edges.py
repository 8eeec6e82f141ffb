"""The command line's rough edges a new user hit (issue 11, part 2): each test is one
defect, named for the behaviour that is now promised."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import bytepair

from conftest import EOT, sigint_default

EXAMPLE = Path(__file__).parent.parent / "examples" / "books.txt"


def run(*args, stdin: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bytepair", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        timeout=120,
    )


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode != 0, r.stdout
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("edges")
    corpus = folder / "books.txt"
    corpus.write_bytes(EXAMPLE.read_bytes()[:200_000])
    tok = folder / "tok.bytepair"
    r = run("train", corpus, "--vocab-size", 400, "--special", EOT, "-o", tok)
    assert r.returncode == 0, r.stderr
    return corpus, tok


def test_absurd_vocab_size_is_refused_before_any_work(small, tmp_path):
    corpus, _ = small
    err = one_line_error(
        run("train", corpus, "--vocab-size", 10**10, "-o", tmp_path / "x.bytepair")
    )
    assert "vocab_size 10,000,000,000 is too large" in err
    with pytest.raises(ValueError, match="too large"):
        bytepair.train_from_iterator(["ab"], 2**70)


@pytest.mark.parametrize("command", ["train", "encode"])
def test_negative_thread_count_is_a_usage_error(small, tmp_path, command):
    corpus, tok = small
    args = (
        ["train", corpus, "--vocab-size", 300, "-o", tmp_path / "x.bytepair"]
        if command == "train"
        else ["encode", "-t", tok, corpus, "-o", tmp_path / "x.bin"]
    )
    r = run(*args, "--num-threads", -1)
    assert r.returncode == 2 and "--num-threads: must be at least 1, got -1" in r.stderr


def test_mistyped_pattern_name_gets_a_did_you_mean(small, tmp_path):
    corpus, _ = small
    err = one_line_error(
        run(
            "train", corpus, "--vocab-size", 300, "--pattern", "gpt4", "-o", tmp_path / "x.bytepair"
        )
    )
    assert "unknown pattern name 'gpt4'; did you mean 'cl100k'?" in err
    with pytest.raises(ValueError, match="did you mean 'cl100k'"):
        bytepair.train_from_iterator(["a"], 260, pattern="cl100k_base")


def test_encoding_onto_the_input_is_refused_and_the_input_kept(small, tmp_path):
    corpus, tok = small
    copy = tmp_path / "same.txt"
    copy.write_bytes(corpus.read_bytes())
    err = one_line_error(run("encode", "-t", tok, copy, "-o", copy))
    assert "is also an input; refusing to overwrite it" in err
    assert copy.read_bytes() == corpus.read_bytes()


@pytest.mark.parametrize(
    ("name", "fmt", "loader"),
    [
        ("x.json", "hf", bytepair.Tokenizer.from_hf),
        ("x.tiktoken", "tiktoken", None),
        ("x.bytepair", "bytepair", bytepair.load),
    ],
)
def test_train_output_format_follows_the_suffix(small, tmp_path, name, fmt, loader):
    corpus, _ = small
    out = tmp_path / name
    r = run("train", corpus, "--vocab-size", 300, "-o", out)
    assert r.returncode == 0, r.stderr
    r = run("show", "-t", out, "--pattern", "gpt2", "hello there")
    assert r.returncode == 0, r.stderr
    if loader is not None:
        tok = loader(out)
        assert tok.decode(tok.encode("hello there")) == "hello there"
    assert bytepair.formats.detect(out) == fmt


def _wait_for_temp(folder: Path, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(p.name.endswith(".tmp") for p in folder.iterdir()):
            return
        time.sleep(0.01)
    raise AssertionError("the encoder never started writing")


def stopped(proc, started, sig, code) -> str | None:
    """Waits for ``started()``, stops the child with ``sig``: it exits with ``code``
    and says so in one line. Returns what it printed."""
    try:
        started()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert err.strip() in ("bytepair: interrupted", "bytepair: terminated")
    return out


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_or_terminate_removes_the_temporary_output(tmp_path, sig, code):
    big = tmp_path / "big.txt"
    big.write_bytes(EXAMPLE.read_bytes() * 120)  # ~85 MB: seconds of encoding
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    # The CLI in a child whose file blocks are small, so it is stopped mid-file.
    run_cli = (
        "import sys; from bytepair.shards import one_file; one_file.BLOCK_BYTES = 65536; "
        "from bytepair.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            run_cli,
            "encode",
            "-t",
            "cl100k_base",
            big,
            "-o",
            out_dir / "o.bin",
            "--num-threads",
            "1",
        ],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )
    stopped(proc, lambda: _wait_for_temp(out_dir), sig, code)
    assert list(out_dir.iterdir()) == []


COUNT_CHILD = """
import sys
from pathlib import Path
from bytepair.shards import one_file
from bytepair.cli import main

one_file.BLOCK_BYTES = 65536
counting = one_file.text_tokens


def text_tokens(tok, src, out_path, width, threads, kwargs, progress):
    # The first block counted says so (a file the test waits for).
    return counting(tok, src, out_path, width, threads, kwargs, lambda n: Path(sys.argv[1]).touch())


one_file.text_tokens = text_tokens
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_or_terminate_stops_a_count_mid_file(tmp_path, sig, code):
    big = tmp_path / "big.txt"
    big.write_bytes(EXAMPLE.read_bytes() * 240)  # ~170 MB: a second or more of counting
    started = tmp_path / "started"
    cmd = [sys.executable, "-c", COUNT_CHILD, started, "count", "-t", "cl100k_base", big]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default
    )

    def counting() -> None:
        deadline = time.monotonic() + 30
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert started.exists(), "the count never started"

    assert stopped(proc, counting, sig, code) == ""  # no count printed


def test_unwritable_output_fails_before_training_and_names_the_users_path(small, tmp_path):
    corpus, _ = small
    err = one_line_error(run("train", corpus, "--vocab-size", 300, "-o", "/nonexistent/t.json"))
    assert "/nonexistent/t.json: the folder /nonexistent does not exist" in err
    assert ".tmp" not in err
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        err = one_line_error(run("train", corpus, "--vocab-size", 300, "-o", locked / "t.bytepair"))
        assert "is not writable" in err


def test_wrong_kinds_of_input_are_named(small, tmp_path):
    # Every command reads compressed files and folders (bytepair.sources), `encode -o
    # x.bin` too; the library's encode_file reads one plain text file and says so.
    corpus, tok = small
    gz = tmp_path / "books.txt.gz"
    gz.write_bytes(gzip.compress(corpus.read_bytes()))
    assert run("encode", "-t", tok, gz, "-o", tmp_path / "gz.bin").returncode == 0
    assert run("encode", "-t", tok, corpus, "-o", tmp_path / "plain.bin").returncode == 0
    assert (tmp_path / "gz.bin").read_bytes() == (tmp_path / "plain.bin").read_bytes()
    with pytest.raises(ValueError, match="looks gzip-compressed"):
        bytepair.load(tok).encode_file(gz, tmp_path / "x.bin")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        bytepair.load(tok).encode_file(tmp_path, tmp_path / "x.bin")
    assert "no such file" in one_line_error(
        run("train", tmp_path / "missing.txt", "--vocab-size", 300, "-o", tmp_path / "x.bytepair")
    )


def test_gpt2_folder_keeps_every_special_token(tmp_path):
    tok = bytepair.train_from_iterator(
        ["hello world " * 20], 268, special_tokens=[EOT, "<|pad|>"], progress=False
    )
    r = run("convert", _saved(tok, tmp_path), f"{tmp_path / 'g'}/")
    assert r.returncode == 0, r.stderr
    back = bytepair.load(tmp_path / "g")
    assert back.special_tokens == tok.special_tokens == {EOT: 266, "<|pad|>": 267}
    assert back.encode("hi<|pad|>", allowed_special="all")[-1] == 267


def _saved(tok, folder: Path) -> Path:
    path = folder / "t.bytepair"
    tok.save(path)
    return path


def test_save_gpt2_creates_the_folder_and_convert_takes_a_trailing_slash(tmp_path):
    tok = bytepair.get_encoding("gpt2")
    tok.save_gpt2(tmp_path / "new" / "dir")
    assert bytepair.load(tmp_path / "new" / "dir").encode("hello world") == [31373, 995]
    r = run("convert", "gpt2", f"{tmp_path / 'g2'}/")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "g2" / "merges.txt").is_file()


def test_decode_streams_a_bin_and_writes_exactly_the_text(small, tmp_path):
    corpus, tok = small
    ids = tmp_path / "ids.bin"
    assert run("encode", "-t", tok, corpus, "-o", ids).returncode == 0
    r = run("decode", "-t", tok, ids)
    assert r.returncode == 0 and r.stdout == corpus.read_text(encoding="utf-8")
    out = tmp_path / "back.txt"
    assert run("decode", "-t", tok, ids, "-o", out).returncode == 0
    assert out.read_bytes() == corpus.read_bytes()


def test_decode_refuses_an_odd_sized_bin_and_a_float_npy(small, tmp_path):
    _, tok = small
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x00\x02")
    assert "3 bytes is not a whole number of 2-byte ids" in one_line_error(
        run("decode", "-t", tok, odd)
    )
    floats = tmp_path / "f.npy"
    np.save(floats, np.array([1.5, 2.0]))
    assert "holds float64 values, not integer token ids" in one_line_error(
        run("decode", "-t", tok, floats)
    )


def test_decode_memory_stays_bounded_on_a_large_bin(small, tmp_path):
    from bytepair.cli.decode import CHUNK_IDS, id_chunks

    ids = tmp_path / "many.bin"
    np.arange(3 * CHUNK_IDS + 5, dtype="<u2").tofile(ids)
    sizes = [len(chunk) for chunk in id_chunks(str(ids), 2)]
    assert sizes == [CHUNK_IDS, CHUNK_IDS, CHUNK_IDS, 5]


def test_warnings_are_one_line_and_an_empty_corpus_fails(tmp_path):
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("ab ab", encoding="utf-8")
    r = run("train", tiny, "--vocab-size", 300, "-o", tmp_path / "t.bytepair")
    assert r.returncode == 0, r.stderr
    warning = [line for line in r.stderr.splitlines() if line.startswith("bytepair: warning")]
    assert len(warning) == 1 and warning[0].startswith("bytepair: warning: training stopped early")
    assert "UserWarning" not in r.stderr and "tok = train(" not in r.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    assert "empty; nothing to train on" in one_line_error(
        run("train", empty, "--vocab-size", 300, "-o", tmp_path / "e.bytepair")
    )


def test_small_cli_edges(small, tmp_path):
    corpus, tok = small
    assert "given twice" in run("count", "-t", tok, "-t", "gpt2", corpus).stderr
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"bytepair {bytepair.__version__}"
    assert "did you mean 'cl100k_base'?" in one_line_error(run("show", "-t", "cl100k", "hi"))
    assert "give the output file with -o" in one_line_error(
        run("encode", "-t", tok, corpus, "--format", "npy")
    )
    err = one_line_error(run("encode", "-t", tok, "--specials", "disallow", stdin=f"a{EOT}"))
    assert "--specials allow" in err and "allowed_special" not in err


def test_train_summary_shows_tokens_readably_and_counts_in_words(tmp_path):
    text = tmp_path / "one.txt"
    text.write_text("ï" * 50, encoding="utf-8")
    r = run("train", text, "--vocab-size", 258, "--pattern", "none", "-o", tmp_path / "o.bytepair")
    assert r.returncode == 0, r.stderr
    assert "1 distinct pre-token," in r.stderr
    assert '"\\xc3"+"\\xaf"' in r.stderr  # partial UTF-8 as \xNN, not '\\xc3'


def test_convert_to_tiktoken_says_what_is_not_stored(tmp_path):
    r = run("convert", "cl100k_base", tmp_path / "c.tiktoken")
    assert r.returncode == 0, r.stderr
    lines = (tmp_path / "c.tiktoken").read_text(encoding="ascii").count("\n")
    assert f"{lines:,} ranks" in r.stderr
    assert "pattern (cl100k)" in r.stderr and "<|endoftext|>=100257" in r.stderr


def test_count_names_the_offset_of_invalid_utf8(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"x" * 3_000_000 + b"\xff tail")
    assert "bad.txt: invalid UTF-8 at byte offset 3000000 (byte 0xff)" in one_line_error(
        run("count", "-t", "gpt2", bad)
    )


def test_main_example_outputs_are_ignored_by_git():
    ignore = (Path(__file__).parent.parent / ".gitignore").read_text(encoding="utf-8")
    assert "/books.bin" in ignore and "/books.bytepair" in ignore


def test_training_knobs_from_the_command_line(small, tmp_path):
    corpus, _ = small
    out = tmp_path / "k.bytepair"
    r = run(
        "train",
        corpus,
        "--vocab-size",
        600,
        "--max-token-length",
        3,
        "--min-frequency",
        50,
        "--reserved-special-tokens",
        2,
        "--pad-to-multiple-of",
        128,
        "-o",
        out,
    )
    assert r.returncode == 0, r.stderr
    tok = bytepair.load(out)
    assert max(len(a + b) for a, b in tok.merges) <= 3
    assert tok.vocab_size % 128 == 0 and "<|reserved_1|>" in tok.special_tokens
    requested = 600 - 256 - 2
    assert len(tok.merges) < requested  # 200 KB has few pairs occurring 50 times
    assert "no pair occurs at least min_frequency=50 times" in r.stderr
