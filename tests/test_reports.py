"""Reports: stats, compare and the under-trained-token audit, checked against
brute-force computations and texts built so the answer is known."""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import bytepair
from bytepair.reference import bpe, pretokenize
from bytepair.reports import audit, compare, stats
from bytepair.reports.reach import unreachable_merges
from bytepair.reports.tokens import token_kind


def brute_force_reasons(tok) -> tuple[set[int], set[int]]:
    """(unreachable, split by pattern) by running the reference BPE on every token."""
    specials = set(tok.special_tokens.values())
    ranks = {}
    for rank, pair in enumerate(tok.merges):
        ranks.setdefault(pair, rank)
    unreachable, split = set(), set()
    for i, token in tok.vocab.items():
        if i in specials:
            continue
        if bpe(token, ranks) != [token]:
            unreachable.add(i)
            continue
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if any(b in token for b in b"\xc0\xc1") or len(pretokenize(text, tok.pattern)) > 1:
            split.add(i)  # (C0/C1 cannot decode, so that clause never fires)
    return unreachable, split


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_unreachable_and_pattern_split_tokens_of_bundled_encodings_match_brute_force(name):
    tok = bytepair.get_encoding(name)
    report = audit(tok)
    unreachable, split = brute_force_reasons(tok)
    assert {c.id for c in report.with_reason("unreachable")} == unreachable
    assert {c.id for c in report.with_reason("split by pattern")} == split
    if name == "o200k_base":  # the one of the three whose pattern splits some tokens
        texts = {c.text for c in report.with_reason("split by pattern")}
        assert '" I\'"' in texts and '"\\n//"' in texts


def test_a_token_whose_seam_merges_first_is_unreachable():
    # "abc" is listed as ab+c, but on its own bytes b+c (rank 0) merges before a+b.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"bc", 257: b"ab", 258: b"abc"}
    tok = bytepair.Tokenizer(vocab, [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    report = audit(tok)
    assert [c.id for c in report.with_reason("unreachable")] == [258]
    assert tok.encode("abc") == [97, 256]


def test_a_token_with_the_bytes_of_a_lower_id_is_a_duplicate():
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 300: b"ab"}
    tok = bytepair.Tokenizer(vocab, [(b"a", b"b")])
    [dup] = audit(tok).with_reason("duplicate")
    assert (dup.id, dup.duplicate_of) == (300, 256)


def test_gpt2_byte_tokens_that_utf8_never_holds_are_flagged():
    tok = bytepair.get_encoding("gpt2")
    never = {tok.encode_single_token(bytes([b])) for b in [0xC0, 0xC1, *range(0xF5, 0x100)]}
    assert {c.id for c in audit(tok).with_reason("never in UTF-8")} == never


@st.composite
def merge_lists(draw):
    """Merges over the alphabet "abc", each pair of earlier tokens, no bytes twice."""
    tokens = [b"a", b"b", b"c"]
    merges = []
    for _ in range(draw(st.integers(1, 20))):
        a, b = draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens))
        if a + b not in tokens and len(a + b) <= 10:
            merges.append((a, b))
            tokens.append(a + b)
    return merges


@given(merge_lists())
def test_merge_tree_walk_finds_exactly_the_merges_bpe_never_builds(merges):
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    expected = [n for n, (a, b) in enumerate(merges) if bpe(a + b, ranks) != [a + b]]
    assert unreachable_merges(merges) == expected


def test_parts_built_only_on_the_way_to_a_longer_token_are_absorbed(tmp_path):
    # Trained on one word, the merges build it step by step; encoding the training text
    # gives only the whole word, so every intermediate token is absorbed.
    tok = bytepair.train_from_iterator(["hello"] * 50, 256 + 4, progress=False)
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(["hello"] * 50), encoding="utf-8")
    hello = tok.encode_single_token("hello")
    intermediate = {tok.encode_single_token(a + b) for a, b in tok.merges} - {hello}
    report = audit(tok, [corpus])
    absorbed = report.with_reason("absorbed")
    assert {c.id for c in absorbed} == intermediate and len(intermediate) == 3
    assert [(c.count, c.formed) for c in absorbed] == [(0, 50)] * 3
    # the last merge's parts were absorbed straight into "hello"
    last = {tok.encode_single_token(part) for part in tok.merges[-1]} & intermediate
    assert all(c.absorbed_into == [hello] for c in absorbed if c.id in last)


def planted_matrix(n_rows, untrained, dims=16, seed=0):
    """Rows sharing one big direction; trained rows random around it, untrained rows
    one fixed vector plus tiny noise."""
    rng = np.random.default_rng(seed)
    shared = np.zeros(dims)
    shared[0] = 10.0
    m = shared + rng.normal(size=(n_rows, dims))
    unused = rng.normal(size=dims)
    m[untrained] = shared + unused + rng.normal(scale=0.01, size=(len(untrained), dims))
    return m.astype(np.float32)


def test_embedding_rows_planted_next_to_unused_rows_rank_first(tmp_path):
    tok = bytepair.get_encoding("gpt2")
    known = [tok.encode_single_token(bytes([b])) for b in [0xC0, 0xC1, *range(0xF5, 0x100)]]
    planted = [1000, 2000, 3000]
    path = tmp_path / "wte.npy"
    np.save(path, planted_matrix(tok.n_vocab, known + planted))
    report = audit(tok, embeddings=path, embedding_top=3)
    ranked = report.with_reason("near unused rows")
    assert [c.id for c in ranked] == sorted(planted, key=lambda i: report_distance(report, i))
    assert {c.id for c in ranked} == set(planted)
    assert all(c.distance < 0.01 for c in ranked)


def report_distance(report, i):
    return next(c.distance for c in report.candidates if c.id == i)


def test_embeddings_read_from_safetensors_pick_the_lm_head(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tok = bytepair.get_encoding("gpt2")
    known = [tok.encode_single_token(bytes([b])) for b in [0xC0, 0xC1, *range(0xF5, 0x100)]]
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file(
        {
            "lm_head.weight": planted_matrix(tok.n_vocab, [*known, 777]),
            "ln.weight": np.ones(16, dtype=np.float32),
        },
        path,
    )
    report = audit(tok, embeddings=path, embedding_top=1)
    assert [c.id for c in report.with_reason("near unused rows")] == [777]


def test_a_matrix_with_fewer_rows_than_ids_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "small.npy"
    np.save(path, np.ones((10, 4)))
    with pytest.raises(
        ValueError, match=r"small\.npy: 10 rows, but the tokenizer has ids up to 50256"
    ):
        audit(bytepair.get_encoding("gpt2"), embeddings=path)


@pytest.mark.parametrize(
    "token, kind",
    [
        (b" hello", ("letters, leading space", "Latin")),
        (b"hello", ("letters", "Latin")),
        (" мир".encode(), ("letters, leading space", "Cyrillic")),
        ("世界".encode(), ("letters", "Han")),
        ("한국".encode(), ("letters", "Hangul")),
        ("नमस्ते".encode(), ("letters", "Devanagari")),
        (b" 2024", ("digits", None)),
        (b"\n\n", ("whitespace", None)),
        (b" ", ("whitespace", None)),
        (b"...", ("punctuation & symbols", None)),
        (b"a1", ("mixed", None)),
        (b"\xe4\xb8", ("partial UTF-8", None)),
    ],
)
def test_token_kind_and_script(token, kind):
    assert token_kind(token) == kind


def test_stats_count_the_tokens_of_a_file_as_encode_does(tmp_path):
    tok = bytepair.get_encoding("gpt2")
    text = "The cat sat on the mat.\nThe cat sat.<|endoftext|>A dog.\n"
    path = tmp_path / "c.txt"
    path.write_text(text, encoding="utf-8")
    [c] = stats(tok, [path]).corpora
    ids = tok.encode(text, allowed_special="all")
    counted = Counter(ids)
    # words are runs of non-whitespace: "sat.<|endoftext|>A" is one
    assert (c.tokens, c.bytes, c.words) == (len(ids), len(text.encode()), 10)
    assert {i: int(n) for i, n in enumerate(c.counts) if n} == counted
    assert c.distinct_tokens == len(counted)
    assert c.top_tokens[0].count == max(counted.values())
    ranks, freqs = c.zipf()
    assert freqs.tolist() == sorted(counted.values(), reverse=True)
    assert ranks.tolist() == list(range(1, len(counted) + 1))


def test_vocab_stats_cover_every_token_once():
    tok = bytepair.get_encoding("cl100k_base")
    v = stats(tok).vocab
    assert sum(v.by_kind.values()) == tok.vocab_size
    assert sum(v.by_length.values()) == tok.vocab_size - len(tok.special_tokens)
    assert v.by_kind["special"] == len(tok.special_tokens)
    assert len(v.longest) == 20 and len(tok.decode_single_token_bytes(v.longest[0].id)) == max(
        v.by_length
    )


def test_compare_on_parallel_texts_gives_tokens_per_language_relative_to_english(tmp_path):
    texts = {"en": "The weather is nice today.\n", "ko": "오늘은 날씨가 좋다.\n"}
    for lang, text in texts.items():
        (tmp_path / f"ud_pud_{lang}.txt").write_text(text, encoding="utf-8")
    gpt2, o200k = bytepair.get_encoding("gpt2"), bytepair.get_encoding("o200k_base")
    report = compare([gpt2, o200k], [tmp_path])
    assert report.tokenizers == ["gpt2", "o200k_base"]
    en, ko = report.rows
    assert (en.language, ko.language) == ("en", "ko")
    n = {(lang, t.name): len(t.encode(s)) for lang, s in texts.items() for t in (gpt2, o200k)}
    assert ko.tokens == [n["ko", "gpt2"], n["ko", "o200k_base"]]
    assert ko.relative[1] == pytest.approx(n["ko", "o200k_base"] / n["ko", "gpt2"])
    assert ko.premium == pytest.approx(
        [n["ko", "gpt2"] / n["en", "gpt2"], n["ko", "o200k_base"] / n["en", "o200k_base"]]
    )


def test_plots_without_matplotlib_name_the_extra(monkeypatch):
    from bytepair.reports import plots

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r'pip install "bytepair\[plot\]"'):
        plots._pyplot()
