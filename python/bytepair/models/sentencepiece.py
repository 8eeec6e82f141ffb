"""SentencePiece BPE as data (Llama 2, Mistral): pieces with scores and types, the
normalizer, and the compiled model that encodes and decodes exactly as the
``sentencepiece`` library does (``bytepair._core.SentencePieceModel``).

Unlike byte-level BPE there are no merges and no pattern: the normalized text
("▁" for each space, one in front: the dummy prefix) is merged character by
character, the adjacent pair whose concatenation is the highest-scoring piece
first; a character without a piece becomes its UTF-8 bytes (``<0x0A>``...).

How it fits the one ``Tokenizer``:

- ``special_tokens`` are the CONTROL pieces (``<s>``, ``</s>``, ``[INST]``...), under
  the same policy as BPE: text spelling one raises unless allowed; an allowed one
  becomes its id (sentencepiece itself never matches them; Hugging Face does). Only
  the text before the first of them gets the dummy prefix. A model read from a
  ``tokenizer.json`` puts it where ``tokenizers`` does instead (``prefix``, ``split``:
  see :meth:`SentencePiece.from_bytes` and ``formats.hf_sentencepiece``).
- USER_DEFINED pieces are not special tokens: they are always matched, as
  sentencepiece matches them (``user_defined``).
- ``add_bos`` / ``add_eos`` are model options, set when loading
  (``bytepair.load(path, add_bos=True)``) or with :meth:`with_options`: every text
  encodes between ``<s>`` and ``</s>`` — in ``encode``, batches, numpy and files.
- ``vocab`` maps each id to the bytes the piece stands for out of context: "▁" is a
  space, ``<0x0A>`` is b"\\n", a control or unknown piece is its spelling.
  ``decode`` is sentencepiece's: it drops the dummy-prefix space, writes nothing
  for control pieces and " ⁇ " for ``<unk>``. A model read from a ``tokenizer.json``
  decodes as ``tokenizers`` does instead, by the file's ``decoder`` (Mistral: ``<s>``
  and ``<unk>`` are written as they are spelled, one leading space is cut from the
  text, a run of byte pieces that is not UTF-8 gives one U+FFFD per byte).
- Where a long text may be cut, the core says (``core.cuts_words``): before a space
  that follows neither a space nor "▁", for a model whose pieces never join a word
  to the space after it, whose normalizer keeps every space, and whose dummy prefix
  goes on a text's first segment only (Llama 2's and Mistral's ``.model``; a
  Metaspace "first" ``tokenizer.json``). Then ``encode_file``, ``bytepair count``,
  shard folders and a batch's long texts encode the text in parts on all cores, a
  later part without the dummy prefix, to the ids of the whole, and
  ``encode_iterable`` yields ids as text comes. Other models encode a text whole
  (``encode_iterable`` holds it until its end). Python never cuts a document
  (``sources.part_chars_for`` is None: its parts would each get the prefix).
"""

from __future__ import annotations

from functools import cached_property

from bytepair import _core
from bytepair.models.base import Unsupported, ids_of_bytes, with_frame
from bytepair.specials import token_flags_of

#: The whitespace mark of normalized text.
SPACE = "\u2581"
#: ``from_bytes``'s ``decoder`` for sentencepiece's own decode (a ``.model``).
SENTENCEPIECE_DECODE = "sentencepiece"


def piece_bytes(piece: str, kind: str) -> bytes:
    """The bytes a piece stands for: "▁" -> space, ``<0xNN>`` -> that byte.

    >>> piece_bytes("\u2581the", "NORMAL"), piece_bytes("<0x0A>", "BYTE")
    (b' the', b'\\n')
    """
    if kind == "BYTE":
        return bytes([int(piece[3:5], 16)])
    if kind in ("CONTROL", "UNKNOWN"):
        return piece.encode("utf-8")
    return piece.replace(SPACE, " ").encode("utf-8")


def _own_piece(name: str, given: str | None, own: str | None) -> None:
    """A SentencePiece model's BOS / EOS is its own piece: another is Unsupported."""
    if given is not None and given != own:
        raise Unsupported(f"{name} {given!r}: a SentencePiece model's is its own piece ({own!r})")


class SentencePiece:
    """A SentencePiece BPE model: ``SentencePiece.from_bytes(open("tokenizer.model",
    "rb").read())``."""

    kind = "sentencepiece"
    pattern = None
    #: Text is never cut (the dummy prefix and whitespace rules see its edges).
    keeps_text_cuts = False
    merge_count = None

    def __init__(self, core: _core.SentencePieceModel, hf: dict | None = None) -> None:
        self.core = core
        #: The Hugging Face rules this model was loaded with (``from_bytes``'s
        #: ``prefix``, ``split``, ``added``, ``specials``); empty for a ``.model``.
        self.hf = dict(hf or {})

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        path: str = "<bytes>",
        *,
        add_bos: bool = False,
        add_eos: bool = False,
        prefix: str = "spm",
        split: bool = False,
        added: list[str] | None = None,
        specials: list[str] | None = None,
        normalized: list[str] | None = None,
        decoder: dict | None | str = SENTENCEPIECE_DECODE,
        token_flags: dict | None = None,
    ) -> SentencePiece:
        """The model in a ``.model`` file's bytes; ``path`` names it in errors.

        A ``tokenizer.json`` gives the rest, as ``tokenizers`` applies its components:
        ``prefix`` says which texts between special tokens get the dummy "▁"
        ("spm", sentencepiece's: the first, always; Metaspace's "first": the first unless
        it starts with a space or "▁"; "always": each unless it does; "each": each,
        the ``Prepend("▁")`` normalizer), ``split`` is Metaspace's (no merge across
        a "▁"), ``added`` the non-special added tokens (matched in every text) and
        ``specials`` the special tokens (default: the CONTROL pieces); ``normalized``
        those of both that the legacy normalizer (prefix "each") matches as it
        normalizes them: only at the start or after a space, which they take;
        ``token_flags`` how those tokens are matched besides their text (``{token:
        ("lstrip", "rstrip", "single_word")}``, ``bytepair.specials``).
        ``decoder`` is the file's, as ``formats.hf_sentencepiece`` checked it (None:
        the file has none): ids decode as ``tokenizers`` decodes them; the default,
        :data:`SENTENCEPIECE_DECODE`, decodes as sentencepiece does."""
        token_flags = token_flags_of(token_flags or {}, str(path))
        hf = {}
        hf_decode = decoder != SENTENCEPIECE_DECODE
        hf_rules = prefix != "spm" or split or added or specials is not None
        if hf_rules or hf_decode or token_flags:
            hf = {"prefix": prefix, "split": split, "added": list(added or [])}
            if specials is not None:
                hf["specials"] = list(specials)
            if normalized:
                hf["normalized"] = list(normalized)
            if token_flags:
                hf["token_flags"] = {t: list(flags) for t, flags in token_flags.items()}
            if hf_decode:
                hf["decoder"] = decoder
        core = _core.SentencePieceModel.from_bytes(
            data,
            str(path),
            add_bos,
            add_eos,
            prefix,
            split,
            list(added or []),
            specials,
            list(normalized or []),
            hf_decode,
            _decoder_steps(decoder) if hf_decode else None,
            {t: list(flags) for t, flags in token_flags.items()},
        )
        return cls(core, hf)

    @property
    def token_flags(self) -> dict[str, tuple[str, ...]]:
        """How special and added tokens are matched besides their text (a Hugging Face
        file's ``lstrip``, ``rstrip``, ``single_word``); empty for a ``.model``."""
        return {t: tuple(flags) for t, flags in self.hf.get("token_flags", {}).items()}

    def to_bytes(self) -> bytes:
        """The ``.model`` bytes (identical to the file a loaded model came from)."""
        return self.core.to_bytes()

    def with_options(
        self,
        *,
        add_bos: bool | None = None,
        add_eos: bool | None = None,
        bos_token: str | None = None,
        eos_token: str | None = None,
    ) -> SentencePiece:
        """The same model with other ``add_bos`` / ``add_eos`` (a new model sharing
        this one's data). Its BOS and EOS are its ``<s>`` and ``</s>`` pieces: other
        ``bos_token`` / ``eos_token`` are :class:`Unsupported`."""
        _own_piece("bos_token", bos_token, self.bos_token)
        _own_piece("eos_token", eos_token, self.eos_token)
        if add_bos is None and add_eos is None:
            return self
        for add, token, which in (
            (add_bos, self.bos_token, "bos"),
            (add_eos, self.eos_token, "eos"),
        ):
            if add and token is None:
                raise ValueError(f"add_{which}=True: this model has no {which} piece")
        return with_frame(self, add_bos=add_bos, add_eos=add_eos, id_of=self.piece_to_id)

    @property
    def bos_token(self) -> str | None:
        """The ``<s>`` piece (``add_bos`` puts it before every text), if the model has one."""
        return None if self.bos_id is None else self.id_to_piece(self.bos_id)

    @bos_token.setter
    def bos_token(self, value) -> None:
        _own_piece("bos_token", value, self.bos_token)

    @property
    def eos_token(self) -> str | None:
        """The ``</s>`` piece (``add_eos`` puts it after every text), if the model has one."""
        return None if self.eos_id is None else self.id_to_piece(self.eos_id)

    @eos_token.setter
    def eos_token(self, value) -> None:
        _own_piece("eos_token", value, self.eos_token)

    @property
    def prefix(self) -> str:
        """Which texts get the dummy "▁" (see :meth:`from_bytes`)."""
        return self.core.metaspace()[0]

    @property
    def split(self) -> bool:
        """Metaspace ``split``: every "▁" starts a piece of its own."""
        return self.core.metaspace()[1]

    @property
    def add_bos(self) -> bool:
        return self.core.add_bos

    @property
    def add_eos(self) -> bool:
        return self.core.add_eos

    @cached_property
    def pieces(self) -> list[tuple[str, float, str]]:
        """Every piece in id order: (piece, score, type), type one of NORMAL, UNKNOWN,
        CONTROL, USER_DEFINED, UNUSED, BYTE."""
        return self.core.pieces()

    @cached_property
    def special_tokens(self) -> dict[str, int]:
        """The CONTROL pieces -> ids (a ``tokenizer.json``'s special added tokens,
        ``<unk>`` among them)."""
        if "specials" in self.hf:
            return {p: self.piece_to_id(p) for p in self.hf["specials"]}
        return {p: i for i, (p, _, kind) in enumerate(self.pieces) if kind == "CONTROL"}

    @cached_property
    def user_defined(self) -> dict[str, int]:
        """The USER_DEFINED pieces -> ids (always matched in text)."""
        return {p: i for i, (p, _, kind) in enumerate(self.pieces) if kind == "USER_DEFINED"}

    @cached_property
    def vocab(self) -> dict[int, bytes]:
        """id -> the bytes of the piece (see the module docstring)."""
        return {i: piece_bytes(p, kind) for i, (p, _, kind) in enumerate(self.pieces)}

    #: None: a SentencePiece model merges pieces by score, not by a list of merges.
    merges = None

    @cached_property
    def ids_of_bytes(self) -> dict[bytes, int]:
        """The bytes of NORMAL, USER_DEFINED and BYTE pieces -> id (lowest id first)."""
        others = [i for i, (_, _, kind) in enumerate(self.pieces) if kind in _NOT_TEXT]
        return ids_of_bytes(self.vocab, others)

    @cached_property
    def byte_fallback_ids(self) -> frozenset[int]:
        """The BYTE pieces (``<0x0A>``...), what text without a piece falls back to."""
        return frozenset(i for i, (_, _, kind) in enumerate(self.pieces) if kind == "BYTE")

    @property
    def vocab_size(self) -> int:
        return self.core.vocab_len()

    @property
    def max_token_value(self) -> int:
        return self.core.max_id()

    @property
    def bos_id(self) -> int | None:
        return self.core.bos_id

    @property
    def eos_id(self) -> int | None:
        return self.core.eos_id

    @property
    def unk_id(self) -> int:
        return self.core.unk_id

    def token_bytes(self, token: int) -> bytes:
        try:
            return self.vocab[token]
        except (KeyError, TypeError):
            raise KeyError(f"unknown token id {token!r}") from None

    def surfaces(self, ids: list[int]) -> list[bytes]:
        """What each id adds to ``decode_bytes(ids)``, exactly: as sentencepiece decodes,
        nothing for a control piece, " ⁇ " for ``<unk>``, no dummy-prefix space on the
        first piece (Mistral's ``.model``: ``<s> ▁Hello ▁world`` -> ``[b"", b"Hello",
        b" world"]``); as ``tokenizers`` decodes (a ``tokenizer.json``), the part of its
        text that came from each id (Mistral's: ``[b"<s>", b" Hello", b" world"]``)."""
        ids = list(ids)
        for i in ids:
            self.token_bytes(i)  # KeyError naming an unknown id, as decode_bytes
        out = self.core.surfaces(ids)
        if out is None:
            raise Unsupported(self.why_not("token surfaces"))
        return out

    def open_tail(self, ids: list[int]) -> int:
        """How many of the last ``ids`` a later id can still change the surfaces of:
        under a ``tokenizer.json``'s ``ByteFallback`` decoder, the run of byte pieces at
        the end (its text is its UTF-8, or U+FFFD for each byte, once the run ends)."""
        return self.core.open_tail(list(ids))

    def normalize(self, text: str) -> str:
        """The text as the normalizer rewrites it before merging (" a" -> "▁▁a")."""
        return self.core.normalize(text)

    def decode(self, ids) -> str:
        """Ids -> text exactly as ``SentencePieceProcessor.decode`` (a ``.model``) or
        ``tokenizers.Tokenizer.decode(ids, skip_special_tokens=False)`` (a
        ``tokenizer.json``)."""
        return self.core.decode(list(ids))

    def piece_to_id(self, piece: str) -> int:
        return self.core.piece_to_id(piece)

    def id_to_piece(self, token: int) -> str:
        return self.core.id_to_piece(token)

    def with_special_tokens(self, special_tokens) -> SentencePiece:
        raise Unsupported(self.why_not("new special tokens"))

    def describe(self) -> str:
        return f"kind={self.kind} vocab_size={self.vocab_size}"

    def why_not(self, what: str) -> str:
        if what == "merges":
            return (
                "a SentencePiece model has no merges: it merges pieces by score (see model.pieces)"
            )
        if what == "new special tokens":
            return (
                "a SentencePiece model's special tokens are its CONTROL pieces; add pieces "
                "when training it (control_symbols=...)"
            )
        if what == "token surfaces":
            return (
                "this SentencePiece model has denormalization rules, which rewrite the "
                "decoded text as a whole: a token's own text is not defined"
            )
        return f"a SentencePiece model cannot give {what}"


def _decoder_steps(decoder: dict | None) -> list[dict] | None:
    """The steps of a ``tokenizer.json`` decoder, ``Sequence`` flattened (the steps of a
    Sequence run one after another); None for none."""
    if decoder is None:
        return None
    if decoder.get("type") == "Sequence":
        return [step for d in decoder["decoders"] for step in _decoder_steps(d) or []]
    return [decoder]


#: Piece types that stand for no text of their own (not found by their bytes).
_NOT_TEXT = ("CONTROL", "UNKNOWN", "UNUSED")
