"""`check EXPR mode=forward`: forward mode's JVPs checked against numbers, as check checks
VJPs; a wrong JVP fails the check and is named, in check files, eval, scripts, the REPL
and the pytest plugin. The wrong rules are put into the registry for the test (in this
process, or in the subprocess through a small launcher), never left there.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gradcalc.autodiff import REGISTRY, Tensor, defop
from gradcalc.autodiff.gradcheck import forward_jacobian, gradcheck, reverse_jacobian
from gradcalc.autodiff.registry import unregister

from .test_gradcheck import checks
from .test_pytest_plugin import pytest_run


def wrong_sin_jvp(m, tangents, ans, x):
    return tangents[0] * m.cos(x) * 2  # twice the truth


def wrong_mul_jvp(m, tangents, ans, a, b):
    ta, tb = tangents
    return (0 if ta is None else ta * b) + (0 if tb is None else tb * b)  # b's term uses b, not a


@pytest.fixture
def wrong_sin(monkeypatch):
    monkeypatch.setattr(REGISTRY["sin"], "jvp", wrong_sin_jvp)


def test_forward_mode_jacobian_is_reverse_mode_s_on_a_layer():
    # tanh(W @ v + b): both are the same matrices, d out[i] / d leaf[j]
    rng = np.random.default_rng(0)
    leaves = [Tensor(rng.normal(size=s), requires_grad=True) for s in ((3, 2), (2,), (3,))]
    w, v, b = leaves
    out = (w @ v + b).tanh()
    for forward, reverse in zip(forward_jacobian(out, leaves), reverse_jacobian(out, leaves)):
        np.testing.assert_allclose(forward, reverse, rtol=1e-14, atol=1e-16)
    # the closed form for v: diag(1 - tanh^2) W
    np.testing.assert_allclose(forward_jacobian(out, [v])[0], (1 - out.data[:, None] ** 2) * w.data, rtol=1e-14)


def test_forward_checks_pass_on_first_and_second_derivatives():
    outcomes = checks(textwrap.dedent("""\
        x = 0.7
        W = randn(3, 2, seed=1)
        v = [0.5, -1.0]
        check sin(x) * exp(x) mode=forward
        check tanh(W @ v) mode=forward
        check grad(sum(tanh(W @ v) ** 2), W) wrt W mode=forward
        check softmax(W @ v) wrt v mode="forward" method=central
        y = x * 3
        check sin(y) * x wrt y mode=forward
    """))
    assert [(o.status, o.mode, o.method) for o in outcomes] == [
        ("pass", "forward", "complex"), ("pass", "forward", "complex"), ("pass", "forward", "complex"),
        ("pass", "forward", "central"), ("pass", "forward", "complex"),
    ]
    assert outcomes[0].max_rel_error <= 1e-15


def test_a_wrong_jvp_fails_a_forward_check_and_is_named_while_reverse_mode_passes(wrong_sin):
    forward, reverse, default = checks("x = 0.7\ncheck tanh(sin(x)) * x mode=forward\ncheck tanh(sin(x)) * x mode=reverse\n"
                                       "check tanh(sin(x)) * x")
    assert forward.status == "fail"
    # the worst entry: 2 cos(x) (1 - tanh(sin x)^2) x + tanh(sin x) against the truth, cos(x) for 2 cos(x)
    s, c = math.sin(0.7), math.cos(0.7)
    truth = c * (1 - math.tanh(s) ** 2) * 0.7 + math.tanh(s)
    wrong = 2 * c * (1 - math.tanh(s) ** 2) * 0.7 + math.tanh(s)
    assert forward.message == f"d out / d x: analytic {wrong!r}, numeric {truth!r}; ops whose JVP disagrees: sin"
    assert reverse.passed and default.passed and default.mode == "reverse"


def test_a_wrong_jvp_of_two_inputs_is_named_among_correct_ops(monkeypatch):
    monkeypatch.setattr(REGISTRY["mul"], "jvp", wrong_mul_jvp)
    [both, one, reverse] = checks("a = 0.5\nb = -1.5\ncheck exp(a * b) + a mode=forward\ncheck exp(a * b) wrt b mode=forward\n"
                                  "check exp(a * b) + a")
    assert both.status == "fail" and both.message.endswith("ops whose JVP disagrees: mul"), both
    assert one.status == "fail" and "d out / d b" in one.message and one.message.endswith("ops whose JVP disagrees: mul")
    assert reverse.passed


def test_gradcalc_check_mode_sets_the_default_and_a_check_s_own_mode_wins(wrong_sin):
    forward, reverse = checks("x = 0.7\ncheck sin(x)\ncheck sin(x) mode=reverse", mode="forward")
    assert forward.status == "fail" and forward.mode == "forward" and reverse.passed


def test_an_op_without_a_jvp_rule_is_an_error_of_a_forward_check_only():
    defop("no_jvp_cube", lambda x: x**3, (lambda m, g, ans, x: g * 3 * x * x,), doc="no JVP", category="test", complex_safe=True)
    try:
        forward, reverse = checks("x = 0.5\ncheck no_jvp_cube(x) mode=forward\ncheck no_jvp_cube(x)")
        assert forward.status == "error" and "no_jvp_cube has no JVP rule, so forward mode cannot pass through it" in forward.message
        assert reverse.passed
    finally:
        unregister("no_jvp_cube")


def test_a_bad_mode_is_an_error_in_its_place():
    [bad, number] = checks("x = 1\ncheck sin(x) mode=sideways\ncheck sin(x) mode=3")
    assert bad.status == "error" and bad.message == "line 2, column 14: mode must be one of reverse, forward, not 'sideways'"
    assert number.status == "error" and "mode must be one of reverse, forward, not 3" in number.message


def test_gradcheck_of_a_function_in_forward_mode_on_a_throwaway_op_with_a_wrong_jvp():
    defop("bad_jvp_square", lambda x: x * x, (lambda m, g, ans, x: 2 * g * x,), doc="x^2, JVP 3x",
          category="test", complex_safe=True, jvp=lambda m, ts, ans, x: 3 * ts[0] * x)
    try:
        op = REGISTRY["bad_jvp_square"]
        x = np.array([0.5, -2.0])
        assert gradcheck(op, [x]).passed
        forward = gradcheck(op, [x], mode="forward")
        assert not forward.passed and forward.method == "complex"
        np.testing.assert_allclose(forward.analytic[0], np.diag(3 * x), rtol=0)
        np.testing.assert_allclose(forward.numeric[0], np.diag(2 * x), rtol=1e-15)
    finally:
        unregister("bad_jvp_square")


# ---- through the commands a user runs ------------------------------------------------------

# A launcher that puts the wrong rule in place and then runs the gradcalc command, in the
# subprocess: the command as a user runs it, with one JVP broken.
LAUNCH = textwrap.dedent("""\
    import sys
    from gradcalc.autodiff import REGISTRY
    REGISTRY["sin"].jvp = lambda m, tangents, ans, x: tangents[0] * m.cos(x) * 2
    from gradcalc.cli.entry import run
    sys.argv = ["gradcalc", *sys.argv[1:]]
    run()
""")


def broken_gradcalc(*args, stdin=None):
    done = subprocess.run([sys.executable, "-c", LAUNCH, *args], input=stdin, capture_output=True, text=True, timeout=60,
                          env={"NO_COLOR": "1", "COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


def test_eval_with_a_forward_check_fails_with_exit_1_and_names_the_op():
    done = broken_gradcalc("eval", "check sin(x) * x mode=forward; check sin(x) * x; sin(x)", "x=0.5")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("FAIL line 1  sin(x) * x  wrt x  forward complex") and lines[0].endswith("ops whose JVP disagrees: sin)")
    assert lines[1].startswith("PASS line 1  sin(x) * x  wrt x  complex")


def test_run_and_check_report_a_forward_check_that_fails(tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("x = 0.5\ncheck sin(x) mode=forward\ncheck sin(x)\n")
    ran = broken_gradcalc("run", str(script))
    assert ran.returncode == 1 and "ops whose JVP disagrees: sin" in ran.stdout
    done = broken_gradcalc("check", "--json", str(script))
    assert done.returncode == 1
    forward, reverse = json.loads(done.stdout)["checks"]
    assert (forward["status"], forward["mode"], forward["method"]) == ("fail", "forward", "complex")
    assert forward["message"].endswith("ops whose JVP disagrees: sin")
    assert (reverse["status"], reverse["mode"]) == ("pass", "reverse")
    assert broken_gradcalc("check", "--mode", "forward", str(script)).stdout.count("FAIL") == 2


def test_the_repl_runs_a_forward_check(wrong_sin, capsys):
    from gradcalc.cli import render
    from gradcalc.cli.repl import Repl

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    for line in ("x = 0.5", "check sin(x) mode=forward", "check cos(x) mode=forward"):
        repl.handle(line)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAIL line 1  sin(x)  wrt x  forward complex") and out[0].endswith("ops whose JVP disagrees: sin)")
    assert out[1].startswith("PASS line 1  cos(x)  wrt x  forward complex")


def test_the_pytest_plugin_fails_a_forward_check_and_names_the_jvp(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from gradcalc.autodiff import REGISTRY\n"
        "REGISTRY['sin'].jvp = lambda m, tangents, ans, x: tangents[0] * m.cos(x) * 2\n"
    )
    (tmp_path / "forward.gc").write_text("x = 0.5\ncheck sin(x) mode=forward\ncheck sin(x)\ncheck exp(x) mode=forward\n")
    done = pytest_run("forward.gc", "-rA", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "gradcheck (forward complex) failed: max abs error" in out
    assert "an entry passes when |forward - numeric| <= atol + rtol*|numeric|" in out
    assert "ops whose JVP disagrees: sin" in out
    assert "1 failed, 2 passed" in out
