"""What gradcalc reports about an output: value, gradients per variable, graph facts.

Data only; the CLI decides how it looks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcalc.autodiff import GraphStats, Tensor, Value, first_nonfinite, graph_stats, topological_order

from .errors import LanguageError


@dataclass
class Analysis:
    output: Any
    value: np.ndarray
    grads: dict[str, np.ndarray]
    grad_of: str | None
    stats: GraphStats
    variables: list[str]
    leaf_names: list[str] = field(default_factory=list)
    nonfinite: Any | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)


def variables_in(output: Any, order: list[Any] | None = None) -> list[Any]:
    """The named leaves that require grad in the graph of `output`, in order of use."""
    nodes = order if order is not None else topological_order(output)
    return [n for n in nodes if not n.parents and getattr(n, "name", None) and n.requires_grad]


def analyze(output: Any, wrt: list[str] | None = None, known: dict[str, Any] | None = None) -> Analysis:
    """Run the backward pass from `output` (seeded with ones: the gradient of its sum)
    and collect gradients for the variables in its graph, or for `wrt`."""
    if isinstance(output, tuple):
        raise LanguageError("value", f"the result is {len(output)} tensors; pick one with [k]")
    if not isinstance(output, (Tensor, Value)):
        raise LanguageError("value", f"the result is not a number or tensor: {output!r}")
    order = topological_order(output)  # once, for every fact below
    leaves = variables_in(output, order)
    by_name = {leaf.name: leaf for leaf in leaves}
    names = list(by_name)
    if wrt is not None:
        for name in wrt:
            if name not in by_name and name not in (known or {}):
                raise LanguageError("name", f"--wrt names {name!r}, which is not a variable")
        names = list(wrt)
    grads = _backward(output, order, by_name, names, known or {})
    value = np.asarray(output.data)
    return Analysis(
        output=output, value=value, grads=grads, grad_of="sum" if value.size != 1 or value.ndim else None,
        stats=graph_stats(output, order), variables=names, leaf_names=[leaf.name for leaf in leaves],
        nonfinite=first_nonfinite(output, order) if isinstance(output, Tensor) else None,
    )


def _backward(output: Any, order: list[Any], leaves: dict[str, Any], names: list[str], known: dict[str, Any]) -> dict[str, np.ndarray]:
    if isinstance(output, Value):
        for node in order:
            node.grad = 0.0
        output.backward()
    else:
        for node in order:
            node.grad = None
        if output.requires_grad:
            output.backward(retain_grads=True)
    grads = {}
    for name in names:
        leaf = leaves.get(name)
        g = None if leaf is None else leaf.grad
        shape = np.shape((leaf if leaf is not None else known[name]).data)
        grads[name] = np.zeros(shape) if g is None else np.asarray(g)
    return grads
