"""Values quoted in error messages, kept short: a damaged file can hold a 10 MB "token",
and a message that repeats it whole helps nobody.

>>> short("A" * 1000)
"'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA… (1,000 characters)"
>>> short(b"ab")
"b'ab'"
"""

from __future__ import annotations

#: Quoted values longer than this are cut (a damaged file can hold a 10 MB "token").
LIMIT = 80


def short(value) -> str:
    """``repr(value)``, cut to about :data:`LIMIT` characters, saying how long it was."""
    text = repr(value)
    if len(text) <= LIMIT:
        return text
    size = len(value) if isinstance(value, (str, bytes, list, dict, tuple)) else len(text)
    unit = (
        "bytes"
        if isinstance(value, bytes)
        else "items"
        if not isinstance(value, str)
        else "characters"
    )
    return f"{text[:60]}… ({size:,} {unit})"
