"""`grad(y, x)`, `jacobian(y, x)` and `hessian(y, x)` on the JAX and PyTorch engines.

PyTorch differentiates what it recorded, as gradcalc does: `torch.autograd.grad(y, x,
create_graph=True)`. JAX recorded nothing, so y is made a function of x by replaying the
steps that computed it (values.replay) and handed to `jax.grad`, `jax.jacrev` or
`jax.hessian`. Either way the result records how to compute it again from the variables y
depends on, so a derivative is differentiated again (grad of grad) and checked.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gradcalc.autodiff import topological_order

from .compiled import jitted
from .values import CallStep, EngineValue, replay

if TYPE_CHECKING:
    from .backend import EngineBackend
    from .library import Library


def expression_derivative(backend: EngineBackend, kind: str, y: EngineValue, targets: list[EngineValue], recorded: bool) -> list[EngineValue]:
    """d y / d each target as `kind` ("grad", "jacobian", "hessian") asks: one value per
    target, differentiable again when `recorded` (outside `with no_grad:`)."""
    order = topological_order(y)
    sources = [n for n in order if not n._prev and n.requires_grad]
    parents = list(sources)
    for t in targets:  # (a named intermediate is an input of its own)
        if all(p is not t for p in parents):
            parents.append(t)
    positions = [next(k for k, p in enumerate(parents) if p is t) for t in targets]

    def again(library: Library, values: list[Any]) -> list[Any]:
        given = {id(p): v for p, v in zip(parents, values)}

        def f(*xs: Any) -> Any:
            return replay(library, [y], {**given, **{id(t): x for t, x in zip(targets, xs)}}, order)[0]

        return differentiated(library, kind, f, [values[k] for k in positions], y.shape)

    library = backend.library
    values = [backend.read(p) for p in parents]
    xs = [values[k] for k in positions]
    if library.name == "torch":
        found = _torch_derivative(library, kind, y, xs, recorded)
    else:  # compiled once for a graph of this shape (a loop records the same graph each time)
        fast = jitted(library, ("derivative", kind), order, [y], targets, [],
                      lambda run: lambda leaves, inputs, _: differentiated(library, kind, lambda *a: run(leaves, list(a), [])[0], inputs, y.shape))
        found = fast(xs, []) if fast is not None else again(library, values)
    record = recorded and any(p.requires_grad for p in parents)
    made = []
    for k, array in enumerate(found):
        on_graph = record and (library.name != "torch" or array.requires_grad)
        node = EngineValue(array, tuple(parents) if on_graph else (), CallStep(kind, again) if on_graph else None,
                           {"output": k} if on_graph else None, requires_grad=on_graph)
        node.detached = not on_graph  # a derivative that is constant is not a user's value
        made.append(node)
    return made


def differentiated(library: Library, kind: str, f: Callable[..., Any], xs: list[Any], y_shape: tuple[int, ...]) -> list[Any]:
    """The derivative of f at xs by the library's transformations: of sum(f) ("grad"), the
    Jacobian ("jacobian"), or the Hessian of a one-element f by xs[0] ("hessian")."""
    argnums = tuple(range(len(xs)))
    if kind == "grad":
        return list(library.transform("grad", lambda *a: f(*a).sum(), argnums)(*xs))
    if kind == "jacobian":
        return list(library.transform("jacrev", f, argnums)(*xs))
    return [library.transform("hessian", lambda a: f(a).reshape(()), 0)(xs[0])]


def _torch_derivative(library: Any, kind: str, y: EngineValue, xs: list[Any], recorded: bool) -> list[Any]:
    """PyTorch's own autodiff on the graph it recorded (define-by-run, as gradcalc)."""
    torch = library.torch
    out = y.value
    if kind == "hessian":
        gradient = _torch_derivative(library, "grad", y, xs, True)[0]
        return [_torch_jacobian(torch, gradient, xs[0], recorded).reshape(tuple(xs[0].shape) * 2)]
    if kind == "grad":
        if not getattr(out, "requires_grad", False):  # (a constant: maybe a NumPy array, grad(0.1, x))
            return [torch.zeros_like(x) for x in xs]
        found = torch.autograd.grad(out.sum(), xs, create_graph=recorded, retain_graph=True, allow_unused=True)
        return [torch.zeros_like(x) if g is None else g for x, g in zip(xs, found)]
    return [_torch_jacobian(torch, out, x, recorded) for x in xs]


def _torch_jacobian(torch: Any, out: Any, x: Any, recorded: bool) -> Any:
    """d out / d x, shape out.shape + x.shape: one backward pass per output element, batched."""
    shape = tuple(out.shape) + tuple(x.shape)
    if not getattr(out, "requires_grad", False) or out.numel() == 0:  # (a constant, or nothing to differentiate)
        return torch.zeros(shape, dtype=torch.float64, device=x.device)
    m = max(out.numel(), 1)
    seeds = torch.eye(m, dtype=out.dtype, device=out.device).reshape((m, *out.shape))
    try:
        (rows,) = torch.autograd.grad(out, [x], grad_outputs=seeds, is_grads_batched=True, create_graph=recorded, retain_graph=True,
                                      allow_unused=True)
    except RuntimeError:  # an op without a batching rule for its backward: one pass per row
        rows = torch.stack([torch.autograd.grad(out, [x], grad_outputs=seed, create_graph=recorded, retain_graph=True, allow_unused=True)[0]
                            for seed in seeds]) if out.numel() else None
    return torch.zeros(shape, dtype=torch.float64, device=x.device) if rows is None else rows.reshape(shape)
