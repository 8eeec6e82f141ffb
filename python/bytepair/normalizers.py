"""Normalizers: how a byte-level BPE model rewrites the text between special and added
tokens before pre-tokenizing, as a Hugging Face ``tokenizer.json``'s ``normalizer``
does. ``tokenizers`` normalizes each such segment on its own, so Prepend and Strip act
at the segment's edges. The core applies them (``src/bpe/normalizer.rs``: ``Step``,
``Normalizer``).

A step is a name, ``"NFC"``, ``"NFKC"``, ``"NFD"``, ``"NFKD"`` or ``"Lowercase"``, or:

- ``Replace(pattern, content, regex=False)``: every match of the literal (or regex)
  ``pattern``, leftmost first and not overlapping, becomes ``content``: ``"aa"`` in
  ``"aaa"`` gives ``"Xa"``;
- ``Prepend(prepend)``: ``prepend`` before a segment that is not empty;
- ``Strip(left, right)``: whitespace (Rust's ``char::is_whitespace``) taken off the
  segment's start and/or end.

>>> describe(("NFC", Replace(" ", "▁"), Prepend("▁"), Strip(True, False)))
"NFC+Replace(' ' -> '▁')+Prepend('▁')+Strip(left)"
>>> to_json(Replace(r"\\s+", " ", regex=True))
{'type': 'Replace', 'pattern': {'Regex': '\\\\s+'}, 'content': ' '}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Union

#: The steps without settings, by their ``tokenizer.json`` names.
NAMES = ("NFC", "NFKC", "NFD", "NFKD", "Lowercase")


class Replace(NamedTuple):
    """``tokenizers``' ``Replace``: ``pattern`` (a regex when ``regex``) -> ``content``."""

    pattern: str
    content: str
    regex: bool = False


class Prepend(NamedTuple):
    """``tokenizers``' ``Prepend``: ``prepend`` before each segment that is not empty."""

    prepend: str


class Strip(NamedTuple):
    """``tokenizers``' ``Strip``: whitespace off each segment's start (``left``) and end
    (``right``)."""

    left: bool = True
    right: bool = True


Step = Union[str, Replace, Prepend, Strip]  # noqa: UP007 (read at run time on 3.10)

#: The step classes by their ``tokenizer.json`` type.
CLASSES = {"Replace": Replace, "Prepend": Prepend, "Strip": Strip}


def steps_of(normalizer: str | Iterable[Step]) -> tuple[Step, ...]:
    """``normalizer`` (one name, or steps) as a tuple of steps, their settings checked;
    names are checked by the core. ``"NFC" -> ("NFC",)``."""
    if isinstance(normalizer, str):
        return (normalizer,)
    out: list[Step] = []
    for n, step in enumerate(normalizer):
        if isinstance(step, str):
            out.append(step)
            continue
        fields = {
            Replace: (str, str, bool),
            Prepend: (str,),
            Strip: (bool, bool),
        }.get(type(step))
        if fields is None or not all(isinstance(v, t) for v, t in zip(step, fields)):
            raise ValueError(
                f"normalizer step #{n} is {step!r}; expected a name ({', '.join(NAMES)}), "
                "Replace(pattern, content, regex), Prepend(text) or Strip(left, right)"
            )
        out.append(step)
    return tuple(out)


def keeps_text_cuts(steps: Iterable[Step]) -> bool:
    """Can text be cut at the pattern's newline and space cuts and its parts normalized
    apart? Under the Unicode forms and Lowercase; not under Replace, Prepend or Strip
    (they act at a segment's edges, or a match may span a cut)."""
    return all(isinstance(step, str) for step in steps)


def describe(steps: Iterable[Step]) -> str:
    """The steps in a few words, for messages and ``repr``."""
    words = []
    for step in steps:
        if isinstance(step, Replace):
            kind = "regex " if step.regex else ""
            words.append(f"Replace({kind}{step.pattern!r} -> {step.content!r})")
        elif isinstance(step, Prepend):
            words.append(f"Prepend({step.prepend!r})")
        elif isinstance(step, Strip):
            sides = [side for side, on in (("left", step.left), ("right", step.right)) if on]
            words.append(f"Strip({', '.join(sides) or 'nothing'})")
        else:
            words.append(str(step))
    return "+".join(words)


def core_steps(steps: Iterable[Step]) -> list:
    """The steps as the core takes them: names, and ``(type, *settings)`` tuples."""
    return [step if isinstance(step, str) else (type(step).__name__, *step) for step in steps]


def to_json(step: Step) -> dict:
    """The ``tokenizer.json`` node of a step."""
    if isinstance(step, Replace):
        pattern = {"Regex" if step.regex else "String": step.pattern}
        return {"type": "Replace", "pattern": pattern, "content": step.content}
    if isinstance(step, Prepend):
        return {"type": "Prepend", "prepend": step.prepend}
    if isinstance(step, Strip):
        return {"type": "Strip", "strip_left": step.left, "strip_right": step.right}
    return {"type": step}


def from_json(node: dict) -> Step:
    """The step of a ``tokenizer.json`` node (no Sequence), or a ValueError naming it.
    A Replace regex is returned as it is: the format checks it is read by bytepair's
    regex engine as by ``tokenizers``' (``formats.hf.oniguruma_difference``)."""
    kind = node.get("type")
    if kind in NAMES:
        return kind
    if kind == "Replace":
        pattern, content = node.get("pattern"), node.get("content")
        if (
            not isinstance(pattern, dict)
            or len(pattern) != 1
            or not isinstance(next(iter(pattern.values())), str)
            or next(iter(pattern)) not in ("String", "Regex")
            or not isinstance(content, str)
        ):
            raise ValueError(
                f"normalizer Replace has pattern {pattern!r} and content {content!r}; "
                'expected {"String": text} or {"Regex": regex}, and a text'
            )
        ((key, value),) = pattern.items()
        return Replace(value, content, key == "Regex")
    if kind == "Prepend" and isinstance(node.get("prepend"), str):
        return Prepend(node["prepend"])
    if kind == "Strip" and all(
        isinstance(node.get(k), bool) for k in ("strip_left", "strip_right")
    ):
        return Strip(node["strip_left"], node["strip_right"])
    if kind in CLASSES:
        raise ValueError(f"normalizer {kind} has settings bytepair cannot read: {node!r}")
    raise ValueError(
        f"normalizer {kind} changes the text before encoding: not supported (only "
        f"{', '.join(NAMES)}, Replace, Prepend, Strip and Sequences of them are)"
    )
