"""What the subcommands share: loading ``-t TOKENIZER``, ``--special TOKEN=ID``, the
thread-count option, progress and how tokens are printed."""

from __future__ import annotations

import argparse
import sys


class SingleValue(argparse.Action):
    """An option that may be given once: a second ``-t`` is an error, not silently the winner."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice; give it once")
        setattr(namespace, self.dest, values)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_tokenizer_options(
    p: argparse.ArgumentParser, what: str = "tokenizer", many: bool = False
) -> None:
    """``-t`` (once and required, or with ``many`` repeatable and optional), ``--special``
    and ``--pattern``."""
    p.add_argument(
        "-t",
        "--tokenizer",
        required=not many,
        action="append" if many else SingleValue,
        default=[] if many else None,
        help=f"the {what}: a bundled encoding (gpt2, cl100k_base, o200k_base, ...), a "
        ".bytepair file, a tokenizer.json (or its folder), a .tiktoken file (with --pattern), "
        "a SentencePiece .model or a GPT-2 folder" + ("; repeatable" if many else ""),
    )
    p.add_argument(
        "--special",
        action="append",
        default=[],
        metavar="TOKEN=ID",
        help="add a special token (repeatable), e.g. '<|im_start|>=100264'; for a .tiktoken "
        "file, its special tokens",
    )
    p.add_argument(
        "--pattern", help="pre-tokenizer of a .tiktoken input: gpt2, cl100k, o200k or a regex"
    )
    p.add_argument(
        "--add-bos",
        action=argparse.BooleanOptionalAction,
        help="put the BOS token before every text, or not (default: as the file says)",
    )
    p.add_argument(
        "--add-eos",
        action=argparse.BooleanOptionalAction,
        help="put the EOS token after every text, or not (default: as the file says)",
    )
    p.add_argument(
        "--bos-token",
        metavar="TOKEN",
        help="the special token --add-bos puts (if the file names none)",
    )
    p.add_argument(
        "--eos-token",
        metavar="TOKEN",
        help="the special token --add-eos puts (if the file names none)",
    )


def add_threads_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--num-threads",
        type=positive_int,
        default=None,
        metavar="N",
        help="threads (default: all cores)",
    )


def add_engine_options(p, what: str) -> None:
    """``--engine local|ray`` and ``--ray-address``: where ``what`` runs."""
    p.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help=f"where {what} runs: this process (default) or a Ray cluster",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster (default: what ray.init finds, e.g. RAY_ADDRESS)",
    )


def add_source_options(p: argparse.ArgumentParser) -> None:
    """How inputs are read: the record field, the folder filter, bad records."""
    p.add_argument(
        "--text-field",
        default="text",
        metavar="NAME",
        help="the text of a JSON Lines/Parquet record (default: text; nested: meta.body)",
    )
    p.add_argument("--glob", metavar="PATTERN", help="in folders, read only files matching this")
    p.add_argument(
        "--skip-bad-records",
        action="store_true",
        help="skip records that are not JSON or lack the text field (counted and reported)",
    )


def open_inputs(args, files: list[str], **options):
    """The inputs as every subcommand reads them (``bytepair.sources.open_sources``):
    text whole or split into documents, JSON Lines / Parquet records by
    ``--text-field``, folders by ``--glob``, ``--skip-bad-records``, ``--errors``."""
    from bytepair.sources import open_sources

    return open_sources(
        files,
        text_field=args.text_field,
        glob=args.glob,
        skip_bad_records=args.skip_bad_records,
        errors=getattr(args, "errors", "strict"),
        **options,
    )


def parse_specials(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items:
        token, sep, id_text = item.rpartition("=")
        if not sep or not token or not id_text.isdigit():
            raise ValueError(f"--special {item!r}: expected TOKEN=ID, e.g. '<|endoftext|>=100257'")
        out[token] = int(id_text)
    return out


def load_tokenizer(args, spec: str | None = None):
    """The tokenizer ``-t`` names, with ``--special`` tokens added."""
    from pathlib import Path

    from bytepair.encodings import list_encodings
    from bytepair.formats import detect
    from bytepair.tokenizer import load

    spec = spec or args.tokenizer
    specials = parse_specials(getattr(args, "special", []) or [])
    pattern = getattr(args, "pattern", None)
    path = Path(spec)
    # Detected once here and handed to load, which would otherwise read the head again.
    fmt = detect(path) if path.exists() and spec not in list_encodings() else None
    if fmt == "tiktoken":
        if pattern is None:
            raise ValueError(
                f"{spec}: a .tiktoken file holds no pre-tokenizer pattern; pass --pattern "
                "(gpt2, cl100k, o200k or a regex) and its special tokens with --special TOKEN=ID"
            )
        tok = load(spec, format=fmt, pattern=pattern, special_tokens=specials)
        return with_frame_options(args, tok)
    tok = load(spec, format=fmt, pattern=pattern if path.is_dir() else None)
    if specials:
        tok = tok.with_special_tokens(specials)
    return with_frame_options(args, tok)


def with_frame_options(args, tok):
    """``tok`` with the BOS/EOS options given (``--add-bos``, ``--bos-token``...)."""
    names = ("add_bos", "add_eos", "bos_token", "eos_token")
    options = {n: getattr(args, n, None) for n in names if getattr(args, n, None) is not None}
    if not options:
        return tok
    try:
        return tok.with_options(**options)
    except ValueError as e:
        message = str(e).replace("bos_token=...", "--bos-token TOKEN")
        raise ValueError(message.replace("eos_token=...", "--eos-token TOKEN")) from None


def show_progress(args) -> bool | None:
    """None (a bar when stderr is a terminal) unless -q."""
    return False if getattr(args, "quiet", False) else None


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def warn(message: str) -> None:
    print(f"bytepair: warning: {message}", file=sys.stderr)
