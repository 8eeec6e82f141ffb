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
