"""``bytepair decode``: token ids (text, ``.bin`` or ``.npy``) back to text, streamed in
bounded memory."""

from __future__ import annotations

import codecs
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from bytepair.cli._common import add_tokenizer_options
from bytepair.shards.one_file import npy_layout

if TYPE_CHECKING:  # numpy is imported when ids are read: every command loads this module
    import numpy as np

# Ids decoded per step when reading a .bin/.npy (bounded memory for any file size).
CHUNK_IDS = 1 << 20


def add_parser(sub) -> None:
    d = sub.add_parser("decode", help="decode token ids to text")
    add_tokenizer_options(d)
    d.add_argument("file", nargs="?", help="ids as text, .bin or .npy (default: stdin)")
    d.add_argument("-o", "--output", help="write the text here (default: stdout)")
    d.set_defaults(func=run)


def _parse_text_ids(text: str, where: str) -> list[int]:
    ids = []
    for n, word in enumerate(text.replace(",", " ").replace("[", " ").replace("]", " ").split()):
        try:
            ids.append(int(word))
        except ValueError:
            raise ValueError(f"{where}: token #{n} is {word!r}, not an integer id") from None
    return ids


def _npy_ids(p: Path, f) -> tuple[np.dtype, int]:
    """A ``.npy`` file's id dtype and count, from its header (``f`` left at the data)."""
    import numpy as np

    dtype, shape, fortran, _ = npy_layout(p, f)
    if dtype.kind not in "ui" or dtype.hasobject:
        raise ValueError(f"{p}: holds {dtype} values, not integer token ids")
    if fortran and len(shape) > 1:
        raise ValueError(f"{p}: a Fortran-ordered array; save the ids as a 1-D array")
    count = int(np.prod(shape, dtype=np.int64))
    data = p.stat().st_size - f.tell()
    if data < count * dtype.itemsize:
        raise ValueError(
            f"{p}: its header says {count:,} ids ({count * dtype.itemsize:,} bytes), the "
            f"file holds {data:,} bytes after it: truncated"
        )
    return dtype, count


def id_chunks(path: str | None, width: int) -> Iterator:
    """The ids of a file (or stdin) in chunks: numpy arrays of at most ``CHUNK_IDS``
    ids for .bin/.npy, read one chunk at a time (never memory-mapped: mapped pages
    count in the process's memory, so a mapped file's peak grew with its size); one
    list for ids written as text."""
    if path in (None, "-"):
        yield _parse_text_ids(sys.stdin.read(), "<stdin>")
        return
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"{p}: is a directory, not a file of ids")
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file")
    if p.suffix not in (".npy", ".bin"):
        yield _parse_text_ids(p.read_text(encoding="utf-8"), str(p))
        return
    import numpy as np

    with open(p, "rb") as f:
        if p.suffix == ".npy":
            dtype, count = _npy_ids(p, f)
        else:
            size = p.stat().st_size
            if size % width:
                raise ValueError(
                    f"{p}: {size:,} bytes is not a whole number of {width}-byte ids "
                    f"(uint{8 * width}, what this tokenizer writes): truncated, or made by "
                    "another tokenizer?"
                )
            dtype, count = np.dtype(f"<u{width}"), size // width
        while count:
            chunk = np.fromfile(f, dtype=dtype, count=min(count, CHUNK_IDS))
            count -= len(chunk)
            yield chunk


def run(args) -> None:
    from bytepair._files import check_writable, temporary_output
    from bytepair.cli._common import load_tokenizer
    from bytepair.shards import id_width

    tok = load_tokenizer(args)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    chunks = id_chunks(args.file, id_width(tok))
    if args.output is None:
        out = sys.stdout
        for ids in chunks:
            out.write(decoder.decode(tok.decode_bytes(ids)))
        out.write(decoder.decode(b"", final=True))
        out.flush()
        return
    inputs = [] if args.file in (None, "-") else [args.file]
    with temporary_output(check_writable(args.output, inputs)) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as out:
            for ids in chunks:
                out.write(decoder.decode(tok.decode_bytes(ids)))
            out.write(decoder.decode(b"", final=True))
