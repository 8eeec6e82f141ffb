"""Tokenizer files: one module per format, and one reader and one writer over them.

- :mod:`~bytepair.formats.bytepair` — ours (``.bytepair``): pattern, special tokens and
  merges in one readable JSON file;
- :mod:`~bytepair.formats.tiktoken` — ``.tiktoken`` rank files (pattern and special
  tokens given separately);
- :mod:`~bytepair.formats.hf` — Hugging Face ``tokenizer.json`` and its folder (byte-level
  BPE; the SentencePiece family in :mod:`~bytepair.formats.hf_sentencepiece`);
- :mod:`~bytepair.formats.sentencepiece` — SentencePiece ``.model`` files (Llama 2,
  Mistral);
- :mod:`~bytepair.formats.tekken` — Mistral's Tekken JSON files (ranks, pattern and
  special tokens, as mistral-common reads them);
- :mod:`~bytepair.formats.gpt2` — GPT-2's ``vocab.json`` + ``merges.txt`` (or
  ``encoder.json`` + ``vocab.bpe``) folders;
- :mod:`~bytepair.formats.bundled` — the encodings that ship inside the package.

Formats read files into models (``bytepair.models``) and write models to files; the
``Tokenizer`` wraps what they read. Each module says which model classes it writes in
its ``WRITERS`` table, so a new model kind is a new entry there, not a new ``if``.
:func:`read` recognises a bundled encoding name or a file by its *content* (the suffix
only breaks ties); :func:`save` picks the writer by ``format=`` or the suffix. Readers
never run code (no eval, no pickle); a problem is an error naming the file and the
line or entry at fault. Writers go through a temporary file and a rename.
"""

from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path

from bytepair.formats import bundled, gpt2, hf, sentencepiece, tekken, tiktoken
from bytepair.formats import bytepair as bytepair_format
from bytepair.models import Model, Unsupported
from bytepair.models.base import registered

#: The format modules by name, as ``format=`` and ``bytepair convert --to`` take them.
MODULES = {
    "bytepair": bytepair_format,
    "tiktoken": tiktoken,
    "hf": hf,
    "gpt2": gpt2,
    "sentencepiece": sentencepiece,
    "tekken": tekken,
}
FORMATS = tuple(MODULES)
_BY_SUFFIX = {suffix: name for name, module in MODULES.items() for suffix in module.SUFFIXES}


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
    for name in ("bytepair", "tekken", "hf", "sentencepiece", "tiktoken"):
        if MODULES[name].sniff(head):
            return name
    if head.lstrip().startswith(b"{") and path.name in ("vocab.json", "encoder.json"):
        raise ValueError(f"{path}: a GPT-2 vocabulary alone; load the folder holding it")
    if path.suffix in _BY_SUFFIX:
        return _BY_SUFFIX[path.suffix]
    raise ValueError(
        f"{path}: not a tokenizer file bytepair recognises (.bytepair, tokenizer.json, "
        ".tiktoken, a SentencePiece .model, a Tekken .json, or a GPT-2/Hugging Face folder)"
    )


def _unknown_name(name: str) -> str:
    import difflib  # only for this message: it costs an import of `import bytepair`

    names = bundled.names()
    guess = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    if not guess:
        guess = [n for n in names if n.startswith(name) or name.startswith(n.split("_")[0])]
    hint = f"; did you mean {guess[0]!r}?" if guess else f"; bundled encodings: {', '.join(names)}"
    return f"{name}: no such tokenizer file or bundled encoding{hint}"


def read(
    path_or_name: str | os.PathLike,
    *,
    format: str | None = None,
    pattern: str | None = None,
    special_tokens=None,
    add_bos: bool | None = None,
    add_eos: bool | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
) -> Model:
    """The model in a bundled encoding (by name), a file or a folder (see
    :func:`bytepair.load`, which wraps it in a ``Tokenizer``)."""
    _check_format(format)
    path = Path(path_or_name)
    given = {"add_bos": add_bos, "add_eos": add_eos, "bos_token": bos_token, "eos_token": eos_token}
    options = {k: v for k, v in given.items() if v is not None}
    if isinstance(path_or_name, str) and path_or_name in bundled.names() and not path.exists():
        model = bundled.model(path_or_name)
        where = path_or_name
    else:
        if not path.exists():
            raise FileNotFoundError(_unknown_name(str(path_or_name)))
        name = format or detect(path)
        with _no_collection():
            model = _read_file(path, name, pattern, special_tokens)
        where = str(path)
    try:
        return model.with_options(**options)
    except Unsupported as e:
        raise Unsupported(f"{where}: {e}") from None


@contextlib.contextmanager
def _no_collection():
    """Python's cyclic garbage collector paused: reading a large file makes millions of
    objects that live on (its tokens, merges, tables), and each full collection walks
    them all again: a quarter of loading Llama 3's tokenizer.json. None of them is
    garbage in a cycle; the collector runs as it did after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_file(path: Path, name: str, pattern, special_tokens) -> Model:
    if name == "tiktoken":
        given = tiktoken.MISSING if pattern is None else pattern
        return tiktoken.read(path, pattern=given, special_tokens=special_tokens)
    if name == "gpt2":
        return gpt2.read(path, pattern=pattern, special_tokens=special_tokens)
    if pattern is not None or special_tokens is not None:
        raise ValueError(f"{path}: a {name} file holds its own pattern and special tokens")
    return MODULES[name].read(path)


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


def writer(format: str, model: Model, path: str | os.PathLike | None = None):
    """The function of ``format`` that writes ``model``'s class, or :class:`Unsupported`
    naming the formats that can hold it."""
    found = registered(MODULES[format].WRITERS, model)
    if found is not None:
        return found
    can = [name for name, module in MODULES.items() if registered(module.WRITERS, model)]
    where = f"{path}: " if path is not None else ""
    suffix = Path(path).suffix if path is not None else ""
    how = (
        f"the {suffix} suffix means the {format} format"
        if suffix in _BY_SUFFIX and _BY_SUFFIX[suffix] == format
        else f"the {format} format"
    )
    raise Unsupported(
        f"{where}{how}, which cannot hold this {model.kind} model ({model.why_not('merges')}); "
        f"save it to a .bytepair path, or keep the name and pass format= one of {', '.join(can)}"
    )


def save(model: Model, path: str | os.PathLike, format: str | None = None, **options) -> None:
    """Writes ``model`` to ``path`` in ``format`` (default: by suffix; see
    :func:`format_for_path`). Options go to the writer (``hf``: ``eos_token``...;
    ``gpt2``: ``names``)."""
    name = format_for_path(path, format)
    write = writer(name, model, path)
    if options and name not in ("hf", "gpt2"):
        raise TypeError(f"the {name} format takes no options ({', '.join(options)})")
    write(model, path, **options)
