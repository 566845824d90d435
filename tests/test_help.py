"""Help for every function, in its three forms: `help(f)` in the language, `:help f` in the
REPL and `gradcalc ops f`, each read from the registry; and the REPL's completion menu
showing signatures."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcalc.autodiff.rules import op_rule
from gradcalc.cli import render
from gradcalc.cli.repl import Repl, make_prompt_session
from gradcalc.parser import HelpResult, LanguageError, Session
from gradcalc.parser.backends import public_ops
from gradcalc.parser.builtins import BUILTINS
from gradcalc.parser.help import _literal, describe

BIN = Path(sys.executable).with_name("gradcalc")
OPS = sorted(name for name, op in public_ops().items() if name == op.name)


def gradcalc(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("name", OPS)
def test_every_op_has_help_with_signature_rule_and_a_working_example(name):
    op = public_ops()[name]
    lines = describe(name)
    assert lines[0] == f"{op.signature}: {op.doc}"
    rule = next(line for line in lines if line.startswith("derivative"))
    assert (op_rule(op) in rule) if op.has_gradient else rule == "derivative: none (no gradient flows through it)"
    start = lines.index("example:")
    program = [line.removeprefix("  >>> ") for line in lines[start + 1:] if line.startswith("  >>> ")]
    shown = [line.strip() for line in lines[start + 1:] if not line.startswith("  >>> ")]
    assert program and shown[0].startswith("value ")
    # The example is the program's own: run again, it gives the value shown.
    session = Session()
    *_, result = session.run_source("\n".join(program))
    assert shown[0] == f"value {_literal(np.asarray(result.value.data), digits=None)}"


def test_the_three_forms_say_the_same(tmp_path):
    """tanh through the language, the REPL and `gradcalc ops`, against its closed forms
    (mpmath): tanh(0.5) and sech(0.5)^2."""
    mpmath = pytest.importorskip("mpmath")
    lines = describe("tanh")
    value = float(next(line for line in lines if line.startswith("  value ")).split()[1])
    slope = float(next(line for line in lines if line.startswith("  d/dx ")).split()[1])
    with mpmath.workdps(40):
        assert value == pytest.approx(float(mpmath.tanh(mpmath.mpf(0.5))), rel=1e-15)
        assert slope == pytest.approx(float(mpmath.sech(mpmath.mpf(0.5)) ** 2), rel=1e-15)
    ops = gradcalc("ops", "tanh")
    assert ops.returncode == 0 and ops.stdout.splitlines() == lines
    evaluated = gradcalc("eval", "help(tanh)")
    assert evaluated.returncode == 0 and evaluated.stdout.splitlines() == lines
    assert json.loads(gradcalc("eval", "help(tanh)", "--json").stdout) == {"help": lines}
    script = tmp_path / "s.gc"
    script.write_text("def f(u) = u ** 2 + 1\nhelp(f)\n")
    ran = gradcalc("run", str(script))
    assert ran.stdout.splitlines() == ["f(u): a function you defined", "  def f(u) = u ** 2 + 1"]


def test_repl_help_with_a_name(capsys):
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle(":help softmax")
    assert capsys.readouterr().out.splitlines() == describe("softmax")
    repl.handle("help(sigmoid)")
    assert capsys.readouterr().out.splitlines() == describe("sigmoid")
    repl.handle(":help")
    general = capsys.readouterr().out
    assert ":help [NAME]" in general and ":quit" in general


def test_help_of_what_is_not_a_function_is_a_placed_error():
    with pytest.raises(LanguageError) as caught:
        Session().run_source("help(sofmax)")
    assert "did you mean softmax" in caught.value.message and caught.value.column == 6
    with pytest.raises(LanguageError) as caught:
        Session().run_source("help(1 + 2)")
    assert "help takes one name" in caught.value.message
    done = gradcalc("ops", "sofmax")
    assert done.returncode == 2 and "did you mean softmax" in done.stderr and "Traceback" not in done.stderr
    [result] = Session().run_source("help()")
    assert isinstance(result, HelpResult) and any(line.startswith("elementwise: ") for line in result.lines)


def test_help_for_builtins_constants_and_variables():
    for name, builtin in BUILTINS.items():
        assert describe(name)[0] == f"{builtin.usage}: {builtin.doc}"
    assert describe("pi") == [f"pi: the constant {math.pi!r}"]
    session = Session()
    session.run_source("w = [1, 2, 3]")
    assert describe("w", session) == ["w: a variable, shape (3,)"]


def test_every_name_the_language_calls_has_help():
    """Every function name a call may use (the backends', load among them), and the
    built-ins that only a statement or a loop calls (help, range): help(NAME) tells of
    it, and help() lists it."""
    from gradcalc.parser.backends import ScalarBackend, TensorBackend

    names = {*TensorBackend().function_names(), *ScalarBackend().function_names(), *BUILTINS}
    [listing] = Session().run_source("help()")
    listed = {name for line in listing.lines if ": " in line for name in line.partition(": ")[2].split(", ")}
    for name in sorted(names):
        canonical = public_ops()[name].name if name in public_ops() else name  # an alias's help is its op's
        [result] = Session().run_source(f"help({name})")
        assert result.lines[0].startswith(f"{canonical}("), name
        assert canonical in listed, name
    done = gradcalc("ops", "load")
    assert done.returncode == 0 and 'load("data.npz", "W")' in done.stdout, done.stderr


def test_the_completion_menu_shows_signatures():
    from prompt_toolkit.document import Document
    from prompt_toolkit.output import DummyOutput

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle("def double(u) = 2 * u")
    session = make_prompt_session(repl, output=DummyOutput())
    metas = {c.text: c.display_meta_text for c in session.completer.get_completions(Document("soft"), None)}
    assert metas["softmax"] == public_ops()["softmax"].signature
    metas = {c.text: c.display_meta_text for c in session.completer.get_completions(Document("dou"), None)}
    assert metas == {"double": "double(u)"}


# ---- every op, in each of the three forms: signature, description, rule, edges, example ----


def _number(v: float) -> str:
    return f"{v:.6g}"


def _numbers(x: object) -> str:
    a = np.asarray(x, dtype=float)
    return _number(float(a)) if a.ndim == 0 else "[" + ", ".join(_numbers(row) for row in a) + "]"


def expected_edge_lines(op) -> list[str]:
    """What help must say of each of the op's Edge conventions, read from the Edge itself:
    where, the call's name, the value, and what PyTorch gives."""
    if not op.edges:
        return ["edges: none (no point where its derivative is a choice)"]
    lines = []
    for edge in op.edges:
        torch = edge.torch if edge.torch != "same" else "the same"
        said = f"an error: {edge.error}" if edge.error else _numbers(list(edge.value) if isinstance(edge.value, tuple) else edge.value)
        lines.append((f"  {edge.case}: {op.name}(", said, f"; PyTorch: {torch}", edge.note))
    return lines


def assert_full_help(op, lines: list[str]) -> None:
    """One op's help: the signature and description, the rule as --steps shows it, every
    edge convention, and an example with its value."""
    assert lines[0] == f"{op.signature}: {op.doc}", lines[0]
    rule = next(line for line in lines if line.startswith("derivative"))
    assert (op_rule(op) in rule) if op.has_gradient else rule == "derivative: none (no gradient flows through it)"
    expected = expected_edge_lines(op)
    if isinstance(expected[0], str):
        assert expected[0] in lines, f"{op.name}: {lines}"
    else:
        start = lines.index(next(line for line in lines if line.startswith("edges (")))
        shown = lines[start + 1:start + 1 + len(expected)]
        for line, (head, said, torch, note) in zip(shown, expected):
            assert line.startswith(head) and said in line and torch in line and note in line, f"{op.name}: {line!r}"
    start = lines.index("example:")
    assert lines[start + 1].startswith("  >>> ") and any(line.startswith("  value ") for line in lines[start:])


def op_blocks(text: str) -> dict[str, list[str]]:
    """Help output of several ops, split at each op's signature line."""
    blocks: dict[str, list[str]] = {}
    signatures = {public_ops()[name].signature + ": ": name for name in OPS}
    current: list[str] = []
    for line in text.splitlines():
        head = next((name for sig, name in signatures.items() if line.startswith(sig)), None)
        if head is not None:
            current = blocks.setdefault(head, [])
        current.append(line)
    return blocks


def test_gradcalc_ops_name_tells_all_of_every_op(capsys):
    """`gradcalc ops NAME` for every op, through the command's own entry (its plain path,
    in this process: a subprocess per op would cost a second each)."""
    from gradcalc.cli.entry import plain_call

    for name in OPS:
        action = plain_call(["ops", name])
        assert action is not None and action() == 0
        assert_full_help(public_ops()[name], capsys.readouterr().out.splitlines())


def test_help_in_the_language_tells_all_of_every_op(tmp_path):
    """help(NAME) for every op, in one `gradcalc run` of a file."""
    script = tmp_path / "all.gc"
    script.write_text("".join(f"help({name})\n" for name in OPS))
    ran = gradcalc("run", str(script))
    assert ran.returncode == 0, ran.stderr
    blocks = op_blocks(ran.stdout)
    assert sorted(blocks) == OPS
    for name in OPS:
        assert_full_help(public_ops()[name], blocks[name])


def test_repl_help_tells_all_of_every_op(capsys):
    """:help NAME for every op, typed into the REPL's own loop."""
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from gradcalc.cli.repl import loop

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    with create_pipe_input() as pipe:
        pipe.send_text("".join(f":help {name}\n" for name in OPS))
        pipe.close()
        loop(repl, make_prompt_session(repl, input=pipe, output=DummyOutput()))
    blocks = op_blocks(capsys.readouterr().out)
    assert sorted(blocks) == OPS
    for name in OPS:
        assert_full_help(public_ops()[name], blocks[name])


def test_the_completion_menu_shows_every_ops_signature():
    from prompt_toolkit.document import Document
    from prompt_toolkit.output import DummyOutput

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    session = make_prompt_session(repl, output=DummyOutput())
    for name in OPS:
        # (the menu offers the words that continue what is typed: all but the last letter)
        metas = {c.text: c.display_meta_text for c in session.completer.get_completions(Document(name[:-1]), None)}
        assert metas.get(name) == public_ops()[name].signature, name


@pytest.mark.parametrize("name", ["e", "pi", "inf"])
def test_help_of_a_rebound_constant_describes_the_users_value(name):
    """`e = 3` makes e the user's, as every name means its last binding: help says so."""
    session = Session()
    session.run_source(f"{name} = 3")
    text = "\n".join(session.run_source(f"help({name})")[-1].lines)
    assert "a variable" in text and "constant" not in text, text
    assert "the constant" in "\n".join(Session().run_source(f"help({name})")[-1].lines)
