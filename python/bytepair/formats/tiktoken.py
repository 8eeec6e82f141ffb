"""tiktoken's ``.tiktoken`` files: one ``base64(token) rank`` line per ordinary token.

The file holds neither the pre-tokenizer pattern nor the special tokens (tiktoken
defines them in code), so reading needs both, and writing says what is left out.
A file encodes exactly as tiktoken encodes it: merges are recovered from the ranks
(minbpe's ``recover_merges``, in the Rust core: ``src/bpe/ranks.rs``) when they make
every token, which gives a ``BPE`` model; a file with tokens no merge makes (Llama 3's
``tokenizer.model``) gives a ``RankBPE`` model, encoding by tiktoken's own rule
(:mod:`bytepair.models.ranks`). Parsing is the Rust core's too (``src/io/tiktoken.rs``).
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from bytepair import _core
from bytepair._files import atomic_write
from bytepair.formats.errors import short
from bytepair.models import ranks as ranks_models
from bytepair.models.base import registered
from bytepair.models.bpe import BPE, special_items
from bytepair.models.ranks import RankBPE
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


def from_bytes(data: bytes, path: str, pattern: str | None, special_tokens=None) -> BPE | RankBPE:
    """The model in a ``.tiktoken`` file's bytes (``path`` names it in errors).

    The Rust core parses the file, recovers the merges, gives the special tokens their
    ids and builds the encoder in one step, with no Python dicts in between.
    """
    regex = resolve_pattern(pattern)
    core, specials = _core.Encoder.from_tiktoken(data, path, special_items(special_tokens), regex)
    return ranks_models.from_core(core, dict(specials), regex)


#: ``read``'s default: the pattern must be given (None means "no pre-tokenization").
MISSING = "<missing>"


def read(
    path: str | os.PathLike, pattern: str | None = MISSING, special_tokens=None
) -> BPE | RankBPE:
    """Loads a ``.tiktoken`` file; ``pattern`` is required (the file holds none).
    Llama 3's ``tokenizer.model`` is one: ``read(path, pattern="llama3",
    special_tokens=...)``."""
    if pattern is MISSING:
        raise ValueError(
            f"{path}: a .tiktoken file holds no pre-tokenizer pattern; pass pattern= "
            "(a name such as cl100k, o200k or llama3, or a regex) and its special tokens "
            "as special_tokens="
        )
    return from_bytes(Path(path).read_bytes(), str(path), pattern, special_tokens)


def ranks_of(model: BPE | RankBPE, path: str | os.PathLike) -> dict[bytes, int]:
    """The model's ordinary tokens as tiktoken ranks (each id its rank), in rank order.

    tiktoken merges by rank, so for a ``BPE`` model the ids must give back exactly its
    merges; if they do not (tokens with the same bytes, ids out of merge order, tokens
    no merge makes) this is a ValueError naming ``path``. A ``RankBPE`` model's ids are
    its ranks already.
    """
    return registered(RANKS, model)(model, path)


def _bpe_ranks(model: BPE, path) -> dict[bytes, int]:
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
    return ranks


#: How each model class gives its ranks.
RANKS = {BPE: _bpe_ranks, RankBPE: lambda model, path: model.ranks()}


def write(model: BPE | RankBPE, path: str | os.PathLike) -> None:
    """Writes the ordinary tokens, each token's id its rank (see :func:`ranks_of`; on a
    fault nothing is written). The pattern and special tokens are not part of the
    format: pass them to tiktoken (or ``bytepair.load``) yourself."""
    write_ranks(path, ranks_of(model, path))


WRITERS = dict.fromkeys(RANKS, write)
