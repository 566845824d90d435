"""Reductions over axes: sum, mean, max, min, prod, and the no-gradient argmax / argmin."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..batching import along_axis
from ..errors import ArgumentError, ShapeError
from ..forward import LINEAR, OVER_AXIS
from ..limits import check_size
from ..namespaces import ARRAY_MATH
from ..registry import Check, Edge, Torch, defop
from ..wiring import DIRECT_SHAPES
from . import torch_calls
from .arithmetic import masked

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


def _is_int(a: Any) -> bool:
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def checked_axis(op: str, axis: Any, ndim: int) -> Axis:
    """`axis` if it is None, an integer or a tuple of integers within range; otherwise a
    clear error naming the op (and, for max/min, the elementwise op the user may mean)."""
    if axis is None:
        return None
    parts = axis if isinstance(axis, (tuple, list)) else (axis,)
    if not all(_is_int(a) for a in parts):
        hint = {"max": "; for the elementwise larger of two tensors use maximum(a, b)",
                "min": "; for the elementwise smaller of two tensors use minimum(a, b)"}.get(op, "")
        raise ArgumentError(f"{op}: axis must be an integer or a tuple of integers, got {axis!r}{hint}")
    for a in parts:
        if not -ndim <= a < ndim:
            if ndim == 0:
                raise ShapeError(f"{op}: a scalar has no axis {a} (leave the axis out)")
            raise ShapeError(f"{op}: axis {a} is out of range for a tensor with {ndim} dimension{'s' * (ndim != 1)}")
    return tuple(parts) if isinstance(axis, (tuple, list)) else axis


def kept_shape(shape: tuple[int, ...], axis: Axis) -> tuple[int, ...]:
    """The shape a reduction with keepdims=True gives."""
    axes = normalize_axes(axis, len(shape))
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def expand_reduced(m: Any, g: Any, shape: tuple[int, ...], axis: Axis) -> Any:
    """Undo a reduction's shape change: put back the reduced axes, then broadcast."""
    if m is ARRAY_MATH and DIRECT_SHAPES[0]:  # a plain pass, back to an input's shape: NumPy's own view (wiring.py)
        check_size(shape, "broadcast_to")  # (the cap may have been lowered since x was made)
        if axis is None:
            return broadcast_number(g, shape)
        return np.broadcast_to(np.reshape(g, kept_shape(shape, axis)), shape)
    return m.broadcast_to(m.reshape(g, shape=kept_shape(shape, axis)), shape=shape)


# np.add.reduce is what np.sum runs for an array, without the Python wrapper that costs
# twice the sum of a small array (every L2 term and mean of a training step is one).
_add_reduce: Any = np.add.reduce


def broadcast_number(g: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The one number `g` at every place of `shape`: the read-only view np.broadcast_to
    gives, made in one call (broadcast_to's Python layers cost three times as much, and the
    gradient of every full sum and mean of a training step passes here)."""
    one = np.asarray(g)
    if one.ndim:  # (keepdims=True: a size-1 array)
        one = one.reshape(())
    view = np.ndarray(shape, one.dtype, one, 0, (0,) * len(shape))
    view.flags.writeable = False
    return view


def _sum(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    if axis is None:  # the whole sum (each L2 term of a training step): no axis to check
        return _add_reduce(x, axis=None, keepdims=keepdims)
    return _add_reduce(x, axis=checked_axis("sum", axis, np.ndim(x)), keepdims=keepdims)


def _mean(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    # The mean of nothing is nan, as in NumPy, but without NumPy's RuntimeWarning.
    if axis is not None:
        axis = checked_axis("mean", axis, np.ndim(x))
    with np.errstate(invalid="ignore", divide="ignore"):
        return _add_reduce(x, axis=axis, keepdims=keepdims) / _count(np.shape(x), axis)


def _prod(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    axis = checked_axis("prod", axis, np.ndim(x))
    with np.errstate(over="ignore", invalid="ignore"):
        return zero_wins(np.prod(x, axis=axis, keepdims=keepdims), x, axis, keepdims)


def zero_wins(product: Any, x: Any, axis: Axis, keepdims: bool) -> Any:
    """`product` (x's product over axis), with 0 where it came out nan only because a
    partial product overflowed to inf before meeting an exact 0: prod([1e200, 1e200, 0])
    is 0, while NumPy and PyTorch multiply in order and give inf * 0 = nan. A slice with
    a nan or an infinite factor keeps nan (inf * 0 has no value). The zero's sign is the
    product of the signs."""
    lost = np.isnan(product)
    if not lost.any():
        return product
    factors = np.asarray(x)
    lost &= np.any(factors == 0, axis=axis, keepdims=keepdims) & np.all(np.isfinite(factors), axis=axis, keepdims=keepdims)
    if np.iscomplexobj(factors):
        zero = np.zeros_like(product)
    else:
        zero = np.copysign(0.0, np.prod(np.where(np.signbit(factors), -1.0, 1.0), axis=axis, keepdims=keepdims))
    return np.where(lost, zero, product)


def _extreme(pick: Any, op: str, x: Any, axis: Axis, keepdims: bool) -> Any:
    axis = checked_axis(op, axis, np.ndim(x))
    if any(np.shape(x)[a] == 0 for a in normalize_axes(axis, np.ndim(x))):
        # NumPy says "zero-size array to reduction operation maximum which has no identity".
        raise ShapeError(f"{op} of an empty tensor has no value (input shape {np.shape(x)}): there is no element to pick")
    return pick(x, axis=axis, keepdims=keepdims)


def _count(shape: tuple[int, ...], axis: Axis) -> int:
    if axis is None:  # (every mean of a loss, forward and VJP: without building the tuple of all axes)
        return math.prod(shape)
    return math.prod(shape[a] for a in normalize_axes(axis, len(shape)))


def _mean_vjp(m: Any, g: Any, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    # g divided before it is spread: the same quotient in every entry, computed once.
    count = _count(x.shape, axis)
    return expand_reduced(m, g / count if count else g, x.shape, axis)  # (nothing to spread: no division by 0)


def _extreme_vjp(m: Any, g: Any, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    # The gradient goes to the elements equal to the extreme, shared evenly among ties.
    best = np.reshape(m.raw(ans), kept_shape(x.shape, axis))
    hits = m.raw(x) == best
    share = hits / np.sum(hits, axis=normalize_axes(axis, x.ndim), keepdims=True)
    gx = expand_reduced(m, g, x.shape, axis)
    return masked(m, gx, gx * share)


def _has_tie(x: Any, axis: Axis = None, keepdims: bool = False, *, tol: float = 0.0, pick: Any) -> bool:
    """Two or more elements within `tol` of the extreme: the max is not differentiable."""
    best = pick(x, axis=axis, keepdims=True)
    return bool(np.any(np.sum(np.abs(x - best) <= tol, axis=axis) > 1))


sum_ = defop(
    "sum", _sum, (lambda m, g, ans, x, axis=None, keepdims=False: expand_reduced(m, g, x.shape, axis),),
    doc="sum over axis (all axes by default)", category=RED, method=True, complex_safe=True,
    check=Check(shapes=_SHAPES, params={"axis": 0}),
    jvp=LINEAR,
    rule='g repeated along the summed axes (every element gets g)',
    edges=(Edge("of an empty tensor", [np.zeros(0)], 0.0, (np.zeros(0),)),),
    batch=along_axis(sparse="total"),
    torch=Torch(torch_calls.reduction("sum"), variants=({}, {"axis": -1, "keepdims": True}, {"axis": (0, 1)}), agrees_at=(([np.zeros(0)], {}),)),
)
mean = defop(
    "mean", _mean,
    (_mean_vjp,),
    doc="mean over axis (all axes by default)", category=RED, method=True, complex_safe=True,
    check=Check(shapes=_SHAPES, params={"axis": -1, "keepdims": True}),
    jvp=LINEAR,
    rule='g / n repeated along the averaged axes (n elements averaged)',
    edges=(Edge("of an empty tensor", [np.zeros(0)], math.nan, (np.zeros(0),), note="silently: no NumPy warning"),),
    batch=along_axis(sparse="average"),
    torch=Torch(torch_calls.reduction("mean"), variants=({}, {"axis": 0}, {"axis": (0, 1), "keepdims": True}), agrees_at=(([np.zeros(0)], {}),)),
)
def _prod_vjp(m: Any, g: Any, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    # d prod / d x_k is the product of the other elements: ans / x_k when no element is 0,
    # else computed without dividing, so zeros give exact answers (prod([0, 2, 3]) -> [6, 0, 0]).
    # A slice whose gradient is 0 passes exactly 0 back, also where the product of the
    # others overflowed to inf (0 * inf is not nan here; see masked).
    spread = expand_reduced(m, g, x.shape, axis)
    if np.all(m.raw(x) != 0):
        return masked(m, spread, expand_reduced(m, g * ans, x.shape, axis) / x)
    return masked(m, spread, spread * _product_of_others(m, x, axis))


def _product_of_others(m: Any, x: Any, axis: Axis) -> Any:
    """For each element, the product of the other elements of its slice along `axis`.

    The reduced axes are moved last and flattened to n. A plain backward pass multiplies
    exclusive running products from the left and from the right (O(n)); with create_graph
    it takes prod over n rows, row k being the slice with element k replaced by 1, so that
    it is differentiable again, to any order, by this same op."""
    axes = normalize_axes(axis, x.ndim)
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    order = rest + axes
    moved = m.transpose(x, axes=order)
    lead = moved.shape[: len(rest)]
    n = int(np.prod(moved.shape[len(rest):], dtype=int))
    flat = m.reshape(moved, shape=lead + (n,))
    if m.kind == "array":
        ones = np.ones(lead + (1,), dtype=flat.dtype)
        left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
        right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
        with np.errstate(over="ignore", invalid="ignore"):
            others = left * right
        # As in the forward: an exact 0 among the others wins over their overflow.
        if np.isnan(others).any():
            rest_zeros = np.sum(flat == 0, axis=-1, keepdims=True) - (flat == 0) > 0
            infinite = ~np.isfinite(flat)
            rest_finite = np.sum(infinite, axis=-1, keepdims=True) - infinite == 0
            others = np.where(np.isnan(others) & rest_zeros & rest_finite, 0.0, others)
    else:
        rows = m.where(np.eye(n, dtype=bool), 1.0, m.reshape(flat, shape=lead + (1, n)))
        others = m.prod(rows, axis=-1)
    others = m.reshape(others, shape=moved.shape)
    return m.transpose(others, axes=tuple(int(i) for i in np.argsort(order)))


prod = defop(
    "prod", _prod, (_prod_vjp,),
    doc="product over axis (all axes by default); exact gradient with zeros",
    category=RED, method=True, complex_safe=True, check=Check(shapes=_SHAPES, low=0.5, high=1.5),
    jvp=OVER_AXIS,
    rule='g * (the product of the other elements), repeated along the axes (exact at zeros: no division)',
    edges=(
        Edge("with a zero", [[0.0, 2.0, 3.0]], 0.0, ([6.0, 0.0, 0.0],), second=([5.0, 3.0, 2.0],), note="exact, to every order"),
        Edge("with two zeros", [[0.0, 0.0, 3.0]], 0.0, ([0.0, 0.0, 0.0],)),
        Edge("with a zero and an overflow", [[1e200, 1e200, 0.0]], 0.0, ([0.0, 0.0, math.inf],), order=1,
             torch="nan (inf * 0, as NumPy's product in order)", note="an exact 0 wins; a nan or inf factor still gives nan"),
    ),
    batch=along_axis(),
    torch=Torch(
        torch_calls.reduction("prod"),
        variants=({}, {"axis": 0}, {"axis": (0, 1), "keepdims": True}),
        agrees_at=(
            ([[0.0, 2.0, 3.0]], {}),
            ([[0.0, 0.0, 3.0]], {}),
            ([[[0.0, 2.0], [3.0, 0.0], [4.0, 5.0]]], {"axis": 0}),
            ([[1e200, 1e200, 1e-300]], {}),
        ),
    ),
)
max_ = defop(
    "max", lambda x, axis=None, keepdims=False: _extreme(np.max, "max", x, axis, keepdims), (_extreme_vjp,),
    doc="largest element over axis; ties share the gradient", category=RED, method=True, complex_safe=True,  # (NumPy orders complex by real part first)
    kink=lambda x, **p: _has_tie(x, **p, pick=np.max), check=Check(shapes=(((3, 4),), ((2, 3, 2),)), params={"axis": 1}, kink_gap=1e-3),
    jvp=OVER_AXIS,
    rule='g shared equally among the elements equal to the max, 0 elsewhere',
    edges=(Edge("with ties", [[1.0, 1.0, 0.0]], 1.0, ([0.5, 0.5, 0.0],), note="shared equally among the tied elements"),
           Edge("with a nan", [[math.nan, 1.0]], math.nan, ([math.nan, math.nan],), second=([math.nan, math.nan],),
                torch="torch.amax: the same to the gradient; second derivative 0 (x.max gives gradient [1, 0], all to the nan)",
                note="nan at every higher order too"),
           Edge("of an empty tensor", [np.zeros(0)], error="max of an empty tensor has no value")),
    batch=along_axis(),
    torch=Torch(
        torch_calls.reduction("amax"),
        variants=({}, {"axis": 0, "keepdims": True}, {"axis": (0, 1)}),
        agrees_at=(
            ([[1.0, 1.0, 0.0]], {}),
            ([[math.nan, 1.0]], {}, 1),  # (its second derivative is nan, torch's 0: max's Edge "with a nan")
        ),
    ),
)
min_ = defop(
    "min", lambda x, axis=None, keepdims=False: _extreme(np.min, "min", x, axis, keepdims), (_extreme_vjp,),
    doc="smallest element over axis; ties share the gradient", category=RED, method=True, complex_safe=True,
    kink=lambda x, **p: _has_tie(x, **p, pick=np.min), check=Check(shapes=_SHAPES, kink_gap=1e-3),
    jvp=OVER_AXIS,
    rule='g shared equally among the elements equal to the min, 0 elsewhere',
    edges=(Edge("with ties", [[0.0, 1.0, 0.0]], 0.0, ([0.5, 0.0, 0.5],), note="shared equally among the tied elements"),
           Edge("of an empty tensor", [np.zeros(0)], error="min of an empty tensor has no value")),
    batch=along_axis(),
    torch=Torch(torch_calls.reduction("amin"), variants=({}, {"axis": 1}, {"axis": (0, 1), "keepdims": True}), agrees_at=(([[0.0, 1.0, 0.0]], {}),)),
)
