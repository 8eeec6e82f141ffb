"""GPT-2's files: ``vocab.json`` + ``merges.txt`` (Hugging Face's names) or
``encoder.json`` + ``vocab.bpe`` (OpenAI's), tokens in GPT-2's byte-to-unicode
notation, plus the special tokens where Hugging Face folders keep them
(``tokenizer_config.json`` and ``special_tokens_map.json``; ``added_tokens.json`` is
read too). The files keep no pre-tokenizer pattern: GPT-2's is assumed unless given.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bytepair._files import atomic_write
from bytepair.formats.byte_table import str_to_token, token_to_str
from bytepair.formats.errors import parse_json, short
from bytepair.models import BPE

NAMES = (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"))
#: A GPT-2 folder has no suffix: :func:`bytepair.formats.format_for_path` picks it for folders.
SUFFIXES: tuple[str, ...] = ()


def find_files(folder: str | os.PathLike) -> tuple[Path, Path] | None:
    """(vocab, merges) paths in a GPT-2 folder, or None."""
    folder = Path(folder)
    for vocab, merges in NAMES:
        if (folder / vocab).is_file() and (folder / merges).is_file():
            return folder / vocab, folder / merges
    return None


def read_vocab_and_merges(vocab_path: str | os.PathLike, merges_path: str | os.PathLike):
    """(vocab: id -> bytes, merges as byte pairs) from the two files."""
    vocab_path, merges_path = Path(vocab_path), Path(merges_path)
    encoder = parse_json(vocab_path.read_bytes(), vocab_path, "JSON vocabulary")
    if not isinstance(encoder, dict):
        raise ValueError(f"{vocab_path}: expected a JSON object {{token: id}}")
    vocab: dict[int, bytes] = {}
    where = f"{vocab_path}: "
    for token, i in encoder.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise ValueError(
                f"{vocab_path}: token {short(token)} has id {short(i)}; expected an int"
            )
        vocab[i] = str_to_token(token, where)
    merges = []
    with open(merges_path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\n")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{merges_path}, line {lineno}: invalid UTF-8 at byte {e.start} of the line"
                ) from None
            if not line or (lineno == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(parts):
                raise ValueError(
                    f"{merges_path}, line {lineno}: expected 'left right', got {short(line)}"
                )
            try:
                merges.append((str_to_token(parts[0]), str_to_token(parts[1])))
            except ValueError as e:
                raise ValueError(f"{merges_path}, line {lineno}: {e}") from None
    return vocab, merges


def read_files(vocab_path, merges_path, special_tokens=None, pattern: str | None = "gpt2") -> BPE:
    """The model in the two files (special tokens given by the caller)."""
    vocab, merges = read_vocab_and_merges(vocab_path, merges_path)
    return BPE(vocab, merges, special_tokens, pattern)


def folder_specials(folder: Path, vocab: dict[int, bytes]) -> dict[str, int]:
    """The special tokens a folder declares (Hugging Face's config files), else
    ``<|endoftext|>`` if the vocabulary has it."""
    config = folder / "tokenizer_config.json"
    if config.is_file():
        doc = _json(config)
        decoder = doc.get("added_tokens_decoder") if isinstance(doc, dict) else None
        if isinstance(decoder, dict) and decoder:
            out = {}
            for i, entry in decoder.items():
                if isinstance(entry, dict) and entry.get("special") and str(i).isdigit():
                    out[str(entry.get("content"))] = int(i)
            return out
    added = folder / "added_tokens.json"
    if added.is_file():
        doc = _json(added)
        if not isinstance(doc, dict) or not all(isinstance(i, int) for i in doc.values()):
            raise ValueError(f"{added}: expected a JSON object {{token: id}}")
        return dict(doc)
    eot = b"<|endoftext|>"
    return {eot.decode(): i for i, t in vocab.items() if t == eot}


def _json(path: Path):
    return parse_json(path.read_bytes(), path)


def read(folder: str | os.PathLike, pattern: str | None = None, special_tokens=None) -> BPE:
    """Loads a GPT-2 folder (``vocab.json`` + ``merges.txt`` or ``encoder.json`` +
    ``vocab.bpe``), its special tokens from the folder's config files unless given."""
    folder = Path(folder)
    found = find_files(folder)
    if found is None:
        raise ValueError(
            f"{folder}: no vocab.json + merges.txt (or encoder.json + vocab.bpe) in this folder"
        )
    vocab, merges = read_vocab_and_merges(*found)
    if special_tokens is None:
        special_tokens = folder_specials(folder, vocab)
    try:
        return BPE(vocab, merges, special_tokens, pattern or "gpt2")
    except ValueError as e:
        raise ValueError(f"{folder}: {e}") from None


def token_strings(
    vocab: dict[int, bytes], special_tokens: dict[str, int], where: str
) -> dict[str, int]:
    """{token string: id} for GPT-2 style files: ordinary tokens in byte-to-unicode
    notation, special tokens as their literal text. Strings must be unique."""
    special_ids = set(special_tokens.values())
    strings: dict[str, int] = {}
    items = [(i, token_to_str(t)) for i, t in sorted(vocab.items()) if i not in special_ids]
    items += sorted(((i, t) for t, i in special_tokens.items()), key=lambda it: it[0])
    for i, s in sorted(items):
        if s in strings:
            raise ValueError(
                f"{where}ids {strings[s]} and {i} are the same token {short(s)}: the file maps each "
                "token to one id (a vocabulary with repeated bytes cannot be written to it)"
            )
        strings[s] = i
    return strings


def json_bytes(doc) -> bytes:
    """``doc`` as UTF-8 JSON laid out as ``json.dumps(indent=2)`` lays it out, but for
    a list or object of over :data:`LONG` entries (a vocabulary, the merges): one
    entry a line, written compactly. With an indent Python's json encodes in Python,
    seconds for the 280K merges of a Llama 3 file; this takes a C call an entry.

    >>> print(json_bytes({"a": [1, "x"], "b": {}}).decode())
    {
      "a": [
        1,
        "x"
      ],
      "b": {}
    }
    <BLANKLINE>
    """
    return (_pretty(doc, "") + "\n").encode("utf-8")


#: Entries past which a list or object is written one compact entry a line.
LONG = 256

#: A string as JSON (``json.dumps(s, ensure_ascii=False)``) in one C call: ``json.dumps``
#: builds an encoder each call, most of the time of writing 280K merges.
json_string = json.encoder.encode_basestring


def _pretty(value, pad: str) -> str:
    inner = pad + "  "
    if type(value) is dict and value:
        if len(value) > LONG:
            lines = [f"{inner}{json_string(k)}: {_compact(v)}" for k, v in value.items()]
        else:
            lines = [f"{inner}{json_string(k)}: {_pretty(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(lines) + "\n" + pad + "}"
    if type(value) is list and value:
        if len(value) > LONG:
            lines = [inner + _compact(v) for v in value]
        else:
            lines = [inner + _pretty(v, inner) for v in value]
        return "[\n" + ",\n".join(lines) + "\n" + pad + "]"
    return _compact(value)


def _compact(value) -> str:
    """One value as JSON on one line; strings, ints and lists of strings (a merge)
    without building an encoder."""
    kind = type(value)
    if kind is str:
        return json_string(value)
    if kind is int:
        return str(value)
    if kind is list and len(value) == 2 and type(value[0]) is str and type(value[1]) is str:
        return f"[{json_string(value[0])}, {json_string(value[1])}]"
    return json.dumps(value, ensure_ascii=False)


def write(
    model: BPE, folder: str | os.PathLike, names: tuple[str, str] = NAMES[0], **options
) -> None:
    """Writes ``vocab.json`` ({token: id}, special tokens as their literal text) and
    ``merges.txt`` (``#version: 0.2`` then one "left right" merge a line) into folder,
    created if needed, and the special tokens in ``tokenizer_config.json`` +
    ``special_tokens_map.json`` (see ``formats.hf.write_config``)."""
    from bytepair.formats import hf

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder}: exists and is not a folder")
    vocab_name, merges_name = names
    strings = token_strings(model.vocab, model.special_tokens, f"{folder / vocab_name}: ")
    lines = ["#version: 0.2"] + [token_to_str(a) + " " + token_to_str(b) for a, b in model.merges]
    config = hf.config_files(model, tokenizer_class=None, **options)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / vocab_name, json_bytes(strings))
    atomic_write(folder / merges_name, ("\n".join(lines) + "\n").encode("utf-8"))
    for name, doc in config.items():
        atomic_write(folder / name, json_bytes(doc))


WRITERS = {BPE: write}
