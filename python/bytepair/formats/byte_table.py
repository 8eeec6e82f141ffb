"""GPT-2's byte-to-unicode table: how byte-level files (GPT-2's ``vocab.json`` and
``merges.txt``, Hugging Face's ``tokenizer.json``, our ``.bytepair``) write tokens,
which are bytes, as readable text.

>>> token_to_str(b" the")
'Ġthe'
>>> str_to_token("Ġthe")
b' the'
"""

from __future__ import annotations

from functools import lru_cache

from bytepair.quoting import short


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


def _translate_tables() -> tuple[dict[int, int], dict[int, int]]:
    """``str.translate`` tables, so a token converts in one C call instead of a Python
    loop over its characters (a 128K-token ``tokenizer.json`` has 700K strings): bytes
    (decoded as Latin-1, one character each) -> GPT-2's characters, and back. Going
    back, a character below U+0100 that GPT-2's table does not use becomes one that
    Latin-1 cannot encode, as every character past the table already is, so encoding
    fails exactly where the text is not byte-level."""
    to_str = {b: ord(c) for b, c in bytes_to_unicode().items()}
    to_bytes = {ord(c): b for b, c in bytes_to_unicode().items()}
    for b in range(256):
        to_bytes.setdefault(b, 0xFFFF)
    return to_str, to_bytes


_TO_STR, _TO_BYTES = _translate_tables()


def token_to_str(token: bytes) -> str:
    """A token in GPT-2 notation: ``b" the"`` -> ``"Ġthe"``."""
    return token.decode("latin-1").translate(_TO_STR)


def str_to_token(text: str, where: str = "") -> bytes:
    """The inverse of :func:`token_to_str`; a character outside the table is an error,
    prefixed with ``where`` (the file and entry)."""
    try:
        return text.translate(_TO_BYTES).encode("latin-1")
    except UnicodeEncodeError:
        pass
    table = unicode_to_bytes()
    bad = next(c for c in text if c not in table)
    raise ValueError(
        f"{where}token {short(text)} has the character {short(bad)}, which is not in GPT-2's "
        "byte-to-unicode table: this is not a byte-level BPE file"
    )
