"""Shared fixtures. Everything here works offline and without ../shared."""

from __future__ import annotations

import contextlib
import lzma
import os
import shutil
import signal
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import bytepair
from bytepair.formats.gpt2 import read_vocab_and_merges as read_gpt2_files
from bytepair.patterns import PATTERNS

DATA = Path(__file__).parent / "data"
GPT2_DIR = DATA / "gpt2"

settings.register_profile(
    "default", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

EOT = "<|endoftext|>"

# Pieces of text that stress pre-tokenization: contractions, whitespace runs of every
# kind, digits, punctuation next to newlines, long runs of one character, non-Latin
# scripts, combining marks, emoji and special-token look-alikes.
ATOMS = [
    "a",
    "b",
    "c",
    "e",
    "t",
    "h",
    "A",
    "B",
    "Z",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\r\n",
    "\t",
    "\u00a0",
    "\u3000",
    "'s",
    "'t",
    "'re",
    "'LL",
    "'",
    "0",
    "1",
    "42",
    "12345",
    ".",
    ",",
    "!",
    "/",
    "-",
    "(",
    "é",
    "ß",
    "中",
    "文",
    "ё",
    "ก",
    "\u0301",
    "😀",
    "👍🏽",
    "a" * 40,
    " " * 25,
    "\n" * 6,
    "x" * 70,
    "ab" * 20,
    EOT,
    "<|",
    "|>",
    "<|endoftext",
    "endoftext|>",
]

# Characters assigned in this Python's Unicode database (Cn excluded): the Rust regex
# engine (like tiktoken's) and Python's `regex` module follow different Unicode
# versions, so they disagree on \p{L} & co. only for characters assigned since.
texts = st.lists(
    st.one_of(
        st.sampled_from(ATOMS),
        st.text(st.characters(exclude_categories=("Cs", "Cn")), max_size=4),
    ),
    max_size=40,
).map("".join)

#: Every pattern a hand-written splitter runs (the GPT ones, and Llama 3's, Qwen2's,
#: Qwen3.5's and Tekken's variants of them), and none.
SPLITTER_PATTERNS = ["gpt2", "cl100k", "o200k", "llama3", "qwen2", "qwen3.5", "tekken"]
patterns = st.sampled_from([*SPLITTER_PATTERNS, None])


def gpt2_tiktoken():
    """tiktoken's gpt2 Encoding, built from the files in tests/data (no download)."""
    import tiktoken

    vocab, _ = read_gpt2_files(GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt")
    ranks = {token: i for i, token in vocab.items() if token != EOT.encode()}
    return tiktoken.Encoding(
        name="gpt2-offline",
        pat_str=PATTERNS["gpt2"],
        mergeable_ranks=ranks,
        special_tokens={EOT: 50256},
    )


@pytest.fixture(autouse=True, scope="session")
def no_network():
    """No test may touch the network: every connection attempt fails loudly."""
    import socket

    def refuse(self, address, *args, **kwargs):
        if self.family == socket.AF_UNIX:
            return real_connect(self, address, *args, **kwargs)
        raise RuntimeError(f"a test tried to connect to {address!r}; tests must run offline")

    real_connect = socket.socket.connect
    socket.socket.connect = refuse
    yield
    socket.socket.connect = real_connect


@pytest.fixture(scope="session")
def gpt2():
    return bytepair.Tokenizer.from_files(GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt", [EOT])


@pytest.fixture(scope="session")
def tinystories_tokenizer():
    """A small tokenizer trained on the TinyStories sample, with two specials."""
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
    return bytepair.train_from_iterator(
        [text, text.upper()], 600, special_tokens=[EOT, "<|pad|>"], progress=False
    )


CACHE_NAMES = {  # tiktoken's cache file names (sha1 of the download URL)
    "r50k_base": "0ea1e91bbb3a60f729a8dc8f777fd2fc07cd8df4",
    "p50k_base": "ec7223a39ce59f226a68acc30dc1af2788490e15",
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
}


@pytest.fixture(scope="session")
def tiktoken_offline(tmp_path_factory):
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name, digest in CACHE_NAMES.items():
        packed = resources.files("bytepair").joinpath("data", f"{name}.tiktoken.xz").read_bytes()
        (cache / digest).write_bytes(lzma.decompress(packed))
    shutil.copy(GPT2_DIR / "vocab.json", cache / "6c7ea1a7e38e3a7f062df639a5b80947f075ffe6")
    shutil.copy(GPT2_DIR / "merges.txt", cache / "6d1cbeee0f20b3d9449abfede4726ed8212e3aee")
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    yield tiktoken
    if old is None:
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)
    else:
        os.environ["TIKTOKEN_CACHE_DIR"] = old


# -- the shared corpora, sampled (tests that compare with a peer on real text) ------------


def sigint_default() -> None:
    """``preexec_fn`` of a child a test stops with SIGINT: Ctrl-C's default action in
    it, whatever pytest's own is. A shell starts a background job (``pytest &``) with
    SIGINT ignored, a child inherits that, and Python then never raises
    KeyboardInterrupt: the test would see the child run to its end."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


SHARED = os.environ.get("BYTEPAIR_SHARED")
needs_shared = pytest.mark.skipif(
    not SHARED, reason="BYTEPAIR_SHARED is not set: no path to the shared corpora"
)


def shared_corpus_files() -> list[Path]:
    """Every shared corpus (English, code, each multilingual file); none without
    BYTEPAIR_SHARED."""
    if not SHARED:
        return []
    corpora = Path(SHARED) / "corpora"
    files = sorted((corpora / "code").glob("*.txt.xz"))
    files += sorted((corpora / "multilingual").glob("*.txt.xz"))
    return [corpora / "english_gutenberg.txt.xz", *files]


def corpus_sample(path: Path, lines: int = 400) -> list[str]:
    """The first 100 lines of a corpus, an even spread of ``lines`` of the rest, and all
    of them again in NFD (decomposed accents)."""
    import unicodedata

    with lzma.open(path, "rt", encoding="utf-8") as f:
        text = f.read(4_000_000).split("\n")[:-1]
    step = max(1, len(text) // lines)
    sample = text[:100] + text[100::step]
    return sample + [unicodedata.normalize("NFD", line) for line in sample]


def assert_every_path_encodes_as(tok, text: str, ids_of, tmp_path: Path, rng) -> None:
    """``encode``, ``encode_batch`` (with a prefix of ``text``), ``encode_to_numpy``,
    ``encode_file`` in 16-byte blocks on two threads, and ``encode_iterable`` in a few
    random chunks and a character at a time all give ``ids_of(text)``."""
    from unittest import mock

    import numpy as np

    from bytepair.shards import one_file

    if any(token in text for token in tok.special_tokens_set):
        # Hypothesis draws string constants from the code under test, "<|endoftext|>"
        # among them: text spelling a special token is refused by the safe default
        # (every path's refusal has its own tests in test_encode.py).
        with pytest.raises(ValueError, match="special token"):
            tok.encode(text)
        return
    want = ids_of(text)
    assert tok.encode(text) == want
    assert tok.encode_batch([text, text[:10]]) == [want, ids_of(text[:10])]
    assert tok.encode_to_numpy(text).tolist() == want
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8", newline="")
    dst = tmp_path / "out.npy"
    dst.unlink(missing_ok=True)
    with mock.patch.object(one_file, "BLOCK_BYTES", 16):
        assert tok.encode_file(src, dst, format="npy", num_threads=2) == len(want)
    assert np.load(dst).tolist() == want
    cuts = sorted(rng.sample(range(len(text) + 1), min(len(text), 6)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    assert list(tok.encode_iterable(chunks)) == want
    assert list(tok.encode_iterable(iter(text))) == want


@contextlib.contextmanager
def shard_road(core: bool):
    """Shard folders written by the core's road (where it takes the files) or, with
    ``core=False``, always by Python's; yields a list saying, call by call, whether
    the core's road was taken."""
    from bytepair.runners import local

    chosen, used = local.plain_files, []

    def plain_files(*args):
        files = chosen(*args) if core else None
        used.append(files is not None)
        return files

    local.plain_files = plain_files
    try:
        yield used
    finally:
        local.plain_files = chosen


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every file of a folder (a shard folder) by name: two folders are the same bytes
    when these are equal."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def core_threads(prefix: str = "bytepair-") -> list[str]:
    """The names of this process's threads that start with ``prefix``: the core's named
    threads (``bytepair-read``, ``bytepair-encode``), which ``threading.enumerate()``
    does not list (it knows Python's threads only). Read from /proc (Linux)."""
    names = []
    for comm in Path("/proc/self/task").glob("*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if name.startswith(prefix):
            names.append(name)
    return names
