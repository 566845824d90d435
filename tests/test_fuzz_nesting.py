"""Deep nesting of every construct: a value or a LanguageError, never a RecursionError.

A hypothesis generator wraps an expression in thousands of layers, each one of the
language's constructs (conditionals on either side, calls, user functions, grad of grad,
indexing, unary minus, lists, methods, parentheses), and the whole pipeline (parse,
compile, run) must answer in the user's terms. A small step budget keeps the slow
layers (each grad differentiates all that is inside it) from running long.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.autodiff.limits import indexed_shape, set_max_steps
from gradcalc.parser import LanguageError, Session
from tests.strategies import sampled

# Each layer wraps the expression E built so far.
LAYERS = {
    "then": "({E} if x > 0 else 1)",
    "else": "(1 if x < 0 else {E})",
    "call": "sin({E})",
    "user": "g({E})",
    "grad": "grad({E}, x)",
    "index": "[{E}, 1][0]",
    "neg": "-{E}",
    "pos": "+{E}",
    "list": "[{E}]",
    "method": "{E}.tanh()",
    "paren": "({E})",
    "pow": "{E} ** 1",
    "keyword": "sum([{E}], axis=0)",
}
PRELUDE = "x = 0.5\ndef g(a) = a * 1\n"


def nested(layers: list[str]) -> str:
    expression = "x"
    for layer in layers:
        expression = LAYERS[layer].replace("{E}", expression)
    return expression


@pytest.fixture(autouse=True)
def small_step_budget():
    previous = set_max_steps(200_000)
    yield
    set_max_steps(previous)


def answers(source: str) -> None:
    """Running `source` gives results or a LanguageError, nothing else."""
    try:
        Session().run_source(source)
    except LanguageError as err:
        assert err.kind != "internal", err.message
        assert "recursion depth" not in err.message


@settings(max_examples=25)
@given(st.lists(st.sampled_from(sorted(LAYERS)), min_size=1, max_size=1500))
def test_deep_nesting_of_any_mix_of_constructs(layers):
    answers(PRELUDE + nested(layers))


@pytest.mark.parametrize("layer", sorted(set(LAYERS) - {"grad", "list"}))
def test_each_construct_three_thousand_deep_evaluates(layer):
    result = Session().run_source(PRELUDE + nested([layer] * 3000))[-1]
    assert np.isfinite(result.value.data).all()


def test_lists_nested_deeper_than_numpy_allows_are_an_error():
    with pytest.raises(LanguageError) as err:
        Session().run_source(PRELUDE + nested(["list"] * 3000))
    assert err.value.kind == "size" and "65 dimensions; at most 64" in err.value.message


def test_grad_of_grad_nested_deeply_stops_at_the_step_budget():
    with pytest.raises(LanguageError) as err:
        Session().run_source(PRELUDE + nested(["call", "grad"] * 1500))
    assert err.value.kind == "steps"


@settings(max_examples=10)
@given(st.integers(min_value=1, max_value=1000), st.sampled_from(sorted(LAYERS)))
def test_deep_user_functions_and_bodies(depth, layer):
    # a chain of def f_i(a) = f_{i-1}(a) (past the call depth cap: a clear error), whose
    # innermost body is itself deeply nested
    body = LAYERS[layer].replace("{E}", "a")
    defs = "".join(f"def f{i}(a) = f{i - 1}(a)\n" if i else f"def f0(a) = {nested([layer] * 200).replace('x', 'a')}\n" for i in range(depth))
    answers(f"{PRELUDE}{defs}f{depth - 1}(x)\n{body.replace('a', 'x')}")


@settings(max_examples=200)
@given(st.data())
def test_indexed_shape_agrees_with_numpy(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    parts = []
    axis = 0
    while axis < len(shape) and data.draw(st.booleans()):
        n = shape[axis]
        kind = data.draw(sampled(["int", "slice", "array", "none", "bool"]))
        if kind == "int":
            parts.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            parts.append(slice(data.draw(st.none() | st.integers(-n, n)), data.draw(st.none() | st.integers(-n, n)),
                               data.draw(sampled([None, 1, 2, -1]))))
        elif kind == "array":
            dims = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
            parts.append(np.asarray(data.draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(dims)), max_size=int(np.prod(dims))))).reshape(dims))
        elif kind == "bool":
            parts.append(np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        else:
            parts.append(None)
            continue
        axis += 1
    index = tuple(parts)
    try:
        expected = np.zeros(shape)[index].shape
    except IndexError:  # arrays that do not broadcast: the forward reports it
        return
    assert indexed_shape(shape, index) == expected
