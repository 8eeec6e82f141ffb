"""Randomly damaged tokenizer files of every format: loading one (and encoding with what
loads) gives a result or a ValueError/OSError naming the file — never a crash, a hang,
or another exception (RecursionError, OverflowError, binascii.Error without the file...).

The damage runs in a child process with a time limit, so a crash or a hang fails the
test instead of ending the run; the child reports every unexpected outcome.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import bytepair
from bytepair import formats
from bytepair.models.ranks import from_ranks

from conftest import DATA

CHILD = r"""
import json, os, random, shutil, sys, traceback
from pathlib import Path
import bytepair

folder, rounds, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
cases = json.loads((folder / "cases.json").read_text())

def damage(data: bytes) -> bytes:
    kind = rng.randrange(8)
    n = len(data)
    at = rng.randrange(n + 1)
    if kind == 0:  # truncated
        return data[:at]
    if kind == 1:  # bytes flipped
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if out:
                out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == 2:  # random bytes inserted
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at:]
    if kind == 3:  # a slice repeated
        end = min(n, at + rng.randint(1, 4096))
        return data[:end] + data[at:end] * rng.randint(1, 4) + data[end:]
    if kind == 4:  # a number made huge or negative
        digits = [i for i in range(n) if 48 <= data[i] <= 57]
        if not digits:
            return data[:at]
        i = rng.choice(digits)
        big = rng.choice([b"2147483648", b"4294967296", b"100000000000000000000", b"-1", b"1e400"])
        return data[:i] + big + data[i + 1:]
    if kind == 5:  # deep nesting where a value was
        depth = rng.choice([1000, 100_000])
        return data[:at] + b"[" * depth + b"]" * depth + data[at:]
    if kind == 6:  # a huge token
        return data[:at] + b"A" * (1 << 20) + data[at:]
    return data[at:]  # the head cut off

unexpected = []
loaded = failed = 0
for case in cases:
    source = folder / case["file"]
    original = source.read_bytes()
    for r in range(rounds):
        work = folder / "work"
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(folder / case["root"], work)
        target = work / case["file"].split("/", 1)[1] if "/" in case["file"] else work
        target.write_bytes(damage(original))
        path = work / case["load"] if case["load"] else work
        try:
            tok = bytepair.load(path, **case["options"])
            tok.encode("Hello world, café 🎉", disallowed_special=())
            tok.decode(tok.encode("Once upon a time", disallowed_special=()))
            loaded += 1
        except (ValueError, OSError) as e:
            failed += 1
            message = str(e)
            if len(message) > 2000:
                unexpected.append([case["file"], "message of %d characters" % len(message)])
        except BaseException as e:
            unexpected.append([case["file"], type(e).__name__, str(e)[:300], traceback.format_exc()[-800:]])
print(json.dumps({"loaded": loaded, "failed": failed, "unexpected": unexpected[:20]}))
"""


@pytest.fixture(scope="module")
def damaged_cases(tmp_path_factory, tinystories_tokenizer) -> Path:
    """One folder per format holding a valid file; cases.json says how each loads."""
    root = tmp_path_factory.mktemp("damaged")
    tok = tinystories_tokenizer
    cases = []

    def case(folder: str, file: str, load: str, **options):
        cases.append({"root": folder, "file": f"{folder}/{file}", "load": load, "options": options})

    (root / "bp").mkdir()
    tok.save(root / "bp" / "t.bytepair")
    case("bp", "t.bytepair", "t.bytepair")
    (root / "tt").mkdir()
    tok.save_tiktoken(root / "tt" / "t.tiktoken")
    case("tt", "t.tiktoken", "t.tiktoken", pattern="gpt2", special_tokens=tok.special_tokens)
    # Ranks as Mistral's Tekken JSON (special tokens first), and ranks no merge list
    # holds (" café" is no merge) in our own format.
    special_ids = set(tok.special_tokens.values())
    ranks = {t: i + 2 for i, t in tok.vocab.items() if i not in special_ids}
    (root / "tk").mkdir()
    tekken = from_ranks(ranks, {"<s>": 0, "</s>": 1}, "gpt2")
    formats.save(tekken, root / "tk" / "t.json", format="tekken")
    case("tk", "t.json", "t.json")
    (root / "rk").mkdir()
    ranked = from_ranks(ranks | {" café".encode(): tok.max_token_value + 3}, None, "gpt2")
    formats.save(ranked, root / "rk" / "t.bytepair")
    case("rk", "t.bytepair", "t.bytepair")
    tok.save_hf(root / "hf")
    case("hf", "tokenizer.json", "")
    case("hf", "tokenizer_config.json", "")
    tok.save_gpt2(root / "g2")
    case("g2", "vocab.json", "")
    case("g2", "merges.txt", "")
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")
    (root / "spm").mkdir()
    spm.SentencePieceTrainer.train(
        input=str(DATA / "tinystories_sample.txt"),
        model_prefix=str(root / "spm" / "s"),
        model_type="bpe",
        vocab_size=400,
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        minloglevel=2,
    )
    case("spm", "s.model", "s.model")
    spm_tok = bytepair.load(root / "spm" / "s.model")
    (root / "spmj").mkdir()
    spm_tok.save(root / "spmj" / "s.json")
    case("spmj", "s.json", "s.json")
    (root / "spmb").mkdir()
    spm_tok.save(root / "spmb" / "s.bytepair")
    case("spmb", "s.bytepair", "s.bytepair")
    (root / "cases.json").write_text(json.dumps(cases))
    return root


@pytest.mark.parametrize("seed", [1, 2])
def test_damaged_files_of_every_format_load_or_fail_with_a_value_or_os_error(damaged_cases, seed):
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(damaged_cases), "25", str(seed)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["unexpected"] == [], json.dumps(report["unexpected"], indent=1)[:6000]
    assert report["failed"] > 0  # the damage did damage
