"""Training SentencePiece BPE models (`bytepair.train_sentencepiece`) against
sentencepiece's own trainer: for the same corpus and options, the same pieces in
the same order, with the same scores and types; and the trained model encodes the
same in bytepair and in sentencepiece.

The comparisons need `sentencepiece` (skipped without it); they run on the small
corpora in tests/data and on generated text mixing scripts.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

import bytepair
from bytepair._core import SentencePieceModel

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus.en"


def sentencepiece():
    return pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")


def pieces_of(data: bytes) -> list[tuple[str, float, str]]:
    """(piece, score, type) of every piece of a `.model`, read by bytepair."""
    return SentencePieceModel.from_bytes(data).pieces()


def sentencepiece_trains(path, vocab_size, *, normalization="identity", **options) -> bytes:
    spm = sentencepiece()
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        input=str(path),
        model_writer=out,
        model_type="bpe",
        vocab_size=vocab_size,
        normalization_rule_name=normalization,
        input_sentence_size=0,
        minloglevel=2,
        **options,
    )
    return out.getvalue()


def both_train(path, vocab_size, **options) -> tuple[bytes, bytes]:
    """(sentencepiece's model, ours) for the same corpus and options."""
    options.setdefault("byte_fallback", False)  # sentencepiece's default
    options.setdefault("normalization", "identity")
    theirs = sentencepiece_trains(path, vocab_size, **options)
    if "max_sentencepiece_length" in options:
        options["max_piece_length"] = options.pop("max_sentencepiece_length")
    ours = bytepair.train_sentencepiece(path, vocab_size, num_threads=2, progress=False, **options)
    return theirs, ours


def mixed_scripts(path: Path, lines: int = 3000, seed: int = 7) -> Path:
    """Generated sentences mixing Latin, Cyrillic, Greek, Han, kana, Arabic, Hangul,
    digits, punctuation and combining marks: where script and number rules decide."""
    rng = random.Random(seed)
    alphabets = [
        "abcdefghij",
        "абвгдежзик",
        "αβγδεζηθ",
        "日本語中文字漢",
        "ひらがなカタカナー",
        "مرحباكتب",
        "한국어글자",
        "0123456789",
        "０１２３",
        ".,!?-'\"()",
        "e\u0301a\u0300o\u0308",
    ]
    words = [
        "".join(rng.choice(a) for _ in range(rng.randint(1, 6)))
        for a in alphabets
        for _ in range(40)
    ]
    words += [
        "".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(2, 8)))
        for _ in range(200)
    ]
    text = "\n".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(lines)
    )
    path.write_text(text + "\n", encoding="utf-8")
    return path


OPTION_SETS = {
    "defaults": {},
    "byte_fallback": {"byte_fallback": True},
    "split_digits": {"split_digits": True},
    "user_defined_and_control_symbols": {
        "user_defined_symbols": ["the", "<sep>"],
        "control_symbols": ["<cls>", "<mask>"],
    },
    "no_dummy_prefix": {"add_dummy_prefix": False},
    "whitespace_as_suffix": {"treat_whitespace_as_suffix": True},
    "whole_lines": {"split_by_whitespace": False},
    "numbers_and_scripts_unsplit": {"split_by_number": False, "split_by_unicode_script": False},
    "short_pieces_and_pad": {"max_sentencepiece_length": 4, "pad_id": 3},
    "extra_whitespace_kept": {"remove_extra_whitespaces": False},
}


@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_pieces_scores_and_types_equal_sentencepieces_on_english(options):
    theirs, ours = both_train(CORPUS, 1500, **options)
    assert pieces_of(ours) == pieces_of(theirs)


@pytest.mark.parametrize(
    "options",
    [{}, {"byte_fallback": True, "split_digits": True}, {"split_by_unicode_script": False}],
    ids=["defaults", "bytes_and_digits", "scripts_unsplit"],
)
def test_pieces_equal_sentencepieces_on_mixed_scripts(tmp_path, options):
    corpus = mixed_scripts(tmp_path / "mixed.txt")
    theirs, ours = both_train(corpus, 1500, character_coverage=1.0, **options)
    assert pieces_of(ours) == pieces_of(theirs)


def test_rare_characters_become_unknown_as_in_sentencepiece(tmp_path):
    corpus = mixed_scripts(tmp_path / "mixed.txt", seed=11)
    theirs, ours = both_train(corpus, 1200, character_coverage=0.98)
    assert pieces_of(ours) == pieces_of(theirs)


def test_reserved_text_is_a_boundary_and_tabs_are_characters(tmp_path):
    corpus = tmp_path / "tabs.txt"
    corpus.write_text("xy\txy\tq zz<s>zz the<s>\n" * 50 + "hello world\n" * 30, encoding="utf-8")
    theirs, ours = both_train(corpus, 40)
    assert pieces_of(ours) == pieces_of(theirs)
    normal = [p for p, _, kind in pieces_of(ours) if kind == "NORMAL"]
    assert "\t" in normal and not any("s>" in p for p in normal)


def test_nmt_nfkc_normalization_equals_sentencepieces():
    theirs, ours = both_train(DATA / "german.txt", 500, normalization="nmt_nfkc")
    assert pieces_of(ours) == pieces_of(theirs)


def test_a_model_given_lends_its_normalizer(tmp_path):
    theirs = sentencepiece_trains(DATA / "german.txt", 500, normalization="nfkc_cf")
    ours = bytepair.train_sentencepiece(
        DATA / "german.txt", 500, normalizer_model=theirs, byte_fallback=False, progress=False
    )
    assert pieces_of(ours) == pieces_of(theirs)


def test_the_trained_model_encodes_held_out_text_as_sentencepiece_does(tmp_path):
    spm = sentencepiece()
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    train, held_out = lines[: len(lines) * 4 // 5], lines[len(lines) * 4 // 5 :]
    (tmp_path / "train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    data = bytepair.train_sentencepiece(
        tmp_path / "train.txt", 2000, output=tmp_path / "m.model", progress=False
    )
    assert (tmp_path / "m.model").read_bytes() == data
    ours = SentencePieceModel.from_bytes(data)
    theirs = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    held_out += ["Ünïcödé ☃ 12345 — tabs\tand  spaces", "日本語のテキスト"]
    for line in held_out:
        assert ours.encode(line) == theirs.encode(line), line
        assert ours.decode(ours.encode(line)) == theirs.decode(theirs.encode(line))


def test_the_result_does_not_depend_on_the_number_of_threads():
    one = bytepair.train_sentencepiece(
        CORPUS, 1000, normalization="identity", num_threads=1, progress=False
    )
    two = bytepair.train_sentencepiece(
        CORPUS, 1000, normalization="identity", num_threads=2, progress=False
    )
    assert pieces_of(one) == pieces_of(two)


def test_a_vocabulary_too_large_for_the_corpus_names_the_largest_possible(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("ab ab abc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab_size=500 is too high .*set vocab_size <= 13\b"):
        bytepair.train_sentencepiece(corpus, 500, normalization="identity", byte_fallback=False)


def test_a_vocabulary_smaller_than_the_alphabet_says_so(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("abcdefgh\n", encoding="utf-8")
    with pytest.raises(ValueError, match="smaller than the alphabet"):
        bytepair.train_sentencepiece(corpus, 6, normalization="identity", byte_fallback=False)


def test_invalid_utf8_names_the_file_and_offset(tmp_path):
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"hello\nwor\xffld\n")
    with pytest.raises(ValueError, match=r"bad.txt: invalid UTF-8 at byte offset 9"):
        bytepair.train_sentencepiece(corpus, 300, normalization="identity")


def test_options_out_of_sentencepieces_ranges_are_refused():
    with pytest.raises(ValueError, match="character_coverage"):
        bytepair.train_sentencepiece(CORPUS, 100, character_coverage=0.5)
    with pytest.raises(ValueError, match="normalization must be one of"):
        bytepair.train_sentencepiece(CORPUS, 100, normalization="nfd")
    with pytest.raises(ValueError, match="unk_id"):
        bytepair.train_sentencepiece(CORPUS, 1000, normalization="identity", unk_id=-1)


def test_the_cli_trains_a_sentencepiece_model(tmp_path):
    from bytepair.cli import main

    out = tmp_path / "m.model"
    main(
        ["train", "--model", "sentencepiece", "--normalization", "identity", "--vocab-size", "800"]
        + ["-o", str(out), "-q", str(CORPUS)]
    )
    expected = bytepair.train_sentencepiece(CORPUS, 800, normalization="identity", progress=False)
    assert pieces_of(out.read_bytes()) == pieces_of(expected)


def test_an_unwritable_or_input_output_fails_before_training_and_leaves_nothing(tmp_path):
    copy = tmp_path / "corpus.txt"
    copy.write_bytes(CORPUS.read_bytes())
    with pytest.raises(FileNotFoundError, match="the folder .* does not exist"):
        bytepair.train_sentencepiece(copy, 500, output=tmp_path / "no" / "m.model")
    with pytest.raises(ValueError, match="is also an input"):
        bytepair.train_sentencepiece(copy, 500, output=copy)
    assert copy.read_bytes() == CORPUS.read_bytes()
    with pytest.raises(IsADirectoryError, match="is a directory"):
        bytepair.train_sentencepiece(tmp_path, 500)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]
