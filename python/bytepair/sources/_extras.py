"""Optional dependencies, imported when first needed, with an error saying what to install."""

from __future__ import annotations

import importlib
from types import ModuleType

INSTALL_HINT = 'pip install "bytepair[corpora]"'


def require(module: str, purpose: str) -> ModuleType:
    """The module, or an ImportError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{purpose} needs the {module} package: {INSTALL_HINT}") from None
