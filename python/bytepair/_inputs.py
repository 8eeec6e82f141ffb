"""Checking input paths before reading them as UTF-8 text, so that a wrong kind of
input gets an error saying what it is ("is a directory", "looks gzip-compressed")
instead of a misleading one ("invalid UTF-8 at byte offset 1").
"""

from __future__ import annotations

import os
from pathlib import Path

# Leading bytes of formats that are not plain text.
MAGIC: list[tuple[bytes, str]] = [
    (b"\x1f\x8b", "gzip-compressed"),
    (b"\xfd7zXZ\x00", "xz-compressed"),
    (b"(\xb5/\xfd", "zstd-compressed"),
    (b"BZh", "bzip2-compressed"),
    (b"PAR1", "a Parquet file"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x93NUMPY", "a numpy .npy file"),
]


def sniff(path: str | os.PathLike) -> str | None:
    """What a file looks like when it is not plain text ("gzip-compressed", ...), else None."""
    with open(path, "rb") as f:
        head = f.read(8)
    for magic, kind in MAGIC:
        if head.startswith(magic):
            return kind
    return None


def check_text_file(path: str | os.PathLike) -> Path:
    """The path, if it is a readable file of text; else an error saying what it is."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, not a text file")
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file")
    kind = sniff(path)
    if kind is not None:
        what = f"looks {kind}" if kind.endswith("compressed") else f"is {kind}"
        raise ValueError(f"{path}: {what}, not plain UTF-8 text; convert it to text first")
    return path
