"""Training: exact against the CS336 fixtures and the reference, whatever the workers."""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
import bytepair.reference as ref
from bytepair import _core
from bytepair.formats.byte_table import str_to_token
from bytepair.shards import one_file

from conftest import DATA, EOT, SPLITTER_PATTERNS, patterns, texts


def write_temp(text: str) -> str:
    f = tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", suffix=".txt", delete=False)
    with f:
        f.write(text)
    return f.name


def test_cs336_fixture_merges_and_vocab_match_exactly():
    vocab, merges = bytepair.train_bpe(DATA / "corpus.en", 500, [EOT])
    lines = (DATA / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    expected = [tuple(str_to_token(part) for part in line.split(" ")) for line in lines]
    assert merges == expected
    ref_vocab = json.loads((DATA / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    assert set(vocab) == set(ref_vocab.values())
    assert set(vocab.values()) == {str_to_token(t) for t in ref_vocab}


def test_ids_are_bytes_then_merges_then_specials():
    tok = bytepair.train(DATA / "corpus.en", 300, special_tokens=[EOT, "<|pad|>"], progress=False)
    assert all(tok.vocab[i] == bytes([i]) for i in range(256))
    assert [tok.vocab[256 + n] for n in range(42)] == [a + b for a, b in tok.merges]
    assert tok.special_tokens == {EOT: 298, "<|pad|>": 299}
    assert tok.vocab_size == 300


@given(
    docs=st.lists(texts, max_size=4),
    extra=st.integers(0, 60),
    pattern=patterns,
    specials=st.sampled_from([[], [EOT], [EOT, "<|endoftext|><|endoftext|>", "é"]]),
)
def test_train_from_iterator_equals_reference(docs, extra, pattern, specials):
    vocab_size = 256 + len(specials) + extra
    expected_vocab, expected_merges = ref.train(docs, vocab_size, specials, pattern)
    for workers in (1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tok = bytepair.train_from_iterator(
                docs,
                vocab_size,
                special_tokens=specials,
                pattern=pattern,
                num_threads=workers,
                progress=False,
            )
        assert tok.merges == expected_merges
        assert tok.vocab == expected_vocab


@given(
    text=texts,
    extra=st.integers(0, 40),
    pattern=patterns,
    block=st.sampled_from(["7", "64", "1000"]),
    specials=st.sampled_from([[], [EOT]]),
)
def test_train_on_file_equals_reference_for_any_block_size_and_workers(
    text, extra, pattern, block, specials
):
    # Tiny read blocks force cuts (at special tokens and safe newlines) in every file.
    path = write_temp(text)
    try:
        vocab_size = 256 + len(specials) + extra
        expected = ref.train([text], vocab_size, specials, pattern)
        for workers in (1, 2):
            with (
                mock.patch.object(one_file, "BLOCK_BYTES", int(block)),
                warnings.catch_warnings(),
            ):
                warnings.simplefilter("ignore")
                tok = bytepair.train(
                    path,
                    vocab_size,
                    special_tokens=specials,
                    pattern=pattern,
                    num_threads=workers,
                    progress=False,
                )
            assert (tok.vocab, tok.merges) == expected
    finally:
        os.unlink(path)


def assert_cuts_keep_pretokenization(text: str, pattern: str) -> None:
    """Every cut of ``_core.pattern_cuts`` splits ``text`` into two parts whose pieces
    (by the reference) are the whole text's."""
    data = text.encode("utf-8")
    whole = ref.pretokenize(text, pattern)
    for cut in _core.pattern_cuts(data):
        left, right = data[:cut].decode("utf-8"), data[cut:].decode("utf-8")
        assert ref.pretokenize(left, pattern) + ref.pretokenize(right, pattern) == whole, cut


@given(text=texts, pattern=st.sampled_from(SPLITTER_PATTERNS))
def test_pattern_cuts_never_change_pretokenization(text, pattern):
    assert_cuts_keep_pretokenization(text, pattern)


#: Characters of every kind around the spaces and newlines where cuts are looked for:
#: letters and marks of several scripts, digits, punctuation, "/" and "'", controls,
#: and whitespace that is not a space (Unicode's, and what only Python's str calls so).
_AROUND_CUTS = st.sampled_from(
    list("aZé'/.,-0١२")
    + ["\u0441", "\u0947", "\u0e01", "\u4e2d", "\u3002", "\u300c"]
    + ["\u0301", "\U0001f600", "\t", "\r", "\x0b", "\x1c", "\x1f", "\x85", "\xa0"]
    + ["\u2028", "\u3000", "\u200b", "\u180e"]
)
_cut_texts = st.lists(
    st.one_of(_AROUND_CUTS, st.sampled_from([" ", " ", "  ", "\n", "\r\n", "'s"])),
    max_size=30,
).map("".join)


@settings(max_examples=400)
@given(text=_cut_texts, pattern=st.sampled_from(SPLITTER_PATTERNS))
def test_pattern_cuts_around_every_kind_of_character(text, pattern):
    assert_cuts_keep_pretokenization(text, pattern)


def test_pattern_cut_rule_examples():
    assert _core.pattern_cuts(b"end.\nNext") == [5]
    assert _core.pattern_cuts(b"end \nNext") == [3]  # not after " \n" (one piece, cl100k)
    assert _core.pattern_cuts(b"end.\n/x") == []  # ".\n/" is one piece under o200k
    assert _core.pattern_cuts(b"one two  three") == [3, 7]  # not between the two spaces
    assert _core.pattern_cuts(b"one. two 3 x") == [4, 8, 10]
    # Any script: after a letter, a mark or punctuation, not after whitespace.
    assert _core.pattern_cuts("слово два".encode()) == [10]
    assert _core.pattern_cuts("नमस्ते दुनिया".encode()) == [18]  # after a vowel sign
    assert _core.pattern_cuts("中文。\n中文".encode()) == [10]  # a line of Chinese
    assert _core.pattern_cuts("a\u3000 b\xa0 c".encode()) == []
    assert _core.pattern_cuts("a\u3000\nb".encode()) == []


def test_results_do_not_depend_on_workers_on_a_real_corpus():
    path = DATA.parent.parent / "examples" / "books.txt"
    with mock.patch.object(one_file, "BLOCK_BYTES", 100000):
        one = bytepair.train(path, 1000, special_tokens=[EOT], num_threads=1, progress=False)
        two = bytepair.train(path, 1000, special_tokens=[EOT], num_threads=2, progress=False)
    whole = bytepair.train(path, 1000, special_tokens=[EOT], num_threads=2, progress=False)
    assert one.merges == two.merges == whole.merges
    assert len(one.merges) == 1000 - 257


@pytest.mark.filterwarnings("ignore:training stopped early")
def test_several_files_count_as_one_corpus(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("low lower lowest\n", encoding="utf-8")
    b.write_text("newer newest\n", encoding="utf-8")
    tok = bytepair.train([a, b], 270, progress=False)
    expected = ref.train(["low lower lowest\n", "newer newest\n"], 270)
    assert (tok.vocab, tok.merges) == expected


@pytest.mark.filterwarnings("ignore:training stopped early")
def test_special_tokens_are_never_merged_across():
    tok = bytepair.train_from_iterator(
        [f"ab{EOT}ab{EOT}ab"], 300, special_tokens=[EOT], pattern=None, progress=False
    )
    assert all(b"<" not in a + b for a, b in tok.merges)


def test_stops_early_with_a_warning_when_pairs_run_out():
    with pytest.warns(UserWarning, match="stopped early after 1 of 10 merges"):
        tok = bytepair.train_from_iterator(["ab"], 266, progress=False)
    assert tok.merges == [(b"a", b"b")]
    assert tok.vocab_size == 257


def test_vocab_size_too_small_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 257"):
        bytepair.train_from_iterator(["ab"], 256, special_tokens=[EOT], progress=False)


def test_invalid_utf8_names_file_and_byte_offset(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello world\n" * 10 + b"caf\xe9\n")
    with pytest.raises(
        ValueError, match=r"bad\.txt: invalid UTF-8 at byte offset 123 \(byte 0xe9\)"
    ):
        bytepair.train(bad, 300, progress=False)


@pytest.mark.filterwarnings("ignore:training stopped early")
def test_invalid_utf8_can_be_replaced_explicitly(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9 caf\xe9")
    tok = bytepair.train(bad, 300, errors="replace", progress=False)
    expected = ref.train(["caf\ufffd caf\ufffd"], 300)
    assert (tok.vocab, tok.merges) == expected


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt: no such file"):
        bytepair.train(tmp_path / "nope.txt", 300, progress=False)


def test_train_bpe_returns_the_cs336_types():
    vocab, merges = bytepair.train_bpe(str(DATA / "tinystories_sample.txt"), 300, [EOT])
    assert isinstance(vocab, dict) and all(
        isinstance(k, int) and isinstance(v, bytes) for k, v in vocab.items()
    )
    assert isinstance(merges, list) and all(
        isinstance(a, bytes) and isinstance(b, bytes) for a, b in merges
    )
    assert vocab[299] == EOT.encode()


def test_training_stats_are_recorded():
    tok = bytepair.train(DATA / "corpus.en", 400, progress=False)
    stats = tok.training_stats
    assert stats.bytes_read == (DATA / "corpus.en").stat().st_size
    assert stats.merges_done == 144 and stats.distinct_pretokens > 1000


def test_progress_bars_report_bytes_and_merges(capsys):
    bytepair.train(DATA / "corpus.en", 300, progress=True)
    err = capsys.readouterr().err
    assert "counting" in err and "merging" in err and "44/44" in err


def test_pattern_names_and_custom_regex_are_accepted():
    text = "foo bar foo-bar"
    custom = bytepair.train_from_iterator([text], 260, pattern=r"\w+|\W", progress=False)
    assert custom.merges == ref.train([text], 260, pattern=r"\w+|\W")[1]
    with pytest.raises(ValueError, match="invalid pre-tokenizer pattern"):
        bytepair.train_from_iterator([text], 260, pattern="(", progress=False)


@pytest.mark.filterwarnings("ignore:training stopped early")
def test_custom_pattern_file_training_is_exact_without_newline_cuts(tmp_path):
    path = tmp_path / "c.txt"
    text = "ab.\ncd.\nab\n" * 50
    path.write_text(text, encoding="utf-8")
    with mock.patch.object(one_file, "BLOCK_BYTES", 16):
        tok = bytepair.train(path, 280, pattern=r"[^\n]+\n?", num_threads=2, progress=False)
    assert tok.merges == ref.train([text], 280, pattern=r"[^\n]+\n?")[1]
    assert Path(path).exists()


def _counter_merges(docs, pattern, specials, num_merges, **limits) -> list[tuple[bytes, bytes]]:
    counter = _core.PreTokenCounter(ref.resolve_pattern(pattern), specials, 2)
    counter.add_documents(docs)
    merges, vocab = counter.train(num_merges, **limits)
    return [(vocab[a], vocab[b]) for a, b in merges]


@given(
    docs=st.lists(texts, max_size=4),
    extra=st.integers(0, 60),
    pattern=patterns,
    min_frequency=st.integers(0, 5),
    max_token_length=st.none() | st.integers(1, 6),
)
def test_min_frequency_and_max_token_length_equal_reference(
    docs, extra, pattern, min_frequency, max_token_length
):
    _, expected = ref.train(
        docs,
        256 + 1 + extra,  # the special token counts too
        [EOT],
        pattern,
        min_frequency=min_frequency,
        max_token_length=max_token_length,
    )
    got = _counter_merges(
        docs,
        pattern,
        [EOT],
        extra,
        min_frequency=min_frequency,
        max_token_length=max_token_length,
    )
    assert got == expected


def test_max_token_length_keeps_newline_runs_from_becoming_tokens():
    docs = ["a\n\n\n\n\n\n\nb"] * 20
    merges = _counter_merges(docs, "gpt2", [], 20, max_token_length=3)
    assert merges and all(len(a + b) <= 3 for a, b in merges)
    assert (b"\n\n\n\n", b"\n\n") in _counter_merges(docs, "gpt2", [], 20)


def test_a_huge_merge_count_trains_without_allocating_for_it():
    merges = _counter_merges(["hello world"] * 3, "gpt2", [], 10**10)
    assert 0 < len(merges) < 20


def test_counts_of_two_halves_merged_train_like_the_whole():
    docs = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8").split(EOT)
    half = len(docs) // 2
    pattern = ref.resolve_pattern("gpt2")

    def counted(part):
        counter = _core.PreTokenCounter(pattern, [EOT], 2)
        counter.add_documents(part)
        return counter

    whole = counted(docs)
    first, second = counted(docs[:half]), counted(docs[half:])
    # One half travels as bytes (another process or machine), the other stays here.
    shipped = _core.PreTokenCounter.from_bytes(second.to_bytes(), pattern, [EOT], 2)
    first.merge(shipped)
    assert first.to_dict() == whole.to_dict() and len(first) == len(whole)
    assert first.to_bytes() == whole.to_bytes()
    assert first.train(200) == whole.train(200)


def test_counts_added_from_python_and_corrupt_tables():
    counter = _core.PreTokenCounter(None, [], 1)
    counter.add_counts({b"low": 5, b"lower": 2})
    counter.add_counts([(b"low", 1), (b"newest", 6)])
    assert counter.to_dict() == {b"low": 6, b"lower": 2, b"newest": 6}
    counter.merge(counter)
    assert counter.to_dict() == {b"low": 12, b"lower": 4, b"newest": 12}
    data = counter.to_bytes()
    with pytest.raises(ValueError, match="byte offset 0"):
        _core.PreTokenCounter.from_bytes(b"\x80\x04pickle", None, [], 1)
    with pytest.raises(ValueError, match=r"truncated count table: entry 2 at byte offset \d+"):
        _core.PreTokenCounter.from_bytes(data[:-3], None, [], 1)


def test_merges_shared_among_threads_equal_one_thread():
    # 250,000 distinct words holding "ab": the first merges touch more words than the
    # merge loop splits among threads (200,000); results must not depend on the count.
    words = {f"ab{i:06d}ba".encode(): 1 + i % 3 for i in range(250_000)}

    def merges(num_threads):
        counter = _core.PreTokenCounter(None, [], num_threads)
        counter.add_counts(words)
        ids, vocab = counter.train(40)
        return [(vocab[a], vocab[b]) for a, b in ids]

    one = merges(1)
    assert merges(2) == one and merges(3) == one
    # (a, b) and (b, a) tie at 499,999: the greater pair goes first (CS336).
    assert one[:3] == [(b"b", b"a"), (b"a", b"b"), (b"ab", b"1")]
