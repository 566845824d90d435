"""Gradient checking: reverse-mode Jacobians against numerical ones.

Complex step (Squire & Trapp 1998): for f analytic, f(x + ih) = f(x) + ih f'(x) + O(h^2),
so f'(x) = Im f(x + ih) / h with no subtraction, hence no cancellation: with h = 1e-20 the
result is exact to rounding. It needs every op on the path to extend analytically to
complex inputs (the registry's `complex_safe`). Otherwise: central differences,
(f(x + h) - f(x - h)) / 2h, whose error is O(h^2) truncation plus O(eps/h) rounding.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backprop import grad, topological_order
from .limits import charge, check_size
from .registry import recorded_params
from .tensor import Tensor

COMPLEX_STEP = 1e-20
CENTRAL_STEP = 1e-6

# Defaults in the spirit of torch.autograd.gradcheck for central differences; complex
# step agrees to rounding, so it is held to a far tighter standard.
TOLERANCES = {"central": (1e-5, 1e-3), "complex": (1e-10, 1e-8)}


@dataclass
class CheckResult:
    method: str
    max_abs_error: float
    max_rel_error: float
    passed: bool
    atol: float
    rtol: float
    worst: str = ""
    kinks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    analytic: list[np.ndarray] = field(default_factory=list)
    numeric: list[np.ndarray] = field(default_factory=list)


def path_ops(output: Any) -> list[Any]:
    """The ops (OpDefs) on the graph of `output`."""
    return [n.op for n in topological_order(output) if getattr(n, "op", None) is not None]


def complex_safe(output: Any) -> bool:
    return not complex_unsafe(output)


def complex_unsafe(output: Any) -> list[str]:
    """The ops on the path that have no complex extension (so no complex step)."""
    return sorted({op.name for op in path_ops(output) if not op.complex_safe})


def choose_method(output: Any, method: str) -> tuple[str, list[str]]:
    """The method a check uses, and a note when the one asked for cannot be used:
    complex step needs every op on the path to be complex-safe, else central differences."""
    unsafe = complex_unsafe(output) if method in ("auto", "complex") else []
    if method == "auto":
        return ("central" if unsafe else "complex"), []
    if method == "complex" and unsafe:
        names = ", ".join(unsafe)
        return "central", [f"complex step asked for, but {names} {'is' if len(unsafe) == 1 else 'are'} not complex-safe: used central differences"]
    return method, []


def kinks(output: Any, tol: float = 0.0) -> list[str]:
    """Names of the ops on the path evaluated at a point where they are not differentiable."""
    found = []
    for node in topological_order(output):
        op = getattr(node, "op", None)
        if op is None or op.kink is None:
            continue
        params, _ = recorded_params(node)
        if op.kink(*[p.data for p in node.parents], tol=tol, **params) and op.name not in found:
            found.append(op.name)
    return found


def replay(output: Tensor, values: dict[int, Any], order: list[Any] | None = None) -> np.ndarray:
    """Recompute the recorded graph of `output` with some leaves' data replaced.

    The graph acts as a function of its leaves (a trace, in JAX's terms): every op
    node runs its forward again on its parents' new data. Branches taken while the
    graph was recorded (`a if c else b`) stay taken.
    """
    data: dict[int, Any] = {}
    order = topological_order(output) if order is None else order
    charge(len(order), "gradient check")
    for node in order:
        if node.op is None:
            data[id(node)] = values.get(id(node), node.data)
            continue
        params, pick = recorded_params(node)
        out = node.op.forward(*[data[id(p)] for p in node.parents], **params)
        data[id(node)] = out if pick is None else out[pick]
    return np.asarray(data[id(output)])


def reverse_jacobian(output: Tensor, leaves: Sequence[Tensor]) -> list[np.ndarray]:
    """d output / d leaf for each leaf as (output.size, leaf.size) matrices, one backward
    pass per output element."""
    for leaf in leaves:
        check_size((output.size, leaf.size), "the Jacobian of a gradient check")
    jacs = [np.zeros((output.size, leaf.size)) for leaf in leaves]
    if not output.requires_grad:
        return jacs
    passes = len(topological_order(output))
    for row in range(output.size):
        charge(passes, "gradient check")
        seed = np.zeros(output.size)
        seed[row] = 1.0
        for jac, g in zip(jacs, grad(output, list(leaves), seed.reshape(output.shape))):
            jac[row] = np.real(g.data).reshape(-1)
    return jacs


def numerical_jacobian(
    f: Callable[[list[np.ndarray]], np.ndarray], inputs: Sequence[np.ndarray], wrt: Sequence[int], method: str,
    step: float | None = None,
) -> list[np.ndarray]:
    """d f / d input by complex step or central differences, one column per element.
    `f` maps a list of input arrays to an output array."""
    jacs = []
    for i in wrt:
        x = np.asarray(inputs[i], dtype=np.float64)
        columns = []
        for j in range(x.size):
            if method == "complex":
                h = step or COMPLEX_STEP
                bumped = x.astype(np.complex128).reshape(-1)
                bumped[j] += 1j * h
                columns.append(np.imag(f(_replace(inputs, i, bumped.reshape(x.shape)))).reshape(-1) / h)
            else:
                h = step or CENTRAL_STEP
                up, down = x.copy().reshape(-1), x.copy().reshape(-1)
                up[j] += h
                down[j] -= h
                f_up = np.real(f(_replace(inputs, i, up.reshape(x.shape))))
                f_down = np.real(f(_replace(inputs, i, down.reshape(x.shape))))
                columns.append(((f_up - f_down) / (2 * h)).reshape(-1))
            if j == 0:  # the first column tells the Jacobian's size, before the others are made
                check_size((columns[0].size, x.size), "the Jacobian of a gradient check")
        jacs.append(np.stack(columns, axis=1) if columns else np.zeros((0, 0)))
    return jacs


def _replace(inputs: Sequence[Any], i: int, value: Any) -> list[Any]:
    return [value if k == i else x for k, x in enumerate(inputs)]


@dataclass
class Worst:
    """The entry of the Jacobians that disagrees most: leaf k, output element `row`,
    leaf element `column` (flat indices), and both values there."""

    k: int
    row: int
    column: int
    analytic: float
    numeric: float


def compare(analytic: Sequence[np.ndarray], numeric: Sequence[np.ndarray], atol: float, rtol: float) -> tuple[float, float, bool, Worst | None]:
    """Max absolute and relative error and whether every entry is within atol + rtol*|numeric|."""
    max_abs = max_rel = 0.0
    passed = True
    worst = None
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        if a.size == 0:
            continue
        diff = np.abs(a - n)
        both_inf = np.isinf(a) & np.isinf(n) & (np.sign(a) == np.sign(n))
        diff = np.where(both_inf, 0.0, diff)
        diff = np.where(np.isnan(a) & np.isnan(n), 0.0, diff)
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = diff / np.maximum(np.abs(n), np.finfo(float).tiny)
        if diff.max() > max_abs:
            max_abs = float(diff.max())
            r, c = np.unravel_index(int(np.argmax(diff)), diff.shape)
            worst = Worst(k, int(r), int(c), float(a[r, c]), float(n[r, c]))
        max_rel = float(np.maximum(max_rel, np.where(diff == 0, 0.0, rel).max()))
        passed = passed and bool(np.all(diff <= atol + rtol * np.abs(np.where(np.isfinite(n), n, 0.0))))
    return max_abs, max_rel, passed, worst


def position(shape: Sequence[int], flat: int) -> str:
    """A flat index as the index a user writes: `[1, 2]` ('' for a scalar)."""
    if not shape:
        return ""
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, tuple(shape))) + "]"


def describe_worst(worst: Worst | None, output_shape: Sequence[int], leaves: Sequence[tuple[str, Sequence[int]]]) -> str:
    """'d out[3, 0] / d W[1, 2]: analytic 0.5, numeric 0.25': the entry named by variable
    and index, never by flat positions."""
    if worst is None:
        return ""
    name, shape = leaves[worst.k]
    return (
        f"d out{position(output_shape, worst.row)} / d {name}{position(shape, worst.column)}: "
        f"analytic {worst.analytic!r}, numeric {worst.numeric!r}"
    )


def _finish(
    method: str, atol: float | None, rtol: float | None, analytic: list[np.ndarray], numeric: list[np.ndarray], output: Any,
    leaves: Sequence[tuple[str, Sequence[int]]], notes: list[str] | None = None,
) -> CheckResult:
    default_atol, default_rtol = TOLERANCES[method]
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    max_abs, max_rel, passed, worst = compare(analytic, numeric, atol, rtol)
    return CheckResult(
        method=method, max_abs_error=max_abs, max_rel_error=max_rel, passed=passed, atol=atol, rtol=rtol,
        worst=describe_worst(worst, np.shape(output.data), leaves), kinks=kinks(output), analytic=list(analytic),
        numeric=list(numeric), notes=notes or [],
    )


def gradcheck(
    f: Callable[..., Tensor],
    inputs: Sequence[Any],
    wrt: Sequence[int] | None = None,
    method: str = "auto",
    atol: float | None = None,
    rtol: float | None = None,
) -> CheckResult:
    """Check the reverse-mode Jacobian of `f` (Tensors in, a Tensor out) at `inputs`.

    method: "complex", "central", or "auto" (complex step when every op on the path is
    complex-safe). Tolerances default per method (TOLERANCES). `f` is called again for
    each perturbation, with inputs that require grad (so `f` may itself take gradients).
    """
    arrays = [np.asarray(x, dtype=np.float64) for x in inputs]
    wrt = list(range(len(arrays))) if wrt is None else list(wrt)

    def evaluate(values: list[np.ndarray]) -> Tensor:
        return f(*[Tensor(x, requires_grad=i in wrt) for i, x in enumerate(values)])

    tensors = [Tensor(x, requires_grad=i in wrt) for i, x in enumerate(arrays)]
    output = f(*tensors)
    method, notes = choose_method(output, method)
    analytic = reverse_jacobian(output, [tensors[i] for i in wrt])
    numeric = numerical_jacobian(lambda values: evaluate(values).data, arrays, wrt, method)
    names = [(f"inputs[{i}]", arrays[i].shape) for i in wrt]
    return _finish(method, atol, rtol, analytic, numeric, output, names, notes)


def gradcheck_graph(
    output: Tensor, leaves: Sequence[Tensor], method: str = "auto", atol: float | None = None, rtol: float | None = None
) -> CheckResult:
    """Check a recorded graph: reverse mode against differences of the replayed graph."""
    method, notes = choose_method(output, method)
    keys = [id(leaf) for leaf in leaves]
    arrays = [np.real(leaf.data) for leaf in leaves]
    order = topological_order(output)

    def evaluate(values: list[np.ndarray]) -> np.ndarray:
        return replay(output, dict(zip(keys, values)), order)

    analytic = reverse_jacobian(output, leaves)
    numeric = numerical_jacobian(evaluate, arrays, range(len(leaves)), method)
    names = [(leaf.name or f"leaves[{k}]", leaf.shape) for k, leaf in enumerate(leaves)]
    return _finish(method, atol, rtol, analytic, numeric, output, names, notes)


def suspect_ops(output: Tensor, method: str = "central", limit: int = 200) -> list[str]:
    """The ops on the graph whose own VJP disagrees with differences of their own forward,
    each checked at the inputs it saw: where a failing check points."""
    suspects: list[str] = []
    for node in topological_order(output)[::-1][:limit]:
        op = node.op
        if op is None or op.name in suspects or not op.has_gradient:
            continue
        parents = [p for p in node.parents]
        wrt = [k for k, p in enumerate(parents) if p.requires_grad and op.vjp_for(k) is not None]
        if not wrt:
            continue
        params, pick = recorded_params(node)

        def local(*ts: Tensor, op: Any = op, params: dict[str, Any] = params, pick: Any = pick) -> Tensor:
            out = op(*ts, **params)
            return out if pick is None else out[pick]

        use = "complex" if method == "complex" and op.complex_safe else "central"
        try:
            result = gradcheck(local, [np.real(p.data) for p in parents], wrt=wrt, method=use)
        except Exception:  # noqa: BLE001 - a check that cannot even run is a suspect too
            suspects.append(op.name)
            continue
        if not result.passed:
            suspects.append(op.name)
    return suspects
