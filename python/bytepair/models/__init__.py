"""Model kinds behind the one :class:`~bytepair.Tokenizer` class.

A model is data (what a file stores) plus its compiled core (``model.core``), an
object of ``bytepair._core`` with one method set for every kind: ``encode``,
``encode_to_bytes``, ``count``, ``encode_batch``, ``encode_batch_to_bytes``,
``encode_prefix``, ``encode_file``, ``decode_bytes``, ``max_id`` and ``vocab_len``.
``Tokenizer`` only ever calls that set, so a second model kind (SentencePiece-style
code-point BPE) is a new module here, not an ``if`` in the tokenizer.

- :mod:`bytepair.models.bpe`: byte-level BPE (GPT-2, tiktoken, CS336, minbpe).
"""

from bytepair.models.bpe import BPE

__all__ = ["BPE"]
