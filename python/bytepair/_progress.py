"""Progress reporting, one meaning everywhere: ``progress=`` is

- ``None`` (the default): a bar on stderr only when stderr is a terminal, so logs,
  notebooks' captured output and pipes stay clean;
- ``True`` / ``False``: a bar always / never;
- a callable: called with the absolute amount done so far (bytes, or merges), and no bar.

Bars count decimal units (MB, as the summaries do), through tqdm.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


class Progress:
    """Feeds a tqdm bar or a user callback with absolute counts; a no-op when off.

    Use as a context manager: on an error the bar is erased so the error stands alone.
    """

    def __init__(self, progress, *, total: int | None, desc: str, unit: str = "B") -> None:
        self.bar = None
        self.callback: Callable[[int], object] | None = None
        self.base = 0
        if callable(progress) and not isinstance(progress, bool):
            self.callback = progress
            return
        if progress is None:
            progress = sys.stderr.isatty()
        if progress:
            from tqdm.auto import tqdm

            scale = unit == "B"
            self.bar = tqdm(
                total=total,
                desc=desc,
                unit=unit if scale else f" {unit}",
                unit_scale=scale,
                unit_divisor=1000,
                file=sys.stderr,
            )

    @property
    def enabled(self) -> bool:
        return self.bar is not None or self.callback is not None

    def __call__(self, done: int) -> None:
        done += self.base
        if self.callback is not None:
            self.callback(done)
        elif self.bar is not None:
            self.bar.update(done - self.bar.n)

    def hook(self, at: Callable[[int], int] | None = None):
        """What to hand the Rust core (None when off: it then skips the calls); ``at``
        turns the core's number into the amount done (a compressed file's bytes read,
        where the core counts decompressed ones: ``FileSource.core_progress``)."""
        if not self.enabled:
            return None
        return self if at is None else lambda n: self(at(n))

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.bar is not None:
            if exc_type is not None:
                self.bar.leave = False
            self.bar.close()


def check_progress(progress) -> None:
    """A TypeError for anything but None, a bool or a callable."""
    if progress is None or isinstance(progress, bool) or callable(progress):
        return
    raise TypeError(
        f"progress must be None, True, False or a callable, not {type(progress).__name__}"
    )
