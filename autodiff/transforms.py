"""JAX's function transformations over Python callables of Tensors: vmap, grad,
value_and_grad, jacrev, jacfwd, hessian, jvp and vjp.

    from gradcalc.autodiff import Tensor, vmap, grad, jacrev
    per_example = vmap(grad(lambda w, x: ((x @ w) ** 2).sum()), in_axes=(None, 0))(w, X)

Each is one pass over one evaluation of the function: vmap calls it once on values that
carry a batch (batching.py); jacrev is one backward pass of a batch of cotangents, jacfwd
one forward pass of a batch of tangents, hessian the one of jacfwd over the gradient's
graph. Every derivative is built with its own graph, so transformations nest (grad of
grad, jacfwd of jacrev, vmap of grad). The language's transformations (parser/) are these
applied to its function values.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import derivatives as backprop
from .batching import Batched, batched, from_level, new_level, to_level, unbatched
from .errors import ArgumentError, ShapeError
from .forward import NoJVPError, jacobian_forward, tangent_of
from .registry import REGISTRY, TENSOR_MATH
from .tensor import Tensor

Axes = int | None | Sequence[int | None]


# ---- vmap -----------------------------------------------------------------------------------------


def vmap(f: Callable[..., Any], in_axes: Axes = 0, out_axes: int | Sequence[int] = 0) -> Callable[..., Any]:
    """The function that maps f over an axis of its arguments and stacks the results on an
    axis of each (`in_axes`: one axis for every argument, None for one passed whole, or one
    entry per argument; `out_axes` likewise per result), computed by calling f once on
    batched values."""

    def mapped(*args: Any) -> Any:
        axes = spread_axes(in_axes, len(args))
        size = mapped_size(args, axes)
        with new_level() as level:
            inputs = [a if axis is None else to_level(a, axis, level) for a, axis in zip(args, axes)]
            out = f(*inputs)
            if isinstance(out, tuple) and not isinstance(out_axes, int):  # an axis for each result (and all inside it)
                outs = spread_axes(out_axes, len(out), "out_axes")
                return tuple(rebuilt(o, [from_level(leaf, level, k, size) for leaf in leaves(o)]) for o, k in zip(out, outs))
            if not isinstance(out_axes, int):
                raise ArgumentError(f"vmap: out_axes {out_axes!r} is for several results; the function gave one")
            return rebuilt(out, [from_level(leaf, level, out_axes, size) for leaf in leaves(out)])

    return mapped


def leaves(tree: Any) -> list[Any]:
    """The values of a function's result, its tuples (and lists) opened at any depth, in
    order: what the transformations run on (JAX's pytree leaves, of tuples alone)."""
    if isinstance(tree, (tuple, list)):
        return [leaf for part in tree for leaf in leaves(part)]
    return [tree]


def rebuilt(tree: Any, values: Sequence[Any]) -> Any:
    """`tree` with its leaves replaced, in order, by `values`."""
    return _built(tree, iter(values))


# (a function of its own, not a closure that calls itself: such a closure is a reference
# cycle, which kept the values, a vmap's whole result, alive until the next collection)
def _built(node: Any, values: Iterator[Any]) -> Any:
    if isinstance(node, tuple):  # (a tuple of another type, the language's list of unequal tensors, comes back a tuple)
        return tuple([_built(part, values) for part in node])
    if isinstance(node, list):
        return [_built(part, values) for part in node]
    return next(values)


def _tensor_leaves(out: Any, what: str) -> list[Tensor]:
    """The leaves of a function's result, which a derivative needs to be tensors."""
    found = leaves(out)
    for o in found:
        if not isinstance(o, Tensor):
            raise ArgumentError(f"{what}: the function's results must be tensors, got {type(o).__name__}")
    return found


def spread_axes(axes: Any, n: int, what: str = "in_axes") -> list[Any]:
    """One axis (or None) per argument."""
    if isinstance(axes, (list, tuple)):
        if len(axes) != n:
            noun = "argument" if what == "in_axes" else "result"
            raise ArgumentError(f"vmap: {what} has {len(axes)} entries for {n} {noun}{'s' * (n != 1)}")
        return list(axes)
    return [axes] * n


def mapped_size(args: Sequence[Any], axes: Sequence[Any]) -> int:
    """The length of the mapped axes, which must agree."""
    size, first = None, (0, 0)
    for k, (a, axis) in enumerate(zip(args, axes)):
        if axis is None:
            continue
        shape = a.shape if isinstance(a, Tensor) else np.shape(a)
        if not -len(shape) <= axis < len(shape):
            has = "is a scalar, which has no axis to map over" if not shape else f"has shape {tuple(shape)}, which has no axis {axis}"
            raise ShapeError(f"vmap: argument {k} {has}")
        length = shape[axis]
        if size is None:
            size, first = length, (k, axis)
        elif length != size:
            raise ShapeError(f"vmap: the mapped axes differ in length: argument {first[0]} has {size} along axis {first[1]}, "
                             f"argument {k} has {length} along axis {axis}")
    if size is None:
        raise ArgumentError("vmap: in_axes maps none of the arguments")
    return size


# ---- inputs to differentiate by ---------------------------------------------------------------------


def fresh(x: Any) -> Tensor:
    """An input to differentiate by: a new leaf holding a constant's numbers, or an identity
    node on a value that has a gradient (the result stays connected to it, and a function
    that also reads that value directly gets JAX's answer: the argument is an input of its
    own). A batch stays a batch."""
    t = x if isinstance(x, Tensor) else Tensor(x)
    value, levels = unbatched(t)
    if value.requires_grad:
        return REGISTRY["reshape"](t, shape=t.shape)  # type: ignore[no-any-return]
    data = value.data if value.data.dtype == np.float64 else value.data.astype(np.float64)
    return batched(Tensor(data, requires_grad=True), levels)


def positions(argnums: int | Sequence[int], n: int) -> list[int]:
    items = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in items:
        if not -n <= k < n:
            raise ArgumentError(f"argnums {k} is out of range for {n} argument{'s' * (n != 1)}")
    return [k % n for k in items]


def call_at(f: Callable[..., Any], argnums: int | Sequence[int], args: Sequence[Any]) -> tuple[Any, list[Tensor]]:
    """f called with the arguments picked by argnums replaced by fresh inputs.

    Inside vmap, a result may vary over a batch that an input it is differentiated by does
    not (a weight passed whole, in_axes=None): each row's derivative by that input is its
    own, so the input is given an axis for that batch (repeated). The batches of the other
    arguments are known before the call, so f is called once; only a batch f reads from
    elsewhere (a closure over an outer vmap's value) is found in its result, and f is
    called again with that one too."""
    picked = positions(argnums, len(args))
    given = _levels_of(tuple(args))
    out, inputs = _call_fresh(f, args, picked, given)
    sizes = _levels_of(out)
    if any(level not in unbatched(inputs[k])[1] for k in picked for level in sizes):
        out, inputs = _call_fresh(f, args, picked, {**given, **sizes})
    return out, [inputs[k] for k in picked]


def _call_fresh(f: Callable[..., Any], args: Sequence[Any], picked: list[int], sizes: dict[int, int]) -> tuple[Any, list[Any]]:
    """f called with each picked argument a fresh input that has an axis for every level
    of `sizes` (repeated where it had none)."""
    inputs = list(args)
    for k in picked:
        have = unbatched(inputs[k])[1]
        missing = {level: n for level, n in sizes.items() if level not in have}
        inputs[k] = fresh(_repeated(inputs[k], missing) if missing else inputs[k])
    return f(*inputs), inputs


def _levels_of(out: Any) -> dict[int, int]:
    """The batch levels a result varies over, with their sizes."""
    sizes: dict[int, int] = {}
    for o in leaves(out):
        value, levels = unbatched(o)
        for level, n in zip(levels, getattr(value, "shape", ())):
            sizes[level] = max(sizes.get(level, 1), n)
    return sizes


def _repeated(x: Any, sizes: dict[int, int]) -> Tensor:
    """x with an axis for each of the levels `sizes` (the same in every row)."""
    t = x if isinstance(x, Tensor) else Tensor(x)
    value, have = unbatched(t)
    levels = tuple(sorted({*have, *sizes}))
    shape = tuple(value.shape[have.index(v)] if v in have else 1 for v in levels) + tuple(t.shape)
    full = tuple(value.shape[have.index(v)] if v in have else sizes[v] for v in levels) + tuple(t.shape)
    aligned = TENSOR_MATH.reshape(value, shape=shape)
    return batched(TENSOR_MATH.broadcast_to(aligned, shape=full), levels)


def _scalar(y: Any, what: str) -> Tensor:
    if not isinstance(y, Tensor):
        raise ArgumentError(f"{what}: the function must return a tensor, got {type(y).__name__}")
    if y.size != 1:
        raise ShapeError(f"{what}: the function must return a scalar, got shape {y.shape}; for the derivatives of each output use jacrev or jacfwd")
    return y


def by_argnums(argnums: Any, parts: Sequence[Any]) -> Any:
    """One result per input picked by argnums, shaped as JAX gives them: the one for an
    int, a tuple for a sequence."""
    return parts[0] if isinstance(argnums, int) else tuple(parts)


# ---- reverse and forward mode -------------------------------------------------------------------------


def grad_of(f: Callable[..., Any], argnums: int | Sequence[int] = 0, with_value: bool = False) -> Callable[..., Any]:
    """JAX's grad(f): the function x -> df/dx of a function with a scalar result, from one
    backward pass (a tuple of gradients for a tuple of argnums)."""

    def gradient(*args: Any) -> Any:
        y, inputs = call_at(f, argnums, args)
        y = _scalar(y, "grad")
        g = by_argnums(argnums, backprop.grad(y, inputs, create_graph=True))
        return (y, g) if with_value else g

    return gradient


def value_and_grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """JAX's value_and_grad(f): x -> (f(x), df/dx), from one evaluation and one backward pass."""
    return grad_of(f, argnums, with_value=True)


def _jacobians(one: Callable[..., Any], f: Callable[..., Any], argnums: Any) -> Callable[..., Any]:
    def jacobian(*args: Any) -> Any:
        y, inputs = call_at(f, argnums, args)
        outs = _tensor_leaves(y, "jacobian")
        return rebuilt(y, [by_argnums(argnums, row) for row in one(outs, inputs, create_graph=True)])  # (every input's block from one pass)

    return jacobian


def jacrev(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """df/dx of shape f(x).shape + x.shape: one backward pass of a batch of cotangents."""
    return _jacobians(backprop.jacobian, f, argnums)


def jacfwd(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """df/dx as jacrev gives it: one forward pass of a batch of tangents."""
    return _jacobians(jacobian_forward, f, argnums)


def hessian_of(f: Callable[..., Any], argnums: int | Sequence[int] = 0) -> Callable[..., Any]:
    """JAX's hessian(f) = jacfwd(jacrev(f)): the gradient by one backward pass, then its
    Jacobian by one forward pass of a batch of tangents."""

    def hess(*args: Any) -> Any:
        y, inputs = call_at(f, argnums, args)
        y = _scalar(y, "hessian")
        grads = backprop.grad(y, inputs, create_graph=True, defer=False)  # (differentiated at once)
        rows = [by_argnums(argnums, row) for row in jacobian_of_gradient(grads, inputs)]  # (one forward pass for every block)
        return by_argnums(argnums, rows)

    return hess


def jacobian_of_gradient(g: Tensor | Sequence[Tensor], x: Tensor | Sequence[Tensor], create_graph: bool = True) -> Any:
    """The Jacobian of a gradient (a Hessian's rows; lists of gs and xs give the grid of
    its blocks, as jacobian_forward does): one batched forward pass, or batched backward
    passes where an op on the gradient's graph has no forward-mode rule (a user's vjp rule)."""
    try:
        return jacobian_forward(g, x, create_graph=create_graph)
    except NoJVPError:
        return backprop.jacobian(g, x, create_graph=create_graph)


def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """JAX's jvp: (f(*primals), J v), by one forward pass."""
    if len(primals) != len(tangents):
        raise ArgumentError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    xs = [fresh(p) for p in primals]
    out = f(*xs)
    outs = _tensor_leaves(out, "jvp")
    return out, rebuilt(out, [tangent_of(o, xs, list(tangents), create_graph=True) for o in outs])


def vjp(f: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[[Any], Any]]:
    """JAX's vjp: (f(*primals), the pullback u -> u J), each call of the pullback one backward pass."""
    xs = [fresh(p) for p in primals]
    out = f(*xs)

    def pullback(u: Any) -> tuple[Any, ...]:
        outs, us = leaves(out), leaves(u)
        if len(us) != len(outs):
            raise ArgumentError(f"vjp: the pullback takes one cotangent per result of the function ({len(outs)}), got {len(us)}")
        weighted = TENSOR_MATH.sum(TENSOR_MATH.mul(outs[0], us[0]))
        for o, c in zip(outs[1:], us[1:]):
            weighted = weighted + TENSOR_MATH.sum(TENSOR_MATH.mul(o, c))
        return tuple(backprop.grad(weighted, xs, create_graph=True))

    return out, pullback


def grad(y: Any, xs: Any = None, grad_output: Any = None, create_graph: bool = False, *, argnums: int | Sequence[int] = 0,
         defer: bool = True) -> Any:
    """grad(y, x): dy/dx of a tensor y (derivatives.grad); grad(f, argnums=0): JAX's grad of a function."""
    if callable(y) and not isinstance(y, Tensor):
        return grad_of(y, argnums if xs is None else xs)
    return backprop.grad(y, xs, grad_output, create_graph, defer=defer)


def hessian(y: Any, x: Any = None, create_graph: bool = False, *, argnums: int | Sequence[int] = 0) -> Any:
    """hessian(y, x): the second derivatives of a scalar tensor y; hessian(f, argnums=0): JAX's hessian of a function."""
    if callable(y) and not isinstance(y, Tensor):
        return hessian_of(y, argnums if x is None else x)
    return backprop.hessian(y, x, create_graph)


__all__ = ["Batched", "grad", "grad_of", "hessian", "hessian_of", "jacfwd", "jacrev", "jvp", "value_and_grad", "vjp", "vmap"]
