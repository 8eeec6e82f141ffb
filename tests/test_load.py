"""Loading rank files fast: the native ``.tiktoken`` parser against the Python reader."""

from __future__ import annotations

import base64
import lzma
import re
from importlib import resources

import pytest

import bytepair
from bytepair import _core, formats

BUNDLED_FILES = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]


def bundled_data(file: str) -> bytes:
    packed = resources.files("bytepair").joinpath("data", f"{file}.tiktoken.xz")
    return lzma.decompress(packed.read_bytes())


def outcome(parse, data: bytes, path: str):
    """("ok", items in order) or ("error", message) of a parse."""
    try:
        return "ok", list(parse(data, path).items())
    except ValueError as e:
        return "error", str(e)


@pytest.mark.parametrize("file", BUNDLED_FILES)
def test_native_parser_agrees_with_python_reader_on_bundled_files(file):
    data = bundled_data(file)
    native = _core.parse_tiktoken(data)
    python = formats._parse_tiktoken_py(data, file)
    assert list(native.items()) == list(python.items())
    assert formats.parse_tiktoken(data, file) == python


def good_lines() -> list[bytes]:
    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(256)]
    return lines + [b"YWI= 256", b"YWJj 257"]


# (bad line inserted as line 7, does the native parser word the error itself?)
MALFORMED = [
    (b"!!!notbase64 300", False),  # not the base64 alphabet: the Python reader decides
    (b"YWI 300", True),  # bad base64: missing padding
    (b"YWJjZ 300", True),  # bad base64: 5 characters
    (b"YWI=", True),  # missing rank
    (b"YWI= ", True),  # missing rank, trailing space
    (b"YWI= 300 9", True),  # one field too many
    (b"YWI= x1", True),  # rank not an integer
    (b"YWI= 3=", True),
    (b"AA== 300", True),  # duplicate token
    (b"YWJj 300", True),  # a token a later line repeats: the error is on that line
    (b"YWI= 3", True),  # duplicate rank
    (b"YWI= -3", False),
    (b"YWI= +300", False),  # int() takes the sign: accepted by the Python reader
    (b"YWI= 1_0", False),
    (b"YWI=\t300", False),
    (b"YWI= 300\x0c", False),
    (b"\xc3\xa9 300", False),  # non-ASCII
    (b"YR== 300", False),  # unused base64 bits set: Python ignores them
    (b"YQ=== 300", False),
    (b"=YQ= 300", False),
    (b"YQ==YQ== 300", False),
    (b"YWI= 99999999999999999999", False),
]


@pytest.mark.parametrize("bad_line, native_words_it", MALFORMED)
def test_native_parser_agrees_with_python_reader_on_malformed_lines(bad_line, native_words_it):
    lines = good_lines()
    lines.insert(6, bad_line)
    data = b"\n".join(lines) + b"\n"
    path = "dir/bad.tiktoken"
    expected = outcome(formats._parse_tiktoken_py, data, path)
    assert outcome(formats.parse_tiktoken, data, path) == expected
    try:
        _core.parse_tiktoken(data)
    except ValueError as e:
        deferred = e.args == ("unsure",)
        assert deferred != native_words_it
        if not deferred:
            assert expected[0] == "error"
            assert str(formats._tiktoken_error(e.args, data, path)) == expected[1]
            assert re.match(rf"{path}, line (7|259): ", expected[1])
    else:
        assert expected[0] == "ok" and not native_words_it


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n",
        b"AA== 0\r\nAQ== 1\r\n",  # CRLF
        b"AA== 0\rAQ== 1\r",  # CR
        b"AA== 0\n\n   \nAQ== 1",  # blank lines, no final newline
        b"  AA==   0  \nAQ== 1\n",  # spaces around and between fields
        b"AA== 0\r\n\r\nAA== 1\r\n",  # duplicate token after a blank CRLF line
        b"AA== 0\r\rAQ== 0\n",  # duplicate rank: line numbers count the empty line
        b"AA== 7\nAQ== 007\n",  # leading zeros
        b"AA== 5\nAQ== 3\n",  # ranks out of order, with gaps
    ],
)
def test_native_parser_agrees_on_line_ends_blank_lines_and_spacing(data):
    assert outcome(formats.parse_tiktoken, data, "f") == outcome(
        formats._parse_tiktoken_py, data, "f"
    )
    try:
        _core.parse_tiktoken(data)
    except ValueError as e:
        assert e.args != ("unsure",)  # all plain form: the native parser decides


def test_native_errors_name_file_and_line_for_crlf_files(tmp_path):
    path = tmp_path / "crlf.tiktoken"
    lines = good_lines()
    lines.insert(9, b"AA== 400")
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    with pytest.raises(ValueError, match=r"crlf.tiktoken, line 10: token b'\\x00' was already"):
        bytepair.Tokenizer.from_tiktoken(path, "gpt2")
