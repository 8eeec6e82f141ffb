"""``stats``: what a tokenizer's vocabulary holds, and how it does on text.

The vocabulary: tokens by length in bytes, by kind (letters with or without a
leading space, digits, whitespace, punctuation, partial UTF-8, special) and by the
Unicode script of their letters, and the longest tokens. On corpora: bytes per token,
tokens per word, the share of the vocabulary used, the most frequent tokens and the
frequency-rank (Zipf) curve.

>>> import bytepair
>>> s = stats(bytepair.get_encoding("gpt2"))
>>> s.vocab.by_length[1], s.vocab.by_kind["special"]
(256, 1)
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from bytepair.reports.corpus import count_tokens
from bytepair.reports.tokens import KINDS, printable, token_kind

# How many of the longest / most frequent tokens a report lists.
TOP = 20
# Points of the frequency-rank curve kept in ``to_dict`` (log-spaced ranks).
CURVE_POINTS = 200


@dataclass
class TokenRow:
    """One token for a table: its id, printable text and (where counted) count."""

    id: int
    text: str
    count: int | None = None


@dataclass
class VocabStats:
    vocab_size: int
    merges: int | None  # None: a model without merges (SentencePiece)
    special: int
    by_length: dict[int, int]
    by_kind: dict[str, int]
    by_script: dict[str, int]
    longest: list[TokenRow]


@dataclass
class CorpusStats:
    path: str
    bytes: int
    tokens: int
    words: int
    distinct_tokens: int
    vocab_used: float  # distinct tokens / vocab_size
    top_tokens: list[TokenRow]
    counts: np.ndarray = field(repr=False)  # per id

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    @property
    def tokens_per_word(self) -> float:
        return self.tokens / self.words if self.words else 0.0

    def zipf(self) -> tuple[np.ndarray, np.ndarray]:
        """The frequency-rank curve: ranks 1, 2, ... and the count of the token at each."""
        counts = np.sort(self.counts[self.counts > 0])[::-1]
        return np.arange(1, len(counts) + 1), counts

    def to_dict(self) -> dict:
        ranks, counts = self.zipf()
        keep = np.unique(np.geomspace(1, max(len(ranks), 1), CURVE_POINTS).astype(int)) - 1
        keep = keep[keep < len(ranks)]
        d = {k: v for k, v in asdict(self).items() if k != "counts"}
        d["bytes_per_token"] = self.bytes_per_token
        d["tokens_per_word"] = self.tokens_per_word
        d["zipf"] = {"rank": ranks[keep].tolist(), "count": counts[keep].tolist()}
        return d


@dataclass
class Stats:
    tokenizer: str
    vocab: VocabStats
    corpora: list[CorpusStats]

    def to_dict(self) -> dict:
        return {
            "tokenizer": self.tokenizer,
            "vocab": asdict(self.vocab),
            "corpora": [c.to_dict() for c in self.corpora],
        }


def tokenizer_name(tok) -> str:
    return tok.name or repr(tok)


def vocab_stats(tok) -> VocabStats:
    """The vocabulary by length, kind and script, and its longest tokens."""
    specials = set(tok.special_tokens.values())
    vocab = tok.model.vocab
    by_length: Counter = Counter()
    by_kind: Counter = Counter({k: 0 for k in KINDS})
    by_script: Counter = Counter()
    for i, token in vocab.items():
        if i in specials:
            by_kind["special"] += 1
            continue
        by_length[len(token)] += 1
        kind, script = token_kind(token)
        by_kind[kind] += 1
        if script:
            by_script[script] += 1
    longest = sorted((i for i in vocab if i not in specials), key=lambda i: (-len(vocab[i]), i))
    return VocabStats(
        vocab_size=tok.vocab_size,
        merges=None if tok.model.merges is None else len(tok.model.merges),
        special=len(specials),
        by_length=dict(sorted(by_length.items())),
        by_kind=dict(by_kind),
        by_script=dict(by_script.most_common()),
        longest=[TokenRow(i, printable(vocab[i])) for i in longest[:TOP]],
    )


def corpus_stats(tok, path: str | os.PathLike, num_threads: int | None = None) -> CorpusStats:
    """Bytes/token, tokens/word, vocabulary used and token frequencies on one text file."""
    c = count_tokens(tok, path, num_threads)
    distinct = int(np.count_nonzero(c.counts))
    top = np.argsort(-c.counts, kind="stable")[: min(TOP, distinct)]
    return CorpusStats(
        path=c.path,
        bytes=c.bytes,
        tokens=c.tokens,
        words=c.words,
        distinct_tokens=distinct,
        vocab_used=distinct / tok.vocab_size,
        top_tokens=[
            TokenRow(int(i), printable(tok.decode_single_token_bytes(int(i))), int(c.counts[i]))
            for i in top
        ],
        counts=c.counts,
    )


def stats(tok, corpora: Iterable[str | os.PathLike] = (), num_threads: int | None = None) -> Stats:
    """The vocabulary report, and one corpus report per text file."""
    return Stats(
        tokenizer_name(tok),
        vocab_stats(tok),
        [corpus_stats(tok, path, num_threads) for path in corpora],
    )
