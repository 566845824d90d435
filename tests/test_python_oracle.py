"""The compiler and the machine checked against an oracle that is not ours: Python's exec.

Hypothesis writes programs from the grammar (every rule of parser/grammar.lark, which
`test_the_generator_covers_every_rule_of_the_grammar` holds it to), each twice: as gradcalc
source, with only the brackets its precedence needs (and some it does not), and as Python
with NumPy, bracketed in full so that Python's own precedence decides nothing. gradcalc runs
the first, Python's `exec` the second, and every value must agree: bit for bit (sign of
zero and nan included) where the ops are the same NumPy calls, to 1e-9 where gradcalc has
its own formula (sigmoid, relu, logsumexp, ...). A program the writer can write but not
translate would be a bug in the writer: there is no skip.

`ORACLE_EXAMPLES=5000` runs it over 5,000 programs (13.5 minutes on a loaded 2-core host,
clean); the suite runs 400 (about 25 seconds there).
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.parser import LanguageError, Session, compile_program
from gradcalc.parser.machine import ExpressionResult, FunctionResult
from tests.strategies import sampled

EXAMPLES = int(os.environ.get("ORACLE_EXAMPLES", "400"))
GRAMMAR = Path(__file__).resolve().parent.parent / "parser" / "grammar.lark"

# Precedence levels, lowest first, as grammar.lark layers them.
CONDITIONAL, COMPARISON, SUM, PRODUCT, UNARY, POWER, POSTFIX, ATOM = range(8)
SHAPES = [(), (2,), (3,), (2, 3), (3, 2), (2, 2)]

# The Python side: every value a float64 NumPy array or scalar, every op a NumPy call.
PRELUDE = '''
import numpy as np
def _f(x):
    return np.asarray(x, dtype=np.float64)
def _lit(items):
    return np.array([_f(i) for i in items], dtype=np.float64)
def _truth(c):
    return bool(_f(c).reshape(()) != 0)
def _ix(i):
    return int(_f(i).reshape(()))
def _slogdet(a):
    # A matrix with a nan entry has sign and log|det| nan, as in torch (docs/functions.md);
    # LAPACK's pivoting can step over the nan.
    sign, log = np.linalg.slogdet(a)
    return (np.float64(np.nan), np.float64(np.nan)) if np.isnan(a).any() else (sign, log)
def _pow(a, b):
    # The language's power is NumPy's, except that a negative base to a fractional power
    # is nan for -inf too (docs/language.md's edge table); C99's pow gives inf or 0 there.
    a, b = _f(a), _f(b)
    out = a ** b
    return np.where((a == -np.inf) & np.isfinite(b) & (b != np.round(b)), np.nan, out)
'''

# Functions of one tensor. exact: gradcalc's forward is this NumPy call; otherwise it has a
# formula of its own and agrees to rounding.
UNARY_FUNCTIONS: dict[str, tuple[str, bool]] = {
    "exp": ("np.exp({})", True), "log": ("np.log({})", True), "sin": ("np.sin({})", True),
    "cos": ("np.cos({})", True), "tan": ("np.tan({})", True), "tanh": ("np.tanh({})", True),
    "sqrt": ("np.sqrt({})", True), "abs": ("np.abs({})", True), "floor": ("np.floor({})", True),
    "ceil": ("np.ceil({})", True), "sign": ("np.sign({})", True), "expm1": ("np.expm1({})", True),
    "log1p": ("np.log1p({})", True), "sinh": ("np.sinh({})", True), "cosh": ("np.cosh({})", True),
    "arctan": ("np.arctan({})", True), "square": ("np.square({})", True), "log2": ("np.log2({})", True),
    "relu": ("np.maximum({}, 0.0)", False), "sigmoid": ("1.0 / (1.0 + np.exp(-{}))", False),
    "softplus": ("np.logaddexp({}, 0.0)", False),
}
BINARY_FUNCTIONS = {"maximum": "np.maximum", "minimum": "np.minimum", "hypot": "np.hypot", "atan2": "np.arctan2"}
OPERATORS: dict[str, tuple[int, str]] = {
    "+": (SUM, "np.add"), "-": (SUM, "np.subtract"), "*": (PRODUCT, "np.multiply"), "/": (PRODUCT, "np.divide"),
    "//": (PRODUCT, "np.floor_divide"), "%": (PRODUCT, "np.remainder"), "**": (POWER, "_pow"), "^": (POWER, "_pow"),
}
AUGMENTED = {"+=": "np.add", "-=": "np.subtract", "*=": "np.multiply", "/=": "np.divide", "//=": "np.floor_divide",
             "%=": "np.remainder", "**=": "_pow", "@=": "np.matmul"}
COMPARISONS = {"<": "np.less", "<=": "np.less_equal", ">": "np.greater", ">=": "np.greater_equal", "==": "np.equal",
               "!=": "np.not_equal"}
REDUCTIONS = {"sum": "np.sum", "mean": "np.mean", "max": "np.max", "min": "np.min"}
CONSTANTS = {"pi": "np.pi", "e": "np.e", "inf": "np.inf", "true": "1.0", "false": "0.0"}
VARIABLES = ["a", "b", "x", "y", "w2", "M", "v_1", "total"]
LOOP_NAMES = ["k", "step"]
RANGES = [("2", "2"), ("1", "1"), ("0, 2", "0, 2"), ("1, 4, 2", "1, 4, 2"), ("3, 0, -1", "3, 0, -1"), ("-1, 1", "-1, 1")]
KEYWORD_TARGETS = ["check", "def", "true", "false", "with"]
BLOCKS = ("for ", "with ")  # the statements whose body is a block


class Expr:
    """One expression, written twice: gradcalc text (with its precedence level) and Python."""

    __slots__ = ("text", "level", "python")

    def __init__(self, text: str, level: int, python: str) -> None:
        self.text, self.level, self.python = text, level, python


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes))


class Writer:
    """Writes one program, remembering what each name holds so that every program runs."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw
        self.variables: dict[str, tuple[int, ...]] = {}
        self.functions: dict[str, tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]] = {}
        self.ruled: set[str] = set()  # the functions given a vjp rule
        self.float_ruled: set[str] = set()  # those of them whose value is a float: their rule runs in a backward pass
        self.recursive: dict[str, tuple[int, ...]] = {}  # name -> shape of its second parameter and result
        self.scope: dict[str, tuple[int, ...]] | None = None  # a def's parameters while its body is written
        self.exact = True

    def pick(self, options: list[Any]) -> Any:
        return self.draw(sampled(options))

    def chance(self, p: float) -> bool:
        return self.draw(st.floats(0, 1)) < p

    def names(self) -> dict[str, tuple[int, ...]]:
        return self.variables if self.scope is None else self.scope

    # ---- placing operands ----------------------------------------------------------------
    def at(self, e: Expr, level: int) -> str:
        """e's text where the grammar wants `level` or higher: bracketed if lower, and
        sometimes when not."""
        if e.level < level or self.chance(0.08):
            inside = self.pick(["", " ", "\n"])  # a newline inside brackets is no statement end
            return f"({inside}{e.text}{inside.strip(' ')})"
        return e.text

    def target(self, e: Expr) -> str:
        """e's text before `.name` or `[...]`: a number is bracketed, or `2.T` would read `2.`."""
        text = self.at(e, POSTFIX)
        return f"({text})" if re.fullmatch(r"[0-9._a-fA-FxXoObBeE+-]+", text) and (text[0].isdigit() or text[0] == ".") else text

    def gap(self) -> str:
        return self.pick([" ", " ", "", " \\\n  "])

    # ---- expressions ----------------------------------------------------------------------
    def expr(self, shape: tuple[int, ...], depth: int) -> Expr:
        if depth <= 0 or self.chance(0.15):
            return self.leaf(shape)
        makers = [self.binary, self.binary, self.unary_sign, self.conditional, self.conditional, self.function,
                  self.method, self.literal, self.compare, self.where]
        if shape == ():
            makers += [self.reduction, self.element, self.dot, self.length, self.slogdet_part]
        if shape in ((2,), (3,)):
            makers += [self.row_or_column, self.axis_reduction, self.vector_slice, self.matvec, self.tuple_literal]
        if shape in ((2, 3), (3, 2)):
            makers += [self.transposed, self.reshaped, self.outer, self.stacked]
        if shape == (2, 2):
            makers += [self.square]
        if shape == (2,):
            makers += [self.shape_of]
        if any(out == shape for _, out in self.functions.values()):
            makers += [self.user_call, self.user_call]
        makers += [self.lambda_call]
        if shape in self.recursive.values():
            makers += [self.recursive_call]
        if shape == (3, 2) or shape == ():
            makers += [self.einsum]
        return self.pick(makers)(shape, depth - 1)

    def slot(self, shape: tuple[int, ...], depth: int) -> Expr:
        """An expression where a statement takes one: often a conditional, the case that an
        augmented assignment once compiled wrong."""
        return self.conditional(shape, depth - 1) if self.chance(0.25) else self.expr(shape, depth)

    def leaf(self, shape: tuple[int, ...]) -> Expr:
        names = [n for n, s in self.names().items() if s == shape]
        if names and self.chance(0.6):
            name = self.pick(names)
            return Expr(name, ATOM, name)
        if shape == ():
            if self.chance(0.15):
                name = self.pick(sorted(CONSTANTS))
                return Expr(name, ATOM, f"np.float64({CONSTANTS[name]})")
            return self.number()
        return self.literal(shape, 0)

    def number(self) -> Expr:
        value = self.pick([0, 1, 2, 3, 0.5, 1.5, 2.25, 10, 0.001, 100, 1e300])
        if isinstance(value, int):
            text = self.pick([str(value), f"{value}.0", f"{value}.", hex(value), bin(value), oct(value),
                              f"{value}e0", "1_0" if value == 10 else str(value), "0x_a" if value == 10 else hex(value)])
        else:
            text = self.pick([repr(value), f"{value:e}", repr(value).lstrip("0") if value < 1 else repr(value)])
        return Expr(text, ATOM, f"np.float64({text})")

    def literal(self, shape: tuple[int, ...], depth: int) -> Expr:
        if shape == ():
            return self.number()
        items = [self.slot(shape[1:], depth - 1) if depth > 1 else self.expr(shape[1:], depth - 1) for _ in range(shape[0])]
        sep = self.pick([", ", ",", ",\n  "])
        trailing = self.pick(["", ","])
        return Expr(f"[{sep.join(i.text for i in items)}{trailing}]", ATOM, f"_lit([{', '.join(i.python for i in items)}])")

    def tuple_literal(self, shape: tuple[int, ...], depth: int) -> Expr:
        items = [self.slot((), depth) for _ in range(shape[0])]
        trailing = self.pick(["", ","])
        return Expr(f"({', '.join(i.text for i in items)}{trailing})", ATOM, f"_lit([{', '.join(i.python for i in items)}])")

    def operands(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        options = [(shape, shape), ((), shape), (shape, ())]
        if len(shape) == 2:
            options += [(shape[1:], shape), (shape, shape[1:])]
        return self.pick(options)

    def binary(self, shape: tuple[int, ...], depth: int) -> Expr:
        op = self.pick(sorted(OPERATORS))
        level, function = OPERATORS[op]
        left_shape, right_shape = self.operands(shape)
        a, b = self.expr(left_shape, depth), self.expr(right_shape, depth)
        if level == POWER:
            left, right = self.at(a, POSTFIX), self.at(b, UNARY)
        else:
            left, right = self.at(a, level), self.at(b, level + 1)
        gap = self.gap()
        return Expr(f"{left}{gap}{op}{gap}{right}", level, f"{function}({a.python}, {b.python})")

    def compare(self, shape: tuple[int, ...], depth: int) -> Expr:
        op = self.pick(sorted(COMPARISONS))
        left_shape, right_shape = self.operands(shape)
        a, b = self.expr(left_shape, depth), self.expr(right_shape, depth)
        return Expr(f"{self.at(a, SUM)} {op} {self.at(b, SUM)}", COMPARISON, f"_f({COMPARISONS[op]}({a.python}, {b.python}))")

    def unary_sign(self, shape: tuple[int, ...], depth: int) -> Expr:
        a = self.expr(shape, depth)
        sign = self.pick(["-", "+"])
        return Expr(f"{sign}{self.at(a, UNARY)}", UNARY, f"np.{'negative' if sign == '-' else 'positive'}({a.python})")

    def conditional(self, shape: tuple[int, ...], depth: int) -> Expr:
        value, condition, other = self.expr(shape, depth), self.expr((), depth), self.expr(shape, depth)
        text = f"{self.at(value, COMPARISON)} if {self.at(condition, COMPARISON)} else {self.at(other, CONDITIONAL)}"
        return Expr(text, CONDITIONAL, f"({value.python} if _truth({condition.python}) else {other.python})")

    def whole(self, low: int, high: int, depth: int, conditional: float = 0.3) -> Expr:
        """A whole number from low to high, as an index or a count: sometimes a conditional."""
        k = self.draw(st.integers(low, high))
        if depth > 0 and self.chance(conditional):
            j = self.draw(st.integers(low, high))
            condition = self.expr((), depth - 1)
            return Expr(f"{k} if {self.at(condition, COMPARISON)} else {j}", CONDITIONAL,
                        f"({k} if _truth({condition.python}) else {j})")
        return Expr(str(k), ATOM if k >= 0 else UNARY, str(k))

    def function(self, shape: tuple[int, ...], depth: int) -> Expr:
        if self.chance(0.3):
            name = self.pick(sorted(BINARY_FUNCTIONS))
            left_shape, right_shape = self.operands(shape)
            a, b = self.expr(left_shape, depth), self.expr(right_shape, depth)
            return Expr(f"{name}({a.text}, {b.text})", ATOM, f"{BINARY_FUNCTIONS[name]}({a.python}, {b.python})")
        name = self.pick(sorted(UNARY_FUNCTIONS))
        template, exact = UNARY_FUNCTIONS[name]
        self.exact &= exact
        a = self.expr(shape, depth)
        trailing = self.pick(["", ","])
        return Expr(f"{name}({a.text}{trailing})", ATOM, template.format(f"({a.python})"))

    def method(self, shape: tuple[int, ...], depth: int) -> Expr:
        name = self.pick(sorted(UNARY_FUNCTIONS))
        template, exact = UNARY_FUNCTIONS[name]
        self.exact &= exact
        a = self.expr(shape, depth)
        return Expr(f"{self.target(a)}.{name}()", POSTFIX, template.format(f"({a.python})"))

    def where(self, shape: tuple[int, ...], depth: int) -> Expr:
        c, a, b = self.expr(shape, depth), self.expr(shape, depth), self.expr(self.pick([shape, ()]), depth)
        return Expr(f"where({c.text}, {a.text}, {b.text})", ATOM, f"np.where(np.not_equal({c.python}, 0), {a.python}, {b.python})")

    def reduction(self, shape: tuple[int, ...], depth: int) -> Expr:
        name = self.pick(sorted(REDUCTIONS))
        a = self.expr(self.pick(SHAPES[1:]), depth)
        if self.chance(0.5):
            return Expr(f"{self.target(a)}.{name}()", POSTFIX, f"{REDUCTIONS[name]}({a.python})")
        return Expr(f"{name}({a.text})", ATOM, f"{REDUCTIONS[name]}({a.python})")

    def axis_reduction(self, shape: tuple[int, ...], depth: int) -> Expr:
        """sum(m, axis=k) and its spellings: a vector from a matrix."""
        source = self.pick([s for s in SHAPES if len(s) == 2 and shape[0] in s])
        axis = self.pick([k for k in (0, 1) if source[1 - k] == shape[0]])
        name = self.pick(sorted(REDUCTIONS))
        a = self.expr(source, depth)
        k = self.whole(axis, axis, depth, 0.6).text  # sometimes `axis=1 if c else 1`: a conditional as a keyword's value
        positional = [k] if name in ("sum", "mean") else []  # max(x, 1) is refused: an axis, or maximum(x, 1)?
        spelled = self.pick([f"axis={k}", f"dim={k}", *positional, f"axis={axis - 2}", f"axis={k}, keepdims=false",
                             f"keepdim=0, dim={axis}"])
        python = f"{REDUCTIONS[name]}({a.python}, axis={axis})"
        if self.chance(0.5):
            return Expr(f"{self.target(a)}.{name}({spelled})", POSTFIX, python)
        return Expr(f"{name}({a.text}, {spelled})", ATOM, python)

    def element(self, shape: tuple[int, ...], depth: int) -> Expr:
        source = self.pick(SHAPES[1:])
        a = self.expr(source, depth)
        indices = [self.whole(-n, n - 1, depth) for n in source]
        python = f"{a.python}[{', '.join(f'_ix({i.python})' for i in indices)}]"
        if len(source) == 2 and self.chance(0.4):  # m[i][j]
            return Expr(f"{self.target(a)}[{indices[0].text}][{indices[1].text}]", POSTFIX, python)
        return Expr(f"{self.target(a)}[{', '.join(i.text for i in indices)}]", POSTFIX, python)

    def row_or_column(self, shape: tuple[int, ...], depth: int) -> Expr:
        source = self.pick([s for s in SHAPES if len(s) == 2 and shape[0] in s])
        axis = self.pick([k for k in (0, 1) if source[1 - k] == shape[0]])  # the axis indexed away
        a = self.expr(source, depth)
        i = self.whole(-source[axis], source[axis] - 1, depth)
        if axis == 0:
            text = self.pick([f"[{i.text}]", f"[{i.text}, :]", f"[{i.text}, ...]"])
            python = f"{a.python}[_ix({i.python})]"
        else:
            text = self.pick([f"[:, {i.text}]", f"[..., {i.text}]", f"[::, {i.text}]"])
            python = f"{a.python}[:, _ix({i.python})]"
        return Expr(f"{self.target(a)}{text}", POSTFIX, python)

    def vector_slice(self, shape: tuple[int, ...], depth: int) -> Expr:
        n = shape[0]
        source = self.pick([(2,), (3,)] if n == 2 else [(3,)])
        a = self.expr(source, depth)
        options = {
            (2, 2): ["[:]", "[::1]", "[::-1]", "[0:2]", "[-2:]", "[[1, 0]]"],
            (3, 2): ["[:2]", "[1:]", "[::2]", "[-2:]", "[2:0:-1]", "[[2, 0]]"],
            (3, 3): ["[:]", "[::-1]", "[0:3]", "[-3:]", "[[2, 0, 1]]", "[[1, 1, 1]]"],
        }[(source[0], n)]
        part = self.pick(options)
        if part.startswith("[["):  # a list of whole numbers picks elements
            return Expr(f"{self.target(a)}{part}", POSTFIX, f"{a.python}[np.array({part[1:-1]})]")
        if self.chance(0.3):  # a bound written as a conditional
            bounds = part[1:-1].split(":")
            k = next((j for j, b in enumerate(bounds) if b.lstrip("-").isdigit()), None)
            if k is not None:
                condition = self.expr((), depth - 1)
                bounds_text, bounds_python = list(bounds), list(bounds)
                bounds_text[k] = f"{bounds[k]} if {self.at(condition, COMPARISON)} else {bounds[k]}"
                bounds_python[k] = f"_ix({bounds[k]} if _truth({condition.python}) else {bounds[k]})"
                return Expr(f"{self.target(a)}[{':'.join(bounds_text)}]", POSTFIX, f"{a.python}[{':'.join(bounds_python)}]")
        return Expr(f"{self.target(a)}{part}", POSTFIX, f"{a.python}{part}")

    def matvec(self, shape: tuple[int, ...], depth: int) -> Expr:
        n = shape[0]
        left_shape, right_shape = self.pick([((n, m), (m,)) for m in (2, 3) if (n, m) in SHAPES] + [((m,), (m, n)) for m in (2, 3) if (m, n) in SHAPES])
        a, b = self.expr(left_shape, depth), self.expr(right_shape, depth)
        return Expr(f"{self.at(a, PRODUCT)} @ {self.at(b, UNARY)}", PRODUCT, f"np.matmul({a.python}, {b.python})")

    def dot(self, shape: tuple[int, ...], depth: int) -> Expr:
        n = self.pick([2, 3])
        a, b = self.expr((n,), depth), self.expr((n,), depth)
        return Expr(f"{self.at(a, PRODUCT)} @ {self.at(b, UNARY)}", PRODUCT, f"np.matmul({a.python}, {b.python})")

    def square(self, shape: tuple[int, ...], depth: int) -> Expr:
        a, b = self.expr((2, 3), depth), self.expr((3, 2), depth)
        return Expr(f"{self.at(a, PRODUCT)} @ {self.at(b, UNARY)}", PRODUCT, f"np.matmul({a.python}, {b.python})")

    def length(self, shape: tuple[int, ...], depth: int) -> Expr:
        a = self.expr(self.pick(SHAPES[1:]), depth)
        if self.chance(0.5):
            return Expr(f"len({a.text})", ATOM, f"np.float64(len({a.python}))")
        attribute = self.pick(["ndim", "size"])
        return Expr(f"{self.target(a)}.{attribute}", POSTFIX, f"np.float64(np.{attribute}({a.python}))")

    def shape_of(self, shape: tuple[int, ...], depth: int) -> Expr:
        a = self.expr(self.pick([s for s in SHAPES if len(s) == 2]), depth)
        return Expr(f"{self.target(a)}.shape", POSTFIX, f"np.array(np.shape({a.python}), dtype=np.float64)")

    def slogdet_part(self, shape: tuple[int, ...], depth: int) -> Expr:
        self.exact = False
        a = self.expr((2, 2), depth)
        k = self.pick([0, 1])
        return Expr(f"slogdet({a.text})[{k}]", POSTFIX, f"_slogdet({a.python})[{k}]")

    def transposed(self, shape: tuple[int, ...], depth: int) -> Expr:
        a = self.expr(shape[::-1], depth)
        text = self.pick([f"{self.target(a)}.T", f"transpose({a.text})", f"swapaxes({a.text}, 0, 1)", f"{self.target(a)}.mT"])
        return Expr(text, POSTFIX, f"np.transpose({a.python})")

    def reshaped(self, shape: tuple[int, ...], depth: int) -> Expr:
        a = self.expr(self.pick([(2, 3), (3, 2)]), depth)
        dims = ", ".join(map(str, shape))
        text = self.pick([f"reshape({a.text}, {dims})", f"reshape({a.text}, ({dims}))", f"{self.target(a)}.reshape({dims})"])
        return Expr(text, POSTFIX, f"np.reshape({a.python}, {shape})")

    def outer(self, shape: tuple[int, ...], depth: int) -> Expr:
        a, b = self.expr(shape[:1], depth), self.expr(shape[1:], depth)
        if self.chance(0.5):  # x[:, None] * y: an axis added by None
            return Expr(f"{self.target(a)}[:, None] * {self.at(b, UNARY)}", PRODUCT, f"np.multiply({a.python}[:, None], {b.python})")
        return Expr(f"outer({a.text}, {b.text})", ATOM, f"np.outer({a.python}, {b.python})")

    def stacked(self, shape: tuple[int, ...], depth: int) -> Expr:
        a = self.expr(shape, depth)
        return Expr(f"{self.target(a)}[None][0]", POSTFIX, f"{a.python}[None][0]")

    def einsum(self, shape: tuple[int, ...], depth: int) -> Expr:
        quote = self.pick(["'", '"'])
        if shape == ():
            a, b = self.expr((3,), depth), self.expr((3,), depth)
            return Expr(f"einsum({quote}i,i->{quote}, {a.text}, {b.text})", ATOM, f"np.einsum('i,i->', {a.python}, {b.python})")
        a = self.expr((2, 3), depth)
        return Expr(f"einsum({quote}ij->ji{quote}, {a.text})", ATOM, f"np.einsum('ij->ji', {a.python})")

    def user_call(self, shape: tuple[int, ...], depth: int) -> Expr:
        name = self.pick(sorted(f for f, (_, out) in self.functions.items() if out == shape))
        params, _ = self.functions[name]
        args = [self.expr(p, depth) for p in params]
        return Expr(f"{name}({', '.join(a.text for a in args)})", ATOM, f"{name}({', '.join(a.python for a in args)})")

    def lambda_call(self, shape: tuple[int, ...], depth: int) -> Expr:
        """`(lambda a, b: body)(x, y)`: the body sees its parameters and whatever the place
        it is written in sees (a def's parameters, or the variables), as Python's lambda does."""
        params = {f"lam{k}": self.pick(SHAPES[:3]) for k in range(self.draw(st.integers(0, 2)))}
        args = [self.expr(p, depth) for p in params.values()]
        saved = self.scope
        self.scope = {**self.names(), **params}
        body = self.slot(shape, depth)
        self.scope = saved
        names = ", ".join(params)
        head = f"lambda {names}: " if names else "lambda: "
        return Expr(f"({head}{self.at(body, CONDITIONAL)})({', '.join(a.text for a in args)})", POSTFIX,
                    f"({head}{body.python})({', '.join(a.python for a in args)})")

    def recursive_call(self, shape: tuple[int, ...], depth: int) -> Expr:
        name = self.pick(sorted(f for f, s in self.recursive.items() if s == shape))
        count, value = self.whole(0, 5, depth), self.expr(shape, depth)
        return Expr(f"{name}({count.text}, {value.text})", ATOM, f"{name}(np.float64({count.python}), {value.python})")

    # ---- statements -----------------------------------------------------------------------
    def statement(self) -> tuple[str, str]:
        kinds = ["assign", "assign", "expression", "expression", "augmented", "augmented", "def", "recursive", "check",
                 "check_equal", "unpack", "loop", "rule", "rule_call", "no_grad"]
        return getattr(self, "s_" + self.pick(kinds))()

    def s_loop(self, indent: str = "") -> tuple[str, str]:
        """`for k in range(...)` or `for k in VECTOR` (its line at `indent`), on one line or as an indented
        block: its body assignments, updates, expressions (shown by neither side) and, in
        an outer loop, a loop. Python's loop is the same loop, its number made a float64,
        as gradcalc's whole number is in every op. A body keeps each variable's shape, so
        that every iteration runs what the first did; no range here is empty, so the
        loop's name is defined after it on both sides."""
        name = self.pick(LOOP_NAMES)
        bounds, python_bounds = self.pick(RANGES)
        if self.chance(0.3):  # a bound chosen by a conditional
            condition = self.expr((), 1)
            bounds, python_bounds = f"2 if {self.at(condition, COMPARISON)} else 3", f"2 if _truth({condition.python}) else 3"
        head = f"for {name} in range({bounds}):"
        python = f"for {name} in range({python_bounds}):\n    {name} = np.float64({name})\n"
        if self.chance(0.3):  # over the elements of a vector (a conditional's too), as Python iterates an array
            over = self.slot((self.pick([2, 3]),), 2)
            head, python = f"for {name} in {over.text}:", f"for {name} in {over.python}:\n"
        self.variables[name] = ()
        inside = indent + self.pick(["    ", "  "])
        body = [self.loop_statement(inside, outer=not indent) for _ in range(self.draw(st.integers(1, 3)))]
        python += "".join(f"    {line}\n" for _, p, _ in body for line in p.splitlines())
        if not any(loop for _, _, loop in body) and self.chance(0.5):  # on one line (a loop in it would take the rest)
            return head + self.pick([" ", ""]) + self.pick(["; ", ";"]).join(t for t, _, _ in body), python.rstrip("\n")
        gaps = [self.pick(["\n", "\n\n", f"\n{inside}# a comment\n", " # a comment\n"]) for _ in body]
        return head + "".join(f"{gap}{inside}{t}" for gap, (t, _, _) in zip(gaps, body)), python.rstrip("\n")

    def s_no_grad(self, indent: str = "") -> tuple[str, str]:
        """`with no_grad:` (or `with no_grad():`, its line at `indent`), on one line or as an
        indented block: a body as a loop's. No graph is recorded in it, which changes no
        value (an update of a variable keeps it a variable, with the value `x OP e`), so
        Python runs the body as it is (in `if True:`, for its indentation)."""
        head = self.pick(["with no_grad:", "with no_grad():"])
        inside = indent + self.pick(["    ", "  "])
        body = [self.loop_statement(inside, outer=not indent) for _ in range(self.draw(st.integers(1, 3)))]
        python = "if True:\n" + "".join(f"    {line}\n" for _, p, _ in body for line in p.splitlines())
        if not any(block for _, _, block in body) and self.chance(0.5):
            return head + " " + "; ".join(t for t, _, _ in body), python.rstrip("\n")
        return head + "".join(f"\n{inside}{t}" for t, _, _ in body), python.rstrip("\n")

    def loop_statement(self, indent: str, outer: bool) -> tuple[str, str, bool]:
        """(text, Python, whether it is a block: a loop or a with) of one statement of a
        loop's (or a with's) body at `indent`."""
        kind = self.pick(["assign", "augmented", "augmented", "expression", "fresh"] + (["loop", "no_grad"] if outer else []))
        if kind == "loop":
            return (*self.s_loop(indent), True)
        if kind == "no_grad":
            return (*self.s_no_grad(indent), True)
        if kind == "expression":
            e = self.slot(self.pick(SHAPES), 3)
            return e.text, f"_ = {e.python}", False  # (neither side shows an expression in a loop)
        if kind == "fresh" or not self.variables:  # a name the first iteration makes
            name = self.pick(VARIABLES)
            shape = self.variables.get(name, self.pick(SHAPES))
            e = self.slot(shape, 3)  # (before the name is known: it may not be defined yet)
            self.variables[name] = shape
            return f"{name} = {e.text}", f"{name} = {e.python}", False
        name = self.pick(sorted(self.variables))
        shape = self.variables[name]
        if kind == "assign":
            e = self.slot(shape, 3)
            return f"{name} = {e.text}", f"{name} = {e.python}", False
        text, python, _ = self.update(name, shape, [shape, ()])
        return text, python, False

    def s_assign(self) -> tuple[str, str]:
        shape = self.pick(SHAPES)
        e = self.slot(shape, 3)
        name = self.pick(VARIABLES)
        self.variables[name] = shape
        return f"{name} = {e.text}", f"{name} = {e.python}"

    def s_expression(self) -> tuple[str, str]:
        e = self.slot(self.pick(SHAPES), 4)
        return e.text, f"_out.append({e.python})"

    def s_augmented(self) -> tuple[str, str]:
        if not self.variables:
            return self.s_assign()
        name = self.pick(sorted(self.variables))
        shape = self.variables[name]
        text, python, self.variables[name] = self.update(
            name, shape, [shape, ()] + ([s for s in SHAPES if len(s) == 2 and s[1:] == shape] if len(shape) == 1 else []))
        return text, python

    def update(self, name: str, shape: tuple[int, ...], right_shapes: list[tuple[int, ...]]) -> tuple[str, str, tuple[int, ...]]:
        """`name OP= e` and its Python, and the name's shape after it: e of one of
        `right_shapes` (broadcasting), or for @= a square matrix that keeps the shape."""
        op = self.pick(sorted(AUGMENTED))
        if op == "@=" and shape[-1:] != (2,):
            op = "+="  # (@= needs a last axis a square matrix of SHAPES fits)
        right = (2, 2) if op == "@=" else self.pick(right_shapes)
        e = self.slot(right, 3)
        return f"{name} {op} {e.text}", f"{name} = {AUGMENTED[op]}({name}, {e.python})", shape if op == "@=" else broadcast(shape, right)

    def s_def(self) -> tuple[str, str]:
        name = f"f{len(self.functions)}"
        params = {f"p{k}": self.pick(SHAPES) for k in range(self.draw(st.integers(0, 3)))}
        shape = self.pick(SHAPES)
        self.scope = params
        body = self.slot(shape, 3)
        self.scope = None
        self.functions[name] = (tuple(params.values()), shape)
        listed = ", ".join(params)
        return f"def {name}({listed}) = {body.text}", f"def {name}({listed}):\n    return {body.python}"

    def s_rule(self) -> tuple[str, str]:
        """`vjp fK(p0, ..., g) = ...` for a def without one: for a def of the program, or
        for a new def whose value is a float (`(...) * 1.0`: a boolean or whole-number
        value has no gradient, so no backward pass would run the rule), which
        `s_rule_call` then runs."""
        free = [name for name in sorted(self.functions) if name not in self.ruled]
        if not free or self.chance(0.5):
            return self.s_ruled_def()
        return self.rule_for(self.pick(free))

    def rule_for(self, name: str) -> tuple[str, str]:
        """The rule of `name`: one gradient per parameter, each shaped as it, written as a
        tuple `(gx, gy)` (a conditional in any item: the case that once jumped wrong), and
        the rule as a Python function `vjp_NAME` that returns them."""
        params, shape = self.functions[name]
        self.scope = {**{f"p{k}": s for k, s in enumerate(params)}, "g": shape}
        # (a rule is a rare statement: its items are often conditionals, so that 400 programs give it many)
        items = [self.conditional(s, 2) if self.chance(0.5) else self.slot(s, 3) for s in params or [shape]]
        self.scope = None
        self.ruled.add(name)
        listed = ", ".join([*(f"p{k}" for k in range(len(params))), "g"])
        if len(items) == 1:  # one gradient, or a tuple of one (a tuple literal alone would be a tuple of results)
            item = items[0]
            text = f"({item.text},)" if item.text.startswith("(") or self.chance(0.3) else item.text
            python = item.python
        else:
            text = f"({', '.join(self.at(i, CONDITIONAL) for i in items)}{self.pick(['', ','])})"
            python = f"({', '.join(i.python for i in items)},)"
        return f"vjp {name}({listed}) = {text}", f"def vjp_{name}({listed}):\n    return {python}"

    def s_ruled_def(self) -> tuple[str, str]:
        """A def with a float value and its rule, the two statements on two lines."""
        name = f"f{len(self.functions)}"
        params = {f"p{k}": self.pick(SHAPES) for k in range(self.draw(st.integers(1, 3)))}
        shape = self.pick(SHAPES)
        self.scope = params
        body = self.slot(shape, 3)
        self.scope = None
        self.functions[name] = (tuple(params.values()), shape)
        listed = ", ".join(params)
        rule, rule_python = self.rule_for(name)
        self.float_ruled.add(name)
        return (f"def {name}({listed}) = {self.at(body, PRODUCT)} * 1.0\n{rule}",
                f"def {name}({listed}):\n    return np.multiply({body.python}, 1.0)\n{rule_python}")

    def s_rule_call(self) -> tuple[str, str]:
        """`vjp(fK, x, y)[1](u)`: the cotangents fK's rule gives at x, y for u (a tuple of
        one per parameter, as JAX's pullback gives), which a backward pass through fK's node hands
        back; in Python, a call of the rule (its one cotangent made a tuple of one)."""
        if not self.float_ruled:
            return self.s_rule()
        name = self.pick(sorted(self.float_ruled))
        params, shape = self.functions[name]
        args, u = [self.slot(p, 3) for p in params], self.slot(shape, 3)
        text = f"vjp({', '.join([name, *(a.text for a in args)])})[1]({u.text})"
        called = f"vjp_{name}({', '.join([*(a.python for a in args), u.python])})"
        return text, f"_out.append({called if len(params) > 1 else f'({called},)'})"

    def s_recursive(self) -> tuple[str, str]:
        """def rK(n, p) = BASE if n < 1 else STEP, STEP calling rK(n - 1, ...): recursion that ends."""
        name = f"r{len(self.recursive)}"
        shape = self.pick(SHAPES)
        self.scope = {"n": (), "p": shape}
        base, change, extra = self.expr(shape, 2), self.expr(shape, 2), self.expr(shape, 1)
        self.scope = None
        op = self.pick(["+", "-", "*"])
        _, function = OPERATORS[op]
        text = (f"def {name}(n, p) = {self.at(base, COMPARISON)} if n < 1 else "
                f"{name}(n - 1, {change.text}) {op} {self.at(extra, OPERATORS[op][0] + 1)}")
        python = (f"def {name}(n, p):\n    return ({base.python} if _truth(np.less(n, 1)) else "
                  f"{function}({name}(np.subtract(n, 1), {change.python}), {extra.python}))")
        self.recursive[name] = shape
        return text, python

    def s_check(self) -> tuple[str, str]:
        e = self.slot(self.pick(SHAPES), 3)
        while e.level == COMPARISON:  # `check a == b` (bracketed or not) would be the other form
            e = self.slot(self.pick(SHAPES), 3)
        wrt = [n for n in sorted(self.variables) if self.chance(0.3)][:2]
        options = {key: self.slot((), 1) for key in ("tol", "atol", "rtol") if self.chance(0.3)}
        text = f"check {e.text}" + (f" wrt {', '.join(wrt)}" if wrt else "") + "".join(f" {k}={v.text}" for k, v in options.items())
        python = f"_out.append(('check', {e.python}, None, {{{', '.join(f'{k!r}: {v.python}' for k, v in options.items())}}}))"
        return text, python

    def s_check_equal(self) -> tuple[str, str]:
        shape = self.pick(SHAPES)
        a, b = self.expr(shape, 3), self.expr(shape, 3)
        return f"check {self.at(a, SUM)} == {self.at(b, SUM)}", f"_out.append(('check', {a.python}, {b.python}, {{}}))"

    def s_unpack(self) -> tuple[str, str]:
        """`a, b = slogdet(M)` (a tuple of results), or one of Python's own unpackings:
        the values listed (`a, b = e1, e2`), a list written in
        place (`a, b = [e1, e2]`: its items, each of its own shape), a tensor along its
        first axis (`a, b = M`), and one name (`a, = [e]`)."""
        form = self.pick(["results", "results", "listed", "written", "tensor", "one"])
        if form != "results":
            return self.python_unpacking(form)
        self.exact = False
        first, second = self.pick(VARIABLES), self.pick(VARIABLES)
        e = self.expr((2, 2), 3)
        text, python = f"slogdet({e.text})", f"_slogdet({e.python})"
        if self.chance(0.3):  # a conditional choosing between two pairs
            other, condition = self.expr((2, 2), 2), self.expr((), 2)
            text = f"{text} if {self.at(condition, COMPARISON)} else slogdet({other.text})"
            python = f"({python} if _truth({condition.python}) else _slogdet({other.python}))"
        self.variables[first], self.variables[second] = (), ()
        return f"{first}, {second} = {text}", f"{first}, {second} = {python}"

    def python_unpacking(self, form: str) -> tuple[str, str]:
        count = 1 if form == "one" else self.pick([2, 3])
        names = [self.pick(VARIABLES) for _ in range(count)]
        trailing = "," if count == 1 else self.pick(["", ","])
        targets = ", ".join(names) + trailing
        if form == "tensor":  # the rows of one value (a tensor's first axis), each of the rest of its shape
            shape = self.pick([(count,), (count, 2), (count, 3)])
            e = self.slot(shape, 3)
            values = [shape[1:]] * count
            text, python = e.text, e.python
        else:
            values = [self.pick(SHAPES) for _ in range(count)] if form != "written" else [self.pick(SHAPES)] * count
            items = [self.slot(shape, 2) for shape in values]
            text = ", ".join(i.text for i in items)  # (no trailing comma: after a comma a newline does not end the statement)
            if form in ("written", "one"):
                text = f"[{', '.join(i.text for i in items)}]"
            python = "(" + "".join(f"{i.python}, " for i in items) + ")"
        for name, shape in zip(names, values):
            self.variables[name] = shape  # (the last of a repeated name wins, on both sides)
        return f"{targets} = {text}", f"{', '.join(names)}, = {python}"

    def s_keyword_target(self) -> tuple[str, str]:
        """`check = 1`: parsed so that the machine can refuse it by name; Python is told to."""
        e = self.slot(self.pick(SHAPES), 2)
        return f"{self.pick(KEYWORD_TARGETS)} = {e.text}", "raise _Refused()"


SEPARATORS = ["\n", ";", "; ", " # a comment\n", "\r\n", "\n\n", ";\n"]
LINE_ENDS = ["\n", " # a comment\n", "\n\n"]


@st.composite
def programs(draw: Callable[[Any], Any]) -> tuple[str, str, bool]:
    """(gradcalc source, Python source, whether every op is the same NumPy call)."""
    writer = Writer(draw)
    pairs = [writer.statement() for _ in range(draw(st.integers(1, 7)))]
    if draw(st.integers(0, 9)) == 0:
        pairs.append(writer.s_keyword_target())
    source = draw(sampled(["", "\n", "# start\n", ";" if not pairs[0][0].startswith(BLOCKS) else ""]))
    for k, (text, _) in enumerate(pairs):
        # A loop begins a line (its body is indented against that line) and takes the rest
        # of its last line: what follows it begins a line of its own.
        loop = text.startswith(BLOCKS) or (k + 1 < len(pairs) and pairs[k + 1][0].startswith(BLOCKS))
        source += text + draw(sampled(LINE_ENDS if loop else SEPARATORS))
    python = PRELUDE + "\n".join(p for _, p in pairs) + "\n"
    return source, python, writer.exact


class _Refused(Exception):
    pass


def run_python(python: str) -> tuple[list[Any], bool]:
    namespace: dict[str, Any] = {"_out": [], "_Refused": _Refused}
    refused = False
    with np.errstate(all="ignore"):
        try:
            exec(compile(python, "<translation>", "exec"), namespace)  # noqa: S102
        except _Refused:
            refused = True
    return namespace["_out"], refused


def run_gradcalc(source: str) -> tuple[list[Any], bool]:
    out: list[Any] = []

    def on_check(session: Session, statement: Any, value: Any) -> None:
        expected = None if statement.expected is None else session.evaluate(statement.expected)
        options = {k: session.evaluate(code) for k, (code, _) in statement.options.items()}
        out.append(("check", value, expected, options))

    session = Session(on_check=on_check)
    refused = False
    try:
        # (recover: a statement refused as it compiles, `check = 1`, raises in its place)
        for statement in compile_program(source, recover=True).statements:
            result = session.run_statement(statement)
            if isinstance(result, ExpressionResult) or (isinstance(result, FunctionResult) and isinstance(result.value, tuple)):
                out.append(result.value)  # (a check's values were taken by on_check)
    except LanguageError as err:
        if err.kind != "name" or "keyword of the language" not in err.message:
            raise
        refused = True
    return out, refused


def as_array(value: Any) -> np.ndarray:
    return np.asarray(getattr(value, "data", value), dtype=np.float64)


def same(got: Any, want: Any, exact: bool) -> bool:
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(same(g, w, exact) for g, w in zip(got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(same(got[k], want[k], exact) for k in want)
    if want is None or isinstance(want, str):
        return got == want
    g, w = as_array(got), as_array(want)
    if g.shape != w.shape:
        return False
    if exact:
        both_nan = np.isnan(g) & np.isnan(w)
        return bool(np.all(both_nan | ((g == w) & (np.signbit(g) == np.signbit(w)))))
    return bool(np.allclose(g, w, rtol=1e-9, atol=1e-12, equal_nan=True))


def agree(source: str, python: str, exact: bool) -> None:
    want, python_refused = run_python(python)
    got, refused = run_gradcalc(source)
    assert refused == python_refused, (source, python)
    assert len(got) == len(want), (source, python)
    for k, (g, w) in enumerate(zip(got, want)):
        assert same(g, w, exact), f"result {k}: gradcalc {g!r}, Python {w!r}\n--- gradcalc\n{source}\n--- Python\n{python}"


@settings(max_examples=EXAMPLES)
@given(programs())
@pytest.mark.slow
def test_generated_programs_give_what_python_gives(program):
    agree(*program)


# ---- the generator covers the grammar ------------------------------------------------------


class Coverage:
    """A Lark parser for grammar.lark in which every alternative of every rule has a name of
    its own (`rule__k`) and no rule is inlined, so that a parse tree says which alternatives
    a program used; with what each alternative is, which have an `expr` slot, which one is
    the conditional, and each terminal written as a choice of strings (AUGOP) with them.
    The rules are read from the grammar file with Lark's own grammar of grammars, so a new
    rule is covered (or fails the test) without editing this one."""

    def __init__(self) -> None:
        from lark import Lark, Token, Tree

        text = GRAMMAR.read_text()
        meta = Lark.open_from_package("lark", "lark.lark", ("grammars",), parser="lalr", propagate_positions=True)
        tree = meta.parse(text)
        rules = [item for item in tree.children if isinstance(item, Tree) and item.data == "rule"]
        hidden = {str(r.children[0]).lstrip("?!") for r in rules if str(r.children[0]).lstrip("?!").startswith("_")}

        def shown(part: str) -> str:  # `_sep` would be inlined: named `sep_` it stays in the tree
            for name in hidden:
                part = re.sub(rf"(?<!\w){name}\b", name.lstrip("_") + "_", part)
            return part

        def written(node: Any) -> str:
            if isinstance(node, Token):
                return text[node.start_pos : node.end_pos]
            return text[node.meta.start_pos : node.meta.end_pos]

        self.alternatives: dict[str, str] = {}
        self.with_expr: set[str] = set()
        self.choices: dict[str, list[str]] = {}
        self.conditional = ""
        lines: list[str] = []
        for item in tree.children:
            if not isinstance(item, Tree):
                continue
            if item.data != "rule":
                lines.append(written(item))
                if item.data == "token":
                    strings = list(item.scan_values(lambda v: isinstance(v, Token) and v.type == "STRING"))
                    if len(strings) > 1 and not list(item.scan_values(lambda v: isinstance(v, Token) and v.type == "REGEXP")):
                        self.choices[str(item.children[0])] = [s[1:-1] for s in strings]
                continue
            head = str(item.children[0])
            name = shown(head.lstrip("?!"))
            expansions = item.children[-1]
            alternatives = expansions.children if isinstance(expansions, Tree) and expansions.data == "expansions" else [expansions]
            parts = []
            for k, alternative in enumerate(alternatives):
                alias = None
                if isinstance(alternative, Tree) and alternative.data == "alias":
                    alternative, alias = alternative.children
                body = written(alternative)
                label = f"{name}__{k}"
                self.alternatives[label] = f"{name}: {body}" + (f" -> {alias}" if alias else "")
                if re.search(r"(?<!\w)expr\b", body):
                    self.with_expr.add(label)
                if str(alias) == "conditional":
                    self.conditional = label
                parts.append(f"{shown(body)} -> {label}")
            lines.append(("!" if "!" in head else "") + f"{name}: " + "\n    | ".join(parts))
        self.parser = Lark("\n".join(lines), start="program", parser="lalr", lexer="basic", postlex=_BracketNewlines())

    def of(self, source: str) -> tuple[set[str], set[str], set[tuple[str, str]]]:
        """The alternatives a program's parse uses, those seen holding a conditional right in
        an `expr` slot, and the (terminal, text) of its tokens."""
        from lark import Token, Tree

        tree = self.parser.parse(source)
        used, conditional_in = set(), set()
        for node in tree.iter_subtrees():
            used.add(node.data)
            if any(isinstance(c, Tree) and c.data == self.conditional for c in node.children):
                conditional_in.add(node.data)
        tokens = {(t.type, str(t)) for t in tree.scan_values(lambda v: isinstance(v, Token))}
        return used, conditional_in, tokens


class _BracketNewlines:
    """Newlines inside brackets are spaces (grammar.lark's rule, which the language's own
    lexer applies), and a loop's body is told by _INDENT and _DEDENT (the rule driver.py
    applies, written here again over Lark's tokens): the rest of the line after the
    colon of a loop or a with, or the lines under it indented as its first line is."""

    always_accept = ("_NL",)

    def process(self, stream: Any) -> Any:
        from lark import Token

        depth, blocks = 0, []  # blocks: -1 for the rest of a line, else the body's column
        header = opened = awaiting = line_start = False
        for token in stream:
            if token.value in ("(", "["):
                depth += 1
            elif token.value in (")", "]"):
                depth -= 1
            elif token.type == "_NL" and depth:
                continue
            if opened:
                opened = False
                if token.type == "_NL":
                    awaiting = line_start = True
                    continue
                blocks.append(-1)
                yield Token.new_borrow_pos("_INDENT", "", token)
            elif token.type == "_NL":
                if awaiting:  # blank and comment lines before the body
                    continue
                while blocks and blocks[-1] == -1:
                    blocks.pop()
                    yield Token.new_borrow_pos("_DEDENT", "", token)
                line_start = True
            elif line_start:
                line_start = False
                if awaiting:
                    awaiting = False
                    blocks.append(token.column)
                    yield Token.new_borrow_pos("_INDENT", "", token)
                elif blocks and token.column < blocks[-1]:
                    while blocks and blocks[-1] > token.column:
                        blocks.pop()
                        yield Token.new_borrow_pos("_DEDENT", "", token)
                    yield Token.new_borrow_pos("_NL", "\n", token)
            header = header or token.type in ("FOR", "WITH")
            if token.type == "COLON" and header and not depth:
                header, opened = False, True
            yield token
        for _ in blocks:
            yield Token("_DEDENT", "")


@pytest.mark.slow
def test_the_generator_covers_every_rule_of_the_grammar():
    """Every alternative of every rule in grammar.lark is used by some generated program,
    every alternative with an `expr` slot is seen with a conditional in it (the slot of an
    augmented assignment's right side among them), and every string of a terminal written
    as a choice of strings (each augmented operator, comparison and power sign)."""
    coverage = Coverage()
    used: set[str] = set()
    conditional_in: set[str] = set()
    tokens: set[tuple[str, str]] = set()

    @settings(max_examples=500, derandomize=True, database=None)
    @given(programs())
    def collect(program):
        u, c, t = coverage.of(program[0])
        used.update(u)
        conditional_in.update(c)
        tokens.update(t)

    collect()
    assert coverage.conditional and len(coverage.alternatives) > 40  # (the grammar was read)
    assert {k: v for k, v in coverage.alternatives.items() if k not in used} == {}, "alternatives no program used"
    assert {coverage.alternatives[k] for k in coverage.with_expr - conditional_in} == set(), "expr slots never given a conditional"
    unused = {(terminal, s) for terminal, strings in coverage.choices.items() for s in strings if (terminal, s) not in tokens}
    assert unused == set()
