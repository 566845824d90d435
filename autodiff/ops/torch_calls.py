"""How the PyTorch oracles of the ops (their `Torch` records) call PyTorch where it spells
an op otherwise: `dim` and `keepdim` for `axis` and `keepdims`, one dim at a time, a
list for a tuple; and the inputs some oracles draw instead of their Check's.

Each function takes the torch module first (`t`), then the op's inputs as tensors and its
parameters under gradcalc's names. Nothing here imports torch: only the tests call these.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def dim(axis: Any) -> Any:
    return list(axis) if isinstance(axis, tuple) else axis


def reduction(name: str) -> Callable[..., Any]:
    """A torch reduction with gradcalc's axis=None (all axes) and keepdims spelling."""

    def fn(t: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        f = getattr(t, name)
        if axis is None:
            out = f(x)
            return out.reshape([1] * x.ndim) if keepdims else out
        if name == "prod":  # torch.prod takes one dim at a time
            axes = sorted((a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,))), reverse=True)
            for a in axes:
                x = t.prod(x, dim=a, keepdim=True)
            return x if keepdims else x.reshape([n for i, n in enumerate(x.shape) if i not in axes])
        return f(x, dim=dim(axis), keepdim=keepdims)

    return fn


def logsumexp(t: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    dims = list(range(x.ndim)) if axis is None else dim(axis)
    if x.ndim == 0:
        return x.clone()
    return t.logsumexp(x, dim=dims, keepdim=keepdims)


def cross_entropy(t: Any, logits: Any, target: Any, label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    classes = logits.shape[-1]
    flat = logits.reshape(-1, classes)
    flat_target = target.reshape(-1, classes) if target.shape == logits.shape else target.reshape(-1).long()
    out = t.nn.functional.cross_entropy(flat, flat_target, label_smoothing=label_smoothing, reduction=reduction)
    return out.reshape(logits.shape[:-1]) if reduction == "none" else out


def mse(t: Any, a: Any, b: Any, reduction: str = "mean") -> Any:
    return t.nn.functional.mse_loss(*t.broadcast_tensors(a, b), reduction=reduction)


def clip(t: Any, x: Any, *bounds: Any, low: Any = None, high: Any = None) -> Any:
    if bounds:
        low = bounds[0]
    if len(bounds) > 1:
        high = bounds[1]
    # torch.clamp takes two tensors or two numbers, not one of each.
    as_tensor = [b if b is None or t.is_tensor(b) else t.tensor(b, dtype=t.float64) for b in (low, high)]
    return t.clamp(x, min=as_tensor[0], max=as_tensor[1])


def where(t: Any, cond: Any, a: Any, b: Any) -> Any:
    return t.where(cond != 0, a, b)


def getitem(t: Any, x: Any, index: Any) -> Any:
    parts = index if isinstance(index, tuple) else (index,)
    return x[tuple(t.as_tensor(p) if isinstance(p, np.ndarray) else p for p in parts)]


def transpose(t: Any, x: Any, axes: tuple[int, ...] = ()) -> Any:
    return x.permute(*(axes or reversed(range(x.ndim))))


def split(t: Any, x: Any, sections: int = 2, axis: int = 0) -> Any:
    return t.chunk(x, int(sections), dim=axis)


def arg(name: str) -> Callable[..., Any]:
    def fn(t: Any, x: Any, axis: Any = None) -> Any:
        return getattr(t, name)(x, dim=axis).double()

    return fn


def where_make(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.integers(0, 2, (3, 4)).astype(float), rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4,))], {}


def clip_keyword_bounds(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-2, 2, (3, 4))], {"low": -0.5, "high": 0.25}


def clip_one_bound(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    """One 2-D tensor bound (low) and a keyword high."""
    return [rng.uniform(-2, 2, (3, 4)), rng.uniform(-1.0, -0.2, (3, 4))], {"high": 0.5}


def unary_pair(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4,))], {}


def rounding_input(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    # Away from .5 ties (torch and NumPy both round halves to even, but keep it clean).
    return [np.round(rng.uniform(-3, 3, (3, 4)), 2) + 0.003], {}


def cross_entropy_make(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-3, 3, (4, 5)), rng.integers(0, 5, (4,)).astype(float)], {}


def cross_entropy_probs(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    p = rng.uniform(0.1, 1.0, (4, 5))
    return [rng.uniform(-3, 3, (4, 5)), p / p.sum(-1, keepdims=True)], {}


def cross_entropy_probs_smoothed(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    inputs, _ = cross_entropy_probs(rng)
    return inputs, {"label_smoothing": 0.2, "reduction": str(rng.choice(["mean", "sum", "none"]))}


def scan(name: str) -> Callable[..., Any]:
    """A torch scan with NumPy's axis=None (the flattened tensor)."""

    def fn(t: Any, x: Any, axis: Any = None) -> Any:
        return getattr(t, name)(x.reshape(-1), 0) if axis is None else getattr(t, name)(x, axis)

    return fn


def moment(name: str) -> Callable[..., Any]:
    def fn(t: Any, x: Any, axis: Any = None, keepdims: bool = False, ddof: float = 0) -> Any:
        return getattr(t, name)(x, dim=dim(axis), keepdim=keepdims, correction=ddof)

    return fn


def norm(t: Any, x: Any, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Any:
    order = 2 if ord == "fro" else float(ord)
    return t.linalg.vector_norm(x, ord=order, dim=dim(axis), keepdim=keepdims)


def pad(t: Any, x: Any, widths: Any, value: float = 0.0) -> Any:
    """gradcalc's widths (one number for every side, or one (before, after) pair for every
    axis: what the Check and variants give) as torch's pairs, last axis first."""
    flat = [int(w) for w in np.ravel(widths)]
    before, after = flat * 2 if len(flat) == 1 else flat
    return t.nn.functional.pad(x, [before, after] * x.ndim, value=value)


def loss(name: str, classes: bool = False) -> Callable[..., Any]:
    def fn(t: Any, pred: Any, target: Any, reduction: str = "mean", **params: Any) -> Any:
        return getattr(t.nn.functional, name)(pred, target.long() if classes else target, reduction=reduction, **params)

    return fn


def squashed(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    """A matrix in (-2, 2) for the keyword variants of one-input ops."""
    return [rng.uniform(-2, 2, (3, 4))], {}
