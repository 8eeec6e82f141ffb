"""Splits run after the pattern: each piece the pattern (or the Split before) made is
split again on its own, as Hugging Face's ``Split`` pre-tokenizer does in a
``Sequence`` (DeepSeek V3's ``tokenizer.json``: three Splits). The core runs them
(``src/pretok/split.rs``: ``Split``, ``Behavior``).

A Split is a regex, a behavior and ``invert``. The regex divides a piece into matches
and the text between them (``invert`` swaps which is which); the behavior says what
becomes of the matches, as ``tokenizers`` documents it on ``"the-final--countdown"``
split on ``"-"``:

- ``Isolated``: ``the - final - - countdown`` (every match and gap a piece)
- ``Removed``: ``the final countdown``
- ``MergedWithPrevious``: ``the- final- - countdown``
- ``MergedWithNext``: ``the -final - -countdown``
- ``Contiguous``: ``the - final -- countdown``

>>> Split(r"\\p{N}{1,3}")
Split(pattern='\\\\p{N}{1,3}', behavior='Isolated', invert=False)
"""

from __future__ import annotations

from typing import NamedTuple

#: The behaviors, by their ``tokenizer.json`` names.
BEHAVIORS = ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")


class Split(NamedTuple):
    """One Split step (a tuple, as the core takes it)."""

    pattern: str
    behavior: str = "Isolated"
    invert: bool = False


def splits_of(steps) -> tuple[Split, ...]:
    """``steps`` (Splits or ``(pattern, behavior, invert)`` sequences) as Splits,
    checked: ``[("a", "Removed", False)] -> (Split('a', 'Removed', False),)``."""
    out = []
    for n, step in enumerate(steps):
        try:
            split = Split(*step)
        except TypeError:
            raise ValueError(
                f"split #{n} is {step!r}; expected (pattern, behavior, invert)"
            ) from None
        if not isinstance(split.pattern, str) or not split.pattern:
            raise ValueError(f"split #{n} has pattern {split.pattern!r}; expected a regex")
        if split.behavior not in BEHAVIORS:
            raise ValueError(
                f"split #{n} has behavior {split.behavior!r}; expected one of {', '.join(BEHAVIORS)}"
            )
        if not isinstance(split.invert, bool):
            raise ValueError(f"split #{n} has invert {split.invert!r}; expected true or false")
        out.append(split)
    return tuple(out)
