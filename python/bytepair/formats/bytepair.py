"""Our own format, ``.bytepair``: one versioned, human-readable JSON file with the
pattern, the special tokens and the merges, one merge per line (readable, diffable);
loading it runs no code. Layout::

    {
      "format": "bytepair",
      "version": 1,
      "pattern": "<regex or null>",
      "special_tokens": {"<|endoftext|>": 500},
      "merges": [
        "Ġ t",
        ...
      ]
    }

A model that normalizes its text or has non-special added tokens (loaded from a Hugging
Face file: Qwen2's NFC, Qwen2.5's ``<tool_call>``) also has, after
``"special_tokens"``, ``"normalizer": ["NFC", ...]`` (the steps in order: a name, or
a Replace, Prepend or Strip as ``tokenizer.json`` writes it, ``{"type": "Prepend",
"prepend": "▁"}``; ``bytepair.normalizers``) and
``"added_tokens": {"<tool_call>": 151657}`` (matched whatever ``allowed_special``
says, never refused). Both are written only when not empty; a file without them
loads as before. So are, from a Hugging Face file whose pre-tokenizer splits the
pattern's pieces further (DeepSeek V3) or whose BPE looks whole pieces up first (Llama
3), ``"splits": [["<regex>", "Isolated", false], ...]`` (``bytepair.split``: pattern,
behavior, invert; applied in order after ``"pattern"``) and ``"ignore_merges": true``.
Special or added tokens matched with a Hugging Face file's flags (RoBERTa's ``<mask>``
takes the whitespace before it) have ``"token_flags": {"<mask>": ["lstrip"]}`` (any of
``"lstrip"``, ``"rstrip"``, ``"single_word"``: ``bytepair.specials.TOKEN_FLAGS``),
written only when some token has one; a SentencePiece model keeps the same object in
``"hf"``.
A model that puts a BOS or EOS token around every text (a Hugging Face file's
``TemplateProcessing``, or ``with_options``) has ``"bos_token"`` / ``"eos_token"``
(special tokens) and ``"add_bos"`` / ``"add_eos"`` (true or false).

Merges are ``"left right"`` in GPT-2's byte-to-unicode notation, in rank order: merge
*i* is token 256 + *i*. A ``"vocab"`` object (``{token: id}``) is written only when the
ids do not follow that layout (a vocabulary loaded from elsewhere).

A SentencePiece model (``"model": "sentencepiece"``) is its ``.model`` bytes, which
hold everything (pieces, scores, types, normalizer), as base64, and the options that
file has no place for::

    {"format": "bytepair", "version": 1, "model": "sentencepiece",
     "add_bos": false, "add_eos": false, "sentencepiece_model": "<base64>"}

and, for one read from a ``tokenizer.json``, ``"hf"``: the rules it encodes by there
(``{"prefix": "first", "split": false, "added": [...], "specials": [...]}``).

A model by tiktoken's rule over ranks that merges cannot build (``"model":
"tiktoken_ranks"``, :class:`~bytepair.models.RankBPE`: Llama 3) has no merge list to
write; it keeps its ranks instead, ``"token rank"`` in GPT-2's notation, one a line::

    {"format": "bytepair", "version": 1, "model": "tiktoken_ranks",
     "pattern": "<regex>", "special_tokens": {...}, "ranks": ["! 0", ...]}
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable
from pathlib import Path

from bytepair import normalizers
from bytepair._files import atomic_write
from bytepair.formats.byte_table import str_to_token, token_to_str
from bytepair.formats.errors import parse_json, short
from bytepair.formats.gpt2 import json_string
from bytepair.models import BPE, Model, RankBPE, SentencePiece, Unsupported
from bytepair.models import ranks as ranks_models
from bytepair.models.base import registered
from bytepair.models.bpe import canonical_vocab
from bytepair.specials import token_flags_of
from bytepair.split import splits_of

FORMAT_NAME = "bytepair"
FORMAT_VERSION = 1
SUFFIXES = (".bytepair",)


def sniff(head: bytes) -> bool:
    """True if a file starting with ``head`` is one of ours."""
    return b'"format": "bytepair"' in head[:4096] or b'"format":"bytepair"' in head[:4096]


def dumps(
    merges: list[tuple[bytes, bytes]],
    special_tokens: dict[str, int],
    pattern: str | None,
    vocab: dict[int, bytes] | None,
    added_tokens: dict[str, int] | None = None,
    normalizer: tuple[normalizers.Step, ...] = (),
    splits: tuple = (),
    ignore_merges: bool = False,
    frame: dict | None = None,
    token_flags: dict[str, tuple[str, ...]] | None = None,
) -> str:
    """The text of a ``.bytepair`` file (see the module docstring for the layout)."""
    head = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "pattern": pattern,
        "special_tokens": special_tokens,
    }
    if normalizer:
        head["normalizer"] = [
            n if isinstance(n, str) else normalizers.to_json(n) for n in normalizer
        ]
    if added_tokens:
        head["added_tokens"] = added_tokens
    if splits:
        head["splits"] = [list(split) for split in splits]
    if ignore_merges:
        head["ignore_merges"] = True
    if token_flags:
        head["token_flags"] = {t: list(flags) for t, flags in token_flags.items()}
    head.update(frame or {})
    blocks = []
    if vocab is not None:
        entries = (f"{json_string(token_to_str(token))}: {i}" for i, token in sorted(vocab.items()))
        blocks.append(("vocab", "{}", entries))
    entries = (
        json_string(token_to_str(left) + " " + token_to_str(right)) for left, right in merges
    )
    blocks.append(("merges", "[]", entries))
    return _layout(head, blocks)


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _layout(head: dict, blocks: list[tuple[str, str, Iterable[str]]]) -> str:
    """A file's text: the ``head`` fields one a line, then each block ``(key,
    brackets, entries)`` — a list (``"[]"``) or an object (``"{}"``) — one entry a line,
    so that the long parts stay readable and diffable."""
    fields = [f"  {json.dumps(key)}: {_json(value)}" for key, value in head.items()]
    for key, (open_, close), entries in blocks:
        lines = [f"  {json.dumps(key)}: {open_}", ",\n".join(f"    {e}" for e in entries)]
        fields.append("\n".join(line for line in lines if line) + f"\n  {close}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def loads(raw: bytes, path: str | os.PathLike) -> dict:
    """Parses a ``.bytepair`` file's bytes: dict(merges, special_tokens, pattern, vocab,
    added_tokens, normalizer, splits, ignore_merges).

    Every problem is a ValueError naming the file (``path``) and what is wrong with it.
    """
    doc = _document(raw, path, ("pattern", "special_tokens", "merges"))
    pattern, specials = _pattern_and_specials(doc, path)
    if not isinstance(doc["merges"], list):
        raise ValueError(f'{path}: "merges" must be a list')
    merges = []
    for n, entry in enumerate(doc["merges"]):
        parts = entry.split(" ") if type(entry) is str else []
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f'{path}: merge #{n} is {short(entry)}; expected "left right"')
        try:
            merges.append((str_to_token(parts[0]), str_to_token(parts[1])))
        except ValueError as e:
            raise ValueError(f"{path}: merge #{n}: {e}") from None
    vocab = None
    if "vocab" in doc:
        if not isinstance(doc["vocab"], dict):
            raise ValueError(f'{path}: "vocab" must map tokens to ids')
        vocab = {}
        where = f"{path}: vocab: "
        for token, i in doc["vocab"].items():
            if not isinstance(i, int) or i < 0:
                raise ValueError(
                    f"{path}: vocab entry {short(token)} has id {short(i)}; expected a non-negative int"
                )
            vocab[i] = str_to_token(token, where)
    added = doc.get("added_tokens", {})
    if not isinstance(added, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in added.items()
    ):
        raise ValueError(f'{path}: "added_tokens" must map token strings to non-negative ids')
    normalizer = doc.get("normalizer", [])
    if not isinstance(normalizer, list) or not all(isinstance(n, (str, dict)) for n in normalizer):
        raise ValueError(f'{path}: "normalizer" must be a list of names and steps')
    try:
        normalizer = [n if isinstance(n, str) else normalizers.from_json(n) for n in normalizer]
    except ValueError as e:
        raise ValueError(f'{path}: "normalizer": {e}') from None
    raw_splits = doc.get("splits", [])
    if not isinstance(raw_splits, list):
        raise ValueError(f'{path}: "splits" must be a list of [pattern, behavior, invert]')
    try:
        splits = splits_of(raw_splits)
    except ValueError as e:
        raise ValueError(f'{path}: "splits": {e}') from None
    ignore_merges = doc.get("ignore_merges", False)
    if not isinstance(ignore_merges, bool):
        raise ValueError(f'{path}: "ignore_merges" must be true or false')
    token_flags = token_flags_of(doc.get("token_flags", {}), f'{path}: "token_flags"')
    return {
        "merges": merges,
        "special_tokens": specials,
        "pattern": pattern,
        "vocab": vocab,
        "added_tokens": added,
        "normalizer": tuple(normalizer),
        "splits": splits,
        "ignore_merges": ignore_merges,
        "token_flags": token_flags,
        "frame": _frame_of(doc, path),
    }


def _frame_of(doc: dict, path) -> dict:
    """The frame fields of a byte-level model's file (``with_options``'s), checked."""
    frame = {}
    for key in ("bos_token", "eos_token"):
        if key in doc:
            if not isinstance(doc[key], str):
                raise ValueError(f'{path}: "{key}" must be a special token')
            frame[key] = doc[key]
    for key in ("add_bos", "add_eos"):
        if key in doc:
            if not isinstance(doc[key], bool):
                raise ValueError(f'{path}: "{key}" must be true or false')
            frame[key] = doc[key]
    return frame


def _frame_fields(model) -> dict:
    """What :func:`_frame_of` reads back: the model's frame, when it names a token."""
    fields: dict = {}
    for which in ("bos", "eos"):
        token = getattr(model, f"{which}_token")
        if token is not None:
            fields[f"{which}_token"] = token
            fields[f"add_{which}"] = getattr(model, f"add_{which}")
    return fields


def _framed(model, frame: dict, path):
    """``model`` with the frame a file gives it; a bad token is a ValueError naming
    the file."""
    if not frame:
        return model
    try:
        return model.with_options(**frame)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def _document(raw: bytes, path, keys: tuple[str, ...]) -> dict:
    """The JSON object of a ``.bytepair`` file, with its format, version and ``keys``
    checked."""
    doc = parse_json(raw, path, "bytepair tokenizer file")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ValueError(f'{path}: not a bytepair tokenizer file (no "format": "bytepair")')
    version = doc.get("version")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{path}: bytepair format version {short(version)} is not supported by this version of "
            f"bytepair (which reads version {FORMAT_VERSION}); upgrade bytepair"
        )
    for key in keys:
        if key not in doc:
            raise ValueError(f'{path}: the "{key}" field is missing')
    return doc


def _pattern_and_specials(doc: dict, path) -> tuple[str | None, dict[str, int]]:
    pattern = doc["pattern"]
    if pattern is not None and not isinstance(pattern, str):
        raise ValueError(f'{path}: "pattern" must be a string or null')
    specials = doc["special_tokens"]
    if not isinstance(specials, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in specials.items()
    ):
        raise ValueError(f'{path}: "special_tokens" must map token strings to non-negative ids')
    return pattern, specials


def from_bytes(raw: bytes, path: str | os.PathLike = "<bytes>") -> Model:
    """The model in a ``.bytepair`` file's bytes."""
    if b'"model": "sentencepiece"' in raw[:4096]:
        return _sentencepiece_from_text(raw, path)
    if b'"model": "tiktoken_ranks"' in raw[:4096]:
        return _ranks_from_text(raw, path)
    doc = loads(raw, path)
    vocab = doc["vocab"] if doc["vocab"] is not None else canonical_vocab(doc["merges"])
    try:
        model = BPE(
            vocab,
            doc["merges"],
            doc["special_tokens"],
            doc["pattern"],
            added_tokens=doc["added_tokens"],
            normalizer=doc["normalizer"],
            splits=doc["splits"],
            ignore_merges=doc["ignore_merges"],
            token_flags=doc["token_flags"],
        )
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return _framed(model, doc["frame"], path)


def _sentencepiece_from_text(raw: bytes, path) -> SentencePiece:
    doc = parse_json(raw, path, "bytepair tokenizer file")
    if doc.get("version") != FORMAT_VERSION or "sentencepiece_model" not in doc:
        raise ValueError(f'{path}: a sentencepiece .bytepair file needs "sentencepiece_model"')
    try:
        data = base64.b64decode(doc["sentencepiece_model"], validate=True)
    except ValueError:
        raise ValueError(f'{path}: "sentencepiece_model" is not base64') from None
    options = {"add_bos": bool(doc.get("add_bos")), "add_eos": bool(doc.get("add_eos"))}
    hf = doc.get("hf") or {}
    if not isinstance(hf, dict) or not set(hf) <= HF_RULES:
        raise ValueError(f'{path}: "hf" must be an object with keys {sorted(HF_RULES)}')
    if "decoder" in hf:
        from bytepair.formats.hf_sentencepiece import read_decoder

        hf = {**hf, "decoder": read_decoder(hf["decoder"], lambda m: ValueError(f"{path}: {m}"))}
    return SentencePiece.from_bytes(data, str(path), **options, **hf)


def _sentencepiece_text(model: SentencePiece) -> str:
    doc = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "model": "sentencepiece",
        "add_bos": model.add_bos,
        "add_eos": model.add_eos,
        "sentencepiece_model": base64.b64encode(model.to_bytes()).decode("ascii"),
    }
    if model.hf:
        doc["hf"] = model.hf
    return json.dumps(doc, indent=2) + "\n"


#: What a SentencePiece model read from a tokenizer.json keeps of it (``"hf"``: see
#: ``SentencePiece.from_bytes``): where its dummy "▁" goes, its added tokens (and how
#: they are matched), its decoder.
HF_RULES = {"prefix", "split", "added", "specials", "normalized", "token_flags", "decoder"}


def _ranks_from_text(raw: bytes, path) -> Model:
    doc = _document(raw, path, ("pattern", "special_tokens", "ranks"))
    pattern, specials = _pattern_and_specials(doc, path)
    if not isinstance(doc["ranks"], list):
        raise ValueError(f'{path}: "ranks" must be a list')
    ranks: dict[bytes, int] = {}
    for n, entry in enumerate(doc["ranks"]):
        parts = entry.split(" ") if isinstance(entry, str) else []
        if len(parts) != 2 or not parts[0] or not parts[1].isascii() or not parts[1].isdigit():
            raise ValueError(f'{path}: rank #{n} is {short(entry)}; expected "token rank"')
        try:
            token = str_to_token(parts[0])
        except ValueError as e:
            raise ValueError(f"{path}: rank #{n}: {e}") from None
        if token in ranks:
            raise ValueError(f"{path}: rank #{n}: token {short(token)} was already given")
        ranks[token] = int(parts[1])
    model = ranks_models.from_ranks(ranks, specials, pattern, where=str(path))
    return _framed(model, _frame_of(doc, path), path)


def _ranks_text(model: RankBPE) -> str:
    head = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "model": "tiktoken_ranks",
        "pattern": model.pattern,
        "special_tokens": model.special_tokens,
        **_frame_fields(model),
    }
    entries = (
        json_string(f"{token_to_str(token)} {rank}") for token, rank in model.ranks().items()
    )
    return _layout(head, [("ranks", "[]", entries)])


def _bpe_text(model: BPE) -> str:
    special_ids = {*model.special_tokens.values(), *model.added_tokens.values()}
    vocab = None
    if not model.has_canonical_ids():
        vocab = {i: t for i, t in model.vocab.items() if i not in special_ids}
    return dumps(
        model.merges,
        model.special_tokens,
        model.pattern,
        vocab,
        model.added_tokens,
        model.normalizer,
        model.splits,
        model.ignore_merges,
        _frame_fields(model),
        model.token_flags,
    )


#: The text of each model class in this format.
TEXT = {BPE: _bpe_text, RankBPE: _ranks_text, SentencePiece: _sentencepiece_text}


def to_text(model: Model) -> str:
    """The ``.bytepair`` text of a model (see the module docstring)."""
    text = registered(TEXT, model)
    if text is None:
        raise Unsupported(f"the .bytepair format cannot hold this {model.kind} model")
    return text(model)


def read(path: str | os.PathLike) -> Model:
    """Loads a ``.bytepair`` file."""
    return from_bytes(Path(path).read_bytes(), path)


def write(model: Model, path: str | os.PathLike) -> None:
    """Writes a ``.bytepair`` file (through a temporary file and a rename)."""
    atomic_write(path, to_text(model).encode("utf-8"))


WRITERS = dict.fromkeys(TEXT, write)
