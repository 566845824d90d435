"""Forward against reverse mode on the Jacobian of a function of n inputs and m outputs.

f(x) = tanh(B @ tanh(A @ x)), A of shape (32, n) and B of shape (m, 32): one graph, its
Jacobian m x n taken both ways, by the engine's jacobian (reverse mode, one backward pass
per output: jacrev) and jacobian_forward (forward mode, one tangent pass per input: jacfwd).
The two results are compared, then each is counted in instructions under callgrind (the
difference between 2k and k Jacobians, over k, so that start-up and recording cancel out)
and timed (the fastest of several in-process runs, for a feel of the wall clock).

    python bench/jacobian_modes.py               # markdown table: docs/transforms.md
    python bench/jacobian_modes.py --no-callgrind
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from instructions import callgrind  # noqa: E402  (bench/ is a folder of scripts)

SHAPES = [(1, 64), (4, 64), (16, 64), (64, 64), (64, 16), (64, 4), (64, 1)]
MODES = {"jacrev": "jacobian", "jacfwd": "jacobian_forward"}
SETUP = """
import numpy as np
from gradcalc.autodiff import Tensor, jacobian, jacobian_forward
n, m = {n}, {m}
rng = np.random.default_rng(0)
x = Tensor(rng.standard_normal(n), requires_grad=True)
A, B = Tensor(rng.standard_normal((32, n))), Tensor(rng.standard_normal((m, 32)))
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


def agree(n: int, m: int) -> bool:
    import numpy as np

    scope: dict = {}
    exec(SETUP.format(n=n, m=m), scope)
    rev, fwd = (scope[f](scope["y"], scope["x"]).data for f in MODES.values())
    return rev.shape == (m, n) and bool(np.allclose(rev, fwd, rtol=1e-12, atol=1e-15))


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
        if not agree(n, m):
            raise SystemExit(f"jacrev and jacfwd differ for n={n}, m={m}")
        row = f"| {n} | {m} | {m} | {n} |"
        if not args.no_callgrind:
            rev, fwd = instructions(n, m, "jacrev"), instructions(n, m, "jacfwd")
            row += f" {rev / 1e6:,.1f}M | {fwd / 1e6:,.1f}M | {fwd / rev:.2f} |"
        row += f" {seconds(n, m, 'jacrev') * 1e3:.2f} | {seconds(n, m, 'jacfwd') * 1e3:.2f} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
