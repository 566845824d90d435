"""What gradcalc reports about an output: value, gradients per variable, graph facts.

Data only; the CLI decides how it looks.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gradcalc.autodiff import GraphStats, Tensor, Value, first_nonfinite, graph_stats, topological_order

from .errors import LanguageError


class Analysis:
    """An output's value, the gradient per name (of the sum when the output is not a
    scalar: `grad_of`), its graph's statistics, and notes on inf and nan."""

    def __init__(
        self, output: Any, value: np.ndarray, grads: dict[str, np.ndarray], grad_of: str | None, stats: GraphStats,
        variables: list[str], leaf_names: list[str] | None = None, nonfinite: Any | None = None, notes: list[str] | None = None,
    ) -> None:
        self.output = output
        self.value = value
        self.grads = grads
        self.grad_of = grad_of
        self.stats = stats
        self.variables = variables
        self.leaf_names: list[str] = leaf_names or []
        self.nonfinite = nonfinite
        self.notes: list[str] = notes or []

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)


# The REPL's names for the last result (`_`, `ans`): aliases of whatever came last, so
# reporting them would repeat another name's gradient on every line.
LAST_RESULT = ("_", "ans")


def variables_in(output: Any, order: list[Any] | None = None) -> list[Any]:
    """The named leaves that require grad in the graph of `output`, in order of use."""
    nodes = order if order is not None else topological_order(output)
    return [n for n in nodes if not n.parents and getattr(n, "name", None) and n.requires_grad]


def named_values(order: list[Any], known: dict[str, Any]) -> dict[str, Any]:
    """Every name that stands for a node of the graph with a gradient, in order of use.

    The rule (docs/language.md, "Named values"): a name reports d(output)/d(the node it
    is bound to) -- a leaf its total derivative, a named intermediate its adjoint, as
    PyTorch's retain_grad() gives. Aliases (`z = x`) report the node they share. Names
    come from the session's bindings (`known`); a named leaf of the graph whose name is
    no longer bound to it (the name was reassigned) is still reported under its name
    when no binding of that name is in the graph. Constants (detach(x), comparisons)
    and the REPL's names for the last result are not reported unless asked for."""
    in_graph = {id(n) for n in order}
    names_of: dict[int, list[str]] = {}
    for name, node in known.items():
        if name not in LAST_RESULT and id(node) in in_graph and node.requires_grad:
            names_of.setdefault(id(node), []).append(name)
    found: dict[str, Any] = {}
    for node in order:
        for name in names_of.get(id(node), ()):
            found[name] = node
    for leaf in variables_in(None, order):
        if leaf.name not in found:
            found[leaf.name] = leaf
    order_of = {id(n): i for i, n in enumerate(order)}
    return dict(sorted(found.items(), key=lambda item: order_of[id(item[1])]))


def analyze(
    output: Any, wrt: list[str] | None = None, known: dict[str, Any] | None = None, always: list[str] | None = None,
) -> Analysis:
    """Run the backward pass from `output` (seeded with ones: the gradient of its sum)
    and collect d(output)/d(name) for every named value in its graph (see
    `named_values`), or for the names in `wrt`. `known` maps names to the values bound
    to them; `always` lists names reported even when the output does not use them (with
    zero gradients: eval's NAME=VALUE bindings)."""
    if isinstance(output, tuple):
        raise LanguageError("value", f"the result is {len(output)} tensors; pick one with [k]")
    if not isinstance(output, (Tensor, Value)):
        raise LanguageError("value", f"the result is not a number or tensor: {output!r}")
    known = known or {}
    order = topological_order(output)  # once, for every fact below
    leaves = variables_in(output, order)
    named = named_values(order, known)
    if wrt is not None:
        for name in wrt:
            if name not in named and name not in known:
                raise LanguageError("name", f"--wrt names {name!r}, which is not a variable")
        names = list(wrt)
    else:
        reported = [n for n in (always or []) if n in known and _has_gradient(known[n])]
        names = reported + [n for n in named if n not in reported]
    nodes = {name: named.get(name, known.get(name)) for name in names}
    grads = _backward(output, order, nodes)
    value = np.asarray(output.data)
    return Analysis(
        output=output, value=value, grads=grads, grad_of="sum" if value.size != 1 or value.ndim else None,
        stats=graph_stats(output, order), variables=names, leaf_names=[leaf.name for leaf in leaves],
        nonfinite=first_nonfinite(output, order) if isinstance(output, Tensor) else None,
    )


def _has_gradient(value: Any) -> bool:
    return isinstance(value, (Tensor, Value)) and value.requires_grad


def _backward(output: Any, order: list[Any], nodes: dict[str, Any]) -> dict[str, np.ndarray]:
    """d(output)/d(node) for each named node: every node's gradient is kept (retained),
    so a named intermediate reports its adjoint; a node outside the graph gets zeros."""
    if isinstance(output, Value):
        for node in order:
            node.grad = 0.0
        output.backward()
    else:
        for node in order:
            node.grad = None
        if output.requires_grad:
            output.backward(retain_grads=True)
    in_graph = {id(n) for n in order}
    grads = {}
    for name, node in nodes.items():
        g = node.grad if id(node) in in_graph and _has_gradient(node) else None
        grads[name] = np.zeros(np.shape(getattr(node, "data", node))) if g is None else np.asarray(g)
    return grads
