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
from bytepair.formats.errors import short
from bytepair.models.bpe import BPE, special_items
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
    """The contents of a ``.tiktoken`` file as {token: rank}, in file order; a bad line
    is a ValueError naming ``path`` and the line (the grammar: ``src/io/tiktoken.rs``)."""
    return _core.parse_tiktoken(data, path)


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
    return _core.merges_from_ranks(ranks)


def from_bytes(data: bytes, path: str, pattern: str | None, special_tokens=None) -> BPE:
    """The model in a ``.tiktoken`` file's bytes (``path`` names it in errors).

    The Rust core parses the file, recovers the merges, gives the special tokens their
    ids and builds the encoder in one step, with no Python dicts in between.
    """
    regex = resolve_pattern(pattern)
    core, specials = _core.Encoder.from_tiktoken(data, path, special_items(special_tokens), regex)
    return BPE.from_core(core, dict(specials), regex)


#: ``read``'s default: the pattern must be given (None means "no pre-tokenization").
MISSING = "<missing>"


def read(path: str | os.PathLike, pattern: str | None = MISSING, special_tokens=None) -> BPE:
    """Loads a ``.tiktoken`` file; ``pattern`` is required (the file holds none)."""
    if pattern is MISSING:
        raise ValueError(
            f"{path}: a .tiktoken file holds no pre-tokenizer pattern; pass pattern= "
            "(gpt2, cl100k, o200k or a regex) and its special tokens as special_tokens="
        )
    return from_bytes(Path(path).read_bytes(), str(path), pattern, special_tokens)


def write(model: BPE, path: str | os.PathLike) -> None:
    """Writes the ordinary tokens, each token's id its rank.

    tiktoken merges by rank, so the ids must give back exactly this tokenizer's merges;
    if they do not (tokens with the same bytes, ids out of merge order, tokens no merge
    makes) this is a ValueError and nothing is written. The pattern and special tokens
    are not part of the format: pass them to tiktoken (or ``bytepair.load``) yourself.
    """
    special_ids = set(model.special_tokens.values())
    ranks: dict[bytes, int] = {}
    for i, token in sorted(model.vocab.items()):
        if i in special_ids:
            continue
        if token in ranks:
            raise ValueError(
                f"{path}: ids {ranks[token]} and {i} are the same bytes {short(token)}; "
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
            f"{path}: the ids cannot serve as tiktoken ranks: merge #{n} is {short(mine)} "
            f"but the ranks imply {short(theirs)}, so tiktoken would encode differently"
        )
    write_ranks(path, ranks)


WRITERS = {BPE: write}
