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
from bisect import bisect_left, bisect_right

_merge_lock = threading.Lock()


def char_starts(text: str) -> list[int]:
    """The byte offset (in UTF-8) at which each character starts, and the total at the end.

    >>> char_starts("aé中")
    [0, 1, 3, 6]
    """
    starts, at = [], 0
    for c in text:
        starts.append(at)
        at += len(c.encode("utf-8", "surrogatepass"))
    starts.append(at)
    return starts


def byte_to_char_span(starts: list[int], begin: int, end: int) -> tuple[int, int]:
    """Character offsets of the bytes ``begin:end``, widened to whole characters: a
    token that splits a character covers that character (so the pieces of a split
    character overlap).

    >>> byte_to_char_span(char_starts("中"), 0, 2), byte_to_char_span(char_starts("中"), 2, 3)
    ((0, 1), (0, 1))
    """
    return bisect_right(starts, begin) - 1, bisect_left(starts, end)


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
    starts = char_starts(text)
    # Where each token falls in the text: its bytes, or (SentencePiece) what it adds
    # to the decoded text, which drops the dummy-prefix space.
    placed = tok.model.surfaces(ids)
    tokens, at = [], 0
    for i, surface in zip(ids, placed):
        data = tok.decode_single_token_bytes(i)
        start, end = byte_to_char_span(starts, at, at + len(surface))
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
