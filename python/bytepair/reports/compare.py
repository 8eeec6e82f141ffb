"""``compare``: several tokenizers on the same texts — tokens and bytes per token per
corpus, each relative to the first tokenizer.

Given a folder of parallel texts (the same sentences in several languages, files named
like ``ud_pud_en.txt``, the language after the last underscore), the rows are
languages, with each language's tokens relative to English for the same tokenizer
(the "tokenization premium", Petrov et al. 2023) when English is there.

>>> language_of("ud_pud_ko.txt"), language_of("notes.txt")
('ko', None)
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from bytepair.reports.corpus import count_tokens
from bytepair.reports.stats import tokenizer_name

_LANGUAGE = re.compile(r"_([a-z]{2,3})\.txt$")


@dataclass
class CompareRow:
    corpus: str
    language: str | None
    bytes: int
    tokens: list[int]  # one per tokenizer
    bytes_per_token: list[float]
    relative: list[float]  # tokens / the first tokenizer's tokens
    premium: list[float] | None  # tokens / tokens on English, per tokenizer


@dataclass
class Comparison:
    tokenizers: list[str]
    rows: list[CompareRow]

    def to_dict(self) -> dict:
        return asdict(self)


def language_of(path: str | os.PathLike) -> str | None:
    """The language code in a file name like ``ud_pud_en.txt``, else None."""
    m = _LANGUAGE.search(Path(path).name)
    return m.group(1) if m else None


def corpus_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The text files: files as given, folders as their ``*.txt`` files (sorted)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            inside = sorted(p.glob("*.txt"))
            if not inside:
                raise FileNotFoundError(f"{p}: a folder without .txt files")
            files.extend(inside)
        else:
            files.append(p)
    return files


def compare(
    tokenizers, corpora: Iterable[str | os.PathLike], num_threads: int | None = None
) -> Comparison:
    """Tokens and bytes/token per corpus per tokenizer. ``tokenizers`` is a list or a
    dict ``{name: tokenizer}``; folders in ``corpora`` stand for their ``*.txt`` files."""
    if isinstance(tokenizers, dict):
        named = dict(tokenizers)
    else:
        named = {}
        for n, tok in enumerate(tokenizers, 1):
            name = tokenizer_name(tok)
            named[f"{name} (#{n})" if name in named else name] = tok
    if not named:
        raise ValueError("compare needs at least one tokenizer")
    rows = []
    for path in corpus_files(corpora):
        results = [count_tokens(tok, path, num_threads) for tok in named.values()]
        tokens = [r.tokens for r in results]
        size = results[0].bytes
        rows.append(
            CompareRow(
                corpus=str(path),
                language=language_of(path),
                bytes=size,
                tokens=tokens,
                bytes_per_token=[size / n if n else 0.0 for n in tokens],
                relative=[n / tokens[0] if tokens[0] else 0.0 for n in tokens],
                premium=None,
            )
        )
    english = [r for r in rows if r.language == "en"]
    if len(english) == 1:
        for r in rows:
            if r.language:
                r.premium = [n / e if e else 0.0 for n, e in zip(r.tokens, english[0].tokens)]
    return Comparison(list(named), rows)
