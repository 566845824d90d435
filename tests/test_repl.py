"""The REPL, driven through prompt_toolkit's pipe input, and once through a real terminal."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from gradcalc.cli import render
from gradcalc.cli.repl import Repl, history_path, loop, make_prompt_session


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("NO_COLOR", "1")
    return tmp_path / "data"


def drive(text, repl=None):
    repl = repl or Repl(renderer=render.PlainRenderer(render.Style()))
    with create_pipe_input() as pipe:
        pipe.send_text(text)
        pipe.close()  # end of input: the loop sees Ctrl-D once the text is used up
        loop(repl, make_prompt_session(repl, input=pipe, output=DummyOutput()))
    return repl


def test_values_gradients_and_underscore(capsys):
    drive("x = 3\nx ** 2\n_ + 1\n")
    out = capsys.readouterr().out
    assert "value: 9.0" in out and "grad x: 6.0" in out
    assert "value: 10.0" in out


def test_unfinished_input_continues_on_the_next_line(capsys):
    drive("y = (2 *\n 3 +\n 1)\ny\n")
    assert "value: 7.0" in capsys.readouterr().out


def test_an_error_keeps_every_variable(capsys):
    repl = drive("a = 2\nb = a * nosuch\n[1, 2] + [1, 2, 3]\na * 5\n")
    captured = capsys.readouterr()
    assert "unknown name 'nosuch'" in captured.err
    assert "value: 10.0" in captured.out
    assert "b" not in repl.session.variables and repl.session.variables["a"].item() == 2.0


def test_an_error_in_a_function_defined_earlier_is_shown_in_its_definition(capsys, tmp_path):
    """The place of an error in a function's body counts lines in the input (or file) that
    defined it; it was shown under the text of the input that called it."""
    script = tmp_path / "lib.gc"
    script.write_text("# helpers\ndef g(u) = u @ a\n")
    drive(f"a = [1, 2]\ndef f(u) = (u) + (a)\n1 + f([1, 2, 3])\n:load {script}\ng([1, 2, 3])\n")
    err = capsys.readouterr().err
    assert "shapes do not fit for +: (3,) + (2,)  [in f, line 1, column 12]\n1 | def f(u) = (u) + (a)\n               ^^^^^^^^^\n" in err
    assert "[in g, line 2, column 12]\n2 | def g(u) = u @ a\n               ^^^^^\n" in err


def test_commands(capsys, tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("w = 4\ndef sq(t) = t * t\n")
    dot = tmp_path / "g.dot"
    repl = drive(f"x = 1.5\n:vars\nsin(x) * x\n:tree\n:dot {dot}\n:load {script}\n"
                 "sq(w)\n:engine scalar\nx = 2\nx * x\n:reset\n:vars\n:help\n:nope\n:quit\nx = 99\n")
    captured = capsys.readouterr()
    out = captured.out
    assert "x = 1.5" in out
    assert "tree:" in out and "#1 mul" in out
    assert dot.read_text().startswith("digraph")
    assert "value: 16.0" in out
    assert "engine: scalar" in out and "value: 4.0" in out
    assert "no variables yet" in out
    assert ":dot FILE" in out
    assert "unknown command :nope" in captured.err
    assert "x" not in repl.session.variables  # :quit stopped before x = 99


def test_check_statements_in_the_repl(capsys):
    drive("x = 0.3\ncheck tanh(x) * x\n")
    assert "PASS" in capsys.readouterr().out


def test_completion_offers_variables_functions_and_commands():
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle("my_var = 2")
    words = repl.words()
    for expected in ("my_var", "softmax", "relu", "grad", ":help", ":quit", "pi"):
        assert expected in words
    session = make_prompt_session(repl, output=DummyOutput())
    from prompt_toolkit.document import Document

    completions = [c.text for c in session.completer.get_completions(Document("soft"), None)]
    assert "softmax" in completions and "softplus" in completions


def test_history_file_is_created_under_xdg_data_home(data_home):
    drive("1 + 1\n")
    assert history_path() == data_home / "gradcalc" / "history"
    assert "1 + 1" in history_path().read_text()


def test_end_to_end_through_a_terminal(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "XDG_DATA_HOME": str(tmp_path), "TERM": "xterm", "NO_COLOR": "1"}
    gradcalc = str(Path(sys.executable).with_name("gradcalc"))
    child = pexpect.spawn(gradcalc, env=env, encoding="utf-8", timeout=30, dimensions=(40, 120))
    try:
        child.expect(">>>")
        child.sendline("x = 2")
        child.expect(">>>")
        child.sendline("(x *")
        child.expect(r"\.\.\.")
        child.sendline("3) ** 2")
        child.expect("value: 36.0")
        child.expect("grad x: 36.0")
        child.expect(">>>")
        child.sendline("nosuch + 1")
        child.expect("unknown name")
        child.expect(">>>")
        child.sendintr()  # Ctrl-C cancels the line, the REPL stays
        child.expect(">>>")
        child.sendline("x")
        child.expect("value: 2.0")
        child.expect(">>>")
        child.sendeof()  # Ctrl-D leaves
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def spawn_repl(tmp_path, env=None):
    pexpect = pytest.importorskip("pexpect")
    environment = {**os.environ, "PROMPT_TOOLKIT_NO_CPR": "1", "XDG_DATA_HOME": str(tmp_path), "TERM": "xterm", "NO_COLOR": "1", **(env or {})}
    gradcalc = str(Path(sys.executable).with_name("gradcalc"))
    return pexpect, pexpect.spawn(gradcalc, env=environment, encoding="utf-8", timeout=30, dimensions=(40, 120))


def exchange(child, line, *expected):
    """Type a line, wait for each expected text, then for the next prompt."""
    child.sendline(line)
    for text in expected:
        child.expect(text)
    child.expect(">>>")


def test_ctrl_c_during_a_long_computation_keeps_the_session(tmp_path):
    pexpect, child = spawn_repl(tmp_path)
    try:
        child.expect(">>>")
        exchange(child, "x = 5")
        child.sendline("def f(n) = f(n-1)+f(n-1) if n>0 else 1; x = 7; f(25)")
        import time

        time.sleep(2.0)  # f(25) makes 2**26 calls: it is still running
        child.sendintr()
        child.expect("interrupted")
        child.expect(">>>")
        exchange(child, "x", "value: 7.0")  # the statements before the interrupted one kept their effect
        exchange(child, "f(3)", "value: 8.0")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_interrupted_statement_leaves_variables_unchanged(capsys):
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle("a = 1")

    def interrupt(statement):
        repl.session.variables["a"] = "half-made"
        raise KeyboardInterrupt

    repl.session.run_statement = interrupt
    repl.handle("a = 2")
    assert repl.session.variables["a"].item() == 1.0
    assert "interrupted" in capsys.readouterr().err


def test_an_internal_error_is_one_line_and_the_session_goes_on(capsys, monkeypatch):
    monkeypatch.delenv("GRADCALC_DEBUG", raising=False)
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle("a = 1")

    def broken(statement):
        repl.session.variables["a"] = "half-made"
        raise TypeError("something inside")

    run_statement, repl.session.run_statement = repl.session.run_statement, broken
    repl.handle("a = 2")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: TypeError: something inside" in err
    repl.session.run_statement = run_statement
    repl.handle("a + 1")
    assert "value: 2.0" in capsys.readouterr().out


@pytest.mark.parametrize("breakage", ["directory", "dev_full"])
def test_a_broken_history_file_warns_once_and_lines_still_run(tmp_path, breakage):
    history = tmp_path / "gradcalc" / "history"
    history.parent.mkdir(parents=True)
    if breakage == "directory":
        history.mkdir()
    else:
        history.symlink_to("/dev/full")
    pexpect, child = spawn_repl(tmp_path)
    try:
        child.expect("history")
        child.expect(">>>")
        exchange(child, "x = 2")
        exchange(child, "x * 21", "value: 42.0")
        exchange(child, "x + 1", "value: 3.0")
        child.sendeof()
        child.expect(pexpect.EOF)
        transcript = child.before
    finally:
        child.close()
    assert "Traceback" not in transcript and child.exitstatus == 0


def test_history_that_fails_on_write_warns_once(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    history = tmp_path / "gradcalc" / "history"
    history.parent.mkdir(parents=True)
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    session = make_prompt_session(repl, output=DummyOutput())
    history.unlink(missing_ok=True)
    history.mkdir()  # now every append fails
    session.history.store_string("x")
    session.history.store_string("y")
    assert capsys.readouterr().err.count("cannot save history") == 1


def test_relative_xdg_data_home_is_ignored(monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")
    assert history_path() == Path.home() / ".local" / "share" / "gradcalc" / "history"


def test_trailing_operator_and_backslash_continue_the_line(capsys):
    drive("x = 3 +\n4\nx\ny = 2 * \\\n5\ny\n")
    out = capsys.readouterr().out
    assert "value: 7.0" in out and "value: 10.0" in out


@pytest.fixture
def complete():
    """What Tab offers for the text before the cursor, in a session where x = [1, 2]."""
    from prompt_toolkit.document import Document

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle("x = [1, 2]")
    session = make_prompt_session(repl, output=DummyOutput())
    return lambda text: [c.text for c in session.completer.get_completions(Document(text), None)]


def test_tab_completes_commands_methods_and_attributes(complete):
    assert complete(":lo") == [":load"]
    assert complete(":he") == [":help"]
    assert ":quit" in complete(":q")
    members = complete("x.")
    assert {"relu", "sum", "T", "shape"} <= set(members)
    assert complete("x.re") == ["relu", "reshape"] or "relu" in complete("x.re")
    assert "softmax" in complete("soft")


def test_scalar_engine_errors_name_the_repl_command(capsys):
    drive(":engine scalar\n[1, 2]\n")
    err = capsys.readouterr().err
    assert ":engine tensor" in err and "--engine" not in err


def test_load_without_a_file_and_with_a_tilde(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "s.gc").write_text("w = 4\n")
    repl = drive(":load\n:load ~/s.gc\nw\n:dot ~/g.dot\n")
    captured = capsys.readouterr()
    assert "usage: :load FILE" in captured.err and "Is a directory" not in captured.err
    assert "value: 4.0" in captured.out
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    assert repl.session.variables["w"].item() == 4.0


def test_load_of_a_file_that_is_not_utf8_names_the_byte(capsys, tmp_path):
    script = tmp_path / "latin1.gc"
    script.write_bytes(b"x = 2 # caf\xe9\n")
    drive(f":load {script}\n")
    err = capsys.readouterr().err
    assert f"{script} is not UTF-8: byte 0xe9 at offset 11 (line 1, column 12)" in err


def test_vars_shows_values_and_wrt_restricts_gradients(capsys):
    drive("W = ones(100, 100)\nb = 2\nv = [0.5, -1]\n:vars\n:wrt b\nsum(W) * b\n:wrt\nsum(W) * b\n")
    out = capsys.readouterr().out
    assert "\nb = 2.0\n" in out and "\nv = [0.5, -1.0]\n" in out
    assert "W = [[1.0, 1.0, 1.0, ..., 1.0, 1.0, 1.0], " in out and "(36 of 10000 elements shown)  (shape 100x100)\n" in out
    first, second = out.split("value: 20000.0")[1:3]
    assert "grad b: 10000.0" in first and "grad W" not in first
    assert "grad W" in second


def test_ans_and_underscore_hold_the_last_result(capsys):
    drive("x = 3\nx * 2\nans + _\n")
    assert "value: 12.0" in capsys.readouterr().out


def test_a_large_matrix_is_summarised_one_row_per_line_on_a_terminal():
    import io

    from rich.console import Console

    renderer = render.RichRenderer(render.Style(rich=True))
    renderer.console = Console(file=io.StringIO(), width=80, force_terminal=False)
    repl = Repl(renderer=renderer)
    repl.handle("reshape(arange(10000), 100, 100) / 7")
    text = renderer.console.file.getvalue()
    rows = [line for line in text.splitlines() if line.lstrip(" [").startswith(("0.", "14.", "1414."))]
    assert rows and all(len(line) <= 80 for line in text.splitlines())
    assert "of 10000 elements shown" in text


@pytest.mark.slow
def test_a_long_bracketed_paste_is_parsed_once_not_once_per_line(capsys, monkeypatch):
    from gradcalc.cli import repl as repl_module

    calls = []
    real = repl_module.compile_program
    monkeypatch.setattr(repl_module, "compile_program", lambda text: calls.append(text) or real(text))
    drive("v = [\n" + "".join(f"  {k},\n" for k in range(500)) + "]\nsum(v)\n")
    assert "value: 124750.0" in capsys.readouterr().out
    assert len(calls) <= 4  # is_incomplete and run, for each of the two inputs


def test_read_input_uses_the_parsers_pending_input(monkeypatch):
    """A bracket inside a string does not leave the input open, and a bracketed paste
    is parsed once when it closes, not once per line."""
    from gradcalc.cli.repl import read_input
    from gradcalc.parser import syntax

    class Lines:
        def __init__(self, lines):
            self.lines = list(lines)

        def prompt(self, _):
            if not self.lines:
                raise EOFError
            return self.lines.pop(0)

    parsed = []
    real = syntax.parse_tree
    monkeypatch.setattr(syntax, "parse_tree", lambda text, *a, **k: parsed.append(text) or real(text, *a, **k))
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    assert read_input(Lines(["s = '(['", "x = 1"]), repl) == "s = '(['"
    lines = ["v = ["] + [f"  {k}," for k in range(300)] + ["]", "sum(v)"]
    text = read_input(Lines(lines), repl)
    assert text.startswith("v = [\n  0,\n") and text.endswith("299,\n]") and "sum" not in text
    assert len(parsed) == 2
    assert read_input(Lines(["x = 3 +", "4"]), repl) == "x = 3 +\n4"  # as typed: places stay where they were typed
    assert read_input(Lines([":vars", "x"]), repl) == ":vars"


def test_digits_rounds_the_display_and_keeps_the_values(capsys):
    """:digits 3 shows e^2 = 7.389056... as 7.39; :digits alone gives full precision back;
    the value itself never changed (x * 1 is still exact)."""
    import math

    drive("x = 2\n:digits 3\nexp(x)\n:digits\nexp(x)\n:digits 0\n:digits 18\n")
    captured = capsys.readouterr()
    assert "value: 7.39\n" in captured.out
    assert f"value: {math.exp(2)!r}\n" in captured.out
    assert ":digits must be a whole number from 1 to 17, not '0'" in captured.err
    assert ":digits must be a whole number from 1 to 17, not '18'" in captured.err


def echoed(text: str) -> str:
    """A pattern for `text` as the terminal receives it: colour codes between characters."""
    return "(?:\x1b\\[[0-9;?]*[A-Za-z])*".join(map(re.escape, text))


def test_up_recalls_the_history_that_starts_with_what_is_typed_and_keywords_complete(tmp_path):
    pexpect, child = spawn_repl(tmp_path)
    up, tab = "\x1b[A", "\t"
    try:
        child.expect(">>>")
        for line in ("a = 5", "b = 7", "a * 2", "b * 3", "a + 1"):
            exchange(child, line)
        child.send("b" + up + "\r")  # the latest line starting with b: b * 3 (not a + 1)
        child.expect("value: 21.0")
        child.expect(">>>")
        child.send("b" + up + up + "\r")  # and the one before it: b = 7
        child.expect(">>>")
        exchange(child, "b", "value: 7.0")
        child.send("sum(ones(2, 3), kee" + tab)  # keyword arguments complete (apart from the typing: wait for it)
        child.expect(echoed("pdims="))
        child.send("True, ax" + tab)
        child.expect(echoed("is="))
        child.send("0)\r")
        child.expect(r"value: \[\[2.0, 2.0, 2.0\]\]")
        child.expect(">>>")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()


def test_keyword_arguments_complete_inside_the_call(complete):
    assert complete("softmax(x, ax") == ["axis="]
    assert complete("sum(x, ke") == ["keepdims="]
    assert complete("cross_entropy(x, [0], re")[0] == "reduction="
    assert complete("grad(f, argn") == ["argnums="]
    assert "axis=" not in complete("softmax([x, ax")  # inside a list: not an argument of softmax
    assert "axis=" not in complete("softmax(x) + ax")
    assert complete("exp(softmax(x, a") [0] == "axis="


def test_keywords_offered_are_those_each_function_takes():
    """Every registry function's offered keywords are the parameters with defaults of
    its signature, and each one is accepted by the language as a keyword."""
    from gradcalc.parser.backends import public_ops

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    for name, op in public_ops().items():
        offered = repl.keywords(name)
        assert all(f"{k}=" in op.signature for k in offered), name
        assert all(k in op.param_names or k == op.variadic_param or k in op.signature for k in offered), name


def test_load_shows_each_result_under_its_file_and_line(capsys, tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("w = 4\nw * 2\n# a comment\ncheck w * w\nw + 1\n")
    drive(f":load {script}\n")
    out = capsys.readouterr().out
    assert f"== {script}:2  w * 2\nvalue: 8.0\n" in out
    assert f"== {script}:5  w + 1\nvalue: 5.0\n" in out
    assert f"PASS {script}:4  w * w" in out


def test_long_help_lines_wrap_under_their_own_text(tmp_path):
    pexpect, child = spawn_repl(tmp_path, env={"COLUMNS": "60"})
    child.setwinsize(40, 60)
    try:
        child.expect(">>>")
        child.sendline(":help")
        child.sendline("1 + 1")  # (what comes before its value is :help's)
        child.expect("value: 2.0")
        shown = child.before.replace("\r\n", "\n")
        child.sendline(":help softmax")
        child.sendline("2 + 2")
        child.expect("value: 4.0")
        about = child.before.replace("\r\n", "\n")
        child.expect(">>>")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    steps = re.sub("\x1b\\[[0-9;?]*[A-Za-z]", "", shown)
    steps = steps[steps.index("  :steps"):].splitlines()
    assert steps[0].startswith("  :steps         the backward pass") and len(steps[0]) <= 60
    assert steps[1].startswith(" " * 17) and steps[1][17] != " "  # under the description, not at the margin
    lines = re.sub("\x1b\\[[0-9;?]*[A-Za-z]", "", about).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("softmax("))
    lines = lines[first:next(i for i, line in enumerate(lines) if line.startswith(">>>") and i > first)]  # up to the next prompt
    assert len(lines) > 8 and max(map(len, lines)) <= 60
    assert lines[1].startswith("    ") and not lines[1].startswith("     ")


@pytest.mark.parametrize("width", [40, 61, 80, 123])
def test_hanging_keeps_every_word_in_order_within_the_width(width):
    from gradcalc.cli.repl import HELP, hanging, help_lines
    from gradcalc.parser.help import describe

    lines = [line for line, _ in help_lines()] + HELP.splitlines() + describe("cross_entropy") + describe("vmap")
    for line in lines:
        wrapped = hanging(line, width, 4)
        assert " ".join(" ".join(wrapped).split()) == " ".join(line.split())
        assert len(wrapped) == 1 or all(len(piece) < width for piece in wrapped) or any(len(word) > width // 2 for word in line.split())
        lead = len(line) - len(line.lstrip(" "))
        assert all(piece.startswith(" " * (lead + 4)) for piece in wrapped[1:])


def test_a_limit_setting_holds_until_it_is_set_back(capsys):
    """`:max-steps 100` stops a loop of 500 additions; `:max-steps` alone gives the default
    back and the loop runs (500, as Python's loop counts)."""
    total = 0
    for _ in range(500):
        total += 1
    loop = "s = 0\nfor i in range(500):\n    s = s + 1\n\ns\n"
    drive(f":max-steps 100\n{loop}:max-steps\n{loop}")
    captured = capsys.readouterr()
    assert "max-steps: 100" in captured.out and "100 steps" in captured.err and "(:max-steps raises" in captured.err
    assert f"value: {float(total)}" in captured.out and "max-steps: its default" in captured.out


def test_full_shows_every_element_until_it_is_switched_off(capsys):
    drive("ones(2000) * 2\n:full\nones(2000) * 2\n:full off\nones(2000) * 2\n")
    values = [line for line in capsys.readouterr().out.splitlines() if line.startswith("value:")]
    assert ["..." in value for value in values] == [True, False, True]
    assert values[1].count("2.0") == 2000
