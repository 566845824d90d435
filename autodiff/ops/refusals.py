"""What an op refuses, and the words for it, in one place for every engine: the tensor
engine's ops (autodiff/ops) and the JAX and PyTorch engines (parser/engines), which check
what their library would take differently or silently. Shapes and numbers only, so that
no library is imported here; each function reads nothing of this module but
`_ShapeError` and NumPy, so that `gradcalc export` can copy the ones a module needs."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ShapeError as _ShapeError

REDUCTIONS = ("mean", "sum", "none")


def pad_pairs(widths: Any, ndim: int) -> tuple[tuple[int, int], ...]:
    """pad's (before, after) per axis from an int (every side), a pair (every axis) or a flat
    list of 2 * ndim numbers in axis order: before0, after0, before1, after1, ..."""
    flat = [int(w) for w in np.ravel(widths)]
    flat = flat * 2 if len(flat) == 1 else flat
    flat = flat * ndim if len(flat) == 2 else flat
    if len(flat) != 2 * ndim or min(flat, default=0) < 0:
        raise ValueError(f"pad widths must be one number, a (before, after) pair or 2 * ndim = {2 * ndim} numbers >= 0, got {widths}")
    return tuple((flat[2 * i], flat[2 * i + 1]) for i in range(ndim))


def norm_order(ord: Any) -> float:
    """norm's order: 1, 2 or inf, from a number or 'fro' / 'inf'."""
    if isinstance(ord, str):
        key = ord.lower()
    else:
        key = "inf" if ord == float("inf") else str(int(ord)) if float(ord) in (1.0, 2.0) else ""
    orders = {"1": 1.0, "2": 2.0, "fro": 2.0, "inf": float("inf")}
    if key not in orders:
        raise ValueError(f"norm: ord must be 1, 2, inf or 'fro', got {ord!r}")
    return orders[key]


def reduction(name: str) -> str:
    """A loss's reduction=, as PyTorch names them."""
    if name not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {name!r}")
    return name


def given_probabilities(name: str, scores: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether a loss's target is probabilities shaped like the scores (else class indices,
    one per row of scores)."""
    scores, target = tuple(scores), tuple(target)
    if target == scores and scores:
        return True
    if not scores or target != scores[:-1]:
        raise _ShapeError(f"{name}: logits of shape {scores} need class targets of shape {scores[:-1]} "
                         f"or probabilities of shape {scores}, got {target}")
    return False


def equal_sections(n: int, sections: int) -> int:
    """The length of each of split's `sections` equal parts of an axis of length n."""
    if n % sections:
        raise _ShapeError(f"split: an axis of length {n} does not split into {sections} equal sections; give indices, as in split(x, [2, 4])")
    return n // sections


def one_element(shape: tuple[int, ...]) -> None:
    if int(np.prod(shape, dtype=np.int64)) != 1:
        raise ValueError(f"item() needs a tensor of size 1, got shape {tuple(shape)}")


def vectors(name: str, a_ndim: int, b_ndim: int, hint: str = "") -> None:
    if a_ndim != 1 or b_ndim != 1:
        raise ValueError(f"{name} takes two 1-d vectors, got {a_ndim}-d and {b_ndim}-d{hint}")


def matrix(name: str, ndim: int) -> None:
    if ndim != 2:
        raise ValueError(f"{name} takes a matrix, got a {ndim}-d tensor")


def not_vector_or_matrix(name: str, ndim: int) -> ValueError:
    return ValueError(f"{name} takes a vector (to build a matrix) or a matrix (to read a diagonal), got a {ndim}-d tensor")


def solvable(a_shape: tuple[int, ...], b_ndim: int) -> None:
    if b_ndim == 1 and len(a_shape) != 2:
        raise ValueError(f"solve: a vector b needs a single matrix a, got a of shape {tuple(a_shape)}")


def positive_delta(delta: float) -> None:
    if not delta > 0:  # (nan too) a negative delta made a negative loss; torch asks for a positive one
        raise ValueError(f"delta must be a positive number (the width of the squared zone), got {delta!r}")
