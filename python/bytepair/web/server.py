"""The HTTP server behind ``bytepair serve``: the page's three files and its JSON API.

The standard library's ``ThreadingHTTPServer``: nothing to install for a local tool.

- ``GET /``, ``/app.js``, ``/app.css``: the page (files in ``bytepair/web/static``; a
  fixed table of names, so no path in a request ever reaches the file system).
- ``GET /api/tokenizers``: ``{"tokenizers": [{"name", "source", "chat"}], "default"}``.
- ``POST /api/encode`` ``{"text", "tokenizer", "allowed_special", "disallowed_special"}``
  -> :func:`bytepair.web.tokens.encode_view` plus ``"tokenizer"``.
- ``POST /api/compare`` ``{"text", "tokenizers": [2 to 4 names], ...}`` -> ``{"results":
  [one encode view per tokenizer, tokens marked "differs"]}``.
- ``POST /api/chat`` ``{"tokenizer", "messages": [{"role", "content"}]}`` -> the
  encode view of the conversation in the tokenizer's chat format, plus its ``"text"``.

Errors are ``{"error": message}``: 400 bad JSON or fields, 404 unknown tokenizer or
path, 411 no Content-Length, 413 a body over 10 MB. Tokenizers are only those named at
start: a request names one, it never opens a file.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from bytepair.web import chat as chat_formats
from bytepair.web.tokens import encode_view, mark_differences

MAX_BODY = 10 * 1024 * 1024
MAX_COMPARED = 4
LOOPBACK = ("127.0.0.1", "localhost", "::1")
STATIC = {  # URL path -> (file in bytepair/web/static, content type)
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}
# Everything the page loads comes from this server: no CDN, no fonts, nothing remote.
CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Registry:
    """The tokenizers the server offers: the bundled encodings (loaded on first use)
    and those given at start (``{name: Tokenizer}``, loaded already)."""

    def __init__(self, given: dict | None = None, chat_template=None):
        from bytepair.encodings import list_encodings

        self.given = dict(given or {})
        self.bundled = [n for n in list_encodings() if n not in self.given]
        self.chat_template = chat_template
        self._chat_tokenizers: dict[str, object] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return list(self.given) + self.bundled

    def get(self, name):
        if not isinstance(name, str):
            raise ApiError(400, '"tokenizer" must be a string naming one of /api/tokenizers')
        if name in self.given:
            return self.given[name]
        if name in self.bundled:
            from bytepair.encodings import get_encoding

            return get_encoding(name)
        raise ApiError(
            404, f"unknown tokenizer {name!r}; this server has: {', '.join(self.names())}"
        )

    def chat_format(self, name: str):
        """The --chat-template given at start, else the built-in format, else None."""
        return self.chat_template or chat_formats.BUILTIN.get(name)

    def chat_tokenizer(self, name: str):
        """The tokenizer with its chat format's special tokens added (made once)."""
        tok, fmt = self.get(name), self.chat_format(name)
        if fmt is None:
            raise ApiError(
                400,
                f"{name} has no chat format; the built-in ones are for "
                f"{', '.join(chat_formats.BUILTIN)} (start with --chat-template FILE for others)",
            )
        with self._lock:
            if name not in self._chat_tokenizers:
                try:
                    self._chat_tokenizers[name] = tok.with_special_tokens(fmt.special_tokens)
                except ValueError as e:
                    raise ApiError(400, f"the chat format does not fit {name}: {e}") from None
            return self._chat_tokenizers[name], fmt

    def describe(self) -> dict:
        items = [
            {"name": n, "source": "given", "chat": self.chat_format(n) is not None}
            for n in self.given
        ]
        items += [
            {"name": n, "source": "bundled", "chat": self.chat_format(n) is not None}
            for n in self.bundled
        ]
        default = next(iter(self.given), "cl100k_base")
        return {"tokenizers": items, "default": default}


# -- request bodies -----------------------------------------------------------------------


def _text(body: dict, key: str = "text") -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise ApiError(400, f'"{key}" must be a string')
    return value


def _special_options(body: dict) -> dict:
    """``allowed_special`` / ``disallowed_special`` as tiktoken takes them: "all" or a
    list of special tokens (default: none allowed, all disallowed)."""
    options = {}
    for key in ("allowed_special", "disallowed_special"):
        if key not in body:
            continue
        value = body[key]
        if value == "all":
            options[key] = "all"
        elif isinstance(value, list) and all(isinstance(t, str) for t in value):
            options[key] = frozenset(value) if key == "allowed_special" else tuple(value)
        else:
            raise ApiError(400, f'"{key}" must be "all" or a list of special tokens')
    return options


def _encode(tok, text: str, options: dict) -> dict:
    try:
        return encode_view(tok, text, **options)
    except ValueError as e:  # a disallowed special token in the text
        raise ApiError(400, str(e)) from None


def api_encode(registry: Registry, body: dict) -> dict:
    tok = registry.get(body.get("tokenizer"))
    view = _encode(tok, _text(body), _special_options(body))
    return {"tokenizer": body["tokenizer"], **view}


def api_compare(registry: Registry, body: dict) -> dict:
    names = body.get("tokenizers")
    if not (
        isinstance(names, list)
        and 2 <= len(names) <= MAX_COMPARED
        and all(isinstance(n, str) for n in names)
    ):
        raise ApiError(400, f'"tokenizers" must be a list of 2 to {MAX_COMPARED} tokenizer names')
    text, options = _text(body), _special_options(body)
    views = [{"tokenizer": n, **_encode(registry.get(n), text, options)} for n in names]
    mark_differences(views)
    return {"results": views}


def api_chat(registry: Registry, body: dict) -> dict:
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in messages
    ):
        raise ApiError(400, '"messages" must be a list of {"role": string, "content": string}')
    name = body.get("tokenizer")
    tok, fmt = registry.chat_tokenizer(name)
    text = fmt.render(messages)
    # The conversation as the model sees it: the format's markers are special tokens.
    return {"tokenizer": name, "text": text, **_encode(tok, text, {"allowed_special": "all"})}


ROUTES = {"/api/encode": api_encode, "/api/compare": api_compare, "/api/chat": api_chat}


# -- HTTP ---------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    server_version = "bytepair"
    timeout = 60  # seconds a connection may sit idle (a slow client holds one thread)
    registry: Registry  # set by make_server
    allowed_hosts: frozenset[str] | None = None

    def log_message(self, format, *args):  # quiet: the terminal shows only the URL
        pass

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, payload: dict) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json")

    def _host_ok(self) -> bool:
        # Bound to loopback, answer only requests addressed to loopback: a web page
        # elsewhere cannot reach this server through a DNS name that points here.
        if self.allowed_hosts is None:
            return True
        return (self.headers.get("Host") or "").lower() in self.allowed_hosts

    def do_GET(self):
        if not self._host_ok():
            return self._json(403, {"error": "unexpected Host header"})
        path = self.path.split("?", 1)[0]
        if path == "/api/tokenizers":
            return self._json(200, self.registry.describe())
        if path in STATIC:
            name, content_type = STATIC[path]
            data = resources.files("bytepair.web").joinpath("static", name).read_bytes()
            return self._send(200, data, content_type)
        self._json(404, {"error": f"no such page: {path}"})

    def do_POST(self):
        if not self._host_ok():
            return self._json(403, {"error": "unexpected Host header"})
        route = ROUTES.get(self.path.split("?", 1)[0])
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            return self._json(411, {"error": "send the body with a Content-Length header"})
        length = int(length)
        if length > MAX_BODY:
            self._json(
                413,
                {
                    "error": f"request body of {length:,} bytes is over the limit of {MAX_BODY:,} bytes (10 MB)"
                },
            )
            return self._discard(length)
        body = self.rfile.read(length)
        if route is None:
            return self._json(404, {"error": f"no such API: {self.path}"})
        try:
            try:
                request = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ApiError(400, f"the body is not JSON: {e}") from None
            if not isinstance(request, dict):
                raise ApiError(400, "the body must be a JSON object")
            self._json(200, route(self.registry, request))
        except ApiError as e:
            self._json(e.status, {"error": str(e)})

    def _discard(self, length: int) -> None:
        """Reads a refused body (up to 64 MB) so the client sees the 413, not a reset."""
        left = min(length, 64 * MAX_BODY // 10)
        try:
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 20))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"


def make_server(registry: Registry, host: str = "127.0.0.1", port: int = 8000) -> Server:
    """A server bound to host:port (port 0: a free one; see ``server.url``), not yet serving."""
    handler = type("BoundHandler", (Handler,), {"registry": registry})
    cls = Server
    if ":" in host:
        cls = type("Server6", (Server,), {"address_family": socket.AF_INET6})
    server = cls((host, port), handler)
    if host in LOOPBACK:
        port = server.server_address[1]
        handler.allowed_hosts = frozenset(
            f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")
        )
    return server
