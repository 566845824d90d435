"""Random compositions of the transformations against torch.func (float64).

A random body over a vector x and a matrix W (tanh, sin, exp of small values, *, +, -, @,
sum, ** 2, indexing) is wrapped in a random chain of one to three transformations: grad,
value_and_grad, jacrev, jacfwd and hessian by argnums 0, 1, -1, (0, 1) or (1, 0); vmap with
in_axes (0, None), (None, 0), 0, 1, -1, ... and out_axes 0, 1 or -1, nested; a
transformation (one of those, a jvp or a vjp) of a lambda that closes over the other
argument, under an outer vmap over its row; and, where a transformation needs a scalar, a
lambda that sums the tanh of every result. The program is one text that the language runs
and that Python evaluates twice more with other meanings bound to its words: the engine's
Python API, and torch.func (vmap's in_axes and out_axes spelled in_dims and out_dims,
value_and_grad as grad_and_value with its pair swapped). Each result is compared with
torch's, structure, shape and value, and so are the gradients by the inputs that
`gradcalc eval` reports beside it (by reverse and by forward mode).

GRADCALC_COMPOSITIONS=2000 runs that many programs instead of the default 150. The one
kind of program found to disagree, a result holding a tuple in a tuple, is compared like
any other now, and its shortest cases stay below as regressions (NESTED_CASES).
"""
from __future__ import annotations

import ast
import json
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc import autodiff
from gradcalc.autodiff import Tensor, ops
from gradcalc.parser import Session
from gradcalc.parser.analysis import analyze
from tests.strategies import sampled

from .test_cli import gradcalc

torch = pytest.importorskip("torch")
tf = torch.func

EXAMPLES = int(os.environ.get("GRADCALC_COMPOSITIONS", "150"))
RTOL = 1e-10
N, M = 3, 2  # x has N elements, W is M x N: no two axes of the inputs alike
BATCHES = (4, 5, 6)  # the size of each vmap's axis, outermost last, unlike N, M and each other
MAX_ELEMENTS = 1500  # a result larger than this is not made (a hessian of a batch of batches)

T = TypeVar("T")
Choose = Callable[[Sequence[T]], T]

# ---- the body: a typed expression over x (N,) and W (M, N) ------------------------------------------

KINDS: dict[str, tuple[int, ...]] = {"S": (), "N": (N,), "M": (M,), "A": (M, N)}
LEAVES = {
    "S": ["x[0]", "x[2]", "W[1, 2]", "sum(x)"],
    "N": ["x", "W[0]", "W[1]"],
    "M": ["(W @ x)", "W[:, 1]"],
    "A": ["W"],
}
# (template, kind made, kinds taken); binary operations are parenthesised so that any
# result can be indexed or raised to a power as it stands.
RULES: list[tuple[str, str, tuple[str, ...]]] = [
    *[(f, k, (k,)) for k in KINDS for f in ("tanh({0})", "sin({0})", "exp(0.3 * {0})", "({0} ** 2)")],
    *[(f, k, (k, k)) for k in KINDS for f in ("({0} * {1})", "({0} + {1})", "({0} - {1})")],
    *[("({0} * {1})", k, ("S", k)) for k in ("N", "M", "A")],
    ("({0} @ W)", "N", ("M",)), ("(W @ {0})", "M", ("N",)), ("({0} @ {1})", "S", ("N", "N")),
    ("sum({0})", "S", ("N",)), ("sum({0})", "S", ("M",)), ("sum({0})", "S", ("A",)),
    ("{0}[1]", "S", ("N",)), ("{0}[0]", "S", ("M",)), ("{0}[1]", "N", ("A",)),
    ("sum({0}, axis=0)", "N", ("A",)), ("sum({0}, axis=1)", "M", ("A",)), ("({0} * {1})", "A", ("A", "N")),
]


def expression(choose: Choose[Any], kind: str, depth: int, top: bool = False) -> str:
    if depth == 0 or (not top and choose([False, True, True]) is False):
        return choose(LEAVES[kind])  # type: ignore[no-any-return]
    template, _, takes = choose([rule for rule in RULES if rule[1] == kind])
    return template.format(*(expression(choose, k, depth - 1) for k in takes))  # type: ignore[no-any-return]


# ---- the chain of transformations: each makes a function of two arguments from one --------------------

# A result's structure: a shape (a tuple of ints) for a tensor, a list for a tuple of results.
Structure = Any


def leaves(out: Structure, path: str = "") -> list[tuple[str, tuple[int, ...]]]:
    """Each tensor of a result with the indexing that reaches it (`[1][0]`)."""
    if isinstance(out, list):
        return [leaf for k, part in enumerate(out) for leaf in leaves(part, f"{path}[{k}]")]
    return [(path, out)]


def each_leaf(out: Structure, change: Callable[[tuple[int, ...]], Structure]) -> Structure:
    return [each_leaf(part, change) for part in out] if isinstance(out, list) else change(out)


def elements(out: Structure) -> int:
    return sum(math.prod(shape) for _, shape in leaves(out))


@dataclass(frozen=True)
class Function:
    source: str  # an expression giving the function
    args: tuple[tuple[int, ...], tuple[int, ...]]  # the shapes of x and W it is called with
    out: Structure

    def call(self, *args: str) -> str:
        callee = f"({self.source})" if self.source.startswith("lambda") else self.source
        return f"{callee}({', '.join(args)})"

    def made(self, source: str, args: Any, out: Structure) -> Function:
        """The function `source` made from this one."""
        return Function(source, args, out)


DERIVATIVES = ("grad", "value_and_grad", "jacrev", "jacfwd", "hessian")
NEEDS_SCALAR = ("grad", "value_and_grad", "hessian")
ARGNUMS: list[int | tuple[int, int]] = [0, 1, -1, (0, 1), (1, 0)]


def derivative_out(name: str, out: Structure, args: Sequence[tuple[int, ...]], argnums: int | tuple[int, int]) -> Structure:
    """The structure of name(f, argnums)'s result, as JAX (and torch.func) give it."""
    picked = [args[argnums]] if isinstance(argnums, int) else [args[k] for k in argnums]

    def by_each(block: Callable[[tuple[int, ...]], Structure]) -> Structure:
        blocks = [block(a) for a in picked]
        return blocks[0] if isinstance(argnums, int) else blocks

    if name == "grad":
        return by_each(lambda a: a)
    if name == "value_and_grad":
        return [(), by_each(lambda a: a)]
    if name == "hessian":
        return by_each(lambda a: by_each(lambda b: a + b))
    return each_leaf(out, lambda o: by_each(lambda a: o + a))


def spelled_argnums(choose: Choose[Any]) -> tuple[str, int | tuple[int, int]]:
    argnums = choose(ARGNUMS)
    if argnums == 0 and choose([True, False]):
        return "", 0  # (the default)
    return f", argnums={argnums}", argnums


def insert(shape: tuple[int, ...], axis: int, size: int) -> tuple[int, ...]:
    """shape with an axis of `size` at `axis` (negative from the end of the new shape)."""
    at = axis % (len(shape) + 1)
    return shape[:at] + (size,) + shape[at:]


def scalar_of(fn: Function, level: int) -> Function:
    """lambda x, W: the sum of tanh of each result of fn: a scalar to differentiate."""
    x, w = f"x{level}", f"W{level}"
    terms = " + ".join(f"sum(tanh({fn.call(x, w)}{path}))" for path, _ in leaves(fn.out))
    return fn.made(f"lambda {x}, {w}: {terms}", fn.args, ())


def derivative(choose: Choose[Any], fn: Function, name: str) -> Function:
    spelled, argnums = spelled_argnums(choose)
    return fn.made(f"{name}({fn.source}{spelled})", fn.args, derivative_out(name, fn.out, fn.args, argnums))


def closure(choose: Choose[Any], fn: Function, name: str, level: int) -> Function:
    """A transformation by one argument of a lambda that closes over the other (under an
    outer vmap, over that row): a derivative, a jvp whose tangent is the argument itself,
    or a vjp whose cotangent is the function's own result."""
    x, w, a = f"x{level}", f"W{level}", f"a{level}"
    by = choose([0, 1])
    inner = f"lambda {a}: {fn.call(a, w) if by == 0 else fn.call(x, a)}"
    at = x if by == 0 else w
    out: Structure
    if name == "jvp":
        source, out = f"jvp({inner}, ({at},), ({at},))", [fn.out, fn.out]
    elif name == "vjp":
        source, out = f"vjp({inner}, {at})[1]({fn.call(x, w)})[0]", fn.args[by]
    else:
        source, out = f"{name}({inner})({at})", derivative_out(name, fn.out, [fn.args[by]], 0)
    return fn.made(f"lambda {x}, {w}: {source}", fn.args, out)


def vmapped(choose: Choose[Any], fn: Function, size: int) -> Function:
    while True:
        axes = (choose([0, 1, -1, None]), choose([0, 1, -1, None]))
        if axes != (None, None):
            break
    in_axes = f"{axes[0]}" if axes[0] == axes[1] and choose([True, False]) else f"({axes[0]}, {axes[1]})"
    spelled = "" if in_axes == "0" and choose([True, False]) else f", in_axes={in_axes}"
    out_choices = [0, -1] + ([1] if all(len(shape) >= 1 for _, shape in leaves(fn.out)) else [])
    out_axes = choose(out_choices)
    if out_axes != 0 or choose([True, False]):
        spelled += f", out_axes={out_axes}"
    args = tuple(shape if axis is None else insert(shape, axis, size) for shape, axis in zip(fn.args, axes))
    return fn.made(f"vmap({fn.source}{spelled})", args, each_leaf(fn.out, lambda o: insert(o, out_axes, size)))


def transformed(choose: Choose[Any], fn: Function, level: int, vmaps: int) -> tuple[Function, int]:
    """fn with one more transformation (first made scalar, if the one chosen needs it)."""
    while True:
        step = choose(["vmap", "vmap", "closure", "closure", *DERIVATIVES])
        candidate = fn
        if step == "vmap":
            if vmaps == len(BATCHES):
                continue
            candidate = vmapped(choose, fn, BATCHES[vmaps])
        else:
            name = choose([*DERIVATIVES, "jvp", "vjp"]) if step == "closure" else step
            if (name in NEEDS_SCALAR and fn.out != ()) or (name == "vjp" and isinstance(fn.out, list)):
                candidate = scalar_of(fn, level + 10)
            candidate = closure(choose, candidate, name, level) if step == "closure" else derivative(choose, candidate, name)
        if elements(candidate.out) + sum(math.prod(a) for a in candidate.args) <= MAX_ELEMENTS:
            return candidate, vmaps + (step == "vmap")


@dataclass(frozen=True)
class Program:
    body: str
    chain: Function
    xs: list[Any]
    Ws: list[Any]
    variables: bool  # the inputs bound to names (so results keep their graph) or written in place

    def statements(self) -> list[str]:
        if self.variables:
            head = [f"xs = {json.dumps(self.xs)}", f"Ws = {json.dumps(self.Ws)}"]
            return [*head, f"def f(x, W) = {self.body}", self.chain.call("xs", "Ws")]
        return [f"def f(x, W) = {self.body}", self.chain.call(json.dumps(self.xs), json.dumps(self.Ws))]

    def reproduction(self) -> str:
        return f".venv/bin/gradcalc eval '{'; '.join(self.statements())}'"


def program(choose: Choose[Any]) -> Program:
    body = expression(choose, choose(["S", "S", "N", "M", "A"]), choose([1, 2, 3]), top=True)
    fn, vmaps = Function("f", ((N,), (M, N)), KINDS[_kind_of(body)]), 0
    for level in range(choose([1, 2, 2, 3, 3])):
        fn, vmaps = transformed(choose, fn, level, vmaps)
    rng = np.random.default_rng(choose(range(1000)))
    xs, Ws = (np.round(rng.uniform(-1.5, 1.5, size=shape), 1) + 0.0 for shape in fn.args)  # (+ 0.0: no -0.0)
    return Program(body, fn, xs.tolist(), Ws.tolist(), choose([True, False]))


def _kind_of(body: str) -> str:
    """The kind of a body, found by running it on arrays of the inputs' shapes."""
    namespace = {"tanh": np.tanh, "sin": np.sin, "exp": np.exp, "sum": np.sum, "x": np.ones(N), "W": np.ones((M, N))}
    shape = np.shape(eval(body, namespace))  # (our own generated text)
    return next(kind for kind, s in KINDS.items() if s == shape)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    return program(lambda options: draw(sampled(options)))


def seeded_programs(seed: int, count: int) -> list[Program]:
    rng = random.Random(seed)
    return [program(lambda options: rng.choice(list(options))) for _ in range(count)]


# ---- running one program three ways --------------------------------------------------------------------


def tuples_of(f: Callable[[Any], Any], out: Any) -> Any:
    return tuple(tuples_of(f, o) for o in out) if isinstance(out, tuple) else f(out)


def by_position(transform: Callable[..., Any]) -> Callable[..., Any]:
    """torch.func's transform with argnums counted from the front: torch 2.13's jacfwd (and
    so its hessian) gives zeros for argnums=-1, where jacrev and grad count from the end."""

    def made(f: Callable[..., Any], argnums: Any = 0) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            front = tuples_of(lambda k: k % len(args), argnums)
            return transform(f, argnums=front)(*args)

        return call

    return made


def torch_value_and_grad(f: Callable[..., Any], argnums: Any = 0) -> Callable[..., Any]:
    both = by_position(tf.grad_and_value)(f, argnums)

    def swapped(*args: Any) -> tuple[Any, Any]:
        g, v = both(*args)
        return v, g

    return swapped


def torch_vmap(f: Callable[..., Any], in_axes: Any = 0, out_axes: int = 0) -> Callable[..., Any]:
    """tf.vmap, its results' batch axis moved to out_axes afterwards: torch 2.13's out_dims
    other than 0 fails for a result that does not vary over the batch (it expands the
    result's trailing axes to the batch)."""
    mapped = tf.vmap(f, in_dims=in_axes, out_dims=0)
    return lambda *args: tuples_of(lambda t: torch.movedim(t, 0, out_axes), mapped(*args))


def torch_tanh(x: Any) -> Any:
    """tanh whose derivatives torch computes to the last digits at every order and mode.

    torch's own rule, 1 - tanh(x)**2, cancels in the tails: against mpmath its derivatives
    are 2e-10 off (relative) at 8 and 3e-7 at 12, where gradcalc's (through sech) are
    within 4e-16. Past |x| = 1 this is 2 / (1 + e) - 1 with e = exp(-2|x|) <= e**-2, whose
    derivatives by any mix of modes are within 1e-14 of mpmath's to the fourth order
    (and neither overflows nor cancels); below 1, torch's own, accurate there."""
    positive, negative = torch.clamp(x, min=1.0), torch.clamp(x, max=-1.0)
    tail = torch.where(x > 0, 2 / (1 + torch.exp(-2 * positive)) - 1, 1 - 2 / (1 + torch.exp(2 * negative)))
    return torch.where(torch.abs(x) < 1, torch.tanh(x), tail)


MATH = ("tanh", "sin", "exp", "sum")
TORCH_WORDS = {"tanh": torch_tanh, "sin": torch.sin, "exp": torch.exp, "sum": torch.sum, "vmap": torch_vmap, "value_and_grad": torch_value_and_grad,
               **{name: by_position(getattr(tf, name)) for name in ("grad", "jacrev", "jacfwd", "hessian")}, "jvp": tf.jvp, "vjp": tf.vjp}
API_WORDS = {**{name: getattr(ops, name) for name in MATH}, "jvp": autodiff.jvp, "vjp": autodiff.vjp,
             **{name: getattr(autodiff, name) for name in ("vmap", "value_and_grad", "grad", "jacrev", "jacfwd", "hessian")}}


def in_python(p: Program, words: dict[str, Any]) -> Callable[..., Any]:
    """The program's function, its words meaning what `words` binds them to."""
    namespace = dict(words)
    namespace["f"] = eval(f"lambda x, W: {p.body}", namespace)
    return eval(p.chain.source, namespace)  # type: ignore[no-any-return]


def by_torch(p: Program) -> Any:
    return in_python(p, TORCH_WORDS)(*(torch.tensor(a, dtype=torch.float64) for a in (p.xs, p.Ws)))


def by_api(p: Program) -> Any:
    return in_python(p, API_WORDS)(*(Tensor(np.asarray(a, dtype=float)) for a in (p.xs, p.Ws)))


def by_language(p: Program) -> Any:
    return Session().run_source("\n".join(p.statements()))[-1].value


def input_gradients_by_language(p: Program, mode: str) -> dict[str, Any]:
    """d sum(result) / d xs and d Ws, as `gradcalc eval` reports them (its `grad of sum`
    lines), by reverse mode or (--mode forward) by forward mode."""
    session = Session()
    result = session.run_source("\n".join(p.statements()))[-1]
    found = analyze(result.value, None, session.variables, ["xs", "Ws"], session=session, mode=mode)
    return {name: Tensor(np.asarray(found.grads[name], dtype=float)) for name in ("xs", "Ws")}


def input_gradients_by_torch(p: Program) -> dict[str, Any]:
    """The same by torch.autograd through torch.func's transformations."""
    xs, Ws = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (p.xs, p.Ws))
    total = in_python(p, TORCH_WORDS)(xs, Ws).sum()
    found = torch.autograd.grad(total, [xs, Ws], allow_unused=True) if total.requires_grad else (None, None)
    return {name: torch.zeros_like(t) if g is None else g for name, t, g in zip(("xs", "Ws"), (xs, Ws), found)}


def assert_matches(ours: Any, theirs: Any, p: Program, way: str, where: str = "result") -> None:
    said = f"{way}: {where} of\n  {p.reproduction()}\n"
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), f"{said}a tuple of {len(theirs)} in torch, got {ours!r}"
        for k, (o, t) in enumerate(zip(ours, theirs)):
            assert_matches(o, t, p, way, f"{where}[{k}]")
        return
    assert not isinstance(ours, tuple), f"{said}a tensor in torch, got a tuple {ours!r}"
    got = np.asarray(ours.data if isinstance(ours, Tensor) else ours, dtype=float)
    # torch may answer a ZeroTensor (a derivative by what a result does not read), whose
    # .numpy() refuses and whose .numpy(force=True) can crash the process (torch 2.13)
    want = np.zeros(tuple(theirs.shape)) if theirs._is_zerotensor() else theirs.detach().numpy()
    assert got.shape == want.shape, f"{said}shape {got.shape}, torch {want.shape}"
    # (an atol for the sums that cancel to nearly 0, in units of the result's size)
    scale = float(np.nanmax(np.abs(want), initial=1.0))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-13 * scale, equal_nan=True, err_msg=said)


def check(p: Program, api: bool, gradients: str | None = None) -> None:
    """p through the language (and, with api, the Python API) against torch.func; with
    gradients ("reverse" or "forward"), also the gradients of its sum by the inputs that
    `gradcalc eval` reports, where they are variables and the result is one tensor."""
    theirs = by_torch(p)
    assert_matches(by_language(p), theirs, p, "the language")
    if api:
        assert_matches(by_api(p), theirs, p, "the Python API")
    if gradients and p.variables and not isinstance(theirs, tuple):
        ours, want = input_gradients_by_language(p, gradients), input_gradients_by_torch(p)
        for name in ("xs", "Ws"):
            assert_matches(ours[name], want[name], p, f"the report's gradients ({gradients} mode)", f"grad of sum {name}")


# ---- the tests ----------------------------------------------------------------------------------------------


@settings(max_examples=EXAMPLES, deadline=None)
@given(programs(), st.booleans(), st.sampled_from([None, "reverse", "forward"]))
@pytest.mark.slow
def test_compositions_match_torch_func(p: Program, api: bool, gradients: str | None) -> None:
    check(p, api, gradients)


def test_the_command_runs_the_same_programs(tmp_path: Any) -> None:
    """Seeded programs as one script through `gradcalc run --json`: each value (a tuple as
    the line the command prints for it, "shown") and each `grad of sum` it reports, against torch.
    """
    chosen = list(seeded_programs(seed=7, count=16))
    script = tmp_path / "compositions.gc"
    script.write_text("\n".join(s for p in chosen for s in p.statements()) + "\n")
    done = gradcalc("run", "--json", str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(printed) == len(chosen) >= 12
    for p, shown in zip(chosen, printed):
        theirs = by_torch(p)
        if "values" in shown:  # a tuple: its numbers, and the line that shows it (which tells its tuples from arrays)
            assert_matches(numbers(ast.literal_eval(shown["shown"].replace("nan", "None"))), theirs, p, "gradcalc run --json")
            continue
        assert_matches(numbers(shown["value"]), theirs, p, "gradcalc run --json")
        if p.variables:
            want = input_gradients_by_torch(p)
            for name in ("xs", "Ws"):  # (a name the result does not reach is not listed: its gradient is 0)
                got = numbers(shown["grads"][name]) if name in shown["grads"] else np.zeros(tuple(want[name].shape))
                assert_matches(got, want[name], p, "gradcalc run --json", f"grad of sum {name}")


def numbers(value: Any) -> Any:
    """JSON's nested lists (and Python's tuples) as arrays, tuples kept."""
    if isinstance(value, tuple):
        return tuple(numbers(v) for v in value)
    return np.asarray(value, dtype=float)


def case(chain: str, rows: int | None = None) -> Program:
    """A program of f(x, W) = sum(tanh(W @ x)) at fixed inputs (rows of x, for a vmap)."""
    x = [0.5, -1.0, 0.3]
    xs = [[round(x_i * (1 + k / 2), 2) for x_i in x] for k in range(rows)] if rows else x
    return Program("sum(tanh(W @ x))", Function(chain, ((N,), (M, N)), None), xs, [[0.2, 0.4, -0.6], [1.0, -0.5, 0.3]], True)


# The shortest programs of the one kind the generator found to disagree, a result that holds a
# tuple in a tuple (value_and_grad or hessian by argnums=(0, 1), jacrev of a tuple of
# gradients): the language refused them ("got 2 results") and the Python API failed three
# ways, one of them silently (jacrev's lists lacked the blocks by the second input). They
# take tuples nested to any depth now, as JAX and torch.func do.
NESTED_CASES = [
    pytest.param(case(chain, rows), way, id=f"{way}: {chain}")
    for chain, rows in [
        ("vmap(value_and_grad(f, argnums=(0, 1)), in_axes=(0, None))", 2),
        ("jacrev(value_and_grad(f, argnums=(0, 1)))", None),
        ("jacfwd(value_and_grad(f, argnums=(0, 1)))", None),
        ("jacrev(hessian(f, argnums=(0, 1)))", None),
        ("jacfwd(hessian(f, argnums=(0, 1)))", None),
        ("vmap(hessian(f, argnums=(0, 1)), in_axes=(0, None))", 2),
        ("jacrev(jacrev(grad(f, argnums=(0, 1)), argnums=(0, 1)))", None),
        ("lambda x1, W1: jvp(lambda a1: value_and_grad(f, argnums=(0, 1))(a1, W1), (x1,), (x1,))", None),
    ]
    for way in ("language", "api")
]


@pytest.mark.parametrize(("p", "way"), NESTED_CASES)
def test_results_with_nested_tuples_match_torch(p: Program, way: str) -> None:
    theirs = by_torch(p)  # (first: torch answers every one)
    assert_matches((by_language if way == "language" else by_api)(p), theirs, p, way)
