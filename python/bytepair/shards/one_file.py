"""Token-id files for LM training: a text file encoded to a ``.bin`` (raw
little-endian uint16/uint32, what nanoGPT's ``np.memmap`` reads) or ``.npy`` file.

The core reads the file in blocks cut where no pre-token can continue, encodes them
on all cores and writes finished blocks in order (``src/io/shards.rs``), so memory is
bounded and the ids are exactly those of encoding the whole text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from bytepair._files import check_writable, temporary_output
from bytepair._inputs import check_text_file
from bytepair._progress import Progress, check_progress

#: A .npy header is written before the ids and filled in after: always this long.
NPY_HEADER_BYTES = 128


def npy_header(dtype: str, count: int) -> bytes:
    """A ``.npy`` (version 1.0) header for a 1-D array, padded to exactly
    NPY_HEADER_BYTES so it can be written before the count is known and filled in after.

    >>> len(npy_header("<u2", 10**12)) == NPY_HEADER_BYTES
    True
    """
    text = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': ({count},), }}"
    body = text.ljust(NPY_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body.encode("latin1")


def id_width(tok) -> int:
    """Bytes per id in a shard: 2 when every id fits in uint16, else 4."""
    return 2 if tok.n_vocab <= 1 << 16 else 4


def _block_kwargs() -> dict:
    # Tests shrink the file read block (BYTEPAIR_BLOCK_BYTES) to exercise block
    # boundaries on small files.
    block = os.environ.get("BYTEPAIR_BLOCK_BYTES")
    return {"block_bytes": int(block)} if block else {}


def encode_file(
    tok,
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    format: Literal["bin", "npy"] | None = None,
    allowed_special=frozenset(),
    disallowed_special="all",
    num_threads: int | None = None,
    errors: str = "strict",
    progress=None,
) -> int:
    """Encodes a UTF-8 text file into a file of token ids and returns how many tokens
    it wrote.

    Ids are little-endian uint16 when every id fits (``n_vocab <= 65536``), else
    uint32: ``.bin`` is the raw array (``np.fromfile(dst, np.uint16)``), ``.npy``
    (``format="npy"`` or the suffix) adds numpy's header. ``num_threads`` threads
    (default: all cores) encode, in bounded memory. ``progress`` as everywhere (None:
    a bar on a terminal; a callable gets the bytes read so far). Output goes to a
    temporary file renamed into place: an error or interrupt leaves nothing behind,
    and the output may not be the input.
    """
    from bytepair.tokenizer import _threads

    check_progress(progress)
    src = check_text_file(src)
    dst = check_writable(dst, inputs=[src])
    fmt = format or ("npy" if dst.suffix == ".npy" else "bin")
    if fmt not in ("bin", "npy"):
        raise ValueError(f"format must be 'bin' or 'npy', not {fmt!r}")
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
    threads = _threads(num_threads)
    width = id_width(tok)
    allowed, disallowed = tok._specials(allowed_special, disallowed_special)
    disallowed = sorted(set(disallowed) & set(tok.special_tokens))
    size = src.stat().st_size
    with (
        Progress(progress, total=size, desc="encoding") as bar,
        temporary_output(dst) as tmp,
    ):
        if fmt == "npy":
            Path(tmp).write_bytes(bytes(NPY_HEADER_BYTES))
        count = tok._core.encode_file(
            str(src),
            tmp,
            width,
            allowed,
            disallowed,
            errors,
            threads,
            bar.hook(),
            **_block_kwargs(),
        )
        if fmt == "npy":
            with open(tmp, "r+b") as f:
                f.write(npy_header("<u2" if width == 2 else "<u4", count))
    return count
