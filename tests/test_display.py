"""What the output says a value is: whole numbers and booleans as such (text and JSON),
`check` in eval, the max/min axis message and its row in the docs, a CSV header said on
stderr, and `:load` completing file names. Expected values come from NumPy, Python and
PyTorch, never from gradcalc's own output."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from prompt_toolkit.output import DummyOutput

from gradcalc.cli import render
from gradcalc.cli.repl import Repl, make_prompt_session

from .test_cli import GRADCALC, ROOT, gradcalc

X = [3.0, 7.0, 5.0]
A = [[1.0, 9.0, 2.0], [8.0, 0.0, 4.0]]
BINDINGS = ("x=[3, 7, 5]", "A=[[1, 9, 2], [8, 0, 4]]")

# Each integer-valued result, with what Python and NumPy give for it.
WHOLE = [
    ("len(x)", len(X)),
    ("len(A)", len(A)),
    ("argmax(x)", int(np.argmax(X))),
    ("argmin(x)", int(np.argmin(X))),
    ("argmax(A, axis=1)", np.argmax(A, axis=1).tolist()),
    ("A.argmin(axis=0)", np.argmin(A, axis=0).tolist()),
    ("A.shape", list(np.shape(A))),
    ("A.size", int(np.size(A))),
    ("A.ndim", int(np.ndim(A))),
    ("A.shape[1]", np.shape(A)[1]),
    ("argmax(A, axis=1)[::-1]", np.argmax(A, axis=1)[::-1].tolist()),
]


def _text(value) -> str:
    """How the language writes a whole number, a boolean or a list of them."""
    if isinstance(value, list):
        return "[" + ", ".join(map(_text, value)) + "]"
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def report(expression: str, *extra: str):
    done = gradcalc("eval", expression, *BINDINGS, *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("expression, expected", WHOLE, ids=[e for e, _ in WHOLE])
def test_a_whole_number_prints_as_one_with_no_gradient_block(expression, expected):
    lines = report(expression)
    shape = "" if np.ndim(expected) == 0 else f"  (shape {np.size(expected)})"
    assert lines[0] == f"value: {_text(expected)}{shape}"
    assert lines[1] == "grad: none (whole numbers have no gradient)"
    assert lines[2].startswith("graph: ") and len(lines) == 3  # no `grad x: [0.0, ...]`


@pytest.mark.parametrize("expression, expected", WHOLE, ids=[e for e, _ in WHOLE])
def test_json_keeps_whole_numbers_ints(expression, expected):
    doc = json.loads("\n".join(report(expression, "--json")))
    assert doc["value"] == expected
    assert all(type(v) is int for v in np.ravel(doc["value"]).tolist()) and json.dumps(doc["value"]) == json.dumps(expected)
    assert doc["grads"] == {} and doc["dtype"] == "int64" and "grad_of" not in doc


def test_torch_gives_the_same_results_integer_types_and_no_grad_fn():
    """The oracle for "no gradient": PyTorch's argmax and argmin of a tensor that requires
    grad are int64 without grad_fn, its shape and len are Python ints, and its floor keeps
    a grad_fn whose gradient is 0."""
    torch = pytest.importorskip("torch")
    a = torch.tensor(A, dtype=torch.float64, requires_grad=True)
    for result in (torch.argmax(a, dim=1), torch.argmin(a, dim=0), torch.argmax(a)):
        assert result.dtype == torch.int64 and result.grad_fn is None and not result.requires_grad
    assert type(len(a)) is int and all(type(n) is int for n in a.shape) and type(a.dim()) is int
    floor = torch.floor(a * 1.5)
    assert floor.dtype == torch.float64 and floor.grad_fn is not None
    floor.sum().backward()
    assert a.grad.tolist() == [[0.0] * 3] * 2


def test_floor_and_round_keep_their_zero_gradients_and_print_reals():
    lines = report("floor(x / 2) + round(x / 4)")
    expected = np.floor(np.array(X) / 2) + np.round(np.array(X) / 4)
    assert lines[0] == f"value: [{', '.join(repr(float(v)) for v in expected)}]  (shape 3)"
    assert "grad of sum x: [0.0, 0.0, 0.0]" in lines


def test_arithmetic_on_whole_numbers_and_booleans_gives_reals():
    assert report("len(x) - 1")[0] == f"value: {float(len(X) - 1)!r}"
    assert report("sum(x > 4)")[0] == f"value: {float(sum(v > 4 for v in X))!r}"
    doubled = [float(2 * (v > 4)) for v in X]
    assert report("(x > 4) + (x > 4)")[0] == f"value: [{', '.join(map(repr, doubled))}]  (shape 3)"
    # ... and a whole number used as an index or a shape still works as one
    assert report("x[argmax(x)]")[0] == f"value: {max(X)!r}"
    assert report("zeros(A.shape).shape")[0] == f"value: {_text(list(np.shape(A)))}  (shape 2)"


def test_a_comparison_prints_booleans_without_a_gradient():
    expected = [v > 4 for v in X]
    lines = report("x > 4")
    assert lines[:2] == [f"value: {_text(expected)}  (shape 3)", "grad: none (booleans have no gradient)"]
    assert report("(x > 4)[1]")[0] == f"value: {_text(expected[1])}"  # an element of a mask is a boolean
    doc = json.loads("\n".join(report("x > 4", "--json")))
    assert doc["value"] == expected and all(type(v) is bool for v in doc["value"])
    assert doc["grads"] == {} and doc["dtype"] == "bool"


def test_a_comparison_on_the_scalar_engine_prints_a_boolean_too():
    done = gradcalc("--engine", "scalar", "eval", "x > 1", "x=2")
    assert done.stdout.splitlines()[:2] == ["value: true", "grad: none (booleans have no gradient)"]
    # and a boolean (a constant) on the right of an operator is 1.0, not an error
    done = gradcalc("--engine", "scalar", "eval", "x + (x > 1)", "x=2")
    assert done.returncode == 0 and done.stdout.splitlines()[:2] == ["value: 3.0", "grad x: 1.0"]


def test_the_tree_shows_whole_numbers_and_booleans_as_such():
    lines = report("x * (x > 4)", "--tree")
    assert any(line.strip().endswith("[false, true, true]") for line in lines), lines


# ---- check in eval --------------------------------------------------------------------------


def test_eval_runs_a_check_and_prints_its_verdict_as_a_check_file_would(tmp_path):
    done = gradcalc("eval", "check x**2", "x=3")
    assert done.returncode == 0, done.stderr
    (tmp_path / "one.gc").write_text("x = 3\ncheck x**2\n")
    as_file = gradcalc("check", "one.gc", cwd=tmp_path)
    expected = [line.replace("one.gc:2", "line 1") for line in as_file.stdout.splitlines()]
    assert done.stdout.splitlines() == expected
    assert expected[0].startswith("PASS line 1  x**2  wrt x  complex")


def test_eval_exits_1_when_its_check_fails():
    done = gradcalc("eval", "check x**2 == 10", "x=3")
    assert done.returncode == 1
    assert done.stdout.startswith("FAIL line 1  x**2 == 10") and "left = 9.0, right = 10.0" in done.stdout


def test_eval_with_checks_and_an_expression_reports_both():
    done = gradcalc("eval", "check x**3; x**3", "x=2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("PASS line 1  x**3") and "value: 8.0" in lines and "grad x: 12.0" in lines
    doc = json.loads(gradcalc("eval", "check x**3; x**3", "x=2", "--json").stdout)
    assert doc["value"] == 8.0 and [c["status"] for c in doc["checks"]] == ["pass"]


def test_eval_check_json_is_check_json():
    doc = json.loads(gradcalc("eval", "check sin(x) == 0", "x=0", "--json").stdout)
    assert doc["summary"] == {"pass": 1, "fail": 0, "error": 0} and doc["checks"][0]["expression"] == "sin(x) == 0"


def test_eval_check_refuses_options_that_need_a_result():
    done = gradcalc("eval", "check x**2", "x=3", "--tree")
    # a usage error, before any verdict: stdout holds no half of a report
    assert done.returncode == 2 and "--tree shows an expression's result" in done.stderr and done.stdout == ""


def test_run_runs_checks_too(tmp_path):
    (tmp_path / "s.gc").write_text("x = 3\ncheck x**2 == 9\ncheck x**2 == 8\n")
    done = gradcalc("run", "s.gc", cwd=tmp_path)
    assert done.returncode == 1
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["PASS", "FAIL"]


# ---- max(x, number): the message and the docs' edge table -----------------------------------


def _edge_row(first_cell: str) -> list[str]:
    text = (ROOT / "docs" / "language.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith(f"| {first_cell}"))
    return [cell.strip() for cell in row.strip("|").split(" | ")]


def test_the_edge_table_quotes_what_max_with_a_number_says():
    """The row for `max(A, 1)` and `max(A, 0.5)` quotes the two errors; each is what the
    program prints, and neither suggests a call that is itself an error."""
    cells = _edge_row("`max(A, 1)`, `max(A, 0.5)`")
    quoted = re.findall(r'"([^"]+)"', cells[1])
    assert len(quoted) == 2 and cells[1].startswith("an error either way")
    for expression, message in zip(("max(A, 1)", "max(A, 0.5)"), quoted):
        done = gradcalc("eval", expression, BINDINGS[1])
        assert done.returncode == 2 and message in done.stderr, done.stderr
        for suggestion in re.findall(r"\b(?:max|maximum)\([^)]*\)", message):
            if "(x, " in suggestion or "(a, b)" in suggestion:
                tried = gradcalc("eval", suggestion.replace("(x, ", "(A, ").replace("(a, b)", "(A, 1)"), BINDINGS[1])
                assert tried.returncode == 0, f"{message}: {suggestion} is suggested but fails: {tried.stderr}"


@pytest.mark.parametrize("second", ["0.5", "inf", "-1.5"])
def test_max_of_a_number_that_cannot_be_an_axis_does_not_suggest_it_as_one(second):
    done = gradcalc("eval", f"max(A, {second})", BINDINGS[1])
    assert done.returncode == 2 and "axis=" not in done.stderr and "maximum(a, b)" in done.stderr


# ---- CSV headers ----------------------------------------------------------------------------


# A file without quotes goes to NumPy's reader, one with a quote to csv's: both say the header.
@pytest.mark.parametrize("names", ["price,count", '"price",count', "\n\nprice,count"])
def test_a_csv_header_is_said_on_stderr(tmp_path, names):
    (tmp_path / "t.csv").write_text(names + "\n1,2\n3,4\n")
    line = names.count("\n") + 1
    done = gradcalc("eval", "sum(t)", "@t.csv", cwd=tmp_path)
    assert done.returncode == 0 and "value: 10.0" in done.stdout
    assert done.stderr == f"header: t.csv line {line}: price, count (column names, not data)\n"
    (tmp_path / "s.gc").write_text('sum(load("t.csv"))\n')
    assert f"header: t.csv line {line}: price, count" in gradcalc("run", "s.gc", cwd=tmp_path).stderr


def test_a_csv_without_header_says_nothing(tmp_path):
    (tmp_path / "t.csv").write_text("1,2\n3,4\n")
    done = gradcalc("eval", "sum(t)", "@t.csv", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "" and "value: 10.0" in done.stdout


@pytest.mark.parametrize("first_row", ["1,2\0", "1,2x", "1,2,a,b", "x,3", '1,"2x"'])
def test_a_first_row_that_is_mostly_numbers_is_data_with_a_bad_cell(tmp_path, first_row):
    (tmp_path / "t.csv").write_bytes(first_row.encode() + b"\n3,4" + b",5,6" * (first_row.count(",") == 3) + b"\n")
    done = gradcalc("eval", "sum(t)", "@t.csv", cwd=tmp_path)
    assert done.returncode == 2 and "value" not in done.stdout
    bad = next(cell for cell in first_row.split(",") if not re.fullmatch(r"[0-9.]+", cell))
    shown = bad.strip('"')  # csv's reader unquotes a cell
    assert f"t.csv: line 1, column {first_row.split(',').index(bad) + 1}: {shown!r} is not a number" in done.stderr
    assert "data, not a header" in done.stderr


# ---- :load completes file names ---------------------------------------------------------------


def test_load_and_dot_complete_file_names_not_functions(tmp_path, monkeypatch):
    from prompt_toolkit.document import Document

    (tmp_path / "demo.gc").write_text("x = 1\n")
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "detail.gc").write_text("")
    (tmp_path / ".hidden.gc").write_text("")
    monkeypatch.chdir(tmp_path)
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    session = make_prompt_session(repl, output=DummyOutput())

    def complete(text):
        return [c.text for c in session.completer.get_completions(Document(text), None)]

    expected = sorted(e.name + ("/" if e.is_dir() else "") for e in os.scandir(tmp_path) if not e.name.startswith("."))
    assert complete(":load ") == expected == ["deep/", "demo.gc"]
    assert complete(":load de") == ["deep/", "demo.gc"]  # not det, detach
    assert complete(":load deep/") == ["deep/detail.gc"]
    assert complete(":load .h") == [".hidden.gc"]
    assert complete(":dot dem") == ["demo.gc"]
    assert complete(":load nothing/here") == []
    assert "detach" in complete("de")  # elsewhere a word still completes as a name
    repl.handle(":load demo.gc")
    assert float(repl.session.variables["x"].data) == 1.0


def test_load_completion_through_a_terminal(tmp_path):
    """Tab after `:load ` in a real terminal (pexpect) writes the file's name."""
    pexpect = pytest.importorskip("pexpect")
    (tmp_path / "only_script.gc").write_text("zz = 41 + 1\n")
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "XDG_DATA_HOME": str(tmp_path / "data"), "TERM": "xterm", "NO_COLOR": "1"}
    child = pexpect.spawn(GRADCALC[0], GRADCALC[1:], cwd=str(tmp_path), env=env, encoding="utf-8", timeout=30, dimensions=(40, 120))
    try:
        child.expect(">>>")
        child.send(":load only\t")
        child.expect("_script")  # completed on the line (coloured by token: "." splits it)
        child.send("\r")
        child.expect(">>>")
        child.sendline("zz")
        child.expect("42.0")
        child.expect(">>>")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)



@pytest.mark.parametrize("command", [
    ("eval", 'sum(log(load("t.csv")))'), ("eval", "sum(log(t))", "@t.csv"), ("run", "s.gc"), ("run", "s.gc", "t=@t.csv"),
    ("eval", 'u = load("t.csv"); v = load("t.csv"); sum(log(u * v))'), ("check", "c.gc"), ("check", "-j", "2", "c.gc"),
])
def test_a_csv_header_is_said_once_when_a_note_evaluates_the_statement_again(tmp_path, command):
    """log of a negative entry is nan: the note that names its op evaluates the statement
    again, which read the file again and said its header once more."""
    (tmp_path / "t.csv").write_text("a,b\n1,-2\n3,4\n")
    (tmp_path / "s.gc").write_text('sum(log(load("t.csv")))\nsum(load("t.csv"))\n')
    (tmp_path / "c.gc").write_text('w = load("t.csv")\ncheck sum(log(w))\ncheck sum(w * w)\n')
    done = gradcalc(*command, cwd=tmp_path)
    assert done.stderr.count("header: t.csv line 1: a, b (column names, not data)\n") == 1, done.stderr


def test_the_repl_says_a_header_again_for_a_later_input(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("a,b\n1,-2\n3,4\n")
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle('sum(log(load("t.csv")))')
    repl.handle('w = load("t.csv")')
    assert capsys.readouterr().err.count("header: t.csv line 1: a, b") == 2


# ---- the graph line's fan-out, and the tree's constants -----------------------------------------


def random_expression(rng, depth: int) -> str:
    """Python-and-gradcalc arithmetic over x, y and small constants, with shared parts."""
    if depth == 0:
        return rng.choice(["x", "y", "x", "y", "2", "0.5", "3"])
    a, b = random_expression(rng, depth - 1), random_expression(rng, depth - 1)
    return rng.choice([f"({a} + {b})", f"({a} * {b})", f"({a} - {b})", f"tanh({a})", f"exp({a} * 0.1)", f"({a} * {a})"])


@pytest.mark.parametrize("seed", range(6))
def test_the_fan_out_text_counts_the_graph_s_fan_out_nodes(seed):
    """For random expressions, the text's entries expand to the fan-out nodes the JSON
    lists, title by title, in order of first use."""
    import random
    from collections import Counter

    rng = random.Random(seed)
    expression = random_expression(rng, 4)
    for engine in ("tensor", "scalar"):
        text = gradcalc("eval", expression, "x=0.5", "y=-1.5", "--engine", engine).stdout.rstrip().split("fan-out: ")[1]
        listed = json.loads(gradcalc("eval", expression, "x=0.5", "y=-1.5", "--engine", engine, "--json").stdout)["graph"]["fan_out"]
        expanded = Counter()
        for entry in ([] if text == "none" else text.split(", ")):
            title, _, rest = entry.partition(" (")
            expanded[title] += int(rest.removesuffix(" nodes)")) if rest else 1
            assert rest == "" or (rest.endswith(" nodes)") and int(rest.removesuffix(" nodes)")) >= 2), entry
        assert expanded == Counter(listed), (expression, engine)


@pytest.mark.parametrize("seed", range(6))
def test_constants_show_no_gradient_in_either_engine_s_tree(seed):
    """A constant is given no gradient by the tensor engine (PyTorch likewise: a tensor
    without requires_grad has grad None); the scalar engine's tree says the same."""
    import random

    expression = random_expression(random.Random(100 + seed), 3) + " + 2 * x"
    for engine in ("tensor", "scalar"):
        tree = gradcalc("eval", expression, "x=0.5", "y=-1.5", "--engine", engine, "--tree").stdout.split("tree:\n")[1]
        constants = [line for line in tree.splitlines() if re.match(r"\s*#\d+ const ", line)]
        assert constants and not [line for line in constants if "grad" in line], (engine, tree)
        variables = [line for line in tree.splitlines() if re.match(r"\s*#\d+ [xy] ", line) and "(drawn above)" not in line]
        assert variables and all("grad" in line for line in variables), (engine, tree)


# ---- --save writes the result shown, or refuses ------------------------------------------------


@pytest.mark.parametrize("expression, what", [
    ("lambda t: t * 2", "a function"), ("sin", "a function"), ("grad(lambda t: t ** 2)", "a function"),
    ("value_and_grad(lambda t: t ** 2)(x)", "a tuple"), ("help(sin)", "help text"), ("vjp(lambda t: t * 3, x)", "a tuple"),
])
@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_eval_save_refuses_a_result_it_cannot_write(tmp_path, expression, what, suffix):
    path = tmp_path / f"out{suffix}"
    done = gradcalc("eval", expression, "x=3", "--save", str(path))
    assert done.returncode == 2 and not path.exists()
    assert f"--save writes a value and its gradients, and this result is {what}" in done.stderr
    assert done.stdout == ""  # refused before anything is shown, as a file that cannot be written is
    as_json = gradcalc("eval", expression, "x=3", "--save", str(path), "--json")
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["error"]["kind"] == "usage"


def test_eval_save_writes_a_tuple_of_numbers_shown_as_a_value(tmp_path):
    """A tuple of numbers is a tensor, shown as one: that is what is saved (NumPy reads it back)."""
    path = tmp_path / "t.npz"
    done = gradcalc("eval", "(x, 2 * x)", "x=3", "--save", str(path))
    assert done.returncode == 0 and "value: [3.0, 6.0]" in done.stdout
    saved = np.load(path)
    assert saved["value"].tolist() == [3.0, 6.0] and saved["grad_x"].tolist() == 3.0


@pytest.mark.parametrize("script, saved, refused", [
    ("x * 2\nhelp(sin)\n", None, "s.gc:2, is help text"),
    ("x * 2\nx * 3\n", 9.0, None),
    ("x * 2\ny = x * 5\n", 6.0, None),  # an assignment shows nothing
    ("x * 2\nvalue_and_grad(lambda t: t * t)(x)\n", None, "s.gc:2, is a tuple"),
    ("x * 2\nlambda t: t\nx * 4\n", 12.0, None),
    ("x * 2\ncheck x * x\n", 6.0, None),  # a verdict is not a result to save
])
def test_run_save_writes_the_last_result_shown(tmp_path, script, saved, refused):
    (tmp_path / "s.gc").write_text(script)
    done = gradcalc("run", "s.gc", "x=3", "--save", "out.json", cwd=tmp_path)
    if refused is None:
        assert done.returncode == 0, done.stderr
        assert json.loads((tmp_path / "out.json").read_text())["value"] == saved
    else:
        assert done.returncode == 2 and not (tmp_path / "out.json").exists()
        assert f"the last result shown, {refused}" in done.stderr
