"""More ops that move elements without changing them: squeeze, unsqueeze, flip, roll,
tile, repeat, sort and pad. Each VJP moves the gradient back the way the elements came.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..batching import TILE, along_axis, own
from ..forward import LINEAR
from ..registry import Check, Edge, Torch, defop
from . import refusals, torch_calls

SHAPE = "shape"
Axis = int | tuple[int, ...] | None


def _back_to_input_shape(m: Any, g: Any, ans: Any, x: Any, **params: Any) -> Any:
    return m.reshape(g, shape=x.shape)


squeeze = defop(
    "squeeze", lambda x, axis=None: np.squeeze(x, axis=axis), (_back_to_input_shape,),
    doc="x without its size-1 axes (only those given by axis, if given)", category=SHAPE, method=True,
    complex_safe=True, check=Check(shapes=(((3, 1, 2),), ((1, 4),))),
    jvp=LINEAR,
    batch=along_axis(none="squeeze", sparse="view"),
    torch=Torch(lambda t, x, axis=None: t.squeeze(x) if axis is None else t.squeeze(x, axis)),
)
unsqueeze = defop(
    "unsqueeze", lambda x, axis: np.expand_dims(x, axis), (_back_to_input_shape,),
    doc="x with a new size-1 axis at position axis", category=SHAPE, method=True, aliases=("expand_dims",),
    complex_safe=True, check=Check(shapes=(((3,),), ((2, 3),)), params={"axis": 1}),
    jvp=LINEAR,
    batch=along_axis(new_axis=True, sparse="view"),
    torch=Torch(lambda t, x, axis: t.unsqueeze(x, axis), variants=({"axis": 0}, {"axis": -1})),
)


def _negated(shift: int | tuple[int, ...]) -> Any:
    return tuple(-s for s in shift) if isinstance(shift, tuple) else -shift


flip = defop(
    "flip", lambda x, axis=None: np.flip(x, axis=axis), (lambda m, g, ans, x, axis=None: m.flip(g, axis=axis),),
    doc="x with the order of elements reversed along axis (all axes by default)", category=SHAPE,
    method=True, complex_safe=True, check=Check(shapes=(((5,),), ((3, 4),)), params={"axis": -1}),
    jvp=LINEAR,
    batch=along_axis(),
    torch=Torch(lambda t, x, axis=None: t.flip(x, tuple(range(x.ndim)) if axis is None else (axis,)), variants=({"axis": None},)),
)
roll = defop(
    "roll", lambda x, shift, axis=None: np.roll(x, shift, axis=axis), (lambda m, g, ans, x, shift, axis=None: m.roll(g, shift=_negated(shift), axis=axis),),
    doc="x shifted cyclically by shift places along axis (of the flattened tensor by default)",
    category=SHAPE, method=True, complex_safe=True, check=Check(shapes=(((5,),), ((3, 4),)), params={"shift": 2}),
    jvp=LINEAR,
    rule='roll(g, -shift, axis)',
    batch=along_axis(none="flatten-restore"),
    torch=Torch(lambda t, x, shift, axis=None: t.roll(x, shift, axis), variants=({"shift": -1, "axis": 0},)),
)

# ---- tile and repeat ------------------------------------------------------------------------


def _tile_shape(shape: tuple[int, ...], reps: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """x's shape and reps padded with leading 1s to the same length (NumPy's rule)."""
    n = max(len(shape), len(reps))
    return (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + tuple(int(r) for r in reps)


def _tiled_shape(x: Any, reps: tuple[int, ...]) -> tuple[int, ...]:
    shape, full_reps = _tile_shape(np.shape(x), reps)
    return tuple(s * r for s, r in zip(shape, full_reps))


def _tile_vjp(m: Any, g: Any, ans: Any, x: Any, reps: tuple[int, ...]) -> Any:
    # Output axis i of size r_i * s_i is (r_i, s_i) in C order: sum the copies out.
    shape, full_reps = _tile_shape(x.shape, reps)
    split = tuple(n for pair in zip(full_reps, shape) for n in pair)
    copies = tuple(range(0, 2 * len(shape), 2))
    return m.reshape(m.sum(m.reshape(g, shape=split), axis=copies), shape=x.shape)


tile = defop(
    "tile", lambda x, reps: np.tile(x, _tile_shape(np.shape(x), reps)[1]), (_tile_vjp,),
    doc="x repeated as a whole reps times along each axis (torch's x.repeat)", category=SHAPE,
    method=True, variadic="reps", complex_safe=True,
    check=Check(shapes=(((3,),), ((2, 3),)), params={"reps": (2, 2)}), out_shape=_tiled_shape,
    rule="g summed over the copies",
    jvp=LINEAR,
    batch=TILE,
    torch=Torch(lambda t, x, reps: t.tile(x, reps), variants=({"reps": (3,)},)),
)


def _repeat_index(shape: tuple[int, ...], repeats: Any, axis: int | None) -> tuple[Any, ...]:
    """The index that picks x's elements for np.repeat (x flattened when axis is None)."""
    n = int(np.prod(shape)) if axis is None else shape[axis]
    picks = np.repeat(np.arange(n), np.asarray(repeats, dtype=int))
    if axis is None:
        return (picks,)
    return (slice(None),) * (axis % len(shape)) + (picks,)


def _repeated_shape(x: Any, repeats: Any, axis: int | None = None) -> tuple[int, ...]:
    n = np.size(x) if axis is None else np.shape(x)[axis]
    total = int(np.sum(np.broadcast_to(np.asarray(repeats, dtype=np.int64), (n,))))
    if axis is None:
        return (total,)
    return tuple(total if i == axis % np.ndim(x) else d for i, d in enumerate(np.shape(x)))


def _repeat(x: Any, repeats: Any, axis: int | None = None) -> Any:
    flat = np.reshape(x, -1) if axis is None else x
    return flat[_repeat_index(np.shape(x), repeats, axis)]


def _repeat_vjp(m: Any, g: Any, ans: Any, x: Any, repeats: Any, axis: int | None = None) -> Any:
    shape = (x.size,) if axis is None else x.shape
    return m.reshape(m.unindex(g, index=_repeat_index(x.shape, repeats, axis), shape=shape), shape=x.shape)


repeat = defop(
    "repeat", _repeat, (_repeat_vjp,),
    doc="each element repeated (NumPy's repeat, torch's repeat_interleave); flattened when axis is None",
    category=SHAPE, complex_safe=True,
    check=Check(shapes=(((3,),), ((2, 3),)), params={"repeats": 2, "axis": 0}), out_shape=_repeated_shape,
    rule="g summed over each element's repeats",
    jvp=LINEAR,
    batch=along_axis(none="flatten"),
    torch=Torch(lambda t, x, repeats, axis=None: t.repeat_interleave(x, repeats, axis), variants=({"repeats": 3},)),
)

# ---- sort ------------------------------------------------------------------------------------


def _sort_index(x: Any, axis: int, descending: bool) -> tuple[Any, ...]:
    """The index that puts x in order along axis (stable: ties keep their order)."""
    order = np.argsort(-x if descending else x, axis=axis, kind="stable")
    grid = list(np.indices(np.shape(x), sparse=True))
    grid[axis] = order
    return tuple(grid)


def _sort(x: Any, axis: int = -1, descending: bool = False) -> Any:
    if np.ndim(x) == 0:
        return x
    return x[_sort_index(x, axis, descending)]


def _sort_vjp(m: Any, g: Any, ans: Any, x: Any, axis: int = -1, descending: bool = False) -> Any:
    # The gradient of each output goes back to the element that was sorted into its place.
    if x.ndim == 0:
        return g
    return m.unindex(g, index=_sort_index(m.raw(x), axis, descending), shape=x.shape)


def _sort_jvp(m: Any, tangents: Any, ans: Any, x: Any, axis: int = -1, descending: bool = False) -> Any:
    # Each output element is the input element sorted into its place: so is its tangent.
    if x.ndim == 0:
        return tangents[0]
    return m.getitem(tangents[0], index=_sort_index(m.raw(x), axis, descending))


def _has_tie(x: Any, axis: int = -1, descending: bool = False, tol: float = 0.0) -> bool:
    if np.ndim(x) == 0:
        return False
    gaps = np.diff(np.sort(x, axis=axis), axis=axis)
    return bool(np.any(gaps <= tol))


sort = defop(
    "sort", _sort, (_sort_vjp,),
    doc="x in ascending order along axis (descending=true for the reverse); gradient through the permutation",
    category=SHAPE, method=True, kink=_has_tie,
    check=Check(shapes=(((5,),), ((3, 4),)), params={"axis": -1}, kink_gap=1e-3),
    rule="g moved back through the sorting permutation",
    jvp=_sort_jvp, jvp_rule="dx moved through the sorting permutation (the tangent sorted as x is)",
    edges=(Edge("with ties", [[1.0, 1.0, 0.0]], [0.0, 1.0, 1.0], ([2.0, 3.0, 1.0],), weights=[1.0, 2.0, 3.0],
                note="stable: tied elements keep their order"),
           Edge("with ties, descending", [[2.0, 1.0, 2.0]], [2.0, 2.0, 1.0], ([1.0, 3.0, 2.0],), weights=[1.0, 2.0, 3.0],
                params={"descending": True}, note="stable too"),),
    batch=along_axis(none="flatten"),
    torch=Torch(
        lambda t, x, axis=-1, descending=False: t.sort(x, dim=axis, descending=descending, stable=True).values,
        variants=({"axis": 0, "descending": True},),
        agrees_at=(
            ([[1.0, 1.0, 0.0]], {}),
            ([[2.0, 1.0, 2.0]], {"descending": True}),
        ),
    ),
)

# ---- pad ---------------------------------------------------------------------------------------


def _padded_shape(x: Any, widths: Any, value: float = 0.0) -> tuple[int, ...]:
    return tuple(n + b + a for n, (b, a) in zip(np.shape(x), refusals.pad_pairs(widths, np.ndim(x))))


def _pad(x: Any, widths: Any, value: float = 0.0) -> Any:
    return np.pad(x, refusals.pad_pairs(widths, np.ndim(x)), constant_values=value)


def _pad_vjp(m: Any, g: Any, ans: Any, x: Any, widths: Any, value: float = 0.0) -> Any:
    pairs = refusals.pad_pairs(widths, x.ndim)
    return m.getitem(g, index=tuple(slice(b, b + n) for n, (b, _) in zip(x.shape, pairs)))


def _pad_jvp(m: Any, tangents: Any, ans: Any, x: Any, widths: Any, value: float = 0.0) -> Any:
    return m.pad(tangents[0], widths=widths, value=0.0)  # the padding is a constant


def _pad_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    pairs = refusals.pad_pairs(params["widths"], x.ndim - nb)
    flat = [0] * (2 * nb) + [w for pair in pairs for w in pair]
    return m.pad(x, widths=tuple(flat), **{k: v for k, v in params.items() if k != "widths"})


pad = defop(
    "pad", _pad, (_pad_vjp,),
    doc="x surrounded by value: widths is one number, a (before, after) pair, or before/after per axis in axis order",
    category=SHAPE, complex_safe=True,
    check=Check(shapes=(((3,),), ((2, 3),)), params={"widths": (1, 2), "value": 0.5}), out_shape=_padded_shape,
    rule="g without the padding",
    jvp=_pad_jvp, jvp_rule="pad(dx, widths) with zeros (the padding is a constant)",
    batch=own(_pad_batch, "no padding on the batch axes"),
    torch=Torch(torch_calls.pad, variants=({"widths": 2}, {"widths": (0, 3), "value": -1.0})),
)
