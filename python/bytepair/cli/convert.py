"""``bytepair convert``: a tokenizer from one file format to another."""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    v = sub.add_parser("convert", help="convert a tokenizer between file formats")
    v.add_argument(
        "input", help="bundled name, .bytepair, tokenizer.json, .tiktoken or GPT-2 folder"
    )
    v.add_argument("output", help="file to write (a folder for gpt2 and hf)")
    v.add_argument(
        "--to",
        choices=["tiktoken", "hf", "gpt2", "bytepair"],
        help="output format (default: from the output's suffix; a folder means gpt2)",
    )
    v.add_argument(
        "--pattern", help="pre-tokenizer of a .tiktoken input: gpt2, cl100k, o200k or a regex"
    )
    v.add_argument(
        "--special",
        action="append",
        default=[],
        metavar="TOKEN=ID",
        help="special token of a .tiktoken input, or one to add (repeatable)",
    )
    for role in ("eos", "bos", "pad", "unk"):
        v.add_argument(
            f"--{role}-token",
            metavar="TOKEN",
            help=f"the {role} token in Hugging Face config files (hf, gpt2)",
        )
    v.set_defaults(func=run, tokenizer=None)


def run(args) -> None:
    from bytepair._files import check_output
    from bytepair.cli._common import load_tokenizer, plural
    from bytepair.formats import format_for_path
    from bytepair.patterns import pattern_name

    target = format_for_path(args.output, args.to)
    is_folder = target == "gpt2" or (target == "hf" and not args.output.endswith(".json"))
    check_output(args.output, is_folder, inputs=[args.input])
    tok = load_tokenizer(args, args.input)
    options = {}
    if target in ("hf", "gpt2"):
        for role in ("eos", "bos", "pad", "unk"):
            value = getattr(args, f"{role}_token")
            if value is not None:
                options[f"{role}_token"] = value
    elif any(getattr(args, f"{role}_token") for role in ("eos", "bos", "pad", "unk")):
        raise ValueError(f"--eos-token and the like apply to hf and gpt2 outputs, not {target}")
    tok.save(args.output, format=target, **options)
    specials = tok.special_tokens
    if target == "tiktoken":
        print(
            f"wrote {args.output} (tiktoken): {plural(tok.vocab_size - len(specials), 'rank')}. "
            f"Not stored, pass them when loading: the pattern ({pattern_name(tok.pattern)}) and "
            f"{plural(len(specials), 'special token')}"
            + (f" ({', '.join(f'{t}={i}' for t, i in specials.items())})" if specials else ""),
            file=sys.stderr,
        )
        return
    print(
        f"wrote {args.output} ({target}): {plural(tok.vocab_size, 'token')}, "
        f"{plural(len(specials), 'special token')}",
        file=sys.stderr,
    )
