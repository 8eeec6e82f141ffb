"""Formats shared with other ecosystems: tiktoken ``.tiktoken`` files, Hugging Face
``tokenizer.json`` and GPT-2's ``vocab.json`` + ``merges.txt``.

Every exported file is loaded by the real peer library (tiktoken, tokenizers,
transformers) and must encode to the same ids as bytepair with ``allowed_special="all"``.

Pattern None (no pre-tokenization) has no tiktoken spelling, since tiktoken always
splits by a regex: it is written there as the catch-all ``[\\s\\S]+``, which makes each
text between special tokens one piece — exactly what None means.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings

import bytepair
from bytepair.formats.byte_table import str_to_token, token_to_str
from bytepair.formats.gpt2 import read_vocab_and_merges as read_gpt2_files
from bytepair.formats.hf import read_tokenizer_json as read_hf_tokenizer_json
from bytepair.formats.tiktoken import merges_from_ranks
from bytepair.formats.tiktoken import read_ranks as read_tiktoken
from bytepair.formats.tiktoken import write_ranks as write_tiktoken
from bytepair.patterns import PATTERNS

from conftest import DATA, EOT, GPT2_DIR, gpt2_tiktoken, texts

PAD = "<|pad|>"
PATTERN_NAMES = ["gpt2", "cl100k", "o200k", None]
CATCH_ALL = r"[\s\S]+"  # tiktoken's stand-in for "no pre-tokenization"
SHARED = os.environ.get("BYTEPAIR_SHARED")

SAMPLES = [p.read_text(encoding="utf-8") for p in sorted(DATA.glob("*.txt"))] + [
    "",
    f"Once upon a time{EOT}there was{PAD}{PAD} a cat.{EOT}",
    f"<|endoftext {EOT[:-1]} {PAD}x\r\n\n\n  \t é中文 😀👍🏽 'll 12345",
]


def ids_name(pattern):
    return str(pattern)


class Exported:
    """A tokenizer trained with one pattern, saved in every format, loaded by each peer."""

    def __init__(self, pattern, folder: Path):
        text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
        self.tok = bytepair.train_from_iterator(
            [text, text.upper()], 600, special_tokens=[EOT, PAD], pattern=pattern, progress=False
        )
        folder.mkdir()
        self.tiktoken_path = folder / "t.tiktoken"
        self.hf_path = folder / "tokenizer.json"
        self.tok.save_tiktoken(self.tiktoken_path)
        self.tok.save_hf(self.hf_path)
        self.tok.save_gpt2(folder)
        self.folder = folder

    def peers(self) -> dict:
        """name -> function(text) -> ids, for every peer library that is installed."""
        import tiktoken
        import tokenizers

        enc = tiktoken.Encoding(
            name="bytepair-export",
            pat_str=self.tok.pattern or CATCH_ALL,
            mergeable_ranks=read_tiktoken(self.tiktoken_path),
            special_tokens=self.tok.special_tokens,
        )
        hf = tokenizers.Tokenizer.from_file(str(self.hf_path))
        peers = {
            "tiktoken": lambda t: enc.encode(t, allowed_special="all"),
            "tokenizers": lambda t: hf.encode(t, add_special_tokens=False).ids,
        }
        try:
            from transformers import PreTrainedTokenizerFast
        except ImportError:
            return peers
        fast = PreTrainedTokenizerFast(tokenizer_file=str(self.hf_path))
        peers["transformers"] = lambda t: fast.encode(t, add_special_tokens=False)
        return peers


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("interop")
    cache: dict = {}

    def get(pattern) -> tuple[Exported, dict]:
        if pattern not in cache:
            e = Exported(pattern, root / str(pattern))
            cache[pattern] = (e, e.peers())
        return cache[pattern]

    return get


# -- real peers encode exported files like bytepair --------------------------------------


def test_transformers_is_installed():
    # The transformers comparisons below are silently skipped without it; say so here.
    pytest.importorskip("transformers")


@pytest.mark.parametrize("pattern", PATTERN_NAMES, ids=ids_name)
def test_peers_encode_samples_like_bytepair(exported, pattern):
    e, peers = exported(pattern)
    assert {"tiktoken", "tokenizers"} <= set(peers)
    for text in SAMPLES:
        ours = e.tok.encode(text, allowed_special="all")
        for name, encode in peers.items():
            assert encode(text) == ours, (name, text[:60])


@pytest.mark.parametrize("pattern", PATTERN_NAMES, ids=ids_name)
@settings(max_examples=100)
@given(text=texts)
def test_peers_encode_generated_text_like_bytepair(exported, pattern, text):
    e, peers = exported(pattern)
    ours = e.tok.encode(text, allowed_special="all")
    for name, encode in peers.items():
        assert encode(text) == ours, name


@pytest.mark.parametrize("pattern", PATTERN_NAMES, ids=ids_name)
def test_hf_decodes_to_the_same_text(exported, pattern):
    import tokenizers

    e, _ = exported(pattern)
    hf = tokenizers.Tokenizer.from_file(str(e.hf_path))
    for text in SAMPLES:
        ids = e.tok.encode(text, allowed_special="all")
        assert hf.decode(ids, skip_special_tokens=False) == text


# -- round trips ---------------------------------------------------------------------------


def assert_same(a: bytepair.Tokenizer, b: bytepair.Tokenizer, merges=True, pattern=True):
    assert a.vocab == b.vocab
    assert a.special_tokens == b.special_tokens
    if merges:
        assert a.merges == b.merges
    if pattern:
        assert a.pattern == b.pattern
    for text in SAMPLES:
        assert a.encode(text, allowed_special="all") == b.encode(text, allowed_special="all")


@pytest.mark.parametrize("pattern", PATTERN_NAMES, ids=ids_name)
def test_round_trip_through_tiktoken(exported, pattern):
    e, _ = exported(pattern)
    # the file keeps neither pattern nor special tokens: they are passed back in
    loaded = bytepair.Tokenizer.from_tiktoken(e.tiktoken_path, pattern, e.tok.special_tokens)
    assert_same(loaded, e.tok)  # merges recovered from the ranks are the trained ones


@pytest.mark.parametrize("pattern", PATTERN_NAMES, ids=ids_name)
def test_round_trip_through_hf(exported, pattern):
    e, _ = exported(pattern)
    assert_same(bytepair.Tokenizer.from_hf(e.hf_path), e.tok)


@pytest.mark.parametrize("pattern", PATTERN_NAMES, ids=ids_name)
def test_round_trip_through_gpt2_files(exported, pattern):
    e, _ = exported(pattern)
    loaded = bytepair.Tokenizer.from_files(
        e.folder / "vocab.json", e.folder / "merges.txt", list(e.tok.special_tokens), pattern
    )
    assert_same(loaded, e.tok)


def test_gpt2_files_with_openai_names(tmp_path, tinystories_tokenizer):
    tok = tinystories_tokenizer
    tok.save_gpt2(tmp_path, names=("encoder.json", "vocab.bpe"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "encoder.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
        "vocab.bpe",
    ]
    lines = (tmp_path / "vocab.bpe").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#version: 0.2" and len(lines) == 1 + len(tok.merges)
    encoder = json.loads((tmp_path / "encoder.json").read_text(encoding="utf-8"))
    assert encoder[EOT] == tok.special_tokens[EOT] and encoder["Ġ"] == 32
    loaded = bytepair.Tokenizer.from_files(
        tmp_path / "encoder.json", tmp_path / "vocab.bpe", [EOT, PAD]
    )
    assert_same(loaded, tok)


def test_gpt2_model_round_trips_through_every_format(tmp_path, gpt2):
    import tiktoken
    import tokenizers

    gpt2.save_tiktoken(tmp_path / "gpt2.tiktoken")
    gpt2.save_hf(tmp_path / "tokenizer.json")
    gpt2.save_gpt2(tmp_path)
    assert_same(
        bytepair.Tokenizer.from_tiktoken(tmp_path / "gpt2.tiktoken", "gpt2", {EOT: 50256}), gpt2
    )
    assert_same(bytepair.Tokenizer.from_hf(tmp_path / "tokenizer.json"), gpt2)
    assert_same(
        bytepair.Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", [EOT]),
        gpt2,
    )
    # the vocab.json we write equals GPT-2's own, entry for entry
    ours = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    assert ours == json.loads((GPT2_DIR / "vocab.json").read_text(encoding="utf-8"))
    enc = tiktoken.Encoding(
        name="gpt2-export",
        pat_str=PATTERNS["gpt2"],
        mergeable_ranks=read_tiktoken(tmp_path / "gpt2.tiktoken"),
        special_tokens={EOT: 50256},
    )
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in SAMPLES:
        ours = gpt2.encode(text, allowed_special="all")
        assert enc.encode(text, allowed_special="all") == ours
        assert hf.encode(text).ids == ours


def test_non_canonical_ids_round_trip(tmp_path):
    # CS336 form: the special token at id 0, bytes shifted to 1..256
    raw = json.loads((DATA / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    vocab = {i: str_to_token(t) for t, i in raw.items()}
    lines = (DATA / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    merges = [tuple(str_to_token(p) for p in line.split(" ")) for line in lines]
    tok = bytepair.Tokenizer(vocab, merges, [EOT])
    assert tok.special_tokens == {EOT: 0}
    tok.save_tiktoken(tmp_path / "t.tiktoken")
    tok.save_hf(tmp_path / "tokenizer.json")
    tok.save_gpt2(tmp_path)
    assert_same(bytepair.Tokenizer.from_tiktoken(tmp_path / "t.tiktoken", "gpt2", {EOT: 0}), tok)
    assert_same(bytepair.Tokenizer.from_hf(tmp_path / "tokenizer.json"), tok)
    assert_same(
        bytepair.Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", [EOT]),
        tok,
    )


def test_tiktoken_file_round_trip_and_layout(tmp_path):
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 300, b" \n": 256}
    path = tmp_path / "r.tiktoken"
    write_tiktoken(path, ranks)
    assert read_tiktoken(path) == ranks
    lines = path.read_text(encoding="ascii").splitlines()
    assert lines[0] == "AA== 0" and lines[-2:] == ["IAo= 256", "YWI= 300"]  # sorted by rank


def test_functions_round_trip_plain_data(tmp_path, tinystories_tokenizer):
    tok = tinystories_tokenizer
    tok.save(tmp_path / "t.json")
    assert read_hf_tokenizer_json(tmp_path / "t.json") == (
        tok.vocab,
        tok.merges,
        tok.special_tokens,
        tok.pattern,
    )
    tok.save(tmp_path, format="gpt2")
    vocab, merges = read_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert (vocab, merges) == (tok.vocab, tok.merges)


def test_hf_file_layout(tmp_path, tinystories_tokenizer):
    path = tmp_path / "tokenizer.json"
    tinystories_tokenizer.save_hf(path)
    text = path.read_text(encoding="utf-8")
    assert "Ġ" in text  # ensure_ascii=False
    doc = json.loads(text)
    model = doc["model"]
    assert model["type"] == "BPE" and model["byte_fallback"] is False
    assert model["merges"][0] == [token_to_str(t) for t in tinystories_tokenizer.merges[0]]
    assert doc["normalizer"] is None
    split, byte_level = doc["pre_tokenizer"]["pretokenizers"]
    assert split["pattern"] == {"Regex": PATTERNS["gpt2"]} and split["behavior"] == "Isolated"
    assert byte_level == {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": False,
    }
    assert [(t["content"], t["id"], t["special"]) for t in doc["added_tokens"]] == [
        (EOT, 598, True),
        (PAD, 599, True),
    ]
    assert not list(tmp_path.glob("*.tmp"))


def test_hf_merges_as_strings_read_the_same(tmp_path, tinystories_tokenizer):
    path = tmp_path / "tokenizer.json"
    tinystories_tokenizer.save_hf(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["model"]["merges"] = [" ".join(pair) for pair in doc["model"]["merges"]]
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert_same(bytepair.Tokenizer.from_hf(path), tinystories_tokenizer)


# -- GPT-2 --------------------------------------------------------------------------------


def test_merges_from_ranks_recovers_gpt2_merges_exactly():
    vocab, merges = read_gpt2_files(GPT2_DIR / "vocab.json", GPT2_DIR / "merges.txt")
    ranks = {token: i for i, token in vocab.items() if token != EOT.encode()}
    start = time.perf_counter()
    recovered = merges_from_ranks(ranks)
    assert time.perf_counter() - start < 10
    assert len(recovered) == 50_000
    assert recovered == merges


def test_gpt2_hf_tokenizer_json_encodes_like_gpt2_and_tiktoken(gpt2):
    import tokenizers

    path = GPT2_DIR / "tokenizer.json"
    vocab, merges, specials, pattern = read_hf_tokenizer_json(path)
    assert vocab == gpt2.vocab and merges == gpt2.merges
    assert specials == {EOT: 50256} and pattern == PATTERNS["gpt2"]
    tok = bytepair.Tokenizer.from_hf(path)
    enc = gpt2_tiktoken()
    hf = tokenizers.Tokenizer.from_file(str(path))
    for text in SAMPLES:
        ours = tok.encode(text, allowed_special="all")
        assert ours == gpt2.encode(text, allowed_special="all")
        assert ours == enc.encode(text, allowed_special="all")
        assert ours == hf.encode(text).ids


# -- errors ---------------------------------------------------------------------------------


def good_tiktoken_lines() -> list[str]:
    import base64

    return [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("!!!notbase64 300", "line 7: .* is not valid base64"),
        ("YWI=", "line 7: expected 'base64-token rank'"),
        ("YWI= x1", "line 7: rank 'x1' is not a non-negative integer"),
        ("YWI= 300 9", "line 7: expected 'base64-token rank'"),
        ("AA== 300", r"line 7: token b'\\x00' was already given on line 1"),
        ("YWI= 3", "line 7: rank 3 was already given on line 4"),
    ],
)
def test_corrupted_tiktoken_line_names_file_and_line(tmp_path, bad_line, message):
    lines = good_tiktoken_lines()
    lines.insert(6, bad_line)
    path = tmp_path / "bad.tiktoken"
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    with pytest.raises(ValueError, match=message) as info:
        read_tiktoken(path)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match=message):
        bytepair.Tokenizer.from_tiktoken(path, "gpt2")


def test_ranks_no_merge_makes_load_by_tiktokens_rule_and_a_missing_byte_is_refused(tmp_path):
    import base64

    path = tmp_path / "odd.tiktoken"
    # "abc" with neither "ab" nor "bc": no merge can make it, but tiktoken looks the
    # whole piece up.
    lines = good_tiktoken_lines() + [f"{base64.b64encode(b'abc').decode()} 256"]
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    tok = bytepair.Tokenizer.from_tiktoken(path, "gpt2")
    assert tok.encode("abc abcd") == [256, 32, 97, 98, 99, 100]
    with pytest.raises(AttributeError, match=r"no merges: 1 of its tokens \(such as b'abc'\)"):
        _ = tok.merges
    # a byte missing
    path.write_text("\n".join(good_tiktoken_lines()[:200]) + "\n", encoding="ascii")
    with pytest.raises(ValueError, match=r"single byte b'\\xc8' has no rank") as info:
        bytepair.Tokenizer.from_tiktoken(path, "gpt2")
    assert str(path) in str(info.value)


def test_merges_from_ranks_rejects_three_way_tokens_and_takes_leftmost_on_ties():
    ranks = {bytes([b]): b for b in range(256)}
    assert merges_from_ranks(ranks | {b"aa": 256, b"aaa": 257}) == [(b"a", b"a"), (b"aa", b"a")]
    with pytest.raises(ValueError, match=r"b'aaa' \(rank 256\).*3 parts"):
        merges_from_ranks(ranks | {b"aaa": 256})


def test_ids_unusable_as_ranks_raise_and_write_nothing(tmp_path):
    path = tmp_path / "t.tiktoken"
    bytes_ = {b: bytes([b]) for b in range(256)}
    # merge order disagrees with ids: "bc" is merge #0 but has the larger id
    tok = bytepair.Tokenizer(
        bytes_ | {256: b"ab", 257: b"bc"}, [(b"b", b"c"), (b"a", b"b")], pattern=None
    )
    with pytest.raises(ValueError, match="cannot serve as tiktoken ranks: merge #0") as info:
        tok.save_tiktoken(path)
    assert str(path) in str(info.value)
    # the same bytes twice (training can do that: (ab, c) and (a, bc))
    tok = bytepair.Tokenizer(
        bytes_ | {256: b"ab", 257: b"bc", 258: b"abc", 259: b"abc"},
        [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc")],
        pattern=None,
    )
    with pytest.raises(ValueError, match=r"ids 258 and 259 are the same bytes b'abc'") as info:
        tok.save_tiktoken(path)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match=r"ids 258 and 259 are the same token 'abc'"):
        tok.save_hf(tmp_path / "tokenizer.json")
    assert not list(tmp_path.iterdir())


def metaspace_tokenizer_json() -> dict:
    """A tiny SentencePiece-style tokenizer.json, as Mistral/Llama 2 ship them."""
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True}],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Metaspace",
            "replacement": "\u2581",
            "prepend_scheme": "first",
            "split": False,
        },
        "post_processor": None,
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "\u2581a": 3},
            "merges": [["\u2581", "a"]],
        },
    }


def test_a_metaspace_tokenizer_json_loads_as_a_sentencepiece_model(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(metaspace_tokenizer_json()), encoding="utf-8")
    tok = bytepair.Tokenizer.from_hf(path)
    assert tok.model.kind == "sentencepiece"
    assert tok.encode("a a") == [3, 3] and tok.decode([3, 3]) == "a a"


def edit(doc: dict, path: tuple, value) -> dict:
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: edit(metaspace_tokenizer_json(), ("normalizer",), {"type": "NFKC"}),
            "normalizer NFKC",
        ),
        (
            lambda: edit(metaspace_tokenizer_json(), ("model", "type"), "WordPiece"),
            "model type 'WordPiece'",
        ),
        (
            lambda: edit(
                json.loads((GPT2_DIR / "tokenizer.json").read_text(encoding="utf-8")),
                ("normalizer",),
                {"type": "NFC"},
            ),
            "normalizer NFC",
        ),
        (
            lambda: edit(
                json.loads((GPT2_DIR / "tokenizer.json").read_text(encoding="utf-8")),
                ("pre_tokenizer", "add_prefix_space"),
                True,
            ),
            "add_prefix_space",
        ),
        (
            lambda: edit(
                json.loads((GPT2_DIR / "tokenizer.json").read_text(encoding="utf-8")),
                ("model", "merges", 3),
                "Ġt",
            ),
            r"model.merges\[3\] is 'Ġt'",
        ),
    ],
)
def test_unsupported_tokenizer_json_names_file_and_component(tmp_path, make, message):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(make(), ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        bytepair.Tokenizer.from_hf(path)
    assert str(path) in str(info.value)


@pytest.mark.skipif(not SHARED, reason="BYTEPAIR_SHARED is not set: no path to the shared vocab")
@pytest.mark.parametrize("name, pattern", [("cl100k_base", "cl100k"), ("o200k_base", "o200k")])
def test_shared_tiktoken_files_encode_like_tiktoken(name, pattern):
    import tiktoken

    path = Path(SHARED) / f"vocab/tiktoken/{name}.tiktoken"
    start = time.perf_counter()
    tok = bytepair.Tokenizer.from_tiktoken(path, pattern)
    assert time.perf_counter() - start < 30  # ~5 s for o200k on a busy 2-core VM
    enc = tiktoken.Encoding(
        name=name, pat_str=PATTERNS[pattern], mergeable_ranks=read_tiktoken(path), special_tokens={}
    )
    for text in SAMPLES:
        assert tok.encode(text) == enc.encode(text)


def test_bundled_encodings_exported_to_hf_split_digits_like_tiktoken(tmp_path):
    # Oniguruma reads `\p{N}{1,3}+` differently (not possessive); the export rewrites it.
    import tokenizers

    text = "In 1887, 0x0010 and 1234567 dollars.\n\n\n\nEnd  of  it 12 345 6789"
    for name in ("cl100k_base", "o200k_base", "gpt2"):
        tok = bytepair.get_encoding(name)
        tok.save_hf(tmp_path / f"{name}.json")
        hf = tokenizers.Tokenizer.from_file(str(tmp_path / f"{name}.json"))
        assert hf.encode(text, add_special_tokens=False).ids == tok.encode(text), name
        assert bytepair.Tokenizer.from_hf(tmp_path / f"{name}.json").pattern == tok.pattern
