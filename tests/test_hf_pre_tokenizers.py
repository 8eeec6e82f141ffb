"""Byte-level BPE tokenizer.json files in today's open-model shapes encode exactly as
``tokenizers`` does, on every path (encode, batches, numpy, encode_file in small
blocks, streaming), or are refused naming the component:

- Llama 3: a Split of its pattern, then ByteLevel, and a BPE model with
  ``"ignore_merges": true`` (a pre-token that is a token is that token, merges or not);
- DeepSeek V3: a Sequence of three Splits, each splitting the pieces of the one before;
- Split with every behavior and invert, Digits, Punctuation, Whitespace,
  WhitespaceSplit, and ByteLevel splitting by its own regex after them.

The files are built here: Llama 3's from llama-models' ``tokenizer.model`` with
transformers' ``TikTokenConverter`` when both are installed, the others on GPT-2's
tokenizer.json.
"""

from __future__ import annotations

import copy
import json
import lzma
import pickle
import random
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.formats.hf import read_tokenizer_json, to_oniguruma
from bytepair.models import BPE
from bytepair.patterns import LLAMA3_PATTERN, PATTERNS
from bytepair.split import Split

from conftest import assert_every_path_encodes_as, needs_shared, shared_corpus_files

tokenizers = pytest.importorskip("tokenizers")

GPT2_JSON = Path(__file__).parent / "data" / "gpt2" / "tokenizer.json"

#: DeepSeek V3's pre-tokenizer (tokenizer.json of deepseek-ai/DeepSeek-V3): digits by
#: three, runs of CJK ideographs and kana, then words, punctuation and whitespace.
DEEPSEEK_V3_SPLITS = [
    r"\p{N}{1,3}",
    "[一-龥\u3040-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
    r"|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]


def split(regex: str, behavior: str = "Isolated", invert: bool = False) -> dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": invert}


def byte_level(use_regex: bool = False) -> dict:
    return {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": use_regex,
    }


DEEPSEEK_V3 = [*(split(r) for r in DEEPSEEK_V3_SPLITS), byte_level()]

#: Pre-tokenizers (before ByteLevel) read exactly, by name.
SHAPES = {
    "deepseek_v3": DEEPSEEK_V3,
    # Spark/Hunyuan-style: DeepSeek's Splits, then each digit alone.
    "deepseek_v3+digits": [*DEEPSEEK_V3[:3], {"type": "Digits", "individual_digits": True}]
    + [byte_level()],
    "llama3_then_bytelevel_regex": [split(to_oniguruma(LLAMA3_PATTERN)), byte_level(True)],
    **{
        f"split_{behavior}{'_inverted' if invert else ''}": [
            split(r"\s+|[.,!?]", behavior, invert),
            byte_level(True),
        ]
        for behavior in (
            "Isolated",
            "Removed",
            "MergedWithPrevious",
            "MergedWithNext",
            "Contiguous",
        )
        for invert in (False, True)
    },
    # Empty matches split the text around them (and count as matches for behaviors).
    "split_empty_matches_Isolated": [split("x*"), byte_level()],
    "split_empty_matches_MergedWithPrevious": [split("x*", "MergedWithPrevious"), byte_level()],
    "split_empty_matches_MergedWithNext_inverted": [
        split("(?=a)", "MergedWithNext", True),
        byte_level(),
    ],
    "split_empty_matches_Contiguous": [split(r"\s*", "Contiguous"), byte_level()],
    # camelCase cut by a lookbehind: streaming then cuts only between the pattern's pieces.
    "split_lookbehind_camel_case": [
        split(r"\p{N}{1,3}"),
        split("(?<=[a-z])(?=[A-Z])"),
        byte_level(True),
    ],
    "split_string_removed": [
        {"type": "Split", "pattern": {"String": "--"}, "behavior": "Removed", "invert": False},
        byte_level(True),
    ],
    "digits_individual": [{"type": "Digits", "individual_digits": True}, byte_level(True)],
    "digits_runs": [{"type": "Digits", "individual_digits": False}, byte_level(True)],
    "punctuation": [{"type": "Punctuation", "behavior": "Isolated"}, byte_level(True)],
    "punctuation_contiguous": [{"type": "Punctuation", "behavior": "Contiguous"}, byte_level()],
    "whitespace_split": [{"type": "WhitespaceSplit"}, byte_level()],
    "whitespace": [{"type": "Whitespace"}, byte_level()],
}

#: Characters the shapes tell apart: digits of several scripts, ASCII and Unicode
#: punctuation and symbols, CJK and kana, letters with marks, every kind of space.
TRICKY = (
    "0123456789٣²³¹¼½¾Ⅻ.,!?-—«»¿'\"$€+^`|~_()[]{}中文字ひらがなカタカナ한국어é\u0301ßİ"
    "  \t\n\n\r\u3000\u00a0\u2003\u200c\u200dabx"
)
ALPHABET = st.sampled_from(list(TRICKY)) | st.characters(codec="utf-8")
TEXT = st.text(ALPHABET, max_size=60)
EXAMPLES = [
    "",
    "Hello world's 12345 items, 3.14159 -- ok?!  \n\n  end",
    "việc làm ở Hà Nội; İstanbul'da 2024 yılında",
    "DeepSeek: 中文字符和ひらがなカタカナ mixed 123漢字456",
    "x=foo(bar)+baz[0]; //comment\n\tif (a!=b) {return -1;}\n",
    "  leading and trailing  \u3000\u00a0",
    "the-final--countdown ٣٤٥ Ⅻ ½",
    # Word characters in Oniguruma, not in bytepair's engine, and the other way round.
    "a²b x\u200dy Ⅻ½z x¾, e\u0301",
    "camelCaseWords and HTTPServer2024Config",
]


def gpt2_doc() -> dict:
    return json.loads(GPT2_JSON.read_text(encoding="utf-8"))


def write_doc(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def with_pre_tokenizer(tmp_path: Path, pre_tokenizers: list[dict], name: str) -> Path:
    """GPT-2's tokenizer.json with this Sequence as its pre-tokenizer."""
    doc = gpt2_doc()
    doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": copy.deepcopy(pre_tokenizers)}
    return write_doc(tmp_path / f"{name}.json", doc)


#: Tokens no merge of GPT-2's makes, whole pre-tokens under GPT-2's regex: found only
#: by ignore_merges' lookup (ids after GPT-2's 50257).
UNBUILDABLE = {"HelloWorld": 50257, "Ġ12345": 50258, "Ġ.:.:": 50259, "Ġvi": 50260}


def gpt2_ignore_merges(tmp_path: Path) -> Path:
    """GPT-2's tokenizer.json with ignore_merges on and tokens merges cannot build."""
    doc = gpt2_doc()
    doc["model"]["ignore_merges"] = True
    doc["model"]["vocab"].update(UNBUILDABLE)
    return write_doc(tmp_path / "gpt2_ignore_merges.json", doc)


def llama3_json(tmp_path: Path) -> Path | None:
    """Llama 3's tokenizer.json, as transformers converts llama-models' tiktoken file
    (None when either is not installed)."""
    try:
        from transformers.convert_slow_tokenizer import TikTokenConverter

        model = resources.files("llama_models") / "llama3" / "tokenizer.model"
    except ImportError:
        return None
    if not model.is_file():
        return None
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>"]
    converter = TikTokenConverter(
        vocab_file=str(model), pattern=LLAMA3_PATTERN, extra_special_tokens=specials
    )
    path = tmp_path / "llama3.json"
    converter.converted().save(str(path))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple]:
    """(ours, tokenizers', path) by shape name."""
    tmp = tmp_path_factory.mktemp("pre_tokenizers")
    paths = {name: with_pre_tokenizer(tmp, pre, name) for name, pre in SHAPES.items()}
    paths["gpt2_ignore_merges"] = gpt2_ignore_merges(tmp)
    llama3 = llama3_json(tmp)
    if llama3 is not None:
        paths["llama3"] = llama3
    return {
        name: (bytepair.load(path), tokenizers.Tokenizer.from_file(str(path)), path)
        for name, path in paths.items()
    }


def pair(files, name):
    if name not in files:
        pytest.skip("llama-models or transformers is not installed: no Llama 3 file to build")
    return files[name][:2]


def hf_ids(hf, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


def test_the_deepseek_v3_file_reads_as_its_pattern_then_two_splits(files):
    tok, hf = pair(files, "deepseek_v3")
    assert tok.model.pattern == r"\p{N}{1,3}"
    assert tok.model.splits == (Split(DEEPSEEK_V3_SPLITS[1]), Split(DEEPSEEK_V3_SPLITS[2]))
    # "12345" is "123" + "45" (the first Split), "中文" a piece of its own (the second,
    # three tokens in GPT-2's vocabulary) and " x" a word with its space (the third).
    text = "12345中文 x"
    assert hf_ids(hf, text) == [10163, 2231, 40792, 23877, 229, 2124]
    assert tok.encode(text) == [10163, 2231, 40792, 23877, 229, 2124]


def test_ignore_merges_finds_whole_pre_tokens_merges_cannot_build(files):
    tok, hf = pair(files, "gpt2_ignore_merges")
    assert tok.model.ignore_merges is True
    text = "HelloWorld 12345 .:.: vi Hello"
    want = [50257, 50258, 50259, 50260, 18435]
    assert hf_ids(hf, text) == want
    assert tok.encode(text) == want
    # The same vocabulary without ignore_merges merges those pieces as GPT-2 does.
    plain = json.loads(files["gpt2_ignore_merges"][2].read_text(encoding="utf-8"))
    plain["model"]["ignore_merges"] = False
    path = write_doc(files["gpt2_ignore_merges"][2].with_name("plain.json"), plain)
    assert bytepair.load(path).encode(text) == hf_ids(
        tokenizers.Tokenizer.from_file(str(path)), text
    )
    assert bytepair.load(path).encode("HelloWorld") == [15496, 10603]


def test_llama3_tokenizer_json_encodes_as_tokenizers_does(files):
    tok, hf = pair(files, "llama3")
    assert tok.model.ignore_merges is True
    assert tok.model.pattern == LLAMA3_PATTERN
    # The example: " việc" is one token; merges alone make three (below).
    assert tok.encode(" việc") == hf_ids(hf, " việc") == [100769]
    assert tok.encode("a .:.: b") == hf_ids(hf, "a .:.: b") == [64, 662, 111898, 293]
    doc = json.loads(files["llama3"][2].read_text(encoding="utf-8"))
    doc["model"]["ignore_merges"] = False
    path = write_doc(files["llama3"][2].with_name("merges_only.json"), doc)
    merges_only = bytepair.load(path)
    assert merges_only.model.ignore_merges is False
    want = hf_ids(tokenizers.Tokenizer.from_file(str(path)), " việc")
    assert merges_only.encode(" việc") == want == [3355, 26298, 66]


@pytest.mark.parametrize("name", [*SHAPES, "gpt2_ignore_merges", "llama3"])
def test_each_shape_encodes_as_tokenizers_does(files, name):
    tok, hf = pair(files, name)
    for text in EXAMPLES:
        assert tok.encode(text, allowed_special="all") == hf_ids(hf, text), text

    @settings(max_examples=150, deadline=None, database=None)
    @given(TEXT)
    def check(text):
        assert tok.encode(text, allowed_special="all") == hf_ids(hf, text)

    check()


def test_streaming_text_without_digits_holds_back_only_a_small_tail(files):
    """DeepSeek's pattern matches only digits, so text without any is one piece of it;
    streaming still cuts inside it, where the later Splits may start over."""
    tok, hf = pair(files, "deepseek_v3")
    line = "Streaming keeps going, 中文字符ひらがな (x+y) -- 'quoted'!\n"
    chunks = [line] * 2000
    taken = []

    def source():
        for n, chunk in enumerate(chunks):
            taken.append(n)
            yield chunk

    ids = tok.encode_iterable(source())
    first = next(ids)
    assert len(taken) < 10  # ids come out after a few chunks, not the whole text
    assert [first, *ids] == hf_ids(hf, "".join(chunks))


@pytest.mark.parametrize(
    "name",
    [
        "deepseek_v3",
        "deepseek_v3+digits",
        "llama3",
        "gpt2_ignore_merges",
        "split_Removed",
        "split_MergedWithNext_inverted",
        "split_lookbehind_camel_case",
        "whitespace",
    ],
)
def test_every_path_gives_the_ids_of_tokenizers(files, tmp_path, name):
    """Batches, numpy, encode_file in 16-byte blocks and streaming in small chunks:
    the later Splits split each piece of the pattern whole, so cuts never change ids."""
    tok, hf = pair(files, name)
    rng = random.Random(11)

    @settings(
        max_examples=30,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(TEXT, min_size=1, max_size=20))
    def check(parts):
        text = "".join(p + rng.choice([" ", "\n", " a", "x ", "12 ", "中 "]) for p in parts)
        assert_every_path_encodes_as(tok, text, lambda t: hf_ids(hf, t), tmp_path, rng)

    check()


def test_long_streamed_text_equals_tokenizers(files):
    """Streaming holds back the last pieces of the pattern, not of the later Splits:
    a long DeepSeek-style text in chunks of 97 characters gives tokenizers' ids."""
    tok, hf = pair(files, "deepseek_v3")
    line = "Call 0123456789 at 12:30 -- 中文字符ひらがな, 'quoted' (x+y)\n"
    text = line * 300 + "end"
    chunks = [text[i : i + 97] for i in range(0, len(text), 97)]
    assert list(tok.encode_iterable(chunks)) == hf_ids(hf, text)


@pytest.mark.parametrize(
    "name",
    [
        "deepseek_v3",
        "deepseek_v3+digits",
        "gpt2_ignore_merges",
        "llama3",
        "split_MergedWithPrevious_inverted",
    ],
)
def test_splits_and_ignore_merges_survive_bytepair_json_and_pickle(files, tmp_path, name):
    tok, hf = pair(files, name)
    text = " ".join(EXAMPLES) + " HelloWorld 12345 .:.: vi"
    want = hf_ids(hf, text)
    tok.save(tmp_path / "t.bytepair")
    raw = json.loads((tmp_path / "t.bytepair").read_text(encoding="utf-8"))
    assert raw.get("splits", []) == [list(s) for s in tok.model.splits]
    assert raw.get("ignore_merges", False) == tok.model.ignore_merges
    tok.save(tmp_path / "t.json")
    exported = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    assert exported["model"]["ignore_merges"] == tok.model.ignore_merges
    for back in (
        bytepair.load(tmp_path / "t.bytepair"),
        bytepair.load(tmp_path / "t.json"),
        pickle.loads(pickle.dumps(tok)),
    ):
        assert back.model.splits == tok.model.splits
        assert back.model.ignore_merges == tok.model.ignore_merges
        assert back.encode(text, disallowed_special=()) == want
    more = tok.with_special_tokens(["<|x|>"])
    assert (more.model.splits, more.model.ignore_merges) == (
        tok.model.splits,
        tok.model.ignore_merges,
    )
    # Our export loads in tokenizers and gives the same ids.
    assert hf_ids(tokenizers.Tokenizer.from_file(str(tmp_path / "t.json")), text) == want


def test_a_bytepair_file_with_a_bad_split_is_refused_naming_it(tmp_path):
    path = tmp_path / "bad.bytepair"
    path.write_text(
        '{"format": "bytepair", "version": 1, "pattern": null, "special_tokens": {},'
        ' "splits": [["x", "Merged", false]], "merges": ["a b"]}',
        encoding="utf-8",
    )
    with pytest.raises(
        ValueError, match=r"bad.bytepair: \"splits\": split #0 has behavior 'Merged'"
    ):
        bytepair.load(path)


def test_read_tokenizer_json_refuses_what_its_four_parts_cannot_hold(files):
    for name, what in [
        ("deepseek_v3", "pre-tokenizer steps after the first Split"),
        ("gpt2_ignore_merges", "model.ignore_merges true"),
    ]:
        with pytest.raises(ValueError, match=f"has {what}; load it with bytepair.load"):
            read_tokenizer_json(files[name][2])


@pytest.mark.parametrize(
    ("pre_tokenizers", "message"),
    [
        (
            [split(r"\s"), {**byte_level(), "add_prefix_space": True}],
            "pre-tokenizer ByteLevel with add_prefix_space true is not supported",
        ),
        (
            [split(r"\s", "Merged")],
            "pre-tokenizer Split with behavior 'Merged' is not supported",
        ),
        (
            [{"type": "BertPreTokenizer"}, byte_level()],
            r"pre-tokenizer BertPreTokenizer \(at position 0\) is not supported",
        ),
        (
            [{"type": "CharDelimiterSplit", "delimiter": "x"}, byte_level()],
            r"pre-tokenizer CharDelimiterSplit \(at position 0\) is not supported",
        ),
        (
            [{"type": "UnicodeScripts"}, byte_level()],
            r"pre-tokenizer UnicodeScripts \(at position 0\) is not supported",
        ),
        (
            [byte_level(), {"type": "Digits", "individual_digits": True}],
            r"pre-tokenizer Digits \(at position 1\) after ByteLevel is not supported",
        ),
        ([split(r"\s")], "no ByteLevel pre-tokenizer"),
        (
            [split(r"\w+"), byte_level()],
            r"pre-tokenizer Split pattern '\\\\w\+' uses \\w, which matches other characters",
        ),
        ([split(r"a\b"), byte_level()], r"uses \\b, which matches other characters"),
        ([split("[[:alpha:]]"), byte_level()], r"uses \[:alpha:\], which matches other"),
        # cl100k's pattern as tiktoken writes it: Oniguruma reads \p{N}{1,3}+ as runs of
        # any length (our exports write \p{N}{1,3}).
        (
            [split(PATTERNS["cl100k"]), byte_level()],
            r"uses \{n,m\}\+, which tokenizers' regex engine \(Oniguruma\) reads as a repetition",
        ),
    ],
)
def test_pre_tokenizers_we_cannot_reproduce_are_refused_by_name(tmp_path, pre_tokenizers, message):
    path = with_pre_tokenizer(tmp_path, pre_tokenizers, "refused")
    with pytest.raises(ValueError, match=message) as e:
        bytepair.load(path)
    assert str(path) in str(e.value)


def test_an_invalid_split_regex_is_refused_naming_it(tmp_path):
    path = with_pre_tokenizer(tmp_path, [split(r"\s"), split("(ab"), byte_level()], "bad")
    with pytest.raises(ValueError, match=r"invalid pre-tokenizer pattern \"\(ab\"") as e:
        bytepair.load(path)
    assert str(path) in str(e.value)


def test_a_split_after_the_pattern_keeps_merges_inside_its_pieces():
    # One merge, "b" + " ". The pattern makes "ab cd" one piece; GPT-2's pattern after
    # it (ByteLevel with use_regex) splits that into "ab" and " cd", so "b " never forms.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"b "}
    merges = [(b"b", b" ")]
    alone = bytepair.Tokenizer.from_model(BPE(vocab, merges, pattern=r"\d+|\D+"))
    assert alone.encode("ab cd12") == [97, 256, 99, 100, 49, 50]
    split_again = BPE(vocab, merges, pattern=r"\d+|\D+", splits=[Split(PATTERNS["gpt2"])])
    assert bytepair.Tokenizer.from_model(split_again).encode("ab cd12") == list(b"ab cd12")
    with pytest.raises(ValueError, match="split #0 has behavior 'Merged'"):
        BPE(vocab, merges, splits=[("x", "Merged", False)])


def shared_lines(limit: int = 2_000_000) -> list[tuple[str, list[str]]]:
    out = []
    for path in shared_corpus_files():
        with lzma.open(path, "rt", encoding="utf-8", newline="") as f:
            out.append((path.name, f.read(limit).splitlines()))
    return out


@needs_shared
@pytest.mark.parametrize("name", ["llama3", "deepseek_v3"])
def test_no_line_of_the_shared_corpora_differs_from_tokenizers(files, name):
    tok, hf = pair(files, name)
    mismatches = {}
    for corpus, lines in shared_lines():
        # tokenizers matches added tokens (the corpora's <|endoftext|>) whatever it is told.
        ours = tok.encode_batch(lines, allowed_special="all")
        theirs = [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
        bad = [line for line, a, b in zip(lines, ours, theirs) if a != b]
        if bad:
            mismatches[corpus] = (len(bad), bad[0][:80])
    assert mismatches == {}
