r"""Hugging Face files: ``tokenizer.json`` for byte-level BPE models (read and
write; the SentencePiece family is in ``hf_sentencepiece``), and the folder ``transformers.AutoTokenizer.from_pretrained`` loads
(``tokenizer.json`` + ``tokenizer_config.json`` + ``special_tokens_map.json``).

A component bytepair cannot reproduce exactly (a StripAccents normalizer, ...) is refused with an error naming the file and component,
never silently changed. Normalizers NFC, NFKC, NFD, NFKD, Lowercase (Qwen2, GPT-NeoX),
Replace, Prepend and Strip, alone or in a Sequence (``bytepair.normalizers``), and
non-special added tokens matched on the raw text (Qwen2.5's ``<tool_call>``) are read,
and written back. A Replace regex is held to the same rules as a Split regex (below).

The pre-tokenizer may be a Sequence of steps before ``ByteLevel`` (DeepSeek V3: three
Splits), each splitting every piece of the one before: ``Split`` (a regex or a string,
every behavior, ``invert``), ``Digits``, ``Punctuation``, ``Whitespace`` and
``WhitespaceSplit`` (read as Splits, ``bytepair.split``), and ``ByteLevel``'s own regex
(``use_regex``). The first Isolated Split is the model's ``pattern``, the rest its
``splits``. Refused by name: other pre-tokenizers, anything after ``ByteLevel``,
``ByteLevel`` with ``add_prefix_space``, and Split regexes using ``\w``, ``\W``, ``\b``,
``\B`` or POSIX classes (Oniguruma, tokenizers' engine, matches other characters with
them). The BPE option ``ignore_merges`` (Llama 3: a pre-token that is a token is that
token) is read and written back; ``dropout``, ``byte_fallback``,
``continuing_subword_prefix`` and ``end_of_word_suffix`` are refused.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from bytepair import normalizers
from bytepair._files import atomic_write
from bytepair.formats import hf_post, hf_sentencepiece
from bytepair.formats.byte_table import str_to_token, token_to_str
from bytepair.formats.errors import parse_json, short
from bytepair.formats.gpt2 import json_bytes, token_strings
from bytepair.models import BPE, Model, SentencePiece
from bytepair.models.base import registered
from bytepair.patterns import PATTERNS
from bytepair.specials import flags_of, rstrip_clash
from bytepair.split import BEHAVIORS, Split

SUFFIXES = (".json",)

# Hugging Face runs Split regexes on Oniguruma (Ruby syntax), where `X{1,3}+` is not a
# possessive quantifier but a repetition of `X{1,3}` — so cl100k's `\p{N}{1,3}+` would
# match "1887" whole instead of "188" + "7". At the end of an alternative, possessive
# and greedy `{1,3}` match the same, so exports use the greedy form.
_ONIG_REWRITES = [(r"\p{N}{1,3}+|", r"\p{N}{1,3}|")]


#: The special-token roles transformers knows, and their config keys.
ROLES = ("bos_token", "eos_token", "unk_token", "pad_token")


def sniff(head: bytes) -> bool:
    """True if a JSON file starting with ``head`` looks like a tokenizer.json."""
    return head.lstrip().startswith(b"{") and b'"model"' in head or b'"added_tokens"' in head


def to_oniguruma(pattern: str) -> str:
    """The pattern as Hugging Face's regex engine must see it to split identically."""
    for ours, theirs in _ONIG_REWRITES:
        pattern = pattern.replace(ours, theirs)
    return pattern


def from_oniguruma(pattern: str) -> str:
    """Undoes :func:`to_oniguruma` for the built-in patterns, so they round-trip."""
    for builtin in PATTERNS.values():
        if pattern == to_oniguruma(builtin):
            return builtin
    return pattern


def added_token(i: int, content: str, special: bool = True, flags: tuple[str, ...] = ()) -> dict:
    """An ``added_tokens`` entry: matched in the raw text as it is, with ``flags``
    (``bytepair.specials.TOKEN_FLAGS``)."""
    return {
        "id": i,
        "content": content,
        "single_word": "single_word" in flags,
        "lstrip": "lstrip" in flags,
        "rstrip": "rstrip" in flags,
        "normalized": False,
        "special": special,
    }


def tokenizer_json(model: BPE) -> dict:
    """The ``tokenizer.json`` document of a byte-level BPE tokenizer.

    ``tokenizers.Tokenizer.from_file`` loads it and encodes text to the same ids as
    bytepair with ``allowed_special="all"``: special tokens are ``added_tokens``
    (matched before pre-tokenization), the pattern is a ``Split`` pre-tokenizer followed
    by ``ByteLevel`` (no regex of its own), and the model is a plain ``BPE``. Special
    tokens also appear in the model's vocab (as GPT-2's file has them).
    """
    special_tokens = dict(model.special_tokens)
    added_tokens = dict(model.added_tokens)
    strings = token_strings(model.vocab, {**special_tokens, **added_tokens}, "tokenizer.json: ")
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": False,
    }
    steps = [] if model.pattern is None else [Split(model.pattern)]
    steps += model.splits
    if not steps:
        pre_tokenizer = byte_level
    else:
        splits = [
            {
                "type": "Split",
                "pattern": {"Regex": to_oniguruma(step.pattern)},
                "behavior": step.behavior,
                "invert": step.invert,
            }
            for step in steps
        ]
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [*splits, byte_level]}
    entries = [(i, t, True) for t, i in special_tokens.items()]
    entries += [(i, t, False) for t, i in added_tokens.items()]
    flags = model.token_flags
    added = [added_token(i, t, special, flags.get(t, ())) for i, t, special in sorted(entries)]
    nodes = [normalizers.to_json(step) for step in model.normalizer]
    normalizer = (
        None
        if not nodes
        else nodes[0]
        if len(nodes) == 1
        else {"type": "Sequence", "normalizers": nodes}
    )
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": _post_processor(model),
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": model.ignore_merges,
            "vocab": strings,
            "merges": [[token_to_str(a), token_to_str(b)] for a, b in model.merges],
        },
    }


def _post_processor(model: Model) -> dict:
    """ByteLevel (offsets only), then the template of the model's BOS/EOS, if any."""
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": False,
    }
    frame = hf_post.template(
        model.bos_token if model.add_bos else None,
        model.eos_token if model.add_eos else None,
        model.special_tokens.__getitem__,
    )
    if frame is None:
        return byte_level
    return {"type": "Sequence", "processors": [byte_level, frame]}


def config_files(
    model: Model,
    *,
    tokenizer_class: str | None = "PreTrainedTokenizerFast",
    eos_token: str | None = "<|endoftext|>",
    bos_token: str | None = None,
    pad_token: str | None = None,
    unk_token: str | None = None,
    model_max_length: int | None = None,
) -> dict[str, dict]:
    """``tokenizer_config.json`` and ``special_tokens_map.json`` for a tokenizer: every
    special token in ``added_tokens_decoder``, and the roles transformers reads
    (``eos_token`` defaults to ``<|endoftext|>`` when the tokenizer has it)."""
    specials = registered(CONFIG_SPECIALS, model)(model)
    roles = {"bos_token": bos_token, "eos_token": eos_token, "unk_token": unk_token}
    roles["pad_token"] = pad_token
    for role, token in list(roles.items()):
        if token is None:
            continue
        if token not in specials:
            if role == "eos_token" and token == "<|endoftext|>":
                roles[role] = None  # the default, and this tokenizer has no such token
                continue
            raise ValueError(
                f"{role} {short(token)} is not one of the special tokens ({', '.join(specials) or 'none'}); "
                "add it first with tok.with_special_tokens"
            )
    flags = model.token_flags
    decoder = {
        str(i): {
            "content": t,
            "lstrip": "lstrip" in flags.get(t, ()),
            "normalized": False,
            "rstrip": "rstrip" in flags.get(t, ()),
            "single_word": "single_word" in flags.get(t, ()),
            "special": True,
        }
        for t, i in sorted(specials.items(), key=lambda item: item[1])
    }
    config: dict = {"added_tokens_decoder": decoder}
    special_map: dict = {}
    for role, token in roles.items():
        if token is not None:
            config[role] = token
            special_map[role] = token
    extra = [t for t in specials if t not in special_map.values()]
    if extra:
        config["additional_special_tokens"] = extra
        special_map["additional_special_tokens"] = extra
    config["clean_up_tokenization_spaces"] = False
    config["model_max_length"] = model_max_length or 1_000_000_000_000_000_019_884_624_838_656
    if tokenizer_class:
        config["tokenizer_class"] = tokenizer_class
    return {"tokenizer_config.json": config, "special_tokens_map.json": special_map}


def write(model: Model, path: str | os.PathLike, **options) -> None:
    """A ``.json`` path gets ``tokenizer.json`` alone; any other path is a folder
    (created if needed) with ``tokenizer.json`` and the two config files."""
    path = Path(path)
    doc = registered(JSON, model)(model)
    if path.suffix == ".json":
        if options:
            raise ValueError(
                f"{path}: {', '.join(options)} go in tokenizer_config.json; write a folder "
                "(a path without .json) to get it"
            )
        atomic_write(path, json_bytes(doc))
        return
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{path}: exists and is not a folder")
    options = {**registered(ROLE_DEFAULTS, model)(model), **options}
    config = config_files(model, **options)
    # transformers re-adds these tokens over tokenizer.json's: the same flags.
    keys = ("normalized", "lstrip", "rstrip", "single_word")
    written = {str(e["id"]): e for e in doc.get("added_tokens") or []}
    for i, entry in config["tokenizer_config.json"]["added_tokens_decoder"].items():
        entry.update({key: written[i][key] for key in keys if i in written})
    path.mkdir(parents=True, exist_ok=True)
    atomic_write(path / "tokenizer.json", json_bytes(doc))
    for name, content in config.items():
        atomic_write(path / name, json_bytes(content))


def _components(node: dict | None, key: str) -> list[dict]:
    """A pre-tokenizer/normalizer/decoder as a flat list (Sequences unrolled)."""
    if node is None:
        return []
    if not isinstance(node, dict):
        raise ValueError(f"expected an object, got {short(node)}")
    if node.get("type") == "Sequence":
        out = []
        for child in node.get(key) or []:
            out += _components(child, key)
        return out
    return [node]


#: ``tokenizers``' Punctuation: ``char::is_ascii_punctuation`` or a Unicode P* category.
PUNCTUATION = r"[\p{P}!-/:-@\[-`{-~]"

#: Oniguruma's ``\w`` (tokenizers' regex engine) as bytepair's engine writes it: ours
#: with ², ³, ¹, ¼, ½, ¾ and without the joiners U+200C and U+200D (checked on every
#: character up to U+2FFFF).
ONIGURUMA_WORD = r"\w\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE}&&[^\x{200C}\x{200D}]"

#: tokenizers' Whitespace pre-tokenizer: runs of word characters, runs of other
#: non-space characters; spaces dropped (``\w+|[^\w\s]+``, inverted, Removed).
WHITESPACE = rf"[{ONIGURUMA_WORD}]+|[^\s[{ONIGURUMA_WORD}]]+"

#: Regex escapes whose characters differ between Oniguruma and bytepair's engine
#: (``\w`` and what is made of it), and POSIX brackets (ASCII-only in ours).
_ENGINE_DEPENDENT = re.compile(r"(?<!\\)(?:\\\\)*(\\[wWbB])|(\[:\^?[a-z]+:\])")


#: Oniguruma's ``\h`` is a hex digit, ``\R`` a line break, ``\X`` a grapheme cluster;
#: ``\K`` and ``\Z`` have no equal in bytepair's engine.
_ONIGURUMA_ONLY = re.compile(r"(?<!\\)(?:\\\\)*(\\[hHRXKZG])")


def oniguruma_difference(regex: str, anchors: bool = True) -> str | None:
    r"""What in ``regex`` Oniguruma (``tokenizers``' regex engine, Ruby syntax) reads
    otherwise than bytepair's engine, in words; None when nothing is. With ``anchors``,
    also ``^`` and ``$`` (Oniguruma: at every line's start and end) and the flags m, s, x.

    >>> oniguruma_difference(r"\s+"), oniguruma_difference(r"^ +")
    (None, '^, which Oniguruma matches at the start of every line')
    """
    found = _ENGINE_DEPENDENT.search(regex)
    if found:
        return (
            f"{found.group(1) or found.group(2)}, which matches other characters in "
            "tokenizers' regex engine (Oniguruma) than in bytepair's"
        )
    if re.search(r"(?<!\\)\{\d+(?:,\d*)?\}\+", regex):
        return (
            "{n,m}+, which tokenizers' regex engine (Oniguruma) reads as a repetition of "
            "{n,m}, not as a possessive quantifier (write (?:X{n,m})+ or X{n,m})"
        )
    found = _ONIGURUMA_ONLY.search(regex)
    if found:
        return f"{found.group(1)}, which Oniguruma reads otherwise than bytepair's engine"
    if not anchors:
        return None
    escaped, depth, class_start = False, 0, -1
    for n, c in enumerate(regex):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif depth:
            # Inside a class (they nest: [a-z&&[^aeiou]]); a "]" first in one is literal.
            if c == "^" and n == class_start:
                class_start += 1
            elif c == "[":
                depth, class_start = depth + 1, n + 1
            elif c == "]" and n != class_start:
                depth -= 1
        elif c == "[":
            depth, class_start = 1, n + 1
        elif c in "^$":
            where = "start" if c == "^" else "end"
            return f"{c}, which Oniguruma matches at the {where} of every line"
        elif c == "(" and re.match(r"\(\?[a-zA-Z-]*[msx]", regex[n:]):
            return "the flag m, s or x, which Oniguruma (Ruby syntax) reads otherwise"
    return None


def split_of(pre: dict, n: int, fail) -> Split:
    """The Split a pre-tokenizer before ByteLevel is (``n``: its position), or the
    error ``fail(message)`` naming it. ``Digits``, ``Punctuation``, ``WhitespaceSplit``
    and ``Whitespace`` are Splits, as ``tokenizers`` defines them."""
    component = pre.get("type")
    if component == "Split":
        spec = pre.get("pattern") or {}
        if "Regex" in spec:
            regex = spec["Regex"]
            if not isinstance(regex, str) or not regex:
                raise fail(f"pre-tokenizer Split has pattern {short(spec)}; expected a regex")
            # Not the anchors: GPT-2's and cl100k's "\s++$" is at the end of the text in
            # both engines (what \s++ leaves is no newline).
            difference = oniguruma_difference(regex, anchors=False)
            if difference:
                raise fail(
                    f"pre-tokenizer Split pattern {short(regex)} uses {difference}: not supported"
                )
            regex = from_oniguruma(regex)
        elif "String" in spec:
            regex = re.escape(spec["String"])
        else:
            raise fail(f"pre-tokenizer Split has no pattern: {short(pre)}")
        behavior = pre.get("behavior")
        if behavior not in BEHAVIORS:
            raise fail(
                f"pre-tokenizer Split with behavior {short(behavior)} is not supported "
                f"(only {', '.join(BEHAVIORS)})"
            )
        return Split(regex, behavior, bool(pre.get("invert")))
    if component == "Digits":
        # Each digit alone, or runs of them (char::is_numeric: \p{N}).
        return Split(r"\p{N}", "Isolated" if pre.get("individual_digits") else "Contiguous")
    if component == "Punctuation":
        behavior = pre.get("behavior", "Isolated")
        if behavior not in BEHAVIORS:
            raise fail(
                f"pre-tokenizer Punctuation with behavior {short(behavior)} is not supported"
            )
        return Split(PUNCTUATION, behavior)
    if component == "WhitespaceSplit":
        return Split(r"\s", "Removed")
    if component == "Whitespace":
        return Split(WHITESPACE, "Removed", invert=True)
    raise fail(
        f"pre-tokenizer {component} (at position {n}) is not supported; bytepair reads "
        "byte-level BPE files: Split, Digits, Punctuation, Whitespace or WhitespaceSplit "
        "steps, then ByteLevel"
    )


def load_doc(path: Path) -> dict:
    """The parsed ``tokenizer.json`` (ValueError naming the file when it is not one)."""
    doc = parse_json(path.read_bytes(), path, "tokenizer.json file")
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise ValueError(f'{path}: not a Hugging Face tokenizer.json file (no "model" object)')
    return doc


def read_tokenizer_json(
    path: str | os.PathLike, doc: dict | None = None
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], dict[str, int], str | None]:
    """Reads a Hugging Face ``tokenizer.json`` of a byte-level BPE model (GPT-2, RoBERTa,
    Llama 3, files written by :func:`write`...).

    Returns (vocab: id -> bytes, merges, special tokens: text -> id, pattern). The pattern
    is the ``Split`` pre-tokenizer's regex, or GPT-2's when the ``ByteLevel``
    pre-tokenizer splits by its own regex (``use_regex``, the default). Added tokens
    marked special become special tokens. A file with a normalizer or non-special added
    tokens is refused here (they have no place in the result): :func:`read` loads it.
    """
    vocab, merges, specials, pattern, options = read_parts(path, doc)
    what = {
        "normalizer": f"normalizer {normalizers.describe(options['normalizer'])}",
        "added_tokens": "non-special added tokens",
        "splits": "pre-tokenizer steps after the first Split",
        "ignore_merges": "model.ignore_merges true",
        "frame": "a post-processor that adds BOS/EOS",
        "token_flags": "added tokens with lstrip, rstrip or single_word",
    }
    for key, description in what.items():
        if options[key]:
            raise ValueError(
                f"{path}: has {description}; load it with bytepair.load (formats.hf.read)"
            )
    return vocab, merges, specials, pattern


def read_parts(
    path: str | os.PathLike, doc: dict | None = None
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], dict[str, int], str | None, dict]:
    """:func:`read_tokenizer_json` and also the options of :class:`~bytepair.models.BPE`
    the file sets: ``added_tokens`` (the non-special ones, text -> id), ``normalizer``
    (its steps: ``("NFC",)``..., ``bytepair.normalizers``), ``splits`` (the pre-tokenizer steps after the first
    Split) and ``ignore_merges``."""
    path = Path(path)

    def fail(message: str):
        return ValueError(f"{path}: {message}")

    doc = load_doc(path) if doc is None else doc
    model = doc["model"]
    # Files from old versions of tokenizers (GPT-2's) have no "type"; vocab + merges is BPE.
    model_type = model.get("type", "BPE" if "merges" in model else None)
    if model_type != "BPE":
        raise fail(
            f"model type {short(model_type)} is not supported; only byte-level BPE models are"
        )
    if model.get("dropout") not in (None, 0, 0.0):
        raise fail(f"model.dropout {short(model['dropout'])} makes encoding random: not supported")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise fail(f"model.{key} {short(model[key])} is not supported in a byte-level BPE")

    try:
        nodes = _components(doc.get("normalizer"), "normalizers")
        pretokenizers = _components(doc.get("pre_tokenizer"), "pretokenizers")
        decoders = _components(doc.get("decoder"), "decoders")
    except ValueError as e:
        raise fail(str(e)) from None
    normalizer = []
    for node in nodes:
        try:
            step = normalizers.from_json(node)
        except ValueError as e:
            raise fail(str(e)) from None
        if isinstance(step, normalizers.Replace) and step.regex:
            difference = oniguruma_difference(step.pattern)
            if difference:
                raise fail(
                    f"normalizer Replace pattern {short(step.pattern)} uses {difference}: "
                    "not supported"
                )
        normalizer.append(step)
    normalizer = tuple(normalizer)
    steps: list[Split] = []
    byte_level = None
    for n, pre in enumerate(pretokenizers):
        component = pre.get("type")
        if byte_level is not None:
            raise fail(
                f"pre-tokenizer {component} (at position {n}) after ByteLevel is not "
                "supported; bytepair reads byte-level BPE files: Splits, then ByteLevel"
            )
        if component == "ByteLevel":
            byte_level = pre
        else:
            steps.append(split_of(pre, n, fail))
    if byte_level is None:
        raise fail("no ByteLevel pre-tokenizer: not a byte-level BPE tokenizer")
    if byte_level.get("add_prefix_space"):
        # tokenizers then puts a space before each piece that has none: text bytepair's
        # ids would lack.
        raise fail("pre-tokenizer ByteLevel with add_prefix_space true is not supported")
    if byte_level.get("use_regex", True):
        # ByteLevel splits each piece by GPT-2's regex itself, after any Split.
        steps.append(Split(PATTERNS["gpt2"]))
    pattern: str | None = None
    if steps and steps[0].behavior == "Isolated":
        # The first Isolated Split is the pattern (the fast path); the rest split its
        # pieces further.
        pattern, steps = steps[0].pattern, steps[1:]
    for dec in decoders:
        if dec.get("type") != "ByteLevel":
            raise fail(f"decoder {dec.get('type')} is not supported; expected ByteLevel")

    specials: dict[str, int] = {}
    added: dict[str, int] = {}
    normalized_tokens: list[str] = []
    token_flags: dict[str, tuple[str, ...]] = {}
    for n, entry in enumerate(doc.get("added_tokens") or []):
        try:
            content, i = entry["content"], entry["id"]
        except (TypeError, KeyError):
            raise fail(f"added_tokens[{n}] is not {{content, id, ...}}: {short(entry)}") from None
        if not isinstance(content, str) or not content or not isinstance(i, int) or i < 0:
            raise fail(f"added_tokens[{n}] has content {short(content)} and id {short(i)}")
        flags = flags_of(entry)
        if flags and entry.get("normalized", not entry.get("special")):
            # tokenizers matches it in a second pass, in the (normalized) text between
            # the other tokens: other edges for single_word, other overlaps.
            raise fail(
                f"added token {short(content)} has {flags[0]} true and normalized true: "
                "not supported (with normalized false it is)"
            )
        if flags:
            token_flags[content] = flags
        if normalizer and entry.get("normalized", not entry.get("special")):
            # tokenizers then matches it in the normalized text, not the text as given.
            normalized_tokens.append(content)
        (specials if entry.get("special") else added)[content] = i
    clash = rstrip_clash(token_flags, [*specials, *added])
    if clash:
        raise fail(
            f"added token {short(clash[1])} starts with whitespace, which the rstrip token "
            f"{short(clash[0])} takes when it follows it: not supported"
        )
    raw_tokens = [t for t in (*specials, *added) if t not in normalized_tokens]
    for content in normalized_tokens:
        if not found_alike(content, normalizer, raw_tokens):
            raise fail(
                f"added token {short(content)} has normalized true with normalizer "
                f"{normalizers.describe(normalizer)}: not supported (tokens matched on the raw "
                "text, and runs of ASCII whitespace under NFC, NFD or Lowercase, are)"
            )

    special_ids = {*specials.values(), *added.values()}
    raw_vocab = model.get("vocab")
    if not isinstance(raw_vocab, dict):
        raise fail("model.vocab must be an object {token: id}")
    vocab: dict[int, bytes] = {}
    where = f"{path}: model.vocab: "
    for token, i in raw_vocab.items():
        if type(i) is not int or i < 0:
            raise fail(
                f"model.vocab entry {short(token)} has id {short(i)}; expected a non-negative int"
            )
        if i in special_ids:
            continue  # special tokens are text, not byte-level strings
        if i in vocab:
            raise fail(f"model.vocab gives id {i} to two tokens")
        vocab[i] = str_to_token(token, where)
    for content, i in specials.items():
        vocab[i] = content.encode("utf-8")

    raw_merges = model.get("merges")
    if not isinstance(raw_merges, list):
        raise fail("model.merges must be a list")
    merges = []
    for n, entry in enumerate(raw_merges):
        parts = entry.split(" ") if type(entry) is str else entry
        if (
            type(parts) is not list
            or len(parts) != 2
            or type(parts[0]) is not str
            or type(parts[1]) is not str
            or not parts[0]
            or not parts[1]
        ):
            raise fail(
                f'model.merges[{n}] is {short(entry)}; expected "left right" or ["left", "right"]'
            )
        try:
            merges.append((str_to_token(parts[0]), str_to_token(parts[1])))
        except ValueError as e:
            raise fail(f"model.merges[{n}]: {e}") from None
    options = {
        "added_tokens": added,
        "normalizer": normalizer,
        "splits": tuple(steps),
        "ignore_merges": bool(model.get("ignore_merges")),
        "token_flags": token_flags,
        # BOS/EOS the post-processor puts around each text (hf_post), for with_options.
        "frame": hf_post.read_frame(doc, lambda t: specials.get(t, added.get(t)), fail),
    }
    return vocab, merges, specials, pattern, options


#: What a token matched in normalized text may be made of, to be matched in the text
#: as given instead (see :func:`found_alike`).
ASCII_WHITESPACE = frozenset(" \t\n\r")


def found_alike(token: str, normalizer: tuple, raw_tokens: list[str]) -> bool:
    """Is an added token that ``tokenizers`` matches in the normalized text (``normalized:
    true``) found at the same places in the text as given? So for a run of ASCII
    whitespace (GPT-NeoX's indentation tokens) under NFC, NFD and Lowercase: they never
    make, remove or move such a character (NFKC does: U+3000 becomes a space) — as long
    as no token matched first, on the raw text, holds whitespace too. Never under
    Replace, Prepend or Strip: tokenizers applies them to the text around such a token
    before finding it, so they see other segment edges than bytepair would.

    >>> found_alike("    ", ("NFC",), ["<|endoftext|>"]), found_alike("    ", ("NFKC",), [])
    (True, False)
    """
    return (
        set(token) <= ASCII_WHITESPACE
        and normalizers.keeps_text_cuts(normalizer)
        and not {"NFKC", "NFKD"} & set(normalizer)
        and not any(ASCII_WHITESPACE & set(t) for t in raw_tokens)
    )


def read(path: str | os.PathLike) -> Model:
    """Loads a ``tokenizer.json`` file, or a folder holding one."""
    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    doc = load_doc(path)
    if hf_sentencepiece.is_sentencepiece(doc):
        return hf_sentencepiece.from_doc(doc, path)
    vocab, merges, special_tokens, pattern, options = read_parts(path, doc)
    frame = options.pop("frame")
    try:
        return BPE(vocab, merges, special_tokens, pattern, **options).with_options(**frame)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


# Per model kind: the tokenizer.json document, the roles (bos/eos/unk) the config files
# get by default, and the special tokens they list.
JSON = {BPE: tokenizer_json, SentencePiece: hf_sentencepiece.tokenizer_json}
ROLE_DEFAULTS = {
    BPE: lambda model: {
        f"{which}_token": getattr(model, f"{which}_token")
        for which in ("bos", "eos")
        if getattr(model, f"{which}_token") is not None
    },
    SentencePiece: lambda model: {"eos_token": None, **hf_sentencepiece.config_roles(model)},
}
CONFIG_SPECIALS = {
    BPE: lambda model: dict(model.special_tokens),
    SentencePiece: hf_sentencepiece.config_specials,
}
WRITERS = dict.fromkeys(JSON, write)
