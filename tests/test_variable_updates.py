"""Names and updates mean what they mean in Python: `x OP= e` is `x = x OP e`, value and
derivative; `with no_grad: w -= step` is PyTorch's in-place step, which keeps w a
variable. Through the real command, against closed forms (tests/test_update_oracle.py
holds the class against PyTorch)."""
from __future__ import annotations

import json

import pytest

from gradcalc.parser import LanguageError, Session
from gradcalc.parser.compiler import compile_program

from .test_cli import gradcalc


def report(program: str, *bindings: str) -> dict:
    done = gradcalc("eval", "--json", program, *bindings)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


# ---- x OP= e is x = x OP e ---------------------------------------------------------------------


def test_the_accumulator_differentiates_as_pytorch_and_jax_do():
    # d/dw sum_i (w - i)**2 = 2 sum_i (w - i) = 2 (3 + 2 + 1) at w = 3
    assert report("L = 0; for i in range(3): L += (w - i)**2\ngrad(L, w)", "w=3")["value"] == 12.0
    # d/dx sum_i x i = 0 + 1 + 2
    assert report("acc = 0; for i in range(3): acc += x * i\ngrad(acc, x)", "x=2")["value"] == 3.0


def test_the_accumulator_reports_its_variables():
    result = report("L = 0; for i in range(3): L += (w - i)**2\nL", "w=3")
    assert result["value"] == 9 + 4 + 1 and result["grads"]["w"] == 12.0 and "notes" not in result


@pytest.mark.parametrize("alias", ["z = x", "z = x * 1"])
def test_an_update_of_an_alias_is_the_sum_it_writes(alias):
    # z * x = (x + 1) x: d/dx = 2x + 1 = 3 at 1, whether z started as x itself or as x * 1
    assert report(f"{alias}; z += 1; z * x", "x=1")["grads"]["x"] == 3.0


def test_a_step_outside_no_grad_differentiates_through_the_step():
    # w1 = w0 - lr * 2 (w0 - 5): d w1 / d lr = -2 (w0 - 5) = 6 and d w1 / d w0 = 1 - 2 lr = 0.8 at w0 = 2, lr = 0.1
    session = Session()
    [by_lr, by_w0] = session.run_source("lr = 0.1; w0 = 2; w = w0; w -= lr * grad((w - 5)**2, w); grad(w, lr); grad(w, w0)")
    assert float(by_lr.value.data) == 6.0 and float(by_w0.value.data) == pytest.approx(0.8, rel=1e-15)


def test_an_update_of_a_constant_stays_a_constant():
    session = Session()
    session.run_source("k = detach(3); k += 1")
    assert not session.variables["k"].requires_grad and float(session.variables["k"].data) == 4.0


# ---- with no_grad: w -= step -------------------------------------------------------------------

# Gradient descent on (w - 5)**2 with rate 0.1: w_k = 5 + (w_0 - 5) * 0.8**k exactly.
STEP = "L = (w - 5)**2; with no_grad: w -= 0.1 * grad(L, w)"


def closed_form(w0: float, k: int) -> float:
    return 5 + (w0 - 5) * 0.8**k


# The scalar engine has no grad(): its step is written out.
@pytest.mark.parametrize(("engine", "step"), [("tensor", STEP), ("scalar", "with no_grad: w -= 0.1 * 2 * (w - 5)")])
def test_repeated_steps_follow_the_closed_form_and_keep_the_graph_small(engine, step):
    def after(steps: int) -> dict:
        done = gradcalc("--engine", engine, "run", "--json", "-", stdin="w = 2\n" + f"{step}\n" * steps + "(w - 5)**2\n")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    result = after(6)
    w = closed_form(2, 6)
    assert result["value"] == pytest.approx((w - 5) ** 2, rel=1e-14)
    assert result["grads"]["w"] == pytest.approx(2 * (w - 5), rel=1e-14)
    # The loss's graph after six steps is the graph after none: w is a leaf again after each.
    assert result["graph"] == after(0)["graph"]


@pytest.mark.parametrize("block", [
    "    with no_grad:\n        w -= 0.1 * grad(L, w)\n",
    "    with no_grad():\n        w -= 0.1 * grad(L, w)\n",
    "    with no_grad: w -= 0.1 * grad(L, w)\n",
    "    with no_grad(): g = grad(L, w); w -= 0.1 * g\n",
])
def test_the_training_loop_in_each_spelling(block):
    source = "w = 2\nfor i in range(30):\n    L = (w - 5)**2\n" + block + "w\n"
    done = gradcalc("run", "--json", "-", stdin=source)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["value"] == pytest.approx(closed_form(2, 30), rel=1e-14)
    assert result["graph"]["nodes"] == 1  # w is a leaf


def steps_of(program: str) -> int:
    """Instructions the machine ran for `program` (its step counter)."""
    from gradcalc.autodiff.limits import STEPS, step_budget

    session = Session()
    spent = 0
    for statement in compile_program(program).statements:
        with step_budget():
            start = STEPS.left
            session._run_statement(statement)
            spent += start - STEPS.left
    return spent


def test_each_step_costs_the_same():
    def loop(n: int) -> str:
        return f"w = [2, -1]\nfor i in range({n}):\n    L = sum((w - [5, 3])**2)\n    with no_grad:\n        w -= 0.1 * grad(L, w)\n"

    per_step = (steps_of(loop(200)) - steps_of(loop(100))) / 100
    assert (steps_of(loop(10)) - steps_of(loop(0))) / 10 == per_step
    session = Session()
    session.run_source(loop(1000) + "L = sum((w - [5, 3])**2)")
    from gradcalc.autodiff import topological_order

    assert len(topological_order(session.variables["L"])) == 6  # w, [5, 3], -, 2, ** and sum: no history of w


def test_a_step_keeps_a_variable_a_leaf_with_the_new_value():
    session = Session()
    session.run_source("w = [1, 2]\nwith no_grad: w *= 3")
    w = session.variables["w"]
    assert w.is_leaf and w.requires_grad and w.name == "w"
    assert w.data.tolist() == [3.0, 6.0]


def test_nothing_inside_the_block_records_a_graph():
    session = Session()
    session.run_source("x = 3; y = x * 2; Y = y * y\nwith no_grad:\n    z = x * 2\n    g = grad(Y, x)\n    y += 1\n")
    z, g, y = (session.variables[n] for n in "zgy")
    assert not z.requires_grad and not g.requires_grad and not y.requires_grad
    assert float(g.data) == 8 * 3 and float(y.data) == 7  # d(2x)^2/dx = 8x; a named intermediate's value goes on


def test_a_plain_assignment_in_the_block_makes_a_constant_and_grad_says_how_to_step():
    source = "w = 2\nL = (w - 5)**2\nwith no_grad:\n    w = w - 0.1 * grad(L, w)\ngrad((w - 5)**2, w)"
    with pytest.raises(LanguageError, match=r"write w -= step inside with no_grad:") as caught:
        Session().run_source(source)
    assert (caught.value.line, caught.value.column) == (5, 1)
    done = gradcalc("eval", source)
    assert done.returncode == 2 and "[line 5, column 1]" in done.stderr


def test_grad_of_a_value_computed_in_the_block_is_refused():
    with pytest.raises(LanguageError, match="compute y from the variables before the block"):
        Session().run_source("w = 2\nwith no_grad:\n    L = (w - 5)**2\n    w -= 0.1 * grad(L, w)")


@pytest.mark.parametrize(("source", "message", "place"), [
    ("w = 1\nwith no_grad:\n    check w", "a check cannot be inside a no_grad block: check after the block", (3, 5)),
    ("with grad_enabled: x = 1", "with takes no_grad, as in `with no_grad:`", (1, 6)),
    ("with = 3", "'with' is a keyword of the language", (1, 1)),
    ("x = [1, 2, 3]\nwith no_grad:\n    x += [1, 2]", "shapes do not fit for +", (3, 5)),
])
def test_mistakes_are_said_at_their_place(source, message, place):
    with pytest.raises(LanguageError) as caught:
        Session().run(compile_program(source))
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == place


# ---- a name reported is what it holds now ------------------------------------------------------


def test_a_rebound_name_is_reported_as_it_is_now_and_the_report_says_so():
    result = report("x = 2; L = x**2; x = 10; L")
    assert result["grads"]["x"] == 0.0  # what grad(L, x) gives
    assert report("x = 2; L = x**2; x = 10; grad(L, x)")["value"] == 0.0
    assert result["notes"] == ["the value depends on an earlier value of x, which has been rebound since: grad x is with respect to "
                               "what x holds now, which the value does not depend on"]
    text = gradcalc("eval", "x = 2; L = x**2; x = 10; L").stdout
    assert "grad x: 0.0" in text and "note: the value depends on an earlier value of x" in text


def test_after_a_training_step_the_loss_says_it_was_computed_from_the_weights_before():
    result = report("w = 2; L = (w - 5)**2\nwith no_grad: w -= 0.1 * grad(L, w)\nL")
    assert result["grads"]["w"] == 0.0 and "an earlier value of w" in result["notes"][0]


def test_check_holds_the_accumulator_to_its_derivative(tmp_path):
    # d/dw sum_i (w - i)**2 = 12 at w = 3; the check of L by w replays a graph that reaches w
    path = tmp_path / "accumulate.gc"
    path.write_text("w = 3\nL = 0\nfor i in range(3): L += (w - i)**2\ncheck L wrt w\ncheck grad(L, w) == 12\n")
    done = gradcalc("check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed, 0 errors" in done.stdout and "warning" not in done.stdout


def test_a_check_by_an_earlier_value_says_so(tmp_path):
    path = tmp_path / "rebound.gc"
    path.write_text("x = 2\nL = x**2\nx = 10\ncheck L\n")
    done = gradcalc("check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: x here is the value x held earlier (it has been rebound since)" in done.stdout
