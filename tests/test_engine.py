"""The engine's contract: regressions from other engines, depth, higher order, numerics, graphs."""
from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gradcalc.autodiff import (
    Tensor,
    Value,
    collector_paused,
    first_nonfinite,
    grad,
    graph_stats,
    graph_tree,
    hessian,
    jacobian,
    no_grad,
    ops,
    topological_order,
    walk_tree,
)
from gradcalc.autodiff.errors import ShapeError, SizeLimitError
from gradcalc.cli.formatting import graph_dot


def leaf(x, name=None):
    return Tensor(x, requires_grad=True, name=name)


# ---- bugs other engines shipped -------------------------------------------------------------


def test_broadcast_gradient_is_summed_over_axes_not_sizes():
    # Lucid's size-based _match_grad_shape gave b.grad = [3, 12, 21, 30] here.
    A = leaf(np.zeros((3, 4)))
    b = leaf(np.zeros(4))
    W = ops.reshape(ops.arange(12), 3, 4)
    ops.sum((A + b) * W).backward()
    assert b.grad.tolist() == [12.0, 15.0, 18.0, 21.0]
    assert A.grad.tolist() == W.data.tolist()


@pytest.mark.parametrize("shape_a, shape_b", [((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((), (2, 3)), ((5, 1, 2), (4, 1))])
def test_broadcast_gradients_have_input_shapes_and_right_values(shape_a, shape_b):
    a = leaf(np.random.default_rng(0).normal(size=shape_a))
    b = leaf(np.random.default_rng(1).normal(size=shape_b))
    (a * b).sum().backward()
    full = np.broadcast_shapes(shape_a, shape_b)
    assert a.grad.shape == shape_a and b.grad.shape == shape_b
    # d sum(a*b)/da = b summed over the axes a was broadcast along.
    expected_a = np.broadcast_to(b.data, full).sum(axis=tuple(range(len(full) - len(shape_a))))
    expected_a = expected_a.sum(axis=tuple(i for i, n in enumerate(shape_a) if n == 1), keepdims=True).reshape(shape_a)
    np.testing.assert_allclose(a.grad, expected_a)


def test_reused_intermediate_is_visited_once():
    # Lucid's topological sort could list (x*3) twice and crash.
    x = leaf(2.0)
    y = x * 3
    z = y * y
    z.backward()
    assert z.item() == 36.0
    assert x.grad == 36.0  # d(9x^2)/dx = 18x


def _recursive_order(root):
    """micrograd's build_topo, over our ordered parents: the oracle for topological_order."""
    order, seen = [], set()

    def visit(node):
        if node not in seen:
            seen.add(node)
            for parent in node._prev:
                visit(parent)
            order.append(node)

    visit(root)
    return order


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from("+*t")), min_size=1, max_size=40))
def test_topological_order_is_depth_first_post_order(steps):
    # Random graphs with fan-out and shared parents: every node once, parents first, and
    # exactly the order of a recursive depth-first search (the evaluation order).
    nodes = [Value(0.5), Value(-1.5), Value(2.0)]
    for i, j, kind in steps:
        a, b = nodes[i % len(nodes)], nodes[j % len(nodes)]
        nodes.append(a + b if kind == "+" else a * b if kind == "*" else a.tanh())
    root = nodes[-1]
    order = topological_order(root)
    assert order == _recursive_order(root)
    position = {node: k for k, node in enumerate(order)}
    assert len(position) == len(order)
    assert all(position[p] < position[n] for n in order for p in n._prev)


def test_shared_gradient_array_is_not_accumulated_in_place():
    # Lucid handed one array to both inputs of add, then accumulated into it: y.grad = 2.
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    ((x + y) + x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    assert y.grad.tolist() == [1.0, 1.0]
    x.grad[0] = 100.0  # a user writing into one grad must not change another
    assert y.grad.tolist() == [1.0, 1.0]


def test_self_product_of_an_intermediate():
    x = leaf(3.0)
    h = x * 2
    (h * h).backward()  # 4x^2 -> 8x
    assert x.grad == 24.0


# ---- depth ------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [Value, leaf], ids=["scalar", "tensor"])
@pytest.mark.slow
def test_million_node_chain(make):
    # The test is of depth (backward walks the graph without recursion), not of Python's
    # collector, which would otherwise pass over the growing graph again and again (a third
    # of the build's time on the tensor engine, three quarters on the scalar one's closures).
    x = make(0.5)
    y = x
    with collector_paused():
        for _ in range(10**6):
            y = y + 1.0
    y.backward()
    assert float(x.grad) == 1.0
    assert float(y.data) == 10**6 + 0.5


# ---- higher order -------------------------------------------------------------------------------


def test_first_three_derivatives_of_tanh():
    x = leaf(1.0)
    d1 = grad(ops.tanh(x), x, create_graph=True)
    d2 = grad(d1, x, create_graph=True)
    d3 = grad(d2, x)
    t = math.tanh(1.0)
    assert d1.item() == pytest.approx(1 - t**2, rel=1e-14)
    assert d2.item() == pytest.approx(-2 * t * (1 - t**2), rel=1e-14)
    assert d3.item() == pytest.approx(-2 * (1 - t**2) * (1 - 3 * t**2), rel=1e-14)
    assert [round(v, 5) for v in (d1.item(), d2.item(), d3.item())] == [0.41997, -0.6397, 0.62163]


def test_hessian_of_a_two_variable_function():
    v = leaf([0.7, -1.3])
    x, y = v[0], v[1]
    f = x**2 * y + ops.sin(x * y)
    H = hessian(f, v).data
    a, b = 0.7, -1.3
    expected = np.array([
        [2 * b - b**2 * math.sin(a * b), 2 * a + math.cos(a * b) - a * b * math.sin(a * b)],
        [2 * a + math.cos(a * b) - a * b * math.sin(a * b), -(a**2) * math.sin(a * b)],
    ])
    np.testing.assert_allclose(H, expected, rtol=1e-13)


def test_jacobian_of_a_vector_function():
    x = leaf([1.0, 2.0, 3.0])
    J = jacobian(x * x, x).data
    np.testing.assert_array_equal(J, np.diag([2.0, 4.0, 6.0]))


def test_without_create_graph_the_gradient_records_nothing():
    x = leaf(2.0)
    g = grad(x**3, x)
    assert not g.requires_grad and g.parents == ()
    assert g.item() == 12.0


def test_no_grad_and_detach():
    x = leaf(2.0)
    with no_grad():
        y = x * x
    assert not y.requires_grad
    assert not x.detach().requires_grad


# ---- the two engines agree -------------------------------------------------------------------------

UNARY = ["tanh", "relu", "exp_tanh", "log_sq", "sigmoid", "neg"]
BINARY = ["add", "sub", "mul", "div_safe"]


def expressions(depth, unary=UNARY, binary=BINARY, exponents=(2, 3)):
    leaves = st.sampled_from(["a", "b", "c"]) | st.floats(-3, 3, allow_nan=False).map(lambda v: ("const", v))
    return st.recursive(
        leaves,
        lambda inner: st.tuples(st.sampled_from(unary), inner)
        | st.tuples(st.sampled_from(binary), inner, inner)
        | st.tuples(st.just("pow"), inner, st.sampled_from(exponents)),
        max_leaves=depth,
    )


def build(expr, env, unary_call):
    """Evaluate an expression tree; unary_call(name, x) applies a function in either engine."""
    if isinstance(expr, str):
        return env[expr]
    kind = expr[0]
    if kind == "const":
        return expr[1]
    if kind == "pow":
        base = build(expr[1], env, unary_call)
        # A constant base is a Python float, whose ** is complex for (-2) ** 0.5: NumPy's.
        return float(np.power(base, expr[2])) if isinstance(base, float) else base ** expr[2]
    args = [build(e, env, unary_call) for e in expr[1:]]
    if kind == "div" and all(isinstance(v, float) for v in args):
        return float(np.divide(args[0], args[1]))  # constants: IEEE division, not ZeroDivisionError
    if kind == "add":
        return args[0] + args[1]
    if kind == "sub":
        return args[0] - args[1]
    if kind == "mul":
        return args[0] * args[1]
    if kind == "div_safe":
        return args[0] / (1 + args[1] * args[1])
    if kind == "div":
        return args[0] / args[1]
    if kind == "root":
        return args[0] ** 0.5
    if kind == "neg":
        return -args[0]
    if kind == "exp_tanh":
        return unary_call("exp", unary_call("tanh", args[0]))
    if kind == "log_sq":
        return unary_call("log", 1 + args[0] * args[0])
    return unary_call(kind, args[0])


@settings(max_examples=200)
@given(expr=expressions(12), point=st.tuples(*[st.floats(-2, 2, allow_nan=False)] * 3))
def test_scalar_and_tensor_engines_agree(expr, point):
    assert_engines_agree(expr, point, grad_abs=1e-12, nan_ok=False)


def assert_engines_agree(expr, point, grad_abs: float, nan_ok: bool) -> None:
    """Build `expr` at `point` on both engines; values and every gradient must agree."""
    values = dict(zip("abc", point))
    scalar_env = {k: Value(v) for k, v in values.items()}
    tensor_env = {k: leaf(v) for k, v in values.items()}
    s = build(expr, scalar_env, lambda name, x: getattr(x if isinstance(x, Value) else Value(x), name)())
    t = build(expr, tensor_env, lambda name, x: getattr(ops, name)(x))
    if not isinstance(t, Tensor) or not t.requires_grad:
        return  # a constant expression: nothing to differentiate
    s.backward()
    t.backward()
    assert t.item() == pytest.approx(s.data, rel=1e-12, abs=1e-300, nan_ok=nan_ok)
    # A gradient that cancels (a * a**-1 at a = 6.7e-54: 1.5e53 - 1.5e53) is rounding noise
    # at the scale of the terms that cancel, and the engines may round a power differently
    # by an ulp (NumPy's x**-1 is 1 / x): that scale bounds the values the graph holds.
    scale = max((abs(v.data) for v in _nodes(s) if math.isfinite(v.data)), default=0.0)
    for k in "abc":
        tg = 0.0 if tensor_env[k].grad is None else float(tensor_env[k].grad)
        assert tg == pytest.approx(scalar_env[k].grad, rel=1e-12, abs=max(grad_abs, 1e-13 * scale), nan_ok=nan_ok), k


def _nodes(root: Value) -> list[Value]:
    seen, stack = {id(root): root}, [root]
    while stack:
        for parent in stack.pop().parents:
            if id(parent) not in seen:
                seen[id(parent)] = parent
                stack.append(parent)
    return list(seen.values())


EXTREMES = [0.0, -0.0, 1e-300, -1e-300, 40.0, -40.0, 700.0, -700.0, 1000.0, -1000.0, 1e308, -1e308, math.inf, -math.inf, math.nan]


@settings(max_examples=400)
@given(
    expr=expressions(8, unary=UNARY + ["softplus", "abs", "sqrt"], binary=BINARY + ["div"], exponents=(2, 3, 0, -1, 0.5, -0.5, 1.5)),
    point=st.tuples(*[st.sampled_from(EXTREMES) | st.floats(-50, 50)] * 3),
)
# d(c**2/(1 + b**2))/dc at c = 1e308 is 1.25e305; 2 * c alone overflows
@example(expr=("div_safe", ("pow", "c", 2), "b"), point=(0.0, 40.0, 1e308))
# relu(nan) ** 0 is the constant 1: relu's VJP passed nan back for g = 0 (the scalar engine 0)
@example(expr=("pow", ("relu", "a"), 0), point=(math.nan, 0.0, 0.0))
@example(expr=("pow", ("abs", "b"), 0), point=(0.0, math.nan, 0.0))  # and abs's did too (found by this test)
@example(expr=("mul", "a", ("pow", "a", -1)), point=(6.654343600241134e-54, 0.0, 0.0))  # a gradient that cancels
def test_scalar_and_tensor_engines_agree_at_extreme_and_nonfinite_points(expr, point):
    assert_engines_agree(expr, point, grad_abs=1e-300, nan_ok=True)


# ---- numerics ----------------------------------------------------------------------------------------


def test_cross_entropy_of_extreme_logits_is_finite():
    logits = leaf([1000.0, 0.0, -1000.0])
    loss = ops.cross_entropy(logits, 0)
    assert loss.item() == pytest.approx(0.0, abs=1e-300)
    loss.backward()
    assert np.all(np.isfinite(logits.grad))
    np.testing.assert_allclose(logits.grad, [0.0, 0.0, 0.0], atol=1e-300)


def test_logsumexp_of_large_values():
    x = leaf([1000.0, 1000.0])
    y = ops.logsumexp(x)
    assert y.item() == 1000.0 + math.log(2.0)
    y.backward()
    assert x.grad.tolist() == [0.5, 0.5]


def test_softmax_of_large_logits_sums_to_one():
    s = ops.softmax(leaf([1000.0, 999.0, -1e308]))
    assert np.all(np.isfinite(s.data)) and s.data.sum() == pytest.approx(1.0)


def test_cross_entropy_with_probability_targets_matches_closed_form():
    logits = leaf([[2.0, 1.0, 0.1]])
    target = np.array([[0.7, 0.2, 0.1]])
    loss = ops.cross_entropy(logits, target)
    p = np.exp([2.0, 1.0, 0.1]) / np.exp([2.0, 1.0, 0.1]).sum()
    assert loss.item() == pytest.approx(-(target[0] * np.log(p)).sum(), rel=1e-14)
    loss.backward()
    np.testing.assert_allclose(logits.grad[0], p - target[0], rtol=1e-12)


def test_overflow_and_domain_errors_give_inf_and_nan():
    x = leaf([1000.0, -1.0])
    y = ops.exp(x)
    assert y.data[0] == math.inf
    z = ops.log(x)
    assert math.isnan(z.data[1])
    (y + z).sum().backward()  # no exception escapes
    assert np.isinf(x.grad[0])


def test_engine_names_the_op_that_first_produced_a_nonfinite_value():
    a = leaf(800.0, "a")
    b = leaf(-1.0, "b")
    y = ops.tanh(ops.exp(a) * 0.5 + ops.sqrt(b))
    culprit = first_nonfinite(y)
    assert culprit is not None and culprit.label == "exp"
    assert first_nonfinite(ops.tanh(a)) is None


def test_scalar_engine_overflow_gives_inf_not_an_exception():
    x = Value(1000.0)
    y = x.exp() * 2
    assert y.data == math.inf
    assert math.isnan(Value(-1.0).log().data)
    assert (Value(0.0) ** -1).data == math.inf


# ---- errors ------------------------------------------------------------------------------------------


def test_shape_mismatch_names_both_shapes_and_the_op():
    with pytest.raises(ShapeError) as err:
        Tensor([1.0, 2.0]) + Tensor([1.0, 2.0, 3.0])
    assert "(2,)" in str(err.value) and "(3,)" in str(err.value) and "add" in str(err.value)


def test_oversized_tensor_is_refused_before_allocation():
    with pytest.raises(SizeLimitError):
        ops.zeros(100000, 100000)
    with pytest.raises(SizeLimitError):
        ops.ones(10**9)
    with pytest.raises(SizeLimitError):
        ops.reshape(ops.ones(4000), 4000, 1) * ops.ones(4000)


# ---- the seed example and graph tools ----------------------------------------------------------------


@pytest.fixture
def seed_example():
    a, b, c = leaf(2.0, "a"), leaf(-3.0, "b"), leaf(10.0, "c")
    y = (a * b + ops.exp(c)).relu() / a
    y.backward(retain_grads=True)
    return y, a, b, c


def test_seed_example_value_and_gradients(seed_example):
    y, a, b, c = seed_example
    e = math.exp(10.0)
    assert y.item() == pytest.approx((-6 + e) / 2, rel=1e-15)
    assert a.grad == pytest.approx(-(e - 6) / 4 - 3 / 2, rel=1e-14)  # d/da (ab+e)/a = b/a - (ab+e)/a^2
    assert b.grad == 1.0
    assert c.grad == pytest.approx(e / 2, rel=1e-15)
    assert (round(y.item(), 4), round(float(a.grad), 4), round(float(c.grad), 4)) == (11010.2329, -5506.6164, 11013.2329)


def test_seed_example_graph_statistics(seed_example):
    y, a, b, c = seed_example
    stats = graph_stats(y)
    # a, b, c, a*b, exp(c), +, relu, / : eight nodes; inputs 2+1+2+1+2 = eight edges.
    assert (stats.nodes, stats.edges, stats.leaves, stats.op_nodes, stats.depth) == (8, 8, 3, 5, 4)
    assert [n.name for n in stats.fan_out] == ["a"]
    assert stats.histogram == {"mul": 1, "exp": 1, "add": 1, "relu": 1, "div": 1}


def test_scalar_engine_graph_of_the_seed_example():
    a, b, c = Value(2.0, name="a"), Value(-3.0, name="b"), Value(10.0, name="c")
    y = (a * b + c.exp()).relu() / a
    stats = graph_stats(y)
    # Division is a primitive in both engines (a * b**-1 overflowed; see docs/engine.md).
    assert (stats.nodes, stats.edges) == (8, 8)
    assert [n.name for n in stats.fan_out] == ["a"]


def test_tree_draws_a_shared_node_once(seed_example):
    y, a, *_ = seed_example
    lines = [(depth, item.node, item.ref) for depth, item in walk_tree(graph_tree(y))]
    drawn_a = [ref for _, node, ref in lines if node is a]
    assert drawn_a.count(None) == 1 and len(drawn_a) == 2


def test_tree_of_a_diamond_chain_stays_linear():
    x = leaf(1.0)
    y = x
    for _ in range(40):  # each step reuses y twice: 2^40 paths, 41 nodes
        y = y * y
    assert len(list(walk_tree(graph_tree(y)))) == 1 + 2 * 40


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graphviz_accepts_the_dot_output(seed_example):
    y, *_ = seed_example
    text = graph_dot(y)
    done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("<g id=\"node") == 8


def test_repr_shows_data_and_grad():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    c = a * b
    c.backward()
    assert repr(a) == "Tensor([1. 2.], grad=[3. 4.])"
    assert repr(c) == "Tensor([3. 8.], grad=None)"


def test_the_context_managers_restore_what_they_found():
    import gc

    from gradcalc.autodiff import collector_paused
    from gradcalc.autodiff.tensor import is_grad_enabled, set_grad_enabled

    with pytest.raises(RuntimeError):
        with no_grad():
            assert not is_grad_enabled()
            with set_grad_enabled(True):
                assert is_grad_enabled()
            assert not is_grad_enabled()
            raise RuntimeError
    assert is_grad_enabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the inner block found it paused and leaves it so
            raise RuntimeError
    assert gc.isenabled()


# ---- all_finite: one pass for the usual answer, each entry tested otherwise ----------------------

_ENTRIES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e308, -1e308, 1e200, 5e-324, -0.0]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_ENTRIES, max_size=12), st.lists(_ENTRIES, max_size=12), st.sampled_from(["real", "complex", "transposed", "0-d"]))
@example([1e200, 1e200], [], "real")  # the squares overflow, every entry finite
@example([1e308], [1e308], "complex")
@example([], [], "real")
def test_all_finite_is_its_definition(real, imaginary, layout):
    from gradcalc.autodiff.tensor import all_finite

    data = np.array(real, dtype=float)
    if layout == "complex":
        data = data + 1j * np.resize(np.array(imaginary or [0.0]), data.shape)
    elif layout == "transposed" and data.size:
        data = np.resize(data, (3, len(real))).T  # a view in Fortran order
    elif layout == "0-d":
        data = np.array(real[0] if real else 0.0)
    assert all_finite(data) == bool(np.isfinite(data).all())
