"""The scalar engine's language path (`--engine scalar`) against Python's exec, and against
the tensor engine. test_python_oracle.py writes programs over tensors, which the scalar
engine refuses; this writer keeps to what the course's engine offers (numbers, + - * /,
constant powers, its eight functions, conditionals, defs, loops, augmented assignments)
and runs each program three ways: the scalar engine, Python with NumPy float64 (the
oracle: it shares no code with either engine), and the tensor engine. Values must agree
with Python's to rounding, and the two engines' gradients with each other."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gradcalc.parser import Session
from gradcalc.parser.analysis import analyze
from gradcalc.parser.machine import ExpressionResult
from tests.strategies import sampled

EXAMPLES = int(os.environ.get("ORACLE_EXAMPLES", "200"))
FUNCTIONS = {
    "relu": "np.maximum({}, 0.0)", "tanh": "np.tanh({})", "exp": "np.exp({})", "log": "np.log({})",
    "sigmoid": "(1.0 / (1.0 + np.exp(-{})))", "softplus": "np.logaddexp({}, 0.0)", "sqrt": "np.sqrt({})",
    "abs": "np.abs({})",
}
OPERATORS = {"+": "np.add", "-": "np.subtract", "*": "np.multiply", "/": "np.divide"}
COMPARISONS = {"<": "np.less", ">=": "np.greater_equal", "==": "np.equal", "!=": "np.not_equal"}
EXPONENTS = ["2", "3", "0.5", "-1", "1.5", "0"]
NUMBERS = ["0", "1", "2", "0.5", "3.25", "1e-3", "100", "1e300"]
PRELUDE = """
import numpy as np
def _pow(a, b):
    # On 0-d arrays, as the engines compute: a NumPy scalar's ** is C's pow, which gives
    # (-0.0) ** 0.5 = 0.0 where NumPy's power on arrays (and PyTorch's) gives sqrt's -0.0.
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.where((a == -np.inf) & (b != np.round(b)), np.nan, a ** b)[()]
def _truth(c):
    return bool(c != 0)
"""


class ScalarWriter:
    """One program, as gradcalc source and as Python; every name defined before it is read."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw
        self.variables: list[str] = []
        self.functions: dict[str, int] = {}
        self.params: list[str] | None = None

    def pick(self, options: list[Any]) -> Any:
        return self.draw(sampled(options))

    def expr(self, depth: int) -> tuple[str, str]:
        names = self.params if self.params is not None else self.variables
        kinds = ["number", "name", "name"] if depth <= 0 else ["operator", "operator", "power", "function", "negate",
                                                               "conditional", "call", "number", "name"]
        kind = self.pick(kinds)
        if kind == "name" and names:
            name = self.pick(names)
            return name, name
        if kind == "operator":
            (a, pa), (b, pb), op = self.expr(depth - 1), self.expr(depth - 1), self.pick(sorted(OPERATORS))
            return f"({a} {op} {b})", f"{OPERATORS[op]}({pa}, {pb})"
        if kind == "power":
            (a, pa), k = self.expr(depth - 1), self.pick(EXPONENTS)
            return f"({a}) ** {k}", f"_pow({pa}, {k})"
        if kind == "function":
            (a, pa), f = self.expr(depth - 1), self.pick(sorted(FUNCTIONS))
            return f"{f}({a})", FUNCTIONS[f].format(pa)
        if kind == "negate":
            a, pa = self.expr(depth - 1)
            return f"-({a})", f"np.negative({pa})"
        if kind == "conditional":
            (a, pa), (b, pb), (c, pc), (d, pd) = (self.expr(depth - 1) for _ in range(4))
            op = self.pick(sorted(COMPARISONS))
            return f"({a} if {c} {op} {d} else {b})", f"({pa} if _truth({COMPARISONS[op]}({pc}, {pd})) else {pb})"
        if kind == "call" and self.functions and self.params is None:
            name = self.pick(sorted(self.functions))
            args = [self.expr(depth - 1) for _ in range(self.functions[name])]
            return f"{name}({', '.join(a for a, _ in args)})", f"{name}({', '.join(p for _, p in args)})"
        number = self.pick(NUMBERS)
        return number, f"np.float64({number})"

    def statement(self) -> tuple[str, str]:
        kind = self.pick(["assign", "assign", "augmented", "def", "loop", "expression"])
        if kind == "def":
            name, arity = self.pick(["f", "g", "h"]), self.draw(st.integers(1, 2))
            self.params = ["p", "q"][:arity]
            body, python = self.expr(3)
            self.params = None
            self.functions[name] = arity
            return f"def {name}({', '.join(['p', 'q'][:arity])}) = {body}", \
                f"def {name}({', '.join(['p', 'q'][:arity])}):\n    return {python}"
        if kind in ("augmented", "loop") and self.variables:
            name, op = self.pick(self.variables), self.pick(sorted(OPERATORS))
            e, pe = self.expr(2)
            step = f"{name} {op}= {e}", f"{name} = {OPERATORS[op]}({name}, {pe})"
            if kind == "augmented":
                return step
            n = self.pick(["1", "2", "3"])
            return f"for k in range({n}): {step[0]}", f"for k in range({n}):\n    k = np.float64(k)\n    {step[1]}"
        if kind == "expression" and self.variables:
            e, pe = self.expr(3)
            return e, f"_out.append({pe})"
        e, pe = self.expr(3)
        name = self.pick(["a", "b", "c"])
        if name not in self.variables:
            self.variables.append(name)
        return f"{name} = {e}", f"{name} = {pe}"


@st.composite
def programs(draw: Callable[[Any], Any]) -> tuple[str, str]:
    writer = ScalarWriter(draw)
    pairs = [writer.statement() for _ in range(draw(st.integers(1, 6)))]
    last, python_last = writer.expr(3)
    source = "\n".join([*(t for t, _ in pairs), last]) + "\n"
    return source, PRELUDE + "\n".join([*(p for _, p in pairs), f"_out.append({python_last})"]) + "\n"


def run(source: str, engine: str) -> tuple[list[Any], Session]:
    session = Session(engine=engine)
    return [r.value for r in session.run_source(source) if isinstance(r, ExpressionResult)], session


def close(a: Any, b: Any, rtol: float = 1e-9, atol: float = 1e-300) -> bool:
    return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=rtol, atol=atol, equal_nan=True))


# Found by this test in CI: -0.0 ** 0.5 gave 0.0 in the oracle (a NumPy scalar's pow) and
# the engines' -0.0 (NumPy's power on arrays, as PyTorch's), so 1 / a had the other sign.
@example(("a = ((-(0) * (0 * 0))) ** 0.5\n(-((1 / a)) + ((0 * a) * (a) ** 2))\n",
          PRELUDE + "a = _pow(np.multiply(np.negative(np.float64(0)), np.multiply(np.float64(0), np.float64(0))), 0.5)\n"
          "_out.append(np.add(np.negative(np.divide(np.float64(1), a)), np.multiply(np.multiply(np.float64(0), a), _pow(a, 2))))\n"))
@settings(max_examples=EXAMPLES, deadline=None)
@given(programs())
@pytest.mark.slow
def test_scalar_programs_give_what_python_gives_and_what_the_tensor_engine_gives(program):
    source, python = program
    namespace: dict[str, Any] = {"_out": []}
    with np.errstate(all="ignore"):
        exec(compile(python, "<translation>", "exec"), namespace)  # noqa: S102
    scalar, scalar_session = run(source, "scalar")
    tensor, tensor_session = run(source, "tensor")
    want = namespace["_out"]
    assert len(scalar) == len(tensor) == len(want), source
    for s, t, w in zip(scalar, tensor, want):
        assert close(s.data, w), f"scalar {s.data!r}, Python {w!r}\n{source}"
        assert close(t.data, w), f"tensor {t.data!r}, Python {w!r}\n{source}"
    # the gradients of the last result, by each engine's own backward pass
    grads = [analyze(out[-1], None, session.variables).grads for out, session in
             ((scalar, scalar_session), (tensor, tensor_session))]
    assert grads[0].keys() == grads[1].keys(), source
    for name in grads[0]:
        # (terms that cancel exactly in the reals, a**-1 * a, leave a rounding residue of
        # about 1e-17 that each engine sums in its own order: no relative tolerance holds at 0)
        assert close(grads[0][name], grads[1][name], rtol=1e-7, atol=1e-12), f"d/d{name}: {grads[0][name]} vs {grads[1][name]}\n{source}"
