"""The plain path (cli/entry.py): a command read from cli/options.py's declarations
without typer.

It must read what it accepts as typer reads it (the same action called with the same
values, so the same output and exit status), hand typer everything else, and never
import typer, rich or the modules a one-shot command does not need.
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
from importlib import import_module

import pytest

from gradcalc.cli.entry import plain_call
from gradcalc.cli.options import COMMANDS, GLOBAL_OPTIONS
from tests.test_cli import ROOT, gradcalc


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_action_takes_exactly_the_declared_parameters(name):
    command = COMMANDS[name]
    module, function = command.action.split(":")
    action = inspect.signature(getattr(import_module(f"gradcalc.cli.{module}"), function)).parameters
    declared = [p.key for p in (*command.arguments, *command.options)]
    assert sorted(action) == sorted(declared)
    assert all(p.default is p.empty for p in action.values())  # the declarations hold the defaults


def test_the_repl_takes_every_global_option():
    from gradcalc.cli.actions import default_action

    assert sorted(inspect.signature(default_action).parameters) == sorted(o.key for o in GLOBAL_OPTIONS)


def test_plain_call_reads_what_it_can_and_declines_the_rest():
    for argv in (["eval", "x*2", "x=3"], ["eval", "x*2", "x=3", "--json", "--tree"], ["eval", "x", "--wrt", "x", "x=1"],
                 ["eval", "x", "x=1", "--digits=3"], ["--engine", "scalar", "eval", "x", "x=1"], ["check", "a.gc", "--json", "-j", "2"],
                 ["eval", "-", "x=1"], ["ops"], ["ops", "exp"], ["plot", "x", "x=0:1", "--points", "5"], []):
        assert plain_call(argv) is not None, argv
    for argv in (["eval"], ["eval", "-x", "x=3"], ["eval", "x", "--help"], ["eval", "x", "-h"], ["eval", "x", "--digits", "0"],
                 ["eval", "x", "--digits", "three"], ["eval", "x", "--digits"], ["eval", "x", "--tree=yes"], ["--engine", "nope", "eval", "x"],
                 ["--engine", "scalar", "ops"], ["check", "a.gc", "--tree"], ["check", "a.gc", "-j2"], ["nope"], ["eval", "x", "--"],
                 ["--version"], ["check"], ["ops", "exp", "log"], ["eval", "x", "--wrt", "-y"]):
        assert plain_call(argv) is None, argv


def test_completion_always_goes_through_typer(monkeypatch):
    monkeypatch.setenv("_GRADCALC_COMPLETE", "bash_complete")
    assert plain_call(["eval", "x*2", "x=3"]) is None


# The same request both ways: `--` at the end sends it through typer (which reads it as the
# end of options, so nothing changes), and an option before the command through the
# pass-down of global options.
SAME = [
    ["eval", "(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10", "--tree"],
    ["eval", "x*2", "x=3", "--json", "--digits", "3"],
    ["eval", "x*", "x=3"],
    ["eval", "y**2", "x=3", "y=x*2", "--steps", "--wrt=x"],
    ["eval", "log(x)", "x=[0,1]", "--full", "--max-steps", "100"],
    ["eval", "x", "x=nope("],
    ["eval", "x*y", "x=2", "y=3", "--engine", "scalar"],
    ["check", str(ROOT / "examples" / "mlp.gc"), "--json", "-j", "1", "--tol", "1e-6"],
    ["check", "missing.gc"],
    ["run", str(ROOT / "examples" / "seed.gc"), "--digits", "4"],
]


@pytest.mark.parametrize("plain", SAME, ids=[" ".join(a[:2]) for a in SAME])
def test_plain_path_prints_what_the_typer_path_prints(plain):
    assert plain_call(plain) is not None and plain_call([*plain, "--"]) is None
    fast, slow = gradcalc(*plain), gradcalc(*plain, "--")
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)


def test_a_global_option_reads_the_same_both_ways():
    argv = ["--engine", "scalar", "eval", "x*y", "x=2", "y=3"]
    fast, slow = gradcalc(*argv), gradcalc(*argv, "--")
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    assert "nodes" in fast.stdout and fast.returncode == 0


@pytest.mark.parametrize("argv", [["eval", "x*2", "x=3"], ["eval", "x*2", "x=3", "--json", "--digits", "2"], []])
def test_plain_commands_never_import_typer(argv):
    code = (
        "import sys\n"
        f"sys.argv = ['gradcalc', *{argv!r}]\n"
        "from gradcalc.cli.entry import run\n"
        "try:\n    run()\n"
        "finally:\n    print('typer' in sys.modules, 'rich' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], input="x = 3; x**2\n", capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False False"


# Modules a plain `gradcalc eval` used to import and no longer needs (docs/performance.md,
# "Start-up"); importing any of them again costs every one-shot command its import time.
NOT_ON_THE_PLAIN_EVAL_PATH = ("typer", "rich", "click", "dataclasses", "pkgutil", "pathlib", "decimal", "fractions", "jax", "torch",
                              "numpy.random", "difflib", "mpmath")


def test_plain_eval_imports_none_of_the_modules_it_does_not_need():
    code = (
        "import sys\n"
        # A .pth file of the environment may have imported one already: forget it, so
        # that an import by gradcalc shows.
        f"for name in {NOT_ON_THE_PLAIN_EVAL_PATH!r}:\n    sys.modules.pop(name, None)\n"
        "sys.argv = ['gradcalc', 'eval', 'x*2', 'x=3']\n"
        "from gradcalc.cli.entry import run\n"
        "try:\n    run()\n"
        f"finally:\n    print(sorted(set({NOT_ON_THE_PLAIN_EVAL_PATH!r}) & set(sys.modules)), file=sys.stderr)\n"
        # nor Lark (the parser's tables are generated ahead of time)
        "    print(sorted(m for m in sys.modules if m.split('.')[0] == 'lark'), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("value: 6.0\ngrad x: 2.0\n")
    assert done.stderr.strip().splitlines()[-2:] == ["[]", "[]"]


@pytest.mark.parametrize("argv", [["eval", "x", "x=1"], ["run", "-"], ["check", "-"], ["plot", "x", "x=0:1", "--csv"], []])
@pytest.mark.parametrize("number", ["nan", "-nan", "NaN"])
def test_a_nan_where_a_number_of_seconds_belongs_is_a_usage_error(argv, number):
    done = subprocess.run([sys.executable, "-m", "gradcalc", *argv, "--max-seconds", number] if argv else
                          [sys.executable, "-m", "gradcalc", "--max-seconds", number], input="x = 1\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--max-seconds must be a number of at least 0.001, not" in done.stderr and "internal error" not in done.stderr
