"""Shared fixtures. Everything here works offline and without ../shared."""

from __future__ import annotations

import os
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

patterns = st.sampled_from(["gpt2", "cl100k", "o200k", None])


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
