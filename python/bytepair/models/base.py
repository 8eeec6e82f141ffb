"""The one interface every model kind gives :class:`~bytepair.Tokenizer`.

A model is data (what a file stores) plus its compiled core (``model.core``, an object
of ``bytepair._core`` with one method set for every kind: ``encode``, ``count``,
``encode_batch``, ``encode_prefix``, ``encode_file``, ``decode_bytes``...). The
tokenizer, the formats and the reports ask the model what it can do; nothing outside
``bytepair.models`` asks which kind it is. Where kinds differ, the model says so
through its data (``merges`` is None for a kind that merges by score) or raises
:class:`Unsupported` with the reason.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from bytepair.quoting import short


class Unsupported(ValueError):
    """This kind of model cannot do what was asked; the message says why and what to
    do instead (a ValueError, so ``except ValueError`` still catches it)."""


@runtime_checkable
class Model(Protocol):
    """What a tokenizer needs of a model (see the module docstring)."""

    #: The compiled core: ``bytepair._core.Encoder`` or ``SentencePieceModel``.
    core: Any
    #: The pre-tokenization regex (None: none, or the kind splits text its own way).
    pattern: str | None
    #: Whether long text may be cut at the pattern's newline and space cuts without
    #: changing its ids (``sources.part_chars_for``; the core asks ``safe_cuts``).
    keeps_text_cuts: bool

    @property
    def kind(self) -> str:
        """A short name of the kind, for people (``repr``, reports): never branch on it."""
        ...

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special token -> id (the model's own dict: do not change it)."""
        ...

    @property
    def vocab(self) -> dict[int, bytes]:
        """id -> the bytes each token stands for, special tokens included."""
        ...

    @property
    def merges(self) -> list[tuple[bytes, bytes]] | None:
        """The merges in rank order, or None for a kind without merges."""
        ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def max_token_value(self) -> int: ...

    @property
    def ids_of_bytes(self) -> dict[bytes, int]:
        """Ordinary token bytes -> id (the lowest id where bytes repeat)."""
        ...

    @property
    def byte_fallback_ids(self) -> frozenset[int]:
        """Ids that stand for one raw byte when text has no token (SentencePiece's
        ``<0x0A>``...); empty for a kind that has every byte as a token."""
        ...

    def token_bytes(self, token: int) -> bytes:
        """The bytes of one token; KeyError naming an unknown id."""
        ...

    def surfaces(self, ids: list[int]) -> list[bytes]:
        """What each id adds to ``decode_bytes(ids)`` in this context, so that
        ``b"".join(surfaces(ids)) == decode_bytes(ids)``."""
        ...

    def open_tail(self, ids: list[int]) -> int:
        """How many of the last ``ids`` a later id can still change the surfaces of
        (0 for most kinds; streaming holds their text back until they are settled)."""
        ...

    def with_special_tokens(self, special_tokens: dict[str, int] | Iterable[str]) -> Model:
        """The same model with more special tokens, or :class:`Unsupported`."""
        ...

    #: The special tokens ``add_bos`` / ``add_eos`` put before / after every text
    #: (None: the model names none; a SentencePiece model's are ``<s>`` and ``</s>``).
    bos_token: str | None
    eos_token: str | None

    @property
    def add_bos(self) -> bool:
        """Whether every text's ids start with ``bos_token``'s."""
        ...

    @property
    def add_eos(self) -> bool:
        """Whether every text's ids end with ``eos_token``'s."""
        ...

    def with_options(self, **options) -> Model:
        """The same model with other options — ``add_bos``, ``add_eos`` (and for a
        kind without its own, ``bos_token`` / ``eos_token``) for every kind — or
        :class:`Unsupported` naming the option this kind does not have."""
        ...

    def describe(self) -> str:
        """The model in a few words, for ``repr(tokenizer)``."""
        ...

    def why_not(self, what: str) -> str:
        """Why this kind cannot do ``what`` (e.g. ``"merges"``), for error messages."""
        ...


#: The options every kind takes (:meth:`Model.with_options`): the frame of each text.
FRAME_OPTIONS = ("add_bos", "add_eos", "bos_token", "eos_token")


def frame_options(model: Model) -> dict:
    """``model``'s frame as :meth:`Model.with_options` takes it (to carry it over to a
    model rebuilt from this one)."""
    return {name: getattr(model, name) for name in FRAME_OPTIONS}


def with_frame(
    model,
    *,
    add_bos: bool | None = None,
    add_eos: bool | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
    id_of=None,
):
    """A copy of ``model`` whose core puts ``bos_token`` before / ``eos_token`` after
    every text as ``add_bos`` / ``add_eos`` say (None: as ``model`` does). The tokens
    must be special tokens of the model (``id_of``: how else to find their ids). The
    copy shares the model's data (the core's ``with_frame``): nothing is rebuilt."""
    bos = model.bos_token if bos_token is None else bos_token
    eos = model.eos_token if eos_token is None else eos_token
    add_bos = model.add_bos if add_bos is None else bool(add_bos)
    add_eos = model.add_eos if add_eos is None else bool(add_eos)

    def ids(add: bool, token: str | None, which: str) -> list[int]:
        if id_of is not None:
            return [id_of(token)] if add else []
        if token is not None and token not in model.special_tokens:
            raise ValueError(f"{which}_token {short(token)} is not a special token of this model")
        if not add:
            return []
        if token is None:
            raise ValueError(
                f"add_{which}=True: this model names no {which.upper()} token; name one of "
                f"its special tokens with {which}_token=..."
            )
        return [model.special_tokens[token]]

    before, after = ids(add_bos, bos, "bos"), ids(add_eos, eos, "eos")
    framed = copy.copy(model)
    # No longer the bundled encoding of that name (which pickles as its name alone).
    framed.__dict__.pop("name", None)
    framed.core = model.core.with_frame(before, after)
    framed.bos_token, framed.eos_token = bos, eos
    return framed


def registered(table: dict, model):
    """The entry of ``table`` (keyed by model class) for ``model``'s class or a base of
    it, else None: how formats register their readers and writers per kind."""
    for cls in type(model).__mro__:
        if cls in table:
            return table[cls]
    return None


def ids_of_bytes(vocab: dict[int, bytes], special_ids: Iterable[int]) -> dict[bytes, int]:
    """Ordinary token bytes -> id, the lowest id winning where bytes repeat.

    >>> ids_of_bytes({0: b"a", 1: b"b", 2: b"a", 3: b"<s>"}, {3})
    {b'a': 0, b'b': 1}
    """
    special = set(special_ids)
    out: dict[bytes, int] = {}
    for i, t in sorted(vocab.items(), reverse=True):
        if i not in special:
            out[t] = i
    return dict(sorted(out.items(), key=lambda item: item[1]))
