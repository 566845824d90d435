"""The built-in table (parser/builtins.py): every record reaches each of its consumers.

Each record is reachable in the language, has help that shows its example, completes in
the REPL, is listed by `gradcalc ops` and in docs/language.md's function table, and its
example's value agrees with another library (torch.func for the transformations, NumPy
for load, Python for range). A record added in a fresh process, with no other edit, is
picked up by the machine, help, completion and `gradcalc ops` alike.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gradcalc.cli import render
from gradcalc.cli.repl import Repl
from gradcalc.parser import ExpressionResult, HelpResult, LanguageError, Session
from gradcalc.parser.builtins import BUILTINS, BuiltinDef
from gradcalc.parser.help import describe
from gradcalc.parser.machine import FunctionResult

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).with_name("gradcalc")
NAMES = sorted(BUILTINS)


def gradcalc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, timeout=120, cwd=cwd)


def run_example(builtin: BuiltinDef, folder: Path) -> Any:
    """The last result of the record's example, run where its files are."""
    for name, text in builtin.files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return Session(base_dir=folder).run_source(builtin.example)[-1]


# ---- reachable, with help, completion, `gradcalc ops` and the docs --------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_record_runs_its_example_in_the_language(name, tmp_path):
    builtin = BUILTINS[name]
    result = run_example(builtin, tmp_path)
    assert isinstance(result, (ExpressionResult, FunctionResult, HelpResult)), result
    assert name in builtin.example
    if builtin.is_value:  # a function value, as an op's name is
        [shown] = Session().run_source(name)
        assert isinstance(shown, FunctionResult) and name in shown.lines[0]


@pytest.mark.parametrize("name", NAMES)
def test_every_record_has_help_with_its_example(name):
    builtin = BUILTINS[name]
    [result] = Session().run_source(f"help({name})")
    assert isinstance(result, HelpResult)
    assert result.lines[0] == f"{builtin.usage}: {builtin.doc}"
    assert "example:" in result.lines
    for line in builtin.example.split("\n"):
        assert f"  >>> {line}" in result.lines, line
    assert result.lines == describe(name)  # help(NAME), :help NAME and gradcalc ops NAME say the same


@pytest.mark.parametrize("name", NAMES)
def test_every_record_completes_in_the_repl(name):
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    word, candidates = repl.completions(name[:2])
    assert word == name[:2] and name in candidates
    _, after_paren = repl.completions(f"x = 1 + {name[:3]}")
    assert name in after_paren


def test_every_record_is_listed_by_gradcalc_ops_and_in_the_docs():
    listed = gradcalc("ops", "--markdown")
    assert listed.returncode == 0, listed.stderr
    plain = gradcalc("ops")
    page = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    table = page.split("<!-- ops:start -->\n")[1].split("<!-- ops:end -->")[0]
    for name, builtin in BUILTINS.items():
        row = f"| `{builtin.usage}` | {builtin.category} |"
        assert row in listed.stdout, name
        assert row in table, f"{name}: regenerate it: python -m gradcalc.cli.oplist docs/language.md"
        assert any(line.startswith(builtin.usage) for line in plain.stdout.splitlines()), name


@pytest.mark.parametrize("name", sorted(name for name, builtin in BUILTINS.items() if not builtin.is_value))
def test_a_form_called_as_a_function_is_a_placed_error(name):
    """help and range are forms of a statement and of a loop's header: inside an
    expression they are an error at the call that says what they are."""
    with pytest.raises(LanguageError) as caught:
        Session().run_source(f"y = 1 + {name}(3)")
    assert caught.value.kind == "argument" and caught.value.column == 9
    assert caught.value.message == f"{name}(...) is not a function to call here: {BUILTINS[name].line}"


def test_help_of_a_builtin_through_the_command():
    done = gradcalc("eval", "help(vmap)")
    assert done.returncode == 0, done.stderr
    assert f"  >>> {BUILTINS['vmap'].example}" in done.stdout and "value [5.0, 25.0]" in done.stdout


# ---- each example's value against another library ------------------------------------------


def _torch_value(make: Callable[[Any], Any]) -> Callable[[Path], Any]:
    def oracle(folder: Path) -> Any:
        torch = pytest.importorskip("torch")
        torch.set_default_dtype(torch.float64)
        return make(torch)

    return oracle


def _tensor(torch: Any, x: Any) -> Any:
    return torch.tensor(x, dtype=torch.float64)


def _range_in_python(folder: Path) -> Any:
    """The example run by Python itself: all but its last line, then its last line's value."""
    *body, last = BUILTINS["range"].example.split("\n")
    scope: dict[str, Any] = {}
    exec("\n".join(body), scope)
    return eval(last, scope)


def _load_by_numpy(folder: Path) -> Any:
    [(name, text)] = BUILTINS["load"].files.items()
    return np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2)


# name -> what its example gives, computed without gradcalc
ORACLES: dict[str, Callable[[Path], Any]] = {
    "grad": _torch_value(lambda torch: torch.func.grad(lambda x: x ** 3)(_tensor(torch, 2.0))),
    "jacobian": _torch_value(lambda torch: torch.func.jacrev(lambda x: x ** 2)(_tensor(torch, [1.0, 2.0]))),
    "hessian": _torch_value(lambda torch: torch.func.hessian(lambda x: (x ** 3).sum())(_tensor(torch, [1.0, 2.0]))),
    "value_and_grad": _torch_value(lambda torch: tuple(reversed(torch.func.grad_and_value(lambda t: torch.sin(t) * t)(_tensor(torch, 0.5))))),
    "jacrev": _torch_value(lambda torch: torch.func.jacrev(lambda v: v ** 2)(_tensor(torch, [1.0, 2.0, 3.0]))),
    "jacfwd": _torch_value(lambda torch: torch.func.jacfwd(lambda v: torch.sin(v) * v[0])(_tensor(torch, [0.5, 1.0]))),
    "vmap": _torch_value(lambda torch: torch.func.vmap(lambda row: (row ** 2).sum())(_tensor(torch, [[1.0, 2.0], [3.0, 4.0]]))),
    "jvp": _torch_value(lambda torch: torch.func.jvp(lambda t: t ** 3, (_tensor(torch, 2.0),), (_tensor(torch, 1.0),))),
    "vjp": _torch_value(lambda torch: torch.func.vjp(lambda t: t ** 2, _tensor(torch, 3.0))[1](_tensor(torch, 1.0))),
    "hvp": _torch_value(lambda torch: torch.func.jvp(torch.func.grad(lambda v: (v ** 3).sum()), (_tensor(torch, [1.0, 2.0]),),
                                                     (_tensor(torch, [1.0, 0.0]),))[1]),
    "load": _load_by_numpy,
    "range": _range_in_python,
}
# name -> why its example has no oracle
NO_ORACLE = {"help": "its value is text (help's first line of exp), not a number"}


def _numbers(value: Any) -> Any:
    """A result (a tensor, a tuple of them, a torch tensor, a number) as nested float lists."""
    if isinstance(value, tuple):
        return [_numbers(part) for part in value]
    if hasattr(value, "detach"):  # a torch tensor
        return value.detach().numpy().tolist()
    return np.asarray(getattr(value, "data", value), dtype=float).tolist()


def test_every_record_has_an_oracle_or_a_reason():
    assert set(ORACLES) | set(NO_ORACLE) == set(BUILTINS), "give the new record's example an oracle (or a reason) here"
    assert not set(ORACLES) & set(NO_ORACLE)


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_every_example_agrees_with_its_oracle(name, tmp_path):
    expected = ORACLES[name](tmp_path)
    result = run_example(BUILTINS[name], tmp_path)
    got = result.value
    np.testing.assert_allclose(np.asarray(_numbers(got), dtype=float), np.asarray(_numbers(expected), dtype=float), rtol=1e-13, atol=1e-15)


# ---- a record added without another edit ------------------------------------------------------

SCRATCH = textwrap.dedent('''
    import json

    from gradcalc.cli import render
    from gradcalc.cli.oplist import ops_action
    from gradcalc.cli.repl import Repl
    from gradcalc.parser import Session
    from gradcalc.parser.builtins import defbuiltin
    from gradcalc.parser.help import describe
    from gradcalc.parser.transforms import Transformed, gradient_of


    def twice(session, name, args, kwargs):
        return session.backend.binary("mul", args[0], session.backend.constant(2.0))


    def second_derivative(session, f, what, argnums, args, kwargs):
        return gradient_of(session, Transformed("grad", f, argnums), what, argnums, args, kwargs)


    defbuiltin("twice", "twice(x)", doc="x doubled", example="x = 3\\ntwice(x)", category="language", call=twice)
    defbuiltin("grad2", "grad2(f, argnums=0)", doc="the function x -> d2f/dx2", example="grad2(lambda t: t ** 3)(2)",
               call="transforms:make", rule=second_derivative)
    out = {}
    for name, program in (("twice", "x = 3\\ntwice(x)"), ("grad2", "grad2(lambda t: t ** 3, argnums=0)(2)")):
        session = Session()
        [result] = session.run_source(program)
        out[name] = {"value": float(result.value.data), "help": describe(name),
                     "completes": name in Repl(renderer=render.PlainRenderer(render.Style())).completions(name[:3])[1]}
    print(json.dumps(out))
    ops_action(None, markdown=True, digits=None)
''')


def test_a_record_added_elsewhere_reaches_every_consumer(tmp_path):
    """A transformation and a plain function, each one defbuiltin in a fresh process (the
    repository untouched): the machine calls them, help shows their examples evaluated,
    the REPL completes them and `gradcalc ops` lists them."""
    script = tmp_path / "scratch.py"
    script.write_text(SCRATCH, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first, _, table = done.stdout.partition("\n")
    import json

    found = json.loads(first)
    assert found["twice"]["value"] == 6.0  # 2 * 3
    assert found["grad2"]["value"] == 12.0  # d2/dt2 t**3 = 6 t at 2
    assert found["twice"]["help"][:4] == ["twice(x): x doubled", "category: language (a form of the language, not an op)", "example:", "  >>> x = 3"]
    assert "  value 6.0" in found["twice"]["help"] and "  d/dx 2.0" in found["twice"]["help"]
    assert found["grad2"]["help"][0] == "grad2(f, argnums=0): the function x -> d2f/dx2" and "  value 12.0" in found["grad2"]["help"]
    assert found["twice"]["completes"] and found["grad2"]["completes"]
    assert "| `twice(x)` | language | no | x doubled |" in table
    assert "| `grad2(f, argnums=0)` | autodiff | yes | the function x -> d2f/dx2 |" in table
