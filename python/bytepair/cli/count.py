"""``bytepair count``: tokens per file, and the total."""

from __future__ import annotations

import sys

from bytepair._inputs import text_chunks
from bytepair.cli._common import add_tokenizer_options
from bytepair.cli.encode import SPECIALS_HELP, cli_special_error, special_kwargs


def add_parser(sub) -> None:
    c = sub.add_parser("count", help="count tokens in files")
    add_tokenizer_options(c)
    c.add_argument("files", nargs="+", help="UTF-8 text files ('-' for stdin)")
    c.add_argument(
        "--specials", choices=["allow", "text", "disallow"], default="allow", help=SPECIALS_HELP
    )
    c.set_defaults(func=run)


def run(args) -> None:
    from bytepair._inputs import check_text_file
    from bytepair.cli._common import load_tokenizer

    tok = load_tokenizer(args)
    kwargs = special_kwargs(args.specials)
    total = 0
    for name in args.files:
        if name == "-":
            f = sys.stdin.buffer
        else:
            f = open(check_text_file(name), "rb")
        with f:
            try:
                n = sum(len(ids) for ids in tok.encode_chunks(text_chunks(f, name), **kwargs))
            except ValueError as e:
                raise cli_special_error(e, name) from None
        total += n
        print(f"{n}\t{name}")
    if len(args.files) > 1:
        print(f"{total}\ttotal")
