"""The command line: a full train -> encode -> decode round trip, and clean failures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bytepair

from conftest import DATA, EOT, GPT2_DIR

EXAMPLE = Path(__file__).parent.parent / "examples" / "books.txt"


def run(*args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bytepair", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "books.bytepair"
    r = run("train", EXAMPLE, "--vocab-size", 600, "--special", EOT, "-o", out)
    assert r.returncode == 0, r.stderr
    return out, r.stderr


def test_train_writes_a_loadable_tokenizer_and_a_summary(trained):
    out, summary = trained
    tok = bytepair.Tokenizer.load(out)
    assert tok.vocab_size == 600 and tok.special_tokens == {EOT: 599}
    assert "bytes/token" in summary and "first merges" in summary and "vocab size 600" in summary
    assert "MB/s" in summary


def test_encode_to_bin_then_decode_round_trips_the_file(trained, tmp_path):
    out, _ = trained
    ids_path = tmp_path / "books.bin"
    r = run("encode", "-t", out, EXAMPLE, "-o", ids_path)
    assert r.returncode == 0, r.stderr
    ids = np.fromfile(ids_path, dtype=np.uint16)
    tok = bytepair.Tokenizer.load(out)
    text = EXAMPLE.read_text(encoding="utf-8")
    assert ids.tolist() == tok.encode(text, allowed_special="all")
    decoded = tmp_path / "decoded.txt"
    r = run("decode", "-t", out, ids_path, "-o", decoded)
    assert r.returncode == 0, r.stderr
    assert decoded.read_bytes() == EXAMPLE.read_bytes()


def test_encode_to_npy(trained, tmp_path):
    out, _ = trained
    r = run("encode", "-t", out, DATA / "tinystories_sample.txt", "-o", tmp_path / "t.npy", "-q")
    assert r.returncode == 0, r.stderr
    arr = np.load(tmp_path / "t.npy")
    assert arr.dtype == np.uint16
    tok = bytepair.Tokenizer.load(out)
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
    assert arr.tolist() == tok.encode(text, allowed_special="all")


def test_large_vocab_is_written_as_uint32(tmp_path):
    vocab = {i: bytes([i]) for i in range(256)}
    vocab[70000] = b"ab"
    tok = bytepair.Tokenizer(vocab, [(b"a", b"b")])
    tok.save(tmp_path / "big.bytepair")
    (tmp_path / "in.txt").write_text("abab", encoding="utf-8")
    r = run(
        "encode", "-t", tmp_path / "big.bytepair", tmp_path / "in.txt", "-o", tmp_path / "o.bin"
    )
    assert r.returncode == 0, r.stderr
    assert np.fromfile(tmp_path / "o.bin", dtype=np.uint32).tolist() == [70000, 70000]


def test_stdin_encode_prints_ids_and_decode_reads_them(trained):
    out, _ = trained
    r = run("encode", "-t", out, stdin="Hello there<|endoftext|>")
    assert r.returncode == 0, r.stderr
    ids = [int(x) for x in r.stdout.split()]
    assert ids[-1] == 599
    r = run("decode", "-t", out, stdin=r.stdout)
    assert r.stdout == "Hello there<|endoftext|>"  # exactly the text: no newline added


def test_show_colours_tokens_and_prints_ids(trained):
    out, _ = trained
    r = run("show", "-t", out, "Hello world", "--color", "always")
    assert r.returncode == 0, r.stderr
    tok = bytepair.Tokenizer.load(out)
    assert "\x1b[48;5;" in r.stdout
    assert str(tok.encode("Hello world")) in r.stdout
    plain = run("show", "-t", out, "Hello world", "--color", "never")
    pieces = [tok.decode([i]) for i in tok.encode("Hello world")]
    assert plain.stdout.startswith("".join(f"[{p}]" for p in pieces))


def test_gpt2_folder_works_as_a_tokenizer():
    r = run("encode", "-t", GPT2_DIR, stdin="Hello world")
    assert r.stdout.split() == ["15496", "995"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["train", "missing.txt", "--vocab-size", "300", "-o", "x.bytepair"],
            "missing.txt: no such file",
        ),
        (
            ["train", "{example}", "--vocab-size", "abc", "-o", "x.bytepair"],
            "invalid int value: 'abc'",
        ),
        (
            ["train", "{example}", "--vocab-size", "100", "-o", "x.bytepair"],
            "vocab_size 100 is too small",
        ),
        (
            ["train", "{bad}", "--vocab-size", "300", "-o", "x.bytepair"],
            "bad.txt: invalid UTF-8 at byte offset 6",
        ),
        (
            ["encode", "-t", "{bad}", "--", "{example}"],
            "bad.txt: not a tokenizer file bytepair recognises",
        ),
        (["encode", "-t", "nope.bytepair"], "nope.bytepair: no such tokenizer file"),
        (["decode", "-t", "{tok}"], "token #1 is 'x', not an integer id"),
    ],
)
def test_errors_are_one_line_and_non_zero(tmp_path, trained, args, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello \xff world")
    subs = {"{example}": str(EXAMPLE), "{bad}": str(bad), "{tok}": str(trained[0])}
    args = [subs.get(a, a) for a in args]
    os.chdir(tmp_path)
    r = run(*args, stdin="1 x")
    assert r.returncode != 0
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "x.bytepair").exists()


def test_failed_encode_leaves_no_partial_output(tmp_path, trained):
    src = tmp_path / "in.txt"
    src.write_bytes(b"good text " * 300_000 + b"\xff bad")
    r = run("encode", "-t", trained[0], src, "-o", tmp_path / "out.bin", "-q")
    assert r.returncode == 1
    assert "invalid UTF-8" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_outputs_get_normal_file_permissions(trained, tmp_path):
    old = os.umask(0o022)
    try:
        r = run("encode", "-t", trained[0], DATA / "address.txt", "-o", tmp_path / "a.bin", "-q")
        assert r.returncode == 0, r.stderr
        r = run("convert", "gpt2", tmp_path / "g.bytepair")
        assert r.returncode == 0, r.stderr
    finally:
        os.umask(old)
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "g.bytepair").stat().st_mode & 0o777 == 0o644


def test_bundled_encodings_work_wherever_a_tokenizer_is_taken():
    r = run("show", "-t", "cl100k_base", "hello world", "--color", "never")
    assert r.returncode == 0, r.stderr
    assert "[15339, 1917]" in r.stdout


def test_bos_and_eos_are_asked_for_the_same_way_as_in_python(tmp_path):
    r = run("show", "-t", "gpt2", "hi", "--color", "never", "--bos-token", EOT, "--add-bos")
    assert r.returncode == 0, r.stderr
    assert "[50256, 5303]" in r.stdout
    src = tmp_path / "in.txt"
    src.write_text("hi", encoding="utf-8")
    args = ("--eos-token", EOT, "--add-eos", "--add-bos", "--bos-token", EOT)
    r = run("encode", "-t", "gpt2", src, "-o", tmp_path / "out.bin", *args)
    assert r.returncode == 0, r.stderr
    assert np.fromfile(tmp_path / "out.bin", dtype="<u2").tolist() == [50256, 5303, 50256]
    r = run("show", "-t", "gpt2", "hi", "--add-bos")
    assert r.returncode != 0
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "add_bos=True: this model names no BOS token; name one of its special tokens with "
            "--bos-token TOKEN"
        )
    )


def test_count_prints_tokens_per_file_and_total():
    r = run("count", "-t", "o200k_base", DATA / "address.txt", DATA / "german.txt")
    assert r.returncode == 0, r.stderr
    enc = bytepair.get_encoding("o200k_base")
    counts = [
        len(enc.encode((DATA / n).read_text(encoding="utf-8")))
        for n in ("address.txt", "german.txt")
    ]
    lines = r.stdout.strip().splitlines()
    assert [int(line.split("\t")[0]) for line in lines] == [*counts, sum(counts)]
    assert lines[-1].endswith("\ttotal")


def test_convert_through_every_format_keeps_the_ids(tmp_path):
    text = (DATA / "german.txt").read_text(encoding="utf-8") + "<|endoftext|>"
    expected = bytepair.get_encoding("cl100k_base").encode(text, allowed_special="all")
    steps = [
        ("cl100k_base", tmp_path / "c.tiktoken", []),
        (
            tmp_path / "c.tiktoken",
            tmp_path / "c.json",
            ["--pattern", "cl100k", "--special", "<|endoftext|>=100257"],
        ),
        (tmp_path / "c.json", tmp_path / "c.bytepair", []),
        (tmp_path / "c.bytepair", tmp_path / "gpt2files", ["--to", "gpt2"]),
    ]
    for src, dst, extra in steps:
        r = run("convert", src, dst, *extra)
        assert r.returncode == 0, r.stderr
    for spec in (tmp_path / "c.json", tmp_path / "c.bytepair"):
        r = run("encode", "-t", spec, stdin=text)
        assert [int(x) for x in r.stdout.split()] == expected
    tok = bytepair.Tokenizer.from_files(
        tmp_path / "gpt2files" / "vocab.json",
        tmp_path / "gpt2files" / "merges.txt",
        {"<|endoftext|>": 100257},
        pattern="cl100k",
    )
    assert tok.encode(text, allowed_special="all") == expected
    packed = (tmp_path / "c.tiktoken").read_bytes().splitlines()
    assert len(packed) == 100256


def test_convert_tiktoken_without_pattern_is_a_clear_error(tmp_path):
    assert run("convert", "gpt2", tmp_path / "g.tiktoken").returncode == 0
    r = run("convert", tmp_path / "g.tiktoken", tmp_path / "g.json")
    assert r.returncode == 1
    assert "holds no pre-tokenizer pattern; pass --pattern" in r.stderr
    assert not (tmp_path / "g.json").exists()


def test_the_training_summary_cuts_a_giant_token(tmp_path):
    # A run of one letter merges into tokens of tens of kilobytes: the summary shows
    # them cut, with their length, instead of printing them whole.
    corpus = tmp_path / "run.txt"
    corpus.write_text("a" * 300_000, encoding="utf-8")
    r = run("train", corpus, "--vocab-size", "280", "-o", tmp_path / "run.bytepair")
    assert r.returncode == 0, r.stderr
    lines = (r.stdout + r.stderr).splitlines()
    assert any("last merges" in line and "bytes)" in line for line in lines)
    assert max(len(line) for line in lines) < 1000  # tokens here are up to 150 KB
