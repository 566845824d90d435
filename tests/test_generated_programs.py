"""Whole generated programs against PyTorch float64: silent wrong answers in the language.

The other generated oracles hold single expressions (test_python_oracle.py: values only;
test_torch_differential.py, test_every_op.py: one op at a time; test_transform_compositions.py:
chains of transformations). Here a seeded writer makes whole programs of statements, each
twice: as gradcalc source and as Python over PyTorch float64 (eager autograd,
`torch.autograd.grad` with `create_graph` wherever a derivative is differentiated again,
`torch.func.grad` for a transformation), and every value and every gradient a report gives
must agree. The programs mix what a user writes around the ops:

- user functions called by position, by keyword and both, closures (`def mk(k) = lambda z:
  ...`, a lambda made in a loop reading the loop's number), recursion, lambdas reading
  session variables that are rebound later (late binding, as in Python);
- `for` over `range` (counting down, empty), over the rows of a matrix, over a list written in
  place and over a tuple of gradients; `with no_grad:` steps (`w -= 0.1 * grad(L, w)`) and
  assignments inside them; loops and blocks nested;
- augmented assignment (`+= -= *= /= //= %=`), unpacking (`p, q = q, p`, rows of a matrix,
  `ga, gb = grad(L, (a, b))`), aliases and rebinding;
- `grad(y, x)` by variables and by named intermediates, `grad(y, (a, b))[k]`, grad of grad,
  `hessian(y, x) @ v`, `jacobian(y, x) @ v`, `grad(lambda ...)(x)`, `value_and_grad`, `detach`,
  comparisons as numbers, `where`, `a if c else b`, booleans and whole numbers (`len`,
  `x.shape[k]`, `x.size`, `x.ndim`, `true`, `sum(x > 0)`), masks, indexing with negative steps,
  `x[None]`, `...`, integer lists, and empty slices;
- the same programs (numbers only) on the scalar engine, and at 0, -0.0 and +-1e-300.

What a name is follows docs/language.md: a constant typed (or computed from typed constants
only) becomes a variable when named, a value cut from a graph (`detach`, a comparison, an op
without gradient, anything computed inside `with no_grad:` from a variable) stays a constant;
`x OP= e` is `x = x OP e`, and inside `with no_grad:` a variable stays a (new) variable. The
Python side marks "cut" values with a TorchFunctionMode (`_Taint`) to give each name the same
meaning. Where gradcalc differs from PyTorch on purpose the comparison follows gradcalc's
documents: an element that no non-zero gradient reaches passes back exactly 0 where torch's
0 * inf is nan (docs/engine.md, "The branch where does not take"); the gradient of a constant
y is zeros, as JAX gives (docs/language.md, "Autodiff in the language"); and a named
intermediate's adjoint is compared only in programs without a derivative of a derivative,
where it depends on which values an op's rule reads (the leaves' gradients are compared always).

Found by these programs, and fixed: the gradient of `a % b` by b was -floor(a / b) with a / b
rounded, not the quotient a % b was computed with (`1 % 0.1` had gradient -10 by b, PyTorch
and the exact derivative -9); var and std with ddof above the number of elements divided by a
negative count (`var([1, 2], ddof=3)` was -0.5; NumPy and PyTorch give inf).

ATTACK_PROGRAMS=N runs N programs of each kind instead of the default 600 (N=4000, 12,000
programs, ran clean in 65 seconds, as did about 30,000 of the writer's drafts).
"""
from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from gradcalc.parser import LanguageError, Session
from gradcalc.parser.analysis import analyze

from .test_cli import gradcalc

torch = pytest.importorskip("torch")

PROGRAMS = int(os.environ.get("ATTACK_PROGRAMS", "600"))
RTOL, ATOL = 1e-9, 1e-12

# ---- the Python side ---------------------------------------------------------------------------------

PRELUDE = '''
import numpy as np, torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
_MAYBE = []  # errors gradcalc may give where the Python side gives zeros

class _Taint(TorchFunctionMode):
    """Marks each result without gradient computed from a value with one or from a marked one,
    or made by a comparison or detach: gradcalc's `detached` (a constant that stays a constant
    when named). Under no_grad a view of a variable is cut too (torch's says requires_grad)."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = [a for a in tree_flatten((args, kwargs or {}))[0] if isinstance(a, torch.Tensor)]
        if not torch.is_grad_enabled() and isinstance(out, torch.Tensor) and out.requires_grad and not any(out is a for a in inputs):
            out = out.detach()
        cut = func is torch.Tensor.detach or any(a.requires_grad or getattr(a, "_taint", False) for a in inputs)
        for o in tree_flatten(out)[0]:
            if isinstance(o, torch.Tensor) and not o.requires_grad and (cut or o.dtype == torch.bool):
                o._taint = True
        return out

def _c(x):
    return torch.tensor(x, dtype=torch.float64)
def _leaf(x):
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)
def _cut(t):
    t._taint = True
    return t
def _cnt(i):  # a loop's number, len(x), x.shape[k]: whole-number constants
    return _cut(torch.tensor(float(i), dtype=torch.float64))
def _b(c):
    return c.to(torch.float64)
def _bind(v):
    """`name = v`: a constant the user gave (not cut from a graph) becomes a variable."""
    if isinstance(v, torch.Tensor) and not v.requires_grad and not getattr(v, "_taint", False) and v.dtype != torch.bool:
        return v.detach().clone().requires_grad_(True)
    return v
def _ng(old, new):
    """`x OP= e` inside no_grad: a variable stays a variable (a new leaf); anything else is bound."""
    return new.detach().clone().requires_grad_(True) if old.is_leaf and old.requires_grad else _bind(new)
def _ix(x, *indices):
    """x[i][j]...: NumPy's indexing (negative steps included) as a gather torch can differentiate."""
    for idx in indices:
        flat = np.asarray(np.arange(x.numel()).reshape(tuple(x.shape))[idx])
        x = x.reshape(-1)[torch.as_tensor(flat.reshape(-1).copy(), dtype=torch.long)].reshape(flat.shape)
    return x
def _rows(m):
    return [_bind(m[k]) for k in range(m.shape[0])]
def _mx(a, b):
    return torch.maximum(*torch.broadcast_tensors(a, b))
def _grad(y, xs, graph=True):
    """grad(y, x) and grad(y, (a, b)) as the language gives them."""
    many = isinstance(xs, tuple)
    xs = xs if many else (xs,)
    if not all(x.requires_grad for x in xs):
        _MAYBE.append("x")  # gradcalc refuses a constant x
        gs = tuple(_cut(torch.zeros_like(x)) for x in xs)
    elif not y.requires_grad:  # zeros, as JAX gives (inside no_grad gradcalc may refuse)
        if not torch.is_grad_enabled():
            _MAYBE.append("y")
        gs = tuple(_cut(torch.zeros_like(x)) for x in xs)
    else:
        with torch.enable_grad():
            total = y.sum()
        create = graph and torch.is_grad_enabled()
        found = torch.autograd.grad(total, xs, create_graph=create, allow_unused=True, retain_graph=True)
        gs = tuple(torch.zeros_like(x) if g is None else (g if create else g.detach()) for x, g in zip(xs, found))
        gs = tuple(g if g.requires_grad else _cut(g) for g in gs)
    return gs if many else gs[0]
def _jacobian(y, x):
    rows = [_grad(y.reshape(-1)[k], x) for k in range(y.numel())]
    return torch.stack(rows).reshape(tuple(y.shape) + tuple(x.shape))
def _hessian(y, x):
    g = _grad(y, x)
    rows = [_grad(g.reshape(-1)[k], x) for k in range(x.numel())]
    return torch.stack(rows).reshape(tuple(x.shape) + tuple(x.shape))
def _tf(out):  # a transformation's result that came out constant stays a constant
    return out if out.requires_grad else _cut(out)
'''

# ---- the writer ----------------------------------------------------------------------------------------

Code = tuple[str, str]  # (gradcalc text, Python text)
SHAPES = {"S": (), "U": (2,), "V": (3,), "M": (2, 3)}
NAMES = {"a": "S", "b": "S", "u": "U", "v": "V", "w": "V", "M": "M", "acc": "S", "t": "V"}
EDGES = [0.0, -0.0, 1e-300, -1e-300]
INDICES = {
    "S": ["None][0", "...", "None, None][0, 0"],
    "U": ["::-1", "-1::-1", "[1, 0]", "None][0", "..., ::-1", "::-1][::-1"],
    "V": ["::-1", "-1:-4:-1", "[2, 0, 2]", "None][0", "..., ::-1", "[-1, -2, -3]", "5:-10:-1", "2::-1"],
    "M": ["::-1", ":, ::-1", "::-1, ::-1", "None][0", "..., ::-1", "[1, 0]", "-1::-1, 2::-1"],
}


def ix(p: str, index: str) -> str:
    return f"_ix({p}, {', '.join(f'np.s_[{part}]' for part in index.split(']['))})"


class Writer:
    """Writes one program, knowing each name's shape and whether it holds a variable."""

    VECTOR = "V"  # the kind of a function's vector argument (the scalar writer's are numbers)

    def __init__(self, rng: random.Random, edges: bool = False) -> None:
        self.rng, self.edges = rng, edges
        self.names = dict(NAMES)
        self.kind: dict[str, str] = {}  # name -> leaf | inter | const (a guess inside loops; the Python side knows)
        self.gc: list[str] = []
        self.py: list[str] = []
        self.in_no_grad = self.in_lambda = False
        self.functions: list[str] = []
        self.loop_vars: list[str] = []

    def pick(self, options: Any) -> Any:
        return self.rng.choice(list(options))

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # ---- values ----
    def number(self) -> float:
        if self.edges and self.chance(0.3):
            return float(self.pick(EDGES))
        return round(self.rng.uniform(-2, 2), 2) + 0.0

    def literal(self, code: str) -> Code:
        shape = SHAPES[code]
        text = repr(np.array([self.number() for _ in range(math.prod(shape))]).reshape(shape).tolist())
        return text, f"_c({text})"

    def leaf(self, code: str) -> Code:
        names = [n for n, c in self.names.items() if c == code and n in self.kind]
        names += [n for n in self.loop_vars if code == "S"]
        if names and self.chance(0.7):
            n = self.pick(names)
            return n, (f"_cnt({n})" if n in self.loop_vars else n)
        return self.literal(code)

    # ---- expressions ----
    def expr(self, code: str, depth: int) -> Code:
        if depth <= 0 or self.chance(0.2):
            return self.leaf(code)
        makers: list[Callable[[str, int], Code]] = [self.unary, self.unary, self.binary, self.binary, self.where, self.cond,
                                                    self.compare, self.index_same]
        if code == "S":
            makers += [self.reduce, self.reduce, self.element, self.grad_by, self.empty_sum, self.recursive, self.whole,
                       self.masked, self.grad_pair]
        if code in ("U", "V"):
            makers += [self.reduce_axis, self.matvec, self.index_other]
        if code == "V":
            makers += [self.call_f, self.call_h, self.call_mk, self.grad_by, self.hessian, self.jacobian, self.transform,
                       self.grad_intermediate]
        if code == "M":
            makers += [self.index_matrix]
        return self.pick(makers)(code, depth - 1)

    def unary(self, code: str, d: int) -> Code:
        x, p = self.expr(code, d)
        f = self.pick(["tanh", "sin", "cos", "exp", "sq", "neg", "abs", "detach", "sigmoid", "softplus", "relu", "method"])
        forms = {"exp": (f"exp(0.3 * ({x}))", f"torch.exp(0.3 * ({p}))"), "sq": (f"({x}) ** 2", f"({p}) ** 2"),
                 "neg": (f"-({x})", f"-({p})"), "detach": (f"detach({x})", f"({p}).detach()"),
                 "method": (f"({x}).tanh()", f"torch.tanh({p})"),
                 "softplus": (f"softplus({x})", f"torch.nn.functional.softplus({p})")}
        return forms.get(f, (f"{f}({x})", f"torch.{f}({p})"))

    def operand(self, code: str, d: int) -> Code:
        """An operand of `code`'s shape, or a scalar that broadcasts."""
        return self.expr(code if self.chance(0.7) else "S", d)

    def binary(self, code: str, d: int) -> Code:
        (a, pa), (b, pb) = self.expr(code, d), self.operand(code, d)
        if self.chance(0.5):
            (a, pa), (b, pb) = (b, pb), (a, pa)
            if code != "S" and self.chance(0.5):
                a, pa = self.expr(code, d)
        op = self.pick(["+", "-", "*", "/", "max", "%"])
        if op == "/":
            return f"({a}) / (2 + tanh({b}))", f"({pa}) / (2 + torch.tanh({pb}))"
        if op == "%":
            return f"({a}) % (1.5 + ({b}) ** 2)", f"torch.remainder({pa}, 1.5 + ({pb}) ** 2)"
        if op == "max":
            return f"maximum({a}, {b})", f"_mx({pa}, {pb})"
        return f"({a}) {op} ({b})", f"({pa}) {op} ({pb})"

    def where(self, code: str, d: int) -> Code:
        (c, pc), (a, pa), (b, pb) = self.operand(code, d), self.expr(code, d), self.operand(code, d)
        cmp = self.pick([">", "<", ">=", "!="])
        return f"where({c} {cmp} 0, {a}, {b})", f"torch.where(({pc}) {cmp} 0, {pa}, {pb})"

    def cond(self, code: str, d: int) -> Code:
        (c, pc), (a, pa), (b, pb) = self.expr("S", d), self.expr(code, d), self.expr(code, d)
        return f"({a} if {c} > 0 else {b})", f"(({pa}) if bool(({pc}) > 0) else ({pb}))"

    def compare(self, code: str, d: int) -> Code:
        (a, pa), (b, pb), (c, pc) = self.expr(code, d), self.operand(code, d), self.operand(code, d)
        cmp = self.pick([">", "<", "<=", "==", ">=", "!="])
        return f"({a} {cmp} {b}) * ({c})", f"_b(({pa}) {cmp} ({pb})) * ({pc})"

    def index_same(self, code: str, d: int) -> Code:
        (x, p), i = self.expr(code, d), self.pick(INDICES[code])
        return f"({x})[{i}]", ix(p, i)

    def index_other(self, code: str, d: int) -> Code:
        if code == "U":
            (x, p), i = self.expr("M", d), self.pick([":, 0", ":, -1", "..., 1", "::-1, 2", ":, None, 1][:, 0", "[0, 1], [2, 0]"])
        elif self.chance(0.5):
            (x, p), i = self.expr("M", d), self.pick(["0", "-1", "1, ::-1", "-2", "..., 0, :", "[1, 1, 0], [0, 2, 1]"])
        else:
            (x, p), i = self.expr("U", d), "[0, 1, 1]"
        return f"({x})[{i}]", ix(p, i)

    def index_matrix(self, code: str, d: int) -> Code:
        x, p = self.expr("M", d)
        return f"({x}).T.T[::-1]", ix(p, "::-1")

    def reduce(self, code: str, d: int) -> Code:
        x, p = self.expr(self.pick(["U", "V", "M"]), d)
        f = self.pick(["sum", "mean", "max", "min"] + ([] if self.edges else ["norm"]))
        if f == "norm":
            return f"norm({x})", f"torch.linalg.vector_norm({p})"
        return f"{f}({x})", f"torch.{ {'max': 'amax', 'min': 'amin'}.get(f, f)}({p})"

    def element(self, code: str, d: int) -> Code:
        (x, p), i = self.expr("M", d), self.pick(["0, 0", "-1, -1", "1, -2", "-1][-1", "..., 1][0"])
        return f"({x})[{i}]", ix(p, i)

    def empty_sum(self, code: str, d: int) -> Code:
        (x, p), i = self.expr(self.pick(["V", "M"]), d), self.pick(["3:", "2:1", "::-1][3:", "..., 5:", "1:1"])
        return f"sum(({x})[{i}] * 2)", f"torch.sum({ix(p, i)} * 2)"

    def whole(self, code: str, d: int) -> Code:
        form = self.pick(["len", "shape", "size", "ndim", "true", "count"])
        if form == "true":
            x, p = self.expr("S", d)
            return f"(true + ({x}) * false)", f"(_c(1.0) + ({p}) * _c(0.0))"
        if form == "count":
            x, p = self.expr(self.pick(["V", "M"]), d)
            return f"sum({x} > 0)", f"torch.sum(_b(({p}) > 0))"
        k = self.pick([0, 1, -1])
        return {"len": ("len(M)", "_cnt(len(M))"), "shape": (f"M.shape[{k}]", f"_cnt(M.shape[{k}])"),
                "size": ("v.size", "_cnt(v.numel())"), "ndim": ("M.ndim", "_cnt(M.dim())")}[form]

    def masked(self, code: str, d: int) -> Code:
        (x, p), (c, pc) = self.expr(self.pick(["V", "M"]), d), self.expr("S", d)
        return f"sum(({x})[{x} > {c}] * 2)", f"torch.sum(({p})[({p}) > ({pc})] * 2)"

    def reduce_axis(self, code: str, d: int) -> Code:
        x, p = self.expr("M", d)
        axis = self.pick([1, -1] if code == "U" else [0, -2])
        f = self.pick(["sum", "mean"])
        return f"{f}({x}, axis={axis})", f"torch.{f}({p}, dim={axis})"

    def matvec(self, code: str, d: int) -> Code:
        m, pm = self.expr("M", d)
        if code == "U":
            v, pv = self.expr("V", d)
            return f"({m}) @ ({v})", f"({pm}) @ ({pv})"
        v, pv = self.expr("U", d)
        return f"({v}) @ ({m})", f"({pv}) @ ({pm})"

    # ---- derivatives ----
    def variables_of(self, code: str) -> list[str]:
        if self.in_no_grad or self.in_lambda:
            return []
        return [n for n, c in self.names.items() if c == code and self.kind.get(n) == "leaf"]

    def grad_by(self, code: str, d: int) -> Code:
        xs = self.variables_of(code)
        if not xs:
            return self.leaf(code)
        x = self.pick(xs)
        y, py = self.expr(self.pick(["S", "V"] + (["M"] if code == "V" else [])), d)
        return f"grad({y}, {x})", f"_grad({py}, {x})"

    def grad_pair(self, code: str, d: int) -> Code:
        xs = self.variables_of("S")
        if len(xs) < 2:
            return self.leaf(code)
        (x1, x2), (y, py), k = self.rng.sample(xs, 2), self.expr("S", d), self.pick([0, 1, -1])
        return f"grad({y}, ({x1}, {x2}))[{k}]", f"_grad({py}, ({x1}, {x2}))[{k}]"

    def grad_intermediate(self, code: str, d: int) -> Code:
        inters = [n for n in self.kind if self.kind[n] == "inter" and self.names.get(n) == "V"]
        if not inters or self.in_no_grad or self.in_lambda:
            return self.leaf(code)
        x, (y, py) = self.pick(inters), self.expr("S", d)
        return f"grad({y}, {x})", f"_grad({py}, {x})"

    def hessian(self, code: str, d: int) -> Code:
        return self._second("hessian", "S", code, d)

    def jacobian(self, code: str, d: int) -> Code:
        return self._second("jacobian", "V", code, d)

    def _second(self, name: str, output: str, code: str, d: int) -> Code:
        """hessian(y, x) @ v or jacobian(y, x) @ v by a vector variable x (y of kind `output`)."""
        xs = self.variables_of("V")
        if not xs:
            return self.leaf(code)
        x, (y, py), (v, pv) = self.pick(xs), self.expr(output, d), self.expr("V", d)
        return f"{name}({y}, {x}) @ ({v})", f"_{name}({py}, {x}) @ ({pv})"

    def transform(self, code: str, d: int) -> Code:
        """grad or value_and_grad of a lambda that reads session variables, at an expression."""
        if self.in_no_grad or self.in_lambda:
            return self.leaf(code)
        self.names["z9"], self.kind["z9"], self.in_lambda = "V", "param", True
        body, pbody = self.expr("S", d)
        del self.names["z9"], self.kind["z9"]
        self.in_lambda = False
        x, px = self.expr("V", d)
        fn, pfn = f"lambda z9: sum(z9 * z9 * ({body}))", f"lambda z9: torch.sum(z9 * z9 * ({pbody}))"
        text = f"grad({fn})({x})" if self.chance(0.5) else f"value_and_grad({fn})({x})[1]"
        return text, f"_tf(torch.func.grad({pfn})({px}))"

    # ---- functions ----
    def call_f(self, code: str, d: int) -> Code:
        if "f" not in self.functions:
            return self.leaf(code)
        (s, ps), (q, pq) = self.expr("S", d), self.expr(self.VECTOR, d)
        return self.pick([(f"f({s}, {q})", f"f({ps}, {pq})"), (f"f(s={s}, q={q})", f"f(s={ps}, q={pq})"),
                          (f"f(q={q}, s={s})", f"f(q={pq}, s={ps})"), (f"f({s}, q={q})", f"f({ps}, q={pq})")])

    def call_h(self, code: str, d: int) -> Code:
        if "h" not in self.functions:
            return self.leaf(code)
        v, pv = self.expr(self.VECTOR, d)
        return f"h({v})", f"h({pv})"

    def call_mk(self, code: str, d: int) -> Code:
        if "mk" not in self.functions:
            return self.leaf(code)
        (s, ps), (v, pv) = self.expr("S", d), self.expr("V", d)
        return f"mk({s})({v})", f"mk({ps})({pv})"

    def recursive(self, code: str, d: int) -> Code:
        if "r" not in self.functions:
            return self.leaf(code)
        (s, ps), n = self.expr("S", d), self.pick([0, 1, 2, 3, 4])
        return f"r({s}, {n})", f"r({ps}, {n})"

    # ---- statements ----
    def emit(self, gc: str, py: str, indent: int) -> None:
        self.gc.append("    " * indent + gc)
        self.py.append("    " * indent + py)

    def name(self) -> str:
        return str(self.pick([n for n in self.names if n in self.kind]))

    def assign(self, indent: int) -> None:
        n = self.name()
        e, pe = self.expr(self.names[n], 3)
        self.emit(f"{n} = {e}", f"{n} = _bind({pe})", indent)
        self.kind[n] = "const" if self.in_no_grad else "inter"

    def augmented(self, indent: int) -> None:
        n = self.name()
        e, pe = self.expr(self.names[n] if self.chance(0.6) else "S", 3)
        op = self.pick(["+=", "-=", "*=", "/=", "%=", "//="])
        if op == "/=":
            e, pe = f"(2 + tanh({e}))", f"(2 + torch.tanh({pe}))"
        if op in ("%=", "//="):
            e, pe = f"(1.5 + ({e}) ** 2)", f"(1.5 + ({pe}) ** 2)"
        if self.in_no_grad:
            if self.kind[n] != "leaf":
                return self.assign(indent)
            op = op if op in ("+=", "-=", "*=", "/=") else "-="
            self.emit(f"{n} {op} {e}", f"{n} = _ng({n}, {n}.detach() {op[0]} ({pe}))", indent)
            return
        py = {"%=": f"{n} = _bind(torch.remainder({n}, {pe}))",
              "//=": f"{n} = torch.div({n}, {pe}, rounding_mode='floor').detach()"}.get(op, f"{n} = _bind({n} {op[0]} ({pe}))")
        self.emit(f"{n} {op} {e}", py, indent)
        self.kind[n] = "const" if op == "//=" else "inter"

    def unpack(self, indent: int) -> None:
        form = self.pick(["values", "rows", "grads", "swap"])
        vectors = [n for n in self.names if self.names[n] == "V" and n in self.kind and n != "row"]
        if form == "rows" and len(vectors) >= 2:
            p, q = self.rng.sample(vectors, 2)
            self.emit(f"{p}, {q} = M", f"{p}, {q} = _rows(M)", indent)
            self.kind[p] = self.kind[q] = "inter"
            return
        if form == "grads" and not self.in_no_grad:
            xs = [n for n in self.kind if self.kind[n] == "leaf"]
            pairs = [(x1, x2) for x1 in xs for x2 in xs if x1 != x2 and self.names[x1] == self.names[x2]]
            x1, x2 = self.pick(pairs) if pairs else ("", "")
            targets = [n for n in self.kind if pairs and self.names[n] == self.names[x1]]
            if len(targets) >= 2:
                (p, q), (y, py) = self.rng.sample(targets, 2), self.expr("S", 3)
                self.emit(f"{p}, {q} = grad({y}, ({x1}, {x2}))", f"{p}, {q} = map(_bind, _grad({py}, ({x1}, {x2})))", indent)
                self.kind[p] = self.kind[q] = "inter"
                return
        n1, n2 = self.rng.sample([n for n in self.kind if n != "row"], 2)
        if form == "swap" and self.names[n1] == self.names[n2]:
            self.emit(f"{n1}, {n2} = {n2}, {n1}", f"{n1}, {n2} = _bind({n2}), _bind({n1})", indent)
            self.kind[n1], self.kind[n2] = self.kind[n2], self.kind[n1]
            return
        (e1, p1), (e2, p2) = self.expr(self.names[n1], 2), self.expr(self.names[n2], 2)
        self.emit(f"{n1}, {n2} = {e1}, {e2}", f"{n1}, {n2} = _bind({p1}), _bind({p2})", indent)
        self.kind[n1] = self.kind[n2] = "const" if self.in_no_grad else "inter"

    def loop(self, indent: int) -> None:
        form = self.pick(["range", "range", "rows", "list", "grads"])
        var = self.pick(["i", "k"]) if form == "range" else "row"
        if var in self.loop_vars or var in self.names:
            return self.augmented(indent)
        if form == "grads":
            xs = [n for n in self.kind if self.kind[n] == "leaf"]
            if len(xs) < 2 or self.in_no_grad:
                return self.augmented(indent)
            (x1, x2), (y, py) = self.rng.sample(xs, 2), self.expr("S", 2)
            self.emit(f"for row in grad({y}, ({x1}, {x2})):", f"for row in _grad({py}, ({x1}, {x2})):", indent)
            self.emit("    acc += sum(row * row)", "    acc = _bind(acc + torch.sum(row * row))", indent)
            self.kind["acc"] = "inter"
            return
        if form == "range":
            bounds = self.pick(["3", "1, 4", "4, 0, -2", "0", "2, -1, -1"])
            self.emit(f"for {var} in range({bounds}):", f"for {var} in range({bounds}):", indent)
            self.loop_vars.append(var)
        else:
            head = ("for row in [v, w, t]:", "for row in [v, w, t]:") if form == "list" else ("for row in M:", "for row in _rows(M):")
            self.emit(*head, indent)
            self.names["row"], self.kind["row"] = "V", "inter"
        if form == "range" and self.chance(0.4):  # a lambda that reads the loop's number when it runs
            (e, pe), (z, pz) = self.expr("V", 2), self.expr("V", 2)
            self.emit(f"g2 = lambda z: z * {var} + ({e})", f"g2 = lambda z: z * _cnt({var}) + ({pe})", indent + 1)
            self.emit(f"acc += sum(g2({z}))", f"acc = _bind(acc + torch.sum(g2({pz})))", indent + 1)
            self.kind["acc"] = "inter"
        for _ in range(self.rng.randint(1, 3)):
            self.statement(indent + 1)
        if var in self.loop_vars:
            self.loop_vars.remove(var)
        if form in ("rows", "list"):
            del self.names["row"]
            self.kind.pop("row", None)

    def no_grad(self, indent: int) -> None:
        xs = [n for n in self.kind if self.kind[n] == "leaf"]
        if not xs or self.in_no_grad:
            return self.augmented(indent)
        w, (y, py) = self.pick(xs), self.expr("S", 3)
        self.emit(f"L = {y}", f"L = _bind({py})", indent)
        self.emit("with no_grad:", "with torch.no_grad():", indent)
        self.emit(f"    {w} -= 0.1 * grad(L, {w})", f"    {w} = _ng({w}, {w}.detach() - 0.1 * _grad(L, {w}, False))", indent)
        self.in_no_grad = True
        for _ in range(self.rng.randint(0, 2)):
            self.statement(indent + 1)
        self.in_no_grad = False

    def statement(self, indent: int = 0) -> None:
        kind = self.pick(["assign", "augmented", "augmented", "unpack", "loop", "no_grad"])
        if indent >= 2 and kind == "loop":
            kind = "augmented"
        getattr(self, kind)(indent)

    def define(self) -> None:
        if self.chance(0.7):
            body, pbody = self.expr(self.VECTOR, 2)
            self.emit(f"def f(s, q) = s * q + ({body})", f"def f(s, q):\n    return s * q + ({pbody})", 0)
            self.functions.append("f")
        if self.chance(0.5):
            body, pbody = self.expr(self.VECTOR, 2)
            self.emit(f"h = lambda z: tanh(z) * ({body})", f"h = lambda z: torch.tanh(z) * ({pbody})", 0)
            self.functions.append("h")
        if self.VECTOR == "V" and self.chance(0.5):  # (a closure over the vector v: the tensor writer's)
            self.emit("def mk(k) = lambda z: z * k + v", "def mk(k):\n    return lambda z: z * k + v", 0)
            self.functions.append("mk")
        if self.chance(0.5):
            self.emit("def r(s, n) = s if n < 1 else tanh(r(s, n - 1)) * s + n",
                      "def r(s, n):\n    return s if n < 1 else torch.tanh(r(s, n - 1)) * s + n", 0)
            self.functions.append("r")

    def program(self) -> Program:
        for n in self.names:
            text, _ = self.literal(self.names[n])
            self.emit(f"{n} = {text}", f"{n} = _leaf({text})", 0)
            self.kind[n] = "leaf"
        self.define()
        for _ in range(self.rng.randint(1, 5)):
            self.statement()
        out, pout = self.expr(self.pick(["S", "S", "V", "M"]), 3)
        self.emit(out, f"_out = {pout}", 0)
        return Program("\n".join(self.gc), "\n".join(self.py))


class ScalarWriter(Writer):
    """Programs of numbers only, in what the scalar engine runs (its ops, constant exponents)."""

    VECTOR = "S"

    def __init__(self, rng: random.Random, edges: bool = False) -> None:
        super().__init__(rng, edges)
        self.names = {"a": "S", "b": "S", "c": "S", "acc": "S"}

    def expr(self, code: str, depth: int) -> Code:
        if depth <= 0 or self.chance(0.2):
            return self.leaf("S")
        makers = [self.unary, self.unary, self.binary, self.binary, self.cond, self.compare, self.recursive, self.call_f, self.call_h]
        return self.pick(makers)("S", depth - 1)

    def unary(self, code: str, d: int) -> Code:
        x, p = self.expr("S", d)
        f = self.pick(["tanh", "exp", "sq", "cube", "neg", "abs", "detach", "sigmoid", "softplus", "relu", "sqrt", "log", "pow"])
        forms = {"exp": (f"exp(0.3 * ({x}))", f"torch.exp(0.3 * ({p}))"), "sq": (f"({x}) ** 2", f"({p}) ** 2"),
                 "cube": (f"({x}) ** 3", f"({p}) ** 3"), "neg": (f"-({x})", f"-({p})"),
                 "pow": (f"(1 + ({x}) ** 2) ** -0.5", f"(1 + ({p}) ** 2) ** -0.5"),
                 "sqrt": (f"sqrt(1 + ({x}) ** 2)", f"torch.sqrt(1 + ({p}) ** 2)"),
                 "log": (f"log(2 + tanh({x}))", f"torch.log(2 + torch.tanh({p}))"),
                 "detach": (f"detach({x})", f"({p}).detach()"), "softplus": (f"softplus({x})", f"torch.nn.functional.softplus({p})")}
        return forms.get(f, (f"{f}({x})", f"torch.{f}({p})"))

    def binary(self, code: str, d: int) -> Code:
        (a, pa), (b, pb) = self.expr("S", d), self.expr("S", d)
        op = self.pick(["+", "-", "*", "/"])
        if op == "/":
            return f"({a}) / (2 + tanh({b}))", f"({pa}) / (2 + torch.tanh({pb}))"
        return f"({a}) {op} ({b})", f"({pa}) {op} ({pb})"

    def augmented(self, indent: int) -> None:
        n, (e, pe), op = self.name(), self.expr("S", 3), self.pick(["+=", "-=", "*=", "/="])
        if op == "/=":
            e, pe = f"(2 + tanh({e}))", f"(2 + torch.tanh({pe}))"
        if self.in_no_grad:
            self.emit(f"{n} {op} {e}", f"{n} = _ng({n}, {n}.detach() {op[0]} ({pe}))", indent)
            return
        self.emit(f"{n} {op} {e}", f"{n} = _bind({n} {op[0]} ({pe}))", indent)
        self.kind[n] = "inter"

    def unpack(self, indent: int) -> None:
        n1, n2 = self.rng.sample(list(self.kind), 2)
        if self.chance(0.3):
            self.emit(f"{n1}, {n2} = {n2}, {n1}", f"{n1}, {n2} = _bind({n2}), _bind({n1})", indent)
            return
        (e1, p1), (e2, p2) = self.expr("S", 2), self.expr("S", 2)
        self.emit(f"{n1}, {n2} = {e1}, {e2}", f"{n1}, {n2} = _bind({p1}), _bind({p2})", indent)
        self.kind[n1] = self.kind[n2] = "inter"

    def loop(self, indent: int) -> None:
        var = self.pick(["i", "k"])
        if var in self.loop_vars:
            return self.augmented(indent)
        bounds = self.pick(["3", "1, 4", "4, 0, -2", "0", "2, -1, -1"])
        self.emit(f"for {var} in range({bounds}):", f"for {var} in range({bounds}):", indent)
        self.loop_vars.append(var)
        for _ in range(self.rng.randint(1, 3)):
            self.statement(indent + 1)
        self.loop_vars.remove(var)

    def no_grad(self, indent: int) -> None:  # (the scalar engine has no grad(): steps of other sizes)
        if self.in_no_grad:
            return self.augmented(indent)
        self.emit("with no_grad:", "with torch.no_grad():", indent)
        self.in_no_grad = True
        for _ in range(self.rng.randint(1, 2)):
            self.statement(indent + 1)
        self.in_no_grad = False

    def program(self) -> Program:
        for n in self.names:
            text, _ = self.literal("S")
            self.emit(f"{n} = {text}", f"{n} = _leaf({text})", 0)
            self.kind[n] = "leaf"
        self.define()
        for _ in range(self.rng.randint(1, 5)):
            self.statement()
        out, pout = self.expr("S", 3)
        self.emit(out, f"_out = {pout}", 0)
        return Program("\n".join(self.gc), "\n".join(self.py))


class Program:
    def __init__(self, source: str, python: str) -> None:
        self.source, self.python = source, python


# ---- running both sides ----------------------------------------------------------------------------------


class Answer:
    """A program's value and gradients by name; `leaves`: the names of variables (the rest are
    intermediates); `maybe`: gradcalc may refuse the program (a grad by a constant)."""

    def __init__(self, value: np.ndarray, grads: dict[str, np.ndarray], leaves: set[str] | None = None, maybe: bool = False) -> None:
        self.value, self.grads, self.leaves, self.maybe = value, grads, leaves or set(), maybe


def numpy_of(t: Any) -> np.ndarray:
    return np.zeros(tuple(t.shape)) if t._is_zerotensor() else t.detach().numpy()


def by_torch(python: str) -> Answer:
    namespace: dict[str, Any] = {}
    exec(PRELUDE, namespace)  # (our own text)
    with namespace["_Taint"]():
        exec(python, namespace)  # (our own generated text)
    out = namespace["_out"]
    tensors = {n: t for n, t in namespace.items() if not n.startswith("_") and isinstance(t, torch.Tensor) and t.requires_grad}
    grads = {}
    if out.requires_grad:
        for n, t in tensors.items():
            g = torch.autograd.grad(out.sum(), t, retain_graph=True, allow_unused=True)[0]
            grads[n] = np.zeros(tuple(t.shape)) if g is None else numpy_of(g)
    else:
        grads = {n: np.zeros(tuple(t.shape)) for n, t in tensors.items()}
    leaves = {n for n, t in tensors.items() if t.is_leaf}
    return Answer(numpy_of(out), grads, leaves, bool(namespace["_MAYBE"]))


def by_session(source: str, engine: str = "tensor") -> Answer:
    session = Session(engine=engine)
    result = session.run_source(source)[-1]
    found = analyze(result.value, None, session.variables, None, session=session)
    return Answer(np.asarray(found.value, dtype=float), {k: np.asarray(v, dtype=float) for k, v in found.grads.items()})


def by_command(source: str, engine: str = "tensor") -> Answer:
    done = gradcalc("--engine", engine, "eval", "--json", source)
    record = json.loads(done.stdout)
    if "error" in record:
        raise LanguageError(record["error"]["kind"], record["error"]["message"])
    return Answer(np.asarray(record["value"], dtype=float), {k: np.asarray(v, dtype=float) for k, v in record["grads"].items()})


def close(got: np.ndarray, want: np.ndarray, edges: bool) -> bool:
    if got.shape != want.shape:
        return False
    if edges:  # torch's 0 * inf where no gradient arrives is nan; gradcalc passes back 0 (docs/engine.md)
        want = np.where(np.isnan(want) & np.isfinite(got), got, want)
    return bool(np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True) and (np.isnan(got) == np.isnan(want)).all())


def disagreement(program: Program, run: Callable[[str], Answer], edges: bool = False) -> str | None:
    """None when gradcalc agrees with torch on the program's value and gradients, else what differs."""
    want = by_torch(program.python)
    try:
        got = run(program.source)
    except LanguageError as err:
        refused = "no graph to differentiate" in str(err) or "must be a variable" in str(err)
        return None if want.maybe and refused else f"gradcalc refused it: {err}"
    if not close(got.value, want.value, edges):
        return f"value: gradcalc {got.value.tolist()}, torch {want.value.tolist()}"
    derivatives = "grad(" in program.source or "hessian(" in program.source or "jacobian(" in program.source
    for name in sorted(set(got.grads) | set(want.grads)):
        if name not in want.grads:
            continue  # a constant in torch that gradcalc named a variable (a typed constant: docs/language.md)
        if derivatives and name not in want.leaves:
            continue  # an intermediate's adjoint under a derivative of a derivative depends on the rules' choices
        theirs = want.grads[name]
        ours = got.grads.get(name, np.zeros_like(theirs))
        if not close(ours, theirs, edges):
            return f"grad {name}: gradcalc {ours.tolist()}, torch {theirs.tolist()}"
    return None


def assert_all_agree(make: Callable[[random.Random], Program], seeds: range, run: Callable[[str], Answer], edges: bool = False) -> None:
    failures = []
    for seed in seeds:
        program = make(random.Random(seed))
        found = disagreement(program, run, edges)
        if found:
            failures.append(f"seed {seed}: {found}\n{program.source}")
    assert not failures, f"{len(failures)} of {len(seeds)} programs disagree; the first:\n" + "\n\n".join(failures[:2])


# ---- the generated classes that agree --------------------------------------------------------------------


def test_generated_programs_agree_with_torch() -> None:
    assert_all_agree(lambda rng: Writer(rng).program(), range(PROGRAMS), by_session)


def test_generated_programs_at_zeros_and_tiny_values_agree_with_torch() -> None:
    assert_all_agree(lambda rng: Writer(rng, edges=True).program(), range(10_000, 10_000 + PROGRAMS // 2), by_session, edges=True)


def test_generated_scalar_engine_programs_agree_with_torch() -> None:
    def run(source: str) -> Answer:
        return by_session(source, "scalar")

    assert_all_agree(lambda rng: ScalarWriter(rng).program(), range(20_000, 20_000 + PROGRAMS), run)
    assert_all_agree(lambda rng: ScalarWriter(rng, edges=True).program(), range(30_000, 30_000 + PROGRAMS // 2), run, edges=True)


@pytest.mark.parametrize("engine", ["tensor", "scalar"])
def test_generated_programs_through_the_command(engine: str) -> None:
    """The same classes through `gradcalc eval --json`: what the report prints is what the
    session gave (a handful: one process each)."""
    writer = Writer if engine == "tensor" else ScalarWriter

    def run(source: str) -> Answer:
        return by_command(source, engine)

    assert_all_agree(lambda rng: writer(rng).program(), range(40_000, 40_006), run)


# Deep programs against closed forms, through the command: nesting the machine must not
# recurse on, and orders of differentiation.
DEEP = [
    ("(" * 3000 + "x" + ") * 1.001" * 3000, "x=2", 2 * 1.001 ** 3000, 1.001 ** 3000),
    ("".join(f"(x * {k} if x > {k} else " for k in range(1499, -1, -1)) + "x" + ")" * 1500, "x=2.5", 5.0, 2.0),
    ("sum(x" + "[None][0]" * 800 + "[::-1] * [1, 2])", "x=[3, 4]", 10.0, [2.0, 1.0]),
    ("grad(" * 11 + "x ** 12" + ", x)" * 11, "x=1.3", math.factorial(12) * 1.3, math.factorial(12)),
    ("".join(f"(lambda y{j}: " for j in range(60)) + " + ".join(f"y{j}" for j in range(60)) + ")" * 60
     + "".join(f"(x * {j})" for j in range(60)), "x=1", 1770.0, 1770.0),
    ("def p(x, n) = 1 if n == 0 else x * p(x, n - 1)\np(x, 190)", "x=1.001", 1.001 ** 190, 190 * 1.001 ** 189),
    ("L = 0\nfor i in range(2000): L += (x - i / 1000) ** 2\nL", "x=0.5",
     sum((0.5 - i / 1000) ** 2 for i in range(2000)), sum(2 * (0.5 - i / 1000) for i in range(2000))),
    ("for i in range(300):\n    L = (x - 3) ** 2\n    with no_grad: x -= 0.01 * grad(L, x)\n(x - 3) ** 2", "x=1",
     4 * 0.98 ** 600, -4 * 0.98 ** 300),
]


@pytest.mark.parametrize(("source", "binding", "value", "gradient"), DEEP, ids=[f"deep{k}" for k in range(len(DEEP))])
def test_deep_programs_match_closed_forms(source: str, binding: str, value: float, gradient: Any) -> None:
    done = gradcalc("eval", "--json", source, binding)
    record = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    np.testing.assert_allclose(record["value"], value, rtol=1e-12)
    np.testing.assert_allclose(record["grads"]["x"], gradient, rtol=1e-12)


def test_every_op_on_empty_inputs_matches_torch() -> None:
    """Each op of the registry with one axis of each input emptied (shapes (0,), (0, 3), (3, 0),
    ...): value, gradient and second derivative against torch, or an error from both. var and
    std with ddof above the count are the finding below."""
    from . import test_torch_differential as differential

    failures, compared = [], 0
    for op in differential.MAPPED:
        oracle = differential.TORCH[op.name]
        if op.category == "constructor" or op.check is None or not op.check.shapes or oracle.make or op.check.make:
            continue
        for shapes in op.check.shapes:
            for k in range(3):
                emptied = [tuple(0 if j == min(k, len(s) - 1) else n for j, n in enumerate(s)) for s in shapes]
                rng = np.random.default_rng(0)
                inputs = [rng.uniform(op.check.low, op.check.high, s) for s in emptied]
                params = dict(op.check.params)
                count = min((math.prod(s) for s in emptied), default=0)
                if op.name in ("var", "std") and params.get("ddof", 0) > count:
                    continue
                try:
                    oracle.fn(torch, *[differential.torch_of(x) for x in inputs], **params)
                    torch_refused = False
                except Exception:
                    torch_refused = True
                try:
                    differential.compare_op(op, oracle, inputs, params, differential.differentiated(op, inputs))
                    compared += 1
                except AssertionError as err:
                    failures.append(f"{op.name} {emptied}: {str(err)[:200]}")
                except Exception as err:  # (either side may refuse an empty input; both must)
                    if not torch_refused:
                        failures.append(f"{op.name} {emptied}: gradcalc refused what torch computes: {err}")
    assert compared > 300 and not failures, "\n".join(failures[:5])


# ---- found: the gradient of a % b by b ---------------------------------------------------------------------


def quotient_cases(count: int, seed: int = 5) -> list[tuple[float, float]]:
    """(a, b) where Python's a // b (the quotient a % b is computed with: NumPy's and torch's
    too) is not floor(a / b) of the rounded a / b: short decimals (1 % 0.1), both signs, a
    quotient that underflows (-1e-300 % 1e300) and an infinite divisor (-1 % inf)."""
    rng = random.Random(seed)
    found: list[tuple[float, float]] = [(-1e-300, 1e300), (-1.0, math.inf)]
    while len(found) < count:
        a = rng.randint(1, 99) / rng.choice([1, 10, 100])
        b = rng.randint(1, 9) / rng.choice([10, 100, 1000])
        a, b = rng.choice([1, -1]) * a, rng.choice([1, -1]) * b
        if a // b != math.floor(a / b) and (a, b) not in found:
            found.append((a, b))
    return found


def torch_remainder_gradients(a: list[float], b: list[float]) -> tuple[np.ndarray, np.ndarray]:
    ta, tb = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (a, b))
    ga, gb = torch.autograd.grad(torch.remainder(ta, tb).sum(), (ta, tb))
    return ga.numpy(), gb.numpy()


REMAINDER_FORMS = [
    pytest.param(("eval", "--json", "a % b"), id="a % b"),
    pytest.param(("eval", "--json", "remainder(a, b)"), id="remainder(a, b)"),
    pytest.param(("eval", "--json", "--mode", "forward", "mod(a, b)"), id="mod by forward mode"),
    pytest.param(("eval", "--json", "c = a; c %= b; c"), id="c %= b"),
]


@pytest.mark.parametrize("form", REMAINDER_FORMS)
def test_remainder_gradient_by_the_divisor_matches_torch(form: tuple[str, ...]) -> None:
    """gradcalc eval 'a % b' a=1 b=0.1 has value 0.09999999999999995 = 1 - 9 * 0.1 (Python's,
    NumPy's and torch's: 1 // 0.1 is 9) but gradient -10 by b, -floor(1 / 0.1) with 1 / 0.1
    rounded to 10; torch, and the exact derivative of the value printed, give -9."""
    cases = quotient_cases(12)
    a, b = [x for x, _ in cases], [y for _, y in cases]
    done = gradcalc(*form, f"a={a!r}", f"b={b!r}")
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(done.stdout)
    want_a, want_b = torch_remainder_gradients(a, b)
    np.testing.assert_array_equal(np.asarray(record["value"], dtype=float), np.remainder(a, b))
    np.testing.assert_array_equal(np.asarray(record["grads"]["a"], dtype=float), want_a)
    np.testing.assert_array_equal(np.asarray(record["grads"]["b"], dtype=float), want_b, err_msg=f"pairs {cases}")


def test_remainder_gradient_by_the_divisor_matches_torch_where_the_quotient_is_exact() -> None:
    """The rest of the class agrees: where a / b rounds to a number with the same floor."""
    rng = random.Random(6)
    a = [rng.uniform(-50, 50) for _ in range(40)]
    b = [rng.choice([-1, 1]) * rng.uniform(0.3, 7) for _ in range(40)]
    assert all(x // y == math.floor(x / y) for x, y in zip(a, b))
    done = gradcalc("eval", "--json", "a % b", f"a={a!r}", f"b={b!r}")
    record = json.loads(done.stdout)
    want_a, want_b = torch_remainder_gradients(a, b)
    np.testing.assert_array_equal(np.asarray(record["grads"]["b"], dtype=float), want_b)


# ---- found: var and std with ddof above the number of elements ---------------------------------------------


def ddof_cases(seed: int = 7) -> list[tuple[list[float], int]]:
    """(x, ddof) with ddof > len(x): the divisor N - ddof is negative."""
    rng = random.Random(seed)
    cases: list[tuple[list[float], int]] = [([], 1), ([1.0, 2.0], 3), ([2.0, 2.0], 4)]
    for _ in range(5):
        n = rng.randint(0, 4)
        cases.append(([round(rng.uniform(-3, 3), 2) for _ in range(n)], n + rng.randint(1, 3)))
    return cases


@pytest.mark.parametrize("function", ["var", "std"])
def test_var_and_std_with_ddof_above_the_count_match_numpy(function: str) -> None:
    """gradcalc eval 'var(x, ddof=3)' x=[1,2] gives -0.5 (and var of an empty x with ddof=1
    gives -0.0, std gives nan or -0.0): N - ddof = -1 is used as the divisor. NumPy and
    PyTorch divide by max(N - ddof, 0): inf where the values spread, nan where they do not
    (JAX gives nan); a variance is never negative."""
    cases = ddof_cases()
    script = "".join(f"x{k} = {x!r}\n{function}(x{k}, ddof={ddof})\n" for k, (x, ddof) in enumerate(cases))
    done = gradcalc("run", "--json", "-", stdin=script)
    assert done.returncode == 0, done.stdout + done.stderr
    got = [float(json.loads(line)["value"]) for line in done.stdout.splitlines()]
    with np.errstate(all="ignore"):
        want = [float(getattr(np, function)(np.asarray(x, dtype=float), ddof=ddof)) for x, ddof in cases]
    wrong = [f"{function}({x}, ddof={ddof}): gradcalc {g}, NumPy {w}" for (x, ddof), g, w in zip(cases, got, want)
             if not (g == w or (math.isnan(g) and math.isnan(w)))]
    assert not wrong, "\n".join(wrong)
