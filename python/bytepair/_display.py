"""How a token is shown to people: the one printable form the CLI summaries and the
reports share.

>>> print(printable(b"hi"), printable(b" \\n"), printable(b"\\xe4\\xb8"))
"hi" " \\n" "\\xe4\\xb8"
"""

from __future__ import annotations

#: Tokens longer than this many bytes are shown cut (a run of one letter can merge into
#: a token of megabytes).
SHOWN_BYTES = 64


def printable(token: bytes) -> str:
    """A token in quotes: text where it is text, ``\\n``/``\\t`` escapes, ``\\xNN`` for
    bytes that are not whole UTF-8 characters; a long one cut, saying its length.

    >>> printable(b"a" * 100)
    '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"… (100 bytes)'
    """
    if len(token) > SHOWN_BYTES:
        return f"{printable(token[:SHOWN_BYTES])}… ({len(token):,} bytes)"
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        text = token.decode("utf-8", errors="backslashreplace")
    else:
        if text.isprintable():  # the common case: nothing to escape
            return f'"{text}"'
    out = []
    for c in text:
        if c.isprintable() or c == "\\":
            out.append(c)
        else:
            out.append(c.encode("unicode_escape").decode("ascii"))
    return '"' + "".join(out) + '"'
