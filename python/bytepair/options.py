"""Arguments every entry point shares, checked one way: ``num_threads`` and text that
may hold lone surrogates.

>>> threads(2), without_surrogates("a\\ud800b")
(2, 'a\\ufffdb')
"""

from __future__ import annotations

import os


def threads(num_threads: int | None) -> int:
    """``num_threads`` checked; None is every core."""
    if num_threads is None:
        return os.cpu_count() or 1
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive integer or None, not {num_threads!r}")
    return num_threads


def without_surrogates(text: str) -> str:
    """Lone surrogates (which UTF-8 cannot hold) replaced by U+FFFD, as tiktoken does."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
