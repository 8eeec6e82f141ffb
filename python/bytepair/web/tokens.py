"""Encodings as the page shows them: each token with its bytes, its place in the text
and the merge that made it; and where two tokenizers split the same text differently.

Everything here is plain data (dicts, lists, ints, strings) ready for JSON.

>>> import bytepair
>>> view = encode_view(bytepair.get_encoding("cl100k_base"), "hello world")
>>> view["ids"], [(t["text"], t["start"], t["end"]) for t in view["tokens"]]
([15339, 1917], [('hello', 0, 5), (' world', 5, 11)])
"""

from __future__ import annotations

import threading

_merge_lock = threading.Lock()


# Every byte value that starts a UTF-8 character (all but the continuation bytes 10xxxxxx).
_STARTS = bytes(b for b in range(256) if b & 0xC0 != 0x80)


class CharSpans:
    """Character offsets of consecutive byte spans of ``text``'s UTF-8, widened to whole
    characters: a token that splits a character covers that character (so the pieces
    of a split character overlap). One pass over the bytes, in the order asked, with no
    table per character (a 10 MB text would need one of 10 million ints).

    >>> spans = CharSpans("a中b")  # bytes: a, e4 b8 ad, b
    >>> [spans.next(n) for n in (1, 2, 1, 1)]
    [(0, 1), (1, 2), (1, 2), (2, 3)]
    """

    def __init__(self, text: str):
        self.data = text.encode("utf-8", "surrogatepass")
        self.at = 0  # the byte offset where the next span begins
        self.chars = 0  # the characters that start before it

    def next(self, size: int) -> tuple[int, int]:
        """The span of the next ``size`` bytes, as (first character, end character)."""
        inside = self.at < len(self.data) and self.data[self.at] not in _STARTS
        start = self.chars - inside  # a span beginning mid-character covers that character
        piece = self.data[self.at : self.at + size]
        self.chars += len(piece) - len(piece.translate(None, _STARTS))
        self.at += size
        return start, self.chars


def _merge_table(tok) -> dict[bytes, tuple[bytes, bytes]]:
    """token bytes -> the pair of tokens merged into it (the earliest merge wins)."""
    with _merge_lock:  # built once per tokenizer, kept beside its other lookup tables
        table = tok.__dict__.get("_merged_from")
        if table is None:
            merges = tok.model.merges or []
            table = {a + b: (a, b) for a, b in reversed(merges)}
            tok.__dict__["_merged_from"] = table
        return table


def merge_of(tok, token: bytes) -> dict | None:
    """The merge that made a token, ``{"left": id, "right": id, "left_text", "right_text"}``;
    None for single bytes, special tokens and models without merges."""
    pair = _merge_table(tok).get(token)
    if pair is None:
        return None
    ids = tok.model.ids_of_bytes
    left, right = pair
    return {
        "left": ids.get(left),
        "right": ids.get(right),
        "left_text": left.decode("utf-8", "replace"),
        "right_text": right.decode("utf-8", "replace"),
    }


def encode_view(tok, text: str, **special_options) -> dict:
    """``tok.encode(text, ...)`` with what the page shows for each token:

    ``{"ids", "count", "chars", "bytes", "tokens": [{"id", "bytes_hex", "text",
    "partial", "special", "start", "end", "byte_start", "byte_end", "merge"}]}``

    ``start``/``end`` are character offsets into ``text`` (a token that splits a
    character covers all of it), ``byte_start``/``byte_end`` UTF-8 byte offsets;
    ``partial`` marks tokens whose bytes are not whole UTF-8 characters (``text`` then
    holds U+FFFD where they fall short).
    """
    ids = tok.encode(text, **special_options)
    special_ids = set(tok.special_tokens.values())
    char_spans = CharSpans(text)
    # Where each token falls in the text: its bytes, or (SentencePiece) what it adds
    # to the decoded text, which drops the dummy-prefix space. The BOS/EOS the model
    # puts around every text (its frame) stand for no text: empty, and left out of the
    # decoding (a tokenizer.json's decoder writes "<s>" and keeps the space after it).
    before, after = tok.model.core.frame()
    inner = ids[len(before) : len(ids) - len(after)]
    placed = [b""] * len(before) + tok.model.surfaces(inner) + [b""] * len(after)
    tokens, at = [], 0
    for i, surface in zip(ids, placed):
        data = tok.decode_single_token_bytes(i)
        start, end = char_spans.next(len(surface))
        try:
            shown, partial = data.decode("utf-8"), False
        except UnicodeDecodeError:
            shown, partial = data.decode("utf-8", "replace"), True
        special = i in special_ids
        tokens.append(
            {
                "id": i,
                "bytes_hex": data.hex(" "),
                "text": shown,
                "partial": partial,
                "special": special,
                "start": start,
                "end": end,
                "byte_start": at,
                "byte_end": at + len(surface),
                "merge": None if special else merge_of(tok, data),
            }
        )
        at += len(surface)
    return {"ids": ids, "count": len(ids), "chars": len(text), "bytes": at, "tokens": tokens}


def spans(view: dict) -> set[tuple[int, int]]:
    """The tokens of a view as byte spans ``(start, end)``."""
    return {(t["byte_start"], t["byte_end"]) for t in view["tokens"]}


def mark_differences(views: list[dict]) -> None:
    """Marks each token ``"differs": True`` where the tokenizers split differently (and
    counts them in ``view["differing"]``). Token boundaries are byte offsets; a token
    is the same everywhere when every other view has a token with the same two
    boundaries, so a boundary present in one view and not in another marks the tokens
    on both sides of it, in both views.

    ``[ab][c]`` against ``[a][bc]``: all four tokens differ; ``[a][bc]`` against
    ``[a][b][c]``: ``[a]`` is the same in both, the rest differ.
    """
    common = set.intersection(*(spans(v) for v in views)) if views else set()
    for view in views:
        for t in view["tokens"]:
            t["differs"] = (t["byte_start"], t["byte_end"]) not in common
        view["differing"] = sum(t["differs"] for t in view["tokens"])
