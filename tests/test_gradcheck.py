"""Gradcheck: check statements, `gradcalc check`, its reports, and that it catches wrong VJPs."""
from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from gradcalc.autodiff import REGISTRY, Check, Tensor, defop
from gradcalc.autodiff.gradcheck import gradcheck, gradcheck_graph
from gradcalc.autodiff.registry import unregister
from gradcalc.cli.check_command import junit_xml
from gradcalc.cli.parallel import run_checks
from gradcalc.parser import Session
from gradcalc.parser.check_statements import CheckDefaults, make_check_handler

from .test_cli import gradcalc

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def checks(source, **defaults):
    [(_, outcomes)] = run_checks([("t.gc", source)], CheckDefaults(**defaults), [])
    return outcomes


def test_complex_step_is_used_where_every_op_is_complex_safe_and_is_exact():
    [o] = checks("x = 0.7\ncheck tanh(x) * exp(x) / (1 + x**2)")
    assert o.passed and o.method == "complex"
    assert o.max_rel_error <= 1e-15


def test_central_differences_where_an_op_is_not_complex_safe():
    [o] = checks("x = 0.7\ncheck erf(x) * softplus(x)")
    assert o.passed and o.method == "central"
    assert o.max_abs_error < 1e-7


def test_full_jacobian_of_a_non_scalar_output():
    x = Tensor(np.array([0.5, -0.2, 1.1]), requires_grad=True)
    y = Tensor(np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]]), requires_grad=True)
    result = gradcheck_graph(y @ x * x[0], [x, y])
    assert result.passed
    assert result.analytic[0].shape == (2, 3) and result.analytic[1].shape == (2, 6)


def test_second_derivative_checks_on_tanh_and_a_two_variable_function():
    outcomes = checks("x = 0.8\ny = -0.6\ncheck grad(tanh(x), x)\ncheck grad(x**3 * y + sin(x * y), x) wrt x, y")
    assert [o.status for o in outcomes] == ["pass", "pass"]
    assert outcomes[1].variables == ["x", "y"]


def test_a_wrong_vjp_is_caught_and_its_op_named():
    # cube with the derivative 2x instead of 3x^2: a deliberately wrong VJP.
    defop("bad_cube", lambda x: x**3, (lambda m, g, ans, x: g * 2 * x,), doc="wrong on purpose", category="test",
          complex_safe=True, check=Check())
    try:
        [ok, bad, mixed] = checks("x = 0.9\ncheck x ** 3\ncheck bad_cube(x)\ncheck tanh(bad_cube(x) + x)")
        assert ok.passed
        assert bad.status == "fail" and "bad_cube" in bad.message
        assert mixed.status == "fail" and "bad_cube" in mixed.message and "tanh" not in mixed.message.split("disagrees:")[1]
    finally:
        unregister("bad_cube")
    assert "bad_cube" not in REGISTRY


def test_a_failing_or_erroring_check_never_stops_the_others():
    outcomes = checks("x = 0.5\ncheck nosuch(x)\ny = undefined + 1\ncheck relu(x - 0.5) method=central\ncheck [1, 2] + [1, 2, 3]\ncheck exp(x)")
    assert [o.status for o in outcomes] == ["error", "error", "fail", "error", "pass"]
    assert outcomes[0].line == 2 and "unknown function" in outcomes[0].message
    assert outcomes[1].text.startswith("(setup)")


def test_kink_warning():
    outcomes = checks("x = [0.0, 1.0]\ncheck abs(x)\ny = [1.0, 1.0]\ncheck max(y)\ncheck clip(x, low=0, high=2)")
    assert all(any("kink" in w for w in o.warnings) for o in outcomes)
    [clean] = checks("x = 0.3\ncheck relu(x)")
    assert clean.warnings == []


def test_clip_with_tensor_bounds_broadcasts_its_gradient():
    [o] = checks("x = [0.3, 0.7]\ncheck clip(x, low=[0.5, 0.5], high=0.9) * x")
    assert o.passed


def test_tolerances_per_check_and_per_run():
    source = "x = 0.3\ncheck relu(x) * x wrt x tol=1e-12\ncheck relu(x) * x"
    strict, default = checks(source, method="central")
    assert strict.atol == 1e-12 and strict.rtol == 1e-12 and default.atol == 1e-5
    [forced] = checks("x = 0.3\ncheck tanh(x)", method="central", atol=1e-4, rtol=1e-4)
    assert forced.method == "central" and forced.atol == 1e-4
    [own] = checks("x = 0.3\ncheck tanh(x) method='central'")
    assert own.method == "central"
    [bad] = checks("x = 0.3\ncheck tanh(x) method='guess'")
    assert bad.status == "error" and "method" in bad.message


def test_checks_work_in_scripts_run_by_the_session():
    session = Session(on_check=make_check_handler())
    [result] = session.run_source("w = [0.2, 0.4]\ncheck softmax(w * 3)")
    assert result.outcome.passed


def test_gradcheck_on_python_functions():
    assert gradcheck(lambda a, b: (a * b).sum(), [np.ones(3), np.arange(3.0)]).passed
    wrong = gradcheck(lambda a: a.relu() * 0 + a.detach() * a, [np.array([0.5])], method="central")
    assert not wrong.passed  # detach hides a term: reverse mode differs from differences


def test_junit_xml_structure():
    outcomes = checks("x = 0.5\ncheck exp(x)\ncheck relu(x - 0.5) method=central\ncheck nosuch(x)")
    root = ET.fromstring(junit_xml([("t.gc", outcomes)]))
    [suite] = root.findall("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "1"
    cases = suite.findall("testcase")
    assert cases[0].find("failure") is None and cases[1].find("failure") is not None and cases[2].find("error") is not None


def test_check_command_exit_codes_json_and_junit(tmp_path):
    good = tmp_path / "good.gc"
    good.write_text("x = 0.5\ncheck exp(x)\ncheck tanh(x) * x\n")
    bad = tmp_path / "bad.gc"
    bad.write_text("x = 0.5\ncheck relu(x - 0.5) method=central\ncheck nosuch(x)\n")
    assert gradcalc("check", str(good)).returncode == 0
    done = gradcalc("check", str(good), str(bad), "--json", "--junit-xml", str(tmp_path / "r.xml"))
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert doc["summary"] == {"pass": 2, "fail": 1, "error": 1}
    assert {c["file"] for c in doc["checks"]} == {str(good), str(bad)}
    suites = ET.parse(tmp_path / "r.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == [str(good), str(bad)]
    assert gradcalc("check", str(tmp_path / "missing.gc")).returncode == 2
    assert gradcalc("check", str(good), "--method", "psychic").returncode == 2
    text = gradcalc("check", str(good), str(bad)).stdout
    assert "2 passed, 1 failed, 1 errors" in text


def test_examples_all_pass():
    done = gradcalc("check", *sorted(str(p) for p in EXAMPLES.glob("*.gc")))
    assert done.returncode == 0, done.stdout
    assert " 0 failed, 0 errors" in done.stdout


def test_a_thousand_scalar_checks_run(tmp_path):
    lines = ["x = 0.7", "y = -1.3"] + [f"check tanh(x) * y + exp(x / {i + 2})" for i in range(1000)]
    outcomes = checks("\n".join(lines))
    assert len(outcomes) == 1000 and all(o.passed for o in outcomes)
    assert math.isfinite(outcomes[0].max_rel_error)


# ---- batches that finish; check files that say exactly what happened ------------------------


def test_check_a_equals_b_compares_values_elementwise():
    source = (
        "x = [1, 2, -3]\n"
        "check grad(x**2 + 1, x) == 2*x\n"  # a gradient against its closed form
        "check grad(x**2 + 1, x) == 3*x\n"
        "check sum(x) == 0\n"
        "check x == [1, 2]\n"
        "check exp(log(x * x)) == x * x tol=1e-12\n"
    )
    same, differ, scalar, shapes, tolerant = checks(source)
    assert same.passed and same.method == "value" and same.text == "grad(x**2 + 1, x) == 2*x"
    # 2*x and 3*x differ most at x = -3: -6 against -9
    assert differ.status == "fail" and differ.message == "left[2] = -6.0, right[2] = -9.0"
    assert differ.max_abs_error == 3.0
    assert scalar.passed
    assert shapes.status == "fail" and shapes.message == "shapes differ: left (3,), right (2,)"
    assert tolerant.passed


def test_a_file_with_no_checks_is_an_error_for_that_file(tmp_path):
    [outcome] = checks("x = 1\ny = x * 2\n")
    assert outcome.status == "error" and "no check statements" in outcome.message
    empty = tmp_path / "empty.gc"
    empty.write_text("x = 1\n")
    done = gradcalc("check", str(empty))
    assert done.returncode == 1 and "ERROR" in done.stdout


CONSTANT_IN_X = [  # derivatives whose value is constant in x: their Jacobian by x is 0
    "grad(sum(2*x), x)", "jacobian(3*x, x)", "hessian(sum(x**2), x)", "grad(lambda t: sum(2*t))(x)",
    "jacfwd(lambda t: 3*t)(x)", "jacrev(lambda t: 3*t)(x)", "hessian(lambda t: sum(t**2))(x)", "grad(sum(f(x)), x)",
]


def test_a_derivative_constant_in_its_variable_is_checked_by_it(tmp_path):
    """Every check names x and passes, whether or not the value's graph still holds x;
    where it does not, a warning says so (it was an error, "uses no variables")."""
    script = tmp_path / "constant.gc"
    script.write_text("x = [0.3, 1.7]\ndef f(t) = 2*t\nvjp f(t, g) = g * 2\n" + "".join(f"check {e}\n" for e in CONSTANT_IN_X) + "check 3\n")
    done = gradcalc("check", "--json", str(script))
    *constant, none = json.loads(done.stdout)["checks"]
    assert [(c["status"], c["variables"], c["max_abs_error"]) for c in constant] == [("pass", ["x"], 0.0)] * len(CONSTANT_IN_X), done.stdout
    off_graph = [c["expression"] for c in constant if c["warnings"]]
    assert "grad(sum(2*x), x)" in off_graph and "hessian(sum(x**2), x)" not in off_graph
    assert all(w.startswith("x reaches the value through no op with a gradient") for c in constant for w in c["warnings"])
    assert none["status"] == "error" and "uses no variables" in none["message"]


def test_a_syntax_error_costs_one_statement_and_the_others_run():
    source = "x = 0.5\ncheck exp(x)\ny = (1 +* 2)\ncheck tanh(x $ 2)\ncheck sin(x)\nz = [1, 2\n"
    outcomes = checks(source)
    assert [(o.line, o.status) for o in outcomes] == [(2, "pass"), (3, "error"), (4, "error"), (5, "pass"), (6, "error")]
    assert outcomes[1].text == "y = (1 +* 2)" and "line 3, column 9: expected an expression, found '*'" in outcomes[1].message
    assert "unexpected character '$'" in outcomes[2].message
    # a bracket left open does not swallow the checks on the lines after it
    left_open = checks("x = 0.5\ny = [1, 2\ncheck sin(x)\ndef f(a) = (a +\ndef g(a) = a\ncheck g(x)\n")
    assert [(o.line, o.status, o.text) for o in left_open] == [
        (2, "error", "y = [1, 2"), (3, "pass", "sin(x)"), (4, "error", "def f(a) = (a +"), (6, "pass", "g(x)"),
    ]


def test_a_function_that_is_not_finite_at_the_point_is_not_blamed_on_a_vjp():
    [outcome] = checks("v = [4, 1, -1]\ncheck sqrt(v)")
    assert outcome.status == "fail"
    assert "not finite at this point (nan at out[2])" in outcome.message and "VJP" not in outcome.message
    # nan meeting nan (or inf meeting inf) checks nothing either: the same verdict, not a
    # pass with a warning when the numbers happen to agree
    [agreeing] = checks("v = [4, 1, -1]\ncheck log(v) * 0")
    assert agreeing.status == "fail" and "not finite at this point (nan at out[2])" in agreeing.message


@pytest.mark.parametrize("setup, expression", [
    ("x = 1e300", "exp(x)"),  # inf against inf: passed with a warning before
    ("x = inf", "x * 2"),  # inf against nan: failed
    ("x = [1, nan]", "sum(x * 2)"),
    ("v = [4, 1, -1]", "log(v) * 0"),
])
def test_a_point_where_the_value_is_not_finite_fails_whatever_the_numbers(setup, expression):
    done = gradcalc("check", "--json", "-", stdin=f"{setup}\ncheck {expression}\n")
    assert done.returncode == 1, done.stdout + done.stderr
    [result] = json.loads(done.stdout)["checks"]
    assert result["status"] == "fail" and result["warnings"] == []
    assert "the value is not finite at this point" in result["message"] and "VJP" not in result["message"]


@pytest.mark.parametrize("setup, expression, derivative", [
    # h = 1e-20 is far from small against these points: they FAILed and blamed the VJP
    ("x = 1e-300", "sqrt(x)", lambda x: 0.5 / math.sqrt(x)),
    ("x = 1e-30", "x**0.5", lambda x: 0.5 / math.sqrt(x)),
    ("x = 1e-18", "log(x)", lambda x: 1 / x),
    ("x = 1e-20", "1/x", lambda x: -1 / x**2),
    ("x = -1e-100", "1/x + exp(x)", lambda x: -1 / x**2 + math.exp(x)),
    ("x = 3e-90", "tanh(x) / x**2", lambda x: (1 - math.tanh(x) ** 2) / x**2 - 2 * math.tanh(x) / x**3),
    # a singularity near the point, not at the input's own 0
    ("x = 0", "sqrt(x + 1e-30)", lambda x: 0.5 / math.sqrt(x + 1e-30)),
    ("x = 0", "log(x + 1e-30)", lambda x: 1 / (x + 1e-30)),
    ("x = 0", "grad(sqrt(x + 1e-18), x)", lambda x: -0.25 * (x + 1e-18) ** -1.5),
    # smaller steps are no cure: two of them agree on a column without the log term
    ("x = 1e-150", "log(x) + x*x*1e300", lambda x: 1 / x + 2e300 * x),
])
def test_a_value_too_close_to_0_for_the_step_fails_and_says_so_instead_of_blaming_a_correct_vjp(setup, expression, derivative):
    done = gradcalc("check", "--json", "-", stdin=f"{setup}\ncheck {expression}\n")
    [result] = json.loads(done.stdout)["checks"]
    assert done.returncode == 1 and result["status"] == "fail" and result["method"] == "complex", result
    assert "so close to 0 that complex step's 1e-20 is not small against it: move the point" in result["message"]
    assert "VJP" not in result["message"]
    # and reverse mode is right there (the closed form)
    session = Session(on_check=make_check_handler())
    value = session.run_source(f"{setup}\n{expression}")[-1].value
    x = session.variables["x"]
    assert math.isclose(float(grad_of(value, x)), derivative(float(x.data)), rel_tol=1e-12)


@pytest.mark.parametrize("setup, expression", [
    # a smaller first step would make 1e-8 * x * x underflow: these pass with h = 1e-20
    ("x = 1e-155", "sqrt(x*x)"),
    ("x = 1e-160", "1e300 * x**2"),
    ("x = 1e-200", "grad(x**3 * 1e300, x)"),
    ("x = (abs(randn(2000, seed=0)) + 0.5) * 1e-10", "sum(sqrt(x) * tanh(x))"),
])
def test_tiny_points_that_complex_step_resolves_pass(setup, expression):
    [outcome] = checks(f"{setup}\ncheck {expression}")
    assert outcome.passed and outcome.method == "complex" and outcome.max_rel_error <= 1e-12, outcome


def grad_of(value, leaf):
    from gradcalc.autodiff.derivatives import grad

    return grad(value, leaf).data


@pytest.fixture
def wrong_ops():
    """Throwaway ops with wrong VJPs: complex-safe ones (checked by complex step) and one
    that is not (central differences)."""
    import gradcalc.autodiff.ops.elementwise  # noqa: F401 - registered beside them

    defop("bad_sqrt", np.sqrt, (lambda m, g, ans, x: g / (3 * ans),), doc="sqrt, VJP 2/3 of the truth", category="test",
          public=True, complex_safe=True)
    defop("bad_recip", lambda x: 1 / x, (lambda m, g, ans, x: -2 * g / (x * x),), doc="1/x, VJP twice the truth",
          category="test", public=True, complex_safe=True)
    defop("bad_tiny_square", lambda x: x * x * 1e300, (lambda m, g, ans, x: g * 0.0,), doc="1e300 x^2, VJP 0",
          category="test", public=True, complex_safe=True)
    defop("bad_linear", lambda x: 3 * x, (lambda m, g, ans, x: -3 * g,), doc="3x, VJP of the wrong sign", category="test",
          public=True)
    # its 1e-300 * x term's imaginary part underflows for any step below 1e-8: a search for
    # a smaller step that agrees passed this wrong VJP
    defop("bad_underflow", lambda x: x * 1e-300 * 1e300 + 2 * x, (lambda m, g, ans, x: 2 * g,), doc="3x, VJP 2",
          category="test", public=True, complex_safe=True)
    defop("ok_underflow", lambda x: x * 1e-300 * 1e300 + 2 * x, (lambda m, g, ans, x: 3 * g,), doc="3x, right VJP",
          category="test", public=True, complex_safe=True)
    yield
    for name in ("bad_sqrt", "bad_recip", "bad_tiny_square", "bad_linear", "bad_underflow", "ok_underflow"):
        unregister(name)


@pytest.mark.parametrize("setup, expression, blamed", [
    ("x = 1e-18", "bad_sqrt(x)", "bad_sqrt"),  # checked again with a step small against 1e-18: still wrong
    ("x = 0.5", "bad_sqrt(x) + bad_recip(x)", "bad_recip, bad_sqrt"),  # from the output back
    ("x = 1e-160", "bad_tiny_square(x)", "bad_tiny_square"),  # a smaller step underflows to 0: it shows nothing
    ("x = 1e-5", "bad_linear(x)", "bad_linear"),  # central differences near 0: checked again with a smaller step
    ("z = [1e-5, 1.0]", "bad_linear(z) * [10, 1]", "bad_linear"),
    ("x = 1", "bad_underflow(x)", "bad_underflow"),
    ("x = 1", "log(x - 1 + 1e-18) * 0 + bad_underflow(x)", "bad_underflow"),
])
def test_a_wrong_vjp_still_fails_and_is_named_near_0(wrong_ops, setup, expression, blamed):
    [outcome] = checks(f"{setup}\ncheck {expression}")
    assert outcome.status == "fail" and outcome.message.endswith(f"ops whose VJP disagrees: {blamed}"), outcome


def test_a_correct_op_whose_imaginary_parts_underflow_inside_is_not_blamed(wrong_ops):
    [outcome] = checks("x = 1\ncheck ok_underflow(x)")
    # complex step cannot see the 1e-300 * x term; central differences do, so the op is cleared
    assert outcome.status == "fail" and "numeric 2.99998" in outcome.message and "VJP" not in outcome.message


def test_a_derivative_that_is_not_finite_is_not_checked(wrong_ops):
    # -1e400 overflows: inf against inf passed ("abs 0 rel 0") with a VJP twice the truth
    for expression in ("1/y", "bad_recip(y)", "grad(log(y), y)"):
        [outcome] = checks(f"y = 1e-200\ncheck {expression}")
        assert outcome.status == "fail" and "the derivative is not finite at this point (-inf at d out / d y)" in outcome.message
        assert "VJP" not in outcome.message


@pytest.mark.parametrize("setup, expression, method, note", [
    ("x = 1e-18", "log(x)", "complex", "a value going into log (1e-18) is so close to 0 that complex step's 1e-20"),
    # (relu takes the complex step; at the kink it would agree with its own convention)
    ("x = 1e-5", "sqrt(relu(x)) method=central", "central", "the input there (1e-05) is within 100 steps (1e-06) of 0"),
    ("x = 1e-7", "relu(x) method=central", "central", "the input there (1e-07) is within 100 steps (1e-06) of 0"),
    ("x = 0", "sqrt(x)", "complex", "the derivative is not finite at this point (inf at d out / d x)"),
    # values inside that overflow or underflow: blamed on add and exp, div, sqrt before
    ("x = 1000", "1 / (1 + exp(x))", "complex", "a value inside is not finite at this point (inf from exp)"),
    ("x = 1e-310", "1 / (1 / x)", "complex", "a value inside is subnormal at this point (1e-310 in x)"),
    ("x = 1e-155\ny = 2e-155", "sqrt(x*x + y*y)", "complex", "a value inside is subnormal at this point (1e-310 from mul)"),
])
def test_when_the_numbers_cannot_tell_the_report_says_so_instead_of_blaming_an_op(setup, expression, method, note):
    done = gradcalc("check", "--json", "-", stdin=f"{setup}\ncheck {expression}\n")
    [result] = json.loads(done.stdout)["checks"]
    assert result["status"] == "fail" and result["method"] == method
    assert note in result["message"] and result["message"].endswith("move the point") and "VJP" not in result["message"]


def test_suspects_are_checked_by_complex_step_where_the_op_allows():
    from gradcalc.autodiff.gradcheck import suspect_ops

    session = Session(on_check=make_check_handler())
    value = session.run_source("x = 1e-5\nsqrt(relu(x))")[-1].value
    assert suspect_ops(value) == []  # central differences at 1e-5 blamed sqrt's correct VJP
    # by central differences, relu at 1e-7 and sqrt at 1e-5 are checked again with steps
    # 100 times smaller than their distance from 0, and pass
    relu_near_0 = session.run_source("y = 1e-7\nsqrt(relu(y))")[-1].value
    assert suspect_ops(value, method="central") == [] and suspect_ops(relu_near_0, method="central") == []


def test_positions_are_named_by_variable_and_index():
    import gradcalc.autodiff.ops.elementwise  # noqa: F401 - the op below is registered beside them

    defop("bad_square", lambda x: x * x, (lambda m, g, ans, x: g * x,), doc="x*x with a wrong VJP", category="test", public=True)
    try:
        [outcome] = checks("W = [[1, 2, 3], [4, 5, 6]]\ncheck bad_square(W)")
    finally:
        unregister("bad_square")
    # d out[1, 2] / d W[1, 2] is 2 * 6 = 12; the wrong VJP gives 6
    assert outcome.status == "fail"
    assert outcome.message.startswith("d out[1, 2] / d W[1, 2]: analytic 6.0, numeric 12.0")
    assert "input" not in outcome.message and "element" not in outcome.message


def test_complex_method_falls_back_where_an_op_is_not_complex_safe():
    [outcome] = checks("x = 0.5\ncheck erf(x) * x", method="complex")
    assert outcome.passed and outcome.method == "central"
    assert outcome.warnings[0] == "complex step asked for, but erf is not complex-safe: used central differences"
    done = gradcalc("check", "--method", "complex", *sorted(str(p) for p in EXAMPLES.glob("*.gc")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 failed, 0 errors" in done.stdout


@pytest.mark.parametrize("tol", ["inf", "nan", "-1", "'a'"])
def test_tolerances_must_be_finite_and_non_negative(tol):
    wrong, right = checks(f"x = 0.5\ncheck exp(x) tol={tol}\ncheck exp(x)")
    assert wrong.status == "error" and "tol must be a" in wrong.message and right.passed


def test_a_run_wide_tolerance_that_is_not_finite_errors_each_check():
    outcomes = checks("x = 0.5\ncheck exp(x)", atol=math.nan, rtol=math.nan)
    assert [o.status for o in outcomes] == ["error"] and "--tol" in outcomes[0].message


def test_a_memory_error_in_one_check_errors_that_check_only(monkeypatch):
    import gradcalc.autodiff.gradcheck as gc

    real = gc.reverse_jacobian

    def exhausted(output, leaves, *rest):
        if output.size == 3:
            raise MemoryError
        return real(output, leaves, *rest)

    monkeypatch.setattr(gc, "reverse_jacobian", exhausted)
    outcomes = checks("x = [1, 2, 3]\ncheck exp(x)\ncheck sum(x)")
    assert [o.status for o in outcomes] == ["error", "pass"] and "out of memory" in outcomes[0].message


def test_the_text_of_a_check_is_its_source_text(tmp_path):
    script = tmp_path / "t.gc"
    script.write_text("x = 0.5\ncheck x.tanh()\ncheck (x + 1) * 2 wrt x\n")
    doc = json.loads(gradcalc("check", "--json", str(script)).stdout)
    assert [c["expression"] for c in doc["checks"]] == ["x.tanh()", "(x + 1) * 2"]


# ---- issue 41: the piecewise ops take the complex step away from their kinks ----------------
PIECEWISE = ["relu", "abs", "maximum", "minimum", "clip", "leaky_relu", "elu", "softsign", "where", "max", "min"]


def test_the_course_example_is_checked_by_complex_step_to_the_closed_form():
    """(a*b + exp(c)).relu()/a at a=2, b=-3, c=10 is b + e**c / a there (relu's argument is
    positive): d/da = -e**c / a**2, d/db = 1, d/dc = e**c / a. The complex step replays it
    exactly, relu included (the real part picks relu's branch)."""
    [o] = checks("a = 2\nb = -3\nc = 10\ncheck (a*b + exp(c)).relu()/a")
    assert o.method == "complex" and o.passed and not o.warnings
    a, b, c = (Tensor(np.array(v), requires_grad=True) for v in (2.0, -3.0, 10.0))
    result = gradcheck_graph((a * b + c.exp()).relu() / a, [a, b, c])
    assert result.method == "complex" and result.passed
    closed = [-math.exp(10) / 4, 1.0, math.exp(10) / 2]
    numeric = [float(np.ravel(n)[0]) for n in result.numeric]
    assert numeric == pytest.approx(closed, rel=1e-15, abs=0)


def test_the_course_example_says_complex_through_the_command():
    done = gradcalc("check", str(EXAMPLES / "seed.gc"))
    assert done.returncode == 0, done.stdout + done.stderr
    first = next(line for line in done.stdout.splitlines() if "(a*b + exp(c)).relu()/a" in line)
    assert "  complex  " in first, first


@pytest.mark.parametrize("name", PIECEWISE)
def test_every_piecewise_op_is_complex_safe_and_analytic_away_from_its_kinks(name):
    """Random points away from the kinks: complex step Im f(x + ih) / h, through the op's
    own forward, is the reverse-mode gradient to 1e-15 (both exact: a branch that is
    linear or analytic, picked by the real part)."""
    op = REGISTRY[name]
    assert op.complex_safe
    rng = np.random.default_rng(41)
    done = 0
    while done < 20:
        inputs, params = (op.check.make(rng) if op.check.make is not None else
                          ([rng.uniform(op.check.low, op.check.high, s) for s in op.check.shapes[done % len(op.check.shapes)]],
                           dict(op.check.params)))
        if op.kink is not None and op.kink(*inputs, tol=1e-3, **params):
            continue
        diff = list(op.check.diff) if op.check.diff is not None else list(range(len(inputs)))
        result = gradcheck(lambda *ts, params=params: op(*ts, **params), inputs, wrt=diff, method="complex")
        assert result.method == "complex" and result.max_rel_error <= 1e-15 and result.passed, (name, result.worst)
        done += 1


@pytest.mark.parametrize("expr, kink", [("relu(x)", "relu"), ("abs(x) * 3", "abs"), ("maximum(x, 0) + x", "maximum"),
                                        ("clip(x, 0, 1)", "clip")])
def test_at_a_kink_the_check_keeps_central_differences_and_warns(expr, kink):
    """Away from the kink the complex step; at it, central differences, whose average of the
    two sides shows the convention for what it is (the complex step would give one side)."""
    [at] = checks(f"x = 0\ncheck {expr}")
    assert at.method == "central"
    assert any(f"kink of {kink}" in w for w in at.warnings), at.warnings
    [away] = checks(f"x = 0.25\ncheck {expr}")
    assert away.method == "complex" and away.passed and away.warnings == []
