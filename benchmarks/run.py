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


def encode_bytepair(path: str, encoding: str, mode: str, out: str | None = None) -> dict:
    import bytepair

    tok, seconds = load(lambda: bytepair.get_encoding(encoding))
    if mode == "file":  # Tokenizer.encode_file: read, encode and write in Rust
        import numpy as np

        tok.encode_ordinary("warm up")
        _, m = timed(lambda: tok.encode_file(path, out, allowed_special="all"))
        wide = tok.max_token_value >= 1 << 16
        ids = np.fromfile(out, dtype=np.uint32 if wide else np.uint16)
        os.unlink(out)
        return {**m, **ids_digest([ids]), "load_seconds": seconds}
    threads = 1 if mode in ("batch1", "numpy1") else CORES
    if mode.startswith("numpy"):  # one flat uint32 array (+ offsets), no Python ints
        import numpy  # noqa: F401  (imported once per process, not timed)

        def batch(docs):
            ids, _ = tok.encode_batch_to_numpy(docs, num_threads=threads, disallowed_special=())
            return [ids]
    else:

        def batch(docs):
            return tok.encode_ordinary_batch(docs, num_threads=threads)

    return _encode(read_text(path), mode, tok.encode_ordinary, batch, seconds)


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


def encode_bytepair_cli(path: str, encoding: str, out: str, digest: bool = True) -> dict:
    """`bytepair encode -t NAME FILE -o out.bin -q` as a process of its own (start-up,
    loading the encoding and writing included); peak RSS is that process's. Nothing is
    imported before it starts, since its ru_maxrss starts at this process's RSS."""
    m = spawn_and_wait([*bytepair_command(), "encode", "-t", encoding, path, "-o", out, "-q"])
    if not digest:
        os.unlink(out)
        return m
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


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# numpy's OpenBLAS starts a thread per core at import, and those threads spin for a while
# before they sleep: on 2 cores that stole up to a third of the CPU from whatever was
# timed just after `import numpy` (perf: 12% of samples in blas_thread_server). No
# measured call uses BLAS, so children run with one BLAS thread (none started).
CHILD_ENV = {"OPENBLAS_NUM_THREADS": "1"}


def run_child(timeout: float, task: str, **kwargs) -> dict:
    """Runs CHILD_TASKS[task](**kwargs) in a fresh process: its JSON, or {"error": ...}."""
    cmd = [sys.executable, __file__, "--child", json.dumps({"task": task, **kwargs})]
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **CHILD_ENV}
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:g} s"}
    if p.returncode:
        lines = p.stderr.strip().splitlines() or [f"exit status {p.returncode}"]
        return {"error": lines[-1][:200]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(args, label: str, task: str, first: dict | None = None, **kwargs) -> dict:
    """Runs a task --repeat times (`first`: extra arguments for the first run only):
    median wall and CPU seconds, largest peak RSS, other fields from the first run."""
    return measure_interleaved(args, {None: (label, task, first, kwargs)})[None]


def measure_interleaved(args, jobs: dict) -> dict:
    """Like `measure` for several tasks ({key: (label, task, first, kwargs)}), run in
    rounds: one run of each task per round, --repeat rounds. A slow spell of a noisy
    machine then falls on every task alike, instead of on whichever ran through it.
    Returns {key: result}; a task that fails is not run again."""
    runs: dict = {key: [] for key in jobs}
    failed: dict = {}
    for i in range(args.repeat):
        for key, (label, task, first, kwargs) in jobs.items():
            if key in failed:
                continue
            if len(jobs) > 1:
                log(f"  {label} (round {i + 1} of {args.repeat})")
            r = run_child(args.timeout, task, **kwargs, **(first if first and i == 0 else {}))
            if "error" in r:
                log(f"  {label}: {r['error']}")
                failed[key] = r
                continue
            log(f"  {label}: {r['seconds']:.2f} s")
            runs[key].append(r)
    return {key: failed.get(key) or _aggregate(runs[key]) for key in jobs}


def _aggregate(runs: list[dict]) -> dict:
    return {
        **runs[0],
        "seconds": statistics.median(r["seconds"] for r in runs),
        "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
    }


# -- formatting --------------------------------------------------------------------------


def print_table(columns: str, rows: list[list]) -> None:
    """A markdown table ("a | b | c" names the columns); rows shorter than the header
    (failures) are padded before their last cell. Numeric columns align right."""
    names = columns.split(" | ")
    cells = [[str(c) for c in row] for row in rows]
    cells = [r[:-1] + [""] * (len(names) - len(r)) + r[-1:] for r in cells]
    numeric = re.compile(r"^[-+]?[\d,.]+\s*[×%]?$|^—?$")
    right = [all(numeric.match(r[i]) for r in cells) for i in range(len(names))]
    print("| " + " | ".join(names) + " |")
    print("|" + "|".join("---:" if r else "---" for r in right) + "|")
    for row in cells:
        print("| " + " | ".join(row) + " |")
    print(flush=True)


def secs(x: float) -> str:
    return (
        f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"
    )


def stats(r: dict, mb: float) -> list[str]:
    """seconds, MB/s, CPU÷wall (≈ cores kept busy), peak RSS MiB."""
    s = r["seconds"]
    return [secs(s), f"{mb / s:.1f}", f"{r['cpu_seconds'] / s:.2f}", f"{r['peak_rss_mib']:.0f}"]


def speedup(tool: str, seconds: float, bytepair_seconds: float | None) -> str:
    """How many times faster bytepair is than this row (peer seconds ÷ bytepair seconds)."""
    if tool.startswith("bytepair"):
        return "—"
    return "?" if bytepair_seconds is None else f"{seconds / bytepair_seconds:.2f}×"


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
    def field(path: str, key: str) -> str:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            return ""
        return next((x.split(":", 1)[1].strip() for x in lines if x.startswith(key)), "")

    cpu = field("/proc/cpuinfo", "model name") or platform.processor() or "CPU unknown"
    kib = field("/proc/meminfo", "MemTotal").split()
    ram = f"{int(kib[0]) / 2**20:.1f} GiB RAM" if kib else "RAM unknown"
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

TRAINERS = [  # tool, package, child task, note
    ("bytepair", "bytepair", "train_bytepair", f"workers={CORES}"),
    ("rustbpe", "rustbpe", "train_rustbpe", "fed the documents between <|endoftext|>"),
    ("HF tokenizers", "tokenizers", "train_tokenizers", "BpeTrainer + ByteLevel; documents"),
    ("bpeasy", "bpeasy", "train_bpeasy", "documents; max token length 128 bytes"),
    (
        "sentencepiece",
        "sentencepiece",
        "train_sentencepiece",
        "NOT byte-level: chars + byte fallback, lines as sentences",
    ),
]


def section_train(args, tmp: Path, vers: dict) -> None:
    path = prefix_file(args.corpus, args.train_mb, tmp / "train.txt")
    mb = mb_of(path)
    print(f"## Training: {args.corpus.name}, first {mb:.1f} MB, GPT-2 pattern, {EOT}\n")
    print(
        "Speed-up: peer seconds ÷ bytepair seconds. Tokens shared: the share of the peer's "
        "learned (merged) tokens that bytepair learned too; same order: the number of first "
        "merges that agree (ties are broken differently: bytepair takes the "
        "lexicographically greatest pair, as CS336 specifies).\n"
    )
    rows, bp = [], {}  # bp[vocab]: bytepair's result
    for vocab in args.vocab:
        for tool, package, task, note in TRAINERS:
            if vers[package] is None:
                rows.append([vocab, tool, f"not installed: pip install {package}"])
                continue
            log(f"[train] {tool}, vocab {vocab}")
            r = measure(args, tool, task, path=str(path), vocab=vocab)
            if "error" in r:
                rows.append([vocab, tool, f"failed: {r['error']}"])
                continue
            learned, ref = r["learned"], bp.get(vocab, {}).get("learned", [])
            if tool == "bytepair":
                bp[vocab] = r
                shared = order = ""
            else:
                shared = f"{100 * len(set(learned) & set(ref)) / max(1, len(learned)):.1f}%"
                order = next((i for i, (a, b) in enumerate(zip(learned, ref)) if a != b), None)
                order = min(len(learned), len(ref)) if order is None else order
            bp_seconds = bp.get(vocab, {}).get("seconds")
            rows.append(
                [
                    vocab,
                    tool,
                    *stats(r, mb),
                    speedup(tool, r["seconds"], bp_seconds),
                    shared,
                    order,
                    f"{len(learned)} merges; {note}",
                ]
            )
    print_table(
        "vocab | tool | seconds | MB/s | CPU÷wall | peak RSS MiB | bytepair speed-up | "
        "tokens shared | same order | notes",
        rows,
    )
    if bp:  # the result must not depend on the number of workers
        vocab = max(bp)
        log(f"[train] bytepair, vocab {vocab}, workers=1")
        r = run_child(args.timeout, "train_bytepair", path=str(path), vocab=vocab, workers=1)
        if "error" in r:
            verdict = f"error: {r['error']}"
        else:
            verdict = "identical" if r["learned"] == bp[vocab]["learned"] else "DIFFERENT"
        print(
            f"bytepair merges with workers=1 and workers={CORES} ({mb:.1f} MB, vocab {vocab}): "
            f"{verdict}\n"
        )


def section_scaling(args, tmp: Path) -> None:
    vocab = args.vocab[0]
    print(f"## bytepair training throughput by corpus size (vocab {vocab}, workers={CORES})\n")
    rows, last = [], None
    for want in args.scaling_mb:
        path = prefix_file(args.corpus, want, tmp / "scaling.txt")
        mb = mb_of(path)
        log(f"[scaling] {mb:.1f} MB")
        r = measure(args, "bytepair", "train_bytepair", path=str(path), vocab=vocab)
        rows.append([f"{mb:.1f}", r["error"]] if "error" in r else [f"{mb:.1f}", *stats(r, mb)])
        if "error" not in r:
            last = (mb, r["seconds"])
    print_table("MB | seconds | MB/s | CPU÷wall | peak RSS MiB", rows)
    if last:
        mb, seconds = last
        print(
            f"Projected at the {mb:.0f} MB rate ({mb / seconds:.1f} MB/s; training time is "
            "linear in the corpus): "
            + ", ".join(
                f"{name} ({gb} GB) ≈ {gb * 1000 / (mb / seconds) / 60:.1f} min"
                for name, gb in PROJECTIONS
            )
            + ".\n"
        )


PROJECTIONS = [("TinyStories-train", 2.2), ("OpenWebText", 11.0)]

MODES = {
    "one": "one call",
    "batch1": "batch, 1 thread",
    "batch": f"batch, {CORES} threads",
    "numpy1": "batch → numpy, 1 thread",
    "numpy": f"batch → numpy, {CORES} threads",
    "file": "file → shard",
}
ENCODERS = [  # mode, tool, child task, which tiktoken ids it must equal, note
    ("one", "tiktoken", "encode_tiktoken", None, "encode_ordinary(text)"),
    ("one", "bytepair", "encode_bytepair", "ids", "encode_ordinary(text)"),
    ("one", "HF tokenizers", "encode_tokenizers", "ids_all", "encode(text); specials on"),
    ("one", "tokie", "encode_tokie", "ids_all", "encode(text); specials on"),
    ("batch1", "bytepair", "encode_bytepair", "ids", "encode_ordinary_batch, num_threads=1"),
    ("batch", "bytepair", "encode_bytepair", "ids", "encode_ordinary_batch, ~1 MB pieces"),
    ("batch", "tiktoken", "encode_tiktoken", "ids", "encode_ordinary_batch, ~1 MB pieces"),
    ("batch", "HF tokenizers", "encode_tokenizers", "ids_all", "encode_batch; specials on"),
    ("batch", "tokie", "encode_tokie", "ids_all", "encode_batch; specials on"),
    ("numpy1", "bytepair", "encode_bytepair", "ids", "encode_batch_to_numpy, num_threads=1"),
    ("numpy", "bytepair", "encode_bytepair", "ids", "encode_batch_to_numpy, ~1 MB pieces"),
    (
        "file",
        "bytepair",
        "encode_bytepair",
        "ids_all",
        'Tokenizer.encode_file(FILE, "out.bin"): read, encode, write',
    ),
    ("file", "bytepair CLI", "encode_bytepair_cli", "ids_all", "`bytepair encode FILE -o out.bin`"),
    (
        "file",
        "tokie",
        "encode_tokie",
        "ids_docs",
        "encode_files (documents between EOT; ids in memory)",
    ),
]


def section_encode(args, tmp: Path, vers: dict) -> None:
    import bytepair

    corpora = [("English", prefix_file(args.corpus, args.encode_mb, tmp / "english.txt", True))]
    if args.code:
        corpora.append(("code", prefix_file(args.code, args.encode_mb, tmp / "code.txt", True)))
    # HF tokenizers (gpt2 only) and tokie load a Hugging Face tokenizer.json: GPT-2's own,
    # or for the other encodings one that bytepair writes (Tokenizer.save_hf).
    tokenizer_json = {"gpt2": GPT2_DIR / "tokenizer.json"}
    if vers["tokie"]:
        for name in set(args.encodings) - {"gpt2"}:
            tokenizer_json[name] = tmp / f"{name}.tokenizer.json"
            bytepair.get_encoding(name).save_hf(tokenizer_json[name])
    tiny = prefix_file(args.corpus, 0.001, tmp / "tiny.txt")

    rows, verdicts, scaling = [], [], []
    for name in args.encodings:
        log(f"[encode] {name}: bytepair CLI on {tiny.stat().st_size} bytes (start-up + load)")
        r = measure(
            args,
            "start-up",
            "encode_bytepair_cli",
            path=str(tiny),
            encoding=name,
            out=str(tmp / "out.bin"),
        )
        startup = "" if "error" in r else f", incl. {r['seconds']:.2f} s start-up + load"
        for corpus, path in corpora:
            mb = mb_of(path)
            jobs = {}  # measured first, in rounds: speed-ups and ids compare across rows
            for mode, tool, task, want, _ in ENCODERS:
                package = {"HF tokenizers": "tokenizers", "bytepair CLI": "bytepair"}.get(
                    tool, tool
                )
                if vers[package] is None or (tool == "HF tokenizers" and name != "gpt2"):
                    continue  # the header lists the packages not installed
                if package in ("bytepair", "tiktoken"):
                    kw = {"encoding": name}
                else:
                    kw = {"tokenizer_json": str(tokenizer_json[name])}
                if task != "encode_bytepair_cli":
                    kw["mode"] = mode
                if mode == "file" and package == "bytepair":
                    kw["out"] = str(tmp / "out.bin")
                first = {"refs": True} if want is None else None
                label = f"[encode] {name}, {corpus}, {MODES[mode]}: {tool}"
                jobs[mode, tool] = (label, task, first, {"path": str(path), **kw})
            results = measure_interleaved(args, jobs)
            ref = results["one", "tiktoken"]
            ours = {m: results.get((m, "bytepair"), {}).get("seconds") for m in MODES}
            for many, one_thread, what in (
                ("batch", "batch1", "lists"),
                ("numpy", "numpy1", "numpy"),
            ):
                if ours[many] and ours["one"] and ours[one_thread]:
                    scaling.append(
                        f"{name}, {corpus}, {what}: {ours['one'] / ours[many]:.2f}× one call, "
                        f"{ours[one_thread] / ours[many]:.2f}× the same batch on 1 thread"
                    )
            for mode, tool, _, want, note in ENCODERS:
                if (mode, tool) not in results:
                    continue
                r = results[mode, tool]
                head = [name, f"{corpus} {mb:.1f} MB", MODES[mode], tool]
                if "error" in r:
                    rows.append([*head, r["error"]])
                    continue
                if want is None:
                    same = "(reference)"
                elif want not in ref:
                    same = "?"
                else:
                    same = "identical" if r["ids"] == ref[want] else "MISMATCH"
                if tool.startswith("bytepair"):
                    verdicts.append(
                        f"{tool} == tiktoken, {name}, {corpus} ({mb:.1f} MB), {MODES[mode]}: {same}"
                    )
                    note += startup if tool == "bytepair CLI" else ""
                bp_seconds = results.get((mode, "bytepair"), {}).get("seconds")
                load_s = f"{r['load_seconds']:.2f}" if "load_seconds" in r else ""
                rows.append(
                    [
                        *head,
                        *stats(r, mb),
                        speedup(tool, r["seconds"], bp_seconds),
                        load_s,
                        same,
                        note,
                    ]
                )

    print(f"## Encoding: MB/s of UTF-8 input (English: whole books), {CORES} cores\n")
    print(
        "Speed-up: peer seconds ÷ bytepair seconds in the same mode. Seconds exclude loading "
        "the tokenizer (`load s`), except in the bytepair CLI row (a whole process). `ids`: "
        "equal to tiktoken's for the same text: encode_ordinary; with `specials on` and for "
        'the bytepair CLI, encode(allowed_special="all"); for tokie encode_files, the '
        "documents between <|endoftext|> (it drops them). HF tokenizers and tokie load GPT-2's "
        "tokenizer.json, or for cl100k/o200k one written by bytepair's Tokenizer.save_hf.\n"
    )
    print_table(
        "encoding | corpus | mode | tool | seconds | MB/s | CPU÷wall | peak RSS MiB | "
        "bytepair speed-up | load s | ids | notes",
        rows,
    )
    print("\n".join(f"- {v}" for v in verdicts) + "\n")
    if scaling:
        print(f"bytepair batch encoding on {CORES} threads, speed-up over one thread:\n")
        print("\n".join(f"- {v}" for v in scaling) + "\n")


def section_worst(args, tmp: Path) -> None:
    print("## bytepair worst cases: one encode_ordinary call vs as many bytes of English\n")
    rows = []
    for name in ("gpt2", "cl100k_base"):
        for case in WORST_CASES:
            log(f"[worst] {name}: {case}")
            kw = {"encoding": name, "english": str(args.corpus)}
            w = measure(
                args, case, "worst_bytepair", case=case, size=int(args.worst_line_mb * 1e6), **kw
            )
            if "error" in w:
                rows.append([name, case, w["error"]])
                continue
            e = measure(args, "English", "worst_bytepair", case="english", size=w["bytes"], **kw)
            if "error" in e:
                rows.append([name, case, e["error"]])
                continue
            mb, s = w["bytes"] / 1e6, w["seconds"]
            rows.append(
                [
                    name,
                    case,
                    f"{w['bytes']:,}",
                    f"{w['tokens']:,}",
                    secs(s),
                    f"{mb / s:.1f}",
                    secs(e["seconds"]),
                    f"{s / e['seconds']:.2f}×",
                ]
            )
    print_table(
        "encoding | text | bytes | tokens | seconds | MB/s | English seconds | ÷ English", rows
    )


def section_memory(args, tmp: Path) -> None:
    print("## bytepair encode memory: `bytepair encode -t gpt2 FILE -o out.bin -q`\n")
    rows, peaks = [], []
    for want in args.memory_mb:
        path = tmp / "memory.txt"
        if want <= mb_of(args.corpus):
            path = prefix_file(args.corpus, want, path)
        else:
            path = repeated_file(args.corpus, want, path)
        mb = mb_of(path)
        log(f"[memory] {mb:.0f} MB")
        r = run_child(
            args.timeout,
            "encode_bytepair_cli",
            path=str(path),
            encoding="gpt2",
            out=str(tmp / "out.bin"),
            digest=False,
        )
        if path != args.corpus:
            path.unlink()
        if "error" in r:
            rows.append([f"{mb:.1f}", r["error"]])
            continue
        peaks.append((mb, r["peak_rss_mib"]))
        rows.append([f"{mb:.1f}", *stats(r, mb)])
    print_table("file MB | seconds | MB/s | CPU÷wall | peak RSS MiB", rows)
    if len(peaks) >= 2:
        (mb0, p0), (mb1, p1) = peaks[0], peaks[-1]
        print(
            f"Peak RSS growth from {mb0:.0f} MB to {mb1:.0f} MB of input: {p1 - p0:+.0f} MiB "
            f"({p0:.0f} → {p1:.0f} MiB, ×{p1 / p0:.2f} for ×{mb1 / mb0:.1f} the input).\n"
        )


def print_header(args, vers: dict) -> None:
    print("# bytepair benchmark\n")
    print(f"- machine: {machine()}")
    print(f"- Python {platform.python_version()}; bytepair {vers['bytepair']} (git {git_commit()})")
    print("- peers: " + ", ".join(f"{k} {v}" for k, v in vers.items() if v and k != "bytepair"))
    missing = [k for k, v in vers.items() if v is None]
    if missing:
        print(f"- not installed: {', '.join(missing)} (pip install '.[bench]')")
    code = f"; code: {args.code.name} ({mb_of(args.code):.1f} MB)" if args.code else ""
    print(f"- corpus: {args.corpus.name} ({mb_of(args.corpus):.1f} MB){code}")
    print(f"- command: python {' '.join(sys.argv)}")
    print(
        f"- {args.repeat} run(s) per cell, each in a fresh process: median time, largest peak RSS;"
        " the encoding runs go in rounds (each tool once per round), so that a slow spell of"
        " the machine falls on every tool alike\n"
        "- children run with OPENBLAS_NUM_THREADS=1 (no measured call uses BLAS; its idle "
        "threads spin after `import numpy`)\n"
    )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        spec = json.loads(sys.argv[2])
        print(json.dumps(CHILD_TASKS[spec.pop("task")](**spec)))
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = ap.add_argument
    add("--corpus", type=Path, required=True, help="English text, documents between EOT lines")
    add("--code", type=Path, help="a code corpus, also encoded")
    add("--train-mb", type=float, default=100, help="train on the first N MB (100)")
    add("--encode-mb", type=float, default=20, help="encode N MB of whole documents (20)")
    add("--vocab", type=int, nargs="+", default=[10_000, 32_000])
    add("--encodings", nargs="+", default=["gpt2", "cl100k_base", "o200k_base"])
    add("--repeat", type=int, default=3, help="runs per cell; the median time is shown (3)")
    add("--only", choices=["train", "encode"], help="run only this main section")
    add("--scaling", action="store_true", help="bytepair training MB/s by corpus size")
    add("--scaling-mb", type=float, nargs="+", default=[10, 50, 100, 200])
    add("--worst", action="store_true", help="bytepair on worst-case inputs")
    add("--worst-line-mb", type=float, default=50, help="size of the no-whitespace line (50)")
    add("--memory", action="store_true", help="peak RSS of `bytepair encode` on growing files")
    add("--memory-mb", type=float, nargs="+", default=[100, 1000])
    add("--timeout", type=float, default=3600, help="seconds allowed per measurement (3600)")
    add("--tmp", type=Path, help="folder for temporary files (default: the system's)")
    args = ap.parse_args()

    vers = versions()
    if vers["bytepair"] is None:
        sys.exit("bytepair is not installed: pip install '.[bench]'")
    with tempfile.TemporaryDirectory(prefix="bytepair-bench-", dir=args.tmp) as tmp:
        tmp = Path(tmp)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tiktoken_cache(tmp / "tiktoken-cache"))
        print_header(args, vers)
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
