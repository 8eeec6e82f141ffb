"""The OpenAI encodings by name and by model: gpt2, r50k_base, p50k_base, p50k_edit,
cl100k_base, o200k_base — byte-for-byte tiktoken's, usable offline (the rank files ship
inside the package: :mod:`bytepair.formats.bundled`).

>>> enc = get_encoding("cl100k_base")                          # doctest: +SKIP
>>> enc.encode("hello world")                                  # doctest: +SKIP
[15339, 1917]
"""

from __future__ import annotations

from bytepair.formats import bundled
from bytepair.tokenizer import Tokenizer

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


def list_encodings() -> list[str]:
    """Names of the bundled encodings."""
    return bundled.names()


_tokenizers: dict[str, Tokenizer] = {}


def get_encoding(name: str) -> Tokenizer:
    """A bundled encoding by name (see :func:`list_encodings`), loaded once per process."""
    tok = _tokenizers.get(name)
    if tok is None:
        tok = _tokenizers.setdefault(name, Tokenizer.from_model(bundled.model(name)))
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
        f"{', '.join(bundled.names())}"
    )


def encoding_for_model(model: str) -> Tokenizer:
    """The bundled encoding for a model name, e.g. ``encoding_for_model("gpt-4o")``."""
    return get_encoding(encoding_name_for_model(model))
