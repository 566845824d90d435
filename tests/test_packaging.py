"""What an installed gradcalc offers beyond its commands: `python -m gradcalc`, the
version, and the type information its wheel ships."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

import gradcalc

ROOT = Path(__file__).resolve().parent.parent
REINSTALL = "the package layout changed: run .venv/bin/pip install -e '.[test]' again"


def test_python_dash_m_gradcalc_runs_the_command():
    done = subprocess.run([sys.executable, "-m", "gradcalc", "eval", "x*2", "x=3"], capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"}, timeout=60, check=False)
    assert done.returncode == 0, done.stderr or REINSTALL
    assert done.stdout.startswith("value: 6.0\ngrad x: 2.0\n")


def test_the_version_is_written_once_and_reported_everywhere():
    assert hasattr(gradcalc, "__version__"), REINSTALL
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]  # read from gradcalc.__version__
    from importlib.metadata import version

    assert version("gradcalc") == gradcalc.__version__, REINSTALL
    done = subprocess.run([sys.executable, "-m", "gradcalc", "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout == f"gradcalc {gradcalc.__version__}\n", done.stderr


def test_the_test_extra_brings_a_setuptools_that_builds_wheels():
    """The wheel below is built with this environment's setuptools (no build isolation: no
    download). A fresh venv has the one Python bundles (65.5 on 3.11), which builds no wheel
    without the separate `wheel` package; the README's `pip install -e '.[test]'` must bring
    one that does (70.1 and later build wheels themselves), whatever else is installed."""
    from importlib.metadata import version

    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert "setuptools>=70.1" in test_extra
    installed = tuple(int(part) for part in version("setuptools").split(".")[:2])
    assert installed >= (70, 1), REINSTALL


@pytest.mark.slow
def test_the_wheel_ships_py_typed_and_every_package(tmp_path):
    # Built from a copy: a build in the checkout leaves build/ behind, and two test
    # workers building at once would share it.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):
        shutil.copy(ROOT / name, source / name)
    for name in ("autodiff", "parser", "cli", "src"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                           "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    [wheel] = (tmp_path / "dist").glob("gradcalc-*.whl")
    assert wheel.name.startswith(f"gradcalc-{gradcalc.__version__}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"gradcalc/__init__.py", "gradcalc/__main__.py", "gradcalc/py.typed", "gradcalc/parser/grammar.lark"} <= names
    # Every source file of the code folders, each where the editable install imports it from:
    # a folder missing from pyproject's list of packages (parser/engines/ was, and every
    # --engine, export and check --against failed in an installed copy) fails here by name.
    shipped = {f"gradcalc/{path.relative_to(ROOT).as_posix()}" for folder in ("autodiff", "parser", "cli")
               for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts}
    shipped |= {f"gradcalc/{path.relative_to(ROOT / 'src' / 'gradcalc').as_posix()}" for path in (ROOT / "src" / "gradcalc").rglob("*.py")}
    assert shipped - names == set()
    for notice in ("LICENSE", "NOTICE"):  # (where setuptools puts them depends on its version)
        assert any(n.endswith((f".dist-info/licenses/{notice}", f".dist-info/{notice}")) for n in names), notice


def test_each_xdist_group_runs_on_one_worker(request):
    """The files whose module fixtures are costly (the notebook's kernel, the engines'
    differential runs) keep their tests on one worker with `xdist_group` and addopts'
    `--dist loadgroup`, which puts each test's group into its id. pytest 9.2's structured
    ids dropped that, and the groups were silently ignored: those fixtures ran on both
    workers, some twice over, about two minutes of CPU in CI (pytest-xdist issue 1386).
    pyproject.toml's test extra holds pytest below 9.2 until xdist follows."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("runs on an xdist worker under --dist loadgroup (the README's test command)")
    grouped = [item.nodeid for item in request.session.items if item.get_closest_marker("xdist_group")]
    if not grouped:
        pytest.skip("no test of this session is in an xdist group")
    lost = [nodeid for nodeid in grouped if "@" not in nodeid]
    assert not lost, f"{len(lost)} of {len(grouped)} grouped tests have no group in their id, the first {lost[0]}"


def test_every_test_id_fits_in_a_child_process_environment(request):
    """pytest puts the running test's id in PYTEST_CURRENT_TEST, and Linux refuses to start
    a process with an environment string over 128 kB ("Argument list too long"): a test
    parametrized by 400,000 blanks could not run gradcalc under pytest 9.1. Long
    parameters take short ids."""
    longest = max((item.nodeid for item in request.session.items), key=len)
    assert len(longest) < 4096, f"a test id of {len(longest)} characters: {longest[:200]}..."
