"""What ``pickle`` stores for a Tokenizer: a bundled encoding's name, or the text of
our own ``.bytepair`` format — plain data, so unpickling runs nothing but our own
constructor (a tokenizer can cross to worker processes: multiprocessing, DataLoader
workers, ``datasets.map(num_proc=...)``, Ray).
"""

from __future__ import annotations


def reduce(tok):
    """``Tokenizer.__reduce__``: (restore, (state,))."""
    from bytepair.formats import bytepair as bytepair_format

    state: dict = {"version": 1}
    if tok.name is not None:
        state["name"] = tok.name
    else:
        state["bytepair"] = bytepair_format.to_text(tok)
    if tok.training_stats is not None:
        state["training_stats"] = dict(vars(tok.training_stats))
    return restore, (state,)


def restore(state: dict):
    """The inverse of :func:`reduce`."""
    from bytepair.encodings import get_encoding
    from bytepair.formats import bytepair as bytepair_format
    from bytepair.training import TrainingStats

    if state.get("version") != 1:
        raise ValueError(f"pickled tokenizer of unknown version {state.get('version')!r}")
    if "name" in state:
        tok = get_encoding(state["name"])
    else:
        tok = bytepair_format.from_bytes(state["bytepair"].encode("utf-8"), "<pickle>")
    if "training_stats" in state:
        from bytepair.tokenizer import Tokenizer

        tok = Tokenizer.from_model(tok.model)
        tok.training_stats = TrainingStats(**state["training_stats"])
    return tok
