"""SentencePiece ``.model`` files (Llama 2, Mistral): the serialized ``ModelProto``
(protobuf) of the ``sentencepiece`` library, read and written byte for byte by the
core (``src/spm/proto.rs``); BPE models only (a Unigram model is refused).

The file holds everything: pieces with scores and types, the trainer and normalizer
settings. Not the ``add_bos`` / ``add_eos`` options (sentencepiece takes them per
call): they are given when loading (``bytepair.load(path, add_bos=True)``) and kept
by our own ``.bytepair`` file and by ``tokenizer.json``.

:func:`build` writes a ``ModelProto`` from parts, for files that hold a SentencePiece
model in another form (a Hugging Face ``tokenizer.json``).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from bytepair._files import atomic_write
from bytepair.models import SentencePiece

SUFFIXES = (".model",)
#: sentencepiece's piece types, by their number in the protobuf.
TYPES = {"NORMAL": 1, "UNKNOWN": 2, "CONTROL": 3, "USER_DEFINED": 4, "BYTE": 6, "UNUSED": 5}


def sniff(head: bytes) -> bool:
    """True if ``head`` starts like a ``ModelProto``: field 1 (a piece, length-
    delimited) whose own first field is the piece string (also field 1)."""
    if len(head) < 3 or head[0] != 0x0A:
        return False
    at = 1
    while at < len(head) and head[at] & 0x80:  # the piece's length, a varint
        at += 1
    return at + 1 < len(head) and head[at + 1] == 0x0A


def from_bytes(data: bytes, path: str | os.PathLike = "<bytes>", **options) -> SentencePiece:
    """The model in a ``.model`` file's bytes; options: ``add_bos``, ``add_eos``."""
    return SentencePiece.from_bytes(data, str(path), **options)


def read(path: str | os.PathLike, **options) -> SentencePiece:
    """Loads a ``.model`` file (ValueError naming the file, and the byte offset when
    it is corrupt)."""
    return from_bytes(Path(path).read_bytes(), path, **options)


def write(model: SentencePiece, path: str | os.PathLike) -> None:
    """Writes the ``.model`` file (identical to the one the model was loaded from)."""
    atomic_write(path, model.to_bytes())


WRITERS = {SentencePiece: write}


# -- writing a ModelProto from parts ------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value) -> bytes:
    """One protobuf field: bytes/str (length-delimited), float (fixed32), bool/int."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, bytes):
        return _varint(number << 3 | 2) + _varint(len(value)) + value
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    return _varint(number << 3) + _varint(int(value))


def build(
    pieces: list[tuple[str, float, str]],
    *,
    byte_fallback: bool,
    add_dummy_prefix: bool = True,
    remove_extra_whitespaces: bool = False,
    unk_piece: str = "<unk>",
    bos_piece: str = "<s>",
    eos_piece: str = "</s>",
) -> bytes:
    """The ``.model`` bytes of a BPE model with these pieces ((piece, score, type) in
    id order) and an identity normalizer."""
    out = bytearray()
    for piece, score, piece_type in pieces:
        body = _field(1, piece) + _field(2, float(score))
        if piece_type != "NORMAL":
            body += _field(3, TYPES[piece_type])
        out += _field(1, body)
    trainer = _field(3, 2) + _field(4, len(pieces))  # model_type BPE, vocab_size
    trainer += _field(35, byte_fallback)
    for number, name, default in (
        (45, unk_piece, "<unk>"),
        (46, bos_piece, "<s>"),
        (47, eos_piece, "</s>"),
    ):
        if name != default:
            trainer += _field(number, name)
    out += _field(2, trainer)
    normalizer = _field(1, "identity") + _field(3, add_dummy_prefix)
    normalizer += _field(4, remove_extra_whitespaces) + _field(5, True)
    out += _field(3, normalizer)
    return bytes(out)
