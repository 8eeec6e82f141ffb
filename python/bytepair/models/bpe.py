"""Byte-level BPE as data: a vocabulary (id -> bytes), ordered merges, special tokens
and a pre-tokenization pattern, plus the compiled encoder built from them.

The Python-side vocab and merges are made on first use when the model came straight
from the core (a bundled encoding is parsed, its merges recovered and its encoder
built in Rust, and most programs never ask for ``vocab``).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

from bytepair import _core, normalizers
from bytepair.models.base import FRAME_OPTIONS, Unsupported, frame_options, ids_of_bytes, with_frame
from bytepair.patterns import pattern_name, resolve_pattern
from bytepair.quoting import short
from bytepair.specials import token_flags_of
from bytepair.split import Split, splits_of


class ByteLevelBPE:
    """What byte-level BPE models share: every byte is a token, a token's bytes are its
    surface, and the data (vocab, merges) is read from the compiled core when first
    asked for. :class:`BPE` (a merge list) and :class:`~bytepair.models.ranks.RankBPE`
    (tiktoken's ranks) are its kinds."""

    kind = "bpe"
    pattern: str | None
    special_tokens: dict[str, int]
    #: Tokens matched in the text like special tokens, whatever ``allowed_special``
    #: says, and never refused: a Hugging Face file's non-special added tokens.
    added_tokens: dict[str, int] = {}  # noqa: RUF012 (never mutated; instances set their own)
    #: How special and added tokens are matched besides their text: ``{token:
    #: ("lstrip", "rstrip", "single_word")}`` (a Hugging Face file's flags;
    #: ``bytepair.specials.TOKEN_FLAGS``). Empty for most models.
    token_flags: dict[str, tuple[str, ...]] = {}  # noqa: RUF012 (as added_tokens)
    #: Normalizers applied, in order, to each text between special and added tokens
    #: before pre-tokenizing ("NFC", "NFKC", "NFD", "NFKD", "Lowercase", Replace,
    #: Prepend, Strip: ``bytepair.normalizers``).
    normalizer: tuple[normalizers.Step, ...] = ()
    #: Splits applied after the pattern, in order, each to every piece of the one
    #: before (a Hugging Face ``Sequence`` of Splits: DeepSeek V3); see ``bytepair.split``.
    splits: tuple[Split, ...] = ()
    #: A piece that is a token is that token, before any merge (Hugging Face's BPE
    #: option ``ignore_merges``: Llama 3's ``tokenizer.json``).
    ignore_merges: bool = False
    #: The special tokens ``add_bos`` / ``add_eos`` put around every text (a Hugging
    #: Face file's ``TemplateProcessing``; set with :meth:`with_options`).
    bos_token: str | None = None
    eos_token: str | None = None

    @property
    def add_bos(self) -> bool:
        """Whether every text's ids start with ``bos_token``'s."""
        return bool(self.core.frame()[0])

    @property
    def add_eos(self) -> bool:
        """Whether every text's ids end with ``eos_token``'s."""
        return bool(self.core.frame()[1])

    @classmethod
    def from_core(cls, core, special_tokens: dict[str, int], pattern: str | None):
        """A model around a ready encoder; vocab and merges are read from it when asked."""
        model = cls.__new__(cls)
        model._vocab = None
        model._merges = None
        model.pattern = pattern
        model.special_tokens = special_tokens
        model.core = core
        return model

    @property
    def keeps_text_cuts(self) -> bool:
        """Can long text be cut at the pattern's newline and space cuts without changing
        its ids? Not under a normalizer acting at the edges of the text (Prepend,
        Strip) or across cuts (Replace)."""
        return normalizers.keeps_text_cuts(self.normalizer)

    @property
    def vocab(self) -> dict[int, bytes]:
        """id -> bytes, special tokens included (the model's own dict: do not change it)."""
        if self._vocab is None:
            # In the order __init__ makes: ordinary tokens (by id), then the specials.
            vocab = self.core.vocab()
            for i in self.special_tokens.values():
                del vocab[i]
            for t, i in {**self.special_tokens, **self.added_tokens}.items():
                vocab[i] = t.encode("utf-8")
            self._vocab = vocab
        return self._vocab

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order (the model's own list: do not change it)."""
        if self._merges is None:
            self._merges = self.core.merges()
        return self._merges

    @property
    def merge_count(self) -> int:
        return self.core.merge_count() if self._merges is None else len(self._merges)

    @property
    def vocab_size(self) -> int:
        return self.core.vocab_len() if self._vocab is None else len(self._vocab)

    @property
    def max_token_value(self) -> int:
        return self.core.max_id() if self._vocab is None else max(self._vocab)

    @cached_property
    def ids_of_bytes(self) -> dict[bytes, int]:
        """Ordinary token bytes -> id (the lowest id where bytes repeat, as in encoding)."""
        return ids_of_bytes(
            self.vocab, {*self.special_tokens.values(), *self.added_tokens.values()}
        )

    #: Every byte is a token: nothing falls back to bytes.
    byte_fallback_ids: frozenset[int] = frozenset()

    def token_bytes(self, token: int) -> bytes:
        try:
            return self.vocab[token]
        except (KeyError, TypeError):
            raise KeyError(f"unknown token id {short(token)}") from None

    def surfaces(self, ids: list[int]) -> list[bytes]:
        """Each token's bytes: a byte-level token always adds exactly its bytes."""
        return [self.token_bytes(i) for i in ids]

    def open_tail(self, ids: list[int]) -> int:
        """0: no later token changes what a byte-level token adds."""
        return 0

    def has_canonical_ids(self) -> bool:
        """True when ids are the layout training makes: bytes 0-255, merge i = 256 + i."""
        special_ids = {*self.special_tokens.values(), *self.added_tokens.values()}
        ordinary = {i: t for i, t in self.vocab.items() if i not in special_ids}
        return ordinary == canonical_vocab(self.merges)

    def with_options(self, **options):
        """The same model with other ``add_bos`` / ``add_eos`` / ``bos_token`` /
        ``eos_token`` (a new model sharing this one's data)."""
        unknown = [name for name in options if name not in FRAME_OPTIONS]
        if unknown:
            raise Unsupported(f"{', '.join(unknown)}: {self.why_not('options')}")
        if all(value is None for value in options.values()):
            return self
        return with_frame(self, **options)

    def reframed(self, model):
        """``model`` (rebuilt from this one) with this one's frame."""
        if self.bos_token is None and self.eos_token is None:
            return model
        return model.with_options(**frame_options(self))

    def describe(self) -> str:
        text = (
            f"vocab_size={self.vocab_size} merges={self.merge_count} "
            f"pattern={pattern_name(self.pattern)}"
        )
        if self.splits:
            text += f" splits={len(self.splits)}"
        if self.ignore_merges:
            text += " ignore_merges=true"
        if self.normalizer:
            text += f" normalizer={normalizers.describe(self.normalizer)}"
        if self.added_tokens:
            text += f" added_tokens={len(self.added_tokens)}"
        if self.token_flags:
            text += f" token_flags={len(self.token_flags)}"
        return text + describe_frame(self)

    def why_not(self, what: str) -> str:
        if what == "options":
            return f"a byte-level BPE model has no such option (it has {', '.join(FRAME_OPTIONS)})"
        return f"a byte-level BPE model cannot give {what}"


class BPE(ByteLevelBPE):
    """Byte-level BPE: ``BPE(vocab, merges, special_tokens=None, pattern="gpt2")``.

    ``vocab`` is ``{id: bytes}`` (ids need not equal merge ranks; all 256 single
    bytes must be there), ``merges`` the merges in order as pairs of bytes (the
    CS336 form). ``special_tokens`` is a list of strings (each gets its id in
    ``vocab`` if its bytes are there, else the next free id) or a dict ``{token: id}``.
    Special-token ids are given by the core (``_core.assign_special_ids``), the one
    place that gives them for every way a model is built.

    ``added_tokens`` (``{token: id}``) are matched in the text like special tokens but
    always, whatever ``allowed_special`` says, and never refused (Hugging Face's
    non-special added tokens, such as Qwen2.5's ``<tool_call>``). ``normalizer`` is the
    normalizers applied in order to each text between those tokens before
    pre-tokenizing, as ``tokenizers`` does: ``"NFC"``, ``"NFKC"``, ``"NFD"``,
    ``"NFKD"``, ``"Lowercase"``, ``Replace``, ``Prepend``, ``Strip``
    (``bytepair.normalizers``). Decoding gives the normalized text back.

    ``splits`` are Splits applied after the pattern, each to every piece of the one
    before (``bytepair.split``: a Hugging Face ``Sequence`` of Splits, DeepSeek V3's);
    with ``ignore_merges``, a piece that is a token is that token before any merge
    (Hugging Face's BPE option: Llama 3's ``tokenizer.json``). ``token_flags``
    (``{token: ("lstrip", ...)}``, ``bytepair.specials``) match those special and added
    tokens as ``tokenizers`` matches a file's ``lstrip``, ``rstrip`` and
    ``single_word`` tokens.
    """

    kind = "bpe"

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | dict[str, int] | None = None,
        pattern: str | None = "gpt2",
        *,
        added_tokens: dict[str, int] | None = None,
        normalizer: str | Iterable[normalizers.Step] = (),
        splits: Iterable[Split | tuple[str, str, bool]] = (),
        ignore_merges: bool = False,
        token_flags: dict[str, Iterable[str]] | None = None,
    ) -> None:
        vocab = {int(i): bytes(t) for i, t in vocab.items()}
        self.token_flags = token_flags_of(token_flags or {}, "token_flags")
        self.splits = splits_of(splits)
        self.ignore_merges = bool(ignore_merges)
        self.added_tokens = {}
        for t, i in (added_tokens or {}).items():
            if not isinstance(t, str) or not t or isinstance(i, bool) or not isinstance(i, int):
                raise ValueError(
                    f"added token {short(t)} with id {short(i)}: expected text and an int id"
                )
            self.added_tokens[t] = i
        self.normalizer = normalizers.steps_of(normalizer)
        self._merges: list[tuple[bytes, bytes]] | None = [(bytes(a), bytes(b)) for a, b in merges]
        self.pattern = resolve_pattern(pattern)
        self.special_tokens = dict(
            _core.assign_special_ids(vocab, special_items(special_tokens), True)
        )
        for t, i in self.special_tokens.items():
            vocab.setdefault(i, t.encode("utf-8"))
        for t, i in self.added_tokens.items():
            if t in self.special_tokens:
                raise ValueError(f"added token {short(t)} is also a special token")
            vocab[i] = t.encode("utf-8")
        unknown = [
            t for t in self.token_flags if t not in {**self.special_tokens, **self.added_tokens}
        ]
        if unknown:
            raise ValueError(
                f"token_flags for {short(unknown[0])}, which is no special or added token"
            )
        self._vocab: dict[int, bytes] | None = vocab
        special_ids = {*self.special_tokens.values(), *self.added_tokens.values()}
        ids_of = ids_of_bytes(vocab, special_ids)
        merge_ids = []
        for n, (a, b) in enumerate(self._merges):
            try:
                merge_ids.append((ids_of[a], ids_of[b], ids_of[a + b]))
            except KeyError as e:
                raise ValueError(
                    f"merge #{n} ({short(a)}, {short(b)}) uses {short(e.args[0])}, which is not in the vocabulary"
                ) from None
        ordinary = {i: t for i, t in vocab.items() if i not in special_ids}
        self.core = _core.Encoder(
            ordinary,
            merge_ids,
            self.special_tokens,
            self.pattern,
            self.added_tokens,
            normalizers.core_steps(self.normalizer),
            list(self.splits),
            self.ignore_merges,
            {t: list(flags) for t, flags in self.token_flags.items()},
        )

    def with_special_tokens(self, special_tokens: dict[str, int] | Iterable[str]) -> BPE:
        """The same model with more special tokens (a new model; this one is unchanged).
        A token given without an id gets the next free one."""
        specials = with_more_specials(self, special_tokens)
        special_ids = {*self.special_tokens.values(), *self.added_tokens.values()}
        ordinary = {i: t for i, t in self.vocab.items() if i not in special_ids}
        model = BPE(
            ordinary,
            self.merges,
            specials,
            self.pattern,
            added_tokens=self.added_tokens,
            normalizer=self.normalizer,
            splits=self.splits,
            ignore_merges=self.ignore_merges,
            token_flags=self.token_flags,
        )
        return self.reframed(model)


def describe_frame(model) -> str:
    """The frame in ``describe``'s words (empty when there is none)."""
    text = ""
    if model.add_bos:
        text += f" bos={model.bos_token}"
    if model.add_eos:
        text += f" eos={model.eos_token}"
    return text


#: The largest token id (the core's ``model::MAX_ID``).
MAX_ID = 2**31 - 1


def with_more_specials(model, special_tokens) -> dict[str, int]:
    """``model``'s special tokens and ``special_tokens`` (a dict, or a list whose tokens
    get the next free ids), checked: a token already there keeps its id."""
    extra = special_items(special_tokens)
    for t, i in extra:
        if i is not None and model.special_tokens.get(t, i) != i:
            raise ValueError(
                f"special token {short(t)} already has id {model.special_tokens[t]}, not {i}"
            )
    items = list(model.special_tokens.items()) + extra
    return dict(_core.assign_special_ids(model.vocab, items, False))


def canonical_vocab(merges: list[tuple[bytes, bytes]]) -> dict[int, bytes]:
    """The vocabulary implied by merges: bytes at 0-255, merge i at 256 + i."""
    vocab = {i: bytes([i]) for i in range(256)}
    for n, (a, b) in enumerate(merges):
        vocab[256 + n] = a + b
    return vocab


def special_items(special_tokens) -> list[tuple[str, int | None]]:
    """``special_tokens`` (None, a list of strings or a dict ``{token: id}``) as
    ``(token, id or None)`` pairs, checked, the first of a repeated token kept:
    ``["<|a|>", "<|a|>"] -> [("<|a|>", None)]``."""
    if special_tokens is None:
        return []
    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a list of strings, not a single string")
    items = (
        special_tokens.items()
        if isinstance(special_tokens, dict)
        else ((t, None) for t in special_tokens)
    )
    checked: dict[str, int | None] = {}
    for t, i in items:
        if not isinstance(t, str) or not t:
            raise ValueError(f"special token {short(t)}: special tokens are non-empty strings")
        if t in checked:
            continue
        if i is not None:
            if isinstance(i, bool) or not isinstance(i, int):
                raise ValueError(f"special token {short(t)} has id {short(i)}: ids are integers")
            if not 0 <= i <= MAX_ID:
                raise ValueError(
                    f"special token {short(t)} has id {i}, outside 0..{MAX_ID}: token ids must be "
                    "at least 0 and below 2**31"
                )
        checked[t] = i
    return list(checked.items())
