"""Reading a shard folder back: the tokenizer rebuilt from the manifest, the shards
memory-mapped (nothing is read until used), documents by index and nanoGPT-style
random training batches — numpy only, no PyTorch needed.

>>> shards = open_shards("data/")                                  # doctest: +SKIP
>>> shards.tokenizer.decode(shards[0])                             # doctest: +SKIP
>>> for x, y in shards.batches(block_size=1024, batch_size=8, steps=5000):  # doctest: +SKIP
...     loss = model(torch.from_numpy(x), torch.from_numpy(y))
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bytepair.shards import manifest as mf


def _map(path: Path, dtype: str) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path, mmap_mode="r")
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


class TokenView:
    """A split's shards as one flat, read-only sequence of ids: ``len``, ints and
    slices (a slice across a shard boundary is copied, else it is a view)."""

    def __init__(self, arrays: list[np.ndarray]) -> None:
        self.arrays = arrays
        self.offsets = np.concatenate(([0], np.cumsum([len(a) for a in arrays]))).astype(np.int64)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, key):
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                return self[start:stop][::step]
            return self._range(start, max(start, stop))
        i = int(key) + n if int(key) < 0 else int(key)
        if not 0 <= i < n:
            raise IndexError(f"token {key} out of range (the split holds {n:,} tokens)")
        k = int(np.searchsorted(self.offsets, i, side="right")) - 1
        return self.arrays[k][i - self.offsets[k]]

    def _range(self, start: int, stop: int) -> np.ndarray:
        first = int(np.searchsorted(self.offsets, start, side="right")) - 1
        parts = []
        k = max(first, 0)
        while k < len(self.arrays) and self.offsets[k] < stop:
            lo, hi = self.offsets[k], self.offsets[k + 1]
            parts.append(self.arrays[k][max(start, lo) - lo : min(stop, hi) - lo])
            k += 1
        if len(parts) == 1:
            return parts[0]
        return (
            np.concatenate(parts)
            if parts
            else np.zeros(0, self.arrays[0].dtype if self.arrays else np.uint16)
        )

    def __array__(self, dtype=None, copy=None):
        whole = self[:]
        return whole.astype(dtype) if dtype is not None else np.asarray(whole)

    def __iter__(self) -> Iterator[np.ndarray]:
        """The shards' arrays, one after another (iterate over ids with ``np.nditer``
        or ``for a in view: for i in a``)."""
        return iter(self.arrays)


class Shards:
    """A folder written by :func:`bytepair.shards.write_shards`.

    ``len(shards)`` and ``shards[i]`` / ``shards.doc(i)`` address the train split's
    documents (``doc(i, split="val")`` the other); a document's ids include its eot /
    bos tokens, exactly as written.
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        path = self.folder / mf.MANIFEST
        if not path.exists():
            state = " (an unfinished run: rerun the same command to finish it)"
            raise FileNotFoundError(
                f"{path}: no such file{state if (self.folder / mf.STATE).exists() else ''}"
            )
        self.manifest = mf.read_json(path)
        if self.manifest.get("format") != mf.FORMAT_NAME or self.manifest.get("version") != 1:
            raise ValueError(f"{path}: not a bytepair-shards manifest of version 1")
        self.tokenizer = mf.tokenizer_from_spec(self.manifest["tokenizer"], str(path))
        self.dtype = np.dtype(self.manifest["dtype"]).newbyteorder("<")
        self.eot_id: int | None = self.manifest["eot_id"]
        self.bos_id: int | None = self.manifest["bos_id"]
        self._views: dict[str, TokenView] = {}
        self._starts: dict[str, np.ndarray] = {}

    @property
    def splits(self) -> list[str]:
        """The splits holding tokens (``["train", "val"]`` or ``["train"]``)."""
        return [s for s, n in self.manifest["splits"].items() if n["tokens"]]

    def _shards(self, split: str) -> list[dict]:
        if split not in self.manifest["splits"]:
            raise ValueError(f"split must be one of {list(self.manifest['splits'])}, not {split!r}")
        return [s for s in self.manifest["shards"] if s["split"] == split]

    def tokens(self, split: str = "train") -> TokenView:
        """All ids of a split as one flat, memory-mapped sequence."""
        if split not in self._views:
            arrays = [_map(self.folder / s["file"], self.dtype) for s in self._shards(split)]
            self._views[split] = TokenView(arrays)
        return self._views[split]

    def _doc_starts(self, split: str) -> np.ndarray:
        if split not in self._starts:
            parts = [np.load(self.folder / s["index"]) for s in self._shards(split)]
            self._starts[split] = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return self._starts[split]

    def num_documents(self, split: str = "train") -> int:
        return (
            self.manifest["splits"][split]["documents"] if split in self.manifest["splits"] else 0
        )

    def __len__(self) -> int:
        return self.num_documents("train")

    def doc(self, i: int, split: str = "train") -> np.ndarray:
        """The ids of document ``i`` of a split (found across a shard boundary too)."""
        starts = self._doc_starts(split)
        n = len(starts)
        if not -n <= i < n:
            raise IndexError(f"document {i} out of range (the {split} split holds {n:,})")
        i %= n
        view = self.tokens(split)
        end = int(starts[i + 1]) if i + 1 < n else len(view)
        return view[int(starts[i]) : end]

    def __getitem__(self, i: int) -> np.ndarray:
        return self.doc(i)

    def batches(
        self,
        block_size: int,
        batch_size: int,
        split: str = "train",
        seed: int = 0,
        steps: int | None = None,
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Random training windows, like nanoGPT's ``get_batch``: yields int64 ``(x, y)``
        of shape ``(batch_size, block_size)`` with ``y`` = ``x`` shifted by one token.
        ``steps`` batches, or without end when None (the caller bounds the loop).
        Deterministic for a ``seed``."""
        view = self.tokens(split)
        if len(view) <= block_size:
            raise ValueError(
                f"the {split} split holds {len(view):,} tokens: too few for block_size={block_size}"
            )
        rng = np.random.default_rng(seed)
        step = 0
        while steps is None or step < steps:
            ix = rng.integers(0, len(view) - block_size, size=batch_size)
            window = np.stack([view[i : i + block_size + 1] for i in ix.tolist()]).astype(np.int64)
            yield window[:, :-1], window[:, 1:]
            step += 1

    def verify(self) -> None:
        """Checks every shard's sha256 against the manifest; raises naming the first
        that differs."""
        for s in self.manifest["shards"]:
            if mf.sha256_of(self.folder / s["file"]) != s["sha256"]:
                raise ValueError(f"{self.folder / s['file']}: sha256 differs from {mf.MANIFEST}")

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{s}: {self.manifest['splits'][s]['tokens']:,} tokens" for s in self.splits
        )
        return f"<Shards {self.folder} {self.manifest['dtype']} {parts}>"


def open_shards(folder: str | os.PathLike) -> Shards:
    """Opens a shard folder for reading (see :class:`Shards`)."""
    return Shards(folder)
