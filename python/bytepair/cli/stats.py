"""``bytepair stats``: the vocabulary, and how the tokenizer does on text files."""

from __future__ import annotations

import json

from bytepair.cli._common import add_threads_option, add_tokenizer_options


def add_parser(sub) -> None:
    s = sub.add_parser("stats", help="vocabulary report, and bytes/token etc. on text files")
    add_tokenizer_options(s)
    s.add_argument("corpora", nargs="*", metavar="CORPUS", help="UTF-8 text files")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--plot", metavar="FILE", help="save the Zipf curve (.png, .svg, .pdf)")
    add_threads_option(s)
    s.set_defaults(func=run)


def run(args) -> None:
    from bytepair.cli._common import load_tokenizer
    from bytepair.reports import stats

    if args.plot and not args.corpora:
        raise ValueError(f"--plot {args.plot}: the Zipf curve needs at least one CORPUS")
    check_plot(args)
    tok = load_tokenizer(args)
    report = stats(tok, args.corpora, num_threads=args.num_threads)
    if plot_or_json(args, report, "zipf"):
        return
    v = report.vocab
    merges = "no merges" if v.merges is None else f"{v.merges:,} merges"
    print(f"{report.tokenizer}: {v.vocab_size:,} tokens ({merges}, {v.special} special)")
    print("by kind:   " + ", ".join(f"{k} {n:,}" for k, n in v.by_kind.items() if n))
    print("by script: " + ", ".join(f"{k} {n:,}" for k, n in v.by_script.items()))
    print("by length (bytes): " + ", ".join(f"{k}: {n:,}" for k, n in v.by_length.items()))
    print("longest:   " + "  ".join(row.text for row in v.longest[:5]))
    for c in report.corpora:
        print(
            f"\n{c.path}: {c.bytes:,} bytes, {c.tokens:,} tokens, {c.words:,} words\n"
            f"  {c.bytes_per_token:.2f} bytes/token, {c.tokens_per_word:.2f} tokens/word, "
            f"{c.distinct_tokens:,} distinct tokens ({c.vocab_used:.1%} of the vocabulary)\n"
            "  most frequent: " + "  ".join(f"{r.text} {r.count:,}" for r in c.top_tokens[:10])
        )


def check_plot(args) -> None:
    """Fails before the long work if ``--plot FILE`` cannot be written."""
    if getattr(args, "plot", None):
        from bytepair._files import check_writable

        check_writable(args.plot)


def plot_or_json(args, report, plot: str) -> bool:
    """Saves ``--plot`` (with ``reports.plots.<plot>``) and prints ``--json``; True if
    the JSON was printed (then the text table is not)."""
    if getattr(args, "plot", None):
        from bytepair.reports import plots

        getattr(plots, plot)(report, args.plot)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    return args.json
