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
    analytic: list[np.ndarray] = field(default_factory=list)
    numeric: list[np.ndarray] = field(default_factory=list)


def path_ops(output: Any) -> list[Any]:
    """The ops (OpDefs) on the graph of `output`."""
    return [n.op for n in topological_order(output) if getattr(n, "op", None) is not None]


def complex_safe(output: Any) -> bool:
    return all(op.complex_safe for op in path_ops(output))


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


def replay(output: Tensor, values: dict[int, Any]) -> np.ndarray:
    """Recompute the recorded graph of `output` with some leaves' data replaced.

    The graph acts as a function of its leaves (a trace, in JAX's terms): every op
    node runs its forward again on its parents' new data. Branches taken while the
    graph was recorded (`a if c else b`) stay taken.
    """
    data: dict[int, Any] = {}
    for node in topological_order(output):
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
    jacs = [np.zeros((output.size, leaf.size)) for leaf in leaves]
    if not output.requires_grad:
        return jacs
    for row in range(output.size):
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
        jacs.append(np.stack(columns, axis=1) if columns else np.zeros((0, 0)))
    return jacs


def _replace(inputs: Sequence[Any], i: int, value: Any) -> list[Any]:
    return [value if k == i else x for k, x in enumerate(inputs)]


def compare(analytic: Sequence[np.ndarray], numeric: Sequence[np.ndarray], atol: float, rtol: float) -> tuple[float, float, bool, str]:
    """Max absolute and relative error and whether every entry is within atol + rtol*|numeric|."""
    max_abs = max_rel = 0.0
    passed = True
    worst = ""
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
            worst = f"input {k}, element {c}, output {r}: analytic {float(a[r, c])!r}, numeric {float(n[r, c])!r}"
        max_rel = float(np.maximum(max_rel, np.where(diff == 0, 0.0, rel).max()))
        passed = passed and bool(np.all(diff <= atol + rtol * np.abs(np.where(np.isfinite(n), n, 0.0))))
    return max_abs, max_rel, passed, worst


def _finish(method: str, atol: float | None, rtol: float | None, analytic: list[np.ndarray], numeric: list[np.ndarray], output: Any) -> CheckResult:
    default_atol, default_rtol = TOLERANCES[method]
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    max_abs, max_rel, passed, worst = compare(analytic, numeric, atol, rtol)
    return CheckResult(
        method=method, max_abs_error=max_abs, max_rel_error=max_rel, passed=passed, atol=atol, rtol=rtol,
        worst=worst, kinks=kinks(output), analytic=list(analytic), numeric=list(numeric),
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
    if method == "auto":
        method = "complex" if complex_safe(output) else "central"
    analytic = reverse_jacobian(output, [tensors[i] for i in wrt])
    numeric = numerical_jacobian(lambda values: evaluate(values).data, arrays, wrt, method)
    return _finish(method, atol, rtol, analytic, numeric, output)


def gradcheck_graph(
    output: Tensor, leaves: Sequence[Tensor], method: str = "auto", atol: float | None = None, rtol: float | None = None
) -> CheckResult:
    """Check a recorded graph: reverse mode against differences of the replayed graph."""
    if method == "auto":
        method = "complex" if complex_safe(output) else "central"
    keys = [id(leaf) for leaf in leaves]
    arrays = [np.real(leaf.data) for leaf in leaves]

    def evaluate(values: list[np.ndarray]) -> np.ndarray:
        return replay(output, dict(zip(keys, values)))

    analytic = reverse_jacobian(output, leaves)
    numeric = numerical_jacobian(evaluate, arrays, range(len(leaves)), method)
    return _finish(method, atol, rtol, analytic, numeric, output)


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
