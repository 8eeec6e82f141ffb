"""The SentencePiece family in Hugging Face's ``tokenizer.json`` (Llama 2, Mistral,
Gemma): a ``BPE`` model with ``byte_fallback``, read into and written from the
``sentencepiece`` model kind, encoding exactly as ``tokenizers`` does.

HF has no piece scores: its merges are every way of cutting a piece in two, in the
order of the pieces' scores (what ``transformers``' converter writes). Reading turns
merge order back into scores (a piece scores minus the rank of its first merge),
which encodes the same. Writing keeps the exact ``.model`` inside the file too (as
base64, under ``model.bytepair_sentencepiece_model``; ``tokenizers`` ignores it), so
``.model`` -> ``tokenizer.json`` -> ``.model`` is byte for byte.

Where the dummy "▁" goes is the file's, as ``tokenizers`` applies it to each text
between added tokens (``SentencePiece.prefix``):

- ``Metaspace`` ``prepend_scheme: "first"`` (Mistral v0.3): the text at the start,
  unless it starts with a space or "▁" (" a" is ``▁a``; sentencepiece has ``▁ ▁a``);
  ``"always"``: every text between added tokens, unless it starts with one;
  ``"never"``: none. ``split: true`` (tokenizers' default): no merge across a "▁".
- the legacy normalizer ``Sequence[Prepend("▁"), Replace(" ", "▁")]`` with no
  pre-tokenizer (Llama 2): every text between added tokens, always.
- ``Replace(" ", "▁")`` alone (Gemma): none.
- what this module writes for a ``.model`` (:data:`SPM_NORMALIZER` before Metaspace
  "first", added tokens ``normalized: true``): sentencepiece's own rule, the text at the
  start always (" a" is ``▁ ▁a`` in ``tokenizers`` too).

A model read from a ``tokenizer.json`` is written back in its own shape (the same
scheme, ``split`` and ``normalized`` flags), so ``tokenizers`` gives bytepair's ids for
what bytepair writes either way. Its ``.model`` (``save("x.model")``) can say none of
this: that file encodes as sentencepiece does, as every ``.model`` does.

Ids decode as ``tokenizers.Tokenizer.decode(ids, skip_special_tokens=False)``: by the
file's ``decoder`` (:func:`read_decoder`), kept in ``SentencePiece.hf["decoder"]`` and
written back as it was. Mistral's and Llama 2's ``Sequence[Replace("▁", " "),
ByteFallback, Fuse, Strip(" ", 1, 0)]`` writes ``<s>`` and ``<unk>`` as spelled and cuts
one leading space of the text; Gemma's has no Strip; ``Metaspace`` drops the "▁" of
the first token only (unless its scheme is "never"); a file without a decoder joins
the tokens with spaces. Other decoders are refused by name. What this module writes
for a ``.model`` has the Mistral chain (no Strip without a dummy prefix): text decodes
as sentencepiece decodes it, but ``<s>``, ``<unk>`` and byte runs that are not UTF-8 as
``tokenizers`` does.

Added tokens are matched in the raw text before the rest, as ``tokenizers`` matches
them; non-special ones (Gemma's) in every text, never refused. Special ones follow
bytepair's ``allowed_special`` policy, where ``tokenizers`` matches them in any text.
What would encode otherwise is refused, naming it: other normalizers or
pre-tokenizers, a replacement other than "▁", added tokens with
``lstrip``/``rstrip``/``single_word``, ``normalized: true`` tokens holding a space or
"▁" under a normalizer (tokenizers normalizes the token too), normalized and
unnormalized tokens that can overlap, merges other than every cut of every piece in
score order (a BPE trained by ``tokenizers``), ``fuse_unk: false`` without byte
fallback, ``dropout``, ``ignore_merges``. Under the legacy normalizer a
``normalized: true`` token (old Llama 2 files) is matched as tokenizers matches it:
normalized to "▁" + the token, so only at the start of a text or after a space, which
it takes (``"Hey </s>sir"`` is ``▁Hey </s> sir``; ``"Hey</s>"`` is text).
"""

from __future__ import annotations

import base64
import copy
import heapq
import os

from bytepair.formats import hf_post
from bytepair.formats.errors import short
from bytepair.formats.sentencepiece import build
from bytepair.models import SentencePiece
from bytepair.specials import flags_of, rstrip_clash

SPACE = "\u2581"
#: Where the exact ``.model`` travels inside a ``tokenizer.json``.
EMBEDDED = "bytepair_sentencepiece_model"
#: The normalizer that, before Metaspace ``prepend_scheme: "first"``, gives
#: sentencepiece's dummy prefix: one more "▁" before a text that starts with a space
#: or "▁" (" a" is ``▁▁a``, as sentencepiece has it, where Metaspace alone has ``▁a``).
SPM_NORMALIZER = [
    {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
    {"type": "Replace", "pattern": {"Regex": "\\A" + SPACE}, "content": SPACE + SPACE},
]


def is_sentencepiece(doc: dict) -> bool:
    """True for a ``tokenizer.json`` of the SentencePiece family."""
    model = doc.get("model") or {}
    pre = doc.get("pre_tokenizer") or {}
    kinds = [pre.get("type")] + [p.get("type") for p in pre.get("pretokenizers") or []]
    # byte_fallback in a byte-level file never applies (every byte is a token).
    byte_fallback = model.get("byte_fallback") and "ByteLevel" not in kinds
    return bool(byte_fallback) or EMBEDDED in model or "Metaspace" in kinds


# -- writing ------------------------------------------------------------------------------


def _merges(pieces: list[tuple[str, float, str]]) -> list[list[str]]:
    """Every cut of a NORMAL piece into two NORMAL pieces, best-scoring piece first."""
    ids = {p: i for i, (p, _, piece_type) in enumerate(pieces) if piece_type == "NORMAL"}
    found = []
    for piece, i in ids.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in ids and right in ids:
                found.append((-pieces[i][1], i, ids[left], left, right))
    return [[left, right] for *_, left, right in sorted(found)]


def _template(model) -> dict | None:
    """The post-processor that puts ``<s>`` / ``</s>`` around texts, as the model does."""
    return hf_post.template(
        model.bos_token if model.add_bos else None,
        model.eos_token if model.add_eos else None,
        model.piece_to_id,
    )


def tokenizer_json(model: SentencePiece) -> dict:
    """The ``tokenizer.json`` of a SentencePiece tokenizer (see the module docstring);
    ValueError for a normalizer HF's components cannot express exactly."""
    settings = model.core.settings()
    inexact = [
        what
        for what, bad in (
            (f"normalization rules ({settings['name']})", settings["has_charsmap"]),
            ("remove_extra_whitespaces", settings["remove_extra_whitespaces"]),
            ("escape_whitespaces off", not settings["escape_whitespaces"]),
            ("treat_whitespace_as_suffix", settings["treat_whitespace_as_suffix"]),
        )
        if bad
    ]
    if inexact:
        raise ValueError(
            f"this SentencePiece model has {', '.join(inexact)}, which tokenizer.json cannot "
            "express exactly; keep the .model file (or .bytepair)"
        )
    pieces = model.pieces
    dummy = settings["add_dummy_prefix"]
    from bytepair.formats.hf import added_token

    normalizer, pre_tokenizer, raw = _shape(model, dummy)
    specials = model.special_tokens
    others = model.hf.get("added")
    if others is None:
        others = [p for p, _, piece_type in pieces if piece_type == "USER_DEFINED"]
    normalized = set(model.hf.get("normalized", ()))
    for token in [*specials, *others]:
        # A token matched in the raw text as read from a tokenizer.json is written so;
        # a .model's user-defined piece is matched in normalized text (spaces as "▁").
        as_read = model.hf and (raw and token not in normalized)
        if not as_read and (" " in token or SPACE in token):
            raise ValueError(
                f"token {token!r} holds a space or '▁': tokenizer.json would match it in "
                "other places than bytepair does; keep the .model file (or .bytepair)"
            )
    if others and model.prefix == "spm" and dummy:
        raise ValueError(
            f"user-defined piece {others[0]!r}: sentencepiece puts the dummy '▁' before "
            "one that starts a text, which tokenizer.json cannot say; keep the .model file"
        )
    entries = [(i, t, True) for t, i in specials.items()]
    entries += [(model.piece_to_id(t), t, False) for t in others]
    added = []
    for i, content, special in sorted(entries):
        entry = added_token(i, content, special, model.token_flags.get(content, ()))
        entry["normalized"] = not raw or content in model.hf.get("normalized", ())
        added.append(entry)
    if "decoder" in model.hf:
        decoder = copy.deepcopy(model.hf["decoder"])
    else:
        decoders = [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ]
        if dummy:
            decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
        decoder = {"type": "Sequence", "decoders": decoders}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": _template(model),
        "decoder": decoder,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": settings["unk_piece"],
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": settings["byte_fallback"],
            "ignore_merges": False,
            "vocab": {piece: i for i, (piece, _, _) in enumerate(pieces)},
            "merges": _merges(pieces),
            EMBEDDED: base64.b64encode(model.to_bytes()).decode("ascii"),
        },
    }


def _metaspace(scheme: str, split: bool) -> dict:
    return {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": scheme, "split": split}


def _shape(model: SentencePiece, dummy: bool) -> tuple[dict | None, dict | None, bool]:
    """(normalizer, pre-tokenizer, added tokens unnormalized) with which ``tokenizers``
    puts the dummy "▁" where the model does (``model.prefix``)."""
    prefix, split = model.prefix, model.split
    if not dummy:
        if split:
            return None, _metaspace("never", True), True
        return {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}, None, True
    if prefix == "each":
        steps = [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
        ]
        return {"type": "Sequence", "normalizers": steps}, None, True
    if prefix in ("first", "always"):
        return None, _metaspace(prefix, split), True
    # sentencepiece's: the first text, also when it starts with a space. The added
    # tokens are matched after the normalizer, so a text after one is not "first".
    steps = [dict(step) for step in SPM_NORMALIZER]
    return {"type": "Sequence", "normalizers": steps}, _metaspace("first", False), False


def config_roles(model: SentencePiece) -> dict[str, str | None]:
    """bos/eos/unk for ``tokenizer_config.json``: the model's own pieces."""
    settings = model.core.settings()
    return {
        "bos_token": settings["bos_piece"] if model.bos_id is not None else None,
        "eos_token": settings["eos_piece"] if model.eos_id is not None else None,
        "unk_token": settings["unk_piece"],
    }


# -- reading ------------------------------------------------------------------------------


def _is_replace(norm: dict, pattern: dict, content: str) -> bool:
    return (
        norm.get("type") == "Replace"
        and norm.get("pattern") == pattern
        and norm.get("content") == content
    )


def _rules(doc: dict, fail) -> tuple[bool, str, bool, str]:
    """(dummy prefix, prefix scheme, Metaspace split, shape) of the file, as
    ``tokenizers`` applies its components (see ``SentencePiece.from_bytes``); the
    shape is "metaspace", "spm" (what :func:`tokenizer_json` writes for a
    ``.model``), "prepend" (Llama 2's legacy normalizer) or "replace" (Gemma's)."""
    from bytepair.formats.hf import _components

    pres = _components(doc.get("pre_tokenizer"), "pretokenizers")
    norms = _components(doc.get("normalizer"), "normalizers")
    if any(_is_replace(n, {"String": " "}, SPACE) for n in norms):
        # Gemma's Split on " " after the normalizer replaced every space: a no-op.
        pres = [
            p
            for p in pres
            if not (
                p.get("type") == "Split"
                and p.get("pattern") == {"String": " "}
                and not p.get("invert")
            )
        ]
    if pres:
        pre = pres[0]
        if len(pres) > 1 or pre.get("type") != "Metaspace":
            kinds = "+".join(str(p.get("type")) for p in pres)
            raise fail(f"pre-tokenizer {kinds} is not supported for a SentencePiece-style BPE")
        if pre.get("replacement", SPACE) != SPACE:
            raise fail(f"Metaspace replacement {pre.get('replacement')!r} is not supported")
        # tokenizers' defaults: prepend_scheme "always", split true.
        scheme = pre.get("prepend_scheme") or "always"
        if pre.get("add_prefix_space") is False:
            scheme = "never"
        if scheme not in ("first", "always", "never"):
            raise fail(f"Metaspace prepend_scheme {scheme!r} is not supported")
        split = bool(pre.get("split", True))
        if norms == SPM_NORMALIZER and scheme == "first" and not split:
            return True, "spm", False, "spm"
        if norms:
            kinds = "+".join(str(n.get("type")) for n in norms)
            raise fail(f"normalizer {kinds} before a Metaspace pre-tokenizer is not supported")
        prefix = "spm" if scheme == "never" else scheme
        return scheme != "never", prefix, split, "metaspace"
    replace = [n for n in norms if _is_replace(n, {"String": " "}, SPACE)]
    prepend = [n for n in norms if n.get("type") == "Prepend" and n.get("prepend") == SPACE]
    if len(replace) == 1 and len(prepend) == 1 and len(norms) == 2:
        return True, "each", False, "prepend"
    if len(replace) == 1 and len(norms) == 1:
        return False, "spm", False, "replace"
    if norms:
        kinds = "+".join(str(n.get("type")) for n in norms)
        raise fail(
            f"normalizer {kinds} is not supported for a SentencePiece-style BPE (only "
            "Replace(' ', '▁'), with Prepend('▁') or a Metaspace pre-tokenizer)"
        )
    raise fail("neither a Metaspace pre-tokenizer nor a Replace(' ', '▁') normalizer")


def read_decoder(decoder, fail):
    """The file's ``decoder`` as ``SentencePiece.from_bytes`` takes it: the steps
    ``tokenizers`` would run, with only the fields that change what they do (a nested
    ``Sequence`` flattened; None for none); ValueError (``fail``) naming a decoder whose
    decoding bytepair does not reproduce.

    >>> read_decoder({"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}, ValueError)
    {'type': 'Metaspace', 'replacement': '▁', 'prepend_scheme': 'always'}
    """
    if decoder is None:
        return None
    if not isinstance(decoder, dict):
        raise fail(f"decoder is not an object: {short(decoder)}")
    if decoder.get("type") != "Sequence":
        return _decoder_step(decoder, fail)
    return {"type": "Sequence", "decoders": list(_flat_steps(decoder, fail))}


def _flat_steps(decoder: dict, fail):
    steps = decoder.get("decoders")
    if not isinstance(steps, list):
        raise fail(f"decoder Sequence without a list of decoders: {short(decoder)}")
    for step in steps:
        if isinstance(step, dict) and step.get("type") == "Sequence":
            yield from _flat_steps(step, fail)
        else:
            yield _decoder_step(step, fail)


def _decoder_step(step, fail) -> dict:
    """One decoder step, checked (see :func:`read_decoder`)."""
    kind = step.get("type") if isinstance(step, dict) else None
    if kind in ("ByteFallback", "Fuse"):
        return {"type": kind}
    if kind == "Replace":
        if step.get("pattern") != {"String": SPACE} or step.get("content") != " ":
            raise fail(
                f"decoder Replace of {short(step.get('pattern'))} by {short(step.get('content'))} "
                "is not supported (only Replace('▁', ' '))"
            )
        return {"type": "Replace", "pattern": {"String": SPACE}, "content": " "}
    if kind == "Strip":
        content, start, stop = step.get("content"), step.get("start"), step.get("stop")
        if content != " " or start not in (0, 1) or stop != 0:
            raise fail(
                f"decoder Strip({short(content)}, {short(start)}, {short(stop)}) is not "
                "supported (only Strip(' ', 1, 0), one leading space)"
            )
        return {"type": "Strip", "content": " ", "start": start, "stop": 0}
    if kind == "Metaspace":
        replacement = step.get("replacement", SPACE)
        scheme = step.get("prepend_scheme") or "always"  # tokenizers' default
        if step.get("add_prefix_space") is False:
            scheme = "never"
        if not isinstance(replacement, str) or len(replacement) != 1:
            raise fail(f"decoder Metaspace replacement {short(replacement)} is not one character")
        if scheme not in ("first", "always", "never"):
            raise fail(f"decoder Metaspace prepend_scheme {short(scheme)} is not supported")
        return {"type": "Metaspace", "replacement": replacement, "prepend_scheme": scheme}
    name = kind if isinstance(kind, str) else short(step)
    raise fail(
        f"decoder {name} is not supported for a SentencePiece-style BPE (only Replace('▁', "
        "' '), ByteFallback, Fuse, Strip and Metaspace, as Llama 2, Mistral and Gemma have)"
    )


def _overlap(a: str, b: str) -> bool:
    """Whether matches of ``a`` and ``b`` can overlap in some text."""
    if a in b or b in a:
        return True
    return any(a.endswith(b[:k]) or b.endswith(a[:k]) for k in range(1, min(len(a), len(b))))


def _added_tokens(doc: dict, shape: str, fail) -> dict[int, dict]:
    """The ``added_tokens`` by id, checked: what ``tokenizers`` would match
    differently from bytepair (which matches every added token in the raw text, before
    the normalizer) is refused, naming the token."""
    added: dict[int, dict] = {}
    unnormalized, normalized = [], []
    for n, entry in enumerate(doc.get("added_tokens") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            raise fail(f"added_tokens[{n}] is not {{content, id, ...}}: {short(entry)}")
        content = entry["content"]
        if not content:
            raise fail(f"added_tokens[{n}] is empty")
        # tokenizers' default: normalized unless special.
        if flags_of(entry) and entry.get("normalized", not entry.get("special")):
            # tokenizers matches it in a second pass, in the normalized text between
            # the other tokens: other edges for single_word, other overlaps.
            raise fail(
                f"added token {short(content)} has {flags_of(entry)[0]} true and normalized "
                "true: not supported (with normalized false it is)"
            )
        if entry.get("normalized", not entry.get("special")):
            if shape != "metaspace" and (" " in content or SPACE in content):
                raise fail(
                    f"added token {short(content)} has normalized true and holds a space or "
                    "'▁' with this file's normalizer (tokenizers normalizes the token too): "
                    "not supported"
                )
            normalized.append(content)
        else:
            if shape == "spm":
                raise fail(f"added token {short(content)} has normalized false: not supported")
            unnormalized.append(content)
        added[entry.get("id")] = entry
    flagged = {e["content"]: flags_of(e) for e in added.values() if flags_of(e)}
    clash = rstrip_clash(flagged, [e["content"] for e in added.values()])
    if clash:
        raise fail(
            f"added token {short(clash[1])} starts with whitespace, which the rstrip token "
            f"{short(clash[0])} takes when it follows it: not supported"
        )
    if normalized and unnormalized:
        # tokenizers matches the unnormalized ones first, then the rest: the same as one
        # leftmost-longest pass unless two of them can overlap.
        for a in normalized:
            clash = next((b for b in unnormalized if _overlap(a, b)), None)
            if clash is not None:
                raise fail(
                    f"added tokens {short(a)} (normalized) and {short(clash)} (not) can "
                    "overlap in a text: tokenizers matches them in two passes; not supported"
                )
    return added


def _check_merges(pieces: list[tuple[str, float, str]], made: list[tuple[str, str]], fail):
    """Merging by piece score (sentencepiece) equals merging by rank (tokenizers) when
    the merges are every cut of every piece into two pieces, those of one piece one
    after another (what transformers' converter writes); else refused, naming a piece.
    """
    normal = {p for p, _, piece_type in pieces if piece_type == "NORMAL"}
    merges = set(made)
    last = ""
    done: set[str] = set()
    user = {p for p, _, piece_type in pieces if piece_type == "USER_DEFINED"}
    for rank, (left, right) in enumerate(made):
        if left in user or right in user:
            continue  # an added token is never a symbol of a word: the merge never applies
        if left not in normal or right not in normal:
            odd = left if left not in normal else right
            raise fail(
                f"model.merges[{rank}] ({short(left)}, {short(right)}) merges {short(odd)}, "
                "an added or byte token: not supported"
            )
        piece = left + right
        if piece != last:
            if piece in done:
                raise fail(
                    f"model.merges[{rank}]: the merges making {short(piece)} are not one after "
                    "another (not a converted SentencePiece model): not supported"
                )
            done.add(last)
            last = piece
    # Both sides of a cut are pieces, so neither is longer than the longest other piece:
    # only those cuts are tried (every cut of a huge piece was quadratic in its length:
    # minutes for a damaged file's piece of a million characters).
    longest = heapq.nlargest(2, map(len, normal)) + [0, 0]
    for piece in normal:
        n = len(piece)
        other = longest[1] if n == longest[0] else longest[0]
        for cut in range(max(1, n - other), min(n - 1, other) + 1):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal and (left, right) not in merges:
                raise fail(
                    f"piece {short(piece)} is {short(left)} + {short(right)}, which is not a "
                    "merge (not a converted SentencePiece model: tokenizers would not merge "
                    "it, SentencePiece would): not supported"
                )


def config_specials(model: SentencePiece) -> dict[str, int]:
    """The special tokens ``tokenizer_config.json`` lists: the CONTROL pieces and
    ``<unk>`` (a piece of its own type)."""
    return {**model.special_tokens, model.id_to_piece(model.unk_id): model.unk_id}


def from_doc(doc: dict, path: str | os.PathLike) -> SentencePiece:
    """The SentencePiece model in a parsed ``tokenizer.json``."""

    def fail(message: str):
        return ValueError(f"{path}: {message}")

    model = doc["model"]
    if model.get("type", "BPE") != "BPE":
        raise fail(f"model type {model.get('type')!r}: only BPE SentencePiece models are supported")
    if model.get("dropout") not in (None, 0, 0.0):
        raise fail(f"model.dropout {short(model['dropout'])} makes encoding random: not supported")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise fail(f"model.{key} {short(model[key])} is not supported")
    if model.get("ignore_merges"):
        raise fail("model.ignore_merges true is not supported for a SentencePiece-style BPE")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or sorted(vocab.values()) != list(range(len(vocab))):
        raise fail("model.vocab must give the ids 0..n-1, each once")
    by_id = sorted(vocab, key=vocab.__getitem__)
    # The template's BOS/EOS (hf_post) are the model's <s> / </s>.
    frame = hf_post.read_frame(doc, vocab.get, fail)
    add_bos, add_eos = frame.get("add_bos", False), frame.get("add_eos", False)
    bos, eos = frame.get("bos_token", "<s>"), frame.get("eos_token", "</s>")
    dummy, prefix, split, shape = _rules(doc, fail)
    added = _added_tokens(doc, shape, fail)
    # Under Prepend("▁"), tokenizers matches a normalized token as "▁" + the token.
    normalized = [
        e["content"]
        for i, e in sorted(added.items())
        if shape == "prepend" and e.get("normalized", not e.get("special"))
    ]
    for i, entry in added.items():
        if not isinstance(i, int) or i >= len(by_id) or by_id[i] != entry["content"]:
            raise fail(f"added token {short(entry['content'])} has id {short(i)}, not its vocab id")
    options = {
        "decoder": read_decoder(doc.get("decoder"), fail),
        "add_bos": add_bos,
        "add_eos": add_eos,
        "prefix": prefix,
        "split": split,
        "added": sorted(e["content"] for e in added.values() if not e.get("special")),
        "specials": [e["content"] for i, e in sorted(added.items()) if e.get("special")],
        "normalized": normalized,
        "token_flags": {e["content"]: flags_of(e) for e in added.values() if flags_of(e)},
    }
    if EMBEDDED in model:
        embedded = SentencePiece.from_bytes(base64.b64decode(model[EMBEDDED]), str(path), **options)
        same_frame = (not add_bos or embedded.bos_token == bos) and (
            not add_eos or embedded.eos_token == eos
        )
        if [p for p, _, _ in embedded.pieces] == by_id and same_frame:
            return embedded
    unk = model.get("unk_token") or "<unk>"
    byte_fallback = bool(model.get("byte_fallback"))
    first_rank: dict[str, int] = {}
    made: list[tuple[str, str]] = []
    merges = model.get("merges") or []
    for rank, entry in enumerate(merges):
        left, right = entry.split(" ", 1) if isinstance(entry, str) else entry
        for part in (left, right, left + right):
            if part not in vocab:
                raise fail(
                    f"model.merges[{rank}] ({short(left)}, {short(right)}): {short(part)} is not in vocab"
                )
        first_rank.setdefault(left + right, rank)
        made.append((left, right))
    if not byte_fallback and not model.get("fuse_unk"):
        # tokenizers then gives one <unk> per unknown character; sentencepiece one a run.
        raise fail("model.fuse_unk false without byte_fallback is not supported")
    pieces = []
    for i, piece in enumerate(by_id):
        if piece == unk:
            piece_type = "UNKNOWN"
        elif i in added and added[i].get("special"):
            piece_type = "CONTROL"
        elif i in added and piece not in first_rank and (" " in piece or SPACE in piece):
            # Matched in the raw text only: never made by merging spaces.
            piece_type = "CONTROL"
        elif i in added and "single_word" in flags_of(added[i]):
            # Matched in the raw text only: where single_word drops it, it is text
            # (sentencepiece would match a user-defined piece there).
            piece_type = "CONTROL"
        elif i in added and piece not in first_rank:
            piece_type = "USER_DEFINED"
        elif byte_fallback and len(piece) == 6 and piece.startswith("<0x") and piece[5] == ">":
            piece_type = "BYTE"
        else:
            piece_type = "NORMAL"
        score = -float(first_rank.get(piece, len(merges) + i)) if piece_type == "NORMAL" else 0.0
        pieces.append((piece, score, piece_type))
    _check_merges(pieces, made, fail)
    data = build(
        pieces,
        byte_fallback=byte_fallback,
        add_dummy_prefix=dummy,
        unk_piece=unk,
        bos_piece=bos,
        eos_piece=eos,
    )
    return SentencePiece.from_bytes(data, str(path), **options)
