"""Op numerics at the edges of their domains: each reported case through the command,
against a closed form, mpmath or PyTorch float64, and the generated checks of the class
behind it (every elementwise op out of its domain, to third order)."""
from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from gradcalc.autodiff import REGISTRY, Tensor, grad

from .test_cli import gradcalc

nan, inf = math.nan, math.inf


def eval_json(*args: str) -> dict[str, Any]:
    done = gradcalc("eval", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def same(got: Any, want: Any, rtol: float = 1e-15) -> bool:
    """Equal to rtol, nan where want is nan (elementwise)."""
    return bool(np.allclose(np.asarray(got, float), np.asarray(want, float), rtol=rtol, atol=0.0, equal_nan=True))


# ---- a nan a VJP produces stays nan at every higher order ----------------------------------


@pytest.mark.parametrize("source, x", [
    ("hessian(x ** 0.5, x)", "-2"),
    ("grad(x ** 1.5, x)", "-2"),
    ("grad(grad(x ** 1.5, x), x)", "-inf"),
    ("grad(grad(x ** 2.5, x), x)", "-0.5"),
])
def test_a_fractional_power_of_a_negative_base_is_nan_at_every_order_through_the_command(source, x):
    out = eval_json(source, f"x={x}")
    assert math.isnan(float(out["value"])) and math.isnan(float(out["grads"]["x"]))  # (JSON spells nan "nan")


# The probe points: every sign and magnitude, the infinities, the zeros (no nan input: a nan
# in gives nan out by another rule, and some derivatives of a nan input are constants).
PROBES = [-inf, -1e300, -3.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 1e300, inf]
PAIR_PROBES = [-2.0, -0.5, 0.0, 0.5, 1.5, inf, -inf]
OUT_OF_DOMAIN_OPS = [
    op for op in REGISTRY.values()
    if op.category in ("elementwise", "arithmetic") and op.has_gradient and op.name not in ("matmul", "where")
]


def probe_inputs(op: Any) -> list[np.ndarray]:
    """One column per tensor input: every probe for one input, every combination for more."""
    n = 3 if op.name == "clip" else op.n_in
    if n == 1:
        return [np.array(PROBES)]
    return [np.array(column) for column in zip(*itertools.product(PAIR_PROBES, repeat=n))]


def derivatives(op: Any, columns: list[np.ndarray], k: int, order: int) -> list[np.ndarray]:
    """The op's elementwise derivatives d^n/dx_k^n for n = 1 .. order."""
    xs = [Tensor(c, requires_grad=True) for c in columns]
    params = dict(op.check.params) if op.check is not None else {}
    y = op(*xs, **params)
    found = []
    for _ in range(order):
        y = grad(y.sum(), xs[k], create_graph=True)
        found.append(np.broadcast_to(y.data, columns[0].shape))
    return found


@pytest.mark.parametrize("op", OUT_OF_DOMAIN_OPS, ids=lambda op: op.name)
def test_a_nan_derivative_stays_nan_at_every_higher_order(op):
    """Out of an op's domain (a negative base to a fractional power, sin(inf), log(-1) ...)
    a derivative that is nan must not become a number one order later, by any input: a nan
    written in as a constant would differentiate to 0. (Mixed derivatives follow the
    conventions of docs/language.md's edge table instead: a ** 0 is the constant 1.)"""
    columns = probe_inputs(op)
    for k in range(len(columns)):
        found = derivatives(op, columns, k, order=3)
        for n, (d, later) in enumerate(zip(found, found[1:]), start=1):
            lost = np.isnan(d) & ~np.isnan(later)
            at = [tuple(float(c[i]) for c in columns) for i in np.flatnonzero(lost)[:5]]
            assert not lost.any(), f"{op.name}: d^{n}/dx_{k}^{n} is nan but the next order is {later[lost][:5]} at {at}"


# Every other op (reductions, linear algebra, losses, scans, shapes): probes made from the
# op's own Check, so an op added to the registry is probed with no list to extend. Each
# differentiated input in turn gets one entry, then every entry, set to a probe value, and
# a square matrix input is also made singular. A nan derivative there is undefined, so
# every higher one is too: the derivative of its sum must still hold a nan. (Whole rows
# of it, for an op that is not elementwise: which entries the nan reaches is the op's.)
STRUCTURED_OPS = [op for op in REGISTRY.values() if op.has_gradient and op not in OUT_OF_DOMAIN_OPS]
EDGE_VALUES = [-inf, -1e300, -1.0, -0.0, 0.0, 1e300, inf]


def base_case(op: Any) -> tuple[list[np.ndarray], dict[str, Any], list[int]]:
    """The op's Check, drawn once: its inputs, params and the inputs differentiated."""
    spec = op.check
    rng = np.random.default_rng(0)
    if spec.make is not None:
        inputs, params = spec.make(rng)
    else:
        inputs, params = [rng.uniform(spec.low, spec.high, size=shape) for shape in spec.shapes[-1]], dict(spec.params)
    diff = list(spec.diff) if spec.diff is not None else list(range(len(inputs)))
    return [np.array(a, dtype=float) for a in inputs], params, diff


def edge_probes(op: Any) -> list[tuple[str, list[np.ndarray]]]:
    inputs, _, diff = base_case(op)
    found = []
    for i in diff:
        for v in EDGE_VALUES:
            for every in (False, True):
                xs = [a.copy() for a in inputs]
                if every or not xs[i].ndim:
                    xs[i][...] = v
                else:
                    xs[i].reshape(-1)[0] = v
                found.append((f"x{i}{'' if every else '[0]'} = {v}", xs))
        if inputs[i].ndim >= 2 and inputs[i].shape[-1] == inputs[i].shape[-2]:
            xs = [a.copy() for a in inputs]
            xs[i][...] = 1.0  # singular (rank 1)
            found.append((f"x{i} singular", xs))
    return found


def derivative_chain(f: Any, columns: list[np.ndarray], k: int, order: int = 3) -> list[np.ndarray] | None:
    """d^n sum(f) / dx_k^n's sums' gradients for n = 1 .. order; None when f refuses the
    inputs (inv of a singular matrix is an error, not a number)."""
    xs = [Tensor(c, requires_grad=True) for c in columns]
    try:
        y = f(*xs)
    except (ValueError, ArithmeticError):
        return None
    found = []
    for _ in range(order):
        y = grad(y.sum(), xs[k], create_graph=True)
        found.append(np.array(y.data, dtype=float))
    return found


@pytest.mark.parametrize("op", STRUCTURED_OPS, ids=lambda op: op.name)
def test_a_nan_derivative_of_any_op_stays_nan_at_every_higher_order(op):
    from .test_every_op import outputs_of

    _, params, diff = base_case(op)
    lost = []
    for label, columns in edge_probes(op):
        for n_out, f in enumerate(outputs_of(op, params)):
            for k in diff:
                found = derivative_chain(f, columns, k)
                for n, (d, later) in enumerate(zip(found or [], (found or [])[1:]), start=1):
                    if np.isnan(d).any() and not np.isnan(later).any():
                        lost.append(f"output {n_out}, d^{n + 1}/dx{k}^{n + 1} at {label}: {later.reshape(-1)[:4]}")
    assert not lost, f"{op.name}: a nan derivative became numbers one order later: " + "; ".join(lost[:5])


def test_the_edge_probes_reach_the_domains_of_the_ops_that_have_one():
    """The probes are not vacuous: each op here has a first derivative that is undefined
    at some probe (log|det| at a singular matrix, a probability out of [0, 1], an inf in
    a variance), and the test above saw it."""
    from .test_every_op import outputs_of

    for name in ("slogdet", "solve", "binary_cross_entropy", "var", "std", "logsumexp", "cumprod", "norm", "det"):
        op = REGISTRY[name]
        _, params, diff = base_case(op)
        seen = any(
            found is not None and np.isnan(found[0]).any()
            for _, columns in edge_probes(op) for f in outputs_of(op, params) for k in diff
            for found in [derivative_chain(f, columns, k, order=1)]
        )
        assert seen, f"no probe makes a derivative of {name} nan"


@pytest.mark.parametrize("source, binding", [
    ("s, l = slogdet(A); grad(sum(grad(l, A)), A)", "A=[[1, 2], [2, 4]]"),  # log|det| = -inf: nan, not zeros
    ("grad(sum(grad(var(x), x)), x)", "x=[1, inf, 2]"),
    ("grad(grad(binary_cross_entropy(p, t), t), t)", "p=-1"),  # a probability of -1: log(-1)
])
def test_a_nan_derivative_stays_nan_one_order_later_through_the_command(source, binding):
    out = eval_json(source, binding, "t=0.5")
    assert np.isnan(np.asarray(out["value"], dtype=float)).any(), out["value"]


# ---- nll_loss: a class that is not the target may have log-probability -inf -----------------


def test_nll_loss_with_minus_infinity_through_the_command():
    out = eval_json("nll_loss(L, [1])", "L=[[-inf, -1]]")
    assert out["value"] == 1.0 and out["grads"]["L"] == [[0.0, -1.0]]  # (torch: 1.0 and [[0, -1]])


def test_nll_loss_of_log_softmax_with_minus_infinity_is_log_of_one_plus_e():
    out = eval_json("nll_loss(log_softmax(L), [1])", "L=[[-inf, 1, 2]]")
    assert same(out["value"], math.log1p(math.e))
    s = 1 / (1 + math.exp(-1))  # softmax of [1, 2], the second entry
    assert same(out["grads"]["L"], [[0.0, -s, s]], rtol=1e-15)


def test_nll_loss_with_probability_targets_skips_the_zero_terms():
    out = eval_json("nll_loss(L, T)", "L=[[-inf, -1]]", "T=[[0, 1]]")
    assert out["value"] == 1.0 and out["grads"]["L"] == [[0.0, -1.0]]


# ---- det: second derivatives at a singular matrix ------------------------------------------------


def det_hessian_2x2() -> np.ndarray:
    """d2 (a00 a11 - a01 a10) / da da: 1 at (00, 11) and (11, 00), -1 at (01, 10) and (10, 01)."""
    h = np.zeros((2, 2, 2, 2))
    h[0, 0, 1, 1] = h[1, 1, 0, 0] = 1.0
    h[0, 1, 1, 0] = h[1, 0, 0, 1] = -1.0
    return h


def test_hessian_of_det_at_a_singular_matrix_through_the_command():
    out = eval_json("hessian(det(A), A)", "A=[[1, 2], [2, 4]]")
    assert np.array_equal(out["value"], det_hessian_2x2())


def leibniz_det(a: list[list[Fraction]]) -> Fraction:
    n = len(a)
    total = Fraction(0)
    for perm in itertools.permutations(range(n)):
        inversions = sum(perm[i] > perm[j] for i in range(n) for j in range(i + 1, n))
        term = Fraction((-1) ** inversions)
        for i, j in enumerate(perm):
            term *= a[i][j]
        total += term
    return total


def exact_det_hessian(a: np.ndarray) -> np.ndarray:
    """d2 det / da_ij da_kl in exact arithmetic: det is affine in each entry, so the mixed
    difference det(A + E_ij + E_kl) - det(A + E_ij) - det(A + E_kl) + det(A) is exact."""
    n = a.shape[0]

    def det_plus(*entries: tuple[int, int]) -> Fraction:
        b = [[Fraction(float(v)) for v in row] for row in a]
        for i, j in entries:
            b[i][j] += 1
        return leibniz_det(b)

    h = np.zeros((n, n, n, n))
    for i, j, k, q in itertools.product(range(n), repeat=4):
        if (i, j) != (k, q):
            h[i, j, k, q] = float(det_plus((i, j), (k, q)) - det_plus((i, j)) - det_plus((k, q)) + det_plus())
    return h


@pytest.mark.parametrize("a", [
    [[1.0, 2.0], [2.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]],
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]], np.zeros((3, 3)).tolist(), np.ones((4, 4)).tolist(),
])
def test_hessian_of_det_at_singular_matrices_is_exact(a):
    a = np.asarray(a)
    x = Tensor(a, requires_grad=True)
    first = grad(x.det(), x, create_graph=True)
    ours = np.stack([grad(first[i, j], x).data for i, j in itertools.product(range(len(a)), repeat=2)])
    assert np.allclose(ours.reshape((len(a),) * 4), exact_det_hessian(a), rtol=1e-14, atol=1e-14)


def test_hessian_of_det_at_a_singular_2x2_matches_torch():
    torch = pytest.importorskip("torch")
    theirs = torch.autograd.functional.hessian(torch.det, torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64))
    assert np.allclose(theirs.numpy(), det_hessian_2x2(), rtol=0, atol=1e-15)  # (torch through an SVD: 1e-16 off)


# ---- norm scales as hypot does -------------------------------------------------------------------


@pytest.mark.parametrize("x", ["1e-200", "1e200", "1e-310", "1.5e308"])
def test_norm_of_tiny_and_huge_vectors_through_the_command(x):
    out = eval_json("norm(v)", f"v=[{x}, {x}]")
    assert same(out["value"], math.hypot(float(x), float(x)), rtol=2e-16)
    assert same(out["grads"]["v"], [math.sqrt(0.5)] * 2, rtol=2e-16)


def test_norm_second_derivative_at_a_huge_vector_is_the_projection_over_the_norm():
    x = Tensor([1e200, 1e200], requires_grad=True)
    first = grad(x.norm(), x, create_graph=True)
    h = np.stack([grad(first[i], x).data for i in range(2)])
    r = math.hypot(1e200, 1e200)
    assert same(h, np.array([[0.5, -0.5], [-0.5, 0.5]]) / r, rtol=1e-15)


def test_norm_along_an_axis_keeps_zeros_infinities_and_nan():
    out = eval_json("norm(v, axis=1)", "v=[[3, 4], [0, 0], [inf, 1], [nan, 1], [1e-300, 0]]")
    assert [float(v) for v in out["value"]][:3] == [5.0, 0.0, inf] and out["value"][4] == 1e-300  # (JSON spells inf "inf")
    assert math.isnan(float(out["value"][3]))


# ---- erf, erfc, gelu far out -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_erf_derivatives_far_out_are_zero_not_nan(name):
    x = -np.geomspace(1e100, 1e308, 2082) * np.resize([1.0, -1.0], 2082)
    t = Tensor(x, requires_grad=True)
    first = grad(getattr(t, name)().sum(), t, create_graph=True)
    second = grad(first.sum(), t)
    assert not first.data.any() and not second.data.any()


def test_erf_gradient_far_out_through_the_command():
    out = eval_json("grad(erfc(x), x)", "x=-3.7e140")
    assert out["value"] == 0.0 and out["grads"]["x"] == 0.0


def test_gelu_second_derivative_at_1e100_through_the_command():
    out = eval_json("grad(grad(gelu(x), x), x)", "x=1e100")
    assert out["value"] == 0.0  # phi(x) (2 - x**2), far below the smallest float


# ---- second derivatives that cancel, and tails -----------------------------------------------------


@pytest.mark.parametrize("name, second", [
    ("atanh", lambda x: 2 * x / (1 - x * x) ** 2),
    ("asin", lambda x: x / (1 - x * x) ** 1.5),
    ("acos", lambda x: -x / (1 - x * x) ** 1.5),
    ("sigmoid", lambda x: -math.tanh(x / 2) / (4 * math.cosh(x / 2) ** 2)),
])
def test_second_derivatives_near_zero_do_not_cancel_through_the_command(name, second):
    # The value is the first derivative; the gradient of its sum, the second.
    out = eval_json(f"grad(sum({name}(x)), x)", "x=[1e-10, 1e-300, -3e-17]")
    assert same(out["grads"]["x"], [second(v) for v in (1e-10, 1e-300, -3e-17)], rtol=1e-15)


def test_atan2_derivatives_at_tiny_and_huge_points_through_the_command():
    out = eval_json("atan2(y, x)", "y=1e-300", "x=1e-300")
    assert same(out["grads"]["y"], 5e299) and same(out["grads"]["x"], -5e299)  # x / (x**2 + y**2) = 1 / (2e-300)
    out = eval_json("atan2(y, x)", "y=1e200", "x=1e200")
    assert same(out["grads"]["y"], 5e-201) and same(out["grads"]["x"], -5e-201)


def test_silu_far_left_is_a_normal_number_through_the_command():
    out = eval_json("silu(x)", "x=-710")
    assert same(out["value"], -710 * math.exp(-710), rtol=2e-16)  # e**-710 / (1 + e**-710) is e**-710 to 1e-308


def test_gelu_far_left_is_accurate_through_the_command():
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(50):
        exact = float(-37 * mpmath.ncdf(-37))
    assert same(eval_json("gelu(x)", "x=-37")["value"], exact, rtol=1e-15)


def test_tanh_second_derivative_far_out_through_the_command():
    out = eval_json("grad(grad(tanh(x), x), x)", "x=-300")
    assert same(out["value"], 2 * math.tanh(300) / math.cosh(300) ** 2, rtol=1e-15)  # 2.1e-260
