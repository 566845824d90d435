"""What a report says of a value computed on JAX or PyTorch: its value and the gradient of
its sum by every named value, found by that library's autodiff.

The names are found as on every engine (analysis.named_values: a leaf reports its total
derivative, a named intermediate its adjoint). PyTorch gives the adjoints of the tensors it
recorded (`torch.autograd.grad`); for JAX the output is replayed as a function of an offset
added at each named value, and `jax.grad` by the offsets, at 0, gives them all in one pass.
What needs gradcalc's own graph (its statistics, --tree, --dot, --steps) is not there, and
the report says so.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gradcalc.autodiff import topological_order

from ..analysis import Analysis, earlier_values, named_values, reported_names, variables_in, without_gradient
from .compiled import jitted
from .library import load
from .table import LIBRARIES
from .values import EngineValue, replay

if TYPE_CHECKING:
    from .backend import EngineBackend


class EngineAnalysis(Analysis):
    """An Analysis of a value of the JAX or PyTorch engine: no gradcalc graph (`stats` is
    None), and notes on the engine (the device; whether the program ran under jax.jit)."""

    def __init__(self, output: EngineValue, value: np.ndarray, grads: dict[str, np.ndarray], names: list[str], leaf_names: list[str],
                 earlier: dict[str, bool], engine: str, device: str, notes: list[str]) -> None:
        grad_of = "sum" if without_gradient(value) is None and (value.size != 1 or value.ndim) else None
        super().__init__(output, value, grads, grad_of, None, names, leaf_names, earlier=earlier)  # type: ignore[arg-type]  # (no gradcalc graph)
        self.engine, self.device, self.engine_notes = engine, device, notes

    @property
    def graph_note(self) -> str:
        return (f"kept by {LIBRARIES[self.engine]}, not gradcalc (--engine {self.engine}, on the {self.device}): graph statistics, "
                "--tree, --dot and --steps need --engine tensor")


def analyze_engine(output: EngineValue, wrt: list[str] | None, known: dict[str, Any], always: list[str] | None, session: Any) -> EngineAnalysis:
    """The report of `output` (analysis.analyze's, for the JAX and PyTorch engines)."""
    if session is not None:
        backend: EngineBackend = session.backend
    else:  # (a value reported without its session: the library it is an array of)
        from .backend import EngineBackend
        from .library import library_of

        backend = EngineBackend(library_of(output.value))
    selected = Selection(output, wrt, known, always)
    value = np.asarray(output.data)
    found = dict(zip(map(id, selected.wanted), adjoints(backend, output, selected.wanted, selected.order)))
    grads = {name: found[id(n)] if id(n) in found else np.zeros(n.shape if n is not None else ()) for name, n in selected.nodes.items()}
    notes = list(getattr(session, "engine_notes", []))
    return EngineAnalysis(output, value, grads, selected.names, selected.leaf_names, selected.earlier, backend.name, backend.library.device(), notes)


class Selection:
    """Which names a report gives the gradients of, and the nodes they stand for (found
    from the graph alone: no value is read, so it runs under jax.jit too)."""

    def __init__(self, output: EngineValue, wrt: list[str] | None, known: dict[str, Any], always: list[str] | None) -> None:
        self.order = order = topological_order(output)
        named = named_values(order, known)
        self.earlier = earlier_values(output, order, known)
        names = reported_names(wrt, named, known, always, self.earlier)
        self.names = [] if output.dtype.kind in "biu" else names  # (whole numbers and booleans have no gradient)
        self.nodes = {name: named.get(name, known.get(name)) for name in self.names}
        in_graph = {id(n) for n in order}
        self.wanted = list({id(n): n for n in self.nodes.values() if isinstance(n, EngineValue) and n.requires_grad and id(n) in in_graph}.values())
        self.leaf_names = [leaf.name for leaf in variables_in(output, order)]


def adjoints(backend: EngineBackend, output: EngineValue, nodes: list[EngineValue], order: list[Any]) -> list[np.ndarray]:
    """d sum(output) / d node for each node, by the library's reverse mode, in one pass."""
    if not nodes:
        return []
    library = backend.library
    if library.name == "torch":
        torch = library.torch  # type: ignore[attr-defined]
        out = output.value
        if not out.requires_grad:
            return [np.zeros(n.shape) for n in nodes]
        found = torch.autograd.grad(out.sum(), [n.value for n in nodes], allow_unused=True, retain_graph=True)
        return [np.zeros(n.shape) if g is None else library.host(g) for n, g in zip(nodes, found)]
    keys = [id(n) for n in nodes]
    zeros = [np.zeros(n.shape) for n in nodes]
    fast = jitted(library, "adjoints", order, [output], [], nodes,
                  lambda run: lambda leaves, _, offsets: library.transform("grad", lambda o: run(leaves, [], o)[0].sum(), 0)(offsets))
    if fast is not None:
        return [library.host(g) for g in fast([], zeros)]

    def total(offsets: list[Any]) -> Any:
        return replay(library, [output], {}, order, dict(zip(keys, offsets)))[0].sum()

    return [library.host(g) for g in library.transform("grad", total, 0)(zeros)]


def gradient_jaxpr(analysis: Analysis) -> str:
    """`--steps` on JAX: the program's gradient as JAX computes it, jax.make_jaxpr of the
    jax.grad of sum(output) by each named value (reverse mode, as a list of primitives)."""
    output = analysis.output
    library = load("jax")
    order = topological_order(output)
    named = [n for n in (named_values(order, {}) or {}).values()]
    keys = [id(n) for n in named]

    def total(offsets: list[Any]) -> Any:
        return replay(library, [output], {}, order, dict(zip(keys, offsets)))[0].sum()

    jax = library.jax  # type: ignore[attr-defined]
    return str(jax.make_jaxpr(jax.grad(total))([np.zeros(n.shape) for n in named]))
