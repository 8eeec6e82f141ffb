"""The Tokenizer: encode text to token ids and decode them back.

A tokenizer is one model object (``bytepair.models``: the data a file stores plus its
compiled core) behind tiktoken's method names and its safe default for special tokens.
Reading and writing files is ``bytepair.formats``; streaming is ``bytepair.streaming``;
whole files to id shards is ``bytepair.shards``.

>>> import bytepair
>>> tok = bytepair.train_from_iterator(["low lower lowest"] * 3, 262, progress=False)
>>> tok.decode(tok.encode("lower"))
'lower'
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from bytepair import formats
from bytepair import specials as _specials
from bytepair.models import BPE, Model, Unsupported
from bytepair.options import threads, without_surrogates
from bytepair.specials import AllowedSpecial, DisallowedSpecial


@dataclass
class TrainingStats:
    """What happened during training (``Tokenizer.training_stats`` after training)."""

    bytes_read: int
    distinct_pretokens: int
    merges_requested: int
    merges_done: int
    count_seconds: float
    merge_seconds: float
    # Bad records skipped with skip_bad_records=True (each also reported in a warning).
    records_skipped: int = 0

    @property
    def seconds(self) -> float:
        return self.count_seconds + self.merge_seconds


#: The default ``allowed_special``: none (compared by identity for the fast path).
NO_SPECIALS: frozenset[str] = frozenset()
#: The default policy as the core takes it: nothing allowed, "all" the rest disallowed.
_DEFAULT_POLICY = ([], "all")


class Tokenizer:
    """A tokenizer: ``Tokenizer(vocab, merges, special_tokens=None, pattern="gpt2")``.

    The constructor takes the CS336 form of a byte-level BPE: any vocabulary
    ``{id: bytes}`` (ids need not equal merge ranks; all 256 single bytes must be
    there) and the merges in order, as pairs of bytes. ``special_tokens`` is a list of
    strings (each gets its id in ``vocab`` if its bytes are there, else the next free
    id) or a dict ``{token: id}``. Files load with :func:`bytepair.load`.

    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> tok.encode("abc")
    [256, 99]
    """

    #: What training measured (a ``TrainingStats``), for tokenizers made by training.
    training_stats = None

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | dict[str, int] | None = None,
        pattern: str | None = "gpt2",
    ) -> None:
        self._model = BPE(vocab, merges, special_tokens, pattern)

    @classmethod
    def from_model(cls, model: Model) -> Tokenizer:
        """A tokenizer over a model object (see ``bytepair.models``)."""
        tok = cls.__new__(cls)
        tok._model = model
        return tok

    @property
    def model(self) -> Model:
        """The model object (``bytepair.models``): its data and what it can do."""
        return self._model

    @property
    def name(self) -> str | None:
        """The encoding's name for bundled encodings (``"cl100k_base"``), else None."""
        return getattr(self._model, "name", None)

    @property
    def _core(self):
        return self._model.core

    # -- files ------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike, **options) -> Tokenizer:
        """Loads a tokenizer file of any supported format (see :func:`bytepair.load`)."""
        return load(path, **options)

    def save(self, path: str | os.PathLike, format: str | None = None, **options) -> None:
        """Writes the tokenizer; the format follows ``format=`` or the path's suffix
        (``.bytepair`` — ours, the default —, ``.json``, ``.tiktoken``, ``.model``, a
        folder for ``gpt2`` or ``hf``). A format that cannot hold this kind of model
        says which can. See ``bytepair.formats``."""
        formats.save(self._model, path, format=format, **options)

    @classmethod
    def from_files(
        cls,
        vocab_path: str | os.PathLike,
        merges_path: str | os.PathLike,
        special_tokens: Iterable[str] | dict[str, int] | None = None,
        pattern: str | None = "gpt2",
    ) -> Tokenizer:
        """Loads GPT-2 style ``vocab.json`` + ``merges.txt`` (or ``encoder.json`` +
        ``vocab.bpe``), tokens in GPT-2's byte-to-unicode notation."""
        model = formats.gpt2.read_files(vocab_path, merges_path, special_tokens, pattern)
        return cls.from_model(model)

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike,
        pattern: str | None,
        special_tokens: Iterable[str] | dict[str, int] | None = None,
    ) -> Tokenizer:
        """Loads a tiktoken ``.tiktoken`` file: ids are the ranks and the merges are
        recovered from them. The file holds neither pattern nor special tokens, so pass
        them: ``Tokenizer.from_tiktoken("cl100k_base.tiktoken", "cl100k", {"<|endoftext|>": 100257})``.
        """
        model = formats.tiktoken.read(path, pattern=pattern, special_tokens=special_tokens)
        return cls.from_model(model)

    def save_tiktoken(self, path: str | os.PathLike) -> None:
        """Writes the ordinary tokens as a ``.tiktoken`` file (see ``formats.tiktoken``)."""
        self.save(path, format="tiktoken")

    @classmethod
    def from_hf(cls, path: str | os.PathLike) -> Tokenizer:
        """Loads a Hugging Face ``tokenizer.json`` (or a folder holding one)."""
        return cls.from_model(formats.hf.read(path))

    def save_hf(self, path: str | os.PathLike, **options) -> None:
        """Writes Hugging Face files: a folder (``tokenizer.json``,
        ``tokenizer_config.json``, ``special_tokens_map.json``) that
        ``transformers.AutoTokenizer.from_pretrained`` loads, or only ``tokenizer.json``
        when ``path`` ends in ``.json``. Options: ``eos_token``, ``bos_token``,
        ``pad_token``, ``unk_token``, ``model_max_length``."""
        self.save(path, format="hf", **options)

    def as_hf(self, **options):
        """A Hugging Face drop-in: a ``transformers.PreTrainedTokenizerFast`` whose text
        -> ids work is bytepair's, equal to transformers' own outputs (padding,
        truncation, ``batch_decode``, ``apply_chat_template``...). Options are
        transformers' (``pad_token``, ``chat_template``, ``padding_side``...); see
        ``bytepair.hf_compat``. Needs ``pip install 'bytepair[hf]'``."""
        from bytepair import hf_compat

        return hf_compat.as_hf(self, **options)

    def save_gpt2(
        self,
        folder: str | os.PathLike,
        names: tuple[str, str] = ("vocab.json", "merges.txt"),
    ) -> None:
        """Writes GPT-2 style ``vocab.json`` + ``merges.txt`` into folder (created if
        needed; or other names, e.g. ``("encoder.json", "vocab.bpe")``), and the special
        tokens where Hugging Face folders keep them (``added_tokens.json``)."""
        self.save(folder, format="gpt2", names=names)

    def __reduce__(self):
        # Pickled as a bundled name or the text of our own .bytepair format: plain data,
        # so unpickling runs only our constructor, and a tokenizer crosses to worker
        # processes (multiprocessing, DataLoader workers, datasets.map, Ray) without
        # shipping code.
        state: dict = {"version": 1}
        if self.name is not None:
            state["name"] = self.name
        else:
            state["bytepair"] = formats.bytepair.to_text(self._model)
        if self.training_stats is not None:
            state["training_stats"] = dict(vars(self.training_stats))
        return restore, (state,)

    def __deepcopy__(self, memo):
        return self  # immutable: a copy would be identical in every observable way

    def __copy__(self):
        return self

    # -- properties -------------------------------------------------------------------

    @property
    def vocab(self) -> dict[int, bytes]:
        """id -> bytes for every token, special tokens included (a copy)."""
        return dict(self._model.vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order, as pairs of bytes (a copy); AttributeError for a
        model kind without merges (SentencePiece merges by piece score)."""
        merges = self._model.merges
        if merges is None:
            raise AttributeError(self._model.why_not("merges"))
        return list(merges)

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special token -> id (a copy)."""
        return dict(self._model.special_tokens)

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._model.special_tokens)

    @property
    def pattern(self) -> str | None:
        """The pre-tokenization regex (None: no pre-tokenization)."""
        return self._model.pattern

    @property
    def vocab_size(self) -> int:
        """Number of tokens, special tokens included."""
        return self._model.vocab_size

    @property
    def n_vocab(self) -> int:
        """One more than the largest id (tiktoken's meaning; usually ``vocab_size``)."""
        return self._model.max_token_value + 1

    @property
    def max_token_value(self) -> int:
        """The largest token id."""
        return self._model.max_token_value

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>``."""
        try:
            return self._model.special_tokens["<|endoftext|>"]
        except KeyError:
            raise KeyError("this tokenizer has no <|endoftext|> special token") from None

    def is_special_token(self, token: int) -> bool:
        """True if the id is one of the special tokens."""
        return token in set(self._model.special_tokens.values())

    def __repr__(self) -> str:
        specials = ", ".join(list(self._model.special_tokens)[:3])
        if len(self._model.special_tokens) > 3:
            specials += ", ..."
        name = f" name={self.name}" if self.name else ""
        return f"<Tokenizer{name} {self._model.describe()} special_tokens=[{specials}]>"

    def with_options(self, **options) -> Tokenizer:
        """The same tokenizer with other model options: ``add_bos`` / ``add_eos`` (put
        the BOS / EOS token around every text's ids, or not) and, for a model that does
        not name them, ``bos_token`` / ``eos_token`` — the same for every kind of model
        (see :func:`load`).

        >>> import bytepair
        >>> tok = bytepair.load("gpt2").with_options(bos_token="<|endoftext|>", add_bos=True)
        >>> tok.encode("hi"), tok.with_options(add_bos=False).encode("hi")
        ([50256, 5303], [5303])
        """
        return Tokenizer.from_model(self._model.with_options(**options))

    def with_special_tokens(self, special_tokens: dict[str, int] | Iterable[str]) -> Tokenizer:
        """A new tokenizer with more special tokens, e.g. chat markers on cl100k_base:

        >>> import bytepair
        >>> cl = bytepair.get_encoding("cl100k_base")
        >>> chat = cl.with_special_tokens({"<|im_start|>": 100264, "<|im_end|>": 100265})
        >>> chat.encode("<|im_start|>hi<|im_end|>", allowed_special="all")
        [100264, 6151, 100265]

        A list gives each new token the next free id. This tokenizer is unchanged.
        """
        return Tokenizer.from_model(self._model.with_special_tokens(special_tokens))

    # -- encoding -----------------------------------------------------------------------

    def _specials(self, allowed_special, disallowed_special):
        """The policy as the core takes it. The default (nothing allowed, the rest
        disallowed) is ``([], "all")``: the core resolves "all" against the model's
        special tokens once, so a default call costs the same whatever their number."""
        if allowed_special is NO_SPECIALS and disallowed_special == "all":
            return _DEFAULT_POLICY
        if (
            disallowed_special == "all"
            and not allowed_special
            and not isinstance(allowed_special, str)
        ):
            return _DEFAULT_POLICY
        return _specials.resolve(allowed_special, disallowed_special, self._model.special_tokens)

    def _run(self, method: str, text, *args, **kwargs):
        """One call into the core; text with lone surrogates is retried with them
        replaced by U+FFFD (as tiktoken does)."""
        call = getattr(self._core, method)
        try:
            return call(text, *args, **kwargs)
        except UnicodeEncodeError:
            if isinstance(text, str):
                return call(without_surrogates(text), *args, **kwargs)
            return call([without_surrogates(t) for t in text], *args, **kwargs)

    # Not keyword-only, unlike tiktoken's (which takes every call this does): CPython
    # specializes no call to a function with keyword-only parameters, and that slow path
    # was 60 ns of the default encode's 190 ns over encode_ordinary on a short sentence.
    def encode(
        self,
        text: str,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[int]:
        """Encodes text to token ids.

        Special tokens are safe by default: text that spells a special token raises a
        ValueError, because text from users should not be able to inject control
        tokens. Pass ``allowed_special={"<|endoftext|>"}`` (or ``"all"``) to encode it as
        the special token, or ``disallowed_special=()`` to encode it as plain text.

        >>> import bytepair
        >>> bytepair.get_encoding("gpt2").encode("hello <|endoftext|>", allowed_special="all")
        [31373, 220, 50256]
        """
        if allowed_special is NO_SPECIALS and disallowed_special == "all":
            try:  # the default policy: the core's own, nothing to resolve or pass
                return self._model.core.encode_default(text)
            except UnicodeEncodeError:
                return self._run("encode_default", text)
        allowed, disallowed = self._specials(allowed_special, disallowed_special)
        try:
            return self._model.core.encode(text, allowed, disallowed)
        except UnicodeEncodeError:
            return self._run("encode", text, allowed, disallowed)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encodes text with every special token treated as plain text."""
        try:
            return self._model.core.encode_ordinary(text)
        except UnicodeEncodeError:
            return self._run("encode_ordinary", text)

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of text (or bytes) that is exactly one token, special tokens included;
        a KeyError otherwise.

        >>> import bytepair
        >>> bytepair.get_encoding("gpt2").encode_single_token(" hello")
        23748
        """
        if isinstance(text_or_bytes, str):
            if text_or_bytes in self._model.special_tokens:
                return self._model.special_tokens[text_or_bytes]
            data = text_or_bytes.encode("utf-8")
        else:
            data = bytes(text_or_bytes)
        token = self._model.ids_of_bytes.get(data)
        if token is None:
            raise KeyError(f"{text_or_bytes!r} is not a single token")
        return token

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """tiktoken's ``encode_with_unstable``: the tokens of ``text`` that more text
        cannot change, and the candidate encodings of the rest (``completions``), as
        tiktoken computes them (its types: a list and a list of lists, the completions
        sorted here where tiktoken's order is a set's).

        The last pre-token (and whitespace tokens before it) is unstable. Its
        completions are every single token whose bytes start with its bytes, the
        re-encoding of each cut of it with a token that continues it, and, when it ends
        in whitespace, its encoding with that character apart.

        >>> import bytepair
        >>> stable, completions = bytepair.get_encoding("cl100k_base").encode_with_unstable("hello fo")
        >>> stable, [39935] in completions
        ([15339], True)
        """
        from bytepair import unstable

        allowed, _ = self._specials(allowed_special, disallowed_special)
        before, after = self._core.frame()
        if after:
            raise Unsupported(
                "encode_with_unstable: with add_eos the EOS moves to the end of whatever "
                "text follows, so no token before it is stable; use "
                "tok.with_options(add_eos=False)"
            )
        bare = self.with_options(add_bos=False) if before else self
        tokens = bare.encode(
            text, allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        stable, completions = unstable.split(bare._model, text, tokens, allowed)
        return before + stable, completions  # BOS starts the stable part

    def encode_batch(
        self,
        texts: list[str],
        *,
        num_threads: int | None = None,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[list[int]]:
        """Encodes many texts in parallel (the GIL is released); same ids as ``encode``.

        Strings CPython holds no UTF-8 of yet are converted to UTF-8 on the batch's
        threads, into memory the call frees: no copy is left inside them (taking their
        UTF-8 from CPython would convert them one by one under the GIL and keep a copy
        in each string for as long as it lives)."""
        texts = list(texts)
        if not texts:
            return []
        allowed, disallowed = self._specials(allowed_special, disallowed_special)
        return self._run("encode_batch", texts, allowed, threads(num_threads), disallowed)

    def encode_ordinary_batch(
        self, texts: list[str], *, num_threads: int | None = None
    ) -> list[list[int]]:
        """``encode_ordinary`` over many texts, in parallel."""
        return self.encode_batch(texts, num_threads=num_threads, disallowed_special=())

    def encode_batch_to_numpy(
        self,
        texts: list[str],
        *,
        num_threads: int | None = None,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ):
        """Encodes many texts in parallel into one flat array: returns ``(ids, offsets)``,
        uint32 ids of all texts one after another and ``len(texts) + 1`` int64 offsets,
        so that ``ids[offsets[i]:offsets[i + 1]]`` is ``encode(texts[i])``.

        No Python int or list is made per token, so this is the batch call that scales
        with cores (``encode_batch`` spends part of its time building lists under the
        GIL); the strings' UTF-8 is made on the batch's threads too, as in
        ``encode_batch``. ``ids`` is a writable view of the buffer the encoder wrote into; once
        ``ids`` and every view of it are gone, a later batch writes into that buffer
        again (its memory is already mapped, which saves two threads a tenth of their
        time), and never while any view of it is alive.
        """
        import numpy as np

        ids, offsets = self._encode_batch_flat(
            texts, num_threads, allowed_special, disallowed_special
        )
        return np.frombuffer(ids, dtype="<u4"), np.frombuffer(offsets, dtype="<i8")

    def _encode_batch_flat(self, texts, num_threads, allowed_special, disallowed_special):
        """``encode_batch_to_numpy``'s ids and offsets without numpy (the shard writer's
        batches: importing numpy was a tenth of a shard folder's time): the ids as a
        memoryview of little-endian uint32 ("I"), the offsets as the core's buffer of
        int64."""
        allowed, disallowed = self._specials(allowed_special, disallowed_special)
        texts = list(texts)
        ids, offsets = self._run(
            "encode_batch_to_bytes", texts, allowed, threads(num_threads), disallowed
        )
        return memoryview(ids).cast("I"), offsets

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ):
        """Encodes to a numpy uint32 array, without building a Python list."""
        import numpy as np

        allowed, disallowed = self._specials(allowed_special, disallowed_special)
        return np.frombuffer(self._run("encode_to_buffer", text, allowed, disallowed), dtype="<u4")

    # Not keyword-only, as encode (see there): the default call on a short sentence
    # took 10,000 instructions against encode's 7,600, most of them in this wrapper.
    def count_tokens(
        self,
        text: str,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> int:
        """``len(encode(text))``, without building the list."""
        if allowed_special is NO_SPECIALS and disallowed_special == "all":
            try:  # the default policy: the core's own, nothing to resolve or pass
                return self._model.core.count_default(text)
            except UnicodeEncodeError:
                return self._run("count_default", text)
        allowed, disallowed = self._specials(allowed_special, disallowed_special)
        return self._run("count", text, allowed, disallowed)

    def encode_file(
        self,
        src: str | os.PathLike,
        dst: str | os.PathLike,
        *,
        format: Literal["bin", "npy"] | None = None,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
        num_threads: int | None = None,
        errors: str = "strict",
        progress=None,
    ) -> int:
        """Encodes a UTF-8 text file into a file of token ids for LM training and
        returns how many tokens it wrote (see :func:`bytepair.shards.encode_file`)."""
        from bytepair.shards import encode_file

        return encode_file(
            self,
            src,
            dst,
            format=format,
            allowed_special=allowed_special,
            disallowed_special=disallowed_special,
            num_threads=num_threads,
            errors=errors,
            progress=progress,
        )

    def encode_iterable(
        self,
        iterable: Iterable[str],
        *,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> Iterator[int]:
        """Yields the ids of ``"".join(iterable)`` lazily, holding only a small tail of
        text between chunks — e.g. ``for i in tok.encode_iterable(open(path))``.

        The ids equal ``encode("".join(iterable))`` even where a piece or a special
        token straddles two chunks (see ``bytepair.streaming``).
        """
        for ids in self.encode_chunks(
            iterable, allowed_special=allowed_special, disallowed_special=disallowed_special
        ):
            yield from ids

    def encode_chunks(
        self,
        iterable: Iterable[str],
        *,
        allowed_special: AllowedSpecial = NO_SPECIALS,
        disallowed_special: DisallowedSpecial = "all",
    ) -> Iterator[list[int]]:
        """Like :meth:`encode_iterable`, but yields a list of ids per input chunk (faster
        for large files: ``for ids in tok.encode_chunks(iter(lambda: f.read(1 << 20), ""))``)."""
        from bytepair.streaming import encode_chunks

        allowed, disallowed = self._specials(allowed_special, disallowed_special)

        def encode_prefix(text: str, first: bool, last: bool, starts: bool):
            return self._run("encode_prefix", text, allowed, first, last, starts, disallowed)

        return encode_chunks(encode_prefix, iterable)

    # -- decoding ----------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of the tokens, joined. An unknown id raises KeyError naming it."""
        if hasattr(ids, "tolist"):  # numpy arrays
            ids = ids.tolist()
        ids = list(ids)
        try:
            return self._core.decode_bytes(ids)
        except (OverflowError, TypeError, IndexError, KeyError):
            vocab = self._model.vocab
            bad = next(i for i in ids if not isinstance(i, int) or i not in vocab)
            raise KeyError(f"unknown token id {bad!r}") from None

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Decodes ids to text; invalid UTF-8 becomes U+FFFD unless ``errors`` says
        otherwise (any of ``bytes.decode``'s: "strict", "ignore", ...)."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token."""
        return self._model.token_bytes(token)

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each token, as a list."""
        return [self.decode_single_token_bytes(t) for t in tokens]

    def decode_with_offsets(self, tokens: Iterable[int]) -> tuple[str, list[int]]:
        """The text (as ``decode``, strictly) and, for each token, the index of the
        character it starts in (a token that starts inside a character points at that
        character; a token that adds no text, the character after).

        >>> import bytepair
        >>> bytepair.get_encoding("cl100k_base").decode_with_offsets([15339, 1917])
        ('hello world', [0, 5])
        """
        pieces = self._model.surfaces(list(tokens))
        offsets, chars = [], 0
        for piece in pieces:
            # A UTF-8 continuation byte (10xxxxxx) first: the token begins mid-character.
            inside = bool(piece) and 0x80 <= piece[0] < 0xC0
            offsets.append(max(chars - inside, 0))
            chars += sum(1 for b in piece if not 0x80 <= b < 0xC0)
        return b"".join(pieces).decode("utf-8", errors="strict"), offsets

    def decode_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "replace") -> list[str]:
        """``decode`` over many id sequences."""
        return [self.decode(ids, errors=errors) for ids in batch]

    def decode_bytes_batch(self, batch: Iterable[Iterable[int]]) -> list[bytes]:
        """``decode_bytes`` over many id sequences."""
        return [self.decode_bytes(ids) for ids in batch]

    def decode_stream(self, ids: Iterable[int], errors: str = "replace") -> Iterator[str]:
        """Decodes ids one at a time, yielding text as soon as its UTF-8 is complete.

        A character split over several tokens is yielded once, whole:

        >>> import bytepair
        >>> list(bytepair.get_encoding("gpt2").decode_stream([19567, 255, 19567, 109]))
        ['อ', 'ั']
        """
        from bytepair.streaming import decode_stream

        return decode_stream(self, ids, errors)

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary (non-special) token, sorted."""
        special = set(self._model.special_tokens.values())
        return sorted(t for i, t in self._model.vocab.items() if i not in special)


def load(
    path_or_name: str | os.PathLike,
    *,
    format: str | None = None,
    pattern: str | None = None,
    special_tokens=None,
    add_bos: bool | None = None,
    add_eos: bool | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
) -> Tokenizer:
    """A tokenizer from a bundled encoding name (``"cl100k_base"``), a ``.bytepair``
    file, a ``tokenizer.json`` (or a folder holding one), a ``.tiktoken`` file (give
    ``pattern`` and ``special_tokens``: the format holds neither), a GPT-2 folder or a
    SentencePiece ``.model``.

    ``add_bos`` / ``add_eos`` put the model's BOS / EOS token around every text's ids,
    overriding what the file says (a ``tokenizer.json``'s ``TemplateProcessing``;
    default: no). A SentencePiece model's are ``<s>`` and ``</s>``; other models name
    them with ``bos_token`` / ``eos_token`` (one of their special tokens), unless the
    file does.

    >>> import bytepair
    >>> bytepair.load("gpt2").encode("hello")
    [31373]
    >>> bytepair.load("gpt2", eos_token="<|endoftext|>", add_eos=True).encode("hello")
    [31373, 50256]
    """
    model = formats.read(
        path_or_name,
        format=format,
        pattern=pattern,
        special_tokens=special_tokens,
        add_bos=add_bos,
        add_eos=add_eos,
        bos_token=bos_token,
        eos_token=eos_token,
    )
    return Tokenizer.from_model(model)


def restore(state: dict) -> Tokenizer:
    """A pickled tokenizer back (the inverse of ``Tokenizer.__reduce__``)."""
    if state.get("version") != 1:
        raise ValueError(f"pickled tokenizer of unknown version {state.get('version')!r}")
    if "name" in state:
        model = formats.bundled.model(state["name"])
    else:
        model = formats.bytepair.from_bytes(state["bytepair"].encode("utf-8"), "<pickle>")
    tok = Tokenizer.from_model(model)
    if "training_stats" in state:
        tok.training_stats = TrainingStats(**state["training_stats"])
    return tok


__all__ = ["Tokenizer", "TrainingStats", "Unsupported", "load", "restore"]
