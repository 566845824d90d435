"""Names, updates and steps mean what their Python transliteration means, against eager
PyTorch float64.

A seeded writer makes random programs of loops, accumulators (`acc = 0` then `acc += ...`
in a loop), aliases (`z = x`), rebinding, augmented assignments and gradient descent steps
(`with no_grad: w -= 0.1 * grad(L, w)`), each twice: as gradcalc source and as Python over
torch tensors, where a constant typed in the program is a leaf that requires grad,
`x OP= e` is `x = x OP e`, and a step is `with torch.no_grad(): w -= ...` on the leaf.
gradcalc runs the first through the parser's Session (a sample through the real `gradcalc
eval --json`), Python the second, and they must agree on every value shown and on the
derivative of the last one by every name that holds a typed constant (a variable), as
the report gives them and as `grad` does.

An in-place step changes the leaf itself in PyTorch, where gradcalc binds the name to a
new leaf: the two differ only for values computed from the leaf before the step (an alias
sees the new value in PyTorch, an old loss its new leaf). The writer follows which leaves
each name's value was computed from and never reads a name whose value a step made
stale, so every program written has one meaning (a loop's body is checked for every
iteration, not only the first).

`UPDATE_ORACLE_PROGRAMS=20000` runs more; the suite runs 3,000 (about 15 s on one core).
"""
from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest

from gradcalc.parser import Session, compile_program
from gradcalc.parser.analysis import analyze
from gradcalc.parser.machine import ExpressionResult
from tests.launch import run

torch = pytest.importorskip("torch")

PROGRAMS = int(os.environ.get("UPDATE_ORACLE_PROGRAMS", "3000"))
SEED = 38
COMMAND_SAMPLE = 150  # one program in this many also runs through `gradcalc eval --json`
NAMES = ["x", "w", "z", "acc", "L", "v"]
LOOP_NAMES = ["i", "j"]
GRAD_NAMES = ["gw", "gv"]
VECTOR = (2,)

PRELUDE = """
import torch
def _n(x):
    return torch.tensor(x, dtype=torch.float64)
def _leaf(t):
    return _n(t).detach().clone().requires_grad_(True) if not isinstance(t, torch.Tensor) else t.detach().clone().requires_grad_(True)
def _show(v):
    _out.append(v)
    _seen.append(v.detach().clone())  # (what it holds now: a step may change a leaf shown in place later)
def _g(y, x):
    # (of the sum, as gradcalc's grad(y, x) for a y that is not a scalar; y.sum() would record nothing under no_grad)
    g = torch.autograd.grad(y, x, torch.ones_like(y), allow_unused=True, retain_graph=True)[0] if y.requires_grad else None
    return torch.zeros_like(x) if g is None else g
"""


# ---- what the writer knows of each name ----------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """What a value is: `grad` (requires grad) with the leaves it was computed from
    (`leaves`, versions of typed constants), or a constant: `typed` (computed from numbers
    alone: a variable once named) or detached (from a constant cut from a graph, a loop's
    number, a gradient taken inside a step). `leaf` is the version a variable is."""

    shape: tuple[int, ...]
    grad: bool = False
    typed: bool = False
    leaves: frozenset[int] = frozenset()
    leaf: int | None = None


def combine(shape: tuple[int, ...], *kinds: Kind) -> Kind:
    """The kind of an op's result on values of these kinds."""
    leaves = frozenset().union(*(k.leaves for k in kinds))
    if any(k.grad for k in kinds):
        return Kind(shape, grad=True, leaves=leaves)
    return Kind(shape, typed=all(k.typed for k in kinds))


@dataclass
class State:
    names: dict[str, Kind] = field(default_factory=dict)
    stale: set[int] = field(default_factory=set)  # leaf versions a step changed in place
    versions: list[int] = field(default_factory=lambda: [0])

    def copy(self) -> State:
        return State(dict(self.names), set(self.stale), self.versions)

    def readable(self, name: str) -> bool:
        kind = self.names.get(name)
        return kind is not None and not (kind.leaves & self.stale)

    def new_leaf(self, shape: tuple[int, ...]) -> Kind:
        self.versions[0] += 1
        return Kind(shape, grad=True, leaves=frozenset({self.versions[0]}), leaf=self.versions[0])

    def bind(self, name: str, kind: Kind) -> None:
        """`name = value` of this kind: a typed constant becomes a new variable."""
        self.names[name] = self.new_leaf(kind.shape) if kind.typed else kind


class Stale(Exception):
    """A read of a name that a step made stale (or that is not bound)."""


# ---- expressions: (gradcalc text, torch text, the names read, kind) -------------------------


@dataclass
class Expr:
    text: str
    torch: str
    reads: tuple[str, ...]
    kind: Callable[[State], Kind]  # (evaluated against the state where it runs: a loop's later iterations differ)


class Writer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, options: list[Any]) -> Any:
        return self.rng.choice(options)

    def names_of(self, state: State, shape: tuple[int, ...], grad: bool | None = None) -> list[str]:
        return sorted(n for n, k in state.names.items() if k.shape == shape and state.readable(n) and (grad is None or k.grad == grad))

    def number(self, shape: tuple[int, ...]) -> Expr:
        if shape == VECTOR:
            a, b = self.pick([0.5, 1, 2, -1, 1.5]), self.pick([0, 0.25, 3, -2])
            return Expr(f"[{a}, {b}]", f"_n([{float(a)}, {float(b)}])", (), lambda s: Kind(VECTOR, typed=True))
        value = self.pick([0, 1, 2, 3, 0.5, 1.5, 0.1, 2.5])
        return Expr(str(value), f"_n({float(value)})", (), lambda s: Kind((), typed=True))

    def expr(self, state: State, shape: tuple[int, ...], depth: int, loop: str | None) -> Expr:
        """An expression of `shape` over the names readable in `state` (and the loop's number)."""
        if depth <= 0 or self.chance(0.25):
            return self.leaf(state, shape, loop)
        maker = self.pick(["binary", "binary", "binary", "unary", "unary", "reduce", "conditional"])
        if maker == "reduce" and shape == ():
            a = self.expr(state, VECTOR, depth - 1, loop)
            name = self.pick(["sum", "mean"])
            return Expr(f"{name}({a.text})", f"torch.{name}({a.torch})", a.reads, lambda s, a=a: combine((), a.kind(s)))
        if maker == "conditional" and loop is not None:
            # the loop's number decides, the same in both: a jump inside an update's right side
            a, b = self.expr(state, shape, depth - 1, loop), self.expr(state, shape, depth - 1, loop)
            if (a.kind(state).grad, a.kind(state).typed) != (b.kind(state).grad, b.kind(state).typed):
                return a  # (branches of one kind, so that the kind of what it gives does not depend on the branch)
            k = self.pick([0, 1])
            both = lambda s, a=a, b=b: combine(shape, a.kind(s), b.kind(s))  # noqa: E731 - (either branch: the union is what a later read must allow)
            return Expr(f"({a.text} if {loop} > {k} else {b.text})", f"({a.torch} if {loop} > {k} else {b.torch})", a.reads + b.reads, both)
        if maker == "unary":
            a = self.expr(state, shape, depth - 1, loop)
            name = self.pick(["tanh", "sin", "cos", "square", "neg"])
            text = {"square": f"({a.text})**2", "neg": f"-({a.text})"}.get(name, f"{name}({a.text})")
            python = {"square": f"({a.torch})**2", "neg": f"-({a.torch})"}.get(name, f"torch.{name}({a.torch})")
            return Expr(text, python, a.reads, lambda s, a=a: combine(shape, a.kind(s)))
        op = self.pick(["+", "-", "*", "/"])
        left = self.expr(state, shape, depth - 1, loop)
        right = self.expr(state, self.pick([shape, ()]), depth - 1, loop)
        if op == "/":  # a denominator of at least 1
            text, python = f"({left.text}) / (1 + ({right.text})**2)", f"({left.torch}) / (1 + ({right.torch})**2)"
        else:
            text, python = f"({left.text}) {op} ({right.text})", f"({left.torch}) {op} ({right.torch})"
        return Expr(text, python, left.reads + right.reads, lambda s, a=left, b=right: combine(shape, a.kind(s), b.kind(s)))

    def leaf(self, state: State, shape: tuple[int, ...], loop: str | None) -> Expr:
        names = self.names_of(state, shape)
        if names and self.chance(0.75):
            name = self.pick(names)
            return Expr(name, name, (name,), lambda s, name=name: s.names[name])
        if loop is not None and shape == () and self.chance(0.4):
            return Expr(f"{loop} * 0.5", f"(_n(float({loop})) * 0.5)", (loop,), lambda s: Kind(()))
        return self.number(shape)

    def bounded(self, state: State, shape: tuple[int, ...], loop: str | None) -> Expr:
        """A factor near 1, for `*=` and `/=` (repeated in loops, it must not overflow)."""
        a = self.expr(state, shape, 1, loop)
        return Expr(f"(1 + 0.5 * tanh({a.text}))", f"(1 + 0.5 * torch.tanh({a.torch}))", a.reads, lambda s, a=a: combine(shape, a.kind(s)))


# ---- statements --------------------------------------------------------------------------------


class Statement:
    """One statement: its lines of gradcalc and of Python (at an indent), and what it does
    to the state (`run`, which raises Stale on a read of a stale name)."""

    def lines(self, indent: str) -> tuple[list[str], list[str]]:
        raise NotImplementedError

    def run(self, state: State) -> None:
        raise NotImplementedError


def _read(state: State, names: tuple[str, ...]) -> None:
    for name in names:
        if not state.readable(name):
            raise Stale(name)


@dataclass
class Assign(Statement):
    name: str
    value: Expr

    def lines(self, indent: str) -> tuple[list[str], list[str]]:
        python = self.value.torch
        kind_is_typed = not self.value.reads  # (numbers alone: a typed constant, a leaf in both)
        return [f"{indent}{self.name} = {self.value.text}"], [f"{indent}{self.name} = {'_leaf(' + python + ')' if kind_is_typed else python}"]

    def run(self, state: State) -> None:
        _read(state, self.value.reads)
        state.bind(self.name, self.value.kind(state))


@dataclass
class Update(Statement):
    name: str
    op: str
    value: Expr

    def lines(self, indent: str) -> tuple[list[str], list[str]]:
        return [f"{indent}{self.name} {self.op}= {self.value.text}"], [f"{indent}{self.name} = {self.name} {self.op} ({self.value.torch})"]

    def run(self, state: State) -> None:
        _read(state, (self.name, *self.value.reads))
        state.names[self.name] = combine(state.names[self.name].shape, state.names[self.name], self.value.kind(state))


@dataclass
class Step(Statement):
    """`with no_grad: w -= rate * grad(L, w)`, in one of its spellings; for several
    variables the gradients first (`gw = grad(L, w)`: constants), then the steps."""

    weights: list[str]
    loss: str
    rate: float
    form: str  # "line", "block", "call" (`with no_grad():`)

    def lines(self, indent: str) -> tuple[list[str], list[str]]:
        head = "with no_grad():" if self.form == "call" else "with no_grad:"
        inner = indent + "    "
        if len(self.weights) == 1:
            [w] = self.weights
            text, python = f"{w} -= {self.rate} * grad({self.loss}, {w})", f"{w} -= {self.rate} * _g({self.loss}, {w})"
            gc = [f"{indent}{head} {text}"] if self.form == "line" else [f"{indent}{head}", f"{inner}{text}"]
            return gc, [f"{indent}with torch.no_grad():", f"{inner}{python}"]
        gc, py = [f"{indent}{head}"], [f"{indent}with torch.no_grad():"]
        for w, g in zip(self.weights, GRAD_NAMES):
            gc.append(f"{inner}{g} = grad({self.loss}, {w})")
            py.append(f"{inner}{g} = _g({self.loss}, {w})")
        for w, g in zip(self.weights, GRAD_NAMES):
            gc.append(f"{inner}{w} -= {self.rate} * {g}")
            py.append(f"{inner}{w} -= {self.rate} * {g}")
        return gc, py

    def run(self, state: State) -> None:
        _read(state, (self.loss, *self.weights))
        if not state.names[self.loss].grad:  # (a loss without gradient in this iteration: refused in both, differently)
            raise Stale(self.loss)
        for w, g in zip(self.weights, GRAD_NAMES):
            if len(self.weights) > 1:
                state.names[g] = Kind(state.names[w].shape)
        leaves = [state.names[w].leaf for w in self.weights]
        if None in leaves or len(set(leaves)) < len(leaves):
            # (not a variable in this iteration, or two names of one leaf, which PyTorch would step twice in place)
            raise Stale(self.weights[0])
        for w in self.weights:
            kind = state.names[w]
            assert kind.leaf is not None
            state.stale.add(kind.leaf)
            state.names[w] = state.new_leaf(kind.shape)


@dataclass
class Loop(Statement):
    name: str
    count: int
    body: list[Statement]
    one_line: bool

    def lines(self, indent: str) -> tuple[list[str], list[str]]:
        # (Python's loop number is made a float64 tensor, as gradcalc's is a whole-number constant in every op)
        gc, py = [], [f"{indent}for {self.name} in range({self.count}):", f"{indent}    {self.name} = _n(float({self.name}))"]
        inner = [s.lines(indent + "    ") for s in self.body]
        for _, p in inner:
            py += p
        if self.one_line:
            return [f"{indent}for {self.name} in range({self.count}): " + "; ".join(t[0].strip() for t, _ in inner)], py
        gc.append(f"{indent}for {self.name} in range({self.count}):")
        for t, _ in inner:
            gc += t
        return gc, py

    def run(self, state: State) -> None:
        for _ in range(self.count):
            state.names[self.name] = Kind(())
            for statement in self.body:
                statement.run(state)


@dataclass
class Show(Statement):
    """An expression statement: its value is shown (top level only)."""

    value: Expr

    def lines(self, indent: str) -> tuple[list[str], list[str]]:
        return [f"{indent}{self.value.text}"], [f"{indent}_show({self.value.torch})"]

    def run(self, state: State) -> None:
        _read(state, self.value.reads)


# ---- writing a program -----------------------------------------------------------------------------


class ProgramWriter(Writer):
    def program(self) -> list[Statement]:
        state = State()
        statements: list[Statement] = []
        for _ in range(self.rng.randint(3, 8)):
            made = self.statement(state, None, depth=0)
            if made is not None:
                statements.append(made)
        shape = self.pick([(), (), VECTOR])
        for _ in range(5):  # (an output with a gradient, if one can be written: its derivatives are compared)
            last = self.expr(state, shape, 3, None)
            if last.kind(state).grad:
                break
        statements.append(Show(last))
        return statements

    def statement(self, state: State, loop: str | None, depth: int) -> Statement | None:
        """One statement that can run in `state` (which it then updates), or None."""
        kinds = ["constant", "assign", "assign", "alias", "update", "update", "step"]
        if depth == 0:
            kinds += ["show", "loop", "loop", "accumulator", "training"]
        elif depth == 1:
            kinds += ["loop"]
        for _ in range(5):
            made = getattr(self, "s_" + self.pick(kinds))(state, loop, depth)
            if made is None:
                continue
            trial = state.copy()
            try:
                made.run(trial)
            except Stale:
                continue
            made.run(state)
            return made
        return None

    def fresh_shape(self, state: State, name: str) -> tuple[int, ...]:
        kind = state.names.get(name)
        return kind.shape if kind is not None and self.chance(0.7) else self.pick([(), (), VECTOR])

    def s_constant(self, state: State, loop: str | None, depth: int) -> Statement:
        name = self.pick(NAMES)
        return Assign(name, self.number(self.fresh_shape(state, name)))

    def s_assign(self, state: State, loop: str | None, depth: int) -> Statement:
        name = self.pick(NAMES)
        return Assign(name, self.expr(state, self.fresh_shape(state, name), 3, loop))

    def s_alias(self, state: State, loop: str | None, depth: int) -> Statement | None:
        names = [n for n in sorted(state.names) if state.readable(n)]
        if not names:
            return None
        source = self.pick(names)
        target = self.pick([n for n in NAMES if n != source])
        return Assign(target, Expr(source, source, (source,), lambda s, source=source: s.names[source]))

    def s_update(self, state: State, loop: str | None, depth: int) -> Statement | None:
        names = [n for n in sorted(state.names) if state.readable(n) and n not in LOOP_NAMES]
        if not names:
            return None
        name = self.pick(names)
        shape = state.names[name].shape
        op = self.pick(["+", "-", "*", "/"])
        right_shape = self.pick([shape, ()])
        value = self.bounded(state, right_shape, loop) if op in "*/" else self.expr(state, right_shape, 2, loop)
        return Update(name, op, value)

    def s_show(self, state: State, loop: str | None, depth: int) -> Statement:
        return Show(self.expr(state, self.pick([(), VECTOR]), 3, loop))

    def s_step(self, state: State, loop: str | None, depth: int) -> Statement | None:
        """A step of every variable of a loss that has a gradient (the loss read now)."""
        variables = [n for n, k in sorted(state.names.items()) if k.leaf is not None and state.readable(n) and n not in GRAD_NAMES]
        losses = [n for n, k in sorted(state.names.items()) if k.grad and state.readable(n)]
        if not variables or not losses:
            return None
        loss = self.pick(losses)
        used = [w for w in variables if state.names[w].leaf in state.names[loss].leaves] or variables
        weights = self.rng.sample(used, min(len(used), self.pick([1, 1, 2])))
        return Step(weights, loss, self.pick([0.1, 0.05, 0.5]), self.pick(["line", "block", "call"]))

    def s_loop(self, state: State, loop: str | None, depth: int) -> Statement | None:
        name = self.pick([n for n in LOOP_NAMES if n != loop])
        trial = state.copy()
        trial.names[name] = Kind(())
        body = [s for s in (self.statement(trial, name, depth + 1) for _ in range(self.rng.randint(1, 3))) if s is not None]
        if not body:
            return None
        # (a body written for the first iteration may read what a step in it made stale: run() says)
        return Loop(name, self.rng.randint(1, 3), body, one_line=self.chance(0.4) and not any(isinstance(s, (Loop, Step)) for s in body))

    def s_accumulator(self, state: State, loop: str | None, depth: int) -> Statement | None:
        """`acc = 0` then a loop of `acc += f(...)` (PyTorch's and JAX's accumulator)."""
        name = self.pick(["acc", "L"])
        shape = self.pick([(), VECTOR])
        start = Assign(name, self.number(shape))
        trial = state.copy()
        start.run(trial)
        counter = self.pick(LOOP_NAMES)
        trial.names[counter] = Kind(())
        terms = self.expr(trial, shape, 3, counter)
        body: list[Statement] = [Update(name, self.pick(["+", "-"]), terms)]
        return _Sequence([start, Loop(counter, self.rng.randint(1, 4), body, one_line=self.chance(0.5))])

    def s_training(self, state: State, loop: str | None, depth: int) -> Statement | None:
        """A training loop: a loss of variables, and a step of them, every iteration."""
        variables = [n for n, k in sorted(state.names.items()) if k.leaf is not None and state.readable(n) and n not in GRAD_NAMES]
        if not variables:
            return None
        counter = self.pick(LOOP_NAMES)
        trial = state.copy()
        trial.names[counter] = Kind(())
        loss = self.pick(["L", "acc"])
        value = self.expr(trial, (), 3, counter)
        if not (set(value.reads) & set(variables)):
            value = Expr(f"sum(({variables[0]})**2) + {value.text}", f"torch.sum(({variables[0]})**2) + {value.torch}",
                         (variables[0], *value.reads), lambda s, v=variables[0], e=value: combine((), s.names[v], e.kind(s)))
        trial.bind(loss, value.kind(trial))
        weights = [w for w in variables if trial.names[w].leaf in trial.names[loss].leaves][:2] or variables[:1]
        body: list[Statement] = [Assign(loss, value), Step(weights, loss, self.pick([0.1, 0.05]), self.pick(["line", "block", "call"]))]
        return Loop(counter, self.rng.randint(1, 4), body, one_line=False)


@dataclass
class _Sequence(Statement):
    """Statements written one after another, made as one (the accumulator's start and loop)."""

    items: list[Statement]

    def lines(self, indent: str) -> tuple[list[str], list[str]]:
        gc: list[str] = []
        py: list[str] = []
        for item in self.items:
            t, p = item.lines(indent)
            gc += t
            py += p
        return gc, py

    def run(self, state: State) -> None:
        for item in self.items:
            item.run(state)


def write(rng: random.Random) -> tuple[str, str, list[str]]:
    """(gradcalc source, Python source, the names holding a variable at the end)."""
    writer = ProgramWriter(rng)
    statements = writer.program()
    state = State()
    for statement in statements:
        statement.run(state)  # (the writer ran each already: this is the program's end state)
    gc: list[str] = []
    py: list[str] = [PRELUDE, "_out, _seen = [], []"]
    for statement in statements:
        t, p = statement.lines("")
        gc += t
        py += p
    variables = sorted(n for n, k in state.names.items() if k.leaf is not None and state.readable(n))
    return "\n".join(gc) + "\n", "\n".join(py) + "\n", variables


# ---- running both --------------------------------------------------------------------------------


def run_torch(python: str, variables: list[str]) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    namespace: dict[str, Any] = {}
    exec(compile(python, "<torch>", "exec"), namespace)  # noqa: S102
    out = namespace["_out"]
    last = out[-1]
    leaves = [namespace[n] for n in variables]
    grads: list[Any] = [None] * len(leaves)
    if last.requires_grad and leaves:
        grads = list(torch.autograd.grad(last.sum(), leaves, allow_unused=True))
    found = {n: (np.zeros(tuple(leaf.shape)) if g is None else g.detach().numpy()) for n, g, leaf in zip(variables, grads, leaves)}
    return [o.numpy() for o in namespace["_seen"]], found


def run_gradcalc(source: str, variables: list[str]) -> tuple[list[np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The values shown, the report's gradients of the last by the variables, and grad's."""
    session = Session()
    results = [r for r in session.run(compile_program(source)) if isinstance(r, ExpressionResult)]
    last = results[-1].value
    reported = analyze(last, None, session.variables).grads
    by_report = {n: np.asarray(reported.get(n, np.zeros(np.shape(session.variables[n].data)))) for n in variables}
    by_grad = {}
    for n in variables:
        [g] = [r for r in session.run(compile_program(f"grad(_last, {n})"), {"_last": last}) if isinstance(r, ExpressionResult)]
        by_grad[n] = np.asarray(g.value.data)
    return [np.asarray(r.value.data) for r in results], by_report, by_grad


def close(got: Any, want: Any) -> bool:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True))


def agree(source: str, python: str, variables: list[str], through_command: bool = False) -> None:
    values, grads = run_torch(python, variables)
    got_values, by_report, by_grad = run_gradcalc(source, variables)
    where = f"\n--- gradcalc\n{source}--- torch\n{python}"
    assert len(got_values) == len(values), where
    for k, (g, w) in enumerate(zip(got_values, values)):
        assert close(g, w), f"value {k}: gradcalc {g}, torch {w}{where}"
    for n in variables:
        assert close(by_report[n], grads[n]), f"report's grad {n}: gradcalc {by_report[n]}, torch {grads[n]}{where}"
        assert close(by_grad[n], grads[n]), f"grad(out, {n}): gradcalc {by_grad[n]}, torch {grads[n]}{where}"
    if through_command:
        done = run(["eval", "--json", source], timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr + where
        report = json.loads(done.stdout)
        assert close(report["value"], values[-1]), where
        for n in variables:
            assert close(report["grads"].get(n, np.zeros_like(grads[n])), grads[n]), f"gradcalc eval's grad {n}{where}"


@pytest.mark.slow
def test_programs_of_updates_loops_and_steps_mean_what_pytorch_computes():
    rng = random.Random(SEED)
    for k in range(PROGRAMS):
        source, python, variables = write(rng)
        agree(source, python, variables, through_command=k % COMMAND_SAMPLE == 0)


def test_the_writer_writes_every_kind_of_statement():
    """The programs hold what this test is for: accumulators, aliases, every augmented
    operator, steps in each spelling (several variables at once too), steps inside loops,
    nested loops, and variables rebound to new constants."""
    rng = random.Random(SEED)
    text = "".join(write(rng)[0] for _ in range(300))
    for piece in ["acc = 0", "acc += ", "+= ", "-= ", "*= ", "/= ", "with no_grad: ", "with no_grad:\n", "with no_grad():\n",
                  "gw = grad(", "    with no_grad", "\n    for ", " if i > ", "z = x\n"]:
        assert piece in text, piece


def test_a_stale_read_is_what_the_writer_avoids():
    """Why the writer follows stale names: an alias read after a step differs, PyTorch's
    sees the leaf changed in place, gradcalc's keeps the value it was bound to."""
    source = "w = 2\nv = w\nL = w * w\nwith no_grad: w -= 0.1 * grad(L, w)\nv\n"
    python = PRELUDE + "_out, _seen = [], []\nw = _leaf(_n(2.0))\nv = w\nL = w * w\nwith torch.no_grad():\n    w -= 0.1 * _g(L, w)\n_show(v)\n"
    assert float(run_torch(python, [])[0][-1]) == pytest.approx(1.6)
    assert float(run_gradcalc(source, [])[0][-1]) == 2.0
    state = State()
    statements = [Assign("w", Expr("2", "", (), lambda s: Kind((), typed=True))),
                  Assign("v", Expr("w", "", ("w",), lambda s: s.names["w"])), Step(["w"], "v", 0.1, "line")]
    for statement in statements:
        statement.run(state)
    assert not state.readable("v") and state.readable("w")


def test_kinds_combine_as_the_engine_marks_values():
    typed, detached = Kind((), typed=True), Kind(())
    variable = replace(typed, typed=False, grad=True, leaves=frozenset({1}), leaf=1)
    assert combine((), typed, typed).typed
    assert not combine((), typed, detached).typed and not combine((), typed, detached).grad
    assert combine((), variable, detached).grad and combine((), variable, detached).leaves == {1}
