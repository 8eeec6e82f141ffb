"""Token-id files for LM training: a text file encoded to a ``.bin`` (raw
little-endian uint16/uint32, what nanoGPT's ``np.memmap`` reads) or ``.npy`` file.

The core reads the file in blocks cut where no pre-token can continue, encodes them
on all cores and writes finished blocks in order (``src/io/shards.rs``), so memory is
bounded and the ids are exactly those of encoding the whole text.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bytepair._files import check_writable, temporary_output
from bytepair._inputs import check_text_file
from bytepair._progress import Progress, check_progress
from bytepair.specials import resolve

if TYPE_CHECKING:  # numpy is imported on first use: `import bytepair` stays quick
    import numpy as np

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


def npy_layout(path: Path, f=None) -> tuple[np.dtype, tuple, bool, int]:
    """A ``.npy`` file's dtype, shape, Fortran order and header size, from its header
    alone (read from ``f`` when given, left at the data); ValueError naming the file
    when it is not a readable ``.npy``."""
    import numpy as np

    try:
        with contextlib.nullcontext(f) if f is not None else open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            return dtype, shape, fortran, f.tell()
    except (ValueError, SyntaxError, OSError, EOFError) as e:
        raise ValueError(f"{path}: not a readable .npy file ({e})") from None


def id_width(tok) -> int:
    """Bytes per id in a shard: 2 when every id fits in uint16, else 4."""
    return 2 if tok.n_vocab <= 1 << 16 else 4


#: How many bytes of a file the core reads at a time when encoding a file or training
#: on one (None: the core's default). A smaller block saves no memory worth having
#: and costs speed; tests set it small to put block boundaries inside small files.
BLOCK_BYTES: int | None = None


#: Bytes of a JSON Lines file the core reads and encodes at a time (whole lines).
JSONL_BLOCK_BYTES = 3 << 20


def block_kwargs() -> dict:
    """The core's ``block_bytes`` argument, when :data:`BLOCK_BYTES` is set."""
    return {} if BLOCK_BYTES is None else {"block_bytes": BLOCK_BYTES}


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
    from bytepair.options import threads as checked_threads

    check_progress(progress)
    src = check_text_file(src)
    dst = check_writable(dst, inputs=[src])
    fmt = format or ("npy" if dst.suffix == ".npy" else "bin")
    if fmt not in ("bin", "npy"):
        raise ValueError(f"format must be 'bin' or 'npy', not {fmt!r}")
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
    threads = checked_threads(num_threads)
    width = id_width(tok)
    allowed, disallowed = _file_specials(tok, allowed_special, disallowed_special)
    size = src.stat().st_size
    with (
        Progress(progress, total=size, desc="encoding") as bar,
        temporary_output(dst) as tmp,
    ):
        if fmt == "npy":
            with _writing(tmp, dst):
                Path(tmp).write_bytes(bytes(NPY_HEADER_BYTES))
        try:
            count = tok.model.core.encode_file(
                str(src),
                tmp,
                width,
                allowed,
                disallowed,
                errors,
                threads,
                bar.hook(),
                **block_kwargs(),
            )
        except OSError as e:
            raise _blaming(e, tmp, dst) from None
        if fmt == "npy":
            with _writing(tmp, dst), open(tmp, "r+b") as f:
                f.write(npy_header("<u2" if width == 2 else "<u4", count))
    return count


def _blaming(e: OSError, tmp: str, dst: Path) -> OSError:
    """An error writing our temporary file, told as one writing ``dst`` (the core names
    the file it failed on: the temporary one when the output could not be written)."""
    if e.filename == tmp or (e.filename is None and e.errno is not None):
        strerror = os.strerror(e.errno) if e.errno else e.strerror
        return OSError(e.errno, f"cannot write the output ({strerror})", str(dst))
    return e


@contextlib.contextmanager
def _writing(tmp: str, dst: Path):
    try:
        yield
    except OSError as e:
        raise _blaming(e, tmp, dst) from None


def encode_documents(
    tok,
    corpus,
    dst: str | os.PathLike,
    *,
    format: Literal["bin", "npy"] | None = None,
    allowed_special=frozenset(),
    disallowed_special="all",
    num_threads: int | None = None,
    progress=None,
) -> int:
    """Encodes a corpus (``bytepair.sources.open_sources``) into a file of ids, as
    ``bytepair count`` reads it: a text source whole, special tokens and all; a record
    source (JSON Lines, Parquet) record by record, the ids of each record's text one
    after another. Returns the number of tokens. What :func:`encode_file` does for one
    plain text file, for every other input. (No numpy: the core narrows the ids.)"""
    from bytepair.options import threads as checked_threads
    from bytepair.sources.text import TextSource

    check_progress(progress)
    dst = Path(dst)
    fmt = format or ("npy" if dst.suffix == ".npy" else "bin")
    if fmt not in ("bin", "npy"):
        raise ValueError(f"format must be 'bin' or 'npy', not {fmt!r}")
    threads = checked_threads(num_threads)
    width = id_width(tok)
    kwargs = {"allowed_special": allowed_special, "disallowed_special": disallowed_special}
    sizes = [src.size for src in corpus.sources]
    total = sum(sizes) if None not in sizes else None
    count = 0
    with (
        Progress(progress, total=total, desc="encoding") as bar,
        temporary_output(dst) as tmp,
        _writing(tmp, dst),
        open(tmp, "wb") as out,
    ):
        if fmt == "npy":
            out.write(bytes(NPY_HEADER_BYTES))
        done = 0
        for src in corpus.sources:
            if isinstance(src, TextSource):
                # The core's file pipeline appends the text's ids to the file itself.
                out.flush()
                at = bar.hook(at=lambda end, src=src, done=done: done + src.core_progress(end))
                count += text_tokens(tok, src, tmp, width, threads, kwargs, at)
                out.seek(0, os.SEEK_END)
            else:
                for ids in _source_ids(tok, src, threads, kwargs, width):
                    out.write(ids)
                    count += len(ids)
                    bar(done + src.consumed)
            done += src.size or src.consumed
        if fmt == "npy":
            out.seek(0)
            out.write(npy_header("<u2" if width == 2 else "<u4", count))
    corpus.skips.report()
    return count


def _file_specials(
    tok, allowed_special=frozenset(), disallowed_special="all"
) -> tuple[list[str], list[str]]:
    """The special tokens the core's file pipeline encodes as specials and those it
    refuses (the tokenizer's own only), from ``encode``'s arguments."""
    allowed, disallowed = resolve(allowed_special, disallowed_special, tok.special_tokens)
    return allowed, sorted(set(disallowed) & set(tok.special_tokens))


def text_tokens(tok, src, out_path: str | None, width: int, threads: int, kwargs: dict, progress):
    """A text source (a file, compressed or not, or stdin) encoded whole, as
    ``tok.encode(text, **kwargs)``, by the core's file pipeline on ``threads`` threads:
    its ids (``width`` bytes each) appended to ``out_path``, or only counted (None).
    Returns the number of tokens; ``progress`` is the core's hook (or None)."""
    allowed, disallowed = _file_specials(tok, **kwargs)
    with src.core_input() or contextlib.nullcontext() as chunks:
        return tok.model.core.encode_file(
            src.name,
            out_path,
            width,
            allowed,
            disallowed,
            src.options.errors,
            threads,
            progress,
            chunks=chunks,
            **block_kwargs(),
        )


def _source_ids(tok, src, threads: int, kwargs: dict, width: int):
    """A record source's ids in pieces, ``width`` bytes each (memoryviews cast to "H" or
    "I"): records in batches, a JSON Lines file's records by the core (which hands
    Python only the lines it cannot be sure of, as for shard folders:
    ``JsonlSource.read_line``; a compressed file's bytes decompressed here). (A text
    source is :func:`text_tokens`'.)"""
    from bytepair.runners.local import core_batches
    from bytepair.shards.writer import ID_FORMATS, le_ids
    from bytepair.sources.jsonl import JsonlSource

    core = tok.model.core
    if type(src) is JsonlSource and src.core_reads:
        allowed, disallowed = resolve(
            kwargs["allowed_special"], kwargs["disallowed_special"], tok.special_tokens
        )
        blocks = {"block_bytes": JSONL_BLOCK_BYTES, "first_doc": 0, "width": width}
        with core_batches(core, src, allowed, disallowed, threads, **blocks) as batches:
            for ids, *_, end in batches:
                src._done = end  # a compressed file's progress is its stream's
                yield memoryview(ids).cast(ID_FORMATS[width])
        return
    batch: list[str] = []
    size = 0
    for doc in src.documents():
        batch.append(doc)
        size += len(doc)
        if size >= 1 << 20:
            yield le_ids(_flat_ids(tok, batch, threads, kwargs), width)
            batch, size = [], 0
    if batch:
        yield le_ids(_flat_ids(tok, batch, threads, kwargs), width)


def _flat_ids(tok, batch: list[str], threads: int, kwargs: dict) -> memoryview:
    """The batch's ids one after another: the core's uint32 buffer, as it is."""
    flat = tok._encode_batch_flat(
        batch, threads, kwargs["allowed_special"], kwargs["disallowed_special"]
    )
    return flat[0]
