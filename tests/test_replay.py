"""Batched replays (autodiff/batching.py) give the numerical Jacobians of replays per column.

The reference is gradcheck.numerical_jacobian over gradcheck.replay, one replay per column,
which is what every check did before batching. Each test builds a graph, takes its
numerical Jacobian both ways and holds them equal to rounding: complex step to 1e-12
relative (its imaginary parts are exact), central differences to what rounding of f
divided by h allows. Where batching does not apply, the batched path must say so (None)
and gradcheck must then give exactly the per-column result.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gradcalc.autodiff.gradcheck as gradcheck_module
import gradcalc.autodiff.replay as batching
from gradcalc.autodiff import REGISTRY, Tensor, topological_order
from gradcalc.autodiff.gradcheck import CENTRAL_STEP, COMPLEX_STEP, gradcheck_graph, numerical_jacobian, replay
from gradcalc.autodiff.replay import Tape
from gradcalc.parser import Session, compile_program
from gradcalc.parser.check_statements import make_check_handler
from gradcalc.parser.errors import LanguageError
from tests.strategies import kept, sampled
from tests.test_every_op import draw_case, outputs_of

STEP = {"complex": COMPLEX_STEP, "central": CENTRAL_STEP}
nan, inf = float("nan"), float("inf")


def per_column(output, leaves, method):
    order = topological_order(output)
    keys = [id(leaf) for leaf in leaves]
    return numerical_jacobian(
        lambda values: replay(output, dict(zip(keys, values)), order), [np.real(leaf.data) for leaf in leaves],
        range(len(leaves)), method,
    )


def batched(output, leaves, method):
    return Tape(output, topological_order(output)).batched_jacobian(leaves, method, STEP[method])


def noise_scale(output):
    """How large the values summed on the way to `output` are: central differences lose
    about eps times that, over h, to rounding (and reordered sums round differently)."""
    sizes = [np.sum(np.abs(np.real(n.data)[np.isfinite(n.data)])) for n in topological_order(output)]
    return max([1.0, *sizes])


def assert_same(got, want, method, scale=1.0):
    """Equal to rounding, nan where nan, the same infinities: complex step to the last
    bits; central differences within the rounding of f (eps * scale) over h."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert np.array_equal(np.isnan(g), np.isnan(w))
        finite = np.isfinite(w)
        assert np.array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)])
        atol = 1e-13 * scale if method == "complex" else 1e-8 * scale
        np.testing.assert_allclose(g[finite], w[finite], rtol=1e-11, atol=atol)


def both_ways(output, leaves, method):
    got = batched(output, leaves, method)
    assert got is not None, "the batched replay should apply here"
    assert_same(got, per_column(output, leaves, method), method, noise_scale(output))
    return got


def graph(source: str, expression: str):
    """(output, the named leaves that require grad) of `expression` after `source`."""
    session = Session()
    session.run_source(source)
    output = session.evaluate(compile_program(expression).statements[0].code)
    order = topological_order(output)
    return output, [n for n in order if not n.parents and n.name and n.requires_grad]


METHODS = ["complex", "central"]


# ---- every op replays batched by its own batching rule ----------------------------------------

ELEMENTWISE = sorted(op.name for op in REGISTRY.values() if op.batch is not None and op.batch.sparse == "elementwise" and op.has_gradient)


# ---- every op of the registry, both ways ----------------------------------------------------

DIFFERENTIABLE = [op for op in REGISTRY.values() if op.has_gradient and op.check is not None]


@pytest.mark.parametrize("op", DIFFERENTIABLE, ids=lambda op: op.name)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_op_batched_equals_per_column(op, data):
    inputs, params, diff = draw_case(op, data)
    methods = METHODS if op.complex_safe else ["central"]
    for f in outputs_of(op, params):
        tensors = [Tensor(x, requires_grad=i in diff, name=f"x{i}") for i, x in enumerate(inputs)]
        output = f(*tensors)
        leaves = [tensors[i] for i in diff]
        for method in methods:
            got = batched(output, leaves, method)
            assert got is not None, f"{op.name}: every op has a batching rule, so the batched replay applies"
            assert_same(got, per_column(output, leaves, method), method, noise_scale(output))


# The complex step only for ops that are complex-safe: the others have no such check to run.
@pytest.mark.parametrize(("op", "method"), [(op, method) for op in ELEMENTWISE if op not in ("where", "clip") for method in METHODS
                                            if method != "complex" or REGISTRY[op].complex_safe])
def test_every_elementwise_op_on_a_large_input_sparse_then_summed(op, method):
    """A large input replays sparse: the op maps the base and each slot's one entry."""
    spec = REGISTRY[op]
    rng = np.random.default_rng(len(op))
    low, high = (spec.check.low, spec.check.high) if spec.check.make is None else (0.3, 0.9)
    x = Tensor(rng.uniform(low, high, 100), requires_grad=True, name="x")
    others = [Tensor(rng.uniform(low, high, 100)) for _ in range((spec.n_in or 1) - 1)]
    y = spec(x, *others)
    for output in (y.sum(), y.mean(), (y * 2.0).sum() * x.sum()):
        both_ways(output, [x], method)


@pytest.mark.parametrize("method", METHODS)
def test_sparse_values_meeting_each_other_constants_and_keyword_bounds(method):
    from gradcalc.autodiff.ops import elementwise as E

    rng = np.random.default_rng(5)
    x = Tensor(rng.uniform(-1.5, 1.5, 100), requires_grad=True, name="x")
    c = rng.uniform(0.5, 1.5, 100)
    cases = [
        (x * x.tanh() + x / (2.0 + x.exp())).sum(),  # two sparse values of one input meet
        (x * c + 1.0).sum(),  # a constant gathered at each slot's element
        E.where(Tensor(c > 1.0), x, x * 2.0).sum(),  # where, with a constant condition
    ]
    if method == "central":  # not complex-safe
        cases += [
            E.clip(x, -0.5, 0.7).mean(),  # scalar bounds: still sparse
            E.clip(x, low=np.full(100, -0.5), high=0.7).sum(),  # an array bound: dense, in runs
            E.maximum(x, Tensor(c - 1.0)).sum(),
        ]
    for output in cases:
        both_ways(output, [x], method)


# ---- shapes ------------------------------------------------------------------------------------

SETUP = """
s = 0.7
t = -1.3
u = 2.1
v = [0.5, -1.0, 2.0, 0.25]
col = [[1.0], [-2.0], [0.5]]
A = [[1.0, 2.0, -1.0, 0.5], [0.3, -0.7, 1.1, 2.0], [-1.5, 0.2, 0.9, -0.4]]
W = [[0.2, -0.1], [0.5, 0.3], [-0.4, 0.8], [0.1, 0.1]]
e = zeros(0)
w = randn(120, seed=3)
big = randn(70, 2, seed=4)
"""

EXPRESSIONS = [
    "tanh(s) * t + exp(u / 3)", "sigmoid(s * t) - log(u)", "(s*t + exp(u)).relu()/s", "softplus(s - t) * cos(u)",
    "A * v", "A + col", "col * v + s", "v * s + t", "A * v * s", "sum(A * v) * t", "s ** v", "v ** u", "A ** 2 / (v + 3)",
    "sum(A, axis=0) * v", "mean(A * v, axis=1, keepdims=true) * s", "max(A * s, axis=1)", "min(A + v, axis=0)",
    "prod(A * s)", "sum(A * col, axis=(0, 1))", "A.T * s", "transpose(A * col) * s", "reshape(A * s, 2, 6)",
    "flatten(A * v)", "squeeze(unsqueeze(v * s, 0))", "A[1] * s", "A[:, 1:3] * v[0]", "A[..., 0] * v[None, 1:4]",
    "A @ W * s", "v @ W", "A @ v", "v @ v * s", "tanh(A @ W) * s", "sum(tanh(A @ W + [0.1, 0.2]))",
    "clip(v, -0.5, s)", "clip(A, low=-0.5, high=s)", "clip(A * s, col, 1.5)", "where(v > 0, v, s * v)",
    "where(A > 0, A * s, t)", "maximum(v, s)", "minimum(A, v * t)", "leaky_relu(v * s, slope=0.2)", "elu(A * t, alpha=1.5)",
    "gelu(v * s, approximate='tanh')", "remainder(A * s + 3, 0.7)", "atan2(v, s) + hypot(A, t)",
    "sum(e) * s", "e * s", "sum(e * s) + t", "sum(tanh(w) * sigmoid(w) + exp(-w * w) / 2)", "sum(w * w) * sum(w)",
    "mean(tanh(w)) * s", "tanh(w) * s", "sum(big * v[0:2])", "sum(big, axis=0) * s", "sum(big @ W[0:2] * s)",
    "sum(reshape(w * 2, 12, 10), axis=1)", "max(w * s)", "big.T @ w[0:70]", "sum(w[0:10] * w[10:20])",
]


def _complex_safe(expression: str) -> bool:
    return all(n.op.complex_safe for n in topological_order(graph(SETUP, expression)[0]) if n.op is not None)


# The complex step needs every op of the expression complex-safe.
@pytest.mark.parametrize(("expression", "method"), [(e, method) for e in EXPRESSIONS for method in METHODS
                                                    if method != "complex" or _complex_safe(e)])
def test_expressions_batched_equal_per_column(expression, method):
    output, leaves = graph(SETUP, expression)
    assert leaves
    both_ways(output, leaves, method)


@pytest.mark.parametrize("method", METHODS)
def test_a_wide_sum_is_exact_in_complex_step_and_matches_per_column(method):
    output, leaves = graph("x = randn(300, seed=0)", "sum(tanh(x) * sigmoid(x) + exp(-x * x) / 2)")
    got = both_ways(output, leaves, method)
    if method == "complex":  # the imaginary part of the sparse sum is exactly that of the one changed entry
        assert np.array_equal(got[0], per_column(output, leaves, method)[0])


# ---- edges: nan, inf, ties, domains, empty ------------------------------------------------------

EDGES = """
x = [1.0, nan, inf, -inf, 0.0, -2.0]
y = [1.0, 1.0, 2.0, -inf, 0.0, 3.0]
m = -1.0
z = 0.0
p = inf
q = nan
"""

EDGE_EXPRESSIONS = [
    "x * z", "sqrt(m) + z", "sqrt(m) * z", "z + sqrt(m * p)", "log(x) * m", "x * y", "maximum(x, y)", "minimum(x, y)",
    "clip(x, y, 2.0)", "where(x > 0, x, y * m)", "relu(x) * m", "abs(x - y)", "exp(x) * z", "sum(x * y)", "x / y",
    "p * m", "q + z", "exp(p * z)", "tanh(x) + sigmoid(y)", "softplus(x) * z", "m ** 0.5 * z", "(m ** 3) * z",
    "pow(m, z)", "max(x * z)",
]


@pytest.mark.parametrize("expression", EDGE_EXPRESSIONS)
@pytest.mark.parametrize("method", METHODS)
def test_non_finite_values_ties_and_domains_agree_with_per_column(expression, method):
    """nan against nan and inf against inf, column for column. In complex step, sqrt(-1)
    is nan in the replays of the other inputs (they are real there) and 1j in its own:
    the joint batch must give each slot what its own replay gives."""
    output, leaves = graph(EDGES, expression)
    with np.errstate(all="ignore"):
        got = batched(output, leaves, method)
        want = per_column(output, leaves, method)
    if got is None:  # a sparse sum over non-finite values: replayed per column instead
        return
    assert_same(got, want, method, noise_scale(output))


def test_a_sparse_sum_over_non_finite_values_is_left_to_per_column_replays():
    output, leaves = graph("x = randn(100, seed=1)\nn = nan", "sum(x * n)")
    assert batched(output, leaves, "complex") is None
    result = gradcheck_graph(output, leaves)
    reference = gradcheck_graph(output, leaves, batched=False)
    assert_same(result.numeric, reference.numeric, "complex")


def test_ties_at_maximum_and_clip_bounds():
    output, leaves = graph("a = [1.0, 2.0, 3.0]\nb = [1.0, 0.0, 3.0]\nlo = 2.0", "maximum(a, b) + clip(a, lo, 2.5)")
    for method in METHODS:
        both_ways(output, leaves, method)


def test_empty_inputs_and_outputs():
    output, leaves = graph("e = zeros(0)\ns = 2.0\nM = zeros(0, 3)", "sum(e * s) + sum(M)")
    for method in METHODS:
        got = both_ways(output, leaves, method)
        assert got[0].shape == (0, 0)  # as numerical_jacobian gives for an empty input


# ---- which leaves --------------------------------------------------------------------------------


def test_leaves_the_output_does_not_use_get_what_replays_give():
    session = Session()
    session.run_source("x = [1.0, inf]\ny = 2.0\nunused = [1.0, 2.0, 3.0]")
    output = session.evaluate(compile_program("x * y").statements[0].code)
    leaves = [session.variables["x"], session.variables["y"], session.variables["unused"]]
    for method in METHODS:
        with np.errstate(all="ignore"):
            both_ways(output, leaves, method)


def test_a_named_intermediate_or_a_repeated_leaf_is_left_to_per_column_replays():
    session = Session()
    session.run_source("x = 0.5\nh = x * 3")
    output = session.evaluate(compile_program("h * h + x").statements[0].code)
    x, h = session.variables["x"], session.variables["h"]
    assert batched(output, [x, h], "complex") is None
    assert batched(output, [x, x], "complex") is None
    for leaves in ([x, h], [x, x]):
        result, reference = gradcheck_graph(output, leaves), gradcheck_graph(output, leaves, batched=False)
        assert (result.passed, result.max_abs_error) == (reference.passed, reference.max_abs_error)


def test_many_inputs_in_several_joint_batches(monkeypatch):
    monkeypatch.setattr(batching, "JOINT_COLUMNS", 5)
    source = "\n".join(f"a{i} = {0.1 * (i + 1)}" for i in range(12)) + "\nv = [1.0, 2.0, 3.0]"
    expression = " + ".join(f"tanh(a{i}) * a{(i + 1) % 12}" for i in range(12)) + " + sum(v * a3)"
    output, leaves = graph(source, expression)
    for method in METHODS:
        both_ways(output, leaves, method)


@pytest.mark.parametrize("expression", ["sum(tanh(w) * w)", "w * s", "sum(big @ W[0:2] * s)", "A * v * s + t"])
def test_runs_cut_to_the_budget_give_the_same_columns(monkeypatch, expression):
    monkeypatch.setattr(batching, "DENSE_BUDGET", 7)
    output, leaves = graph(SETUP, expression)
    for method in METHODS:
        both_ways(output, leaves, method)


# ---- unsupported graphs and the guard -------------------------------------------------------------


@pytest.mark.parametrize("expression", ["sum(softmax(A))", "sort(v) * s", "A[[0, 2]] * s", "cumsum(v) * s", "A[A > 0] * s",
                                        "A[[0, 2], 1:3] * s", "A[:, [1, 3]][[0, 2]] * s", "logsumexp(A, axis=1) * s"])
def test_ops_once_replayed_per_column_are_batched_by_their_rules(expression):
    """Softmax, sort, scans, advanced indexing: each batches by its rule, giving the columns the replays do."""
    output, leaves = graph(SETUP, expression)
    assert batched(output, leaves, "central") is not None
    for method in METHODS:
        both_ways(output, leaves, method)


def test_a_rule_the_user_wrote_batches_by_its_body():
    """A function with a vjp rule is an op whose batching rule evaluates its body on the batch."""
    output, leaves = graph(SETUP + "\ndef f(x) = x * 2\nvjp f(x, g) = g * 2", "sum(f(A)) * s")
    assert batched(output, leaves, "central") is not None
    result = gradcheck_graph(output, leaves, method="central")
    reference = gradcheck_graph(output, leaves, method="central", batched=False)
    for got, want in zip(result.numeric, reference.numeric):
        assert np.array_equal(got, want)


def test_a_batched_result_that_disagrees_with_replays_is_not_used(monkeypatch):
    """The guard: a batched Jacobian off in the column of its worst entry by more than 1%
    of the tolerance (though within it: the check would pass either way) is replaced by
    replays per column."""
    output, leaves = graph(SETUP, "sum(tanh(w) * w)")
    reference = gradcheck_graph(output, leaves, batched=False)
    real = Tape.batched_jacobian

    def off(self, *args):
        jacobians = real(self, *args)
        jacobians[0][0, 7] += 1e-9  # complex step's tolerance: 1e-10 + 1e-8 * |numeric|, here about 1e-8
        return jacobians

    monkeypatch.setattr(Tape, "batched_jacobian", off)
    result = gradcheck_graph(output, leaves)
    assert np.array_equal(result.numeric[0], reference.numeric[0])
    assert (result.passed, result.max_abs_error) == (reference.passed, reference.max_abs_error)


def test_a_wrong_column_among_many_is_caught_by_the_sampled_columns(monkeypatch):
    output, leaves = graph(SETUP, "sum(tanh(w) * w)")
    real = Tape.batched_jacobian

    def zeroed(self, *args):  # as if a perturbation had not reached the output
        jacobians = real(self, *args)
        jacobians[0][:, 0] = 0.0
        return jacobians

    monkeypatch.setattr(Tape, "batched_jacobian", zeroed)
    assert gradcheck_graph(output, leaves).passed


def test_small_checks_replay_per_column_and_wide_ones_batched(monkeypatch):
    calls = []
    real = Tape.batched_jacobian
    monkeypatch.setattr(Tape, "batched_jacobian", lambda self, *a: calls.append(a) or real(self, *a))
    gradcheck_graph(*graph(SETUP, "tanh(s) * t + u"))  # 3 replays: not worth a batch
    assert calls == []
    gradcheck_graph(*graph(SETUP, "sum(tanh(w))"))
    assert len(calls) == 1


# ---- random graphs --------------------------------------------------------------------------------

UNARY = ["tanh", "exp", "sin", "sigmoid", "softplus", "square", "atan", "relu", "abs"]
BINARY = ["+", "-", "*", "/"]
SHAPES = {"a": (), "b": (), "c": (3,), "d": (2, 3), "f": (40,)}


@kept  # (drawn inside its own draws: one strategy per depth)
@st.composite
def expressions(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        name = draw(sampled(sorted(SHAPES)))
        return name if name != "f" else draw(sampled(["sum(f)", "mean(f * a)", "f[0:3]", "sum(tanh(f) * f)"]))
    if draw(st.booleans()):
        return f"{draw(sampled(UNARY))}({draw(expressions(depth - 1))})"
    if draw(st.integers(0, 5)) == 0:
        return f"sum({draw(expressions(depth - 1))}, axis=-1)"
    return f"({draw(expressions(depth - 1))} {draw(sampled(BINARY))} {draw(expressions(depth - 1))})"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=expressions(), seed=st.integers(0, 1000), special=st.sampled_from([None, 0.0, nan, inf, -1.0]))
def test_random_graphs_batched_equal_per_column(expression, seed, special):
    rng = np.random.default_rng(seed)
    values = {name: rng.uniform(0.3, 1.5, shape) * rng.choice([-1.0, 1.0], shape) for name, shape in SHAPES.items()}
    if special is not None:
        values["a"] = np.array(special)
    session = Session()
    for name, value in values.items():
        session.assign(name, Tensor(value))
    try:
        output = session.evaluate(compile_program(expression).statements[0].code)
    except LanguageError:  # shapes that do not fit (sum of a scalar over an axis, say)
        assume(False)
    order = topological_order(output)
    leaves = [n for n in order if not n.parents and n.name and n.requires_grad]
    assume(leaves and output.requires_grad)
    methods = ["central"] if any(not n.op.complex_safe for n in order if n.op is not None) else METHODS
    for method in methods:
        with np.errstate(all="ignore"):
            got = batched(output, leaves, method)
            want = per_column(output, leaves, method)
        if got is not None:
            assert_same(got, want, method, noise_scale(output))


# ---- through the language -------------------------------------------------------------------------


@pytest.mark.parametrize("expression", ["sum(tanh(w) * w)", "A @ W", "relu(A - 0.45) * v", "sum(w * w) wrt w", "v * s + t wrt v, s"])
def test_check_statements_report_what_replays_per_column_report(monkeypatch, expression):
    def outcome():
        session = Session(on_check=make_check_handler())
        session.run_source(SETUP)
        [result] = session.run(compile_program(f"check {expression}"))
        return result.outcome

    batched_outcome = outcome()
    monkeypatch.setattr(gradcheck_module, "BATCHED_FROM", math.inf)
    reference = outcome()
    assert batched_outcome.status == reference.status == "pass"
    assert batched_outcome.method == reference.method
    assert batched_outcome.max_abs_error == pytest.approx(reference.max_abs_error, abs=1e-9)
