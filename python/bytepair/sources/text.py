"""Plain text (and compressed text, and stdin) as documents.

A text holds documents separated by the special tokens — each one a hard boundary,
as training treats them — or by ``doc_separator`` when given; the separators are not
part of any document, and empty documents are dropped. Without separators the whole
text is one document.

A document longer than ``part_chars`` is yielded in parts, so memory stays bounded
on a 100 GB ``.txt.zst`` with no separators, or one line of hundreds of megabytes:
sources yield ``(text, last)`` pairs (``parts()``), ``last`` telling whether the
document ends there. Parts are cut only where no pre-token of the built-in patterns
continues across the point — right after a ``\\n`` between a visible character (not
whitespace, not a control) and a letter or digit, or right before a space that follows
a visible character (the rule the Rust core uses for blocks, ``src/io/chunking.rs``,
asked of the core) — so counting or encoding the parts equals doing it to the whole.
Training turns cutting off for custom patterns.

>>> list(split_documents(iter(["a<|e|>b", "c<|e", "|>"]), ["<|e|>"]))
[('a', True), ('bc', True)]
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from bytepair import _core
from bytepair.sources._stream import ByteStream, decode_utf8, opened
from bytepair.sources.base import FileSource


def last_cut(text: str) -> int:
    """The last offset (in characters) where ``text`` may be cut without changing
    pre-tokenization, or 0.

    >>> last_cut("end.\\nNext one.\\nAnd"), last_cut("end \\nNext"), last_cut("één twee")
    (15, 0, 3)
    """
    return _core.last_pattern_cut(text)


def in_parts(doc: str, part_chars: int | None) -> Iterator[tuple[str, bool]]:
    """A whole document, longer than ``part_chars``, in parts of about that many
    characters cut at ``last_cut`` points (what record sources do with long records),
    each with whether it is the last; a stretch with no cut point stays whole.

    >>> list(in_parts("One.\\nTwo.\\nThree.", 6))
    [('One.\\n', False), ('Two.\\n', False), ('Three.', True)]
    """
    if part_chars is None or len(doc) <= part_chars:
        yield doc, True
        return
    start, window = 0, part_chars
    while len(doc) - start > part_chars:
        cut = last_cut(doc[start : start + window])
        if not cut:
            if start + window >= len(doc):
                break
            window *= 2  # no cut in this stretch: look at twice as much
            continue
        yield doc[start : start + cut], False
        start, window = start + cut, part_chars
    yield doc[start:], True


def split_documents(
    texts: Iterator[str], separators: list[str], part_chars: int | None = None
) -> Iterator[tuple[str, bool]]:
    """Text in pieces -> the documents between separators (longest match first), as
    ``(text, last)``: a document longer than ``part_chars`` comes in several parts."""
    seps = sorted({s for s in separators if s}, key=len, reverse=True)
    pattern = re.compile("|".join(map(re.escape, seps))) if seps else None
    hold = max(map(len, seps), default=1) - 1  # chars that may start an unfinished separator
    held: list[str] = []  # the current document so far, final
    held_chars, next_try = 0, part_chars
    started = False  # some of the current document was yielded already
    tail = ""  # text not yet final: it may begin a separator
    for text in _with_end(texts):
        final = text is None
        window = tail + (text or "")
        limit = len(window) if final else len(window) - hold
        start = 0
        if pattern is not None:
            for m in pattern.finditer(window):
                if m.start() >= limit:
                    break
                held.append(window[start : m.start()])
                doc = "".join(held)
                if doc or started:
                    yield doc, True
                held, held_chars, next_try, started = [], 0, part_chars, False
                start = m.end()
        end = max(start, limit)
        held.append(window[start:end])
        held_chars += end - start
        tail = window[end:]
        if next_try is not None and held_chars >= next_try and not final:
            doc = "".join(held)
            cut = last_cut(doc)
            if cut:
                yield doc[:cut], False
                doc, started = doc[cut:], True
            held, held_chars = [doc], len(doc)
            # No cut in a long stretch: try again only after as much again has come.
            next_try = max(part_chars, 2 * held_chars) if part_chars else None
    doc = "".join(held)
    if doc or started:
        yield doc, True


def _with_end(texts: Iterator[str]) -> Iterator[str | None]:
    yield from texts
    yield None


class TextSource(FileSource):
    """A UTF-8 text file (compressed or not, by content), or ``-`` for stdin."""

    core_kind = True

    @property
    def is_plain_file(self) -> bool:
        """An uncompressed file (which ``encode_file`` and SentencePiece training read by
        path; the core reads compressed ones too, through :meth:`core_input`)."""
        return not self.compressed

    def text_chunks(self) -> Iterator[str]:
        """The whole text in pieces, separators included (what ``encode`` prints the
        ids of, and Python's road splits into documents)."""
        with opened(self.path) as f:
            self._stream = ByteStream(f, self.name)
            yield from decode_utf8(self._stream.chunks(), self.name, self.options.errors)

    def parts(self) -> Iterator[tuple[str, bool]]:
        opts = self.options
        seps = [opts.doc_separator] if opts.doc_separator else list(opts.special_tokens)
        return split_documents(self.text_chunks(), seps, opts.part_chars)
