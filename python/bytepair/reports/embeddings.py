"""The embedding indicator of under-trained tokens (Land & Bartolo 2024, "Fishing for
Magikarp"): rows of an embedding or unembedding matrix that sit close to the rows of
tokens known to be unused are candidates for tokens the model barely trained.

The first principal component is removed first (a direction all rows share that
would otherwise dominate every cosine); then each row's cosine distance to the mean
of the known-unused rows is its indicator: small means "looks unused".
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

# Rows are processed this many at a time, so a large matrix can stay memory-mapped.
ROWS = 1 << 14
# Power-iteration steps for the first principal component.
POWER_STEPS = 100

# Tensor names an unembedding or embedding matrix goes by, most wanted first.
TENSOR_HINTS = ("lm_head", "unembed", "output.weight", "wte", "embed_tokens", "embed")


def load_matrix(path: str | os.PathLike, min_rows: int, tensor: str | None = None) -> np.ndarray:
    """The 2-D matrix in a ``.npy`` file (memory-mapped) or a ``.safetensors`` file
    (``tensor`` names it; by default the likeliest embedding with enough rows)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix == ".safetensors":
        matrix = _safetensors_matrix(path, min_rows, tensor)
    elif path.suffix == ".npy":
        matrix = np.load(path, mmap_mode="r")
    else:
        raise ValueError(f"{path}: expected a .npy or .safetensors file")
    if matrix.ndim != 2:
        raise ValueError(f"{path}: expected a 2-D matrix (tokens x dims), got shape {matrix.shape}")
    if matrix.shape[0] < min_rows:
        raise ValueError(
            f"{path}: {matrix.shape[0]} rows, but the tokenizer has ids up to {min_rows - 1}; "
            "is it the matrix of a model with another tokenizer?"
        )
    return matrix


def _safetensors_matrix(path: Path, min_rows: int, tensor: str | None) -> np.ndarray:
    try:
        from safetensors import safe_open
    except ImportError:
        raise ImportError(
            f'{path}: reading .safetensors needs the safetensors package: pip install "bytepair[audit]"'
        ) from None
    with safe_open(str(path), framework="numpy") as f:
        names = list(f.keys())
        if tensor is None:
            shapes = {n: f.get_slice(n).get_shape() for n in names}
            fits = [n for n in names if len(shapes[n]) == 2 and shapes[n][0] >= min_rows]
            ranked = [n for hint in TENSOR_HINTS for n in fits if hint in n] + fits
            if not ranked:
                raise ValueError(
                    f"{path}: no 2-D tensor with at least {min_rows} rows among {names[:10]}"
                )
            tensor = ranked[0]
        elif tensor not in names:
            raise ValueError(f"{path}: no tensor {tensor!r}; it has {names[:10]}")
        try:
            return f.get_tensor(tensor)
        except TypeError as e:  # bfloat16 has no numpy dtype
            raise ValueError(
                f"{path}: tensor {tensor!r} cannot be read as numpy ({e}); save it as float32"
            ) from None


def first_component(matrix: np.ndarray) -> np.ndarray:
    """The unit vector of the matrix's first principal direction (uncentred, so the
    component every row shares), by power iteration on ``M.T @ M``."""
    v = np.asarray(matrix[:ROWS], dtype=np.float64).sum(axis=0)
    if not v.any():
        v = np.ones(matrix.shape[1])
    v /= np.linalg.norm(v)
    for _ in range(POWER_STEPS):
        w = np.zeros_like(v)
        for start in range(0, matrix.shape[0], ROWS):
            block = np.asarray(matrix[start : start + ROWS], dtype=np.float64)
            w += block.T @ (block @ v)
        norm = np.linalg.norm(w)
        if norm == 0:
            return v
        w /= norm
        done = np.abs(w @ v) > 1 - 1e-12
        v = w
        if done:
            break
    return v


def unused_distances(matrix: np.ndarray, unused: np.ndarray) -> np.ndarray:
    """Each row's cosine distance to the mean of the ``unused`` rows, after removing
    the first principal component from every row."""
    if len(unused) == 0:
        raise ValueError("no known-unused tokens to compare rows with")
    pc = first_component(matrix)

    def rows(block):
        block = np.asarray(block, dtype=np.float64)
        return block - np.outer(block @ pc, pc)

    mean = rows(matrix[np.sort(unused)]).mean(axis=0)
    mean /= np.linalg.norm(mean) or 1.0
    out = np.empty(matrix.shape[0])
    for start in range(0, matrix.shape[0], ROWS):
        block = rows(matrix[start : start + ROWS])
        norms = np.linalg.norm(block, axis=1)
        norms[norms == 0] = 1.0
        out[start : start + len(block)] = 1.0 - (block @ mean) / norms
    return out
