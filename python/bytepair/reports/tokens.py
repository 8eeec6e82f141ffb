"""What a token is, for people: its kind (letters, digits, whitespace, ...), the
Unicode script of its letters, and a printable form.

>>> token_kind(b" hello"), token_kind(b"\\xe4\\xb8"), token_kind("世界".encode())
(('letters, leading space', 'Latin'), ('partial UTF-8', None), ('letters', 'Han'))
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex

from bytepair._display import printable

__all__ = ["KINDS", "NEVER_IN_UTF8", "printable", "script_of", "token_kind"]

KINDS = (
    "letters, leading space",
    "letters",
    "digits",
    "whitespace",
    "punctuation & symbols",
    "mixed",
    "partial UTF-8",
    "special",
)

# Bytes no valid UTF-8 text holds: C0/C1 would start overlong forms, F5-FF code points
# past U+10FFFF.
NEVER_IN_UTF8 = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])

# The scripts named in reports; letters of any other script count as "Other".
SCRIPTS = (
    "Latin Greek Cyrillic Armenian Hebrew Arabic Syriac Thaana Devanagari Bengali "
    "Gurmukhi Gujarati Oriya Tamil Telugu Kannada Malayalam Sinhala Thai Lao Tibetan "
    "Myanmar Georgian Hangul Ethiopic Cherokee Khmer Mongolian Hiragana Katakana Bopomofo "
    "Han Yi"
).split()
_SCRIPT = regex.compile("|".join(f"(?P<{s}>\\p{{Script={s}}})" for s in SCRIPTS))


@lru_cache(maxsize=1 << 16)
def script_of(char: str) -> str:
    """The Unicode script of one character ("Latin", "Han", ...; "Other" past the list)."""
    m = _SCRIPT.match(char)
    return m.lastgroup if m else "Other"


def _is_letter(c: str) -> bool:
    # Combining marks (Mn/Mc) belong to the letters they sit on (Devanagari vowel signs).
    return c.isalpha() or unicodedata.category(c) in ("Mn", "Mc")


def token_kind(token: bytes) -> tuple[str, str | None]:
    """``(kind, script)``: kind is one of ``KINDS`` except "special"; script is the
    Unicode script of the letters of a letters token ("Mixed" if several), else None."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return "partial UTF-8", None
    if text.isspace():
        return "whitespace", None
    spaced = len(text) > 1 and text[0] == " "
    body = text[1:] if spaced else text
    if all(_is_letter(c) for c in body):
        scripts = {script_of(c) for c in body if c.isalpha()}
        script = scripts.pop() if len(scripts) == 1 else "Mixed"
        return ("letters, leading space" if spaced else "letters"), script
    if body.isdigit():
        return "digits", None
    if all(unicodedata.category(c)[0] in "PS" for c in body):
        return "punctuation & symbols", None
    return "mixed", None
