"""On JAX, a check's Jacobians of a graph with calls (a derivative, a transformed function)
are one compiled function, not JAX's eager transformations op by op (which lowered and
compiled every primitive of the derivative's rules on its own: `gradcalc check
examples/second_order.gc --engine jax` took 19 s, now 7). The numbers are the tensor
engine's, and where a call's code needs a traced value as a number the graph runs op by op."""
from __future__ import annotations

import numpy as np
import pytest

from gradcalc.autodiff.gradcheck import reverse_jacobian
from gradcalc.parser import Session, compile_program

pytest.importorskip("jax")

from gradcalc.parser.engines import compiled  # noqa: E402  (after the skip: it imports nothing of JAX's, but is JAX's path)
from gradcalc.parser.engines.engine_checks import check_jacobians  # noqa: E402
from gradcalc.parser.engines.values import CallStep, EngineValue  # noqa: E402

PRELUDE = "x = 0.8\ny = -0.6\nv = [0.5, -1.2, 2.0]\ndef f(a, b) = a * a * b + b / a\n"
WITH_CALLS = [  # each a graph of calls: derivatives of derivatives, transformed functions, a user function inside
    ("grad(grad(tanh(x), x), x)", ["x"]),
    ("grad(f(x, y), x)", ["x", "y"]),
    ("hessian(v[0] ** 2 * v[1] + exp(v[0] * v[1]), v)", ["v"]),
    ("grad(lambda t: sum(t[1] ** 2 * t))(v)", ["v"]),
    ("jacrev(lambda t: sin(t) * sum(t))(v) @ v", ["v"]),
]


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[compiled._CompiledOnce]:
    """Every graph with calls compiled for its use alone while the test runs."""
    found: list[compiled._CompiledOnce] = []

    class Spy(compiled._CompiledOnce):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            found.append(self)

    monkeypatch.setattr(compiled, "_CompiledOnce", Spy)
    return found


def values(engine: str, expression: str) -> tuple[Session, object]:
    session = Session(engine=engine)
    session.run_source(PRELUDE)
    return session, session.evaluate(compile_program(expression).statements[0].code)


@pytest.mark.parametrize("expression, names", WITH_CALLS, ids=[e for e, _ in WITH_CALLS])
def test_a_checks_jacobians_through_calls_are_compiled_and_give_the_tensor_engines(made, expression, names):
    session, value = values("jax", expression)
    ours, mine = values("tensor", expression)
    leaves = [session.variables[n] for n in names]
    analytic, numeric = check_jacobians(session.backend, value, leaves, "reverse")
    assert made and not any(m.eager for m in made), "compiled, not run op by op"
    for name, theirs, central, exact in zip(names, analytic, numeric, reverse_jacobian(mine, [ours.variables[n] for n in names])):
        np.testing.assert_allclose(theirs, exact, rtol=1e-12, atol=1e-12, err_msg=f"{expression}: d/d {name}")
        np.testing.assert_allclose(central, exact, rtol=1e-5, atol=1e-6, err_msg=f"{expression}: central, d/d {name}")


def test_the_third_derivative_of_tanh_is_its_closed_form(made):
    session, value = values("jax", "grad(grad(tanh(x), x), x)")
    (jacobian,), _ = check_jacobians(session.backend, value, [session.variables["x"]], "reverse")
    t = np.tanh(0.8)
    assert jacobian.item() == pytest.approx(-2 * (1 - t * t) * (1 - 3 * t * t), rel=1e-13)  # d3/dx3 tanh


def test_a_call_that_reads_a_traced_leaf_as_a_number_runs_op_by_op(made):
    """jit traces the graph's leaves; a call that reads one as a number (here an index, as a
    parameter would be) cannot be compiled, and the same function then runs op by op, once
    decided for every later call."""
    session = Session(engine="jax")
    library = session.backend.library
    a = EngineValue(library.array(np.array([1.0, 2.0, 3.0])), requires_grad=True)
    k = EngineValue(library.array(np.array(2.0)), requires_grad=True)

    def again(lib, inputs):
        return inputs[0][int(lib.host(inputs[1]))] * inputs[0].sum()  # a[k] * sum(a)

    out = EngineValue(again(library, [a.value, k.value]), (a, k), CallStep("pick", again), None, requires_grad=True)

    def make(run):
        return lambda leaves, _, offsets: library.jax.grad(lambda o: run(leaves, [], [o])[0])(offsets[0])

    fast = compiled.jitted(library, "test", [a, k, out], [out], [], [a], make)
    assert fast is not None
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(fast([], [np.zeros(3)])), [3.0, 3.0, 9.0])  # d(a[2] * sum(a))/da
    assert [m.eager for m in made] == [True]
