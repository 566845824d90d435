"""`for i in range(...)`: one line or an indented block, define-by-run, one budget for the
whole loop, errors that say the iteration and the place. Values against Python's own loop
and closed forms, through the real command where a user would type them."""
from __future__ import annotations

import json

import pytest

from gradcalc.cli import render
from gradcalc.cli.repl import Repl
from gradcalc.parser import LanguageError, Session
from gradcalc.parser.syntax import PendingInput

from .test_cli import gradcalc
from .test_repl import drive


def value(source: str, name: str, engine: str = "tensor") -> float:
    session = Session(engine=engine)
    session.run_source(source)
    return float(session.variables[name].data)


@pytest.mark.parametrize("bounds", ["5", "0", "2, 7", "7, 2", "1, 10, 3", "10, 1, -3", "-4, 4, 2", "3, 3"])
@pytest.mark.parametrize("engine", ["tensor", "scalar"])
def test_range_counts_as_pythons_does(bounds, engine):
    expected = 0.0
    for i in range(*[int(b) for b in bounds.split(",")]):
        expected = expected * 2 + i
    assert value(f"s = 0; for i in range({bounds}): s = s * 2 + i", "s", engine) == expected


def test_the_block_form_and_nested_loops():
    source = "s = 0\nfor i in range(4):\n    # a comment line\n\n    for j in range(i):\n        s += i * j\n    s += 1\nt = s * 2\n"
    expected = sum(i * j for i in range(4) for j in range(i)) + 4
    session = Session()
    session.run_source(source)
    assert float(session.variables["s"].data) == expected and float(session.variables["t"].data) == 2 * expected


def test_one_line_body_takes_every_statement_on_the_line():
    session = Session()
    session.run_source("a = 0; b = 0\nfor i in range(3): a += 1; b += 2\nc = a + b")
    assert [float(session.variables[n].data) for n in "abc"] == [3.0, 6.0, 9.0]


def test_gradient_descent_in_a_loop_follows_the_closed_form():
    # w_k = 5 + (w_0 - 5) * 0.8**k for the step w -= 0.1 * d/dw (w - 5)**2
    source = "w = 2\nfor i in range(30):\n    L = (w - 5)**2\n    w -= 0.1 * grad(L, w)\nw\n"
    done = gradcalc("run", "--json", "-", stdin=source)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == pytest.approx(5 - 3 * 0.8**30, rel=1e-14)


def test_each_iteration_builds_its_own_graph():
    # define-by-run: the branch taken in each iteration is what that iteration records
    session = Session()
    [result] = session.run_source("x = 3\nfor i in range(4): y = x ** 2 if i % 2 == 0 else x ** 3\ngrad(y, x)")
    assert float(result.value.data) == 27.0  # the last iteration (i = 3) took x ** 3


def test_the_loop_name_is_a_whole_number_constant_holding_the_last_number():
    session = Session()
    session.run_source("for k in range(2, 9, 3): z = 1")
    k = session.variables["k"]
    assert k.data.dtype.kind == "i" and int(k.data) == 8 and not k.requires_grad
    with pytest.raises(LanguageError, match="x must be a variable"):
        Session().run_source("x = 2; for k in range(3): y = x * k\ngrad(y, k)")


def test_expressions_in_a_loop_are_not_shown():
    done = gradcalc("run", "-", stdin="x = 1\nfor i in range(3):\n    x * 2\nx\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("value:") == 1


def test_a_loop_in_eval_and_in_a_check_file(tmp_path):
    done = gradcalc("eval", "w = 1; for i in range(3): w *= 2\nw ** 2")
    assert done.returncode == 0, done.stderr
    assert "value: 64.0" in done.stdout and "grad w: 16.0" in done.stdout
    path = tmp_path / "loop.gc"
    path.write_text("x = 0.5\nfor i in range(3):\n    x += 0.25\ncheck tanh(x) * x\ncheck x == 1.25\n")
    done = gradcalc("check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed, 0 errors" in done.stdout


# ---- the budget is the whole loop's -----------------------------------------------------------


def test_a_huge_loop_runs_out_of_steps_with_the_loops_message():
    done = gradcalc("--max-steps", "5000", "eval", "x = 1; for i in range(10**12): x += 1")
    assert done.returncode == 2
    err = done.stderr
    assert "ran over its budget of 5,000 steps" in err and "a loop is one statement, its iterations share the budget" in err
    stopped = int(err.split("stopped at i = ")[1].split(")")[0])
    assert 0 < stopped < 5000
    assert "1 | x = 1; for i in range(10**12): x += 1" in err and "^^^^" in err  # placed at the loop


def test_a_huge_loop_runs_out_of_time():
    done = gradcalc("--max-seconds", "0.3", "eval", "for i in range(10**12): y = 1")
    assert done.returncode == 2
    assert "time budget of 0.3 seconds" in done.stderr and "its iterations share the budget" in done.stderr


def test_one_budget_for_the_whole_loop_not_one_per_iteration():
    # Each iteration takes a few steps, far below the budget: only the total goes over.
    ok = gradcalc("--max-steps", "100000", "eval", "x = 1; for i in range(100): x += 1\nx")
    assert ok.returncode == 0 and "value: 101.0" in ok.stdout
    over = gradcalc("--max-steps", "100000", "eval", "x = 1; for i in range(100000): x += 1\nx")
    assert over.returncode == 2 and "budget of 100,000 steps" in over.stderr


# Bodies that run no instruction of their own, or hardly any: before each iteration was a
# step, `for i in range(10**12): def f(x) = x` counted nothing, so neither the step budget nor
# the time budget (looked at when steps run out) ever stopped it: a hang (found in session 5).
QUIET_BODIES = {
    "a def": "    def f(x) = x\n",
    "a vjp rule": "    vjp f(x, g) = g\n",
    "a no_grad block of a def": "    with no_grad:\n        def g(x) = x\n",
    "an empty loop": "    for j in range(0):\n        y = 1\n",
}


@pytest.mark.parametrize("body", QUIET_BODIES.values(), ids=QUIET_BODIES.keys())
@pytest.mark.parametrize("budget", [("--max-steps", "1000", "budget of 1,000 steps"), ("--max-seconds", "0.3", "time budget of 0.3 seconds")],
                         ids=["steps", "time"])
def test_a_huge_loop_of_a_body_without_instructions_stops_at_its_budget(body, budget):
    option, limit, words = budget
    done = gradcalc(option, limit, "run", "-", stdin="def f(x) = x * 2\nfor i in range(10**12):\n" + body)  # (the helper's timeout: a hang fails)
    assert done.returncode == 2, done.stdout + done.stderr
    assert words in done.stderr and "its iterations share the budget; stopped at i = " in done.stderr
    assert "recursion" not in done.stderr  # (a loop of many iterations is not a recursion)


def test_a_loop_of_iterations_is_charged_a_step_each():
    """The loop's own step per iteration, beside its body's instructions: 1,000 iterations of
    a def fit in 1,100 steps and not in 900."""
    source = "for i in range(1000):\n    def f(x) = x\n"
    assert gradcalc("--max-steps", "1100", "run", "-", stdin=source).returncode == 0
    assert gradcalc("--max-steps", "900", "run", "-", stdin=source).returncode == 2


# ---- errors -------------------------------------------------------------------------------


def test_an_error_in_the_body_names_the_iteration_and_the_place():
    done = gradcalc("run", "-", stdin="x = [1, 2]\nfor i in range(5):\n    x = x + 1 if i < 3 else x + [1, 2, 3]\n")
    assert done.returncode == 2
    assert "shapes do not fit for +: (2,) + (3,) (in the loop at i = 3)" in done.stderr
    assert "[<stdin>:3:29]" in done.stderr


def test_an_error_in_nested_loops_names_each_iteration():
    with pytest.raises(LanguageError) as caught:
        Session().run_source("for i in range(3):\n    for j in range(2):\n        y = 1 if i < 2 else nosuch\n")
    err = caught.value
    assert err.message == "unknown name 'nosuch' (in the loop at j = 0, in the loop at i = 2)"
    assert (err.line, err.column) == (3, 29)


@pytest.mark.parametrize(("source", "message", "place"), [
    ("for i in range(3):\nx = 1", "expected an indented block, found 'x'", (2, 1)),
    ("for i in range(3):\n    x = 1\n      y = 2", "unexpected indent: this line is indented deeper than the block it is in", (3, 7)),
    ("for i in range(3):\n    x = 1\n  y = 2", "this line's indentation matches no block around it", (2 + 1, 3)),
    ("for i in range(2): for j in range(2):\n    x = 1",
     "a block on one line (after for ...: or with no_grad:) cannot hold a block of indented lines; write the outer one as indented lines too",
     (1, 38)),
    ("for i in 3: x = 1", "for i in 3: the number 3 has no items (a scalar has no first axis to go along)", (1, 10)),
    ("for i in sin: x = 1", "for i in sin: the function sin has no items", (1, 10)),
    ("for i in range(): x = 1", "range takes 1 to 3 whole numbers (stop; start, stop; start, stop, step), got 0", (1, 10)),
    ("for i in range(stop=3): x = 1", "range takes its bounds by position: range(stop), range(start, stop) or range(start, stop, step)", (1, 21)),
    ("for i in range(2.5): x = 1", "range takes whole numbers, got 2.5", (1, 16)),
    ("for i in range(1, 5, 0): x = 1", "range's step cannot be 0", (1, 22)),
    ("for i in range(3): check i", "a check cannot be inside a loop: check once the loop has run", (1, 20)),
    ("for in in range(3): x = 1", "'in' is a keyword of the language and cannot be used as a name; choose another", (1, 5)),
])
def test_mistakes_are_said_at_their_place(source, message, place):
    with pytest.raises(LanguageError) as caught:
        Session().run_source(source)
    assert caught.value.message == message
    assert (caught.value.line, caught.value.column) == place


def test_a_loop_left_open_is_unfinished_input():
    with pytest.raises(LanguageError) as caught:
        Session().run_source("for i in range(3):")
    assert caught.value.incomplete and "expected an indented block" in caught.value.message


def test_a_bad_loop_costs_one_statement_of_a_check_file(tmp_path):
    path = tmp_path / "bad.gc"
    path.write_text("x = 1\nfor i in range(3):\n    x += 1\n    y = (x *\n    z = 2\ncheck x**2\nfor j in range(2): x += ; w = 1\ncheck x**3\n")
    done = gradcalc("check", str(path))
    assert "2 passed, 0 failed, 2 errors" in done.stdout, done.stdout
    assert "bad.gc:2" in done.stdout and "bad.gc:7" in done.stdout
    # the loop that did not parse ran neither its body nor a line of it: x is still 1
    assert "PASS" in done.stdout.splitlines()[1] and done.stdout.count("abs 0") >= 1


# ---- the REPL ------------------------------------------------------------------------------


def test_the_repl_reads_a_block_until_a_blank_line():
    pending = PendingInput()
    assert not pending.add("for i in range(3):")
    assert not pending.add("    x += 1")
    assert not pending.add("    y = x * 2")  # a complete statement, but the block goes on
    assert pending.add("")


def test_a_loop_typed_at_the_repl_runs(capsys):
    repl = drive("x = 1\nfor i in range(3):\n    x *= 3\n\nx\n")
    assert "value: 27.0" in capsys.readouterr().out
    assert not repl.session.variables["x"].is_leaf  # x *= 3 is x = x * 3: x names the product of the first x


def test_an_error_in_a_loop_at_the_repl_leaves_the_variables_as_before_the_loop(capsys):
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle("x = 1")
    repl.handle("for i in range(5):\n    x += 1\n    y = x if i < 3 else nosuch\n")
    assert "(in the loop at i = 3)" in capsys.readouterr().err
    assert float(repl.session.variables["x"].data) == 1.0 and "i" not in repl.session.variables
