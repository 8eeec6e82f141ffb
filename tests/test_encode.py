"""Encoding and decoding: exact against the reference and tiktoken, safe with specials."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bytepair
import bytepair.reference as ref
from bytepair import _core

from conftest import ATOMS, DATA, EOT, SPLITTER_PATTERNS, gpt2_tiktoken, patterns, texts

SPECIALS = [EOT, "<|pad|>", "<|endoftext|><|endoftext|>"]


@pytest.fixture(scope="module")
def trained():
    """Tokenizers trained per pattern on generated-looking text, with overlapping specials."""
    corpus = "".join(ATOMS) * 3 + (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
    out = {}
    for pattern in (*SPLITTER_PATTERNS, None):
        out[pattern] = bytepair.train_from_iterator(
            [corpus], 700, special_tokens=SPECIALS, pattern=pattern, progress=False
        )
    return out


@given(text=texts, pattern=patterns)
def test_encode_equals_reference(trained, text, pattern):
    tok = trained[pattern]
    expected = ref.encode(text, tok.vocab, tok.merges, tok.special_tokens, pattern)
    assert tok.encode(text, allowed_special="all") == expected
    assert tok.encode_ordinary(text) == ref.encode(text, tok.vocab, tok.merges, {}, pattern)


@given(text=texts, pattern=patterns)
def test_decode_inverts_encode(trained, text, pattern):
    tok = trained[pattern]
    assert tok.decode(tok.encode(text, allowed_special="all")) == text
    assert tok.decode_bytes(tok.encode_ordinary(text)) == text.encode("utf-8")


@given(
    text=texts,
    cuts=st.lists(st.integers(0, 400), max_size=8),
    pattern=patterns,
    allowed=st.sampled_from(["all", set(), {EOT}]),
)
def test_encode_iterable_over_any_chunking_equals_encode(trained, text, cuts, pattern, allowed):
    tok = trained[pattern]
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    kwargs = {"allowed_special": allowed, "disallowed_special": ()}
    assert list(tok.encode_iterable(chunks, **kwargs)) == tok.encode(text, **kwargs)


@given(text=texts, pattern=patterns)
def test_encode_iterable_one_character_at_a_time(trained, text, pattern):
    tok = trained[pattern]
    assert list(tok.encode_iterable(iter(text), allowed_special="all")) == tok.encode(
        text, allowed_special="all"
    )


def test_encode_iterable_line_by_line_equals_whole_file_for_cl100k(tmp_path):
    # cl100k groups newlines across lines ("\n\n" is one piece): line-by-line reading
    # must still give the ids of the whole text.
    tok = bytepair.train(
        DATA / "tinystories_sample.txt", 500, special_tokens=[EOT], pattern="cl100k", progress=False
    )
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8") + "\n\n\n  x\n"
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    with open(path, encoding="utf-8", newline="") as f:
        streamed = list(tok.encode_iterable(f, allowed_special="all"))
    assert streamed == tok.encode(text, allowed_special="all")
    assert "\n\n" in text and streamed.count(tok.encode("\n\n")[0]) >= 1


def test_special_token_straddling_chunks_is_found(tinystories_tokenizer):
    tok = tinystories_tokenizer
    chunks = ["Once upon a time<|endof", "text|>The end"]
    ids = list(tok.encode_iterable(chunks, allowed_special="all"))
    assert tok.special_tokens[EOT] in ids
    assert ids == tok.encode("".join(chunks), allowed_special="all")


def test_minbpe_example_without_pattern():
    tok = bytepair.train_from_iterator(["aaabdaaabac"], 259, pattern=None, progress=False)
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]


@pytest.mark.parametrize("name", ["address.txt", "german.txt", "tinystories_sample.txt"])
def test_gpt2_files_encode_like_tiktoken(gpt2, name):
    enc = gpt2_tiktoken()
    text = (DATA / name).read_text(encoding="utf-8")
    assert gpt2.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
    assert gpt2.encode_ordinary(text) == enc.encode_ordinary(text)
    assert gpt2.decode(gpt2.encode(text, allowed_special="all")) == text


@given(text=texts)
def test_gpt2_matches_tiktoken_on_generated_text(gpt2, text):
    enc = gpt2_tiktoken.cached if hasattr(gpt2_tiktoken, "cached") else gpt2_tiktoken()
    gpt2_tiktoken.cached = enc
    assert gpt2.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")


def test_gpt2_known_ids(gpt2):
    assert gpt2.encode("Hello world") == [15496, 995]
    assert gpt2.encode("hello <|endoftext|>", allowed_special="all") == [31373, 220, 50256]


def test_disallowed_special_raises_and_names_the_token(tinystories_tokenizer):
    tok = tinystories_tokenizer
    with pytest.raises(ValueError, match=r"'<\|endoftext\|>'.*allowed_special"):
        tok.encode("a <|endoftext|> b")
    with pytest.raises(ValueError, match="<|pad|>"):
        tok.encode("<|pad|>", allowed_special={EOT})


def test_special_token_allowed_disallowed_matrix(tinystories_tokenizer):
    tok = tinystories_tokenizer
    eot = tok.special_tokens[EOT]
    text = "hi<|endoftext|>"
    plain = tok.encode_ordinary(text)
    assert tok.encode(text, allowed_special="all")[-1] == eot
    assert tok.encode(text, allowed_special={EOT})[-1] == eot
    assert tok.encode(text, disallowed_special=()) == plain
    assert eot not in plain
    assert tok.encode(text, allowed_special={"<|pad|>"}, disallowed_special=()) == plain
    # text without any special token needs no permission
    assert tok.encode("hi") == tok.encode_ordinary("hi")


def test_overlapping_special_tokens_resolve_longest_first(trained):
    tok = trained["gpt2"]
    ids = tok.encode("<|endoftext|><|endoftext|><|endoftext|>", allowed_special="all")
    assert ids == [tok.special_tokens["<|endoftext|><|endoftext|>"], tok.special_tokens[EOT]]
    only_single = tok.encode(
        "<|endoftext|><|endoftext|>", allowed_special={EOT}, disallowed_special=()
    )
    assert only_single == [tok.special_tokens[EOT]] * 2


def test_encode_batch_equals_encode(tinystories_tokenizer):
    tok = tinystories_tokenizer
    docs = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8").split(EOT)
    expected = [tok.encode(d) for d in docs]
    for threads in (1, 2, 3, 16):
        assert tok.encode_batch(docs, num_threads=threads) == expected
    # Workers keep their piece caches across texts: repeated and long texts too.
    many = docs * 5 + ["".join(docs)] + ["", "a", " " * 70]
    assert tok.encode_batch(many, num_threads=2) == [tok.encode(d) for d in many]
    assert tok.encode_batch([]) == []


def _split(ids, offsets):
    assert offsets[0] == 0 and offsets[-1] == len(ids)
    return [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]


@given(batch=st.lists(texts, max_size=6), pattern=patterns, threads=st.sampled_from([1, 2, 3]))
def test_encode_batch_to_numpy_equals_reference(trained, batch, pattern, threads):
    tok = trained[pattern]
    ids, offsets = tok.encode_batch_to_numpy(batch, num_threads=threads, allowed_special="all")
    assert (ids.dtype.name, offsets.dtype.name, len(offsets)) == ("uint32", "int64", len(batch) + 1)
    expected = [ref.encode(t, tok.vocab, tok.merges, tok.special_tokens, pattern) for t in batch]
    assert _split(ids, offsets) == expected


def test_encode_batch_to_numpy_equals_encode_batch(tinystories_tokenizer):
    tok = tinystories_tokenizer
    docs = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8").split(EOT)
    many = docs * 5 + ["".join(docs)] + ["", "a", " " * 70, EOT]
    expected = tok.encode_batch(many, allowed_special={EOT})
    for threads in (1, 2, 3, 16):
        ids, offsets = tok.encode_batch_to_numpy(many, num_threads=threads, allowed_special={EOT})
        assert _split(ids, offsets) == expected
        assert ids.flags.writeable
    ids, offsets = tok.encode_batch_to_numpy([])
    assert ids.tolist() == [] and offsets.tolist() == [0]


def test_a_batch_writes_into_the_buffer_of_one_let_go_of_never_into_one_held(
    tinystories_tokenizer,
):
    import numpy as np

    tok = tinystories_tokenizer
    docs = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8").split(EOT)
    expected = tok.encode_batch(docs)
    for threads in (1, 2):
        held, held_offsets = tok.encode_batch_to_numpy(docs, num_threads=threads)
        kept = held.copy()
        # Python holds the first batch's ids: the next batch writes elsewhere, and
        # writing into its ids leaves the first batch's as they were.
        second, offsets = tok.encode_batch_to_numpy(docs, num_threads=threads)
        assert second.ctypes.data != held.ctypes.data
        second[:] = 7
        assert (held == kept).all() and _split(held, held_offsets) == expected
        # Let go of (every view too), a batch's buffer is the next batch's, rewritten.
        # The memory in between goes to an array as large as the buffer: memory freed
        # would be that array's (the allocator hands out the same place again), so the
        # batch finds its old place only where it was kept for it.
        first_at = held.ctypes.data
        del held, kept, second, offsets
        room = 4 * sum(len(d.encode()) for d in docs)
        blocker = np.ones(room, dtype=np.uint8)
        again, offsets = tok.encode_batch_to_numpy(docs, num_threads=threads)
        assert again.ctypes.data == first_at and again.flags.writeable
        assert _split(again, offsets) == expected
        del blocker
        # A batch needing more room than any buffer kept gets a new one, right too.
        del again, offsets
        bigger, offsets = tok.encode_batch_to_numpy(docs * 3, num_threads=threads)
        assert _split(bigger, offsets) == expected * 3
        del bigger, offsets


def test_encode_batch_to_numpy_checks_specials_and_surrogates(gpt2):
    with pytest.raises(ValueError, match="special token '<\\|endoftext\\|>'"):
        gpt2.encode_batch_to_numpy(["fine", "not <|endoftext|> fine"])
    texts = ["plain text " * 50, "x\ud800y " * 30, "\udfff", "end " * 999]
    clean = [t.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd") for t in texts]
    for threads in (1, 2):
        ids, offsets = gpt2.encode_batch_to_numpy(texts, num_threads=threads)
        assert _split(ids, offsets) == [gpt2.encode(t) for t in clean]


def _fresh(text: str) -> str:
    """A new string equal to `text` (CPython has no UTF-8 of it yet)."""
    return "".join([text[:1], text[1:]])


class _Str(str):
    """A str subclass: its instances are not in CPython's compact form."""


def _widths(scale: int) -> list[str]:
    """Texts Python holds in each width (ASCII, Latin-1, two and four bytes a
    character), mixed and at chunk edges, about `scale` characters each."""
    words = {
        "ascii": "plain words, and numbers 123 ",
        "latin1": "café naïve über façade ",
        "ucs2": "Привет мир 你好世界 ",
        "ucs4": "emoji 🙂 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ",
    }
    out = []
    for word in words.values():
        out.append(_fresh((word * (scale // len(word) + 1))[:scale]))
        out.append(_fresh(("a" * 15 + word) * 3))
    # Widths mixed within one text, and an ASCII run ending mid-chunk of 16.
    out.append(_fresh(("x" * 17 + "é" + "y" * 13 + "€" + "z" * 31 + "🙂") * (scale // 64 + 1)))
    return out + ["", "é", "🙂"]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_batch_of_strings_of_every_width_encodes_as_each_alone(gpt2, threads):
    # Big enough (megabytes of UTF-8 room) that the batch converts on its threads.
    batch = _widths(60_000)
    # Some strings CPython has the UTF-8 of already (encoding one alone asks for it),
    # and one of a str subclass: the batch takes theirs as they are.
    cached = [_fresh(t) for t in batch[:4]]
    for t in cached:
        gpt2.encode_ordinary(t)
    batch = batch + cached + [_Str("subclass é 🙂 " * 100)]
    enc = gpt2_tiktoken()
    expected = [enc.encode_ordinary(t) for t in batch]
    assert gpt2.encode_ordinary_batch(batch, num_threads=threads) == expected
    ids, offsets = gpt2.encode_batch_to_numpy(batch, num_threads=threads)
    assert _split(ids, offsets) == expected


def test_a_batch_keeps_no_utf8_copy_inside_its_strings(gpt2):
    import sys

    batch = _widths(50_000)
    sizes = [sys.getsizeof(t) for t in batch]
    gpt2.encode_batch_to_numpy(batch, num_threads=2)
    gpt2.encode_ordinary_batch(batch, num_threads=2)
    assert [sys.getsizeof(t) for t in batch] == sizes
    # The check can see a copy: encoding one long text alone a second time has CPython
    # make and keep one.
    gpt2.encode_ordinary(batch[2])
    gpt2.encode_ordinary(batch[2])
    assert sys.getsizeof(batch[2]) > sizes[2]


CALLS = ["encode_ordinary", "encode", "encode_to_numpy", "count_tokens"]


@pytest.mark.parametrize("call", CALLS)
def test_a_long_string_is_converted_by_the_core_the_first_time_and_by_cpython_after(gpt2, call):
    # A long non-ASCII string met for the first time is encoded from the core's own
    # UTF-8, which leaves the string as it was; met again, CPython converts it and keeps
    # the copy (the string grows), which every later call borrows. The ids are the same
    # each time, and tiktoken's. Each width of CPython's: Latin-1, UCS-2, UCS-4.
    import sys

    enc = gpt2_tiktoken()
    run = getattr(gpt2, call)
    for i, unit in enumerate(["café crème ", "naïve “quotes” — 日本語 ", "emoji 🙂 and ü "]):
        # A length no other string of the tests has: a string is known by its address
        # and length, and a new one of a freed one's may pass for it (then CPython
        # converts it at once, which is what the first call would see here).
        text = _fresh((unit * 800)[: 6151 + 7 * i + 100 * CALLS.index(call)])
        want = enc.encode_ordinary(_fresh(text))  # tiktoken has CPython keep a copy
        size = sys.getsizeof(text)
        got = [run(text)]
        assert sys.getsizeof(text) == size, f"{unit!r}: the first call left a UTF-8 copy"
        got.append(run(text))
        grown = sys.getsizeof(text)
        assert grown > size, f"{unit!r}: the second call did not have CPython keep its UTF-8"
        got.append(run(text))
        assert sys.getsizeof(text) == grown
        for ids in got:
            assert (ids == len(want)) if call == "count_tokens" else (list(ids) == want)
    # Shorter strings are taken as CPython has them from the first call.
    short = _fresh(("naïve “quotes” " * 400)[:4095])
    size = sys.getsizeof(short)
    run(short)
    assert sys.getsizeof(short) > size


def test_a_surrogate_deep_in_a_long_string_is_replaced_on_either_conversion(gpt2):
    text = _fresh("é" * 3000 + "\udc80" + "ü" * 3000)
    expected = gpt2.encode_ordinary(text.replace("\udc80", "\ufffd"))
    # Met first (the core's conversion finds the surrogate), then again (CPython's).
    assert gpt2.encode_ordinary(text) == expected
    assert gpt2.encode_ordinary(text) == expected


@pytest.mark.parametrize("threads", [1, 2])
def test_a_surrogate_deep_in_a_big_batch_is_replaced_in_its_text_only(gpt2, threads):
    batch = _widths(60_000)
    batch[5] = batch[5][:1000] + "\udc80" + batch[5][1000:]
    clean = [t.replace("\udc80", "\ufffd") for t in batch]
    expected = [gpt2.encode_ordinary(t) for t in clean]
    assert gpt2.encode_ordinary_batch(batch, num_threads=threads) == expected
    ids, offsets = gpt2.encode_batch_to_numpy(batch, num_threads=threads, disallowed_special=())
    assert _split(ids, offsets) == expected


def test_unknown_ids_raise_key_error_naming_them(tinystories_tokenizer):
    tok = tinystories_tokenizer
    with pytest.raises(KeyError, match="unknown token id 99999"):
        tok.decode([1, 99999])
    with pytest.raises(KeyError, match="unknown token id -1"):
        tok.decode([-1])
    with pytest.raises(KeyError, match="unknown token id 12345"):
        tok.decode_single_token_bytes(12345)


def test_decode_errors_are_choosable(gpt2):
    ids = gpt2.encode("é")  # one token per byte? either way, cut the bytes
    partial = gpt2.decode_bytes(ids)[:1]
    one = [i for i in range(256) if gpt2.decode_single_token_bytes(i) == partial]
    assert gpt2.decode(one) == "\ufffd"
    assert gpt2.decode(one, errors="ignore") == ""
    with pytest.raises(UnicodeDecodeError):
        gpt2.decode(one, errors="strict")


def test_lone_surrogates_are_replaced_not_a_crash(gpt2):
    assert gpt2.encode("a\ud800b") == gpt2.encode("a\ufffdb")
    # Each call's default path retries on its own (count_tokens' is not encode's).
    assert gpt2.count_tokens("a\ud800b") == len(gpt2.encode("a\ufffdb"))
    clean = len(gpt2.encode("a\ufffdb", disallowed_special=()))
    assert gpt2.count_tokens("a\ud800b", disallowed_special=()) == clean


def test_count_tokens_takes_its_policy_by_position_or_by_name_as_encode_does(gpt2):
    text = "hi <|endoftext|> there"
    want = len(gpt2.encode(text, "all"))
    assert gpt2.count_tokens(text, "all") == gpt2.count_tokens(text, allowed_special="all") == want
    ordinary = len(gpt2.encode_ordinary(text))
    assert ordinary > want  # the special token's text is several tokens as plain text
    assert gpt2.count_tokens(text, set(), ()) == len(gpt2.encode(text, set(), ())) == ordinary
    with pytest.raises(ValueError, match="not allowed here"):
        gpt2.count_tokens(text)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_lone_surrogate_in_a_batch_is_replaced_in_its_text_only(gpt2, threads):
    # A text without UTF-8 fails the whole batch; the retry must still give every
    # text its own ids.
    texts = ["plain text " * 50, "x\ud800y " * 30, "more words", "\udfff", "end " * 999]
    clean = [t.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd") for t in texts]
    assert gpt2.encode_ordinary_batch(texts, num_threads=threads) == [
        gpt2.encode_ordinary(t) for t in clean
    ]


def test_long_runs_of_one_character_are_exact(gpt2):
    enc = gpt2_tiktoken()
    for text in ["a" * 5000, " " * 5000 + "x", "\n" * 3000, "ab" * 3000]:
        assert gpt2.encode(text) == enc.encode(text)


def test_cs336_vocab_with_special_at_id_zero_encodes_like_reference():
    import json

    from bytepair.formats.byte_table import str_to_token

    raw = json.loads((DATA / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    vocab = {i: str_to_token(t) for t, i in raw.items()}
    lines = (DATA / "train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    merges = [tuple(str_to_token(p) for p in line.split(" ")) for line in lines]
    tok = bytepair.Tokenizer(vocab, merges, special_tokens=[EOT])
    assert tok.special_tokens == {EOT: 0}
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
    expected = ref.encode(text, vocab, merges, {EOT: 0})
    assert tok.encode(text, allowed_special="all") == expected
    assert tok.decode(expected) == text


def test_repr_is_informative(tinystories_tokenizer):
    r = repr(tinystories_tokenizer)
    assert "vocab_size=600" in r and "pattern=gpt2" in r and EOT in r


def _disallowed_message(token: str) -> str:
    return (
        f"the text contains the special token {token!r}, which is not allowed here. "
        f"To encode it as a special token pass allowed_special={{{token!r}}} "
        f'(or allowed_special="all"); to encode it as ordinary text pass disallowed_special=().'
    )


def test_every_encode_call_checks_disallowed_specials_with_the_same_message(
    tinystories_tokenizer,
):
    tok = tinystories_tokenizer
    text = "a <|pad|> b <|endoftext|>"
    message = re.escape(_disallowed_message("<|pad|>"))  # the leftmost one
    calls = [
        lambda: tok.encode(text),
        lambda: tok.encode_to_numpy(text),
        lambda: tok.count_tokens(text),
        lambda: list(tok.encode_iterable([text[:5], text[5:]])),
        lambda: tok.encode_batch(["fine", text, "<|endoftext|>"], num_threads=2),
        lambda: tok.encode_batch_to_numpy(["fine", text, "<|endoftext|>"], num_threads=2),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=f"^{message}$"):
            call()
    # A string given as disallowed need not be a special token; repr quotes as Python does.
    odd = "é'x\x00"
    with pytest.raises(ValueError, match=f"^{re.escape(_disallowed_message(odd))}$"):
        tok.encode("ab" + odd, disallowed_special={odd})


def test_a_batch_reports_its_first_text_with_a_disallowed_special(tinystories_tokenizer):
    tok = tinystories_tokenizer
    texts = ["ok"] * 50 + ["x <|endoftext|>"] + ["ok"] * 50 + ["<|pad|>"]
    for threads in (1, 2, 4):
        for call in (tok.encode_batch, tok.encode_batch_to_numpy):
            with pytest.raises(ValueError, match=re.escape(repr(EOT))):
                call(texts, num_threads=threads)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_tokenizer_busy_in_threads_at_fork_time_works_in_the_child(tinystories_tokenizer):
    # The parent's threads hold the cache pool's lock now and then, and counting runs on
    # a thread pool: a forked child must neither wait for a lock no thread will release
    # nor for pool threads it does not have.
    import multiprocessing
    import threading

    tok = tinystories_tokenizer
    docs = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8").split(EOT)
    expected = (tok.encode_batch(docs, num_threads=2), tok.encode(docs[0]))

    def count_and_train():
        counter = _core.PreTokenCounter(tok.pattern, [EOT], 2)
        counter.add_documents(docs)
        return counter.train(20)

    expected_training = count_and_train()
    stop = threading.Event()

    def busy(work):
        while not stop.is_set():
            work()

    threads = [
        threading.Thread(target=busy, args=(lambda: tok.encode_batch(docs, num_threads=2),)),
        threading.Thread(target=busy, args=(lambda: tok.encode(docs[0]),)),
        threading.Thread(target=busy, args=(count_and_train,)),
    ]
    for t in threads:
        t.start()
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()

    def child():
        got = (tok.encode_batch(docs, num_threads=2), tok.encode(docs[0]))
        results.put(got == expected and count_and_train() == expected_training)

    try:
        for _ in range(3):
            p = ctx.Process(target=child)
            p.start()
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
                pytest.fail("the forked child hung")
            assert p.exitcode == 0 and results.get(timeout=10)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_long_documents_of_a_batch_are_shared_by_threads_with_the_ids_of_each_whole(
    name, tiktoken_offline
):
    # On two threads a document of more than two units (64 KB at least) is cut at safe
    # cuts into parts that either thread encodes; its ids are those of tiktoken's whole
    # text, special tokens at the cuts' edges included.
    want = tiktoken_offline.get_encoding(name)
    tok = bytepair.get_encoding(name)
    line = "Fine words 12 ab.\nx   y\n\n\tz <|endoftext|>ünï  cödé 日本語。 it's\n"
    docs = [
        line * 6000,  # ~400 KB: cut in parts
        "short",
        "<|endoftext|>" + "one two three " * 30_000 + "<|endoftext|>",  # one line
        "a" * 300_000,  # no safe cut: whole
        "",
    ]
    expected = [want.encode(d, allowed_special="all") for d in docs]
    for threads in (1, 2, 3):
        assert tok.encode_batch(docs, num_threads=threads, allowed_special="all") == expected
        ids, offsets = tok.encode_batch_to_numpy(docs, num_threads=threads, allowed_special="all")
        got = [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(docs))]
        assert got == expected
    with pytest.raises(ValueError, match=re.escape(repr(EOT))):
        tok.encode_batch(docs, num_threads=2)


def test_encode_to_numpy_lends_the_cores_ids_without_a_copy_and_keeps_them_alive():
    """The array views the core's own id buffer (no bytes object in between): it stays
    right after the tokenizer and every other reference are gone, cannot be written
    to, and an empty text gives an empty uint32 array."""
    import gc

    import numpy as np

    tok = bytepair.load("gpt2")
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8") * 8
    want = tok.encode(text, allowed_special="all")
    arr = tok.encode_to_numpy(text, allowed_special="all")
    assert type(arr.base).__name__ == "IdBuffer"
    del tok
    gc.collect()
    assert arr.dtype == np.dtype("<u4") and arr.tolist() == want
    with pytest.raises(ValueError, match="read-only"):
        arr[0] = 1
    empty = bytepair.load("gpt2").encode_to_numpy("")
    assert empty.dtype == np.dtype("<u4") and empty.size == 0
