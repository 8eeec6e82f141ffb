"""What a shard folder says about itself: ``manifest.json`` (written last: its presence
means the folder is complete) and, while a run is unfinished, ``resume-state.json``
(what is done, where to continue, and a fingerprint of what made it).

Both are plain JSON written through a temporary file and a rename, so a kill at any
moment leaves either the old or the new version, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from bytepair._files import atomic_write

MANIFEST = "manifest.json"
STATE = "resume-state.json"
FORMAT_NAME = "bytepair-shards"
#: Version 3 records XXH3-128 digests (``xxh3_128``, ``index_xxh3_128``); version 2
#: recorded BLAKE3 (``blake3``, ...) and version 1 SHA-256 (``sha256``, ...), which the
#: reader still checks (a folder resumed across versions may hold more than one kind).
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
#: The digest of each file the manifest lists, and the key it goes under.
DIGEST = "xxh3_128"
#: Every digest a manifest may hold, newest first.
DIGESTS = ("xxh3_128", "blake3", "sha256")


def tokenizer_spec(tok) -> dict:
    """Enough to rebuild ``tok`` exactly: a bundled encoding's name, else the full text
    of our ``.bytepair`` format."""
    if tok.name is not None:
        return {"name": tok.name}
    from bytepair.formats import bytepair as bytepair_format

    return {"bytepair": bytepair_format.to_text(tok.model)}


def tokenizer_from_spec(spec: dict, where: str):
    """The inverse of :func:`tokenizer_spec`; ``where`` names the file in errors."""
    if "name" in spec:
        from bytepair.encodings import get_encoding

        return get_encoding(spec["name"])
    if "bytepair" in spec:
        from bytepair.formats import bytepair as bytepair_format
        from bytepair.tokenizer import Tokenizer

        model = bytepair_format.from_bytes(spec["bytepair"].encode("utf-8"), where)
        return Tokenizer.from_model(model)
    raise ValueError(f"{where}: 'tokenizer' holds neither 'name' nor 'bytepair'")


def describe_tokenizer(spec: dict) -> str:
    """A tokenizer spec for people: its name, or a digest of its ``.bytepair`` text."""
    if "name" in spec:
        return spec["name"]
    digest = hashlib.sha256(spec["bytepair"].encode("utf-8")).hexdigest()[:12]
    return f"a .bytepair tokenizer (sha256 {digest}...)"


def fingerprint(tok_spec: dict, options: dict, inputs: list[dict] | None) -> dict:
    """What must be equal for a run to continue another: tokenizer, options, inputs."""
    return {"tokenizer": describe_tokenizer(tok_spec), "options": options, "inputs": inputs}


def differences(then: dict, now: dict) -> list[str]:
    """How two fingerprints differ, in words (empty when they are equal).

    >>> differences({"tokenizer": "gpt2", "options": {"shard_tokens": 10}, "inputs": None},
    ...             {"tokenizer": "gpt2", "options": {"shard_tokens": 20}, "inputs": None})
    ['shard_tokens was 10, now 20']
    """
    out = []
    if then["tokenizer"] != now["tokenizer"]:
        out.append(f"the tokenizer was {then['tokenizer']}, now {now['tokenizer']}")
    for key in sorted(set(then["options"]) | set(now["options"])):
        a, b = then["options"].get(key), now["options"].get(key)
        if a != b:
            out.append(f"{key} was {a!r}, now {b!r}")
    a, b = then["inputs"], now["inputs"]
    if a != b:
        if a is None or b is None or [x["path"] for x in a] != [x["path"] for x in b]:
            names = [
                [x["path"] for x in side] if side is not None else "not recorded" for side in (a, b)
            ]
            out.append(f"the inputs were {names[0]}, now {names[1]}")
        else:
            out.extend(
                f"input {x['path']} was {x['bytes']:,} bytes, now {y['bytes']:,}"
                for x, y in zip(a, b)
                if x != y
            )
    return out


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None


def write_json(path: Path, doc: dict) -> None:
    atomic_write(path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))


def new_digest():
    """A running digest of the kind the manifest records (``update(buffer)``,
    ``hexdigest()``): XXH3-128, hashed in the core without the GIL. The digest is there
    to catch files damaged or cut short, as a checksum; XXH3 does that at 3-4 times
    BLAKE3's speed, whose digest of every shard (version 2) cost a shard folder 7-10%
    of its wall time on two cores."""
    from bytepair import _core

    return _core.Checksum()


def digest_of(path: str | os.PathLike, algorithm: str = DIGEST) -> str:
    """The hex digest of the file at ``path``: ``"xxh3_128"`` (what this version
    records), ``"blake3"`` (folders of format version 2) or ``"sha256"`` (version 1)."""
    if algorithm == "sha256":
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        return h.hexdigest()
    from bytepair import _core

    return _core.file_checksum(os.fspath(path), algorithm)  # names any other it lacks
