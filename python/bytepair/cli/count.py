"""``bytepair count``: tokens per file, and the total."""

from __future__ import annotations

import codecs
import sys
from collections.abc import Iterator

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


def text_chunks(f, name: str, size: int = 1 << 20) -> Iterator[str]:
    """A binary stream as text chunks; invalid UTF-8 is an error naming the byte offset."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    done = 0
    while True:
        data = f.read(size)
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            # e.object is the bytes the decoder held back from the last read + this read
            offset = done - (len(e.object) - len(data)) + e.start
            raise ValueError(
                f"{name}: invalid UTF-8 at byte offset {offset} (byte 0x{e.object[e.start]:02x})"
            ) from None
        done += len(data)
        if text:
            yield text
        if not data:
            return


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
