"""tiktoken rank files that merges cannot build: Llama 3's ``tokenizer.model`` and its
kin load and encode exactly as tiktoken does (whole piece first, then the pair whose
concatenation ranks lowest), and say so where a merge list would be needed.

The Llama 3 and Llama 4 files come from the ``llama-models`` package (a test extra),
found through ``importlib.resources``; nothing is downloaded. With BYTEPAIR_SHARED set,
every shared corpus sample (and its NFD form) is compared too.
"""

from __future__ import annotations

import importlib
import pickle
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import formats
from bytepair.models import BPE, RankBPE, Unsupported
from bytepair.models.ranks import from_ranks
from bytepair.patterns import GPT2_PATTERN, MODEL_PATTERNS, O200K_PATTERN, resolve_pattern

from conftest import corpus_sample, needs_shared, shared_corpus_files, texts

tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is not installed")

BYTES = {bytes([b]): b for b in range(256)}


def tiktoken_encoding(ranks: dict[bytes, int], pattern: str = GPT2_PATTERN, specials=None):
    return tiktoken.Encoding(
        name="test", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials or {}
    )


# -- small tables ------------------------------------------------------------------------


def test_a_token_no_merge_makes_is_found_by_looking_the_whole_piece_up():
    ranks = BYTES | {b"ab": 256, b"xyz": 257, b"abxyz": 258}
    model = from_ranks(ranks, pattern=None)
    assert isinstance(model, RankBPE)
    assert model.unbuildable == [b"xyz", b"abxyz"]
    assert model.recovered_merges == [(b"a", b"b")]
    tok = bytepair.Tokenizer.from_model(model)
    assert tok.encode("xyz") == [257]
    assert tok.encode("abxyz") == [258]
    assert tok.encode("abxyzz") == [256, 120, 121, 122, 122]


def test_parts_merge_by_the_rank_of_their_concatenation_as_in_tiktoken():
    # "abcd" (259) is no merge: "ab" merges first and "abc" ranks after "abcd". Inside
    # "abcde", tiktoken still makes it: ab, ab+c = abc, abc+d = abcd.
    ranks = BYTES | {b"ab": 256, b"bc": 257, b"bcd": 258, b"abcd": 259, b"abc": 260}
    tok = bytepair.Tokenizer.from_model(from_ranks(ranks, pattern=None))
    assert tok.encode("abcde") == [259, 101]
    assert tok.encode("abcde") == tiktoken_encoding(ranks, r"[\s\S]+").encode("abcde")


def test_a_table_merges_build_gives_a_bpe_model_with_its_merges():
    model = from_ranks(BYTES | {b"ab": 256, b"abc": 257}, ["<|end|>"])
    assert type(model) is BPE
    assert model.merges == [(b"a", b"b"), (b"ab", b"c")]
    assert model.special_tokens == {"<|end|>": 258}


tables = st.lists(st.text("abc ", min_size=2, max_size=5).map(str.encode), max_size=25, unique=True)


@settings(max_examples=150, deadline=None)
@given(tokens=tables, text=st.one_of(st.text("abc \n", max_size=60), texts))
def test_random_rank_tables_encode_as_tiktoken(tokens, text):
    ranks = BYTES | {t: 256 + n for n, t in enumerate(t for t in tokens if t not in BYTES)}
    tok = bytepair.Tokenizer.from_model(from_ranks(ranks, pattern="gpt2"))
    assert tok.encode_ordinary(text) == tiktoken_encoding(ranks).encode_ordinary(text)


# -- files and exports ---------------------------------------------------------------------


@pytest.fixture
def odd(tmp_path) -> bytepair.Tokenizer:
    """A .tiktoken file with one token no merge makes, and a special token."""
    path = tmp_path / "odd.tiktoken"
    formats.tiktoken.write_ranks(path, BYTES | {b"ab": 256, b"xyz": 257})
    return bytepair.load(path, pattern="gpt2", special_tokens={"<|end|>": 258})


def test_formats_with_a_merge_list_refuse_it_naming_a_token_and_write_nothing(odd, tmp_path):
    for name, fmt in [("t.json", None), ("folder", "gpt2")]:
        path = tmp_path / name
        with pytest.raises(Unsupported, match=r"no merges: 1 of its tokens \(such as b'xyz'\)"):
            odd.save(path, format=fmt)
        assert not path.exists()
    with pytest.raises(AttributeError, match="recovered_merges"):
        _ = odd.merges


def test_tiktoken_bytepair_and_pickle_keep_it_exactly(odd, tmp_path):
    text = "xyz abxyz <|end|>"
    want = odd.encode(text, allowed_special="all")
    assert want == [257, 32, 256, 120, 121, 122, 32, 258]
    odd.save(tmp_path / "t.tiktoken")
    load = pytest.importorskip("tiktoken.load").load_tiktoken_bpe
    assert load(str(tmp_path / "t.tiktoken")) == odd.model.ranks()
    back = bytepair.load(tmp_path / "t.tiktoken", pattern="gpt2", special_tokens={"<|end|>": 258})
    odd.save(tmp_path / "t.bytepair")
    for other in (back, bytepair.load(tmp_path / "t.bytepair"), pickle.loads(pickle.dumps(odd))):
        assert isinstance(other.model, RankBPE)
        assert other.encode(text, allowed_special="all") == want


def test_added_special_tokens_keep_tiktokens_rule(odd):
    more = odd.with_special_tokens(["<|new|>"])
    assert more.special_tokens == {"<|end|>": 258, "<|new|>": 259}
    assert more.encode("xyz<|new|>", allowed_special="all") == [257, 259]


# -- named patterns ------------------------------------------------------------------------


def test_named_patterns_are_their_owners_strings():
    llama3 = pytest.importorskip("llama_models.llama3.tokenizer", reason=NO_LLAMA)
    llama4 = importlib.import_module("llama_models.llama4.tokenizer")
    assert resolve_pattern("llama3") == llama3.Tokenizer.pat_str
    assert resolve_pattern("llama4") == llama4.Tokenizer.O200K_PATTERN == O200K_PATTERN


def test_qwen2_pattern_is_transformers_own_and_names_are_listed():
    qwen2 = pytest.importorskip("transformers.models.qwen2.tokenization_qwen2")
    assert resolve_pattern("qwen2") == resolve_pattern("QWEN2") == qwen2.PRETOKENIZE_REGEX
    assert sorted(MODEL_PATTERNS) == ["llama3", "llama4", "qwen2", "qwen3.5", "tekken"]
    with pytest.raises(ValueError, match="did you mean 'llama3'"):
        resolve_pattern("llama-3")


def test_qwen3_5_pattern_is_transformers_own():
    qwen3_5 = pytest.importorskip("transformers.models.qwen3_5.tokenization_qwen3_5")
    assert resolve_pattern("qwen3.5") == qwen3_5.PRETOKENIZE_REGEX
    with pytest.raises(ValueError, match="did you mean 'qwen3.5'"):
        resolve_pattern("qwen35")


# -- Llama 3 and Llama 4, exact vs tiktoken --------------------------------------------------

NO_LLAMA = "llama-models is not installed (a test extra: pip install '.[test]')"
VERSIONS = ["llama3", "llama4"]


def llama(version: str):
    """(our tokenizer, llama_models' own Tokenizer) for the file the package ships."""
    module = pytest.importorskip(f"llama_models.{version}.tokenizer", reason=NO_LLAMA)
    path = Path(str(resources.files("llama_models") / version / "tokenizer.model"))
    theirs = module.Tokenizer(path)
    ours = bytepair.load(path, pattern=version, special_tokens=theirs.special_tokens)
    return ours, theirs


@pytest.fixture(scope="module", params=VERSIONS)
def pair(request):
    return llama(request.param)


def test_llama3_has_678_tokens_no_merge_makes_and_loads_them():
    ours, theirs = llama("llama3")
    assert isinstance(ours.model, RankBPE)
    unbuildable = ours.model.unbuildable
    assert len(unbuildable) == 678 and b".:.:" in unbuildable
    assert ours.encode(".:.:") == [100421] == theirs.model.encode(".:.:")
    assert ours.encode(" việc") == theirs.model.encode(" việc") == [100769]
    assert ours.n_vocab == theirs.n_words == 128256
    assert ours.encode("<|begin_of_text|>Hi", allowed_special="all") == theirs.encode(
        "<|begin_of_text|>Hi", bos=False, eos=False, allowed_special="all"
    )


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(texts, st.text(max_size=80)))
def test_llama_files_encode_generated_text_as_tiktoken(pair, text):
    ours, theirs = pair
    assert ours.encode_ordinary(text) == theirs.model.encode_ordinary(text)
    assert ours.encode(text, allowed_special="all") == theirs.model.encode(
        text, allowed_special="all"
    )


@needs_shared
@pytest.mark.parametrize("path", shared_corpus_files(), ids=lambda p: p.name)
def test_llama_files_encode_every_shared_corpus_sample_as_tiktoken(pair, path):
    ours, theirs = pair
    lines = corpus_sample(path)
    want = theirs.model.encode_ordinary_batch(lines, num_threads=1)
    got = ours.encode_ordinary_batch(lines)
    bad = [line for line, a, b in zip(lines, got, want) if a != b]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:3]}"


UNSTABLE_PROMPTS = [
    "hello fanta",
    "The quick brown fo",
    "x  ",
    "def f(x):\n    ",
    "caf\xe9",
    "日本語の",
]


def test_encode_with_unstable_of_a_rank_file_equals_tiktokens(pair):
    ours, theirs = pair
    for prompt in UNSTABLE_PROMPTS:
        stable, completions = ours.encode_with_unstable(prompt)
        want_stable, want = theirs.model.encode_with_unstable(prompt)
        assert (stable, completions) == (want_stable, sorted(want)), prompt
