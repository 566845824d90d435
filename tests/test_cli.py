"""The gradcalc command, run for real as a subprocess: output, JSON, errors, exit codes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import GRADCALC, run  # noqa: F401 (GRADCALC: other test files import it from here)

ROOT = Path(__file__).resolve().parent.parent


def gradcalc(*args, stdin=None, env=None, cwd=None):
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80", **(env or {})}
    done = run(list(args), input=stdin, env=environment, cwd=cwd, timeout=60)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


def test_seed_example_one_shot():
    done = gradcalc("eval", "(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10")
    assert done.returncode == 0
    out = done.stdout
    assert "value: 11010.232897403359" in out
    assert "grad a: -5506.6164487016795" in out
    assert "grad b: 1.0" in out
    assert "grad c: 11013.232897403359" in out
    assert "8 nodes, 8 edges" in out and "fan-out: a" in out


def test_expression_starting_with_minus_works_as_typed():
    done = gradcalc("eval", "-a*b", "a=2", "b=3")
    assert done.returncode == 0, done.stderr
    assert "value: -6.0" in done.stdout and "grad a: -3.0" in done.stdout and "grad b: -2.0" in done.stdout
    assert gradcalc("eval", "-a*b", "a=2", "b=3", "--json").returncode == 0


def test_json_contract():
    done = gradcalc("eval", "(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10", "--json")
    doc = json.loads(done.stdout)  # one document, nothing else on stdout
    assert set(doc) == {"value", "shape", "grads", "graph"}
    assert doc["value"] == pytest.approx(11010.232897403359, rel=1e-15)
    assert doc["shape"] == []
    assert doc["grads"]["a"] == pytest.approx(-5506.6164487016795, rel=1e-15)
    assert doc["graph"] == {"nodes": 8, "edges": 8, "leaves": ["a", "b", "c"], "fan_out": ["a"], "depth": 4}


def test_json_for_a_non_scalar_output_says_grad_of_sum():
    doc = json.loads(gradcalc("eval", "W @ x", "W=[[1, 2], [3, 4]]", "x=[1, 1]", "--json").stdout)
    assert doc["value"] == [3.0, 7.0] and doc["shape"] == [2]
    assert doc["grad_of"] == "sum"
    assert doc["grads"] == {"W": [[1.0, 1.0], [1.0, 1.0]], "x": [4.0, 6.0]}


def test_json_writes_inf_and_nan_as_strings():
    doc = json.loads(gradcalc("eval", "[exp(x), log(-x)]", "x=1000", "--json").stdout)
    assert doc["value"] == ["inf", "nan"]


def test_non_scalar_output_is_labelled():
    out = gradcalc("eval", "x * x", "x=[1, 2, 3]").stdout
    assert "grad of sum x: [2.0, 4.0, 6.0]" in out or "grad of sum x: [2., 4., 6.]" in out


def test_wrt_and_digits():
    out = gradcalc("eval", "a*b + c", "a=1/3", "b=2", "c=1", "--wrt", "a", "--digits", "3").stdout
    assert "value: 1.67" in out
    assert "grad a: 2" in out and "grad b" not in out


def test_scalar_engine():
    out = gradcalc("eval", "(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10", "--engine", "scalar").stdout
    assert "value: 11010.232897403359" in out
    assert "8 nodes" in out  # division is a primitive, as in the tensor engine


def test_tree_draws_shared_node_once():
    out = gradcalc("eval", "(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10", "--tree").stdout
    tree = out.split("tree:")[1]
    assert tree.count(" a  2.0") == 1 and "a  (drawn above)" in tree


def test_several_statements_last_expression_is_output():
    out = gradcalc("eval", "y = x**2; z = y + 1; z * 2", "x=3").stdout
    assert "value: 20.0" in out and "grad x: 12.0" in out


def test_dot_output(tmp_path):
    path = tmp_path / "g.dot"
    assert gradcalc("eval", "x*x", "x=3", "--dot", str(path)).returncode == 0
    assert path.read_text().startswith("digraph")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_dot_renders_svg(tmp_path):
    path = tmp_path / "g.svg"
    done = gradcalc("eval", "(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10", "--dot", str(path))
    assert done.returncode == 0, done.stderr
    assert "<svg" in path.read_text()


def test_dot_without_graphviz_says_so(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    done = gradcalc("eval", "x*x", "x=3", "--dot", str(tmp_path / "g.svg"), env=env)
    assert done.returncode == 2 and "Graphviz" in done.stderr


@pytest.mark.parametrize("args, kind, words", [
    (["eval", "(a*"], "incomplete", "unfinished"),
    (["eval", "[1, 2"], "incomplete", "unfinished"),
    (["eval", "a + )", "a=1"], "syntax", "expected an expression"),
    (["eval", "nosuchfunction(1)"], "name", "unknown function"),
    (["eval", "sigmod(x)", "x=1"], "name", "sigmoid"),
    (["eval", "valeu + 1", "value=1"], "name", "value"),
    (["eval", "x.__class__", "x=1"], "safety", "'_'"),
    (["eval", "__import__('os')"], "safety", "cannot be called"),
    (["eval", "[1, 2] + [1, 2, 3]"], "shape", "(2,) + (3,)"),
    (["eval", "zeros(100000, 100000)"], "size", "over the cap"),
    (["eval", "ones(10**9)"], "size", "over the cap"),
    (["eval", "x + 1", "x"], "argument", "NAME=VALUE"),
    (["eval", "x + 1", "x=(1"], "incomplete", "in the value of x"),
    (["eval", "x + 1", "3=4"], "argument", "NAME=VALUE"),
    (["eval", ""], "argument", "empty"),
    (["eval", "x = 3"], "argument", "end with an expression"),
    (["eval", "def f(n) = f(n); f(1)"], "recursion", "deeper than"),
    (["eval", "'abc'"], "value", "not a number or tensor"),
])
def test_bad_input_exits_2_with_a_clear_message(args, kind, words):
    done = gradcalc(*args)
    assert done.returncode == 2
    assert words in done.stderr
    assert "error:" in done.stderr
    doc = json.loads(gradcalc(*args, "--json").stdout)
    assert doc["error"]["kind"] == kind
    assert words in doc["error"]["message"]


def test_error_shows_the_line_and_a_caret_under_the_span():
    done = gradcalc("eval", "a = [1, 2]; b = [1, 2, 3]; a + b")
    lines = done.stderr.splitlines()
    source_line = next(line for line in lines if "a + b" in line)
    caret_line = lines[lines.index(source_line) + 1]
    assert caret_line.index("^") == source_line.index("a + b")
    assert caret_line.count("^") == len("a + b")


@pytest.mark.parametrize("expression", ["-x + a", "--x + a"])
def test_an_expression_that_starts_with_a_dash_is_placed_as_typed(expression):
    """The command line keeps it from reading as an option with a space in front; the
    error's column and its echo are of the text as typed (they counted the space)."""
    done = gradcalc("eval", expression, "x=[1, 2, 3]", "a=[1, 2]")
    assert done.returncode == 2
    assert f"1 | {expression}\n    {'^' * len(expression)}\n" in done.stderr
    assert "[line 1, column 1]" in done.stderr
    error = json.loads(gradcalc("eval", expression, "x=[1, 2, 3]", "a=[1, 2]", "--json").stdout)["error"]
    assert (error["line"], error["column"]) == (1, 1)


def test_minus_h_is_the_expression_when_h_is_bound_and_help_when_alone():
    # (found by a new user: the README says an expression that starts with - works as typed,
    # and `gradcalc eval -h h=2` printed the help)
    assert gradcalc("eval", "-h", "h=2").stdout.startswith("value: -2.0")
    assert gradcalc("eval", "-h", "--json", "h=2").returncode == 0
    for args in (["eval", "-h"], ["eval", "-h", "x=2"]):
        assert gradcalc(*args).stdout.startswith("Usage: gradcalc eval")


def test_an_error_in_a_function_body_names_the_function_in_json():
    done = gradcalc("eval", "def f(u) = u + [1, 2]; f([1, 2, 3])", "--json")
    assert json.loads(done.stdout)["error"] == {
        "kind": "shape", "message": "shapes do not fit for +: (3,) + (2,)", "line": 1, "column": 12, "function": "f"}
    assert "[line 1, column 12]\n1 | def f(u) = u + [1, 2]; f([1, 2, 3])\n               ^^^^^^^^^^\n" in done.stderr


def test_usage_errors_exit_2():
    assert gradcalc("eval").returncode == 2
    assert gradcalc("eval", "x", "--engine", "quantum").returncode == 2
    assert gradcalc("nosuchcommand").returncode == 2
    assert gradcalc("run", "/no/such/file.gc").returncode == 2


def test_plain_output_has_no_escape_codes_and_no_hard_wraps():
    long = " + ".join(f"{i}.123456789 * x" for i in range(30))
    out = gradcalc("eval", long, "x=1", "--tree").stdout
    assert "\x1b[" not in out
    value_line = next(line for line in out.splitlines() if line.startswith("value:"))
    assert len(value_line) > 0 and "grad x:" in out
    out = gradcalc("eval", "x * 1.2345678901234567", "x=" + "1" * 3, env={"NO_COLOR": "", "TERM": "xterm"}).stdout
    assert "\x1b[" not in out  # a pipe is not a terminal: still plain


def test_version_and_help_on_every_command():
    assert gradcalc("--version").stdout.startswith("gradcalc ")
    for command in ([], ["eval"], ["run"], ["check"], ["ops"]):
        done = gradcalc(*command, "--help")
        assert done.returncode == 0
        assert "Example" in done.stdout or command == []


def test_shell_completion_is_offered():
    assert "--install-completion" in gradcalc("--help").stdout


def test_ops_lists_every_public_op():
    from gradcalc.parser.backends import public_ops

    out = gradcalc("ops").stdout
    for name, op in public_ops().items():
        if name == op.name:
            assert op.signature in out
    assert "grad(y, x)" in out


def test_run_scripts_and_json_lines(tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("x = 2\nx**2\n# comment\ny = x * 3\ny + x\n")
    done = gradcalc("run", str(script))
    assert done.returncode == 0
    assert f"{script}:2" in done.stdout and "value: 4.0" in done.stdout and "value: 8.0" in done.stdout
    lines = gradcalc("run", str(script), "--json").stdout.splitlines()
    objects = [json.loads(line) for line in lines]
    assert [o["value"] for o in objects] == [4.0, 8.0]
    assert objects[1]["grads"] == {"x": 4.0, "y": 1.0}  # y is named: its adjoint (docs/language.md, Named values)


def test_run_reports_an_error_with_its_file_and_line(tmp_path):
    script = tmp_path / "bad.gc"
    script.write_text("x = 1\ny = x +\n")
    done = gradcalc("run", str(script))
    assert done.returncode == 2 and f"{script}:2" in done.stderr


def test_piped_stdin_runs_as_a_script():
    done = gradcalc(stdin="x = 3\nx**2\n")
    assert done.returncode == 0 and "value: 9.0" in done.stdout and "grad x: 6.0" in done.stdout


def test_one_shot_eval_does_not_import_prompt_toolkit():
    code = (
        "import sys; sys.argv=['gradcalc','eval','x**2','x=3']\n"
        "from gradcalc.cli.entry import run\n"
        "try:\n    run()\nexcept SystemExit:\n    pass\n"
        "print('prompt_toolkit' in sys.modules, 'rich' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    assert done.stdout.strip().splitlines()[-1] == "False False"


def test_overflow_and_domain_errors_show_inf_nan_and_name_the_op_without_warnings():
    done = gradcalc("eval", "log(x) * exp(y)", "x=-1", "y=1000")
    assert done.returncode == 0
    assert "value: nan" in done.stdout and "came from log" in done.stdout
    assert "RuntimeWarning" not in done.stderr and done.stderr == ""


def test_every_bound_variable_gets_a_gradient_even_when_unused():
    out = gradcalc("eval", "a * 2", "a=1", "b=[1, 2]").stdout
    assert "grad a: 2.0" in out and "grad b: [0.0, 0.0]" in out


def test_ops_groups_categories_and_lists_autodiff_last():
    rows = [line.split(" | ")[1] for line in gradcalc("ops", "--markdown").stdout.splitlines()[2:]]
    groups = [c for k, c in enumerate(rows) if k == 0 or rows[k - 1] != c]
    assert len(groups) == len(set(groups)), groups  # each category is one block
    assert groups[0] == "arithmetic" and groups[-1] == "autodiff", groups
    assert groups.index("linear algebra") < groups.index("autodiff")
    assert rows[-3:] == ["autodiff"] * 3  # grad, hessian, jacobian


def test_counts_of_one_read_in_the_singular():
    """x alone: one node, no edge, one leaf, no op; x*2: 3 nodes, 2 edges, 2 leaves, 1 op."""
    assert "graph: 1 node, 0 edges, 1 leaf (0 constant), 0 ops, depth 0" in gradcalc("eval", "x", "x=2").stdout
    assert "graph: 3 nodes, 2 edges, 2 leaves (1 constant), 1 op, depth 1" in gradcalc("eval", "x*2", "x=2").stdout


def test_output_files_say_what_they_wrote(tmp_path):
    done = gradcalc("eval", "x*2", "x=3", "--dot", str(tmp_path / "g.dot"))
    assert done.returncode == 0 and done.stderr == f"wrote {tmp_path / 'g.dot'}\n"
    assert "digraph" in (tmp_path / "g.dot").read_text()
    done = gradcalc("eval", "x*2", "x=3", "--dot", "-")
    assert done.stdout.startswith("digraph") and done.stderr.startswith("value: 6.0")  # stdout is the DOT text alone


def test_digits_before_any_command_rounds_its_display():
    """e^2 = 7.38905609893065: 7.39 at three digits in eval, in a piped script (the REPL's
    path without a terminal) and in a help example; check, which prints no such numbers,
    refuses the option instead of ignoring it."""
    assert "value: 7.39\ngrad x: 7.39\n" in gradcalc("--digits", "3", "eval", "exp(x)", "x=2").stdout
    assert "value: 7.39\n" in gradcalc("--digits", "3", stdin="exp(2)\n").stdout
    assert "  value 0.462\n" in gradcalc("--digits", "3", "ops", "tanh").stdout  # tanh(0.5) = 0.46211...
    assert "value: 7.38905609893065\n" in gradcalc("eval", "exp(x)", "x=2").stdout
    refused = gradcalc("--digits", "3", "check", str(ROOT / "examples" / "seed.gc"))
    assert refused.returncode == 2 and "--digits does not apply to `gradcalc check`" in refused.stderr


@pytest.mark.parametrize(("word", "hint"), [
    ("repl", "The REPL starts with no command: gradcalc"),
    ("chek", "Did you mean 'check'?"),
    ("model.gc", "Run a script with: gradcalc run model.gc"),
    ("x**2", "Evaluate an expression with: gradcalc eval 'x**2'"),
    ("frobnicate", "The commands are check, eval, export, ops, plot, run; with none, the REPL"),
])
def test_a_first_word_that_is_no_command_says_what_was_meant(word, hint):
    # (found by a new user: `gradcalc repl` said only "No such command 'repl'")
    done = gradcalc(word)
    assert done.returncode == 2 and f"No such command {word!r}. {hint}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["eval", "sum(X)", "X=data.npy"], "unknown name 'data'; a file's name is a string: load('data.npy'), or NAME=@data.npy"),
    (["eval", "load(table.csv)"], "unknown name 'table'; a file's name is a string: load('table.csv')"),
    (["eval", "sum(X)", "X=@"], "bad binding 'X=@': a file's name goes after the @, as in X=@data.npy"),
    (["eval", "sum(X)", "@"], "bad binding '@': a file's name goes after the @"),
    (["eval", "x.sum", "x=[1, 2]"], "error:"),  # (an attribute that is no file suffix: no file hint)
])
def test_a_file_name_written_as_a_name_is_told_how_to_write_it(args, words):
    # (found by a new user: X=data.npy said only "unknown name 'data'", and X=@ ".: unknown kind of data file")
    done = gradcalc(*args)
    assert words in done.stderr and "Traceback" not in done.stderr, done.stderr
    if "file" not in words:
        assert "a file's name" not in done.stderr
