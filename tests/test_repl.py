"""The REPL, driven through prompt_toolkit's pipe input, and once through a real terminal."""
from __future__ import annotations

import os
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


def test_commands(capsys, tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("w = 4\ndef sq(t) = t * t\n")
    dot = tmp_path / "g.dot"
    repl = drive(f"x = 1.5\n:vars\nsin(x) * x\n:tree\n:dot {dot}\n:load {script}\nsq(w)\n:engine scalar\nx = 2\nx * x\n:reset\n:vars\n:help\n:nope\n:quit\nx = 99\n")
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
