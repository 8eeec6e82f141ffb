"""Every code block of README.md and of the documentation site (docs/) runs, as a reader
would run it, and the pages keep what they promise.

How a page's blocks run (one test per page, in a fresh temporary folder holding copies of
``examples/`` and ``tests/data/``, so that ``examples/books.txt`` and ``tests/data/gpt2``
resolve as they do from a clone):

- ```python blocks run in order in one namespace per page (a fresh one for every page),
  statement by statement. A statement followed by a comment ``# -> VALUE`` (on its own
  line, or on the next line) must evaluate to something whose ``repr`` is exactly VALUE.
- ```console blocks: each line starting with ``$ `` is a command; the lines after it, up
  to the next ``$ ``, are its expected standard output (checked exactly when present).
  ```bash / ```sh blocks: every line that is not blank or a ``#`` comment is a command.
  A trailing backslash continues a command on the next line.
- The rule for commands: a command is split at `` && ``; steps starting with ``pip `` or
  ``git `` are skipped (the package under test is already installed, and the test runs
  in no clone); every other step must start with ``bytepair ``, and the remaining steps
  run in bash with the installed ``bytepair`` command; each must exit with status 0.
- A block that cannot run here (a Ray cluster, a corpus of your own, a server that runs
  until stopped, the whole test suite) is preceded by ``<!-- no-run: REASON -->``; the
  reason is required.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import shutil
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
# The pages whose blocks run: the README and every page of the site (docs/hooks/ holds
# build helpers, not pages).
PAGES = [README] + sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)

INSTALL_AND_RUN = (
    "pip install . && bytepair train examples/books.txt --vocab-size 1000 "
    '--special "<|endoftext|>" -o books.bytepair && bytepair encode -t books.bytepair '
    'examples/books.txt -o books.bin && bytepair show -t books.bytepair "It was the best of times."'
)
TEST_COMMAND = 'pip install ".[test]" && pytest'

NO_RUN = re.compile(r"<!--\s*no-run\b(.*?)-->", re.S)
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    no_run: str | None  # the reason, when marked


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page, with the no-run reason of each marked one."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = NO_RUN.fullmatch(before.strip())
        reason = marker.group(1).strip(" :\n") if marker else None
        found.append(Block(page, start + 1, lang, "\n".join(body), reason))
        i += 1
    return found


# --- running Python blocks ---------------------------------------------------------


def _expectations(source: str) -> dict[int, str]:
    """Line number -> VALUE for each ``# -> VALUE`` comment in source."""
    found = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.string.startswith("# -> "):
            found[tok.start[0]] = tok.string[len("# -> ") :].strip()
    return found


def run_python(block: Block, namespace: dict) -> None:
    where = f"{block.page.relative_to(REPO)}:{block.line}"
    expected = _expectations(block.text)
    tree = ast.parse(block.text, filename=where)
    lines = block.text.split("\n")
    for stmt in tree.body:
        end = stmt.end_lineno
        value = expected.get(end)
        # "# -> VALUE" alone on the line after the statement
        if value is None and end < len(lines) and lines[end].strip().startswith("# -> "):
            value = expected.get(end + 1)
        at = f"{where} (block line {stmt.lineno})"
        if value is not None:
            assert isinstance(stmt, ast.Expr), f"{at}: '# ->' follows a statement, not a value"
            code = compile(ast.Expression(stmt.value), at, "eval")
            got = repr(eval(code, namespace))
            assert got == value, (
                f"{at}: {lines[stmt.lineno - 1].strip()}\n  got  {got}\n  page {value}"
            )
        else:
            exec(compile(ast.Module(body=[stmt], type_ignores=[]), at, "exec"), namespace)


# --- running shell blocks ----------------------------------------------------------


def commands(block: Block) -> list[tuple[str, str | None]]:
    """(command, expected stdout or None) for each command of a console/bash block."""
    found: list[tuple[str, list[str] | None]] = []
    pending = ""
    for raw in block.text.split("\n"):
        line = raw.rstrip()
        if block.lang == "console" and not pending and not line.startswith("$ "):
            if found and line:
                if found[-1][1] is None:
                    found[-1] = (found[-1][0], [])
                found[-1][1].append(line)
            continue
        if block.lang == "console" and not pending:
            line = line[2:]
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        found.append((pending + line, None))
        pending = ""
    return [(cmd, None if out is None else "\n".join(out)) for cmd, out in found]


def runnable_steps(command: str, where: str) -> list[str]:
    """The steps of a command that run here (see the module docstring for the rule)."""
    steps = [s.strip() for s in command.split(" && ")]
    kept = [s for s in steps if not s.startswith(("pip ", "git "))]
    for step in kept:
        assert step.startswith("bytepair "), (
            f"{where}: {step!r} is not a bytepair command; "
            "mark the block <!-- no-run: REASON --> if it cannot run in this test"
        )
    return kept


def _cli_prefix() -> str:
    """The installed bytepair command, next to this Python (else `python -m bytepair`)."""
    script = Path(sys.executable).with_name("bytepair")
    if script.exists():
        return f"bytepair() {{ '{script}' \"$@\"; }}\n"
    return f"bytepair() {{ '{sys.executable}' -m bytepair \"$@\"; }}\n"


def run_shell(block: Block, cwd: Path) -> None:
    for command, expected in commands(block):
        where = f"{block.page.relative_to(REPO)}:{block.line}"
        steps = runnable_steps(command, where)
        if not steps:
            continue
        script = _cli_prefix() + " && ".join(steps)
        done = subprocess.run(
            ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (
            f"{where}: {command}\nexit {done.returncode}\n{done.stderr[-2000:]}"
        )
        if expected is not None:
            got = "\n".join(line.rstrip() for line in done.stdout.rstrip("\n").split("\n"))
            assert got == expected, f"{where}: {command}\n--- got\n{got}\n--- page\n{expected}"


def run_page(page: Path, cwd: Path) -> int:
    """Runs every runnable block of a page in cwd; returns how many ran."""
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for block in blocks(page):
        if block.no_run is not None:
            continue
        if block.lang == "python":
            run_python(block, namespace)
        elif block.lang in ("console", "bash", "sh"):
            run_shell(block, cwd)
        else:
            continue
        ran += 1
    return ran


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A temporary folder laid out like a clone's examples/ and tests/data/."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    shutil.copytree(REPO / "tests" / "data", tmp_path / "tests" / "data")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_code_block_of_the_page_runs(page, workdir):
    run_page(page, workdir)


# --- the runner itself ----------------------------------------------------------------


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


def test_a_wrong_output_comment_fails_naming_the_line(workdir, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", workdir)
    page = _page(workdir, "```python\nx = 2\nx + 1  # -> 4\n```\n")
    with pytest.raises(AssertionError, match=r"(?s)page.md:1 \(block line 2\).*got  3"):
        run_page(page, workdir)


def test_a_right_output_comment_on_the_next_line_passes(workdir, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", workdir)
    page = _page(workdir, "```python\nx = [1]\n```\n\n```python\nx + [2]\n# -> [1, 2]\n```\n")
    assert run_page(page, workdir) == 2


def test_console_output_is_compared_and_pip_steps_are_skipped(workdir, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", workdir)
    good = "```console\n$ pip install . && bytepair encode -t gpt2 --help > /dev/null\n```\n"
    assert run_page(_page(workdir, good), workdir) == 1
    wrong = '```console\n$ bytepair show -t gpt2 "hello world"\n[hello][ earth]\n```\n'
    with pytest.raises(AssertionError, match="--- page"):
        run_page(_page(workdir, wrong), workdir)


def test_a_command_that_is_not_bytepair_needs_a_no_run_marker(workdir, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", workdir)
    page = _page(workdir, "```bash\npip install x && pytest\n```\n")
    with pytest.raises(AssertionError, match="'pytest' is not a bytepair command"):
        run_page(page, workdir)
    marked = _page(workdir, "<!-- no-run: runs the tests -->\n```bash\npytest\n```\n")
    assert run_page(marked, workdir) == 0


# --- what the pages promise -----------------------------------------------------------


def test_every_no_run_marker_gives_a_reason_and_precedes_a_block():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        marked = {b.line for b in blocks(page) if b.no_run is not None}
        for m in NO_RUN.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            reason = m.group(1).strip(" :\n")
            assert reason, f"{page.relative_to(REPO)}:{line}: a no-run marker needs a reason"
            assert any(0 < b - line <= 2 for b in marked), (
                f"{page.relative_to(REPO)}:{line}: a no-run marker must come right before a block"
            )


def test_the_readme_keeps_the_two_setup_commands_and_ci_runs_the_same_test_command():
    readme = README.read_text(encoding="utf-8").split("\n")
    assert INSTALL_AND_RUN in readme
    assert TEST_COMMAND in readme
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").split("\n")
    assert TEST_COMMAND in ci
    assert any(line.startswith("mkdocs build --strict") for line in ci)


def test_the_readme_is_a_short_door():
    assert len(README.read_text(encoding="utf-8").split("\n")) <= 200


def test_the_readme_cli_table_names_every_subcommand():
    from bytepair.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    readme = README.read_text(encoding="utf-8")
    for name in sub.choices:
        assert f"| `{name}` |" in readme, f"README's CLI table lacks `{name}`"


REPO_PATH = re.compile(r"`((?:src|python|tests|benchmarks|examples|docs|\.ci)/[\w./-]*)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_repository_path_the_pages_name_exists():
    for page in [*PAGES, REPO / "ARCHITECTURE.md"]:
        text = page.read_text(encoding="utf-8")
        for path in REPO_PATH.findall(text):
            assert (REPO / path).exists(), (
                f"{page.relative_to(REPO)} names {path}, which is not there"
            )
        for target in LINK.findall(text):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), (
                f"{page.relative_to(REPO)} links to {target}, which is not there"
            )


def test_the_api_pages_fence_doctest_examples():
    spec = importlib.util.spec_from_file_location(
        "doctest_blocks", DOCS / "hooks" / "doctest_blocks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "Example:\n\n>>> 1 + 1\n2\n\nMore.\n\n```python\n>>> inside a fence\n```"
    assert module.fence_doctests(text) == (
        "Example:\n\n```pycon\n>>> 1 + 1\n2\n```\n\nMore.\n\n```python\n>>> inside a fence\n```"
    )
