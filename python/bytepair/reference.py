"""The reference implementation of byte-level BPE: simple, slow and correct.

This module is the oracle. The fast Rust core must agree with it exactly (the tests
compare them on generated inputs). It is never on the fast path: read it to learn
what bytepair computes, not how fast.

The contract (Stanford CS336 assignment 1, minbpe, GPT-2):

* Special tokens are hard boundaries: text is split on them (longest match first),
  their own text never contributes pairs, and they are added to the vocabulary after
  the merges.
* Each segment is split into pieces by a regex (`gpt2` by default); pairs are counted
  inside pieces only.
* Each step merges the most frequent pair; ties go to the lexicographically greatest
  (left bytes, right bytes). Pairs are counted at every position, so b"aaa" holds
  (a, a) twice.
* Encoding merges each piece by rank, lowest first, as GPT-2's ``bpe()``.

Example, minbpe's: three merges on "aaabdaaabac", no pre-tokenization

>>> vocab, merges = train(["aaabdaaabac"], 256 + 3, pattern=None)
>>> merges
[(b'a', b'a'), (b'aa', b'a'), (b'aaa', b'b')]
>>> encode("aaabdaaabac", vocab, merges, pattern=None)
[258, 100, 258, 97, 99]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import regex

from bytepair.patterns import resolve_pattern

Pair = tuple[bytes, bytes]


def split_on_special_tokens(text: str, special_tokens: Iterable[str]) -> list[tuple[str, bool]]:
    """Cuts text around special tokens, longest match first.

    >>> split_on_special_tokens("a<|x|>b", ["<|x|>"])
    [('a', False), ('<|x|>', True), ('b', False)]
    """
    tokens = sorted(set(t for t in special_tokens if t), key=len, reverse=True)
    if not tokens:
        return [(text, False)] if text else []
    # An alternation tries the longer tokens first at each position: leftmost-longest.
    parts = regex.split("(" + "|".join(regex.escape(t) for t in tokens) + ")", text)
    # split() with one group alternates: text, special, text, special, ..., text
    return [(p, i % 2 == 1) for i, p in enumerate(parts) if p]


def pretokenize(text: str, pattern: str | None) -> list[str]:
    """Splits ordinary text into pieces with the pattern (None: the whole text).
    Text between matches is a piece too, so no text is ever dropped (the built-in
    patterns match everything, so for them these are exactly the matches); an empty
    match ends the text before it, as in Hugging Face's Split.

    >>> pretokenize("Hello world's end", "gpt2")
    ['Hello', ' world', "'s", ' end']
    >>> pretokenize("hello, World 123", "[a-z]+")
    ['hello', ', W', 'orld', ' 123']
    >>> pretokenize("ab cd", r"\\b")
    ['ab', ' ', 'cd']
    """
    regex_str = resolve_pattern(pattern)
    if regex_str is None:
        return [text] if text else []
    pieces, done = [], 0
    for m in regex.finditer(regex_str, text):
        if m.start() > done:
            pieces.append(text[done : m.start()])  # the gap before this match
            done = m.start()
        if m.end() > m.start():
            pieces.append(m.group(0))
            done = m.end()
    if done < len(text):
        pieces.append(text[done:])
    return pieces


def count_pieces(
    texts: Iterable[str], special_tokens: Iterable[str], pattern: str | None
) -> Counter:
    """Counts every piece of every text, as bytes. Each text is pre-tokenized on its own.

    >>> count_pieces(["a a<|x|>a"], ["<|x|>"], "gpt2")
    Counter({b'a': 2, b' a': 1})
    """
    special_tokens = list(special_tokens)
    counts: Counter = Counter()
    for text in texts:
        for segment, is_special in split_on_special_tokens(text, special_tokens):
            if not is_special:
                counts.update(piece.encode("utf-8") for piece in pretokenize(segment, pattern))
    return counts


def get_pair_counts(words: dict[tuple[bytes, ...], int]) -> Counter:
    """Counts adjacent pairs, weighted by how often each word occurs.

    >>> get_pair_counts({(b'a', b'a', b'a'): 2, (b'a', b'b'): 1})
    Counter({(b'a', b'a'): 4, (b'a', b'b'): 1})
    """
    pairs: Counter = Counter()
    for word, count in words.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    return pairs


def merge(word: tuple[bytes, ...], pair: Pair) -> tuple[bytes, ...]:
    """Replaces every occurrence of pair in word, left to right.

    >>> merge((b'a', b'a', b'a'), (b'a', b'a'))
    (b'aa', b'a')
    """
    out = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2  # skip both halves of the pair
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train(
    texts: Iterable[str],
    vocab_size: int,
    special_tokens: Iterable[str] = (),
    pattern: str | None = "gpt2",
    min_frequency: int = 0,
    max_token_length: int | None = None,
) -> tuple[dict[int, bytes], list[Pair]]:
    """Trains byte-level BPE on texts (each one pre-tokenized on its own).

    Returns (vocab: id -> bytes, merges in order). Ids 0-255 are the bytes, merge i
    makes id 256 + i, special tokens follow. Stops early if no pair is left.

    >>> vocab, merges = train(["low lower lowest"], 256 + 2, pattern=None)
    >>> merges   # (l, o) and (o, w) both occur 3 times: the greater pair wins
    [(b'o', b'w'), (b'l', b'ow')]

    Training stops when the best pair occurs fewer than ``min_frequency`` times
    (Hugging Face's meaning), and a pair whose token would be longer than
    ``max_token_length`` bytes is never merged (the next best pair is taken):

    >>> train(["low lower lowest"], 256 + 5, pattern=None, min_frequency=3)[1]
    [(b'o', b'w'), (b'l', b'ow')]
    >>> train(["aaaa aaaa"], 256 + 3, pattern=None, max_token_length=2)[1]
    [(b'a', b'a')]
    """
    special_tokens = list(dict.fromkeys(special_tokens))
    counts = count_pieces(texts, special_tokens, pattern)
    words = {tuple(bytes([b]) for b in piece): n for piece, n in counts.items()}
    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[Pair] = []
    for _ in range(vocab_size - 256 - len(special_tokens)):
        pairs = get_pair_counts(words)
        if max_token_length is not None:  # too long a token: never merged
            pairs = Counter(
                {p: n for p, n in pairs.items() if len(p[0] + p[1]) <= max_token_length}
            )
        if not pairs:
            break  # every piece is a single token: nothing left to merge
        best = max(pairs, key=lambda p: (pairs[p], p))  # most frequent, then greatest
        if pairs[best] < min_frequency:
            break  # even the best pair is too rare
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        words = {merge(word, best): n for word, n in words.items()}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def bpe(piece: bytes, ranks: dict[Pair, int]) -> list[bytes]:
    """GPT-2's bpe(): merge the lowest-rank adjacent pair everywhere, until none is left.

    >>> bpe(b"aaab", {(b'a', b'a'): 0, (b'aa', b'a'): 1})
    [b'aaa', b'b']
    """
    parts = tuple(bytes([b]) for b in piece)
    while len(parts) > 1:
        pairs = [p for p in zip(parts, parts[1:]) if p in ranks]
        if not pairs:
            break
        parts = merge(parts, min(pairs, key=ranks.__getitem__))
    return list(parts)


def encode(
    text: str,
    vocab: dict[int, bytes],
    merges: list[Pair],
    special_tokens: dict[str, int] | None = None,
    pattern: str | None = "gpt2",
) -> list[int]:
    """Encodes text; each of special_tokens (token -> id) found in text becomes its id.

    Other tokens' ids are looked up by their bytes (the lowest id when bytes repeat).

    >>> vocab, merges = train(["aaabdaaabac"], 256 + 3, pattern=None)
    >>> encode("aaab", vocab, merges, pattern=None)
    [258]
    """
    special_tokens = special_tokens or {}
    ranks: dict[Pair, int] = {}
    for rank, pair in enumerate(merges):
        ranks.setdefault(pair, rank)
    special_ids = set(special_tokens.values())
    ids_of: dict[bytes, int] = {}
    for i in sorted(vocab, reverse=True):  # reversed, so the lowest id wins
        if i not in special_ids:
            ids_of[vocab[i]] = i
    ids: list[int] = []
    for segment, is_special in split_on_special_tokens(text, special_tokens):
        if is_special:
            ids.append(special_tokens[segment])
            continue
        for piece in pretokenize(segment, pattern):
            ids.extend(ids_of[part] for part in bpe(piece.encode("utf-8"), ranks))
    return ids


def decode(ids: Iterable[int], vocab: dict[int, bytes]) -> str:
    """Joins the tokens' bytes; invalid UTF-8 becomes U+FFFD.

    >>> decode([104, 105], {104: b'h', 105: b'i'})
    'hi'
    """
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
