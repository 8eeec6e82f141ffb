"""bytepair side by side with its peers: training, encoding, worst cases, memory.

    pip install ".[bench]"          # the peers: tiktoken, tokenizers, rustbpe, sentencepiece, bpeasy, tokie
    python benchmarks/run.py --corpus /tmp/corpora/english_gutenberg.txt \\
        --code /tmp/corpora/code/code_python.txt [--train-mb 100] [--encode-mb 20] \\
        [--vocab 10000 32000] [--repeat 3] [--only train|encode] [--scaling] [--worst] [--memory]

Every measurement runs in a fresh subprocess (this script with --child), which prints
one JSON line: wall seconds and CPU seconds of the measured call alone, peak RSS of
that process (`ru_maxrss`), and what is needed to compare outputs (learned tokens, a
hash of the ids). Times are medians over --repeat runs; peak RSS is the largest.
The tables are markdown, on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata, resources
from pathlib import Path

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent
GPT2_DIR = REPO / "tests" / "data" / "gpt2"
CORES = os.cpu_count() or 1
PACKAGES = ["bytepair", "tiktoken", "tokenizers", "rustbpe", "sentencepiece", "bpeasy", "tokie"]
TIKTOKEN_CACHE_NAMES = {  # tiktoken's cache file names (sha1 of the download URL)
    "r50k_base": "0ea1e91bbb3a60f729a8dc8f777fd2fc07cd8df4",
    "p50k_base": "ec7223a39ce59f226a68acc30dc1af2788490e15",
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
    "gpt2/vocab.json": "6c7ea1a7e38e3a7f062df639a5b80947f075ffe6",
    "gpt2/merges.txt": "6d1cbeee0f20b3d9449abfede4726ed8212e3aee",
}
# Where text may be cut without changing how the GPT patterns split it (src/chunking.rs):
# after a "\n" that follows a printable non-space ASCII character, before a letter/digit.
SAFE_CUT = re.compile(r"(?<=[!-~]\n)(?=[A-Za-z0-9])")
WORST_CASES = {
    '"a" * 1_000_000': lambda n: "a" * 1_000_000,
    '"^" * 1_000_000': lambda n: "^" * 1_000_000,
    '"Hello" + "-" * 100_000': lambda n: "Hello" + "-" * 100_000,
    "one line, no whitespace": lambda n: random_line(n),
}


# -- helpers shared by parent and children ---------------------------------------------


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def documents(path: str):
    """The file's text split on <|endoftext|> (as bytepair's training splits it), streamed."""
    doc: list[str] = []
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            if EOT in line:
                *ends, rest = line.split(EOT)
                for end in ends:
                    doc.append(end)
                    yield "".join(doc)
                    doc = []
                doc = [rest]
            else:
                doc.append(line)
    yield "".join(doc)


def split_pieces(text: str, size: int = 1_000_000) -> list[str]:
    """text in pieces of about `size` characters, cut only where pre-tokens cannot span."""
    pieces, start = [], 0
    while len(text) - start > size:
        m = SAFE_CUT.search(text, start + size)
        if m is None:
            break
        pieces.append(text[start : m.start()])
        start = m.start()
    pieces.append(text[start:])
    return pieces


def random_line(n: int) -> str:
    """n random letters and punctuation marks, no whitespace."""
    import numpy as np

    alphabet = np.frombuffer(
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:!?'-\"()", np.uint8
    )
    return alphabet[np.random.default_rng(0).integers(0, len(alphabet), n)].tobytes().decode()


def rss_mib() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: on Linux a process's ru_maxrss
    starts at its parent's RSS when it was spawned (exec keeps the larger of the two)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn):
    """(fn(), {seconds, cpu_seconds, peak_rss_mib}) for one call; CPU counts all threads."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    return out, {"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mib": rss_mib()}


def ids_digest(seqs) -> dict:
    """A short hash of the concatenated ids (as uint32) and their number."""
    import numpy as np

    h, n = hashlib.sha256(), 0
    for ids in seqs:
        a = np.asarray(ids, dtype=np.uint32)
        h.update(a.tobytes())
        n += a.size
    return {"ids": h.hexdigest()[:16], "tokens": n}


def bytepair_command() -> list[str]:
    exe = Path(sys.executable).with_name("bytepair")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "bytepair"]


def spawn_and_wait(cmd: list[str]) -> dict:
    """Runs cmd; its wall/CPU seconds and peak RSS (from wait4, so its own alone)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            raise RuntimeError(err.read().decode(errors="replace").strip().splitlines()[-1:])
    return {
        "seconds": seconds,
        "cpu_seconds": ru.ru_utime + ru.ru_stime,
        "peak_rss_mib": ru.ru_maxrss / 1024,
    }


# -- training: one function per tool (run in a child) ----------------------------------


def train_bytepair(path: str, vocab: int, workers: int | None = None) -> dict:
    import bytepair

    tok, m = timed(
        lambda: bytepair.train(path, vocab, special_tokens=[EOT], workers=workers, progress=False)
    )
    return {**m, "learned": [(a + b).hex() for a, b in tok.merges]}


def train_rustbpe(path: str, vocab: int) -> dict:
    import rustbpe

    import bytepair

    tok = rustbpe.Tokenizer()
    # rustbpe has no special tokens: feed it the documents between them. Its vocab_size
    # is 256 + merges, so vocab - 1 makes as many merges as bytepair (which counts the
    # special token).
    _, m = timed(
        lambda: tok.train_from_iterator(
            documents(path), vocab - 1, pattern=bytepair.PATTERNS["gpt2"]
        )
    )
    ranks = sorted(tok.get_mergeable_ranks(), key=lambda kv: kv[1])
    return {**m, "learned": [bytes(t).hex() for t, _ in ranks[256:]]}


def train_tokenizers(path: str, vocab: int) -> dict:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from bytepair.formats import unicode_to_bytes

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's regex
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,  # counts the 256 bytes and the special token, as bytepair's
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    _, m = timed(lambda: tok.train_from_iterator(documents(path), trainer))
    u = unicode_to_bytes()
    merges = json.loads(tok.to_str())["model"]["merges"]
    return {**m, "learned": [bytes(u[c] for c in a + b).hex() for a, b in merges]}


def train_sentencepiece(path: str, vocab: int) -> dict:
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as tmp:
        _, m = timed(
            lambda: spm.SentencePieceTrainer.train(
                input=path,
                model_prefix=f"{tmp}/sp",
                vocab_size=vocab,
                model_type="bpe",
                byte_fallback=True,
                user_defined_symbols=[EOT],
                normalization_rule_name="identity",
                num_threads=CORES,
                minloglevel=2,
            )
        )
        sp = spm.SentencePieceProcessor(model_file=f"{tmp}/sp.model")
    learned = [
        sp.id_to_piece(i).replace("\u2581", " ").encode().hex()
        for i in range(sp.get_piece_size())
        if not (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))
        and len(sp.id_to_piece(i)) > 1
        and sp.id_to_piece(i) != EOT
    ]
    return {**m, "learned": learned}


def train_bpeasy(path: str, vocab: int) -> dict:
    import bpeasy

    import bytepair

    # bpeasy's vocab_size counts the 256 bytes; no special tokens (documents are fed
    # apart); max_token_length 128 bytes (bytepair has no limit).
    ranks, m = timed(
        lambda: bpeasy.train_bpe(documents(path), bytepair.PATTERNS["gpt2"], 128, vocab - 1)
    )
    ordered = sorted(ranks.items(), key=lambda kv: kv[1])
    return {**m, "learned": [t.hex() for t, _ in ordered[256:]]}


# -- encoding: one function per tool (run in a child) ----------------------------------


def load(fn):
    """(fn(), seconds it took): loading a tokenizer, timed apart from encoding."""
    t0 = time.perf_counter()
    return fn(), time.perf_counter() - t0


def _encode(text: str, mode: str, one, batch, load_seconds: float) -> dict:
    """Times one(text) or batch(pieces of text); the ids' hash, after the clock stops."""
    one(text[:10_000])  # warm up lazily built state
    if mode == "one":
        ids, m = timed(lambda: one(text))
        return {**m, **ids_digest([ids]), "load_seconds": load_seconds}
    pieces = split_pieces(text)
    ids, m = timed(lambda: batch(pieces))
    return {**m, **ids_digest(ids), "load_seconds": load_seconds, "pieces": len(pieces)}


def encode_bytepair(path: str, encoding: str, mode: str) -> dict:
    import bytepair

    tok, seconds = load(lambda: bytepair.get_encoding(encoding))
    return _encode(
        read_text(path),
        mode,
        tok.encode_ordinary,
        lambda docs: tok.encode_ordinary_batch(docs, num_threads=CORES),
        seconds,
    )


def encode_tiktoken(path: str, encoding: str, mode: str, refs: bool = False) -> dict:
    """With refs, also the hashes of encode(allowed_special="all") and of the
    documents between special tokens (what tokie's encode_files produces)."""
    import tiktoken

    enc, seconds = load(lambda: tiktoken.get_encoding(encoding))
    text = read_text(path)
    out = _encode(
        text,
        mode,
        enc.encode_ordinary,
        lambda docs: enc.encode_ordinary_batch(docs, num_threads=CORES),
        seconds,
    )
    if refs:
        out["ids_all"] = ids_digest([enc.encode(text, allowed_special="all")])["ids"]
        docs = (enc.encode_ordinary(d) for d in text.split(EOT) if d)
        out["ids_docs"] = ids_digest(docs)["ids"]
    return out


def encode_tokenizers(path: str, tokenizer_json: str, mode: str) -> dict:
    from tokenizers import Tokenizer

    tok, seconds = load(lambda: Tokenizer.from_file(tokenizer_json))
    return _encode(
        read_text(path),
        mode,
        lambda text: tok.encode(text, add_special_tokens=False).ids,
        lambda docs: [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)],
        seconds,
    )


def encode_tokie(path: str, tokenizer_json: str, mode: str) -> dict:
    import tokie

    tok, seconds = load(lambda: tokie.Tokenizer.from_json(tokenizer_json))
    if mode == "file":  # splits on <|endoftext|>, drops it, encodes the documents in Rust
        tok.encode("warm up", add_special_tokens=False)
        (ids, _), m = timed(lambda: tok.encode_files([path]))
        return {**m, **ids_digest([ids]), "load_seconds": seconds}
    return _encode(
        read_text(path),
        mode,
        lambda text: tok.encode(text, add_special_tokens=False).ids,
        lambda docs: [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)],
        seconds,
    )


def encode_bytepair_cli(path: str, encoding: str, out: str) -> dict:
    """`bytepair encode -t NAME FILE -o out.bin -q` as a process of its own (start-up,
    loading the encoding and writing included); peak RSS is that process's. Nothing is
    imported before it starts, since its ru_maxrss starts at this process's RSS."""
    m = spawn_and_wait([*bytepair_command(), "encode", "-t", encoding, path, "-o", out, "-q"])
    import numpy as np

    import bytepair

    wide = bytepair.get_encoding(encoding).max_token_value >= 1 << 16
    ids = np.fromfile(out, dtype=np.uint32 if wide else np.uint16)
    os.unlink(out)
    return {**m, **ids_digest([ids])}


def worst_bytepair(encoding: str, case: str, size: int, english: str) -> dict:
    """Encodes one worst-case text, or (case "english") the first `size` bytes of English."""
    import bytepair

    if case == "english":
        with open(english, "rb") as f:
            text = f.read(size).decode("utf-8", errors="ignore")
    else:
        text = WORST_CASES[case](size)
    tok = bytepair.get_encoding(encoding)
    tok.encode_ordinary("warm up")
    ids, m = timed(lambda: tok.encode_ordinary(text))
    return {**m, "bytes": len(text.encode()), "tokens": len(ids)}


CHILD_TASKS = {
    f.__name__: f
    for f in [
        train_bytepair,
        train_rustbpe,
        train_tokenizers,
        train_sentencepiece,
        train_bpeasy,
        encode_bytepair,
        encode_tiktoken,
        encode_tokenizers,
        encode_tokie,
        encode_bytepair_cli,
        worst_bytepair,
    ]
}


# -- running children --------------------------------------------------------------------


def run_child(task: str, timeout: float, **kwargs) -> dict:
    cmd = [sys.executable, __file__, "--child", json.dumps({"task": task, **kwargs})]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:g} s"}
    if p.returncode:
        lines = p.stderr.strip().splitlines() or [f"exit status {p.returncode}"]
        return {"error": lines[-1][:200]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(label: str, task: str, repeat: int, timeout: float, first: dict | None = None, **kw):
    """Runs task `repeat` times (first-run-only kwargs in `first`): median wall and CPU
    seconds, largest peak RSS; other fields from the first run."""
    runs = []
    for i in range(repeat):
        extra = first if first and i == 0 else {}
        r = run_child(task, timeout, **kw, **extra)
        if "error" in r:
            print(f"  {label}: {r['error']}", file=sys.stderr, flush=True)
            return r
        runs.append(r)
        print(f"  {label}: {r['seconds']:.2f} s", file=sys.stderr, flush=True)
    out = dict(runs[0])
    out["seconds"] = statistics.median(r["seconds"] for r in runs)
    out["cpu_seconds"] = statistics.median(r["cpu_seconds"] for r in runs)
    out["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    return out


# -- formatting --------------------------------------------------------------------------


def print_table(headers: list[str], rows: list[list]) -> None:
    """A markdown table; columns whose cells are all numbers (or blank) align right."""
    cells = [[str(c) for c in row] for row in rows]
    numeric = re.compile(r"^[-+]?[\d,.]+\s*[×%]?$|^—?$")
    right = [all(numeric.match(r[i]) for r in cells) for i in range(len(headers))]
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join("---:" if r else "---" for r in right) + "|")
    for row in cells:
        print("| " + " | ".join(row) + " |")
    print(flush=True)


def secs(x: float) -> str:
    return (
        f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"
    )


def speedup(bytepair_seconds: float | None, seconds: float) -> str:
    return "?" if bytepair_seconds is None else f"{seconds / bytepair_seconds:.2f}×"


def cells(r: dict, mb: float, bp_seconds: float | None, is_bytepair: bool) -> list[str]:
    """seconds, MB/s, CPU÷wall, peak RSS, speed-up of bytepair over this row."""
    s = r["seconds"]
    return [
        secs(s),
        f"{mb / s:.1f}",
        f"{r['cpu_seconds'] / s:.2f}",
        f"{r['peak_rss_mib']:.0f}",
        "—" if is_bytepair else speedup(bp_seconds, s),
    ]


def mb_of(path: Path) -> float:
    return path.stat().st_size / 1e6


# -- inputs ------------------------------------------------------------------------------


def prefix_file(src: Path, mb: float, dst: Path, whole_docs: bool = False) -> Path:
    """The first `mb` MB of src cut at a line end (or after the last <|endoftext|> line)."""
    if mb * 1e6 >= src.stat().st_size:
        return src
    with open(src, "rb") as f:
        data = f.read(int(mb * 1e6))
    end = data.rfind(EOT.encode() + b"\n") if whole_docs else -1
    if end >= 0:
        data = data[: end + len(EOT) + 1]
    else:
        data = data[: data.rfind(b"\n") + 1] or data
    dst.write_bytes(data)
    return dst


def repeated_file(src: Path, mb: float, dst: Path) -> Path:
    """src written over and over until the file holds `mb` MB (cut at a line end)."""
    target = int(mb * 1e6)
    data = src.read_bytes()
    with open(dst, "wb") as f:
        written = 0
        while written + len(data) <= target:
            f.write(data)
            written += len(data)
        rest = data[: target - written]
        f.write(rest[: rest.rfind(b"\n") + 1])
    return dst


def tiktoken_cache(dst: Path) -> Path:
    """A TIKTOKEN_CACHE_DIR filled from bytepair's bundled files and tests/data/gpt2, as
    tests/test_encodings.py does: tiktoken never downloads, and checks each file's hash."""
    dst.mkdir(exist_ok=True)
    for name, digest in TIKTOKEN_CACHE_NAMES.items():
        if name.startswith("gpt2/"):
            shutil.copy(GPT2_DIR / name.split("/")[1], dst / digest)
        else:
            packed = resources.files("bytepair").joinpath("data", f"{name}.tiktoken.xz")
            (dst / digest).write_bytes(lzma.decompress(packed.read_bytes()))
    return dst


def versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        kib = next(int(x.split()[1]) for x in open("/proc/meminfo") if x.startswith("MemTotal"))
        ram = f"{kib / 2**20:.1f} GiB RAM"
    except (OSError, StopIteration):
        ram = "RAM unknown"
    return f"{cpu}, {CORES} cores, {ram}, {platform.system()} {platform.machine()}"


def git_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return head + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# -- sections ------------------------------------------------------------------------------


TRAINERS = [  # (tool, package, child task, note)
    ("bytepair", "bytepair", "train_bytepair", f"workers={CORES}"),
    ("rustbpe", "rustbpe", "train_rustbpe", "documents split on <|endoftext|>"),
    ("HF tokenizers", "tokenizers", "train_tokenizers", "BpeTrainer + ByteLevel; documents"),
    ("bpeasy", "bpeasy", "train_bpeasy", "documents; max token 128 bytes"),
    (
        "sentencepiece",
        "sentencepiece",
        "train_sentencepiece",
        "NOT byte-level (chars + byte fallback; lines as sentences)",
    ),
]


def section_train(args, tmp: Path, vers: dict) -> None:
    path = prefix_file(args.corpus, args.train_mb, tmp / "train.txt")
    mb = mb_of(path)
    print(
        f"## Training ({path.name if path == args.corpus else args.corpus.name}, "
        f"first {mb:.1f} MB, GPT-2 pattern, special token {EOT})\n"
    )
    print(
        "Speed-up = peer seconds ÷ bytepair seconds. Tokens shared: the peer's learned "
        "(merged) tokens that bytepair also learned; same order: how many first merges "
        "agree.\n"
    )
    rows = []
    bp_learned = {}
    for vocab in args.vocab:
        bp_seconds = None
        for tool, package, task, note in TRAINERS:
            if vers.get(package) is None:
                rows.append(
                    [
                        vocab,
                        tool,
                        "",
                        "",
                        "",
                        "",
                        "",
                        "",
                        "",
                        f"not installed: pip install {package}",
                    ]
                )
                continue
            print(f"[train] {tool} vocab {vocab}", file=sys.stderr, flush=True)
            r = measure(tool, task, args.repeat, args.timeout, path=str(path), vocab=vocab)
            if "error" in r:
                rows.append([vocab, tool, "", "", "", "", "", "", "", f"failed: {r['error']}"])
                continue
            learned = r["learned"]
            if tool == "bytepair":
                bp_seconds, bp_learned[vocab] = r["seconds"], learned
                shared, order = "", ""
            else:
                ref = bp_learned.get(vocab, [])
                common = len(set(learned) & set(ref))
                shared = f"{100 * common / max(1, len(learned)):.1f}%"
                order = next(
                    (i for i, (a, b) in enumerate(zip(learned, ref)) if a != b),
                    min(len(learned), len(ref)),
                )
            rows.append(
                [
                    vocab,
                    tool,
                    *cells(r, mb, bp_seconds, tool == "bytepair"),
                    shared,
                    order,
                    f"{len(learned)} merges; {note}",
                ]
            )
    print_table(
        [
            "vocab",
            "tool",
            "seconds",
            "MB/s",
            "CPU÷wall",
            "peak RSS MiB",
            "bytepair speed-up",
            "tokens shared",
            "same order",
            "notes",
        ],
        rows,
    )
    if bp_learned:
        vocab = max(bp_learned)
        print(f"[train] bytepair workers=1 vocab {vocab}", file=sys.stderr, flush=True)
        r = run_child("train_bytepair", args.timeout, path=str(path), vocab=vocab, workers=1)
        same = (
            "error: " + r["error"]
            if "error" in r
            else ("identical" if r["learned"] == bp_learned[vocab] else "DIFFERENT")
        )
        print(
            f"bytepair merges with workers=1 and workers={CORES} ({mb:.1f} MB, vocab {vocab}): "
            f"{same}" + ("" if "error" in r else f" (workers=1 took {secs(r['seconds'])} s)") + "\n"
        )


def section_scaling(args, tmp: Path) -> None:
    vocab = args.vocab[0]
    print(f"## bytepair training throughput by corpus size (vocab {vocab}, workers={CORES})\n")
    rows = []
    for want in args.scaling_mb:
        path = prefix_file(args.corpus, want, tmp / f"scale{want:g}.txt")
        mb = mb_of(path)
        print(f"[scaling] {mb:.1f} MB", file=sys.stderr, flush=True)
        r = measure(
            "bytepair", "train_bytepair", args.repeat, args.timeout, path=str(path), vocab=vocab
        )
        if "error" in r:
            rows.append([f"{mb:.1f}", r["error"], "", "", ""])
        else:
            s = r["seconds"]
            rows.append(
                [
                    f"{mb:.1f}",
                    secs(s),
                    f"{mb / s:.1f}",
                    f"{r['cpu_seconds'] / s:.2f}",
                    f"{r['peak_rss_mib']:.0f}",
                ]
            )
        if path != args.corpus:
            path.unlink()
    print_table(["MB", "seconds", "MB/s", "CPU÷wall", "peak RSS MiB"], rows)


def encode_plan(name: str, vers: dict, hf_json: dict, out: Path, startup: str) -> list[dict]:
    """What to time for one encoding: mode, tool, child task and its arguments, and which
    tiktoken ids (`want`) the tool's ids must equal."""
    one, batch, file = "one call", f"batch, {CORES} threads", "file → shard"

    def job(label, tool, task, want, note, **kw):
        package = {"HF tokenizers": "tokenizers"}.get(tool, tool)
        return {
            "mode": label,
            "tool": tool,
            "package": package,
            "task": task,
            "want": want,
            "note": note,
            "kw": kw,
        }

    hf = name == "gpt2"  # HF tokenizers with GPT-2's own tokenizer.json
    tk = name in hf_json and vers.get("tokie") is not None
    j = str(hf_json.get(name))
    plan = [
        job(
            one,
            "tiktoken",
            "encode_tiktoken",
            None,
            "encode_ordinary(text)",
            encoding=name,
            mode="one",
        ),
        job(
            one,
            "bytepair",
            "encode_bytepair",
            "ids",
            "encode_ordinary(text)",
            encoding=name,
            mode="one",
        ),
    ]
    if hf:
        plan.append(
            job(
                one,
                "HF tokenizers",
                "encode_tokenizers",
                "ids_all",
                "encode(text); specials on",
                tokenizer_json=j,
                mode="one",
            )
        )
    if tk:
        plan.append(
            job(
                one,
                "tokie",
                "encode_tokie",
                "ids_all",
                "encode(text); specials on",
                tokenizer_json=j,
                mode="one",
            )
        )
    plan += [
        job(
            batch,
            "bytepair",
            "encode_bytepair",
            "ids",
            "encode_ordinary_batch, ~1 MB pieces",
            encoding=name,
            mode="batch",
        ),
        job(
            batch,
            "tiktoken",
            "encode_tiktoken",
            "ids",
            "encode_ordinary_batch, ~1 MB pieces",
            encoding=name,
            mode="batch",
        ),
    ]
    if hf:
        plan.append(
            job(
                batch,
                "HF tokenizers",
                "encode_tokenizers",
                "ids_all",
                "encode_batch; specials on",
                tokenizer_json=j,
                mode="batch",
            )
        )
    if tk:
        plan.append(
            job(
                batch,
                "tokie",
                "encode_tokie",
                "ids_all",
                "encode_batch; specials on",
                tokenizer_json=j,
                mode="batch",
            )
        )
    plan.append(
        job(
            file,
            "bytepair",
            "encode_bytepair_cli",
            "ids_all",
            f"`bytepair encode FILE -o out.bin`, {startup}",
            encoding=name,
            out=str(out),
        )
    )
    if tk:
        plan.append(
            job(
                file,
                "tokie",
                "encode_tokie",
                "ids_docs",
                "encode_files: documents between <|endoftext|>, ids in memory",
                tokenizer_json=j,
                mode="file",
            )
        )
    return plan


def section_encode(args, tmp: Path, vers: dict) -> None:
    import bytepair

    corpora = [("English", prefix_file(args.corpus, args.encode_mb, tmp / "english.txt", True))]
    if args.code:
        corpora.append(("code", prefix_file(args.code, args.encode_mb, tmp / "code.txt", True)))
    # HF tokenizers and tokie load Hugging Face tokenizer.json files: GPT-2's own for gpt2,
    # for the others one written by bytepair (Tokenizer.save_hf).
    hf_json = {}
    for name in args.encodings:
        if name == "gpt2":
            hf_json[name] = GPT2_DIR / "tokenizer.json"
        elif vers.get("tokie"):
            hf_json[name] = tmp / f"{name}.tokenizer.json"
            bytepair.get_encoding(name).save_hf(hf_json[name])
    tiny = prefix_file(args.corpus, 0.001, tmp / "tiny.txt")

    rows, exact = [], []
    for name in args.encodings:
        print(f"[encode] {name}: bytepair CLI start-up", file=sys.stderr, flush=True)
        r = run_child(
            "encode_bytepair_cli",
            args.timeout,
            path=str(tiny),
            encoding=name,
            out=str(tmp / "tiny.bin"),
        )
        startup = "" if "error" in r else f"incl. {r['seconds']:.2f} s start-up + load"
        for corpus, path in corpora:
            mb = mb_of(path)
            plan = encode_plan(name, vers, hf_json, tmp / "out.bin", startup)
            for p in plan:  # measure everything first: speed-ups and ids compare across rows
                if vers.get(p["package"]) is None:
                    p["result"] = {"error": f"not installed: pip install {p['package']}"}
                    continue
                print(
                    f"[encode] {name} {corpus} {p['mode']}: {p['tool']}",
                    file=sys.stderr,
                    flush=True,
                )
                first = {"refs": True} if p["want"] is None else None
                p["result"] = measure(
                    p["tool"],
                    p["task"],
                    args.repeat,
                    args.timeout,
                    first,
                    path=str(path),
                    **p["kw"],
                )
            ref = plan[0]["result"]
            bp_seconds = {
                p["mode"]: p["result"].get("seconds") for p in plan if p["tool"] == "bytepair"
            }
            for p in plan:
                r, mode, tool = p["result"], p["mode"], p["tool"]
                head = [name, f"{corpus} {mb:.1f} MB", mode, tool]
                if "error" in r:
                    rows.append([*head, "", "", "", "", "", "", "", r["error"]])
                    continue
                if p["want"] is None:
                    same = "(reference)"
                elif p["want"] not in ref:
                    same = "?"
                else:
                    same = "identical" if r["ids"] == ref[p["want"]] else "MISMATCH"
                if tool == "bytepair":
                    exact.append(
                        f"bytepair == tiktoken, {name}, {corpus} ({mb:.1f} MB), {mode}: {same}"
                    )
                rows.append(
                    [
                        *head,
                        *cells(r, mb, bp_seconds.get(mode), tool == "bytepair"),
                        f"{r['load_seconds']:.2f}" if "load_seconds" in r else "",
                        same,
                        p["note"],
                    ]
                )

    print(f"## Encoding (MB/s of UTF-8 input; English: whole books; {CORES} cores)\n")
    print(
        "Speed-up = peer seconds ÷ bytepair seconds in the same mode. `ids`: equal to "
        "tiktoken's ids for the same text (encode_ordinary; `specials on` rows and the "
        'bytepair CLI: encode(allowed_special="all"); tokie encode_files: the documents '
        "between <|endoftext|>). Seconds exclude loading the tokenizer (`load s`), except "
        "for the bytepair CLI row, a whole process. CPU÷wall ≈ cores kept busy.\n"
    )
    print_table(
        [
            "encoding",
            "corpus",
            "mode",
            "tool",
            "seconds",
            "MB/s",
            "CPU÷wall",
            "peak RSS MiB",
            "bytepair speed-up",
            "load s",
            "ids",
            "notes",
        ],
        rows,
    )
    for line in exact:
        print(f"- {line}")
    print()


def section_worst(args, tmp: Path) -> None:
    print(
        "## bytepair worst cases (one encode_ordinary call, vs the same number of bytes of English)\n"
    )
    rows = []
    line_bytes = int(args.worst_line_mb * 1e6)
    for name in ("gpt2", "cl100k_base"):
        for case in WORST_CASES:
            print(f"[worst] {name} {case}", file=sys.stderr, flush=True)
            w = measure(
                case,
                "worst_bytepair",
                args.repeat,
                args.timeout,
                encoding=name,
                case=case,
                size=line_bytes,
                english=str(args.corpus),
            )
            if "error" in w:
                rows.append([name, case, "", "", "", "", "", w["error"]])
                continue
            e = measure(
                "English",
                "worst_bytepair",
                args.repeat,
                args.timeout,
                encoding=name,
                case="english",
                size=w["bytes"],
                english=str(args.corpus),
            )
            if "error" in e:
                rows.append(
                    [name, case, f"{w['bytes']:,}", secs(w["seconds"]), "", "", "", e["error"]]
                )
                continue
            rows.append(
                [
                    name,
                    case,
                    f"{w['bytes']:,}",
                    secs(w["seconds"]),
                    f"{w['bytes'] / 1e6 / w['seconds']:.1f}",
                    secs(e["seconds"]),
                    f"{w['seconds'] / e['seconds']:.2f}×",
                    f"{w['tokens']:,}",
                ]
            )
    print_table(
        ["encoding", "text", "bytes", "seconds", "MB/s", "English seconds", "÷ English", "tokens"],
        rows,
    )


def section_memory(args, tmp: Path) -> None:
    print(
        "## bytepair encode memory (`bytepair encode -t gpt2 FILE -o out.bin -q`, whole process)\n"
    )
    rows, peaks = [], []
    for want in args.memory_mb:
        if want * 1e6 <= mb_of(args.corpus) * 1e6:
            path = prefix_file(args.corpus, want, tmp / f"mem{want:g}.txt")
        else:
            path = repeated_file(args.corpus, want, tmp / f"mem{want:g}.txt")
        mb = mb_of(path)
        print(f"[memory] {mb:.0f} MB", file=sys.stderr, flush=True)
        r = run_child(
            "encode_bytepair_cli",
            args.timeout,
            path=str(path),
            encoding="gpt2",
            out=str(tmp / "mem.bin"),
        )
        if path != args.corpus:
            path.unlink()
        if "error" in r:
            rows.append([f"{mb:.1f}", "", "", "", r["error"]])
            continue
        peaks.append((mb, r["peak_rss_mib"]))
        s = r["seconds"]
        rows.append(
            [
                f"{mb:.1f}",
                secs(s),
                f"{mb / s:.1f}",
                f"{r['cpu_seconds'] / s:.2f}",
                f"{r['peak_rss_mib']:.0f}",
            ]
        )
    print_table(["file MB", "seconds", "MB/s", "CPU÷wall", "peak RSS MiB"], rows)
    if len(peaks) >= 2:
        (mb0, p0), (mb1, p1) = peaks[0], peaks[-1]
        print(
            f"Peak RSS growth from {mb0:.0f} MB to {mb1:.0f} MB of input: {p1 - p0:+.0f} MiB "
            f"({p0:.0f} → {p1:.0f} MiB, ×{p1 / p0:.2f} for ×{mb1 / mb0:.1f} the input).\n"
        )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        spec = json.loads(sys.argv[2])
        print(json.dumps(CHILD_TASKS[spec.pop("task")](**spec)))
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--corpus",
        type=Path,
        required=True,
        help="English text, documents separated by <|endoftext|> lines",
    )
    ap.add_argument("--code", type=Path, help="a code corpus for the encoding table")
    ap.add_argument(
        "--train-mb", type=float, default=100, help="train on the first N MB (default 100)"
    )
    ap.add_argument(
        "--encode-mb", type=float, default=20, help="encode N MB of whole documents (default 20)"
    )
    ap.add_argument("--vocab", type=int, nargs="+", default=[10_000, 32_000])
    ap.add_argument("--encodings", nargs="+", default=["gpt2", "cl100k_base", "o200k_base"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per cell: median time (default 3)")
    ap.add_argument("--only", choices=["train", "encode"], help="run only this main section")
    ap.add_argument("--scaling", action="store_true", help="bytepair training MB/s by corpus size")
    ap.add_argument("--scaling-mb", type=float, nargs="+", default=[10, 50, 100, 200])
    ap.add_argument("--worst", action="store_true", help="bytepair worst-case inputs")
    ap.add_argument(
        "--worst-line-mb", type=float, default=50, help="size of the no-whitespace line"
    )
    ap.add_argument("--memory", action="store_true", help="peak RSS of the CLI on growing files")
    ap.add_argument("--memory-mb", type=float, nargs="+", default=[100, 1000])
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per measurement")
    ap.add_argument(
        "--tmp", type=Path, default=None, help="where temporary files go (default: /tmp)"
    )
    args = ap.parse_args()

    vers = versions()
    if vers["bytepair"] is None:
        sys.exit("bytepair is not installed: pip install '.[bench]'")
    with tempfile.TemporaryDirectory(prefix="bytepair-bench-", dir=args.tmp) as t:
        tmp = Path(t)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tiktoken_cache(tmp / "tiktoken-cache"))
        print("# bytepair benchmark\n")
        print(f"- machine: {machine()}")
        print(
            f"- Python {platform.python_version()}; bytepair {vers['bytepair']} (git {git_commit()})"
        )
        print("- peers: " + ", ".join(f"{k} {v}" for k, v in vers.items() if v and k != "bytepair"))
        missing = [k for k, v in vers.items() if v is None]
        if missing:
            print("- not installed: " + ", ".join(missing) + " (pip install '.[bench]')")
        print(
            f"- corpus: {args.corpus.name} ({mb_of(args.corpus):.1f} MB)"
            + (f"; code: {args.code.name} ({mb_of(args.code):.1f} MB)" if args.code else "")
        )
        print(f"- command: python {' '.join(sys.argv)}")
        print(
            f"- {args.repeat} run(s) per cell, each in a fresh process: median wall time, largest peak RSS\n"
        )
        if args.only in (None, "train"):
            section_train(args, tmp, vers)
        if args.scaling:
            section_scaling(args, tmp)
        if args.only in (None, "encode"):
            section_encode(args, tmp, vers)
        if args.worst:
            section_worst(args, tmp)
        if args.memory:
            section_memory(args, tmp)


if __name__ == "__main__":
    main()
