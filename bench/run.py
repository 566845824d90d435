"""gradcalc's benchmark suite: gradcalc beside micrograd, PyTorch, HIPS autograd, JAX,
NumPy, Lark and Python, each workload tracking one target of the performance issues.

    python bench/run.py                  # the full suite at modest sizes (about 10 minutes)
    python bench/run.py --only parse     # groups whose key contains 'parse'
    python bench/run.py --rounds 3       # fewer rounds than each group's default
    python bench/run.py --smoke          # every group once at a tiny size; checks that the
                                         # engines agree numerically; asserts no timing
    python bench/run.py --write docs/benchmark-results.md

How it stays fair on a shared, noisy machine:
- every contender runs in a process of its own (bench/worker.py, or the command itself),
  so no engine's imports or heap slow another;
- contenders take turns: whole commands round by round, in-process workloads slice by
  slice within a round (each contender's process started before any is timed, ten
  slices of its repeats, the order reversed every other slice and round), so a machine
  that slows down mid-run slows all of them alike;
- each ratio is paired: a contender's time over the reference's time in the neighbouring
  slice (the median over a round's slices) or the same round, reported as min / median /
  max over the rounds. Read the ratios, not the times.
Every contender runs on one thread (OpenBLAS, torch, XLA), and says so in the report.
Anchors that are not installed are skipped with a note (pip install '.[bench]'; JAX, for
the transforms' groups, is not in that extra: pip install jax jaxlib).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

# Every contender on one thread, set before anything imports NumPy: on a loaded two-core
# host OpenBLAS's threads spin (a 90,000-element dot product took 10 ms instead of 11 us),
# and torch (worker.py) and JAX (XLA_FLAGS) would each start threads of their own.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

import array_speed as A  # noqa: E402
import workloads as W  # noqa: E402

os.environ.setdefault("XLA_FLAGS", A.ONE_THREAD_XLA)

GRADCALC = Path(sys.executable).with_name("gradcalc")


@dataclass
class Contender:
    """One side of a comparison: an in-process workload (`setup`, an expression evaluated
    by bench/worker.py) or a whole command (`argv`, timed from outside)."""

    name: str
    setup: str = ""
    engine: str | None = None
    argv: list[str] = field(default_factory=list)
    repeat: int = 0  # a command's runs per round (0: the group's repeat)
    # A command's time net of another's: round by round, less the median time of the
    # contender named `minus` (the same script doing no steps), over `steps`.
    minus: str = ""
    steps: int = 1


@dataclass
class Group:
    key: str  # what --only matches
    title: str
    contenders: list[Contender]
    reference: str  # the contender the ratios divide by: the anchor a target names
    unit: str = "run"  # what one timed repeat is divided into: run, node, op, char
    per: float = 1.0  # units per repeat (nodes are counted from the reference's graph)
    rounds: int = 5
    repeat: int = 1  # timed repeats per process per round (the round's time is their median)
    agree: float | None = None  # relative tolerance of the agreement check; None: no check
    warmup: bool = True
    paused: bool = False


@dataclass
class Row:
    name: str
    rounds: list[float] = field(default_factory=list)  # per round: median seconds per unit
    ratios: list[float] = field(default_factory=list)  # per round: this / reference
    extra: str = ""
    note: str = ""


@dataclass
class Section:
    group: Group
    rows: list[Row] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # errors that are not a known limit


# ---- running -----------------------------------------------------------------------------------


def _spec(c: Contender, g: Group) -> dict[str, Any]:
    return {"setup": c.setup, "engine": c.engine, "repeat": g.repeat, "warmup": g.warmup, "paused": g.paused}


def _worker(spec: dict[str, Any] | list[dict[str, Any]]) -> Any:
    done = subprocess.run([sys.executable, str(BENCH / "worker.py"), json.dumps(spec)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        return {"error": (done.stderr.strip().splitlines() or ["worker failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _command(c: Contender, g: Group) -> dict[str, Any]:
    env = {**os.environ, "NO_COLOR": "1"}
    times = []
    for _ in range(c.repeat or g.repeat):
        start = time.perf_counter()
        done = subprocess.run(c.argv, capture_output=True, text=True, env=env, check=False)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            return {"error": f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1]}"}
    return {"times": times}


SLICES = 10  # per round, the slices of repeats that in-process contenders take in turn


def slice_sizes(repeat: int) -> list[int]:
    """`repeat` split into at most SLICES slices as even as can be: 200 -> ten of 20."""
    n = min(repeat, SLICES)
    return [repeat // n + (i < repeat % n) for i in range(n)]


class _Server:
    """One contender's worker process in serve mode (bench/worker.py --serve)."""

    def __init__(self, c: Contender, g: Group) -> None:
        self.errors = tempfile.TemporaryFile("w+")  # a file, not a pipe: nothing blocks on a full buffer
        self.process = subprocess.Popen([sys.executable, str(BENCH / "worker.py"), "--serve", json.dumps(_spec(c, g))],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True)

    def ask(self, line: str | None = None) -> Any:
        """Send `line` (if any) and read the one-line JSON answer."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            if line is not None:
                stdin.write(line + "\n")
                stdin.flush()
            answer = stdout.readline()
        except BrokenPipeError:
            answer = ""
        if not answer:
            self.process.wait()
            self.errors.seek(0)
            return {"error": (self.errors.read().strip().splitlines() or ["worker failed"])[-1]}
        return json.loads(answer)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.errors.close()


def _turns(contenders: list[Contender], g: Group, r: int) -> dict[str, dict[str, Any]]:
    """One round of in-process contenders, each in its own process, all started before any
    is timed: they run their repeats slice by slice in turn, the order reversed every other
    slice (and round), so neighbouring slices of two contenders are milliseconds apart."""
    servers = {c.name: _Server(c, g) for c in contenders}
    results: dict[str, dict[str, Any]] = {}
    try:
        for c in contenders:
            ready = servers[c.name].ask()
            results[c.name] = {"slices": []} if ready == "ready" else ready
        for i, size in enumerate(slice_sizes(g.repeat)):
            order = [c for c in contenders if "slices" in results[c.name]]
            for c in order[::-1] if (i + r) % 2 else order:
                reply = servers[c.name].ask(f"run {size}")
                if isinstance(reply, list):
                    results[c.name]["slices"].append(reply)
                else:
                    results[c.name] = reply
        for name, result in results.items():
            if "slices" in result:
                results[name] = {**servers[name].ask("end"), "slices": result["slices"]}
    finally:
        for server in servers.values():
            server.close()
    return results


def run_group(g: Group, rounds: int, batch: dict[tuple[str, str], dict[str, Any]] | None = None) -> Section:
    """Contenders take turns, one process each per round (in-process ones slice by slice,
    see _turns); a contender that fails or is missing is dropped from the group with a
    note. `batch` holds results measured beforehand (--smoke measures every in-process
    contender in one worker)."""
    section = Section(g)
    results: dict[str, list[dict[str, Any]]] = {c.name: [] for c in g.contenders}
    dropped: dict[str, str] = {}
    for r in range(rounds):
        order = [c for c in (g.contenders if r % 2 == 0 else g.contenders[::-1]) if c.name not in dropped]
        in_process = [c for c in order if not c.argv]
        measured = ({c.name: batch[(g.title, c.name)] for c in in_process} if batch
                    else _turns(in_process, g, r) if in_process else {})
        for c in order:
            result = _command(c, g) if c.argv else measured[c.name]
            if "skip" in result or "error" in result:
                dropped[c.name] = result.get("skip") or f"fails: {result['error']}"
                if "error" in result and result["error"] != "RecursionError":
                    section.failures.append(f"{c.name}: {result['error']}")
            else:
                results[c.name].append(result)
    _net(g, results)
    _check_agreement(g, results)
    per = g.per
    if g.unit == "node":  # scalar graphs: per node of the graph the engines built
        per = next((res[0]["nodes"] for res in results.values() if res and res[0].get("nodes")), None) or g.per
    reference = results.get(g.reference, [])
    for c in g.contenders:
        if not results[c.name]:
            section.rows.append(Row(c.name, note=dropped.get(c.name, "")))
        else:
            section.rows.append(_row(c, g, results[c.name], per, reference))
    return section


def _net(g: Group, results: dict[str, list[dict[str, Any]]]) -> None:
    """A contender with `minus`: its times less the median of the named one's in the same
    round, over its steps (what a step costs, start-up and set-up taken out)."""
    for c in g.contenders:
        if c.minus and results[c.name]:
            results[c.name] = [{"times": [(t - statistics.median(base["times"])) / c.steps for t in mine["times"]]}
                               for mine, base in zip(results[c.name], results[c.minus])]


def _check_agreement(g: Group, results: dict[str, list[dict[str, Any]]]) -> None:
    """Every contender's value and gradients match the first one's (first round each)."""
    firsts = [(name, res[0]) for name, res in results.items() if res and "value" in res[0]]
    if g.agree is None or not firsts:
        return
    reference = firsts[0][1]
    for name, result in firsts[1:]:
        err = max(W.relative_error(result["value"], reference["value"]), W.relative_error(result["grads"], reference["grads"]))
        if not err <= g.agree:
            raise AssertionError(f"{g.title}: {name} disagrees with {firsts[0][0]} (relative error {err:.3g})")


def paired_ratio(mine: dict[str, Any], reference: dict[str, Any]) -> float:
    """A round's ratio: over slices taken in turn, the median of each slice's median time
    over the reference's in the neighbouring slice; otherwise the ratio of the medians."""
    a, b = mine.get("slices", []), reference.get("slices", [])
    if a and len(a) == len(b):
        return statistics.median(statistics.median(x) / statistics.median(y) for x, y in zip(a, b))
    return statistics.median(mine["times"]) / statistics.median(reference["times"])


def _row(c: Contender, g: Group, results: list[dict[str, Any]], per: float, reference: list[dict[str, Any]]) -> Row:
    row = Row(c.name, [statistics.median(res["times"]) / per for res in results])
    if len(reference) == len(results):  # paired: round by round
        row.ratios = [paired_ratio(mine, ref) for mine, ref in zip(results, reference)]
    if "bytes" in results[0]:
        row.extra = f"peak {statistics.median(res['bytes'] for res in results) / per:,.0f} bytes/{g.unit}"
    if results[0].get("nodes"):
        row.extra = f"{results[0]['nodes']:,} nodes"
    if g.unit == "char":
        row.extra = f"{1 / statistics.median(row.rounds) / 1e3:,.0f}k chars/s"
    return row


@contextmanager
def text_file(text: str, suffix: str) -> Iterator[str]:
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as f:
        f.write(text)
    try:
        yield f.name
    finally:
        os.unlink(f.name)


# ---- the groups ----------------------------------------------------------------------------------


def _engines(call: str, keys: tuple[str, ...] = ("gradcalc scalar", "micrograd", "torch")) -> list[Contender]:
    return [Contender({"micrograd": "micrograd 0.1.0", "torch": "torch 0-d"}.get(k, k), call, engine=k) for k in keys]


def groups(smoke: bool, files: dict[str, str]) -> list[Group]:
    """Sizes are modest on purpose (the machine is shared): big enough that per-op cost
    dominates, small enough that a round takes seconds."""
    s = {"cycles": 3 if smoke else 100, "deep": 2_000 if smoke else 200_000, "engines": 2_000 if smoke else 100_000,
         "mlps": [([2, 4, 1], 8)] if smoke else [([2, 16, 16, 1], 8), ([2, 32, 32, 1], 32)],
         "small": 2 if smoke else 10, "big": 20 if smoke else 1000, "chars": 2_000 if smoke else 100_000,
         "wide": 30 if smoke else 3000}
    gradcalc = [str(GRADCALC)] if GRADCALC.exists() else [sys.executable, "-m", "gradcalc.cli"]
    small, big = "W.tensor_inputs(8)", f"W.tensor_inputs({s['big']})"
    cycles = s["small"]
    plan = [
        Group("scalar chain", f"scalar engines: {7 * s['cycles']}-op mixed chain, forward + backward",
              _engines(f"lambda: W.scalar_chain(E, {s['cycles']})"), "micrograd 0.1.0", unit="node", repeat=20, agree=1e-9),
        Group("scalar mlp", "scalar engines: micrograd's demo MLP 2-16-16-1, 8 samples, forward + backward",
              _engines(f"lambda: W.scalar_mlp(E, {[2, 4, 1] if smoke else [2, 16, 16, 1]})"), "micrograd 0.1.0",
              unit="node", repeat=5, agree=1e-9),
        Group("engines chain", f"gradcalc's engines: a {s['engines']:,}-node chain (tanh, relu alternating), forward + backward",
              [Contender("gradcalc scalar", f"lambda: W.scalar_deep_chain(E, {s['engines']})", engine="gradcalc scalar"),
               Contender("gradcalc tensor (0-d tensors)", f"lambda: W.tensor_deep_chain({s['engines']})")],
              "gradcalc scalar", unit="node", per=s["engines"], rounds=3, repeat=2, agree=1e-9),
    ]
    for sizes, samples in s["mlps"]:
        label = f"{'-'.join(map(str, sizes))}, {samples} samples"
        plan.append(Group("scalar vs tensor", f"one MLP {label}, two engines: gradcalc scalar vs gradcalc tensor",
                          [Contender("scalar engine", f"lambda: W.scalar_mlp(E, {sizes}, {samples})", engine="gradcalc scalar"),
                           Contender("tensor engine", f"lambda: W.tensor_mlp({sizes}, {samples})")],
                          "scalar engine", rounds=3, repeat=3, agree=1e-9))
    for paused in (False, True):
        how = "collector paused while building" if paused else "default garbage collector"
        plan.append(Group("scalar deep paused" if paused else "scalar deep",
                          f"deep chain: {s['deep']:,} nodes (tanh, relu alternating), forward + backward, {how}",
                          _engines(f"lambda: W.scalar_deep_chain(E, {s['deep']}, memory)"), "gradcalc scalar",
                          unit="node", per=s["deep"], rounds=2 if not smoke else 1, warmup=False, paused=paused))
    plan += [
        Group("tensor small chain", f"tensor engines, 8x8: {7 * cycles + 1}-op chain, forward + backward (per-op overhead)",
              [Contender("gradcalc tensor", f"(lambda d: lambda: W.chain_gradcalc(d, {cycles}))({small})"),
               Contender("NumPy by hand", f"(lambda d: lambda: W.chain_numpy(d, {cycles}))({small})"),
               Contender("torch eager", f"(lambda d: lambda: W.chain_torch(d, {cycles}))({small})"),
               Contender("HIPS autograd", f"(lambda d: lambda: W.chain_autograd(d, {cycles}))({small})")],
              "NumPy by hand", unit="op", per=7 * cycles + 1, repeat=200, agree=1e-9),
        Group("tensor small mlp", "tensor engines, 8x8: 12-op MLP step, forward + backward",
              [Contender("gradcalc tensor", f"(lambda d: lambda: W.mlp_step_gradcalc(d))({small})"),
               Contender("NumPy by hand", f"(lambda d: lambda: W.mlp_step_numpy(d))({small})"),
               Contender("torch eager", f"(lambda d: lambda: W.mlp_step_torch(d))({small})")],
              "NumPy by hand", unit="op", per=12, repeat=300, agree=1e-9),
        Group("tensor big chain", f"tensor engines, {s['big']}x{s['big']}: 15-op elementwise chain, forward + backward",
              [Contender("gradcalc tensor", f"(lambda d: lambda: W.big_chain_gradcalc(d))({big})"),
               Contender("NumPy by hand", f"(lambda d: lambda: W.big_chain_numpy(d))({big})"),
               Contender("torch eager", f"(lambda d: lambda: W.big_chain_torch(d))({big})")],
              "NumPy by hand", unit="op", per=15, repeat=3, agree=1e-7),
        Group("parse", f"parsing {s['chars']:,} characters: one expression (gradcalc and a bare Lark calculator), "
              "and a program of short statements (gradcalc and Python)",
              [Contender("gradcalc parse + compile (expression)", f"W.parse_gradcalc(W.long_expression({s['chars']}))"),
               Contender("Lark LALR, bare calculator grammar (expression)", f"W.parse_lark_calculator(W.long_expression({s['chars']}))"),
               Contender("gradcalc parse + compile (program)", f"W.parse_gradcalc(W.long_program({s['chars']}))"),
               Contender("python ast.parse (program)", f"W.parse_python(W.long_program({s['chars']}))")],
              "Lark LALR, bare calculator grammar (expression)", unit="char", per=len(W.long_expression(s["chars"])),
              rounds=3, repeat=2),
        Group("startup", "start-up: whole processes",
              [Contender("gradcalc eval 'x*2' x=3", argv=[*gradcalc, "eval", "x*2", "x=3"]),
               Contender('python -c "import numpy"', argv=[sys.executable, "-c", "import numpy"]),
               Contender('python -c "pass"', argv=[sys.executable, "-c", "pass"])],
              'python -c "import numpy"', rounds=15),
        Group("checks file", "gradcheck files of scalar checks, end to end (start-up included)",
              [Contender(f"gradcalc check, {n:,} checks", argv=[*gradcalc, "check", files[f"checks{n}"]])
               for n in ((10, 100) if smoke else (1_000, 10_000))],
              f"gradcalc check, {10 if smoke else 1_000:,} checks", rounds=3),
        Group("wide check", f"check of one scalar function of {s['wide']:,} inputs: {W.WIDE_FUNCTION}",
              [Contender("gradcalc check statement", f"W.wide_check_gradcalc({s['wide']})"),
               Contender("torch.autograd.gradcheck", f"W.wide_check_torch({s['wide']})")],
              "gradcalc check statement", rounds=3, repeat=2),
    ]
    plan += transform_groups(smoke, gradcalc)
    plan += engine_groups(smoke)
    if smoke:
        for g in plan:
            g.rounds, g.repeat = 1, 1
            for c in g.contenders:
                c.repeat = min(c.repeat, 1)
    return plan


def engine_groups(smoke: bool) -> list[Group]:
    """The language on --engine jax under jax.jit beside the same computation by hand in JAX
    (bench/engines_scale.py; its own run prints the table of docs/performance.md)."""
    plan = []
    for kind, size in (("chain", 40 if smoke else 2000), ("vmap", 1_000 if smoke else 1_000_000)):
        made = "__import__('engines_scale')"
        title = f"--engine jax: a {size}x{size} 15-op chain" if kind == "chain" else f"--engine jax: vmap(grad(...)) over {size:,} rows"
        plan.append(Group(f"engines scale {kind}", f"{title}, value and gradients, under jax.jit",
                          [Contender("gradcalc --engine jax", f"{made}.summed({made}.gradcalc({kind!r}, {size}))"),
                           Contender("JAX by hand (jit)", f"{made}.summed({made}.by_hand({kind!r}, {size}))")],
                          "JAX by hand (jit)", rounds=3, repeat=5, agree=1e-9))
    return plan


LIBRARIES = (("gradcalc (API)", "'gradcalc'"), ("torch.func", "'torch'"), ("jax.jit", "'jax'"))
LANGUAGE = "gradcalc (language, Session)"


def transform_groups(smoke: bool, gradcalc: list[str]) -> list[Group]:
    """Issue 37's workloads (bench/array_speed.py): each through gradcalc's Python API and
    its language, beside NumPy by hand (the reference), torch.func and jax.jit, all float64."""
    rows, n, steps = (50, 6, 2) if smoke else (20_000, 300, 500)
    scaling = (10, 100) if smoke else (1_000, 10_000, 100_000, 1_000_000)
    plan = []
    for argnums, label, key in ((None, "vmap(V)", "vmap"), (0, "vmap(grad(V)): per-example gradients by the row x", "vmap grad"),
                                (1, "vmap(grad(V, argnums=1)): per-example gradients by the weights W", "vmap grad W")):
        contenders = [Contender(name, f"A.vmap_rows({lib}, {rows}, {argnums})") for name, lib in LIBRARIES]
        plan.append(Group(f"transforms {key}", f"{label} over {rows:,} rows of 8, V(x, W) = sum(tanh(x @ W) ** 2)",
                          [contenders[0], Contender(LANGUAGE, f"A.language({key!r}, {rows})"),
                           Contender("NumPy by hand", f"A.vmap_rows_numpy({rows}, {argnums})"), *contenders[1:]],
                          "NumPy by hand", repeat=60 if argnums is None else 20, agree=1e-9))
    for size in scaling:
        for argnums, label, key in ((None, "vmap(V)", "vmap"), (0, "vmap(grad(V))", "vmap grad")):
            plan.append(Group(f"transforms rows {key}", f"{label} over {size:,} rows: time per row",
                              [Contender("gradcalc (API)", f"A.vmap_rows('gradcalc', {size}, {argnums})"),
                               Contender(LANGUAGE, f"A.language({key!r}, {size})"),
                               Contender("NumPy by hand", f"A.vmap_rows_numpy({size}, {argnums})")],
                              "NumPy by hand", unit="row", per=size, rounds=3, repeat=max(3, min(60, 2_000_000 // size // 20)),
                              agree=1e-9))
    for mode in ("jacrev", "jacfwd"):
        plan.append(Group(f"transforms {mode}", f"{mode}(f) at n = {n}, f(x) = tanh(W @ x); NumPy: the closed form (1 - t**2)[:, None] * W",
                          [Contender("gradcalc (API)", f"A.jacobian('gradcalc', {mode!r}, {n})"),
                           Contender("gradcalc (API), diagonal batches off", f"A.jacobian('gradcalc', {mode!r}, {n}, diagonal=False)"),
                           Contender(LANGUAGE, f"A.language({mode!r}, {n})"),
                           Contender("NumPy closed form", f"A.jacobian_numpy({n})"),
                           *(Contender(name, f"A.jacobian({lib}, {mode!r}, {n})") for name, lib in LIBRARIES[1:])],
                          "NumPy closed form", repeat=100, agree=1e-9))
    plan.append(Group("transforms hessian", f"hessian(h) at n = {n}, h(x) = sum(tanh(W @ x)); NumPy: the closed form "
                      "W.T @ diag(-2 t (1 - t**2)) @ W",
                      [Contender("gradcalc (API)", f"A.hessian('gradcalc', {n})"),
                       Contender("gradcalc (API), diagonal batches off", f"A.hessian('gradcalc', {n}, diagonal=False)"),
                       Contender(LANGUAGE, f"A.language('hessian', {n})"),
                       Contender("NumPy closed form", f"A.hessian_numpy({n})"),
                       *(Contender(name, f"A.hessian({lib}, {n})") for name, lib in LIBRARIES[1:])],
                      "NumPy closed form", repeat=40, agree=1e-9))
    script = str(BENCH / "train_steps.gc")
    zero = "gradcalc run train_steps.gc steps=0 (whole command)"
    plan.append(Group("transforms train step", "a training step of examples/train_mlp.gc's MLP (2-16-16-1, relu, 40 points, "
                      "max-margin + L2): loss, every gradient in one backward pass, the update",
                      [Contender("gradcalc (API)", "A.train_step('gradcalc')"),
                       Contender(LANGUAGE, "A.language('train step')"),
                       Contender("NumPy by hand", "A.train_step_numpy()"),
                       Contender("PyTorch float64 (eager, autograd.grad)", "A.train_step('torch')"),
                       Contender("jax.jit (float64)", "A.train_step('jax')"),
                       Contender(f"gradcalc run train_steps.gc steps={steps}, less steps=0, per step",
                                 argv=[*gradcalc, "run", script, f"steps={steps}"], repeat=3, minus=zero, steps=steps),
                       Contender(zero, argv=[*gradcalc, "run", script, "steps=0"], repeat=3)],
                      "NumPy by hand", unit="step", repeat=200, agree=1e-9))
    return plan


# ---- the report ------------------------------------------------------------------------------------


LEGEND = """Each contender ran in a process of its own, a new one each round. Whole commands took
turns round by round; in-process workloads took turns within a round, their processes
started together and their timed repeats run in up to ten slices, one contender's slice
after another's (the order reversed every other slice). A round's time is the median of
that process's timed repeats (after one untimed warm-up, except for whole commands and the
deep chains, whose memory is measured from cold); the time column gives the median and
range of the rounds. A round's ratio is the median over its slices of a contender's
median time in the slice over the reference's in the neighbouring slice (for whole
commands, the time over the reference's in the same round); the ratio column gives the
min / median / max of the rounds' ratios.
Below 1 is faster than the reference. Read the ratios: on a loaded machine absolute
times move between rounds far more than paired ratios do."""


def _time(seconds: float, unit: str) -> str:
    return f"{seconds * 1e3:,.1f} ms" if unit == "run" else f"{seconds * 1e6:,.2f} us"


def _ratio(x: float) -> str:
    return f"{x:.2f}" if x >= 0.1 else f"{x:.2g}"  # 0.0003, not 0.00


def render(sections: list[Section]) -> str:
    out = []
    for s in sections:
        g = s.group
        out.append(f"\n### {g.title}\n")
        rounds = max((len(r.rounds) for r in s.rows), default=0)
        out.append(f"| contender | median per {g.unit} (min-max of {rounds} rounds) | time / {g.reference}: min / median / max | |")
        out.append("|---|---|---|---|")
        for r in s.rows:
            if r.note:
                out.append(f"| {r.name} | - | - | {r.note} |")
                continue
            spread = f"{_time(statistics.median(r.rounds), g.unit)} ({_time(min(r.rounds), g.unit)}-{_time(max(r.rounds), g.unit)})"
            ratio = (f"{_ratio(min(r.ratios))} / **{_ratio(statistics.median(r.ratios))}** / {_ratio(max(r.ratios))}"
                     if r.ratios else "-")
            out.append(f"| {r.name} | {spread} | {ratio} | {r.extra} |")
    return "\n".join(out)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    for name in ("torch", "jax", "micrograd", "autograd", "lark"):
        try:
            from importlib.metadata import version

            versions.append(f"{name} {version(name)}")
        except Exception:  # noqa: BLE001 - an anchor that is not installed
            pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; " + ", ".join(versions)


def install() -> str:
    """Start-up depends on it: an editable install adds an import hook and, where bytecode
    is not written, recompiles gradcalc at every start."""
    from importlib.util import find_spec

    spec = find_spec("gradcalc.parser")
    where = spec.origin if spec and spec.origin else ""
    return f"gradcalc {'regular (pip install .)' if 'site-packages' in where else 'editable (pip install -e .)'}"


def commit() -> str:
    """The commit of the suite's checkout (the code measured, for an install from it)."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(BENCH), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    return f"{head}{' with uncommitted changes' if git('status', '--porcelain') else ''}" if head else "unknown"


def load() -> str:
    try:
        return "load average {:.1f} / {:.1f} / {:.1f} (1 / 5 / 15 min)".format(*os.getloadavg())
    except OSError:
        return "load average unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round, agreement checks only")
    parser.add_argument("--only", help="run groups whose key contains this")
    parser.add_argument("--rounds", type=int, help="rounds per group (default: each group's own)")
    parser.add_argument("--write", type=Path, help="write the report as Markdown to this file")
    args = parser.parse_args()
    started, load_before = datetime.now(timezone.utc), load()
    sections = []
    sizes = (10, 100) if args.smoke else (1_000, 10_000)
    with text_file(W.checks_file(sizes[0]), ".gc") as a, text_file(W.checks_file(sizes[1]), ".gc") as b:
        plan = [g for g in groups(args.smoke, {f"checks{sizes[0]}": a, f"checks{sizes[1]}": b})
                if not args.only or args.only in g.key]
        batch: dict[tuple[str, str], dict[str, Any]] = {}
        if args.smoke:
            wanted = [(g, c) for g in plan for c in g.contenders if not c.argv]
            answers = _worker([_spec(c, g) for g, c in wanted])
            if isinstance(answers, dict):
                sys.exit(f"benchmark smoke: the worker failed: {answers['error']}")
            batch = {(g.title, c.name): answer for (g, c), answer in zip(wanted, answers)}
        for g in plan:
            sections.append(run_group(g, args.rounds or g.rounds, batch))
            if not args.smoke:
                print(render(sections[-1:]), flush=True)
    command = "python bench/run.py" + "".join(f" {flag} {shlex.quote(str(value))}" for flag, value in
                                             (("--only", args.only), ("--rounds", args.rounds)) if value)
    bytecode = os.environ.get("PYTHONDONTWRITEBYTECODE", "")
    report = "\n\n".join([
        "# Benchmark results", f"Machine: {machine()}", f"Install: {install()}, PYTHONDONTWRITEBYTECODE={bytecode!r}; commit {commit()}",
        f"Run: {started:%Y-%m-%d %H:%M} UTC, {load_before} at the start, {load()} at the end",
        "Threads: " + ", ".join(f"{name}={os.environ[name]!r}" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "XLA_FLAGS"))
        + ", torch.set_num_threads(1)",
        f"Command: {command}{' --smoke' if args.smoke else ''}", LEGEND,
    ]) + "\n" + render(sections)
    if args.smoke:
        failures = [f"{s.group.title}: {failure}" for s in sections for failure in s.failures]
        if failures:
            sys.exit("benchmark smoke failed:\n" + "\n".join(failures))
        print(f"benchmark smoke: {len(sections)} groups ran, every contender's numbers agree; no timing asserted")
    if args.write:
        args.write.write_text(report + "\n")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
