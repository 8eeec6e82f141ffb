"""The Python layers run one way — tokenizer -> formats -> models -> _core — and only
``bytepair.models`` knows which kinds of model exist (read off the source, so a
function-level import counts as much as a module-level one)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "bytepair"

#: What each lower layer may not import (anything above it).
ABOVE = {
    "models": ["formats", "tokenizer", "encodings", "training", "training_spm", "shards",
               "streaming", "runners", "sources", "reports", "web", "cli", "unstable"],
    "formats": ["tokenizer", "encodings", "training", "training_spm", "shards", "streaming",
                "runners", "sources", "reports", "web", "cli", "unstable"],
}  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    """Every bytepair module the file imports, at any depth of the code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("bytepair")}


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_a_lower_layer_imports_nothing_above_it(layer):
    bad = []
    for path in sorted((PACKAGE / layer).glob("*.py")):
        for module in imported_modules(path):
            top = module.split(".")[1] if "." in module else ""
            if top in ABOVE[layer]:
                bad.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert bad == []


KIND_TEST = re.compile(
    r"""\.kind\s*(==|!=|\bin\b)|["'](bpe|sentencepiece)["']\s*(==|!=)|(==|!=)\s*["'](bpe|sentencepiece)["']"""
)


def test_no_module_outside_models_asks_a_model_its_kind():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "models":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if KIND_TEST.search(line):
                bad.append(f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}")
    assert bad == []


def test_the_kind_test_would_catch_a_kind_comparison():
    assert KIND_TEST.search('if tok.model.kind == "bpe":')
    assert KIND_TEST.search("if 'sentencepiece' != kind:")
    assert not KIND_TEST.search('if dtype.kind not in "ui":')
