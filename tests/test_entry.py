"""The plain one-shot path (cli/entry.py) against the typer declarations (cli/main.py).

A plain `gradcalc eval|run|check ...` runs without importing typer. These tests keep the
two ways in step: the same flags with the same meaning, the same defaults, the same
output and exit status, and typer really left unimported.
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest
import typer

from gradcalc.cli import actions, checking
from gradcalc.cli.entry import PLAIN_FLAGS, plain_call
from gradcalc.cli.main import app
from tests.test_cli import ROOT, gradcalc

ACTIONS = {"eval": actions.eval_action, "run": actions.run_action, "check": checking.check_action}


def _click_command(name: str):
    return typer.main.get_command(app).get_command(None, name)


@pytest.mark.parametrize("command", sorted(PLAIN_FLAGS))
def test_plain_flags_are_the_typer_flags_of_the_same_name(command):
    params = {p.name: p for p in _click_command(command).params}
    for flag, keyword in PLAIN_FLAGS[command].items():
        assert keyword in params, (command, keyword)
        assert flag in params[keyword].opts and params[keyword].is_flag, (command, flag)


@pytest.mark.parametrize("command", sorted(ACTIONS))
def test_actions_take_every_option_with_typer_s_default(command):
    action = inspect.signature(ACTIONS[command]).parameters
    for param in _click_command(command).params:
        if param.param_type_name == "argument":
            continue
        assert param.name in action, (command, param.name)
        default = param.default.value if hasattr(param.default, "value") else param.default
        assert action[param.name].default == default, (command, param.name)


def test_plain_call_declines_what_it_does_not_understand():
    assert plain_call(["eval", "x*2", "x=3"]) is not None
    assert plain_call(["eval", "x*2", "x=3", "--json", "--tree"]) is not None
    assert plain_call(["check", "a.gc", "--json"]) is not None
    for argv in (["eval"], ["eval", "-x", "x=3"], ["eval", "x", "--wrt", "x"], ["eval", "x", "--help"], ["--engine", "scalar", "eval", "x"],
                 ["check", "a.gc", "--tree"], ["ops"], ["plot", "x", "x=0:1"], ["eval", "x", "--"], ["--version"]):
        assert plain_call(argv) is None, argv


def test_completion_always_goes_through_typer(monkeypatch):
    monkeypatch.setenv("_GRADCALC_COMPLETE", "bash_complete")
    assert plain_call(["eval", "x*2", "x=3"]) is None


# The same request both ways: an option before the command sends it through typer.
SAME = [
    (["eval", "(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10", "--tree"], ["--engine", "tensor"]),
    (["eval", "x*2", "x=3", "--json"], ["--engine", "tensor"]),
    (["eval", "x*", "x=3"], ["--engine", "tensor"]),
    (["eval", "y**2", "x=3", "y=x*2", "--steps"], ["--engine", "tensor"]),
    (["eval", "log(x)", "x=[0,1]", "--full"], ["--max-steps", "10000000"]),
    (["eval", "x", "x=nope("], ["--engine", "tensor"]),
    (["check", str(ROOT / "examples" / "mlp.gc"), "--json"], ["--max-steps", "10000000"]),
    (["check", "missing.gc"], ["--max-steps", "10000000"]),
    (["run", str(ROOT / "examples" / "seed.gc")], ["--engine", "tensor"]),
]


@pytest.mark.parametrize(("plain", "option"), SAME, ids=[" ".join(a[:2]) for a, _ in SAME])
def test_plain_path_prints_what_the_typer_path_prints(plain, option):
    fast, slow = gradcalc(*plain), gradcalc(*option, *plain)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)


@pytest.mark.parametrize("argv", [["eval", "x*2", "x=3"], ["eval", "x*2", "x=3", "--json"], []])
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
NOT_ON_THE_PLAIN_EVAL_PATH = ("typer", "rich", "click", "dataclasses", "pkgutil", "pathlib")


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
        # nor Lark's runtime and parser (only a syntax error needs them)
        "    from gradcalc.parser.syntax import lark_parser\n"
        "    print(lark_parser.cache_info().currsize, 'gradcalc.parser.standalone' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("value: 6.0\ngrad x: 2.0\n")
    assert done.stderr.strip().splitlines()[-2:] == ["[]", "0 False"]
