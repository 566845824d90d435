"""Every option, as cli/options.py declares it, through its three readers: the command line
(typer, and the plain path of cli/entry.py), the notebook magic (cli/notebook.py, driven
directly and in a real Jupyter kernel) and the REPL's `:` settings (cli/repl.py, driven
directly and in a real terminal).

Each declaration is walked through all three: the command line lists it in --help and a
real invocation takes it; the notebook and the REPL take it (the result is 2 * 3 = 6, as
Python says) or, where its declaration says it means nothing there, refuse it with the
reason declared. A bad value, a missing value and an unknown option get the same message
from each. A scratch copy of the package with two new declarations shows every reader
pick them up with no other edit.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradcalc.cli import render
from gradcalc.cli.options import NOTEBOOK, REPL, SESSION_OPTIONS, Option
from gradcalc.cli.repl import COMMANDS as REPL_ACTIONS
from gradcalc.cli.repl import Repl, help_lines
from tests.test_cli import ROOT, gradcalc
from tests.test_repl import drive

EVAL = [option for option in SESSION_OPTIONS if option.key not in ("out", "no_graph", "reset")]  # gradcalc eval's own
SIX = re.compile(r"(?<![\d.])6(?:\.0)?(?![\d.])")  # 2 * 3, at any number of digits
# A value for the options whose value is a file or a name (the others' comes from the declaration).
VALUES = {"wrt": "x", "dot": "graph.dot", "save": "result.npz", "out": "result"}


@pytest.fixture(autouse=True)
def _repl_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture(autouse=True)
def _limits_as_they_were():
    """The REPL's and the notebook's limit settings are the process's: set back after each test."""
    from gradcalc.autodiff import limits

    names = ("elements", "steps", "seconds", "memory", "input_bytes")
    before = {name: getattr(limits, f"max_{name}")() for name in names}
    yield
    for name, value in before.items():
        getattr(limits, f"set_max_{name}")(value)


def value_of(option: Option) -> str | None:
    """A value the option takes, from its declaration: its default, or a choice, or a number
    within its range; None for a flag."""
    if option.kind == "flag":
        return None
    if option.key in VALUES:
        return VALUES[option.key]
    if option.choices:
        return str(option.default) if option.default in option.choices else option.choices[0]
    if option.default is not None:
        return str(option.default)
    number = option.high if option.high is not None else (option.low or 1) * 10**6
    return str(int(number)) if option.kind == "int" else repr(float(number))


def words(option: Option, name: str | None = None) -> str:
    value = value_of(option)
    return f"{name or option.names[0]}" + ("" if value is None else f" {value}")


def bad_value(option: Option) -> str:
    return "sideways" if option.choices else "nan"


def ids(options: list[Option]) -> list[str]:
    return [option.names[0] for option in options]


# ---- the command line ---------------------------------------------------------------------------


def test_the_command_line_lists_every_option_with_its_help():
    page = " ".join(gradcalc("eval", "--help").stdout.split())
    for option in EVAL:
        assert option.names[0] in page and " ".join(option.help.split()[:5]) in page, option.names[0]
        for choice in option.choices:
            assert choice in page


@pytest.mark.parametrize("option", EVAL, ids=ids(EVAL))
def test_the_command_line_takes_every_option(option, tmp_path):
    engine = ["--engine", "torch"] if option.key == "device" else []  # (--device is for a library's engine)
    if engine:
        pytest.importorskip("torch")
    done = gradcalc("eval", "x*y", "x=2", "y=3", *words(option).split(), *engine, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert SIX.search(done.stdout + done.stderr), done.stdout


# ---- the notebook magic -------------------------------------------------------------------------


def notebook(namespace: dict | None = None):
    pytest.importorskip("IPython")
    from gradcalc.cli.notebook import Notebook

    return Notebook({} if namespace is None else namespace)


@pytest.mark.parametrize("option", SESSION_OPTIONS, ids=ids(list(SESSION_OPTIONS)))
def test_the_notebook_takes_every_option_or_says_why_not(option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    result = notebook(namespace).line(f"x*y x=2 y=3 {words(option)}")
    if NOTEBOOK in option.unavailable:
        assert repr(result).startswith(f"error: {option.names[0]}: {option.unavailable[NOTEBOOK]}\n%gradcalc [options]")
        return
    assert float(result.value) == 6.0
    assert float(notebook().cell(words(option), "x = 2; y = 3; x * y").value) == 6.0  # a cell's options too
    if option.key == "out":
        assert namespace["result"] is result


def test_the_notebook_s_usage_lists_every_option_it_takes():
    from gradcalc.cli.notebook import USAGE

    for option in SESSION_OPTIONS:
        assert (option.usage() in USAGE and option.help in USAGE) == (NOTEBOOK not in option.unavailable), option.names[0]


def test_an_option_applies_to_its_magic_line_only():
    """`%gradcalc --engine scalar x*x x=3` runs on the scalar engine (its graph's op is `*`,
    not the tensor engine's `mul`); the kernel's session stays on the tensor engine, with
    its variables; `--reset` forgets them."""
    nb = notebook()
    nb.line("w = 5")
    scalar = nb.line("--engine scalar x*x x=3")
    assert float(scalar.value) == 9.0 and float(scalar.grads["x"]) == 6.0
    assert nb.session.engine == "tensor" and float(nb.line("w * 2").value) == 10.0
    assert repr(nb.line("--max-seconds 0.5 w")).startswith("Result(value=5.0")
    from gradcalc.autodiff import limits

    assert limits.max_seconds() == limits.DEFAULT_MAX_SECONDS  # set back after its line
    assert repr(nb.line("--reset")) == "session reset: no variables or functions; the tensor engine"
    assert "unknown name 'w'" in repr(nb.line("--digits 3 w + 1") or "unknown name 'w'")


def test_a_cell_s_unknown_option_is_named():
    shown = repr(notebook().cell("--bogus", "1"))
    assert shown.startswith("error: unknown option --bogus\n%gradcalc [options] EXPR")


# ---- the REPL -----------------------------------------------------------------------------------


def repl() -> Repl:
    return Repl(renderer=render.PlainRenderer(render.Style()))


@pytest.mark.parametrize("option", SESSION_OPTIONS, ids=ids(list(SESSION_OPTIONS)))
def test_the_repl_takes_every_option_as_a_setting_or_says_why_not(option, capsys):
    name = f":{option.word}"
    lines = [line for line, _ in help_lines()]
    if REPL in option.unavailable:
        if any(command.split()[0] == name for command in REPL_ACTIONS):  # (:tree, :dot, :steps, :reset act on the session)
            assert [line for line in lines if line.startswith(f"  {name} ")]
            return
        drive(f"{words(option, name)}\n")
        assert f"error: {name}: {option.unavailable[REPL]}" in capsys.readouterr().err
        return
    assert any(line.startswith(f"  {option.usage(name)}") for line in lines)
    assert any(line.strip() == option.help or line.endswith(f" {option.help}") for line in lines)
    drive(f"x = 2\ny = 3\n{words(option, name)}\nx = 2\ny = 3\nx * y\n{name}\n")
    captured = capsys.readouterr()
    assert captured.err == ""
    assert f"\n{option.word}: " in "\n" + captured.out and "value: 6" in captured.out


def test_a_repl_setting_lasts_until_it_is_set_back():
    session = repl()
    drive(":digits 3\n:mode forward\n:max-seconds 2\n", session)
    from gradcalc.autodiff import limits

    assert session.out.style.digits == 3 and session.mode == "forward" and limits.max_seconds() == 2.0
    drive(":digits\n:mode\n:max-seconds\n", session)
    assert session.out.style.digits is None and session.mode == "reverse" and limits.max_seconds() == limits.DEFAULT_MAX_SECONDS


def test_a_repl_setting_completes():
    session = repl()
    for option in SESSION_OPTIONS:
        if REPL not in option.unavailable:
            assert f":{option.word}" in session.completions(":")[1]


# ---- bad input: the same message in all three ---------------------------------------------------


def cli_error(*args: str) -> str:
    done = gradcalc("eval", "x*y", "x=2", "y=3", *args)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.removeprefix("error: ").strip()


def notebook_error(line: str) -> str:
    shown = repr(notebook().line(f"x*y x=2 y=3 {line}"))
    assert shown.startswith("error: ")
    return shown.splitlines()[0].removeprefix("error: ")


def repl_error(line: str, capsys) -> str:
    drive(f"{line}\n")
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ")
    return err.removeprefix("error: ")


VALUED = [o for o in EVAL if o.kind != "flag" and (o.choices or o.kind in ("int", "float"))]


@pytest.mark.parametrize("option", VALUED, ids=ids(VALUED))
def test_a_bad_value_is_refused_in_the_same_words_by_each_reader(option, capsys):
    name, bad = option.names[0], bad_value(option)
    message = cli_error(name, bad)
    assert message.startswith(f"{name} must be ") and message.endswith(f", not {bad!r}")
    if NOTEBOOK not in option.unavailable:
        assert notebook_error(f"{name} {bad}") == message
    if REPL not in option.unavailable:
        assert repl_error(f":{option.word} {bad}", capsys) == message.replace(name, f":{option.word}")


@pytest.mark.parametrize("option", VALUED, ids=ids(VALUED))
def test_a_missing_value_is_refused_in_the_same_words(option):
    """(In the REPL a setting alone goes back to its default: there a value is never missing.)"""
    message = cli_error(option.names[0])
    assert message.startswith(f"{option.names[0]} needs a value: ")
    if NOTEBOOK not in option.unavailable:
        assert notebook_error(option.names[0]) == message


def test_the_messages_in_words():
    """Three messages as a user reads them, written out here (not made by options.py)."""
    assert cli_error("--digits", "0") == "--digits must be a whole number from 1 to 17, not '0'"
    assert notebook_error("--engine nosuch") == "--engine must be tensor, scalar, jax or torch, not 'nosuch'"
    assert cli_error("--max-seconds") == "--max-seconds needs a value: a number of at least 0.001"


def test_under_json_a_bad_option_is_one_error_document():
    done = gradcalc("eval", "x", "x=1", "--json", "--engine", "nosuch")
    message = "--engine must be tensor, scalar, jax or torch, not 'nosuch'"
    assert done.returncode == 2 and json.loads(done.stdout) == {"error": {"kind": "usage", "message": message, "line": None, "column": None}}


def test_an_unknown_option_is_named_with_the_closest_by_each_reader(capsys):
    assert cli_error("--digit", "3") == "unknown option --digit (did you mean --digits?)"
    assert notebook_error("--digit 3") == "unknown option --digit (did you mean --digits?)"
    assert repl_error(":digit 3", capsys) == "unknown command :digit (did you mean :digits?); :help lists them"


# ---- a real kernel and a real terminal ---------------------------------------------------------


def test_every_option_in_a_real_kernel(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    cells = ["%load_ext gradcalc", *(f"%gradcalc x*y x=2 y=3 {words(option)}" for option in SESSION_OPTIONS),
             "float(result.value)", "%%gradcalc --bogus\n1", "%gradcalc x*y x=2 y=3 --digits"]
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nbclient.NotebookClient(book, timeout=120, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = ["\n".join(out.get("data", {}).get("text/plain", "") + out.get("text", "") for out in cell.outputs) for cell in book.cells]
    assert not [cell.source for cell in book.cells if any(out.get("output_type") == "error" for out in cell.outputs)]
    for option, text in zip(SESSION_OPTIONS, shown[1:], strict=False):
        if NOTEBOOK in option.unavailable:
            assert text.startswith(f"error: {option.names[0]}: {option.unavailable[NOTEBOOK]}"), text
        else:
            assert text.startswith("Result(value=") and SIX.search(text.partition(",")[0]), (option.names[0], text)
    assert shown[-3] == "6.0"  # --out result bound it in Python
    assert shown[-2].startswith("error: unknown option --bogus")
    assert shown[-1].startswith("error: --digits needs a value: a whole number from 1 to 17")


def test_every_setting_in_a_real_terminal(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "XDG_DATA_HOME": str(tmp_path), "TERM": "xterm", "NO_COLOR": "1"}
    child = pexpect.spawn(str(Path(sys.executable).with_name("gradcalc")), env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    try:
        child.expect(">>>")
        for option in SESSION_OPTIONS:
            if REPL in option.unavailable:
                continue
            child.sendline("x = 2; y = 3")  # (for :wrt x, after :engine reset them)
            child.expect(">>>")
            child.sendline(words(option, f":{option.word}"))
            child.expect(f"{option.word}: ")
            child.expect(">>>")
        child.sendline("x = 2; y = 3; x * y")  # (:engine reset them)
        child.expect("value: 6")
        child.expect(">>>")
        child.sendline(":json")
        child.expect(re.escape(":json: the REPL prints text"))
        child.expect(">>>")
        child.sendline(":digits 0")
        child.expect(re.escape(":digits must be a whole number from 1 to 17, not '0'"))
        child.expect(">>>")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


# ---- a new declaration, in a scratch copy of the package ---------------------------------------

NEW_OPTIONS = '''
         Option("greeting", ("--greeting",), "str", "hello", "A word to greet with.", choices=("hello", "hi")),
         Option("shout", ("--shout",), "flag", False, "Shout it.", unavailable={REPL: "the REPL whispers", NOTEBOOK: "notebooks are quiet"}),'''

DRIVER = '''
import contextlib, io, json, sys
from gradcalc.cli import actions

taken = {}
original = actions.eval_action


def eval_action(*args, greeting, shout, **values):  # (what the action that takes them would be given)
    taken.update(greeting=greeting, shout=shout)
    return original(*args, **values)


actions.eval_action = eval_action
from gradcalc.cli.entry import _dispatch
from gradcalc.cli.notebook import USAGE, Notebook, read_line
from gradcalc.cli import render
from gradcalc.cli.repl import Repl, help_lines

report = {}
for name, argv in {"plain": ["eval", "x", "x=1", "--greeting", "hi", "--shout"], "typer": ["eval", "x", "x=1", "--greeting", "hi", "--shout", "--"],
                   "help": ["eval", "--help"], "bad": ["eval", "x", "x=1", "--greeting", "bye"]}.items():
    out, err = io.StringIO(), io.StringIO()
    taken.clear()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = _dispatch(argv)
    report[name] = {"status": status, "out": out.getvalue(), "err": err.getvalue(), "taken": dict(taken)}
report["notebook"] = {"greeting": read_line("x x=1 --greeting hi")[1].greeting, "result": repr(Notebook({}).line("x x=1 --greeting hi")),
                      "bad": repr(Notebook({}).line("x x=1 --greeting bye")), "shout": repr(Notebook({}).line("x x=1 --shout")), "usage": USAGE}
repl = Repl(renderer=render.PlainRenderer(render.Style()))
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    for line in (":greeting hi", ":greeting bye", ":shout"):
        repl.handle(line)
report["repl"] = {"out": out.getvalue(), "err": err.getvalue(), "settings": repl.settings, "help": [line for line, _ in help_lines()],
                  "completes": repl.completions(":gr")[1]}
print(json.dumps(report))
'''


def test_a_new_declaration_reaches_every_reader_with_no_other_edit(tmp_path):
    """Two options added to gradcalc eval's declarations in a copy of the package (the repo
    is not touched): one every reader takes, one the REPL and the notebook refuse with
    the reason declared. The action's side is stood in for by the driver, which takes the
    values the readers hand it."""
    package = tmp_path / "gradcalc"
    shutil.copytree(ROOT / "src" / "gradcalc", package, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("autodiff", "parser", "cli"):
        shutil.copytree(ROOT / folder, package / folder, ignore=shutil.ignore_patterns("__pycache__"))
    options = package / "cli" / "options.py"
    text = options.read_text()
    anchor = "         JSON, DIGITS, FULL, *LIMITS, SAVE),"
    assert text.count(anchor) == 1
    options.write_text(text.replace(anchor, anchor.removesuffix("),") + "," + NEW_OPTIONS + "\n         ),"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "100", "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for path in ("plain", "typer"):
        assert report[path]["status"] == 0 and report[path]["taken"] == {"greeting": "hi", "shout": True}
        assert "value: 1.0" in report[path]["out"]
    page = " ".join(report["help"]["out"].split())
    assert "--greeting [hello|hi] A word to greet with. [default: hello]" in page and "--shout Shout it." in page
    assert report["bad"]["status"] == 2 and report["bad"]["err"] == "error: --greeting must be hello or hi, not 'bye'\n"
    notebook = report["notebook"]
    assert notebook["greeting"] == "hi" and notebook["result"].startswith("Result(value=1.0")
    assert notebook["bad"].startswith("error: --greeting must be hello or hi, not 'bye'")
    assert notebook["shout"].startswith("error: --shout: notebooks are quiet")
    assert "--greeting hello|hi\n      A word to greet with." in notebook["usage"] and "--shout" not in notebook["usage"]
    repl_report = report["repl"]
    assert repl_report["out"] == "greeting: hi\n" and repl_report["settings"] == {"greeting": "hi"}
    assert repl_report["err"] == "error: :greeting must be hello or hi, not 'bye'\nerror: :shout: the REPL whispers\n"
    assert "  :greeting hello|hi" in repl_report["help"] and "A word to greet with." in "\n".join(repl_report["help"])
    assert repl_report["completes"] == [":greeting"] or ":greeting" in repl_report["completes"]


def test_check_s_choices_are_the_language_s():
    """`gradcalc check --method/--mode/--against` choose what a check statement's `method=`,
    `mode=` and `against=` do: the command line's choices are the language's."""
    from gradcalc.cli.options import COMMANDS
    from gradcalc.parser.check_statements import WORDS

    declared = {option.key: option.choices for option in COMMANDS["check"].options}
    assert {key: declared[key] for key in WORDS} == {key: tuple(words) for key, words in WORDS.items()}


def test_no_reader_states_an_option_s_facts_again():
    """The help text and the choices of each option are in cli/options.py alone: the other
    readers of the command line, the REPL and the notebook read them from there."""
    from gradcalc.cli.options import COMMANDS

    sources = {path.name: path.read_text() for path in (ROOT / "cli").glob("*.py") if path.name != "options.py"}
    readers = ("main.py", "entry.py", "repl.py", "notebook.py", "engines.py", "step_display.py")  # (the choices: where options are read)
    for option in {id(o): o for o in (*SESSION_OPTIONS, *(o for c in COMMANDS.values() for o in c.options))}.values():
        for name, text in sources.items():
            assert option.help not in text and " ".join(option.help.split()[:6]) not in text, (option.names[0], name)
            if len(option.choices) > 1 and name in readers:
                spelled = ", ".join(f'"{choice}"' for choice in option.choices)
                assert repr(option.choices)[1:-1] not in text and spelled not in text, (option.names[0], name)
