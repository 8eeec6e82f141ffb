"""Mistral's SentencePiece tokenizer files (v1, v2, v3, v7), as the pip package
mistral-common ships them: each loads and encodes exactly as sentencepiece does, on
generated text and on real lines (optional test dependency: skipped, saying so, when
mistral-common or sentencepiece is not installed)."""

from __future__ import annotations

from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair

from conftest import DATA

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
pytest.importorskip("mistral_common", reason="mistral-common is not installed")

FILES = [
    "tokenizer.model.v1",
    "mistral_instruct_tokenizer_240216.model.v2",
    "mistral_instruct_tokenizer_240323.model.v3",
    "mistral_instruct_tokenizer_241114.model.v7",
]


@pytest.fixture(scope="module", params=FILES)
def pair(request):
    path = resources.files("mistral_common").joinpath("data", request.param)
    if not path.is_file():
        pytest.skip(f"mistral-common ships no {request.param}")
    path = str(path)
    return bytepair.load(path), spm.SentencePieceProcessor(model_file=path)


def test_real_lines_encode_and_decode_as_sentencepiece(pair):
    ours, theirs = pair
    lines = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8").splitlines()
    lines += (DATA / "german.txt").read_text(encoding="utf-8").splitlines()
    lines += ["  two leading spaces", "tabs\tand trailing  ", "日本語 と emoji 🎉", ""]
    want = theirs.encode(lines)
    assert ours.encode_batch(lines, disallowed_special=()) == want
    assert [ours.decode(ids) for ids in want] == [theirs.decode(ids) for ids in want]


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=80))
def test_generated_text_encodes_as_sentencepiece(pair, text):
    ours, theirs = pair
    assert ours.encode(text, disallowed_special=()) == theirs.encode(text)
