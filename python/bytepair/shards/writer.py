"""Documents to a folder of training shards, the way nanoGPT / nanochat / Megatron
users want them: ``train_000000.bin, train_000001.bin, ..., val_000000.bin`` of
little-endian uint16 ids (uint32 past 65,536 ids), each document followed by the
end-of-text id (and/or preceded by a beginning-of-sequence id), every train shard
exactly ``shard_tokens`` long except the last. Beside each shard, ``.idx.npy`` holds
the token offsets of the documents starting in it; ``manifest.json`` comes last.

How it stays bounded: documents are encoded in batches of about ``BATCH_CHARS``
characters (one ``encode_batch_to_numpy`` call each) and appended to the open shard's
temporary file; only the offsets of the open shard's documents stay in memory.

How it resumes: each split (train, val) is an independent stream of documents, and
the output is a pure function of the document sequence and the options — never of
batch sizes or threads. After a batch that finished a shard, ``resume-state.json``
records, per split, the finished shards and the *resume point*: the first document
with tokens not yet in a finished shard, with the split's token and document counts
before it. A rerun re-streams the documents, skips (without encoding) each document
before its split's resume point, drops the tokens that finished shards already hold,
and so writes the same bytes an uninterrupted run would.

With ``engine="ray"`` the documents arrive already encoded, in order, from Ray tasks
(``bytepair.runners.ray_encode``); everything above happens here as it does locally,
so the folder is the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from bytepair._files import (
    atomic_write,
    check_writable_folder,
    create_exclusive,
    publish,
    temporary_name,
)
from bytepair._progress import Progress, check_progress
from bytepair._read_ahead import read_ahead
from bytepair.shards import manifest as mf
from bytepair.shards.one_file import NPY_HEADER_BYTES, id_width, npy_header

#: Characters of text per encode call: what bounds the writer's memory (a single
#: longer document is encoded alone).
BATCH_CHARS = 1_000_000
#: Characters held by the ``shuffle_docs`` buffer.
SHUFFLE_CHARS = 32_000_000
SPLITS = ("train", "val")


def shuffled(documents: Iterable[str], seed: int, limit: int = SHUFFLE_CHARS) -> Iterator[str]:
    """The documents in a deterministic pseudo-random order, holding at most about
    ``limit`` characters: a buffer filled in order, emptied at random positions.

    >>> list(shuffled("abcde", seed=1, limit=2)) == list(shuffled("abcde", seed=1, limit=2))
    True
    >>> sorted(shuffled("abcde", seed=1, limit=2))
    ['a', 'b', 'c', 'd', 'e']
    """
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
    on every run and independent of every other document."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") < fraction * 2.0**64


def framed(ids: np.ndarray, offsets: np.ndarray, firsts, lasts, bos, eot, dtype):
    """The batch's ids with ``bos`` before each item that begins a document (``firsts``)
    and ``eot`` after each that ends one (``lasts``), and the items' new lengths.
    Memory: the output and one byte per token.

    >>> ids, lengths = framed(np.array([5, 6, 7]), np.array([0, 2, 2, 3]),
    ...                       [True] * 3, [True] * 3, 1, 0, "<u2")
    >>> ids.tolist(), lengths.tolist()
    ([1, 5, 6, 0, 1, 0, 1, 7, 0], [4, 2, 3])
    >>> ids, lengths = framed(np.array([5, 6, 7]), np.array([0, 2, 3]),
    ...                       [True, False], [False, True], 1, 0, "<u2")
    >>> ids.tolist(), lengths.tolist()
    ([1, 5, 6, 7, 0], [3, 2])
    """
    with_bos = np.asarray(firsts, dtype=bool) & (bos is not None)
    with_eot = np.asarray(lasts, dtype=bool) & (eot is not None)
    lengths = np.diff(offsets) + with_bos + with_eot
    if not (with_bos.any() or with_eot.any()):
        return ids.astype(dtype, copy=False), lengths
    ends = np.cumsum(lengths)
    bos_at, eot_at = (ends - lengths)[with_bos], (ends - 1)[with_eot]
    out = np.empty(int(ends[-1]), dtype=dtype)
    text = np.ones(len(out), dtype=bool)
    text[bos_at] = False
    text[eot_at] = False
    out[text] = ids
    if bos is not None:
        out[bos_at] = bos
    if eot is not None:
        out[eot_at] = eot
    return out, lengths


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


class _Split:
    """One split's stream of shards: the open shard's temporary file, its documents'
    offsets, and the counts a resume needs."""

    def __init__(self, name: str, folder: Path, shard_tokens: int, fmt: str, dtype, saved):
        self.name, self.folder, self.shard_tokens = name, folder, shard_tokens
        self.fmt, self.dtype = fmt, np.dtype(dtype)
        saved = saved or {"shards": [], "resume": [0, 0, 0], "closed": False}
        self.shards: list[dict] = saved["shards"]
        self.closed: bool = saved["closed"]
        # Documents before skip_before went into finished shards: not even encoded.
        self.skip_before, self.tokens, self.documents = saved["resume"]
        self.resume = list(saved["resume"])
        self.committed = sum(s["tokens"] for s in self.shards)
        self._tmp: str | None = None
        self._file = None
        self._written = 0  # tokens in the open shard
        self._starts: list[np.ndarray] = []  # offsets of documents from the open shard on
        self._resume_pending = False
        # A document whose last part has not come yet: (index, token offset of its start).
        self._open_doc: tuple[int, int] | None = None

    def _path(self, suffix: str = "") -> Path:
        ext = ".npy" if self.fmt == "npy" else ".bin"
        return self.folder / f"{self.name}_{len(self.shards):06d}{suffix or ext}"

    def append(
        self, ids: np.ndarray, lengths: np.ndarray, doc_index: np.ndarray, firsts, lasts
    ) -> None:
        """Adds items: whole documents or parts of one (ids framed, their lengths, their
        documents' indices, whether each begins / ends its document)."""
        if not len(lengths):
            return
        firsts, lasts = np.asarray(firsts, dtype=bool), np.asarray(lasts, dtype=bool)
        before = self.tokens + np.concatenate(([0], np.cumsum(lengths)[:-1]))
        after = before + lengths
        starts = before[firsts]
        self._starts.append(starts[starts >= self.committed])
        # Where each item's document starts, and how many documents end before it.
        first_item = np.maximum.accumulate(np.where(firsts, np.arange(len(firsts)), -1))
        carried = self._open_doc[1] if self._open_doc else 0
        doc_start = np.where(first_item >= 0, before[first_item.clip(0)], carried)
        docs_before = self.documents + np.concatenate(([0], np.cumsum(lasts)[:-1]))
        # On a resume the first document may straddle a finished shard: drop its head.
        ids = ids[max(0, self.committed - self.tokens) :]
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
            j = int(np.searchsorted(after, self.committed, side="right"))
            self.resume = [int(doc_index[j]), int(doc_start[j]), int(docs_before[j])]
            self._resume_pending = False
        self.tokens = int(after[-1])
        self.documents += int(lasts.sum())
        self._open_doc = None if lasts[-1] else (int(doc_index[-1]), int(doc_start[-1]))

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

    def _write(self, ids: np.ndarray) -> None:
        if self._file is None:
            # The name is recorded before the file exists, so an interrupt at any point
            # leaves abort() a name to remove (mkstemp's return could be lost to one).
            self._tmp = temporary_name(self._path())
            fd = create_exclusive(self._tmp)
            self._file = os.fdopen(fd, "wb")
            if self.fmt == "npy":
                self._file.write(bytes(NPY_HEADER_BYTES))
        self._file.write(ids.astype(self.dtype, copy=False).tobytes())
        self._written += len(ids)

    def _finish(self) -> None:
        """Closes the open shard: header, offsets sidecar, rename into place."""
        end = self.committed + self._written
        starts = np.concatenate(self._starts) if self._starts else np.zeros(0, np.int64)
        mine, self._starts = starts[starts < end], [starts[starts >= end]]
        if self.fmt == "npy":
            self._file.seek(0)
            self._file.write(npy_header(self.dtype.str, self._written))
        self._file.close()
        self._file = None
        path, index = self._path(), self._path(".idx.npy")
        atomic_write(index, npy_header("<i8", len(mine)) + mine.astype("<i8").tobytes())
        entry = {
            "file": path.name,
            "index": index.name,
            "split": self.name,
            "tokens": self._written,
            "documents": len(mine),
            "sha256": mf.sha256_of(self._tmp),
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


def _batch_chars() -> int:
    # Tests shrink the batch (BYTEPAIR_BATCH_CHARS) to get many batches from small files.
    return int(os.environ.get("BYTEPAIR_BATCH_CHARS") or BATCH_CHARS)


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _corpus_of_files(documents):
    from bytepair.sources import Corpus

    if not isinstance(documents, Corpus):
        raise TypeError(
            'engine="ray" needs the documents as files, opened with '
            "bytepair.sources.open_sources(paths): each task reads its part"
        )
    return documents


def _chunked(items: Iterator[tuple[str, bool]], chars: int = 1 << 18) -> Iterator[list]:
    """Items in lists of about ``chars`` characters (what a thread hands over at once).

    >>> list(_chunked(iter([("ab", True), ("c", True), ("d", True)]), chars=2))
    [[('ab', True)], [('c', True), ('d', True)]]
    """
    chunk: list = []
    size = 0
    for item in items:
        chunk.append(item)
        size += len(item[0])
        if size >= chars:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _items(tok, documents, shuffle_docs: int | None) -> Iterator[tuple]:
    """The documents (texts, or documents Ray encoded) as ``(document, last)`` items:
    long documents of a corpus in parts (``Corpus.parts``) when the tokenizer gives the
    same ids for the parts as for the whole (``sources.part_chars_for``), else whole;
    shuffled documents are whole."""
    from bytepair.sources import part_chars_for

    if hasattr(documents, "parts"):
        parts = documents.parts()
        if shuffle_docs is None and part_chars_for(tok) is not None:
            return parts
        documents = whole(parts)
    if shuffle_docs is not None:
        documents = shuffled(documents, shuffle_docs)
    return ((doc, True) for doc in documents)


def write_shards(
    tok,
    documents: Iterable[str],
    out_dir: str | os.PathLike,
    *,
    shard_tokens: int = 100_000_000,
    val_tokens: int | None = None,
    val_fraction: float | None = None,
    format: str = "bin",
    eot: str | None = "<|endoftext|>",
    bos: str | None = None,
    shuffle_docs: int | None = None,
    num_threads: int | None = None,
    progress=None,
    inputs: list[dict] | None = None,
    allowed_special=frozenset(),
    disallowed_special=(),
    engine: str = "local",
    ray_address: str | None = None,
) -> dict:
    """Encodes ``documents`` (any iterable of ``str``) into a folder of training shards
    and returns the manifest written to ``out_dir/manifest.json`` (plus ``seconds`` and ``resumed``).

    - ``shard_tokens``: tokens per shard (the last of each split may hold fewer);
      documents may straddle shards.
    - ``val_tokens=N``: the first documents, until N tokens, go to ``val_*`` shards;
      ``val_fraction=F``: each document goes to val with probability F, by a seeded
      hash of its index (deterministic). Val holds whole documents.
    - ``eot`` / ``bos``: special tokens written after / before every document (None:
      none). ``shuffle_docs=SEED``: documents in a deterministic shuffled order (a
      bounded buffer of ``SHUFFLE_CHARS`` characters, not a global shuffle).
    - Text that spells a special token is encoded as plain text by default (as
      nanoGPT's ``encode_ordinary``): corpus text must not inject control tokens.
      ``allowed_special`` / ``disallowed_special`` as in ``Tokenizer.encode``.
    - ``documents`` from ``bytepair.sources.open_sources`` are read on a thread while
      the core encodes, and their long documents in parts (``part_chars``; framed
      once, at the document's start and end) when the tokenizer's ids cannot change
      at the cuts (``sources.part_chars_for``): memory stays bounded whatever the
      document size. A caller's own iterable is read on the calling thread.
    - ``inputs``: ``[{"path", "bytes"}]`` the documents came from, recorded in the
      manifest and compared when resuming.
    - ``engine="ray"``: documents are encoded by Ray tasks (``ray_address``, or the
      cluster ``ray.init`` finds); ``documents`` must then be files opened with
      ``bytepair.sources.open_sources(...)``, which the tasks read
      themselves (``bytepair.runners.ray_encode``). The folder is byte-identical to
      the local run's, and either engine resumes the other's interrupted run.

    Interrupted (an exception, Ctrl-C, SIGTERM, SIGKILL), the same call continues after
    the last finished shard and the finished folder is byte-identical to an
    uninterrupted run's; with different inputs, options or tokenizer it refuses,
    saying what differs.
    """
    from bytepair import __version__
    from bytepair.runners import check_engine
    from bytepair.tokenizer import _threads

    check_progress(progress)
    check_engine(engine)
    if engine == "ray":
        _corpus_of_files(documents)
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
    threads = _threads(num_threads)
    eot_id, bos_id = _check_special(tok, eot, "eot"), _check_special(tok, bos, "bos")
    allowed, disallowed = tok._specials(allowed_special, disallowed_special)
    width = id_width(tok)
    dtype = "<u2" if width == 2 else "<u4"
    spec = mf.tokenizer_spec(tok)
    options = {
        "shard_tokens": shard_tokens,
        "val_tokens": val_tokens,
        "val_fraction": val_fraction,
        "format": format,
        "eot": eot,
        "bos": bos,
        "shuffle_docs": shuffle_docs,
        "allowed_special": sorted(allowed),
        "disallowed_special": sorted(set(disallowed) & set(tok.special_tokens)),
    }
    finger = mf.fingerprint(spec, options, inputs)

    out = check_writable_folder(out_dir)
    out.mkdir(exist_ok=True)
    remove_stale_temporaries(out)
    state_path, manifest_path = out / mf.STATE, out / mf.MANIFEST
    saved = mf.read_json(state_path) if state_path.exists() else None
    if saved is not None and (diff := mf.differences(saved["fingerprint"], finger)):
        raise ValueError(
            f"{out}: holds an unfinished run with other settings ({'; '.join(diff)}); "
            "rerun with the same settings to resume it, or delete the folder to start over"
        )
    if manifest_path.exists():
        if saved is None:
            raise FileExistsError(
                f"{out}: already holds finished shards ({mf.MANIFEST}); delete them or "
                "choose another folder"
            )
        state_path.unlink()  # killed between writing the manifest and this
        return mf.read_json(manifest_path)
    if saved is None and (any(out.glob("train_*")) or any(out.glob("val_*"))):
        raise FileExistsError(
            f"{out}: holds shard files but no {mf.STATE} to resume from; delete them or "
            "choose another folder"
        )

    splits = {
        name: _Split(
            name, out, shard_tokens, format, dtype, (saved or {}).get("splits", {}).get(name)
        )
        for name in SPLITS
    }
    train, val = splits["train"], splits["val"]
    if val_tokens is not None and val.tokens >= val_tokens and not val.closed:
        val.closed = True  # val_tokens=0: nothing goes to val
    seed = 0 if shuffle_docs is None else shuffle_docs

    def save_state(next_doc: int) -> None:
        points = [p for s in splits.values() if (p := s.checkpoint(next_doc)) is not None]
        mf.write_json(
            state_path,
            {
                "format": f"{mf.FORMAT_NAME}-state",
                "version": mf.FORMAT_VERSION,
                "fingerprint": finger,
                "resume_doc": min((p[0] for p in points), default=next_doc),
                "splits": {name: s.state() for name, s in splits.items()},
            },
        )

    def route(index: int) -> _Split:
        if val_fraction is not None:
            return val if in_val(index, val_fraction, seed) else train
        return val if val_tokens is not None and not val.closed else train

    batch_chars = _batch_chars()
    if engine == "ray":
        from bytepair.runners import ray_encode

        encoded = ray_encode.encoded_documents(
            tok,
            documents,
            dtype=dtype,
            allowed=allowed,
            disallowed=disallowed,
            batch_chars=batch_chars,
            address=ray_address,
            # Shuffled, the documents before the resume point are not a prefix.
            skip_docs=saved["resume_doc"] if saved and shuffle_docs is None else 0,
        )
        items = contextlib.closing(encoded)
        stream = _items(tok, encoded, shuffle_docs)
        encode_batch, size_of = ray_encode.joined, lambda doc: doc.nbytes
    else:
        items = contextlib.nullcontext()
        stream = _items(tok, documents, shuffle_docs)
        if hasattr(documents, "parts"):
            # Our own sources: read and split on a thread while the core encodes.
            stream = (item for chunk in read_ahead(_chunked(stream)) for item in chunk)
        size_of = _utf8_len

        def encode_batch(texts: list[str]):
            return tok.encode_batch_to_numpy(
                texts, num_threads=threads, allowed_special=allowed, disallowed_special=disallowed
            )

    open_to_val = False  # where the document whose parts are coming goes

    def encode(texts: list, index: list[int], firsts: list[bool], lasts: list[bool]) -> bool:
        """Encodes one batch of items (documents or parts of one; or documents Ray
        encoded) into its splits; True if a shard was finished."""
        nonlocal open_to_val
        shards_before = len(train.shards) + len(val.shards)
        ids, offsets = encode_batch(texts)
        ids, lengths = framed(ids, offsets, firsts, lasts, bos_id, eot_id, dtype)
        to_val = np.empty(len(index), dtype=bool)
        val_before = val.tokens
        for k, (i, first) in enumerate(zip(index, firsts)):
            if first and val_tokens is not None and not val.closed:
                # The first documents until val_tokens: a prefix, decided by the counts.
                open_to_val = val_before < val_tokens
            elif first:
                open_to_val = route(i) is val
            to_val[k] = open_to_val
            val_before += int(lengths[k]) if open_to_val else 0
        index = np.asarray(index, dtype=np.int64)
        firsts, lasts = np.asarray(firsts, dtype=bool), np.asarray(lasts, dtype=bool)
        # With no eot/bos an empty document has nothing to write; a document's empty
        # last part still ends it.
        keep = (lengths > 0) | (lasts & ~firsts)
        for split, mask in ((val, to_val & keep), (train, ~to_val & keep)):
            split.append(
                ids[np.repeat(mask, lengths)], lengths[mask], index[mask], firsts[mask], lasts[mask]
            )
        if (
            val_tokens is not None
            and not val.closed
            and val.tokens >= val_tokens
            and val._open_doc is None
        ):
            val.close()
        return len(train.shards) + len(val.shards) > shards_before

    resume_doc = saved["resume_doc"] if saved else 0
    total = sum(x["bytes"] for x in inputs) if inputs else None
    start = time.perf_counter()
    texts: list = []
    index: list[int] = []
    firsts: list[bool] = []
    lasts: list[bool] = []
    chars = done_bytes = 0
    n_docs = 0
    first = True
    try:
        if saved is None:
            save_state(0)
        with items, Progress(progress, total=total, desc="sharding") as bar:
            for text, last in stream:
                if first:
                    n_docs += 1
                i, first_part, first = n_docs - 1, first, last
                done_bytes += size_of(text)
                if i < route(i).skip_before:
                    continue  # its split holds it already: not even encoded
                texts.append(text)
                index.append(i)
                firsts.append(first_part)
                lasts.append(last)
                chars += len(text)
                if chars >= batch_chars:
                    if encode(texts, index, firsts, lasts):
                        save_state(i + 1 if last else i)
                    texts, index, firsts, lasts, chars = [], [], [], [], 0
                    bar(done_bytes)
                    if bar.bar is not None:
                        bar.bar.set_postfix_str(
                            f"{n_docs:,} docs, {train.tokens + val.tokens:,} tokens", refresh=False
                        )
            if n_docs < resume_doc:
                raise ValueError(
                    f"{out}: the documents ended after {n_docs:,}, before the point the "
                    f"interrupted run reached (document {resume_doc:,}): the input differs"
                )
            if texts:
                encode(texts, index, firsts, lasts)
            for split in (val, train):
                split.close()
            bar(total if total is not None else done_bytes)
    except BaseException:
        for split in splits.values():
            split.abort()
        raise
    manifest = {
        "format": mf.FORMAT_NAME,
        "version": mf.FORMAT_VERSION,
        "tokenizer": spec,
        "dtype": "uint16" if width == 2 else "uint32",
        "eot_id": eot_id,
        "bos_id": bos_id,
        "splits": {
            name: {"tokens": s.tokens, "documents": s.documents} for name, s in splits.items()
        },
        "shards": train.shards + val.shards,
        "inputs": inputs,
        "created_by": f"bytepair {__version__}",
    }
    mf.write_json(manifest_path, manifest)
    state_path.unlink()
    return {**manifest, "seconds": time.perf_counter() - start, "resumed": saved is not None}
