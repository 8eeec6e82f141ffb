"""tiktoken's ``encode_with_unstable``: which tokens of a prompt more text cannot change,
and the candidate encodings of the rest — computed as tiktoken's ``CoreBPE`` computes
them, so code written for tiktoken gets the same answer.

Given the ids of ``text`` (special tokens already encoded as the caller allows):

1. The unstable tail is the last pre-token's tokens (none when the text ends with a
   special token), grown backwards over whitespace-only tokens (cl100k's
   ``\\s*[\\r\\n]+`` can join them with what follows).
2. Completions: every single token whose bytes start with the tail's bytes; for every
   cut of the tail into ``prefix + suffix``, ``prefix + t`` for every token ``t``
   starting with ``suffix``, re-encoded and cut after the tail's length; and when the
   tail ends in a whitespace character, the tail encoded with that character apart.

``"hello fo"`` (cl100k_base) -> ``([15339], [[282, 78], [331], [1458], ...])``.
"""

from __future__ import annotations

from bisect import bisect_left
from weakref import WeakKeyDictionary

from bytepair.models import Model, Unsupported

#: Rust's ``char::is_whitespace`` (Unicode White_Space), which tiktoken tests.
WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def split(
    model: Model, text: str, ids: list[int], allowed: list[str]
) -> tuple[list[int], list[list[int]]]:
    """``(stable, completions)`` for ``text`` whose ids are ``ids`` (see the module)."""
    if model.merges is None and not hasattr(model, "ranks"):
        raise Unsupported(
            "encode_with_unstable is tiktoken's, for byte-level BPE; "
            + model.why_not("a tiktoken-style unstable tail")
        )
    tail = _last_piece_len(model, text, ids, allowed)
    if tail == 0:
        return ids, []
    tail = _with_whitespace_before(model, ids, tail)
    unstable = b"".join(model.token_bytes(i) for i in ids[-tail:])
    stable = ids[:-tail]
    if not unstable:
        return stable, []
    return stable, [list(seq) for seq in sorted(_Completions(model).of(unstable))]


def _last_piece_len(model: Model, text: str, ids: list[int], allowed: list[str]) -> int:
    """How many of ``ids`` the last pre-token gave (0: the text ends with a special)."""
    from bytepair.reference import pretokenize, split_on_special_tokens

    if not text:
        return 0
    last, is_special = split_on_special_tokens(text, allowed)[-1]
    if is_special:
        return 0
    piece = pretokenize(last, model.pattern)[-1].encode("utf-8", "surrogatepass")
    n, size = 0, 0
    while size < len(piece):
        n += 1
        size += len(model.token_bytes(ids[-n]))
    return n


def _with_whitespace_before(model: Model, ids: list[int], tail: int) -> int:
    def all_space(i: int) -> bool:
        return all(b in b" \n\t" for b in model.token_bytes(i))

    if all_space(ids[-tail]):
        while tail < len(ids) and all_space(ids[-tail - 1]):
            tail += 1
    return tail


class _Completions:
    def __init__(self, model: Model) -> None:
        self.model = model
        self.ids_of = model.ids_of_bytes
        self.sorted, self.lengths = _vocabulary(model)

    def starting_with(self, prefix: bytes):
        at = bisect_left(self.sorted, prefix)
        while at < len(self.sorted) and self.sorted[at].startswith(prefix):
            yield self.sorted[at]
            at += 1

    def bpe(self, data: bytes) -> list[int]:
        """tiktoken's ``byte_pair_encode``: the bytes merged as one piece — by the
        merges where the model has them, else by tiktoken's own rule over its ranks."""
        if self.model.merges is None:
            return self.bpe_by_ranks(data)
        from bytepair.reference import bpe

        return [self.ids_of[part] for part in bpe(data, _merge_ranks(self.model))]

    def bpe_by_ranks(self, data: bytes) -> list[int]:
        """tiktoken's ``_byte_pair_merge``: merge the adjacent parts whose concatenation
        has the lowest rank (leftmost first) until no concatenation is a token."""
        ranks = self.ids_of
        parts = [data[i : i + 1] for i in range(len(data))]
        while len(parts) > 1:
            best, at = None, -1
            for i in range(len(parts) - 1):
                rank = ranks.get(parts[i] + parts[i + 1])
                if rank is not None and (best is None or rank < best):
                    best, at = rank, i
            if best is None:
                break
            parts[at : at + 2] = [parts[at] + parts[at + 1]]
        return [ranks[part] for part in parts]

    def encode_all(self, candidates: list[bytes]) -> list[list[int]]:
        """Each candidate encoded as tiktoken encodes it: valid UTF-8 as text (all of
        them in one batch call: a call each was most of the time when ~100K tokens
        start with the suffix, as a space does), other bytes merged as one piece."""
        texts, raw = [], []
        for data in candidates:
            try:
                texts.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                raw.append(data)
        encoded = self.model.core.encode_batch(texts, [], 1, []) if texts else []
        return [*encoded, *map(self.bpe, raw)]

    def cut(self, ids: list[int], size: int) -> tuple[int, ...]:
        """The first of ``ids`` that cover ``size`` bytes."""
        lengths = self.lengths
        if ids and lengths[ids[0]] >= size:
            return (ids[0],)  # most candidates: one token covers the tail
        n, covered = 0, 0
        while n < len(ids) and covered < size:
            covered += lengths[ids[n]]
            n += 1
        return tuple(ids[:n])

    def of(self, unstable: bytes) -> set[tuple[int, ...]]:
        found = {(self.ids_of[t],) for t in self.starting_with(unstable)}
        for cut in range(1, len(unstable)):
            prefix, suffix = unstable[:cut], unstable[cut:]
            candidates = [prefix + t for t in self.starting_with(suffix)]
            found.update(self.cut(ids, len(unstable)) for ids in self.encode_all(candidates))
        if len(unstable) > 1:
            last = _last_char_len(unstable)
            char = unstable[-last:].decode("utf-8", "replace")
            if len(unstable) - last > 0 and char in WHITE_SPACE:
                found.add(tuple(self.bpe(unstable[:-last]) + self.bpe(unstable[-last:])))
        return found


#: Per model: its ordinary tokens' bytes sorted (to find those with a prefix) and each
#: id's length, built once (sorting o200k's 200K tokens took a fifth of a call).
_VOCABULARIES: WeakKeyDictionary = WeakKeyDictionary()


class _Lengths(dict):
    """Token id -> its length in bytes; an id past the ordinary tokens' is looked up."""

    def __init__(self, model: Model, items) -> None:
        super().__init__(items)
        self.model = model

    def __missing__(self, token: int) -> int:
        return len(self.model.token_bytes(token))


def _vocabulary(model: Model) -> tuple[list[bytes], dict[int, int]]:
    try:
        return _VOCABULARIES[model]
    except KeyError:
        pass
    ids_of = model.ids_of_bytes
    built = (sorted(ids_of), _Lengths(model, ((i, len(t)) for t, i in ids_of.items())))
    _VOCABULARIES[model] = built
    return built


#: Per model with merges: each merge's rank, built once (it was built on every call
#: that merged bytes, like the sorted vocabulary before it).
_MERGE_RANKS: WeakKeyDictionary = WeakKeyDictionary()


def _merge_ranks(model: Model) -> dict[tuple[bytes, bytes], int]:
    try:
        return _MERGE_RANKS[model]
    except KeyError:
        ranks = _MERGE_RANKS[model] = {pair: n for n, pair in enumerate(model.merges)}
        return ranks


def _last_char_len(data: bytes) -> int:
    """The length of the last UTF-8 character of ``data`` (1 if it is not valid),
    as ``bstr::decode_last_utf8``."""
    for n in range(1, min(4, len(data)) + 1):
        try:
            data[-n:].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return n
    return 1
