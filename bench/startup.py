"""Where the start-up of `gradcalc eval 'x*2' x=3` goes (docs/performance.md, "Start-up budget").

    python bench/startup.py [--runs 21]

Three measurements, each repeated in fresh processes (medians; on a shared machine read
the shares and ratios rather than the milliseconds):
1. `python -X importtime` of the command, each module's own time charged to its nearest
   importer outside the standard library (so `subprocess` imported by typer counts as
   typer's), gradcalc per subpackage;
2. the work after the imports: the first parses, the first syntax error; and, for the
   commands that take typer's path (cli/entry.py runs a plain eval without it), typer
   building its command tree;
3. whole processes, paired round by round against `python -c "import numpy"`.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import time

GRADCALC = os.path.join(os.path.dirname(sys.executable), "gradcalc")
EVAL = [GRADCALC, "eval", "x*2", "x=3"]
STDLIB = set(sys.stdlib_module_names) | {"_frozen_importlib_external", "zipimport", "encodings", "site"}
LINE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \| ( *)(\S+)")


def _owner(module: str) -> str | None:
    top = module.split(".")[0]
    if module == "gradcalc.parser.tables":
        return "gradcalc.parser.tables (the generated parse tables)"
    if top == "gradcalc":
        return ".".join(module.split(".")[:2])
    return None if top in STDLIB or top.startswith("_") else top


def import_groups(stderr: str) -> collections.Counter[str]:
    """-X importtime prints a module after the modules it imported, indented one level
    deeper (two spaces); rebuild that tree and charge each self time to an owner."""
    pending: dict[int, list[tuple[str, int, list]]] = collections.defaultdict(list)
    for m in LINE.finditer(stderr):
        depth = len(m.group(2)) // 2
        pending[depth].append((m.group(3), int(m.group(1)), pending.pop(depth + 1, [])))
    groups: collections.Counter[str] = collections.Counter()

    def charge(node: tuple[str, int, list], owner: str) -> None:
        name, self_us, children = node
        owner = _owner(name) or owner
        groups[owner] += self_us
        for child in children:
            charge(child, owner)

    for root in pending.get(0, []):
        charge(root, "python itself (site, encodings, .pth files)")
    return groups


PHASES = r"""
import io, json, sys, time
from gradcalc.parser import LanguageError, compile_program
t1 = time.perf_counter()
compile_program("x*2"); compile_program("3")
t2 = time.perf_counter()
try:
    compile_program("x +* 2")
except LanguageError:
    pass
t3 = time.perf_counter()
import typer
from gradcalc.cli import main as m
t4 = time.perf_counter()
typer.main.get_command(m.app)
t5 = time.perf_counter()
print(json.dumps({"first two parses": t2 - t1,
                  "the first syntax error (its expected terminals read from the table)": t3 - t2,
                  "typer builds its command tree (not on the plain eval path)": t5 - t4}))
"""

def _wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env={**os.environ, "NO_COLOR": "1"})
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    imports: dict[str, list[float]] = collections.defaultdict(list)
    phases: dict[str, list[float]] = collections.defaultdict(list)
    walls: dict[str, list[float]] = collections.defaultdict(list)
    processes = {"gradcalc eval 'x*2' x=3": EVAL, 'python -c "import numpy"': [sys.executable, "-c", "import numpy"],
                 'python -c "import numpy, typer"': [sys.executable, "-c", "import numpy, typer"],
                 'python -c "pass"': [sys.executable, "-c", "pass"]}
    for r in range(runs):
        err = subprocess.run([sys.executable, "-X", "importtime", *EVAL], capture_output=True, text=True, check=True).stderr
        groups = import_groups(err)
        for name in set(groups) | set(imports):
            imports[name].append(groups.get(name, 0) / 1e3)
        out = subprocess.run([sys.executable, "-c", PHASES], capture_output=True, text=True, check=True).stdout
        for name, seconds in json.loads(out).items():
            phases[name].append(seconds * 1e3)
        for name in list(processes) if r % 2 == 0 else list(processes)[::-1]:
            walls[name].append(_wall(processes[name]))
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {runs} runs\n\nimports (own time, by nearest importer outside the standard library):")
    for name, ms in sorted(imports.items(), key=lambda kv: -statistics.median(kv[1])):
        if statistics.median(ms) >= 0.5:
            print(f"  {statistics.median(ms):7.1f} ms  {name}")
    print(f"  {statistics.median([sum(run) for run in zip(*imports.values())]):7.1f} ms  all imports")
    print("\nafter the imports:")
    for name, ms in phases.items():
        print(f"  {statistics.median(ms):7.1f} ms  {name}")
    print('\nwhole processes, paired with python -c "import numpy" (min / median / max ratio):')
    numpy = walls['python -c "import numpy"']
    for name, seconds in walls.items():
        ratios = [a / b for a, b in zip(seconds, numpy)]
        print(f"  {statistics.median(seconds) * 1e3:7.1f} ms  {name}: {min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}")


if __name__ == "__main__":
    main()
