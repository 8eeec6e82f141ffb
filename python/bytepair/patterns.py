"""Pre-tokenization patterns: the regexes that split text into pieces before BPE.

Pieces are never merged across, so the pattern decides what a token can be: with
`gpt2`, " the" can become a token but "the cat" cannot.

The strings are exactly tiktoken's (`tiktoken_ext/openai_public.py`), so a tokenizer
trained here with `pattern="cl100k"` pre-tokenizes exactly like GPT-4's. Other open
models' public patterns are here by name too, copied from their owners' code, to load
their rank files (`bytepair.load("tokenizer.model", pattern="llama3", ...)`):
`llama3` (Meta's `llama_models/llama3/tokenizer.py`), `llama4` (the same string as
`o200k`: `llama_models/llama4/tokenizer.py`), `qwen2` (transformers'
`models/qwen2/tokenization_qwen2.py`, Qwen2 to Qwen3), `qwen3.5` (transformers'
`models/qwen3_5/tokenization_qwen3_5.py`) and `tekken` (the `config.pattern` of Mistral's
Tekken files in `mistral_common/data`).
"""

from __future__ import annotations

import re

from bytepair._core import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    LLAMA3_PATTERN,
    O200K_PATTERN,
    QWEN2_PATTERN,
    QWEN3_5_PATTERN,
    TEKKEN_PATTERN,
)

__all__ = [
    "CL100K_PATTERN",
    "GPT2_PATTERN",
    "O200K_PATTERN",
    "LLAMA3_PATTERN",
    "MODEL_PATTERNS",
    "PATTERNS",
    "QWEN2_PATTERN",
    "QWEN3_5_PATTERN",
    "TEKKEN_PATTERN",
    "pattern_name",
    "resolve_pattern",
]

# The open models' patterns (defined in the core, beside the splitters that run them):
# LLAMA3_PATTERN is ``pat_str`` in llama_models 0.3.0 (``llama3/tokenizer.py``), cl100k's
# as first published: without possessive quantifiers, and a run of whitespace that ends
# the text is cut after its last newline. QWEN2_PATTERN is ``PRETOKENIZE_REGEX`` of
# transformers' ``tokenization_qwen2.py`` (also Qwen2.5 and Qwen3): Llama 3's with one
# digit a piece. QWEN3_5_PATTERN is ``PRETOKENIZE_REGEX`` of ``tokenization_qwen3_5.py``:
# Qwen2's with marks (``\p{M}``) in words and out of the others. TEKKEN_PATTERN is the ``config.pattern`` of ``tekken_240718.json`` and
# ``tekken_240911.json`` in mistral-common: o200k's without the contractions, one digit a
# piece.

#: Built-in patterns by name. ``gpt2`` is also r50k_base and p50k_base's pattern.
PATTERNS: dict[str, str] = {
    "gpt2": GPT2_PATTERN,
    "cl100k": CL100K_PATTERN,
    "o200k": O200K_PATTERN,
}
#: Other open models' patterns by name, for loading their files. ``llama4`` is
#: ``o200k``'s string; each of them runs on a hand-written splitter, as the built-in
#: patterns do (``src/pretok/builtin.rs``).
MODEL_PATTERNS: dict[str, str] = {
    "llama3": LLAMA3_PATTERN,
    "llama4": O200K_PATTERN,
    "qwen2": QWEN2_PATTERN,
    "qwen3.5": QWEN3_5_PATTERN,
    "tekken": TEKKEN_PATTERN,
}


def resolve_pattern(pattern: str | None) -> str | None:
    """Turns a pattern name into its regex; other strings are taken as a custom regex.

    >>> resolve_pattern("gpt2") == GPT2_PATTERN
    True
    >>> resolve_pattern(None) is None   # no pre-tokenization (minbpe's BasicTokenizer)
    True
    """
    if pattern is None:
        return None
    if not isinstance(pattern, str):
        raise TypeError(
            f"pattern must be a name, a regex string or None, not {type(pattern).__name__}"
        )
    if pattern.lower() == "none":
        return None
    named = {**PATTERNS, **MODEL_PATTERNS}
    if pattern.lower() in named:
        return named[pattern.lower()]
    if re.fullmatch(r"[\w.-]+", pattern):
        # A bare word is a mistyped name, not a regex: as a regex it would match only
        # itself, and almost all text would fall between its matches.
        raise ValueError(f"unknown pattern name {pattern!r}; {_suggest(pattern)}")
    return pattern


# Names people reach for, and the built-in pattern they mean.
_ALIASES = {
    "gpt4": "cl100k",
    "gpt-4": "cl100k",
    "gpt3": "gpt2",
    "r50k": "gpt2",
    "r50k_base": "gpt2",
    "p50k": "gpt2",
    "p50k_base": "gpt2",
    "cl100k_base": "cl100k",
    "gpt4o": "o200k",
    "gpt-4o": "o200k",
    "o200k_base": "o200k",
    "llama-3": "llama3",
    "llama-4": "llama4",
    "qwen": "qwen2",
    "qwen2.5": "qwen2",
    "qwen3": "qwen2",
    "qwen35": "qwen3.5",
    "qwen3_5": "qwen3.5",
    "mistral": "tekken",
}


def _suggest(name: str) -> str:
    """A "did you mean" for a pattern name (with how to pass a literal regex)."""
    import difflib

    guess = _ALIASES.get(name.lower())
    if guess is None:
        known = [*PATTERNS, *MODEL_PATTERNS, "none"]
        close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.5)
        guess = close[0] if close else None
    names = ", ".join([*PATTERNS, *MODEL_PATTERNS, "none"])
    hint = f"did you mean {guess!r}? " if guess else ""
    return (
        f"{hint}built-in patterns: {names} (a regex that is a plain word: write it as (?:{name}))"
    )


def pattern_name(pattern: str | None) -> str:
    """The short name of a pattern for display: ``gpt2``, ``none`` or ``custom`` (the
    first name of a string with two: ``o200k``, not ``llama4``)."""
    if pattern is None:
        return "none"
    for name, regex in {**PATTERNS, **MODEL_PATTERNS}.items():
        if regex == pattern:
            return name
    return "custom"
