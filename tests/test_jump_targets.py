"""Jumps land where they should whatever code is put before or around them: a conditional
in any item of a vjp rule's tuple, after an augmented assignment's load, in a lambda's
body, in a loop. Through the real command; the expected numbers are the rule's own (a
closed form: d(x*y)/dx = y, d(x*y)/dy = x), and the generated programs of
tests/test_python_oracle.py hold the class against Python's exec."""
from __future__ import annotations

import json

import pytest

from gradcalc.parser import compile_program
from gradcalc.parser.compiler import JUMP, JUMP_IF_FALSE, UserFunction
from tests.launch import run

PRODUCT = "def f(x, y) = x * y\n"


def eval_json(program: str, *bindings: str) -> dict:
    """`gradcalc eval --json program bindings`, stopped by the test if it runs for ever."""
    done = run(["eval", "--json", "--max-seconds", "20", program, *bindings], timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_a_conditional_in_the_second_item_of_a_rule_picks_its_branch():
    result = eval_json(PRODUCT + "vjp f(x, y, g) = (g * y, g * x if 1 > 0 else g * 100)\nf(a, b)", "a=2", "b=3")
    assert result["grads"] == {"a": 3.0, "b": 2.0}


@pytest.mark.parametrize(("rule", "grads"), [
    ("(g * y if 1 > 0 else g * 2, g * x if 1 > 0 else g * 100)", {"a": 3.0, "b": 2.0}),
    ("(g * y if 1 < 0 else g * 2, g * x if 1 < 0 else g * 100)", {"a": 2.0, "b": 100.0}),
    ("(g * y if 1 > 0 else g, g * x if 1 < 0 else g)", {"a": 3.0, "b": 1.0}),
    ("((lambda u: u * y if u > 0 else u)(g), g * x if x > 0 else (g if x < 0 else 0 * g))", {"a": 3.0, "b": 2.0}),
])
def test_conditionals_in_two_items_of_a_rule_end(rule, grads):
    # (this once looped for ever, memory growing, past every budget)
    assert eval_json(PRODUCT + f"vjp f(x, y, g) = {rule}\nf(a, b)", "a=2", "b=3")["grads"] == grads


def test_a_conditional_after_an_update_and_in_a_loop():
    result = eval_json("w = 1\nfor i in range(3): w += 2 if i > 0 else 10\nw")
    assert result["value"] == 15.0


def jumps_land_inside(code: list, seen: set[int]) -> None:
    """Every jump of `code` (and of the code of every function it makes) lands on an
    instruction of the same code, or just past its end."""
    for k, (op, arg, _) in enumerate(code):
        if op in (JUMP, JUMP_IF_FALSE):
            assert 0 <= k + 1 + arg <= len(code), (k, arg, len(code))
        if isinstance(arg, UserFunction) and id(arg) not in seen:
            seen.add(id(arg))
            jumps_land_inside(arg.code, seen)


@pytest.mark.parametrize("source", [
    PRODUCT + "vjp f(x, y, g) = (g if x > 0 else g * 2, g if y > 0 else (g if x > 1 else g * 3))",
    "x = 1; x *= 2 if x > 0 else 3",
    "h = lambda t: (t if t > 0 else -t) if t != 0 else (lambda s: s if s > 1 else 2)(t)",
    "for i in range(2):\n    z = 1 if i > 0 else 2\n    z += 3 if z > 1 else 4",
])
def test_every_jump_lands_inside_its_own_code(source):
    seen: set[int] = set()
    statements = list(compile_program(source).statements)
    while statements:
        statement = statements.pop()
        statements += statement.body
        for code in [statement.code, *(c for c, _ in statement.bounds)]:
            jumps_land_inside(code, seen)
        if statement.function is not None:
            jumps_land_inside(statement.function.code, seen)
