"""A Griffe extension for the API pages: doctest examples in docstrings become code blocks.

bytepair's docstrings carry doctest-style examples (``>>> tok.encode("hi")`` followed by
the output), as tiktoken's and minbpe's do. Markdown reads a line starting with ``>``
as a quotation, and an output such as ``[(b'a', b'a')]`` as a link, so each run of
``>>>`` lines and their output (up to a blank line) is wrapped in a ``pycon`` fence
before mkdocstrings renders the docstring. The sources stay plain doctests.
"""

from __future__ import annotations

import griffe


def fence_doctests(text: str) -> str:
    """Wraps each doctest run of ``text`` (its ``>>>`` lines and their output, up to a
    blank line or a line indented less) in a fenced ``pycon`` block; text already inside
    a fence is left alone. ``tests/test_docs.py`` shows an input and its output.
    """
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith("```"):
            in_fence = not in_fence
        if in_fence or not stripped.startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fences the doctest examples of every docstring Griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
