"""``bytepair train``: a tokenizer from a corpus (text, compressed, JSON Lines, Parquet, folders)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bytepair._display import printable
from bytepair.cli._common import (
    add_engine_options,
    add_source_options,
    add_threads_option,
    plural,
    show_progress,
)


def add_parser(sub) -> None:
    t = sub.add_parser("train", help="train a tokenizer on a corpus")
    t.add_argument(
        "corpus",
        nargs="+",
        help="inputs: UTF-8 text (.gz/.xz/.zst/.bz2 too), .jsonl, .parquet, folders, '-' for stdin",
    )
    add_source_options(t)
    t.add_argument(
        "--doc-separator",
        metavar="SEP",
        help="text between documents in text inputs (default: the special tokens)",
    )
    t.add_argument(
        "--vocab-size", type=int, required=True, help="total tokens: 256 bytes + merges + specials"
    )
    t.add_argument(
        "--special",
        action="append",
        default=[],
        metavar="TOKEN",
        help="a special token, e.g. '<|endoftext|>' (repeatable; with --model "
        "sentencepiece: a user-defined symbol)",
    )
    t.add_argument(
        "--pattern",
        default="gpt2",
        help="pre-tokenizer: gpt2 (default), cl100k, o200k, none, or a regex",
    )
    add_threads_option(t)
    t.add_argument(
        "--errors",
        choices=["strict", "replace"],
        default="strict",
        help="invalid UTF-8: stop with an error (default) or replace with U+FFFD",
    )
    t.add_argument(
        "--min-frequency",
        type=int,
        default=0,
        metavar="N",
        help="stop when the most frequent pair occurs fewer than N times",
    )
    t.add_argument(
        "--max-token-length",
        type=int,
        default=None,
        metavar="BYTES",
        help="never make tokens longer than this many bytes",
    )
    t.add_argument(
        "--reserved-special-tokens",
        type=int,
        default=0,
        metavar="N",
        help="reserve N special tokens <|reserved_0|>... (counted in --vocab-size)",
    )
    t.add_argument(
        "--pad-to-multiple-of",
        type=int,
        default=None,
        metavar="M",
        help="append reserved tokens until the vocabulary size is a multiple of M",
    )
    t.add_argument(
        "-o",
        "--output",
        required=True,
        help="tokenizer file to write (.bytepair; .json for Hugging Face, "
        ".tiktoken, or a folder/ for GPT-2 files; with --model sentencepiece: a .model file)",
    )
    t.add_argument(
        "--format",
        choices=["bytepair", "hf", "tiktoken", "gpt2"],
        help="output format (default: from the output's suffix)",
    )
    add_engine_options(t, "counting")
    t.add_argument(
        "--model",
        choices=["bpe", "sentencepiece"],
        default="bpe",
        help="bpe: byte-level BPE (default); sentencepiece: a SentencePiece BPE .model, "
        "as spm_train --model_type=bpe makes it, from the same inputs "
        "(each line of each document is a sentence)",
    )
    t.add_argument(
        "--normalization",
        help="with --model sentencepiece: identity, nmt_nfkc (default), nfkc, nmt_nfkc_cf, nfkc_cf",
    )
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    t.set_defaults(func=run)


# The options only one --model takes, with their defaults.
OWN_OPTIONS = {
    "bpe": {
        "pattern": "gpt2",
        "min_frequency": 0,
        "max_token_length": None,
        "reserved_special_tokens": 0,
        "pad_to_multiple_of": None,
        "format": None,
        "engine": "local",
        "ray_address": None,
    },
    "sentencepiece": {"normalization": None},
}


def _refuse_other_models_options(args) -> None:
    """An option the chosen --model does not use is an error, not silently ignored."""
    for other, options in OWN_OPTIONS.items():
        given = [name for name, default in options.items() if getattr(args, name) != default]
        if other != args.model and given:
            flag = "--" + given[0].replace("_", "-")
            raise ValueError(f"{flag} applies to --model {other} only, not --model {args.model}")


def run_sentencepiece(args) -> None:
    from bytepair.training_spm import train_sentencepiece

    start = time.perf_counter()
    tok = train_sentencepiece(
        args.corpus,
        args.vocab_size,
        output=args.output,
        normalization=args.normalization or "nmt_nfkc",
        user_defined_symbols=args.special,
        num_threads=args.num_threads,
        progress=show_progress(args),
        errors=args.errors,
        text_field=args.text_field,
        glob=args.glob,
        doc_separator=args.doc_separator,
        skip_bad_records=args.skip_bad_records,
    )
    secs = time.perf_counter() - start
    print(
        f"trained {args.output} (SentencePiece BPE, vocab size {tok.vocab_size:,}, "
        f"{Path(args.output).stat().st_size:,} bytes) in {secs:.2f} s",
        file=sys.stderr,
    )


def run(args) -> None:
    _refuse_other_models_options(args)
    TRAINERS[args.model](args)


def run_bpe(args) -> None:
    from bytepair._files import check_output
    from bytepair.formats import format_for_path
    from bytepair.patterns import pattern_name
    from bytepair.sources import open_sources
    from bytepair.training import train

    fmt = format_for_path(args.output, args.format)
    is_folder = fmt == "gpt2" or (fmt == "hf" and not args.output.endswith(".json"))
    check_output(args.output, is_folder, inputs=args.corpus)
    if all(Path(p).is_file() and Path(p).stat().st_size == 0 for p in args.corpus):
        raise ValueError(f"{', '.join(args.corpus)}: empty; nothing to train on")
    start = time.perf_counter()
    tok = train(
        args.corpus,
        args.vocab_size,
        special_tokens=args.special,
        pattern=args.pattern,
        num_threads=args.num_threads,
        progress=show_progress(args),
        errors=args.errors,
        min_frequency=args.min_frequency,
        max_token_length=args.max_token_length,
        reserved_special_tokens=args.reserved_special_tokens,
        pad_to_multiple_of=args.pad_to_multiple_of,
        text_field=args.text_field,
        glob=args.glob,
        doc_separator=args.doc_separator,
        skip_bad_records=args.skip_bad_records,
        engine=args.engine,
        ray_address=args.ray_address,
    )
    tok.save(args.output, format=fmt)
    secs = time.perf_counter() - start
    stats = tok.training_stats
    # Compression on (the start of) the training documents, in bytes per token.
    sample_bytes = n_tokens = 0
    if "-" not in args.corpus:  # stdin cannot be read twice
        docs = open_sources(
            args.corpus,
            text_field=args.text_field,
            glob=args.glob,
            doc_separator=args.doc_separator,
            special_tokens=args.special,
            skip_bad_records=True,
            errors="replace",
        )
        for doc in docs.sources[0].documents():
            sample_bytes += len(doc.encode("utf-8"))
            n_tokens += tok.count_tokens(doc, allowed_special="all")
            if sample_bytes >= 10_000_000:
                break
    ratio = sample_bytes / max(n_tokens, 1)
    mb = stats.bytes_read / 1e6
    lines = [
        f"trained {args.output} in {secs:.2f} s ({mb / max(secs, 1e-9):.1f} MB/s): {mb:.1f} MB "
        f"read in {stats.count_seconds:.2f} s, {plural(stats.distinct_pretokens, 'distinct pre-token')}, "
        f"{plural(stats.merges_done, 'merge')} in {stats.merge_seconds:.2f} s",
        f"vocab size {tok.vocab_size:,} (pattern {pattern_name(tok.pattern)}, "
        f"special tokens: {', '.join(tok.special_tokens) or 'none'})",
    ]
    if n_tokens:
        lines.append(
            f"compression on the training text: {ratio:.2f} bytes/token"
            + (" (first 10 MB)" if stats.bytes_read > 10_000_000 else "")
        )
    merges = tok.merges
    if merges:
        lines.append(
            "first merges: " + ", ".join(f"{printable(a)}+{printable(b)}" for a, b in merges[:3])
        )
        lines.append(
            "last merges:  " + ", ".join(f"{printable(a)}+{printable(b)}" for a, b in merges[-3:])
        )
    print("\n".join(lines), file=sys.stderr)


#: What trains each --model.
TRAINERS = {"bpe": run_bpe, "sentencepiece": run_sentencepiece}
