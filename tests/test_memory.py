"""encode_iterable streams in bounded memory."""

from __future__ import annotations

import resource
import sys

import pytest

from conftest import DATA


def address_space() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux-only"
)
def test_encode_iterable_over_5mb_needs_under_1mb_more_address_space(
    tmp_path, tinystories_tokenizer
):
    tok = tinystories_tokenizer
    text = (DATA / "tinystories_sample.txt").read_text(encoding="utf-8")
    path = tmp_path / "big.txt"
    with open(path, "w", encoding="utf-8") as f:
        while f.tell() < 5 << 20:
            f.write(text)
    # Warm up: first-call allocations (regex caches, ...) are not streaming memory.
    with open(path, encoding="utf-8") as f:
        for _, _ in zip(range(10_000), tok.encode_iterable(f, allowed_special="all")):
            pass
    expected = sum(1 for _ in tok.encode_iterable([text] * 3, allowed_special="all"))
    assert expected > 0
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # RLIMIT_AS caps address space (not RSS), so the cap is today's address space + 1 MB.
    resource.setrlimit(resource.RLIMIT_AS, (address_space() + (1 << 20), hard))
    try:
        count = 0
        with open(path, encoding="utf-8") as f:
            for _ in tok.encode_iterable(f, allowed_special="all"):
                count += 1
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    n_copies = path.stat().st_size / len(text.encode("utf-8"))
    assert count > 5_000_000 / 4  # the whole file was encoded
    assert abs(count - expected / 3 * n_copies) < expected  # about n copies' worth of ids
