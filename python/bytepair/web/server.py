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

Errors are ``{"error": message}``: 400 bad JSON, fields or Content-Length, 403 a request
from another site's page or for another host name, 404 unknown tokenizer or path, 411 no
Content-Length, 413 a body over 10 MB or a text over ``max_tokens`` tokens (then also
``"tokens"`` and ``"max_tokens"``), 415 an API body that is not ``application/json``,
429 busy (with ``Retry-After``), 500 a fault of ours. Tokenizers are only those named at start: a request names one, it never opens
a file.

Who may ask: the page is for this machine's browser. Bound to a loopback address, the
server answers only requests addressed to a loopback name (``Host``), so a site whose
DNS name points at 127.0.0.1 cannot reach it; and whatever the address, a request that
a browser sends from another page (its ``Origin`` is not this server's own) is refused,
as is an API body that is not JSON (forms and ``text/plain``, which a browser sends
elsewhere without asking). Requests without an ``Origin`` (curl, scripts) are answered.

How much: the view of one token is ~1.5 KB of memory and ~250 bytes of JSON, so a request
may show at most ``max_tokens`` tokens in all (counted before any view is built; 100,000
by default), at most ``workers`` requests are worked on at once, and at most ``waiting``
more hold their body in memory while they wait (``queue_wait`` seconds, then 429).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from bytepair.web import chat as chat_formats
from bytepair.web.tokens import encode_view, mark_differences

MAX_BODY = 10 * 1024 * 1024
MAX_TOKENS = 100_000  # per request, in all the views it returns
WORKERS = 2  # requests worked on at once
WAITING = 8  # further requests whose bodies may wait in memory for a worker
QUEUE_WAIT = 10.0  # seconds a request waits for a worker before a 429
MAX_COMPARED = 4
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# A Host header: a name or [IPv6 address], then an optional port.
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9.\-]+)(?::([0-9]{1,5}))?", re.ASCII)
_CONTENT_LENGTH = re.compile(r"[0-9]{1,15}", re.ASCII)
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
    """An answer other than 200: ``{"error": message, **details}`` with ``status``."""

    def __init__(self, status: int, message: str, **details):
        super().__init__(message)
        self.status = status
        self.details = details

    def payload(self) -> dict:
        return {"error": str(self), **self.details}


def is_loopback_host(host: str) -> bool:
    """Whether a Host header names this machine: ``localhost``, ``127.0.0.1`` or
    ``[::1]``, with any port or none (browsers leave out ``:80``). The name is what
    guards against DNS rebinding; a port is set by whoever forwards it.

    >>> [is_loopback_host(h) for h in ("localhost", "[::1]:8000", "evil.example:8000")]
    [True, True, False]
    """
    match = _HOST.fullmatch(host.lower())
    return match is not None and match[1] in ("localhost", "127.0.0.1", "[::1]")


def _origin_of_host(host: str) -> str:
    """The origin of a page served as ``http://{host}/``, as a browser writes it in
    ``Origin`` (lower case, no ``:80``)."""
    host = host.lower()
    return "http://" + (host[:-3] if host.endswith(":80") else host)


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


def _unless_special(call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except ValueError as e:  # a disallowed special token in the text
        raise ApiError(400, str(e)) from None


def _views(texts: list[tuple[str, object, str]], options: dict, max_tokens: int) -> list[dict]:
    """The encode view of each ``(name, tokenizer, text)``. Each text is counted first
    (no list of ids): a request that would show over ``max_tokens`` tokens in all is
    refused, 413, before any view is built."""
    counted = [
        (name, _unless_special(tok.count_tokens, text, **options)) for name, tok, text in texts
    ]
    total = sum(n for _, n in counted)
    if total > max_tokens:
        each = (
            ", ".join(f"{name}: {n:,}" for name, n in counted) if len(counted) > 1 else texts[0][0]
        )
        raise ApiError(
            413,
            f"the text is {total:,} tokens ({each}); this server shows at most "
            f"{max_tokens:,} tokens per request (bytepair serve --max-tokens N)",
            tokens=total,
            max_tokens=max_tokens,
        )
    return [
        {"tokenizer": name, **_unless_special(encode_view, tok, text, **options)}
        for name, tok, text in texts
    ]


def api_encode(registry: Registry, body: dict, max_tokens: int = MAX_TOKENS) -> dict:
    name = body.get("tokenizer")
    tok = registry.get(name)
    (view,) = _views([(name, tok, _text(body))], _special_options(body), max_tokens)
    return view


def api_compare(registry: Registry, body: dict, max_tokens: int = MAX_TOKENS) -> dict:
    names = body.get("tokenizers")
    if not (
        isinstance(names, list)
        and 2 <= len(names) <= MAX_COMPARED
        and all(isinstance(n, str) for n in names)
    ):
        raise ApiError(400, f'"tokenizers" must be a list of 2 to {MAX_COMPARED} tokenizer names')
    text, options = _text(body), _special_options(body)
    views = _views([(n, registry.get(n), text) for n in names], options, max_tokens)
    mark_differences(views)
    return {"results": views}


def api_chat(registry: Registry, body: dict, max_tokens: int = MAX_TOKENS) -> dict:
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
    (view,) = _views([(name, tok, text)], {"allowed_special": "all"}, max_tokens)
    return {"tokenizer": name, "text": text, **view}


ROUTES = {"/api/encode": api_encode, "/api/compare": api_compare, "/api/chat": api_chat}


# -- HTTP ---------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    server_version = "bytepair"
    timeout = 60  # seconds a connection may sit idle (a slow client holds one thread)
    server: Server

    def log_message(self, format, *args):  # quiet: the terminal shows only the URL
        pass

    def _send(self, status: int, data: bytes, content_type: str, headers: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, payload: dict) -> None:
        headers = {"Retry-After": "1"} if status == 429 else None
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _check_sender(self) -> None:
        """403 unless the request is addressed to this machine (bound to loopback) and,
        if a browser sent it, sent by this server's own page."""
        host = self.headers.get("Host") or ""
        if self.server.loopback_only and not is_loopback_host(host):
            # A page elsewhere cannot reach this server through a DNS name that points here.
            raise ApiError(
                403,
                f"unexpected Host header {host[:100]!r}: this server answers requests "
                "for localhost, 127.0.0.1 or [::1]",
            )
        origin, own = self.headers.get("Origin"), _origin_of_host(host)
        if origin is not None and origin != own:
            # Browsers send some cross-site requests (forms, text/plain) without asking
            # first; what they always say is where the page that sends them comes from.
            raise ApiError(
                403,
                f"a request from the page at {origin[:100]} is refused: this server "
                f"answers only its own page, {own}",
            )

    def do_GET(self):
        try:
            self._check_sender()
        except ApiError as e:
            return self._json(e.status, e.payload())
        path = self.path.split("?", 1)[0]
        if path == "/api/tokenizers":
            return self._json(200, self.server.registry.describe())
        if path in STATIC:
            name, content_type = STATIC[path]
            data = resources.files("bytepair.web").joinpath("static", name).read_bytes()
            return self._send(200, data, content_type)
        self._json(404, {"error": f"no such page: {path}"})

    def do_POST(self):
        length = None
        try:
            length = self._content_length()
            self._check_sender()
            route = ROUTES.get(self.path.split("?", 1)[0])
            if route is None:
                raise ApiError(404, f"no such API: {self.path[:100]}")
            content_type = self.headers.get("Content-Type")
            if (content_type or "").split(";")[0].strip().lower() != "application/json":
                # Forms and text/plain are what a page elsewhere can send without asking.
                raise ApiError(
                    415,
                    "send the body as Content-Type: application/json "
                    f"(got {(content_type or 'none')[:100]})",
                )
            if length > MAX_BODY:
                raise ApiError(
                    413,
                    f"request body of {length:,} bytes is over the limit of {MAX_BODY:,} "
                    "bytes (10 MB)",
                )
        except ApiError as e:
            self._json(e.status, e.payload())
            return self._discard(length)
        self._answer(route, length)

    def _content_length(self) -> int:
        value = self.headers.get("Content-Length")
        if value is None:
            raise ApiError(411, "send the body with a Content-Length header")
        if not _CONTENT_LENGTH.fullmatch(value.strip()):
            raise ApiError(400, f"Content-Length must be a number of bytes, not {value[:40]!r}")
        return int(value)

    def _answer(self, route, length: int) -> None:
        """Reads the body and runs the route, ``workers`` at a time: a body may wait
        for a worker (``waiting`` of them at once, ``queue_wait`` seconds each). The
        answer is sent after the worker is free, so a slow reader does not hold one."""
        server = self.server
        if not server.request_slots.acquire(blocking=False):
            self._json(429, BUSY)
            return self._discard(length)
        try:
            body = self.rfile.read(length)
            if not server.work_slots.acquire(timeout=server.queue_wait):
                return self._json(429, BUSY)
            try:
                request = _parse(body)
                del body  # its text is in the request now
                status, data = 200, _to_json(route(server.registry, request, server.max_tokens))
            except ApiError as e:
                status, data = e.status, _to_json(e.payload())
            except Exception as e:  # a bug: answer, and show where on the terminal
                traceback.print_exc()
                status, data = 500, _to_json({"error": f"internal error: {type(e).__name__}: {e}"})
            finally:
                server.work_slots.release()
            self._send(status, data, "application/json")
        finally:
            server.request_slots.release()

    def _discard(self, length: int | None) -> None:
        """Reads a refused body (up to 64 MB; of unknown length, what comes within a
        second) so the client sees the answer, not a reset."""
        left = 64 * MAX_BODY // 10 if length is None else min(length, 64 * MAX_BODY // 10)
        if length is None:
            self.connection.settimeout(1.0)
        try:
            while left > 0:
                chunk = self.rfile.read1(min(left, 1 << 20))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass


BUSY = {"error": "the server is busy with other requests; try again in a moment"}


def _to_json(payload: dict) -> bytes:
    """The answer's bytes. The views are dropped once they are text, so the views, the
    text and the bytes of a large answer are never all in memory at once."""
    text = json.dumps(payload)
    payload.clear()
    return text.encode("ascii")  # json.dumps escapes everything else


def _parse(body: bytes) -> dict:
    try:
        request = json.loads(body)
    except RecursionError:
        raise ApiError(400, "the body is not JSON this server reads: nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, a number of 5,000 digits
        raise ApiError(400, f"the body is not JSON: {e}") from None
    if not isinstance(request, dict):
        raise ApiError(400, "the body must be a JSON object")
    return request


class Server(ThreadingHTTPServer):
    """The server with what its handlers share: the tokenizers and the limits."""

    daemon_threads = True
    registry: Registry
    loopback_only: bool  # answer only requests whose Host is a loopback name
    max_tokens: int
    queue_wait: float
    work_slots: threading.Semaphore  # one per request being worked on
    request_slots: threading.Semaphore  # one per request worked on or waiting with its body

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"


def make_server(
    registry: Registry,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    max_tokens: int = MAX_TOKENS,
    workers: int = WORKERS,
    waiting: int = WAITING,
    queue_wait: float = QUEUE_WAIT,
) -> Server:
    """A server bound to host:port (port 0: a free one; see ``server.url``), not yet
    serving. A request shows at most ``max_tokens`` tokens; ``workers`` requests are
    worked on at once while ``waiting`` more wait up to ``queue_wait`` seconds (then 429)."""
    cls = Server
    if ":" in host:
        cls = type("Server6", (Server,), {"address_family": socket.AF_INET6})
    server = cls((host, port), Handler)
    server.registry = registry
    server.loopback_only = host in LOOPBACK
    server.max_tokens = max_tokens
    server.queue_wait = queue_wait
    server.work_slots = threading.BoundedSemaphore(workers)
    server.request_slots = threading.BoundedSemaphore(workers + waiting)
    return server
