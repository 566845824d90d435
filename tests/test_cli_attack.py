"""Cases from the attack report (D1, D2, D4, D6, D8, D9), each through the real command."""
from __future__ import annotations

import json

import pytest

from tests.test_cli import gradcalc


@pytest.mark.parametrize("expression", ["log([0,1])", "[1,2]/0", "full(3, nan)", "ones(2)*inf"])
def test_constant_non_finite_tensor_result_is_shown_with_a_note(expression):
    done = gradcalc("eval", expression)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stdout + done.stderr
    assert "note:" in done.stdout


def test_constant_non_finite_tensor_note_names_the_op():
    done = gradcalc("eval", "log([0,1])")
    assert "value: [-inf, 0.0]" in done.stdout
    assert "the first inf came from log at element [0]: log(0.0)" in done.stdout


def test_run_goes_on_after_a_constant_non_finite_tensor():
    script = "x=1\nlog([0,1])\nx+1\n"
    done = gradcalc("run", "-", stdin=script)
    assert done.returncode == 0, done.stderr
    assert "value: 2.0" in done.stdout and "grad x: 1.0" in done.stdout
    lines = gradcalc("run", "--json", "-", stdin=script).stdout.splitlines()
    records = [json.loads(line) for line in lines]
    assert records[0]["value"] == ["-inf", 0.0]
    assert records[1]["value"] == 2.0


def test_top_level_engine_applies_to_eval_and_run(tmp_path):
    done = gradcalc("--engine", "scalar", "eval", "sum(x*2)", "x=[1,2,3]")
    assert done.returncode == 2 and "scalar engine has no tensors" in done.stderr
    done = gradcalc("--engine", "scalar", "eval", "x*y", "x=2", "y=3")
    assert done.returncode == 0 and "grad x: 3.0" in done.stdout
    script = tmp_path / "s.gc"
    script.write_text("x=[1,2]\nsum(x)\n")
    assert "scalar engine has no tensors" in gradcalc("--engine", "scalar", "run", str(script)).stderr


def test_the_command_option_wins_over_the_top_level_one():
    done = gradcalc("--engine", "scalar", "eval", "--engine", "tensor", "sum(x*2)", "x=[1,2,3]")
    assert done.returncode == 0 and "value: 12.0" in done.stdout


def test_top_level_limits_apply_to_the_command():
    done = gradcalc("--max-input-bytes", "100", "run", "-", stdin="x = 1\n" * 100)
    assert done.returncode == 2 and "larger than 100 bytes" in done.stderr
    done = gradcalc("--max-steps", "3", "eval", "x*2+1+1+1+1", "x=1")
    assert done.returncode == 2 and "budget of 3 steps" in done.stderr


def test_a_top_level_option_the_command_lacks_is_refused(tmp_path):
    checks = tmp_path / "c.gc"
    checks.write_text("x=2\ncheck x**2\n")
    done = gradcalc("--engine", "scalar", "export", str(checks))  # (check takes --engine: jax and torch run checks too)
    assert done.returncode == 2 and "--engine does not apply to `gradcalc export`" in done.stderr
    assert "def " not in done.stdout


def test_check_jacobian_over_the_cap_reads_like_the_other_cap_errors(tmp_path):
    checks = tmp_path / "c.gc"
    checks.write_text("x=ones(100)*0.5\ncheck tanh(x)\ncheck sum(tanh(x))\n")
    done = gradcalc("check", "--max-elements", "1000", str(checks))
    assert done.returncode == 1
    error_row = next(line for line in done.stdout.splitlines() if line.startswith("ERROR"))
    assert "internal error" not in done.stdout and "SizeLimitError" not in done.stdout
    assert "c.gc:2" in error_row and "shape (100, 100)" in error_row and "--max-elements raises it" in error_row
    assert "PASS" in done.stdout and "1 passed, 0 failed, 1 errors" in done.stdout


def test_an_unclosed_bracket_does_not_swallow_the_following_checks(tmp_path):
    checks = tmp_path / "se.gc"
    checks.write_text("x=2\ncheck x**2\ny = (3\ncheck x**3\ncheck sin(\ncheck x**4\n")
    done = gradcalc("check", str(checks))
    rows = done.stdout.splitlines()
    assert [r.split()[0] for r in rows[:5]] == ["PASS", "ERROR", "PASS", "ERROR", "PASS"]
    assert "se.gc:4  x**3" in rows[2] and "se.gc:6  x**4" in rows[4]
    assert "3 passed, 0 failed, 2 errors" in done.stdout


@pytest.mark.parametrize(("args", "value"), [
    (["--a", "a=2"], "value: 2.0"),
    (["-----x", "x=3"], "value: -3.0"),
    (["--digits", "3", "--a", "a=2.123456"], "value: 2.12"),
    (["--a", "--wrt", "a", "a=2"], "value: 2.0"),
])
def test_an_expression_starting_with_two_dashes_works_as_typed(args, value):
    done = gradcalc("eval", *args)
    assert done.returncode == 0, done.stderr
    assert value in done.stdout


def test_options_are_still_options_next_to_a_dashed_expression():
    done = gradcalc("eval", "--json", "--a", "a=2")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == 2.0


def test_help_is_still_help_after_eval_and_plot():
    for command in ("eval", "plot"):
        done = gradcalc(command, "--help")
        assert done.returncode == 0 and "Example" in done.stdout
