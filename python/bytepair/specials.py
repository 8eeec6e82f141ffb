"""Which special tokens an encode call honours, and which it refuses (tiktoken's policy).

Text from users must not be able to inject control tokens, so by default text that
spells a registered special token is an error. The caller chooses:

- ``allowed_special``: ``"all"`` or a set of registered tokens to encode as special;
- ``disallowed_special``: ``"all"`` (every registered token not allowed) or a
  collection of strings whose presence in the text raises; ``()`` encodes the rest
  as plain text.

>>> resolve("all", "all", {"<|endoftext|>": 0})
(['<|endoftext|>'], [])
>>> resolve(frozenset(), "all", {"<|endoftext|>": 0})
([], ['<|endoftext|>'])
>>> resolve(frozenset(), (), {"<|endoftext|>": 0})
([], [])
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Set as AbstractSet
from typing import Literal

AllowedSpecial = Literal["all"] | AbstractSet[str]
DisallowedSpecial = Literal["all"] | Collection[str]


def resolve(
    allowed_special: AllowedSpecial,
    disallowed_special: DisallowedSpecial,
    registered: dict[str, int],
) -> tuple[list[str], list[str]]:
    """(registered tokens to encode as special, strings whose presence is an error),
    both sorted, as the core takes them."""
    if allowed_special == "all":
        allowed = set(registered)
    else:
        if isinstance(allowed_special, str):
            raise TypeError('allowed_special must be "all" or a set of strings, not a string')
        allowed = set(allowed_special) & set(registered)
    if disallowed_special == "all":
        disallowed = set(registered) - allowed
    else:
        if isinstance(disallowed_special, str):
            raise TypeError('disallowed_special must be "all" or a collection of strings')
        disallowed = set(disallowed_special)
    return sorted(allowed), sorted(disallowed)


#: How a Hugging Face added token may be matched besides its text (``tokenizers``'
#: ``AddedToken``): ``lstrip`` takes the whitespace before it, ``rstrip`` the whitespace
#: after it (neither is encoded), ``single_word`` matches it only where no word
#: character (regex ``\w``) touches it. They apply where the token is matched; a
#: special token follows ``allowed_special`` as any does.
TOKEN_FLAGS = ("lstrip", "rstrip", "single_word")


def flags_of(entry: dict) -> tuple[str, ...]:
    """The flags an ``added_tokens`` entry sets, in :data:`TOKEN_FLAGS` order.

    >>> flags_of({"content": "<mask>", "lstrip": True, "rstrip": False})
    ('lstrip',)
    """
    return tuple(flag for flag in TOKEN_FLAGS if entry.get(flag))


def token_flags_of(value, what: str) -> dict[str, tuple[str, ...]]:
    """``{token: flags}`` checked (ValueError naming ``what``), empty flags dropped.

    >>> token_flags_of({"<mask>": ["lstrip"], "x": []}, "model")
    {'<mask>': ('lstrip',)}
    """
    if not isinstance(value, dict):
        raise ValueError(f"{what}: token_flags must map tokens to lists of flags")
    flags = {}
    for token, names in value.items():
        if (
            not isinstance(token, str)
            or not isinstance(names, (list, tuple))
            or not set(names) <= set(TOKEN_FLAGS)
        ):
            raise ValueError(
                f"{what}: token_flags[{token!r}] must be a list of {', '.join(TOKEN_FLAGS)}"
            )
        if names:
            flags[token] = tuple(flag for flag in TOKEN_FLAGS if flag in names)
    return flags


def is_whitespace(char: str) -> bool:
    """Unicode White_Space (regex ``\\s`` in ``tokenizers``; ``str.isspace`` also has
    U+001C..U+001F).

    >>> is_whitespace("\\u3000"), is_whitespace("\\x1f")
    (True, False)
    """
    return char.isspace() and not "\x1c" <= char <= "\x1f"


def rstrip_clash(token_flags: dict[str, tuple[str, ...]], tokens) -> tuple[str, str] | None:
    """An rstrip token and a token starting with whitespace, which the first may take
    when the second follows it (``tokenizers`` then gives both and encodes the
    whitespace after the second again: not supported), if any.

    >>> rstrip_clash({"<a>": ("rstrip",)}, ["<a>", "\\n<b>"])
    ('<a>', '\\n<b>')
    """
    rstrip = next((t for t, flags in token_flags.items() if "rstrip" in flags), None)
    spaced = next((t for t in tokens if t and is_whitespace(t[0])), None)
    return None if rstrip is None or spaced is None else (rstrip, spaced)
