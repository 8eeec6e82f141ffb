"""Documents to a folder of training shards, the way nanoGPT / nanochat / Megatron
users want them: ``train_000000.bin, train_000001.bin, ..., val_000000.bin`` of
little-endian uint16 ids (uint32 past 65,536 ids), each document followed by the
end-of-text id (and/or preceded by a beginning-of-sequence id), every train shard
exactly ``shard_tokens`` long except the last. Beside each shard, ``.idx.npy`` holds
the token offsets of the documents starting in it; ``manifest.json`` comes last.

:class:`ShardWriter` is the folder: its splits, which split each document goes to,
checkpoints and the manifest. It takes *encoded* batches (``add``); who encodes them
is an engine's business (``bytepair.runners.local``, ``bytepair.runners.ray_encode``,
chosen by ``bytepair.shards.write.write_shards``), and this module imports neither.

How it stays bounded: documents arrive in batches of about ``BATCH_CHARS`` characters
(``bytepair.runners.feed``) appended to the open shard's temporary file; only the
offsets of the open shard's documents stay in memory.

How it resumes: each split (train, val) is an independent stream of documents, and
the output is a pure function of the document sequence and the options — never of
batch sizes, threads or engines. After a batch that finished a shard,
``resume-state.json`` records, per split, the finished shards and the *resume point*:
the first document with tokens not yet in a finished shard, with the split's token and
document counts before it. A rerun re-streams the documents, skips (without encoding:
``skips``) each document before its split's resume point, drops the tokens that
finished shards already hold, and so writes the same bytes an uninterrupted run would.

One writer at a time: the folder is locked (``lock.FolderLock``) while a writer has it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate, compress, islice
from pathlib import Path

from bytepair import __version__, _core
from bytepair._files import (
    atomic_write,
    check_writable_folder,
    create_exclusive,
    publish,
    temporary_name,
)
from bytepair.shards import manifest as mf
from bytepair.shards.lock import FolderLock
from bytepair.shards.one_file import NPY_HEADER_BYTES, id_width, npy_header
from bytepair.specials import resolve

#: Characters held by the ``shuffle_docs`` buffer.
SHUFFLE_CHARS = 32_000_000
SPLITS = ("train", "val")
#: The memoryview format of an id of each width (bytes).
ID_FORMATS = {2: "H", 4: "I"}


def shuffled(documents: Iterable[str], seed: int, limit: int = SHUFFLE_CHARS) -> Iterator[str]:
    """The documents in a deterministic pseudo-random order, holding at most about
    ``limit`` characters: a buffer filled in order, emptied at random positions.

    >>> list(shuffled("abcde", seed=1, limit=2)) == list(shuffled("abcde", seed=1, limit=2))
    True
    >>> sorted(shuffled("abcde", seed=1, limit=2))
    ['a', 'b', 'c', 'd', 'e']
    """
    import numpy as np  # only here: the rest of a shard folder's writing needs no numpy

    rng = np.random.Generator(np.random.PCG64(seed))
    buffer: list[str] = []
    chars = 0
    for doc in documents:
        buffer.append(doc)
        chars += len(doc)
        while chars > limit and buffer:
            j = int(rng.integers(len(buffer)))
            buffer[j], buffer[-1] = buffer[-1], buffer[j]
            chars -= len(buffer[-1])
            yield buffer.pop()
    for j in rng.permutation(len(buffer)):
        yield buffer[j]


def in_val(index: int, fraction: float, seed: int) -> bool:
    """Whether document ``index`` goes to val: a seeded hash, so the choice is the same
    on every run and independent of every other document. (The writer asks the core,
    ``_core.val_choices``, for a batch's documents at once: the same choices.)"""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") < fraction * 2.0**64


def framed(ids, offsets, firsts: bytes, lasts: bytes, before, after, width: int):
    """The batch's ids with the ids ``before`` ahead of each item that begins a
    document (``firsts``) and ``after`` behind each that ends one (``lasts``), as a
    memoryview of ``width``-byte ids, and the items' new lengths (a list). ``ids``: a
    buffer of 2- or 4-byte little-endian ids (a numpy array, or a memoryview cast to
    "H" or "I"); ``offsets``: little-endian int64 item offsets, as
    ``encode_batch_to_numpy`` returns them. The core frames them (``io::framing``); with
    nothing to frame at the same width, the view is of ``ids`` itself.

    >>> ids, lengths = framed(array("I", [5, 6, 7]), array("q", [0, 2, 2, 3]),
    ...                       bytes([1, 1, 1]), bytes([1, 1, 1]), [1], [0], 2)
    >>> ids.tolist(), lengths
    ([1, 5, 6, 0, 1, 0, 1, 7, 0], [4, 2, 3])
    >>> ids, lengths = framed(array("I", [5, 6, 7]), array("q", [0, 2, 3]),
    ...                       bytes([1, 0]), bytes([0, 1]), [1, 2], [0], 2)
    >>> ids.tolist(), lengths
    ([1, 2, 5, 6, 7, 0], [4, 2])
    """
    out, lengths = _core.frame_items(ids, offsets, firsts, lasts, list(before), list(after), width)
    return memoryview(ids if out is None else out).cast("B").cast(ID_FORMATS[width]), lengths


def le_ids(ids, width: int):
    """Ids as little-endian bytes of ``width`` each (a buffer): ``ids`` a list of ints,
    or a buffer of little-endian uint32 ids (a memoryview cast to "I").

    >>> bytes(le_ids([1, 258], 2)), bytes(le_ids(array("I", [1, 258]), 4))
    (b'\\x01\\x00\\x02\\x01', b'\\x01\\x00\\x00\\x00\\x02\\x01\\x00\\x00')
    """
    if isinstance(ids, list):
        ids = array("I", ids)
        if sys.byteorder == "big":
            ids.byteswap()
    offsets = (0).to_bytes(8, "little") + len(ids).to_bytes(8, "little")
    return framed(ids, offsets, b"\0", b"\0", (), (), width)[0]


def int64_list(data) -> list[int]:
    """The little-endian int64 values of a buffer, as a list of ints.

    >>> int64_list((7).to_bytes(8, "little") + (2**40).to_bytes(8, "little"))
    [7, 1099511627776]
    """
    values = array("q")
    values.frombytes(memoryview(data).cast("B"))
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def _le_bytes(values: array) -> bytes:
    """An int64 array's bytes, little-endian."""
    if sys.byteorder == "big":
        values = array("q", values)
        values.byteswap()
    return values.tobytes()


def whole(parts: Iterable[tuple[str, bool]]) -> Iterator[str]:
    """Documents that came in parts, joined.

    >>> list(whole([("a", False), ("b", True), ("c", True)]))
    ['ab', 'c']
    """
    held: list[str] = []
    for text, last in parts:
        held.append(text)
        if last:
            yield "".join(held)
            held = []


def gathered(ids: memoryview, lengths: list[int], items: list[int]) -> memoryview:
    """The ids of ``items`` (item k: ``lengths[k]`` ids, after the items before it), in
    order: ``ids`` itself when they hold all of it (most batches go whole to one split),
    else a copy, a run of neighbouring items at a time.

    >>> gathered(memoryview(bytes(range(6))), [2, 1, 3], [0, 2]).tolist()
    [0, 1, 3, 4, 5]
    """
    ends = list(accumulate(lengths, initial=0))
    if sum(lengths[k] for k in items) == len(ids):
        return ids
    spans: list[list[int]] = []
    for k in items:
        if spans and spans[-1][1] == ends[k]:
            spans[-1][1] = ends[k + 1]
        else:
            spans.append([ends[k], ends[k + 1]])
    return memoryview(b"".join(ids[a:b] for a, b in spans)).cast(ids.format)


class _Split:
    """One split's stream of shards: the open shard's temporary file, its documents'
    offsets, and the counts a resume needs."""

    def __init__(self, name: str, folder: Path, shard_tokens: int, fmt: str, dtype: str, saved):
        self.name, self.folder, self.shard_tokens = name, folder, shard_tokens
        self.fmt, self.dtype = fmt, dtype  # "<u2" or "<u4"
        saved = saved or {"shards": [], "resume": [0, 0, 0], "closed": False}
        self.shards: list[dict] = saved["shards"]
        self.closed: bool = saved["closed"]
        # Documents before skip_before went into finished shards: not even encoded.
        self.skip_before, self.tokens, self.documents = saved["resume"]
        self.resume = list(saved["resume"])
        self.committed = sum(s["tokens"] for s in self.shards)
        self._tmp: str | None = None
        self._file = None
        self._hash = None  # of the open .bin shard, as written
        self._written = 0  # tokens in the open shard
        self._starts = array("q")  # offsets of documents from the open shard on
        self._resume_pending = False
        # A document whose last part has not come yet: (index, token offset of its start).
        self._open_doc: tuple[int, int] | None = None

    @property
    def in_document(self) -> bool:
        """True while a document's parts are still coming (its last part is not in)."""
        return self._open_doc is not None

    def _path(self, suffix: str = "") -> Path:
        ext = ".npy" if self.fmt == "npy" else ".bin"
        return self.folder / f"{self.name}_{len(self.shards):06d}{suffix or ext}"

    def append(self, ids: memoryview, lengths: list, doc_index: list, firsts, lasts) -> None:
        """Adds items: whole documents or parts of one (ids framed, their lengths, their
        documents' indices, whether each begins / ends its document: 0 or 1)."""
        if not lengths:
            return
        # Item k holds the split's tokens ends[k]:ends[k + 1].
        ends = list(accumulate(lengths, initial=self.tokens))
        committed = self.committed
        # The documents beginning here, from the first token a finished shard lacks.
        k0 = bisect_left(ends, committed)
        self._starts.extend(compress(islice(ends, k0, len(lengths)), firsts[k0:]))
        carried = self._open_doc[1] if self._open_doc else 0

        def doc_start(k: int) -> int:
            """Where item k's document starts: at the last item up to k that begins one."""
            for m in range(k, -1, -1):
                if firsts[m]:
                    return ends[m]
            return carried

        # On a resume the first document may straddle a finished shard: drop its head.
        ids = ids[max(0, committed - self.tokens) :]
        if self._written == 0:
            self._resume_pending = True
        while len(ids):
            take = ids[: self.shard_tokens - self._written]
            self._write(take)
            ids = ids[len(take) :]
            if self._written == self.shard_tokens:
                self._finish()
                self._resume_pending = True
        if self._resume_pending and self._written:
            # The open shard's first token lies in the first item ending past it.
            j = bisect_right(ends, self.committed, lo=1) - 1
            docs_before = self.documents + sum(lasts[:j])
            self.resume = [int(doc_index[j]), doc_start(j), docs_before]
            self._resume_pending = False
        self.tokens = ends[-1]
        self.documents += sum(lasts)
        last = len(lengths) - 1
        self._open_doc = None if lasts[last] else (int(doc_index[last]), doc_start(last))

    def checkpoint(self, next_doc: int) -> list[int] | None:
        """The resume point after a batch ending before document ``next_doc`` (None
        once the split can take no more documents)."""
        if self.closed:
            return None
        if self._written == 0 and self._open_doc is not None:
            # A shard ended inside a document: resume at its start, dropping its head.
            self.resume = [*self._open_doc, self.documents]
        elif self._written == 0 and next_doc >= self.skip_before:
            self.resume = [next_doc, self.tokens, self.documents]
        return self.resume

    def _write(self, ids: memoryview) -> None:
        if self._file is None:
            # The name is recorded before the file exists, so an interrupt at any point
            # leaves abort() a name to remove (mkstemp's return could be lost to one).
            self._tmp = temporary_name(self._path())
            fd = create_exclusive(self._tmp)
            self._file = os.fdopen(fd, "wb")
            # A .bin shard's digest is made as it is written, while the core encodes
            # the next batch, not by reading the whole shard again when it closes. (A
            # .npy one's header, which comes first, is known only then.)
            self._hash = mf.new_digest() if self.fmt == "bin" else None
            if self.fmt == "npy":
                self._file.write(bytes(NPY_HEADER_BYTES))
        self._file.write(ids)
        if self._hash is not None:
            self._hash.update(ids)
        self._written += len(ids)

    def _finish(self) -> None:
        """Closes the open shard: header, offsets sidecar, rename into place."""
        end = self.committed + self._written
        k = bisect_left(self._starts, end)
        mine, self._starts = self._starts[:k], self._starts[k:]
        if self.fmt == "npy":
            self._file.seek(0)
            self._file.write(npy_header(self.dtype, self._written))
        self._file.close()
        self._file = None
        path, index = self._path(), self._path(".idx.npy")
        index_bytes = npy_header("<i8", len(mine)) + _le_bytes(mine)
        atomic_write(index, index_bytes)
        entry = {
            "file": path.name,
            "index": index.name,
            "split": self.name,
            "tokens": self._written,
            "documents": len(mine),
            mf.DIGEST: self._hash.hexdigest() if self._hash else mf.digest_of(self._tmp),
            f"index_{mf.DIGEST}": _digest(index_bytes),
        }
        publish(self._tmp, path)
        self._tmp = None
        self.shards.append(entry)
        self.committed = end
        self._written = 0

    def close(self) -> None:
        """Finishes the last (short) shard; the split takes no more documents."""
        if self._written:
            self._finish()
        self.closed = True
        # A closed split takes no more documents; a resumed run reads only its counts.
        self.resume = [self.resume[0], self.tokens, self.documents]

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._tmp is not None:
            Path(self._tmp).unlink(missing_ok=True)

    def state(self) -> dict:
        return {"shards": self.shards, "resume": self.resume, "closed": self.closed}


def _digest(data: bytes) -> str:
    h = mf.new_digest()
    h.update(data)
    return h.hexdigest()


def remove_stale_temporaries(folder: Path) -> None:
    """Removes what a killed run left: our temporary files (``.train_000003.bin.x.tmp``)."""
    names = (*SPLITS, mf.MANIFEST, mf.STATE)
    for p in folder.glob(".*.tmp"):
        if p.name[1:].startswith(names):
            p.unlink(missing_ok=True)


def _check_special(tok, token: str | None, what: str) -> int | None:
    if token is None:
        return None
    if token not in tok.special_tokens:
        known = ", ".join(tok.special_tokens) or "none"
        raise ValueError(
            f"{what}={token!r} is not a special token of this tokenizer (it has: {known}); "
            f"pass {what}=None (--{what} none) to write no {what} token"
        )
    return tok.special_tokens[token]


def document_items(tok, documents, shuffle_docs: int | None) -> Iterator[tuple]:
    """The documents (texts, or documents an engine encoded) as ``(document, last)``
    items: long documents of a corpus in parts (``Corpus.parts``) when the tokenizer
    gives the same ids for the parts as for the whole (``sources.part_chars_for``),
    else whole; shuffled documents are whole."""
    from bytepair.sources import part_chars_for

    if hasattr(documents, "parts"):
        parts = documents.parts()
        if shuffle_docs is None and part_chars_for(tok) is not None:
            return parts
        documents = whole(parts)
    if shuffle_docs is not None:
        documents = shuffled(documents, shuffle_docs)
    return ((doc, True) for doc in documents)


def _read_state(path: Path) -> dict:
    state = mf.read_json(path)
    finger = state.get("fingerprint") if isinstance(state, dict) else None
    if not isinstance(finger, dict) or not {"tokenizer", "options", "inputs"} <= set(finger):
        raise ValueError(f"{path}: not a bytepair resume state; delete the folder to start over")
    return state


def _check_state(path: Path, state: dict) -> None:
    if not {"resume_doc", "splits"} <= set(state):
        raise ValueError(f"{path}: not a bytepair resume state; delete the folder to start over")


class ShardWriter:
    """A shard folder being written, fed with encoded batches (see the module doc).

    Checks its options when made; as a context manager it locks the folder, reads an
    interrupted run's state, and on an exception removes its temporary files (the
    finished shards and the state stay, for a rerun to continue)::

        with ShardWriter(tok, "out/", shard_tokens=1000) as writer:
            if writer.finished is None:          # else: the folder was complete
                for ...:                         # documents numbered 0, 1, ... in order
                    if not writer.skips(i): ...  # batch it; encode the batch; then
                    writer.add(ids, offsets, index, firsts, lasts)
                manifest = writer.finish(n_docs)
    """

    def __init__(
        self,
        tok,
        out_dir: str | os.PathLike,
        *,
        shard_tokens: int = 100_000_000,
        val_tokens: int | None = None,
        val_fraction: float | None = None,
        format: str = "bin",
        eot: str | None = "<|endoftext|>",
        bos: str | None = None,
        shuffle_docs: int | None = None,
        allowed_special=frozenset(),
        disallowed_special=(),
        inputs: list[dict] | None = None,
    ) -> None:
        if format not in ("bin", "npy"):
            raise ValueError(f"format must be 'bin' or 'npy', not {format!r}")
        if isinstance(shard_tokens, bool) or not isinstance(shard_tokens, int) or shard_tokens < 1:
            raise ValueError(f"shard_tokens must be a positive integer, not {shard_tokens!r}")
        if val_tokens is not None and val_fraction is not None:
            raise ValueError("give val_tokens or val_fraction, not both")
        if val_tokens is not None and val_tokens < 0:
            raise ValueError(f"val_tokens must be >= 0, not {val_tokens!r}")
        if val_fraction is not None and not 0.0 <= val_fraction <= 1.0:
            raise ValueError(f"val_fraction must be between 0 and 1, not {val_fraction!r}")
        self.eot_id, self.bos_id = _check_special(tok, eot, "eot"), _check_special(tok, bos, "bos")
        # The model's own BOS/EOS (its frame) go around each whole document, inside
        # ``bos`` / ``eot``; the documents' parts are encoded without them (``self.tok``).
        frame_before, frame_after = tok.model.core.frame()
        self.before = ([] if self.bos_id is None else [self.bos_id]) + list(frame_before)
        self.after = list(frame_after) + ([] if self.eot_id is None else [self.eot_id])
        self.tok = (
            tok.with_options(add_bos=False, add_eos=False) if frame_before or frame_after else tok
        )
        self.allowed, self.disallowed = resolve(
            allowed_special, disallowed_special, tok.special_tokens
        )
        self.width = id_width(tok)
        self.dtype = "<u2" if self.width == 2 else "<u4"
        self.shard_tokens, self.format = shard_tokens, format
        self.val_tokens, self.val_fraction = val_tokens, val_fraction
        self.shuffle_docs = shuffle_docs
        # What in_val hashes with each document's index.
        self._val_seed = 0 if shuffle_docs is None else shuffle_docs
        self.inputs = inputs
        self.spec = mf.tokenizer_spec(tok)
        self.options = {
            "shard_tokens": shard_tokens,
            "val_tokens": val_tokens,
            "val_fraction": val_fraction,
            "format": format,
            "eot": eot,
            "bos": bos,
            "shuffle_docs": shuffle_docs,
            "allowed_special": sorted(self.allowed),
            "disallowed_special": sorted(set(self.disallowed) & set(tok.special_tokens)),
        }
        self.fingerprint = mf.fingerprint(self.spec, self.options, inputs)
        self.folder = check_writable_folder(out_dir)
        #: The manifest, when the folder was already complete: nothing to write.
        self.finished: dict | None = None
        #: Whether this continues an interrupted run.
        self.resumed = False
        self.splits: dict[str, _Split] = {}
        self._saved: dict | None = None
        self._lock = FolderLock(self.folder)
        self._open_to_val = False  # where the document whose parts are coming goes

    # -- opening and closing ---------------------------------------------------------

    def __enter__(self) -> ShardWriter:
        self.folder.mkdir(exist_ok=True)
        self._lock.acquire()
        try:
            self._open()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if kind is not None:
                for split in self.splits.values():
                    split.abort()
        finally:
            self._lock.release()

    def _open(self) -> None:
        out = self.folder
        # Only now, holding the lock: another writer's temporaries are not stale.
        remove_stale_temporaries(out)
        state_path, manifest_path = out / mf.STATE, out / mf.MANIFEST
        saved = _read_state(state_path) if state_path.exists() else None
        if saved is not None and (diff := mf.differences(saved["fingerprint"], self.fingerprint)):
            raise ValueError(
                f"{out}: holds an unfinished run with other settings ({'; '.join(diff)}); "
                "rerun with the same settings to resume it, or delete the folder to start over"
            )
        if saved is not None:
            _check_state(state_path, saved)
        if manifest_path.exists():
            manifest = mf.read_json(manifest_path)
            if saved is not None:
                state_path.unlink()  # killed between writing the manifest and this
            else:
                self._check_finished(manifest_path, manifest)
            self.finished = manifest
            return
        if saved is None and (any(out.glob("train_*")) or any(out.glob("val_*"))):
            raise FileExistsError(
                f"{out}: holds shard files but no {mf.STATE} to resume from; delete them or "
                "choose another folder"
            )
        self._saved, self.resumed = saved, saved is not None
        saved_splits = (saved or {}).get("splits", {})
        self.splits = {
            name: _Split(
                name, out, self.shard_tokens, self.format, self.dtype, saved_splits.get(name)
            )
            for name in SPLITS
        }
        val = self.splits["val"]
        if self.val_tokens is not None and val.tokens >= self.val_tokens and not val.closed:
            val.closed = True  # val_tokens=0: nothing goes to val
        if saved is None:
            self._save_state(0)

    def _check_finished(self, path: Path, manifest: dict) -> None:
        """A finished folder is done if these settings made it; else refused."""
        made_by = manifest.get("options") if isinstance(manifest, dict) else None
        if made_by is None:
            raise FileExistsError(
                f"{self.folder}: already holds finished shards ({mf.MANIFEST}); delete them "
                "or choose another folder"
            )
        then = mf.fingerprint(manifest["tokenizer"], made_by, manifest.get("inputs"))
        if diff := mf.differences(then, self.fingerprint):
            raise FileExistsError(
                f"{self.folder}: already holds finished shards made with other settings "
                f"({'; '.join(diff)}); delete them or choose another folder"
            )

    # -- what engines call -----------------------------------------------------------

    @property
    def resume_doc(self) -> int:
        """The first document an interrupted run had not finished (0 on a fresh run):
        documents before it are skipped, so an engine need not even read them whole."""
        return self._saved["resume_doc"] if self._saved else 0

    @property
    def tokens(self) -> int:
        """Tokens written so far, both splits."""
        return sum(s.tokens for s in self.splits.values())

    def order(self, documents) -> Iterator[tuple]:
        """The documents in the order they are written, as ``(document, last)`` items
        (see :func:`document_items`)."""
        return document_items(self.tok, documents, self.shuffle_docs)

    @property
    def gathers_ahead(self) -> bool:
        """May the next batch be gathered (``skips`` asked) before the last one is
        added? Not when the first documents go to val until ``val_tokens``: where a
        document goes then depends on the batches added before it."""
        return self.val_tokens is None

    def skips(self, index: int) -> bool:
        """True if document ``index`` is in a finished shard already: not to be encoded."""
        # A fresh run has finished nothing (and needs no digest per document to say so).
        return self.resumed and index < self._route(index).skip_before

    def add(self, ids, offsets, index: list, firsts, lasts) -> None:
        """Writes one encoded batch of items — documents, or parts of one — in document
        order: ``ids`` and ``offsets`` as ``encode_batch_to_numpy`` returns them (or ids
        already of the shards' width; see :func:`framed`), and per item its document's
        index and whether it begins / ends that document (bools, or a buffer of them).
        After a batch that finished a shard, the resume state is saved."""
        splits = self.splits
        train, val = splits["train"], splits["val"]
        shards_before = len(train.shards) + len(val.shards)
        firsts, lasts = bytes(firsts), bytes(lasts)
        ids, lengths = framed(ids, offsets, firsts, lasts, self.before, self.after, self.width)
        chosen: tuple[list[int], list[int]] = ([], [])  # the items of train, of val
        val_before = val.tokens
        by_count = self.val_tokens is not None
        # val_fraction: the choice for each document beginning here, made by the core
        # for the whole batch (in_val's, without a Python digest per document).
        by_hash = None
        if self.val_fraction is not None:
            starting = [int(i) for i, first in zip(index, firsts) if first]
            prefix = f"{self._val_seed}:".encode()
            by_hash = iter(_core.val_choices(prefix, starting, self.val_fraction))
        for k, (i, first) in enumerate(zip(index, firsts)):
            if first and by_count and not val.closed:
                # The first documents until val_tokens: a prefix, decided by the counts.
                self._open_to_val = val_before < self.val_tokens
            elif first:
                self._open_to_val = next(by_hash) if by_hash is not None else self._route(i) is val
            n = lengths[k]
            val_before += n if self._open_to_val else 0
            # With no eot/bos an empty document has nothing to write; a document's
            # empty last part still ends it.
            if n or (lasts[k] and not first):
                chosen[self._open_to_val].append(k)
        for split, mine in ((val, chosen[1]), (train, chosen[0])):
            if len(mine) == len(index):
                split.append(ids, lengths, index, firsts, lasts)
            elif mine:
                split.append(
                    gathered(ids, lengths, mine),
                    [lengths[k] for k in mine],
                    [index[k] for k in mine],
                    bytes(firsts[k] for k in mine),
                    bytes(lasts[k] for k in mine),
                )
        if by_count and not val.closed and val.tokens >= self.val_tokens and not val.in_document:
            val.close()
        if len(index) and len(train.shards) + len(val.shards) > shards_before:
            self._save_state(int(index[-1]) + 1 if lasts[-1] else int(index[-1]))

    def finish(self, n_docs: int) -> dict:
        """Closes the last shards and writes the manifest (``n_docs``: how many
        documents came, to check a resumed run saw at least as many as before)."""
        if n_docs < self.resume_doc:
            raise ValueError(
                f"{self.folder}: the documents ended after {n_docs:,}, before the point the "
                f"interrupted run reached (document {self.resume_doc:,}): the input differs"
            )
        for name in ("val", "train"):
            self.splits[name].close()
        manifest = {
            "format": mf.FORMAT_NAME,
            "version": mf.FORMAT_VERSION,
            "tokenizer": self.spec,
            "dtype": "uint16" if self.width == 2 else "uint32",
            "eot_id": self.eot_id,
            "bos_id": self.bos_id,
            "splits": {
                name: {"tokens": s.tokens, "documents": s.documents}
                for name, s in self.splits.items()
            },
            "shards": self.splits["train"].shards + self.splits["val"].shards,
            "inputs": self.inputs,
            "options": self.options,
            "created_by": f"bytepair {__version__}",
        }
        mf.write_json(self.folder / mf.MANIFEST, manifest)
        (self.folder / mf.STATE).unlink()
        return manifest

    # -- inside ----------------------------------------------------------------------

    def _route(self, index: int) -> _Split:
        val, train = self.splits["val"], self.splits["train"]
        if self.val_fraction is not None:
            return val if in_val(index, self.val_fraction, self._val_seed) else train
        return val if self.val_tokens is not None and not val.closed else train

    def _save_state(self, next_doc: int) -> None:
        points = [p for s in self.splits.values() if (p := s.checkpoint(next_doc)) is not None]
        mf.write_json(
            self.folder / mf.STATE,
            {
                "format": f"{mf.FORMAT_NAME}-state",
                "version": mf.FORMAT_VERSION,
                "fingerprint": self.fingerprint,
                "resume_doc": min((p[0] for p in points), default=next_doc),
                "splits": {name: s.state() for name, s in self.splits.items()},
            },
        )
