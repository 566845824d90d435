"""Internal errors, each a clear message at its place (issue 38), through the real command:
each case was a Python error ("internal error: TypeError ...", a RecursionError, a crash
of the process) or a silent wrong number. The expected numbers are closed forms."""
from __future__ import annotations

import json
import math

import pytest

from tests.test_cli import gradcalc


def error_of(*args: str) -> dict:
    done = gradcalc("eval", "--json", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)["error"]


def value_of(*args: str) -> dict:
    done = gradcalc("eval", "--json", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("bound, shown", [
    ("sum", "the function sum"), ("lambda t: t", "the function <lambda t>"), ("value_and_grad(sin)(1.0)", "2 results"),
])
def test_range_of_a_function_or_a_tuple_is_an_error_at_the_bound(bound, shown):
    error = error_of(f"for i in range({bound}): 1\n1")
    assert error["message"] == f"range takes whole numbers, got {shown}"
    assert (error["line"], error["column"]) == (1, 16)


@pytest.mark.parametrize("bounds", ["2**63", "2**63, 2**63 + 4096", "-2**63 - 4096, -2**63 - 2048, 2048", "0, 2**64", "1e308"])
def test_range_bounds_a_loop_s_number_cannot_hold_are_an_error(bounds):
    error = error_of(f"for i in range({bounds}): x = i\n1")
    assert error["kind"] == "argument"
    assert error["message"].startswith("range takes whole numbers from -2**63 to 2**63 - 1 (a loop's number is a 64-bit integer)")


def test_range_bounds_just_inside_the_64_bit_integers_run():
    # steps of 2**61 up to the last float64 below 2**63: the numbers 0, 2**61, 2**62, 3 * 2**61
    assert value_of("s = 0\nfor i in range(0, 2**63 - 1024, 2**61): s = s + i\ns")["value"] == 6 * 2.0**61


@pytest.mark.parametrize("form", ["grad", "jacfwd", "jacrev", "hessian", "vmap"])
@pytest.mark.parametrize("depth", [41, 200, 1000])
def test_transformations_nested_past_forty_are_an_error(form, depth):
    error = error_of(f"{form}(" * depth + "sin" + ")" * depth + "(x)", "x=0.5")
    assert error["kind"] == "recursion"
    assert "transformations nested deeper than 40" in error["message"]


def test_forty_nested_grads_give_the_fortieth_derivative():
    # d^40/dx^40 sin = sin (40 is a multiple of 4); jacfwd of a scalar function likewise
    assert value_of("grad(" * 40 + "sin" + ")" * 40 + "(x)", "x=0.5")["value"] == pytest.approx(math.sin(0.5), rel=1e-12)
    assert value_of("jacfwd(" * 40 + "sin" + ")" * 40 + "(x)", "x=0.5")["value"] == pytest.approx(math.sin(0.5), rel=1e-12)


@pytest.mark.parametrize(("function", "derivative"), [("cos", lambda k: math.cos(0.5 + k * math.pi / 2)), ("exp", lambda k: math.exp(0.5))])
@pytest.mark.parametrize("depth", [33, 35, 40])
def test_derivatives_nested_past_32_levels_are_the_closed_forms(function, derivative, depth):
    """Each jacfwd adds a batch axis: past 32 of them NumPy's broadcast_shapes gave up
    (a RuntimeError; the engine broadcasts shapes itself, autodiff/shapes.py)."""
    result = value_of("jacfwd(" * depth + function + ")" * depth + "(x)", "x=0.5")
    assert result["value"] == pytest.approx(derivative(depth), rel=1e-12)


def test_nesting_through_lambdas_counts_too():
    program = "g0 = sin\n" + "".join(f"g{i} = lambda t: grad(g{i - 1})(t)\n" for i in range(1, 60)) + "g59(x)"
    error = error_of(program, "x=0.5")
    assert error["kind"] == "recursion" and "nested deeper than 40" in error["message"]


def test_a_gradient_through_an_index_of_a_34_dimensional_tensor_does_not_crash():
    ones = ",".join(["1"] * 34)
    result = value_of("sum(x[..., [0], [0]] * 3)", f"x=zeros({ones})")
    assert result["grads"]["x"] == json.loads("[" * 34 + "3.0" + "]" * 34)


@pytest.mark.parametrize("rule", ["g * grad(f)(x)", "grad(f)(x)", "g * jacrev(f)(x)", "g * grad(lambda t: f(t) * 2)(x)"])
def test_a_vjp_rule_that_differentiates_its_own_function_is_an_error_at_the_place(rule):
    error = error_of(f"def f(x) = x * x\nvjp f(x, g) = {rule}\ngrad(f)(a)", "a=1.5")
    assert error["kind"] == "argument"
    assert error["message"].startswith("vjp f: the rule differentiates f, whose derivative is this rule")
    assert error["line"] == 2 and error["function"] == "vjp f"


def test_a_vjp_rule_may_differentiate_other_functions():
    # (the transformation in the rule was computed without a graph: grad a was 0, exit 0)
    result = value_of("def f(x) = sin(x)\nvjp f(x, g) = g * grad(sin)(x)\nf(a)", "a=1.5")
    assert result["grads"]["a"] == pytest.approx(math.cos(1.5), rel=1e-15)


def test_a_transformation_inside_no_grad_differentiates_and_records_nothing():
    result = value_of("def f(x) = x * x * x\nwith no_grad:\n    y = grad(f)(a)\ny", "a=1.5")
    assert result["value"] == pytest.approx(3 * 1.5**2, rel=1e-15)
    assert result["grads"] == {"a": 0.0}  # y is a constant: computed inside no_grad


@pytest.mark.parametrize("body, shown", [("lambda y: x * y", "the function <lambda y>"), ("sin", "the function sin"),
                                         ("grad(sin)", "the function <grad of sin>")])
def test_a_ruled_function_that_returns_a_function_is_an_error(body, shown):
    error = error_of(f"def f(x) = {body}\nvjp f(x, g) = g\nf(a)", "a=1.5")
    assert error["message"] == f"f has a vjp rule, so it must give one tensor; it gave {shown}"
    assert error["line"] == 3


@pytest.mark.parametrize("program, message", [
    ("x[sin]", "the function sin cannot be used with [...]"),
    ("x.sum(axis=sin)", ".sum: axis takes a value, got the function sin"),
    ("sum(x, axis=lambda t: t)", "sum: axis takes a value, got the function <lambda t>"),
    ("x.abs(sin)", "the function sin cannot be used with .abs"),
    ("x[value_and_grad(sin)(1.0):]", "slice bounds must be whole numbers, got 2 results"),
    ("None.T", "None cannot be used with .T"),
    ("None[0]", "None cannot be used with [...]"),
    ("getitem(x, 2**63)", "a whole number too large here: an index, a count, a shape or an axis is at most 2**63 - 1"),
])
def test_values_in_the_wrong_place_are_errors_in_the_language_s_words(program, message):
    assert error_of(program, "x=[1.0, 2.0]")["message"].startswith(message)
