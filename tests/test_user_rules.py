"""Derivative rules the user writes: `vjp f(x, g) = ...` beside `def f(x) = ...`.

Numbers come from closed forms and from torch (a torch.autograd.Function with the same
rule), through the real command: eval, run, check files and the REPL.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gradcalc.parser import LanguageError, Session
from gradcalc.parser.check_statements import make_check_handler

from .test_cli import gradcalc
from .test_repl import drive

SOFTPLUS = "def softplus2(x) = log(1 + exp(x)); vjp softplus2(x, g) = g * sigmoid(x)"
# A rule that is not the body's derivative: the body is x**3, the rule says 2x (the
# derivative of x**2). Backward passes must use it anyway.
ODD = "def cube(x) = x**3; vjp cube(x, g) = g * 2 * x"
PRODUCT = "def f(x, y) = x * y; vjp f(x, y, g) = (g * y, g * x)"


def sigmoid(x):
    return 1 / (1 + np.exp(-np.asarray(x, dtype=float)))


def evaluated(source: str, *bindings: str) -> dict:
    done = gradcalc("eval", "--json", source, *bindings)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def failure(source: str, *bindings: str) -> dict:
    done = gradcalc("eval", "--json", source, *bindings)
    assert done.returncode == 2, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[0])["error"]


def checks(tmp_path, text: str) -> list[dict]:
    path = tmp_path / "rules.gc"
    path.write_text(text)
    done = gradcalc("check", "--json", str(path))
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)["checks"]


# ---- the rule is what backward passes use -------------------------------------------------


def test_the_rule_gives_the_gradient_and_the_body_the_value():
    x = [0.5, -1.0, 2.0]
    out = evaluated(f"{SOFTPLUS}; softplus2(x)", "x=[0.5, -1, 2]")
    assert np.allclose(out["value"], np.log1p(np.exp(x)), rtol=1e-15)
    assert np.allclose(out["grads"]["x"], sigmoid(x), rtol=1e-15)


def test_the_rule_is_used_even_where_it_is_not_the_bodys_derivative():
    """As torch.autograd.Function and jax.custom_vjp: the body's graph is not differentiated."""
    out = evaluated(f"{ODD}; cube(x)", "x=1.5")
    assert out["value"] == pytest.approx(1.5**3, rel=1e-15)
    assert out["grads"]["x"] == pytest.approx(3.0, rel=1e-15)  # 2x, not 3x^2
    assert evaluated(f"{ODD}; grad(cube(x), x)", "x=1.5")["value"] == pytest.approx(3.0, rel=1e-15)


def test_several_arguments_take_one_gradient_each_and_the_chain_rule_goes_on():
    out = evaluated(f"{PRODUCT}; sin(f(a, b))", "a=2", "b=3")
    assert out["grads"]["a"] == pytest.approx(3 * math.cos(6), rel=1e-14)
    assert out["grads"]["b"] == pytest.approx(2 * math.cos(6), rel=1e-14)


def test_grad_of_grad_differentiates_the_rule():
    """The rule is built from ops, so a second derivative is the rule's derivative:
    d/dx sigmoid(x) = sigmoid(x)(1 - sigmoid(x)); for the odd rule, d/dx 2x = 2 (not 6x)."""
    s = sigmoid(0.7)
    assert evaluated(f"{SOFTPLUS}; grad(grad(softplus2(x), x), x)", "x=0.7")["value"] == pytest.approx(s * (1 - s), rel=1e-14)
    assert evaluated(f"{ODD}; grad(grad(cube(x), x), x)", "x=0.7")["value"] == pytest.approx(2.0, rel=1e-15)
    # d2/da db (a b)^2 = 4ab, through the rule's g * y and g * x
    assert evaluated(f"{PRODUCT}; grad(grad(f(a, b)**2, a), b)", "a=2", "b=3")["value"] == pytest.approx(24.0, rel=1e-15)
    hessian = evaluated(f"{PRODUCT}; hessian(f(v[0], v[1])**2, v)", "v=[2, 3]")["value"]
    assert np.allclose(hessian, [[2 * 9, 4 * 6], [4 * 6, 2 * 4]], rtol=1e-14)


def test_a_rule_whose_derivative_is_zero_gives_a_zero_second_derivative():
    """`g * 2` has no x in it: the second derivative through it is 0, as torch's is."""
    out = evaluated("def q(x) = x**2; vjp q(x, g) = g * 2; grad(grad(q(x), x), x)", "x=3")
    assert out["value"] == 0.0


try:
    import torch
except ImportError:  # the oracles extra is not installed: the torch comparisons skip
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (the oracles extra)")


def torch_functions():
    """torch.autograd.Function twins of SOFTPLUS, PRODUCT and ODD: the same forwards, the same rules."""

    class Softplus(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.log(1 + torch.exp(x))

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.sigmoid(x)

    class Product(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y, g * x

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    return Softplus, Product, Cube


@needs_torch
def test_first_and_second_derivatives_agree_with_torch_autograd_function():
    softplus, _, cube = torch_functions()
    x = torch.tensor([0.3, -1.2, 2.5], dtype=torch.float64, requires_grad=True)
    y = torch.sum(torch.tanh(softplus.apply(x)) * cube.apply(x))
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx.sum(), x)
    expr = "sum(tanh(softplus2(x)) * cube(x))"
    ours = evaluated(f"{SOFTPLUS}; {ODD}; grad({expr}, x)", "x=[0.3, -1.2, 2.5]")
    assert np.allclose(ours["value"], gx.detach().numpy(), rtol=1e-13, atol=0)
    assert np.allclose(ours["grads"]["x"], ggx.numpy(), rtol=1e-13, atol=0)


@needs_torch
def test_several_arguments_agree_with_torch_at_second_order():
    _, product, _ = torch_functions()
    a = torch.tensor([0.5, -2.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([1.5, 0.25], dtype=torch.float64, requires_grad=True)
    y = torch.sum(torch.sin(product.apply(a, b)) * a)
    ga, gb = torch.autograd.grad(y, (a, b), create_graph=True)
    (gab,) = torch.autograd.grad(ga.sum(), b)
    ours = evaluated(f"{PRODUCT}; grad(sum(sin(f(a, b)) * a), a)", "a=[0.5, -2]", "b=[1.5, 0.25]")
    assert np.allclose(ours["value"], ga.detach().numpy(), rtol=1e-13)
    assert np.allclose(ours["grads"]["b"], gab.numpy(), rtol=1e-13)
    ours_b = evaluated(f"{PRODUCT}; sum(sin(f(a, b)) * a)", "a=[0.5, -2]", "b=[1.5, 0.25]")
    assert np.allclose(ours_b["grads"]["b"], gb.detach().numpy(), rtol=1e-13)


# ---- check: the rule against the numeric derivative of the body ---------------------------


def test_check_passes_a_right_rule_by_complex_step_and_fails_a_wrong_one_naming_it(tmp_path):
    found = checks(tmp_path, f"{SOFTPLUS}\n{ODD}\nv = [0.5, -1, 2]\ncheck softplus2(v)\ncheck cube(v)\ncheck sin(cube(v)) + v\n")
    right, wrong, inside = found
    assert right["status"] == "pass" and right["method"] == "complex" and right["max_abs_error"] < 1e-15
    assert wrong["status"] == "fail"
    # d cube / d v[2] at 2: the rule says 2 * 2, the body's derivative is 3 * 2**2
    assert "analytic 4.0, numeric 12.0" in wrong["message"] or "analytic 4.0, numeric 11.99" in wrong["message"], wrong["message"]
    assert wrong["message"].endswith("ops whose VJP disagrees: cube (your vjp rule, for x)")
    assert inside["status"] == "fail" and inside["message"].endswith("ops whose VJP disagrees: cube (your vjp rule, for x)")


def test_a_wrong_rule_for_one_argument_is_named_by_that_argument(tmp_path):
    found = checks(tmp_path, "def f(x, y) = x * y\nvjp f(x, y, g) = (g * y, g * y)\na = 2\nb = 3\ncheck f(a, b)\ncheck f(a, b) wrt a\n")
    both, only_a = found
    assert both["status"] == "fail" and both["message"].startswith("d out / d b: analytic 3.0, numeric 2.0")
    assert both["message"].endswith("ops whose VJP disagrees: f (your vjp rule, for y)")
    assert only_a["status"] == "pass"  # a's rule, g * y, is right


def test_a_body_that_is_not_complex_safe_is_checked_by_central_differences(tmp_path):
    [found] = checks(tmp_path, "def h(x) = erf(x) * x\nvjp h(x, g) = g * (erf(x) + x * 2 / sqrt(pi) * exp(-x**2))\nv = [0.5, -1, 2]\ncheck h(v)\n")
    assert found["status"] == "pass" and found["method"] == "central"


def test_check_of_a_derivative_through_a_rule(tmp_path):
    """check grad(...) differentiates the rule's graph: the rule of softplus2 is sigmoid, whose own ops check."""
    [found] = checks(tmp_path, f"{SOFTPLUS}\nx = 0.3\ncheck grad(softplus2(x), x)\n")
    assert found["status"] == "pass"


def test_check_value_against_the_closed_form(tmp_path):
    [found] = checks(tmp_path, f"{SOFTPLUS}\nx = [0.3, -4]\ncheck grad(sum(softplus2(x)), x) == sigmoid(x)\n")
    assert found["status"] == "pass"


def test_a_rule_read_by_gradcalc_check_and_run_and_the_repl(tmp_path, capsys):
    script = tmp_path / "rule.gc"
    script.write_text(f"{SOFTPLUS}\nx = 1.5\ngrad(softplus2(x), x)\n".replace("; ", "\n"))
    done = gradcalc("run", str(script))
    assert done.returncode == 0 and f"value: {float(sigmoid(1.5))!r}" in done.stdout, done.stdout
    repl = drive(f"{SOFTPLUS}\nx = 1.5\nsoftplus2(x)\n:vars\nhelp(softplus2)\n".replace("; ", "\n"))
    out = capsys.readouterr().out
    assert f"grad x: {float(sigmoid(1.5))!r}" in out
    assert out.count("vjp softplus2(x, g) = g * sigmoid(x)") == 2  # :vars and help
    assert repl.session.functions["softplus2"].rule is not None


def test_steps_show_the_users_rule_as_the_rule_used():
    done = gradcalc("eval", "--steps", f"{SOFTPLUS}; softplus2(x) * 2", "x=1")
    assert done.returncode == 0
    assert "   rule  softplus2: vjp softplus2(x, g) = g * sigmoid(x)  (your rule)" in done.stdout.splitlines()
    assert "log" not in done.stdout.split("backward pass")[1]  # the body's ops are not in the pass


def test_forward_mode_says_it_cannot_pass_through_a_rule(tmp_path):
    done = gradcalc("eval", "--steps", "--mode", "forward", f"{SOFTPLUS}; softplus2(x)", "x=1")
    assert done.returncode == 2 and "softplus2 has no JVP rule, so forward mode cannot pass through it" in done.stderr
    done = gradcalc("eval", "--mode", "forward", f"{SOFTPLUS}; softplus2(x)", "x=1")
    assert done.returncode == 2 and "error: forward mode: softplus2 has no JVP rule" in done.stderr, done.stderr
    [found] = checks(tmp_path, f"{SOFTPLUS}\nx = 1\ncheck softplus2(x) mode=forward\n".replace("; ", "\n"))
    assert found["status"] == "error" and "softplus2 has no JVP rule" in found["message"]


# ---- bad rules, each refused at its place --------------------------------------------------


@pytest.mark.parametrize("source, kind, message, column", [
    ("vjp nosuch(x, g) = g", "name", "vjp nosuch: there is no function nosuch; define it first (def nosuch(x) = ...), then give its rule", 5),
    ("vjp sin(x, g) = g", "name", "vjp sin: sin is a built-in function, whose rule is its own; a vjp rule is for a function you define with def", 5),
    ("def f(x) = x*x; vjp f(x) = 2*x", "argument",
     "vjp f takes f's 1 parameter and then the cotangent (the gradient of the output), as in vjp f(x, g), got 1 parameter", 23),
    ("def f(x, y) = x*y; vjp f(x, g) = g", "argument",
     "vjp f takes f's 2 parameters and then the cotangent (the gradient of the output), as in vjp f(x, y, g), got 2 parameters", 26),
    ("def f(x) = x*x; vjp f() = 1", "argument",
     "vjp f takes f's 1 parameter and then the cotangent (the gradient of the output), as in vjp f(x, g), got 0 parameters", 22),
    ("def f(x) = x; vjp f(x, x) = x", "syntax", "a parameter name is repeated in vjp f", 15),
    ("def f(x) = x; vjp f(x, if) = g", "name", "'if' is a keyword of the language and cannot be used as a name; choose another", 24),
])
def test_a_bad_rule_statement_is_refused_at_its_place(source, kind, message, column):
    error = failure(source)
    assert (error["kind"], error["message"], error["line"], error["column"]) == (kind, message, 1, column)


@pytest.mark.parametrize("rule, message, column", [
    ("vjp f(x, y, g) = (g * y, g * x, g)", "vjp f gives 3 values; it must give 2 values, one per parameter of f (x, y), as a tuple", 18),
    ("vjp f(x, y, g) = g * y", "vjp f gives 1 value; it must give 2 values, one per parameter of f (x, y), as a tuple", 18),
    ("vjp f(x, y, g) = (g * y, g * [1, 2])",
     "vjp f: the gradient for y has shape (2,), but y has shape (); each gradient is shaped as its argument (sum over what broadcasting added)", 26),
])
def test_what_a_rule_returns_is_checked_when_it_runs_and_placed_in_the_rule(rule, message, column):
    error = failure(f"def f(x, y) = x * y\n{rule}\ngrad(f(a, 3), a)", "a=1")
    assert (error["kind"] in ("value", "shape"), error["message"], error["line"], error["column"], error["function"]) == (
        True, message, 2, column, "vjp f")


def test_a_one_argument_rule_that_gives_two_values_and_a_string():
    assert failure("def f(x) = x; vjp f(x, g) = (g, g); grad(f(x), x)", "x=1")["message"] == (
        "vjp f gives 2 values; it must give one value, the gradient for x")
    assert "the gradient for x must be a tensor" in failure("def f(x) = x; vjp f(x, g) = 'a'; grad(f(x), x)", "x=1")["message"]


def test_an_error_inside_the_rule_is_placed_in_the_rule(capsys):
    drive("def f(x) = x * 2\nvjp f(x, g) = g * nosuch\nx = 1\nf(x)\n")
    err = capsys.readouterr().err
    assert "unknown name 'nosuch'  [in vjp f, line 1, column 19]\n1 | vjp f(x, g) = g * nosuch\n" in err, err


def test_vjp_stays_an_ordinary_name_and_two_names_are_still_a_syntax_error():
    assert evaluated("vjp = 3; vjp * 2")["value"] == 6.0
    assert evaluated("def vjp(a, b) = a - b; vjp(5, 3)")["value"] == 2.0
    error = failure("sin x", "x=1")
    assert error["kind"] == "syntax" and error["message"].endswith("found 'x'") and error["column"] == 5
    error = failure("wot f(x, g) = g")
    assert error["kind"] == "syntax" and error["message"].endswith("found 'f'") and error["column"] == 5


def test_redefining_the_function_drops_its_rule_with_a_warning():
    session = Session()
    session.run_source(f"{ODD}\ndef cube(x) = x**3\nx = 2")
    assert session.functions["cube"].rule is None
    assert any("def cube replaces the cube that had a vjp rule" in w for w in session.warnings)
    [result] = session.run_source("grad(cube(x), x)")
    assert result.value.item() == 12.0  # the body's derivative again
    session.run_source("vjp cube(x, g) = g")  # and a new rule may be given
    assert session.run_source("grad(cube(x), x)")[0].value.item() == 1.0


def test_a_variable_read_from_outside_is_a_constant_to_the_rule_and_said_so():
    session = Session()
    session.run_source("w = 3\ndef f(x) = w * x\nvjp f(x, g) = g * w\nx = 2")
    [result] = session.run_source("grad(f(x) * w, w)")
    assert result.value.item() == 6.0  # f(x) = 6 as a constant: only the outer w counts
    assert any("f reads w from outside its parameters" in warning for warning in session.warnings)


@pytest.mark.parametrize("argument", ["2", "x"])
def test_the_outside_variable_is_a_constant_whether_or_not_the_argument_is(argument):
    """d/dw (f(a) + w) is 1 with f(a) = a * w a constant to w: with a constant argument too."""
    result = gradcalc("eval", "--json", f"w = 3; x = 2; def f(x) = x * w; vjp f(x, g) = g * 100; f({argument}) + w")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["value"] == 9.0 and out["grads"]["w"] == 1.0
    assert "f reads w from outside its parameters" in result.stderr


def test_the_scalar_engine_refuses_a_rule_and_says_how_to_switch():
    error = gradcalc("eval", "--engine", "scalar", "def f(x) = x; vjp f(x, g) = 2*g; f(x)", "x=3")
    assert error.returncode == 2 and "f has a vjp rule, and rules need the tensor engine (--engine tensor)" in error.stderr


def test_a_second_rule_replaces_the_first_as_jax_defvjp_does():
    """d/dx at x = 3 by the rule in force: 2x = 6, then 1 (the body x**3 would give 27)."""
    assert evaluated(f"{ODD}; grad(cube(x), x)", "x=3")["value"] == 6.0
    assert evaluated(f"{ODD}; vjp cube(x, g) = g; grad(cube(x), x)", "x=3")["value"] == 1.0


@pytest.mark.parametrize("body", [
    "    vjp cube(x, g) = g * 2 * x\n",
    "    def cube(x) = x**3\n    vjp cube(x, g) = g * 2 * x\n",
])
def test_a_loop_runs_its_def_and_vjp_again_without_a_word(body):
    done = gradcalc("run", "-", stdin=f"def cube(x) = x**3\nfor i in range(3):\n{body}x = 3\ngrad(cube(x), x)\n")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "\nvalue: 6.0\n" in done.stdout  # the rule 2x at 3, not the body's 27


def test_a_def_in_a_loop_is_defined_once_per_iteration():
    done = gradcalc("run", "-", stdin="for i in range(3): def f(x) = x * 2\nf(5)\n")
    assert done.returncode == 0 and done.stderr == "" and "\nvalue: 10.0\n" in done.stdout


def test_the_repl_takes_the_same_vjp_line_again_and_a_new_one(capsys):
    repl = drive("def f(x) = x**3\nvjp f(x, g) = g * 2 * x\nvjp f(x, g) = g * 2 * x\nx = 3\ngrad(f(x), x)\nvjp f(x, g) = g\n")
    out, err = capsys.readouterr()
    assert err == "" and "value: 6.0" in out
    assert repl.session.functions["f"].rule.rule.text == "vjp f(x, g) = g"


def test_calls_nested_through_rules_stop_at_the_depth_cap():
    session = Session(max_call_depth=30)
    session.run_source("def p(x, n) = x if n == 0 else x * p(x, n - 1)\nvjp p(x, n, g) = (g, 0 * n)\nx = 1.5")
    with pytest.raises(LanguageError) as caught:
        session.run_source("p(x, 100)")
    assert caught.value.kind == "recursion"
    assert session.run_source("p(x, 5)")[0].value.item() == pytest.approx(1.5**6)


def test_a_loop_trains_through_a_rule():
    """Gradient descent on (softplus2(w) - 1)^2: the fixed point is softplus2(w) = 1, w = log(e - 1)."""
    session = Session()
    session.run_source(f"{SOFTPLUS}\nw = 2\nfor i in range(200): w -= 0.5 * grad((softplus2(w) - 1)**2, w)".replace("; ", "\n"))
    assert session.variables["w"].item() == pytest.approx(math.log(math.e - 1), rel=1e-9)


def test_check_statements_in_a_session_use_the_same_blame():
    session = Session(on_check=make_check_handler())
    [result] = session.run_source(f"{ODD}\nx = 1.5\ncheck cube(x)")
    assert result.outcome.status == "fail" and result.outcome.message.endswith("cube (your vjp rule, for x)")


def test_a_function_with_a_rule_named_as_a_batched_op_is_replayed_one_column_at_a_time(tmp_path):
    """A check of many columns replays elementwise ops batched, by name; a user's `exp`
    whose body sums over its input is not elementwise, and its check must still pass."""
    text = "def exp(x) = x * sum(x)\nvjp exp(x, g) = g * sum(x) + sum(g * x)\nv = [0.5, -1, 2, 1.5, -0.25, 3, 0.75, -2]\ncheck exp(v)\n"
    [found] = checks(tmp_path, text)
    assert found["status"] == "pass" and found["max_abs_error"] < 1e-12, found


def test_two_calls_that_give_the_same_array_each_use_their_own_arguments():
    """`def f(x, y) = x` gives x's own array from both calls: each node's rule still runs
    on its own y (d/da of y1 * a + y2 * a through the rule is y1 + y2 = 7)."""
    out = evaluated("def f(x, y) = x; vjp f(x, y, g) = (g * y, g * 0); f(a, b) + f(a, c)", "a=1", "b=2", "c=5")
    assert out["grads"]["a"] == 7.0 and out["grads"]["b"] == 0.0


def test_jacobian_through_a_rule_is_the_closed_form():
    out = evaluated(f"{SOFTPLUS}; jacobian(softplus2(v * [1, 2]), v)", "v=[0.5, -1]")
    assert np.allclose(out["value"], np.diag(sigmoid([0.5, -2.0]) * [1, 2]), rtol=1e-15, atol=0)
