"""Augmented assignment of right-hand sides that jump (conditionals, nested ones, user
function calls), through the real command, against Python's own `exec` of the same text."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.test_cli import gradcalc

OPERATORS = ["+=", "-=", "*=", "/=", "//=", "%="]
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


@pytest.mark.parametrize(("engine", "operators"), [("tensor", OPERATORS), ("scalar", OPERATORS[:4])])  # scalar: no // or %
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

