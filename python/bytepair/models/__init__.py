"""Model kinds behind the one :class:`~bytepair.Tokenizer` class, and the interface
they share (:class:`Model`, in :mod:`bytepair.models.base`).

- :mod:`bytepair.models.bpe`: byte-level BPE (GPT-2, tiktoken, CS336, minbpe);
- :mod:`bytepair.models.ranks`: byte-level BPE by tiktoken's rule, for rank tables that
  merges cannot build (Llama 3);
- :mod:`bytepair.models.sentencepiece`: SentencePiece-style code-point BPE with byte
  fallback (Llama 2, Mistral).

A second model kind is a new module here, not an ``if`` in the tokenizer: the
tokenizer, the formats and the reports ask the model (its data, ``surfaces``,
``with_special_tokens``...), never its kind.
"""

from bytepair.models.base import Model, Unsupported
from bytepair.models.bpe import BPE
from bytepair.models.ranks import RankBPE
from bytepair.models.sentencepiece import SentencePiece

__all__ = ["BPE", "Model", "RankBPE", "SentencePiece", "Unsupported"]
