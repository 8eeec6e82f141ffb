"""Shard folders from plain JSON Lines files: the core reads each record's text
(``src/io/jsonl.rs``, ``DocumentBatches``) and hands Python only the lines it cannot be
sure to read as Python does (``JsonlSource.read_line``); the folder, the warnings and
the errors are those of the Python road (``json.loads`` of every line) on the same
files."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
from bytepair.runners import local
from bytepair.sources import jsonl, open_sources, part_chars_for

from conftest import EOT, folder_bytes, shard_road

EXAMPLE = Path(__file__).parent.parent / "examples" / "books.txt"


def write(tok, paths, out, *, core: bool, skip=True, text_field="text", **options):
    """``write_shards`` of the files by the core's road or Python's: the manifest, the
    warnings, and whether the core's road was taken."""
    corpus = open_sources(
        [str(p) for p in paths],
        special_tokens=[EOT],
        skip_bad_records=skip,
        text_field=text_field,
        part_chars=part_chars_for(tok),
    )
    with shard_road(core) as used, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        manifest = bytepair.write_shards(tok, corpus, out, progress=False, **options)
    return manifest, [str(w.message) for w in caught], used


def both_roads(tmp_path, tok, paths, **options):
    """Both roads' folders, which must be the same bytes; the core's manifest."""
    core, core_warned, used = write(tok, paths, tmp_path / "core", core=True, **options)
    assert used == [True]
    _, python_warned, used = write(tok, paths, tmp_path / "python", core=False, **options)
    assert used == [False]
    assert folder_bytes(tmp_path / "core") == folder_bytes(tmp_path / "python")
    assert core_warned == python_warned
    return core, core_warned


#: Lines the core leaves to Python: some Python reads as a record's text, some are bad.
ODD_LINES = [
    b'{"text": "not a number", "score": NaN}',
    b'{"text": "infinite", "v": -Infinity}',
    b'{"text": "lone \\ud800 surrogate"}',
    b'\xef\xbb\xbf{"text": "a byte order mark (json.loads of bytes takes it)"}',
    b'{"text": 5}',
    b'{"body": "no text field"}',
    b'["a", "list"]',
    b'{"text": "cut off',
    b'{"text": "bad \xff byte"}',
    b'{"text": null}',
    b"not json at all",
]


def records(seed: int, n: int) -> list[bytes]:
    """Records of the example books' text (some long, some empty, some non-ASCII or
    escaped), blank lines, CRLF endings, a key given twice, and the odd lines."""
    text = EXAMPLE.read_text(encoding="utf-8")
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        start = rnd.randrange(len(text) - 3000)
        body = text[start : start + rnd.choice([0, 1, 50, 700, 3000])]
        record = {"id": i, "text": body, "meta": {"lang": "en", "n": [1, 2.5, None]}}
        if i % 7 == 3:
            record["text"] = "héllo wörld ñ 日本語 😀 " + body[:100]
        line = json.dumps(record, ensure_ascii=i % 2 == 0).encode()
        if i % 11 == 5:
            line = b'{"text": "first", ' + line[1:]  # the last "text" counts
        if i % 5 == 0:
            line += b"\r"
        lines.append(line)
        if i % 9 == 4:
            lines.append(rnd.choice([b"", b"  ", b" \t\x0c\x0b "]))
        if i % 6 == 2:
            lines.append(rnd.choice(ODD_LINES))
    return lines


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 700 bytes: most blocks end inside a line, and long lines fill several."""
    monkeypatch.setattr(local, "BLOCK_BYTES", 700)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
@pytest.mark.parametrize(
    "options",
    [{"shard_tokens": 2000}, {"shard_tokens": 3000, "val_fraction": 0.3, "format": "npy"}],
    ids=["train", "val_fraction"],
)
def test_the_cores_road_writes_the_folder_pythons_writes(tmp_path, small_blocks, name, options):
    tok = bytepair.get_encoding(name)
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.txt"]
    paths[0].write_bytes(b"\n".join(records(0, 60)) + b"\n")
    paths[1].write_bytes(b"\n".join(records(1, 25)))  # no newline at the end
    paths[2].write_text(f"a text file{EOT}between them", encoding="utf-8")
    manifest, warned = both_roads(tmp_path, tok, paths, **options)
    # Every record is a document (empty ones too), bad ones are skipped and said.
    bad = sum(1 for line in records(0, 60) + records(1, 25) if line in ODD_LINES[4:])
    good = 60 + 25 + sum(1 for line in records(0, 60) + records(1, 25) if line in ODD_LINES[:4])
    assert sum(s["documents"] for s in manifest["splits"].values()) == good + 2
    assert len(warned) == 1 and f"skipped {bad} bad record(s)" in warned[0]


def test_the_field_path_reaches_into_objects_on_both_roads(tmp_path, small_blocks):
    tok = bytepair.get_encoding("gpt2")
    path = tmp_path / "nested.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                b'{"meta": {"body": "one"}}',
                b'{"meta": {"body": "two", "body": "three"}, "text": "x"}',
                b'{"meta": {"body": "four"}, "meta": {"other": 1}}',
                b'{"meta": "flat"}',
                b'{"meta": {"body": "five \\u00e9\\n"}}',
            ]
        )
    )
    manifest, warned = both_roads(tmp_path, tok, [path], text_field="meta.body")
    assert manifest["splits"]["train"]["documents"] == 3
    assert "skipped 2 bad record(s)" in warned[0]


def test_a_tokenizer_that_encodes_documents_whole_takes_the_cores_road_alike(
    tmp_path, small_blocks
):
    """Blocks of JSON Lines end between records, so any tokenizer may take the core's
    road (a text file's blocks are cut inside documents: not for this one)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(EXAMPLE.read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    custom = bytepair.train(corpus, 400, pattern=r"[^\n]+\n?|\n", progress=False)
    assert part_chars_for(custom) is None
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(records(4, 40)))
    manifest, _ = both_roads(tmp_path, custom, [path], shard_tokens=3000, eot=None)
    assert manifest["splits"]["train"]["tokens"] > 10_000


def test_python_reads_only_the_lines_the_core_leaves_it(tmp_path, monkeypatch):
    tok = bytepair.get_encoding("gpt2")
    path = tmp_path / "a.jsonl"
    lines = records(2, 200)
    path.write_bytes(b"\n".join(lines))
    parsed = []
    loads = json.loads

    def counting_loads(line, *args, **kwargs):
        parsed.append(line)
        return loads(line, *args, **kwargs)

    monkeypatch.setattr(jsonl.json, "loads", counting_loads)
    write(tok, [path], tmp_path / "out", core=True)
    assert parsed == [line for line in lines if line in ODD_LINES]


def test_a_bad_record_fails_as_on_pythons_road_and_leaves_no_folder(tmp_path):
    tok = bytepair.get_encoding("gpt2")
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "fine"}\n\n{"text": "fine"}\n{"text": 3}\n{"text": "after"}\n')
    raised = []
    for core in (True, False):
        with pytest.raises(ValueError) as e:
            write(tok, [path], tmp_path / f"out{core}", core=core, skip=False)
        raised.append(str(e.value))
        # What a run leaves to resume from, and no shard.
        assert [p.name for p in (tmp_path / f"out{core}").iterdir()] == ["resume-state.json"]
    assert raised[0] == raised[1]
    assert raised[0].startswith(f"{path}: line 4: field 'text' is of type int, not a string")


def test_a_forbidden_special_token_is_refused_naming_its_line(tmp_path):
    tok = bytepair.get_encoding("cl100k_base")
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "fine"}\n\n{"text": "a <|fim_prefix|> b"}\n')
    with pytest.raises(ValueError, match=r"special token '<\|fim_prefix\|>' at line 3 "):
        write(tok, [path], tmp_path / "out", core=True, disallowed_special="all")
    # Encoded as text (the default), both roads agree.
    both_roads(tmp_path, tok, [path])
    # Two records whose texts join into the token hold none (each is its own text).
    path.write_bytes(b'{"text": "a <|fim_"}\n{"text": "prefix|> b"}\n')
    (tmp_path / "joined").mkdir()
    both_roads(tmp_path / "joined", tok, [path], disallowed_special="all")


json_texts = st.lists(
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
    | st.sampled_from(["<|endoftext|>", "\n", " ", "\\", '"']),
    max_size=4,
).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | json_texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_texts, inner, max_size=3),
    max_leaves=6,
)
json_lines = st.one_of(
    st.builds(
        lambda text, extra, ascii_only: json.dumps(
            {**extra, "text": text}, ensure_ascii=ascii_only
        ),
        json_texts,
        st.dictionaries(st.sampled_from(["id", "meta", "text"]), json_values, max_size=2),
        st.booleans(),
    ).map(str.encode),
    st.builds(lambda v: json.dumps(v).encode(), json_values),
    st.sampled_from(ODD_LINES + [b"", b" ", b"\r"]),
    st.binary(max_size=12),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(json_lines, max_size=25), end=st.sampled_from([b"", b"\n"]))
def test_any_json_lines_give_the_same_folder_on_both_roads(tmp_path_factory, lines, end):
    tmp_path = tmp_path_factory.mktemp("jsonl")
    path = tmp_path / "any.jsonl"
    # A first record, so that no file is taken for another kind by its first bytes.
    path.write_bytes(b"\n".join([b'{"text": "a first record"}', *lines]) + end)
    both_roads(tmp_path, bytepair.get_encoding("cl100k_base"), [path], shard_tokens=50)


INTERRUPTED = r"""
import sys
from pathlib import Path
import bytepair
from bytepair.runners import local
from bytepair.shards.writer import ShardWriter
from bytepair.sources import open_sources, part_chars_for

class Interrupt(Exception):
    pass

folder = Path(sys.argv[1])
path = folder / "a.jsonl"
# Every line is read by Python, on the reading thread, holding the GIL: the reader is
# the slowest thread, and is asking for the GIL when the writer fails.
path.write_bytes(b"\n".join(b'{"text": "word %d", "v": NaN}' % i for i in range(40_000)))
local.BLOCK_BYTES = 20_000
tok = bytepair.get_encoding("gpt2")
add = ShardWriter.add
for k in (1, 5):
    calls = []
    def failing(self, *args):
        calls.append(1)
        if len(calls) == k:
            raise Interrupt
        return add(self, *args)
    ShardWriter.add = failing
    corpus = open_sources([str(path)], part_chars=part_chars_for(tok))
    try:
        bytepair.write_shards(tok, corpus, folder / f"out{k}", progress=False, shard_tokens=500)
    except Interrupt:
        pass
    ShardWriter.add = add
    assert not [p for p in (folder / f"out{k}").iterdir() if p.name.endswith(".tmp")]
    # The core's threads, by their names in /proc (threading lists Python's only).
    names = [p.read_text() for p in Path("/proc/self/task").glob("*/comm")]
    assert not [n for n in names if n.startswith("bytepair-")], names
print("stopped")
"""


def test_a_run_stopped_while_python_reads_a_line_stops_its_threads(tmp_path):
    """The writer fails while the reading thread waits for the GIL to hand a line to
    Python: the threads stop (none waits on the other for ever) and no shard is left
    half written. In a process of its own, so that a hang fails the test by time."""
    run = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["stopped"]


def python_reads_jsonl(monkeypatch) -> None:
    """JSON Lines files read by Python, line by line, wherever they are read."""
    monkeypatch.setattr(jsonl.JsonlSource, "core_reads", property(lambda self: False))


def encode_one_file(tok, paths, out, *, core: bool, monkeypatch, **options):
    """``encode_documents`` of the files into one file of ids, by either road."""
    from bytepair.shards import one_file

    corpus = open_sources([str(p) for p in paths], skip_bad_records=True)
    with monkeypatch.context() as patch:
        if not core:
            python_reads_jsonl(patch)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            n = one_file.encode_documents(tok, corpus, out, progress=False, **options)
    return n, out.read_bytes(), [str(w.message) for w in caught]


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_one_file_of_ids_from_json_lines_is_the_same_on_both_roads(tmp_path, monkeypatch, name):
    from bytepair.shards import one_file

    monkeypatch.setattr(one_file, "JSONL_BLOCK_BYTES", 700)
    tok = bytepair.get_encoding(name)
    paths = [tmp_path / "a.jsonl", tmp_path / "b.txt", tmp_path / "c.jsonl"]
    paths[0].write_bytes(b"\n".join(records(5, 80)))
    paths[1].write_text(f"a text{EOT}file", encoding="utf-8")
    paths[2].write_bytes(b'{"text": "the last <|endoftext|> one"}\n')
    options = {"allowed_special": "all", "format": "npy"}
    core = encode_one_file(
        tok, paths, tmp_path / "core.npy", core=True, monkeypatch=monkeypatch, **options
    )
    python = encode_one_file(
        tok, paths, tmp_path / "python.npy", core=False, monkeypatch=monkeypatch, **options
    )
    assert core == python
    assert core[0] > 10_000 and "skipped" in core[2][0]
    # The default refuses special tokens: named by file and line on the core's road.
    with pytest.raises(
        ValueError, match=r"c\.jsonl: the special token '<\|endoftext\|>' at line 1 "
    ):
        encode_one_file(
            tok, paths[2:], tmp_path / "refused.bin", core=True, monkeypatch=monkeypatch
        )
    assert not (tmp_path / "refused.bin").exists()


def train_jsonl(paths, *, core: bool, monkeypatch, **options):
    """``bytepair.train`` on the files by either road: merges, vocabulary, stats and
    warnings."""
    with monkeypatch.context() as patch:
        if not core:
            python_reads_jsonl(patch)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tok = bytepair.train(
                [str(p) for p in paths], 600, progress=False, skip_bad_records=True, **options
            )
    stats = tok.training_stats
    return (
        tok.merges,
        tok.special_tokens,
        stats.bytes_read,
        stats.records_skipped,
        [str(w.message) for w in caught],
    )


def test_training_on_json_lines_counts_the_same_on_both_roads(tmp_path, monkeypatch):
    from bytepair.shards import one_file

    monkeypatch.setattr(one_file, "BLOCK_BYTES", 700)
    paths = [tmp_path / "a.jsonl", tmp_path / "b.txt", tmp_path / "c.jsonl"]
    paths[0].write_bytes(b"\n".join(records(6, 120)))
    paths[1].write_text(f"a text{EOT}file", encoding="utf-8")
    paths[2].write_bytes(b'{"text": "special <|endoftext|> tokens are boundaries"}\n{"t": 1}')
    options = {"special_tokens": [EOT]}
    core = train_jsonl(paths, core=True, monkeypatch=monkeypatch, **options)
    python = train_jsonl(paths, core=False, monkeypatch=monkeypatch, **options)
    assert core == python
    assert core[3] > 5 and "skipped" in core[4][0]
    parsed = []
    loads = json.loads
    monkeypatch.setattr(jsonl.json, "loads", lambda line: parsed.append(line) or loads(line))
    train_jsonl(paths, core=True, monkeypatch=monkeypatch, **options)
    assert len(parsed) == core[3] + sum(line in ODD_LINES[:4] for line in records(6, 120))


def test_a_bad_record_stops_training_naming_its_line_on_the_cores_road(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "fine"}\n\n{"text": ["not", "text"]}\n')
    with pytest.raises(ValueError, match=r"a\.jsonl: line 3: field 'text' is of type list"):
        bytepair.train(str(path), 300, progress=False)
