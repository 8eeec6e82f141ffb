"""Tokenizer files: one module per format, and one loader and one saver over them.

- :mod:`~bytepair.formats.bytepair` — ours (``.bytepair``): pattern, special tokens and
  merges in one readable JSON file;
- :mod:`~bytepair.formats.tiktoken` — ``.tiktoken`` rank files (pattern and special
  tokens given separately);
- :mod:`~bytepair.formats.hf` — Hugging Face ``tokenizer.json`` and its folder (byte-level
  BPE; the SentencePiece family in :mod:`~bytepair.formats.hf_sentencepiece`);
- :mod:`~bytepair.formats.sentencepiece` — SentencePiece ``.model`` files (Llama 2,
  Mistral);
- :mod:`~bytepair.formats.gpt2` — GPT-2's ``vocab.json`` + ``merges.txt`` (or
  ``encoder.json`` + ``vocab.bpe``) folders;
- :mod:`~bytepair.formats.pickling` — what ``pickle`` stores (our own format, never code).

:func:`load` recognises a bundled encoding name or a file by its *content* (the suffix
only breaks ties); :func:`save` picks the writer by ``format=`` or the suffix. Readers
never run code (no eval, no pickle); a problem is an error naming the file and the
line or entry at fault. Writers go through a temporary file and a rename.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from bytepair.formats import bytepair as bytepair_format
from bytepair.formats import gpt2, hf, sentencepiece, tiktoken

#: Format names, as ``format=`` and ``bytepair convert --to`` take them.
FORMATS = ("bytepair", "tiktoken", "hf", "gpt2", "sentencepiece")
_BY_SUFFIX = {
    ".bytepair": "bytepair",
    ".tiktoken": "tiktoken",
    ".json": "hf",
    ".model": "sentencepiece",
}


def _check_format(format: str | None) -> None:
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; formats: {', '.join(FORMATS)}")


def detect(path: str | os.PathLike) -> str:
    """The format of an existing file or folder, by its content."""
    path = Path(path)
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return "hf"
        if gpt2.find_files(path) is not None:
            return "gpt2"
        raise ValueError(
            f"{path}: a folder without tokenizer.json, vocab.json + merges.txt or "
            "encoder.json + vocab.bpe: no tokenizer here"
        )
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if bytepair_format.sniff(head):
        return "bytepair"
    if hf.sniff(head):
        return "hf"
    if sentencepiece.sniff(head):
        return "sentencepiece"
    if tiktoken.sniff(head):
        return "tiktoken"
    if head.lstrip().startswith(b"{") and path.name in ("vocab.json", "encoder.json"):
        raise ValueError(f"{path}: a GPT-2 vocabulary alone; load the folder holding it")
    if path.suffix in _BY_SUFFIX:
        return _BY_SUFFIX[path.suffix]
    raise ValueError(
        f"{path}: not a tokenizer file bytepair recognises (.bytepair, tokenizer.json, "
        ".tiktoken, a SentencePiece .model, or a GPT-2/Hugging Face folder)"
    )


def _unknown_name(name: str) -> str:
    from bytepair.encodings import list_encodings

    names = list_encodings()
    guess = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    if not guess:
        guess = [n for n in names if n.startswith(name) or name.startswith(n.split("_")[0])]
    hint = f"; did you mean {guess[0]!r}?" if guess else f"; bundled encodings: {', '.join(names)}"
    return f"{name}: no such tokenizer file or bundled encoding{hint}"


def load(
    path_or_name: str | os.PathLike,
    *,
    format: str | None = None,
    pattern: str | None = None,
    special_tokens=None,
    add_bos: bool | None = None,
    add_eos: bool | None = None,
):
    """A tokenizer from a bundled encoding name (``"cl100k_base"``), a ``.bytepair``
    file, a ``tokenizer.json`` (or a folder holding one), a ``.tiktoken`` file (give
    ``pattern`` and ``special_tokens``: the format holds neither), a GPT-2 folder or a
    SentencePiece ``.model``. ``add_bos`` / ``add_eos`` (SentencePiece models only) put
    ``<s>`` / ``</s>`` around every text, overriding what the file says.

    >>> import bytepair
    >>> bytepair.load("gpt2").encode("hello")
    [31373]
    """
    from bytepair.encodings import get_encoding, list_encodings

    _check_format(format)
    path = Path(path_or_name)
    if isinstance(path_or_name, str) and path_or_name in list_encodings() and not path.exists():
        if add_bos is not None or add_eos is not None:
            raise ValueError(
                f"{path_or_name}: add_bos and add_eos are options of SentencePiece models"
            )
        return get_encoding(path_or_name)
    if not path.exists():
        raise FileNotFoundError(_unknown_name(str(path_or_name)))
    kind = format or detect(path)
    tok = _read(path, kind, pattern, special_tokens)
    if add_bos is None and add_eos is None:
        return tok
    if tok.model.kind != "sentencepiece":
        raise ValueError(f"{path}: add_bos and add_eos are options of SentencePiece models")
    return type(tok).from_model(tok.model.with_options(add_bos=add_bos, add_eos=add_eos))


def _read(path: Path, kind: str, pattern, special_tokens):
    if kind == "tiktoken":
        given = tiktoken.MISSING if pattern is None else pattern
        return tiktoken.read(path, pattern=given, special_tokens=special_tokens)
    if kind == "gpt2":
        return gpt2.read(path, pattern=pattern, special_tokens=special_tokens)
    if pattern is not None or special_tokens is not None:
        raise ValueError(f"{path}: a {kind} file holds its own pattern and special tokens")
    if kind == "hf":
        return hf.read(path)
    if kind == "sentencepiece":
        return sentencepiece.read(path)
    return bytepair_format.read(path)


def format_for_path(path: str | os.PathLike, format: str | None = None) -> str:
    """The format :func:`save` writes to ``path``: ``format=``, else by suffix, else a
    folder (an existing one, or a path ending in ``/``) gets GPT-2 files."""
    _check_format(format)
    if format is not None:
        return format
    text = os.fspath(path)
    path = Path(path)
    if path.suffix in _BY_SUFFIX:
        return _BY_SUFFIX[path.suffix]
    if path.is_dir() or text.endswith(("/", os.sep)):
        return "gpt2"
    raise ValueError(
        f"{path}: cannot tell the format from the name; use a .bytepair, .json, .tiktoken or "
        f".model suffix, or pass the format ({', '.join(FORMATS)})"
    )


def save(tok, path: str | os.PathLike, format: str | None = None, **options) -> None:
    """Writes ``tok`` to ``path`` in ``format`` (default: by suffix; see
    :func:`format_for_path`). Options go to the writer (``hf``: ``eos_token``...;
    ``gpt2``: ``names``)."""
    kind = format_for_path(path, format)
    if kind == "hf":
        hf.write(tok, path, **options)
    elif kind == "gpt2":
        gpt2.write(tok, path, **options)
    elif options:
        raise TypeError(f"the {kind} format takes no options ({', '.join(options)})")
    elif kind == "tiktoken":
        tiktoken.write(tok, path)
    elif kind == "sentencepiece":
        sentencepiece.write(tok, path)
    else:
        bytepair_format.write(tok, path)
