"""Checks on JAX and PyTorch, and a second engine in every check, through the real command.

`gradcalc check --engine jax|torch` holds that library's derivative against central
differences of the program run on it; `--against jax|torch` (or `against=` in a file) sets
that library's derivative beside gradcalc's and the numerical one, and a disagreement of
the engines alone is its own verdict. The expected verdicts come from closed forms: the
norm's derivative at 0 is a convention (gradcalc and PyTorch give 0, the central difference
of |x| is 0, JAX's sqrt(sum(x*x)) gives nan), and a wrong rule of the user's is wrong on
every engine.
"""
from __future__ import annotations

import json

import pytest

from tests.test_cli import gradcalc

FILE = """\
x = [0.3, -1.2, 2.5]
w = 2
h = x * w
def f(a, b) = a * a * b + b / a
check sum(h * h + x)
check f(x, w) wrt x, w
check grad(sum(tanh(x)), x)
"""


@pytest.fixture(params=["jax", "torch"])
def engine(request):
    pytest.importorskip(request.param)
    return request.param


@pytest.mark.slow
def test_checks_run_on_the_engine(tmp_path, engine):
    path = tmp_path / "file.gc"
    path.write_text(FILE + "def g(t) = t * t\nvjp g(t, u) = u * 3 * t\ncheck sum(g(x))\n")
    done = gradcalc("check", str(path), "--engine", engine)
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["PASS", "PASS", "PASS", "FAIL"], done.stdout
    assert all("central" in line for line in lines[:-1])
    # d/dx of x^2 is 2x; the rule says 3x: at x[2] = 2.5, 7.5 against 5.0
    assert "d out / d x[2]" in lines[3] and "7.5" in lines[3] and "5.0" in lines[3]
    assert done.returncode == 1


@pytest.mark.slow
def test_a_second_engine_sits_beside_every_check(tmp_path, engine):
    path = tmp_path / "file.gc"
    path.write_text(FILE)
    done = gradcalc("check", str(path), "--against", engine)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(line.startswith("PASS") and f"  {engine} abs " in line for line in done.stdout.splitlines()[:-1])
    doc = json.loads(gradcalc("check", str(path), "--against", engine, "--json").stdout)
    assert all(c["against"]["engine"] == engine and c["against"]["max_abs_error"] < 1e-12 for c in doc["checks"])


@pytest.mark.slow
def test_engines_disagreeing_is_a_verdict_of_its_own(tmp_path):
    pytest.importorskip("jax")
    pytest.importorskip("torch")
    path = tmp_path / "norm.gc"
    path.write_text("x = [0.0, 0.0]\ncheck norm(x) against=jax\ncheck norm(x) against=torch\n")
    done = gradcalc("check", str(path))
    first, second, summary = done.stdout.splitlines()[0], done.stdout.splitlines()[2], done.stdout.splitlines()[-1]
    assert first.startswith("DISAGREE") and "engines disagree" in first and "gradcalc 0.0, JAX nan, numeric 0.0" in first
    assert second.startswith("PASS") and "torch abs 0" in second
    assert "1 passed, 0 failed, 0 errors, 1 where the engines disagree" in summary
    assert done.returncode == 1
    doc = json.loads(gradcalc("check", str(path), "--json").stdout)
    assert [c["status"] for c in doc["checks"]] == ["disagree", "pass"] and doc["summary"]["disagree"] == 1


@pytest.mark.slow
def test_a_wrong_rule_fails_and_the_second_engine_agrees_with_it(tmp_path, engine):
    # Both engines use the user's rule: the check fails on the math, not on gradcalc.
    path = tmp_path / "rule.gc"
    path.write_text("def f(t) = t * t\nvjp f(t, g) = g * 3 * t\nv = [1.0, 2.0]\ncheck sum(f(v))\n")
    line = gradcalc("check", str(path), "--against", engine).stdout.splitlines()[0]
    assert line.startswith("FAIL") and f"{engine} abs 0" in line and "analytic 6.0, numeric 4.0" in line


def test_against_and_engine_are_checked_before_anything_runs(tmp_path):
    path = tmp_path / "file.gc"
    path.write_text(FILE)
    bad = gradcalc("check", str(path), "--against", "numpy")
    assert bad.returncode == 2 and "--against must be jax or torch" in bad.stderr
    scalar = gradcalc("check", str(path), "--engine", "scalar")
    assert scalar.returncode == 2 and "--engine tensor, jax or torch" in scalar.stderr
