"""Plots of the reports, with matplotlib (an optional extra: ``bytepair[plot]``).

``zipf(stats, path)``: each corpus's frequency-rank curve on log-log axes.
``tokens_per_language(comparison, path)``: a bar per language and tokenizer.
The file type follows the suffix (``.png``, ``.svg``, ``.pdf``).
"""

from __future__ import annotations

import os


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError('plots need matplotlib: pip install "bytepair[plot]"') from None
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


def zipf(stats, path: str | os.PathLike) -> None:
    """The frequency-rank curve of each corpus in ``stats`` (a ``reports.Stats``)."""
    from pathlib import Path

    if not stats.corpora:
        raise ValueError(f"{path}: a Zipf plot needs at least one corpus")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for c in stats.corpora:
        ranks, counts = c.zipf()
        ax.loglog(ranks, counts, label=f"{Path(c.path).name} ({c.bytes_per_token:.2f} bytes/token)")
    ax.set_xlabel("rank of token")
    ax.set_ylabel("occurrences")
    ax.set_title(f"Token frequency by rank — {stats.tokenizer}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    _save(fig, plt, path)


def tokens_per_language(comparison, path: str | os.PathLike) -> None:
    """Tokens per corpus (per language for parallel texts), one bar per tokenizer."""
    from pathlib import Path

    import numpy as np

    plt = _pyplot()
    rows = comparison.rows
    labels = [r.language or Path(r.corpus).stem for r in rows]
    width = 0.8 / len(comparison.tokenizers)
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rows) + 2), 4.5))
    x = np.arange(len(rows))
    for k, name in enumerate(comparison.tokenizers):
        ax.bar(
            x + (k - (len(comparison.tokenizers) - 1) / 2) * width,
            [r.tokens[k] for r in rows],
            width,
            label=name,
        )
    ax.set_xticks(x, labels)
    ax.set_ylabel("tokens")
    ax.yaxis.set_major_formatter("{x:,.0f}")
    parallel = all(r.language for r in rows)
    ax.set_title("Tokens for the same text, per language" if parallel else "Tokens per corpus")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    _save(fig, plt, path)


def _save(fig, plt, path) -> None:
    """Writes through a temporary file renamed into place; the type follows the suffix."""
    from pathlib import Path

    from bytepair._files import temporary_output

    try:
        kind = Path(path).suffix.lstrip(".").lower()
        if kind not in fig.canvas.get_supported_filetypes():
            raise ValueError(f"{path}: unknown plot type {kind!r}; use .png, .svg or .pdf")
        fig.tight_layout()
        with temporary_output(path) as tmp:
            fig.savefig(tmp, format=kind, dpi=120)
    finally:
        plt.close(fig)
