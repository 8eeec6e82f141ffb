"""bytepair: train, encode and convert byte-pair-encoding tokenizers — exact and fast.

>>> import bytepair
>>> tok = bytepair.train_from_iterator(["hello hello world"], 260, progress=False)
>>> tok.decode(tok.encode("hello world"))
'hello world'
"""

from bytepair.encodings import (
    encoding_for_model,
    encoding_name_for_model,
    get_encoding,
    list_encodings,
)
from bytepair.patterns import PATTERNS
from bytepair.streaming import StreamDecoder
from bytepair.tokenizer import Tokenizer, TrainingStats, load
from bytepair.training import (
    train,
    train_bpe,
    train_from_counts,
    train_from_iterator,
)
from bytepair.training_spm import train_sentencepiece

__all__ = [
    "PATTERNS",
    "StreamDecoder",
    "Tokenizer",
    "TrainingStats",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encodings",
    "load",
    "open_shards",
    "train",
    "train_bpe",
    "train_from_counts",
    "train_from_iterator",
    "train_sentencepiece",
    "write_shards",
]
__version__ = "0.2.0"


def __getattr__(name: str):
    # Shard files need numpy: imported on first use, so `import bytepair` stays quick.
    if name in ("open_shards", "write_shards"):
        from bytepair import shards

        return getattr(shards, name)
    raise AttributeError(f"module 'bytepair' has no attribute {name!r}")
