"""Named values: every name reports d(output)/d(name) (docs/language.md, "Named values").

A leaf reports its total derivative, a named intermediate its adjoint (what PyTorch's
retain_grad() gives), an alias the node it shares. One rule for eval, run, the REPL and
JSON; the expected numbers are closed forms and PyTorch float64.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.cli import render
from gradcalc.cli.repl import Repl
from gradcalc.parser import Session
from gradcalc.parser.analysis import analyze

from .test_cli import gradcalc


def eval_json(*args):
    done = gradcalc("eval", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# ---- the reported cases, through the real command ---------------------------------------------


def test_a_binding_computed_from_another_reports_its_adjoint():
    # y = 2x, out = y**2: d out/dy = 2y = 12, d out/dx = 2y * 2 = 24.
    out = eval_json("y ** 2", "x=3", "y=x * 2")
    assert out["value"] == 36.0
    assert out["grads"] == {"x": 24.0, "y": 12.0}


def test_text_output_agrees_with_the_tree():
    done = gradcalc("eval", "y ** 2", "x=3", "y=x * 2", "--tree")
    assert "grad y: 12.0" in done.stdout and "grad x: 24.0" in done.stdout
    assert "y = mul  6.0  grad 12.0" in done.stdout


def test_a_named_intermediate_in_the_expression_with_wrt():
    # out = x + y, y = 2x: d out/dy = 1; d out/dx = 1 + 2 = 3.
    assert eval_json("x = 1; y = x*2; x + y", "--wrt", "y")["grads"] == {"y": 1.0}
    assert eval_json("x = 1; y = x*2; x + y")["grads"] == {"x": 3.0, "y": 1.0}


def test_an_alias_reports_the_node_it_shares():
    assert eval_json("z", "x=3", "z=x")["grads"] == {"x": 1.0, "z": 1.0}
    assert eval_json("z = x; z * x", "x=3")["grads"] == {"x": 6.0, "z": 6.0}


def test_a_binding_the_output_does_not_use_reports_zeros():
    assert eval_json("x * 2", "x=3", "u=[1, 2]")["grads"] == {"x": 2.0, "u": [0.0, 0.0]}


def test_the_scalar_engine_follows_the_same_rule():
    assert eval_json("y ** 2", "x=3", "y=x * 2", "--engine", "scalar")["grads"] == {"x": 24.0, "y": 12.0}


def test_run_reports_named_intermediates(tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("x = 3\ny = x * 2\ny ** 2\n")
    done = gradcalc("run", str(script), "--json")
    assert json.loads(done.stdout)["grads"] == {"x": 24.0, "y": 12.0}


def test_the_repl_reports_named_intermediates(capsys):
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    for line in ("x = 3", "y = x * 2", "y ** 2"):
        repl.handle(line)
    out = capsys.readouterr().out
    assert "grad x: 24.0" in out and "grad y: 12.0" in out
    repl.handle("_ * ans")  # the last result's names are not reported unless asked for
    out = capsys.readouterr().out
    assert "grad _" not in out and "grad ans" not in out and "grad y: 864.0" in out  # (y**2)**2: 4 y**3


def test_a_reassigned_name_reports_its_current_binding():
    s = Session()
    [result] = s.run_source("x = 2; y = x * 3; y = y + 1; y * x")
    # the current y is the add node (7): d(y*x)/dy = x = 2; d/dx = y + x * dy/dx = 7 + 2*3
    grads = analyze(result.value, None, s.variables).grads
    assert grads["y"] == 2.0 and grads["x"] == 13.0


# ---- against PyTorch's retain_grad ----------------------------------------------------------------

PROGRAMS = [
    ("a = x * w; b = tanh(a); c = b * b + a; sum(c * w)", ["a", "b", "c"]),
    ("h = x @ W; r = relu(h); sum(r ** 2) + sum(h)", ["h", "r"]),
    ("s = sigmoid(x); t = s * x; u = t; mean(u * s)", ["s", "t", "u"]),
]


def torch_program(torch, source, values):
    """Run the same statements in PyTorch, retaining every intermediate's gradient."""
    env = {name: torch.tensor(v, dtype=torch.float64, requires_grad=True) for name, v in values.items()}
    fns = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid, "sum": torch.sum, "mean": torch.mean}
    *statements, last = [s.strip() for s in source.split(";")]
    for statement in statements:
        name, expr = (p.strip() for p in statement.split("=", 1))
        env[name] = eval(expr, fns, env)  # noqa: S307 - our own fixed test programs
        if env[name].grad_fn is not None:
            env[name].retain_grad()
    out = eval(last, fns, env)  # noqa: S307
    out.backward()
    return {name: t.grad.numpy() for name, t in env.items()}


@pytest.mark.parametrize("source, intermediates", PROGRAMS)
def test_named_intermediates_match_torch_retain_grad(source, intermediates):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    values = {"x": rng.normal(size=3), "w": rng.normal(size=3), "W": rng.normal(size=(3, 3))}
    s = Session()
    bindings = {name: v for name, v in values.items() if name in source}
    for name, v in bindings.items():
        s.run_source(f"{name} = {np.array2string(v, separator=',', precision=17)}")
    [result] = s.run_source(source)
    grads = analyze(result.value, None, s.variables).grads
    expected = torch_program(torch, source, bindings)
    assert set(grads) == set(expected)
    for name in expected:
        np.testing.assert_allclose(grads[name], expected[name], rtol=1e-13, atol=1e-15, err_msg=name)


@settings(max_examples=40)
@given(x=st.floats(-3, 3), k=st.floats(-3, 3), depth=st.integers(1, 6))
def test_chain_of_names_each_reports_its_adjoint(x, k, depth):
    # y0 = x, y_i = y_{i-1} * k + 1, out = y_n ** 2: d out/d y_i = 2 y_n k^(n-i).
    source = "y0 = x\n" + "".join(f"y{i} = y{i - 1} * {k!r} + 1\n" for i in range(1, depth + 1)) + f"y{depth} ** 2"
    s = Session()
    s.run_source(f"x = {x!r}")
    [result] = s.run_source(source)
    grads = analyze(result.value, None, s.variables).grads
    y_n = s.variables[f"y{depth}"].item()
    for i in range(1, depth + 1):
        assert grads[f"y{i}"] == pytest.approx(2 * y_n * k ** (depth - i), rel=1e-12, abs=1e-12)
    assert grads["x"] == pytest.approx(2 * y_n * k**depth, rel=1e-12, abs=1e-12)
    assert grads["y0"] == grads["x"]  # an alias


@pytest.mark.parametrize("source, expected", [
    ("x = 3; c = detach(x); d = c * 2; m = x > 2; c * x + d * x + m * x", {"x": 10.0}),
    ("x = 2; k = 3; k * x", {"k": 2.0, "x": 3.0}),
    ("x = 2; y = x * 3; y ** 2", {"x": 36.0, "y": 12.0}),
    ("x = 2; y = x * 3; z = y; z * y", {"x": 36.0, "y": 12.0, "z": 12.0}),
])
@pytest.mark.parametrize("engine", ["tensor", "scalar"])
def test_both_engines_report_the_same_names(source, expected, engine):
    s = Session(engine=engine)
    [result] = s.run_source(source)
    grads = analyze(result.value, None, s.variables).grads
    assert {name: float(g) for name, g in grads.items()} == expected
