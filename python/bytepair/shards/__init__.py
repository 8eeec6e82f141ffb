"""Token ids on disk for LM training.

- :mod:`bytepair.shards.one_file` — one text file to one ``.bin``/``.npy`` file of ids
  (``Tokenizer.encode_file``, ``bytepair encode FILE -o out.bin``);
- :mod:`bytepair.shards.writer` — documents to a folder of training shards, resumable
  (:func:`write_shards`, ``bytepair encode FILES -o OUT/``);
- :mod:`bytepair.shards.reader` — reading such a folder back (:func:`open_shards`).

Shards hold little-endian uint16 ids when every id fits, else uint32:

>>> id_width(type("Tok", (), {"n_vocab": 50257})())
2
"""

from bytepair.shards.one_file import (
    NPY_HEADER_BYTES,
    encode_file,
    id_width,
    npy_header,
)

# The reader and writer need numpy; they are imported when first used, so that
# `import bytepair` stays quick for programs that only encode.
_LAZY = {
    "Shards": "reader",
    "ShardWriter": "writer",
    "open_shards": "reader",
    "write_shards": "write",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"bytepair.shards.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'bytepair.shards' has no attribute {name!r}")


__all__ = [
    "NPY_HEADER_BYTES",
    "Shards",
    "encode_file",
    "id_width",
    "npy_header",
    "open_shards",
    "write_shards",
]
