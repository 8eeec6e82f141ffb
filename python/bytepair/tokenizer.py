"""The Tokenizer: encode text to token ids and decode them back.

A tokenizer is data — a vocabulary (id -> bytes), ordered merges, special tokens and
a pre-tokenization pattern — plus a compiled encoder built from that data. The
methods follow tiktoken's names and its safe default for special tokens.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Iterable, Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Literal

from bytepair import _core
from bytepair.formats import atomic_write, dump_bytepair, load_bytepair, read_gpt2_files
from bytepair.patterns import pattern_name, resolve_pattern

AllowedSpecial = Literal["all"] | AbstractSet[str]
DisallowedSpecial = Literal["all"] | Collection[str]


def _block_kwargs() -> dict:
    # Tests shrink the file read block (BYTEPAIR_BLOCK_BYTES) to exercise block
    # boundaries on small files.
    block = os.environ.get("BYTEPAIR_BLOCK_BYTES")
    return {"block_bytes": int(block)} if block else {}


def _without_surrogates(text: str) -> str:
    # Lone surrogates cannot be UTF-8 encoded; replace them with U+FFFD (as tiktoken does).
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Tokenizer:
    """A byte-level BPE tokenizer.

    ``Tokenizer(vocab, merges, special_tokens=None, pattern="gpt2")`` takes any
    vocabulary ``{id: bytes}`` (ids need not equal merge ranks; all 256 single bytes
    must be there) and the merges in order, as pairs of bytes — the CS336 form.
    ``special_tokens`` is a list of strings (each gets its id in ``vocab`` if its bytes
    are there, else the next free id) or a dict ``{token: id}``.

    >>> tok = Tokenizer.load("examples/tinystories.bytepair")   # doctest: +SKIP
    >>> tok.encode("Once upon a time")                          # doctest: +SKIP
    [...]
    """

    #: The encoding's name for bundled encodings (``"cl100k_base"``), else None.
    name: str | None = None
    #: What training measured (a ``TrainingStats``), for tokenizers made by training.
    training_stats = None

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | dict[str, int] | None = None,
        pattern: str | None = "gpt2",
    ) -> None:
        self._vocab_data: dict[int, bytes] | None = {int(i): bytes(t) for i, t in vocab.items()}
        self._merges_data: list[tuple[bytes, bytes]] | None = [
            (bytes(a), bytes(b)) for a, b in merges
        ]
        self._pattern = resolve_pattern(pattern)
        self._special_tokens = self._assign_special_ids(special_tokens)
        special_ids = set(self._special_tokens.values())
        # Lowest id wins when bytes repeat (training can make the same bytes twice).
        ids_of: dict[bytes, int] = {}
        for i in sorted(self._vocab, reverse=True):
            if i not in special_ids:
                ids_of[self._vocab[i]] = i
        merge_ids = []
        for n, (a, b) in enumerate(self._merges):
            try:
                merge_ids.append((ids_of[a], ids_of[b], ids_of[a + b]))
            except KeyError as e:
                raise ValueError(
                    f"merge #{n} ({a!r}, {b!r}) uses {e.args[0]!r}, which is not in the vocabulary"
                ) from None
        ordinary = {i: t for i, t in self._vocab.items() if i not in special_ids}
        self._core = _core.Encoder(ordinary, merge_ids, self._special_tokens, self._pattern)

    @classmethod
    def _from_core(cls, core, special_tokens: dict[str, int], pattern: str | None) -> Tokenizer:
        """A tokenizer around a ready encoder; its vocab and merges are read from the
        encoder when first asked for."""
        tok = cls.__new__(cls)
        tok._vocab_data = None
        tok._merges_data = None
        tok._pattern = pattern
        tok._special_tokens = special_tokens
        tok._core = core
        return tok

    @property
    def _vocab(self) -> dict[int, bytes]:
        if self._vocab_data is None:
            # In the order __init__ makes: ordinary tokens (by id), then the specials.
            vocab = self._core.vocab()
            for i in self._special_tokens.values():
                del vocab[i]
            for t, i in self._special_tokens.items():
                vocab[i] = t.encode("utf-8")
            self._vocab_data = vocab
        return self._vocab_data

    @property
    def _merges(self) -> list[tuple[bytes, bytes]]:
        if self._merges_data is None:
            self._merges_data = self._core.merges()
        return self._merges_data

    def _assign_special_ids(self, special_tokens) -> dict[str, int]:
        if special_tokens is None:
            return {}
        if isinstance(special_tokens, dict):
            specials = {str(t): int(i) for t, i in special_tokens.items()}
            for t, i in specials.items():
                if self._vocab.setdefault(i, t.encode("utf-8")) != t.encode("utf-8"):
                    raise ValueError(
                        f"special token {t!r} has id {i}, which the vocabulary gives to "
                        f"{self._vocab[i]!r}"
                    )
            return specials
        if isinstance(special_tokens, str):
            raise TypeError("special_tokens must be a list of strings, not a single string")
        specials = {}
        by_bytes = {t: i for i, t in sorted(self._vocab.items(), reverse=True)}
        for t in dict.fromkeys(special_tokens):
            i = by_bytes.get(t.encode("utf-8"))
            if i is None:
                i = max(self._vocab, default=-1) + 1
                self._vocab[i] = t.encode("utf-8")
            specials[t] = i
        return specials

    # -- construction from files and training ---------------------------------------

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
        vocab, merges = read_gpt2_files(vocab_path, merges_path)
        return cls(vocab, merges, special_tokens, pattern)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tokenizer:
        """Loads a tokenizer saved with :meth:`save`. Loading runs no code."""
        doc = load_bytepair(path)
        vocab = doc["vocab"]
        if vocab is None:
            vocab = _canonical_vocab(doc["merges"])
        try:
            return cls(vocab, doc["merges"], doc["special_tokens"], doc["pattern"])
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def save(self, path: str | os.PathLike) -> None:
        """Writes the tokenizer as one human-readable JSON file (see ``bytepair.formats``)."""
        ordinary = {i: t for i, t in self._vocab.items() if i not in self._special_ids}
        vocab = None if ordinary == _canonical_vocab(self._merges) else ordinary
        text = dump_bytepair(self._merges, self._special_tokens, self._pattern, vocab)
        atomic_write(path, text.encode("utf-8"))

    # -- other ecosystems: tiktoken, Hugging Face, GPT-2 files ---------------------------

    @classmethod
    def from_tiktoken(
        cls,
        path: str | os.PathLike,
        pattern: str | None,
        special_tokens: Iterable[str] | dict[str, int] | None = None,
    ) -> Tokenizer:
        """Loads a tiktoken ``.tiktoken`` file (lines ``base64(token) rank``): ids are the
        ranks and the merges are recovered from them (``formats.merges_from_ranks``).
        The file holds neither pattern nor special tokens, so pass them: e.g.
        ``Tokenizer.from_tiktoken("cl100k_base.tiktoken", "cl100k", {"<|endoftext|>": 100257})``.
        """
        return cls._from_tiktoken_data(Path(path).read_bytes(), str(path), pattern, special_tokens)

    @classmethod
    def _from_tiktoken_data(
        cls,
        data: bytes,
        path: str,
        pattern: str | None,
        special_tokens: Iterable[str] | dict[str, int] | None = None,
    ) -> Tokenizer:
        """:meth:`from_tiktoken` of a file's contents (``path`` names it in errors).

        The Rust core parses the file, recovers the merges and builds the encoder in
        one step (``_core.Encoder.from_tiktoken``), with no Python dicts in between;
        whatever it declines (a fault to word, special ids among the ranks, a file in
        an unusual form) goes the general way below, which raises the same errors as
        before.
        """
        from bytepair import formats

        if special_tokens is None or isinstance(special_tokens, dict):
            try:
                regex = resolve_pattern(pattern)
                specials = {str(t): int(i) for t, i in (special_tokens or {}).items()}
                if len(set(specials.values())) != len(specials):
                    raise ValueError("two special tokens share an id")  # worded below
                core = _core.Encoder.from_tiktoken(data, specials, regex)
            except (ValueError, TypeError, OverflowError):
                pass
            else:
                return cls._from_core(core, specials, regex)
        ranks = formats.parse_tiktoken(data, path)
        try:
            merges = formats.merges_from_ranks(ranks)
            vocab = {rank: token for token, rank in ranks.items()}
            return cls(vocab, merges, special_tokens, pattern)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def save_tiktoken(self, path: str | os.PathLike) -> None:
        """Writes the ordinary tokens as a ``.tiktoken`` file, each token's id its rank
        (special tokens and the pattern are not part of that format).

        tiktoken merges by rank, so the ids must give back exactly this tokenizer's
        merges (``formats.merges_from_ranks``); if they do not (tokens with the same
        bytes, ids out of merge order, tokens no merge makes) this is a ValueError and
        nothing is written.
        """
        from bytepair import formats

        ranks: dict[bytes, int] = {}
        for i, token in sorted(self._vocab.items()):
            if i in self._special_ids:
                continue
            if token in ranks:
                raise ValueError(
                    f"{path}: ids {ranks[token]} and {i} are the same bytes {token!r}; "
                    "a .tiktoken file gives each token one rank"
                )
            ranks[token] = i
        try:
            merges = formats.merges_from_ranks(ranks)
        except ValueError as e:
            raise ValueError(f"{path}: the ids cannot serve as tiktoken ranks: {e}") from None
        if merges != self._merges:
            n = next(
                (n for n, (a, b) in enumerate(zip(merges, self._merges)) if a != b),
                min(len(merges), len(self._merges)),
            )
            ours = self._merges[n] if n < len(self._merges) else None
            theirs = merges[n] if n < len(merges) else None
            raise ValueError(
                f"{path}: the ids cannot serve as tiktoken ranks: merge #{n} is {ours!r} "
                f"but the ranks imply {theirs!r}, so tiktoken would encode differently"
            )
        formats.write_tiktoken(path, ranks)

    @classmethod
    def from_hf(cls, path: str | os.PathLike) -> Tokenizer:
        """Loads a Hugging Face ``tokenizer.json`` of a byte-level BPE model (GPT-2,
        Llama 3, ...); see ``formats.read_hf_tokenizer_json`` for what is supported."""
        from bytepair import formats

        vocab, merges, special_tokens, pattern = formats.read_hf_tokenizer_json(path)
        try:
            return cls(vocab, merges, special_tokens, pattern)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def save_hf(self, path: str | os.PathLike) -> None:
        """Writes a Hugging Face ``tokenizer.json`` that ``tokenizers`` and
        ``transformers.PreTrainedTokenizerFast`` load and that encodes like
        ``encode(text, allowed_special="all")``."""
        from bytepair import formats

        formats.write_hf_tokenizer_json(
            path, self._vocab, self._merges, self._special_tokens, self._pattern
        )

    def save_gpt2(
        self,
        folder: str | os.PathLike,
        names: tuple[str, str] = ("vocab.json", "merges.txt"),
    ) -> None:
        """Writes GPT-2 style ``vocab.json`` + ``merges.txt`` into folder (or other
        names, e.g. ``("encoder.json", "vocab.bpe")``); read them with :meth:`from_files`.
        These files keep no pattern and do not mark which tokens are special."""
        from bytepair import formats

        formats.write_gpt2_files(folder, self._vocab, self._merges, self._special_tokens, names)

    # -- properties -------------------------------------------------------------------

    @property
    def vocab(self) -> dict[int, bytes]:
        """id -> bytes for every token, special tokens included (a copy)."""
        return dict(self._vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in rank order, as pairs of bytes (a copy)."""
        return list(self._merges)

    @property
    def special_tokens(self) -> dict[str, int]:
        """Special token -> id (a copy)."""
        return dict(self._special_tokens)

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    @property
    def _special_ids(self) -> set[int]:
        return set(self._special_tokens.values())

    @property
    def pattern(self) -> str | None:
        """The pre-tokenization regex (None: no pre-tokenization)."""
        return self._pattern

    @property
    def vocab_size(self) -> int:
        """Number of tokens, special tokens included."""
        if self._vocab_data is None:
            return self._core.vocab_len()
        return len(self._vocab_data)

    @property
    def n_vocab(self) -> int:
        """One more than the largest id (tiktoken's meaning; usually ``vocab_size``)."""
        if self._vocab_data is None:
            return self._core.max_id() + 1
        return max(self._vocab_data, default=-1) + 1

    def __repr__(self) -> str:
        specials = ", ".join(list(self._special_tokens)[:3])
        if len(self._special_tokens) > 3:
            specials += ", ..."
        return (
            f"<Tokenizer vocab_size={self.vocab_size} merges={self._merge_count} "
            f"pattern={pattern_name(self._pattern)} special_tokens=[{specials}]>"
        )

    @property
    def _merge_count(self) -> int:
        if self._merges_data is None:
            return self._core.merge_count()
        return len(self._merges_data)

    # -- encoding -----------------------------------------------------------------------

    def _special_sets(
        self, allowed_special: AllowedSpecial, disallowed_special: DisallowedSpecial
    ) -> tuple[set[str], set[str]]:
        """(registered specials to encode as such, tokens whose presence is an error)."""
        if allowed_special == "all":
            allowed = set(self._special_tokens)
        else:
            allowed = set(allowed_special) & set(self._special_tokens)
        if disallowed_special == "all":
            disallowed = set(self._special_tokens) - allowed
        else:
            disallowed = set(disallowed_special)
        return allowed, disallowed

    def _special_lists(
        self, allowed_special: AllowedSpecial, disallowed_special: DisallowedSpecial
    ) -> tuple[list[str], list[str]]:
        """(specials to encode as such, tokens whose presence raises), as the core takes
        them: it checks the text and encodes it in one call."""
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        return sorted(allowed), sorted(disallowed)

    @staticmethod
    def _call(method, text: str, *args):
        try:
            return method(text, *args)
        except UnicodeEncodeError:
            return method(_without_surrogates(text), *args)

    def encode(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = frozenset(),
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[int]:
        """Encodes text to token ids.

        Special tokens are safe by default: text that spells a special token raises a
        ValueError, because text from users should not be able to inject control
        tokens. Pass ``allowed_special={"<|endoftext|>"}`` (or ``"all"``) to encode it as
        the special token, or ``disallowed_special=()`` to encode it as plain text.

        >>> tok.encode("hello <|endoftext|>", allowed_special="all")   # doctest: +SKIP
        [31373, 220, 50256]
        """
        specials = self._special_lists(allowed_special, disallowed_special)
        return self._call(self._core.encode, text, *specials)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encodes text with every special token treated as plain text."""
        return self._call(self._core.encode_ordinary, text)

    def encode_batch(
        self,
        texts: list[str],
        *,
        num_threads: int | None = None,
        allowed_special: AllowedSpecial = frozenset(),
        disallowed_special: DisallowedSpecial = "all",
    ) -> list[list[int]]:
        """Encodes many texts in parallel (the GIL is released); same ids as ``encode``."""
        texts = list(texts)
        if not texts:
            return []
        return self._batch(
            self._core.encode_batch, texts, num_threads, allowed_special, disallowed_special
        )

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
        allowed_special: AllowedSpecial = frozenset(),
        disallowed_special: DisallowedSpecial = "all",
    ):
        """Encodes many texts in parallel into one flat array: returns ``(ids, offsets)``,
        uint32 ids of all texts one after another and ``len(texts) + 1`` int64 offsets,
        so that ``ids[offsets[i]:offsets[i + 1]]`` is ``encode(texts[i])``.

        No Python int or list is made per token, so this is the batch call that scales
        with cores (``encode_batch`` spends part of its time building lists under the
        GIL). ``ids`` is a writable view of the buffer the encoder wrote into.
        """
        import numpy as np

        texts = list(texts)
        ids, offsets = self._batch(
            self._core.encode_batch_to_bytes,
            texts,
            num_threads,
            allowed_special,
            disallowed_special,
        )
        return np.frombuffer(ids, dtype="<u4"), np.frombuffer(offsets, dtype="<i8")

    def _batch(self, call, texts, num_threads, allowed_special, disallowed_special):
        """call(texts, allowed, threads, disallowed), and again with lone surrogates
        replaced if a text has any (as ``encode`` does)."""
        allowed, disallowed = self._special_lists(allowed_special, disallowed_special)
        threads = num_threads or os.cpu_count() or 1
        try:
            return call(texts, allowed, threads, disallowed)
        except UnicodeEncodeError:
            return call([_without_surrogates(t) for t in texts], allowed, threads, disallowed)

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = frozenset(),
        disallowed_special: DisallowedSpecial = "all",
    ):
        """Encodes to a numpy uint32 array, without building a Python list."""
        import numpy as np

        specials = self._special_lists(allowed_special, disallowed_special)
        return np.frombuffer(self._call(self._core.encode_to_bytes, text, *specials), dtype="<u4")

    def count_tokens(
        self,
        text: str,
        *,
        allowed_special: AllowedSpecial = frozenset(),
        disallowed_special: DisallowedSpecial = "all",
    ) -> int:
        """``len(encode(text))``, without building the list."""
        specials = self._special_lists(allowed_special, disallowed_special)
        return self._call(self._core.count, text, *specials)

    def encode_file(
        self,
        src: str | os.PathLike,
        dst: str | os.PathLike,
        *,
        format: Literal["bin", "npy"] | None = None,
        allowed_special: AllowedSpecial = frozenset(),
        disallowed_special: DisallowedSpecial = "all",
        num_threads: int | None = None,
        errors: str = "strict",
        progress=None,
    ) -> int:
        """Encodes a UTF-8 text file into a file of token ids for LM training and returns
        how many tokens it wrote.

        Ids are little-endian uint16 when every id fits (``n_vocab <= 65536``), else
        uint32: ``.bin`` is the raw array (``np.fromfile(dst, np.uint16)``), ``.npy``
        (``format="npy"`` or the suffix) adds numpy's header. The file is read in
        blocks and encoded on ``num_threads`` threads (default: all cores), in bounded
        memory, to exactly the ids of ``encode(text)``. ``progress(bytes_done)`` is
        called after each block. Output goes to a temporary file renamed into place.
        """
        from bytepair.formats import NPY_HEADER_BYTES, npy_header, publish

        src, dst = Path(src), Path(dst)
        if not src.is_file():
            raise FileNotFoundError(f"{src}: no such file")
        fmt = format or ("npy" if dst.suffix == ".npy" else "bin")
        if fmt not in ("bin", "npy"):
            raise ValueError(f"format must be 'bin' or 'npy', not {fmt!r}")
        width = 2 if self.n_vocab <= 1 << 16 else 4
        allowed, disallowed = self._special_sets(allowed_special, disallowed_special)
        disallowed &= set(self._special_tokens)
        fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                if fmt == "npy":
                    f.write(bytes(NPY_HEADER_BYTES))
            count = self._core.encode_file(
                str(src),
                tmp,
                width,
                sorted(allowed),
                sorted(disallowed),
                errors,
                num_threads or os.cpu_count() or 1,
                progress,
                **_block_kwargs(),
            )
            if fmt == "npy":
                with open(tmp, "r+b") as f:
                    f.write(npy_header("<u2" if width == 2 else "<u4", count))
            publish(tmp, dst)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return count

    def encode_iterable(
        self,
        iterable: Iterable[str],
        *,
        allowed_special: AllowedSpecial = frozenset(),
        disallowed_special: DisallowedSpecial = "all",
    ) -> Iterator[int]:
        """Yields the ids of ``"".join(iterable)`` lazily, holding only a small tail of
        text between chunks — e.g. ``for i in tok.encode_iterable(open(path))``.

        The ids equal ``encode("".join(iterable))`` even where a piece or a special
        token straddles two chunks: text is encoded only once no later text can change
        its pieces, and the rest is carried over to the next chunk.
        """
        for ids in self.encode_chunks(
            iterable, allowed_special=allowed_special, disallowed_special=disallowed_special
        ):
            yield from ids

    def encode_chunks(
        self,
        iterable: Iterable[str],
        *,
        allowed_special: AllowedSpecial = frozenset(),
        disallowed_special: DisallowedSpecial = "all",
    ) -> Iterator[list[int]]:
        """Like :meth:`encode_iterable`, but yields a list of ids per input chunk (faster
        for large files: ``for ids in tok.encode_chunks(iter(lambda: f.read(1 << 20), ""))``)."""
        allowed, disallowed = self._special_lists(allowed_special, disallowed_special)
        carry = ""
        for chunk in iterable:
            if not chunk:
                continue
            carry += chunk
            ids, used = self._call(self._core.encode_prefix, carry, allowed, False, disallowed)
            if ids:
                yield ids
            carry = carry[used:]
        ids, _ = self._call(self._core.encode_prefix, carry, allowed, True, disallowed)
        if ids:
            yield ids

    # -- decoding ----------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of the tokens, joined. An unknown id raises KeyError naming it."""
        if hasattr(ids, "tolist"):  # numpy arrays
            ids = ids.tolist()
        ids = list(ids)
        try:
            return self._core.decode_bytes(ids)
        except OverflowError:
            bad = next(i for i in ids if not 0 <= i < 2**32)
            raise KeyError(f"unknown token id {bad}") from None

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Decodes ids to text; invalid UTF-8 becomes U+FFFD unless ``errors`` says
        otherwise (any of ``bytes.decode``'s: "strict", "ignore", ...)."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each token, as a list."""
        return [self.decode_single_token_bytes(t) for t in tokens]

    def decode_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "replace") -> list[str]:
        """``decode`` over many id sequences."""
        return [self.decode(ids, errors=errors) for ids in batch]

    def decode_bytes_batch(self, batch: Iterable[Iterable[int]]) -> list[bytes]:
        """``decode_bytes`` over many id sequences."""
        return [self.decode_bytes(ids) for ids in batch]

    def decode_stream(self, ids: Iterable[int], errors: str = "replace") -> Iterator[str]:
        """Decodes ids one at a time, yielding text as soon as its UTF-8 is complete.

        A character split over several tokens is yielded once, whole:

        >>> gpt2 = bytepair.get_encoding("gpt2")                    # doctest: +SKIP
        >>> list(gpt2.decode_stream([19567, 255, 19567, 109]))     # doctest: +SKIP
        ['อ', 'ั']
        """
        decoder = StreamDecoder(self, errors)
        for i in ids:
            text = decoder.step(i)
            if text:
                yield text
        text = decoder.flush()
        if text:
            yield text

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary (non-special) token, sorted."""
        special = self._special_ids
        return sorted(t for i, t in self._vocab.items() if i not in special)

    @property
    def max_token_value(self) -> int:
        """The largest token id."""
        if self._vocab_data is None:
            return self._core.max_id()
        return max(self._vocab_data)

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>``."""
        try:
            return self._special_tokens["<|endoftext|>"]
        except KeyError:
            raise KeyError("this tokenizer has no <|endoftext|> special token") from None

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token."""
        try:
            return self._vocab[token]
        except KeyError:
            raise KeyError(f"unknown token id {token}") from None


def _canonical_vocab(merges: list[tuple[bytes, bytes]]) -> dict[int, bytes]:
    """The vocabulary implied by merges: bytes at 0-255, merge i at 256 + i."""
    vocab = {i: bytes([i]) for i in range(256)}
    for n, (a, b) in enumerate(merges):
        vocab[256 + n] = a + b
    return vocab


class StreamDecoder:
    """Turns token ids into text one id at a time (e.g. while a model generates),
    holding back the bytes of a UTF-8 character until it is complete.

    >>> dec = StreamDecoder(tokenizer)     # doctest: +SKIP
    >>> dec.step(19567), dec.step(255)     # doctest: +SKIP
    ('', 'อ')
    """

    def __init__(self, tokenizer: Tokenizer, errors: str = "replace") -> None:
        import codecs

        self._tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors=errors)

    def step(self, token: int) -> str:
        """Adds one token; returns the text completed by it (maybe empty)."""
        return self._decoder.decode(self._tokenizer.decode_single_token_bytes(token))

    def flush(self) -> str:
        """Ends the stream: bytes of an unfinished character come out as U+FFFD."""
        return self._decoder.decode(b"", final=True)
