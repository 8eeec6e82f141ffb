"""The reference implementation is the oracle; its own examples must hold."""

import doctest

import bytepair.reference as ref


def test_reference_docstring_examples_hold():
    result = doctest.testmod(ref)
    assert result.attempted >= 10
    assert result.failed == 0


def test_minbpe_example_gives_the_published_ids():
    vocab, merges = ref.train(["aaabdaaabac"], 256 + 3, pattern=None)
    assert ref.encode("aaabdaaabac", vocab, merges, pattern=None) == [258, 100, 258, 97, 99]


def test_ties_go_to_the_lexicographically_greatest_pair():
    # every pair occurs once; (b'c', b'd') > (b'a', b'b')
    _, merges = ref.train(["ab cd"], 257, pattern=None)
    assert merges == [(b"c", b"d")]


def test_special_tokens_split_longest_first():
    parts = ref.split_on_special_tokens("<|a|><|a|>x", ["<|a|>", "<|a|><|a|>"])
    assert parts == [("<|a|><|a|>", True), ("x", False)]
