"""Pre-tokenization patterns: names, mistakes, and the promise that no pattern ever
drops text (issue 11, defect 3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
import bytepair.reference as ref
from bytepair.patterns import PATTERNS, resolve_pattern

from conftest import texts

# Patterns that leave text uncovered: letters only, digits only, a literal word, and
# one with a capture group (whose matches are still whole pieces).
PARTIAL = ["[a-z]+", r"\d+", "(?:gpt4)", r"(\w)\w*"]


def test_a_pattern_that_covers_little_drops_nothing():
    tok = bytepair.train_from_iterator(
        ["hello, World 123"] * 5, 262, pattern="[a-z]+", progress=False
    )
    text = "hello, World 123"
    assert tok.decode(tok.encode(text)) == text
    assert ref.pretokenize(text, "[a-z]+") == ["hello", ", W", "orld", " 123"]


@pytest.mark.parametrize("pattern", PARTIAL)
@given(corpus=st.lists(texts, min_size=1, max_size=4), text=texts)
@settings(max_examples=40)
def test_every_tokenizer_round_trips_text_its_pattern_does_not_cover(pattern, corpus, text):
    tok = bytepair.train_from_iterator(corpus, 300, pattern=pattern, progress=False)
    assert tok.decode(tok.encode(text, disallowed_special=())) == text.encode(
        "utf-8", "replace"
    ).decode("utf-8")
    vocab, merges = ref.train(corpus, 300, pattern=pattern)
    assert tok.merges == merges[: len(tok.merges)] and len(tok.merges) == len(merges)
    assert tok.encode(text, disallowed_special=()) == ref.encode(text, vocab, merges, {}, pattern)


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("gpt4", "cl100k"),
        ("cl100k_base", "cl100k"),
        ("o200k_base", "o200k"),
        ("gtp2", "gpt2"),
        ("GPT-4o", "o200k"),
    ],
)
def test_a_mistyped_or_model_name_gets_a_did_you_mean(name, meant):
    with pytest.raises(ValueError, match=f"did you mean '{meant}'"):
        resolve_pattern(name)


def test_names_are_case_insensitive_and_a_word_regex_can_be_written_as_a_group():
    assert resolve_pattern("CL100K") == PATTERNS["cl100k"]
    assert resolve_pattern("none") is None
    assert resolve_pattern("(?:gpt4)") == "(?:gpt4)"


@pytest.mark.parametrize(
    ("pattern", "pieces"),
    [
        ("cl100k", ["x", " \n "]),  # \s++$: a run of whitespace ending the text is whole
        ("llama3", ["x", " \n", " "]),  # cut after its last newline, as inside the text
        ("qwen2", ["x", " \n", " "]),
        ("o200k", ["x", " \n", " "]),
        ("tekken", ["x", " \n", " "]),
    ],
)
def test_a_run_of_whitespace_ending_the_text_splits_as_each_pattern_says(pattern, pieces):
    # The one place Llama 3's and Qwen2's patterns part from cl100k's: the hand-written
    # splitters that run them must part there too.
    text = "x \n "
    assert ref.pretokenize(text, pattern) == pieces
    tok = bytepair.train_from_iterator([text] * 20, 262, pattern=pattern, progress=False)
    assert tok.decode_bytes([tok.encode_ordinary(text)[-1]]) == pieces[-1].encode()
    assert tok.encode_ordinary(text) == ref.encode(text, tok.vocab, tok.merges, {}, pattern)


@pytest.mark.parametrize(
    ("pattern", "text", "pieces"),
    [
        ("o200k", "don't 12345", ["don't", " ", "123", "45"]),
        ("tekken", "don't 12345", ["don", "'t", " ", "1", "2", "3", "4", "5"]),
        ("llama3", "it's 12345", ["it", "'s", " ", "123", "45"]),
        ("qwen2", "it's 12345", ["it", "'s", " ", "1", "2", "3", "4", "5"]),
        # Qwen3.5's words take marks (\p{M}); Qwen2's leave them to the others.
        ("qwen2", "cafe\u0301 x", ["cafe", "\u0301", " x"]),
        ("qwen3.5", "cafe\u0301 x", ["cafe\u0301", " x"]),
        ("qwen2", "\u0915\u093f\u0924\u093e\u092c", ["\u0915", "\u093f\u0924", "\u093e\u092c"]),
        ("qwen3.5", "\u0915\u093f\u0924\u093e\u092c", ["\u0915\u093f\u0924\u093e\u092c"]),
        ("qwen3.5", "a\u0301!", ["a\u0301", "!"]),
    ],
)
def test_contractions_digits_and_marks_split_as_each_pattern_says(pattern, text, pieces):
    assert ref.pretokenize(text, pattern) == pieces
    tok = bytepair.train_from_iterator([text] * 20, 300, pattern=pattern, progress=False)
    # Trained on the text alone, each piece becomes one token.
    assert [tok.decode([i]) for i in tok.encode_ordinary(text)] == pieces
