"""Training SentencePiece BPE models, compatibly with sentencepiece's trainer.

``train_sentencepiece(inputs, vocab_size, ...)`` takes sentencepiece's options (same
names, meanings and defaults, except ``byte_fallback=True``: the Llama-style models
people train today) and returns a ``Tokenizer`` over the model that
``sentencepiece.SentencePieceTrainer.train(model_type="bpe", ...)`` would write:
the same pieces in the same order, with the same scores and types.

The inputs are what :func:`bytepair.train` reads, through the same ``bytepair.sources``
(text, compressed, JSON Lines, Parquet, folders, ``-``, datasets). Sentences are the
lines of the documents, as sentencepiece reads the lines of its files: a JSON Lines
file of records gives the model its lines would give as a text file. The work is in
the Rust core (``src/spm/train.rs``): plain text files are read there in blocks,
other documents streamed to it in batches; distinct words are counted on
``num_threads`` threads, then sentencepiece's merge loop runs once. Memory holds the
distinct words, not the corpus.

Normalization: ``"identity"`` needs nothing. The other rules (``"nmt_nfkc"``, the
default, ``"nfkc"``, ``"nmt_nfkc_cf"``, ``"nfkc_cf"``) are sentencepiece's compiled
character maps, which bytepair does not ship: they are taken from a model you give
(``normalizer_model=``, e.g. a Llama ``tokenizer.model``) or, failing that, from the
installed ``sentencepiece`` package.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Iterable, Iterator
from contextlib import nullcontext

from bytepair import _core
from bytepair._files import atomic_write, check_writable
from bytepair._progress import Progress, check_progress
from bytepair._read_ahead import batched
from bytepair.models.sentencepiece import SentencePiece
from bytepair.options import threads, without_surrogates
from bytepair.sources import open_sources
from bytepair.sources.text import TextSource
from bytepair.tokenizer import Tokenizer

NORMALIZATIONS = ("identity", "nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf")

# Documents are sent to the core in batches of about this many chars.
_BATCH_CHARS = 8 << 20


def train_sentencepiece(
    inputs,
    vocab_size: int,
    *,
    output: str | os.PathLike | None = None,
    byte_fallback: bool = True,
    character_coverage: float = 0.9995,
    normalization: str = "nmt_nfkc",
    normalizer_model: str | os.PathLike | bytes | None = None,
    add_dummy_prefix: bool = True,
    remove_extra_whitespaces: bool = True,
    split_digits: bool = False,
    split_by_whitespace: bool = True,
    split_by_unicode_script: bool = True,
    split_by_number: bool = True,
    max_piece_length: int = 16,
    treat_whitespace_as_suffix: bool = False,
    allow_whitespace_only_pieces: bool = False,
    user_defined_symbols: Iterable[str] = (),
    control_symbols: Iterable[str] = (),
    unk_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
    pad_id: int = -1,
    unk_piece: str = "<unk>",
    bos_piece: str = "<s>",
    eos_piece: str = "</s>",
    pad_piece: str = "<pad>",
    max_sentence_length: int = 4192,
    input_sentence_size: int = 0,
    num_threads: int | None = None,
    progress=None,
    errors: str = "strict",
    text_field: str = "text",
    glob: str | None = None,
    doc_separator: str | None = None,
    skip_bad_records: bool = False,
) -> Tokenizer:
    """Trains a SentencePiece BPE model on the lines of a corpus; returns a
    ``Tokenizer`` over it, and writes the ``.model`` file to ``output`` when given.

    ``inputs`` are those of :func:`bytepair.train`: text files, compressed files, JSON
    Lines, Parquet, folders, ``-`` (stdin), ``datasets`` objects, or a list of these
    (JSON Lines, Parquet and datasets take the document from ``text_field``, folders
    are filtered by ``glob``). Each line of each document is a sentence; in text,
    ``doc_separator`` (if given) also ends one and is not part of any. Invalid UTF-8 is
    an error naming the byte offset unless ``errors="replace"``; a bad record is an
    error naming its file and line unless ``skip_bad_records=True`` (then reported in
    a warning).

    ``max_piece_length`` is sentencepiece's ``max_sentencepiece_length``;
    ``input_sentence_size=N`` keeps the first N sentences (sentencepiece with
    ``shuffle_input_sentence=False``; its default random sample is not reproduced).
    The model's bytes are ``tok.model.to_bytes()``.

    >>> tok = train_sentencepiece("tests/data/corpus.en", 1000, normalization="identity",
    ...                           progress=False)
    >>> tok.encode("The tokenizer")
    [668, 922, 295, 945, 279, 471, 264]
    >>> tok.decode(tok.encode("The tokenizer"))
    'The tokenizer'
    >>> tok = train_sentencepiece("web.jsonl.zst", 32000, output="m.model")  # doctest: +SKIP
    """
    check_progress(progress)
    _check(vocab_size, character_coverage, max_piece_length, input_sentence_size)
    corpus = open_sources(
        inputs,
        text_field=text_field,
        glob=glob,
        doc_separator=doc_separator,
        skip_bad_records=skip_bad_records,
        errors=errors,
    )
    if not corpus.sources:
        raise ValueError("no training inputs given")
    if output is not None:  # before training, not after
        files = [src.path for src in corpus.sources if getattr(src, "path", "-") != "-"]
        check_writable(output, inputs=files)
    trainer = _core.SentencePieceTrainer(
        vocab_size,
        normalizer_model=_normalizer_model(normalization, normalizer_model),
        character_coverage=character_coverage,
        byte_fallback=byte_fallback,
        add_dummy_prefix=add_dummy_prefix,
        remove_extra_whitespaces=remove_extra_whitespaces,
        split_digits=split_digits,
        split_by_whitespace=split_by_whitespace,
        split_by_unicode_script=split_by_unicode_script,
        split_by_number=split_by_number,
        max_piece_length=max_piece_length,
        treat_whitespace_as_suffix=treat_whitespace_as_suffix,
        allow_whitespace_only_pieces=allow_whitespace_only_pieces,
        user_defined_symbols=list(user_defined_symbols),
        control_symbols=list(control_symbols),
        unk_id=unk_id,
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        unk_piece=unk_piece,
        bos_piece=bos_piece,
        eos_piece=eos_piece,
        pad_piece=pad_piece,
        max_sentence_length=max_sentence_length,
        input_sentence_size=input_sentence_size,
        num_threads=threads(num_threads),
    )
    total = corpus.size if input_sentence_size == 0 else None
    read = []  # the names of the sources read (all, unless input_sentence_size stops it)
    with Progress(progress, total=total, desc="counting words") as bar:
        for src in corpus.sources:
            if trainer.full:
                break
            read.append(src.name)
            if doc_separator is None and type(src) is TextSource and src.core_reads:
                # The core reads the file (a compressed one's bytes, decompressed here).
                with src.core_input() or nullcontext() as chunks:
                    hook = bar.hook(at=src.core_progress)
                    trainer.add_file(src.name, errors, hook, chunks)
            else:
                lines = _whole_lines(_parts(src, doc_separator), max_sentence_length)
                for batch in batched(lines, _BATCH_CHARS):
                    try:
                        trainer.add_texts(batch)
                    except UnicodeEncodeError:  # lone surrogates, from in-memory data
                        trainer.add_texts([without_surrogates(t) for t in batch])
                    bar(src.consumed)
                    if trainer.full:
                        break
            bar.base += src.size or src.consumed
    corpus.skips.report()
    with Progress(progress, total=vocab_size, desc="learning pieces", unit="pieces") as bar:
        data = trainer.train(read, bar.hook())
    if output is not None:
        atomic_write(output, data)
    name = os.fspath(output) if output is not None else "<trained>"
    return Tokenizer.from_model(SentencePiece.from_bytes(data, name))


def _check(vocab_size, character_coverage, max_piece_length, input_sentence_size) -> None:
    """sentencepiece's ranges for the options it checks."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive integer, not {vocab_size!r}")
    if not 0.98 <= character_coverage <= 1.0:
        raise ValueError(
            f"character_coverage must be in [0.98, 1.0] (as in sentencepiece), "
            f"not {character_coverage!r}"
        )
    if not 1 <= max_piece_length <= 512:
        raise ValueError(f"max_piece_length must be in [1, 512], not {max_piece_length!r}")
    if input_sentence_size < 0 or 0 < input_sentence_size <= 100:
        raise ValueError(f"input_sentence_size must be 0 or > 100, not {input_sentence_size!r}")


def _parts(src, doc_separator: str | None) -> Iterator[tuple[str, bool]]:
    """A source's documents as ``(text, last)`` pieces. A text without separators is
    one document, read in the decoder's pieces (``Source.parts`` would hold a stretch
    with no cut point for pre-tokens, e.g. lines of Chinese, whole)."""
    chunks = getattr(src, "text_chunks", None)
    if doc_separator is not None or chunks is None:
        yield from src.parts()
        return
    for text in chunks():
        yield text, False
    yield "", True


def _whole_lines(parts: Iterable[tuple[str, bool]], max_chars: int) -> Iterator[str]:
    """``(text, last)`` pieces of documents -> texts of whole lines (the end of a
    document ends a line): a line cut between pieces is held until it ends. One longer
    than ``max_chars`` characters (so more bytes) is dropped, as sentencepiece drops
    lines over ``max_sentence_length`` bytes, without being held.

    >>> list(_whole_lines([("ab\\nc", False), ("d\\ne", False), ("f", True)], 10))
    ['ab\\n', 'cd\\n', 'ef']
    >>> list(_whole_lines([("ab\\nc", False), ("ddd", False), ("\\ne", True)], 3))
    ['ab\\n', 'e']
    """
    held = ""  # the start of an unfinished line
    dropping = False  # the unfinished line is too long: dropped up to its end
    for text, last in parts:
        if dropping:
            end = text.find("\n")
            if end < 0:
                dropping = not last
                continue
            text, dropping = text[end + 1 :], False
        if last:
            if held or text:
                yield held + text
            held = ""
            continue
        cut = text.rfind("\n") + 1
        if cut:
            yield held + text[:cut]
            held = text[cut:]
        else:
            held += text
        if len(held) > max_chars:
            held, dropping = "", True


def _normalizer_model(normalization: str, normalizer_model) -> bytes | None:
    """The bytes of a model holding the normalizer to use; None for identity."""
    if normalizer_model is not None:
        if isinstance(normalizer_model, bytes):
            return normalizer_model
        with open(normalizer_model, "rb") as f:
            return f.read()
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"normalization must be one of {', '.join(NORMALIZATIONS)}, not {normalization!r}"
        )
    if normalization == "identity":
        return None
    return _charsmap_from_sentencepiece(normalization)


@functools.cache
def _charsmap_from_sentencepiece(name: str) -> bytes:
    """A throwaway model made by the installed sentencepiece, for its ``name`` rule."""
    try:
        import sentencepiece as spm
    except ImportError:
        raise ValueError(
            f"normalization={name!r} uses sentencepiece's compiled character map, which "
            "bytepair does not ship: pip install sentencepiece, pass "
            "normalizer_model='some.model' (e.g. a Llama tokenizer.model), or use "
            "normalization='identity'"
        ) from None
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["abc"]),
        model_writer=out,
        model_type="char",
        vocab_size=8,
        hard_vocab_limit=False,
        normalization_rule_name=name,
        minloglevel=2,
    )
    return out.getvalue()
