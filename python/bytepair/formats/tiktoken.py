"""tiktoken's ``.tiktoken`` files: one ``base64(token) rank`` line per ordinary token.

The file holds neither the pre-tokenizer pattern nor the special tokens (tiktoken
defines them in code), so reading needs both, and writing says what is left out.
Merges are recovered from the ranks (minbpe's ``recover_merges``, in the Rust core:
``src/bpe/ranks.rs``); parsing is the Rust core's too (``src/io/tiktoken.rs``).
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from bytepair import _core
from bytepair._files import atomic_write
from bytepair.patterns import resolve_pattern

SUFFIXES = (".tiktoken",)


def sniff(head: bytes) -> bool:
    """True if the first line looks like ``base64 rank``."""
    first = head.split(b"\n", 1)[0].strip()
    parts = first.split(b" ")
    if len(parts) != 2 or not parts[1].isdigit():
        return False
    try:
        base64.b64decode(parts[0], validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def parse(data: bytes, path: str) -> dict[bytes, int]:
    """The contents of a ``.tiktoken`` file as {token: rank}; ``path`` names it in errors.

    The Rust core parses files in the plain form (every real file); it hands anything
    unusual (tabs, signs, non-ASCII, odd base64 padding) back to the Python reader
    below, which defines what is accepted and how each fault is worded.
    """
    try:
        return _core.parse_tiktoken(data)
    except ValueError as e:
        error = _tiktoken_error(e.args, data, path)
        if error is not None:
            raise error from None
    return _parse_tiktoken_py(data, path)


def _tiktoken_error(args: tuple, data: bytes, path: str) -> ValueError | None:
    kind = args[0] if args else None
    if kind == "line":
        lineno = args[1]
        try:
            _check_tiktoken_line(data.splitlines()[lineno - 1], f"{path}, line {lineno}")
        except ValueError as e:
            return e
    elif kind == "duplicate_token":
        lineno, first, token = args[1:]
        return ValueError(_duplicate_token_message(f"{path}, line {lineno}", token, first))
    elif kind == "duplicate_rank":
        lineno, first, rank = args[1:]
        return ValueError(_duplicate_rank_message(f"{path}, line {lineno}", rank, first))
    return None


def _parse_tiktoken_py(data: bytes, path: str) -> dict[bytes, int]:
    try:
        ranks = {}
        n = 0
        for line in data.splitlines():
            if line:
                token, rank = line.split(b" ")
                ranks[base64.b64decode(token, validate=True)] = int(rank)
                n += 1
        if (
            len(ranks) == n
            and len(set(ranks.values())) == n
            and min(ranks.values(), default=0) >= 0
        ):
            return ranks
    except (ValueError, binascii.Error):
        pass
    return _parse_tiktoken_checked(data, path)


def _check_tiktoken_line(raw: bytes, where: str) -> tuple[bytes, int] | None:
    line = raw.decode("utf-8", "replace")
    if not line.strip():
        return None
    parts = line.split()
    if len(parts) != 2:
        raise ValueError(f"{where}: expected 'base64-token rank', got {line[:80]!r}")
    try:
        token = base64.b64decode(parts[0], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{where}: {parts[0][:80]!r} is not valid base64") from None
    if not (parts[1].isascii() and parts[1].isdigit()):
        raise ValueError(f"{where}: rank {parts[1][:40]!r} is not a non-negative integer")
    return token, int(parts[1])


def _duplicate_token_message(where: str, token: bytes, first: int) -> str:
    return f"{where}: token {token!r} was already given on line {first}"


def _duplicate_rank_message(where: str, rank: int, first: int) -> str:
    return f"{where}: rank {rank} was already given on line {first}"


def _parse_tiktoken_checked(data: bytes, path: str) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    line_of_token: dict[bytes, int] = {}
    for lineno, raw in enumerate(data.splitlines(), 1):
        where = f"{path}, line {lineno}"
        entry = _check_tiktoken_line(raw, where)
        if entry is None:
            continue
        token, rank = entry
        if token in line_of_token:
            raise ValueError(_duplicate_token_message(where, token, line_of_token[token]))
        if rank in line_of_rank:
            raise ValueError(_duplicate_rank_message(where, rank, line_of_rank[rank]))
        ranks[token] = rank
        line_of_token[token] = lineno
        line_of_rank[rank] = lineno
    return ranks


def read_ranks(path: str | os.PathLike) -> dict[bytes, int]:
    """Reads a ``.tiktoken`` file into {token: rank}; a bad line is a ValueError naming
    the file and the line number."""
    return parse(Path(path).read_bytes(), str(path))


def write_ranks(path: str | os.PathLike, ranks: dict[bytes, int]) -> None:
    """Writes {token: rank} as a ``.tiktoken`` file, sorted by rank."""
    if len(set(ranks.values())) != len(ranks):
        raise ValueError(f"{path}: two tokens have the same rank; ranks must be unique")
    lines = [
        base64.b64encode(token) + b" " + str(rank).encode()
        for token, rank in sorted(ranks.items(), key=lambda item: item[1])
    ]
    atomic_write(path, b"\n".join(lines) + b"\n")


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The ordered merges that a {token: rank} table (tiktoken's form) stands for.

    minbpe's ``recover_merges``: for each token of two or more bytes, in rank order,
    run the byte-pair algorithm on its bytes with only the lower ranks; it must stop at
    exactly two parts, which are the merge that made the token. Anything else means
    BPE cannot produce the vocabulary, and is a ValueError naming the token.
    """
    for b in range(256):
        if bytes([b]) not in ranks:
            raise ValueError(
                f"the single byte {bytes([b])!r} has no rank: a byte-level BPE vocabulary "
                "holds all 256 bytes"
            )
    by_rank: list[bytes | None] = [None] * (max(ranks.values()) + 1)
    for token, rank in ranks.items():
        if rank < 0:
            raise ValueError(f"token {token!r} has the negative rank {rank}")
        if by_rank[rank] is not None:
            raise ValueError(f"tokens {by_rank[rank]!r} and {token!r} have the same rank {rank}")
        by_rank[rank] = token
    try:
        triples = _core.recover_merges(by_rank)
    except ValueError as e:
        if e.args[0] != "unreachable":
            raise
        _, rank, parts = e.args
        raise ValueError(
            f"token {by_rank[rank]!r} (rank {rank}) cannot be made by BPE from the tokens of "
            f"lower rank: they merge its bytes into {parts} parts, not 2"
        ) from None
    return [(by_rank[left], by_rank[right]) for _, left, right in triples]


def from_bytes(data: bytes, path: str, pattern: str | None, special_tokens=None):
    """A Tokenizer from a ``.tiktoken`` file's bytes (``path`` names it in errors).

    The Rust core parses the file, recovers the merges and builds the encoder in one
    step, with no Python dicts in between; what it declines goes the general way.
    """
    from bytepair.models.bpe import BPE
    from bytepair.tokenizer import Tokenizer

    if special_tokens is None or isinstance(special_tokens, dict):
        try:
            regex = resolve_pattern(pattern)
            specials = {str(t): int(i) for t, i in (special_tokens or {}).items()}
            if len(set(specials.values())) != len(specials):
                raise ValueError("two special tokens share an id")  # worded below
            core = _core.Encoder.from_tiktoken(data, specials, regex)
        except (ValueError, TypeError, OverflowError):
            pass
        else:
            return Tokenizer.from_model(BPE.from_core(core, specials, regex))
    ranks = parse(data, path)
    try:
        merges = merges_from_ranks(ranks)
        vocab = {rank: token for token, rank in ranks.items()}
        return Tokenizer(vocab, merges, special_tokens, pattern)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


#: ``read``'s default: the pattern must be given (None means "no pre-tokenization").
MISSING = "<missing>"


def read(path: str | os.PathLike, pattern: str | None = MISSING, special_tokens=None):
    """Loads a ``.tiktoken`` file; ``pattern`` is required (the file holds none)."""
    if pattern is MISSING:
        raise ValueError(
            f"{path}: a .tiktoken file holds no pre-tokenizer pattern; pass pattern= "
            "(gpt2, cl100k, o200k or a regex) and its special tokens as special_tokens="
        )
    return from_bytes(Path(path).read_bytes(), str(path), pattern, special_tokens)


def write(tok, path: str | os.PathLike) -> None:
    """Writes the ordinary tokens, each token's id its rank.

    tiktoken merges by rank, so the ids must give back exactly this tokenizer's merges;
    if they do not (tokens with the same bytes, ids out of merge order, tokens no merge
    makes) this is a ValueError and nothing is written. The pattern and special tokens
    are not part of the format: pass them to tiktoken (or ``bytepair.load``) yourself.
    """
    model = tok.model
    special_ids = set(model.special_tokens.values())
    ranks: dict[bytes, int] = {}
    for i, token in sorted(model.vocab.items()):
        if i in special_ids:
            continue
        if token in ranks:
            raise ValueError(
                f"{path}: ids {ranks[token]} and {i} are the same bytes {token!r}; "
                "a .tiktoken file gives each token one rank"
            )
        ranks[token] = i
    try:
        merges = merges_from_ranks(ranks)
    except ValueError as e:
        raise ValueError(f"{path}: the ids cannot serve as tiktoken ranks: {e}") from None
    ours = model.merges
    if merges != ours:
        n = next(
            (n for n, (a, b) in enumerate(zip(merges, ours)) if a != b),
            min(len(merges), len(ours)),
        )
        mine = ours[n] if n < len(ours) else None
        theirs = merges[n] if n < len(merges) else None
        raise ValueError(
            f"{path}: the ids cannot serve as tiktoken ranks: merge #{n} is {mine!r} "
            f"but the ranks imply {theirs!r}, so tiktoken would encode differently"
        )
    write_ranks(path, ranks)
