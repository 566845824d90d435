"""The fast paths give what the general paths give, bit for bit.

Each section guards one row of the fast-path ledger in docs/performance.md, and the
ledger names every test here (the last test holds the two together): a fast path that
is not on the ledger has no equivalence test, and one that is has one.

A plain backward pass (VJPs over arrays, ARRAY_MATH) takes shortcuts in the common
cases: tanh's and relu's VJPs and relu's forward with fewer passes, products of two
matrices without the lift to stacks, nan found with one pass (a dot product), the common
call of `apply`, two-input VJPs called without unpacking. The general path is the same
VJP run over Tensors (TENSOR_MATH, what create_graph=True runs), which takes none of
them; the forwards are compared with the formulas they replaced. A gradient check takes
two: checks of numbers replayed without copies, and a few entries compared in Python
floats; their general paths are replays per column and compare's NumPy passes. Every
comparison is exact: same bits, same signs of zero, nan where nan (its payload aside),
on the edges where shortcuts go wrong: nan, +-inf, +-0, subnormals, overflow, ties,
broadcasting, 0-d and empty tensors.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gradcalc.autodiff.gradcheck as gradcheck_module
from gradcalc.autodiff import Tensor, grad, no_grad, ops, topological_order
from gradcalc.autodiff.errors import SizeLimitError
from gradcalc.autodiff.forward import _settled
from gradcalc.autodiff.gradcheck import gradcheck_graph
from gradcalc.autodiff.limits import STEPS, matmul_shape, step_budget
from gradcalc.autodiff.ops import arithmetic
from gradcalc.autodiff.ops.arithmetic import _pow_dbase, masked, scaled
from gradcalc.autodiff.ops.elementwise import _relu
from gradcalc.autodiff.registry import ARRAY_MATH, REGISTRY, TENSOR_MATH
from gradcalc.autodiff.replay import Tape
from gradcalc.parser import LanguageError, datafiles
from tests.test_replay import METHODS, graph, per_column

INF, NAN = np.inf, np.nan
X_EDGES = [NAN, INF, -INF, 0.0, -0.0, 5e-324, -5e-324, 1e-310, 1e-300, -1e-300, 0.5, -0.5, 1.0, -1.0,
           20.0, -20.0, 40.0, -40.0, 355.0, -360.0, 380.0, 710.0, -710.0, 1e300, -1e308]
G_EDGES = [0.0, -0.0, 1.0, -2.5, INF, -INF, NAN, 1e-300, 1e300]


def same(a, b) -> bool:
    """Equal bit for bit, apart from nan payloads: values, nan positions, signs of zero
    (of both parts, for complex numbers)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if np.iscomplexobj(a):  # each part on its own: its nan, its signs of zero
        return same(a.real, b.real) and same(a.imag, b.imag)
    if not np.array_equal(a, b, equal_nan=True):
        return False
    nan = np.isnan(a)
    return bool(np.array_equal(np.signbit(a)[~nan], np.signbit(b)[~nan]))


def grid() -> tuple[np.ndarray, np.ndarray]:
    """x and g of the same 2-d shape holding every (x, g) pair of the edges."""
    x, g = np.meshgrid(np.array(X_EDGES), np.array(G_EDGES), indexing="ij")
    return np.ascontiguousarray(x), np.ascontiguousarray(g)


def general_vjp(name: str, g, ans, *inputs, k: int = 0):
    """The VJP of input k on the general path: over Tensors, recording nothing."""
    with no_grad():
        out = REGISTRY[name].vjp_for(k)(TENSOR_MATH, Tensor(g), Tensor(ans), *(Tensor(a) for a in inputs))
    return out.data


def plain_vjp(name: str, g, ans, *inputs, k: int = 0):
    return REGISTRY[name].vjp_for(k)(ARRAY_MATH, g, ans, *inputs)


def both_ways(f, *arrays):
    """Gradients of sum(f(...)) on the plain pass and on the general (create_graph) pass."""
    def run(create_graph):
        leaves = [Tensor(a, requires_grad=True) for a in arrays]
        with np.errstate(all="ignore"):
            gs = grad(f(*leaves).sum(), leaves, create_graph=create_graph)
        return [g.data for g in gs]
    return run(False), run(True)


def edge_matrix(shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, shape)
    flat = a.reshape(-1)
    flat[: min(flat.size, 6)] = [NAN, INF, -INF, 0.0, -0.0, 1e-310][: min(flat.size, 6)]
    return a


# ---- tanh's VJP, and the nan guard (masked) on plain arrays ----------------------------------------


@pytest.mark.parametrize("name", ["relu", "tanh", "sigmoid", "exp", "log", "sqrt", "sin", "abs", "softplus"])
@pytest.mark.parametrize("shape", ["grid", "0-d", "scalar g", "row", "empty"])
def test_unary_vjps_take_the_same_values_as_the_general_path(name, shape):
    x, g = grid()
    cases = {"grid": [(x, g)], "row": [(x[:, :1].T.copy(), g[:, :1].T.copy())], "empty": [(np.zeros((0, 3)), np.zeros((0, 3)))],
             "0-d": [(np.array(a), np.array(b)) for a in X_EDGES for b in G_EDGES],
             # 0-d results of NumPy's arithmetic are scalars, so a gradient may be one
             "scalar g": [(np.array(a), np.float64(b)) for a in X_EDGES for b in G_EDGES]}[shape]
    for xs, gs in cases:
        with np.errstate(all="ignore"):
            ans = REGISTRY[name].forward(xs)
            fast = plain_vjp(name, gs, np.asarray(ans), xs)
            general = general_vjp(name, gs, ans, xs)
        assert same(fast, general), (name, xs, gs, fast, general)


@pytest.mark.parametrize("values", [
    [1.0, 2.0], [NAN, 1.0], [INF, -INF], [INF, -INF, NAN], [1e308, 1e308], [], [0.0, -0.0],
    [1e308, 1e308, -1e308, -1e308], [1e200, -1e200], [5e-324, -5e-324], [-NAN],
    [1 + 2j, NAN + 0j], [complex(INF, 0), 1j], [complex(0, NAN), 0j], [complex(1e300, 1e300)],
])
def test_masked_is_its_definition(values):
    out = np.array(values).reshape(-1, 1) * np.ones((1, 2))
    g = np.zeros_like(out)
    g[::2] = 1.0  # zero upstream gradient in every other row
    expected = np.where((g == 0) & np.isnan(out), 0.0, out)  # np.isnan: either part of a complex
    assert same(masked(ARRAY_MATH, g, out), expected)
    with no_grad():
        assert same(masked(TENSOR_MATH, Tensor(g), Tensor(out)).data, expected)
    assert same(masked(ARRAY_MATH, np.array(0.0), np.array(NAN)), np.array(0.0))
    assert same(masked(ARRAY_MATH, np.float64(0.0), np.float64(NAN)), np.array(0.0))  # NumPy's 0-d results
    assert masked(ARRAY_MATH, np.float64(1.0), np.float64(NAN)) != masked(ARRAY_MATH, np.float64(1.0), np.float64(NAN))


def test_masked_sees_every_nan_whatever_the_layout():
    """The check flattens `out` (np.vdot): a nan must be found in a transposed, strided,
    broadcast or 0-d array as in a contiguous one."""
    base = np.arange(12.0).reshape(3, 4)
    base[2, 1] = NAN
    layouts = [base, base.T, base[:, ::2], base[::-1], np.broadcast_to(base[2], (5, 4)), np.array(NAN), base.astype(complex)]
    for out in layouts:
        g = np.zeros(out.shape)
        expected = np.where(np.isnan(out), 0.0, out)
        assert same(masked(ARRAY_MATH, g, out), expected)
        assert same(masked(ARRAY_MATH, np.ones(out.shape), out), out)


FACTOR_EDGES = [NAN, INF, -INF, 0.0, -0.0, 5e-324, 1.0, -2.5, 1e154, 1e200, -1e308]


@pytest.mark.parametrize("layout", ["same shape", "a batch of rows", "0-d", "numbers", "complex"])
def test_scaled_is_masked_of_the_product(layout):
    """scaled(m, g, f) tests the factor instead of the product: bit for bit masked(m, g, g * f),
    whatever the factor holds (nan, inf, zeros of either sign, squares that overflow), on
    arrays and recorded Tensors, and with g a batch of rows of the factor's shape."""
    rng = np.random.default_rng(7)
    cases = []
    for edge in FACTOR_EDGES:
        f = rng.uniform(-2, 2, 4)
        f[1] = edge
        g = rng.uniform(-2, 2, (len(G_EDGES), 4))
        g[:, 1] = G_EDGES  # (every g beside every factor edge)
        if layout == "same shape":
            cases += [(row, f) for row in g]
        elif layout == "a batch of rows":
            cases.append((g, f))
        elif layout == "0-d":
            cases += [(np.array(b), np.array(edge)) for b in G_EDGES]
        elif layout == "numbers":
            cases += [(np.float64(b), edge) for b in G_EDGES]
        else:
            cases.append((g + 1j * g[::-1], f - 1j * f[::-1]))
    for g, f in cases:
        with np.errstate(all="ignore"):
            expected = masked(ARRAY_MATH, g, g * f)
            assert same(scaled(ARRAY_MATH, g, f), expected), (g, f)
            if np.ndim(g) and np.ndim(f):
                gt, ft = Tensor(g, requires_grad=True), Tensor(f, requires_grad=True)
                assert same(scaled(TENSOR_MATH, gt, ft).data, masked(TENSOR_MATH, gt, gt * ft).data), (g, f)


@pytest.mark.parametrize("edge", [NAN, INF, -INF, 0.0, 1e200, 1.0])
def test_a_settled_tangent_is_its_definition(edge):
    """forward.py's _settled tests a term for nan in one pass first: where it finds none the
    term is returned as it is, and a term with nan (or inf, or squares that overflow)
    still gets x * (z * 0) at its nan entries."""
    z_data = np.array([[1.0, edge, -0.0], [edge * 0.0 if np.isfinite(edge) else NAN, 2.0, 3.0]])
    z, x = Tensor(z_data, requires_grad=True), Tensor(np.array([0.5, -1.5, 2.0]), requires_grad=True)
    with np.errstate(all="ignore"):
        out = _settled(TENSOR_MATH, z, x)
        lost = np.isnan(z_data)
        expected = np.where(lost, (z + x * (z * 0.0)).data, z_data)
    assert same(out.data, expected)
    if not lost.any():
        assert out is z


# ---- relu's forward and VJP on real arrays and single numbers --------------------------------------


def test_relu_forward_is_the_formula_it_replaced():
    x = np.array(X_EDGES)
    for xs in (x, x.reshape(5, 5), np.array(-0.0), np.array(NAN), np.zeros((0,))):
        assert same(_relu(xs), np.where(xs > 0, xs, np.where(np.isnan(xs), xs, 0.0)))
    assert not np.signbit(_relu(np.array([-0.0]))).any()  # -0.0 becomes +0.0


def test_relu_vjp_passes_nothing_down_the_branch_not_taken():
    x = np.array([-1.0, -0.0, 0.0, 2.0, NAN])
    g = np.array([INF, NAN, -INF, -0.0, 1.0])
    out = plain_vjp("relu", g, _relu(x), x)
    assert same(out, np.array([0.0, 0.0, 0.0, -0.0, NAN]))


# ---- whole backward passes: the arities spelled out in backprop.py ---------------------------------


def test_the_benchmark_chain_with_edges_is_the_same_on_both_paths():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 0.9, (8, 8))
    x[0, :5] = [NAN, INF, -INF, 0.0, -0.0]
    W, B, C = rng.uniform(-1, 1, (8, 8)) / 8, rng.uniform(-0.1, 0.1, (8, 8)), rng.uniform(0.5, 1.5, (8, 8))
    W[1, 1] = 0.0

    def chain(x):
        y = x
        for _ in range(3):
            y = (y @ Tensor(W) + Tensor(B)).tanh() * Tensor(C)
            y = y.exp().log().relu().sigmoid()
        return y

    plain, general = both_ways(chain, x)
    assert same(plain[0], general[0])


# ---- apply's common call and new_tensor's construction ---------------------------------------------


def test_every_op_costs_exactly_one_step_and_inputs_are_converted():
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    with step_budget():
        start = STEPS.left
        y = (x > 0) + True  # bools enter as 0.0 and 1.0
        z = ops.sum(x * 2, dim=0, keepdim=True)  # a number, PyTorch's spellings
        w = ops.reshape(x, 4)  # a parameter given positionally
        assert start - STEPS.left == 5  # >, +, *, sum, reshape: making tensors of 2 and True is no op
    assert y.data.tolist() == [[2.0, 2.0], [2.0, 2.0]] and y.data.dtype == np.float64
    assert z.shape == (1, 2) and z.data.tolist() == [[4.0, 4.0]]
    assert w.shape == (4,) and w.requires_grad and not y.requires_grad


def test_numbers_and_arrays_among_the_inputs_become_constants_in_their_places():
    x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    cond = np.array([True, False, True])
    y = ops.where(cond, 10.0, x)  # an array, a number, then a tensor
    assert [type(p) for p in y.parents] == [Tensor, Tensor, Tensor]
    assert y.parents[2] is x and not y.parents[0].requires_grad and not y.parents[1].requires_grad
    assert y.parents[0].data.dtype == np.bool_ and y.parents[1].data.shape == ()
    assert same(y.data, np.array([10.0, -2.0, 10.0]))
    y.sum().backward()
    assert same(x.grad, np.array([0.0, 1.0, 0.0]))
    z = ops.add(2, 3)  # no tensor at all: a constant result
    assert same(z.data, np.array(5.0)) and not z.requires_grad and z.parents == ()
    with pytest.raises(TypeError):
        ops.add(x, object())


# ---- matmul's VJPs for two matrices ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [float, complex])
@pytest.mark.parametrize("shape_a, shape_b", [((4, 3), (3, 5)), ((1, 3), (3, 1)), ((0, 3), (3, 2)), ((3, 0), (0, 2)), ((2, 2), (2, 2))])
def test_two_matrix_vjps_are_the_general_ones(shape_a, shape_b, dtype):
    a = edge_matrix(shape_a, 4).astype(dtype)
    b = edge_matrix(shape_b, 5).astype(dtype)
    if dtype is complex:
        a = a + 1j * edge_matrix(shape_a, 6)
    with np.errstate(all="ignore"):
        ans = a @ b
        for g in (edge_matrix(ans.shape, 7), np.ones(ans.shape).T.copy().T):
            for k in (0, 1):
                fast = plain_vjp("matmul", g, ans, a, b, k=k)
                assert same(fast, general_vjp("matmul", g, ans, a, b, k=k)), (k, g)


@pytest.mark.parametrize("shape_a, shape_b", [
    ((4, 3), (3, 5)), ((3,), (3, 5)), ((4, 3), (3,)), ((3,), (3,)), ((2, 4, 3), (3, 5)), ((4, 3), (2, 3, 5)), ((0, 3), (3, 2)),
])
def test_matmul_gradients_are_the_same_on_both_paths(shape_a, shape_b):
    for seed in range(3):
        plain, general = both_ways(lambda a, b: a @ b, edge_matrix(shape_a, seed), edge_matrix(shape_b, seed + 10))
        assert all(same(p, q) for p, q in zip(plain, general))


# ---- matmul_shape's two matrices --------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [
    ((3, 4), (4, 5)), ((1, 1), (1, 1)), ((0, 4), (4, 0)), ((4, 0), (0, 3)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
    ((7, 3, 4), (7, 4, 2)), ((2, 1, 3, 4), (5, 4, 6)), ((1, 3, 4), (6, 4, 2)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
])
def test_matmul_shape_is_numpys(a, b):
    assert matmul_shape(a, b) == (np.zeros(a) @ np.zeros(b)).shape


# ---- CSV files read by NumPy's parser --------------------------------------------------------------


def _both_readers(tmp_path: Path, text: str | bytes) -> tuple[object, object]:
    """What reading the file gives by the NumPy path and by csv's rows alone: the array or
    the error's message, and what is said of a header."""
    path = tmp_path / "t.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    outcomes = []
    for plain in (datafiles._plain_table, lambda *args: None):
        said: list[str] = []
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(datafiles, "_plain_table", plain)
                outcomes.append((datafiles._read_csv(path, None, said.append), said))
        except LanguageError as err:
            outcomes.append((err.message, said))
    return outcomes[0], outcomes[1]


CSV_EDGES = [
    "1,2\n3,4\n", "a,b\n1,2\n3,4\n", "\ufeffa,b\n1,2\n", "\n\n1,2\n\n3,4\n\n", "1,2\r\n3,4\r\n", "x\n1\n2\n3\n",
    "nan,inf,-inf,-0.0\n5e-324,1e-310,1e308,-1e308\n", "1e5,2E-3\n.5,5.\n", " 1 , 2 \n3,4\n", "1_000,2\n3,4\n",
    "1,2\n3\n", "1,2\n3,x\n", "a,b\n", "", "\n\n", "1,2,\n3,4,\n", "a,a\n1,2\n", "1,2\n   \n3,4\n", "0x10,2\n3,4\n",
    "Infinity,NaN\n-infinity,+1\n", "1,2\n3,4", "a,b\r\n1,2\r\n",
]


@pytest.mark.parametrize("text", CSV_EDGES)
def test_csv_files_read_the_same_by_numpy_and_by_csv_rows(tmp_path, text):
    fast, general = _both_readers(tmp_path, text)
    assert fast[1] == general[1]
    if isinstance(general[0], str):
        assert fast[0] == general[0]
    else:
        assert same(fast[0], general[0]) and fast[0].shape == general[0].shape


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=3, max_size=3), min_size=1, max_size=6),
       header=st.booleans(), crlf=st.booleans())
def test_random_tables_read_the_same_by_numpy_and_by_csv_rows(tmp_path, rows, header, crlf):
    end = "\r\n" if crlf else "\n"
    text = ("p,q,r" + end if header else "") + end.join(",".join(repr(v) for v in row) for row in rows) + end
    fast, general = _both_readers(tmp_path, text)
    assert fast[1] == general[1] and same(fast[0], general[0]) and same(fast[0], np.array(rows))


# ---- gradcheck: checks of numbers replayed per column without copies (number_columns) ---------------

NUMBERS = "s = 0.7\nt = -1.3\nu = 2.1\nz = 0.0\nn = -0.0\nm = -1.0\np = inf\nq = nan\nbig = 1e308\ntiny = 5e-324"
NUMBER_EXPRESSIONS = [
    "tanh(s) * t + exp(u / 3)", "sigmoid(s * t) - log(u)", "relu(s) * sin(t) + u**2", "(s*t + exp(u)).relu()/s",
    "softplus(s - t) * cos(u)", "relu(z) * s", "abs(n) + s", "sqrt(z) + s", "log(z) * s", "big * big * s", "tiny * s",
    "exp(big) * s", "s / z", "sqrt(m) * s", "[s, t, u] * 2", "p * m", "q + z", "s ** t", "maximum(s, t) * u",
    "where(s > 0, t, u) * s", "clip(s, t, u) * z", "sum([s, t]) * u", "s * s * s", "floor(s) * t",
]


def assert_number_columns_match(output, leaves, method):
    """number_columns against replays per column of 0-d arrays, bit for bit: numbers go
    through replays as NumPy scalars, and the arithmetic ops call NumPy's ufuncs, so a
    scalar takes the array loops' path (a complex product by `*` of two scalars rounds
    without their fused multiply-adds, and differed in its last bits)."""
    with np.errstate(all="ignore"):
        got = gradcheck_module.number_columns(Tape(output, topological_order(output)), leaves, method)
        want = per_column(output, leaves, method)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.array_equal(g, w, equal_nan=True), (g, w)


@pytest.mark.parametrize("expression", NUMBER_EXPRESSIONS)
@pytest.mark.parametrize("method", METHODS)
def test_number_columns_are_the_replays_per_column_bit_for_bit(expression, method):
    assert_number_columns_match(*graph(NUMBERS, expression), method)


@settings(max_examples=100, deadline=None)
@given(st.floats(-3, 3), st.floats(-3, 3), st.sampled_from([
    "s * s * s", "tanh(s) * t", "sigmoid(s * t) * s", "softplus(s) * t * t", "s ** t * s", "exp(s) / t * s", "2 / s * s + t",
    "(s * s) ** t", "s ** 0.5 * t", "s ** 2 * t",
]), st.sampled_from(METHODS))
def test_number_columns_are_bit_for_bit_at_any_point(s, t, expression, method):
    """At random numbers too (where a complex product of two scalars by `*` had differed
    in its last bits from the array path, 55 columns in 300)."""
    assert_number_columns_match(*graph(f"s = {s!r}\nt = {t!r}", expression), method)


def test_checks_of_numbers_replay_per_column_below_a_dozen_replays(monkeypatch):
    calls = []
    real = Tape.batched_jacobian
    monkeypatch.setattr(Tape, "batched_jacobian", lambda self, *a: calls.append(a) or real(self, *a))
    result = gradcheck_graph(*graph(NUMBERS, "erf(s) * t + u"))  # central differences, 6 replays
    assert calls == [] and result.method == "central" and result.passed
    many = ", ".join(f"a{k}" for k in range(6))
    gradcheck_graph(*graph("\n".join(f"a{k} = {k + 1}" for k in range(6)), f"erf(sum([{many}]))"))  # 12 replays
    assert len(calls) == 1


def test_repeated_or_non_number_leaves_take_the_reference_path():
    output, leaves = graph(NUMBERS, "s * t")
    twice = [leaves[0], leaves[0]]
    with np.errstate(all="ignore"):
        got = gradcheck_graph(output, twice).numeric
    assert [np.asarray(g).tolist() for g in got] == [np.asarray(w).tolist() for w in per_column(output, twice, "complex")]
    assert not gradcheck_module._numbers(twice)
    assert not gradcheck_module._numbers([Tensor(np.array([1.0]), requires_grad=True)])


# ---- gradcheck: a few entries compared in Python floats (_compare_few) ------------------------------

ENTRY_EDGES = [0.0, -0.0, 5e-324, -5e-324, 1e-310, 1e-300, 0.5, -1.0, 1.0 + 2**-52, 1e300, -1e308, NAN, INF, -INF]
ENTRIES = st.sampled_from(ENTRY_EDGES) | st.floats(-4, 4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(ENTRIES, ENTRIES), max_size=gradcheck_module.FEW_ENTRIES), st.integers(1, 3),
       st.sampled_from([(1e-10, 1e-8), (1e-5, 1e-3), (0.0, 0.0)]))
def test_few_entries_are_compared_as_numpy_compares_them(pairs, leaves, tolerances):
    """compare's verdict (errors, pass, worst entry) with the entries in Python floats is
    the NumPy path's, over Jacobians of 1 to 3 leaves (rows and columns, some empty)."""
    cut = [len(pairs) * k // leaves for k in range(leaves + 1)]
    chunks = [np.array(pairs[a:b], dtype=float).reshape(-1, 2) for a, b in zip(cut, cut[1:])]
    shapes = [(len(c), 1) if k % 2 else (1, len(c)) for k, c in enumerate(chunks)]
    analytic = [c[:, 0].reshape(shape) for c, shape in zip(chunks, shapes)]
    numeric = [c[:, 1].reshape(shape) for c, shape in zip(chunks, shapes)]
    fast = gradcheck_module.compare(analytic, numeric, *tolerances)
    with mock.patch.object(gradcheck_module, "FEW_ENTRIES", -1), np.errstate(all="ignore"):
        general = gradcheck_module.compare(analytic, numeric, *tolerances)
    assert repr(fast) == repr(general)  # (a float's repr is its bits, the sign of 0 too; nan payloads aside)


# ---- batches of scaled identity rows (a Jacobian's seed) through scaling, reshape and matmul ----------


def _jacobians_both_ways(f, x):
    from gradcalc.autodiff import batching as b
    from gradcalc.autodiff import jacfwd, jacrev

    fast = [jacrev(f)(Tensor(x)).data, jacfwd(f)(Tensor(x)).data]
    b.DIAGONAL_BATCHES[0] = False
    try:
        dense = [jacrev(f)(Tensor(x)).data, jacfwd(f)(Tensor(x)).data]
    finally:
        b.DIAGONAL_BATCHES[0] = True
    return fast, dense


EDGY = np.array([0.0, -0.0, 1e-310, -2.5, np.inf, -np.inf, np.nan, 3.0])


@pytest.mark.parametrize("name", ["tanh(W @ x)", "x @ W * 2", "-(W @ x) / c", "reshape(x * c, (2, 4)) @ W2", "W @ sin(x) * c"])
def test_diagonal_batches_give_the_dense_batches_jacobians(name):
    """jacrev and jacfwd with the identity's rows kept diagonal equal the dense rows (the
    signs of zeros aside), nan, infinities, zeros and subnormals included: a factor with an
    inf or nan takes the dense path, whose 0 * inf the scaled rows would not have."""
    from gradcalc.autodiff import ops as T

    rng = np.random.default_rng(3)
    W, W2, c = Tensor(rng.normal(size=(8, 8))), Tensor(rng.normal(size=(4, 3))), Tensor(EDGY[::-1].copy())
    W.data[2, 3] = np.inf  # (a matrix with an infinity: the dense product)
    fs = {
        "tanh(W @ x)": lambda x: T.tanh(W @ x), "x @ W * 2": lambda x: x @ W * 2.0, "-(W @ x) / c": lambda x: -(W @ x) / c,
        "reshape(x * c, (2, 4)) @ W2": lambda x: T.reshape(x * c, shape=(2, 4)) @ W2, "W @ sin(x) * c": lambda x: W @ T.sin(x) * c,
    }
    for x in (EDGY, rng.normal(size=8)):
        fast, dense = _jacobians_both_ways(fs[name], x)
        for a, b in zip(fast, dense):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["sum(tanh(W @ x))", "sum(cumsum(x * c) ** 2)", "sum(reshape(x, (2, 4)) @ W2) * sum(x)"])
def test_diagonal_batches_at_second_order_give_the_dense_batches(name):
    """Second derivatives through the scaled rows, whose dense rows are made only when an
    op without a diagonal rule reads them (cumsum), recorded as they would have been:
    hessian (forward over reverse) and jacrev of jacrev (reverse over reverse) equal the
    dense rows' bit for bit."""
    from gradcalc.autodiff import batching as b
    from gradcalc.autodiff import hessian, jacrev
    from gradcalc.autodiff import ops as T

    rng = np.random.default_rng(5)
    W, W2, c = Tensor(rng.normal(size=(8, 8))), Tensor(rng.normal(size=(4, 3))), Tensor(rng.normal(size=8))
    fs = {
        "sum(tanh(W @ x))": lambda x: T.sum(T.tanh(W @ x)), "sum(cumsum(x * c) ** 2)": lambda x: T.sum(T.cumsum(x * c, axis=0) ** 2.0),
        "sum(reshape(x, (2, 4)) @ W2) * sum(x)": lambda x: T.sum(T.reshape(x, shape=(2, 4)) @ W2) * T.sum(x),
    }
    f, x = fs[name], rng.normal(size=8)

    def both() -> list[np.ndarray]:
        return [hessian(f)(Tensor(x)).data, jacrev(jacrev(f))(Tensor(x)).data]

    fast = both()
    with _switched(b.DIAGONAL_BATCHES, False):
        dense = both()
    for one, other in zip(fast, dense):
        np.testing.assert_array_equal(one, other)


@pytest.mark.parametrize("mode", ["jacfwd", "jacrev", "hessian"])
def test_a_matrix_whose_squares_overflow_takes_the_dense_rows(mode):
    """A finite matrix with an entry of 1e200: the Jacobian is the same either way, but a
    derivative taken through it again squares that entry, and the dense rows' 0 * inf is
    nan there where the scaled rows had none (found by a helper's hostile inputs). The
    scaled rows step aside for it, so both paths (and PyTorch) give nan."""
    from gradcalc.autodiff import batching as b
    from gradcalc.autodiff import grad, hessian, jacfwd, jacrev
    from gradcalc.autodiff import ops as T

    transform = {"jacfwd": jacfwd, "jacrev": jacrev, "hessian": hessian}[mode]

    def both() -> list[np.ndarray]:
        x, W = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True), Tensor(np.array([[1e200, 1.0, 2.0]]), requires_grad=True)
        J = transform(lambda v, M: T.sum((v @ M.T) ** 2.0))(x, W)
        return [J.data, *(g.data for g in grad(T.sum(J * J), [x, W]))]

    with np.errstate(all="ignore"):
        fast = both()
        with _switched(b.DIAGONAL_BATCHES, False):
            dense = both()
    for one, other in zip(fast, dense):
        np.testing.assert_array_equal(one, other)


# ---- a batch times one matrix: NumPy's broadcast product ----------------------------------------


@pytest.mark.parametrize("item", [(4,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("levels", [1, 2])
@pytest.mark.parametrize("side", ["batch @ W", "W @ batch"])
def test_a_batch_times_one_matrix_is_the_lifted_product(item, levels, side):
    """vmap of x @ W and of W @ x over batches of vectors and matrices (nested too): values,
    gradients by both and second derivatives as the general rule's lifted stack of products
    gives them."""
    from gradcalc.autodiff import batching as b
    from gradcalc.autodiff import grad, vmap
    from gradcalc.autodiff import ops as T

    rng = np.random.default_rng(len(item) + 10 * levels)
    if side == "W @ batch":  # the items' first axis (a vector's only one) meets W's columns
        item = item[-1:] if len(item) == 1 else item[:-2] + item[-1:] + item[-2:-1]
    X, W = rng.normal(size=(2,) * (levels - 1) + (5,) + item), rng.normal(size=(4, 3) if side == "batch @ W" else (3, 4))
    product = (lambda r, v: r @ v) if side == "batch @ W" else (lambda r, v: v @ r)

    def both() -> list[np.ndarray]:
        x, w = Tensor(X, requires_grad=True), Tensor(W, requires_grad=True)
        f = lambda r, v: T.sum(T.tanh(product(r, v)) ** 2)  # noqa: E731
        mapped = grad(f)
        for _ in range(levels):
            mapped = vmap(mapped, in_axes=(0, None))
        per_row = mapped(x, w)
        values = vmap(lambda r: product(r, w))(x) if levels == 1 else vmap(vmap(lambda r: product(r, w)))(x)
        first = grad(T.sum(per_row * per_row), [x, w], create_graph=True)
        second = grad(T.sum(first[1] * first[1]) + T.sum(first[0]), [x, w])
        return [values.data, per_row.data, *(g.data for g in first), *(g.data for g in second)]

    fast = both()
    with _switched(b.BATCH_TIMES_MATRIX, False):
        lifted = both()
    for one, other in zip(fast, lifted):
        assert one.shape == other.shape
        np.testing.assert_allclose(one, other, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize(("product", "rows"), [("W @ r", (5, 6)), ("r @ W", (5, 6)), ("W @ r", (5, 6, 2)), ("r @ W", (5, 2, 6))])
def test_items_that_do_not_fit_one_matrix_are_refused_in_their_own_shapes(product, rows):
    """vmap of W @ r or r @ W with items that do not fit W: the error names W's shape and
    one item's, in the order written, on both paths; not the physical batch's (transposed
    and swapped for W times a batch of vectors; found by a helper)."""
    from gradcalc.autodiff import batching as b
    from gradcalc.autodiff import vmap
    from gradcalc.autodiff.errors import ShapeError

    W = Tensor(np.ones((3, 4)))
    f = (lambda r: W @ r) if product == "W @ r" else (lambda r: r @ W)
    item = str(rows[1:])
    shown = f"(3, 4) and {item}" if product == "W @ r" else f"{item} and (3, 4)"
    for on in (True, False):
        with _switched(b.BATCH_TIMES_MATRIX, on), pytest.raises(ShapeError) as caught:
            vmap(f)(Tensor(np.ones(rows)))
        if on:  # (the general path reports its lifted stack: (3, 4) and (5, 6, 1))
            assert f"the shapes {shown} do not fit together" in str(caught.value)


# ---- the ledger and this file name the same tests -------------------------------------------------


def test_the_ledger_names_exactly_the_tests_of_this_file():
    text = (Path(__file__).parents[1] / "docs" / "performance.md").read_text(encoding="utf-8")
    ledger = text.split("## The fast-path ledger", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in ledger.splitlines() if line.startswith("| ") and "(where)" not in line]
    named = {name for row in rows for name in re.findall(r"test_\w+", row.rsplit(" | ", 1)[1])}
    here = {name for name in globals() if name.startswith("test_")} - {"test_the_ledger_names_exactly_the_tests_of_this_file"}
    assert named - here == set(), f"the ledger names tests this file lacks: {sorted(named - here)}"
    assert here - named == set(), f"tests here that no ledger row names (add them to its last column): {sorted(here - named)}"


# ---- pow's VJP by the base for a whole power given as one number ----------------------------------
# (the squares of an L2 term): the checks for 0 ** 0, fractional powers of negative bases and a
# nan through a zero exponent cannot arise there, so the path must give the general one's bits.

EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e308, -1e-320, math.inf, -math.inf, math.nan]
values = st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True, allow_infinity=True, width=64))


@settings(max_examples=400, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 6), elements=values), hnp.arrays(np.float64, st.integers(1, 6), elements=values),
       st.sampled_from([1.0, 2.0, 3.0, 4.0, 7.0, 1e6]))
def test_a_whole_power_gives_the_general_paths_bits(a, g, k):
    n = min(len(a), len(g))
    a, g = a[:n], g[:n]
    with np.errstate(all="ignore"):
        ans = a**k
        fast = _pow_dbase(ARRAY_MATH, g, ans, a, np.array(k))  # one number: the whole-power path
        with mock.patch.object(arithmetic, "WHOLE_POWERS", [False]):  # the same 0-d exponent through every check
            general = _pow_dbase(ARRAY_MATH, g, ans, a, np.array(k))
    np.testing.assert_array_equal(fast, general)


@pytest.mark.parametrize("k", [1.0, 2.0, 3.0])
def test_a_whole_power_agrees_with_pytorch(k):
    torch = pytest.importorskip("torch")
    a = np.array([-3.0, -0.5, 0.0, 0.25, 2.0, 1e150])
    g = np.array([1.0, -2.0, 0.0, 3.0, 0.5, 1.0])
    t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(t**k, t, torch.tensor(g))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(_pow_dbase(ARRAY_MATH, g, a**k, a, np.array(k)), expected.numpy(), rtol=1e-15)


# ---- a plain pass takes gradients back to an input's shape by NumPy's own calls -------------------

@contextmanager
def _switched(flag: list[bool], on: bool) -> Iterator[None]:
    saved, flag[0] = flag[0], on
    try:
        yield
    finally:
        flag[0] = saved


SHAPED = {  # a gradient spread over reduced axes, or summed down from a broadcast
    "sum(x)": lambda x, b: x.sum(), "sum(x, axis=0)": lambda x, b: ops.sum(x, axis=0) * b[0],
    "mean(x, axis=(0, 1), keepdims)": lambda x, b: ops.mean(x, axis=(0, 1), keepdims=True) * b,
    "mean(x)": lambda x, b: x.mean(), "sum(x, keepdims)": lambda x, b: ops.sum(x, keepdims=True) * b,
    "x + b": lambda x, b: x + b, "x * b[None]": lambda x, b: x * ops.reshape(b, shape=(1, 1, 3)),
    "var(x, axis=1)": lambda x, b: ops.var(x, axis=1) * b, "sum(x * x, axis=2) + b[:2, None]": lambda x, b: ops.sum(x * x, axis=2),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hnp.arrays(np.float64, (2, 4, 3), elements=values), hnp.arrays(np.float64, (3,), elements=values),
       st.sampled_from(sorted(SHAPED)))
def test_direct_shapes_give_the_ops_gradients(x, b, name):
    """The plain pass's gradients of reductions and broadcasts, by NumPy's reshape and
    broadcast_to, are the ops' bit for bit (nan, infinities and signed zeros included)."""
    from gradcalc.autodiff import wiring

    def gradients() -> list[np.ndarray]:
        xt, bt = Tensor(x, requires_grad=True), Tensor(b, requires_grad=True)
        with np.errstate(all="ignore"):
            return [g.data for g in grad(SHAPED[name](xt, bt), [xt, bt])]

    fast = gradients()
    with _switched(wiring.DIRECT_SHAPES, False):  # (the one list both modules read)
        general = gradients()
    for one, other in zip(fast, general):
        assert one.shape == other.shape
        np.testing.assert_array_equal(np.signbit(one), np.signbit(other))
        np.testing.assert_array_equal(one, other)


@pytest.mark.parametrize("g", [np.float64(-0.0), np.array(np.nan), np.array([[np.inf]]), np.array(1 - 2j)])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (2, 5)])
def test_a_spread_number_is_broadcast_tos_view(g, shape):
    """A full sum's gradient, one number at every place: broadcast_to's values, dtype and
    read-only view, for empty, 0-d and complex cases too."""
    from gradcalc.autodiff.ops.reductions import broadcast_number

    made, expected = broadcast_number(g, shape), np.broadcast_to(np.asarray(g).reshape(()), shape)
    assert made.shape == expected.shape and made.dtype == expected.dtype and not made.flags.writeable
    np.testing.assert_array_equal(made, expected)
    np.testing.assert_array_equal(np.signbit(made.real), np.signbit(expected.real))


def test_a_full_sum_gradient_over_a_lowered_cap_is_refused_both_ways():
    """The cap lowered after x was made: its gradient is over it, on either path."""
    from gradcalc.autodiff import wiring
    from gradcalc.autodiff.limits import set_max_elements

    for direct in (True, False):
        x = Tensor(np.ones((10, 10)), requires_grad=True)
        y = x.sum()
        previous = set_max_elements(50)
        try:
            with _switched(wiring.DIRECT_SHAPES, direct), pytest.raises(SizeLimitError):
                grad(y, x)
        finally:
            set_max_elements(previous)


# ---- scaled identity rows through generated compositions -------------------------------------------


def _composition(rng: np.random.Generator, n: int):
    """A random f: R^n -> R^k made of ops with a diagonal rule (scaling, reshape, matmul on
    either side) and ops without one (tanh, exp, cumsum, getitem), so the scaled rows stay
    scaled for a while and are then made dense, or not."""
    from gradcalc.autodiff import ops as T

    steps = []
    size = n
    for _ in range(int(rng.integers(1, 5))):
        kind = rng.choice(["scale", "div", "neg", "left", "right", "reshape", "tanh", "exp", "cumsum", "index"])
        if kind == "scale":
            c = Tensor(rng.normal(size=size) * (rng.random(size) > 0.2))  # (zeros among the factors)
            steps.append(lambda v, c=c: v * c)
        elif kind == "div":
            c = Tensor(rng.uniform(0.5, 2.0, size=size) * (rng.random(size) > 0.2))  # (zeros: 0 / 0 in the dense rows)
            steps.append(lambda v, c=c: v / c)
        elif kind == "neg":
            steps.append(lambda v: -v)
        elif kind in ("left", "right"):
            out = int(rng.integers(1, 5))
            W = Tensor(rng.normal(size=(out, size) if kind == "left" else (size, out)))
            steps.append((lambda v, W=W: W @ v) if kind == "left" else (lambda v, W=W: v @ W))
            size = out
        elif kind == "reshape":
            steps.append(lambda v, s=size: T.reshape(T.reshape(v, shape=(1, s)), shape=(s,)))
        elif kind == "tanh":
            steps.append(T.tanh)
        elif kind == "exp":
            steps.append(lambda v: T.exp(v * 0.3))
        elif kind == "cumsum":
            steps.append(lambda v: T.cumsum(v, axis=0))
        else:
            keep = int(rng.integers(1, size + 1))
            steps.append(lambda v, keep=keep: v[:keep])
            size = keep

    def f(x):
        for step in steps:
            x = step(x)
        return x

    return f


@pytest.mark.parametrize("seed", range(40))
def test_generated_compositions_give_the_dense_batches_jacobians(seed):
    """jacrev, jacfwd, the Hessian of the sum, and vmap of jacrev, over generated
    compositions: with the identity's rows kept scaled (made dense only when an op without a
    diagonal rule reads them) they equal the dense rows' bit for bit."""
    from gradcalc.autodiff import batching as b
    from gradcalc.autodiff import hessian, jacfwd, jacrev, vmap
    from gradcalc.autodiff import ops as T

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    f = _composition(rng, n)
    x, xs = rng.normal(size=n), rng.normal(size=(3, n))

    def all_of_them() -> list[np.ndarray]:
        return [jacrev(f)(Tensor(x)).data, jacfwd(f)(Tensor(x)).data, hessian(lambda v: T.sum(f(v)))(Tensor(x)).data,
                vmap(jacrev(f))(Tensor(xs)).data]

    fast = all_of_them()
    with _switched(b.DIAGONAL_BATCHES, False):
        dense = all_of_them()
    for one, other in zip(fast, dense):
        np.testing.assert_array_equal(one, other)
