"""Reductions over axes: sum, mean, max, min, prod, and the no-gradient argmax / argmin."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..registry import Check, defop

RED = "reduction"
Axis = int | tuple[int, ...] | None
_SHAPES = (((3, 4),), ((5,),), ((2, 3, 2),))


def normalize_axes(axis: Axis, ndim: int) -> tuple[int, ...]:
    """Axes as a sorted tuple of non-negative ints (all axes for None)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < max(ndim, 1):
            raise ValueError(f"axis {a} is out of range for a tensor with {ndim} dimensions")
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(set(out)))


def kept_shape(shape: tuple[int, ...], axis: Axis) -> tuple[int, ...]:
    """The shape a reduction with keepdims=True gives."""
    axes = normalize_axes(axis, len(shape))
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def expand_reduced(m: Any, g: Any, shape: tuple[int, ...], axis: Axis) -> Any:
    """Undo a reduction's shape change: put back the reduced axes, then broadcast."""
    return m.broadcast_to(m.reshape(g, shape=kept_shape(shape, axis)), shape=shape)


def _sum(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    return np.sum(x, axis=axis, keepdims=keepdims)


def _mean(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    return np.mean(x, axis=axis, keepdims=keepdims)


def _prod(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    return np.prod(x, axis=axis, keepdims=keepdims)


def _max(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    return np.max(x, axis=axis, keepdims=keepdims)


def _min(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    return np.min(x, axis=axis, keepdims=keepdims)


def _count(shape: tuple[int, ...], axis: Axis) -> int:
    return int(np.prod([shape[a] for a in normalize_axes(axis, len(shape))]))


def _extreme_vjp(m: Any, g: Any, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    # The gradient goes to the elements equal to the extreme, shared evenly among ties.
    best = np.reshape(m.raw(ans), kept_shape(x.shape, axis))
    hits = m.raw(x) == best
    share = hits / np.sum(hits, axis=normalize_axes(axis, x.ndim), keepdims=True)
    return expand_reduced(m, g, x.shape, axis) * share


def _has_tie(x: Any, axis: Axis = None, keepdims: bool = False, *, tol: float = 0.0, pick: Any) -> bool:
    """Two or more elements within `tol` of the extreme: the max is not differentiable."""
    best = pick(x, axis=axis, keepdims=True)
    return bool(np.any(np.sum(np.abs(x - best) <= tol, axis=axis) > 1))


sum_ = defop(
    "sum", _sum, (lambda m, g, ans, x, axis=None, keepdims=False: expand_reduced(m, g, x.shape, axis),),
    doc="sum over axis (all axes by default)", category=RED, method=True, complex_safe=True,
    check=Check(shapes=_SHAPES, params={"axis": 0}),
)
mean = defop(
    "mean", _mean,
    (lambda m, g, ans, x, axis=None, keepdims=False: expand_reduced(m, g, x.shape, axis) / _count(x.shape, axis),),
    doc="mean over axis (all axes by default)", category=RED, method=True, complex_safe=True,
    check=Check(shapes=_SHAPES, params={"axis": -1, "keepdims": True}),
)
prod = defop(
    "prod", _prod,
    (lambda m, g, ans, x, axis=None, keepdims=False: expand_reduced(m, g * ans, x.shape, axis) / x,),
    doc="product over axis (all axes by default); inputs must be non-zero for its gradient",
    category=RED, method=True, complex_safe=True, check=Check(shapes=_SHAPES, low=0.5, high=1.5),
)
max_ = defop(
    "max", _max, (_extreme_vjp,),
    doc="largest element over axis; ties share the gradient", category=RED, method=True,
    kink=lambda x, **p: _has_tie(x, **p, pick=np.max), check=Check(shapes=(((3, 4),), ((2, 3, 2),)), params={"axis": 1}, kink_gap=1e-3),
)
min_ = defop(
    "min", _min, (_extreme_vjp,),
    doc="smallest element over axis; ties share the gradient", category=RED, method=True,
    kink=lambda x, **p: _has_tie(x, **p, pick=np.min), check=Check(shapes=_SHAPES, kink_gap=1e-3),
)
