"""The OpenAI encodings, bundled: gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base,
o200k_base — byte-for-byte tiktoken's, usable offline.

The rank files ship inside the package (``bytepair/data/*.tiktoken.xz``, OpenAI's
published files, xz-compressed); nothing is ever downloaded. A model is built on first
use (parsed, merges recovered and the encoder built in the Rust core) and kept for the
life of the process.
"""

from __future__ import annotations

import lzma
import threading

from bytepair.formats import tiktoken
from bytepair.models import BPE
from bytepair.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

# name -> (rank file, pattern, special tokens); as tiktoken_ext/openai_public.py defines them.
ENCODINGS: dict[str, tuple[str, str, dict[str, int]]] = {
    "gpt2": ("r50k_base", GPT2_PATTERN, {ENDOFTEXT: 50256}),
    "r50k_base": ("r50k_base", GPT2_PATTERN, {ENDOFTEXT: 50256}),
    "p50k_base": ("p50k_base", GPT2_PATTERN, {ENDOFTEXT: 50256}),
    "p50k_edit": (
        "p50k_base",
        GPT2_PATTERN,
        {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283},
    ),
    "cl100k_base": (
        "cl100k_base",
        CL100K_PATTERN,
        {
            ENDOFTEXT: 100257,
            FIM_PREFIX: 100258,
            FIM_MIDDLE: 100259,
            FIM_SUFFIX: 100260,
            ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": ("o200k_base", O200K_PATTERN, {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}),
}

_models: dict[str, BPE] = {}
_lock = threading.Lock()


def names() -> list[str]:
    """Names of the bundled encodings."""
    return list(ENCODINGS)


def rank_file_text(file: str) -> bytes:
    """The text of a bundled ``.tiktoken`` file (decompressed), e.g. ``"cl100k_base"``."""
    from importlib import resources  # here, not at import: `import bytepair` stays quick

    packed = resources.files("bytepair").joinpath("data", f"{file}.tiktoken.xz")
    return lzma.decompress(packed.read_bytes())


def rank_file_path(file: str) -> str:
    """How errors name a bundled rank file."""
    return f"bytepair/data/{file}.tiktoken.xz"


def ranks(file: str) -> dict[bytes, int]:
    """The ranks of a bundled ``.tiktoken`` file: token bytes -> rank."""
    return tiktoken.parse(rank_file_text(file), rank_file_path(file))


def model(name: str) -> BPE:
    """The model of a bundled encoding, built once per process; ValueError with the
    closest name for an unknown one."""
    if name not in ENCODINGS:
        import difflib

        guess = difflib.get_close_matches(name, names(), n=1, cutoff=0.5)
        hint = f"did you mean {guess[0]!r}? " if guess else ""
        raise ValueError(
            f"unknown encoding {name!r}; {hint}bundled encodings: {', '.join(names())}"
        )
    with _lock:
        found = _models.get(name)
        if found is None:
            file, pattern, specials = ENCODINGS[name]
            found = tiktoken.from_bytes(
                rank_file_text(file), rank_file_path(file), pattern, specials
            )
            found.name = name
            _models[name] = found
        return found
