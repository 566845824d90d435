"""Forward mode: JVP rules and the forward (tangent) pass.

Each differentiable op carries, beside its VJPs, a JVP rule (`defop(..., jvp=...)`):

    jvp(m, tangents, ans, *inputs, **params) -> the tangent of the output

`tangents` holds one tangent per input, None for an input whose tangent is zero. As a
VJP, a rule is written once against `m`: ARRAY_MATH on a plain pass, TENSOR_MATH with
`create_graph`, which records the tangent's own graph, so that forward over reverse
(hvp), reverse over forward and forward over forward work to any order.

Most ops need no formula of their own, because their Jacobian has a shape that the VJP
already spells out; `defop` binds these to the op:

- DIAGONAL (elementwise ops): J is diagonal, so J v is J^T v: the VJP applied to the
  tangent broadcast to the output's shape, summed over the inputs.
- LINEAR (reshape, sum, getitem, ...): J v is the op applied to the tangent.
- MULTILINEAR (matmul, einsum, ...): the product rule, the op with one input at a time
  replaced by its tangent.
- through_partials(reduce) (reductions, losses, det): each input element feeds one
  output element, so J v sums tangent * partials into it, the partials being the VJP of
  ones (d out_j / d x_i for the one j that x_i feeds).

The forward pass walks a recorded graph from its inputs to its outputs once per tangent
(reverse mode walks it back once per cotangent), which is what makes jacfwd cheap for
few inputs and jacrev for few outputs (docs/transforms.md measures it).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from math import inf
from typing import Any

import numpy as np

from .backprop import PASSES, collector_paused, topological_order
from .batching import Batched, batched, from_level, identity_rows, merged, new_level, rebased, reshaped, unbatched
from .errors import ArgumentError
from .guards import masked, tested
from .limits import STEPS, check_size
from .registry import ARRAY_MATH, TENSOR_MATH, OpDef
from .shapes import broadcast_shapes
from .tensor import Tensor, set_grad_enabled, squares_finite, to_array
from .wiring import OUTPUT

JVP = Callable[..., Any]


class Structural:
    """A JVP read off the structure of an op's Jacobian; `defop` binds it to the op."""

    __slots__ = ("kind", "make", "text")

    def __init__(self, kind: str, make: Callable[[OpDef], JVP], text: str) -> None:
        self.kind, self.make, self.text = kind, make, text

    def bind(self, op: OpDef) -> JVP:
        rule = self.make(op)
        rule.structure = self  # type: ignore[attr-defined]  # (the text `eval --steps --mode forward` shows)
        return rule

    def __repr__(self) -> str:
        return f"<jvp {self.kind}>"


def _full(m: Any, t: Any, shape: tuple[int, ...]) -> Any:
    return t if t.shape == shape else m.broadcast_to(t, shape=shape)


def _vjp_call(op: OpDef, k: int, m: Any, g: Any, ans: Any, inputs: Sequence[Any], params: dict[str, Any]) -> Any:
    vjp = op.vjp_for(k)
    if vjp is None:
        return None
    if op.n_in is None:
        return vjp(m, g, ans, *inputs, k=k, **params)
    return vjp(m, g, ans, *inputs, **params)


def _add(total: Any, term: Any) -> Any:
    if term is None:
        return total
    return term if total is None else total + term


def _settled(m: Any, z: Any, x: Any) -> Any:
    """One input's term z of a tangent, on a recorded pass, with its nan entries nan in
    every derivative in x (x * (z * 0) beside them, as backprop's grad does for reverse
    mode), where their own graph may say 0 (relu's rule at nan: g times a constant nan)."""
    if m is not TENSOR_MATH or not isinstance(z, Tensor) or not isinstance(x, Tensor) or not (z.requires_grad or x.requires_grad):
        return z  # (a plain pass)
    if squares_finite(tested(m, z)):  # (most terms have no nan: one pass without a mask first)
        return z
    lost = np.isnan(z.data)
    if not lost.any():
        return z
    # (the mask by ops: a batch of tangents' raw array is its physical one)
    return m.where(m.ne(z, z) if type(z) is Batched else lost, m.add(z, m.mul(x, m.mul(z, 0.0))), z)


def _diagonal(op: OpDef) -> JVP:
    def jvp(m: Any, tangents: Sequence[Any], ans: Any, *inputs: Any, **params: Any) -> Any:
        total = None
        for k, t in enumerate(tangents):
            if t is not None:
                term = _vjp_call(op, k, m, _full(m, t, ans.shape), ans, inputs, params)
                total = _add(total, None if term is None else _settled(m, term, inputs[k]))
        return total

    return jvp


def _linear(op: OpDef) -> JVP:
    def jvp(m: Any, tangents: Sequence[Any], ans: Any, *inputs: Any, **params: Any) -> Any:
        fn = getattr(m, op.name)
        if op.n_in == 1:
            output = params.pop(OUTPUT, None)
            out = fn(tangents[0], **params)
            return out if output is None else out[output]
        # (concatenate, stack: every input is an operand; a zero tangent is zeros)
        return fn(*(np.zeros(x.shape) if t is None else t for t, x in zip(tangents, inputs)), **params)

    return jvp


def _multilinear(op: OpDef) -> JVP:
    def jvp(m: Any, tangents: Sequence[Any], ans: Any, *inputs: Any, **params: Any) -> Any:
        fn = getattr(m, op.name)
        total = None
        for k, t in enumerate(tangents):
            if t is not None:
                total = _add(total, fn(*inputs[:k], t, *inputs[k + 1 :], **params))
        return total

    return jvp


DIAGONAL = Structural("diagonal", _diagonal, "t * (the derivative of each element), as the VJP")
LINEAR = Structural("linear", _linear, "the op applied to the tangent")
MULTILINEAR = Structural("multilinear", _multilinear, "the sum over inputs of the op with that input replaced by its tangent")


def through_partials(reduce: Callable[..., Any], text: str = "sum of {t} * d ans / d {x} into each output element") -> Structural:
    """The JVP of an op whose every input element feeds one output element:
    `reduce(m, z, ans, x_shape, **params)` sums z (shaped as the VJP's result) into the
    output's shape. `text` is the rule for one input, {t} its tangent and {x} its name."""

    def make(op: OpDef) -> JVP:
        def jvp(m: Any, tangents: Sequence[Any], ans: Any, *inputs: Any, **params: Any) -> Any:
            ones = np.ones(ans.shape)
            g = Tensor(ones) if m is TENSOR_MATH else ones
            total = None
            for k, t in enumerate(tangents):
                if t is None:
                    continue
                partials = _vjp_call(op, k, m, g, ans, inputs, params)
                if partials is not None:
                    # An element whose tangent is 0 adds exactly 0, even where its partial is
                    # inf or nan (VJPs guard a zero gradient the same way: ops/arithmetic.py's masked).
                    z = _settled(m, masked(m, t, t * partials), inputs[k])
                    total = _add(total, reduce(m, z, ans, **params))
            return total

        return jvp

    return Structural("partials", make, text)


def _over_axis(m: Any, z: Any, ans: Any, axis: Any = None, keepdims: bool = False, **params: Any) -> Any:
    return m.reshape(m.sum(z, axis=axis, keepdims=keepdims), shape=ans.shape)


def _over_matrix(m: Any, z: Any, ans: Any, **params: Any) -> Any:
    return m.reshape(m.sum(z, axis=(-2, -1)), shape=ans.shape)


def _to_items(m: Any, z: Any, ans: Any, **params: Any) -> Any:
    # A loss: one value per item (or one in all), the items leading z's axes.
    if z.shape == ans.shape:
        return z
    return m.reshape(m.sum(z, axis=tuple(range(ans.ndim, z.ndim)) if ans.ndim else None), shape=ans.shape)


OVER_AXIS = through_partials(_over_axis, "sum over axis of {t} * d ans / d {x}")
OVER_MATRIX = through_partials(_over_matrix, "sum over each matrix of {t} * d ans / d {x}")
TO_ITEMS = through_partials(_to_items, "sum over each item of {t} * d loss / d {x}")


# ---- the forward pass ------------------------------------------------------------------


class NoJVPError(ArgumentError):
    """Forward mode met an op without a JVP rule (one defined outside gradcalc)."""


def node_tangent(node: Tensor, tangents: dict[Any, Any], create_graph: bool) -> Any:
    """The tangent of one op node from those of its parents (None: zero)."""
    ts = tuple(tangents.get(p) for p in node._prev)
    if all(t is None for t in ts):
        return None
    op = node.op
    assert op is not None  # (push_forward passes op nodes only)
    if op.jvp is None:
        raise NoJVPError(f"{op.name} has no JVP rule, so forward mode cannot pass through it (reverse mode can)")
    # A batch of tangents (batching.Batched: one forward pass of a Jacobian) runs the rule on
    # Tensors, whose ops batch by their rules, recording only with create_graph.
    on_tensors = create_graph or any(isinstance(t, Tensor) for t in ts)
    m = TENSOR_MATH if on_tensors else ARRAY_MATH
    ans = node if on_tensors else node.data
    inputs = node._prev if on_tensors else [p.data for p in node._prev]
    out = op.jvp(m, ts, ans, *inputs, **(node.params or {}))
    if out is not None and out.shape != node.shape:  # (a rule may give a broadcastable tangent)
        out = m.broadcast_to(out, shape=node.shape)
    return out


def push_forward(
    outputs: Sequence[Tensor], seeds: dict[Any, Any], create_graph: bool = False, order: list[Any] | None = None,
) -> dict[Any, Any]:
    """Tangents of every node reachable from `outputs`, given the tangents of some of
    their inputs (`seeds`: node -> tangent), in one pass from the inputs to the outputs.
    Nodes whose tangent is zero are absent."""
    PASSES.forward += 1
    if order is None:
        order = _order_of(outputs)
    tangents: dict[Any, Any] = {}
    for node, t in seeds.items():
        tangents[node] = t
    steps = STEPS
    counted = steps.left != inf  # inside a statement's budget (the engine as a library counts nothing)
    with set_grad_enabled(create_graph), collector_paused():
        for node in order:
            if node in seeds or node.op is None:
                continue
            if counted:  # a step per node visited: the pass is part of the statement's budget (limits.py)
                steps.left -= 1
                if steps.left < 0:
                    steps.spent("forward pass")
            t = node_tangent(node, tangents, create_graph)
            if t is not None:
                tangents[node] = t
    return tangents


def _order_of(outputs: Sequence[Tensor]) -> list[Any]:
    if len(outputs) == 1:
        return topological_order(outputs[0])
    seen: set[Any] = set()
    order = []
    for out in outputs:
        for node in topological_order(out):
            if node not in seen:
                seen.add(node)
                order.append(node)
    return order


def _seed(x: Tensor, v: Any, create_graph: bool) -> Any:
    if isinstance(v, Tensor):
        t = v if create_graph else v.data
    else:
        t = to_array(v)
        t = Tensor(t) if create_graph else t
    if t.shape != x.shape:
        if np.shape(t) == () or broadcast_shapes(np.shape(t), x.shape) == x.shape:
            t = TENSOR_MATH.broadcast_to(t, shape=x.shape) if create_graph else np.broadcast_to(np.asarray(t), x.shape)
        else:
            raise ArgumentError(f"jvp: a tangent of shape {np.shape(t)} for an input of shape {x.shape}")
    return t


def tangent_of(y: Tensor, xs: Tensor | Sequence[Tensor], vs: Any, create_graph: bool = False) -> Tensor:
    """The directional derivative of y along vs at xs (J v): forward mode over y's graph."""
    single = isinstance(xs, Tensor)
    targets: list[Tensor] = [xs] if isinstance(xs, Tensor) else list(xs)
    directions = [vs] if single else list(vs)
    if len(directions) != len(targets):
        raise ArgumentError(f"jvp: {len(targets)} inputs but {len(directions)} tangents")
    if any(type(t) is Batched for t in (y, *targets, *directions)):
        return _tangent_of_batch(y, targets, directions, create_graph)
    seeds = {x: _seed(x, v, create_graph) for x, v in zip(targets, directions)}
    if not y.requires_grad and y not in seeds:
        return Tensor(np.zeros(y.shape))
    t = push_forward([y], seeds, create_graph).get(y)
    if t is None:
        return Tensor(np.zeros(y.shape))
    return t if isinstance(t, Tensor) else Tensor(np.array(t))


def _tangent_of_batch(y: Tensor, targets: list[Tensor], directions: list[Any], create_graph: bool) -> Tensor:
    """tangent_of where a value is batched: one pass over the physical graph, the
    tangents' own batches carried as batches of tangents (batching.rebased)."""
    yv, ylev = unbatched(y)
    seeds = {}
    for x, v in zip(targets, directions):
        xv, xlev = unbatched(x)
        shape = v.shape if isinstance(v, Tensor) else np.shape(v)
        if tuple(shape) != tuple(x.shape) and broadcast_shapes(tuple(shape), tuple(x.shape)) != tuple(x.shape):
            raise ArgumentError(f"jvp: a tangent of shape {tuple(shape)} for an input of shape {tuple(x.shape)}")
        seeds[xv] = rebased(v, xlev, tuple(xv.shape))
    t = push_forward([yv], seeds, create_graph).get(yv) if yv.requires_grad or yv in seeds else None
    if t is None:
        return Tensor(np.zeros(y.shape))
    return merged(t if isinstance(t, Tensor) else Tensor(np.array(t)), ylev)


def jacobian_forward(y: Tensor | Sequence[Tensor], x: Tensor | Sequence[Tensor], create_graph: bool = False) -> Any:
    """d y / d x of shape y.shape + x.shape, in one forward pass of a batch of tangents
    (the rows of the identity) through y's graph: jacfwd. For a list of xs, the list of
    their Jacobians from the same pass, its tangents the identity's rows over all their
    elements together (JAX's jacfwd with a tuple of argnums); for a list of ys, one such
    entry per y, still from one pass (a tuple of outputs, a Hessian's blocks)."""
    ys = [y] if isinstance(y, Tensor) else list(y)
    xs = [x] if isinstance(x, Tensor) else list(x)
    grid = _forward_blocks(ys, xs, create_graph)
    if isinstance(x, Tensor):
        grid = [row[0] for row in grid]  # type: ignore[misc]
    return grid[0] if isinstance(y, Tensor) else grid


def _forward_blocks(ys: list[Tensor], xs: list[Tensor], create_graph: bool) -> list[list[Tensor]]:
    """d y / d x for every y (rows) and x (columns), from one forward pass."""
    for y in ys:
        for x in xs:
            check_size(y.shape + x.shape, "jacfwd")
    physical = [unbatched(x) for x in xs]
    if len(xs) > 1 and len({id(xv) for xv, _ in physical}) < len(xs):  # (one input twice: a pass each, each with its own tangents)
        each = [_forward_blocks(ys, [x], create_graph) for x in xs]
        return [[column[i][0] for column in each] for i in range(len(ys))]
    grid: list[list[Any]] = [[None] * len(xs) for _ in ys]  # (the zeros of a block no tangent reaches, made last)
    sizes = [x.size for x in xs]
    live = [k for k in range(len(xs)) if sizes[k]]
    outputs = [unbatched(y) for y in ys]
    if not live or not any(yv.requires_grad or any(yv is physical[k][0] for k in live) for yv, _ in outputs):
        return _zeros_where_none(grid, ys, xs)
    n = sum(sizes)
    if len(live) > 1:  # (for one input, the checks above)
        for y in ys:
            check_size((n, *y.shape), "jacfwd")
    with new_level() as level:
        seeds, offset = {}, 0
        for k in live:
            xv, xlev = physical[k]
            seeds[xv] = _seed_rows(tuple(xs[k].shape), sizes[k], xv, xlev, level, offset, n)
            offset += sizes[k]
        tangents = push_forward([yv for yv, _ in outputs], seeds, create_graph)
        for i, (yv, ylev) in enumerate(outputs):
            t = tangents.get(yv)
            if t is None:
                continue
            columns = from_level(t, level, yv.ndim, n)  # (the batch of y, y's item, every input's elements)
            offset = 0
            for k in live:
                block = columns if len(live) == 1 else TENSOR_MATH.getitem(columns, index=(Ellipsis, slice(offset, offset + sizes[k])))
                grid[i][k] = batched(reshaped(block, tuple(block.shape[:-1]) + tuple(xs[k].shape)), ylev)
                offset += sizes[k]
    return _zeros_where_none(grid, ys, xs)


def _zeros_where_none(grid: list[list[Any]], ys: list[Tensor], xs: list[Tensor]) -> list[list[Tensor]]:
    return [[Tensor(np.zeros(y.shape + x.shape)) if block is None else block for x, block in zip(xs, row)] for y, row in zip(ys, grid)]


def _seed_rows(shape: tuple[int, ...], size: int, xv: Tensor, xlev: tuple[int, ...], level: int, offset: int, n: int) -> Tensor:
    """The tangents of an input of item `shape` (`size` elements) in a batch of `n` over
    `level`: rows offset..offset + size of the identity over n elements (every row of a
    vmap's batch its own copy, for an input that carries one)."""
    if size == n:  # the whole identity (the one input): lazy scaled rows where they fit
        seed: Tensor = identity_rows(shape, level, (1,) * len(xlev))
    else:
        rows = np.zeros((n, size))
        rows[offset : offset + size] = np.eye(size)
        seed = batched(Tensor(rows.reshape((n,) + (1,) * len(xlev) + shape)), (level,))
    if xlev:
        seed = batched(Tensor(np.broadcast_to(unbatched(seed)[0].data, (n, *xv.shape))), (level,))
    return seed

