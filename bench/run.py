"""gradcalc's benchmark suite: gradcalc beside micrograd, PyTorch, HIPS autograd and NumPy.

    python bench/run.py                 # the full suite (a few minutes)
    python bench/run.py --only scalar   # workloads whose name contains 'scalar'
    python bench/run.py --smoke         # every workload once at a tiny size; checks the
                                        # engines agree numerically; asserts no timing
    python bench/run.py --write docs/benchmark-results.md

Times are medians over repeated runs, with min-max; ratios are to gradcalc in the same
run. Anchors that are not installed are skipped with a note (pip install '.[bench]').
"""
from __future__ import annotations

import argparse
import ast
import gc
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import engines  # noqa: E402
import workloads as W  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GRADCALC = Path(sys.executable).with_name("gradcalc")


@dataclass
class Row:
    engine: str
    times: list[float] = field(default_factory=list)  # seconds per repeat
    per: float = 1.0  # units (nodes, ops, chars) per repeat
    unit: str = "node"
    note: str = ""
    extra: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times) / self.per

    def spread(self) -> str:
        return f"{min(self.times) / self.per * 1e6:.2f}-{max(self.times) / self.per * 1e6:.2f}"


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def agree(section: Section, name: str, reference: Any, other: Any, tol: float = 1e-9) -> None:
    value_ref, grads_ref = reference[0], reference[1]
    value, grads = other[0], other[1]
    err = max(W.relative_error(value, value_ref), W.relative_error(np.asarray(grads, dtype=float), np.asarray(grads_ref, dtype=float)))
    if not err <= tol:
        raise AssertionError(f"{section.title}: {name} disagrees with gradcalc (relative error {err:.3g})")


# ---- sections --------------------------------------------------------------------------------


_ISOLATED = """
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
sys.setrecursionlimit(10000)
import engines, workloads as W
E = engines.SCALAR_ENGINES[sys.argv[2]]()
options = json.loads(sys.argv[3])
memory = []
run = eval(options["call"], {"W": W, "E": E, "memory": memory})
try:
    if options["warmup"]:
        run()
    if options["paused"]:
        gc.disable()
    base = W.resident_bytes()
    times = []
    for _ in range(options["repeat"]):
        t = time.perf_counter(); value, grads, root = run(); times.append(time.perf_counter() - t)
except RecursionError:
    print(json.dumps({"error": "RecursionError"}))
    sys.exit()
count = engines._count_prev(root) if root is not None and sys.argv[2] != "torch" else None
peak = max(memory) - base if memory else None
print(json.dumps({"times": times, "value": value, "grads": grads, "nodes": count, "bytes": peak}))
"""


def isolated(key: str, call: str, repeat: int, warmup: bool = True, paused: bool = False) -> dict[str, Any] | str:
    """Run `call` (a workload on engine E; it may record resident memory in `memory`) in
    a fresh process: each engine gets a heap of its own, so one engine's garbage never
    costs another time and peak memory is its own."""
    import json

    options = json.dumps({"call": call, "repeat": repeat, "warmup": warmup, "paused": paused})
    done = subprocess.run([sys.executable, "-c", _ISOLATED, str(Path(__file__).parent), key, options],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        return (done.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(done.stdout.strip().splitlines()[-1])


def scalar_section(title: str, call: str, repeat: int, rounds: int = 3) -> Section:
    """Engines take turns, a process each per round, so a machine that speeds up or slows
    down during the run affects them alike."""
    section = Section(title)
    results: dict[str, dict[str, Any]] = {}
    failed: set[str] = set()
    for _ in range(rounds):
        for key in engines.SCALAR_ENGINES:
            if key in failed:
                continue
            result = isolated(key, call, max(repeat // rounds, 1))
            if isinstance(result, str) or "error" in result:
                section.notes.append(f"{key}: {result if isinstance(result, str) else result['error']}")
                failed.add(key)
                continue
            if key in results:
                results[key]["times"] += result["times"]
            else:
                results[key] = result
    reference = next(iter(results.values()), None)
    for key, result in results.items():
        assert reference is not None
        agree(section, key, (reference["value"], reference["grads"]), (result["value"], result["grads"]))
        nodes = reference["nodes"] or result["nodes"] or 1
        section.rows.append(Row(key, result["times"], per=nodes, extra=f"{result['nodes'] or '-'} nodes"))
    return section


def engines_section(n: int, repeat: int) -> Section:
    """gradcalc's two engines on the same chain (the first benchmark of the engine issue)."""
    section = Section(f"gradcalc's engines: a {n:,}-node chain (tanh, relu alternating), forward + backward")
    scalar = engines.gradcalc_scalar()
    s_times, s_result = timed(lambda: W.scalar_deep_chain(scalar, n), repeat)
    t_times, t_result = timed(lambda: W.tensor_deep_chain(n), repeat)
    agree(section, "tensor engine", s_result, t_result)
    section.rows.append(Row("gradcalc scalar", s_times, per=n))
    section.rows.append(Row("gradcalc tensor (0-d tensors)", t_times, per=n))
    return section


def scalar_vs_tensor_section(configs: list[tuple[list[int], int]], repeat: int) -> Section:
    """The same MLP and loss on gradcalc's two engines: graph size and time side by side."""
    from gradcalc.autodiff import graph_stats

    section = Section("one MLP, two engines: gradcalc scalar vs gradcalc tensor (forward + backward of the loss)")
    scalar = engines.gradcalc_scalar()
    for sizes, samples in configs:
        label = f"{'-'.join(map(str, sizes))}, {samples} samples"
        s_times, s_result = timed(lambda: W.scalar_mlp(scalar, sizes, samples), repeat)
        t_times, t_result = timed(lambda: W.tensor_mlp(sizes, samples), repeat)
        agree(section, label, s_result, t_result)
        s_nodes, t_nodes = graph_stats(s_result[2]).nodes, graph_stats(t_result[2]).nodes
        section.rows.append(Row(f"scalar engine, {label}", s_times, per=1, unit="run", extra=f"{s_nodes:,} nodes"))
        section.rows.append(Row(f"tensor engine, {label}", t_times, per=1, unit="run", extra=f"{t_nodes:,} nodes"))
    return section


def deep_section(n: int, repeat: int, paused: bool) -> Section:
    """Deep chains, each engine in its own process so peak memory is its own."""
    how = "collector paused while building" if paused else "default garbage collector"
    section = Section(f"deep chain: {n:,} nodes (tanh, relu alternating), forward + backward, {how}")
    for key in engines.SCALAR_ENGINES:
        result = isolated(key, f"lambda: W.scalar_deep_chain(E, {n}, memory)", repeat, warmup=False, paused=paused)
        if isinstance(result, str):
            section.notes.append(f"{key}: {result}")
        elif "error" in result:
            section.rows.append(Row(key, [float("nan")], per=n, note=f"fails: {result['error']}"))
        else:
            section.rows.append(Row(key, result["times"], per=n, extra=f"peak {result['bytes'] / n:.0f} bytes/node"))
    return section


def tensor_section(title: str, runs: dict[str, Callable[[], Any]], repeat: int, ops: int, tol: float = 1e-9) -> Section:
    section = Section(title)
    reference = None
    for name, fn in runs.items():
        try:
            fn()  # warm up (imports, caches)
        except ImportError as err:
            section.notes.append(f"{name}: not installed ({err.name}); pip install '.[bench]'")
            continue
        times, result = timed(fn, repeat)
        if reference is None:
            reference = result
        else:
            agree(section, name, reference, result, tol)
        section.rows.append(Row(name, times, per=ops, unit="op"))
    return section


CALCULATOR = r"""
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul | product "/" atom -> div
?atom: NUMBER -> number | NAME -> var | NAME "(" sum ")" -> call | "(" sum ")"
%import common.CNAME -> NAME
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""


def parse_section(chars: int, repeat: int) -> Section:
    """One long expression, and the same size as a program of short statements (which
    Python's own parser can also read: on the single expression it runs out of stack).
    Lark on a bare calculator grammar is the yardstick for what Lark's LALR can do."""
    from gradcalc.parser import compile_program

    expression = W.long_expression(chars)
    program = "\n".join(f"y{i} = {W.long_expression(90, seed=i)}" for i in range(chars // 100))
    section = Section(f"parsing {len(expression):,} characters: one expression, and a program of {chars // 100:,} statements")
    runs: dict[str, tuple[Callable[[], Any], str]] = {
        "gradcalc parse + compile (expression)": (lambda: compile_program(expression), expression),
        "gradcalc parse + compile (program)": (lambda: compile_program(program), program),
        "python ast.parse (expression)": (lambda: ast.parse(expression), expression),
        "python ast.parse (program)": (lambda: ast.parse(program), program),
    }
    try:
        from lark import Lark

        calculator = Lark(CALCULATOR, parser="lalr")
        runs["Lark LALR, bare calculator grammar (expression)"] = (lambda: calculator.parse(expression), expression)
    except ImportError:
        section.notes.append("Lark: not installed")
    for name, (fn, text) in runs.items():
        try:
            times, _ = timed(fn, repeat)
        except RecursionError:
            section.rows.append(Row(name, [float("nan")], per=len(text), unit="char", note="fails: RecursionError"))
            continue
        rate = len(text) / statistics.median(times) / 1e3
        section.rows.append(Row(name, times, per=len(text), unit="char", extra=f"{rate:,.0f}k chars/s"))
    return section


def process_times(argv: list[str], repeat: int, stdin: str | None = None) -> list[float]:
    times = []
    env = {**os.environ, "NO_COLOR": "1"}
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=True)
        times.append(time.perf_counter() - start)
    return times


def startup_section(repeat: int) -> Section:
    section = Section("start-up: whole processes")
    gradcalc = [str(GRADCALC)] if GRADCALC.exists() else [sys.executable, "-m", "gradcalc.cli"]
    runs = {
        "gradcalc eval 'x**2' x=3": [*gradcalc, "eval", "x**2", "x=3"],
        'python -c "import numpy"': [sys.executable, "-c", "import numpy"],
        'python -c "pass"': [sys.executable, "-c", "pass"],
    }
    for name, argv in runs.items():
        process_times(argv, 1)  # warm the caches
        section.rows.append(Row(name, process_times(argv, repeat), per=1, unit="run"))
    return section


def gradcheck_section(n: int, repeat: int) -> Section:
    section = Section(f"gradcheck: a file of {n:,} scalar checks, end to end")
    lines = ["x = 0.7", "y = -1.3", "z = 2.1"]
    exprs = ["tanh(x) * y + exp(z / 3)", "sigmoid(x * y) - log(z)", "relu(x) * sin(y) + z**2", "(x*y + exp(z)).relu()/x", "softplus(x - y) * cos(z)"]
    lines += [f"check {exprs[i % len(exprs)]}" for i in range(n)]
    with tempfile.NamedTemporaryFile("w", suffix=".gc", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    gradcalc = [str(GRADCALC)] if GRADCALC.exists() else [sys.executable, "-m", "gradcalc.cli"]
    times = process_times([*gradcalc, "check", f.name], repeat)
    os.unlink(f.name)
    section.rows.append(Row("gradcalc check", times, per=1, unit="run", extra=f"{n} checks"))
    return section


# ---- the suite --------------------------------------------------------------------------------


def suite(smoke: bool, only: str | None) -> list[Section]:
    rep = 1 if smoke else 7
    sizes = {
        "chain_cycles": 3 if smoke else 100, "deep": 2_000 if smoke else 1_000_000, "mlp": [2, 4, 1] if smoke else [2, 16, 16, 1],
        "small_cycles": 2 if smoke else 10, "big": 20 if smoke else 1000, "chars": 2_000 if smoke else 100_000,
        "checks": 10 if smoke else 1000,
    }
    d8, dbig = W.tensor_inputs(8), W.tensor_inputs(sizes["big"])
    cycles = sizes["small_cycles"]
    plan: list[tuple[str, Callable[[], Section]]] = [
        ("scalar chain", lambda: scalar_section(
            f"scalar engines: {7 * sizes['chain_cycles']}-op mixed chain, forward + backward, one process per engine",
            f"lambda: W.scalar_chain(E, {sizes['chain_cycles']})", rep * 30)),
        ("scalar mlp", lambda: scalar_section(
            f"scalar engines: micrograd's demo MLP {'-'.join(map(str, sizes['mlp']))}, 8 samples, forward + backward, one process per engine",
            f"lambda: W.scalar_mlp(E, {sizes['mlp']})", rep * 5)),
        ("engines chain", lambda: engines_section(2_000 if smoke else 100_000, 1 if smoke else 5)),
        ("scalar vs tensor", lambda: scalar_vs_tensor_section(
            [([2, 4, 1], 8)] if smoke else [([2, 16, 16, 1], 8), ([2, 32, 32, 1], 32), ([2, 64, 64, 1], 64)], 1 if smoke else 5)),
        ("scalar deep", lambda: deep_section(sizes["deep"], 1 if smoke else 3, paused=False)),
        ("scalar deep paused", lambda: deep_section(sizes["deep"], 1 if smoke else 3, paused=True)),
        ("tensor small chain", lambda: tensor_section(
            f"tensor engines, 8x8: {7 * cycles + 1}-op chain, forward + backward (torch on one thread)",
            {"gradcalc tensor": lambda: W.chain_gradcalc(d8, cycles), "torch eager": lambda: W.chain_torch(d8, cycles),
             "HIPS autograd": lambda: W.chain_autograd(d8, cycles), "NumPy by hand": lambda: W.chain_numpy(d8, cycles)},
            rep * 100, 7 * cycles + 1)),
        ("tensor small mlp", lambda: tensor_section(
            "tensor engines, 8x8: 12-op MLP step, forward + backward",
            {"gradcalc tensor": lambda: W.mlp_step_gradcalc(d8), "torch eager": lambda: W.mlp_step_torch(d8),
             "NumPy by hand": lambda: W.mlp_step_numpy(d8)}, rep * 300, 12)),
        ("tensor big chain", lambda: tensor_section(
            f"tensor engines, {sizes['big']}x{sizes['big']}: 15-op chain, forward + backward",
            {"gradcalc tensor": lambda: W.big_chain_gradcalc(dbig), "NumPy by hand": lambda: W.big_chain_numpy(dbig),
             "torch eager": lambda: W.big_chain_torch(dbig)}, rep * 2, 15, tol=1e-7)),
        ("parse", lambda: parse_section(sizes["chars"], rep)),
        ("startup", lambda: startup_section(2 if smoke else 15)),
        ("gradcheck", lambda: gradcheck_section(sizes["checks"], 1 if smoke else 5)),
    ]
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    sections = []
    for key, make in plan:
        if only and only not in key:
            continue
        gc.collect()
        sections.append(make())
        if not smoke:
            print(render([sections[-1]]), flush=True)
    return sections


def render(sections: list[Section]) -> str:
    out = []
    for s in sections:
        out.append(f"\n### {s.title}\n")
        if s.rows:
            unit = s.rows[0].unit
            ref = next((r for r in s.rows if r.engine.startswith("gradcalc")), s.rows[0])
            out.append(f"| engine | median us/{unit} | min-max | vs {ref.engine} | |")
            out.append("|---|---|---|---|---|")
            for r in s.rows:
                if r.note:
                    out.append(f"| {r.engine} | - | - | - | {r.note} |")
                    continue
                ratio = r.median / ref.median if ref.median else float("nan")
                scale = 1e3 if unit == "run" else 1e6
                label = "ms" if unit == "run" else "us"
                median = f"{r.median * scale:,.2f} {label}" if unit == "run" else f"{r.median * 1e6:.3f}"
                spread = f"{min(r.times) * scale:,.1f}-{max(r.times) * scale:,.1f} ms" if unit == "run" else r.spread()
                out.append(f"| {r.engine} | {median} | {spread} | {ratio:.2f}x | {r.extra} |")
        for note in s.notes:
            out.append(f"\n- skipped {note}")
    return "\n".join(out)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    for name in ("torch", "micrograd", "autograd"):
        try:
            from importlib.metadata import version

            versions.append(f"{name} {version(name)}")
        except Exception:  # noqa: BLE001
            pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; " + ", ".join(versions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat, agreement checks only")
    parser.add_argument("--only", help="run workloads whose key contains this")
    parser.add_argument("--write", type=Path, help="write the report as Markdown to this file")
    args = parser.parse_args()
    sections = suite(args.smoke, args.only)
    report = f"Machine: {machine()}\n\nCommand: python bench/run.py{' --smoke' if args.smoke else ''}{' --only ' + args.only if args.only else ''}\n" + render(sections)
    if args.smoke:
        print(f"benchmark smoke: {len(sections)} workloads ran and agree; 0 failed")
    if args.write:
        args.write.write_text(report + "\n")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
