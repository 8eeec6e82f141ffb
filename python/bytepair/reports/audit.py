"""``audit``: candidates for under-trained tokens (after Land & Bartolo 2024, "Fishing
for Magikarp: Automatically Detecting Under-trained Tokens in Large Language Models").

A model learns a token's embedding only from text where the tokenizer produces it.
Tokens it (almost) never produces are where "SolidGoldMagikarp" glitches come from.
Three sources of evidence, each a reason on a candidate:

- the tokenizer alone: tokens no text encodes to (``unreachable``), whose own text the
  pre-tokenizer splits (``split by pattern``), bytes that valid UTF-8 never holds,
  partial UTF-8 characters, the same bytes as a lower id (``duplicate``);
- corpora (ideally the training text): tokens never or rarely produced, and tokens
  ``absorbed`` into later merges — built many times on the way to a longer token, but
  themselves (almost) never the final token, like the parts of " SolidGoldMagikarp";
- an embedding or unembedding matrix: rows close to the rows of known-unused tokens
  (see ``reports.embeddings``).

>>> import bytepair
>>> report = audit(bytepair.get_encoding("gpt2"))
>>> report.by_reason["never in UTF-8"]
13
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from bytepair.reports.corpus import count_tokens
from bytepair.reports.embeddings import load_matrix, unused_distances
from bytepair.reports.reach import unreachable_merges
from bytepair.reports.stats import tokenizer_name
from bytepair.reports.tokens import NEVER_IN_UTF8, printable

# Each reason, most telling first, and what it means.
REASONS = {
    "unreachable": "the merges never build it from its own bytes: no text encodes to it",
    "duplicate": "the same bytes as a lower id, which encoding always picks",
    "never in UTF-8": "holds a byte (C0, C1, F5-FF) that valid UTF-8 never has",
    "split by pattern": "its text alone pre-tokenizes into several pieces; it occurs only inside longer pieces",
    "unused": "never produced on the corpora",
    "absorbed": "built often on the corpora, but almost always merged on into longer tokens",
    "rare": "produced at most THRESHOLD times on the corpora",
    "near unused rows": "its embedding row is among the closest to the rows of unused tokens",
    "partial UTF-8": "not whole characters: it occurs only next to tokens completing them",
}
# Reasons that mean the tokenizer itself never produces the token from text.
NEVER_PRODUCED = ("unreachable", "duplicate", "never in UTF-8")


@dataclass
class Candidate:
    """One token worth a look, and why."""

    id: int
    text: str  # printable form
    hex: str  # its bytes
    reasons: list[str]
    count: int | None = None  # times produced on the corpora
    formed: int | None = None  # times built on the corpora, inside longer tokens included
    absorbed_into: list[int] = field(default_factory=list)  # the longer tokens, most built first
    duplicate_of: int | None = None
    distance: float | None = None  # embedding indicator: cosine distance to unused rows


@dataclass
class Audit:
    tokenizer: str
    vocab_size: int
    corpora: list[str]
    corpus_tokens: int
    threshold: int
    embeddings: str | None
    by_reason: dict[str, int]
    candidates: list[Candidate]
    #: Checks that do not apply to this tokenizer, and why.
    notes: list[str] = field(default_factory=list)

    def with_reason(self, reason: str) -> list[Candidate]:
        """The candidates with this reason, ranked (by distance for embeddings, by how
        often built for absorbed tokens, else by id)."""
        found = [c for c in self.candidates if reason in c.reasons]
        if reason == "near unused rows":
            return sorted(found, key=lambda c: (c.distance, c.id))
        if reason == "absorbed":
            return sorted(found, key=lambda c: (-c.formed, c.id))
        return found

    def to_dict(self) -> dict:
        return asdict(self)


def audit(
    tok,
    corpora: Iterable[str | os.PathLike] = (),
    embeddings: str | os.PathLike | np.ndarray | None = None,
    threshold: int = 2,
    *,
    tensor: str | None = None,
    unused_ids: Iterable[int] = (),
    embedding_top: int = 100,
    num_threads: int | None = None,
) -> Audit:
    """Candidates for under-trained tokens, each with its reasons (see ``REASONS``).

    ``threshold``: a token produced at most this many times on the corpora is rare;
    absorbed tokens are rare ones built more than that many times. ``embeddings``: a
    matrix (or a ``.npy`` / ``.safetensors`` path, ``tensor`` naming the tensor) with a
    row per id; the ``embedding_top`` rows nearest the known-unused rows are flagged.
    Known unused: tokens the tokenizer never produces, tokens the corpora never
    produce, ``unused_ids``, and rows past the tokenizer's ids (padding).
    """
    corpora = [str(p) for p in corpora]
    vocab = tok.model.vocab
    specials = set(tok.special_tokens.values())
    ordinary = {i: t for i, t in vocab.items() if i not in specials}
    found: dict[int, Candidate] = {}

    def flag(i: int, reason: str) -> Candidate:
        c = found.get(i)
        if c is None:
            token = ordinary[i]
            c = found[i] = Candidate(i, printable(token), token.hex(), [])
        c.reasons.append(reason)
        return c

    lowest = _lowest_ids(ordinary, tok)
    never = _tokenizer_reasons(tok, ordinary, lowest, flag)

    counts = None
    total = 0
    if corpora:
        counts = np.zeros(tok.n_vocab, dtype=np.int64)
        for path in corpora:
            c = count_tokens(tok, path, num_threads)
            counts += c.counts
            total += c.tokens
        _corpus_reasons(tok, ordinary, lowest, counts, threshold, never, found, flag)

    source = None
    if embeddings is not None:
        source = embeddings if isinstance(embeddings, str | os.PathLike) else "matrix"
        matrix = (
            embeddings
            if isinstance(embeddings, np.ndarray)
            else load_matrix(embeddings, tok.n_vocab, tensor)
        )
        known = set(never) | set(unused_ids) | set(range(tok.n_vocab, matrix.shape[0]))
        if counts is not None:
            known |= {i for i in ordinary if counts[i] == 0}
        distances = unused_distances(matrix, np.array(sorted(known), dtype=np.int64))
        ranked = [i for i in np.argsort(distances, kind="stable").tolist() if i in ordinary]
        ranked = [i for i in ranked if i not in known][:embedding_top]
        for i in ranked:
            flag(i, "near unused rows")
        for i, c in found.items():
            c.distance = float(distances[i])

    if counts is not None:
        for i, c in found.items():
            c.count = int(counts[i])
    candidates = sorted(found.values(), key=lambda c: c.id)
    order = {r: n for n, r in enumerate(REASONS)}
    by_reason = dict.fromkeys(REASONS, 0)
    for c in candidates:
        c.reasons.sort(key=order.__getitem__)
        for r in c.reasons:
            by_reason[r] += 1
    return Audit(
        tokenizer_name(tok),
        tok.vocab_size,
        corpora,
        total,
        threshold,
        None if source is None else str(source),
        by_reason,
        candidates,
        _notes(tok),
    )


def _notes(tok) -> list[str]:
    if tok.model.merges is not None:
        return []
    return [
        f"{tok.model.why_not('merges')}: the checks 'unreachable', 'split by pattern' and "
        "'absorbed' are skipped"
    ]


def _lowest_ids(ordinary: dict[int, bytes], tok) -> dict[bytes, int]:
    """bytes -> the id encoding gives them (the lowest, where bytes repeat; for
    SentencePiece a byte piece only where no other piece has the bytes)."""
    fallback = tok.model.byte_fallback_ids
    lowest: dict[bytes, int] = {}
    for i in sorted(ordinary, key=lambda i: (i in fallback, i), reverse=True):
        lowest[ordinary[i]] = i
    return lowest


def _tokenizer_reasons(tok, ordinary, lowest, flag) -> set[int]:
    """Flags what the tokenizer alone shows; returns the ids it never produces."""
    never: set[int] = set()
    merges = tok.model.merges
    if merges is not None:
        made = {a + b for a, b in merges}
        unreachable = {merges[n][0] + merges[n][1] for n in unreachable_merges(merges)}
    texts: dict[int, str] = {}
    for i, token in sorted(ordinary.items()):
        if lowest[token] != i:
            flag(i, "duplicate").duplicate_of = lowest[token]
            never.add(i)
            continue
        if merges is not None and len(token) > 1 and (token in unreachable or token not in made):
            flag(i, "unreachable")
            never.add(i)
        if NEVER_IN_UTF8.intersection(token):
            flag(i, "never in UTF-8")
            never.add(i)
            continue
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            flag(i, "partial UTF-8")
            continue
        if i not in never:
            texts[i] = text
    if merges is None:
        return never
    # Encoding a reachable token's own text with the pattern: one token, or the
    # pre-tokenizer cut it (it can still occur inside a longer piece).
    ids = list(texts)
    flat, offsets = tok.encode_batch_to_numpy([texts[i] for i in ids], disallowed_special=())
    whole = (np.diff(offsets) == 1) & (flat[offsets[:-1].clip(max=len(flat) - 1)] == ids)
    for i in np.asarray(ids)[~whole].tolist():
        flag(i, "split by pattern")
    return never


def _corpus_reasons(tok, ordinary, lowest, counts, threshold, never, found, flag) -> None:
    """Flags unused, rare and absorbed tokens from the counts on the corpora."""
    # formed[t]: how often t was built, as a final token or as a part of a longer one.
    # Each occurrence of a token built by merge (a, b) built one a and one b; parents
    # come later in merge order, so one pass from the last merge down adds them up.
    triples = []
    for a, b in tok.model.merges or ():
        parent = lowest.get(a + b)
        if parent is not None and parent not in never:
            triples.append((parent, lowest[a], lowest[b]))
    formed = counts.tolist()
    for parent, a, b in reversed(triples):
        formed[a] += formed[parent]
        formed[b] += formed[parent]
    ids = np.array(sorted(ordinary))
    rare = ids[counts[ids] <= threshold].tolist()
    absorbed = set()
    for i in rare:
        if i in never:
            continue
        flag(i, "unused" if counts[i] == 0 else "rare")
        # Only a merge's token can be absorbed: single bytes are no merge's result.
        if formed[i] - counts[i] > threshold and len(ordinary[i]) > 1:
            flag(i, "absorbed")
            absorbed.add(i)
    parents: dict[int, list[int]] = {i: [] for i in absorbed}
    for parent, a, b in triples:
        for part in {a, b} & absorbed:
            parents[part].append(parent)
    for i, c in found.items():
        c.formed = formed[i]
        if i in absorbed:
            c.absorbed_into = sorted(parents[i], key=lambda p: (-formed[p], p))[:3]
