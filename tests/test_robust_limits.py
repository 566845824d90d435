"""Limits that hold and exits that say what happened, through the real command: the time
and memory budgets of a statement, a CSV over the element cap refused while it is read,
memory under `ulimit -v`, Ctrl-C (SIGINT to the process group) in every command, and a
reader of stdout that goes away."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.launch import run
from tests.test_cli import GRADCALC, gradcalc

RUNAWAY = "def f(n) = f(n-1) + f(n-1) if n > 0 else 1; f(60)"


def slow_gradcalc(*args: str) -> subprocess.CompletedProcess[str]:
    """gradcalc with time to reach a budget on a loaded machine."""
    env = {**os.environ, "NO_COLOR": "1"}
    done = run(list(args), env=env, timeout=600)
    assert "Traceback" not in done.stdout + done.stderr
    return done


def test_a_runaway_statement_stops_at_its_time_budget():
    done = gradcalc("eval", RUNAWAY, "--max-seconds", "0.5", "--max-steps", "1000000000")
    assert done.returncode == 2
    assert "time budget of 0.5 seconds of CPU time" in done.stderr and "(--max-seconds raises the budget)" in done.stderr
    assert "[line 1, column 45]" in done.stderr


@pytest.mark.slow
def test_the_default_time_budget_is_a_few_seconds_of_cpu():
    started = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = slow_gradcalc("eval", RUNAWAY, "--max-steps", "1000000000")
    spent = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (spent.ru_utime - started.ru_utime) + (spent.ru_stime - started.ru_stime)
    assert done.returncode == 2 and "time budget of 5 seconds" in done.stderr, done.stderr
    assert cpu < 12, cpu  # 5 s of the statement, plus start-up


def test_the_step_budget_still_says_steps():
    done = gradcalc("eval", RUNAWAY, "--max-steps", "100000")
    assert done.returncode == 2 and "budget of 100,000 steps" in done.stderr


def test_json_error_kind_names_the_limit():
    done = gradcalc("eval", "--json", RUNAWAY, "--max-seconds", "0.2", "--max-steps", "1000000000")
    assert json.loads(done.stdout)["error"]["kind"] == "time"


def test_a_check_over_its_time_budget_is_an_error_and_the_next_check_runs(tmp_path):
    script = tmp_path / "slow.gc"
    script.write_text("x = 2\ndef f(n) = f(n-1) + f(n-1) if n > 0 else x\ncheck f(40)\ncheck x * 3\n")
    done = gradcalc("check", "--json", str(script), "--max-seconds", "0.3", "--max-steps", "1000000000")
    results = json.loads(done.stdout)["checks"]
    assert [r["status"] for r in results] == ["error", "pass"]
    assert "time budget" in results[0]["message"]


def _terms(n: int) -> str:
    return "x = ones(10**7); sum(" + "+".join(["x"] * n) + ")"


def test_a_statement_whose_graph_outgrows_the_memory_budget_is_refused():
    done = slow_gradcalc("eval", _terms(12), "--max-memory", "400000000", "--max-seconds", "120")
    assert done.returncode == 2
    assert "over the budget of 400,000,000 (--max-memory raises it)" in done.stderr, done.stderr


@pytest.mark.slow
def test_sixty_terms_stop_at_the_default_memory_budget():
    done = slow_gradcalc("eval", "--json", _terms(60), "--max-seconds", "120")  # (page faults under memory pressure neared 5 s of CPU)
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["kind"] == "memory" and "budget of 2,000,000,000" in error["message"]


def test_a_raised_memory_budget_lets_a_statement_run():
    done = gradcalc("eval", "x = ones(10**6); sum(x + x + x)", "--max-memory", "100000000000")
    assert done.returncode == 0 and "value: 3000000.0" in done.stdout


def _peak_of(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """The command's result and its peak resident memory in bytes (measured by a parent of its own)."""
    code = (
        "import resource, subprocess, sys\n"
        f"done = subprocess.run({[*GRADCALC, *args]!r}, capture_output=True, text=True)\n"
        "sys.stdout.write(done.stderr)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=600)
    *lines, last = done.stdout.strip().splitlines()
    status, peak = map(int, last.split())
    return subprocess.CompletedProcess(args, status, "", "\n".join(lines)), peak


@pytest.mark.slow
def test_an_eleven_million_row_csv_is_refused_while_read_within_a_few_times_the_cap(tmp_path):
    (tmp_path / "rows.csv").write_bytes(b"1.5\n" * 11_000_000)
    done, peak = _peak_of(["eval", "sum(x)", "x=@rows.csv"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: rows.csv: more than 10,000,000 numbers (the element cap"), done.stderr
    assert peak < 4 * 80_000_000, peak  # the cap's numbers are 80 MB


def test_a_csv_under_the_cap_reads_whole(tmp_path):
    (tmp_path / "rows.csv").write_text("a,b\n" + "".join(f"{k},{2 * k}\n" for k in range(100_000)))
    done = gradcalc("eval", "sum(b) - 2 * sum(a)", "@rows.csv:a", "b=@rows.csv:b", cwd=tmp_path)
    assert done.returncode == 0 and "value: 0.0" in done.stdout


# ---- memory under ulimit -v ------------------------------------------------------------------

ADDRESS_SPACE = 1_500_000_000


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _sparse_npy(path: Path, count: int) -> None:
    """A valid .npy of `count` float64 zeros, written as a sparse file (no disk used)."""
    import numpy as np

    with path.open("wb") as stream:
        np.lib.format.write_array_header_1_0(stream, {"descr": "<f8", "fortran_order": False, "shape": (count,)})
        stream.truncate(stream.tell() + 8 * count)


UNLIMITED = ("--max-elements", "10000000000", "--max-memory", "100000000000", "--max-input-bytes", "100000000000")


@pytest.mark.parametrize("argv", [
    ["eval", "sum(ones(3 * 10**8) * 2)"],
    ["eval", "x = ones(10**8); sum(x * x + x * x)"],
    ["eval", "sum(v)", "v=@huge.npy"],
    ["run", "-"],
    ["check", "-"],
    ["eval", "--json", "x = ones(10**8); sum(x * x + x * x)"],
], ids=["one big op", "a graph", "a data file", "run", "check", "json"])
def test_out_of_memory_under_ulimit_is_an_error_not_a_crash(tmp_path, argv):
    _sparse_npy(tmp_path / "huge.npy", 3 * 10**8)
    stdin = 'v = load("huge.npy")\ncheck sum(v * 2)\n' if argv[-1] == "-" else None
    env = {**os.environ, "NO_COLOR": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*GRADCALC, *argv, *UNLIMITED], input=stdin, capture_output=True, text=True, cwd=tmp_path,
                          env=env, preexec_fn=_limited, timeout=300)
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "internal error" not in output, output
    assert done.returncode == (1 if argv[0] == "check" else 2), output
    assert "out of memory" in output, output
    if "--json" in argv:
        assert json.loads(done.stdout)["error"]["kind"] == "size"


# ---- Ctrl-C in every command -----------------------------------------------------------------


def _group_cpu(group: int) -> float:
    """CPU seconds used so far by the live processes of a process group."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # pgrp
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _interrupt_when_busy(argv: list[str], cwd: Path, stdin: str | None = None, busy: float = 1.5) -> subprocess.CompletedProcess[str]:
    """Run the command in a process group of its own, send SIGINT to the group once it
    has used `busy` CPU seconds (well past start-up), and collect what it printed."""
    env = {**os.environ, "NO_COLOR": "1"}
    process = subprocess.Popen([*GRADCALC, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=cwd, env=env, start_new_session=True)
    if stdin is not None:
        process.stdin.write(stdin)
    process.stdin.close()
    process.stdin = None  # (communicate would flush it)
    deadline = time.monotonic() + 240
    while _group_cpu(process.pid) < busy and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


LONG = ("--max-seconds", "1000", "--max-steps", "1000000000000")
SLOW_SCRIPT = "def f(n) = f(n-1) + f(n-1) if n > 0 else 1\nf(60)\n"
SLOW_CHECKS = "x = 1.5\ndef f(n) = f(n-1) + f(n-1) if n > 0 else x\n" + "check f(22) * x\n" * 60


COMMANDS = {
    "eval": (["eval", RUNAWAY, *LONG], None),
    "eval stdin": (["eval", "-", *LONG], RUNAWAY),
    "run": (["run", "slow.gc", *LONG], None),
    "piped stdin": (["--max-seconds", "1000", "--max-steps", "1000000000000"], SLOW_SCRIPT),
    "check": (["check", "checks.gc", *LONG], None),
    "check -j 2": (["check", "-j", "2", "checks.gc", "checks.gc", *LONG], None),
    "check --junit-xml": (["check", "checks.gc", "--junit-xml", "report.xml", *LONG], None),
    "plot": (["plot", "sum(x * ones(10**5)) * x", "x=0:1", "--points", "1000000", "--csv"], None),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_ctrl_c_prints_only_interrupted_and_exits_130(tmp_path, name):
    (tmp_path / "slow.gc").write_text(SLOW_SCRIPT)
    (tmp_path / "checks.gc").write_text(SLOW_CHECKS)
    argv, stdin = COMMANDS[name]
    done = _interrupt_when_busy(argv, tmp_path, stdin)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.strip().splitlines()[-1:] == ["interrupted"], done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert not (tmp_path / "report.xml").exists()


@pytest.mark.slow
def test_ctrl_c_during_check_j2_never_prints_a_traceback(tmp_path):
    (tmp_path / "checks.gc").write_text(SLOW_CHECKS)
    for busy in (0.8, 1.5, 2.5):
        done = _interrupt_when_busy(["check", "-j", "2", "checks.gc", "checks.gc", "checks.gc", *LONG], tmp_path, busy=busy)
        assert done.returncode == 130 and done.stderr == "interrupted\n", done.stderr


# ---- a reader that goes away -----------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["plot", "sin(x)", "x=0:1", "--points", "100000"],
    ["plot", "sin(x)", "x=0:1", "--points", "100000", "--json"],
    ["eval", "sin(x)", "x=linspace(0, 1, 100000)", "--full"],
    ["eval", "--json", "sin(x)", "x=linspace(0, 1, 100000)"],
    ["run", "-", "--full"],
], ids=["plot csv", "plot json", "eval", "eval json", "run"])
def test_a_closed_pipe_exits_141_quietly(argv):
    script = "x = linspace(0, 1, 100000)\nsin(x)\n" * 3
    command = " ".join(f"'{a}'" for a in [*GRADCALC, *argv])
    done = subprocess.run(["bash", "-c", f"{command} | head -c 1000 >/dev/null; echo ${{PIPESTATUS[0]}}"], input=script if argv[0] == "run" else None,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert done.stdout.strip() == "141", done.stdout + done.stderr
    assert done.stderr == "", done.stderr


def test_ctrl_c_in_the_repl_stops_the_statement_and_keeps_the_session(tmp_path):
    import pexpect

    env = {**os.environ, "NO_COLOR": "1", "XDG_DATA_HOME": str(tmp_path), "TERM": "dumb"}
    child = pexpect.spawn(GRADCALC[0], GRADCALC[1:], env=env, encoding="utf-8", timeout=120, dimensions=(40, 200))
    try:
        child.expect(">>> ")
        child.sendline("x = 3; def f(n) = f(n-1) + f(n-1) if n > 0 else 1")
        child.expect(">>> ")
        child.sendline("f(60)")
        time.sleep(2)
        child.sendintr()
        child.expect(">>> ")
        assert "interrupted" in child.before and "Traceback" not in child.before, child.before
        child.sendline("x * 2")
        child.expect(">>> ")
        assert "value: 6.0" in child.before
    finally:
        child.terminate(force=True)
