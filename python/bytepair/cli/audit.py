"""``bytepair audit``: candidates for under-trained tokens ("SolidGoldMagikarp"), from
the tokenizer alone, token counts on corpora, and an embedding matrix."""

from __future__ import annotations

from bytepair.cli._common import add_threads_option, add_tokenizer_options, positive_int
from bytepair.cli.stats import plot_or_json


def add_parser(sub) -> None:
    a = sub.add_parser("audit", help="find tokens a model may have barely trained")
    add_tokenizer_options(a)
    a.add_argument(
        "corpora", nargs="*", metavar="CORPUS", help="UTF-8 text files (ideally the training text)"
    )
    a.add_argument(
        "--embeddings",
        metavar="FILE",
        help="a model's (un)embedding matrix, one row per id: .npy or .safetensors",
    )
    a.add_argument("--tensor", help="the tensor's name in a .safetensors file")
    a.add_argument(
        "--threshold",
        type=int,
        default=2,
        metavar="N",
        help="tokens produced at most N times on the corpora are rare (default 2)",
    )
    a.add_argument(
        "--top", type=positive_int, default=10, metavar="N", help="tokens shown per reason"
    )
    a.add_argument("--json", action="store_true", help="print every candidate as JSON")
    add_threads_option(a)
    a.set_defaults(func=run)


def run(args) -> None:
    from bytepair.cli._common import load_tokenizer
    from bytepair.reports import audit
    from bytepair.reports.audit import REASONS

    if args.threshold < 0:
        raise ValueError(f"--threshold {args.threshold}: must be 0 or more")
    tok = load_tokenizer(args)
    report = audit(
        tok,
        args.corpora,
        args.embeddings,
        args.threshold,
        tensor=args.tensor,
        embedding_top=args.top,
        num_threads=args.num_threads,
    )
    if plot_or_json(args, report, ""):
        return
    print(f"{report.tokenizer}: {report.vocab_size:,} tokens", end="")
    if report.corpora:
        print(f"; {report.corpus_tokens:,} tokens of text in {len(report.corpora)} file(s)", end="")
    print()
    for note in report.notes:
        print(f"  note: {note}")
    for reason, n in report.by_reason.items():
        meaning = REASONS[reason].replace("THRESHOLD", str(report.threshold))
        print(f"  {reason:<17} {n:>8,}  {meaning}")
    for reason, n in report.by_reason.items():
        if not n:
            continue
        print(f"\n{reason} ({n:,}):")
        for c in report.with_reason(reason)[: args.top]:
            print("  " + _row(c, reason))


def _row(c, reason: str) -> str:
    parts = [f"{c.id:>7}  {c.text}"]
    if c.count is not None:
        parts.append(f"count {c.count:,}")
    if c.formed:
        parts.append(f"built {c.formed:,}")
    if c.absorbed_into:
        parts.append("into " + ", ".join(map(str, c.absorbed_into)))
    if c.duplicate_of is not None:
        parts.append(f"same bytes as {c.duplicate_of}")
    if c.distance is not None:
        parts.append(f"distance {c.distance:.3f}")
    others = [r for r in c.reasons if r != reason]
    if others:
        parts.append("also: " + ", ".join(others))
    return "  ".join(parts)
