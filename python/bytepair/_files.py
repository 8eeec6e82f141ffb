"""Writing output files safely: through a temporary file renamed into place, never
over an input, and with nothing left behind when a run fails or is interrupted.

Every writer in bytepair goes through :func:`temporary_output` (or
:func:`atomic_write`, its one-shot form), so the promise "no partial or temp file is
left behind" is kept in one place:

- the temporary file sits beside the destination (a rename is atomic only within one
  file system) and is removed on any exception, KeyboardInterrupt included;
- the CLI turns SIGTERM into an exception (``cli.main``), so ``kill`` is covered too;
- :func:`check_writable` runs before long work starts, so a read-only folder fails in
  a second, not after an hour of training, and the error names the user's path, not
  our temporary name.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path


def publish(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Renames a finished temporary file into place, with the permissions a newly
    created file gets (mkstemp makes it private: 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


def check_writable(path: str | os.PathLike, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Fails early, naming ``path``, if it cannot be written or is one of ``inputs``.

    >>> check_writable("/nonexistent/x.bin")
    Traceback (most recent call last):
    ...
    FileNotFoundError: /nonexistent/x.bin: the folder /nonexistent does not exist
    """
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"{path}: the folder {folder} does not exist")
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; give a file name")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{path}: the folder {folder} is not writable")
    if path.exists():
        for src in inputs:
            try:
                same = os.path.samefile(src, path)
            except OSError:
                continue
            if same:
                raise ValueError(
                    f"{path}: is also an input; refusing to overwrite it (choose another output)"
                )
    return path


def temporary_name(path: str | os.PathLike) -> str:
    """The name of a new temporary file beside ``path`` (``.NAME.xxxxxxxx.tmp``): a name
    is chosen before its file exists, so that an interrupt at any moment leaves the
    caller a name to remove. Create it with :func:`create_exclusive`.

    >>> temporary_name("/data/out.bin").startswith("/data/.out.bin.")
    True
    """
    path = Path(path)
    # os.urandom is what secrets.token_hex reads, without importing secrets (and hmac,
    # hashlib) for it: 11 ms of every first write.
    return str(path.parent / f".{path.name}.{os.urandom(4).hex()}.tmp")


def create_exclusive(tmp: str) -> int:
    """Creates ``tmp`` (a :func:`temporary_name`), private, failing if it exists: an fd."""
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)


@contextlib.contextmanager
def temporary_output(path: str | os.PathLike) -> Iterator[str]:
    """Yields the name of a temporary file beside ``path``; on success it is renamed
    to ``path``, on any exception (KeyboardInterrupt, SystemExit included) removed.

    Errors from the file system name ``path``, not the temporary name.
    """
    path = Path(path)
    tmp = temporary_name(path)
    try:
        try:
            os.close(create_exclusive(tmp))
        except OSError as e:
            raise type(e)(e.errno, f"{path}: cannot write here ({e.strerror})") from None
        yield tmp
        publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Writes data to path via a temporary file in the same folder and a rename."""
    with temporary_output(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def check_writable_folder(path: str | os.PathLike) -> Path:
    """Fails early, naming ``path``, if a folder cannot be created or written there."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise NotADirectoryError(f"{path}: exists and is not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"{path}: the folder is not writable")
        return path
    parent = path.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"{path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"{path}: cannot create it, {parent} is not writable")
    return path


def check_output(path: str | os.PathLike, is_folder: bool, inputs=()) -> Path:
    """:func:`check_writable_folder` or :func:`check_writable`."""
    return check_writable_folder(path) if is_folder else check_writable(path, inputs)
