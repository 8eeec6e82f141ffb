"""Corpora as they really are: documents from text files, compressed files, JSON Lines,
Parquet, folders, stdin and Hugging Face ``datasets`` objects, through one protocol.

A *source* (``base.Source``) is one input: it yields documents (str) and names
itself in errors. :func:`open_sources` turns any mix of inputs into a
:class:`Corpus`, which iterates over the documents of all of them in order.

One module per kind (``text``, ``jsonl``, ``parquet``, ``hf_datasets``); which one
reads a file is decided here (``kind_of``): compression by content, then the suffix
under any compression suffix (``x.jsonl.zst`` is JSON Lines); Parquet by content too.
Everything else is text.

>>> docs = open_sources(["corpus.txt", "more/", "web.jsonl.zst"],
...                     special_tokens=["<|endoftext|>"])  # doctest: +SKIP
>>> for doc in docs: ...  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from bytepair._inputs import sniff
from bytepair.sources import jsonl, parquet
from bytepair.sources._records import Skips
from bytepair.sources.base import Options, Source
from bytepair.sources.hf_datasets import DatasetSource, is_dataset
from bytepair.sources.jsonl import JsonlSource
from bytepair.sources.parquet import ParquetSource
from bytepair.sources.text import TextSource

__all__ = ["Corpus", "Options", "Source", "is_dataset", "kind_of", "open_sources", "part_chars_for"]

# The file kinds, by the suffix under any compression suffix.
KINDS = {"text": TextSource, "jsonl": JsonlSource, "parquet": ParquetSource}
_BY_SUFFIX = {
    **dict.fromkeys(jsonl.SUFFIXES, "jsonl"),
    **dict.fromkeys(parquet.SUFFIXES, "parquet"),
}
_COMPRESSION_SUFFIXES = (".gz", ".xz", ".zst", ".zstd", ".bz2")


def kind_of(path: str | os.PathLike) -> str:
    """ "text", "jsonl" or "parquet" for a file; an error for kinds not read here.

    >>> kind_of("tests/data/corpus.en")
    'text'
    """
    what = sniff(path)
    if what == "a Parquet file":
        return "parquet"
    if what is not None and not what.endswith("compressed"):
        raise ValueError(f"{path}: is {what}, not a corpus bytepair reads; unpack or convert it")
    suffixes = [s.lower() for s in Path(path).suffixes]
    while suffixes and suffixes[-1] in _COMPRESSION_SUFFIXES:
        suffixes.pop()
    return _BY_SUFFIX.get(suffixes[-1], "text") if suffixes else "text"


def _files(folder: Path, glob: str | None) -> list[Path]:
    """A folder's files, recursively, in sorted order; hidden files and folders skipped."""
    found = [
        p
        for p in folder.rglob(glob or "*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    ]
    if not found:
        matching = f" matching {glob!r}" if glob else ""
        raise FileNotFoundError(f"{folder}: no files{matching} in this folder")
    return sorted(found, key=lambda p: p.relative_to(folder).parts)


def _open(item: object, glob: str | None, options: Options) -> Iterator[Source]:
    if is_dataset(item):
        yield DatasetSource(item, options)
        return
    if not isinstance(item, (str, os.PathLike)):
        raise TypeError(
            f"an input is a {type(item).__name__}; expected a path, '-' for stdin, "
            "or a datasets object"
        )
    if str(item) == "-":
        yield TextSource("-", options)
        return
    path = Path(item)
    if path.is_dir():
        for p in _files(path, glob):
            yield KINDS[kind_of(p)](p, options)
        return
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file")
    yield KINDS[kind_of(path)](path, options)


class Corpus:
    """Documents from several sources, in order; bad records skipped (when asked) are
    reported, as a warning, once all have been read."""

    def __init__(self, sources: list[Source], skips: Skips) -> None:
        self.sources = sources
        self.skips = skips

    @property
    def size(self) -> int | None:
        """Bytes on disk of all sources, if all are files."""
        sizes = [s.size for s in self.sources]
        return None if None in sizes else sum(sizes)

    def __iter__(self) -> Iterator[str]:
        for source in self.sources:
            yield from source.documents()
        self.skips.report()

    def parts(self) -> Iterator[tuple[str, bool]]:
        """The documents as ``(text, last)`` pairs (``Source.parts``)."""
        for source in self.sources:
            yield from source.parts()
        self.skips.report()


def part_chars_for(tok) -> int | None:
    """``part_chars`` for documents a tokenizer will encode: long documents in parts
    when cutting them cannot change its ids (a built-in pattern, no special token
    spanning a newline, no normalizer acting at a text's edges); None (documents
    whole) otherwise, e.g. SentencePiece (whose later parts the core alone encodes
    without the dummy prefix: ``runners.local.plain_files``).

    >>> import bytepair
    >>> part_chars_for(bytepair.get_encoding("gpt2")) == Options.part_chars
    True
    """
    from bytepair.runners.plan import can_cut

    cuttable = can_cut(getattr(tok, "pattern", None), list(tok.special_tokens))
    cuttable = cuttable and tok.model.keeps_text_cuts
    return Options.part_chars if cuttable else None


def open_sources(
    inputs: object,
    *,
    text_field: str = "text",
    glob: str | None = None,
    doc_separator: str | None = None,
    special_tokens: Iterable[str] = (),
    skip_bad_records: bool = False,
    errors: str = "strict",
    part_chars: int | None = Options.part_chars,
) -> Corpus:
    """Any mix of inputs as one iterable of documents (see the module docs).

    ``inputs`` is a path, ``-`` (stdin), a datasets object, ``(DatasetDict, split)``, or
    a list of these. Text is split into documents at ``special_tokens`` (or at
    ``doc_separator``); JSON Lines, Parquet and datasets give one document per record,
    the string at ``text_field``. Folders are read recursively in sorted order (only
    files matching ``glob``, if given). Inputs are checked now; files are read when
    iterated.
    """
    if isinstance(inputs, (str, os.PathLike)) or is_dataset(inputs):
        inputs = [inputs]
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', not {errors!r}")
    if doc_separator == "":
        raise ValueError("doc_separator must not be empty")
    options = Options(
        text_field=text_field,
        doc_separator=doc_separator,
        special_tokens=tuple(special_tokens),
        errors=errors,
        part_chars=part_chars,
        skips=Skips(skip=skip_bad_records),
    )
    sources = [s for item in inputs for s in _open(item, glob, options)]
    return Corpus(sources, options.skips)
