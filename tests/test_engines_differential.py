"""The engines against each other and against independent oracles: where `--engine tensor`,
`--engine torch`, `--engine jax` and `gradcalc export --to jax|torch` disagree, or agree on a
wrong answer.

Every program here goes through the real command, batched: one `gradcalc run --json` per
engine runs all of them (an internal error ends that command, so the runner starts it again
after the file that crashed), one `gradcalc export` per library writes them all as one module,
one `gradcalc check --against torch` checks the classes that crash. The oracles are never
gradcalc's own output: PyTorch float64 eager by hand (tests/test_generated_programs.py's
writer gives each generated program as PyTorch too), torch.func by hand for the
transformations, NumPy's indexing, and closed forms where the libraries share a bug.

What agrees (the classes generated below): whole generated programs (user functions,
closures, recursion, loops, `with no_grad:` updates, unpacking, grad of grad, `hessian(y, x)`,
`jacobian(y, x)`, masks, comparisons, `where`, reductions), also at 0, -0.0 and +-1e-300, on
the three engines against PyTorch by hand; grad / hessian / vmap / jacrev / jacfwd / jvp /
vjp / hvp / value_and_grad of user functions and reductions with axis and keepdims against
torch.func; empty tensors against closed forms; straight-line programs exported to JAX and
PyTorch against `gradcalc run --json`.

What does not, each class pinned by an xfail(strict=True) test below with the command that
shows it (where docs/engines.md's table of conventions states a difference, an op's
derivative at a kink, a tie or an infinity, it is no finding; neither is torch's
0 * inf = nan where gradcalc passes back 0, docs/engine.md):

- refusals of what the tensor engine computes: grad of a whole number on jax (JAX's own
  message);
- a silent wrong answer on torch: the third derivative of det by torch.func, forward
  over reverse and then reverse (pinned in tests/test_engine_table.py);
- the engines split: grad inside `with no_grad:` of a derivative that came out constant;
  reports that list names the value does not depend on (torch, jax) or a named constant
  derivative as a variable (jax);
- export: a loop's number indexed, grad of a whole number, a mixed second derivative
  refused.

Found here and fixed since, their tests passing now: --engine jax clamped an index out of
bounds (x[5] of 3 elements was x[2]); prod's gradient where the product under- or
overflows (prod / x, 0 or inf, where the product of the others is finite); the norm of
elements whose squares overflow on torch and jax (inf, not 1e300); on torch, the
derivative of a constant and the Jacobian of an empty output (internal errors);
`check --against`'s message printing np.float64(0.0); slices with a negative step on
torch, which PyTorch's slicing refuses, in the engine and in export's module; an index
computed inside grad(f) on torch (z[-1], z[len(z) - 1]: every result is wrapped there); in
export, a rebound variable and a range loop's gradient on torch; on torch, the third
derivative of logcumsumexp (nan, not 0: a silent wrong answer) and a derivative of abs
differentiated again (refused: PyTorch's zero tensor, which has no storage, was unread);
internal errors on torch for hessian(f), hvp and jacfwd(jacrev(f)) of std and norm; the
third derivatives of solve and slogdet on torch by torch.func; vmap over an empty batch on
torch.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gradcalc.parser import LanguageError
from tests.launch import run

from . import test_generated_programs as generated

torch = pytest.importorskip("torch")
# One worker for the file: its module fixtures run every program on every engine once, for all its tests.
pytestmark = pytest.mark.xdist_group("engines_differential")

HAS_JAX = importlib.util.find_spec("jax") is not None
LIBRARIES = ("torch", "jax") if HAS_JAX else ("torch",)
ENGINES = ("tensor", *LIBRARIES)
RTOL, ATOL = 1e-12, 1e-12
# (one thread each: the machine's cores are shared; the numbers do not depend on it)
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80", "OMP_NUM_THREADS": "1"}


def command(*args: str) -> subprocess.CompletedProcess[str]:
    done = run(list(args), env=ENV, timeout=600)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


def library(engine: str) -> None:
    if engine == "jax" and not HAS_JAX:
        pytest.skip("the jax extra is not installed")


def engines(on: tuple[str, ...] = ENGINES, **known: str) -> list[Any]:
    """The engines `on` (that are installed) as parameters; each engine named in `known`
    marked xfail(strict=True) with the finding's reason (the test passes there once the
    finding is fixed, and then says so)."""
    return [pytest.param(e, marks=pytest.mark.xfail(strict=True, reason=known[e])) if e in known else e for e in on if e in ENGINES]


def close(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL) -> bool:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))


def value_of(record: dict[str, Any]) -> np.ndarray:
    return np.asarray(record["value"], dtype=float).reshape(record["shape"])


# ---- the batch: every program of this file, one command per engine ------------------------------------


class Batch:
    """Programs by the test that reads them, and the engines they run on; `run` writes each
    to a file and runs them all with one `gradcalc run --json` per engine."""

    def __init__(self) -> None:
        self.programs: dict[str, tuple[list[str], tuple[str, ...]]] = {}

    def add(self, key: str, sources: list[str], on: tuple[str, ...] = ENGINES) -> str:
        self.programs[key] = (sources, on)
        return key

    def run(self, folder: Path, engine: str) -> dict[str, list[dict[str, Any]]]:
        paths = {}
        for key, (sources, on) in self.programs.items():
            for k, source in enumerate(sources if engine in on else []):
                path = folder / f"{key}-{k}.gc"
                path.write_text(source + "\n")
                paths[str(path)] = (key, k)
        found = run_files(engine, list(paths))
        out: dict[str, list[dict[str, Any]]] = {key: [{} for _ in sources] for key, (sources, _) in self.programs.items()}
        for path, (key, k) in paths.items():
            out[key][k] = found[path]
        return out


def run_files(engine: str, paths: list[str]) -> dict[str, dict[str, Any]]:
    """Each file's last record (its program's result, or its error); {"internal": message}
    for a file that ended the command with an internal error (a gradcalc bug)."""
    found: dict[str, dict[str, Any]] = {}
    todo = paths
    while todo:
        done = command("run", "--json", "--engine", engine, *todo)
        for line in done.stdout.splitlines():
            record = json.loads(line)
            # (an error document without a file is the first file not yet reported's)
            found[record.get("file") or next(p for p in todo if p not in found)] = record
        rest = [p for p in todo if p not in found]
        if rest:  # the first file not reported ended the command
            assert "internal error" in done.stderr, done.stderr
            found[rest[0]] = {"internal": done.stderr.strip().splitlines()[-1]}
        todo = rest[1:]
    return found


BATCH = Batch()
# A class found on one library runs there and on the tensor engine (the control): JAX
# compiles each program, a fifth of a second each, so nothing runs there without a reason.
ON_TORCH, ON_JAX = ("tensor", "torch"), ("tensor", "jax")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict[str, Any]]]]:
    folder = tmp_path_factory.mktemp("programs")
    return {engine: BATCH.run(folder, engine) for engine in ENGINES}


def answer_of(record: dict[str, Any]) -> generated.Answer:
    """A report as the generated programs' oracle reads it (an error as the LanguageError it was)."""
    if "internal" in record:
        raise AssertionError(record["internal"])
    if "error" in record:
        raise LanguageError(record["error"]["kind"], record["error"]["message"])
    grads = {name: np.asarray(g, dtype=float) for name, g in record["grads"].items()}
    return generated.Answer(value_of(record), grads)


# ---- generated whole programs, on every engine, against PyTorch by hand ---------------------------------


def negative_step(index: str) -> bool:
    return any(part.count(":") == 2 and part.split(":")[2].strip().startswith("-") for part in re.split(r"[,\]\[]", index))


class Writer(generated.Writer):
    """test_generated_programs' writer without slices of negative step, which --engine torch
    refuses (pinned below): the rest of its programs are what every engine must agree on."""

    def index_same(self, code: str, d: int) -> generated.Code:
        (x, p), index = self.expr(code, d), self.pick([i for i in generated.INDICES[code] if not negative_step(i)])
        return f"({x})[{index}]", generated.ix(p, index)

    def index_other(self, code: str, d: int) -> generated.Code:
        if code == "U":
            (x, p), index = self.expr("M", d), self.pick([":, 0", ":, -1", "..., 1", ":, None, 1][:, 0", "[0, 1], [2, 0]"])
        elif self.chance(0.5):
            (x, p), index = self.expr("M", d), self.pick(["0", "-1", "-2", "..., 0, :", "[1, 1, 0], [0, 2, 1]"])
        else:
            (x, p), index = self.expr("U", d), "[0, 1, 1]"
        return f"({x})[{index}]", generated.ix(p, index)

    def index_matrix(self, code: str, d: int) -> generated.Code:
        x, p = self.expr("M", d)
        return f"({x}).T.T[1:]", generated.ix(p, "1:")

    def empty_sum(self, code: str, d: int) -> generated.Code:
        (x, p), index = self.expr(self.pick(["V", "M"]), d), self.pick(["3:", "2:1", "..., 5:", "1:1"])
        return f"sum(({x})[{index}] * 2)", f"torch.sum({generated.ix(p, index)} * 2)"


class StraightLine(Writer):
    """Programs where every statement binds a new name: nothing is rebound (the exported
    module's functions read each variable's one value; rebinding is a finding below)."""

    def statement(self, indent: int = 0) -> None:
        name, code = f"n{len(self.gc)}", self.pick(["S", "S", "U", "V", "M"])
        text, python = self.expr(code, 3)
        self.emit(f"{name} = {text}", f"{name} = _bind({python})", indent)
        self.names[name], self.kind[name] = code, "inter"


CONSTANT_Y = """
_plain_grad = _grad
def _grad(y, xs, graph=True):
    if not y.requires_grad:
        _CONSTANT_Y.append(y)
    return _plain_grad(y, xs, graph)
"""


def differentiates_a_constant(program: generated.Program) -> bool:
    """Whether the program takes grad, jacobian or hessian of a y without a graph (in its
    PyTorch transliteration): on --engine torch an internal error, pinned below, which ends
    the command; those programs are left out of the torch batch."""
    namespace: dict[str, Any] = {"_CONSTANT_Y": []}
    exec(generated.PRELUDE + CONSTANT_Y, namespace)  # (our own text)
    try:
        with namespace["_Taint"]():
            exec(program.python, namespace)  # (our own generated text)
    except (IndexError, RuntimeError, ValueError):  # a program every engine refuses (an index out of bounds, say)
        pass
    return bool(namespace["_CONSTANT_Y"])


def programs(engine: str, edges: bool, first: int, count: int) -> list[tuple[int, generated.Program]]:
    found: list[tuple[int, generated.Program]] = []
    for seed in range(first, first + 10 * count):
        program = Writer(random.Random(seed), edges=edges).program()
        if engine != "torch" or not differentiates_a_constant(program):
            found.append((seed, program))
        if len(found) == count:
            break
    return found


# Programs per engine, (edges, seed): JAX compiles each program, about half a second each.
WHOLE = {"torch": [(False, *p) for p in programs("torch", False, 50_000, 80)] + [(True, *p) for p in programs("torch", True, 60_000, 40)],
         "jax": [(False, *p) for p in programs("jax", False, 50_000, 10)] + [(True, *p) for p in programs("jax", True, 60_000, 5)]}
for _engine in LIBRARIES:
    BATCH.add(f"whole-{_engine}", [p.source for _, _, p in WHOLE[_engine]], ("tensor", _engine))


def pinned_class(engine: str, ours: dict[str, Any], theirs: dict[str, Any], source: str) -> str | None:
    """The pinned finding a difference between the tensor engine's report and another
    engine's is an instance of (the tests below hold each class), or None."""
    text, mine = json.dumps(theirs), json.dumps(ours)
    if engine == "torch" and "has no attribute 'requires_grad'" in text:
        return "the derivative of a constant on torch"
    if engine == "torch" and "PyTorch is tracing" in text and "PyTorch is tracing" not in mine:
        return "a negative index, or abs, under a derivative of a derivative on torch"
    if engine == "jax" and "use jax.vjp directly" in text:
        return "the derivative of a whole number on jax"
    if engine == "jax" and "out of bounds" in mine and "error" not in theirs:
        return "an index out of bounds on jax"
    if "with no_grad" in source and "has no graph to differentiate" in mine + text and ("error" in ours) != ("error" in theirs):
        return "grad inside no_grad of a derivative that came out constant"
    return None


@pytest.mark.parametrize("engine", LIBRARIES)
@pytest.mark.slow
def test_generated_programs_give_pytorchs_numbers_on_every_engine(reports, engine: str) -> None:
    """Each generated program's value and every gradient its report gives, on the engine,
    against the same program written in PyTorch float64 (the writer's oracle); where the
    tensor engine refuses a program, the engine refuses it too, and the other way round."""
    library(engine)
    failures, agreed, pinned = [], 0, {}
    key = f"whole-{engine}"
    for (edges, seed, program), ours, theirs in zip(WHOLE[engine], reports["tensor"][key], reports[engine][key]):
        found = pinned_class(engine, ours, theirs, program.source)
        if found:
            pinned[found] = pinned.get(found, 0) + 1
            continue
        if "internal" in theirs or ("error" in ours) != ("error" in theirs):
            failures.append(f"seed {seed}: tensor {json.dumps(ours)[:300]}\n{engine} {json.dumps(theirs)[:300]}\n{program.source}")
            continue
        if "error" in ours:
            agreed += ours["error"]["kind"] == theirs["error"]["kind"]
            continue
        wrong = generated.disagreement(program, lambda _source, record=theirs: answer_of(record), edges)
        if wrong:
            failures.append(f"seed {seed}: {wrong}\n{program.source}")
        else:
            agreed += 1
    assert not failures, f"{len(failures)} programs differ on {engine}; the first:\n" + "\n\n".join(failures[:2])
    assert agreed >= 0.6 * len(WHOLE[engine]), f"only {agreed} of {len(WHOLE[engine])} compared; set aside as pinned findings: {pinned}"


# ---- transformations of user functions and reductions, against torch.func by hand ----------------------

# f(z): a number from a vector z (c is a number); (gradcalc, PyTorch, whether torch.func's
# forward mode over reverse takes it: not std and norm, pinned below)
SCALAR_BODIES = [
    ("sum(tanh(z) * z)", "torch.sum(torch.tanh(z) * z)", True),
    ("sum(z ** 3) * c", "torch.sum(z ** 3) * c", True),
    ("log(sum(exp(z)))", "torch.log(torch.sum(torch.exp(z)))", True),
    ("max(z) * min(z)", "torch.amax(z) * torch.amin(z)", True),
    ("sum(softplus(z) * c)", "torch.sum(F.softplus(z) * c)", True),
    ("mean(z * z)", "torch.mean(z * z)", True),
    ("sum(where(z > 0, z, 0.5 * z) ** 2)", "torch.sum(torch.where(z > 0, z, 0.5 * z) ** 2)", True),
    ("logsumexp(z)", "torch.logsumexp(z, 0)", True),
    ("sum(softmax(z) * [1.0, 2.0, 3.0])", "torch.sum(torch.softmax(z, 0) * _c([1.0, 2.0, 3.0]))", True),
    ("prod(z)", "torch.prod(z)", True),
    ("sum(sqrt(z * z + 1))", "torch.sum(torch.sqrt(z * z + 1))", True),
    ("sum(z[0:2] * z[1:3])", "torch.sum(z[0:2] * z[1:3])", True),
    ("var(z)", "torch.var(z, correction=0)", True),
    ("sum(clip(z, -1, 1) * z)", "torch.sum(torch.clamp(z, -1, 1) * z)", True),
    ("sum(maximum(z, c) * z)", "torch.sum(torch.maximum(z, c) * z)", True),
    ("sum(cumsum(z) * sin(z))", "torch.sum(torch.cumsum(z, 0) * torch.sin(z))", True),
    ("norm(z) * c", "torch.linalg.vector_norm(z) * c", False),
    ("std(z)", "torch.std(z, correction=0)", False),
]
# g(z): a vector from a vector
VECTOR_BODIES = [
    ("sin(z) * c", "torch.sin(z) * c"), ("z * sum(z)", "z * torch.sum(z)"), ("softmax(z)", "torch.softmax(z, 0)"),
    ("cumsum(z)", "torch.cumsum(z, 0)"), ("z / norm(z)", "z / torch.linalg.vector_norm(z)"), ("exp(z) - z", "torch.exp(z) - z"),
    ("tanh(z) @ [[1.0, 2.0, 0.5], [0.0, 1.0, -1.0], [2.0, 0.0, 1.0]]", "torch.tanh(z) @ _c([[1.0, 2.0, 0.5], [0.0, 1.0, -1.0], [2.0, 0.0, 1.0]])"),
    ("sort(z)", "torch.sort(z).values"), ("z[[2, 0, 1]] * z", "z[[2, 0, 1]] * z"), ("log_softmax(z) * c", "torch.log_softmax(z, 0) * c"),
]
V = "[1.0, 0.5, -1.0]"
tf = torch.func
Form = tuple[str, Callable[..., Any]]
# (gradcalc, the same by hand, given f or g and x, X, c, v)
SCALAR_FORMS: list[tuple[str, Callable[..., Any], bool]] = [
    ("grad(f)(x)", lambda f, x, X, c, v: tf.grad(f)(x), False),
    ("vmap(f)(X)", lambda f, x, X, c, v: tf.vmap(f)(X), False),
    ("vmap(grad(f))(X)", lambda f, x, X, c, v: tf.vmap(tf.grad(f))(X), False),
    ("grad(f(x), x)", lambda f, x, X, c, v: torch.autograd.grad(f(x), x, create_graph=True)[0], False),
    ("value_and_grad(f)(x)[1] * c", lambda f, x, X, c, v: tf.grad(f)(x) * c, False),
    (f"jvp(f, x, {V})[1]", lambda f, x, X, c, v: tf.jvp(f, (x,), (v,))[1], False),
    ("grad(grad(f(x), x)[0], x)", lambda f, x, X, c, v: torch.autograd.grad(torch.autograd.grad(f(x), x, create_graph=True)[0][0], x,
                                                                             create_graph=True)[0], False),
    ("hessian(f(x), x)", lambda f, x, X, c, v: torch.autograd.functional.hessian(f, x, create_graph=True), False),
    ("hessian(f)(x)", lambda f, x, X, c, v: tf.hessian(f)(x), True),
    (f"hvp(f, x, {V})", lambda f, x, X, c, v: tf.jvp(tf.grad(f), (x,), (v,))[1], True),
    ("ga, gc = grad(f(x), (x, c))\nga * gc", lambda f, x, X, c, v: _product(torch.autograd.grad(f(x), (x, c), create_graph=True, allow_unused=True)), False),
]
VECTOR_FORMS: list[Form] = [
    ("jacrev(g)(x)", lambda g, x, X, c, v: tf.jacrev(g)(x)),
    ("jacfwd(g)(x)", lambda g, x, X, c, v: tf.jacfwd(g)(x)),
    ("jacobian(g(x), x)", lambda g, x, X, c, v: torch.autograd.functional.jacobian(g, x, create_graph=True)),
    ("vmap(jacrev(g))(X)", lambda g, x, X, c, v: tf.vmap(tf.jacrev(g))(X)),
    (f"vjp(g, x)[1]({V})[0]", lambda g, x, X, c, v: tf.vjp(g, x)[1](v)[0]),
]
REDUCTIONS = {"sum": "torch.sum(X, dim={a}, keepdim={k})", "mean": "torch.mean(X, dim={a}, keepdim={k})",
              "max": "torch.amax(X, dim={a}, keepdim={k})", "min": "torch.amin(X, dim={a}, keepdim={k})",
              "prod": "torch.prod(X, dim={a}, keepdim={k})", "logsumexp": "torch.logsumexp(X, dim={a}, keepdim={k})",
              "var": "torch.var(X, dim={a}, keepdim={k}, correction=0)", "std": "torch.std(X, dim={a}, keepdim={k}, correction=0)",
              "norm": "torch.linalg.vector_norm(X, dim={a}, keepdim={k})"}


def _product(grads: tuple[Any, Any]) -> Any:
    ga, gc = (torch.zeros(()) if g is None else g for g in grads)
    return ga * gc


class Transformed:
    """One program of a transformation (or a reduction) and its PyTorch by hand."""

    def __init__(self, rng: random.Random) -> None:
        self.x = [rng.uniform(-1.5, 1.5) for _ in range(3)]
        self.X = [[rng.uniform(-1.5, 1.5) for _ in range(3)] for _ in range(2)]
        self.c = rng.uniform(-2, 2)
        kind = rng.random()
        if kind < 0.55:
            text, python, forward_ok = rng.choice(SCALAR_BODIES)
            form, self.by_hand, forward = rng.choice([f for f in SCALAR_FORMS if forward_ok or not f[2]])
            self.body, self.source = python, f"def f(z) = {text}\n{form}"
        elif kind < 0.85:
            text, python = rng.choice(VECTOR_BODIES)
            form, self.by_hand = rng.choice(VECTOR_FORMS)
            self.body, self.source = python, f"def g(z) = {text}\n{form}"
        else:
            name, axis, keep = rng.choice(list(REDUCTIONS)), rng.choice([0, 1, -1]), rng.choice([True, False])
            self.body, self.source = REDUCTIONS[name].format(a=axis, k=keep), f"{name}(X, axis={axis}, keepdims={str(keep).lower()}) * c"
            self.by_hand = lambda _f, x, X, c, v: eval(self.body, {"torch": torch, "X": X}) * c  # (our own text)
        self.program = f"x = {self.x!r}\nX = {self.X!r}\nc = {self.c!r}\n{self.source}"

    def oracle(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The value, and the gradient of its sum by x, X and c, by PyTorch."""
        x, X, c = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (self.x, self.X, self.c))
        namespace = {"torch": torch, "F": torch.nn.functional, "c": c, "_c": lambda a: torch.tensor(a, dtype=torch.float64)}
        body = eval(f"lambda z: {self.body}", namespace)  # (our own text)
        out = self.by_hand(body, x, X, c, torch.tensor([1.0, 0.5, -1.0], dtype=torch.float64))
        found = torch.autograd.grad(out.sum(), (x, X, c), allow_unused=True) if out.requires_grad else (None, None, None)
        grads = {n: np.zeros(np.shape(a)) if g is None else g.detach().numpy() for n, a, g in zip("xXc", (self.x, self.X, self.c), found)}
        return out.detach().numpy(), grads


TRANSFORMED = {"torch": [Transformed(random.Random(seed)) for seed in range(70_000, 70_070)],
               "jax": [Transformed(random.Random(seed)) for seed in range(70_000, 70_020)]}
for _engine in LIBRARIES:
    BATCH.add(f"transformed-{_engine}", [t.program for t in TRANSFORMED[_engine]], ("tensor", _engine))


@pytest.mark.parametrize("engine", ENGINES)
def test_transformations_of_user_functions_give_torch_funcs_numbers(reports, engine: str) -> None:
    """grad, hessian, vmap, jacrev, jacfwd, jvp, vjp, hvp and value_and_grad of user
    functions, grad of grad, a tuple of gradients unpacked, and reductions with axis and
    keepdims: the value and the gradient of its sum by x, X and c, against torch.func and
    torch.autograd by hand, to 1e-12."""
    library(engine)
    failures = []
    for case_engine in LIBRARIES:
        if engine not in ("tensor", case_engine):
            continue
        for case, record in zip(TRANSFORMED[case_engine], reports[engine][f"transformed-{case_engine}"]):
            value, grads = case.oracle()
            if "value" not in record:
                failures.append(f"{case.program}\n{json.dumps(record)[:300]}")
            elif not close(value_of(record), value):
                failures.append(f"{case.program}\nvalue {record['value']}, torch.func {value.tolist()}")
            else:
                failures += [f"{case.program}\ngrad {n}: {record['grads'].get(n)}, torch {g.tolist()}" for n, g in grads.items()
                             if not close(record["grads"].get(n, np.zeros_like(g)), g, rtol=1e-11, atol=1e-11)]
    assert not failures, f"{len(failures)} differ on {engine}; the first:\n" + "\n\n".join(failures[:3])


# ---- empty tensors, against closed forms ---------------------------------------------------------------

# (program after x = [0.5, -1.0, 2.0] and s = 1.5; its value; the gradients of its sum by x and s)
Z3 = [0.0, 0.0, 0.0]
EMPTIES = [
    ("sum(x[0:0] * 2) + s", 1.5, Z3, 1.0),
    ("prod(x[0:0]) * s", 1.5, Z3, 1.0),
    ("norm(x[1:1]) + s", 1.5, Z3, 1.0),
    ("logsumexp(x[3:]) + s", -math.inf, Z3, 1.0),
    ("mean(x[0:0]) * s", math.nan, Z3, math.nan),
    ("softmax(x[0:0] * s)", np.zeros(0), Z3, 0.0),
    ("cumsum(x[2:2]) * s", np.zeros(0), Z3, 0.0),
    ("E = zeros((0, 3)) + x\nsum(E, axis=0) * s", [0.0, 0.0, 0.0], Z3, 0.0),
    ("E = zeros((0, 3)) + x\nmax(E, axis=1) * s", np.zeros(0), Z3, 0.0),
    ("E = zeros((0, 3)) + x\nvmap(lambda r: sum(r * r))(E) * s", np.zeros(0), Z3, 0.0),
    ("x @ zeros((3, 0)) * s", np.zeros(0), Z3, 0.0),
    ("hessian(sum(x[0:0]) * s, x)", np.zeros((3, 3)), Z3, 0.0),
    ("jacrev(lambda z: z[0:0] * s)(x)", np.zeros((0, 3)), Z3, 0.0),
    ("jacfwd(lambda z: z[0:0] * s)(x)", np.zeros((0, 3)), Z3, 0.0),
    ("grad(sum(x[0:0] ** 2) * s, x)", Z3, Z3, 0.0),
    ("var(x[0:0], ddof=0) + s", math.nan, Z3, 1.0),
]
BATCH.add("empty", [f"x = [0.5, -1.0, 2.0]\ns = 1.5\n{source}" for source, *_ in EMPTIES])


@pytest.mark.parametrize("engine", ENGINES)
def test_empty_tensors_give_the_closed_forms(reports, engine: str) -> None:
    """Reductions, softmax, matmul, vmap, Jacobians and Hessians of empty tensors: the value
    (sum 0, prod 1, logsumexp -inf, mean nan, empty shapes) and zero gradients, as NumPy and
    torch.func give them (docs/language.md: an empty output has a derivative of its shape,
    all zeros); `max` of an empty tensor is an error everywhere."""
    library(engine)
    wrong = []
    for (source, value, dx, ds), record in zip(EMPTIES, reports[engine]["empty"]):
        if "value" not in record or not close(value_of(record), np.asarray(value, dtype=float)):
            wrong.append(f"{source}: {json.dumps(record)[:200]}")
            continue
        grads = record["grads"]
        if not close(grads.get("x", Z3), dx) or not close(grads.get("s", 0.0), ds):
            wrong.append(f"{source}: grads {grads}, want x {dx}, s {ds}")
    assert not wrong, "\n".join(wrong)


# ---- found: what --engine jax and --engine torch refuse, crash on, or compute otherwise ----------------
#
# Each class: a minimal command in the docstring, several instances run in the batch, the
# oracle's answer; xfail(strict=True) so that the suite stays green until it is fixed.


def instances(key: str, engine: str, reports: dict[str, Any]) -> list[dict[str, Any]]:
    library(engine)
    return reports[engine][key]


NEGATIVE_STEPS = [  # (program after x = [0.5, -1.0, 2.0] and M = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], the same in NumPy)
    ("x[::-1] * [1.0, 10.0, 100.0]", lambda x, M: x[::-1] * [1.0, 10.0, 100.0]),
    ("x[2::-2]", lambda x, M: x[2::-2]),
    ("M[:, ::-1] * x", lambda x, M: M[:, ::-1] * x),
    ("x[-1:0:-1] * x[1:]", lambda x, M: x[-1:0:-1] * x[1:]),
    ("M[::-1, 1]", lambda x, M: M[::-1, 1]),
]
BATCH.add("negative-steps", [f"x = [0.5, -1.0, 2.0]\nM = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]\n{source}" for source, _ in NEGATIVE_STEPS], ON_TORCH)


@pytest.mark.parametrize("engine", engines(ON_TORCH))
def test_slices_with_a_negative_step(reports, engine: str) -> None:
    """`gradcalc eval 'x[::-1]' 'x=[1,2,3]' --engine torch` gives [3, 2, 1], as NumPy and the
    tensor and JAX engines do (docs/language.md, "Indexing": slices `a:b:c` ... as in NumPy).
    PyTorch's slicing has no negative step: it said "getitem(x, index): step must be
    greater than zero" until torch_ops.op_getitem took such a slice as a slice of the
    flipped axis (tests/test_engine_indexing.py holds it to NumPy on generated indexes)."""
    x, M = np.array([0.5, -1.0, 2.0]), np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for (source, numpy), record in zip(NEGATIVE_STEPS, instances("negative-steps", engine, reports)):
        assert "value" in record and close(value_of(record), numpy(x, M)), f"{source}: {json.dumps(record)[:300]}"


def assert_each(cases: list[Any], records: list[dict[str, Any]], check: Callable[[Any, dict[str, Any]], str | None]) -> None:
    wrong = [f"{case if isinstance(case, str) else case[0]}: {found}" for case, record in zip(cases, records) if (found := check(case, record))]
    assert not wrong, f"{len(wrong)} of {len(cases)}:\n" + "\n".join(wrong)


def expect(value: Any, grads: dict[str, Any]) -> Callable[[Any, dict[str, Any]], str | None]:
    """A check of a report against the closed form: value and the named gradients."""
    def check(_case: Any, record: dict[str, Any]) -> str | None:
        if "value" not in record:
            return json.dumps(record)[:300]
        if not close(value_of(record), value):
            return f"value {record['value']}, want {np.asarray(value).tolist()}"
        bad = {n: record["grads"].get(n) for n, g in grads.items() if not close(record["grads"].get(n, np.zeros(np.shape(g))), g)}
        return f"grads {bad}, want {grads}" if bad else None
    return check


NEGATIVE_INDEX_UNDER_GRAD = [  # (program after x = [0.5, -1.0, 2.0], c = [3.0, 4.0], X = [[1.0, 2.0], [3.0, -4.0]]; value)
    ("grad(lambda z: z[-1] * 2)(x)", [0.0, 0.0, 2.0]),
    ("grad(lambda z: sum(z * c[-1]) + z[1])(x)", [4.0, 5.0, 4.0]),
    ("jacrev(lambda z: z[-1] * z)(x)", [[2.0, 0.0, 0.5], [0.0, 2.0, -1.0], [0.0, 0.0, 4.0]]),
    ("vmap(grad(lambda r: r[-2] ** 2))(X)", [[2.0, 0.0], [6.0, 0.0]]),
    ("hessian(lambda z: z[-1] ** 3)(x)", [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 12.0]]),
    ("grad(lambda z: z[len(z) - 1] * 3)(x)", [0.0, 0.0, 3.0]),  # (indexes computed inside the function)
    ("grad(lambda z: z[1 + 0] ** 2)(x)", [0.0, -2.0, 0.0]),
    ("grad(lambda z: z[argmax(z)] * z[0])(x)", [2.0, 0.0, 0.5]),
]
BATCH.add("negative-index-under-grad", [f"x = [0.5, -1.0, 2.0]\nc = [3.0, 4.0]\nX = [[1.0, 2.0], [3.0, -4.0]]\n{p}"
                                        for p, _ in NEGATIVE_INDEX_UNDER_GRAD], ON_TORCH)


@pytest.mark.parametrize("engine", engines(ON_TORCH))
def test_a_negative_index_inside_a_transformed_function(reports, engine: str) -> None:
    """`gradcalc eval 'grad(lambda z: z[-1] * 2)(x)' 'x=[1,2]' --engine torch` gives [0, 2], as
    the closed forms and the tensor and JAX engines do. It said "this needs a number that
    PyTorch is tracing": inside torch.func.grad every op's result is wrapped, the -1 that
    negates a constant 1 too, and a wrapped tensor has no storage to copy; its numbers are
    read as a list now (inside vmap, where they differ by row, PyTorch still refuses)."""
    assert_each(NEGATIVE_INDEX_UNDER_GRAD, instances("negative-index-under-grad", engine, reports), lambda case, r: expect(case[1], {})(case, r))


ZERO_DERIVATIVES = [  # (program after x = [0.3, -0.5, 0.7]; value; d sum(value) / dx)
    ("grad(grad(sum(abs(x) * x), x)[0], x)", [2.0, 0.0, 0.0], Z3),
    ("hessian(sum(abs(x) * x), x)", np.diag([2.0, -2.0, 2.0]), Z3),
    ("grad(lambda z: sum(abs(z)))(x)", [1.0, -1.0, 1.0], Z3),
    ("jacfwd(abs)(x)", np.diag([1.0, -1.0, 1.0]), Z3),
    ("vmap(grad(lambda r: sum(abs(r) * r)))([x, -x])", [[0.6, 1.0, 1.4], [0.6, 1.0, 1.4]], [4.0, -4.0, 4.0]),
]
BATCH.add("zero-derivatives", [f"x = [0.3, -0.5, 0.7]\n{p}" for p, *_ in ZERO_DERIVATIVES], ON_TORCH)


@pytest.mark.parametrize("engine", engines(ON_TORCH))
def test_a_derivative_of_abs_differentiated_again(reports, engine: str) -> None:
    """`gradcalc eval 'grad(lambda z: sum(abs(z)))(x)' 'x=[0.3,-0.5]' --engine torch` was
    refused with "needs a number that PyTorch is tracing", for a program with no index and
    no condition: the report's derivative of sign(x) is PyTorch's zero tensor without
    storage, which the report could not read (TorchLibrary.host reads it as zeros now). Closed forms: d/dx sum(|x| x) = 2|x|, its derivative
    2 sign(x), and the derivative of that 0 (x away from 0)."""
    assert_each(ZERO_DERIVATIVES, instances("zero-derivatives", engine, reports), lambda case, r: expect(case[1], {"x": case[2]})(case, r))


EMPTY_BATCHES = [  # (program; value; d sum / ds): vmap over an empty batch of a function with a reduction and a closure
    ("E = zeros((0, 3))\nvmap(lambda r: sum(r * r) * s)(E)", np.zeros(0), 0.0),
    ("E = zeros((0, 2))\nvmap(lambda r: norm(r) + s)(E)", np.zeros(0), 0.0),
    ("E = zeros((0, 3))\nvmap(lambda r: mean(r) * s)(E) + s", np.zeros(0), 0.0),
]
BATCH.add("empty-batches", [f"s = 1.5\n{p}" for p, *_ in EMPTY_BATCHES], ON_TORCH)


@pytest.mark.parametrize("engine", engines(ON_TORCH))
def test_vmap_over_an_empty_batch(reports, engine: str) -> None:
    """`gradcalc eval 'vmap(lambda r: sum(r * r) * s)(E)' 'E=zeros((0, 3))' s=1.5 --engine
    torch` said "needs a number that PyTorch is tracing" (torch.func.vmap itself raises an
    IndexError on an empty batch there); the tensor and JAX engines give the empty result
    and 0 by s, as vmap's definition (one result per row, none here) does, and so does the
    torch engine now (TorchLibrary._vmap: one row of zeros added, and cut off)."""
    assert_each(EMPTY_BATCHES, instances("empty-batches", engine, reports), lambda case, r: expect(case[1], {"s": case[2]})(case, r))


OUT_OF_BOUNDS = ["x[5]", "x[-4]", "M[2, 0]", "M[0, 3]", "x[[0, 7]]", "M[1:][1, 0]", "sum(x[[3, -4]] * 2)",
                 "L = x[3]\nwith no_grad:\n    x -= grad(L, x)\nx"]
BATCH.add("out-of-bounds", [f"x = [0.5, -1.0, 2.0]\nM = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]\n{p}" for p in OUT_OF_BOUNDS], ON_JAX)


@pytest.mark.parametrize("engine", engines(ON_JAX))
def test_an_index_out_of_bounds_is_an_error(reports, engine: str) -> None:
    """`gradcalc eval 'x[5]' 'x=[1,2]' --engine jax` prints value 2.0 (and grad [0, 1]):
    JAX clamps an index out of bounds to the last element (x[-4] is x[0]), silently. NumPy,
    PyTorch, and the tensor and torch engines say "index 5 is out of bounds for axis 0 with
    size 2"; a gradient step taken at the clamped index updates the wrong element."""
    assert_each(OUT_OF_BOUNDS, instances("out-of-bounds", engine, reports),
                lambda _, r: None if "error" in r and "out of bounds" in r["error"]["message"] else f"no error: {json.dumps(r)[:200]}")


CONSTANT_DERIVATIVE_IN_NO_GRAD = [
    "a = 1.5\nL = grad(3 * a, a)\nwith no_grad:\n    a -= 0.1 * grad(L, a)\na",
    "acc = 1.0\nw = [1.0, 2.0]\nL = relu(grad(w, acc))\nwith no_grad:\n    acc -= 0.1 * grad(L, acc)\nacc",
    "b = 2.0\nM = [1.0, 2.0]\nL = cos(grad(b, b) ** 2)\nwith no_grad:\n    M -= 0.1 * grad(L, M)\nM",
    "v = [1.0, -2.0]\nL = sum(grad(2 * v, v))\nwith no_grad:\n    v -= 0.1 * grad(L, v)\nv",
]
BATCH.add("constant-derivative-in-no-grad", CONSTANT_DERIVATIVE_IN_NO_GRAD)


@pytest.mark.xfail(strict=True, reason="grad(L, w) inside no_grad, L a derivative that came out constant: refused on some engines, 0 on others")
def test_grad_inside_no_grad_of_a_derivative_that_came_out_constant(reports) -> None:
    """`L = grad(3 * a, a); with no_grad: a -= 0.1 * grad(L, a)` (L is a constant, 3, computed
    before the block): the tensor and JAX engines step by 0, `--engine torch` refuses ("y has
    no graph to differentiate"); with `L = relu(grad(w, acc))` the tensor and torch engines
    refuse and JAX steps by 0. One program, two answers: the engines must agree (docs/language.md
    "Values without gradients": such an L is a constant, as `detach(3)` is, which all three
    refuse inside the block)."""
    split = []
    for k, source in enumerate(CONSTANT_DERIVATIVE_IN_NO_GRAD):
        refused = {engine: "error" in reports[engine]["constant-derivative-in-no-grad"][k] for engine in ENGINES}
        if len(set(refused.values())) > 1:
            split.append(f"{source!r}: refused on {[e for e, r in refused.items() if r]}, computed on {[e for e, r in refused.items() if not r]}")
    assert not split, "\n".join(split)


# The report: which names it lists (docs/language.md, "Named values": every name whose value
# is a node of the output's graph that carries a gradient; "Values without gradients": a
# derivative that came out constant stays a constant, not reported).
LISTED = [  # (program; the names PyTorch's graph gives, requires_grad, as the tensor engine lists them)
    ("a = 1.0\nb = 2.0\ngrad(b * b, (b, a))[0]", ["b"]),
    ("x = [1.0, -2.0]\ngrad(sum(x > 0), x)", []),
    ("x = [1.0, -2.0]\ngrad(detach(x) * 2, x)", []),
    ("x = [1.0, -2.0]\nhessian(sum(x * 2), x)", []),
    ("s = 1.5\nx = [1.0, -2.0]\ngrad(grad(s * x, s), s)", []),
]
BATCH.add("listed", [p for p, _ in LISTED])
CONSTANT_DERIVATIVES = [  # (program; value; its gradients: g is a constant, not listed)
    ("x = 1.0\ng = grad(3 * x, x)\ng * x", 3.0, {"x": 3.0}),
    ("x = 1.0\ng = grad(sin(2.0), x)\ng + x", 1.0, {"x": 1.0}),
    ("x = [1.0, 2.0]\ng = grad(sum(x) * 2, x)\nsum(g * x)", 6.0, {"x": [2.0, 2.0]}),
]
BATCH.add("constant-derivatives", [p for p, *_ in CONSTANT_DERIVATIVES], ON_JAX)


@pytest.mark.parametrize("engine", engines(torch="--engine torch lists names the output does not depend on, with zero gradients",
                                             jax="--engine jax lists names the output does not depend on, with zero gradients"))
def test_a_report_lists_only_names_that_carry_a_gradient(reports, engine: str) -> None:
    """`gradcalc run` of `a = 1; b = 2; grad(b * b, (b, a))[0]` lists grad b on the tensor
    engine and grad b and grad a (0.0) on torch and jax; `grad(sum(x > 0), x)` lists grad x
    (zeros) on jax only. The value 2b depends on b alone, as PyTorch's own graph of
    torch.autograd.grad(b * b, (b, a), create_graph=True)[0] says."""
    assert_each(LISTED, instances("listed", engine, reports), lambda case, r: None if sorted(r["grads"]) == case[1] else f"lists {sorted(r['grads'])}")


@pytest.mark.parametrize("engine", engines(ON_JAX, jax="--engine jax reports a named derivative that came out constant as a variable, with a gradient"))
def test_a_named_derivative_that_came_out_constant_is_no_variable(reports, engine: str) -> None:
    """`gradcalc eval 'g = grad(3 * x, x); g * x' x=1 --engine jax` prints "grad g: 1.0" beside
    grad x: 3.0; docs/language.md's own example (`g = grad(3 * x, x)`, a derivative that came
    out constant, stays a constant and is not reported), and the tensor and torch engines,
    list x only."""

    def check(case: Any, record: dict[str, Any]) -> str | None:
        found = expect(case[1], case[2])(case, record)
        return found or (None if sorted(record["grads"]) == sorted(case[2]) else f"lists {record['grads']}")
    assert_each(CONSTANT_DERIVATIVES, instances("constant-derivatives", engine, reports), check)


# ---- found: numbers where the libraries (or gradcalc) are not exact --------------------------------------


def product_of_others(x: list[float]) -> list[float]:
    """d prod(x) / dx_i, the product of the other elements (`gradcalc ops prod`: "the product
    of the other elements"), in Python floats: finite where the whole product is not."""
    return [math.prod(x[:i] + x[i + 1:]) for i in range(len(x))]


PRODUCTS = [[1e-200, 1e-200, 3.0], [-1e300, 3.0, 1e300], [1e200, 1e200, 2.0], [1e-150, 1e-150, 1e-150, 7.0], [2e-170, 5e-170, -4.0]]
BATCH.add("products", [f"x = {x!r}\nprod(x)" for x in PRODUCTS])
BATCH.add("products-by-rows", ["X = [[1e-200, 1e-200, 3.0], [1.0, 2.0, 3.0]]\nsum(prod(X, axis=1))"])


@pytest.mark.parametrize("engine", engines(
    tensor="prod's gradient is prod(x) / x: 0 or inf where the product under- or overflows and the product of the others is finite",
    torch="--engine torch's prod (torch.prod's backward) divides as the tensor engine does"))
def test_the_gradient_of_a_product_that_under_or_overflows(reports, engine: str) -> None:
    """`gradcalc eval 'prod(x)' 'x=[1e-200, 1e-200, 3]'`: value 0 (it underflows) and grad x
    [0, 0, 0]; the derivative by x[0] is x[1] * x[2] = 3e-200, a normal float, which
    `--engine jax` gives (and torch.func.grad does: `grad(lambda z: prod(z))(x)` on
    --engine torch is right where `prod(x)`'s report is not). At [-1e300, 3, 1e300] the
    derivative by x[0] is 3e300, not inf. The closed form is the product of the others."""
    records = instances("products", engine, reports)
    assert_each([repr(x) for x in PRODUCTS], records,
                lambda case, r: None if close(r["grads"]["x"], product_of_others(eval(case)), rtol=1e-12, atol=0) else f"grad {r['grads']['x']}")
    by_rows = instances("products-by-rows", engine, reports)[0]
    assert close(by_rows["grads"]["X"], [[3e-200, 3e-200, 1e-400], [6.0, 3.0, 2.0]], rtol=1e-12, atol=0), by_rows["grads"]


HUGE_NORMS = [  # (program; value; gradient by x): the squares overflow, the norm does not
    ("x = [1e300, -2.0, -2.0]\nnorm(x)", 1e300, [1.0, -2e-300, -2e-300]),
    ("x = [3e200, 4e200]\nnorm(x)", 5e200, [0.6, 0.8]),
    ("x = [0.5, 0.0, 1e300]\njvp(norm, x, [1.0, 0.5, -1.0])[1]", -1.0, None),
    ("X = [[3e200, 4e200], [3.0, 4.0]]\nnorm(X, axis=1)", [5e200, 5.0], None),
]
BATCH.add("huge-norms", [p for p, *_ in HUGE_NORMS])


@pytest.mark.parametrize("engine", engines())
def test_the_norm_of_huge_elements(reports, engine: str) -> None:
    """`gradcalc eval 'norm(x)' 'x=[3e200, 4e200]' --engine torch` (and jax): value inf,
    gradient [0, 0]; the norm is 5e200 (math.hypot's answer), gradient x / norm(x) = [0.6,
    0.8], which the tensor engine gives. docs/engines.md's table states the libraries'
    difference for tiny elements (their squares underflow to a norm of 0), not this twin."""
    assert_each(HUGE_NORMS, instances("huge-norms", engine, reports),
                lambda case, r: expect(case[1], {} if case[2] is None else {"x": case[2]})(case, r))


LOGCUMSUMEXP = [[0.3, 0.55, 0.7], [-1.0, 2.0, 0.5], [0.0, 0.1, -0.2, 1.5]]
BATCH.add("logcumsumexp", [f"x = {x!r}\nhessian(sum(logcumsumexp(x) * {list(range(1, len(x) + 1))!r}), x)" for x in LOGCUMSUMEXP], ON_TORCH)


@pytest.mark.parametrize("engine", engines(ON_TORCH))
def test_the_third_derivative_of_logcumsumexp(reports, engine: str) -> None:
    """`gradcalc eval 'hessian(sum(logcumsumexp(x) * [1, 2, 3]), x)' 'x=[0.3, 0.55, 0.7]'
    --engine torch`: the Hessian agreed, its gradient (a third derivative) was [nan, nan, nan],
    as torch.autograd gives by hand with torch.logcumsumexp (the torch adapter has rules of
    its own now, torch_ops._LogCumSumExp). Closed form: logcumsumexp(x + t) = logcumsumexp(x) + t,
    so the function is linear along the ones vector, the sum of its Hessian is 0 at every x,
    and the gradient of that sum is 0."""
    for x, record in zip(LOGCUMSUMEXP, instances("logcumsumexp", engine, reports)):
        assert close(record["grads"]["x"], np.zeros(len(x)), atol=1e-9), f"{x}: {record['grads']}"


# ---- found: `gradcalc check --against torch` -------------------------------------------------------------

CHECKED = {  # class -> checks (after x = [0.3, 0.55, 0.7], s = 1.5, E = zeros((0, 3)) + x, M a 3 x 3): each passes on gradcalc's engine
    "constant": ["grad(0.1, x)", "jacobian(3.0, x)", "hessian(3.0, x)", "grad(len(x), x) + x"],
    "forward-over-reverse": ["hessian(lambda z: std(z))(x)", "hvp(norm, x, [1.0, 0.5, -1.0])", "jacfwd(jacrev(lambda z: std(z, ddof=1)))(x)",
                             "hessian(lambda z: norm(z) * s)(x)", "hvp(lambda z: huber(z, 0.5 * z), x, x)",
                             "jacfwd(grad(lambda z: huber(z, 0.5 * z, delta=0.1)))(x)"],
    "empty-jacobian": ["jacobian(x[0:0] * 2, x)", "jacobian(x[0:0] * s, s)", "jacobian(E * s, x)"],
    # (a check of a Hessian compares its gradient, a third derivative: PyTorch's own were nan or wrong)
    "third-derivative": ["hessian(lambda A: sum(solve(A, x) * x))(M)", "hessian(lambda z: sum(logcumsumexp(z) * [1, 2, 3]))(x)",
                         "hessian(lambda A: slogdet(A)[1])(M)"],
}
# a documented difference (docs/engines.md: softmax with inf, gradcalc [1, 0], PyTorch nan): the verdict's message
DIFFERENT_VALUES = "softmax(x[0:2] * [1.0, inf])"


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Every check of CHECKED, and the documented difference, in one `gradcalc check --against torch --json`."""
    lines = ["x = [0.3, 0.55, 0.7]", "s = 1.5", "E = zeros((0, 3)) + x", "M = [[2.0, 0.5, 0.1], [0.3, 1.5, 0.2], [0.1, 0.4, 1.8]]"]
    where: dict[int, str] = {}
    for kind, checks in [*CHECKED.items(), ("values", [DIFFERENT_VALUES])]:
        for check in checks:
            lines.append(f"check {check}")
            where[len(lines)] = kind
    path = tmp_path_factory.mktemp("checks") / "classes.gc"
    path.write_text("\n".join(lines) + "\n")
    done = command("check", str(path), "--against", "torch", "--json")
    found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in [*CHECKED, "values"]}
    for result in json.loads(done.stdout)["checks"]:
        found[where[result["line"]]].append(result)
    return found


@pytest.mark.parametrize("kind", [
    "constant",
    "forward-over-reverse",
    "empty-jacobian",
    "third-derivative",
])
@pytest.mark.slow
def test_what_crashes_on_torch_checks_on_gradcalcs_engine(checked, kind: str) -> None:
    """`gradcalc eval 'grad(0.1, x)' x=2 --engine torch`, `gradcalc eval 'hessian(std)(x)'
    'x=[1,2,4]' --engine torch`, `gradcalc eval 'jacobian(x[0:0] * 2, x)' 'x=[1,2,3]' --engine
    torch`: "internal error: AttributeError: 'numpy.ndarray' object has no attribute
    'requires_grad'", "... modified by an inplace operation ...", "shape '[1, 0]' is invalid"
    (and `gradcalc run` stops at the first, leaving the files after it unrun). The same checks
    pass on the tensor engine against their numerical derivatives, and give zeros (the
    derivative of a constant, docs/language.md), the Hessian, an empty Jacobian of shape (0, 3).
    (The second was PyTorch's: its std and vector_norm set their derivative at 0 in place,
    which it refuses to differentiate a third time; torch_ops._root selects it instead.)"""
    wrong = [f"line {r['line']}: {r['status']} {r['message'][:160]}" for r in checked[kind] if r["status"] != "pass"]
    assert not wrong and len(checked[kind]) == len(CHECKED[kind]), "\n".join(wrong)


def test_a_disagreement_in_values_prints_plain_numbers(checked) -> None:
    """`gradcalc check FILE --against torch` on `check softmax(x[0:2] * [1.0, inf])`: "(engines
    disagree: the values differ at out[0]: gradcalc np.float64(0.0), PyTorch np.float64(nan))";
    the gradient's message prints numbers as the report does ("gradcalc 0.0, JAX nan",
    docs/engines.md)."""
    [result] = checked["values"]
    assert result["status"] == "disagree" and "the values differ at out[0]: gradcalc 0.0, PyTorch nan" in result["message"], result["message"]


# ---- export: the module against `gradcalc run --json` ------------------------------------------------------

STRAIGHT = [StraightLine(random.Random(seed)).program() for seed in range(80_000, 80_045)]
EXPORTED = {"torch": 40, "jax": 16}  # how many of those (that run) each library's module holds
BATCH.add("straight-line", [p.source for p in STRAIGHT], ("tensor",))

# Programs whose module was or is wrong (each class tested below): (class, program, its value, the gradient of its sum by each variable or None)
EXPORT_FOUND = [
    ("rebinding", "x = 2.0\nx -= 0.5 * x\nx * 3", 3.0, None),
    ("rebinding", "x = 2.0\nx = x - 0.5 * x\nx * 3", 3.0, None),
    ("rebinding", "w = [1.0, 2.0]\ny = w * 2\nw = w + 1\nsum(w * y)", 16.0, None),
    ("rebinding", "a = 1.5\nacc = 0\nfor i in range(3): acc += a * i\nacc", 4.5, None),
    ("loop number", "x = 2.0\nfor i in range(2): y = x * i[None][0]\ny", 2.0, {"x": 1.0}),
    ("range loop", "x = 2.0\nfor i in range(3): y = x * i\ny", 4.0, {"x": 2.0}),
    ("range loop", "x = 1.5\nfor k in range(1, 4): y = x ** k\ny", 3.375, {"x": 6.75}),
    ("negative step", "x = [1.0, 2.0, 3.0]\nsum(x[::-1] * [1.0, 10.0, 100.0])", 123.0, {"x": [100.0, 10.0, 1.0]}),
    ("negative step", "M = [[1.0, 2.0], [3.0, 4.0]]\nsum(M[:, ::-1] * [[1.0, 10.0], [100.0, 1000.0]])", 3412.0, {"M": [[10.0, 1.0], [1000.0, 100.0]]}),
    ("length", "w = [1.0, 2.0]\ngrad(len(w), w) + w", [1.0, 2.0], {"w": [1.0, 1.0]}),
    ("whole number", "w = [1.0, 2.0]\ngrad(argmax(w), w) * w", [0.0, 0.0], {"w": [0.0, 0.0]}),
    ("whole number", "w = [1.0, 2.0]\ngrad(w.shape[0], w) + w", [1.0, 2.0], {"w": [1.0, 1.0]}),
]


# a name a statement binds: at a line's start, after `;` or a one-line block's `:`
BOUND = re.compile(r"(?:^|[;:])[ \t]*(?:for\s+(\w+)\s+in\b|def\s+(\w+)\b|([\w \t,]+?)[ \t]*(?:[-+*/%@]|//|\*\*)?=(?!=))", re.M)


def renamed(source: str, k: int) -> str:
    """The program with every name it binds (variables, loop names, functions) renamed apart
    as NAME_k: one file holds many programs, each as it was alone."""
    names = set()
    for found in BOUND.finditer(source):
        names.update(n.strip() for n in "".join(g or "" for g in found.groups()).split(",") if n.strip())
    return re.sub(r"(?<![.\w])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b", rf"\1_{k}", source) if names else source


class Exported:
    """Programs written as one file, exported, imported: each result's value and gradients
    as the module gives them (or the exception it raises), beside `gradcalc run --json`'s."""

    def __init__(self, folder: Path, library_name: str, programs: list[str]) -> None:
        self.library, self.programs = library_name, list(programs)
        self.path = folder / f"programs_{library_name}.gc"
        for _ in range(4):  # (a program export refuses is left out: each class of those is pinned on its own)
            refused = self.export()
            if refused is None:
                break
            self.programs.pop(refused)
        else:
            raise AssertionError("export refused four programs")
        self.runs = {r["line"]: r for r in map(json.loads, command("run", "--json", str(self.path)).stdout.splitlines())}
        spec = importlib.util.spec_from_file_location(self.path.stem, self.path.with_suffix(".py"))
        assert spec is not None and spec.loader is not None
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)

    def export(self) -> int | None:
        lines = [len(p.split("\n")) for p in self.programs]
        self.ends = [sum(lines[:k + 1]) for k in range(len(lines))]  # the line of each program's result
        self.path.write_text("\n".join(renamed(p, k) for k, p in enumerate(self.programs)) + "\n")
        done = command("export", str(self.path), "--to", self.library, "-o", str(self.path.with_suffix(".py")))
        if done.returncode == 0:
            return None
        line = int(re.search(rf"{re.escape(self.path.name)}:(\d+)", done.stderr).group(1))  # type: ignore[union-attr]
        return next(k for k, end in enumerate(self.ends) if line <= end)

    def result(self, source: str) -> dict[str, Any]:
        """What the module gives for a program's result, and its record by `gradcalc run`."""
        if source not in self.programs:
            return {"refused": True}
        line = self.ends[self.programs.index(source)]
        name, k = f"line_{line}", self.programs.index(source)
        found: dict[str, Any] = {"record": self.runs[line], "suffix": f"_{k}"}
        given = self.module.inputs(name)
        to_numpy = (lambda a: np.asarray(a.detach().numpy())) if self.library == "torch" else np.asarray
        try:
            found["value"] = to_numpy(getattr(self.module, name)(**given))
            if hasattr(self.module, f"{name}_grad"):
                found["grads"] = dict(zip((n.removesuffix(f"_{k}") for n in given), map(to_numpy, getattr(self.module, f"{name}_grad")(*given.values()))))
        except Exception as err:  # (the module's own failure is the finding)
            found["error"] = f"{type(err).__name__}: {err}"
        return found


@pytest.fixture(scope="module")
def exported(reports, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Exported]:
    clean = [p.source for p, r in zip(STRAIGHT, reports["tensor"]["straight-line"]) if "value" in r]
    folder = tmp_path_factory.mktemp("export")
    # (JAX runs each module function op by op, its grad too: fewer programs there)
    return {name: Exported(folder, name, clean[:EXPORTED[name]] + [p for _, p, *_ in EXPORT_FOUND]) for name in LIBRARIES}


@pytest.mark.parametrize("library_name", LIBRARIES)
@pytest.mark.slow
def test_exported_straight_line_programs_give_the_reports_numbers(exported, library_name: str) -> None:
    """Generated programs of user functions, lambdas, closures, grad / hessian / jacobian,
    grad(lambda), value_and_grad, where, comparisons, masks, indexing and reductions, each
    name bound once: the module's function of each result, at INPUTS, gives `gradcalc run
    --json`'s value, and its NAME_grad the report's gradient by each variable, to 1e-12."""
    module = exported[library_name]
    wrong, compared = [], 0
    for source in [p.source for p in STRAIGHT]:
        found = module.result(source)
        if "refused" in found or ("record" in found and "value" not in found["record"]):
            continue
        record = found["record"]
        if "error" in found and WHOLE_NUMBER_Y.search(found["error"]):
            continue  # the derivative of a whole number, pinned below
        if "error" in found:
            wrong.append(f"{found['error']}\n{source}")
        elif not close(found["value"], value_of(record)):
            wrong.append(f"value {found['value'].tolist()}, run {record['value']}\n{source}")
        else:
            reported = {n.removesuffix(found["suffix"]): g for n, g in record["grads"].items()}
            bad = {n: (g.tolist(), reported.get(n)) for n, g in found.get("grads", {}).items() if not close(g, reported.get(n, np.zeros_like(g)))}
            if bad:
                wrong.append(f"grads (module, run) {bad}\n{source}")
            compared += 1
    assert not wrong, f"{len(wrong)} differ; the first:\n" + "\n\n".join(wrong[:2])
    assert compared >= 0.6 * EXPORTED[library_name], compared


# what the libraries say of a derivative of a whole number (export's class, pinned below)
WHOLE_NUMBER_Y = re.compile(r"use jax\.vjp directly|Expected f\(\*args\) to return a Tensor, got <class 'numpy\.int64'>")


def export_found(kind: str, libraries: dict[str, str]) -> list[Any]:
    """(library, program index) parameters of one class of EXPORT_FOUND, xfail(strict) where it fails."""
    return [pytest.param(name, k, marks=[pytest.mark.xfail(strict=True, reason=libraries[name])] if name in libraries else [], id=f"{name}-{k}")
            for name in LIBRARIES for k, (found_kind, *_) in enumerate(EXPORT_FOUND) if found_kind == kind]


def assert_export_gives(exported: dict[str, Exported], library_name: str, k: int) -> None:
    _, source, value, grads = EXPORT_FOUND[k]
    found = exported[library_name].result(source)
    assert "error" not in found, found["error"]
    assert close(found["value"], value), f"the module gives {found['value'].tolist()}, the program {value}"
    for name, g in (grads or {}).items():
        assert close(found["grads"][name], g), f"d/d{name}: the module gives {found['grads'][name].tolist()}, the closed form {g}"


@pytest.mark.parametrize(("library_name", "k"), export_found("rebinding", {}))
def test_export_of_a_variable_rebound_from_itself(exported, library_name: str, k: int) -> None:
    """`x = 2.0; x -= 0.5 * x; x * 3`: `gradcalc run` gives 3.0. Found here and fixed beside it
    (485fe60, "export: a rebound variable's statements are in its result's function"): the
    module's `line_3(x)` was `return x * 3` with INPUTS x = 2.0, so 6.0. Likewise `x = x - ...`,
    a variable rebound after an intermediate was computed from it, an accumulator in a loop."""
    assert_export_gives(exported, library_name, k)


LOOP_NUMBER = "export writes a loop's number as a Python int: indexing it raises in the module"


@pytest.mark.parametrize(("library_name", "k"), export_found("loop number", {"jax": LOOP_NUMBER, "torch": LOOP_NUMBER}))
def test_export_of_a_loop_number_used_as_a_tensor(exported, library_name: str, k: int) -> None:
    """`for i in range(2): y = x * i[None][0]` exports to `x * _at(i, (None,))...` with i a
    Python int: "TypeError: 'int' object is not subscriptable" (the loop's number is a
    0-d tensor in the language, docs/language.md "for": a whole-number constant)."""
    assert_export_gives(exported, library_name, k)


@pytest.mark.parametrize(("library_name", "k"), export_found("range loop", {}))
def test_export_of_a_range_loop_has_a_gradient(exported, library_name: str, k: int) -> None:
    """`x = 2.0; for i in range(3): y = x * i; y` exported to PyTorch: line_3 gave 4.0, and
    line_3_grad raised "RuntimeError: Cannot access data pointer of Tensor that doesn't have
    storage" (the bound, a tensor made inside torch.func.grad, went through NumPy). Found
    here, fixed beside it (the module's _p reads a tensor with tolist)."""
    assert_export_gives(exported, library_name, k)


@pytest.mark.parametrize(("library_name", "k"), export_found("negative step", {}))
def test_export_of_a_slice_with_a_negative_step(exported, library_name: str, k: int) -> None:
    assert_export_gives(exported, library_name, k)


@pytest.mark.parametrize(("library_name", "k"), export_found("length", {
    "jax": "export: grad(len(w), w) calls jax.grad on an integer ('use jax.vjp directly'); the language gives zeros",
    "torch": "export: grad(len(w), w) calls torch.func.grad on a NumPy integer; the language gives zeros"})
    + export_found("whole number", {"jax": "export: grad of argmax or x.shape[0] calls jax.grad on an integer ('use jax.vjp directly')"}))
def test_export_of_the_derivative_of_a_whole_number(exported, library_name: str, k: int) -> None:
    """`grad(len(w), w)` is zeros in the language (the derivative of a constant); the module
    raises, on both libraries (and for argmax(w), w.shape[0] on JAX). `gradcalc eval
    'grad(argmax(x), x)' 'x=[1,2]' --engine jax` says what the module says: "grad requires
    real-valued outputs ... use jax.vjp directly" (pinned too, below)."""
    assert_export_gives(exported, library_name, k)


MIXED = ["b = 1.5\nv = [1.0, 2.0]\ngrad(grad(v * b, v), b)", "b = 1.5\nv = [1.0, 2.0]\ngrad(grad(sum(v ** 2) * b, v)[0], b)"]


@pytest.mark.xfail(strict=True, reason="export refuses grad(grad(y, v), b): 'grad(y, x) is written for x a variable's name', and v and b are")
def test_export_of_a_mixed_second_derivative(tmp_path: Path) -> None:
    """`b = 1.5; v = [1, 2]; grad(grad(v * b, v), b)` runs (value 2.0: grad(v * b, v) is
    [b, b], the derivative of its sum by b is 2); `gradcalc export --to jax` says "export:
    grad(y, x) is written for x a variable's name, or a tuple of names" at the inner grad."""
    for k, source in enumerate(MIXED):
        path = tmp_path / f"mixed{k}.gc"
        path.write_text(source + "\n")
        done = command("export", str(path), "--to", LIBRARIES[-1], "-o", str(tmp_path / f"mixed{k}.py"))
        assert done.returncode == 0, done.stderr


INTEGER_Y = ["x = [1.0, -2.0, 3.0]\ngrad(x.shape[0], x) + x", "x = [1.0, -2.0, 3.0]\ngrad(argmax(x), x) + x",
             "x = [1.0, -2.0, 3.0]\ngrad(x > 0, x) + x", "x = [1.0, -2.0, 3.0]\njacobian(x > 0, x) @ x"]
BATCH.add("integer-y", INTEGER_Y, ON_JAX)


@pytest.mark.parametrize("engine", engines(ON_JAX, jax="--engine jax: grad or jacobian of a whole number or a boolean is JAX's error, 'use jax.vjp directly'"))
def test_the_derivative_of_a_whole_number_is_zeros(reports, engine: str) -> None:
    """`gradcalc eval 'grad(len(x), x)' 'x=[1,2]' --engine jax`: "grad requires real-valued
    outputs (output dtype that is a sub-dtype of np.floating), but got int64. For
    differentiation of functions with integer outputs, use jax.vjp directly." The tensor and
    torch engines give zeros, the derivative of a constant (docs/language.md)."""
    want = [[1.0, -2.0, 3.0]] * 3 + [[0.0, 0.0, 0.0]]  # (grad(len(x), x), grad(x.size, x): the torch engine's crash, pinned with the checks)
    assert_each(INTEGER_Y, instances("integer-y", engine, reports), lambda case, r: expect(want[INTEGER_Y.index(case)], {})(case, r))
