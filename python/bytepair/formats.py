"""Reading and writing tokenizer files.

- our own format (``.bytepair``, see :func:`save` for the layout): one versioned,
  human-readable JSON file with the pattern, special tokens and merges — loading it
  runs no code;
- GPT-2 / Hugging Face files: ``vocab.json`` (or ``encoder.json``) + ``merges.txt``
  (or ``vocab.bpe``), whose tokens are written with GPT-2's byte-to-unicode table.

Writers go through a temporary file and a rename, so a failed write never leaves a
half-written file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

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


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Writes data to path via a temporary file in the same folder and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
