"""The ``bytepair`` command line: one module per subcommand.

- ``train``   a tokenizer from text files (``cli/train.py``)
- ``encode``  text to ids, printed or to a ``.bin``/``.npy`` file (``cli/encode.py``)
- ``decode``  ids (text, ``.bin``, ``.npy``) back to text (``cli/decode.py``)
- ``show``    tokens coloured in the terminal (``cli/show.py``)
- ``count``   tokens per file (``cli/count.py``)
- ``convert`` between file formats (``cli/convert.py``)
- ``stats``   vocabulary and corpus report (``cli/stats.py``)
- ``compare`` tokenizers on the same texts (``cli/compare.py``)
- ``audit``   candidates for under-trained tokens (``cli/audit.py``)
- ``serve``   a local web page showing tokens as you type (``cli/serve.py``)

Every failure is one line on stderr and a non-zero exit (2 for usage, 1 for errors,
130 for Ctrl-C, 143 for SIGTERM); warnings are one line too. Outputs are written to a
temporary file and renamed, so a failed or interrupted run leaves nothing behind.
"""

from __future__ import annotations

import argparse
import signal
import sys
import warnings

from bytepair.cli import (
    audit,
    compare,
    convert,
    count,
    decode,
    encode,
    serve,
    show,
    stats,
    train,
)

SUBCOMMANDS = [train, encode, decode, show, count, convert, stats, compare, audit, serve]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not the whole usage text
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from bytepair import __version__

    p = _Parser(
        prog="bytepair", description="Train, encode and inspect byte-pair-encoding tokenizers."
    )
    p.add_argument("--version", action="version", version=f"bytepair {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return p


class _Terminated(BaseException):
    """SIGTERM, raised where Python next runs (the core checks between blocks), so
    temporary files are removed on the way out as for Ctrl-C."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"bytepair: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warnings.showwarning = _one_line_warning
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        args.func(args)
    except KeyboardInterrupt:
        print("bytepair: interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        print("bytepair: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:
        # `bytepair encode ... | head`: the reader left; not an error of ours.
        sys.stderr.close()
        return 0
    except (OSError, ValueError, KeyError, TypeError, ImportError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        if isinstance(e, OSError) and e.filename and str(e.filename) not in str(e):
            message = f"{e.filename}: {e.strerror}"
        print(f"bytepair {args.command}: error: {message}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0
