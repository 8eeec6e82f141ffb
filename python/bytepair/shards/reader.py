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
from bytepair.shards.one_file import npy_layout


def plain_name(name, where: str, key: str) -> str:
    """A manifest's file name, if it is a plain name inside the folder: never a path
    that reads elsewhere (``../../etc/passwd``, ``/etc/passwd``, ``sub/x.bin``).

    >>> plain_name("../x.bin", "m.json", "file")
    Traceback (most recent call last):
    ...
    ValueError: m.json: shard 'file' '../x.bin' is not a plain file name in the folder
    """
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or os.path.isabs(name)
    ):
        raise ValueError(f"{where}: shard {key!r} {name!r} is not a plain file name in the folder")
    return name


def _npy_layout(path: Path) -> tuple[np.dtype, tuple, int]:
    """A shard ``.npy``'s dtype, shape and header size (a plain C-ordered array)."""
    dtype, shape, fortran, offset = npy_layout(path)
    if dtype.hasobject or fortran:
        raise ValueError(f"{path}: not a plain array of ids")
    return dtype, shape, offset


def _check_size(path: Path, dtype: np.dtype, count: int, what: str, manifest: Path) -> None:
    """The file holds exactly ``count`` items of ``dtype``, as the manifest says."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file (listed in {manifest})") from None
    if path.suffix == ".npy":
        got, shape, offset = _npy_layout(path)
        if got.newbyteorder("<") != dtype.newbyteorder("<") or got.itemsize != dtype.itemsize:
            raise ValueError(f"{path}: holds {got} values, {manifest} says {dtype}")
        if shape != (count,):
            raise ValueError(f"{path}: holds shape {shape}, {manifest} says {count:,} {what}")
        expected = offset + count * dtype.itemsize
    else:
        expected = count * dtype.itemsize
    if size != expected:
        held = (size - (expected - count * dtype.itemsize)) / dtype.itemsize
        raise ValueError(
            f"{path}: {size:,} bytes, {manifest} says {count:,} {what} ({expected:,} bytes; "
            f"the file holds {held:,g}): truncated or changed since it was written"
        )


def _map(path: Path, dtype: np.dtype) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path, mmap_mode="r", allow_pickle=False)
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
        self._path = path
        if (
            not isinstance(self.manifest, dict)
            or self.manifest.get("format") != mf.FORMAT_NAME
            or self.manifest.get("version") not in mf.READABLE_VERSIONS
        ):
            *rest, last = map(str, mf.READABLE_VERSIONS)
            versions = f"{', '.join(rest)} or {last}" if rest else last
            raise ValueError(f"{path}: not a bytepair-shards manifest of version {versions}")
        self._check_manifest()
        self.tokenizer = mf.tokenizer_from_spec(self.manifest["tokenizer"], str(path))
        self.eot_id: int | None = self.manifest["eot_id"]
        self.bos_id: int | None = self.manifest["bos_id"]
        self._views: dict[str, TokenView] = {}
        self._starts: dict[str, np.ndarray] = {}

    def _check_manifest(self) -> None:
        """What the manifest promises, checked cheaply: its shape, plain file names,
        counts that add up, and every file's size (ids and offsets) — so a truncated
        or foreign file is refused on open, naming it, never read short later."""
        m, where = self.manifest, self._path
        shards, splits = m.get("shards"), m.get("splits")
        if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
            raise ValueError(f"{where}: 'shards' must be a list of shards, not {shards!r:.60}")
        if not isinstance(splits, dict) or not all(isinstance(v, dict) for v in splits.values()):
            raise ValueError(f"{where}: 'splits' must map split names to counts")
        try:
            self.dtype = np.dtype(m.get("dtype")).newbyteorder("<")
        except TypeError:
            self.dtype = None
        if self.dtype is None or self.dtype.name not in ("uint16", "uint32"):
            raise ValueError(f"{where}: 'dtype' must be uint16 or uint32, not {m.get('dtype')!r}")
        for key in ("tokenizer", "eot_id", "bos_id"):
            if key not in m:
                raise ValueError(f"{where}: no {key!r}")
        totals = {name: [0, 0] for name in splits}
        for k, s in enumerate(shards):
            for key, kind in (("file", str), ("index", str), ("split", str)):
                if not isinstance(s.get(key), kind):
                    raise ValueError(f"{where}: shard #{k} has no {key!r}")
            for key in ("tokens", "documents"):
                n = s.get(key)
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    raise ValueError(f"{where}: shard #{k} {key!r} must be a count, not {n!r}")
            if s["split"] not in totals:
                raise ValueError(f"{where}: shard #{k} is in split {s['split']!r}, not listed")
            file = self.folder / plain_name(s["file"], str(where), "file")
            index = self.folder / plain_name(s["index"], str(where), "index")
            _check_size(file, self.dtype, s["tokens"], "tokens", where)
            _check_size(index, np.dtype("<i8"), s["documents"], "document offsets", where)
            totals[s["split"]][0] += s["tokens"]
            totals[s["split"]][1] += s["documents"]
        for name, (tokens, documents) in totals.items():
            said = (splits[name].get("tokens"), splits[name].get("documents"))
            if said != (tokens, documents):
                raise ValueError(
                    f"{where}: split {name!r} says {said[0]!r} tokens and {said[1]!r} "
                    f"documents, its shards hold {tokens:,} and {documents:,}"
                )

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
            arrays = []
            for s in self._shards(split):
                path = self.folder / s["file"]
                # Checked on open; a file changed since then is refused, not read short.
                _check_size(path, self.dtype, s["tokens"], "tokens", self._path)
                arrays.append(_map(path, self.dtype))
            self._views[split] = TokenView(arrays)
        return self._views[split]

    def _doc_starts(self, split: str) -> np.ndarray:
        if split not in self._starts:
            parts = [self._offsets(s) for s in self._shards(split)]
            starts = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            total = self.manifest["splits"][split]["tokens"]
            if len(starts) and (np.any(np.diff(starts) <= 0) or starts[-1] >= total):
                raise ValueError(
                    f"{self.folder}: the {split} shards' document offsets (.idx.npy) are not "
                    f"increasing token positions below {total:,}: corrupt"
                )
            self._starts[split] = starts
        return self._starts[split]

    def _offsets(self, shard: dict) -> np.ndarray:
        """A shard's document offsets (its ``.idx.npy``), checked against the manifest."""
        path = self.folder / shard["index"]
        _check_size(path, np.dtype("<i8"), shard["documents"], "document offsets", self._path)
        try:
            return np.load(path, allow_pickle=False).astype(np.int64, copy=False)
        except (ValueError, OSError) as e:
            raise ValueError(f"{path}: not a readable .npy file of offsets ({e})") from None

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
        """Checks every shard's digest (and its ``.idx.npy``'s) against the manifest —
        XXH3-128, or BLAKE3 and SHA-256 in folders of format versions 2 and 1 — and that
        each split's document offsets increase within its tokens; raises naming the
        first file that differs."""
        for s in self.manifest["shards"]:
            for algorithm in mf.DIGESTS:
                checks = [(s["file"], s.get(algorithm)), (s["index"], s.get(f"index_{algorithm}"))]
                for name, digest in checks:
                    if digest is not None and mf.digest_of(self.folder / name, algorithm) != digest:
                        raise ValueError(
                            f"{self.folder / name}: {algorithm} differs from {mf.MANIFEST}"
                        )
        for split in self.manifest["splits"]:
            self._starts.pop(split, None)
            self._doc_starts(split)

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{s}: {self.manifest['splits'][s]['tokens']:,} tokens" for s in self.splits
        )
        return f"<Shards {self.folder} {self.manifest['dtype']} {parts}>"


def open_shards(folder: str | os.PathLike) -> Shards:
    """Opens a shard folder for reading (see :class:`Shards`)."""
    return Shards(folder)
