"""Reliability of the compiled core against hostile input (issues 26 and 23): token
ids past the largest allowed, patterns that backtrack without end, interrupts during
long native calls, SentencePiece files with huge pieces, and the cache pool in a
forked child.

Anything that could crash or hang the interpreter runs in a subprocess with a time
limit (and an address-space limit, so a regression fails instead of eating the
machine's memory).
"""

from __future__ import annotations

import base64
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import bytepair

from conftest import sigint_default

REPO = Path(__file__).resolve().parent.parent
MAX_ID = 2**31 - 1
#: Address space for a child: far below what a per-id table of 2**31 ids needs (16 GiB).
CHILD_MEMORY = 3 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))


def _limit_memory_and_take_sigint() -> None:
    _limit_memory()
    sigint_default()


def run_python(
    code: str, extra_env: dict[str, str] | None = None, timeout: float = 60, **kwargs
) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter importing this checkout's bytepair."""
    env = dict(os.environ, **(extra_env or {}))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        preexec_fn=_limit_memory,
        **kwargs,
    )


def last_line(proc: subprocess.CompletedProcess) -> str:
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return lines[-1] if lines else f"(no output, exit {proc.returncode})"


# -- token ids past the largest ---------------------------------------------------------


@pytest.mark.parametrize("bad_id", [2**31, 5 * 10**8 * 5, 2**32 - 1])
def test_with_special_tokens_refuses_an_id_past_the_largest_naming_it(bad_id):
    proc = run_python(
        f"""
        import bytepair
        try:
            tok = bytepair.get_encoding("gpt2").with_special_tokens({{"<x>": {bad_id}}})
            print("ENCODED", tok.encode("hi"))
        except ValueError as e:
            print("ValueError:", e)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert last_line(proc) == (
        f"ValueError: special token '<x>' has id {bad_id}, outside 0..{MAX_ID}: "
        "token ids must be at least 0 and below 2**31"
    )


def test_an_id_of_half_a_billion_encodes_without_a_table_of_that_size():
    # 5e8 is a valid id; before, the first encode made 5e8 Python ints (MemoryError,
    # then a panic "PyObject pointer is null", then a hang).
    proc = run_python(
        """
        import bytepair
        tok = bytepair.get_encoding("gpt2").with_special_tokens({"<x>": 500_000_000})
        print(tok.encode("hi<x>", allowed_special="all"), tok.encode_batch(["<x>"] * 2, allowed_special="all"))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert last_line(proc) == "[5303, 500000000] [[500000000], [500000000]]"


def test_the_largest_id_is_allowed():
    tok = bytepair.get_encoding("gpt2").with_special_tokens({"<x>": MAX_ID})
    assert tok.encode("a<x>", allowed_special="all") == [64, MAX_ID]
    assert tok.decode([64, MAX_ID]) == "a<x>"


def _byte_vocab() -> dict[int, bytes]:
    return {i: bytes([i]) for i in range(256)}


@pytest.mark.parametrize("bad_id", [2**31, 10**20, -1])
def test_tokenizer_refuses_a_vocab_id_past_the_largest_naming_token_and_id(bad_id):
    vocab = _byte_vocab() | {bad_id: b"hi"}
    with pytest.raises(ValueError) as e:
        bytepair.Tokenizer(vocab, [(b"h", b"i")])
    assert str(e.value) == (
        f"token b'hi' has id {bad_id}, outside 0..{MAX_ID}: "
        "token ids must be at least 0 and below 2**31"
    )


@pytest.mark.parametrize("bad_id", [2**31, 5 * 10**8 * 5])
def test_tokenizer_refuses_a_special_id_past_the_largest(bad_id):
    with pytest.raises(ValueError, match=rf"special token .<x>. has id {bad_id}, outside 0\.\."):
        bytepair.Tokenizer(_byte_vocab(), [], {"<x>": bad_id})


def test_tokenizer_with_a_special_id_of_ten_to_the_twenty_is_a_value_error():
    with pytest.raises(ValueError, match=r"'<x>' has id 100000000000000000000"):
        bytepair.Tokenizer(_byte_vocab(), [], {"<x>": 10**20})


def _tiktoken_file(path: Path, extra_rank: int) -> Path:
    lines = [f"{base64.b64encode(bytes([i])).decode()} {i}" for i in range(256)]
    lines.append(f"{base64.b64encode(b'hi').decode()} {extra_rank}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("rank", [2**31, 10**20])
def test_a_tiktoken_rank_past_the_largest_id_is_refused_naming_file_and_line(tmp_path, rank):
    path = _tiktoken_file(tmp_path / "huge.tiktoken", rank)
    with pytest.raises(ValueError) as e:
        bytepair.Tokenizer.from_tiktoken(path, "gpt2")
    assert str(e.value) == (
        f"{path}, line 257: rank '{rank}' is too large: ranks go up to {MAX_ID}"
    )


def test_a_tiktoken_rank_of_half_a_billion_loads_and_encodes(tmp_path):
    path = _tiktoken_file(tmp_path / "sparse.tiktoken", 500_000_000)
    proc = run_python(
        f"""
        import bytepair
        tok = bytepair.Tokenizer.from_tiktoken({str(path)!r}, "gpt2")
        print(tok.encode("hi hi"))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert last_line(proc) == "[500000000, 32, 500000000]"


# -- SentencePiece files --------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _small_spm_model() -> bytes:
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
    import io

    out = io.BytesIO()
    text = (REPO / "tests" / "data" / "corpus.en").read_text().splitlines()[:2000]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text),
        model_writer=out,
        vocab_size=600,
        model_type="bpe",
        hard_vocab_limit=False,
        character_coverage=0.98,
        byte_fallback=True,
        minloglevel=2,
    )
    return out.getvalue()


def test_a_model_with_a_one_megabyte_piece_loads_and_decodes_it(tmp_path):
    # A repeated field appended to a protobuf message adds to it: one more NORMAL piece
    # (field 1: the piece; field 2: its score; field 3: type 1, NORMAL) of 1 MB.
    # Loading took 52 s (quadratic in the piece's length) before.
    piece = ("▁" + "ab" * 500_000).encode()
    entry = b"\x0a" + _varint(len(piece)) + piece + b"\x15\x00\x00\x80\xbf" + b"\x18\x01"
    path = tmp_path / "huge_piece.model"
    path.write_bytes(_small_spm_model() + b"\x0a" + _varint(len(entry)) + entry)
    proc = run_python(
        f"""
        import bytepair
        tok = bytepair.load({str(path)!r})
        last = tok.vocab_size - 1
        print(tok.decode([last]) == "ab" * 500_000, tok.decode(tok.encode("ab" * 50)) == "ab" * 50)
        """,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert last_line(proc) == "True True"


def test_a_rank_file_with_a_one_megabyte_token_loads_in_linear_time(tmp_path):
    # One token of 1 MB that no merge builds (a damaged file): tiktoken's rule tried
    # every cut of it, hashing both halves (O(n^2): 750 KB took 80 s); now only cuts
    # whose halves have some token's length.
    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)]
    lines.append(base64.b64encode(b"\x00" * 1_000_000) + b" 256")
    path = tmp_path / "huge_token.tiktoken"
    path.write_bytes(b"\n".join(lines) + b"\n")
    proc = run_python(
        f"""
        import bytepair
        tok = bytepair.Tokenizer.from_tiktoken({str(path)!r}, None)
        print(tok.encode("\\x00" * 1_000_000) == [256], tok.encode("ab") == [97, 98])
        """,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert last_line(proc) == "True True"


def test_an_empty_model_file_is_refused_as_empty_naming_the_file(tmp_path):
    path = tmp_path / "empty.model"
    path.write_bytes(b"")
    with pytest.raises(ValueError) as e:
        bytepair.load(path)
    assert str(e.value) == f"{path}: the file is empty: not a SentencePiece model"


# -- the cache pool in a forked child -------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_encodes_with_sentencepiece_encodes(tmp_path):
    # The SentencePiece cache pool once waited on its lock: a child forked while a
    # thread of the parent held it (taking or giving back a cache around each encode)
    # waited forever at its first encode. Each child must encode within 20 s.
    path = tmp_path / "small.model"
    path.write_bytes(_small_spm_model())
    proc = run_python(
        f"""
        import os, threading, time, warnings
        import bytepair
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
        tok = bytepair.load({str(path)!r})
        want = tok.encode("hello world")
        stop = False
        def hammer():
            while not stop:
                tok.encode("hi")
        thread = threading.Thread(target=hammer)
        thread.start()
        hung = ok = 0
        for _ in range(200):
            pid = os.fork()
            if pid == 0:
                os._exit(0 if tok.encode("hello world") == want else 3)
            deadline = time.monotonic() + 20
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    ok += os.waitstatus_to_exitcode(status) == 0
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    hung += 1
                    break
                time.sleep(0.001)
            if hung:
                break
        stop = True
        thread.join()
        print("ok", ok, "hung", hung)
        """,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert last_line(proc) == "ok 200 hung 0"


# -- patterns that backtrack, interrupts, long texts in blocks -------------------------

HOSTILE_PATTERN = r"(?:a|aa)+(?=b)|\s+|\S"


def test_a_pattern_that_backtracks_without_end_is_a_value_error_naming_it():
    # It ran for over 10 minutes and ignored SIGTERM before.
    tok = bytepair.get_encoding("gpt2")
    proc = run_python(
        f"""
        import bytepair
        gpt2 = bytepair.get_encoding("gpt2")
        tok = bytepair.Tokenizer(gpt2.model.vocab, gpt2.model.merges, pattern={HOSTILE_PATTERN!r})
        try:
            tok.encode("x " + "a" * 60)
        except ValueError as e:
            print("ValueError:", e)
        """,
        timeout=120,
    )
    assert tok.encode("x") == [87]
    assert proc.returncode == 0, proc.stderr
    assert last_line(proc) == (
        "ValueError: the pre-tokenizer pattern "
        + '"(?:a|aa)+(?=b)|\\\\s+|\\\\S"'
        + " needs more backtracking than the limit of 1000000 steps at byte offset 2 of "
        "the text (between special tokens); simplify the pattern (possessive quantifiers "
        "such as ++ or atomic groups (?>...) avoid backtracking) or raise the limit with "
        "the environment variable BYTEPAIR_BACKTRACK_LIMIT"
    )


def test_the_backtracking_limit_is_set_by_an_environment_variable():
    code = f"""
        import bytepair
        gpt2 = bytepair.get_encoding("gpt2")
        try:
            tok = bytepair.Tokenizer(gpt2.model.vocab, gpt2.model.merges, pattern={HOSTILE_PATTERN!r})
            print(len(tok.encode("x " + "a" * 12)))
        except ValueError as e:
            print("ValueError:", str(e)[:131])
        """
    small = run_python(code, {"BYTEPAIR_BACKTRACK_LIMIT": "10"})
    assert last_line(small) == (
        'ValueError: the pre-tokenizer pattern "(?:a|aa)+(?=b)|\\\\s+|\\\\S" needs more '
        "backtracking than the limit of 10 steps at byte offset 2 of the text"
    ), small.stderr
    default = run_python(code)
    assert last_line(default) == "14", default.stderr
    bad = run_python(code, {"BYTEPAIR_BACKTRACK_LIMIT": "lots"})
    assert last_line(bad) == (
        'ValueError: BYTEPAIR_BACKTRACK_LIMIT must be a positive integer, not "lots"'
    )


def test_a_text_longer_than_a_block_encodes_as_tiktoken_does(tiktoken_offline):
    # Over 4 MB, a text is encoded in blocks cut at safe cuts (newlines between
    # printable ASCII and a letter, special tokens), with a check for Ctrl-C between.
    lines = (REPO / "tests" / "data" / "corpus.en").read_text().splitlines()
    text = "\n".join(lines * 80) + "<|endoftext|>" + "  spaces\n\n" * 3
    text = text[: len(text) // 2] + "<|endoftext|>" + text[len(text) // 2 :]
    assert len(text.encode()) > 2 * (4 << 20)
    for name in ("gpt2", "cl100k_base"):
        ours = bytepair.get_encoding(name)
        theirs = tiktoken_offline.get_encoding(name)
        want = theirs.encode(text, allowed_special="all")
        assert ours.encode(text, allowed_special="all") == want, name
        assert ours.count_tokens(text, allowed_special="all") == len(want), name


def test_ctrl_c_stops_a_long_encode_before_it_ends():
    # The child encodes ~200 MB in one call; SIGINT half a second in must raise
    # KeyboardInterrupt from inside the call (checked between blocks of 4 MB), not after
    # the whole text. The child times the signal from when it arrived (a thread woken
    # by signal.set_wakeup_fd, which the C handler writes at once: a busy machine may
    # deliver it late), and the bound is relative to the child's own measured speed.
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import os, signal, threading, time, bytepair
                tok = bytepair.get_encoding("cl100k_base")
                text = open({str(REPO / "tests" / "data" / "corpus.en")!r}).read() * 1500
                t = time.monotonic()
                tok.encode(text[: len(text) // 30])
                arrived = []
                r, w = os.pipe()
                os.set_blocking(w, False)
                signal.set_wakeup_fd(w)
                threading.Thread(
                    target=lambda: (os.read(r, 1), arrived.append(time.monotonic())), daemon=True
                ).start()
                print("start", (time.monotonic() - t) * 30, flush=True)
                t = time.monotonic()
                try:
                    tok.encode(text)
                    print("finished", time.monotonic() - t, flush=True)
                except KeyboardInterrupt:
                    done = time.monotonic()
                    while not arrived and time.monotonic() < done + 5:
                        time.sleep(0.01)
                    print("interrupted", done - arrived[0], flush=True)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        preexec_fn=_limit_memory_and_take_sigint,
    )
    try:
        start = child.stdout.readline().split()
        assert start[0] == "start", child.stderr.read()
        whole = float(start[1])
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
        child.wait()
    kind, seconds = out.split()
    assert kind == "interrupted", err
    assert float(seconds) < whole / 2, (seconds, whole)
