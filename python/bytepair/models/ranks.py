"""Byte-level BPE by tiktoken's rule, for rank tables that merges cannot build.

tiktoken encodes a piece from its ranks alone: a piece that is a token is that token;
otherwise it starts from the bytes and merges, again and again, the adjacent pair of
parts whose *concatenation* has the lowest rank (the leftmost on ties). When every
token can be made by merging two lower-ranked tokens (every BPE-trained vocabulary,
GPT-2 to o200k) that is the same as BPE with the merges recovered from the ranks, and
such a file becomes a :class:`~bytepair.models.bpe.BPE` model. Some files hold tokens
no merge makes — Llama 3's ``tokenizer.model`` has 678, such as ``b".:.:"`` — and only
tiktoken's rule produces them: those files become a :class:`RankBPE`, which encodes
by that rule exactly (the core: ``src/bpe/ranks.rs``).

>>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"xyz": 257}
>>> model = from_ranks(ranks)
>>> model.unbuildable, model.recovered_merges, model.merges
([b'xyz'], [(b'a', b'b')], None)
"""

from __future__ import annotations

from collections.abc import Iterable

from bytepair import _core
from bytepair.models.bpe import (
    BPE,
    MAX_ID,
    ByteLevelBPE,
    describe_frame,
    special_items,
    with_more_specials,
)
from bytepair.patterns import pattern_name, resolve_pattern
from bytepair.quoting import short


class RankBPE(ByteLevelBPE):
    """Byte-level BPE by tiktoken's rule over ranks (ids are the ranks), for tables
    that merges cannot build; made by :func:`from_ranks` or a format's reader.

    It has no merge list: ``merges`` is None (as for every kind whose encoding no merge
    list gives), and :attr:`recovered_merges` holds the merges recovered for the tokens
    merges can make — without the tokens in :attr:`unbuildable`, a merges-based
    tokenizer built from that list would encode differently. Formats that store a
    merge list (``tokenizer.json``, GPT-2 files) therefore refuse this model;
    ``.tiktoken``, Tekken JSON and ``.bytepair`` (its ranks) keep it exactly.
    """

    kind = "tiktoken-ranks"
    merge_count = None

    @property
    def merges(self) -> None:
        """None: no merge list encodes as this model does (see :attr:`recovered_merges`)."""
        return None

    @property
    def recovered_merges(self) -> list[tuple[bytes, bytes]]:
        """The merges recovered for the tokens merges can make, in rank order (the
        model's own list: do not change it); the tokens in :attr:`unbuildable` have
        none."""
        if self._merges is None:
            self._merges = self.core.merges()
        return self._merges

    @property
    def unbuildable(self) -> list[bytes]:
        """The tokens no merge of two lower-ranked tokens makes, in rank order: tiktoken
        makes them only by looking a whole piece up."""
        return [self.token_bytes(i) for i in self.core.unbuildable()]

    def ranks(self) -> dict[bytes, int]:
        """The ordinary tokens and their ranks (their ids), in rank order."""
        special_ids = set(self.special_tokens.values())
        return {t: i for i, t in sorted(self.vocab.items()) if i not in special_ids}

    def with_special_tokens(self, special_tokens: dict[str, int] | Iterable[str]) -> RankBPE:
        """The same model with more special tokens (a new model; this one is unchanged).
        A token given without an id gets the next free one."""
        specials = with_more_specials(self, special_tokens)
        return self.reframed(from_ranks(self.ranks(), specials, self.pattern))

    def has_canonical_ids(self) -> bool:
        return False

    def describe(self) -> str:
        return (
            f"kind={self.kind} vocab_size={self.vocab_size} pattern={pattern_name(self.pattern)} "
            f"unbuildable={len(self.core.unbuildable())}" + describe_frame(self)
        )

    def why_not(self, what: str) -> str:
        n = len(self.core.unbuildable())
        reason = (
            f"this model has no merges: {n} of its tokens (such as {short(self.unbuildable[0])}) "
            "are made by no merge of two lower-ranked tokens, and tiktoken makes them by "
            "looking the whole piece up, which a merge list cannot say"
        )
        if what == "merges":
            return f"{reason} (model.recovered_merges has the merges of the others)"
        if what == "options":
            return super().why_not(what)
        return f"{reason}, so it cannot give {what}"


def from_core(core, special_tokens: dict[str, int], pattern: str | None) -> BPE | RankBPE:
    """The model around an encoder the core built from ranks (``Encoder.from_ranks``,
    ``Encoder.from_tiktoken``): a :class:`~bytepair.models.bpe.BPE` when merges make
    every token, else a :class:`RankBPE`."""
    cls = RankBPE if core.unbuildable() else BPE
    return cls.from_core(core, special_tokens, pattern)


def from_ranks(
    ranks: dict[bytes, int],
    special_tokens: dict[str, int] | Iterable[str] | None = None,
    pattern: str | None = "gpt2",
    where: str = "ranks",
) -> BPE | RankBPE:
    """The model that encodes as tiktoken does with ``ranks`` ({token: rank}; the ranks
    become the ids): a :class:`~bytepair.models.bpe.BPE` when merges make every token,
    else a :class:`RankBPE`. ``special_tokens`` get their ids as in ``BPE``; a fault is
    a ValueError starting with ``where``."""
    regex = resolve_pattern(pattern)
    for token, rank in ranks.items():
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= MAX_ID:
            raise ValueError(
                f"{where}: token {short(token)} has rank {short(rank)}; ranks are integers "
                f"from 0 to {MAX_ID}"
            )
    core, specials = _core.Encoder.from_ranks(
        list(ranks.items()), where, special_items(special_tokens), regex
    )
    return from_core(core, dict(specials), regex)
