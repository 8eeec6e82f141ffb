"""The ``bytepair`` command line: train, encode, decode, show.

Every failure is one line on stderr and a non-zero exit; outputs are written to a
temporary file and renamed, so a failed run leaves no partial file behind.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from bytepair.formats import atomic_write

# Background colours cycled over tokens by `show` (256-colour ANSI codes).
_COLOURS = [153, 222, 151, 217, 183, 187, 159, 224]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not the whole usage text
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _load_tokenizer(spec: str, pattern: str | None = None, specials: dict | None = None):
    """A tokenizer from a bundled name, a .bytepair file, a HF tokenizer.json, a
    .tiktoken file (needs `pattern`) or a folder of GPT-2 files."""
    from bytepair.encodings import get_encoding, list_encodings
    from bytepair.tokenizer import Tokenizer

    if spec in list_encodings():
        return get_encoding(spec)
    path = Path(spec)
    if path.is_dir():
        for vocab, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
            if (path / vocab).exists() and (path / merges).exists():
                names = specials if specials is not None else ["<|endoftext|>"]
                return Tokenizer.from_files(path / vocab, path / merges, names, pattern or "gpt2")
        raise ValueError(
            f"{path}: no vocab.json + merges.txt (or encoder.json + vocab.bpe) in this folder"
        )
    if not path.exists():
        raise FileNotFoundError(f"{spec}: no such tokenizer file or bundled encoding")
    if path.suffix == ".tiktoken":
        if pattern is None:
            raise ValueError(
                f"{path}: a .tiktoken file holds no pre-tokenizer pattern; pass --pattern "
                "(gpt2, cl100k, o200k or a regex) and its special tokens with --special TOKEN=ID"
            )
        return Tokenizer.from_tiktoken(path, pattern, specials or {})
    if path.suffix == ".json":
        return Tokenizer.from_hf(path)
    return Tokenizer.load(path)


def _show_progress(args) -> bool:
    # Bars on a terminal only: in logs and pipes the closing summary says it all.
    return not args.quiet and sys.stderr.isatty()


def _fmt_token(token: bytes) -> str:
    return repr(token.decode("utf-8", errors="backslashreplace"))


# -- train ------------------------------------------------------------------------------


def cmd_train(args) -> None:
    from bytepair.patterns import pattern_name
    from bytepair.training import train

    out = Path(args.output)
    if not out.parent.is_dir():
        raise FileNotFoundError(f"{out.parent}: output folder does not exist")
    tok = train(
        args.corpus,
        args.vocab_size,
        special_tokens=args.special,
        pattern=args.pattern,
        workers=args.workers,
        progress=_show_progress(args),
        errors=args.errors,
    )
    tok.save(out)
    stats = tok.training_stats
    # Compression on (the start of) the training text, in bytes per token.
    with open(args.corpus[0], "rb") as f:
        sample = f.read(10 << 20).decode("utf-8", errors="replace")
    n_tokens = len(tok.encode(sample, allowed_special="all"))
    ratio = len(sample.encode("utf-8")) / max(n_tokens, 1)
    mb = stats.bytes_read / 1e6
    first = ", ".join(f"{_fmt_token(a)}+{_fmt_token(b)}" for a, b in tok.merges[:3])
    last = ", ".join(f"{_fmt_token(a)}+{_fmt_token(b)}" for a, b in tok.merges[-3:])
    lines = [
        f"trained {out} in {stats.seconds:.2f} s: {mb:.1f} MB read "
        f"({mb / max(stats.count_seconds, 1e-9):.1f} MB/s), "
        f"{stats.distinct_pretokens:,} distinct pre-tokens, {stats.merges_done:,} merges "
        f"({stats.merge_seconds:.2f} s)",
        f"vocab size {tok.vocab_size:,} (pattern {pattern_name(tok.pattern)}, "
        f"special tokens: {', '.join(tok.special_tokens) or 'none'})",
        f"compression on the training text: {ratio:.2f} bytes/token"
        + (" (first 10 MB)" if stats.bytes_read > (10 << 20) else ""),
    ]
    if tok.merges:
        lines.append(f"first merges: {first}")
        lines.append(f"last merges:  {last}")
    print("\n".join(lines), file=sys.stderr)


# -- encode ----------------------------------------------------------------------------


def _special_args(mode: str) -> dict:
    if mode == "allow":
        return {"allowed_special": "all"}
    if mode == "text":
        return {"disallowed_special": ()}
    return {}


def _dtype_for(tok) -> np.dtype:
    return np.dtype("<u2") if tok.n_vocab <= 1 << 16 else np.dtype("<u4")


def cmd_encode(args) -> None:
    tok = _load_tokenizer(args.tokenizer)
    kwargs = _special_args(args.specials)
    if args.output is None:
        text = (
            sys.stdin.read()
            if args.file in (None, "-")
            else Path(args.file).read_text(encoding="utf-8")
        )
        print(" ".join(map(str, tok.encode(text, **kwargs))))
        return
    if args.file in (None, "-"):
        raise ValueError("encoding to a file (-o) needs an input FILE, not stdin")
    src, out = Path(args.file), Path(args.output)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such file")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"{out.parent}: output folder does not exist")
    size = src.stat().st_size
    bar = None
    if _show_progress(args):
        from tqdm.auto import tqdm

        bar = tqdm(total=size, desc="encoding", unit="B", unit_scale=True, unit_divisor=1024)
    start = time.perf_counter()
    try:
        n_tokens = tok.encode_file(
            src,
            out,
            format=args.format,
            errors=args.errors,
            num_threads=args.workers,
            progress=None if bar is None else (lambda done: bar.update(done - bar.n)),
            **kwargs,
        )
    finally:
        if bar is not None:
            bar.close()
    secs = time.perf_counter() - start
    dtype = "uint16" if tok.n_vocab <= 1 << 16 else "uint32"
    print(
        f"encoded {src} ({size / 1e6:.1f} MB) to {out}: {n_tokens:,} tokens as {dtype} "
        f"({size / max(n_tokens, 1):.2f} bytes/token) in {secs:.2f} s "
        f"({size / 1e6 / max(secs, 1e-9):.1f} MB/s)",
        file=sys.stderr,
    )


# -- count -----------------------------------------------------------------------------


def _read_chunks(f, size: int = 1 << 20):
    """A text file in chunks of `size` characters."""
    while chunk := f.read(size):
        yield chunk


def cmd_count(args) -> None:
    tok = _load_tokenizer(args.tokenizer)
    kwargs = _special_args(args.specials)
    total = 0
    for name in args.files:
        if name == "-":
            f = sys.stdin
        else:
            if not Path(name).is_file():
                raise FileNotFoundError(f"{name}: no such file")
            f = open(name, encoding="utf-8", newline="")
        with f:
            try:
                n = sum(len(ids) for ids in tok.encode_chunks(_read_chunks(f), **kwargs))
            except UnicodeDecodeError as e:
                raise ValueError(f"{name}: invalid UTF-8 ({e.reason})") from None
        total += n
        print(f"{n}\t{name}")
    if len(args.files) > 1:
        print(f"{total}\ttotal")


# -- convert ---------------------------------------------------------------------------

_TARGETS = {".tiktoken": "tiktoken", ".json": "hf", ".bytepair": "bytepair"}


def _parse_specials(items: list[str]) -> dict[str, int] | None:
    if not items:
        return None
    out = {}
    for item in items:
        token, sep, id_text = item.rpartition("=")
        if not sep or not token or not id_text.isdigit():
            raise ValueError(f"--special {item!r}: expected TOKEN=ID, e.g. '<|endoftext|>=100257'")
        out[token] = int(id_text)
    return out


def cmd_convert(args) -> None:
    tok = _load_tokenizer(args.input, args.pattern, _parse_specials(args.special))
    out = Path(args.output)
    target = args.to or _TARGETS.get(out.suffix) or ("gpt2" if out.is_dir() else None)
    if target is None:
        raise ValueError(f"{out}: cannot tell the format from the name; pass --to")
    if target == "gpt2":
        out.mkdir(exist_ok=True)
        tok.save_gpt2(out)
    else:
        {"tiktoken": tok.save_tiktoken, "hf": tok.save_hf, "bytepair": tok.save}[target](out)
    print(f"wrote {out} ({target}, {tok.vocab_size:,} tokens)", file=sys.stderr)


# -- decode ----------------------------------------------------------------------------


def _read_ids(path: str | None, tok) -> list[int]:
    if path in (None, "-"):
        text = sys.stdin.read()
    else:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file")
        if p.suffix == ".npy":
            return np.load(p, allow_pickle=False).reshape(-1).tolist()
        if p.suffix == ".bin":
            return np.fromfile(p, dtype=_dtype_for(tok)).tolist()
        text = p.read_text(encoding="utf-8")
    ids = []
    for n, word in enumerate(text.replace(",", " ").replace("[", " ").replace("]", " ").split()):
        try:
            ids.append(int(word))
        except ValueError:
            raise ValueError(f"token #{n} is {word!r}, not an integer id") from None
    return ids


def cmd_decode(args) -> None:
    tok = _load_tokenizer(args.tokenizer)
    text = tok.decode(_read_ids(args.file, tok))
    if args.output:
        atomic_write(args.output, text.encode("utf-8"))
    else:
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")


# -- show ------------------------------------------------------------------------------


def cmd_show(args) -> None:
    tok = _load_tokenizer(args.tokenizer)
    text = args.text if args.text is not None else sys.stdin.read()
    ids = tok.encode(text, **_special_args(args.specials))
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    parts = []
    for n, i in enumerate(ids):
        piece = tok.decode_single_token_bytes(i).decode("utf-8", errors="backslashreplace")
        if colour:
            # newlines shown as ↵ so the coloured block stays visible
            shown = piece.replace("\n", "↵\n")
            parts.append(f"\x1b[48;5;{_COLOURS[n % len(_COLOURS)]}m\x1b[30m{shown}\x1b[0m")
        else:
            parts.append(f"[{piece}]")
    print("".join(parts))
    print(ids)
    n_bytes = len(text.encode("utf-8"))
    print(f"{len(ids)} tokens, {n_bytes} bytes, {n_bytes / max(len(ids), 1):.2f} bytes/token")


# -- main ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bytepair", description="Train, encode and inspect byte-pair-encoding tokenizers."
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("train", help="train a tokenizer on text files")
    t.add_argument("corpus", nargs="+", help="UTF-8 text file(s)")
    t.add_argument(
        "--vocab-size", type=int, required=True, help="total tokens: 256 bytes + merges + specials"
    )
    t.add_argument(
        "--special",
        action="append",
        default=[],
        metavar="TOKEN",
        help="a special token, e.g. '<|endoftext|>' (repeatable)",
    )
    t.add_argument(
        "--pattern",
        default="gpt2",
        help="pre-tokenizer: gpt2 (default), cl100k, o200k, none, or a regex",
    )
    t.add_argument("--workers", type=int, default=None, help="threads (default: all cores)")
    t.add_argument(
        "--errors",
        choices=["strict", "replace"],
        default="strict",
        help="invalid UTF-8: stop with an error (default) or replace with U+FFFD",
    )
    t.add_argument("-o", "--output", required=True, help="tokenizer file to write (.bytepair)")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("encode", help="encode text to token ids")
    e.add_argument(
        "-t", "--tokenizer", required=True, help="a .bytepair file or a GPT-2 style folder"
    )
    e.add_argument("file", nargs="?", help="text file (default: stdin, ids printed)")
    e.add_argument("-o", "--output", help="write ids to this .bin (uint16/uint32) or .npy file")
    e.add_argument(
        "--format", choices=["bin", "npy"], help="output format (default: from the suffix)"
    )
    e.add_argument(
        "--specials",
        choices=["allow", "text", "disallow"],
        default="allow",
        help="special tokens in the text: encode as specials (default), as plain text, or fail",
    )
    e.add_argument("--workers", type=int, default=None, help="threads (default: all cores)")
    e.add_argument(
        "--errors",
        choices=["strict", "replace"],
        default="strict",
        help="invalid UTF-8: stop with an error (default) or replace with U+FFFD",
    )
    e.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=cmd_encode)

    c = sub.add_parser("count", help="count tokens in files")
    c.add_argument(
        "-t", "--tokenizer", required=True, help="a bundled encoding name or a tokenizer file"
    )
    c.add_argument("files", nargs="+", help="UTF-8 text files ('-' for stdin)")
    c.add_argument("--specials", choices=["allow", "text", "disallow"], default="allow")
    c.set_defaults(func=cmd_count)

    v = sub.add_parser("convert", help="convert a tokenizer between file formats")
    v.add_argument(
        "input", help="bundled name, .bytepair, tokenizer.json, .tiktoken or GPT-2 folder"
    )
    v.add_argument("output", help="file (or folder, for gpt2) to write")
    v.add_argument(
        "--to",
        choices=["tiktoken", "hf", "gpt2", "bytepair"],
        help="output format (default: from the output's suffix)",
    )
    v.add_argument(
        "--pattern", help="pre-tokenizer of a .tiktoken input: gpt2, cl100k, o200k or a regex"
    )
    v.add_argument(
        "--special",
        action="append",
        default=[],
        metavar="TOKEN=ID",
        help="special token of a .tiktoken or GPT-2 input (repeatable)",
    )
    v.set_defaults(func=cmd_convert)

    d = sub.add_parser("decode", help="decode token ids to text")
    d.add_argument("-t", "--tokenizer", required=True)
    d.add_argument("file", nargs="?", help="ids as text, .bin or .npy (default: stdin)")
    d.add_argument("-o", "--output", help="write the text here (default: stdout)")
    d.set_defaults(func=cmd_decode)

    s = sub.add_parser("show", help="show how text is split into tokens, in colour")
    s.add_argument("-t", "--tokenizer", required=True)
    s.add_argument("text", nargs="?", help="the text (default: stdin)")
    s.add_argument("--specials", choices=["allow", "text", "disallow"], default="allow")
    s.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    s.set_defaults(func=cmd_show)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except KeyboardInterrupt:
        print("bytepair: interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, KeyError, TypeError, UnicodeError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        if isinstance(e, OSError) and e.filename and str(e.filename) not in str(e):
            message = f"{e.filename}: {e.strerror}"
        print(f"bytepair {args.command}: error: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
