"""`gradcalc check -j N` gives what `-j 1` gives (apart from times); `--format github`."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcalc.cli.annotations import command
from gradcalc.cli.check_runner import Part, check_indices, compile_file, run_part
from gradcalc.cli.parallel import plan, worker_count
from gradcalc.parser.check_statements import CheckDefaults, CheckOutcome

from .test_cli import gradcalc


def large_file(n: int = 48) -> str:
    """n checks with setup between them: passes, a failure at a kink, check errors and
    setup errors, and a setup error after the last check."""
    lines = ["x = 0.25", "W = randn(3, 2, seed=4)"]
    for k in range(n):
        if k % 10 == 3:
            lines.append(f"z{k} = missing_{k} + 1")  # a setup error
        lines.append(f"y{k} = x * {k + 1}")
        kind = k % 7
        if kind == 5:
            lines.append(f"check relu(y{k} - {(k + 1) / 4})")  # at the kink: fails
        elif kind == 6:
            lines.append(f"check nosuch(y{k})")  # an error
        else:
            lines.append(f"check tanh(W * y{k}).sum() + y{k} ** 2")
    lines.append("after = nothing_here")
    return "\n".join(lines) + "\n"


@pytest.fixture()
def batch(tmp_path):
    big = tmp_path / "big.gc"
    big.write_text(large_file())
    small = tmp_path / "small.gc"
    small.write_text("a = 2\ncheck exp(a) * a\ncheck a * q\n")
    broken = tmp_path / "broken.gc"
    broken.write_text("a = (2\ncheck a\n")
    return [str(big), str(small), str(broken)]


def without_times(xml: str) -> str:
    return re.sub(r' time="[0-9.]+"', "", xml)


def checks_in(part: Part) -> int:
    program, _ = compile_file(part.origin, part.source)
    stop = len(program.statements) if part.stop is None else part.stop
    return sum(part.first <= i < stop for i in check_indices(program))


def test_plan_cuts_a_large_file_between_checks_and_covers_every_statement_once():
    source = large_file()
    parts = plan([("big.gc", source), ("s.gc", "a = 1\ncheck a * a\n")], workers=2)
    big = [p for p in parts if p.origin == "big.gc"]
    assert len(big) > 1 and sum(map(checks_in, big)) == 48
    assert big[0].first == 0 and big[-1].stop is None
    assert all(a.stop == b.first for a, b in zip(big, big[1:]))  # adjacent, no gap, no overlap
    assert [checks_in(p) for p in parts if p.origin == "s.gc"] == [1]


def test_parts_run_apart_give_the_outcomes_of_the_whole_file():
    source = large_file()
    whole = run_part(Part("big.gc", source, 0, None), CheckDefaults(), [])
    pieces = [o for p in plan([("big.gc", source)], workers=3) for o in run_part(p, CheckDefaults(), [])]
    assert len(whole) == 48 + 5 + 1  # checks, the setup errors among them, the one after
    assert [(o.line, o.text, o.status, o.message, o.max_abs_error) for o in pieces] == \
        [(o.line, o.text, o.status, o.message, o.max_abs_error) for o in whole]
    assert {o.status for o in whole} == {"pass", "fail", "error"}


STATEMENTS = {
    "setup": "v{k} = x * {k}",
    "bad setup": "v{k} = nowhere_{k}",
    "pass": "check tanh(x * {k}).sum()",
    "fail": "check relu(x - 0.5)",  # x holds 0.5: the kink
    "error": "check x * unknown_{k}",
    "value": "check x * 2 == [1, {k}]",
    "broken": "check (x",
}


@given(st.lists(st.sampled_from(sorted(STATEMENTS)), max_size=30), st.integers(2, 6))
def test_any_file_cut_into_any_parts_gives_the_outcomes_of_the_whole(kinds, workers):
    source = "x = [0.5, 1.0]\n" + "\n".join(STATEMENTS[kind].format(k=k) for k, kind in enumerate(kinds)) + "\n"
    key = lambda o: (o.line, o.text, o.status, o.message, o.max_abs_error, o.warnings)  # noqa: E731
    whole = [key(o) for o in run_part(Part("f.gc", source, 0, None), CheckDefaults(), [])]
    parts = plan([("f.gc", source)], workers, min_part=1)
    assert [key(o) for p in parts for o in run_part(p, CheckDefaults(), [])] == whole


def test_minus_j_output_exit_status_json_and_junit_match_a_serial_run(batch, tmp_path):
    serial = gradcalc("check", *batch, "--junit-xml", str(tmp_path / "1.xml"))
    parallel = gradcalc("check", "-j", "2", *batch, "--junit-xml", str(tmp_path / "2.xml"))
    assert serial.returncode == parallel.returncode == 1
    assert parallel.stdout == serial.stdout
    assert "ERROR " + batch[2] + ":1  a = (2" in serial.stdout and "line 2, column 1: expected ')'" in serial.stdout
    # big.gc: 48 checks, 7 at a kink and 6 calling no function, 6 setup errors; small.gc: 1 and 1;
    # broken.gc: 2 (the statement that does not parse, and the check that uses its name)
    assert serial.stdout.endswith("36 passed, 7 failed, 15 errors (7 with warnings)\n")
    assert without_times((tmp_path / "2.xml").read_text()) == without_times((tmp_path / "1.xml").read_text())
    one, every_core = gradcalc("check", *batch, "--json"), gradcalc("check", "-j", "0", *batch, "--json")
    assert json.loads(every_core.stdout) == json.loads(one.stdout)
    assert every_core.returncode == 1


def test_junit_gives_each_testcase_a_time(batch, tmp_path):
    gradcalc("check", "-j", "2", *batch, "--junit-xml", str(tmp_path / "r.xml"))
    suites = ET.parse(tmp_path / "r.xml").getroot().findall("testsuite")
    cases = [c for s in suites for c in s.findall("testcase")]
    assert len(cases) == 48 + 6 + 2 + 2
    assert all(float(c.get("time")) >= 0 for c in cases)
    assert all(float(s.get("time")) >= 0 for s in suites)


def test_workers_get_the_bindings_and_the_element_cap(tmp_path):
    np.save(tmp_path / "w.npy", np.array([0.5, -1.5]))
    script = tmp_path / "uses.gc"
    script.write_text("check tanh(W * k).sum()\ncheck zeros(10) + k\n" * 5)
    outputs = [gradcalc("check", "-j", jobs, str(script), f"W=@{tmp_path / 'w.npy'}", "k=3", "--max-elements", "5", "--json")
               for jobs in ("1", "2")]
    docs = [json.loads(done.stdout) for done in outputs]
    assert docs[0] == docs[1]
    assert docs[0]["summary"] == {"pass": 5, "fail": 0, "error": 5}
    assert all("over the cap of 5" in c["message"] for c in docs[0]["checks"][1::2])


def test_worker_count():
    assert worker_count(3) == 3
    assert worker_count(0) >= 1


def test_github_format_annotates_failures_and_errors_on_their_lines(tmp_path):
    path = tmp_path / "g.gc"
    path.write_text("x = 0\ncheck relu(x)\ncheck exp(x)\ncheck nosuch(x)\n")
    done = gradcalc("check", str(path), "--format", "github")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    where = str(path).replace(":", "%3A").replace(",", "%2C")
    assert lines[0].startswith(f"::error file={where},line=2,title=gradcheck failed::relu(x) wrt x: max abs error 0.5")
    assert "atol 1e-05, rtol 0.001, central" in lines[0]
    assert lines[1] == (f"::warning file={where},line=2,title=gradcheck warning::relu(x): evaluated at a kink of relu: "
                        "the derivative there is a convention, not a limit")
    assert lines[2].startswith("PASS ") and lines[2].endswith("exp(x)  wrt x  complex  abs 0  rel 0")
    # (a suggestion of a close name may follow)
    assert lines[3].startswith(f"::error file={where},line=4,title=gradcheck error::nosuch(x): line 4, column 7: unknown function 'nosuch'")
    assert lines[4] == "1 passed, 1 failed, 1 errors (1 with warnings)"
    assert gradcalc("check", str(path), "--format", "fancy").returncode == 2


def test_github_escaping_follows_the_actions_toolkit():
    outcome = CheckOutcome(text="t", line=3, status="error", file="a,b:c.gc")
    assert command("error", outcome, "x", "50% done\nnext\rline") == "::error file=a%2Cb%3Ac.gc,line=3,title=x::50%25 done%0Anext%0Dline"
    assert command("error", CheckOutcome(text="t", line=1, status="error", file="<stdin>"), "x", "m") == "::error line=1,title=x::m"


@pytest.mark.slow
def test_wrt_names_and_warnings_come_in_one_order_whatever_the_run(tmp_path):
    """Variables off the value's graph (grad(x*2, x) is constant in x) are listed, and
    warned about, in the order the expression names them, after those on it: the same in
    every run and with any number of workers (Python seeds its string hashes per process)."""
    import random

    rng = random.Random(38)
    names = ["x", "y", "zed", "w", "alpha", "b2", "q"]
    lines = [f"{name} = {k + 2}" for k, name in enumerate(names)]
    expected = []
    for _ in range(12):
        chosen = rng.sample(names, 4)
        lines.append("check " + " + ".join(f"grad({n}*{j + 2}, {n})" for j, n in enumerate(chosen[:3])) + f" + grad({chosen[3]}**2, {chosen[3]})")
        expected.append([chosen[3], *chosen[:3]])  # on the graph (2 * w depends on w) first, then the others as named
    path = tmp_path / "order.gc"
    path.write_text("\n".join(lines) + "\n")
    runs = {gradcalc("check", "-j", jobs, str(path), env={"PYTHONHASHSEED": seed}).stdout for jobs in ("1", "2") for seed in ("0", "1", "2", "3")}
    assert len(runs) == 1
    listed = [line.split("  wrt ")[1].split("  ")[0].split(", ") for line in runs.pop().splitlines() if "  wrt " in line]
    assert listed == expected
