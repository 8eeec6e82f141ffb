"""Bytes from a file or stdin, decompressed when compressed, and decoded as UTF-8.

Compression is recognised by content (the magic bytes in ``bytepair._inputs.MAGIC``),
not by suffix, and undone in a stream: the compressed input is fed to the
decompressor 64 KiB at a time, so neither the file nor its text is ever whole in
memory. Concatenated streams (``cat a.gz b.gz``, multi-frame zstd) are read through.

Errors name the input and where: a corrupt stream names the compressed byte offset
of the 64 KiB piece in which the decompressor noticed it (decompressors read ahead,
so that is as close as they allow); invalid UTF-8 names the decompressed byte offset.
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import lzma
import sys
import zlib
from collections.abc import Callable, Iterator

from bytepair._inputs import MAGIC
from bytepair.sources._extras import require

# The compressed kinds of _inputs.MAGIC, by the word used in its table.
COMPRESSIONS = ("gzip", "xz", "zstd", "bzip2")

_RAW_CHUNK = 64 << 10
# Uncompressed input (stdin) is handed to the core in larger pieces (`Pieces`): a call
# per 64 KiB was a quarter of the time of a shard folder written from a pipe.
_PLAIN_CHUNK = 1 << 20


def compression_of(head: bytes) -> str | None:
    """ "gzip", "xz", "zstd", "bzip2" or None, from a file's first bytes.

    >>> compression_of(b"\\x1f\\x8b\\x08"), compression_of(b"plain text")
    ('gzip', None)
    """
    for magic, kind in MAGIC:
        name = kind.removesuffix("-compressed")
        if head.startswith(magic) and name in COMPRESSIONS:
            return name
    return None


def _decompressor(kind: str) -> Callable[[], object]:
    """A factory of one-stream decompressors (``decompress``, ``eof``, ``unused_data``)."""
    if kind == "gzip":
        return lambda: zlib.decompressobj(wbits=31)
    if kind == "xz":
        return lzma.LZMADecompressor
    if kind == "bzip2":
        return bz2.BZ2Decompressor
    zstd = require("zstandard", "reading .zst files")
    return lambda: zstd.ZstdDecompressor().decompressobj()


def _corrupt_errors(kind: str) -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (zlib.error, lzma.LZMAError, OSError, EOFError)
    if kind == "zstd":
        errors += (require("zstandard", "reading .zst files").ZstdError,)
    return errors


class ByteStream:
    """The bytes of one input, decompressed; ``consumed`` counts the raw bytes read."""

    def __init__(self, f, name: str) -> None:
        self.f = f
        self.name = name
        self.consumed = 0
        self.head = f.read(8)
        self.compression = compression_of(self.head)

    def _raw(self, size: int | None = None) -> Iterator[bytes]:
        # The first piece ends at `size` too, so that offsets are multiples of it.
        size = size or _RAW_CHUNK
        data = self.head + self.f.read(size - len(self.head))
        while data:
            self.consumed += len(data)
            yield data
            data = self.f.read(size)

    def chunks(self, plain: int | None = None) -> Iterator[bytes]:
        """The decompressed bytes, in pieces (of ``plain`` bytes when not compressed)."""
        if self.compression is None:
            yield from self._raw(plain)
            return
        kind = self.compression
        new, errors = _decompressor(kind), _corrupt_errors(kind)
        d, fed = new(), False
        for data in self._raw():
            start = self.consumed - len(data)
            while data:
                try:
                    out = d.decompress(data)
                except errors as e:
                    raise ValueError(
                        f"{self.name}: corrupt {kind} data near compressed byte offset "
                        f"{start} ({e}); the file is damaged or truncated"
                    ) from None
                fed = True
                if out:
                    yield out
                data = b""
                if d.eof:  # another stream may follow this one
                    data, d, fed = d.unused_data, new(), False
        if fed and not d.eof:
            raise ValueError(
                f"{self.name}: truncated {kind} data: the file ends at compressed byte offset "
                f"{self.consumed} before the end of its stream"
            )


@contextlib.contextmanager
def opened(path) -> Iterator:
    """The raw bytes of an input: stdin's for ``"-"`` (left open), else the file's
    (closed on leaving)."""
    if str(path) == "-":
        yield sys.stdin.buffer
        return
    with open(path, "rb") as f:
        yield f


class Pieces:
    """A compressed file's bytes, or stdin's (``path`` ``"-"``, compressed or not), for
    the Rust core to read: each call returns the next decompressed piece, ``b""`` at
    the end. Decompression, and its errors (which name the compressed byte offset),
    are :class:`ByteStream`'s; the core decodes the UTF-8 and reads documents or
    records as it does from a plain file. A context manager: a file is closed on
    leaving it (stdin is left open)."""

    def __init__(self, path, name: str) -> None:
        self._input = contextlib.ExitStack()
        self.stream = ByteStream(self._input.enter_context(opened(path)), name)
        self._chunks = self.stream.chunks(_PLAIN_CHUNK)

    def __call__(self) -> bytes:
        return next(self._chunks, b"")

    def __enter__(self) -> Pieces:
        return self

    def __exit__(self, *exc) -> None:
        self._chunks.close()
        self._input.close()


def decode_utf8(chunks: Iterator[bytes], name: str, errors: str = "strict") -> Iterator[str]:
    """Bytes in pieces as text in pieces; invalid UTF-8 is an error naming the byte
    offset (unless ``errors="replace"``)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    done = 0
    for data in chunks:
        try:
            text = decoder.decode(data)
        except UnicodeDecodeError as e:
            # e.object is the bytes the decoder held back from the last piece + this one
            offset = done - (len(e.object) - len(data)) + e.start
            raise ValueError(
                f"{name}: invalid UTF-8 at byte offset {offset} (byte 0x{e.object[e.start]:02x})"
            ) from None
        done += len(data)
        if text:
            yield text
    try:
        text = decoder.decode(b"", final=True)
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{name}: invalid UTF-8 at byte offset {done - len(e.object) + e.start} "
            "(the text ends inside a character)"
        ) from None
    if text:
        yield text
