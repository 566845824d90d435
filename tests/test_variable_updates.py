"""`w -= step` keeps w a variable: gradient descent in the language, against closed forms."""
from __future__ import annotations

import json

import pytest

from gradcalc.parser import LanguageError, Session

from .test_cli import gradcalc

# Gradient descent on (w - 5)**2 with rate 0.1: w_k = 5 + (w_0 - 5) * 0.8**k exactly.
STEP = "w -= 0.1 * grad((w - 5)**2, w)"


def closed_form(w0: float, k: int) -> float:
    return 5 + (w0 - 5) * 0.8**k


# The scalar engine has no grad(): its step is written out.
@pytest.mark.parametrize(("engine", "step"), [("tensor", STEP), ("scalar", "w -= 0.1 * 2 * (w - 5)")])
def test_repeated_updates_follow_the_closed_form_and_keep_the_graph_small(engine, step):
    def after(steps: int) -> dict:
        done = gradcalc("--engine", engine, "run", "--json", "-", stdin="w = 2\n" + f"{step}\n" * steps + "(w - 5)**2\n")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    result = after(6)
    w = closed_form(2, 6)
    assert result["value"] == pytest.approx((w - 5) ** 2, rel=1e-14)
    assert result["grads"]["w"] == pytest.approx(2 * (w - 5), rel=1e-14)
    # The loss's graph after six steps is the graph after none: w is a leaf, cut from the updates.
    assert result["graph"] == after(0)["graph"]


def test_an_updated_variable_is_a_leaf_with_the_new_value():
    session = Session()
    session.run_source("w = [1, 2]; w *= 3")
    w = session.variables["w"]
    assert w.is_leaf and w.requires_grad and w.name == "w"
    assert w.data.tolist() == [3.0, 6.0]


def test_an_update_of_a_named_intermediate_keeps_its_graph():
    session = Session()
    [result] = session.run_source("x = 3; y = x * 2; y += 1; grad(y**2, x)")
    assert float(result.value.data) == 2 * 7 * 2  # d(2x + 1)^2/dx at 3


def test_an_update_of_a_constant_stays_a_constant():
    session = Session()
    session.run_source("k = detach(3); k += 1")
    assert not session.variables["k"].requires_grad and float(session.variables["k"].data) == 4.0


def test_the_ordinary_assignment_differentiates_through_the_update():
    # w1 = w0 - lr * 2 (w0 - 5): d w1 / d lr = -2 (w0 - 5) = 6 at w0 = 2
    session = Session()
    [result] = session.run_source("lr = 0.1; w = 2; w = w - lr * grad((w - 5)**2, w); grad(w, lr)")
    assert float(result.value.data) == 6.0


def test_detach_says_how_to_keep_a_variable():
    with pytest.raises(LanguageError, match=r"write w -= step"):
        Session().run_source("w = 2; w = detach(w - 0.1 * grad((w - 5)**2, w)); grad((w - 5)**2, w)")
