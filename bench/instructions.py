"""Instruction counts of the workloads users feel, under valgrind's callgrind.

Instruction counts do not move with the machine's load, so two checkouts can be compared
on a shared, noisy host. Each checkout is measured with its own virtual environment
(`DIR/.venv`) and its own bench/workloads.py:

    python bench/instructions.py                      # this checkout
    python bench/instructions.py . /work/base         # this checkout against another
    python bench/instructions.py --only transforms    # issue 37's transforms and NumPy by hand

Every workload is run once beforehand so that its modules' bytecode is cached (in a
folder of its own per checkout, PYTHONPYCACHEPREFIX: a read-only checkout is measured the
same way), as it is for a user of an installed gradcalc; without that a whole command
would count compiling every module it imports. A whole-command workload counts the
whole process.
An in-process workload counts the
difference between a process that runs it 2k times and one that runs it k times, divided
by k, so its set-up and Python's start-up cancel out. The last column, when two
checkouts are given, is the first's count over the second's.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

COLLECTED = re.compile(r"Collected : (\d+)")

# name -> (kind, code): "command" runs `gradcalc ARGS` or `python ARGS`; "loop" is a
# Python snippet run with REPEAT bound, with bench/ on sys.path as W's folder (and A,
# array_speed, for the snippets that use it).
WORKLOADS: dict[str, tuple[str, list[str] | str]] = {
    "import numpy (python -c)": ("python", ["-c", "import numpy"]),
    "one-shot: gradcalc eval 'x*2' x=3": ("gradcalc", ["eval", "x*2", "x=3"]),
    "gradcalc check: 1,000 checks (whole command)": ("gradcalc", ["check", "{checks}"]),
    "8x8 chain, 71 ops (per run)": (
        "loop", "d = W.tensor_inputs(8)\nfor _ in range(REPEAT): W.chain_gradcalc(d, 10)"),
    "8x8 chain, 71 ops, NumPy by hand (per run)": (
        "loop", "d = W.tensor_inputs(8)\nfor _ in range(REPEAT): W.chain_numpy(d, 10)"),
    "3,000-input check (per run)": (
        "loop", "run = W.wide_check_gradcalc(3000)\nfor _ in range(REPEAT): run()"),
    "parse + compile 100 kB program (per run)": (
        "loop", "f = W.parse_gradcalc(W.long_program(100_000))\nfor _ in range(REPEAT): f()"),
}
LOOP_REPEATS = {"8x8 chain, 71 ops (per run)": 20, "8x8 chain, 71 ops, NumPy by hand (per run)": 20, "3,000-input check (per run)": 4,
                "parse + compile 100 kB program (per run)": 2}

# Issue 37's transforms (bench/array_speed.py, A), each through gradcalc's Python API, its
# language (a Session) and by hand in NumPy: the ratios the timings give on a loaded host,
# without the load. (torch and JAX are left to the timings: under callgrind their start-up
# and compilation alone take minutes.)
TRANSFORMS = {  # workload -> (API, language, NumPy by hand)
    "vmap(V), 20,000 rows": ("A.vmap_rows('gradcalc', 20_000)", "A.language('vmap', 20_000)", "A.vmap_rows_numpy(20_000)"),
    "vmap(grad(V)), 20,000 rows": ("A.vmap_rows('gradcalc', 20_000, 0)", "A.language('vmap grad', 20_000)",
                                   "A.vmap_rows_numpy(20_000, 0)"),
    "jacrev(f), n = 300": ("A.jacobian('gradcalc', 'jacrev', 300)", "A.language('jacrev', 300)", "A.jacobian_numpy(300)"),
    "jacfwd(f), n = 300": ("A.jacobian('gradcalc', 'jacfwd', 300)", "A.language('jacfwd', 300)", "A.jacobian_numpy(300)"),
    "hessian(h), n = 300": ("A.hessian('gradcalc', 300)", "A.language('hessian', 300)", "A.hessian_numpy(300)"),
    "MLP training step": ("A.train_step('gradcalc')", "A.language('train step')", "A.train_step_numpy()"),
}
WORKLOADS.update({f"transforms: {workload}, {how} (per run)": ("loop", f"run = {setup}\nfor _ in range(REPEAT): run()")
                  for workload, setups in TRANSFORMS.items()
                  for how, setup in zip(("gradcalc API", "gradcalc language", "NumPy by hand"), setups)})
WORKLOADS.update({f"transforms: {workload}, gradcalc API, diagonal batches off (per run)":  # the ledger's comparison
                  ("loop", f"run = {setup}\nfor _ in range(REPEAT): run()")
                  for workload, setup in (("jacrev(f), n = 300", "A.jacobian('gradcalc', 'jacrev', 300, diagonal=False)"),
                                          ("jacfwd(f), n = 300", "A.jacobian('gradcalc', 'jacfwd', 300, diagonal=False)"),
                                          ("hessian(h), n = 300", "A.hessian('gradcalc', 300, diagonal=False)"))})


def callgrind(argv: list[str], env: dict[str, str], warm: bool = False) -> int:
    if warm:  # compiles and caches the bytecode the counted run then reads
        subprocess.run(argv, capture_output=True, env=env, check=False)
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        capture_output=True, text=True, env=env, check=False)
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or not found:
        errors = [line for line in done.stderr.splitlines() if "Error" in line and not line.startswith("==")]
        raise WorkloadFailed(errors[-1] if errors else f"callgrind failed for {argv}:\n{done.stderr[-2000:]}")
    return int(found.group(1))


class WorkloadFailed(Exception):
    """A workload that raised (its error is shown in its row; the others are still counted)."""


def measure(checkout: Path, name: str, files: dict[str, str]) -> int:
    python = checkout / ".venv" / "bin" / "python"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
           "NO_COLOR": "1", "PYTHONPYCACHEPREFIX": str(Path(files["cache"]) / str(checkout).strip("/").replace("/", "_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    kind, code = WORKLOADS[name]
    if kind == "python":
        return callgrind([str(python), *code], env, warm=True)
    if kind == "gradcalc":
        argv = [str(checkout / ".venv" / "bin" / "gradcalc"), *(a.format(**files) for a in code)]
        return callgrind(argv, env, warm=True)
    k = LOOP_REPEATS.get(name, 3)
    if "A." in str(code) and not (checkout / "bench" / "array_speed.py").exists():
        return 0  # a checkout from before these workloads: nothing to count
    prelude = (f"import sys; sys.path.insert(0, {str(checkout / 'bench')!r}); import workloads as W\n"
               + ("import array_speed as A\n" if "A." in str(code) else ""))
    counts = [callgrind([str(python), "-c", prelude + f"REPEAT = {r}\n" + str(code)], env, warm=r == k) for r in (k, 2 * k)]
    return (counts[1] - counts[0]) // k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="*", default=["."], help="checkout folders, each with its .venv")
    parser.add_argument("--only", default="", help="measure only workloads whose name contains this text")
    args = parser.parse_args()
    checkouts = [Path(c).resolve() for c in args.checkouts]
    sys.path.insert(0, str(Path(__file__).parent))
    import workloads as W

    with tempfile.TemporaryDirectory() as tmp:
        checks = Path(tmp) / "checks.gc"
        checks.write_text(W.checks_file(1000))
        files = {"checks": str(checks), "cache": str(Path(tmp) / "bytecode")}
        for name in WORKLOADS:
            if args.only not in name:
                continue
            try:
                counts = [measure(c, name, files) for c in checkouts]
            except WorkloadFailed as err:
                print(f"{name:48s}  failed: {err}", flush=True)
                continue
            row = f"{name:48s}" + "".join(f"{n:>16,d}" for n in counts)
            if len(counts) > 1 and counts[1]:
                row += f"{counts[0] / counts[1]:>8.3f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
