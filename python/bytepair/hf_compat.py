"""A Hugging Face drop-in: a ``transformers`` fast tokenizer whose text -> ids work is
bytepair's.

``tok.as_hf()`` (or :func:`from_pretrained` on a folder ``AutoTokenizer`` reads) gives a
:class:`BytepairTokenizerFast`, a ``transformers.PreTrainedTokenizerFast``. Where
transformers takes a fast tokenizer, it takes this one: ``__call__`` with padding,
truncation (``stride`` and ``return_overflowing_tokens`` too), attention masks and
``return_tensors``; ``decode`` / ``batch_decode``; ``apply_chat_template``;
``add_special_tokens`` (the BOS/EOS the post-processor adds). The ids are equal to
``AutoTokenizer.from_pretrained(folder)``'s:

- bytepair encodes every text at once (``encode_batch``, the GIL released) with
  ``allowed_special="all"``: HF matches every added token in text, as this does;
- the BOS/EOS around each text are read off the Hugging Face post-processor itself
  (whatever ``add_bos_token`` or a template makes it), truncation cuts as ``tokenizers``
  does (``Encoding.truncate``: windows of ``max_length`` minus the added tokens, each
  ``stride`` tokens into the last), and ``transformers``' own ``pad`` pads;
- decoding, the vocabulary and chat templates are transformers' own, unchanged.

Where bytepair's semantics are not HF's for a file, the drop-in gives HF's ids, never
other ones:

- SentencePiece-family files: bytepair reads the file's Metaspace / normalizer and
  encodes as ``tokenizers`` does (``formats.hf_sentencepiece``);
- an added token bytepair does not match (tokens added after loading with
  ``add_tokens``): texts that contain one are encoded by the Hugging Face backend, so
  they are HF's by construction;
- a shape whose semantics differ in general (a normalizer the bytepair model does not
  apply itself, added tokens with ``lstrip``/``rstrip``/``single_word`` that the
  bytepair model does not match with the same flags) is refused
  when the drop-in is made, naming the component (the Unicode normalizers bytepair
  loads, Qwen2's NFC..., are its own); text pairs, pre-split words and offsets
  raise ``NotImplementedError`` (use ``AutoTokenizer`` for those).

``transformers`` is imported here only: ``pip install 'bytepair[hf]'``.
"""

from __future__ import annotations

import json
import os
import tempfile

try:
    import transformers  # noqa: F401
    from transformers import PreTrainedTokenizerFast
    from transformers.tokenization_utils_base import BatchEncoding, TruncationStrategy
    from transformers.utils import PaddingStrategy
except ImportError as e:  # pragma: no cover - the extra is part of the test install
    raise ImportError(
        "bytepair's Hugging Face drop-in needs transformers and tokenizers: "
        "pip install 'bytepair[hf]'"
    ) from e

import bytepair
from bytepair import normalizers

#: Options of ``save_hf`` (the roles written into the config files); the rest of
#: ``as_hf``'s options go to the transformers tokenizer.
ROLES = ("bos_token", "eos_token", "unk_token", "pad_token", "model_max_length")


def as_hf(tok: bytepair.Tokenizer, **options) -> BytepairTokenizerFast:
    """The drop-in for a bytepair tokenizer (see the module docstring).

    Options are what ``transformers`` tokenizers take: the roles ``bos_token``,
    ``eos_token``, ``unk_token``, ``pad_token`` (each one of the special tokens) and
    ``model_max_length``, and any other init option (``chat_template``,
    ``padding_side``, ``truncation_side``, ``add_bos_token``...).

    >>> import bytepair
    >>> hf = bytepair.get_encoding("gpt2").as_hf(pad_token="<|endoftext|>")
    >>> hf(["hello world", "hi"], padding=True)["attention_mask"]
    [[1, 1], [1, 0]]
    """
    roles = {k: options.pop(k) for k in ROLES if k in options}
    with tempfile.TemporaryDirectory(prefix="bytepair-hf-") as folder:
        # The folder save_hf writes is what AutoTokenizer would load: transformers'
        # own loading makes the tokenizer, so its settings are the folder's.
        tok.save_hf(folder, **roles)
        return BytepairTokenizerFast.from_pretrained(folder, bytepair_tokenizer=tok, **options)


def from_pretrained(folder: str | os.PathLike, **options) -> BytepairTokenizerFast:
    """The drop-in for a Hugging Face folder (``tokenizer.json`` and the config files,
    chat template included), as ``AutoTokenizer.from_pretrained(folder)`` reads it."""
    return BytepairTokenizerFast.from_pretrained(folder, **options)


class BytepairTokenizerFast(PreTrainedTokenizerFast):
    """A ``PreTrainedTokenizerFast`` that encodes text with bytepair (see the module
    docstring). Made by :func:`as_hf` or :func:`from_pretrained`."""

    slow_tokenizer_class = None

    @classmethod
    def convert_to_native_format(cls, trust_remote_code=False, **kwargs):
        # As for transformers' own class: the backend is the folder's tokenizer.json as
        # it is (a subclass with an __init__ would get it rebuilt from vocab and merges).
        return PreTrainedTokenizerFast.convert_to_native_format.__func__(
            PreTrainedTokenizerFast, trust_remote_code, **kwargs
        )

    def __init__(self, *args, bytepair_tokenizer: bytepair.Tokenizer | None = None, **kwargs):
        if bytepair_tokenizer is None:
            file = kwargs.get("tokenizer_file")
            if file is None or not os.path.isfile(file):
                raise ValueError(
                    "BytepairTokenizerFast needs a tokenizer.json (tokenizer_file=...) or a "
                    "bytepair tokenizer (bytepair_tokenizer=...)"
                )
            bytepair_tokenizer = bytepair.load(file)
        super().__init__(*args, **kwargs)
        model = bytepair_tokenizer.model
        if getattr(model, "add_bos", False) or getattr(model, "add_eos", False):
            # BOS/EOS come from the Hugging Face post-processor (add_special_tokens).
            model = model.with_options(add_bos=False, add_eos=False)
        self._bytepair = bytepair.Tokenizer.from_model(model)
        self._plan()

    # -- what bytepair can encode as HF does ---------------------------------------------

    def _plan(self) -> None:
        """Checks the file's shape and finds the added tokens bytepair does not match;
        ValueError naming the component whose semantics bytepair cannot give."""
        backend = self._tokenizer
        where = f"{self.name_or_path or 'this tokenizer'}"
        # A SentencePiece model read from a tokenizer.json (or written to the one the
        # backend is) applies its normalizer and Metaspace as tokenizers does; a
        # byte-level model applies the Unicode normalizers it loaded.
        spm = isinstance(self._bytepair.model, bytepair.models.SentencePiece)
        if backend.normalizer is not None and not spm:
            node = json.loads(backend.normalizer.__getstate__())
            nodes = node.get("normalizers", [node])
            try:
                steps = tuple(normalizers.from_json(n) for n in nodes)
            except ValueError:
                steps = tuple(str(n.get("type")) for n in nodes)
            if steps != tuple(getattr(self._bytepair.model, "normalizer", ())):
                raise ValueError(
                    f"{where}: normalizer {normalizers.describe(steps)}: bytepair's model "
                    "does not normalize the text this way; use transformers.AutoTokenizer"
                )
        if backend.pre_tokenizer is not None and not spm:
            pre = json.loads(backend.pre_tokenizer.__getstate__())
            if pre.get("type") == "Metaspace":
                raise ValueError(
                    f"{where}: pre-tokenizer Metaspace (a SentencePiece-family file) with a "
                    "byte-level bytepair model: load the folder's own tokenizer.json"
                )
        matched = dict(self._bytepair.special_tokens)
        matched.update(getattr(self._bytepair.model, "user_defined", {}))
        matched.update(getattr(self._bytepair.model, "added_tokens", {}))
        for token in getattr(self._bytepair.model, "hf", {}).get("added", []):
            matched[token] = self._bytepair.model.piece_to_id(token)
        unmatched = []
        for i, token in backend.get_added_tokens_decoder().items():
            flags = tuple(f for f in ("lstrip", "rstrip", "single_word") if getattr(token, f))
            ours = getattr(self._bytepair.model, "token_flags", {}).get(token.content, ())
            if flags and (matched.get(token.content) != i or flags != ours):
                # Matched by the bytepair model with these flags: as the backend does.
                raise ValueError(
                    f"{where}: added token {token.content!r} has lstrip, rstrip or single_word: "
                    "not supported by bytepair's drop-in"
                )
            if matched.get(token.content) != i:
                unmatched.append(token.content)
        self._unmatched = tuple(unmatched)

    def _add_tokens(self, new_tokens, special_tokens=False) -> int:
        added = super()._add_tokens(new_tokens, special_tokens=special_tokens)
        if hasattr(self, "_bytepair"):
            self._plan()  # new added tokens: texts holding one go to the backend
        return added

    def _encode_texts(self, texts: list[str], split_special_tokens: bool) -> list[list[int]]:
        """Each text's ids without BOS/EOS, as the Hugging Face backend gives them."""
        ids: list[list[int] | None] = [None] * len(texts)
        ours, backend = [], []
        for n, text in enumerate(texts):
            if self._unmatched and any(t in text for t in self._unmatched):
                backend.append(n)
            else:
                ours.append(n)
        if backend:
            self._tokenizer.encode_special_tokens = split_special_tokens
            encodings = self._tokenizer.encode_batch(
                [texts[n] for n in backend], add_special_tokens=False
            )
            for n, encoding in zip(backend, encodings):
                ids[n] = encoding.ids
        if ours:
            batch = [texts[n] for n in ours]
            if split_special_tokens:
                encoded = self._bytepair.encode_ordinary_batch(batch)
            else:
                encoded = self._bytepair.encode_batch(batch, allowed_special="all")
            for n, one in zip(ours, encoded):
                ids[n] = one
        return ids  # type: ignore[return-value]

    def _added(self, add_special_tokens: bool) -> tuple[list[int], list[int]]:
        """The ids the post-processor puts before and after a single text, read off the
        post-processor itself (so ``add_bos_token`` and templates are followed)."""
        backend = self._tokenizer
        if not add_special_tokens or backend.post_processor is None:
            return [], []
        if backend.num_special_tokens_to_add(False) == 0:
            return [], []
        probe = backend.encode("a", add_special_tokens=False)
        full = backend.post_process(probe, None, True).ids
        inner = probe.ids
        for start in range(len(full) - len(inner) + 1):
            if full[start : start + len(inner)] == inner:
                return full[:start], full[start + len(inner) :]
        raise NotImplementedError(
            f"post-processor {type(backend.post_processor).__name__} does not put tokens "
            "around the text: not supported by bytepair's drop-in"
        )

    # -- transformers' entry points ----------------------------------------------------

    def tokenize(self, text: str, pair=None, add_special_tokens: bool = False, **kwargs):
        if pair is not None:
            raise NotImplementedError("bytepair's drop-in does not encode text pairs")
        ids = self._encode_plus(text, add_special_tokens=add_special_tokens, **kwargs)
        return self.convert_ids_to_tokens(ids["input_ids"])

    def _encode_plus(
        self,
        text,
        text_pair=None,
        add_special_tokens: bool = True,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
        max_length: int | None = None,
        stride: int = 0,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors=None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool | None = None,
        **kwargs,
    ) -> BatchEncoding:
        refused = [
            name
            for name, asked in (
                ("text_pair", text_pair is not None),
                ("is_split_into_words", is_split_into_words),
                ("return_offsets_mapping", return_offsets_mapping),
                ("sanitize_control_tokens", kwargs.get("sanitize_control_tokens")),
            )
            if asked
        ]
        if refused:
            raise NotImplementedError(
                f"{', '.join(refused)}: not supported by bytepair's drop-in; use "
                "transformers.AutoTokenizer for it"
            )
        batched = isinstance(text, (list, tuple))
        texts = list(text) if batched else [text]
        if not all(isinstance(t, str) for t in texts):
            raise ValueError(
                "text input must be of type `str` (single example) or `list[str]` (batch)"
            )
        if split_special_tokens is None:
            split_special_tokens = self.split_special_tokens
        # The backend encodes some texts (see _encode_texts): never with its own
        # truncation or padding, which are applied below.
        self.set_truncation_and_padding(
            PaddingStrategy.DO_NOT_PAD, TruncationStrategy.DO_NOT_TRUNCATE, None, 0, None, None
        )
        encoded = self._encode_texts(texts, split_special_tokens) if texts else []
        before, after = self._added(add_special_tokens)
        truncate = truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length
        if truncate and truncation_strategy == TruncationStrategy.ONLY_SECOND:
            raise ValueError("Truncation error: Second sequence not provided")
        rows: list[list[int]] = []
        masks: list[list[int]] = []
        sample: list[int] = []
        for n, ids in enumerate(encoded):
            if truncate:
                limit = max(max_length - len(before) - len(after), 0)
                parts = _windows(ids, limit, stride, self.truncation_side)
                if not return_overflowing_tokens:
                    parts = parts[:1]
            else:
                parts = [ids]
            for part in parts:
                rows.append([*before, *part, *after])
                masks.append([1] * len(before) + [0] * len(part) + [1] * len(after))
                sample.append(n)
        data: dict = {"input_ids": rows}
        if return_token_type_ids or (
            return_token_type_ids is None and "token_type_ids" in self.model_input_names
        ):
            data["token_type_ids"] = [[0] * len(r) for r in rows]
        if return_special_tokens_mask:
            data["special_tokens_mask"] = masks
        for ids in rows:
            self._eventual_warn_about_too_long_sequence(ids, max_length, verbose)
        padded = self.pad(
            data,
            padding=padding_strategy,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
            verbose=verbose,
        )
        out = dict(padded)
        if return_length:
            out["length"] = [len(ids) for ids in out["input_ids"]]
        if return_overflowing_tokens:
            out["overflow_to_sample_mapping"] = sample
        if not batched and return_tensors is None and not return_overflowing_tokens:
            out = {k: v[0] if v and isinstance(v[0], list) else v for k, v in out.items()}
        return BatchEncoding(out, tensor_type=return_tensors)


def _windows(ids: list[int], limit: int, stride: int, side: str) -> list[list[int]]:
    """``tokenizers``' ``Encoding.truncate``: the kept part first, then the overflowing
    windows, each ``limit`` long and ``stride`` tokens into the one before.

    >>> _windows([1, 2, 3, 4, 5], 3, 1, "right")
    [[1, 2, 3], [3, 4, 5]]
    >>> _windows([1, 2, 3, 4, 5], 3, 1, "left")
    [[3, 4, 5], [1, 2, 3]]
    """
    if limit >= len(ids):
        return [ids]
    if limit == 0:
        return [[], ids]
    if stride >= limit:
        raise ValueError(
            f"stride {stride} must be smaller than the tokens kept per window ({limit})"
        )
    step = limit - stride
    parts = []
    if side == "right":
        for start in range(0, len(ids), step):
            stop = min(start + limit, len(ids))
            parts.append(ids[start:stop])
            if stop == len(ids):
                break
    else:
        for last in range(len(ids) - 1, -1, -step):
            stop = last + 1
            start = max(stop - limit, 0)
            parts.append(ids[start:stop])
            if start == 0:
                break
    return parts


__all__ = ["BytepairTokenizerFast", "as_hf", "from_pretrained"]
