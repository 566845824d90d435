"""Augmented assignment of right-hand sides that jump (conditionals, nested ones, user
function calls), through the real command: its value against Python's own `exec` of the
same text, its derivative against PyTorch float64's of `x = x OP right` (what `x OP= right`
means, as in Python; torch's own `x += ...` would update a leaf in place)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gradcalc.parser.compiler import AUGMENTED
from tests.test_cli import gradcalc

# Every augmented operator of the language's table (Python's all: a test below holds the
# table to Python's grammar) but @=, which numbers do not take: a test of its own below.
OPERATORS = [op for op in AUGMENTED if op != "@="]
# The scalar engine has no // or %, and takes constant exponents only (micrograd's Value).
SCALAR_OPERATORS = [op for op in OPERATORS if op not in ("//=", "%=", "**=")]
# Right-hand sides written so that they are Python too; f and g are defined in both.
RIGHT_SIDES = [
    "3 if x > 0 else 2",
    "3 if x < 0 else 2",
    "(3 if x > 5 else 4) if x > 0 else 2",
    "2 if x < 0 else (5 if x > 100 else 4)",
    "f(-3)",
    "f(x - 20) if x > 0 else 1",
    "g(3) + (1 if x > 0 else 2)",
]
DEFINITIONS = {
    "f": ("u", "u if u > 0 else -u"),
    "g": ("n", "1 if n < 1 else n * g(n - 1)"),  # recursive: n!
}


def python_value(start: str, operator: str, right: str) -> float:
    namespace: dict = {}
    for name, (param, body) in DEFINITIONS.items():
        exec(f"def {name}({param}):\n    return {body}", namespace)  # noqa: S102
    exec(f"x = np.float64({start})\nx {operator} {right}", {"np": np, **namespace}, namespace)  # noqa: S102
    return float(namespace["x"])


@pytest.mark.parametrize(("engine", "operators"), [("tensor", OPERATORS), ("scalar", SCALAR_OPERATORS)])
def test_every_operator_with_every_jumping_right_side_matches_python(engine, operators):
    definitions = "".join(f"def {name}({param}) = {body}\n" for name, (param, body) in DEFINITIONS.items())
    cases = [(start, op, right) for start in ("7", "-7") for op in operators for right in RIGHT_SIDES]
    script = definitions + "".join(f"x = {start}; x {op} {right}; x\n" for start, op, right in cases)
    done = gradcalc("--engine", engine, "run", "--json", "-", stdin=script)
    assert done.returncode == 0, done.stderr
    values = [json.loads(line)["value"] for line in done.stdout.splitlines()]
    assert len(values) == len(cases)
    for (start, op, right), got in zip(cases, values):
        assert got == python_value(start, op, right), (start, op, right)


def torch_derivative(torch, start: str, operator: str, right: str) -> float:
    """d x / d x0 after `x = x0; x = x OP right`, by PyTorch float64 (floor division has no
    derivative there: 0, as JAX and gradcalc give it)."""
    if operator == "//=":
        return 0.0
    namespace: dict = {}
    for name, (param, body) in DEFINITIONS.items():
        exec(f"def {name}({param}):\n    return {body}", namespace)  # noqa: S102
    x0 = torch.tensor(float(start), dtype=torch.float64, requires_grad=True)
    namespace["x"] = x0
    exec(f"x = x {operator[:-1]} ({right})", namespace)  # noqa: S102
    (derivative,) = torch.autograd.grad(namespace["x"], x0, allow_unused=True)
    return 0.0 if derivative is None else float(derivative)


@pytest.mark.parametrize(("engine", "operators"), [("tensor", OPERATORS), ("scalar", SCALAR_OPERATORS)])
@pytest.mark.slow
def test_the_derivative_of_every_update_is_pytorchs(engine, operators):
    torch = pytest.importorskip("torch")
    definitions = "".join(f"def {name}({param}) = {body}\n" for name, (param, body) in DEFINITIONS.items())
    cases = [(start, op, right) for start in ("7", "-7") for op in operators for right in RIGHT_SIDES]
    script = definitions + "".join(f"x0 = {start}; x = x0; x {op} {right}; x * 1\n" for start, op, right in cases)
    done = gradcalc("--engine", engine, "run", "--json", "-", stdin=script)
    assert done.returncode == 0, done.stderr
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(reports) == len(cases)
    for (start, op, right), got in zip(cases, reports):
        assert got["grads"].get("x0", 0.0) == torch_derivative(torch, start, op, right), (start, op, right, got)


def test_the_table_holds_every_augmented_operator_of_python():
    """Found by a helper's generated programs: `x **= 2` and `x @= M` were syntax errors."""
    import token

    pythons = {text for text in token.EXACT_TOKEN_TYPES if len(text) > 1 and text.endswith("=")
               and text not in ("==", "!=", "<=", ">=", ":=", "->", "<<=", ">>=", "&=", "|=", "^=")}
    assert pythons == set(AUGMENTED)  # (the bitwise ones have no meaning for real numbers here)


@pytest.mark.parametrize("start", ["[1.5, -2]", "[[1.5, -2], [0.5, 3]]"])
def test_matmul_update_is_pythons_and_its_derivative_pytorchs(start):
    """`v @= M` is `v = v @ M`: value and the gradient of its sum by v's start and by M."""
    torch = pytest.importorskip("torch")
    matrix = [[2.0, -1.0], [0.5, 3.0]]
    done = gradcalc("eval", "--json", f"v0 = {start}; v = v0; v @= M; v", f"M={matrix}")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    v0, m = (torch.tensor(eval(text), dtype=torch.float64, requires_grad=True) for text in (start, str(matrix)))  # noqa: S307
    out = v0 @ m
    np.testing.assert_array_equal(report["value"], out.detach().numpy())
    dv0, dm = torch.autograd.grad(out.sum(), (v0, m))
    np.testing.assert_array_equal(report["grads"]["v0"], dv0.numpy())
    np.testing.assert_array_equal(report["grads"]["M"], dm.numpy())


@pytest.mark.parametrize(("source", "value"), [
    ("x = 1; x += 1 if 1 > 0 else 2; x", "value: 2.0"),
    ("x = 10; x *= 3 if x > 0 else 2; x", "value: 30.0"),
    ("x = [1, 2]; x += ([1, 1] if 1 > 0 else [5, 5]); x", "value: [2.0, 3.0]"),
    ("x = [1, 2]; x -= ([1, 1] if 1 < 0 else ([5, 5] if 1 > 0 else [0, 0])); x", "value: [-4.0, -3.0]"),
])
def test_reported_cases(source, value):
    evaluates_to(source, value)


def evaluates_to(source: str, value: str) -> None:
    """`gradcalc eval source` succeeds and its first line starts with `value`."""
    done = gradcalc("eval", source)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(value), done.stdout
    assert "internal error" not in done.stdout + done.stderr

