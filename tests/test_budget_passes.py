"""Every limit holds on every pass (issue 38): the time, step and memory budgets of a
statement cover the report's backward and forward passes of its value, `--steps`,
`check`, `plot` and a notebook cell, through the real command.

Each case is run as a subprocess with a timeout of its own; time is measured as the
child's CPU time (resource.RUSAGE_CHILDREN), memory under `ulimit -v` (RLIMIT_AS), so
that a pass the budget does not see ends in a hang, an `out of memory` or a crash, not
in the budget's error. Expected numbers come from closed forms."""
from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli import GRADCALC

ADDRESS_SPACE = 3_000_000_000  # ulimit -v: room for the budget below and the libraries, not for what the passes would take
MEMORY = "700000000"
# The memory budget, with a time budget far from it: under memory pressure (two test workers
# each growing to gigabytes) the page faults of these statements' CPU time neared the 5 s
# default, and the time budget stopped them first.
MEMORY_ONLY = ("--max-memory", MEMORY, "--max-seconds", "120")
ENV = {**os.environ, "NO_COLOR": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

# A vjp rule whose every use doubles its work: 2**40 calls, never finishing on its own.
EXPONENTIAL_RULE = "def h(n) = h(n-1) + h(n-1) if n > 0 else 1\ndef f(x) = x * 2\nvjp f(x, g) = g * h(40)\n"
# 60 tensors of 8 MB: the statement takes 480 MB, under the budget; the report's backward
# pass keeps a gradient per node (each name reports its adjoint), 480 MB more.
CHAIN = "x = ones(10**6)\nsum(x" + " * 1.0001" * 60 + ")\n"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run(*args: str, stdin: str | None = None, cwd: Path | None = None, limit_memory: bool = False,
        timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
    """The command's result and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([*GRADCALC, *args], input=stdin, capture_output=True, text=True, env=ENV, cwd=cwd, timeout=timeout,
                          preexec_fn=_limited if limit_memory else None)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "internal error" not in output, output
    return done, cpu


def refused_by(done: subprocess.CompletedProcess[str], kind: str, status: int = 2) -> str:
    """The error of a budget (kind time, steps or memory), with the command's status."""
    assert done.returncode == status, done.stdout + done.stderr
    words = {"time": "time budget of", "steps": "budget of", "memory": "over the budget of"}[kind]
    assert words in done.stdout + done.stderr, done.stdout + done.stderr
    return done.stdout + done.stderr


# ---- the report's backward pass -----------------------------------------------------------------


@pytest.mark.slow
def test_the_time_message_asks_about_a_recursion_only_after_many_steps():
    """Found by a new user: a few products of large matrices over the time budget were asked
    'is a recursion doubling its work?'. Few steps in the time are each on large tensors."""
    done, _ = run("eval", "sum(W @ W @ W @ W @ W @ W @ W @ W @ W @ W)", "W=randn(1500, 1500)", "--max-seconds", "0.3")
    text = refused_by(done, "time")
    assert "each on large tensors" in text and "recursion" not in text
    # (2 s: a loaded two-core CI host ran 84,000 steps of it in 0.5 s, under the 100,000 that
    # make the guess; the steps in a budget of CPU time depend on the machine)
    done, _ = run("eval", "def h(n) = h(n-1) + h(n-1) if n > 0 else 1; h(40)", "--max-seconds", "2", "--max-steps", "1000000000000")
    text = refused_by(done, "time")
    assert "is a recursion doubling its work?" in text and "large tensors" not in text


def test_an_exponential_vjp_rule_stops_at_the_time_budget_in_the_report():
    done, cpu = run("eval", EXPONENTIAL_RULE + "f(a)", "a=1", "--max-seconds", "1", "--max-steps", "1000000000000")
    text = refused_by(done, "time")
    assert "time budget of 1 second of CPU time" in text
    assert "4 | f(a)" in text  # placed at the statement whose report it is
    assert cpu < 6, cpu


def test_an_exponential_vjp_rule_stops_at_the_step_budget_in_the_report():
    done, _ = run("eval", "--json", EXPONENTIAL_RULE + "f(a)", "a=1", "--max-steps", "100000")
    assert json.loads(done.stdout)["error"]["kind"] == "steps"


def test_the_report_shares_the_statement_s_step_budget():
    # The statement alone runs 2**11 calls of h; its report's backward pass, as many again:
    # a budget the statement fits in alone is over for the two together.
    program = "def h(n) = h(n-1) + h(n-1) if n > 0 else 1\ndef f(x) = x * h(11)\nvjp f(x, g) = g * h(11)\nf(a)"
    fits, _ = run("eval", "--json", program, "a=1", "--max-steps", "200000")
    assert fits.returncode == 0 and json.loads(fits.stdout)["grads"]["a"] == 2.0**11
    over, _ = run("eval", "--json", program, "a=1", "--max-steps", "70000")
    alone, _ = run("eval", "--json", program.replace("f(a)", "y = f(a)\n1"), "a=1", "--max-steps", "70000")
    assert alone.returncode == 0, alone.stderr  # the statement fits ...
    assert json.loads(over.stdout)["error"]["kind"] == "steps"  # ... its report does not


@pytest.mark.parametrize("command", ["eval", "run", "repl"])
def test_the_report_s_backward_pass_stops_at_the_memory_budget(tmp_path, command):
    source = CHAIN
    budgets = MEMORY_ONLY
    if command == "eval":
        done, _ = run("eval", source, *budgets, limit_memory=True)
    elif command == "run":
        (tmp_path / "chain.gc").write_text(source)
        done, _ = run("run", "chain.gc", *budgets, cwd=tmp_path, limit_memory=True)
    else:  # piped stdin runs as the REPL's statements do, one by one
        done, _ = run(*budgets, stdin=source, limit_memory=True)
    text = refused_by(done, "memory")
    assert "backward pass" in text and "out of memory" not in text
    assert "2 | sum(x * 1.0001" in text  # placed at the statement whose report it is


def test_the_report_s_backward_pass_counts_a_step_per_node():
    from gradcalc.autodiff import Tensor
    from gradcalc.autodiff.limits import STEPS, step_budget

    x = Tensor(np.ones(3), requires_grad=True)
    y = x
    for _ in range(50):
        y = y * 2.0
    out = y.sum()
    with step_budget():
        before = STEPS.taken()
        out.backward()
        assert STEPS.taken() - before == 52  # sum, 50 products, x
    assert np.array_equal(x.grad, np.full(3, 2.0**50))


# ---- the report's forward passes ----------------------------------------------------------------


def test_forward_mode_on_thirty_thousand_elements_stops_at_the_time_budget():
    done, cpu = run("eval", "--mode", "forward", "sum(x * x)", "x=randn(30000, seed=0)", "--max-seconds", "1")
    refused_by(done, "time")
    assert cpu < 8, cpu  # (it took 54 s: a pass per element, outside any budget)


def test_forward_mode_over_many_batches_gives_the_closed_form():
    # Under a cap of 1,000 elements, 300 tangents go 3 at a time (a batch may hold the
    # 300-element tensors of 3 tangents): 100 forward passes, each under the budget.
    done, _ = run("eval", "--json", "--mode", "forward", "sum(x * sin(x))", "x=linspace(-2, 3, 300)", "--max-elements", "1000")
    assert done.returncode == 0, done.stderr
    x = np.linspace(-2, 3, 300)
    assert np.allclose(json.loads(done.stdout)["grads"]["x"], np.sin(x) + x * np.cos(x), rtol=1e-14, atol=1e-15)


def test_the_report_s_forward_passes_stop_at_the_memory_budget():
    done, _ = run("eval", "--mode", "forward", CHAIN, *MEMORY_ONLY, limit_memory=True)
    text = refused_by(done, "memory")
    assert "out of memory" not in text


# ---- --steps ------------------------------------------------------------------------------------


def test_steps_shares_the_statement_s_budget():
    done, cpu = run("eval", "--steps", EXPONENTIAL_RULE + "f(a)", "a=1", "--max-seconds", "1", "--max-steps", "1000000000000")
    refused_by(done, "time")
    assert cpu < 6, cpu


# ---- a statement of a few huge ops: the clock is looked at between them ----------------------------


def test_a_few_huge_ops_stop_at_the_time_budget():
    # Eleven products of 2000 x 2000 matrices: eleven steps, several seconds each on one
    # core; the clock is looked at by CPU time, not only every 10,000 steps.
    done, cpu = run("eval", "A = ones(2000, 2000) / 2000; sum(A@A@A@A@A@A@A@A@A@A@A@A)", "--max-seconds", "1")
    refused_by(done, "time")
    assert cpu < 6, cpu


# ---- checks -------------------------------------------------------------------------------------


def test_a_check_through_an_exponential_rule_stops_at_the_time_budget_and_the_next_runs(tmp_path):
    (tmp_path / "c.gc").write_text("a = 1.0\n" + EXPONENTIAL_RULE + "check f(a)\ncheck a * 3\n")
    done, cpu = run("check", "--json", "c.gc", "--max-seconds", "1", "--max-steps", "1000000000000", cwd=tmp_path)
    results = json.loads(done.stdout)["checks"]
    assert [r["status"] for r in results] == ["error", "pass"]
    assert "time budget of 1 second" in results[0]["message"]
    assert cpu < 8, cpu


@pytest.mark.slow
def test_a_check_s_passes_stop_at_the_memory_budget(tmp_path):
    # 430 MB of graph, under the budget; the check's replays of batches of columns, over it.
    chain = "x = ones(300)\ny = x * ones(3000, 300)\nfor i in range(60): y = y * 1.0001\n"
    (tmp_path / "c.gc").write_text(chain + "check sum(y) wrt x\ncheck 2 * ones(3) == [2, 2, 2]\n")
    done, _ = run("check", "--json", "c.gc", *MEMORY_ONLY, cwd=tmp_path, limit_memory=True)
    results = json.loads(done.stdout)["checks"]
    assert [r["status"] for r in results] == ["error", "pass"], results
    assert "over the budget of 700,000,000" in results[0]["message"]


# ---- plots --------------------------------------------------------------------------------------


def test_a_plot_point_by_point_stops_at_the_time_budget():
    # A branch on x cannot take a vector of points: 10^6 points, one by one.
    done, cpu = run("plot", "sum(v * x) if x > 0.5 else x", "x=0:1", "v=ones(10)", "--points", "1000000", "--csv", "--max-seconds", "1")
    refused_by(done, "time")
    assert cpu < 8, cpu


def test_a_plot_s_derivatives_stop_at_the_memory_budget():
    # At each point the value holds 480 MB; its first and second derivatives, built with
    # their graphs, more than as much again.
    expr = "y = x * ones(10**6)\n" + "".join("y = y * 1.0001\n" for _ in range(60)) + "sum(y)"
    done, _ = run("plot", expr, "x=0:1", "--points", "2", "--csv", *MEMORY_ONLY, limit_memory=True)
    text = refused_by(done, "memory")
    assert "out of memory" not in text


# ---- a notebook cell ----------------------------------------------------------------------------

NOTEBOOK_CELLS = [
    "%load_ext gradcalc",
    "from gradcalc.autodiff import limits\nlimits.set_max_seconds(1); limits.set_max_memory(700_000_000)\n"
    "import resource\nresource.setrlimit(resource.RLIMIT_AS, (3_000_000_000, 3_000_000_000))",
    "%%gradcalc --no-graph\n" + EXPONENTIAL_RULE + "a = 1\nf(a)",
    "limits.set_max_seconds(60)",  # (the memory's cell, with time to reach its budget on a loaded machine)
    "%%gradcalc --no-graph\n" + CHAIN,
    "%gradcalc --no-graph x * 3 x=2",
]


@pytest.mark.slow
def test_a_notebook_cell_s_report_stops_at_the_time_and_memory_budgets():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True).execute()
    pages = ["\n".join(out.get("data", {}).get("text/plain", "") + out.get("text", "") for out in cell.outputs) for cell in notebook.cells]
    assert not any("Traceback" in page or "internal error" in page for page in pages), pages
    assert "time budget of 1 second" in pages[2], pages[2]
    assert "over the budget of 700,000,000" in pages[4], pages[4]
    assert "6.0" in pages[5]  # the session goes on
