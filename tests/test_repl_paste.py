"""A loop pasted into the REPL is read as Python's REPL reads it (issue 38): line by line, a
blank line ends a block, and a line indented where no block is open is an error that runs
nothing (Python's "unexpected indent"), not the rest of the body run once after the loop.

The oracle is Python's own interactive console (code.InteractiveConsole) fed the same
lines; the REPL is driven through its prompt loop (prompt_toolkit's pipe input) and once
through a real terminal (pexpect)."""
from __future__ import annotations

import code
import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.cli import render
from tests.test_repl import drive, exchange, spawn_repl

PASTE = "s = 0\nfor i in range(3):\n    s = s + 1\n\n    s = s + 10\ns\n"


def python_repl(lines: list[str]) -> float:
    """s after Python's interactive console reads `lines` one by one."""
    console = code.InteractiveConsole()
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        for line in lines:
            console.push(line)
        console.push("")
    return float(console.locals["s"])


def gradcalc_repl(lines: list[str]) -> float:
    repl = drive("".join(line + "\n" for line in lines))
    return float(repl.session.variables["s"].data)


def test_the_rest_of_a_body_after_a_blank_line_is_refused_not_run(capsys):
    repl = drive(PASTE)
    out = capsys.readouterr()
    assert float(repl.session.variables["s"].data) == 3.0 == python_repl(PASTE.splitlines())
    assert "unexpected indent: no block is open here" in out.err and "value: 3.0" in out.out


def test_through_a_terminal_line_by_line_and_as_a_bracketed_paste(tmp_path):
    pexpect, child = spawn_repl(tmp_path)
    try:
        child.expect(">>>")
        exchange(child, "s = 0")
        child.sendline("for i in range(3):")
        child.sendline("    s = s + 1")
        child.sendline("")
        child.expect(">>>")
        exchange(child, "    s = s + 10", "unexpected indent")
        exchange(child, "s", "value: 3.0")
        # A paste the terminal brackets (ESC [200~ ... ESC [201~) is one input, blank lines and all,
        # as in Python 3.13's REPL: the whole body runs in every iteration.
        child.send("\x1b[200~t = 0\nfor i in range(3):\n    t = t + 1\n\n    t = t + 10\n\x1b[201~")
        child.sendline("")
        child.expect(">>>")
        exchange(child, "t", "value: 33.0")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


STEP = st.sampled_from(["s = s + 1", "s = s * 2", "s = s - 3", "s = s + i"])


@st.composite
def pasted_programs(draw):
    """Top-level statements and loops whose bodies hold blank lines, as a paste gives them."""
    lines = ["s = 1", "i = 0"]
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            lines.append(draw(STEP))
            continue
        lines.append(f"for i in range({draw(st.integers(0, 3))}):")
        for k in range(draw(st.integers(1, 4))):
            if k and draw(st.booleans()):  # (blank lines inside the body; right after the header, Python's console and its REPL differ)
                lines.append("")
            lines.append("    " + draw(STEP))
        lines.append("")
    return lines


@settings(max_examples=40, deadline=None)
@given(pasted_programs())
@pytest.mark.slow
def test_pasted_loops_leave_what_python_s_repl_leaves(lines):
    render.forget_notices()
    with contextlib.redirect_stderr(io.StringIO()):
        assert gradcalc_repl(lines) == pytest.approx(python_repl(lines), rel=1e-15)
