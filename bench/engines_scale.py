"""gradcalc's language on `--engine jax` beside the same computation written by hand in JAX.

    python bench/engines_scale.py            # 2000x2000 and 10^6 rows: a table for docs/performance.md
    python bench/engines_scale.py --smoke    # tiny sizes: the two agree; no timing asserted

Two workloads, each what `gradcalc eval ... --engine jax` computes and reports: the value
and the gradient of its sum by every variable.

- chain: a 15-op elementwise chain over a 2000 x 2000 matrix X, summed:
  sum(tanh(sin(X) * cos(X) + exp(-(X * X)) * 0.5 - sqrt(1 + X * X) / 3)).
- vmap: the per-row gradient of sum(tanh(r * w) ** 2) over 10^6 rows r of X (4 columns),
  vmap(grad(...))(X), with the gradient of its sum by X and w (second derivatives).

gradcalc runs the program through its JAX engine under jax.jit (parser/engines/jit.py),
as the command does; JAX by hand is jax.jit of the same function written with jax.numpy,
value_and_grad. Both on one thread (XLA_FLAGS, OpenBLAS), both copying their results to
NumPy, in one process, taking turns: each side's best and median time of a steady call
(compiled), and the first call (tracing and compiling included).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

CHAIN = "sum(tanh(sin(X) * cos(X) + exp(-(X * X)) * 0.5 - sqrt(1 + X * X) / 3))"
VMAP = "vmap(grad(lambda r: sum(tanh(r * w) ** 2)))(X)"
SIZES = {"chain": 2000, "vmap": 1_000_000}
SMOKE = {"chain": 40, "vmap": 1_000}
COLUMNS = 4


def data(kind: str, size: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if kind == "chain":
        return {"X": rng.uniform(-2, 2, (size, size))}
    return {"X": rng.uniform(-2, 2, (size, COLUMNS)), "w": rng.uniform(0.5, 1.5, COLUMNS)}


def gradcalc(kind: str, size: int) -> Callable[[], tuple[Any, list[np.ndarray]]]:
    """The language's program on the JAX engine, under jax.jit: (value, gradients)."""
    from gradcalc.parser import Session, compile_program
    from gradcalc.parser.engines.jit import jitted_analysis

    session = Session(engine="jax")
    for name, array in data(kind, size).items():
        session.assign(name, session.backend.from_array(array))
    names = list(session.variables)
    program = compile_program(CHAIN if kind == "chain" else VMAP)

    def run() -> tuple[Any, list[np.ndarray]]:
        analysis = jitted_analysis(program, session, None, names)
        assert analysis is not None, session.engine_notes
        return analysis.value, [analysis.grads[n] for n in names]

    return run


def by_hand(kind: str, size: int) -> Callable[[], tuple[Any, list[np.ndarray]]]:
    """The same computation in JAX, jitted: the value and the gradient of its sum."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    given = {name: jnp.asarray(array) for name, array in data(kind, size).items()}
    if kind == "chain":
        def f(X: Any) -> Any:
            return jnp.sum(jnp.tanh(jnp.sin(X) * jnp.cos(X) + jnp.exp(-(X * X)) * 0.5 - jnp.sqrt(1 + X * X) / 3))

        step = jax.jit(jax.value_and_grad(f))

        def run() -> tuple[Any, list[np.ndarray]]:
            value, g = step(given["X"])
            return np.asarray(value), [np.asarray(g)]

        return run

    def rows(X: Any, w: Any) -> Any:
        return jax.vmap(jax.grad(lambda r: jnp.sum(jnp.tanh(r * w) ** 2)))(X)

    def report(X: Any, w: Any) -> Any:
        return rows(X, w), jax.grad(lambda X, w: jnp.sum(rows(X, w)), argnums=(0, 1))(X, w)

    step = jax.jit(report)

    def run_vmap() -> tuple[Any, list[np.ndarray]]:
        value, (gx, gw) = step(given["X"], given["w"])
        return np.asarray(value), [np.asarray(gx), np.asarray(gw)]

    return run_vmap


def summed(run: Callable[[], tuple[Any, list[np.ndarray]]]) -> Callable[[], tuple[float, list[np.ndarray]]]:
    """For bench/run.py's worker, which compares a number and gradients: (sum of the value, gradients)."""

    def call() -> tuple[float, list[np.ndarray]]:
        value, grads = run()
        return float(np.sum(value)), grads

    return call


def measure(kind: str, size: int, calls: int) -> dict[str, Any]:
    """Both sides' first call and `calls` steady calls, taking turns; their agreement."""
    sides = {"gradcalc --engine jax (jit)": gradcalc(kind, size), "JAX by hand (jit)": by_hand(kind, size)}
    first, results = {}, {}
    for name, run in sides.items():
        start = time.perf_counter()
        results[name] = run()
        first[name] = time.perf_counter() - start
    (value, grads), (their_value, their_grads) = results.values()
    worst = max(float(np.max(np.abs(a - b) / (1 + np.abs(b)))) for a, b in zip([value, *grads], [their_value, *their_grads]))
    times: dict[str, list[float]] = {name: [] for name in sides}
    for k in range(calls):
        for name in list(sides)[:: 1 if k % 2 else -1]:  # (the order swapped every call: a slowing machine slows both)
            start = time.perf_counter()
            sides[name]()
            times[name].append(time.perf_counter() - start)
    return {"first": first, "times": times, "worst": worst}


def table(found: dict[str, dict[str, Any]]) -> str:
    lines = ["| workload | contender | first call s | best s | median s | best / JAX's best |", "|---|---|---:|---:|---:|---:|"]
    for kind, result in found.items():
        hand = min(result["times"]["JAX by hand (jit)"])
        for name, times in result["times"].items():
            lines.append(f"| {kind} | {name} | {result['first'][name]:.3f} | {min(times):.4f} | {statistics.median(times):.4f} | "
                         f"{min(times) / hand:.2f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    smoke = "--smoke" in argv
    sizes = SMOKE if smoke else SIZES
    found = {kind: measure(kind, size, 2 if smoke else 9) for kind, size in sizes.items()}
    for kind, result in found.items():
        if result["worst"] > 1e-9:
            print(f"{kind}: gradcalc and JAX by hand differ by {result['worst']:.3g}", file=sys.stderr)
            return 1
    print(table(found))
    if not smoke:
        for kind, result in found.items():
            ratio = min(result["times"]["gradcalc --engine jax (jit)"]) / min(result["times"]["JAX by hand (jit)"])
            print(f"{kind}: {ratio:.2f} x JAX by hand ({'within' if ratio <= 1.3 else 'OVER'} 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
