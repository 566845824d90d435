"""Running (cumulative) sums, products and log-sum-exps along an axis.

As in NumPy, axis=None scans the flattened tensor. The VJP of a scan is the reversed scan
of the gradient: y_i = sum_{j<=i} x_j gives dx_j = sum_{i>=j} g_i.
"""
from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from ..batching import Batched, along_axis
from ..forward import LINEAR
from ..registry import Check, Edge, Torch, defop
from . import torch_calls
from .arithmetic import guarded, masked, scaled

SCAN = "reduction"
_SHAPES = (((5,),), ((3, 4),))
LOWEST = -sys.float_info.max  # np.finfo(np.float64).min, without finfo's first-call cost at import


def _flat(x: Any, axis: int | None) -> tuple[Any, int]:
    """The array to scan and the axis: the flattened array along 0 when axis is None."""
    return (np.reshape(x, -1), 0) if axis is None else (x, axis)


def _logcumsumexp(x: Any, axis: int | None = None) -> Any:
    # logaddexp is max-shifted, so no step overflows.
    x, axis = _flat(x, axis)
    return np.logaddexp.accumulate(x, axis=axis) if x.size else x


def _scan_axis(axis: int | None) -> int:
    return 0 if axis is None else axis


def reverse_cumsum(m: Any, g: Any, axis: int) -> Any:
    """sum_{i>=j} g_i along axis."""
    return m.flip(m.cumsum(m.flip(g, axis=axis), axis=axis), axis=axis)


def _scanned_last(m: Any, x: Any, axis: int | None) -> tuple[Any, tuple[int, ...]]:
    """x with its scanned axis moved last (flattened first when axis is None), and the
    axis order that did it."""
    xs = m.reshape(x, shape=(-1,)) if axis is None else x
    last = _scan_axis(axis) % xs.ndim
    order = tuple(d for d in range(xs.ndim) if d != last) + (last,)
    return m.transpose(xs, axes=order), order


def _products_of_others(m: Any, xt: Any) -> Any:
    """[..., j, i] = prod_{k <= i, k != j} x_k = dy_i/dx_j of cumprod wherever i >= j,
    formed without dividing: row j is x with x_j replaced by 1, then its running product."""
    n = xt.shape[-1]
    rows = m.broadcast_to(m.reshape(xt, shape=xt.shape[:-1] + (1, n)), shape=xt.shape[:-1] + (n, n))
    return m.cumprod(m.where(np.eye(n, dtype=bool), 1.0, rows), axis=-1)


def _divisible(x: Any) -> bool:
    """No 0, inf or nan in x: y_i / x_j is then the product of the other elements."""
    return bool(np.all(np.isfinite(x) & (x != 0)))


def _without_zeros(m: Any, weights: Any, terms: Any) -> Any:
    """weights * terms, exactly 0 where the weight (a gradient or tangent) is 0."""
    return masked(m, weights, weights * terms)


def _cumprod_vjp(m: Any, g: Any, ans: Any, x: Any, axis: int | None = None) -> Any:
    # dy_i/dx_j = y_i / x_j for i >= j when no element is 0, inf or nan; otherwise the
    # products of the other elements are formed without dividing (exact, as for prod).
    if _divisible(m.raw(x)):
        # (g * ans guarded: a running product that overflowed passes 0 where g is 0)
        return m.reshape(reverse_cumsum(m, scaled(m, g, ans), _scan_axis(axis)), shape=x.shape) / x
    xt, order = _scanned_last(m, x, axis)
    gt = m.transpose(g, axes=order)
    n = xt.shape[-1]
    weights = m.reshape(gt, shape=gt.shape[:-1] + (1, n)) * np.triu(np.ones((n, n)))
    gx = m.sum(_without_zeros(m, weights, _products_of_others(m, xt)), axis=-1)
    return m.reshape(m.transpose(gx, axes=tuple(np.argsort(order))), shape=x.shape)


def _prefix_weights(m: Any, x: Any, axis: int | None) -> tuple[Any, tuple[int, ...]]:
    """[..., i, j] = exp(x_j - ans_i) = d ans_i / d x_j for j <= i (0 above), with the scanned
    axis moved last, and the axis order that did it. Each row is the softmax of the
    prefix x_0..x_i, shifted by the prefix's own largest element: every exponent is a
    difference of two inputs, exact where they are close. (Through ans_i itself, a sum
    rounded to the last place of ans, x of 1e16 lost the weights entirely and 1e8 half
    their digits.) The shift is a constant: the softmax does not depend on it."""
    xt, order = _scanned_last(m, x, axis)
    n = xt.shape[-1]
    raw = np.real(m.raw(xt))
    top = np.maximum.accumulate(raw, axis=-1) if raw.size else raw
    shift = np.where(np.isfinite(top), top, 0.0)  # (as softmax's: no inf - inf)
    lower = np.tril(np.ones((n, n), dtype=bool))  # [..., i, j]: j <= i
    gap = m.reshape(xt, shape=xt.shape[:-1] + (1, n)) - np.reshape(shift, shift.shape + (1,))
    e = m.exp(m.where(lower, gap, LOWEST))
    # A -inf beside a finite element has weight exactly 0, as a constant: on a graph its
    # quotient would pass a nan that reaches it (a derivative beside an all -inf prefix,
    # which is nan) on to the other elements, times its 0.
    dead = (np.reshape(raw, raw.shape[:-1] + (1, n)) == -np.inf) & (np.reshape(top, top.shape + (1,)) > -np.inf)
    return m.where(lower & ~dead, e / m.sum(e, axis=-1, keepdims=True), 0.0), order


def _logcumsumexp_vjp(m: Any, g: Any, ans: Any, x: Any, axis: int | None = None) -> Any:
    # dx_j = sum_{i>=j} g_i exp(x_j - ans_i), a zero g_i adding exactly 0 (even beside a nan).
    weights, order = _prefix_weights(m, x, axis)
    gt, _ = _scanned_last(m, g, axis)
    column = m.reshape(gt, shape=gt.shape + (1,))
    dx = m.sum(masked(m, column, weights * column), axis=-2)
    dx = m.transpose(dx, axes=tuple(int(i) for i in np.argsort(order)))
    return m.reshape(dx, shape=x.shape)


def _cumprod_jvp(m: Any, tangents: Any, ans: Any, x: Any, axis: int | None = None) -> Any:
    # dy_i = sum_{j <= i} t_j prod_{k <= i, k != j} x_k: y_i * cumsum(t / x)_i without a 0,
    # inf or nan in x; with one, the products of the other elements, as the VJP forms them.
    t = m.reshape(tangents[0], shape=(-1,)) if axis is None else tangents[0]
    if _divisible(m.raw(x)):
        # (y_i that no non-zero tangent reaches gets exactly 0, where y_i overflowed too)
        if type(t) is Batched:  # (by ops, which batch: a batch's raw arrays are its physical ones)
            unreached: Any = m.eq(m.cumsum(m.ne(t, 0.0), axis=_scan_axis(axis)), 0.0)
        else:
            unreached = np.cumsum(m.raw(t) != 0, axis=_scan_axis(axis)) == 0
        return guarded(m, unreached, ans * m.cumsum(t / (m.reshape(x, shape=(-1,)) if axis is None else x), axis=_scan_axis(axis)))
    xt, order = _scanned_last(m, x, axis)
    tt = m.transpose(t, axes=order)
    n = xt.shape[-1]
    weights = m.reshape(tt, shape=tt.shape[:-1] + (n, 1)) * np.triu(np.ones((n, n)))
    dy = m.sum(_without_zeros(m, weights, _products_of_others(m, xt)), axis=-2)
    return m.transpose(dy, axes=tuple(int(i) for i in np.argsort(order)))


def _logcumsumexp_jvp(m: Any, tangents: Any, ans: Any, x: Any, axis: int | None = None) -> Any:
    # dy_i = sum_{j <= i} exp(x_j - ans_i) t_j, a zero t_j adding exactly 0.
    weights, order = _prefix_weights(m, x, axis)
    tt, _ = _scanned_last(m, tangents[0], axis)
    row = m.reshape(tt, shape=tt.shape[:-1] + (1, tt.shape[-1]))
    dy = m.sum(masked(m, row, weights * row), axis=-1)
    return m.transpose(dy, axes=tuple(int(i) for i in np.argsort(order)))


cumsum = defop(
    "cumsum", lambda x, axis=None: np.cumsum(*_flat(x, axis)),
    (lambda m, g, ans, x, axis=None: m.reshape(reverse_cumsum(m, g, _scan_axis(axis)), shape=x.shape),),
    doc="running sum along axis (of the flattened tensor when axis is None)", category=SCAN,
    method=True, complex_safe=True, check=Check(shapes=_SHAPES, params={"axis": -1}),
    rule="g summed from each position to the end along axis (a reversed cumsum)",
    jvp=LINEAR,
    batch=along_axis(none="flatten"),
    torch=Torch(torch_calls.scan("cumsum"), variants=({"axis": 0}, {"axis": None})),
)
cumprod = defop(
    "cumprod", lambda x, axis=None: np.cumprod(*_flat(x, axis)), (_cumprod_vjp,),
    doc="running product along axis (flattened when axis is None); exact gradient with zeros too",
    category=SCAN, method=True, complex_safe=True,
    check=Check(shapes=_SHAPES, low=0.5, high=1.5, params={"axis": 0}),
    rule="reversed cumsum of g * ans, / x (the products of the other elements where x has a 0, inf or nan)",
    jvp=_cumprod_jvp,
    jvp_rule="ans * cumsum(dx / x, axis) (with a 0, inf or nan in x: the sum over j <= i of dx_j times the product of the other x_k, k <= i)",
    edges=(Edge("with a zero", [[0.0, 2.0, 3.0]], [0.0, 0.0, 0.0], ([9.0, 0.0, 0.0],), second=([6.0, 4.0, 2.0],),
                note="exact, formed without dividing"),),
    batch=along_axis(none="flatten"),
    torch=Torch(
        torch_calls.scan("cumprod"),
        variants=({"axis": -1}, {"axis": None}),
        agrees_at=(
            ([[0.0, 2.0, 3.0, 0.0, 5.0]], {}),
            ([[[1.0, 0.0, 2.0], [3.0, 4.0, 0.0]]], {"axis": 1}),
        ),
    ),
)
logcumsumexp = defop(
    "logcumsumexp", _logcumsumexp, (_logcumsumexp_vjp,),
    doc="running log(sum(exp(x))) along axis (flattened when axis is None), without overflow",
    category=SCAN, method=True, check=Check(shapes=_SHAPES, low=-5.0, high=5.0),
    rule="dx_j = sum over i >= j of g_i * exp(x_j - ans_i)",
    jvp=_logcumsumexp_jvp, jvp_rule="the sum over j <= i of exp(x_j - ans_i) * dx_j",
    batch=along_axis(none="flatten"),
    torch=Torch(
        torch_calls.scan("logcumsumexp"),
        variants=({"axis": 0}, {"axis": -1}),
        agrees_at=(
            ([[-math.inf, 0.0, 1000.0]], {}),
            ([[1000.0, -1000.0, 1000.0]], {}),
        ),
    ),
)
