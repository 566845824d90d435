"""pytest collects *.gc check files (gradcalc.cli.pytest_plugin), run for real: pytest in a
subprocess on a temporary project of passing, failing, erroring and broken check files."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent

FILES = {
    # relu at 0: reverse mode gives the convention 0, central differences (relu(h) - relu(-h))/2h = 0.5
    "failing.gc": "x = [1.0, 0.0]\ncheck relu(x).sum()\ncheck exp(x).sum()\n",
    "erroring.gc": "x = 2\ncheck nosuch(x)\ncheck tanh(x)\ncheck x * 2 == 4.5\n",
    "setup.gc": "a = 3\ncheck a * a\nb = undefined_name + 1\ncheck a * 2\ncheck exp(a)\n",
}


def pytest_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PY_COLORS": "0", "COLUMNS": "200"}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:benchmark", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """examples/ with the seed file and the files above; tests/ as the project's testpaths."""
    examples = tmp_path / "examples"
    examples.mkdir()
    shutil.copy(ROOT / "examples" / "seed.gc", examples / "seed.gc")
    for name, text in FILES.items():
        (examples / name).write_text(text)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    return tmp_path


def outcomes(xml_path: Path) -> dict[str, tuple[str, str]]:
    """testcase name -> (outcome, message) from pytest's JUnit XML."""
    found = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        status, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                status, message = tag, element.get("message", "")
        found[key] = (status, message)
    return found


def test_the_plugin_is_registered_and_xdist_is_in_the_test_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"gradcalc": "gradcalc.cli.pytest_plugin"}
    assert any(req.startswith("pytest-xdist") for req in project["optional-dependencies"]["test"])
    assert "gradcalc.cli.pytest_plugin" in {e.value for e in entry_points(group="pytest11")}


def test_each_check_is_one_item_named_file_line_expression(project):
    done = pytest_run("--collect-only", "-q", "examples/seed.gc", "examples/setup.gc", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    names = [line for line in done.stdout.splitlines() if "::" in line]
    assert names == [
        "examples/seed.gc::7 (a*b + exp(c)).relu()/a", "examples/seed.gc::15 y", "examples/seed.gc::30 g",
        "examples/setup.gc::2 a * a", "examples/setup.gc::4 a * 2", "examples/setup.gc::5 exp(a)",
    ]


def test_outcomes_and_what_a_failure_shows(project):
    done = pytest_run("examples", "-rA", "--junitxml", "report.xml", cwd=project)
    assert done.returncode == 1
    results = outcomes(project / "report.xml")
    assert {name: status for name, (status, _) in results.items()} == {
        "examples.seed.gc::7 (a*b + exp(c)).relu()/a": "passed", "examples.seed.gc::15 y": "passed", "examples.seed.gc::30 g": "passed",
        "examples.failing.gc::2 relu(x).sum()": "failure", "examples.failing.gc::3 exp(x).sum()": "passed",
        "examples.erroring.gc::2 nosuch(x)": "error", "examples.erroring.gc::3 tanh(x)": "passed",
        "examples.erroring.gc::4 x * 2 == 4.5": "failure",
        "examples.setup.gc::2 a * a": "passed", "examples.setup.gc::4 a * 2": "error", "examples.setup.gc::5 exp(a)": "passed",
    }
    out = done.stdout
    # the failing check's report: method, errors, tolerances, the worst entry by variable and index
    assert "gradcheck (central) failed: max abs error 0.5, max rel error 1" in out
    assert "examples/failing.gc:2: check relu(x).sum()" in out
    assert "with respect to: x" in out
    assert "tolerances: atol 1e-05, rtol 0.001" in out
    assert "largest error: d out / d x[1]: analytic 0.0, numeric 0.49999" in out
    assert "ops whose VJP disagrees: relu" in out
    assert "evaluated at a kink of relu" in out  # a warning, in the report and pytest's warnings summary
    assert "GradcheckWarning" in out
    # a value check that fails: |4 - 4.5| = 0.5, relative to 4.5
    assert "value check failed: max abs error 0.5, max rel error 0.111111" in out
    assert "an entry passes when |A - B| <= atol + rtol*|B|" in out
    # a check that cannot run is an error (at its setup, where it runs), with the language's error
    assert "check could not run: line 2, column 7: unknown function 'nosuch'" in out
    assert "ERROR at setup of erroring.gc:2: check nosuch(x)" in out
    # a setup error is one error, as `gradcalc check` counts it, reported by the next check
    # (at its teardown); the checks still run, on what the setup did define
    assert "setup failed at line 3: unknown name 'undefined_name'" in out
    assert "ERROR at teardown of setup.gc:4: check a * 2" in out
    assert "2 failed, 8 passed, 1 warning, 2 errors in" in out
    assert "Traceback" not in out and "gradcalc/parser" not in out


@pytest.mark.slow
def test_k_x_and_last_failed_select_checks(project):
    selected = pytest_run("examples", "-k", "exp and not seed", "--collect-only", "-q", cwd=project)
    assert [line for line in selected.stdout.splitlines() if "::" in line] == [
        "examples/failing.gc::3 exp(x).sum()", "examples/setup.gc::5 exp(a)",
    ]
    first = pytest_run("examples", "-x", "-q", "-p", "no:warnings", cwd=project)
    assert first.returncode == 1 and "stopping after 1 failures" in first.stdout
    pytest_run("examples", "-q", cwd=project)  # records the failures for --lf
    again = pytest_run("examples", "--lf", "-q", "-rfE", cwd=project)
    assert again.returncode == 1
    rerun = sorted(line.split(" - ")[0] for line in again.stdout.splitlines() if line.startswith(("FAILED", "ERROR")))
    assert rerun == [
        "ERROR examples/erroring.gc::2 nosuch(x)", "ERROR examples/setup.gc::4 a * 2",
        "FAILED examples/erroring.gc::4 x * 2 == 4.5", "FAILED examples/failing.gc::2 relu(x).sum()",
    ]
    assert "2 failed, 1 passed, 1 warning, 2 errors in" in again.stdout  # setup.gc:4's own check passes; its setup's error stays


@pytest.mark.slow
def test_collection_is_opt_in_by_the_paths_given_or_testpaths(project):
    (project / "tests" / "inside.gc").write_text("t = 2\ncheck t * t\n")

    def collected(*args: str, cwd: Path = project) -> list[str]:
        done = pytest_run("--collect-only", "-q", *args, cwd=cwd)
        return [line for line in done.stdout.splitlines() if "::" in line]

    # no paths: testpaths decide; examples/ is not among them, so it is not collected
    assert collected() == ["tests/inside.gc::2 t * t", "tests/test_plain.py::test_plain"]
    assert "examples/seed.gc::15 y" in collected("examples")
    assert collected("examples/setup.gc") == ["examples/setup.gc::2 a * a", "examples/setup.gc::4 a * 2", "examples/setup.gc::5 exp(a)"]
    assert collected("examples", "--gc=off") == []
    # a project without testpaths: a bare `pytest` collects no check files, --gc=all does
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    assert collected() == ["tests/test_plain.py::test_plain"]
    assert len(collected("--gc=all")) == 1 + 1 + 11
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\ngradcalc_collect = "all"\n')
    assert len(collected()) == 1 + 1 + 11


@pytest.mark.slow
def test_xdist_gives_the_results_of_a_serial_run(project):
    serial = pytest_run("examples", "--junitxml", "serial.xml", "-q", cwd=project)
    spread = pytest_run("examples", "-n", "2", "--junitxml", "spread.xml", "-q", cwd=project)
    assert spread.returncode == serial.returncode == 1
    assert "bringing up nodes" in spread.stdout
    assert outcomes(project / "spread.xml") == outcomes(project / "serial.xml")
    assert len(outcomes(project / "serial.xml")) == 11


def test_check_files_load_data_relative_to_their_folder(project):
    data = project / "examples" / "data"
    data.mkdir()
    np.save(data / "w.npy", np.array([[0.5, -1.0], [2.0, 0.25]]))
    (project / "examples" / "loads.gc").write_text('W = load("data/w.npy")\ncheck tanh(W @ W).sum()\n')
    done = pytest_run("examples/loads.gc", "-q", cwd=project)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout


def test_the_plugin_and_the_command_import_nothing_heavy_until_used():
    """pytest imports the plugin in every run; `gradcalc` imports main for every command."""
    probe = ("import sys, gradcalc.cli.pytest_plugin, gradcalc.cli.main; "
             "print(sorted(m for m in ('numpy', 'gradcalc.parser', 'gradcalc.cli.parallel', 'gradcalc.parser.datafiles') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_bare_pytest_among_check_files_says_how_to_run_them(tmp_path):
    """Collection is opt-in by place, so a bare `pytest` in a folder of .gc files runs
    nothing (exit 5, as pytest has it) and says how to switch the plugin on; each way it
    names then collects the files."""
    (tmp_path / "a.gc").write_text("x = 2\ncheck x ** 2\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.gc").write_text("y = 3\ncheck y * y\n")
    bare = pytest_run("-q", "-p", "no:cacheprovider", cwd=tmp_path)
    assert bare.returncode == 5
    hint = [line for line in bare.stdout.splitlines() if line.startswith("gradcalc:")]
    assert hint == [
        "gradcalc: 2 check file(s) not collected (a.gc, sub/b.gc): a bare pytest collects .gc files only under "
        "the paths it is given or its testpaths; run `pytest .` (or name their folder), list the folder in "
        "testpaths, or pass --gc=all"]
    for way in (["."], ["--gc=all"]):
        done = pytest_run("-q", "-p", "no:cacheprovider", *way, cwd=tmp_path)
        assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["sub"]\n')
    done = pytest_run("-q", "-p", "no:cacheprovider", cwd=tmp_path)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout
    off = pytest_run("-q", "-p", "no:cacheprovider", "--gc=off", cwd=tmp_path / "sub")
    assert off.returncode == 5 and "gradcalc:" not in off.stdout


@pytest.mark.slow
def test_a_failed_setup_counts_as_in_gradcalc_check(tmp_path):
    """One failed setup statement is one error in both, and the checks after it run:
    gradcalc check says 3 passed, 1 error; pytest, serially and over two workers, the same."""
    (tmp_path / "bad.gc").write_text("x = 2\ny = nosuch + 1\ncheck x**2\ncheck x**3\n")
    (tmp_path / "good.gc").write_text("x = 2\ncheck x**2\n")
    done = subprocess.run([str(Path(sys.executable).with_name("gradcalc")), "check", "bad.gc", "good.gc"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[-1] == "3 passed, 0 failed, 1 errors"
    for workers in ([], ["-n", "2"]):
        ran = pytest_run("-q", "-p", "no:cacheprovider", *workers, "bad.gc", "good.gc", cwd=tmp_path)
        assert ran.stdout.rstrip().splitlines()[-1].startswith("3 passed, 1 error in"), ran.stdout


def check_counts(cwd: Path, *files: str) -> dict[str, tuple[int, int, int]]:
    """gradcalc check's (passed, failed, errors) per file, from its JUnit XML."""
    gradcalc = str(Path(sys.executable).with_name("gradcalc"))
    subprocess.run([gradcalc, "check", *files, "--junit-xml", "check.xml"], cwd=cwd, capture_output=True, text=True, timeout=180)
    counts = {}
    for suite in ET.parse(cwd / "check.xml").getroot().iter("testsuite"):
        tests, failures, errors = (int(suite.get(key)) for key in ("tests", "failures", "errors"))
        counts[suite.get("name")] = (tests - failures - errors, failures, errors)
    return counts


def pytest_counts(cwd: Path, *args: str) -> tuple[dict[str, tuple[int, int, int]], str]:
    """pytest's (passed, failed, errors) per file, from its report of every phase (-rA):
    a check that passes and then reports a setup statement's error at teardown is one
    PASSED and one ERROR, as pytest's summary counts it."""
    done = pytest_run("-rA", "-p", "no:cacheprovider", *args, cwd=cwd)
    counts: dict[str, list[int]] = {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            entry = counts.setdefault(rest.split("::")[0], [0, 0, 0])
            entry[("PASSED", "FAILED", "ERROR").index(word)] += 1
    return {name: (p, f, e) for name, (p, f, e) in counts.items()}, done.stdout


BROKEN = {
    "broken.gc": "x = (1\ncheck x\ny = 2\ncheck y * y\n",  # a statement that does not parse; the rest runs
    "empty.gc": "x = 1\n",  # no check: the file checks nothing
    "late.gc": "a = 2\ncheck a * a\nb = nothing_here\n",  # a setup error after the last check
    "unparsed.gc": "z = [1,\n",  # nothing but a syntax error
}


def test_a_broken_or_empty_file_is_a_failing_item_and_the_others_run(project):
    for name, text in BROKEN.items():
        (project / "examples" / name).write_text(text)
    done = pytest_run("examples", "-q", "-rfE", "-p", "no:cacheprovider", cwd=project)
    assert done.returncode == 1, done.stdout
    assert "Interrupted" not in done.stdout and "errors during collection" not in done.stdout
    assert "examples/seed.gc::30 g" not in done.stdout  # it ran, and passed
    assert "ERROR examples/broken.gc::1 x = (1 - Failed: syntax error: line 2, column 1: expected ')'" in done.stdout
    assert "ERROR examples/broken.gc::2 x - Failed: check could not run: line 2, column 7: unknown name 'x'" in done.stdout
    assert "ERROR examples/empty.gc::1 (file) - Failed: no check statements: this file checks nothing" in done.stdout
    assert "ERROR examples/unparsed.gc::1 z = [1, - Failed: syntax error: line 1, column 8: unfinished input" in done.stdout
    assert "ERROR examples/late.gc::2 a * a - Failed: setup failed at line 3: unknown name 'nothing_here'" in done.stdout
    assert "2 failed, 10 passed, 1 warning, 7 errors in" in done.stdout
    assert "Traceback" not in done.stdout


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
@pytest.mark.slow
def test_pytest_counts_each_file_as_gradcalc_check_does(project, workers):
    """Passed, failed and errors, file by file: a check that cannot run is an error in both."""
    for name, text in BROKEN.items():
        (project / "examples" / name).write_text(text)
    files = sorted(f"examples/{p.name}" for p in (project / "examples").glob("*.gc"))
    expected = check_counts(project, *files)
    assert expected["examples/erroring.gc"] == (1, 1, 1) and expected["examples/broken.gc"] == (1, 0, 2)
    counted, out = pytest_counts(project, *workers, *files)
    assert counted == {name: counts for name, counts in expected.items() if counts != (0, 0, 0)}, out


STATEMENTS = [  # the kinds of statement a check file holds: setup, checks of each verdict, errors of each kind
    "a = 0.5", "v = [1.0, 0.0]", "check tanh(a) * a", "check relu(v).sum()", "check a * 2 == 99", "check nosuch(a)",
    "check a * missing", "b = nosuch + 1", "c = 1 +* 2", "check exp(a) wrt a", "d = a * 3", "check d * d",
]


@pytest.mark.slow
def test_random_check_files_count_alike_in_pytest_and_gradcalc_check(tmp_path):
    """Seeded random files of every kind of statement (setup, passing, failing and erroring
    checks, setup errors, syntax errors; files with no check): per file, pytest's passed,
    failed and errors are gradcalc check's, serially and over two workers."""
    rng = random.Random(41)
    files = []
    for k in range(10):
        lines = ["a = 0.5", *rng.choices(STATEMENTS, k=rng.randint(1, 7))]
        (tmp_path / f"f{k}.gc").write_text("\n".join(lines) + "\n")
        files.append(f"f{k}.gc")
    expected = {name: counts for name, counts in check_counts(tmp_path, *files).items() if counts != (0, 0, 0)}
    assert sum(e for _, _, e in expected.values()) > 0 and sum(f for _, f, _ in expected.values()) > 0
    for workers in ([], ["-n", "2"]):
        counted, out = pytest_counts(tmp_path, *workers, *files)
        assert counted == expected, out
