"""Reading and writing tokenizer files.

- our own format (``.bytepair``, see :func:`save` for the layout): one versioned,
  human-readable JSON file with the pattern, special tokens and merges — loading it
  runs no code;
- GPT-2 / Hugging Face files: ``vocab.json`` (or ``encoder.json``) + ``merges.txt``
  (or ``vocab.bpe``), whose tokens are written with GPT-2's byte-to-unicode table;
- tiktoken ``.tiktoken`` files (``base64(token) rank`` lines), whose merges
  :func:`merges_from_ranks` recovers;
- Hugging Face ``tokenizer.json`` for byte-level BPE models (read and write).

Readers never run code (no eval, no pickle); a problem is a ValueError naming the file
and the line or entry at fault.

Writers go through a temporary file and a rename, so a failed write never leaves a
half-written file behind.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path

from bytepair import _core

FORMAT_NAME = "bytepair"
FORMAT_VERSION = 1


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from bytes to printable characters (so tokens are readable text).

    Printable Latin-1 bytes map to themselves; the rest (control bytes, space, ...)
    map to characters from U+0100 on, so b" " shows as "Ġ" and b"\\n" as "Ċ".

    >>> bytes_to_unicode()[ord(" ")]
    'Ġ'
    """
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    keep += list(range(ord("®"), ord("ÿ") + 1))
    table = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return table


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def token_to_str(token: bytes) -> str:
    """A token in GPT-2 notation: ``b" the"`` -> ``"Ġthe"``."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def str_to_token(text: str, where: str = "") -> bytes:
    """The inverse of :func:`token_to_str`; a character outside the table is an error."""
    table = unicode_to_bytes()
    try:
        return bytes(table[c] for c in text)
    except KeyError as e:
        raise ValueError(
            f"{where}token {text!r} has the character {e.args[0]!r}, which is not in GPT-2's "
            "byte-to-unicode table: this is not a byte-level BPE file"
        ) from None


def publish(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Renames a finished temporary file into place, with the permissions a newly
    created file gets (mkstemp makes it private: 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Writes data to path via a temporary file in the same folder and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


NPY_HEADER_BYTES = 128


def npy_header(dtype: str, count: int) -> bytes:
    """A ``.npy`` (version 1.0) header for a 1-D array, padded to exactly
    NPY_HEADER_BYTES so it can be written before the count is known and filled in after.

    >>> len(npy_header("<u2", 10**12)) == NPY_HEADER_BYTES
    True
    """
    text = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': ({count},), }}"
    body = text.ljust(NPY_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body.encode("latin1")


def dump_bytepair(
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern: str | None,
    vocab: dict[int, bytes] | None,
) -> str:
    """The text of a ``.bytepair`` file. Layout (JSON, one merge per line)::

        {
          "format": "bytepair",
          "version": 1,
          "pattern": "<regex or null>",
          "special_tokens": {"<|endoftext|>": 500},
          "merges": [
            "Ġ t",
            ...
          ]
        }

    Merges are "left right" in GPT-2 notation, in rank order: merge i is token 256 + i.
    ``vocab`` ({token in GPT-2 notation: id}) is written only when the ids do not
    follow that layout (a vocabulary loaded from elsewhere).
    """
    head = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "pattern": pattern,
        "special_tokens": special_tokens,
    }
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
    if vocab is not None:
        lines.append('  "vocab": {')
        items = sorted(vocab.items())
        for n, (i, token) in enumerate(items):
            comma = "," if n + 1 < len(items) else ""
            lines.append(f"    {json.dumps(token_to_str(token), ensure_ascii=False)}: {i}{comma}")
        lines.append("  },")
    lines.append('  "merges": [')
    for n, (left, right) in enumerate(merges):
        comma = "," if n + 1 < len(merges) else ""
        text = token_to_str(left) + " " + token_to_str(right)
        lines.append(f"    {json.dumps(text, ensure_ascii=False)}{comma}")
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def load_bytepair(path: str | os.PathLike) -> dict:
    """Reads a ``.bytepair`` file. Returns dict(merges, special_tokens, pattern, vocab).

    Every problem is a ValueError naming the file and what is wrong with it.
    """
    path = Path(path)
    raw = path.read_bytes()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: not a bytepair tokenizer file (invalid UTF-8 at byte {e.start})"
        ) from None
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path}: not a valid bytepair tokenizer file: {e.msg} at line {e.lineno}, column {e.colno} "
            "(truncated or edited by hand?)"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ValueError(f'{path}: not a bytepair tokenizer file (no "format": "bytepair")')
    version = doc.get("version")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{path}: bytepair format version {version!r} is not supported by this version of "
            f"bytepair (which reads version {FORMAT_VERSION}); upgrade bytepair"
        )
    for key in ("pattern", "special_tokens", "merges"):
        if key not in doc:
            raise ValueError(f'{path}: the "{key}" field is missing')
    pattern = doc["pattern"]
    if pattern is not None and not isinstance(pattern, str):
        raise ValueError(f'{path}: "pattern" must be a string or null')
    specials = doc["special_tokens"]
    if not isinstance(specials, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in specials.items()
    ):
        raise ValueError(f'{path}: "special_tokens" must map token strings to non-negative ids')
    if not isinstance(doc["merges"], list):
        raise ValueError(f'{path}: "merges" must be a list')
    merges = []
    for n, entry in enumerate(doc["merges"]):
        parts = entry.split(" ") if isinstance(entry, str) else []
        if len(parts) != 2 or not all(parts):
            raise ValueError(f'{path}: merge #{n} is {entry!r}; expected "left right"')
        where = f"{path}: merge #{n}: "
        merges.append((str_to_token(parts[0], where), str_to_token(parts[1], where)))
    vocab = None
    if "vocab" in doc:
        if not isinstance(doc["vocab"], dict):
            raise ValueError(f'{path}: "vocab" must map tokens to ids')
        vocab = {}
        for token, i in doc["vocab"].items():
            if not isinstance(i, int) or i < 0:
                raise ValueError(
                    f"{path}: vocab entry {token!r} has id {i!r}; expected a non-negative int"
                )
            vocab[i] = str_to_token(token, f"{path}: vocab: ")
    return {"merges": merges, "special_tokens": specials, "pattern": pattern, "vocab": vocab}


def read_gpt2_files(vocab_path: str | os.PathLike, merges_path: str | os.PathLike):
    """Reads GPT-2 style ``vocab.json`` + ``merges.txt`` (HF) or ``encoder.json`` +
    ``vocab.bpe`` (OpenAI). Returns (vocab: id -> bytes, merges as byte pairs)."""
    vocab_path, merges_path = Path(vocab_path), Path(merges_path)
    try:
        encoder = json.loads(vocab_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{vocab_path}: not a JSON vocabulary ({e})") from None
    if not isinstance(encoder, dict):
        raise ValueError(f"{vocab_path}: expected a JSON object {{token: id}}")
    vocab: dict[int, bytes] = {}
    for token, i in encoder.items():
        if not isinstance(i, int):
            raise ValueError(f"{vocab_path}: token {token!r} has id {i!r}; expected an int")
        vocab[i] = str_to_token(token, f"{vocab_path}: ")
    merges = []
    with open(merges_path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or (lineno == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(parts):
                raise ValueError(
                    f"{merges_path}, line {lineno}: expected 'left right', got {line!r}"
                )
            where = f"{merges_path}, line {lineno}: "
            merges.append((str_to_token(parts[0], where), str_to_token(parts[1], where)))
    return vocab, merges


def _json_bytes(doc) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _ordinary_strings(
    vocab: dict[int, bytes], special_tokens: dict[str, int], where: str
) -> dict[str, int]:
    """{token string: id} for GPT-2 style files: ordinary tokens in byte-to-unicode
    notation, special tokens as their literal text. Strings must be unique."""
    special_ids = set(special_tokens.values())
    strings: dict[str, int] = {}
    items = [(i, token_to_str(t)) for i, t in sorted(vocab.items()) if i not in special_ids]
    items += sorted(((i, t) for t, i in special_tokens.items()), key=lambda it: it[0])
    for i, s in sorted(items):
        if s in strings:
            raise ValueError(
                f"{where}ids {strings[s]} and {i} are the same token {s!r}: the file maps each "
                "token to one id (a vocabulary with repeated bytes cannot be written to it)"
            )
        strings[s] = i
    return strings


# -- GPT-2 files (vocab.json + merges.txt) --------------------------------------------


def write_gpt2_files(
    folder: str | os.PathLike,
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int] | None = None,
    names: tuple[str, str] = ("vocab.json", "merges.txt"),
) -> None:
    """Writes ``vocab.json`` ({token: id}, special tokens as their literal text) and
    ``merges.txt`` (``#version: 0.2`` then one "left right" merge a line) into folder.
    ``names=("encoder.json", "vocab.bpe")`` gives OpenAI's names for the same files."""
    folder = Path(folder)
    vocab_name, merges_name = names
    strings = _ordinary_strings(vocab, special_tokens or {}, f"{folder / vocab_name}: ")
    lines = ["#version: 0.2"] + [token_to_str(a) + " " + token_to_str(b) for a, b in merges]
    atomic_write(folder / vocab_name, _json_bytes(strings))
    atomic_write(folder / merges_name, ("\n".join(lines) + "\n").encode("utf-8"))


# -- tiktoken files (.tiktoken) ---------------------------------------------------------


def read_tiktoken(path: str | os.PathLike) -> dict[bytes, int]:
    """Reads a ``.tiktoken`` file (each line ``base64(token) rank``) into {token: rank}.

    A bad line (bad base64, missing or non-integer rank, a token or rank seen before)
    is a ValueError naming the file and the line number.
    """
    return parse_tiktoken(Path(path).read_bytes(), str(path))


def parse_tiktoken(data: bytes, path: str) -> dict[bytes, int]:
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
    """The ValueError for a native parse failure (``_core.parse_tiktoken``'s args),
    worded as the Python reader words it; None when the Python reader must decide."""
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
    """The Python reader: what a valid ``.tiktoken`` file is (the native parser agrees
    with it on every file it does not hand back)."""
    # Fast path for well-formed files; any doubt falls back to the line-by-line check,
    # which names the line at fault.
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
    """(token, rank) of one line, None for a blank line; a ValueError naming ``where``."""
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


def write_tiktoken(path: str | os.PathLike, ranks: dict[bytes, int]) -> None:
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
    BPE cannot produce the vocabulary, and is a ValueError naming the token. (The loop
    runs in the Rust core, ``ranks.rs``: a 200K vocabulary takes well under a second.)
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


# -- Hugging Face tokenizer.json ----------------------------------------------------------


# Hugging Face runs Split regexes on Oniguruma (Ruby syntax), where `X{1,3}+` is not a
# possessive quantifier but a repetition of `X{1,3}` — so cl100k's `\p{N}{1,3}+` would
# match "1887" whole instead of "188" + "7". At the end of an alternative, possessive
# and greedy `{1,3}` match the same, so exports use the greedy form.
_ONIG_REWRITES = [(r"\p{N}{1,3}+|", r"\p{N}{1,3}|")]


def to_oniguruma(pattern: str) -> str:
    """The pattern as Hugging Face's regex engine must see it to split identically."""
    for ours, theirs in _ONIG_REWRITES:
        pattern = pattern.replace(ours, theirs)
    return pattern


def from_oniguruma(pattern: str) -> str:
    """Undoes :func:`to_oniguruma` for the built-in patterns, so they round-trip."""
    from bytepair.patterns import PATTERNS

    for builtin in PATTERNS.values():
        if pattern == to_oniguruma(builtin):
            return builtin
    return pattern


def write_hf_tokenizer_json(
    path: str | os.PathLike,
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int] | None,
    pattern: str | None,
) -> None:
    """Writes a Hugging Face ``tokenizer.json`` for this byte-level BPE tokenizer.

    ``tokenizers.Tokenizer.from_file`` loads it and encodes text to the same ids as
    bytepair with ``allowed_special="all"``: special tokens are ``added_tokens``
    (matched before pre-tokenization), the pattern is a ``Split`` pre-tokenizer followed
    by ``ByteLevel`` (no regex of its own), and the model is a plain ``BPE``. Special
    tokens also appear in the model's vocab (as GPT-2's file has them), so their ids hold
    whatever they are.
    """
    special_tokens = dict(special_tokens or {})
    strings = _ordinary_strings(vocab, special_tokens, f"{path}: ")
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": False,
    }
    if pattern is None:
        pre_tokenizer = byte_level
    else:
        split = {
            "type": "Split",
            "pattern": {"Regex": to_oniguruma(pattern)},
            "behavior": "Isolated",
            "invert": False,
        }
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [split, byte_level]}
    added = [
        {
            "id": i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for t, i in sorted(special_tokens.items(), key=lambda item: item[1])
    ]
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": strings,
            "merges": [[token_to_str(a), token_to_str(b)] for a, b in merges],
        },
    }
    atomic_write(path, _json_bytes(doc))


def _components(node: dict | None, key: str) -> list[dict]:
    """A pre-tokenizer/normalizer/decoder as a flat list (Sequences unrolled)."""
    if node is None:
        return []
    if not isinstance(node, dict):
        raise ValueError(f"expected an object, got {node!r}")
    if node.get("type") == "Sequence":
        out = []
        for child in node.get(key) or []:
            out += _components(child, key)
        return out
    return [node]


def read_hf_tokenizer_json(
    path: str | os.PathLike,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], dict[str, int], str | None]:
    """Reads a Hugging Face ``tokenizer.json`` of a byte-level BPE model (GPT-2, RoBERTa,
    Llama 3, files written by :func:`write_hf_tokenizer_json`...).

    Returns (vocab: id -> bytes, merges, special tokens: text -> id, pattern). The pattern
    is the ``Split`` pre-tokenizer's regex, or GPT-2's when the ``ByteLevel``
    pre-tokenizer splits by its own regex (``use_regex``, the default). Added tokens
    marked special become special tokens. A component bytepair cannot reproduce exactly
    (a normalizer, a Metaspace/SentencePiece model, byte fallback, ...) is a ValueError
    naming the file and the component.
    """
    from bytepair.patterns import PATTERNS

    path = Path(path)

    def fail(message: str):
        return ValueError(f"{path}: {message}")

    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise fail(f"not a tokenizer.json file (invalid UTF-8 at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise fail(f"not a valid JSON file: {e.msg} at line {e.lineno}, column {e.colno}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise fail('not a Hugging Face tokenizer.json file (no "model" object)')

    model = doc["model"]
    # Files from old versions of tokenizers (GPT-2's) have no "type"; vocab + merges is BPE.
    model_type = model.get("type", "BPE" if "merges" in model else None)
    if model_type != "BPE":
        raise fail(f"model type {model_type!r} is not supported; only byte-level BPE models are")
    if model.get("byte_fallback"):
        raise fail(
            "model.byte_fallback is true (a SentencePiece-style BPE): not supported; only "
            "byte-level BPE models are"
        )
    if model.get("dropout") not in (None, 0, 0.0):
        raise fail(f"model.dropout {model['dropout']!r} makes encoding random: not supported")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise fail(f"model.{key} {model[key]!r} is not supported in a byte-level BPE")

    try:
        normalizers = _components(doc.get("normalizer"), "normalizers")
        pretokenizers = _components(doc.get("pre_tokenizer"), "pretokenizers")
        decoders = _components(doc.get("decoder"), "decoders")
    except ValueError as e:
        raise fail(str(e)) from None
    if normalizers:
        names = ", ".join(str(n.get("type")) for n in normalizers)
        raise fail(f"normalizer {names} changes the text before encoding: not supported")
    pattern: str | None = None
    byte_level = None
    for n, pre in enumerate(pretokenizers):
        kind = pre.get("type")
        if kind == "Split" and byte_level is None and pattern is None:
            if pre.get("behavior") != "Isolated" or pre.get("invert"):
                raise fail(
                    f"pre-tokenizer Split with behavior {pre.get('behavior')!r} and invert "
                    f"{pre.get('invert')!r} is not supported (only Isolated, not inverted)"
                )
            spec = pre.get("pattern") or {}
            if "Regex" in spec:
                pattern = from_oniguruma(spec["Regex"])
            elif "String" in spec:
                pattern = re.escape(spec["String"])
            else:
                raise fail(f"pre-tokenizer Split has no pattern: {pre!r}")
        elif kind == "ByteLevel" and byte_level is None and n == len(pretokenizers) - 1:
            byte_level = pre
        else:
            raise fail(
                f"pre-tokenizer {kind} (at position {n}) is not supported; bytepair reads "
                "byte-level BPE files: [Split] then ByteLevel"
            )
    if byte_level is None:
        raise fail("no ByteLevel pre-tokenizer: not a byte-level BPE tokenizer")
    if byte_level.get("add_prefix_space"):
        raise fail("pre-tokenizer ByteLevel with add_prefix_space true is not supported")
    if byte_level.get("use_regex", True):
        if pattern is not None:
            raise fail(
                "pre-tokenizer Split followed by ByteLevel with use_regex true is not supported"
            )
        pattern = PATTERNS["gpt2"]
    for dec in decoders:
        if dec.get("type") != "ByteLevel":
            raise fail(f"decoder {dec.get('type')} is not supported; expected ByteLevel")

    specials: dict[str, int] = {}
    for n, entry in enumerate(doc.get("added_tokens") or []):
        try:
            content, i = entry["content"], entry["id"]
        except (TypeError, KeyError):
            raise fail(f"added_tokens[{n}] is not {{content, id, ...}}: {entry!r}") from None
        if not entry.get("special"):
            raise fail(
                f"added token {content!r} (id {i}) is not special: bytepair has no "
                "non-special added tokens"
            )
        for key in ("lstrip", "rstrip", "single_word"):
            if entry.get(key):
                raise fail(f"added token {content!r} has {key} true: not supported")
        if not isinstance(content, str) or not isinstance(i, int) or i < 0:
            raise fail(f"added_tokens[{n}] has content {content!r} and id {i!r}")
        specials[content] = i

    special_ids = set(specials.values())
    raw_vocab = model.get("vocab")
    if not isinstance(raw_vocab, dict):
        raise fail("model.vocab must be an object {token: id}")
    vocab: dict[int, bytes] = {}
    for token, i in raw_vocab.items():
        if not isinstance(i, int) or i < 0:
            raise fail(f"model.vocab entry {token!r} has id {i!r}; expected a non-negative int")
        if i in special_ids:
            continue  # special tokens are text, not byte-level strings
        if i in vocab:
            raise fail(f"model.vocab gives id {i} to two tokens")
        vocab[i] = str_to_token(token, f"{path}: model.vocab: ")
    for content, i in specials.items():
        vocab[i] = content.encode("utf-8")

    raw_merges = model.get("merges")
    if not isinstance(raw_merges, list):
        raise fail("model.merges must be a list")
    merges = []
    for n, entry in enumerate(raw_merges):
        parts = entry.split(" ") if isinstance(entry, str) else entry
        if (
            not isinstance(parts, list)
            or len(parts) != 2
            or not all(isinstance(p, str) and p for p in parts)
        ):
            raise fail(
                f'model.merges[{n}] is {entry!r}; expected "left right" or ["left", "right"]'
            )
        where = f"{path}: model.merges[{n}]: "
        merges.append((str_to_token(parts[0], where), str_to_token(parts[1], where)))
    return vocab, merges, specials, pattern
