"""Reverse mode: topological order, the backward pass, and grad / jacobian / hessian.

No recursion anywhere, so a graph of a million nodes in a chain is fine.
"""
from __future__ import annotations

import gc
from math import inf
from typing import Any

import numpy as np

from .batching import lazy_physical
from .limits import STEPS
from .registry import ARRAY_MATH, TENSOR_MATH
from .tensor import Provenance, Tensor, made_by, set_grad_enabled, to_array
from .wiring import unbroadcast


def topological_order(root: Any) -> list[Any]:
    """Every node reachable from `root`, each once, parents before children.

    An iterative depth-first search over `_prev` (the parents, in both engines): a stack
    of (node, iterator over its parents); the top node goes on to its next parent not yet
    seen, and is emitted once it has none left, so after all of its parents. A node
    reached twice (fan-out) is expanded once. Parents are explored first to last, so for
    an expression evaluated left to right the order is the evaluation order. Nodes hash
    by identity, so the set holds them directly.
    """
    order: list[Any] = []
    seen = {root}
    stack = [(root, iter(root._prev))]
    push, pop, emit, mark = stack.append, stack.pop, order.append, seen.add
    with collector_paused():
        while stack:
            node, parents = stack[-1]
            for parent in parents:
                if parent not in seen:
                    mark(parent)
                    if parent._prev:
                        push((parent, iter(parent._prev)))
                        break
                    emit(parent)  # a leaf: done at once, without a turn on the stack
            else:
                pop()
                emit(node)
    return order


class collector_paused:  # noqa: N801 - used as a function: `with collector_paused():`
    """Pause CPython's cyclic garbage collector while building or walking a big graph.

    The engines' nodes form no reference cycles (reference counting frees them), yet
    every allocation counts towards a collection, and each full collection traces every
    live node: on a graph of a million nodes that is most of the run time. Whatever
    cycles other code makes meanwhile are collected once the collector resumes.
    A class rather than a @contextmanager generator, which costs twice as much, and every
    backward pass enters one."""

    __slots__ = ("enabled",)

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            gc.enable()


class _Passes:
    """How many backward and forward passes the engine has made over a graph for
    derivatives (tests count them: a Jacobian is one pass, whatever its size)."""

    __slots__ = ("backward", "forward")

    def __init__(self) -> None:
        self.backward = self.forward = 0


PASSES = _Passes()


def backprop(
    root: Tensor,
    seed: Any,
    create_graph: bool = False,
    keep: set[Any] | None = None,
    order: list[Any] | None = None,
    only: bool = False,
) -> dict[Any, Any]:
    """Propagate `seed` (d out / d root) back through the graph of `root`.

    Returns the gradient of every leaf that requires grad, and of every node in `keep`,
    keyed by node. Gradients are arrays, or Tensors with a graph of their own when
    `create_graph` is set (so they can be differentiated again). `order` may pass in
    `topological_order(root)` when the caller already has it. With `only`, the nodes of
    `keep` are all that is wanted (grad(y, x)): the pass skips every branch that reaches
    none of them, so a per-row gradient by x does not compute and drop one by the weights.

    Gradients reaching a node from several children are summed. The first to arrive may
    be shared with another input (`a + b` hands both the same array), so it is never
    modified in place; the sum made on the second arrival is ours (`owned`), and later
    arrivals add into it in place. Tensors (create_graph) are never added in place.
    With `create_graph`, every node the pass makes carries its Provenance (see `_label`).
    """
    PASSES.backward += 1
    if order is None:
        order = topological_order(root)
    m = TENSOR_MATH if create_graph else ARRAY_MATH
    grads: dict[Any, Any] = {root: seed}
    differentiated = set(order) if create_graph else set()
    if create_graph and isinstance(seed, Tensor):
        _label(seed, root, root, differentiated)
    owned: set[Any] = set()
    result: dict[Any, Any] = {}
    keep = keep or set()
    wanted = _on_paths_to(order, keep) if only else None
    pop, get = grads.pop, grads.get
    steps = STEPS
    counted = steps.left != inf  # inside a statement's budget (the engine as a library counts nothing)
    with set_grad_enabled(create_graph):
        for node in reversed(order):
            g = pop(node, None)
            if g is None:
                continue
            if counted:  # a step per node visited: the pass is part of the statement's budget (limits.py)
                steps.left -= 1
                if steps.left < 0:
                    steps.spent("backward pass")
            op = node.op
            if op is None or (keep and node in keep):
                result[node] = g
                if op is None:
                    continue
            params, parents, vjps = node.params, node._prev, op.vjps
            n = len(parents)
            # A batch of cotangents (batching.Batched: one backward pass of a Jacobian) runs
            # the VJPs on Tensors, whose ops batch by their rules, recording only with create_graph.
            batch = not create_graph and isinstance(g, Tensor)
            if batch:
                m = TENSOR_MATH
            if create_graph or batch:
                inputs, ans = parents, node
            elif n == 1:
                inputs, ans = (parents[0].data,), node.data
            elif n == 2:
                inputs, ans = (parents[0].data, parents[1].data), node.data
            else:
                inputs, ans = [p.data for p in parents], node.data
            variadic = op.n_in is None
            for k, parent in enumerate(parents):
                if not parent.requires_grad or (wanted is not None and parent not in wanted):
                    continue
                if variadic:
                    gk = vjps(m, g, ans, *inputs, k=k, **params)
                    if gk is None:
                        continue
                else:
                    vjp = vjps[k]
                    if vjp is None:
                        continue
                    if params:
                        gk = vjp(m, g, ans, *inputs, **params)
                    elif n == 2:
                        gk = vjp(m, g, ans, inputs[0], inputs[1])
                    elif n == 1:
                        gk = vjp(m, g, ans, inputs[0])
                    else:
                        gk = vjp(m, g, ans, *inputs)
                if gk is None:
                    continue
                shape = parent.data.shape
                if gk.shape != shape:
                    gk = unbroadcast(m, gk, shape)
                previous = get(parent)
                if previous is None:
                    grads[parent] = gk
                elif parent in owned and type(previous) is np.ndarray and type(gk) is np.ndarray and previous.shape == gk.shape and previous.dtype == gk.dtype:
                    previous += gk
                else:
                    grads[parent] = gk = previous + gk
                    if not create_graph and type(gk) is np.ndarray:
                        owned.add(parent)
                if create_graph:
                    _label(gk, node, root, differentiated)
            if batch:
                m = ARRAY_MATH
    return result


def _on_paths_to(order: list[Any], targets: set[Any]) -> set[Any]:
    """The nodes of `order` (parents first) from which a node of `targets` can be reached."""
    found = set(targets)
    add = found.add
    for node in order:
        if node not in found:
            for parent in node._prev:
                if parent in found:
                    add(node)
                    break
    return found


def _label(made: Tensor, node: Any, root: Any, differentiated: set[Any]) -> None:
    """Give `made`, and every node of its graph that this backward pass made, the
    Provenance of `node`, whose rule made them: the user's node (the one a rule of an
    earlier grad made came from), one derivative further, and the pass's output. The
    walk stops at the graph being differentiated and at nodes already labelled, so each
    node is visited once in the pass."""
    origin = made_by(node)
    mark = Provenance(node, 1, root) if origin is None else Provenance(origin.node, origin.order + 1, root)
    stack = [lazy_physical(made)]  # (a batch of cotangents: the graph of its physical value)
    while stack:
        t = stack.pop()
        if t in differentiated or made_by(t) is not None:
            continue
        t.made_by = mark
        stack.extend(t._prev)


def _seed(y: Tensor, grad: Any) -> np.ndarray:
    if grad is None:
        return np.ones(y.data.shape, y.data.dtype)  # (np.ones_like's Python layers cost more, once per backward pass)
    seed = to_array(grad)
    if seed.shape != y.shape:
        raise ValueError(f"the seed gradient has shape {seed.shape}, the output {y.shape}")
    return seed


def backward(y: Tensor, grad: Any = None, retain_grads: bool = False) -> None:
    """Accumulate into `.grad` of every leaf that requires grad (see Tensor.backward)."""
    if not y.requires_grad:
        raise ValueError("backward() on a tensor that does not require grad: no input requires grad")
    order = topological_order(y)
    keep = {n for n in order if retain_grads or n.retains_grad}
    grads = backprop(y, _seed(y, grad), keep=keep, order=order)
    for node, g in grads.items():
        # A gradient array may be shared between nodes (add passes g to both sides),
        # so each node's .grad gets its own array.
        node.grad = np.array(g, dtype=np.result_type(g, np.float64)) if node.grad is None else node.grad + g




def _undefined_stays_undefined(g: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """A derivative `g` = dy/dx, to be differentiated again, whose nan entries stay nan in
    every later derivative. Where a derivative is nan it is undefined, and so are all the
    higher ones; but a nan that a rule writes in as a constant (log|det| at a singular
    matrix), or that comes out of a part of the rule that does not depend on x (d/dt of
    binary_cross_entropy(p, t) at p < 0, var at an inf), differentiates to a silent 0.
    There, g is taken as g + x * (g * 0), nan there, whose derivative in x is nan again
    (mul's rule passes exactly 0 where no gradient arrives, so the other entries keep
    their derivatives, and g's own graph keeps those in the other variables). The nan
    is g's own, not a constant, so a note still names the op that first made it."""
    lost = np.isnan(g.data)
    if not lost.any():
        return g
    m = TENSOR_MATH
    kept = m.where(lost, m.add(g, m.mul(x, m.mul(g, 0.0))), g)
    _label(kept, y, y, set())
    return kept


def _zeros_of(x: Tensor, y: Tensor, create_graph: bool) -> Tensor:
    """dy/dx where y does not depend on x; part of a derivative's graph when one is built."""
    zeros = Tensor(np.zeros_like(x.data))
    if create_graph:
        _label(zeros, y, y, set())
    return zeros
