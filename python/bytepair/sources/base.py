"""The document-iterator protocol every source kind follows, and the options they share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bytepair.sources._records import Skips


@dataclass(frozen=True)
class Options:
    """How inputs are read into documents (the keyword arguments of ``open_sources``)."""

    text_field: str = "text"
    doc_separator: str | None = None
    special_tokens: tuple[str, ...] = ()
    errors: str = "strict"
    # Documents (text, JSON Lines and Parquet records) longer than this are yielded in
    # parts cut where the built-in patterns cannot continue a pre-token (see text.py):
    # training counts the parts on all cores; None: never cut (encoding, custom patterns).
    part_chars: int | None = 1 << 20
    skips: Skips = field(default_factory=lambda: Skips(skip=False))

    @property
    def field_path(self) -> list[str]:
        return self.text_field.split(".")


class Source(Protocol):
    """One input: it yields documents and names itself in errors."""

    name: str
    # Bytes on disk, when known (for progress); bytes read so far.
    size: int | None
    consumed: int

    def parts(self) -> Iterator[tuple[str, bool]]:
        """The documents as ``(text, last)``: a document longer than
        ``options.part_chars`` comes in parts, ``last`` True on its final one."""
        ...

    def documents(self) -> Iterator[str]:
        """The texts of ``parts()``: whole documents, or parts of long ones cut where
        pre-tokenization does not change (what training counts)."""
        ...


def texts_of(parts: Iterator[tuple[str, bool]]) -> Iterator[str]:
    for text, _ in parts:
        yield text


class FileSource:
    """What sources read from a file (or ``-``, stdin) share: the name used in errors,
    the size on disk, and the raw bytes read so far (of the stream, once opened)."""

    def __init__(self, path: str | Path, options: Options) -> None:
        self.path = path
        self.options = options
        self.name = "<stdin>" if path == "-" else str(path)
        self.size = None if path == "-" else Path(path).stat().st_size
        self._stream = None  # a _stream.ByteStream, while reading
        self._done = 0  # bytes read, for sources that read without a ByteStream

    @property
    def compressed(self) -> bool:
        """A compressed file (by content); stdin counts as compressed: it cannot be
        cut into byte ranges either."""
        if self.path == "-":
            return True
        from bytepair.sources._stream import ByteStream

        with open(self.path, "rb") as f:
            return ByteStream(f, self.name).compression is not None

    @property
    def consumed(self) -> int:
        return self._stream.consumed if self._stream is not None else self._done

    #: Does the Rust core read this kind of file itself (text and JSON Lines files:
    #: a plain one from its path, a compressed one and stdin through
    #: :meth:`core_input`)?
    core_kind = False

    @property
    def core_reads(self) -> bool:
        """Will the Rust core read this source itself: a file or stdin of a kind it
        reads (:attr:`core_kind`). The core names it as :attr:`name` in errors."""
        return self.core_kind

    def core_input(self):
        """What the core reads this file through: None for a plain file (it opens the
        path), else a :class:`~bytepair.sources._stream.Pieces` of its decompressed
        bytes (stdin's, decompressed if compressed), to close when done; ``consumed``
        then counts the compressed bytes read."""
        if not self.compressed:
            return None
        from bytepair.sources._stream import Pieces

        pieces = Pieces(self.path, self.name)
        self._stream = pieces.stream
        return pieces

    def core_progress(self, end: int) -> int:
        """Bytes of the file done when the core has read up to ``end`` of its (plain or
        decompressed) bytes: for a compressed file, the compressed bytes read so far."""
        return self._stream.consumed if self._stream is not None else end

    def parts(self) -> Iterator[tuple[str, bool]]:
        raise NotImplementedError

    def documents(self) -> Iterator[str]:
        return texts_of(self.parts())
