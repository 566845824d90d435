"""One contender of one benchmark group, timed in a process of its own (run.py starts it).

    python bench/worker.py '{"setup": "lambda: W.scalar_chain(E, 100)", "engine": "micrograd", "repeat": 10}'

Each engine gets a fresh interpreter so that one engine's imports and heap never cost
another time (with torch imported, `ast.parse` ran about 2x slower and the scalar chain
1.2-1.8x) and peak memory is its own.

With `--serve` the worker takes turns with the others of its group (run.py starts them
side by side): after setup and warm-up it prints `ready`, then answers each line `run K`
on stdin with the times of K repeats (one JSON list), and `end` with its answer. A slice
of repeats then lies next to every other contender's slice in time, so a machine that
slows down for a second slows all of them alike, not the one whose process ran then.

The spec's `setup` is a Python expression, evaluated once (untimed) with `W` (workloads),
`A` (array_speed, the transforms' workloads), `E` (the scalar engine named by `engine`,
if any) and `memory` (a list a workload may append resident sizes to) in scope; it gives
the zero-argument function that is timed.
That function returns (value, gradients[, graph root]) when the group checks that the
engines agree, or anything otherwise. The answer is one JSON line on stdout. `--smoke`
passes a list of specs, run one after the other in one process: there only agreement
counts, and one interpreter start is much faster than fifty.
"""
from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import array_speed as A
import engines
import workloads as W

AGREEMENT_SAMPLES = 2000  # gradient entries sent back for the agreement check


def _sample(grads: Any) -> list[float]:
    """Gradients as a flat list; a large array is thinned to an even sample of its entries
    (every engine gets the same indices, so the comparison stays entry by entry)."""
    flat = np.concatenate([np.asarray(g, dtype=float).ravel() for g in grads]) if len(grads) else np.zeros(0)
    step = max(len(flat) // AGREEMENT_SAMPLES, 1)
    return [float(v) for v in flat[::step]]


def _nodes(root: Any) -> int | None:
    if root is None or type(root).__module__.startswith("torch"):
        return None
    if type(root).__module__.startswith("gradcalc"):
        from gradcalc.autodiff import graph_stats

        return graph_stats(root).nodes
    return engines._count_prev(root)


def _one_thread() -> None:
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """{"times": [...], "value", "grads", "nodes", "bytes"}; or {"skip": why} when an anchor
    is not installed; or {"error": what} when the workload failed."""
    try:
        return _measure(spec)
    except Exception as err:  # noqa: BLE001 - reported in the table, and fails --smoke
        return _failure(err)
    finally:
        gc.enable()


def _failure(err: Exception) -> dict[str, str]:
    if isinstance(err, ModuleNotFoundError):
        how = "pip install jax jaxlib" if (err.name or "").startswith("jax") else "pip install '.[bench]'"
        return {"skip": f"not installed ({err.name}); {how}"}
    if isinstance(err, RecursionError):
        return {"error": "RecursionError"}
    return {"error": f"{type(err).__name__}: {err}"}


def _prepare(spec: dict[str, Any]) -> tuple[Callable[[], Any], list[int]]:
    """The timed function of `spec`, set up and warmed up; and the list its workload
    appends resident sizes to."""
    memory: list[int] = []
    scope = {"W": W, "A": A, "np": np, "memory": memory}
    if spec.get("engine"):
        scope["E"] = engines.SCALAR_ENGINES[spec["engine"]]()
    run = eval(spec["setup"], scope)  # noqa: S307 - the suite's own workload expressions
    _one_thread()
    if spec.get("warmup", True):
        run()
        _one_thread()
    if spec.get("paused"):
        gc.disable()
    return run, memory


def _timed(run: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return times, result


def _answer(times: list[float], result: Any, memory: list[int], base: int) -> dict[str, Any]:
    answer: dict[str, Any] = {"times": times}
    if isinstance(result, tuple) and len(result) >= 2:
        answer["value"] = float(result[0])
        answer["grads"] = _sample(result[1])
        answer["nodes"] = _nodes(result[2] if len(result) > 2 else None)
    if memory:
        answer["bytes"] = max(memory) - base
    return answer


def _measure(spec: dict[str, Any]) -> dict[str, Any]:
    run, memory = _prepare(spec)
    base = W.resident_bytes()
    times, result = _timed(run, spec.get("repeat", 1))
    return _answer(times, result, memory, base)


def _reply(message: Any) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def serve(spec: dict[str, Any]) -> None:
    """Take turns (see the module's docstring): `ready`, then `run K` ... `end`."""
    try:
        run, memory = _prepare(spec)
    except Exception as err:  # noqa: BLE001 - reported in the table, as measure() does
        return _reply(_failure(err))
    base = W.resident_bytes()
    _reply("ready")
    times: list[float] = []
    result = None
    for line in sys.stdin:
        command, _, count = line.partition(" ")
        if command != "run":
            break
        try:
            slice_times, result = _timed(run, int(count))
        except Exception as err:  # noqa: BLE001
            return _reply(_failure(err))
        times += slice_times
        _reply(slice_times)
    _reply(_answer(times, result, memory, base))


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    if sys.argv[1] == "--serve":
        serve(json.loads(sys.argv[2]))
        sys.exit()
    specs = json.loads(sys.argv[1])  # one spec, or a list of them (--smoke runs all in one process)
    print(json.dumps([measure(s) for s in specs] if isinstance(specs, list) else measure(specs)))
