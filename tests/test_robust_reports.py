"""Verdicts and reports that said something other than the truth, each through the real
command: a check with respect to a named intermediate, relative errors against 0, notes
on inf and nan, and `--wrt` / `:wrt` names that are not variables."""
from __future__ import annotations

import json
import os

import pexpect
import pytest

from tests.test_cli import GRADCALC, gradcalc
from tests.test_pytest_plugin import pytest_run


def test_check_wrt_a_named_intermediate_replays_from_it(tmp_path):
    # d(y**2)/dy = 2y = 12 at y = 6, as grad(y ** 2, y) gives; the numeric side perturbs y.
    script = tmp_path / "inner.gc"
    script.write_text("x = 2\ny = x * 3\ncheck y ** 2 wrt y\ncheck grad(y ** 2, y) == 12\n")
    done = gradcalc("check", "--json", str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(done.stdout)["checks"]
    assert [(r["line"], r["status"], r["variables"]) for r in results] == [(3, "pass", ["y"]), (4, "pass", [])]


@pytest.mark.parametrize("method", ["complex", "central"])
def test_check_wrt_an_intermediate_and_its_inputs_takes_total_derivatives(tmp_path, method):
    # out = sum(sin(w) * v) with w = v * v: d out/dw = sin'(w) v (w held as an input),
    # d out/dv = sin(w) + 2 v^2 cos(w) (through w as well): closed forms.
    script = tmp_path / "both.gc"
    script.write_text(f'v = [1.0, 2.0]\nw = v * v\ncheck sum(sin(w) * v) wrt w, v method="{method}"\n'
                      f'x = 2\ny = x * 3\ncheck y ** 2 + x wrt y, x method="{method}"\n')
    done = gradcalc("check", str(script))
    assert done.returncode == 0, done.stdout
    assert done.stdout.count("PASS") == 2


def test_check_wrt_an_intermediate_still_fails_a_wrong_claim(tmp_path):
    script = tmp_path / "wrong.gc"
    script.write_text("x = 2\ny = x * 3\ncheck grad(y ** 2, y) == 13\n")
    assert gradcalc("check", str(script)).returncode == 1


def test_pytest_plugin_checks_wrt_a_named_intermediate(tmp_path):
    (tmp_path / "inner.gc").write_text("x = 2\ny = x * 3\ncheck y ** 2 wrt y\n")
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    done = pytest_run(str(tmp_path / "inner.gc"), "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_relative_error_against_a_zero_reference_is_inf(tmp_path):
    script = tmp_path / "zero.gc"
    script.write_text("x = 1.0\ncheck x * 1e-300 == 0 atol=0 rtol=0\ncheck x - x + 1e-15 == 0\n")
    done = gradcalc("check", str(script))
    lines = done.stdout.splitlines()
    assert "rel inf" in lines[0] and lines[0].startswith("FAIL"), done.stdout
    assert "rel inf" in lines[1] and lines[1].startswith("PASS"), done.stdout
    assert not any("e+29" in line or "e+30" in line for line in lines)
    report = json.loads(gradcalc("check", "--json", str(script)).stdout)
    assert "inf" in json.dumps(report)


def test_nan_gradient_note_says_nan():
    # d/dx sin(x)/x at 0: cos(0)/0 - sin(0)/0**2, inf on one path and nan on the other: nan.
    done = gradcalc("eval", "sin(x)/x", "x=0")
    assert "grad x: nan" in done.stdout
    assert "a nan gradient came from the backward pass of div(0.0, 0.0)" in done.stdout
    assert "an inf gradient" not in done.stdout


def test_inf_gradient_note_still_says_inf():
    done = gradcalc("eval", "log(x) + sqrt(y)", "x=0", "y=0")
    assert "note: an inf gradient came from the backward pass of sqrt(0.0)" in done.stdout


@pytest.mark.parametrize("expression, op", [("log(0) + x", "log(0.0)"), ("x * exp(1000)", "exp(1000.0)"), ("x - sqrt(-1)", "sqrt(-1.0)")])
def test_a_non_finite_constant_subexpression_names_its_op(expression, op):
    done = gradcalc("eval", expression, "x=1")
    assert done.returncode == 0
    assert f"came from {op}" in done.stdout, done.stdout
    assert "already in the input" not in done.stdout


def test_a_non_finite_input_is_still_called_an_input():
    assert "already in the input c" in gradcalc("eval", "c + x", "c=inf", "x=1").stdout


@pytest.mark.parametrize("engine", ["tensor", "scalar"])
@pytest.mark.parametrize("expression", ["v", "v * 1"])
def test_an_output_that_is_a_non_finite_input_names_the_input(expression, engine):
    # `v` alone is the input itself, no constant: the note is the one `v * 1` gives.
    done = gradcalc("eval", expression, "v=inf", "--engine", engine)
    assert done.returncode == 0
    assert "note: the first inf is already in the input v" in done.stdout, done.stdout
    assert "constants alone" not in done.stdout


@pytest.mark.parametrize("wrt", [",,", ",", "", "x,,", " , "])
def test_wrt_with_no_name_is_refused(wrt):
    done = gradcalc("eval", "x * 2", "x=1", "--wrt", wrt)
    assert done.returncode == 2
    assert done.stderr.startswith("error: --wrt"), done.stderr
    assert done.stdout == ""


def test_wrt_with_a_name_that_is_not_a_variable_is_refused():
    done = gradcalc("eval", "x * 2", "x=1", "--wrt", "zz")
    assert done.returncode == 2 and "'zz', which is not a variable" in done.stderr


@pytest.fixture()
def repl():
    env = {**os.environ, "NO_COLOR": "1", "XDG_DATA_HOME": "/nonexistent-dir-for-history", "TERM": "dumb"}
    child = pexpect.spawn(GRADCALC[0], GRADCALC[1:], env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    child.expect(">>> ")
    yield child
    child.terminate(force=True)


def test_repl_wrt_refuses_names_that_are_not_variables(repl):
    repl.sendline("x = 2; y = 3")
    repl.expect(">>> ")
    for bad in (":wrt zz", ":wrt ,,", ":wrt x, zz"):
        repl.sendline(bad)
        repl.expect(">>> ")
        assert "error: :wrt" in repl.before, repl.before
    repl.sendline("x * y")
    repl.expect(">>> ")
    assert "grad x: 3.0" in repl.before and "grad y: 2.0" in repl.before  # the choice stayed "every variable"
    repl.sendline(":wrt y")
    repl.expect(">>> ")
    repl.sendline("x * y")
    repl.expect(">>> ")
    assert "grad y: 2.0" in repl.before and "grad x" not in repl.before


def test_values_that_agree_as_nan_pass_with_a_warning(tmp_path):
    script = tmp_path / "nan.gc"
    script.write_text("x = [1.0, -1.0, 2.0]\ncheck log(x) == log(x)\ncheck x == x\n")
    results = json.loads(gradcalc("check", "--json", str(script)).stdout)["checks"]
    assert [r["status"] for r in results] == ["pass", "pass"]
    assert results[0]["warnings"] == ["the value is not finite at this point (nan at left[1]): where both sides agree there, "
                                      "they agree as inf or nan, not as numbers"]
    assert results[1]["warnings"] == []


def test_booleans_and_whole_numbers_compare_as_the_numbers_they_stand_for(tmp_path):
    # true is 1 and false is 0, as arithmetic promotes them; a failure shows them as written.
    script = tmp_path / "bools.gc"
    script.write_text("a = 1\nb = 2\ncheck (a < b) == true\ncheck (a < b) == 1\ncheck argmax([1, 5, 2]) == 1\n"
                      "check [true, false] == [true, true]\ncheck (a > b) == a - a\n")
    results = json.loads(gradcalc("check", "--json", str(script)).stdout)["checks"]
    assert [r["status"] for r in results] == ["pass", "pass", "pass", "fail", "pass"], results
    assert results[3]["message"] == "left[1] = false, right[1] = true"


# A value that is not finite where the gradients are finite: the gradients are what the
# ops' rules give, but the function has no derivative there (log(det(A)) at det(A) = -1 is
# nan while A^-T is finite). Every report says so: text, JSON, and check.
@pytest.mark.parametrize("expression, binding, where", [
    ("log(det(A))", "A=[[0, 1], [1, 0]]", "here"),
    ("log(x)", "x=[1, -1, 2]", "at element [1]"),
    ("sum(log(x))", "x=[1, -1, 2]", "here"),
    ("log(0) + x", "x=1", "here"),
    ("x - x", "x=inf", "here"),
    ("log(x)", "x=[-1]", "at element [0]"),  # a tensor of one element is still a tensor
    ("x * 0 + log(-1)", "x=[1, 2]", "at element [0]"),
])
def test_a_value_that_is_not_finite_with_finite_gradients_gets_a_note(expression, binding, where):
    done = gradcalc("eval", expression, binding)
    assert done.returncode == 0, done.stderr
    assert f"note: the value is not finite {where} but its gradients are" in done.stdout, done.stdout
    notes = json.loads(gradcalc("eval", "--json", expression, binding).stdout)["notes"]
    assert any(note.startswith(f"the value is not finite {where}") for note in notes), notes


def test_a_finite_value_or_a_gradient_that_is_not_finite_gets_no_such_note():
    assert "the value is not finite" not in gradcalc("eval", "log(x)", "x=[1, 2]").stdout
    assert "notes" not in json.loads(gradcalc("eval", "--json", "log(x)", "x=[1, 2]").stdout)
    # sqrt at -1: the gradient is nan too, and its own note says where it came from
    assert "the value is not finite" not in gradcalc("eval", "sqrt(x)", "x=-1").stdout


def test_run_json_carries_the_notes(tmp_path):
    script = tmp_path / "nan.gc"
    script.write_text("A = [[0, 1], [1, 0]]\nlog(det(A))\n")
    record = json.loads(gradcalc("run", "--json", str(script)).stdout)
    assert record["notes"][0] == "the first nan came from log(-1.0)", record


def test_a_check_whose_value_is_not_finite_says_so_and_shows_no_error_numbers(tmp_path):
    # The numeric side of log(det(A)) at det < 0 is pi / 1e-20 by the complex step: not an
    # error of anything, so the check reports none.
    script = tmp_path / "nan.gc"
    script.write_text("A = [[0, 1], [1, 0]]\nx = [1, -1, 2]\ncheck log(det(A))\ncheck log(x)\ncheck sum(sqrt(x)) method=\"central\"\n")
    done = gradcalc("check", str(script))
    assert done.returncode == 1
    lines = done.stdout.splitlines()[:3]
    for line, where in zip(lines, ["out", "out[1]", "out"]):
        assert line.startswith("FAIL") and "abs nan  rel nan" in line, line
        assert f"the value is not finite at this point (nan at {where})" in line, line
    report = json.loads(gradcalc("check", "--json", str(script)).stdout)["checks"]
    assert [(r["max_abs_error"], r["max_rel_error"]) for r in report] == [("nan", "nan")] * 3
