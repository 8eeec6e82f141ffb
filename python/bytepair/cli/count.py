"""``bytepair count``: tokens per input file, and the total.

Text (compressed or not, stdin) is counted as it is, special tokens included, by the
core's file pipeline on all cores (as ``encode -o x.bin`` encodes it, ids counted and
not kept); JSON Lines, Parquet and folders through ``bytepair.sources``: a record
file's count is the sum over its documents (the ``--text-field`` of each record)."""

from __future__ import annotations

from bytepair.cli._common import add_source_options, add_tokenizer_options
from bytepair.cli.encode import SPECIALS_HELP, cli_special_error, special_kwargs


def add_parser(sub) -> None:
    c = sub.add_parser("count", help="count tokens in files")
    add_tokenizer_options(c)
    c.add_argument(
        "files",
        nargs="+",
        help="inputs: UTF-8 text (.gz/.xz/.zst/.bz2 too), .jsonl, .parquet, folders, '-' for stdin",
    )
    add_source_options(c)
    c.add_argument(
        "--specials", choices=["allow", "text", "disallow"], default="allow", help=SPECIALS_HELP
    )
    c.set_defaults(func=run)


def run(args) -> None:
    from bytepair.cli._common import load_tokenizer, open_inputs
    from bytepair.options import threads
    from bytepair.shards.one_file import text_tokens
    from bytepair.sources import part_chars_for
    from bytepair.sources.text import TextSource

    tok = load_tokenizer(args)
    kwargs = special_kwargs(args.specials)
    corpus = open_inputs(args, args.files, part_chars=part_chars_for(tok))
    total = 0
    for src in corpus.sources:
        try:
            if isinstance(src, TextSource):
                n = text_tokens(tok, src, None, 4, threads(None), kwargs, None)
            else:
                n = sum(tok.count_tokens(doc, **kwargs) for doc in src.documents())
        except ValueError as e:
            raise cli_special_error(e, src.name) from None
        total += n
        print(f"{n}\t{src.name}")
    corpus.skips.report()
    if len(corpus.sources) > 1:
        print(f"{total}\ttotal")
