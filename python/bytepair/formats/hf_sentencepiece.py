"""The SentencePiece family in Hugging Face's ``tokenizer.json`` (Llama 2, Mistral):
a ``BPE`` model with ``byte_fallback``, a ``Metaspace`` pre-tokenizer (or the
legacy ``Prepend("▁")`` + ``Replace(" ", "▁")`` normalizer), read into and written
from the ``sentencepiece`` model kind.

HF has no piece scores: its merges are every way of cutting a piece in two, in the
order of the pieces' scores (what ``transformers``' converter writes). Reading turns
merge order back into scores (a piece scores minus the rank of its first merge),
which encodes the same. Writing keeps the exact ``.model`` inside the file too (as
base64, under ``model.bytepair_sentencepiece_model``; ``tokenizers`` ignores it), so
``.model`` -> ``tokenizer.json`` -> ``.model`` is byte for byte.

Ids equal ``tokenizers``' except in two known ways (HF's, not sentencepiece's):
a text starting with a space gets no extra dummy "▁" in HF (" a": HF ``▁a``,
sentencepiece ``▁ ▁a``), and HF matches added tokens such as ``[INST]`` inside any
text, where we match only the special tokens the caller allows.
"""

from __future__ import annotations

import base64
import os

from bytepair.formats.errors import short
from bytepair.formats.sentencepiece import build
from bytepair.models import SentencePiece

SPACE = "\u2581"
#: Where the exact ``.model`` travels inside a ``tokenizer.json``.
EMBEDDED = "bytepair_sentencepiece_model"


def is_sentencepiece(doc: dict) -> bool:
    """True for a ``tokenizer.json`` of the SentencePiece family."""
    model = doc.get("model") or {}
    if model.get("byte_fallback") or EMBEDDED in model:
        return True
    pre = doc.get("pre_tokenizer") or {}
    kinds = [pre.get("type")] + [p.get("type") for p in pre.get("pretokenizers") or []]
    return "Metaspace" in kinds


# -- writing ------------------------------------------------------------------------------


def _merges(pieces: list[tuple[str, float, str]]) -> list[list[str]]:
    """Every cut of a NORMAL piece into two NORMAL pieces, best-scoring piece first."""
    ids = {p: i for i, (p, _, piece_type) in enumerate(pieces) if piece_type == "NORMAL"}
    found = []
    for piece, i in ids.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in ids and right in ids:
                found.append((-pieces[i][1], i, ids[left], left, right))
    return [[left, right] for *_, left, right in sorted(found)]


def _template(model) -> dict | None:
    """The post-processor that puts ``<s>`` / ``</s>`` around texts, as the model does."""
    bos = [model.id_to_piece(model.bos_id)] if model.add_bos else []
    eos = [model.id_to_piece(model.eos_id)] if model.add_eos else []
    if not bos and not eos:
        return None

    def seq(name: str, type_id: int) -> list[dict]:
        specials = [{"SpecialToken": {"id": t, "type_id": type_id}} for t in bos]
        tail = [{"SpecialToken": {"id": t, "type_id": type_id}} for t in eos]
        return [*specials, {"Sequence": {"id": name, "type_id": type_id}}, *tail]

    return {
        "type": "TemplateProcessing",
        "single": seq("A", 0),
        "pair": seq("A", 0) + seq("B", 1),
        "special_tokens": {
            t: {"id": t, "ids": [model.piece_to_id(t)], "tokens": [t]} for t in bos + eos
        },
    }


def tokenizer_json(model: SentencePiece) -> dict:
    """The ``tokenizer.json`` of a SentencePiece tokenizer (see the module docstring);
    ValueError for a normalizer HF's components cannot express exactly."""
    settings = model.core.settings()
    inexact = [
        what
        for what, bad in (
            (f"normalization rules ({settings['name']})", settings["has_charsmap"]),
            ("remove_extra_whitespaces", settings["remove_extra_whitespaces"]),
            ("escape_whitespaces off", not settings["escape_whitespaces"]),
            ("treat_whitespace_as_suffix", settings["treat_whitespace_as_suffix"]),
        )
        if bad
    ]
    if inexact:
        raise ValueError(
            f"this SentencePiece model has {', '.join(inexact)}, which tokenizer.json cannot "
            "express exactly; keep the .model file (or .bytepair)"
        )
    pieces = model.pieces
    dummy = settings["add_dummy_prefix"]
    from bytepair.formats.hf import added_token

    added = [
        added_token(i, piece, special=piece_type != "USER_DEFINED")
        for i, (piece, _, piece_type) in enumerate(pieces)
        if piece_type in ("UNKNOWN", "CONTROL", "USER_DEFINED")
    ]
    decoders = [
        {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]
    if dummy:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Metaspace",
            "replacement": SPACE,
            "prepend_scheme": "first" if dummy else "never",
            "split": False,
        },
        "post_processor": _template(model),
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": settings["unk_piece"],
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": settings["byte_fallback"],
            "ignore_merges": False,
            "vocab": {piece: i for i, (piece, _, _) in enumerate(pieces)},
            "merges": _merges(pieces),
            EMBEDDED: base64.b64encode(model.to_bytes()).decode("ascii"),
        },
    }


def config_roles(model: SentencePiece) -> dict[str, str | None]:
    """bos/eos/unk for ``tokenizer_config.json``: the model's own pieces."""
    settings = model.core.settings()
    return {
        "bos_token": settings["bos_piece"] if model.bos_id is not None else None,
        "eos_token": settings["eos_piece"] if model.eos_id is not None else None,
        "unk_token": settings["unk_piece"],
    }


# -- reading ------------------------------------------------------------------------------


def _options(doc: dict) -> tuple[bool, bool, str, str]:
    """(add_bos, add_eos, bos piece, eos piece) from a TemplateProcessing post-processor."""
    post = doc.get("post_processor") or {}
    if post.get("type") == "Sequence":
        post = next(
            (p for p in post.get("processors") or [] if p.get("type") == "TemplateProcessing"), {}
        )
    single = post.get("single") or [] if post.get("type") == "TemplateProcessing" else []
    names = [item.get("SpecialToken", {}).get("id") for item in single]
    bos = names[0] if names and names[0] else None
    eos = names[-1] if len(names) > 1 and names[-1] else None
    return bos is not None, eos is not None, bos or "<s>", eos or "</s>"


def _add_dummy_prefix(doc: dict, fail) -> bool:
    """Whether a dummy "▁" starts the text: from Metaspace, or the legacy normalizer."""
    from bytepair.formats.hf import _components

    dummy = None
    for pre in _components(doc.get("pre_tokenizer"), "pretokenizers"):
        if pre.get("type") != "Metaspace":
            raise fail(f"pre-tokenizer {pre.get('type')} is not supported with Metaspace")
        if pre.get("replacement", SPACE) != SPACE:
            raise fail(f"Metaspace replacement {pre.get('replacement')!r} is not supported")
        scheme = pre.get("prepend_scheme")
        if scheme is None:
            scheme = "always" if pre.get("add_prefix_space", True) else "never"
        dummy = scheme != "never"
    for norm in _components(doc.get("normalizer"), "normalizers"):
        component = norm.get("type")
        if component == "Prepend" and norm.get("prepend") == SPACE:
            dummy = True
        elif component == "Replace" and norm.get("content") == SPACE:
            dummy = bool(dummy)
        else:
            raise fail(f"normalizer {component} is not supported for a SentencePiece-style BPE")
    if dummy is None:
        raise fail("neither a Metaspace pre-tokenizer nor a Replace(' ', '▁') normalizer")
    return dummy


def config_specials(model: SentencePiece) -> dict[str, int]:
    """The special tokens ``tokenizer_config.json`` lists: the CONTROL pieces and
    ``<unk>`` (a piece of its own type)."""
    return {**model.special_tokens, model.id_to_piece(model.unk_id): model.unk_id}


def from_doc(doc: dict, path: str | os.PathLike) -> SentencePiece:
    """The SentencePiece model in a parsed ``tokenizer.json``."""

    def fail(message: str):
        return ValueError(f"{path}: {message}")

    model = doc["model"]
    if model.get("type", "BPE") != "BPE":
        raise fail(f"model type {model.get('type')!r}: only BPE SentencePiece models are supported")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or sorted(vocab.values()) != list(range(len(vocab))):
        raise fail("model.vocab must give the ids 0..n-1, each once")
    by_id = sorted(vocab, key=vocab.__getitem__)
    add_bos, add_eos, bos, eos = _options(doc)
    options = {"add_bos": add_bos, "add_eos": add_eos}
    if EMBEDDED in model:
        embedded = SentencePiece.from_bytes(base64.b64decode(model[EMBEDDED]), str(path), **options)
        if [p for p, _, _ in embedded.pieces] == by_id:
            return embedded
    added = {t["id"]: t for t in doc.get("added_tokens") or []}
    unk = model.get("unk_token") or "<unk>"
    byte_fallback = bool(model.get("byte_fallback"))
    first_rank: dict[str, int] = {}
    merges = model.get("merges") or []
    for rank, entry in enumerate(merges):
        left, right = entry.split(" ", 1) if isinstance(entry, str) else entry
        for part in (left, right, left + right):
            if part not in vocab:
                raise fail(
                    f"model.merges[{rank}] ({short(left)}, {short(right)}): {short(part)} is not in vocab"
                )
        first_rank.setdefault(left + right, rank)
    pieces = []
    for i, piece in enumerate(by_id):
        if piece == unk:
            piece_type = "UNKNOWN"
        elif i in added:
            piece_type = "CONTROL" if added[i].get("special") else "USER_DEFINED"
        elif byte_fallback and len(piece) == 6 and piece.startswith("<0x") and piece[5] == ">":
            piece_type = "BYTE"
        else:
            piece_type = "NORMAL"
        score = -float(first_rank.get(piece, len(merges) + i)) if piece_type == "NORMAL" else 0.0
        pieces.append((piece, score, piece_type))
    data = build(
        pieces,
        byte_fallback=byte_fallback,
        add_dummy_prefix=_add_dummy_prefix(doc, fail),
        unk_piece=unk,
        bos_piece=bos,
        eos_piece=eos,
    )
    return SentencePiece.from_bytes(data, str(path), **options)
