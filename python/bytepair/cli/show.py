"""``bytepair show``: how text splits into tokens, coloured in the terminal."""

from __future__ import annotations

import sys

from bytepair.cli._common import add_tokenizer_options
from bytepair.cli.encode import SPECIALS_HELP, cli_special_error, special_kwargs

# Background colours cycled over tokens (256-colour ANSI codes).
COLOURS = [153, 222, 151, 217, 183, 187, 159, 224]


def add_parser(sub) -> None:
    s = sub.add_parser("show", help="show how text is split into tokens, in colour")
    add_tokenizer_options(s)
    s.add_argument("text", nargs="?", help="the text (default: stdin)")
    s.add_argument(
        "--specials", choices=["allow", "text", "disallow"], default="allow", help=SPECIALS_HELP
    )
    s.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    s.set_defaults(func=run)


def run(args) -> None:
    from bytepair.cli._common import load_tokenizer

    tok = load_tokenizer(args)
    text = args.text if args.text is not None else sys.stdin.read()
    try:
        ids = tok.encode(text, **special_kwargs(args.specials))
    except ValueError as e:
        raise cli_special_error(e, "the text") from None
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    parts = []
    for n, i in enumerate(ids):
        piece = tok.decode_single_token_bytes(i).decode("utf-8", errors="backslashreplace")
        if colour:
            # newlines shown as ↵ so the coloured block stays visible
            shown = piece.replace("\n", "↵\n")
            parts.append(f"\x1b[48;5;{COLOURS[n % len(COLOURS)]}m\x1b[30m{shown}\x1b[0m")
        else:
            parts.append(f"[{piece}]")
    print("".join(parts))
    print(ids)
    n_bytes = len(text.encode("utf-8", "surrogatepass"))
    print(f"{len(ids)} tokens, {n_bytes} bytes, {n_bytes / max(len(ids), 1):.2f} bytes/token")
