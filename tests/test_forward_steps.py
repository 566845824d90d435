"""`eval --steps --mode forward`, `:steps forward`: forward mode's pass node by node, each
value and tangent as a dual number, with the JVP rule each op used.

The numbers are closed forms; every pass's output tangent is also held against reverse
mode's gradient (an independent pass: the VJPs), and the scalar engine against the tensor
engine.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcalc.autodiff import REGISTRY, Tensor, defop, grad
from gradcalc.autodiff.registry import unregister
from gradcalc.autodiff.rules import NO_JVP, jvp_rule
from gradcalc.autodiff.scalar import Value
from gradcalc.autodiff.step_records import forward_steps

from .test_cli import gradcalc
from .test_repl import data_home  # noqa: F401  (autouse: the REPL's history stays out of $HOME)
from .test_steps import unexplained_calls

SEED = ("(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10")
E10 = math.exp(10)


def passes_of(*args):
    done = gradcalc("eval", *args, "--steps", "--mode", "forward", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["mode"] == "forward"
    return document, {p["along"]: p for p in document["steps"]}


def test_the_seed_example_along_each_variable_gives_its_derivative():
    # out = (ab + e^c)/a: d/da = -e^c/a^2, d/db = 1, d/dc = e^c/a
    document, passes = passes_of(*SEED)
    assert list(passes) == ["a", "b", "c"]
    assert passes["a"]["tangent"] == pytest.approx(-E10 / 4, rel=1e-15)
    assert passes["b"]["tangent"] == 1.0
    assert passes["c"]["tangent"] == pytest.approx(E10 / 2, rel=1e-15)
    for name, p in passes.items():  # forward mode's number is reverse mode's
        assert p["tangent"] == pytest.approx(document["grads"][name], rel=1e-15)
    # along c: exp's tangent is e^c, the add passes it on, relu keeps it, the division halves it
    nodes = {n["title"]: n for n in passes["c"]["nodes"]}
    assert nodes["exp"]["tangent"] == pytest.approx(E10, rel=1e-15) and nodes["exp"]["rule"] == "dx * ans"
    assert nodes["add"]["rule"] == "db" and nodes["mul"]["tangent"] == 0.0 and nodes["mul"]["rule"] == ""
    assert [n["title"] for n in passes["c"]["nodes"]] == ["a", "b", "mul", "c", "exp", "add", "relu", "div"]  # as they run
    assert [n["node"] for n in passes["c"]["nodes"]] == [5, 6, 4, 8, 7, 3, 2, 1]  # --tree's numbers


def test_the_text_is_the_dual_number_of_each_node_and_the_rule_it_used():
    done = gradcalc("eval", "a*b + sin(a)", "a=2", "b=-3", "--steps", "--mode", "forward")
    assert done.returncode == 0, done.stderr
    text = done.stdout.split("forward pass along")
    along_a, along_b = text[1].splitlines(), text[2].splitlines()
    cos2, sin2 = math.cos(2.0), math.sin(2.0)
    assert along_a == [
        " a: a = 2.0 + 1.0ε, every other variable's tangent 0; 3 ops in the order they run",
        "#3 a  2.0 + 1.0ε  (seed)",
        "#4 b  -3.0 + 0.0ε",
        "#2 mul  -6.0 - 3.0ε",
        "   rule  mul: da * b",
        f"#5 sin  {sin2!r} - {-cos2!r}ε",
        "   rule  sin: dx * cos(x)",
        f"#1 add  {-6 + sin2!r} - {3 - cos2!r}ε",
        "   rule  add: da + db",
        f"tangent of the output: {-3 + cos2!r}  (d output / d a)",
    ]
    assert along_b[3:5] == ["#2 mul  -6.0 + 2.0ε", "   rule  mul: db * a"]
    assert along_b[5] == f"#5 sin  {sin2!r} + 0.0ε  (no tangent reaches it)"
    assert along_b[-1] == "tangent of the output: 2.0  (d output / d b)"


def test_a_tensor_variable_is_seeded_with_ones_and_its_tangents_are_shown_with_shapes():
    w, x = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.1, 0.2])
    document, passes = passes_of("sum(tanh(W @ x))", "W=[[1, 2], [3, 4]]", "x=[0.1, 0.2]", "--wrt", "x")
    assert list(passes) == ["x"]
    nodes = {n["title"]: n for n in passes["x"]["nodes"]}
    np.testing.assert_array_equal(nodes["matmul"]["tangent"], w @ np.ones(2))
    assert nodes["matmul"]["rule"] == "a @ db"
    u = w @ x
    np.testing.assert_allclose(nodes["tanh"]["tangent"], (1 - np.tanh(u) ** 2) * (w @ np.ones(2)), rtol=1e-15)
    # J 1 of a scalar output: the sum of its gradient
    assert passes["x"]["tangent"] == pytest.approx(sum(document["grads"]["x"]), rel=1e-15)
    done = gradcalc("eval", "sum(tanh(W @ x))", "W=[[1, 2], [3, 4]]", "x=[0.1, 0.2]", "--wrt", "x", "--steps", "--mode", "forward")
    assert "forward pass along x: the tangent of x is ones (2), every other variable's tangent 0" in done.stdout
    assert "#3 matmul  [0.5, 1.1] (2)  tangent [3.0, 7.0] (2)" in done.stdout
    assert "(d output / d x times ones)" in done.stdout


def test_a_named_intermediate_is_seeded_where_it_stands():
    # y = x * 3, out = y**2 + x: along y, d out / d y = 2y = 12 with x held (as its adjoint)
    document, passes = passes_of("y = x * 3; y ** 2 + x", "x=2")
    assert passes["y"]["tangent"] == 12.0 == document["grads"]["y"]
    assert passes["x"]["tangent"] == 37.0 == document["grads"]["x"]  # 2 * 6 * 3 + 1
    done = gradcalc("eval", "y = x * 3; y ** 2 + x", "x=2", "--steps", "--mode", "forward", "--wrt", "y")
    assert "forward pass along y (seeded where it stands: what it is made of is held fixed): y = 6.0 + 1.0ε" in done.stdout


def test_the_scalar_engine_walks_the_same_pass():
    tensor = passes_of("(a*b + a**3 - b) / a", "a=2", "b=-3")[1]
    scalar = passes_of("(a*b + a**3 - b) / a", "a=2", "b=-3", "--engine", "scalar")[1]
    # d/da = (b + 3a^2)/a - (ab + a^3 - b)/a^2 = 4.5 - 1.25; d/db = (a - 1)/a
    assert scalar["a"]["tangent"] == tensor["a"]["tangent"] == 3.25
    assert scalar["b"]["tangent"] == tensor["b"]["tangent"] == 0.5
    rules = {n["op"]: n["rule"] for n in scalar["a"]["nodes"] if n["op"]}
    assert rules["**3"] == "da * b * a ** (b - 1)  (b = 3)" and rules["/"] == "da / b - db * ans / b"


def test_the_scalar_pass_leaves_the_nodes_grads_as_they_were():
    a, b = Value(2.0), Value(-3.0)
    out = a * b + a * a
    out.backward()
    before = (a.grad, b.grad, out.grad)
    trace = forward_steps(out, a)
    assert trace.tangent == -3.0 + 4.0 and (a.grad, b.grad, out.grad) == before


@given(x=st.floats(0.2, 2.0), y=st.floats(-2.0, 2.0))
def test_each_pass_ends_at_reverse_mode_s_gradient_on_both_engines(x, y):
    def f(u, v):
        return ((u * v).tanh() + (u * u).exp() * v - v / u).sigmoid()

    ts = Tensor(x, requires_grad=True), Tensor(y, requires_grad=True)
    out = f(*ts)
    gradients = grad(out, list(ts))
    vs = Value(x), Value(y)
    scalar_out = f(*vs)
    for seed, scalar_seed, g in zip(ts, vs, gradients):
        assert float(forward_steps(out, seed).tangent) == pytest.approx(float(g.data), rel=1e-12, abs=1e-15)
        assert forward_steps(scalar_out, scalar_seed).tangent == pytest.approx(float(g.data), rel=1e-12, abs=1e-15)


def test_dot_labels_each_edge_with_the_tangent_along_it():
    done = gradcalc("eval", "a*b + a", "a=2", "b=-3", "--steps", "--mode", "forward", "--dot", "-")
    labels = re.findall(r'-> n\d+ \[label="([^"]+)"\]', done.stdout)
    assert sorted(labels) == sorted(["a: 1", "b: 1", "a: -3; b: 2", "a: 1"])


def test_mode_forward_needs_a_known_mode():
    done = gradcalc("eval", "x * 2", "x=1", "--steps", "--mode", "sideways")
    assert done.returncode == 2 and "--mode must be reverse or forward, not 'sideways'" in done.stderr
    assert gradcalc("eval", "x * 2", "x=1", "--steps", "--mode", "reverse").stdout.count("backward pass:") == 1
    assert "--mode" in gradcalc("eval", "--help").stdout


def test_an_output_of_constants_has_no_forward_pass():
    done = gradcalc("eval", "2 * 3", "--steps", "--mode", "forward")
    assert done.returncode == 0 and "forward pass: none (the output depends on no variable)" in done.stdout


def test_repl_steps_forward_along_every_variable_or_one(capsys):
    from gradcalc.cli import render
    from gradcalc.cli.repl import Repl

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    for line in ("x = 2", "y = x * 3", "y ** 2 + x", ":steps forward", ":steps forward y", ":steps forward z", ":steps sideways"):
        repl.handle(line)
    captured = capsys.readouterr()
    out = captured.out
    # every variable reported (x, then y), then y alone
    assert out.count("forward pass along x") == 1 and "tangent of the output: 37.0  (d output / d x)" in out
    assert out.count("forward pass along y") == 2 and out.count("tangent of the output: 12.0  (d output / d y)") == 2
    assert "error: :steps forward z: 'z' is not a named value of the last result's graph" in captured.err
    assert "usage: :steps" in captured.err
    repl.handle(":steps")
    assert "backward pass: 3 steps" in capsys.readouterr().out


# ---- the rules as text ------------------------------------------------------------------------


@pytest.mark.parametrize("name, carried, rule", [
    ("mul", None, "da * b + db * a"),
    ("mul", [False, True], "db * a"),
    ("sub", None, "da - db"),
    ("div", None, "da / b - db * ans / b"),
    ("relu", None, "dx * (x > 0)"),
    ("tanh", None, "dx / cosh(x) ** 2"),
    ("neg", None, "-dx"),
    ("matmul", None, "da @ b + a @ db"),
    ("sum", None, "sum(dx, axis, keepdims)"),
    ("getitem", None, "dx[index]"),
    ("concatenate", [True, False, True], "concatenate(dx0, 0, dx2, axis)"),
    ("clip", None, "dx * (low <= x <= high) + dlow * (x < low) + dhigh * (x > high)"),
    ("logsumexp", None, "sum over axis of dx * d ans / d x"),
    ("softmax", None, "ans * (dx - sum(ans * dx, axis, keepdims=True))"),
])
def test_jvp_rules_read_in_the_inputs_and_their_tangents(name, carried, rule):
    assert jvp_rule(REGISTRY[name], carried) == rule


def test_every_differentiable_op_has_jvp_rule_text_in_the_users_words():
    """No plumbing (tangents[k], m.), no rule read from nothing, and calls only of
    functions the user can call (or named in words), as the VJP rules."""
    from gradcalc.parser.backends import public_ops

    callable_words = set(public_ops())
    offending = {}
    for op in (op for op in REGISTRY.values() if op.public and op.has_gradient):
        rule = jvp_rule(op)
        if unexplained_calls(rule, callable_words) or "tangents" in rule or "(no rule text)" in rule or not re.search(r"\bd[a-z]", rule):
            offending[op.name] = rule
    assert offending == {}


def test_a_jvp_without_text_is_read_from_its_source_and_an_op_without_one_says_so():
    defop("text_probe", lambda x: 2 * x, (lambda m, g, ans, x: 2 * g,), doc="probe", category="test",
          jvp=lambda m, tangents, ans, x: 2 * tangents[0])
    defop("no_jvp_probe", lambda x: 2 * x, (lambda m, g, ans, x: 2 * g,), doc="probe", category="test")
    try:
        assert jvp_rule(REGISTRY["text_probe"]) == "2 * dx"
        assert jvp_rule(REGISTRY["no_jvp_probe"]) == NO_JVP
    finally:
        unregister("text_probe")
        unregister("no_jvp_probe")


def test_help_shows_the_forward_rule_beside_the_derivative():
    done = gradcalc("ops", "tanh")
    assert "derivative (as --steps shows it): g / cosh(x) ** 2" in done.stdout
    assert "forward (as --steps --mode forward shows it): dx / cosh(x) ** 2" in done.stdout
