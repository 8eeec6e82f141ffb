"""Pre-tokenization patterns: the regexes that split text into pieces before BPE.

Pieces are never merged across, so the pattern decides what a token can be: with
`gpt2`, " the" can become a token but "the cat" cannot.

The strings are exactly tiktoken's (`tiktoken_ext/openai_public.py`), so a tokenizer
trained here with `pattern="cl100k"` pre-tokenizes exactly like GPT-4's.
"""

from __future__ import annotations

import re

from bytepair._core import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN

__all__ = [
    "CL100K_PATTERN",
    "GPT2_PATTERN",
    "O200K_PATTERN",
    "PATTERNS",
    "pattern_name",
    "resolve_pattern",
]

#: Built-in patterns by name. ``gpt2`` is also r50k_base and p50k_base's pattern.
PATTERNS: dict[str, str] = {
    "gpt2": GPT2_PATTERN,
    "cl100k": CL100K_PATTERN,
    "o200k": O200K_PATTERN,
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
    if pattern.lower() in PATTERNS:
        return PATTERNS[pattern.lower()]
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
}


def _suggest(name: str) -> str:
    """A "did you mean" for a pattern name (with how to pass a literal regex)."""
    import difflib

    guess = _ALIASES.get(name.lower())
    if guess is None:
        close = difflib.get_close_matches(name.lower(), [*PATTERNS, "none"], n=1, cutoff=0.5)
        guess = close[0] if close else None
    names = ", ".join([*PATTERNS, "none"])
    hint = f"did you mean {guess!r}? " if guess else ""
    return (
        f"{hint}built-in patterns: {names} (a regex that is a plain word: write it as (?:{name}))"
    )


def pattern_name(pattern: str | None) -> str:
    """The short name of a pattern for display: ``gpt2``, ``none`` or ``custom``."""
    if pattern is None:
        return "none"
    for name, regex in PATTERNS.items():
        if regex == pattern:
            return name
    return "custom"
