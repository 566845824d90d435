"""Every file in examples/ on `--engine jax` and `--engine torch` gives the tensor engine's
values and gradients: each check's value and its Jacobian by the check's variables, and
each expression's value and gradients, to 1e-12.

The file runs statement by statement in two sessions side by side; each engine
differentiates with its own autodiff (jax.jacrev, torch.func.jacrev over the program
replayed on it), gradcalc with its reverse mode.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gradcalc.autodiff.gradcheck import reverse_jacobian
from gradcalc.parser import ExpressionResult, Session, compile_program
from gradcalc.parser.analysis import analyze, variables_in

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.gc"))
TOLERANCE = 1e-12


def close(theirs, ours, what):
    theirs, ours = np.asarray(theirs, dtype=float), np.asarray(ours, dtype=float)
    assert theirs.shape == ours.shape, what
    np.testing.assert_allclose(theirs, ours, rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True, err_msg=what)


def leaves_of(session, statement, value):
    if statement.wrt:
        return list({id(session.variables[n]): session.variables[n] for n in statement.wrt}.values())
    return variables_in(value)


@pytest.fixture
def roomy():
    """The memory budget counts the process's resident memory: a test worker that has loaded
    JAX, PyTorch and their compiled kernels holds more than a command does. And the time
    budget is CPU time: train_mlp.gc's 100 steps on the JAX engine, one dispatch per op, took
    over 5 s of it beside another worker in CI (these tests compare numbers, not budgets)."""
    from gradcalc.autodiff.limits import set_max_memory, set_max_seconds

    previous, seconds = set_max_memory(16 * 10**9), set_max_seconds(120)
    yield
    set_max_memory(previous)
    set_max_seconds(seconds)


@pytest.mark.parametrize("library", ["jax", "torch"])
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
@pytest.mark.slow
def test_each_example_gives_the_tensor_engines_values_and_gradients(library, path, roomy):
    pytest.importorskip(library)
    from gradcalc.parser.engines.engine_checks import engine_jacobians

    ours, theirs = Session(base_dir=path.parent), Session(engine=library, base_dir=path.parent)
    compared = 0
    for statement in compile_program(path.read_text()).statements:
        where = f"{path.name}:{statement.span[0]} {statement.text}"
        if statement.kind != "check":
            mine, other = ours.run_statement(statement), theirs.run_statement(statement)
            if isinstance(mine, ExpressionResult):
                a, b = analyze(mine.value, None, ours.variables), analyze(other.value, None, theirs.variables)
                close(b.value, a.value, where)
                assert sorted(b.grads) == sorted(a.grads), where
                for name in a.grads:
                    close(b.grads[name], a.grads[name], f"{where}: grad {name}")
                compared += 1
            continue
        a, b = ours.evaluate(statement.code), theirs.evaluate(statement.code)
        close(b.data, a.data, where)
        if statement.expected is not None:
            close(theirs.evaluate(statement.expected).data, ours.evaluate(statement.expected).data, where)
            continue
        leaves = leaves_of(ours, statement, a)
        for leaf, mine_j, other_j in zip(leaves, reverse_jacobian(a, leaves),
                                         engine_jacobians(theirs.backend, b, [theirs.variables[leaf.name] for leaf in leaves])):
            close(other_j, mine_j, f"{where}: d/d {leaf.name}")
        compared += 1
    assert compared
