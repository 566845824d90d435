"""CONTRIBUTING.md's recipe for adding an op, held to the registry.

`recipe_gaps(op)` is the registry's completeness check (autodiff/registry.py:
`missing_steps`) with the two steps that live outside the engine, the engine table row
and the docs. Every op passes it; each line it gives starts with the name of a step of
the recipe, as CONTRIBUTING.md writes it. In a subprocess (the repository is never
touched) a new op is defined with only a forward, its gaps name each step the recipe
then asks for, and each name goes away as that step is added.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gradcalc.autodiff import REGISTRY
from gradcalc.autodiff.registry import missing_steps
from gradcalc.parser.engines.table import TABLE

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE_DOC = ROOT / "docs" / "language.md"


def recipe_steps() -> list[str]:
    """The names of the recipe's numbered steps, from CONTRIBUTING.md ("1. **forward**")."""
    text = (ROOT / "CONTRIBUTING.md").read_text().split("## Adding an op\n")[1].split("\n## ")[0]
    return re.findall(r"^\d+\. \*\*(.+?)\*\*", text, re.M)


def recipe_gaps(op: Any, docs: str | None = None, table: dict[str, Any] | None = None) -> list[str]:
    """What `op` lacks of the recipe: the registry's check, then its row in the engine
    table (parser/engines/table.py) and in the function table of docs/language.md."""
    docs = LANGUAGE_DOC.read_text() if docs is None else docs
    gaps = missing_steps(op)
    if op.name not in (TABLE if table is None else table):
        gaps.append("engine table row: its JAX and PyTorch counterparts in parser/engines/table.py (or a Gap with the reason)")
    functions = docs.split("<!-- ops:start -->")[-1].split("<!-- ops:end -->")[0]
    if op.public and f"| `{op.signature}` |" not in functions:
        gaps.append("docs: the function table of docs/language.md, regenerated: python -m gradcalc.cli.oplist docs/language.md")
    return gaps


def test_the_recipe_names_every_step_the_tests_demand():
    assert recipe_steps() == [
        "forward", "VJP", "JVP", "batching rule", "Check", "edges", "PyTorch oracle", "mpmath reference", "second derivative",
        "engine table row", "docs",
    ]


def test_contributing_md_holds_the_only_recipe():
    """docs/engine.md's section of that name points to it and lists no steps of its own."""
    section = (ROOT / "docs" / "engine.md").read_text().split("### Adding an op\n")[1].split("\n### ")[0]
    assert "CONTRIBUTING.md#adding-an-op" in section
    assert not re.search(r"^(- |\d+\. )", section, re.M), "docs/engine.md lists steps of adding an op: they belong in CONTRIBUTING.md"


@pytest.mark.parametrize("op", REGISTRY.values(), ids=lambda op: op.name)
def test_every_op_of_the_registry_has_every_step_of_the_recipe(op):
    assert recipe_gaps(op) == []


# The steps of a new op, one by one: relu6 (min(max(x, 0), 6), PyTorch's F.relu6), defined
# first with only a forward. Each stage adds the keyword arguments of one step.
SCRIPT = r'''
import json, shutil, sys, tempfile
from pathlib import Path

import numpy as np

from gradcalc.autodiff import REGISTRY
from gradcalc.autodiff.batching import BROADCAST
from gradcalc.autodiff.forward import DIAGONAL
from gradcalc.autodiff.registry import Check, Edge, Reference, Torch, defop, unregister
from gradcalc.cli.oplist import update_page
from gradcalc.parser.engines.table import OWN, TABLE, Counterparts
from tests.test_op_recipe import recipe_gaps

def relu6(x):
    return np.minimum(np.maximum(x, 0.0), 6.0)

def near_a_kink(x, tol=0.0):
    return bool(np.any(np.minimum(np.abs(x), np.abs(x - 6.0)) <= tol))

STAGES = [
    ("VJP", {"vjps": (lambda m, g, ans, x: g * ((m.raw(x) > 0) & (m.raw(x) < 6)),)}),
    ("batching rule", {"batch": BROADCAST}),  # (before the JVP: DIAGONAL would give BROADCAST by itself)
    ("JVP", {"jvp": DIAGONAL}),
    ("Check", {"check": Check(low=-2.0, high=8.0, kink_gap=1e-3), "kink": near_a_kink}),
    ("edges", {"edges": (Edge("at 0", [0.0], 0.0, (0.0,)), Edge("at 6", [6.0], 6.0, (0.0,)))}),
    ("PyTorch oracle", {"torch": Torch("torch.nn.functional.relu6")}),
    ("mpmath reference", {"reference": Reference("min(max(x, 0), 6)", "mpf(1) if 0 < x < 6 else mpf(0)", "spread(-10, 10)")}),
    ("second derivative", {"reference": Reference("min(max(x, 0), 6)", "mpf(1) if 0 < x < 6 else mpf(0)", "spread(-10, 10)",
                                                  second="mpf(0)")}),
    ("engine table row", {}),
    ("docs", {}),
]

given = {"vjps": None, "doc": "min(max(x, 0), 6)", "category": "elementwise", "method": True}
table = dict(TABLE)
page = Path(tempfile.mkdtemp()) / "language.md"
shutil.copy(sys.argv[1], page)
report = []
for step, arguments in [("forward", {}), *STAGES]:
    given.update(arguments)
    if step == "engine table row":
        table["relu6"] = Counterparts("jax.nn.relu6", OWN)
    if step == "docs":
        update_page(str(page))
    if "relu6" in REGISTRY:
        unregister("relu6")
    op = defop("relu6", relu6, **given)
    report.append([step, recipe_gaps(op, page.read_text(), table)])

# The complete op, through the tests that read its record (imported now: they read the registry as they load).
try:
    from tests import test_accuracy, test_torch_differential
except BaseException as skipped:  # (pytest's Skipped: mpmath or torch is not installed)
    consumers = f"skipped: {skipped}"
else:
    test_accuracy.test_value_and_two_derivatives_are_within_1e_14_of_mpmath_over_the_whole_range(op)
    test_torch_differential.test_op_matches_torch_to_second_order(op, 0)
    consumers = "checked"
print(json.dumps({"stages": report, "consumers": consumers}))
'''


def test_a_new_op_is_told_each_missing_step_until_it_has_them_all():
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(LANGUAGE_DOC)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    stages = found["stages"]
    steps = recipe_steps()
    named = [[gap.split(":")[0] for gap in gaps] for _step, gaps in stages]
    for gaps in named:
        assert set(gaps) <= set(steps), f"a gap not named as the recipe names its steps: {gaps}"
    # With only a forward: every step but the forward itself, and the edges (it has no kink yet).
    assert named[0] == [s for s in steps if s not in ("forward", "edges")]
    for (step, _), before, after in zip(stages[1:], named, named[1:]):
        due = set(before) | ({"edges"} if step == "Check" else set())  # (its kink comes with its Check: then its edges are due)
        assert after == [s for s in steps if s in due and s != step], f"after adding {step}: {after}"
    assert named[-1] == []
    # ... and the tests that read an op's record take the new one up: mpmath and PyTorch agree with it.
    if found["consumers"] != "checked":
        pytest.skip(found["consumers"])
