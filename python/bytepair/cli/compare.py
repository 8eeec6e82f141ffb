"""``bytepair compare``: several tokenizers on the same text files (a folder of
parallel texts gives a table per language)."""

from __future__ import annotations

from bytepair.cli._common import add_threads_option
from bytepair.cli.stats import check_plot, plot_or_json


def add_parser(sub) -> None:
    c = sub.add_parser("compare", help="compare tokenizers on the same texts")
    c.add_argument(
        "-t",
        "--tokenizer",
        action="append",
        required=True,
        dest="tokenizers",
        metavar="TOKENIZER",
        help="a tokenizer, as for the other subcommands (repeat: the first is the baseline)",
    )
    c.add_argument(
        "corpora",
        nargs="+",
        metavar="CORPUS",
        help="UTF-8 text files, or folders of parallel texts named like ud_pud_en.txt",
    )
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    c.add_argument("--plot", metavar="FILE", help="save a bar chart of tokens (.png, .svg, .pdf)")
    add_threads_option(c)
    c.set_defaults(func=run)


def run(args) -> None:
    from pathlib import Path

    from bytepair.cli._common import load_tokenizer
    from bytepair.reports import compare

    check_plot(args)
    named = {}
    for spec in args.tokenizers:
        if spec in named:
            raise ValueError(f"-t {spec} given twice; give each tokenizer once")
        named[spec] = load_tokenizer(args, spec)
    report = compare(named, args.corpora, num_threads=args.num_threads)
    if plot_or_json(args, report, "tokens_per_language"):
        return
    names = report.tokenizers
    labels = [r.language or Path(r.corpus).name for r in report.rows]
    table = [["corpus", "bytes", *names]]
    for label, r in zip(labels, report.rows):
        cells = [f"{n:,} ({b:.2f} B/t)" for n, b in zip(r.tokens, r.bytes_per_token)]
        cells[1:] = [f"{c} x{x:.2f}" for c, x in zip(cells[1:], r.relative[1:])]
        table.append([label, f"{r.bytes:,}", *cells])
    if any(r.premium for r in report.rows):
        table.append(["", "", *[""] * len(names)])
        table.append(["vs English", "", *[""] * len(names)])
        for label, r in zip(labels, report.rows):
            if r.premium:
                table.append([label, "", *(f"x{p:.2f}" for p in r.premium)])
    widths = [max(len(row[k]) for row in table) for k in range(len(table[0]))]
    for row in table:
        line = f"{row[0]:<{widths[0]}}  " + "  ".join(
            f"{c:>{w}}" for c, w in zip(row[1:], widths[1:])
        )
        print(line.rstrip())
    print(f"tokens (bytes/token); xN: tokens relative to {names[0]}", end="")
    print(
        "; vs English: tokens relative to the English text" if len(table) > len(labels) + 1 else ""
    )
