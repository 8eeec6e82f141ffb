"""A ``tokenizer.json``'s post-processor, read as the frame of every text and written
from it (``add_bos`` / ``add_eos`` with ``bos_token`` / ``eos_token``: see
:func:`bytepair.models.base.with_frame`), for every model kind.

``tokenizers`` runs the post-processor after encoding when asked to add special tokens
(``encode(text)``'s default, transformers' ``add_special_tokens=True``). What it can do
to one text's ids, and what bytepair reads of it:

- ``TemplateProcessing``: its ``single`` template, special tokens around ``$A`` — at
  most one before (the BOS) and one after (the EOS);
- ``RobertaProcessing`` / ``BertProcessing``: ``cls`` before, ``sep`` after;
- ``ByteLevel``: nothing (it only trims offsets);
- a ``Sequence`` of these, with at most one that adds tokens.

Anything else (two tokens before ``$A``, a template id that is not the token's id in
the vocabulary, an unknown processor) is refused by name: we would give other ids.
"""

from __future__ import annotations

from bytepair.quoting import short

#: Post-processors that never change a text's ids (they move offsets only).
NO_IDS = ("ByteLevel",)


def _template_frame(proc: dict, fail) -> tuple[list[str], list[str], dict[str, list[int]]]:
    """(tokens before ``$A``, tokens after it, ids the processor gives each token)."""
    single = proc.get("single")
    if not isinstance(single, list):
        raise fail("post_processor TemplateProcessing has no single template")
    before: list[str] = []
    after: list[str] = []
    seen_text = False
    for item in single:
        if not isinstance(item, dict) or len(item) != 1:
            raise fail(f"post_processor TemplateProcessing item {short(item)} is not understood")
        if "Sequence" in item:
            if seen_text or item["Sequence"].get("id") != "A":
                raise fail("post_processor TemplateProcessing's single template must hold $A once")
            seen_text = True
        elif "SpecialToken" in item:
            (after if seen_text else before).append(item["SpecialToken"].get("id"))
        else:
            raise fail(f"post_processor TemplateProcessing item {short(item)} is not understood")
    if not seen_text:
        raise fail("post_processor TemplateProcessing's single template has no $A")
    ids: dict[str, list[int]] = {}
    for name, entry in (proc.get("special_tokens") or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("ids"), list):
            ids[name] = entry["ids"]
    return before, after, ids


def read_frame(doc: dict, id_of, fail) -> dict:
    """The frame options (``bos_token``, ``add_bos``, ``eos_token``, ``add_eos``) of a
    parsed ``tokenizer.json``; ``id_of(token)`` is the token's id in the model (None
    when it has none), ``fail(message)`` makes the error naming the file."""
    from bytepair.formats.hf import _components  # (hf imports this module)

    try:
        processors = _components(doc.get("post_processor"), "processors")
    except ValueError as e:
        raise fail(f"post_processor: {e}") from None
    before: list[str] = []
    after: list[str] = []
    ids: dict[str, list[int]] = {}
    adding = None
    for proc in processors:
        kind = proc.get("type")
        if kind in NO_IDS:
            continue
        if adding is not None:
            raise fail(f"post_processor {adding} and {kind} both add tokens: not supported")
        adding = kind
        if kind == "TemplateProcessing":
            before, after, ids = _template_frame(proc, fail)
        elif kind in ("RobertaProcessing", "BertProcessing"):
            try:
                (cls, cls_id), (sep, sep_id) = proc["cls"], proc["sep"]
            except (KeyError, TypeError, ValueError):
                raise fail(f"post_processor {kind} needs cls and sep as [token, id]") from None
            before, after, ids = [cls], [sep], {cls: [cls_id], sep: [sep_id]}
        else:
            raise fail(f"post_processor {kind} is not supported")
    for where, tokens in (("before", before), ("after", after)):
        if len(tokens) > 1:
            raise fail(
                f"post_processor {adding} puts {len(tokens)} tokens {where} the text "
                f"({', '.join(map(short, tokens))}): not supported (one BOS and one EOS are)"
            )
    for token in before + after:
        own = id_of(token)
        if own is None or ids.get(token, [own]) != [own]:
            raise fail(
                f"post_processor {adding} adds {short(token)} as ids {short(ids.get(token))}, "
                f"which is not that token's id in the vocabulary ({short(own)}): not supported"
            )
    frame: dict = {}
    if before:
        frame.update(bos_token=before[0], add_bos=True)
    if after:
        frame.update(eos_token=after[0], add_eos=True)
    return frame


def template(bos: str | None, eos: str | None, id_of) -> dict | None:
    """The ``TemplateProcessing`` that puts ``bos`` / ``eos`` (either may be None)
    around each text (and each of a pair, as Hugging Face's own converters write it);
    None when neither is given. ``id_of(token)`` is a token's id."""
    head = [bos] if bos is not None else []
    tail = [eos] if eos is not None else []
    if not head and not tail:
        return None

    def seq(name: str, type_id: int) -> list[dict]:
        specials = [{"SpecialToken": {"id": t, "type_id": type_id}} for t in head]
        ends = [{"SpecialToken": {"id": t, "type_id": type_id}} for t in tail]
        return [*specials, {"Sequence": {"id": name, "type_id": type_id}}, *ends]

    return {
        "type": "TemplateProcessing",
        "single": seq("A", 0),
        "pair": seq("A", 0) + seq("B", 1),
        "special_tokens": {t: {"id": t, "ids": [id_of(t)], "tokens": [t]} for t in head + tail},
    }
