"""``bytepair serve``: a local web page showing tokens as you type (offline)."""

from __future__ import annotations

import errno
import sys

from bytepair.cli._common import add_tokenizer_options


def add_parser(sub) -> None:
    s = sub.add_parser(
        "serve",
        help="a local web page showing how text splits into tokens (offline)",
        description="Serve a page that tokenizes text as you type, compares tokenizers "
        "side by side and counts chat conversations. Every bundled encoding is offered, "
        "plus each -t given. Nothing is loaded from the network.",
    )
    add_tokenizer_options(s, "tokenizer to offer besides the bundled ones", many=True)
    s.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default: 127.0.0.1, this machine only)",
    )
    s.add_argument(
        "--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)"
    )
    s.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        # The default is bytepair.web.server.MAX_TOKENS (not imported here: every
        # subcommand would start 30 ms slower).
        help="most tokens one request may show, in all (default: 100,000); "
        "each is ~1.5 KB of server memory while the answer is made",
    )
    s.add_argument("--open", action="store_true", help="open the page in a web browser")
    s.add_argument(
        "--chat-template",
        metavar="FILE",
        help="a JSON chat template used for every tokenizer's chat mode (see bytepair.web.chat)",
    )
    s.set_defaults(func=run)


def run(args) -> None:
    from bytepair.cli._common import load_tokenizer, warn
    from bytepair.web import Registry, make_server
    from bytepair.web.chat import read_template
    from bytepair.web.server import LOOPBACK

    given = {}
    for spec in args.tokenizer:
        if spec not in given:
            given[spec] = load_tokenizer(args, spec)
    template = read_template(args.chat_template) if args.chat_template else None
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port {args.port}: a port is 0 to 65535")
    limits = {}
    if args.max_tokens is not None:
        if args.max_tokens < 1:
            raise ValueError(f"--max-tokens {args.max_tokens}: give at least 1")
        limits["max_tokens"] = args.max_tokens
    if args.host not in LOOPBACK:
        warn(f"--host {args.host}: the page is reachable from other machines")
    try:
        server = make_server(Registry(given, template), args.host, args.port, **limits)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ValueError(
                f"port {args.port} is in use; pick another with --port, or --port 0 for a free one"
            ) from None
        raise ValueError(f"--host {args.host} --port {args.port}: {e.strerror}") from None
    print(f"bytepair serve: {server.url}  (Ctrl-C to stop)", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("bytepair serve: stopped", file=sys.stderr)
    finally:
        server.server_close()
