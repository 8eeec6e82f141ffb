"""One writer per shard folder: a lock file, ``.bytepair-writer.lock``, held with
``flock`` while a writer has the folder.

Without it, a second ``bytepair encode -o OUT/`` on the same folder removed the first's
temporary files as stale, and the first died. ``flock`` is released by the kernel when
its holder dies however it dies (SIGKILL included), so a lock left by a dead process
never blocks anyone: the file may stay, but nobody holds it. The file records the
holder's pid, for the message a second writer gets; it is removed on release.
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; the folder is not locked
    fcntl = None

LOCK = ".bytepair-writer.lock"


class FolderLock:
    """``acquire()`` or a ``BlockingIOError`` naming the folder and the holder's pid;
    ``release()``."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK
        self._fd: int | None = None

    def acquire(self) -> None:
        if fcntl is None or self._fd is not None:
            return
        # Bounded: each retry means another process removed the file in between.
        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _pid_in(fd)
                os.close(fd)
                who = f" (pid {holder})" if holder else ""
                raise BlockingIOError(
                    f"{self.folder}: another bytepair process{who} is writing shards here; "
                    "wait for it to finish or stop it, then rerun to continue"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            # The holder before us may have removed the file after we opened it: then
            # we hold a lock on a file nobody else will open. Lock the new one instead.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._fd = fd
                return
            os.close(fd)
        raise BlockingIOError(f"{self.folder}: could not lock {LOCK}; try again")

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            # Removed while held, so a waiting opener sees it gone (acquire checks).
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _pid_in(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
