"""What users of a tokenizer library expect (issue 11, part 3, and the API's rough
edges): pickling, fork, extending special tokens, tiktoken's surface, Hugging Face
folders, one loader and one saver, and one meaning of ``progress=``."""

from __future__ import annotations

import copy
import doctest
import importlib
import multiprocessing
import pickle

import pytest
from hypothesis import given, settings

import bytepair
from bytepair.formats import detect

from conftest import DATA, EOT, texts

TEXT = "Hello world! It's 2024.\n\n  indented\tcode <|endoftext|> 中文 😀"


def test_pickle_and_deepcopy_give_a_tokenizer_that_encodes_the_same(tinystories_tokenizer):
    for tok in (bytepair.get_encoding("cl100k_base"), tinystories_tokenizer):
        again = pickle.loads(pickle.dumps(tok))
        assert again.encode(TEXT, allowed_special="all") == tok.encode(TEXT, allowed_special="all")
        assert again.special_tokens == tok.special_tokens and again.vocab == tok.vocab
        assert copy.deepcopy(tok).encode(TEXT, disallowed_special=()) == tok.encode(
            TEXT, disallowed_special=()
        )
    assert len(pickle.dumps(bytepair.get_encoding("o200k_base"))) < 200  # a name, not a vocab
    assert pickle.loads(pickle.dumps(tinystories_tokenizer)).training_stats == (
        tinystories_tokenizer.training_stats
    )


def test_pickle_holds_data_only_no_code(tinystories_tokenizer):
    data = pickle.dumps(tinystories_tokenizer)
    # The only callable named in the stream is our own restore function.
    assert b"bytepair.tokenizer" in data and b"restore" in data
    assert b"builtins" not in data and b"eval" not in data


def _encode_in_worker(args):
    tok, text = args
    return tok.encode(text, allowed_special="all")


def test_a_tokenizer_crosses_to_spawned_worker_processes(tinystories_tokenizer):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        got = pool.map(_encode_in_worker, [(tinystories_tokenizer, TEXT)] * 2, chunksize=1)
    assert got == [tinystories_tokenizer.encode(TEXT, allowed_special="all")] * 2


def test_with_special_tokens_extends_cl100k_like_tiktoken(tiktoken_offline):
    cl = bytepair.get_encoding("cl100k_base")
    extra = {"<|im_start|>": 100264, "<|im_end|>": 100265}
    chat = cl.with_special_tokens(extra)
    base = tiktoken_offline.get_encoding("cl100k_base")
    theirs = tiktoken_offline.Encoding(
        name="cl100k_im",
        pat_str=base._pat_str,
        mergeable_ranks=base._mergeable_ranks,
        special_tokens={**base._special_tokens, **extra},
    )
    text = "<|im_start|>user\nhi<|im_end|><|endoftext|>"
    assert chat.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert cl.special_tokens.keys().isdisjoint(extra)  # the original is unchanged
    listed = cl.with_special_tokens(["<|a|>", "<|b|>"])
    assert listed.special_tokens["<|a|>"] == 100277 and listed.special_tokens["<|b|>"] == 100278


def test_cli_special_option_extends_any_loaded_tokenizer(tmp_path):
    from test_cli import run

    r = run(
        "encode", "-t", "cl100k_base", "--special", "<|im_start|>=100264", stdin="<|im_start|>hi"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "100264"


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_tiktoken_surface_matches_tiktoken(name, tiktoken_offline):
    ours, theirs = bytepair.get_encoding(name), tiktoken_offline.get_encoding(name)
    for piece in (" hello", "!", EOT, b"\xe4\xb8"):
        try:
            expected = theirs.encode_single_token(piece)
        except KeyError:
            with pytest.raises(KeyError):
                ours.encode_single_token(piece)
        else:
            assert ours.encode_single_token(piece) == expected
    ids = theirs.encode("héllo 中文 wörld 😀!", allowed_special="all")
    assert ours.decode_with_offsets(ids) == theirs.decode_with_offsets(ids)
    assert ours.is_special_token(ours.eot_token) and not ours.is_special_token(0)


def test_encode_with_unstable_stable_part_survives_any_continuation():
    tok = bytepair.get_encoding("cl100k_base")
    prompt = "The quick brown fo"
    stable, completions = tok.encode_with_unstable(prompt)
    rest = tok.encode(prompt)[len(stable) :]
    assert rest in completions
    assert tok.encode(prompt)[: len(stable)] == stable
    for more in ("x", "xes", " jumps", "\n", "1", "'s", "..."):
        assert tok.encode(prompt + more)[: len(stable)] == stable
    fox = tok.encode_single_token(" fox")
    assert [fox] in completions  # a single token that extends " fo"


def test_encode_with_unstable_keeps_the_bos_and_refuses_an_eos_that_no_token_precedes():
    tok = bytepair.get_encoding("cl100k_base")
    eot = "<|endoftext|>"
    with_bos = tok.with_options(bos_token=eot, add_bos=True)
    stable, completions = with_bos.encode_with_unstable("The quick brown fo")
    assert (stable, completions) == (
        [tok.eot_token, *tok.encode_with_unstable("The quick brown fo")[0]],
        tok.encode_with_unstable("The quick brown fo")[1],
    )
    with pytest.raises(ValueError, match="with add_eos the EOS moves"):
        with_bos.with_options(eos_token=eot, add_eos=True).encode_with_unstable("fo")


def test_hf_folder_loads_in_transformers_with_its_special_tokens(tmp_path, tinystories_tokenizer):
    from transformers import AutoTokenizer

    tok = tinystories_tokenizer
    tok.save_hf(tmp_path / "hf", pad_token="<|pad|>")
    names = sorted(p.name for p in (tmp_path / "hf").iterdir())
    assert names == ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    theirs = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert theirs.eos_token == EOT and theirs.eos_token_id == tok.special_tokens[EOT]
    assert theirs.pad_token == "<|pad|>" and theirs.bos_token is None
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
    assert theirs.encode(text) == tok.encode(text, allowed_special="all")
    with pytest.raises(ValueError, match="not one of the special tokens"):
        tok.save_hf(tmp_path / "bad", bos_token="<s>")


def test_load_recognises_content_not_the_suffix(tmp_path, tinystories_tokenizer):
    tok = tinystories_tokenizer
    tok.save(tmp_path / "ours.json", format="bytepair")  # our format under a .json name
    tok.save(tmp_path / "theirs.bytepair", format="hf")
    tok.save(tmp_path / "ranks.txt", format="tiktoken")
    assert detect(tmp_path / "ours.json") == "bytepair"
    assert detect(tmp_path / "theirs.bytepair") == "hf"
    assert detect(tmp_path / "ranks.txt") == "tiktoken"
    for name in ("ours.json", "theirs.bytepair"):
        assert bytepair.load(tmp_path / name).encode(TEXT, allowed_special="all") == tok.encode(
            TEXT, allowed_special="all"
        )
    with pytest.raises(ValueError, match="holds no pre-tokenizer pattern"):
        bytepair.load(tmp_path / "ranks.txt")
    ranked = bytepair.load(
        tmp_path / "ranks.txt", pattern="gpt2", special_tokens=tok.special_tokens
    )
    assert ranked.encode(TEXT, allowed_special="all") == tok.encode(TEXT, allowed_special="all")
    with pytest.raises(ValueError, match="cannot tell the format"):
        tok.save(tmp_path / "noext")


def test_empty_special_token_is_refused_everywhere():
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(ValueError, match="non-empty"):
        bytepair.Tokenizer(vocab, [], special_tokens=[""])
    with pytest.raises(ValueError, match="non-empty"):
        bytepair.train_from_iterator(["ab"], 260, special_tokens=[""])


def test_train_from_iterator_replaces_lone_surrogates_like_encode():
    tok = bytepair.train_from_iterator(["ab\ud800ab", "ab"], 258, pattern=None, progress=False)
    assert tok.merges[0] == (b"a", b"b")
    assert tok.decode(tok.encode("x\ud800")) == "x\ufffd"


def test_progress_means_the_same_everywhere(tmp_path, capsys):
    src = tmp_path / "c.txt"
    src.write_text("hello world " * 1000, encoding="utf-8")
    tok = bytepair.train(src, 300)  # stderr is not a terminal here: no bar by default
    assert capsys.readouterr().err == ""
    seen: list[int] = []
    tok.encode_file(src, tmp_path / "a.bin", progress=seen.append)
    assert seen and seen[-1] == src.stat().st_size
    tok.encode_file(src, tmp_path / "b.bin", progress=False)
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes()
    merges_seen: list[int] = []
    bytepair.train(src, 260, progress=merges_seen.append)
    assert merges_seen[-1] == 4
    with pytest.raises(TypeError, match="progress must be"):
        tok.encode_file(src, tmp_path / "c.bin", progress="yes")


def test_reserved_tokens_and_padding_to_a_multiple():
    tok = bytepair.train_from_iterator(
        ["low lower lowest " * 5],
        270,
        special_tokens=[EOT],
        reserved_special_tokens=2,
        pad_to_multiple_of=64,
        progress=False,
    )
    assert tok.vocab_size % 64 == 0 and tok.vocab_size >= 270
    assert tok.special_tokens[EOT] == 256 + len(tok.merges)
    assert "<|reserved_0|>" in tok.special_tokens and "<|reserved_1|>" in tok.special_tokens
    assert sorted(tok.vocab) == list(range(tok.vocab_size))


@pytest.mark.parametrize(
    "module",
    [
        "bytepair._files",
        "bytepair._display",
        "bytepair.specials",
        "bytepair.patterns",
        "bytepair.formats.byte_table",
        "bytepair.tokenizer",
        "bytepair.streaming",
        "bytepair.shards",
        "bytepair.training",
        "bytepair.models.base",
        "bytepair",
    ],
)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
@given(prompt=texts, more=texts)
@settings(max_examples=60)
def test_encode_with_unstable_stable_part_holds_for_generated_text(name, prompt, more):
    tok = bytepair.get_encoding(name)
    stable, completions = tok.encode_with_unstable(prompt, disallowed_special=())
    whole = tok.encode(prompt, disallowed_special=())
    assert whole[: len(stable)] == stable
    assert not completions or whole[len(stable) :] in completions
    assert tok.encode(prompt + more, disallowed_special=())[: len(stable)] == stable


UNSTABLE_PROMPTS = [
    "hello fanta",
    "hello fo",
    "The quick brown fo",
    "",
    "x  ",
    "a\n\n",
    "foo\n  ",
    "hi <|endoftext|> the",
    "ends with <|endoftext|>",
    "12345",
    "日本語の",
    " \u3000",
    "def f(x):\n    ",
    "caf\xe9",
    "emoji 🎉",
]


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_encode_with_unstable_equals_tiktoken_on_varied_prompts(name, tiktoken_offline):
    ours, theirs = bytepair.get_encoding(name), tiktoken_offline.get_encoding(name)
    for prompt in UNSTABLE_PROMPTS:
        stable, completions = ours.encode_with_unstable(prompt, allowed_special="all")
        want_stable, want = theirs.encode_with_unstable(prompt, allowed_special="all")
        assert isinstance(stable, list) and isinstance(completions, list)
        assert stable == want_stable, prompt
        assert completions == sorted(want), prompt


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@given(prompt=texts)
@settings(max_examples=40, deadline=None)
def test_encode_with_unstable_equals_tiktoken_on_generated_prompts(name, prompt, tiktoken_offline):
    ours, theirs = bytepair.get_encoding(name), tiktoken_offline.get_encoding(name)
    stable, completions = ours.encode_with_unstable(prompt, disallowed_special=())
    want_stable, want = theirs.encode_with_unstable(prompt, disallowed_special=())
    assert (stable, completions) == (want_stable, sorted(want))
