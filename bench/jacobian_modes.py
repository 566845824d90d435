"""Forward against reverse mode on the Jacobian of a function of n inputs and m outputs.

f(x) = tanh(B @ tanh(A @ x)), A of shape (64, n) and B of shape (m, 64): one graph, its
Jacobian m x n taken both ways, by the engine's jacobian (reverse mode, jacrev: one
backward pass of a batch of m cotangents, the identity's rows) and jacobian_forward
(forward mode, jacfwd: one forward pass of a batch of n tangents). The two results are
compared and their passes counted, then each is counted in instructions under callgrind
(the difference between 2k and k Jacobians, over k, so that start-up and recording cancel
out) and timed (the fastest of several in-process runs, for a feel of the wall clock).

    python bench/jacobian_modes.py               # markdown table: docs/transforms.md
    python bench/jacobian_modes.py --no-callgrind
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (before NumPy is imported: see bench/run.py)
sys.path.insert(0, str(Path(__file__).parent))
from instructions import callgrind  # noqa: E402  (bench/ is a folder of scripts)

SHAPES = [(1, 512), (16, 512), (128, 512), (512, 512), (512, 128), (512, 16), (512, 1)]
MODES = {"jacrev": "jacobian", "jacfwd": "jacobian_forward"}
SETUP = """
import numpy as np
from gradcalc.autodiff import Tensor, jacobian, jacobian_forward
n, m = {n}, {m}
rng = np.random.default_rng(0)
x = Tensor(rng.standard_normal(n), requires_grad=True)
A, B = Tensor(rng.standard_normal((64, n)) / np.sqrt(n)), Tensor(rng.standard_normal((m, 64)) / 8)
y = (B @ (A @ x).tanh()).tanh()
"""


def instructions(n: int, m: int, mode: str, k: int = 3) -> int:
    code = SETUP.format(n=n, m=m) + "for _ in range({r}): {f}(y, x)\n"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    counts = [callgrind([sys.executable, "-c", code.format(r=r, f=MODES[mode])], env, warm=r == k) for r in (k, 2 * k)]
    return (counts[1] - counts[0]) // k


def seconds(n: int, m: int, mode: str, runs: int = 7) -> float:
    scope: dict = {}
    exec(SETUP.format(n=n, m=m), scope)
    f, y, x = scope[MODES[mode]], scope["y"], scope["x"]
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        f(y, x)
        best = min(best, time.perf_counter() - start)
    return best


def passes(n: int, m: int) -> tuple[int, int]:
    """The engine's own count of the passes each Jacobian made (backward, forward), after
    checking that the two Jacobians agree."""
    import numpy as np

    from gradcalc.autodiff.backprop import PASSES

    scope: dict = {}
    exec(SETUP.format(n=n, m=m), scope)
    counts = []
    results = []
    for mode in MODES.values():
        before = PASSES.backward + PASSES.forward
        results.append(scope[mode](scope["y"], scope["x"]).data)
        counts.append(PASSES.backward + PASSES.forward - before)
    rev, fwd = results
    if rev.shape != (m, n) or not np.allclose(rev, fwd, rtol=1e-12, atol=1e-15):
        raise SystemExit(f"jacrev and jacfwd differ for n={n}, m={m}")
    return counts[0], counts[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-callgrind", action="store_true", help="times only")
    args = parser.parse_args()
    head = "| n inputs | m outputs | jacrev passes | jacfwd passes |"
    rule = "|---:|---:|---:|---:|"
    if not args.no_callgrind:
        head += " jacrev instructions | jacfwd instructions | fwd / rev |"
        rule += "---:|---:|---:|"
    print(head + " jacrev ms | jacfwd ms |\n" + rule + "---:|---:|", flush=True)
    for n, m in SHAPES:
        rev_passes, fwd_passes = passes(n, m)
        row = f"| {n} | {m} | {rev_passes} | {fwd_passes} |"
        if not args.no_callgrind:
            rev, fwd = instructions(n, m, "jacrev"), instructions(n, m, "jacfwd")
            row += f" {rev / 1e6:,.1f}M | {fwd / 1e6:,.1f}M | {fwd / rev:.2f} |"
        row += f" {seconds(n, m, 'jacrev') * 1e3:.2f} | {seconds(n, m, 'jacfwd') * 1e3:.2f} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
