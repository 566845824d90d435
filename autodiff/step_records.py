"""The backward pass (and the forward pass of forward mode) replayed one node at a time,
as records a reader can follow.

`backward_steps(root)` runs reverse mode from `root` (seeded with ones, the gradient of
its sum) in the same order as the engine's backward, and records for every op node the
gradient that reached it, the op's derivative rule, and what it added to each input:
the value that flowed along that edge and the input's running total, so that fan-out
(a node used twice) shows as a second addition to the same total. Both engines; data
only, no formatting.

`forward_steps(root, seed)` runs forward mode over the same graph from one input whose
tangent is given (ones by default) to the output: every node's value and tangent, the
dual number value + tangent * eps, and the JVP rule each op node used.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backprop import topological_order
from .forward import node_tangent
from .registry import ARRAY_MATH, REGISTRY, OpDef
from .rules import input_rule, jvp_rule, op_rule
from .scalar import Value
from .tensor import Tensor
from .wiring import unbroadcast


@dataclass
class Contribution:
    """What one op node added to one of its inputs during the backward pass."""

    parent: Any  # the input node
    slot: int  # which input of the op (x*x has slots 0 and 1, both x)
    rule: str  # the derivative rule for this input
    grad: Any  # the gradient that flowed along the edge (un-broadcast to the input's shape)
    total: Any  # the input's gradient after adding it
    accumulated: bool  # the input had gradient already: a second use of a fan-out node


@dataclass
class Step:
    """One op node's turn in the backward pass."""

    node: Any
    op: str  # the op's name (the scalar engine's label, as `**-1`, for its nodes)
    rule: str  # the op's rule, every input's
    grad: Any  # d output / d node: complete when the node's turn comes
    contributions: list[Contribution] = field(default_factory=list)


@dataclass
class BackwardSteps:
    root: Any
    seed: Any
    steps: list[Step]
    order: list[Any]  # topological order (parents first); the steps run through it reversed
    grads: dict[Any, Any]  # every node's final gradient, keyed by node


def backward_steps(root: Any) -> BackwardSteps:
    """Replay the backward pass of `root`'s graph, recording each step.

    The tensor engine's `.grad` fields are left alone; the scalar engine's backward
    writes into its nodes, so there every `.grad` ends as `root.backward()` leaves it
    (with interior grads set too).
    """
    if isinstance(root, Value):
        return _scalar_steps(root)
    if isinstance(root, Tensor):
        return _tensor_steps(root)
    raise TypeError(f"no backward pass for {type(root).__name__}")


def _tensor_steps(root: Tensor) -> BackwardSteps:
    order = topological_order(root)
    seed = np.ones_like(root.data)
    grads: dict[Any, Any] = {root: seed} if root.requires_grad else {}
    steps: list[Step] = []
    for node in reversed(order):
        g = grads.get(node)
        if g is None or node.op is None:
            continue
        op: OpDef = node.op
        step = Step(node, op.name, op_rule(op), g)
        params = node.params or {}
        inputs = [p.data for p in node._prev]
        for k, parent in enumerate(node._prev):
            vjp = op.vjp_for(k)
            if not parent.requires_grad or vjp is None:
                continue
            gk = vjp(ARRAY_MATH, g, node.data, *inputs, **({"k": k} if op.n_in is None else {}), **params)
            if gk is None:
                continue
            gk = np.asarray(gk)
            if gk.shape != parent.data.shape:
                gk = unbroadcast(ARRAY_MATH, gk, parent.data.shape)
            previous = grads.get(parent)
            # Never in place: earlier records hold the arrays they saw.
            grads[parent] = gk if previous is None else previous + gk
            step.contributions.append(Contribution(parent, k, input_rule(op, k), gk, grads[parent], previous is not None))
        steps.append(step)
    return BackwardSteps(root, seed, steps, order, grads)


# The scalar engine labels its primitives by the registry op whose rule they follow
# (relu, tanh, exp, ...), except for these symbols and `**n`.
_SCALAR_SYMBOLS = {"+": "add", "*": "mul", "/": "div"}


def scalar_op(label: str) -> tuple[OpDef | None, str]:
    """The registry op a scalar node's label stands for, and a note on its constant
    (`**-1` is pow with b = -1)."""
    if label.startswith("**"):
        return REGISTRY.get("pow"), f"b = {label[2:]}"
    return REGISTRY.get(_SCALAR_SYMBOLS.get(label, label)), ""


def _scalar_rule(label: str, k: int | None) -> str:
    op, note = scalar_op(label)
    if op is None:
        return "(no rule text)"
    if note:  # a constant exponent: only the base's rule applies
        return f"{input_rule(op, 0)}  ({note})"
    return op_rule(op) if k is None else input_rule(op, k)


def _scalar_steps(root: Value) -> BackwardSteps:
    """Run the nodes' own `_backward` closures in the engine's order; what each adds to
    an input is read from the input's grad before and after. An input used in two
    slots of one node (x*x, x+x) got the sum of both slots' shares; the scalar
    engine's two-input primitives (+ and *) give equal shares to equal inputs, so the
    sum is split evenly."""
    order = topological_order(root)
    for node in order:
        node.grad = 0.0
    root.grad = 1.0
    touched: set[Any] = {root}
    steps: list[Step] = []
    for node in reversed(order):
        if not node._prev:
            continue
        step = Step(node, node._op, _scalar_rule(node._op, None), node.grad)
        parents = node._prev
        before = {id(p): p.grad for p in parents}
        node._backward(node.grad)
        for k, parent in enumerate(parents):
            uses = sum(1 for p in parents if p is parent)
            share = (parent.grad - before[id(parent)]) / uses
            seen_slots = sum(1 for p in parents[:k] if p is parent)
            accumulated = parent in touched or seen_slots > 0
            total = before[id(parent)] + share * (seen_slots + 1)
            step.contributions.append(Contribution(parent, k, _scalar_rule(node._op, k), share, total, accumulated))
            touched.add(parent)
        steps.append(step)
    return BackwardSteps(root, 1.0, steps, order, {node: node.grad for node in order})


# ---- forward mode ------------------------------------------------------------------------


@dataclass
class ForwardStep:
    """One node's turn in the forward pass: its value and tangent (None: zero)."""

    node: Any
    op: str  # the op's name ('' for an input)
    rule: str  # the JVP rule the node used: the terms of the inputs that carry a tangent
    value: Any
    tangent: Any
    seeded: bool = False  # the input whose tangent the pass starts from


@dataclass
class ForwardSteps:
    root: Any
    seed: Any  # the input whose tangent is given
    direction: Any  # that tangent
    steps: list[ForwardStep]  # variables first as they come, then op nodes, in the order they run
    tangent: Any  # the output's tangent: d output / d seed along direction (zeros if it does not depend on it)


def forward_steps(root: Any, seed: Any, direction: Any = None) -> ForwardSteps:
    """Run forward mode over `root`'s graph, from `seed` (an input, or a named
    intermediate, which is then seeded where it stands) with tangent `direction` (ones
    of its shape by default), recording every variable and op node in the order they run.
    Neither engine's nodes are changed."""
    if isinstance(root, Value):
        return _scalar_forward(root, seed, 1.0 if direction is None else float(direction))
    if isinstance(root, Tensor):
        direction = np.ones(seed.shape) if direction is None else np.broadcast_to(np.asarray(direction, dtype=float), seed.shape)
        return _tensor_forward(root, seed, direction)
    raise TypeError(f"no forward pass for {type(root).__name__}")


def _tensor_forward(root: Tensor, seed: Tensor, direction: np.ndarray) -> ForwardSteps:
    tangents: dict[Any, Any] = {seed: direction}
    steps: list[ForwardStep] = []
    for node in topological_order(root):
        if node is seed:
            steps.append(ForwardStep(node, "", "", node.data, direction, seeded=True))
        elif node.op is None:
            if node.requires_grad:  # a variable: its tangent is 0 in this pass
                steps.append(ForwardStep(node, "", "", node.data, None))
        else:
            carried = [p in tangents for p in node._prev]
            tangent = node_tangent(node, tangents, create_graph=False)
            if tangent is not None:
                tangents[node] = tangent
            steps.append(ForwardStep(node, node.op.name, jvp_rule(node.op, carried) if any(carried) else "", node.data, tangent))
    out = tangents.get(root)
    return ForwardSteps(root, seed, direction, steps, np.zeros(root.shape) if out is None else np.asarray(out))


def _scalar_forward(root: Value, seed: Value, direction: float) -> ForwardSteps:
    """A scalar op's Jacobian is one partial derivative per input, which its own
    `_backward` gives when called with g = 1 (read off its inputs' grads, then put back):
    the tangent is the sum of partial * tangent over the inputs, the registry op's rule."""
    tangents: dict[int, float] = {id(seed): direction}
    steps: list[ForwardStep] = []
    for node in topological_order(root):
        if node is seed:
            steps.append(ForwardStep(node, "", "", node.data, direction, seeded=True))
            continue
        if not node._prev:
            if node.requires_grad:
                steps.append(ForwardStep(node, "", "", node.data, None))
            continue
        parents = list(dict.fromkeys(node._prev))  # x * x: x once, its partial the sum of both slots
        carried = [id(p) in tangents for p in node._prev]
        tangent = None
        if any(carried):
            saved = [p.grad for p in parents]
            for p in parents:
                p.grad = 0.0
            node._backward(1.0)
            partials = [p.grad for p in parents]
            for p, g in zip(parents, saved):
                p.grad = g
            tangent = sum(d * tangents[id(p)] for p, d in zip(parents, partials) if id(p) in tangents)
            tangents[id(node)] = tangent
        op, note = scalar_op(node._op)
        rule = "" if not any(carried) else "(no rule text)" if op is None else jvp_rule(op, carried)
        if note and rule:
            rule = f"{rule}  ({note})"
        steps.append(ForwardStep(node, node._op, rule, node.data, tangent))
    return ForwardSteps(root, seed, direction, steps, tangents.get(id(root), 0.0))
