"""The OpenAI encodings, bundled: gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base,
o200k_base — byte-for-byte tiktoken's, usable offline.

The rank files ship inside the package (``bytepair/data/*.tiktoken.xz``, OpenAI's
published files, xz-compressed); nothing is ever downloaded. An encoding is loaded on
first use and cached for the life of the process.

>>> enc = get_encoding("cl100k_base")                          # doctest: +SKIP
>>> enc.encode("hello world")                                  # doctest: +SKIP
[15339, 1917]
"""

from __future__ import annotations

import lzma
import threading
from importlib import resources

from bytepair.formats import tiktoken as tiktoken_format
from bytepair.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN
from bytepair.tokenizer import Tokenizer

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

# name -> (rank file, pattern, special tokens); as tiktoken_ext/openai_public.py defines them.
_ENCODINGS: dict[str, tuple[str, str, dict[str, int]]] = {
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

# tiktoken's model tables (tiktoken/model.py).
MODEL_TO_ENCODING: dict[str, str] = {
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4-mini": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4o": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5-turbo": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "gpt-35-turbo": "cl100k_base",
    "davinci-002": "cl100k_base",
    "babbage-002": "cl100k_base",
    "text-embedding-ada-002": "cl100k_base",
    "text-embedding-3-small": "cl100k_base",
    "text-embedding-3-large": "cl100k_base",
    "text-davinci-003": "p50k_base",
    "text-davinci-002": "p50k_base",
    "text-davinci-001": "r50k_base",
    "text-curie-001": "r50k_base",
    "text-babbage-001": "r50k_base",
    "text-ada-001": "r50k_base",
    "davinci": "r50k_base",
    "curie": "r50k_base",
    "babbage": "r50k_base",
    "ada": "r50k_base",
    "code-davinci-002": "p50k_base",
    "code-davinci-001": "p50k_base",
    "code-cushman-002": "p50k_base",
    "code-cushman-001": "p50k_base",
    "davinci-codex": "p50k_base",
    "cushman-codex": "p50k_base",
    "text-davinci-edit-001": "p50k_edit",
    "code-davinci-edit-001": "p50k_edit",
    "text-similarity-davinci-001": "r50k_base",
    "text-similarity-curie-001": "r50k_base",
    "text-similarity-babbage-001": "r50k_base",
    "text-similarity-ada-001": "r50k_base",
    "text-search-davinci-doc-001": "r50k_base",
    "text-search-curie-doc-001": "r50k_base",
    "text-search-babbage-doc-001": "r50k_base",
    "text-search-ada-doc-001": "r50k_base",
    "code-search-babbage-code-001": "r50k_base",
    "code-search-ada-code-001": "r50k_base",
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}
MODEL_PREFIX_TO_ENCODING: dict[str, str] = {
    "o1-": "o200k_base",
    "o3-": "o200k_base",
    "o4-mini-": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-4.5-": "o200k_base",
    "gpt-4.1-": "o200k_base",
    "chatgpt-4o-": "o200k_base",
    "gpt-4o-": "o200k_base",
    "gpt-4-": "cl100k_base",
    "gpt-3.5-turbo-": "cl100k_base",
    "gpt-35-turbo-": "cl100k_base",
    "ft:gpt-4o": "o200k_base",
    "ft:gpt-4": "cl100k_base",
    "ft:gpt-3.5-turbo": "cl100k_base",
    "ft:davinci-002": "cl100k_base",
    "ft:babbage-002": "cl100k_base",
}

_cache: dict[str, Tokenizer] = {}
_lock = threading.Lock()


def list_encodings() -> list[str]:
    """Names of the bundled encodings."""
    return list(_ENCODINGS)


def bundled_ranks(file: str) -> dict[bytes, int]:
    """The ranks of a bundled ``.tiktoken`` file: token bytes -> rank."""
    return tiktoken_format.parse(_bundled_data(file), _bundled_path(file))


def _bundled_path(file: str) -> str:
    return f"bytepair/data/{file}.tiktoken.xz"


def _bundled_data(file: str) -> bytes:
    """The text of a bundled ``.tiktoken`` file (decompressed)."""
    packed = resources.files("bytepair").joinpath("data", f"{file}.tiktoken.xz")
    return lzma.decompress(packed.read_bytes())


def get_encoding(name: str) -> Tokenizer:
    """A bundled encoding by name (see :func:`list_encodings`), loaded once per process."""
    if name not in _ENCODINGS:
        import difflib

        guess = difflib.get_close_matches(name, list(_ENCODINGS), n=1, cutoff=0.5)
        hint = f"did you mean {guess[0]!r}? " if guess else ""
        raise ValueError(
            f"unknown encoding {name!r}; {hint}bundled encodings: {', '.join(_ENCODINGS)}"
        )
    with _lock:
        tok = _cache.get(name)
        if tok is None:
            file, pattern, specials = _ENCODINGS[name]
            # Parsed, merges recovered and the encoder built in the Rust core; the
            # Python vocab and merges are made only if asked for (Tokenizer.vocab...).
            tok = tiktoken_format.from_bytes(
                _bundled_data(file), _bundled_path(file), pattern, specials
            )
            tok.name = name
            _cache[name] = tok
        return tok


def encoding_name_for_model(model: str) -> str:
    """The encoding a model uses, e.g. ``"gpt-4o"`` -> ``"o200k_base"`` (tiktoken's table)."""
    if model in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model]
    for prefix, name in MODEL_PREFIX_TO_ENCODING.items():
        if model.startswith(prefix):
            return name
    raise KeyError(
        f"no known encoding for model {model!r}; use get_encoding() with one of "
        f"{', '.join(_ENCODINGS)}"
    )


def encoding_for_model(model: str) -> Tokenizer:
    """The bundled encoding for a model name, e.g. ``encoding_for_model("gpt-4o")``."""
    return get_encoding(encoding_name_for_model(model))
