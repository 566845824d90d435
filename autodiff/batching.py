"""Batching: every op run once on inputs that carry a batch, by a rule of the op's own.

vmap, and jacrev, jacfwd and hessian (transforms.py), evaluate a function once on values
that stand for a whole batch of values, as JAX's vmap does with its batch tracers:

- A `Batched` value is a Tensor of the engine, its `value` (physical: the batch axes
  lead, then the axes of each item), seen as a batch of tensors of its logical shape.
  Each batch axis belongs to a *level*: one vmap, or the batch of cotangents of one
  jacrev, of tangents of one jacfwd. Levels are numbered as they are made, and a value's
  batch axes are in the order of its levels, so that two values line up by inserting
  size-1 axes for the levels one of them lacks (a value the same in every row of a level
  has no axis for it).
- An op applied to Batched values (wiring.apply sends them here) runs its batching rule
  (`defop(..., batch=...)`, `OpDef.batch`): a function that computes, from the physical
  inputs, the physical result, with ordinary ops. So the graph that is recorded is made of
  ordinary ops on ordinary tensors, and every backward pass, forward pass and gradient
  check of it is the ordinary one; the batch is a way of looking at the values.
- A rule is `run(m, op, nb, args, batched, params)`: `args` the op's inputs, those with
  `batched[k]` carrying `nb` leading batch axes (of a level's size, or 1), the others none;
  it returns the result (a tuple for several outputs) with `nb` leading batch axes. It is
  written once against `m`, as a VJP is: TENSOR_MATH for vmap (recording a graph), or
  ARRAY_MATH for gradcheck's batched replays of a recorded graph (replay.py), which run a
  column of the Jacobian per row of a batch.

Most rules are read off an op's structure: elementwise ops broadcast (`BROADCAST`),
reductions and scans shift their axes past the batch (`along_axis`), NumPy's stacked
matrix functions take leading axes as they are (`LEADING`); the rest are written beside
their ops.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from .binding import _NO_DEFAULT, _parameters
from .errors import ArgumentError, ShapeError
from .limits import check_size, matmul_shape
from .namespaces import TENSOR_MATH
from .shapes import broadcast_shapes
from .tensor import Tensor, is_grad_enabled, set_grad_enabled, squares_finite

if TYPE_CHECKING:
    from .registry import OpDef

# ---- levels ------------------------------------------------------------------------------------

_counter = itertools.count(1)
_LIVE: set[int] = set()  # the levels being evaluated now


@contextmanager
def new_level() -> Iterator[int]:
    """A level of its own for the extent of a vmap (or of one batched pass): values that
    carry it must not be used once it is over, which `apply_batched` checks."""
    level = next(_counter)
    _LIVE.add(level)
    try:
        yield level
    finally:
        _LIVE.discard(level)


class BatchError(ArgumentError):
    """A batched value cannot be used this way (a condition, a shape or an index that
    differs from row to row), or outlived its vmap."""


class Batched(Tensor):
    """A batch of tensors of one logical shape, held as one physical tensor `value`.

    Its `shape`, `ndim` and `size` are those of one item; its `data` is the physical
    array (the batch axes first, in the order of `levels`). It is not a node of any
    graph: ops on it record ops on `value`."""

    __slots__ = ("_value", "levels", "diag", "_item", "_recorded")

    levels: tuple[int, ...]
    _value: Tensor | None  # the physical tensor; None while scaled rows (below) are held as their diagonal
    _item: tuple[int, ...]  # (the shape of an item, while _value is None)
    _recorded: bool  # (whether grad was enabled where the scaled rows were made)
    # A batch of scaled rows of the identity (a Jacobian's seed, and what scaling keeps of
    # it): row k is d[k] times the k-th element of an item, zero elsewhere; `diag` is d (a
    # Tensor), or None. Rules with a `diagonal` hook use it (DIAGONAL_BATCHES below), and
    # need no dense rows: those (n x n) are made only when something reads `value` or `data`.
    diag: Tensor | None

    @property
    def value(self) -> Tensor:
        v = self._value
        if v is None:
            d = self.diag
            assert d is not None
            with set_grad_enabled(self._recorded):  # as if made when the rows were
                # The identity times d, as the dense rows were scaled: off the diagonal 0 * d[e],
                # a zero with the sign of its element's factor (-0.0 for a negative one, as
                # torch.func gives), where diag(d) would put +0.0.
                v = TENSOR_MATH.mul(Tensor(np.eye(d.size)), d)
                if self._item != (d.size,):  # (the rows of a vector are made in their shape)
                    v = TENSOR_MATH.reshape(v, shape=(d.size, *self._item))
                self._value = v
            origin = getattr(d, "made_by", None)
            if origin is not None:  # (made by a backward pass's rule: so are the new nodes)
                for node in (v, *v._prev):
                    if getattr(node, "made_by", None) is None:
                        node.made_by = origin
        return v

    @property
    def data(self) -> np.ndarray:  # type: ignore[override]  # (Tensor's slot, shadowed: the physical array, made on first read)
        return self.value.data

    @property
    def shape(self) -> tuple[int, ...]:
        v = self._value
        return self._item if v is None else v.data.shape[len(self.levels):]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        raise BatchError(varies("its truth value", CHOOSE))

    def __float__(self) -> float:
        raise BatchError(varies("a number made of it"))

    def __int__(self) -> int:
        raise BatchError(varies("a number made of it"))

    def item(self) -> float | complex:
        raise BatchError(varies("item()"))

    def numpy(self) -> np.ndarray:
        # (`data` is the whole physical batch: NumPy code on it would mix the rows silently,
        # where JAX refuses to turn a tracer into an array and torch.func a batched tensor)
        raise BatchError(varies("its NumPy array (numpy())", "use the ops, which batch"))

    def __repr__(self) -> str:
        batch = (self.diag.size,) if self._value is None else self.data.shape[: len(self.levels)]  # type: ignore[union-attr]
        return f"Batched(shape={self.shape}, batch={batch}, levels={self.levels})"


def varies(what: str, hint: str = "") -> str:
    """The message for a use of a batched value that would differ from row to row."""
    return (f"{what} would differ from one row of the batch to another (inside vmap, or a Jacobian's batched pass), "
            f"so it cannot be batched{'; ' + hint if hint else ''}")


CHOOSE = "use where(cond, a, b) for a choice made element by element"
_new = object.__new__


def _handle(made_of: Tensor, levels: tuple[int, ...]) -> Batched:
    """A Batched over `levels`, no node of any graph, requiring grad as `made_of` does."""
    b = _new(Batched)
    b.grad = None
    b.requires_grad = made_of.requires_grad
    b._prev = ()
    b.op = None
    b.params = None
    b.name = None
    b.retains_grad = False
    b.detached = made_of.detached
    b.levels = levels
    return b


def batched(value: Tensor, levels: tuple[int, ...]) -> Tensor:
    """`value` seen as a batch over `levels` (its first len(levels) axes); `value` itself
    when there are none."""
    if not levels:
        return value
    b = _handle(value, levels)
    b._value = value
    b.diag = None
    return b


def scaled_rows(diag: Tensor, shape: tuple[int, ...], levels: tuple[int, ...]) -> Batched:
    """The batch (over `levels`) whose row k is diag[k] times the k-th element of an item of
    `shape`, zero elsewhere, held as `diag` alone until its dense rows are read."""
    b = _handle(diag, levels)
    b._value = None
    b.diag = diag
    b._item = shape
    b._recorded = is_grad_enabled()
    return b


def identity_rows(shape: tuple[int, ...], level: int, lead: tuple[int, ...] = ()) -> Batched:
    """The rows of the identity over the elements of an item of `shape`, as a batch over
    `level` (with size-1 axes `lead` for levels the item's tensor carries): the seed of a
    Jacobian's batched pass."""
    n = math.prod(map(int, shape))
    check_size((n, *shape), "a Jacobian's rows of the identity")  # (every caller's own check is the last line of defence)
    if not lead and DIAGONAL_BATCHES[0]:
        return scaled_rows(Tensor(np.ones(n)), tuple(shape), (level,))
    return batched(Tensor(np.eye(n).reshape((n,) + lead + tuple(shape))), (level,))  # type: ignore[return-value]


# The fast path for batches of scaled identity rows can be turned off (tests compare).
DIAGONAL_BATCHES = [True]


def unbatched(t: Any) -> tuple[Any, tuple[int, ...]]:
    """The physical value of a batch and its levels; anything else as it is, with none."""
    if type(t) is Batched:
        return t.value, t.levels
    return t, ()


def lazy_physical(t: Any) -> Any:
    """What a batch's physical value is made of without making it: the diagonal of scaled
    rows not yet made dense, or `unbatched(t)[0]`."""
    if type(t) is Batched and t._value is None:
        return t.diag
    return unbatched(t)[0]


def aligned(m: Any, value: Any, have: tuple[int, ...], want: tuple[int, ...]) -> Any:
    """`value`, batched over `have`, with a size-1 axis for each level of `want` (a
    superset, both in order) it lacks: ready to meet values batched over `want`."""
    if have == want:
        return value
    sizes = dict(zip(have, value.shape))
    shape = tuple(sizes.get(level, 1) for level in want) + tuple(value.shape[len(have):])
    return m.reshape(value, shape=shape)


# ---- applying an op to batched values ----------------------------------------------------------


class Unbatched:
    """What a rule returns for a result that is the same in every row (len(x) of a batch)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def apply_batched(op: OpDef, inputs: Sequence[Any], params: dict[str, Any]) -> Any:
    """`op` applied to inputs of which some are Batched (wiring.apply's call): its rule
    runs on the physical values, lined up over the union of their levels."""
    levels: tuple[int, ...] = ()
    for t in inputs:
        if type(t) is Batched:
            for level in t.levels:
                if level not in _LIVE:
                    raise BatchError(f"{op.name}: a value from inside a vmap (or a batched pass) is used after it returned")
            levels = tuple(sorted({*levels, *t.levels}))
    rule = op.batch
    if rule is None:
        raise BatchError(f"{op.name} has no batching rule, so it cannot run inside vmap or a batched Jacobian")
    if rule.diagonal is not None and len(levels) == 1:
        fast = rule.diagonal(op, inputs, params)
        if fast is not None:
            return fast
    args, flags = [], []
    for t in inputs:
        value, have = unbatched(t)
        args.append(aligned(TENSOR_MATH, value, have, levels) if have else value)
        flags.append(bool(have))
    if op.vjps is None:  # no gradient: nothing the rule does may record one
        with set_grad_enabled(False):
            out = rule.run(TENSOR_MATH, op, len(levels), args, flags, params)
    else:
        out = rule.run(TENSOR_MATH, op, len(levels), args, flags, params)
    if isinstance(out, tuple):
        return tuple(_result(o, levels) for o in out)
    return _result(out, levels)


def _result(out: Any, levels: tuple[int, ...]) -> Any:
    if type(out) is Unbatched:
        return out.value
    return batched(out, levels)


class BatchRule:
    """How an op runs on a batch: `run(m, op, nb, args, batched, params)` (see the module's
    docstring). `kind` names the structure it was read from ("broadcast", "axis",
    "leading", or "own" for a rule written for its op), which replay.py's sparse replays
    read; `text` says it in words for help and docs."""

    __slots__ = ("kind", "run", "text", "sparse", "diagonal")

    def __init__(self, kind: str, run: Callable[..., Any], text: str, sparse: str | None = None,
                 diagonal: Callable[..., Any] | None = None) -> None:
        self.kind, self.run, self.text = kind, run, text
        # How a batch that differs from one value in one element per row passes the op
        # (replay.py's sparse replays): "elementwise" (each element on its own), "view"
        # (the same elements in C order), "total"/"average" (a sum of all of them, or a mean).
        self.sparse = sparse
        # diagonal(op, inputs, params): the op on a batch of scaled identity rows
        # (Batched.diag) in O(n**2) rather than as n dense rows, or None where it does not apply.
        self.diagonal = diagonal

    def __repr__(self) -> str:
        return f"<batch {self.kind}: {self.text}>"


def own(run: Callable[..., Any], text: str) -> BatchRule:
    """A rule written for its op."""
    return BatchRule("own", run, text)


def call(m: Any, op: OpDef, *args: Any, **params: Any) -> Any:
    """`op` on physical values: recorded (TENSOR_MATH) or on arrays (ARRAY_MATH)."""
    if m is TENSOR_MATH:
        return op(*args, **params)
    return op.forward(*args, **params)


def logical_ndim(a: Any, batched: bool, nb: int) -> int:
    return a.ndim - nb if batched else a.ndim


def lifted(m: Any, a: Any, nb: int, rank: int) -> Any:
    """A batched value with size-1 axes put after its batch axes to give its items `rank`
    axes: as NumPy's broadcasting would put them in front of one item's."""
    extra = rank - (a.ndim - nb)
    if extra <= 0:
        return a
    return m.reshape(a, shape=tuple(a.shape[:nb]) + (1,) * extra + tuple(a.shape[nb:]))


def batch_shape(args: Sequence[Any], flags: Sequence[bool], nb: int) -> tuple[int, ...]:
    """The batch axes the batched inputs broadcast to."""
    return tuple(broadcast_shapes(*(tuple(a.shape[:nb]) for a, f in zip(args, flags) if f)))


def spread(m: Any, a: Any, flag: bool, nb: int, batch: tuple[int, ...]) -> Any:
    """An input as a full batch: batched ones broadcast over size-1 batch axes, others
    repeated for every row (for ops that do not broadcast their inputs)."""
    item = tuple(a.shape[nb:]) if flag else tuple(a.shape)
    if flag and tuple(a.shape[:nb]) == batch:
        return a
    return m.broadcast_to(a if flag else a, shape=batch + item)


def shift(axis: int, ndim: int, nb: int, name: str) -> int:
    """A logical axis of an item with `ndim` axes as a physical one."""
    if not -ndim <= axis < max(ndim, 1) or ndim == 0:
        if ndim == 0:
            raise ShapeError(f"{name}: a scalar has no axis {axis}")
        raise ShapeError(f"{name}: axis {axis} is out of range for a tensor with {ndim} dimension{'s' * (ndim != 1)}")
    return axis % ndim + nb


@cache
def defaults(op: OpDef) -> dict[str, Any]:
    """The op's parameters' defaults, from its forward."""
    return {name: default for name, _, default in _parameters(op.forward) if default is not _NO_DEFAULT}


def reshaped(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """t in `shape`: t itself when it has that shape already. For the rules' own reshapes
    (a Jacobian's rows, a lift and its drop), which are often to the shape a value has;
    each through the op costs as much as a small op. A reshape the program asks for, and
    the identity node `fresh` makes, still go through the op."""
    return t if tuple(t.shape) == shape else TENSOR_MATH.reshape(t, shape=shape)  # type: ignore[no-any-return]


def logical_reshape(shape: tuple[int, ...], new: Sequence[int]) -> tuple[int, ...]:
    """`new` with its -1 worked out for an item of `shape`, as np.reshape would; NumPy's
    error in an item's numbers when it does not fit."""
    size = math.prod(shape)  # (exact Python integers: np.prod's wrapper cost a Jacobian's pass 7% of its time)
    new = tuple([int(n) for n in new])
    if new.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in new:
        rest = math.prod([n for n in new if n != -1])
        if rest and size % rest == 0:
            return tuple(size // rest if n == -1 else n for n in new)
    elif math.prod(new) == size:
        return new
    raise ValueError(f"cannot reshape array of size {size} into shape {new}")



# ---- batches of scaled identity rows -------------------------------------------------------------
# A Jacobian's seed is the identity: n rows, one element each. Scaling keeps it so, a
# reshape keeps it so, and a matrix product with it is a scaled copy of the matrix: n**2
# work where the dense rows take n**3 (jacrev and jacfwd of tanh(W @ x) at n = 300:
# docs/performance.md, "diagonal batches").


def _diagonal_input(inputs: Sequence[Any]) -> tuple[int, Any] | None:
    """The one batched input, if it is a batch of scaled identity rows and the others are not batched."""
    found = None
    for k, t in enumerate(inputs):
        if type(t) is Batched:
            if t.diag is None or found is not None:
                return None
            found = (k, t)
    return found


def _finite(t: Tensor) -> bool:
    """No inf or nan: the dense rows would hold 0 * inf = nan beside each row's element,
    which the scaled rows' exact zeros must not hide (the two paths give the same numbers).
    An entry whose square overflows sends the batch the dense way too: a derivative taken
    through the Jacobian again squares it, and 0 * inf appears in the dense rows there."""
    return squares_finite(t.data)


def _scaling(op: OpDef, inputs: Sequence[Any], params: dict[str, Any]) -> Batched | None:
    """mul, div (the batch divided) and neg: each row's one element scaled, zeros kept."""
    found = _diagonal_input(inputs)
    if found is None or params:
        return None
    k, rows = found
    shape = tuple(rows.shape)
    if op.name == "neg":
        return scaled_rows(TENSOR_MATH.neg(rows.diag), shape, rows.levels)
    if op.name == "div" and k != 0:
        return None
    other = inputs[1 - k]
    other = other if isinstance(other, Tensor) else Tensor(other)
    if broadcast_shapes(tuple(other.shape), shape) != shape or not _finite(other):
        return None
    if op.name == "div" and not other.data.all():  # the dense rows' 0 / 0 off the diagonal is nan, which scaled rows would lose
        return None
    at = reshaped(other if tuple(other.shape) == shape else TENSOR_MATH.broadcast_to(other, shape=shape), (rows.diag.size,))
    d = TENSOR_MATH.div(rows.diag, at) if op.name == "div" else TENSOR_MATH.mul(rows.diag, at) if k == 0 else TENSOR_MATH.mul(at, rows.diag)
    return scaled_rows(d, shape, rows.levels)


def _reshaped(op: OpDef, inputs: Sequence[Any], params: dict[str, Any]) -> Batched | None:
    """A reshape keeps each row's element where C order puts it."""
    found = _diagonal_input(inputs)
    if found is None:
        return None
    _, rows = found
    new = params.get("shape", ())
    new = (new,) if isinstance(new, (int, np.integer)) else tuple(new)
    shape = logical_reshape(tuple(rows.shape), new)
    return scaled_rows(rows.diag, shape, rows.levels)


def _product(op: OpDef, inputs: Sequence[Any], params: dict[str, Any]) -> Tensor | None:
    """A matrix times a batch of scaled identity rows, or the rows times a matrix: each row of
    the result is a scaled row or column of the matrix."""
    found = _diagonal_input(inputs)
    if found is None or params:
        return None
    k, rows = found
    other = inputs[1 - k]
    shape, n = tuple(rows.shape), rows.diag.size
    if not isinstance(other, Tensor) or other.ndim != 2 or not _finite(other):
        return None
    m = TENSOR_MATH
    d = rows.diag
    # The identity's own rows (jacfwd's seed meeting its first matrix): the matrix as it is,
    # without a copy of n**2 elements (and, on a virtual machine, their fresh pages' faults).
    unscaled = not d.requires_grad and bool((d.data == 1.0).all())
    if k == 1 and shape in ((n,), (n, 1)) and other.shape[1] == n:  # A @ (d_j e_j) = d_j A[:, j]
        columns = m.transpose(other if unscaled else m.mul(other, d), axes=(1, 0))  # (d, of shape (n,), scales the columns)
        return batched(reshaped(columns, (n, other.shape[0]) + shape[1:]), rows.levels)
    if k == 0 and shape in ((n,), (1, n)) and other.shape[0] == n:  # (d_j e_j) @ B = d_j B[j, :]
        scaled = other if unscaled else m.mul(m.reshape(d, shape=(n, 1)), other)
        return batched(reshaped(scaled, (n,) + shape[:-1] + (other.shape[1],)), rows.levels)
    return None


# ---- rules read off an op's structure --------------------------------------------------------


def _broadcast(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    rank = max(logical_ndim(a, f, nb) for a, f in zip(args, flags))
    return call(m, op, *(lifted(m, a, nb, rank) if f else a for a, f in zip(args, flags)), **params)


BROADCAST = BatchRule(
    "broadcast", _broadcast,
    "elementwise: each batched input gets size-1 axes after its batch axes, and NumPy's broadcasting does the rest",
    sparse="elementwise",
)
# Elementwise and zero-preserving in its batched input (mul, div, neg): a Jacobian's batch of
# scaled identity rows stays one (see "batches of scaled identity rows" below).
SCALING = BatchRule("broadcast", _broadcast, BROADCAST.text, sparse="elementwise", diagonal=_scaling)


def _leading(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    for a, f in zip(args, flags):
        if f and a.ndim - nb < 2:  # an item that is no matrix: the op's own error, for one item
            call(m, op, *(x[(0,) * nb] if g else x for x, g in zip(args, flags)), **params)
    return call(m, op, *args, **params)


LEADING = BatchRule("leading", _leading, "NumPy's stacked matrices: the batch axes lead, as a stack's do")


def along_axis(*names: str, none: str = "all", new_axis: bool = False, sparse: str | None = None) -> BatchRule:
    """The rule of an op along axes given by parameters `names` (axis, or axis1 and
    axis2): each logical axis shifted past the batch axes. `none` says what axis=None
    means: "all" the item's axes, "flatten" the item flattened first (NumPy's cumsum,
    argmax; roll puts the shape back: "flatten-restore"), or "squeeze" the item's size-1
    axes. `new_axis`: the axis is one of the result's, which has one more (stack, unsqueeze)."""
    names = names or ("axis",)

    def run(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
        ndim = max(logical_ndim(a, f, nb) for a, f in zip(args, flags))
        params = dict(params)
        for name in names:
            axis = params[name] if name in params else defaults(op).get(name)
            if axis is None:
                if none == "all":
                    params[name] = tuple(range(nb, nb + ndim))
                elif none == "squeeze":
                    x = args[0]
                    params[name] = tuple(nb + i for i in range(ndim) if x.shape[nb + i] == 1)
                else:
                    return _flattened(m, op, nb, args, flags, params, name, none == "flatten-restore")
                continue
            if isinstance(axis, (tuple, list)):
                size = ndim + (len(axis) if new_axis else 0)
                params[name] = tuple(shift(int(a), size, nb, op.name) for a in axis)
            else:
                params[name] = shift(int(axis), ndim + new_axis, nb, op.name)
        if len(args) > 1:  # joins: every input a full batch of items of one rank
            batch = batch_shape(args, flags, nb)
            args = [spread(m, a, f, nb, batch) for a, f in zip(args, flags)]
        return call(m, op, *args, **params)

    kind = "axis"
    text = f"the {' and '.join(names)} shifted past the batch axes" + {
        "all": "", "squeeze": "", "flatten": "; axis=None flattens each item", "flatten-restore": "; axis=None flattens each item",
    }[none]
    return BatchRule(kind, run, text, sparse)


def _flattened(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any], name: str, restore: bool) -> Any:
    """An op with axis=None on each item flattened, along the one axis after the batch."""
    if len(args) > 1:
        batch = batch_shape(args, flags, nb)
        args = [spread(m, a, f, nb, batch) for a, f in zip(args, flags)]
    flat = [m.reshape(a, shape=tuple(a.shape[:nb]) + (math.prod(a.shape[nb:]),)) for a in args]
    out = call(m, op, *flat, **{**params, name: nb})
    return m.reshape(out, shape=tuple(args[0].shape)) if restore else out


# ---- the rules of ops that move elements --------------------------------------------------------


def _reshape(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    new = params.get("shape", ())
    new = (new,) if isinstance(new, (int, np.integer)) else tuple(new)
    return m.reshape(x, shape=tuple(x.shape[:nb]) + logical_reshape(tuple(x.shape[nb:]), new))


def _flatten(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    return m.reshape(x, shape=tuple(x.shape[:nb]) + (math.prod(x.shape[nb:]),))


RESHAPE = BatchRule("reshape", _reshape, "the new shape after the batch axes", sparse="view", diagonal=_reshaped)
FLATTEN = BatchRule("reshape", _flatten, "each item flattened after the batch axes", sparse="view")


def _transpose(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    ndim = x.ndim - nb
    axes = tuple(params.get("axes") or ())
    if not axes:
        axes = tuple(range(ndim - 1, -1, -1))
    elif len(axes) != ndim or sorted(a % max(ndim, 1) for a in axes) != list(range(ndim)) or any(not -ndim <= a < ndim for a in axes):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {ndim} axes of a tensor of shape {tuple(x.shape[nb:])}")
    return m.transpose(x, axes=tuple(range(nb)) + tuple(nb + a % ndim for a in axes))


TRANSPOSE = BatchRule("permute", _transpose, "the permutation shifted past the batch axes")


def _broadcast_to(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    target = tuple(params["shape"]) if isinstance(params["shape"], (tuple, list)) else (params["shape"],)
    item = tuple(x.shape[nb:])
    broadcast_shapes(item, target)  # (NumPy's error in an item's shapes)
    if len(item) > len(target) or broadcast_shapes(item, target) != target:
        raise ValueError(f"operands could not be broadcast together with remapped shapes [original->remapped]: {item} and requested shape {target}")
    return m.broadcast_to(lifted(m, x, nb, len(target)), shape=tuple(x.shape[:nb]) + target)


BROADCAST_TO = BatchRule("own", _broadcast_to, "each item broadcast after the batch axes")


def prefixed(index: Any, nb: int) -> tuple[Any, ...]:
    """An item's index as the batch's: the batch axes taken whole first."""
    parts = index if isinstance(index, tuple) else (index,)
    return (slice(None),) * nb + parts


def _advanced_first(index: Any) -> int:
    """How many leading axes NumPy gives an index's broadcast arrays when they are not side
    by side (it puts them first, before the batch axes we add); 0 when they are."""
    parts = index if isinstance(index, tuple) else (index,)
    where = [i for i, p in enumerate(parts) if isinstance(p, np.ndarray) or (isinstance(p, list))]
    if len(where) < 2 or where[-1] - where[0] == len(where) - 1:
        return 0
    arrays = [np.asarray(parts[i]) for i in where]
    shapes = [a.shape if a.dtype != np.bool_ else (int(a.sum()),) for a in arrays]
    return len(broadcast_shapes(*shapes))


def _moved_front(m: Any, out: Any, nb: int, k: int) -> Any:
    """Result axes (k advanced, nb batch, rest) reordered to (nb batch, k advanced, rest)."""
    order = tuple(range(k, k + nb)) + tuple(range(k)) + tuple(range(k + nb, out.ndim))
    return m.transpose(out, axes=order)


def _getitem(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    index = params["index"]
    out = m.getitem(args[0], index=prefixed(index, nb))
    k = _advanced_first(index)
    return _moved_front(m, out, nb, k) if k else out


def _unindex(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    g = args[0]
    index, shape = params["index"], tuple(params["shape"])
    k = _advanced_first(index)
    if k:  # g's advanced axes where NumPy puts them for the batch's index: first
        order = tuple(range(nb, nb + k)) + tuple(range(nb)) + tuple(range(nb + k, g.ndim))
        g = m.transpose(g, axes=order)
        batch = tuple(g.shape[k : k + nb])
    else:
        batch = tuple(g.shape[:nb])
    return m.unindex(g, index=prefixed(index, nb), shape=batch + shape)


GETITEM = BatchRule("index", _getitem, "the index after a whole slice of each batch axis")
UNINDEX = BatchRule("own", _unindex, "the index after a whole slice of each batch axis")


def _tile(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    reps = params["reps"]
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    ndim = max(x.ndim - nb, len(reps))
    x = lifted(m, x, nb, ndim)
    return m.tile(x, reps=(1,) * nb + (1,) * (ndim - len(reps)) + reps)


TILE = BatchRule("own", _tile, "reps of 1 for the batch axes")


BATCH_TIMES_MATRIX = [True]  # the product of a batch and one matrix, either side, as NumPy broadcasts it (tests turn it off to compare)


def _matmul(m: Any, op: OpDef, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    """a @ b of each item: 1-d items lifted to matrices as NumPy lifts them (a to a row, b
    to a column), the items' stack axes lined up after the batch axes, the lifted axes
    dropped afterwards."""
    (a, b), (fa, fb) = args, flags
    na, nb_ = logical_ndim(a, fa, nb), logical_ndim(b, fb, nb)
    if na == 0 or nb_ == 0:  # the op's own error, for one item
        call(m, op, a[(0,) * nb] if fa else a, b[(0,) * nb] if fb else b)
    items = [tuple(a.shape[nb:] if fa else a.shape), tuple(b.shape[nb:] if fb else b.shape)]
    if fa != fb and (nb_ if fa else na) == 2 and BATCH_TIMES_MATRIX[0]:
        # A batch and one matrix, either side: matmul broadcasts the matrix over the batch
        # axes itself, so the physical product is the batch's (for a batch of vectors times
        # the matrix, one (rows, k) @ (k, m) product, whose gradient by the matrix is one
        # a.T @ g, not a stack of rows x k x m per-row products summed).
        _refuse_unfit(m, op, items)
        if fb and nb_ == 1:  # the matrix times a batch of vectors: each row's a @ v, as the batch times a.T
            return call(m, op, b, m.transpose(a, axes=(1, 0)))
        return call(m, op, a, b)
    if na == 1:
        a = m.reshape(a, shape=tuple(a.shape[:-1]) + (1, a.shape[-1]))
    if nb_ == 1:
        b = m.reshape(b, shape=tuple(b.shape) + (1,))
    stack = max(max(na, 2) - 2, max(nb_, 2) - 2)
    a = lifted(m, a, nb, stack + 2) if fa else a
    b = lifted(m, b, nb, stack + 2) if fb else b
    out = call(m, op, a, b)
    item = matmul_shape(*items)
    return m.reshape(out, shape=tuple(out.shape[:nb]) + tuple(item))


def _refuse_unfit(m: Any, op: OpDef, items: list[tuple[int, ...]]) -> None:
    """Items whose inner dimensions differ: the op's own error for one item of each shape
    (stand-ins of zeros, no memory), not for the physical operands, whose shapes hold the
    batch and, for a matrix times a batch of vectors, come transposed and swapped."""
    left, right = items
    if left[-1] != (right[0] if len(right) == 1 else right[-2]):
        call(m, op, *(Tensor(np.broadcast_to(np.zeros(()), shape)) for shape in items))


MATMUL = BatchRule("own", _matmul, "1-d items lifted to matrices, the batch axes leading the stacks", diagonal=_product)


# ---- moving axes between a value's items and its batch -----------------------------------------


def to_level(t: Any, axis: int, level: int) -> Tensor:
    """A batch over `level` (newer than any the value has) of the slices of `t` along its
    logical `axis`: vmap's way in."""
    m = TENSOR_MATH
    value, levels = unbatched(t if isinstance(t, Tensor) else Tensor(t))
    nb, ndim = len(levels), value.ndim - len(levels)
    p = shift(axis, ndim, nb, "vmap")
    order = tuple(range(nb)) + (p,) + tuple(i for i in range(nb, value.ndim) if i != p)
    moved = value if p == nb else m.transpose(value, axes=order)
    return batched(moved, levels + (level,))


def from_level(t: Any, level: int, axis: int, size: int) -> Tensor:
    """The batch over `level` of `t` as a logical axis at `axis` of each item: vmap's way
    out. A value with no axis for the level is the same in every row, and is repeated."""
    m = TENSOR_MATH
    value, levels = unbatched(t if isinstance(t, Tensor) else Tensor(t))
    nb, ndim = len(levels), value.ndim - len(levels)
    if not -ndim - 1 <= axis <= ndim:
        raise ShapeError(f"vmap: out_axes {axis} is out of range for a result with {ndim} dimension{'s' * (ndim != 1)}")
    axis %= ndim + 1
    if level not in levels:
        shape = tuple(value.shape[:nb]) + tuple(value.shape[nb : nb + axis]) + (1,) + tuple(value.shape[nb + axis :])
        moved = m.broadcast_to(m.reshape(value, shape=shape), shape=shape[: nb + axis] + (size,) + shape[nb + axis + 1 :])
        return batched(moved, levels)
    q = levels.index(level)
    rest = tuple(i for i in range(value.ndim) if i != q)
    order = rest[: nb - 1 + axis] + (q,) + rest[nb - 1 + axis :]
    moved = value if order == tuple(range(value.ndim)) else m.transpose(value, axes=order)
    if moved.shape[nb - 1 + axis] != size:  # a size-1 axis: the same in every row of the level
        full = tuple(moved.shape[: nb - 1 + axis]) + (size,) + tuple(moved.shape[nb + axis :])
        moved = m.broadcast_to(moved, shape=full)
    return batched(moved, tuple(v for v in levels if v != level))


def rebased(v: Any, levels: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    """`v` (an item's value, maybe batched) as a value for a tensor of physical `shape`
    batched over `levels`: that tensor's batch axes become part of each item, and v's other
    levels stay its batch. What a seed of a backward or forward pass of a physical graph is."""
    m = TENSOR_MATH
    value, have = unbatched(v if isinstance(v, Tensor) else Tensor(v))
    union = tuple(sorted({*have, *levels}))
    extra = tuple(level for level in have if level not in levels)
    value = aligned(m, value, have, union)
    order = tuple(union.index(e) for e in extra) + tuple(union.index(x) for x in levels) + tuple(range(len(union), value.ndim))
    if order != tuple(range(value.ndim)):
        value = m.transpose(value, axes=order)
    full = tuple(value.shape[: len(extra)]) + tuple(shape)
    if tuple(value.shape) != full:
        value = m.broadcast_to(value, shape=full)
    return batched(value, extra)


def merged(g: Any, levels: tuple[int, ...]) -> Any:
    """rebased's inverse: `g`, whose items begin with the batch axes of `levels` (a
    result of a pass over a physical graph), as one value batched over all its levels."""
    value, extra = unbatched(g)
    if not levels:
        return g
    union = tuple(sorted({*extra, *levels}))
    order = tuple(extra.index(u) if u in extra else len(extra) + levels.index(u) for u in union)
    order += tuple(range(len(union), value.ndim))
    if order != tuple(range(value.ndim)):
        value = TENSOR_MATH.transpose(value, axes=order)
    return batched(value, union)
