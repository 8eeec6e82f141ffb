"""Streaming: encoding text that arrives in chunks, and decoding ids one at a time.

Encoding: ``encode_chunks`` gives exactly the ids of encoding the joined text, even
where a pre-token or a special token straddles two chunks. The core encodes only the
part of its buffer that later text cannot change (``encode_prefix``) and the rest is
carried over: a tail of at least 64 bytes plus twice the longest special token, or a
whole pre-token that has not ended yet (a run of 10 MB of "a" is one pre-token: BPE
merges it whole, as ``encode`` does).

Linear time: the carried text is handed to the core again only once at least as much
new text has come after it, so however long an unfinished pre-token grows, each
character is scanned a bounded number of times (at most about three), not once per
chunk.

Decoding: :class:`StreamDecoder` holds back the bytes of a UTF-8 character until it is
complete (and ids whose text a later id can change, ``model.open_tail``), so a model's
output can be printed token by token.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator


def encode_chunks(
    encode_prefix: Callable[[str, bool, bool, bool], tuple[list[int], int]],
    iterable: Iterable[str],
) -> Iterator[list[int]]:
    """A list of ids per input chunk that completes some text (chunks that only extend
    an unfinished pre-token give none); together, the ids of ``"".join(iterable)``.

    ``encode_prefix(text, first, last, starts)`` is the model's (``core.encode_prefix``
    with the call's special-token policy): the ids of the part of ``text`` later text
    cannot change (all of it when ``last``), and how many characters that part is; the
    model's BOS comes with the ``first`` call's ids, its EOS with the ``last`` call's;
    ``starts`` while no call has consumed any text (a SentencePiece model's dummy
    prefix goes on the text's start only)."""
    first = starts = True
    held: list[str] = []  # text not encoded yet: the carried rest, then new chunks
    held_chars = 0
    rest_chars = 0  # of which carried over from the last call
    for chunk in iterable:
        if not chunk:
            continue
        held.append(chunk)
        held_chars += len(chunk)
        if held_chars - rest_chars < rest_chars:
            continue  # less new text than carried: wait, rather than rescan the carry
        carry = "".join(held)
        ids, used = encode_prefix(carry, first, False, starts)
        first = False
        starts = starts and used == 0
        if ids:
            yield ids
        rest = carry[used:]
        held, held_chars, rest_chars = [rest], len(rest), len(rest)
    ids, _ = encode_prefix("".join(held), first, True, starts)
    if ids:
        yield ids


class StreamDecoder:
    """Turns token ids into text one id at a time (e.g. while a model generates),
    holding back the bytes of a UTF-8 character until it is complete.

    >>> import bytepair
    >>> dec = StreamDecoder(bytepair.get_encoding("gpt2"))
    >>> dec.step(19567), dec.step(255)
    ('', 'อ')
    """

    def __init__(self, tokenizer, errors: str = "replace") -> None:
        self._model = tokenizer.model
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors=errors)
        # What a token adds can depend on what came before it, until some text has
        # been written (SentencePiece drops the first piece's dummy-prefix space): the
        # ids so far while they wrote nothing, then the last id that wrote something.
        self._context: list[int] = []
        self._wrote = False
        # Ids whose text a later id can still change (``model.open_tail``: under a
        # tokenizer.json's ByteFallback, a run of byte pieces is UTF-8 or U+FFFD per
        # byte as a whole): held back until they are settled or the stream ends.
        self._open: list[int] = []

    def step(self, token: int) -> str:
        """Adds one token; returns the text completed by it (maybe empty)."""
        ids = [*self._context, *self._open, token]
        surfaces = self._model.surfaces(ids)
        settled = len(ids) - self._model.open_tail(ids)
        done = surfaces[len(self._context) : settled]
        writers = [n for n in range(len(self._context), settled) if surfaces[n]]
        if writers:
            self._context, self._wrote = [ids[writers[-1]]], True
        elif not self._wrote:
            self._context = ids[:settled]
        self._open = ids[settled:]
        return self._decoder.decode(b"".join(done))

    def flush(self) -> str:
        """Ends the stream: held-back ids give their text, and bytes of an unfinished
        character come out as U+FFFD."""
        held = b""
        if self._open:
            ids = [*self._context, *self._open]
            held = b"".join(self._model.surfaces(ids)[len(self._context) :])
            self._open = []
        return self._decoder.decode(held, final=True)


def decode_stream(tok, ids: Iterable[int], errors: str = "replace") -> Iterator[str]:
    """Yields text as soon as its UTF-8 is complete (see ``Tokenizer.decode_stream``)."""
    decoder = StreamDecoder(tok, errors)
    for i in ids:
        text = decoder.step(i)
        if text:
            yield text
    text = decoder.flush()
    if text:
        yield text
