"""The report subcommands: stats, compare and audit, as text, JSON and plots."""

from __future__ import annotations

import json

import numpy as np
from test_cli import run

import bytepair

PNG = b"\x89PNG\r\n\x1a\n"


def write_parallel(folder):
    texts = {"en": "The weather is nice today.\n", "ko": "오늘은 날씨가 좋다.\n"}
    folder.mkdir()
    for lang, text in texts.items():
        (folder / f"ud_pud_{lang}.txt").write_text(text, encoding="utf-8")
    return texts


def test_stats_json_reports_bytes_per_token_and_saves_a_zipf_plot(tmp_path):
    text = "hello world, hello again\n"
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    r = run("stats", "-t", "gpt2", tmp_path / "a.txt", "--json", "--plot", tmp_path / "z.png")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    [corpus] = report["corpora"]
    n = len(bytepair.get_encoding("gpt2").encode(text))
    assert (corpus["tokens"], corpus["bytes"], corpus["words"]) == (n, len(text), 4)
    assert corpus["bytes_per_token"] == len(text) / n
    assert report["vocab"]["by_length"]["1"] == 256
    assert (tmp_path / "z.png").read_bytes().startswith(PNG)


def test_stats_text_names_the_tokenizer_and_the_corpus(tmp_path):
    (tmp_path / "a.txt").write_text("one two three\n", encoding="utf-8")
    r = run("stats", "-t", "cl100k_base", tmp_path / "a.txt")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("cl100k_base: 100,261 tokens")
    assert f"{tmp_path / 'a.txt'}: 14 bytes, 4 tokens, 3 words" in r.stdout


def test_compare_a_folder_of_parallel_texts_gives_a_row_per_language(tmp_path):
    texts = write_parallel(tmp_path / "pud")
    r = run(
        "compare", "-t", "gpt2", "-t", "o200k_base", tmp_path / "pud", "--plot", tmp_path / "c.svg"
    )
    assert r.returncode == 0, r.stderr
    gpt2, o200k = bytepair.get_encoding("gpt2"), bytepair.get_encoding("o200k_base")
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["corpus", "bytes", "gpt2", "o200k_base"]
    ko = next(line for line in lines if line.startswith("ko "))
    assert (
        f"{len(gpt2.encode(texts['ko'])):,} (" in ko
        and f"{len(o200k.encode(texts['ko'])):,} (" in ko
    )
    assert "vs English" in r.stdout
    assert (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")


def test_compare_json_lists_tokens_per_tokenizer(tmp_path):
    texts = write_parallel(tmp_path / "pud")
    r = run("compare", "-t", "gpt2", "-t", "cl100k_base", tmp_path / "pud", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    expected = [
        [len(bytepair.get_encoding(n).encode(texts[lang])) for n in ("gpt2", "cl100k_base")]
        for lang in ("en", "ko")
    ]
    assert [row["tokens"] for row in rows] == expected


def test_compare_the_same_tokenizer_twice_is_a_one_line_error(tmp_path):
    write_parallel(tmp_path / "pud")
    r = run("compare", "-t", "gpt2", "-t", "gpt2", tmp_path / "pud")
    assert r.returncode == 1
    assert r.stderr == "bytepair compare: error: -t gpt2 given twice; give each tokenizer once\n"


def test_audit_json_lists_absorbed_tokens_of_a_trained_tokenizer(tmp_path):
    tok = bytepair.train_from_iterator(["hello"] * 50, 256 + 4, progress=False)
    tok.save(tmp_path / "t.bytepair")
    (tmp_path / "train.txt").write_text("\n".join(["hello"] * 50), encoding="utf-8")
    r = run("audit", "-t", tmp_path / "t.bytepair", tmp_path / "train.txt", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    hello = tok.encode_single_token("hello")
    parts = {tok.encode_single_token(a + b) for a, b in tok.merges} - {hello}
    absorbed = {c["id"] for c in report["candidates"] if "absorbed" in c["reasons"]}
    assert absorbed == parts and report["by_reason"]["absorbed"] == 3


def test_audit_text_shows_counts_per_reason_and_the_top_tokens(tmp_path):
    r = run("audit", "-t", "gpt2", "--top", "2")
    assert r.returncode == 0, r.stderr
    assert "  never in UTF-8          13  holds a byte" in r.stdout
    assert '\nnever in UTF-8 (13):\n      124  "\\xc0"\n      125  "\\xc1"\n' in r.stdout


def test_audit_with_a_matrix_of_the_wrong_size_names_the_file(tmp_path):
    np.save(tmp_path / "wte.npy", np.ones((5, 3), dtype=np.float32))
    r = run("audit", "-t", "gpt2", "--embeddings", tmp_path / "wte.npy")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1
    assert f"{tmp_path / 'wte.npy'}: 5 rows, but the tokenizer has ids up to 50256" in r.stderr
