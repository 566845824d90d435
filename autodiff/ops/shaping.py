"""Ops that move elements around: reshape, transpose, broadcast, index, join and split."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..batching import BROADCAST_TO, FLATTEN, GETITEM, RESHAPE, TRANSPOSE, UNINDEX, along_axis
from ..errors import ArgumentError, ShapeError
from ..forward import LINEAR
from ..limits import check_size, indexed_shape, joined_shape
from ..registry import Check, Torch, defop
from ..tensor import Tensor
from ..wiring import unbroadcast
from . import refusals, torch_calls

SHAPE = "shape"


def _broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
    check_size(shape, "broadcast_to")
    return np.broadcast_to(x, shape)


def _inverse_axes(axes: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    if not axes:
        return ()
    return tuple(np.argsort([a % ndim for a in axes]))


reshape = defop(
    # (the array's methods here and below: np.reshape's wrapper costs as much as the reshape, which a batched pass makes often)
    "reshape", lambda x, shape: x.reshape(shape), (lambda m, g, ans, x, shape: m.reshape(g, shape=x.shape),),
    doc="the same elements in a new shape (one dimension may be -1)", category=SHAPE, method=True,
    aliases=("view",),  # PyTorch's x.view(2, 3): the same values wherever PyTorch's view works
    variadic="shape", out_shape=lambda x, shape: x.reshape(shape).shape,  # a view: nothing allocated
    complex_safe=True, check=Check(shapes=(((3, 4),),), params={"shape": (2, 6)}),
    jvp=LINEAR,
    batch=RESHAPE,
    torch=Torch(lambda t, x, shape: x.reshape(shape)),
)
flatten = defop(
    "flatten", lambda x: x.reshape(-1), (lambda m, g, ans, x: m.reshape(g, shape=x.shape),),
    doc="the elements as a 1-d tensor", category=SHAPE, method=True, complex_safe=True,
    check=Check(shapes=(((3, 4),), ((2, 3, 2),))),
    jvp=LINEAR,
    batch=FLATTEN,
    torch=Torch(lambda t, x: x.reshape(-1)),
)
transpose = defop(
    "transpose", lambda x, axes=(): x.transpose(axes or None),
    (lambda m, g, ans, x, axes=(): m.transpose(g, axes=_inverse_axes(axes, x.ndim)),),
    doc="axes reversed, or permuted as given (x.T reverses)", category=SHAPE, method=True, variadic="axes",
    complex_safe=True, check=Check(shapes=(((3, 4),), ((2, 3, 4),))),
    jvp=LINEAR,
    rule='transpose(g) by the inverse permutation of axes',
    batch=TRANSPOSE,
    torch=Torch(torch_calls.transpose, variants=({"axes": (1, 0)},)),
)
Tensor.T = property(lambda self: transpose(self), doc="the tensor with its axes reversed")  # type: ignore[assignment]  # declared in Tensor


swapaxes = defop(
    "swapaxes", lambda x, axis1, axis2: np.swapaxes(x, axis1, axis2), (lambda m, g, ans, x, axis1, axis2: m.swapaxes(g, axis1=axis1, axis2=axis2),),
    doc="x with two axes exchanged (PyTorch's transpose(x, 0, 1)); x.mT swaps the last two", category=SHAPE,
    method=True, complex_safe=True, check=Check(shapes=(((3, 4),), ((2, 3, 4),)), params={"axis1": 0, "axis2": -1}),
    jvp=LINEAR,
    batch=along_axis("axis1", "axis2"),
    torch=Torch(lambda t, x, axis1, axis2: t.swapaxes(x, axis1, axis2)),
)
Tensor.mT = property(  # type: ignore[assignment]  # declared in Tensor
    lambda self: swapaxes(self, axis1=-1, axis2=-2), doc="the last two axes exchanged (a stack of matrices transposed)",
)
broadcast_to = defop(
    "broadcast_to", _broadcast_to, (lambda m, g, ans, x, shape: unbroadcast(m, g, x.shape),),
    doc="x repeated along new or size-1 axes to the given shape", category=SHAPE, complex_safe=True,
    variadic="shape", method=True,
    check=Check(shapes=(((4,),), ((3, 1),)), params={"shape": (3, 4)}),
    jvp=LINEAR,
    rule="g summed over the broadcast axes, back to x's shape",
    batch=BROADCAST_TO,
    torch=Torch(lambda t, x, shape: x.broadcast_to(shape)),
)

# ---- indexing ---------------------------------------------------------------------------


def _is_basic(index: Any) -> bool:
    """Ints, slices, None and Ellipsis only: each element is picked at most once."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice)) for p in parts)


def _unindex(g: Any, index: Any, shape: tuple[int, ...]) -> Any:
    """Zeros of `shape` with `g` added at `index` (repeated picks add up)."""
    out = np.zeros(shape, dtype=np.result_type(g, np.float64))
    if _is_basic(index):
        out[index] = g
    elif out.ndim > 32:  # NumPy's ufunc.at crashes the process past 32 dimensions: the same sums over flat positions
        flat = np.arange(out.size).reshape(shape)[index]
        np.add.at(out.reshape(-1), flat.reshape(-1), np.broadcast_to(g, flat.shape).reshape(-1))
    else:
        np.add.at(out, index, g)
    return out


getitem = defop(
    "getitem", lambda x, index: x[index], (lambda m, g, ans, x, index: m.unindex(g, index=index, shape=x.shape),),
    doc="x[index]: integers, slices, integer tensors, boolean masks, None and ...", category=SHAPE, complex_safe=True,
    operators=("__getitem__",), out_shape=lambda x, index: indexed_shape(x.shape, index),
    check=Check(shapes=(((3, 4),),), params={"index": (slice(0, 2), 1)}),
    jvp=LINEAR,
    rule="g put at x[index] in zeros of x's shape (a repeated index adds up)",
    batch=GETITEM,
    torch=Torch(torch_calls.getitem, variants=({"index": (np.array([0, 2, 0]),)}, {"index": (Ellipsis, 1)})),
)
unindex = defop(
    "unindex", _unindex, (lambda m, g, ans, gx, index, shape: m.getitem(g, index=index),),
    doc="zeros of shape with g added at index (the VJP of getitem)", category=SHAPE, complex_safe=True,
    public=False, check=Check(shapes=(((2,),),), params={"index": (slice(0, 2), 1), "shape": (3, 4)}),
    jvp=LINEAR,
    batch=UNINDEX,
)

# ---- joining and splitting ----------------------------------------------------------------


def _concatenate_vjp(m: Any, g: Any, ans: Any, *xs: Any, axis: int = 0, k: int) -> Any:
    axis = axis % ans.ndim
    start = int(np.sum([x.shape[axis] for x in xs[:k]], dtype=int))
    index = (slice(None),) * axis + (slice(start, start + xs[k].shape[axis]),)
    return m.getitem(g, index=index)


def _join_check(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-2, 2, (2, 3)), rng.uniform(-2, 2, (2, 3))], {"axis": 1}


concatenate = defop(
    "concatenate", lambda *xs, axis=0: np.concatenate(xs, axis=axis), _concatenate_vjp, n_in=None, aliases=("concat",), listed=True,
    out_shape=lambda *xs, axis=0: joined_shape([x.shape for x in xs], axis, new_axis=False),
    doc="the inputs joined along an existing axis; concatenate([a, b]) as in NumPy",
    category=SHAPE, complex_safe=True,
    check=Check(make=_join_check),
    jvp=LINEAR,
    rule='each input gets the slice of g along axis where it was placed',
    batch=along_axis(none="flatten"),
    torch=Torch(lambda t, *xs, axis=0: t.cat(xs, dim=axis)),
)
stack = defop(
    "stack", lambda *xs, axis=0: np.stack(xs, axis=axis),
    lambda m, g, ans, *xs, axis=0, k: m.getitem(g, index=(slice(None),) * (axis % ans.ndim) + (k,)), n_in=None, listed=True,
    out_shape=lambda *xs, axis=0: joined_shape([x.shape for x in xs], axis, new_axis=True),
    doc="the inputs joined along a new axis; stack([a, b]) as in NumPy",
    category=SHAPE, complex_safe=True,
    check=Check(make=_join_check),
    jvp=LINEAR,
    rule='each input gets g at its own index along axis',
    batch=along_axis(new_axis=True),
    torch=Torch(lambda t, *xs, axis=0: t.stack(xs, dim=axis)),
)


def _split_slices(n: int, sections: int | tuple[int, ...]) -> list[slice]:
    """The pieces np.split(x, sections) cuts an axis of length n into: `sections` equal
    parts, or the parts between the given indices."""
    if isinstance(sections, tuple):
        bounds = [0, *sections, n]
        return [slice(a, b) for a, b in zip(bounds, bounds[1:])]
    if isinstance(sections, bool) or not isinstance(sections, (int, np.integer)) or sections <= 0:
        raise ArgumentError(f"split: sections must be a positive whole number or a list of indices, got {sections!r}")
    size = refusals.equal_sections(n, sections)
    return [slice(k * size, (k + 1) * size) for k in range(sections)]


def _split(x: Any, sections: int | tuple[int, ...] = 2, axis: int = 0) -> Any:
    axis = _axis_index(axis, x.ndim, "split")
    return tuple(x[(slice(None),) * axis + (piece,)] for piece in _split_slices(x.shape[axis], sections))


def _split_vjp(m: Any, g: Any, ans: Any, x: Any, sections: int | tuple[int, ...] = 2, axis: int = 0, *, output: int) -> Any:
    axis = axis % x.ndim
    index = (slice(None),) * axis + (_split_slices(x.shape[axis], sections)[output],)
    return m.unindex(g, index=index, shape=x.shape)


def _split_shape(x: Any, sections: int | tuple[int, ...] = 2, axis: int = 0) -> tuple[int, ...]:
    """How many pieces split makes, then the shape of the largest (for the size cap)."""
    axis = _axis_index(axis, x.ndim, "split")
    n = x.shape[axis]
    if isinstance(sections, tuple):  # a few indices: measure the pieces
        pieces = _split_slices(n, sections)
        count, longest = len(pieces), max(len(range(*piece.indices(n))) for piece in pieces)
    else:  # maybe very many equal sections: nothing of their number is built
        count, longest = int(sections), n // max(int(sections), 1)
    return (count, *x.shape[:axis], longest, *x.shape[axis + 1 :])


def _axis_index(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{name}: axis {axis} is out of range for a tensor with {ndim} dimension{'s' * (ndim != 1)}")
    return axis % ndim


split = defop(
    "split", _split, (_split_vjp,), n_ret=None,
    out_shape=_split_shape,
    doc="x cut along axis into equal sections, or at a list of indices: split(x, [2, 4]) (several outputs)",
    category=SHAPE, complex_safe=True,
    check=Check(shapes=(((4, 3),),), params={"sections": 2}),
    jvp=LINEAR,
    rule="g of each section put at its place in zeros of x's shape",
    batch=along_axis(),
    torch=Torch(torch_calls.split),
)
