"""``bytepair encode``: text to token ids — printed, or a file of ids for LM training."""

from __future__ import annotations

import sys
import time

from bytepair.cli._common import add_threads_option, add_tokenizer_options, show_progress

SPECIALS_HELP = (
    "special tokens in the text: encode as specials (allow, the default), as plain text "
    "(text), or fail (disallow)"
)


def add_parser(sub) -> None:
    e = sub.add_parser("encode", help="encode text to token ids")
    add_tokenizer_options(e)
    e.add_argument("file", nargs="?", help="text file (default: stdin, ids printed)")
    e.add_argument("-o", "--output", help="write ids to this .bin (uint16/uint32) or .npy file")
    e.add_argument(
        "--format", choices=["bin", "npy"], help="output format (default: from the suffix)"
    )
    e.add_argument(
        "--specials", choices=["allow", "text", "disallow"], default="allow", help=SPECIALS_HELP
    )
    add_threads_option(e)
    e.add_argument(
        "--errors",
        choices=["strict", "replace"],
        default="strict",
        help="invalid UTF-8: stop with an error (default) or replace with U+FFFD",
    )
    e.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=run)


def special_kwargs(mode: str) -> dict:
    if mode == "allow":
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


def run(args) -> None:
    from pathlib import Path

    from bytepair._inputs import check_text_file
    from bytepair.cli._common import load_tokenizer
    from bytepair.shards import id_width

    if args.output is None:
        if args.format is not None:
            raise ValueError("--format applies to files of ids: give the output file with -o")
        tok = load_tokenizer(args)
        name = "<stdin>" if args.file in (None, "-") else args.file
        if args.file in (None, "-"):
            text = sys.stdin.read()
        else:
            text = check_text_file(args.file).read_text(encoding="utf-8", errors=args.errors)
        try:
            ids = tok.encode(text, **special_kwargs(args.specials))
        except ValueError as e:
            raise cli_special_error(e, name) from None
        print(" ".join(map(str, ids)))
        return
    if args.file in (None, "-"):
        raise ValueError("encoding to a file (-o) needs an input FILE, not stdin")
    src = check_text_file(args.file)
    tok = load_tokenizer(args)
    start = time.perf_counter()
    try:
        n_tokens = tok.encode_file(
            src,
            args.output,
            format=args.format,
            errors=args.errors,
            num_threads=args.num_threads,
            progress=show_progress(args),
            **special_kwargs(args.specials),
        )
    except ValueError as e:
        raise cli_special_error(e, str(src)) from None
    secs = time.perf_counter() - start
    size = src.stat().st_size
    dtype = "uint16" if id_width(tok) == 2 else "uint32"
    print(
        f"encoded {src} ({size / 1e6:.1f} MB) to {Path(args.output)}: {n_tokens:,} tokens as "
        f"{dtype} ({size / max(n_tokens, 1):.2f} bytes/token) in {secs:.2f} s "
        f"({size / 1e6 / max(secs, 1e-9):.1f} MB/s)",
        file=sys.stderr,
    )
