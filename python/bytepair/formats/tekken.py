"""Mistral's Tekken files (``tekken_240718.json``, ``tekken_240911.json``...): tiktoken
ranks in JSON, with the pattern and the special tokens. Read as mistral-common's
``Tekkenizer.from_file`` reads them (``mistral_common/tokens/tokenizers/tekken.py``)::

    {"config": {"pattern": "<regex>", "num_vocab_tokens": 150000,
                "default_vocab_size": 131072, "default_num_special_tokens": 1000,
                "version": "v3"},
     "vocab": [{"rank": 0, "token_bytes": "AA==", "token_str": "\\u0000"}, ...],
     "special_tokens": [{"rank": 0, "token_str": "<unk>", "is_control": true}, ...]}

- the special tokens take the first ids, ``0 .. default_num_special_tokens - 1``; a file
  without ``special_tokens`` (versions up to v7) has Mistral's 20 standard ones, and
  ``<SPECIAL_20>``... fill the rest;
- ordinary tokens follow: rank ``r`` is id ``r + default_num_special_tokens``, and only
  the first ``default_vocab_size - default_num_special_tokens`` ranks are kept;
- text encodes by tiktoken's rule over those ranks (a ``BPE`` model when merges make
  every token, else a ``RankBPE``), with no special tokens matched in the text:
  ``Tekkenizer.encode(text, bos=False, eos=False)`` is ``Tokenizer.encode_ordinary``.

Writing keeps what text encoding needs (pattern, special tokens, ranks) with the version
``v3``; the image and audio settings of a file read here are not kept.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path

from bytepair._files import atomic_write
from bytepair.formats.errors import parse_json, short
from bytepair.formats.tiktoken import ranks_of
from bytepair.models import BPE, RankBPE
from bytepair.models import ranks as ranks_models

SUFFIXES: tuple[str, ...] = ()  # ".json" is Hugging Face's: Tekken files go by content

#: The special tokens of a file without ``special_tokens`` (mistral-common's
#: ``Tekkenizer.DEPRECATED_SPECIAL_TOKENS``), ids 0 to 19.
STANDARD_SPECIAL_TOKENS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)
#: mistral-common's versions; after v7 a file must list its special tokens.
VERSIONS = ("v1", "v2", "v3", "v7", "v11", "v13", "v15")
#: The most special tokens a file may ask for (Mistral's have 1,000): each one that the
#: file does not list is made, so a damaged count must not ask for billions.
MAX_SPECIAL_TOKENS = 1 << 20
#: The version :func:`write` gives: the first with Tekken files.
WRITTEN_VERSION = "v3"


def sniff(head: bytes) -> bool:
    """True if a JSON file starting with ``head`` looks like a Tekken file: its vocab
    entries (``"token_bytes"``) or its config (``"default_num_special_tokens"``)."""
    return head.lstrip().startswith(b"{") and (
        b'"token_bytes"' in head or b'"default_num_special_tokens"' in head
    )


def read(path: str | os.PathLike) -> BPE | RankBPE:
    """Loads a Tekken file; a fault is a ValueError naming the file and the entry."""
    doc = parse_json(Path(path).read_bytes(), path, "Tekken file")
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise ValueError(f'{path}: not a Tekken file (no "config" object)')
    config = doc["config"]

    def field(key: str, kind: type):
        value = config.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"{path}: config.{key} is {short(value)}; expected a {kind.__name__}")
        return value

    pattern = field("pattern", str)
    num_special = field("default_num_special_tokens", int)
    vocab_size = field("default_vocab_size", int)
    version = field("version", str)
    if version not in VERSIONS:
        raise ValueError(
            f"{path}: config.version {short(version)} is not one of {', '.join(VERSIONS)}"
        )
    vocab = doc.get("vocab")
    if not isinstance(vocab, list):
        raise ValueError(f'{path}: "vocab" must be a list')
    if not 0 <= num_special <= MAX_SPECIAL_TOKENS:
        raise ValueError(
            f"{path}: config.default_num_special_tokens {num_special} is not from 0 to "
            f"{MAX_SPECIAL_TOKENS:,}"
        )
    kept = vocab_size - num_special
    if not 0 <= kept <= len(vocab):
        raise ValueError(
            f"{path}: config.default_vocab_size {vocab_size} minus "
            f"{num_special} special tokens is {kept}, but the vocab has {len(vocab)} tokens"
        )
    specials = _special_tokens(doc.get("special_tokens"), num_special, version, path)
    ranks: dict[bytes, int] = {}
    for n, entry in enumerate(vocab[:kept]):
        if not isinstance(entry, dict) or entry.get("rank") != n:
            raise ValueError(f"{path}: vocab[{n}] is {short(entry)}; expected rank {n}")
        try:
            token = base64.b64decode(entry.get("token_bytes"), validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise ValueError(
                f"{path}: vocab[{n}].token_bytes {short(entry.get('token_bytes'))} is not base64"
            ) from None
        if token in ranks:
            first = ranks[token] - num_special
            raise ValueError(f"{path}: vocab[{n}] repeats token {short(token)} of rank {first}")
        ranks[token] = n + num_special
    return ranks_models.from_ranks(ranks, specials, pattern, where=str(path))


def _special_tokens(entries, num_special: int, version: str, path) -> dict[str, int]:
    """The special tokens and their ids, as ``Tekkenizer.__init__`` makes them."""
    if entries is None:
        if VERSIONS.index(version) > VERSIONS.index("v7"):
            raise ValueError(f'{path}: a {version} Tekken file must list its "special_tokens"')
        names = list(STANDARD_SPECIAL_TOKENS)
    else:
        if not isinstance(entries, list):
            raise ValueError(f'{path}: "special_tokens" must be a list')
        names = []
        for n, entry in enumerate(entries):
            if not isinstance(entry, dict) or entry.get("rank") != n:
                raise ValueError(
                    f"{path}: special_tokens[{n}] is {short(entry)}; expected rank {n}"
                )
            name = entry.get("token_str")
            if not isinstance(name, str) or not name or name in names:
                raise ValueError(
                    f"{path}: special_tokens[{n}].token_str {short(name)} is not a new, non-empty string"
                )
            names.append(name)
    if len(names) > num_special:
        raise ValueError(
            f"{path}: {len(names)} special tokens, but config.default_num_special_tokens "
            f"is {num_special}"
        )
    names += [f"<SPECIAL_{i}>" for i in range(len(names), num_special)]
    return {name: i for i, name in enumerate(names)}


def write(model: BPE | RankBPE, path: str | os.PathLike) -> None:
    """Writes a Tekken file that mistral-common's ``Tekkenizer.from_file`` loads and
    encodes exactly as this model: the special tokens must have the first ids (0, 1,
    ...) and the ordinary tokens the ids after them, in an order tiktoken can merge by
    (see :func:`bytepair.formats.tiktoken.ranks_of`); otherwise a ValueError, and
    nothing is written."""
    if model.pattern is None:
        raise ValueError(
            f"{path}: a Tekken file needs a pre-tokenizer pattern; this model has none"
        )
    specials = sorted(model.special_tokens.items(), key=lambda item: item[1])
    if [i for _, i in specials] != list(range(len(specials))):
        raise ValueError(
            f"{path}: a Tekken file gives the special tokens the first ids 0 to "
            f"{len(specials) - 1}, but this model's are {[i for _, i in specials][:8]}..."
        )
    ranks = ranks_of(model, path)
    first = len(specials)
    ids = list(ranks.values())
    if ids != list(range(first, first + len(ids))):
        gap = next(n for n, i in enumerate(ids) if i != first + n)
        raise ValueError(
            f"{path}: a Tekken file numbers ordinary tokens from {first} without gaps, but "
            f"this model has id {ids[gap]} where {first + gap} should be"
        )
    vocab = []
    for token, i in ranks.items():
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        vocab.append(
            {
                "rank": i - first,
                "token_bytes": base64.b64encode(token).decode("ascii"),
                "token_str": text,
            }
        )
    doc = {
        "config": {
            "pattern": model.pattern,
            "num_vocab_tokens": len(vocab),
            "default_vocab_size": first + len(vocab),
            "default_num_special_tokens": first,
            "version": WRITTEN_VERSION,
        },
        "vocab": vocab,
        "special_tokens": [
            {"rank": i, "token_str": name, "is_control": True} for name, i in specials
        ],
    }
    atomic_write(path, json.dumps(doc, ensure_ascii=False).encode("utf-8"))


WRITERS = {BPE: write, RankBPE: write}
