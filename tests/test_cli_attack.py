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
