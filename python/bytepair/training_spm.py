"""Training SentencePiece BPE models, compatibly with sentencepiece's trainer.

``train_sentencepiece(files, vocab_size, ...)`` takes sentencepiece's options (same
names, meanings and defaults, except ``byte_fallback=True``: the Llama-style models
people train today) and returns the ``.model`` bytes that
``sentencepiece.SentencePieceTrainer.train(model_type="bpe", ...)`` would write:
the same pieces in the same order, with the same scores and types.

Sentences are the lines of the files, as sentencepiece reads them. The work is in
the Rust core (``src/spm/train.rs``): distinct words counted on ``num_threads``
threads, then sentencepiece's merge loop.

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
from collections.abc import Iterable

from bytepair import _core
from bytepair._files import atomic_write, check_writable
from bytepair._inputs import check_text_file
from bytepair._progress import Progress, check_progress
from bytepair.tokenizer import _threads

NORMALIZATIONS = ("identity", "nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf")


def train_sentencepiece(
    files: str | os.PathLike | Iterable[str | os.PathLike],
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
) -> bytes:
    """Trains a SentencePiece BPE model on the lines of ``files``; returns the
    ``.model`` bytes and writes them to ``output`` when given.

    ``max_piece_length`` is sentencepiece's ``max_sentencepiece_length``;
    ``input_sentence_size=N`` keeps the first N sentences (sentencepiece with
    ``shuffle_input_sentence=False``; its default random sample is not reproduced).

    >>> import sentencepiece as spm  # doctest: +SKIP
    >>> data = train_sentencepiece("corpus.txt", 8000, normalization="identity")  # doctest: +SKIP
    >>> spm.SentencePieceProcessor(model_proto=data).encode("hello")  # doctest: +SKIP
    """
    check_progress(progress)
    paths = [os.fspath(files)] if isinstance(files, (str, os.PathLike)) else list(files)
    if not paths:
        raise ValueError("no input files")
    paths = [os.fspath(check_text_file(p)) for p in paths]
    if output is not None:
        check_writable(output, inputs=paths)  # before training, not after
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
    total = sum(os.path.getsize(p) for p in paths) if input_sentence_size == 0 else None
    with (
        Progress(progress, total=total, desc="counting words") as bytes_bar,
        Progress(progress, total=vocab_size, desc="learning pieces", unit="pieces") as pieces_bar,
    ):
        data = _core.train_sentencepiece(
            paths,
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
            num_threads=_threads(num_threads),
            on_bytes=bytes_bar.hook(),
            on_pieces=pieces_bar.hook(),
        )
    if output is not None:
        atomic_write(output, data)
    return data


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
