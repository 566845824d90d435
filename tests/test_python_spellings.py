"""Python's own spellings mean what they mean in Python (and in JAX and PyTorch, whose arrays
iterate along their first axis): `a, b = 1, 2`, `a, b = (1, 2)`, `a, b = X` (rows),
`g, = ...`, `for row in X`, `for W in [W1, W2]`. Through the real command; values against
Python's exec of the same text over NumPy, gradients against PyTorch float64 of the same
program. (tests/test_python_oracle.py also writes such statements among generated programs.)"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.test_cli import gradcalc


def evaluated(source: str, *bindings: str) -> dict:
    done = gradcalc("eval", source, *bindings, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def python(source: str, **values: object) -> object:
    """The value of the last line of `source` run by Python over float64 NumPy arrays."""
    *lines, last = source.split("\n")
    namespace = {name: np.asarray(v, dtype=np.float64) for name, v in values.items()}
    exec("\n".join(lines), {"np": np, "sum": np.sum}, namespace)  # noqa: S102
    return eval(last, {"np": np, "sum": np.sum}, namespace)  # noqa: S307


@pytest.mark.parametrize("source", [
    "a, b = 1, 2\n[a, b]",
    "a, b = (1, 2)\n[b, a]",
    "a, b = [1, 2]\na - b",
    "a, b = b0, a0\n[a, b]",           # a swap: the right side is evaluated first
    "a, = [5]\na",
    "a, b, = X\nb",                     # rows of a matrix
    "a, b = X[0]\na * b",               # the elements of a vector
    "a, b = X[0], X\nb - a",            # values of different shapes
    "t = 0\nfor row in X: t += sum(row ** 2)\nt",
    "t = 0\nfor v in X[1]: t = t * 10 + v\nt",
    "t = 0\nfor W in [X, X[0]]: t += sum(W)\nt",   # a list of unequal shapes: its items
])
def test_unpacking_and_iteration_give_what_python_gives(source):
    bindings = {"X": [[1.0, 2.0], [3.0, 4.0]], "a0": 7.0, "b0": 8.0}
    program = "\n".join(f"{k} = {v}" for k, v in bindings.items()) + "\n" + source
    doc = evaluated(program)
    assert np.array_equal(np.asarray(doc["value"], dtype=float), np.asarray(python(source, **bindings), dtype=float))


def test_a_loop_over_rows_and_an_unpacking_differentiate_as_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for _ in range(5):
        rows, cols = rng.integers(2, 5), rng.integers(1, 4)
        X = rng.normal(size=(rows, cols))
        w = rng.normal(size=cols)
        doc = evaluated("L = 0\nfor row in X: L += tanh(row @ w) ** 2\nL", f"X={X.tolist()}", f"w={w.tolist()}")
        tx, tw = torch.tensor(X, requires_grad=True), torch.tensor(w, requires_grad=True)
        loss = sum(torch.tanh(row @ tw) ** 2 for row in tx)
        loss.backward()
        assert np.isclose(doc["value"], loss.item(), rtol=1e-13)
        assert np.allclose(doc["grads"]["X"], tx.grad.numpy(), rtol=1e-12, atol=1e-15)
        assert np.allclose(doc["grads"]["w"], tw.grad.numpy(), rtol=1e-12, atol=1e-15)
        doc = evaluated(f"a, b = X[0], X[1]\nsum(a * b) + sum(X[{rows - 1}])", f"X={X.tolist()}")
        tx = torch.tensor(X, requires_grad=True)
        a, b = tx[0], tx[1]
        ((a * b).sum() + tx[rows - 1].sum()).backward()
        assert np.allclose(doc["grads"]["X"], tx.grad.numpy(), rtol=1e-13)


def test_grad_of_a_tuple_still_unpacks():
    doc = evaluated("gW, gb = grad(sum(W * x) + sum(b ** 2), (W, b))\ngW + gb", "W=[1, 2]", "b=[3, 4]", "x=[5, 6]")
    assert doc["value"] == [11.0, 14.0]  # x + 2b


@pytest.mark.parametrize(("source", "words", "column"), [
    ("a, b = 1, 2, 3", "cannot unpack 3 values into 2 names", 1),
    ("a, b, c = [[1, 2], [3, 4]]", "cannot unpack 2 values into 3 names", 1),
    ("X = [[1, 2], [3, 4]]; a, b, c = X", "cannot unpack a tensor of shape (2, 2) into 3 names: it has 2 items along its first axis", 23),
    ("a, b = 3", "cannot unpack into 2 names: the number 3 has no items", 1),
    ("a, = sin", "cannot unpack into 1 name: the function sin has no items", 1),
    ("for r in 3: y = r", "for r in 3: the number 3 has no items", 10),
])
def test_what_cannot_be_unpacked_says_so_where_python_refuses(source, words, column):
    done = gradcalc("eval", source)
    assert done.returncode == 2 and words in done.stderr and f"column {column}]" in done.stderr, done.stderr
    with pytest.raises((TypeError, ValueError)):  # Python refuses them too
        exec(source.replace("sin", "abs").replace("X = [[1, 2], [3, 4]]", "X = np.ones((2, 2))"), {"np": np})  # noqa: S102


def test_an_error_in_a_loop_over_rows_names_the_row():
    done = gradcalc("eval", "for r in [[1, 2]]: y = r + [1, 2, 3]")
    assert "shapes do not fit for +: (2,) + (3,) (in the loop at r = [[1, 2]][0])  [line 1, column 24]" in done.stderr, done.stderr


def test_the_repl_unpacks_iterates_and_warns_as_the_command_does(tmp_path):
    """In a real terminal: `a, b = 1, 2`, a loop over rows typed as a block (its body on the
    lines after the colon, an empty line to run it), and the transpose warning."""
    from tests.test_repl import exchange, spawn_repl

    pexpect, child = spawn_repl(tmp_path)
    try:
        child.expect(">>>")
        exchange(child, "a, b = 1, 2")
        exchange(child, "[b, a]", r"value: \[2.0, 1.0\]")
        exchange(child, "X = [[1, 2], [3, 4]]; L = 0")
        child.sendline("for row in X:")
        child.expect(r"\.\.\.")
        child.sendline("    L += sum(row ** 2)")
        child.expect(r"\.\.\.")
        exchange(child, "")
        exchange(child, "L", "value: 30.0", r"grad X: \[\[2.0, 4.0\], \[6.0, 8.0\]\]")
        exchange(child, "X.transpose(0, 1)", "warning: line 1, column 1: transpose", r"value: \[\[1.0, 2.0\], \[3.0, 4.0\]\]")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
