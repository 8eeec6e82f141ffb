"""``bytepair encode``: text to token ids — printed, a file of ids, or (``-o OUT/``, or
several inputs) a folder of training shards (``bytepair.shards.write_shards``)."""

from __future__ import annotations

import sys
import time

from bytepair.cli._common import (
    add_engine_options,
    add_source_options,
    add_threads_option,
    add_tokenizer_options,
    plural,
    positive_int,
    show_progress,
)

SPECIALS_HELP = (
    "special tokens in the text: encode as specials (allow, the default), as plain text "
    "(text), or fail (disallow)"
)


def add_parser(sub) -> None:
    e = sub.add_parser("encode", help="encode text to token ids")
    add_tokenizer_options(e)
    e.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="text files (default: stdin, ids printed); for shards, documents are split on "
        "<|endoftext|>",
    )
    e.add_argument(
        "-o",
        "--output",
        help="write ids to this .bin (uint16/uint32) or .npy file, or to a folder of training "
        "shards when it ends with '/', is a folder or several FILEs are given",
    )
    e.add_argument(
        "--format", choices=["bin", "npy"], help="output format (default: from the suffix)"
    )
    e.add_argument(
        "--specials",
        choices=["allow", "text", "disallow"],
        help=SPECIALS_HELP + " (for shards: text)",
    )
    s = e.add_argument_group("training shards (-o OUT/)")
    s.add_argument(
        "--shard-tokens",
        type=positive_int,
        metavar="N",
        help="tokens per shard (default: 100,000,000)",
    )
    val = s.add_mutually_exclusive_group()
    val.add_argument(
        "--val-tokens", type=int, metavar="N", help="the first documents, until N tokens, to val"
    )
    val.add_argument(
        "--val-fraction", type=float, metavar="F", help="each document to val with probability F"
    )
    s.add_argument(
        "--eot",
        metavar="TOKEN",
        help="special token after each document (default: <|endoftext|>; 'none' for none)",
    )
    s.add_argument("--bos", metavar="TOKEN", help="special token before each document")
    s.add_argument(
        "--doc-separator",
        metavar="SEP",
        help="in text inputs, the string between documents (default: <|endoftext|>)",
    )
    s.add_argument(
        "--shuffle-docs", type=int, metavar="SEED", help="shuffle documents (bounded buffer)"
    )
    add_engine_options(s, "encoding")
    add_source_options(e)
    add_threads_option(e)
    e.add_argument(
        "--errors",
        choices=["strict", "replace"],
        default="strict",
        help="invalid UTF-8: stop with an error (default) or replace with U+FFFD",
    )
    e.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=run)


SHARD_OPTIONS = ("shard_tokens", "val_tokens", "val_fraction", "eot", "bos", "shuffle_docs")


def special_kwargs(mode: str | None) -> dict:
    if mode in ("allow", None):
        return {"allowed_special": "all"}
    if mode == "text":
        return {"disallowed_special": ()}
    return {}


def cli_special_error(e: ValueError, where: str) -> ValueError:
    """The core's special-token error, worded for the command line."""
    message = str(e)
    if "special token" in message and "not allowed" in message:
        token = message.split("special token ", 1)[1].split(",")[0].split(" at ")[0]
        return ValueError(
            f"{where}: the text contains the special token {token}; pass --specials allow to "
            "encode it as a special token, or --specials text to encode it as plain text"
        )
    return e


def is_folder_output(args) -> bool:
    """``-o OUT/``, an existing folder, or several inputs: a folder of shards."""
    import os

    out = args.output
    return out.endswith(("/", os.sep)) or os.path.isdir(out) or len(args.files) > 1


def run(args) -> None:
    from pathlib import Path

    from bytepair.cli._common import load_tokenizer, open_inputs
    from bytepair.shards import id_width
    from bytepair.shards.one_file import encode_documents
    from bytepair.sources.text import TextSource

    if args.output is not None and is_folder_output(args):
        return run_shards(args)
    given = [o for o in SHARD_OPTIONS if getattr(args, o) is not None]
    if args.engine != "local":
        given.append("engine")
    if given:
        option = "--" + given[0].replace("_", "-")
        raise ValueError(f"{option} applies to shard folders: give the folder as -o OUT/")
    if args.output is None and args.format is not None:
        raise ValueError("--format applies to files of ids: give the output file with -o")
    if args.output is not None and args.files in ([], ["-"]):
        raise ValueError("encoding to a file (-o) needs an input FILE, not stdin")
    # Every output reads its input the same way (as `count` and shards do): text whole,
    # JSON Lines / Parquet record by record (--text-field), compressed files unpacked.
    corpus = open_inputs(args, args.files or ["-"])
    tok = load_tokenizer(args)
    kwargs = special_kwargs(args.specials)
    if args.output is None:
        for src in corpus.sources:
            try:
                if isinstance(src, TextSource):
                    ids = tok.encode("".join(src.text_chunks()), **kwargs)
                    print(" ".join(map(str, ids)))
                else:  # one line of ids per record
                    for doc in src.documents():
                        print(" ".join(map(str, tok.encode(doc, **kwargs))))
            except ValueError as e:
                raise cli_special_error(e, src.name) from None
        corpus.skips.report()
        return
    (src, *others) = corpus.sources
    start = time.perf_counter()
    options = {
        "format": args.format,
        "num_threads": args.num_threads,
        "progress": show_progress(args),
        **kwargs,
    }
    try:
        if not others and isinstance(src, TextSource) and src.is_plain_file:
            # One plain text file: the core reads, encodes and writes it in blocks.
            n_tokens = tok.encode_file(src.path, args.output, errors=args.errors, **options)
        else:
            from bytepair._files import check_writable

            check_writable(args.output, [s.path for s in corpus.sources])
            n_tokens = encode_documents(tok, corpus, args.output, **options)
    except ValueError as e:
        raise cli_special_error(e, src.name if not others else "an input") from None
    secs = time.perf_counter() - start
    size = sum(s.size or 0 for s in corpus.sources)
    names = src.name if not others else f"{len(corpus.sources)} files"
    dtype = "uint16" if id_width(tok) == 2 else "uint32"
    print(
        f"encoded {names} ({size / 1e6:.1f} MB) to {Path(args.output)}: {n_tokens:,} tokens as "
        f"{dtype} ({size / max(n_tokens, 1):.2f} bytes/token) in {secs:.2f} s "
        f"({size / 1e6 / max(secs, 1e-9):.1f} MB/s)",
        file=sys.stderr,
    )


def run_shards(args) -> None:
    """``bytepair encode -t TOK FILES... -o OUT/``: a resumable folder of training shards."""
    from bytepair.cli._common import load_tokenizer, open_inputs
    from bytepair.shards import write_shards
    from bytepair.sources import part_chars_for

    if not args.files or "-" in args.files:
        raise ValueError("encoding to a shard folder needs input files (resuming re-reads them)")
    tok = load_tokenizer(args)
    eot = "<|endoftext|>" if args.eot is None else None if args.eot.lower() == "none" else args.eot
    corpus = open_inputs(
        args,
        args.files,
        doc_separator=args.doc_separator,
        special_tokens=[] if args.doc_separator else ["<|endoftext|>"],
        part_chars=part_chars_for(tok),  # long documents in parts where that is exact
    )
    specials = {"allow": {"allowed_special": "all"}, "disallow": {"disallowed_special": "all"}}
    try:
        summary = write_shards(
            tok,
            corpus,
            args.output,
            shard_tokens=args.shard_tokens or 100_000_000,
            val_tokens=args.val_tokens,
            val_fraction=args.val_fraction,
            format=args.format or "bin",
            eot=eot,
            bos=args.bos,
            shuffle_docs=args.shuffle_docs,
            num_threads=args.num_threads,
            progress=show_progress(args),
            inputs=[{"path": src.name, "bytes": src.size} for src in corpus.sources],
            engine=args.engine,
            ray_address=args.ray_address,
            **specials.get(args.specials, {}),
        )
    except ValueError as e:
        raise cli_special_error(e, "a document") from None
    size = sum(x["bytes"] for x in summary["inputs"] or [])
    secs = summary["seconds"]
    parts = []
    for split, counts in summary["splits"].items():
        n = sum(s["split"] == split for s in summary["shards"])
        if n:
            parts.append(
                f"{plural(n, split + ' shard')} ({counts['tokens']:,} tokens, "
                f"{plural(counts['documents'], 'document')})"
            )
    if summary["complete"]:
        print(
            f"{args.output}: already complete ({' and '.join(parts) or 'no shards'}); "
            "nothing to do",
            file=sys.stderr,
        )
        return
    print(
        f"wrote {' and '.join(parts) or 'no shards'} to {args.output} as {summary['dtype']} "
        f"from {size / 1e6:.1f} MB in {secs:.2f} s ({size / 1e6 / max(secs, 1e-9):.1f} MB/s)"
        + (", continuing an interrupted run" if summary["resumed"] else ""),
        file=sys.stderr,
    )
