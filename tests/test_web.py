"""``bytepair serve``: the JSON API against a real server on 127.0.0.1, and the page in
headless Chromium (skipped, with the reason, when Chromium or Playwright is missing)."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.web import Registry, make_server
from bytepair.web.chat import read_template
from bytepair.web.tokens import CharSpans

from conftest import EOT, sigint_default

CL100K_CHAT = {"<|im_start|>": 100264, "<|im_end|>": 100265, "<|im_sep|>": 100266}
TEXTS = [
    "hello world",
    "Unicode splits into bytes: 🤚🏾 中文 é\u0301",
    "  leading spaces\tand tabs\n\nand newlines   ",
    "x = [1234567890, 42]  # code!",
    "",
]


@pytest.fixture(scope="module", autouse=True)
def loopback_allowed():
    """The suite refuses every connection (conftest's no_network); these tests talk to
    their own server, so connections to 127.0.0.1 go through and all others still fail."""
    refusing = socket.socket.connect

    def connect(self, address, *args, **kwargs):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] in ("127.0.0.1", "::1"):
            return real_connect(self, address, *args, **kwargs)
        return refusing(self, address, *args, **kwargs)

    real_connect = socket.socket.__mro__[1].connect  # _socket.socket's, which it replaced
    socket.socket.connect = connect
    yield
    socket.socket.connect = refusing


@pytest.fixture(scope="module")
def server(gpt2):
    registry = Registry({"gpt2-files": gpt2})
    srv = make_server(registry, "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def request(server, method: str, path: str, body=None, headers=None, raw: bytes | None = None):
    """(status, parsed JSON or bytes, headers) of one request to the server; a POST is
    sent as ``Content-Type: application/json`` unless ``headers`` say otherwise."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    sent = {"Content-Type": "application/json"} if method == "POST" else {}
    sent.update(headers or {})
    sent = {k: v for k, v in sent.items() if v is not None}  # None: leave the header out
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    is_json = response.headers.get("Content-Type", "").startswith("application/json")
    return response.status, json.loads(payload) if is_json else payload, response.headers


def post(server, path, body, **kw):
    return request(server, "POST", path, body, **kw)


# -- the API ------------------------------------------------------------------------------


def test_tokenizers_lists_the_given_ones_first_then_every_bundled_encoding(server):
    status, data, _ = request(server, "GET", "/api/tokenizers")
    assert status == 200
    names = [t["name"] for t in data["tokenizers"]]
    assert names == ["gpt2-files", *bytepair.list_encodings()]
    assert data["default"] == "gpt2-files"
    chat = {t["name"] for t in data["tokenizers"] if t["chat"]}
    assert chat == {"cl100k_base", "o200k_base"}


@pytest.mark.parametrize("text", TEXTS)
def test_encode_gives_the_ids_of_tok_encode_and_of_tiktoken(server, text, tiktoken_offline):
    status, data, _ = post(server, "/api/encode", {"text": text, "tokenizer": "cl100k_base"})
    assert status == 200
    expected = bytepair.get_encoding("cl100k_base").encode(text)
    assert data["ids"] == expected == tiktoken_offline.get_encoding("cl100k_base").encode(text)
    assert data["count"] == len(expected) == len(data["tokens"])
    assert [t["id"] for t in data["tokens"]] == expected
    assert data["chars"] == len(text) and data["bytes"] == len(text.encode())
    assert bytes.fromhex("".join(t["bytes_hex"] for t in data["tokens"])) == text.encode()


def test_encode_with_a_tokenizer_given_at_start(server, gpt2):
    text = "hello <|endoftext|> world"
    status, data, _ = post(
        server, "/api/encode", {"text": text, "tokenizer": "gpt2-files", "allowed_special": "all"}
    )
    assert status == 200 and data["ids"] == gpt2.encode(text, allowed_special="all")
    assert [t["special"] for t in data["tokens"]] == [False, False, True, False]


def test_offsets_are_characters_and_a_split_character_is_covered_by_each_piece(server):
    # cl100k_base splits 🤚 (4 bytes) into 3 tokens: each covers the one character.
    text = "a🤚b"
    _, data, _ = post(server, "/api/encode", {"text": text, "tokenizer": "cl100k_base"})
    spans = [(t["start"], t["end"], t["partial"]) for t in data["tokens"]]
    assert spans == [(0, 1, False), (1, 2, True), (1, 2, True), (1, 2, True), (2, 3, False)]
    assert data["tokens"][1]["bytes_hex"] == "f0 9f"
    assert data["tokens"][1]["text"] == "\ufffd"


def test_each_token_names_the_merge_that_made_it(server):
    _, data, _ = post(server, "/api/encode", {"text": " world!", "tokenizer": "cl100k_base"})
    world, bang = data["tokens"]
    tok = bytepair.get_encoding("cl100k_base")
    merge = world["merge"]
    assert merge["left_text"] + merge["right_text"] == " world"
    left, right = (
        tok.decode_single_token_bytes(merge["left"]),
        tok.decode_single_token_bytes(merge["right"]),
    )
    assert (left, right) in set(tok.model.merges) and left + right == b" world"
    assert bang["merge"] is None  # a single byte


def test_special_token_text_is_refused_unless_allowed_or_plain(server):
    body = {"text": f"a{EOT}", "tokenizer": "cl100k_base"}
    status, data, _ = post(server, "/api/encode", body)
    assert status == 400 and "<|endoftext|>" in data["error"]
    _, data, _ = post(server, "/api/encode", {**body, "allowed_special": "all"})
    assert data["ids"] == [64, 100257]
    _, data, _ = post(server, "/api/encode", {**body, "disallowed_special": []})
    assert data["ids"] == bytepair.get_encoding("cl100k_base").encode(
        body["text"], disallowed_special=()
    )
    status, data, _ = post(server, "/api/encode", {**body, "allowed_special": 3})
    assert status == 400 and "allowed_special" in data["error"]


def test_a_body_over_10_mb_is_refused_with_413(server):
    text = "a" * (10 * 1024 * 1024)
    status, data, _ = post(server, "/api/encode", {"text": text, "tokenizer": "gpt2"})
    assert status == 413 and "10 MB" in data["error"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"tokenizer": "gpt2"}', '"text" must be a string'),
    ],
)
def test_bad_bodies_are_400_with_a_message(server, raw, message):
    status, data, _ = post(server, "/api/encode", None, raw=raw)
    assert status == 400 and message in data["error"]


def test_unknown_tokenizer_is_404_naming_the_ones_there_are(server):
    status, data, _ = post(server, "/api/encode", {"text": "hi", "tokenizer": "cl100k"})
    assert status == 404 and "cl100k" in data["error"] and "cl100k_base" in data["error"]


def test_a_file_path_is_never_opened_as_a_tokenizer(server, tmp_path, gpt2):
    path = tmp_path / "mine.bytepair"
    gpt2.save(path)
    for name in (str(path), "../" * 8 + str(path), path.name):
        status, data, _ = post(server, "/api/encode", {"text": "hi", "tokenizer": name})
        assert status == 404, name
    status, _, _ = post(server, "/api/compare", {"text": "hi", "tokenizers": ["gpt2", str(path)]})
    assert status == 404


def test_compare_counts_each_and_marks_where_they_split_differently(server):
    text = "  hello\tworld"  # gpt2: "\t" and "world" apart; cl100k_base: "\tworld" one token
    status, data, _ = post(
        server, "/api/compare", {"text": text, "tokenizers": ["gpt2", "cl100k_base"]}
    )
    assert status == 200
    gpt2, cl100k = data["results"]
    assert (gpt2["count"], cl100k["count"]) == (4, 3)
    assert [(t["text"], t["differs"]) for t in gpt2["tokens"]] == [
        (" ", False),
        (" hello", False),
        ("\t", True),
        ("world", True),
    ]
    assert [(t["text"], t["differs"]) for t in cl100k["tokens"]] == [
        (" ", False),
        (" hello", False),
        ("\tworld", True),
    ]
    assert (gpt2["differing"], cl100k["differing"]) == (2, 1)


@pytest.mark.parametrize("names", [["gpt2"], ["gpt2"] * 5, "gpt2", [1, 2]])
def test_compare_takes_two_to_four_names(server, names):
    status, data, _ = post(server, "/api/compare", {"text": "x", "tokenizers": names})
    assert status == 400 and "2 to 4" in data["error"]


def test_chat_renders_chatml_with_im_sep_and_counts_the_whole_conversation(server):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi <|im_end|>"},
    ]
    status, data, _ = post(server, "/api/chat", {"tokenizer": "cl100k_base", "messages": messages})
    assert status == 200
    assert data["text"] == (
        "<|im_start|>system<|im_sep|>Be brief.<|im_end|>"
        "<|im_start|>user<|im_sep|>Hi <|im_end|><|im_end|>"
        "<|im_start|>assistant<|im_sep|>"
    )
    chat = bytepair.get_encoding("cl100k_base").with_special_tokens(CL100K_CHAT)
    assert data["ids"] == chat.encode(data["text"], allowed_special="all")
    assert data["count"] == len(data["ids"])
    assert data["ids"][:3] == [100264, 9125, 100266]
    assert sum(t["special"] for t in data["tokens"]) == 9


def test_chat_on_o200k_uses_its_own_ids(server):
    body = {"tokenizer": "o200k_base", "messages": [{"role": "user", "content": "hi"}]}
    _, data, _ = post(server, "/api/chat", body)
    assert data["ids"][0] == 200264 and data["ids"][2] == 200266 and data["ids"][4] == 200265


def test_chat_without_a_format_or_with_bad_messages_is_400(server):
    status, data, _ = post(server, "/api/chat", {"tokenizer": "gpt2", "messages": []})
    assert status == 400 and "--chat-template" in data["error"]
    status, data, _ = post(
        server, "/api/chat", {"tokenizer": "cl100k_base", "messages": [{"role": "user"}]}
    )
    assert status == 400 and '"messages"' in data["error"]


def test_a_chat_template_file_applies_to_every_tokenizer(tmp_path):
    template = tmp_path / "llama.json"
    template.write_text(
        json.dumps(
            {
                "message": "<|start|>{role}\n{content}<|end|>",
                "prefix": "<|begin|>",
                "separator": "\n",
                "suffix": "<|start|>assistant\n",
                "special_tokens": ["<|begin|>", "<|start|>", "<|end|>"],
            }
        )
    )
    fmt = read_template(template)
    registry = Registry(chat_template=fmt)
    messages = [{"role": "user", "content": "{x}"}, {"role": "assistant", "content": "ok"}]
    from bytepair.web.server import api_chat

    data = api_chat(registry, {"tokenizer": "gpt2", "messages": messages})
    assert (
        data["text"]
        == "<|begin|><|start|>user\n{x}<|end|>\n<|start|>assistant\nok<|end|><|start|>assistant\n"
    )
    assert data["ids"][:2] == [50257, 50258]  # the next free ids after <|endoftext|>


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not JSON"),
        ("[]", "JSON object"),
        ('{"message": "{role}"}', "{content}"),
        ('{"message": "{content}", "sufix": ""}', "unknown key 'sufix'"),
        ('{"message": "{content}", "special_tokens": "<|a|>"}', "special_tokens"),
    ],
)
def test_a_bad_chat_template_names_the_file_and_the_fault(tmp_path, content, message):
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="t.json") as e:
        read_template(path)
    assert message in str(e.value)


def test_requests_for_another_host_name_are_refused(server):
    # A page elsewhere that points a DNS name at 127.0.0.1 cannot use this server.
    status, _, _ = request(server, "GET", "/api/tokenizers", headers={"Host": "evil.example:80"})
    assert status == 403
    status, _, _ = request(
        server, "GET", "/", headers={"Host": f"localhost:{server.server_address[1]}"}
    )
    assert status == 200


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "LOCALHOST", "localhost:80"])
def test_a_loopback_host_without_the_port_is_accepted_as_clients_send_it_for_port_80(server, host):
    # `bytepair serve --port 80`: browsers and curl send "Host: localhost", no ":80".
    status, _, _ = request(server, "GET", "/api/tokenizers", headers={"Host": host})
    assert status == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io:80", "localhost@evil", ""]
)
def test_a_host_that_is_not_a_loopback_name_is_refused_with_or_without_a_port(server, host):
    status, data, _ = request(server, "GET", "/api/tokenizers", headers={"Host": host})
    assert status == 403 and "Host" in data["error"]


def test_is_loopback_host_reads_the_name_and_ignores_the_port():
    from bytepair.web.server import is_loopback_host

    assert [
        is_loopback_host(h)
        for h in ("localhost", "localhost:80", "127.0.0.1:8000", "[::1]", "[::1]:80")
    ] == [True] * 5
    assert [
        is_loopback_host(h)
        for h in ("evil.example", "evil.example:80", "[::2]", "localhost:x", "localhost:80:80")
    ] == [False] * 5


# -- what pages elsewhere, careless clients and large texts get ----------------------------

EVIL = "https://evil.example"
ENCODE_HI = {"text": "hi", "tokenizer": "gpt2"}


@contextlib.contextmanager
def serving(registry: Registry | None = None, **limits):
    """A server of its own with the given limits (make_server's keywords)."""
    srv = make_server(registry or Registry(), "127.0.0.1", 0, **limits)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


def raw_request(server, head: bytes, body: bytes = b"") -> tuple[int, dict]:
    """Status and JSON of a request written byte for byte (headers http.client will not
    send). The server answers once and closes (HTTP/1.0), within the socket's timeout."""
    with socket.create_connection(server.server_address[:2], timeout=30) as sock:
        sock.sendall(head + body)
        response = b""
        for _ in range(10_000):
            chunk = sock.recv(65536)
            if not chunk:
                break
            response += chunk
    status_line, _, rest = response.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/"), response[:200]
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


@pytest.mark.parametrize("content_type", ["text/plain", "application/json"])
def test_a_post_from_a_page_on_another_site_is_refused_with_403(server, content_type):
    # text/plain is a "simple" request: a browser sends it cross-origin without asking first.
    status, data, _ = post(
        server, "/api/encode", ENCODE_HI, headers={"Origin": EVIL, "Content-Type": content_type}
    )
    port = server.server_address[1]
    assert status == 403
    assert data == {
        "error": f"a request from the page at {EVIL} is refused: this server answers only "
        f"its own page, http://127.0.0.1:{port}"
    }


def test_only_the_origin_of_the_page_itself_is_answered(server):
    port = server.server_address[1]
    for origin in (
        "null",  # a sandboxed frame or a file:// page
        f"http://localhost:{port}",  # a loopback page, but not this one
        f"http://127.0.0.1:{port + 1}",
        f"https://127.0.0.1:{port}",
        f"http://127.0.0.1:{port}.evil.example",
        "http://127.0.0.1",
    ):
        status, _, _ = post(server, "/api/encode", ENCODE_HI, headers={"Origin": origin})
        assert status == 403, origin
        status, _, _ = request(server, "GET", "/api/tokenizers", headers={"Origin": origin})
        assert status == 403, origin
    status, data, _ = post(
        server, "/api/encode", ENCODE_HI, headers={"Origin": f"http://127.0.0.1:{port}"}
    )
    assert status == 200 and data["ids"] == [5303]
    # The page's origin at port 80 has no port, as its Host has none.
    status, _, _ = post(
        server,
        "/api/encode",
        ENCODE_HI,
        headers={"Host": "localhost", "Origin": "http://localhost"},
    )
    assert status == 200
    status, _, _ = post(server, "/api/encode", ENCODE_HI)  # curl and scripts send no Origin
    assert status == 200


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_an_api_post_that_is_not_json_is_refused_with_415(server, content_type):
    status, data, _ = post(server, "/api/encode", ENCODE_HI, headers={"Content-Type": content_type})
    assert status == 415
    assert data == {
        "error": f"send the body as Content-Type: application/json (got {content_type or 'none'})"
    }


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON"])
def test_json_with_parameters_or_in_capitals_is_json(server, content_type):
    status, data, _ = post(server, "/api/encode", ENCODE_HI, headers={"Content-Type": content_type})
    assert status == 200 and data["ids"] == [5303]


def test_a_text_over_the_token_limit_is_413_naming_both_numbers():
    text = " hello world" * 60  # 120 tokens in gpt2
    with serving(max_tokens=100) as srv:
        status, data, _ = post(srv, "/api/encode", {"text": text, "tokenizer": "gpt2"})
        assert status == 413
        assert data == {
            "error": "the text is 120 tokens (gpt2); this server shows at most 100 tokens "
            "per request (bytepair serve --max-tokens N)",
            "tokens": 120,
            "max_tokens": 100,
        }
        status, data, _ = post(
            srv, "/api/encode", {"text": " hello world" * 50, "tokenizer": "gpt2"}
        )
        assert status == 200 and data["count"] == 100


def test_compare_and_chat_count_every_token_they_would_show_against_the_limit():
    text = " hello world" * 30  # 60 tokens in each
    with serving(max_tokens=100) as srv:
        body = {"text": text, "tokenizers": ["gpt2", "cl100k_base"]}
        status, data, _ = post(srv, "/api/compare", body)
        assert status == 413 and data["tokens"] == 120
        assert data["error"].startswith("the text is 120 tokens (gpt2: 60, cl100k_base: 60);")
        messages = [{"role": "user", "content": text * 2}]
        status, data, _ = post(srv, "/api/chat", {"tokenizer": "cl100k_base", "messages": messages})
        assert status == 413 and data["tokens"] == 127  # 120 + 7 for the ChatML markup


def test_a_large_text_inside_the_byte_limit_gets_a_short_413_not_a_huge_answer(server):
    # 4 MB of " a" is 2,000,000 tokens: a view of each was a 500 MB answer and 3 GB in the server.
    text = " a" * 2_000_000
    status, data, headers = post(server, "/api/encode", {"text": text, "tokenizer": "gpt2"})
    assert status == 413 and data["tokens"] == 2_000_000
    assert int(headers["Content-Length"]) < 300


def test_a_request_past_the_busy_workers_waits_then_is_refused_with_429():
    with serving(workers=1, queue_wait=0.2) as srv:
        assert srv.work_slots.acquire(timeout=5)  # one request at work
        try:
            status, data, headers = post(srv, "/api/encode", ENCODE_HI)
        finally:
            srv.work_slots.release()
        assert status == 429 and headers["Retry-After"] == "1"
        assert data == {"error": "the server is busy with other requests; try again in a moment"}
        status, data, _ = post(srv, "/api/encode", ENCODE_HI)  # the worker is free again
        assert status == 200 and data["ids"] == [5303]


def test_requests_past_the_waiting_room_are_refused_at_once_with_429():
    # Bodies wait in memory for a worker, so only so many may wait.
    with serving(workers=1, waiting=2, queue_wait=30) as srv:
        for _ in range(3):
            assert srv.request_slots.acquire(timeout=5)
        try:
            status, data, _ = post(srv, "/api/encode", {"text": "a" * 100_000, "tokenizer": "gpt2"})
        finally:
            for _ in range(3):
                srv.request_slots.release()
        assert status == 429 and "busy" in data["error"]
        status, _, _ = post(srv, "/api/encode", ENCODE_HI)
        assert status == 200


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        (b'{"text": "hi", "tokenizer": "gpt2", "n": ' + b"1" * 5000 + b"}", "not JSON"),
    ],
)
def test_json_too_deep_or_too_long_a_number_is_400_without_a_traceback(
    server, capsys, raw, message
):
    status, data, _ = post(server, "/api/encode", None, raw=raw)
    assert status == 400 and message in data["error"]
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "length", ["\u00b2".encode("latin-1"), "\u0661".encode("utf-8"), b"12abc", b"-5", b"1" * 40]
)
def test_a_malformed_content_length_is_400_without_a_traceback(server, capsys, length):
    head = (
        b"POST /api/encode HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + length + b"\r\n\r\n"
    )
    status, data = raw_request(server, head, b'{"text": "hi", "tokenizer": "gpt2"}')
    assert status == 400
    assert data["error"].startswith("Content-Length must be a number of bytes, not ")
    assert "Traceback" not in capsys.readouterr().err


def test_a_fault_of_ours_is_a_500_naming_it_and_the_server_goes_on(capsys):
    class Broken:  # a tokenizer whose every call fails
        def count_tokens(self, text, **options):
            raise RuntimeError("the core is broken")

    with serving(Registry({"broken": Broken()})) as srv:
        status, data, _ = post(srv, "/api/encode", {"text": "hi", "tokenizer": "broken"})
        assert status == 500
        assert data == {"error": "internal error: RuntimeError: the core is broken"}
        assert "the core is broken" in capsys.readouterr().err  # with its traceback
        status, data, _ = post(srv, "/api/encode", ENCODE_HI)
        assert status == 200 and data["ids"] == [5303]


def test_the_page_is_three_files_with_a_policy_allowing_only_this_server(server):
    for path, kind in (
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
    ):
        status, body, headers = request(server, "GET", path)
        assert status == 200 and headers["Content-Type"].startswith(kind)
        assert b"http://" not in body and b"https://" not in body  # nothing remote
        assert "default-src 'self'" in headers["Content-Security-Policy"]
    for path in ("/static/app.js", "/../tokenizer.py", "/index.html", "/api/nope"):
        status, _, _ = request(server, "GET", path)
        assert status == 404, path


def test_cli_serve_prints_the_url_of_a_free_port_and_stops_on_ctrl_c(tmp_path, gpt2):
    path = tmp_path / "mine.bytepair"
    gpt2.save(path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bytepair", "serve", "--port", "0", "-t", str(path)]
        + ["--max-tokens", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        preexec_fn=sigint_default,
    )
    try:
        line = proc.stdout.readline()  # printed once the socket is bound
        assert line.startswith("bytepair serve: http://127.0.0.1:"), line + proc.stderr.read()
        url = urlsplit(line.split()[2])
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        conn.request("GET", "/api/tokenizers")
        names = [t["name"] for t in json.loads(conn.getresponse().read())["tokenizers"]]
        conn.close()
        assert names[0] == str(path)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        body = json.dumps({"text": " a" * 6, "tokenizer": "gpt2"})
        conn.request("POST", "/api/encode", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())["max_tokens"]) == (413, 5)
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=20)
        finally:
            proc.kill()  # a server that did not stop is not left running
    assert proc.returncode == 0 and "stopped" in err


def test_cli_serve_help_gives_the_servers_default_token_limit(capsys):
    from bytepair.cli import build_parser
    from bytepair.web.server import MAX_TOKENS

    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    assert f"(default: {MAX_TOKENS:,})" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("value", ["0", "-3"])
def test_cli_serve_refuses_a_token_limit_under_one(value, capsys):
    from bytepair.cli import main

    assert main(["serve", "--port", "0", "--max-tokens", value]) == 1
    assert f"--max-tokens {value}: give at least 1" in capsys.readouterr().err


# -- the page in a browser ------------------------------------------------------------------

CHROMIUM = (
    os.environ.get("BYTEPAIR_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)


@pytest.fixture(scope="module")
def browser():
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="browser tests need Playwright (pip install playwright)"
    )
    if CHROMIUM is None:
        pytest.skip(
            "browser tests need Chromium (apt-get install chromium, or set BYTEPAIR_CHROMIUM)"
        )
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    """A page on the server in which every request not for 127.0.0.1 is aborted (and
    recorded in ``page.remote``): the page must work offline."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.remote = []

    def only_local(route):
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            page.remote.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(server.url)
    page.wait_for_selector("#tok-tokens[data-state=ready] [data-token-id]")
    page.select_option("#tok-select", "cl100k_base")  # the default is the one given at start
    yield page
    assert page.remote == [] and page.errors == []
    context.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    return tmp_path_factory.mktemp("screenshots")


def type_into(page, selector: str, text: str, results: str) -> None:
    page.fill(selector, text)
    page.wait_for_selector(f"{results}[data-state=ready]")


def shown_ids(page, container: str) -> list[int]:
    return [
        int(i)
        for i in page.eval_on_selector_all(
            f"{container} [data-token-id]", "els => els.map(e => e.dataset.tokenId)"
        )
    ]


def test_typed_text_shows_one_element_per_token_as_the_api_and_tiktoken_count(
    page, server, screenshots, tiktoken_offline
):
    text = "The page re-tokenizes as you type: 🤚🏾 中文 1234567890\n\tdef f(x): return x"
    type_into(page, "#tok-text", text, "#tok-tokens")
    _, data, _ = post(
        server, "/api/encode", {"text": text, "tokenizer": "cl100k_base", "allowed_special": "all"}
    )
    expected = tiktoken_offline.get_encoding("cl100k_base").encode(text)
    assert page.locator("#tok-tokens [data-token-id]").count() == data["count"] == len(expected)
    assert shown_ids(page, "#tok-tokens") == data["ids"] == expected
    assert page.text_content("#tok-count") == str(len(expected))
    assert page.input_value("#tok-ids") == ", ".join(map(str, expected))
    page.hover("#tok-tokens .tok >> nth=1")
    assert "merge" in page.text_content("#tip")
    page.screenshot(path=screenshots / "tokenize.png")


def test_hover_shows_id_hex_bytes_length_and_the_merge(page):
    type_into(page, "#tok-text", "hello 🤚", "#tok-tokens")
    page.hover("#tok-tokens [data-token-id='15339']")  # "hello"
    tip = page.text_content("#tip")
    assert "15339" in tip and "68 65 6c 6c 6f" in tip and "5 bytes" in tip and "+" in tip
    partial = page.locator("#tok-tokens .tok.partial").first
    partial.hover()
    tip = page.text_content("#tip")
    assert "f0 9f" in tip and "part of a character" in tip


def test_an_answer_that_arrives_while_newer_text_waits_is_not_shown(page):
    # The first answer is held back until newer text has been typed and its debounce
    # has begun: then it must be dropped, and the view stay busy until the newer answer.
    # The newer request is held back too, so no timing decides what the view shows.
    page.wait_for_selector("#tok-tokens[data-state=ready]")  # the fixture's choice, shown
    page.evaluate(
        """() => {
        const real = window.fetch;
        window.heldBack = [];
        window.fetch = (...args) => {
          const answer = real(...args);
          if (String(args[0]).includes("/api/encode")) {
            return new Promise((resolve) => window.heldBack.push(() => resolve(answer)));
          }
          return answer;
        };
      }"""
    )
    page.fill("#tok-text", "first text")
    page.wait_for_function("() => window.heldBack.length === 1")
    page.fill("#tok-text", "second")
    # The old answer lands now, while the newer text waits out its debounce.
    page.evaluate("() => window.heldBack[0]()")
    page.wait_for_function("() => window.heldBack.length === 2", timeout=10_000)
    page.wait_for_timeout(100)  # the old answer has long been read by now
    assert page.get_attribute("#tok-tokens", "data-state") == "busy"
    assert "first" not in page.text_content("#tok-tokens")
    page.evaluate("() => window.heldBack[1]()")
    page.wait_for_selector("#tok-tokens[data-state=ready]")
    assert page.text_content("#tok-tokens") == "second"


def test_the_whitespace_toggle_shows_spaces_tabs_and_newlines(page, screenshots):
    type_into(page, "#tok-text", "a b\tc\nd", "#tok-tokens")
    before = page.text_content("#tok-tokens")
    assert before == "a b\tc\nd"
    page.check("#show-ws")
    after = page.text_content("#tok-tokens")
    assert after == "a·b→c↵\nd"
    assert page.locator("#tok-tokens [data-token-id]").count() == len(
        shown_ids(page, "#tok-tokens")
    )
    page.screenshot(path=screenshots / "whitespace.png")


def test_compare_view_shows_each_count_and_highlights_a_difference(page, server, screenshots):
    page.click(".tab[data-view=compare]")
    text = "  hello\tworld\n    for i in range(10):\n        print(i)"
    page.select_option("#cmp-pickers select >> nth=0", "gpt2")
    page.select_option("#cmp-pickers select >> nth=1", "cl100k_base")
    type_into(page, "#cmp-text", text, "#cmp-results")
    _, data, _ = post(
        server,
        "/api/compare",
        {"text": text, "tokenizers": ["gpt2", "cl100k_base"], "allowed_special": "all"},
    )
    counts = [int(c) for c in page.locator(".cmp-count").all_text_contents()]
    assert counts == [r["count"] for r in data["results"]] and counts[0] != counts[1]
    assert (
        page.locator("#cmp-results .tok.diff").count()
        == sum(r["differing"] for r in data["results"])
        > 0
    )
    page.click("#cmp-add")
    page.wait_for_selector("#cmp-results[data-state=ready]")
    assert page.locator("#cmp-results .column").count() == 3
    page.screenshot(path=screenshots / "compare.png")


def test_chat_mode_counts_the_conversation_as_the_api_does(page, server, screenshots):
    page.click(".tab[data-view=chat]")
    page.wait_for_selector("#chat-tokens[data-state=ready] [data-token-id]")
    page.fill(".message >> nth=1 >> textarea", "What is 2 + 2?")
    page.wait_for_selector("#chat-tokens[data-state=ready]")
    messages = [
        {"role": "system", "content": page.input_value(".message >> nth=0 >> textarea")},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
    _, data, _ = post(server, "/api/chat", {"tokenizer": "cl100k_base", "messages": messages})
    assert page.text_content("#chat-count") == str(data["count"])
    assert shown_ids(page, "#chat-tokens") == data["ids"]
    assert page.locator("#chat-tokens .tok.special").count() == 2 * 3 + 2
    page.screenshot(path=screenshots / "chat.png")


def test_the_page_asks_for_nothing_but_this_server(browser, server):
    context = browser.new_context()
    page = context.new_page()
    seen = []
    page.on("request", lambda r: seen.append(r.url))
    page.route(
        "**/*",
        lambda route: (
            route.continue_()
            if urlsplit(route.request.url).hostname == "127.0.0.1"
            else route.abort()
        ),
    )
    page.goto(server.url)
    page.wait_for_selector("#tok-tokens[data-state=ready] [data-token-id]", timeout=15_000)
    for tab in ("compare", "chat"):
        page.click(f".tab[data-view={tab}]")
        page.wait_for_selector(f"#view-{tab} [data-state=ready] [data-token-id]", timeout=15_000)
    context.close()
    hosts = {urlsplit(u).hostname for u in seen if not u.startswith("data:")}
    assert hosts == {"127.0.0.1"}, seen


class OtherSite(http.server.BaseHTTPRequestHandler):
    """Another site's page (``page`` is set per test), from another port of 127.0.0.1:
    a local dev server, say. Chromium lets a page from the loopback address space reach
    127.0.0.1 (one from the Internet it stops itself, but not every browser does)."""

    page = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format, *args):
        pass


def test_a_page_on_another_site_cannot_make_the_server_work(browser, server):
    # What any page could do while ours is open: a "simple" POST (text/plain), which
    # a browser sends without asking first, its answer left unread (no-cors).
    api = f"{server.url}api/encode"
    script = f"""
      fetch({json.dumps(api)}, {{method: "POST", mode: "no-cors",
        headers: {{"Content-Type": "text/plain"}},
        body: JSON.stringify({{text: "hi", tokenizer: "gpt2"}})}})
      .then(() => document.title = "sent", () => document.title = "failed");
    """
    page_html = f"<!doctype html><title></title><script>{script}</script>".encode()
    other = http.server.HTTPServer(
        ("127.0.0.1", 0), type("Page", (OtherSite,), {"page": page_html})
    )
    thread = threading.Thread(target=other.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    context = browser.new_context()
    try:
        page = context.new_page()
        answers = []
        page.on("response", lambda r: answers.append(r) if r.url == api else None)
        page.goto(f"http://127.0.0.1:{other.server_address[1]}/")
        page.wait_for_function("document.title !== ''", timeout=15_000)
        seen = [r.status for r in answers]
    finally:
        context.close()
        other.shutdown()
        other.server_close()
        thread.join(timeout=5)
    # 403 for its Origin (text/plain from no page at all would be a 415; before: a 200).
    assert seen == [403]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.lists(st.integers(1, 5), max_size=60))
def test_char_spans_cover_every_character_each_byte_span_touches(text, sizes):
    data = text.encode("utf-8", "surrogatepass")
    owner = [i for i, c in enumerate(text) for _ in c.encode("utf-8", "surrogatepass")]
    spans, at = CharSpans(text), 0
    for size in sizes:
        touched = owner[at : at + size]
        expected = (touched[0], touched[-1] + 1) if touched else (len(text), len(text))
        assert spans.next(size) == expected, (text, at, size)
        at += size
    assert len(owner) == len(data)


@pytest.mark.parametrize("module", ["bytepair.web.tokens", "bytepair.web.chat"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
