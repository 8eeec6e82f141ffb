"""How format readers say what is wrong with a file: quoted values kept short, and JSON
parsed with every failure — bad UTF-8, bad syntax, nesting too deep for the parser — a
ValueError naming the file.

>>> parse_json(b"[[1]]", "f.json")
[[1]]
"""

from __future__ import annotations

import json
import os

from bytepair.quoting import short

__all__ = ["parse_json", "short"]


def parse_json(raw: bytes | str, path: str | os.PathLike, what: str = "JSON file"):
    """The JSON document in ``raw`` (the contents of ``path``); a ValueError naming the
    file and the place for anything that is not JSON."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a {what} (invalid UTF-8 at byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path}: not a valid {what}: {e.msg} at line {e.lineno}, column {e.colno}"
        ) from None
    except RecursionError:
        raise ValueError(f"{path}: not a {what}: arrays or objects nested too deeply") from None
