"""Variance and standard deviation over axes.

NumPy's convention: ddof=0 divides by N (the population variance). PyTorch's var and std
default to the sample variance, ddof=1 (its `correction=1`): write var(x, ddof=1).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..batching import along_axis
from ..forward import OVER_AXIS
from ..registry import Check, Edge, Torch, defop
from . import torch_calls
from .arithmetic import masked
from .reductions import Axis, _mean, expand_reduced, normalize_axes

RED = "reduction"


def _divisor(shape: tuple[int, ...], axis: Axis, ddof: float) -> float:
    """N - ddof, N the number of elements reduced over, and 0 where ddof is larger (as
    NumPy's and PyTorch's: a variance is never negative; it is inf, or nan with no spread)."""
    return max(float(np.prod([shape[a] for a in normalize_axes(axis, len(shape))])) - ddof, 0.0)


def _var(x: Any, axis: Axis = None, keepdims: bool = False, ddof: float = 0) -> Any:
    # Written as sum((x - mean)**2) / (N - ddof), which extends analytically to complex
    # numbers (np.var takes |x - mean|**2 there), so complex step applies.
    d = x - _mean(x, axis=axis, keepdims=True)  # (of no elements: nan, without NumPy's warning)
    return np.sum(d * d, axis=axis, keepdims=keepdims) / _divisor(np.shape(x), axis, ddof)


def _std(x: Any, axis: Axis = None, keepdims: bool = False, ddof: float = 0) -> Any:
    return np.sqrt(_var(x, axis, keepdims, ddof))


def _centered(m: Any, x: Any, axis: Axis, ddof: float) -> Any:
    """(x - mean) / (N - ddof): half the gradient of var."""
    return (x - m.mean(x, axis=axis, keepdims=True)) / _divisor(x.shape, axis, ddof)


def _var_vjp(m: Any, g: Any, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False, ddof: float = 0) -> Any:
    gx = expand_reduced(m, 2.0 * g, x.shape, axis)
    return masked(m, gx, gx * _centered(m, x, axis, ddof))


def _std_vjp(m: Any, g: Any, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False, ddof: float = 0) -> Any:
    # d sqrt(v) = dv / (2 sqrt(v)). Where the std is 0 every x - mean is 0 too, and the
    # gradient is 0 (a subgradient), as in PyTorch, not 0 / 0.
    safe = m.where(m.raw(ans) == 0, 1.0, ans)
    return expand_reduced(m, g / safe, x.shape, axis) * _centered(m, x, axis, ddof)


def _no_spread(x: Any, axis: Axis = None, keepdims: bool = False, ddof: float = 0, tol: float = 0.0) -> bool:
    """std is not differentiable where all the elements reduced over are equal."""
    return bool(np.any(_std(x, axis, False, 0) <= tol))


_SHAPES = (((3, 4),), ((5,),), ((2, 3, 2),))
var = defop(
    "var", _var, (_var_vjp,),
    doc="variance over axis, dividing by N - ddof (ddof=0 as NumPy; ddof=1 for PyTorch's default)",
    category=RED, method=True, complex_safe=True, check=Check(shapes=_SHAPES, params={"axis": -1, "ddof": 1}),
    rule="g * 2 * (x - mean(x)) / (N - ddof)",
    jvp=OVER_AXIS,
    edges=(Edge("one element, ddof=1", [[1.0]], float("nan"), ([float("nan")],), params={"ddof": 1}, order=1, note="0 / 0"),),
    batch=along_axis(),
    torch=Torch(
        torch_calls.moment("var"),
        variants=({}, {"axis": 0, "keepdims": True}, {"axis": (0, 1), "ddof": 0}),
        agrees_at=(
            ([[1.0]], {"ddof": 1}, 1),
        ),
    ),
)
std = defop(
    "std", _std, (_std_vjp,),
    doc="standard deviation sqrt(var(x, axis, keepdims, ddof)) (ddof=1 for PyTorch's default)",
    category=RED, method=True, complex_safe=True, kink=_no_spread, check=Check(shapes=_SHAPES, kink_gap=0.05),
    rule="g * (x - mean(x)) / ((N - ddof) * ans)",
    jvp=OVER_AXIS,
    edges=(Edge("no spread", [[2.0, 2.0]], 0.0, ([0.0, 0.0],), order=1, note="a subgradient: no derivative exists there"),),
    batch=along_axis(),
    torch=Torch(torch_calls.moment("std"), variants=({"ddof": 1}, {"axis": 1, "keepdims": True}), agrees_at=(([[2.0, 2.0]], {}, 1),)),
)
