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
        params = {k: v for k, v in (node.params or {}).items() if k != "output"}
        if op.kink(*[p.data for p in node.parents], tol=tol, **params) and op.name not in found:
            found.append(op.name)
    return found


def analytic_jacobian(f: Callable[..., Tensor], inputs: Sequence[np.ndarray], wrt: Sequence[int]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The output and d out / d input for each input in `wrt`, as (out.size, x.size) matrices."""
    tensors = [Tensor(x, requires_grad=i in wrt) for i, x in enumerate(inputs)]
    out = f(*tensors)
    value = np.asarray(out.data)
    jacs = [np.zeros((value.size, np.size(inputs[i])), dtype=np.float64) for i in wrt]
    if not out.requires_grad:
        return value, jacs
    for row in range(value.size):
        seed = np.zeros(value.size)
        seed[row] = 1.0
        grads = grad(out, [tensors[i] for i in wrt], seed.reshape(value.shape))
        for jac, g in zip(jacs, grads):
            jac[row] = np.real(g.data).reshape(-1)
    return value, jacs


def numerical_jacobian(
    f: Callable[..., Tensor], inputs: Sequence[np.ndarray], wrt: Sequence[int], method: str, step: float | None = None
) -> list[np.ndarray]:
    """d out / d input by complex step or central differences, one column per element."""
    # Inputs are evaluated as requiring grad: f may itself take a gradient (a check of
    # second derivatives), which needs the graph.
    jacs = []
    for i in wrt:
        x = np.asarray(inputs[i], dtype=np.float64)
        columns = []
        for j in range(x.size):
            if method == "complex":
                h = step or COMPLEX_STEP
                bumped = x.astype(np.complex128).reshape(-1)
                bumped[j] += 1j * h
                out = f(*_replace(inputs, i, bumped.reshape(x.shape), wrt))
                columns.append(np.imag(out.data).reshape(-1) / h)
            else:
                h = step or CENTRAL_STEP
                up, down = x.copy().reshape(-1), x.copy().reshape(-1)
                up[j] += h
                down[j] -= h
                f_up = np.real(f(*_replace(inputs, i, up.reshape(x.shape), wrt)).data)
                f_down = np.real(f(*_replace(inputs, i, down.reshape(x.shape), wrt)).data)
                columns.append(((f_up - f_down) / (2 * h)).reshape(-1))
        jacs.append(np.stack(columns, axis=1) if columns else np.zeros((0, 0)))
    return jacs


def _replace(inputs: Sequence[Any], i: int, value: Any, wrt: Sequence[int]) -> list[Tensor]:
    return [Tensor(value if k == i else x, requires_grad=k in wrt) for k, x in enumerate(inputs)]


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
            worst = f"input {k}, element {c}, output {r}: analytic {a[r, c]!r}, numeric {n[r, c]!r}"
        max_rel = float(np.maximum(max_rel, np.where(diff == 0, 0.0, rel).max()))
        passed = passed and bool(np.all(diff <= atol + rtol * np.abs(np.where(np.isfinite(n), n, 0.0))))
    return max_abs, max_rel, passed, worst


def gradcheck(
    f: Callable[..., Tensor],
    inputs: Sequence[Any],
    wrt: Sequence[int] | None = None,
    method: str = "auto",
    atol: float | None = None,
    rtol: float | None = None,
) -> CheckResult:
    """Check the reverse-mode Jacobian of f at `inputs` against a numerical one.

    method: "complex", "central", or "auto" (complex step when every op on the path is
    complex-safe). Tolerances default per method (TOLERANCES).
    """
    arrays = [np.asarray(x, dtype=np.float64) for x in inputs]
    wrt = list(range(len(arrays))) if wrt is None else list(wrt)
    probe = f(*[Tensor(x, requires_grad=i in wrt) for i, x in enumerate(arrays)])
    if method == "auto":
        method = "complex" if complex_safe(probe) else "central"
    default_atol, default_rtol = TOLERANCES[method]
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    _, analytic = analytic_jacobian(f, arrays, wrt)
    numeric = numerical_jacobian(f, arrays, wrt, method)
    max_abs, max_rel, passed, worst = compare(analytic, numeric, atol, rtol)
    return CheckResult(
        method=method, max_abs_error=max_abs, max_rel_error=max_rel, passed=passed, atol=atol, rtol=rtol,
        worst=worst, kinks=kinks(probe), analytic=list(analytic), numeric=list(numeric),
    )
