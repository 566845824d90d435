"""Hostile and unlucky inputs to the command line and the REPL, each through the real
command: terminals of odd widths and encodings, streams whose reader went away, files that
are links, loops, folders, pipes or not text, data files at the edges of what a file can
say, nesting and blank lines in bulk, Ctrl-C in the REPL, and `export` of a program that
rebinds a name.

What must hold everywhere: never a traceback or an internal error, a message that says
where, the exit status cli.md gives, valid JSON under --json, no hang (every child has a
timeout), and a REPL that keeps its variables. A case that fails because of a bug is
marked xfail(strict=True) with the bug in its reason; the rest guard what held.
"""
from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import resource
import signal
import socket
import string
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.launch import run
from tests.test_cli import GRADCALC, gradcalc

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def plain_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "COLUMNS": "80", **extra}


def raw_run(argv: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess[str]:
    """gradcalc without the shared helper's assertions, for cases that must fail first."""
    kwargs.setdefault("env", plain_env())
    return run(argv, timeout=timeout, **kwargs)


def on_terminal(*args: str, columns: str) -> tuple[int | None, str]:
    """Run gradcalc on a colour pseudo-terminal of 80 columns with COLUMNS set; its exit
    status and what the terminal showed, without escape codes."""
    pexpect = pytest.importorskip("pexpect")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    env.update({"TERM": "xterm", "COLUMNS": columns})
    child = pexpect.spawn(GRADCALC[0], [*GRADCALC[1:], *args], env=env, encoding="utf-8", timeout=60, dimensions=(24, 80))
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, ANSI.sub("", child.before).replace("\r", "")


def spawn_repl(tmp_path: Path, **extra: str | None):
    """The REPL on a dumb terminal (its prompt is plain `>>> `); a None in `extra` unsets that variable."""
    pexpect = pytest.importorskip("pexpect")
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "XDG_DATA_HOME": str(tmp_path / "data")}
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    child = pexpect.spawn(GRADCALC[0], GRADCALC[1:], env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    child.expect(">>> ")
    return pexpect, child


def said(child, line: str) -> str:
    """Type a line into the REPL and return what it printed before the next prompt."""
    child.sendline(line)
    child.expect(">>> ")
    return ANSI.sub("", child.before).replace("\r", "")


# ---- terminals of odd widths ---------------------------------------------------------------------


@pytest.mark.parametrize("args, shown", [(["eval", "x*y", "x=2", "y=3"], "6.0"), (["eval", "nosuch + 1"], "unknown name 'nosuch'")])
def test_a_colour_terminal_of_80_columns_shows_values_and_errors(args, shown):
    status, text = on_terminal(*args, columns="80")
    assert status == (2 if "nosuch" in args[1] else 0)
    assert shown in text and "Traceback" not in text


@pytest.mark.parametrize("args, shown, status", [(["eval", "x*y", "x=2", "y=3"], "6.0", 0),
                                                 (["eval", "nosuch + 1"], "unknown name 'nosuch'", 2)])
def test_columns_zero_still_shows_the_value_and_the_error(args, shown, status):
    code, text = on_terminal(*args, columns="0")
    assert code == status
    assert shown in text, repr(text)


def test_a_one_column_terminal_still_shows_every_gradient():
    code, text = on_terminal("eval", "x*y", "x=2", "y=3", columns="1")
    assert code == 0
    joined = "".join(text.split())
    assert "6.0" in joined  # (holds today)
    assert "3.0" in joined and "2.0" in joined, repr(text)


def _cells(text: str, column: int) -> str:
    """What a rich table's column holds, its cells read down and joined (a folded cell
    continues on the next lines)."""
    return "".join(line.split("│")[column].strip() for line in text.splitlines() if line.count("│") >= 2)


@pytest.mark.parametrize("seed", range(8))
def test_a_terminal_of_any_width_keeps_every_name_and_number(tmp_path, seed):
    """eval on a colour terminal at a random COLUMNS below the narrowest one drawn for (40),
    with names of random lengths: the same report as at 40 columns (at 0: the terminal's own
    80), in which every name and gradient, Python's numbers, is there whole."""
    rng = random.Random(seed)
    width = rng.choice([0, 1, 2, 3, 5, 8, 13, 21, 30, 39])
    names = [f"v{i}_" + "".join(rng.choices(string.ascii_lowercase, k=rng.randint(0, 40))) for i in range(3)]
    a, b, c = (rng.randint(1, 9) for _ in range(3))
    args = ["eval", f"{names[0]} * {names[1]} + {names[2]}", f"{names[0]}={a}", f"{names[1]}={b}", f"{names[2]}={c}"]
    code, text = on_terminal(*args, columns=str(width))
    assert code == 0, text
    assert (code, text) == on_terminal(*args, columns="80" if width == 0 else "40")
    assert repr(float(a * b + c)) in "".join(text.split())
    assert [n for n in names if n in _cells(text, 0)] == names, text
    assert _cells(text, 2) == "".join(repr(float(g)) for g in (b, a, 1)), text


@pytest.mark.parametrize("columns", ["0", "1", "7", "39"])
@pytest.mark.parametrize("args, shown", [
    (["eval", "nosuch_name_that_is_rather_long + 1"], "unknown name 'nosuch_name_that_is_rather_long'"),
    (["run", "{script}"], "value 6.0"),
    (["check", "{script}"], "PASS"),
    (["ops", "softmax"], "softmax(x, axis=-1): exp(x) / sum(exp(x)) along axis, max-shifted"),
], ids=["error", "run", "check", "ops"])
def test_every_command_shows_its_report_at_any_width(tmp_path, args, shown, columns):
    script = tmp_path / "s.gc"
    script.write_text("x = 2\ncheck x ** 2\nx * 3\n")
    code, text = on_terminal(*(a.format(script=script) for a in args), columns=columns)
    assert code == (2 if args[0] == "eval" else 0), text
    assert "".join(shown.split()) in "".join(text.split()), text


def test_the_repl_with_columns_zero_shows_results(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update({"TERM": "xterm", "COLUMNS": "0", "PROMPT_TOOLKIT_NO_CPR": "1", "XDG_DATA_HOME": str(tmp_path)})
    child = pexpect.spawn(GRADCALC[0], GRADCALC[1:], env=env, encoding="utf-8", timeout=10, dimensions=(24, 80))
    try:
        child.expect(">>>")
        time.sleep(0.3)
        child.sendline("x = 2")
        time.sleep(0.3)
        child.sendline("x * 21")
        assert child.expect(["42", pexpect.TIMEOUT], timeout=5) == 0, repr(child.before)
    finally:
        child.close(force=True)


# ---- encodings of stdout ------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["eval", "a*b", "a=2", "b=3", "--steps", "--mode", "forward"],
    ["plot", "sin(x)", "x=0:1", "--points", "50", "--draw"],
    ["eval", "x", "x=1", "é=3"],
], ids=["forward steps", "plot --draw", "a binding named é"])
def test_an_ascii_stdout_is_never_an_internal_error(args):
    if args[0] == "plot":
        pytest.importorskip("plotext")
    done = raw_run(args, env=plain_env(PYTHONIOENCODING="ascii", LINES="20"))
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode in ((0, 2) if "é=3" in args else (0,))


def test_an_ascii_stdout_gets_the_plain_report():
    # (what held: the report, --tree, --steps, ops and help print in ASCII; a non-ASCII
    # character in an error is escaped on stderr)
    env = plain_env(PYTHONIOENCODING="ascii")
    for args in (["eval", "x*y", "x=1", "y=2", "--tree", "--steps"], ["ops", "softmax"], ["eval", "help(grad)"]):
        done = raw_run(args, env=env)
        assert done.returncode == 0 and "internal error" not in done.stderr, (args, done.stderr)
    done = raw_run(["eval", "x", "x=@zz€.npy"], env=env)
    assert done.returncode == 2 and done.stderr.startswith("error: zz\\u20ac.npy: cannot read"), done.stderr


def _escaped(text: str, encoding: str) -> str:
    """`text` with each character `encoding` cannot hold written as Python escapes it."""
    def one(c: str) -> str:
        try:
            c.encode(encoding)
        except UnicodeEncodeError:
            return c.encode("ascii", "backslashreplace").decode("ascii")
        return c
    return "".join(map(one, text))


NON_ASCII_NAMES = ["é", "ñ", "λ", "α", "中", "Ω"]
NARROW_ENCODINGS = ["ascii", "latin-1", "cp437"]


@pytest.mark.parametrize("seed", range(12))
def test_a_report_in_any_encoding_is_the_utf8_one_with_escapes(tmp_path, seed):
    """Commands whose output holds characters beyond the stdout's encoding (a script or a
    binding named in another alphabet, the tangent's ε, the tree): the same output as on a
    UTF-8 stdout, those characters escaped as Python escapes them; stderr likewise."""
    rng = random.Random(seed)
    encoding = NARROW_ENCODINGS[seed % len(NARROW_ENCODINGS)]
    name = rng.choice(NON_ASCII_NAMES)
    expr = rng.choice(["a*b", "sin(a) + b", "a**2 * b", "exp(a - b)", "nosuch * a"])
    extras = rng.sample([[f"{name}={rng.randint(1, 9)}"], ["--steps", "--mode", "forward"], ["--tree"], ["--steps"]],
                        k=rng.randint(1, 3))
    if rng.random() < 0.5:
        (tmp_path / f"{name}.gc").write_text(f"a = {rng.randint(1, 5)}\nb = {rng.randint(1, 5)}\n{expr}\n")
        argv = ["run", f"{name}.gc", *(e for extra in extras if extra[0] in ("--tree",) for e in extra)]
    else:
        argv = ["eval", expr, f"a={rng.randint(1, 5)}", f"b={rng.randint(1, 5)}", *(e for extra in extras for e in extra)]
    wide = raw_run(argv, cwd=tmp_path, env=plain_env(PYTHONIOENCODING="utf-8"))
    narrow = raw_run(argv, cwd=tmp_path, env=plain_env(PYTHONIOENCODING=encoding), encoding=encoding)
    assert "internal error" not in narrow.stderr and "Traceback" not in narrow.stderr, narrow.stderr
    assert narrow.returncode == wide.returncode, (narrow.returncode, wide.returncode)
    assert narrow.stdout == _escaped(wide.stdout, encoding)
    assert narrow.stderr == _escaped(wide.stderr, encoding)


def test_a_file_name_that_is_not_utf8_is_printed_as_its_bytes(tmp_path):
    # (Python decodes such a name's bytes as U+DC80..U+DCFF; a UTF-8 stdout strict about
    # them (PYTHONIOENCODING=utf-8) ended the report in a UnicodeEncodeError)
    script = os.fsencode(tmp_path) + b"/\xe9t\xe9.gc"
    with open(script, "wb") as stream:
        stream.write(b"x = 2\nx * 3\n")
    for encoding in ("utf-8", "ascii"):
        done = subprocess.run([*GRADCALC, "run", script], capture_output=True, timeout=60, env=plain_env(PYTHONIOENCODING=encoding))
        assert done.returncode == 0 and done.stderr == b"", done.stderr
        assert done.stdout.startswith(b"== " + script + b":2  x * 3\nvalue: 6.0\n"), done.stdout


@pytest.mark.parametrize("encoding", NARROW_ENCODINGS)
@pytest.mark.parametrize("args", [["sin(x)", "x=0:6", "--order", "0,1"], ["abs(x) - x**2", "x=-1:1"], ["x**2 - y**2", "x=-2:2", "y=-1:1"]],
                         ids=["sin", "kink", "surface"])
def test_a_plot_in_a_narrow_encoding_is_drawn_in_ascii_in_the_same_places(encoding, args):
    """The terminal plot on a stdout that cannot hold braille, box lines or arrows: the same
    picture cell for cell (a mark where UTF-8 has one, a blank where it has none), in ASCII."""
    pytest.importorskip("plotext")
    argv = ["plot", *args, "--points", "60", "--draw"]
    wide = raw_run(argv, env=plain_env(PYTHONIOENCODING="utf-8", COLUMNS="70", LINES="30"))
    narrow = raw_run(argv, env=plain_env(PYTHONIOENCODING=encoding, COLUMNS="70", LINES="30"), encoding=encoding)
    assert narrow.returncode == wide.returncode == 0 and narrow.stderr == "", narrow.stderr
    assert narrow.stdout.isascii(), {c for c in narrow.stdout if not c.isascii()}
    blank = " \u2800"
    wide_lines, narrow_lines = wide.stdout.splitlines(), narrow.stdout.splitlines()
    assert [len(line) for line in narrow_lines] == [len(line) for line in wide_lines]
    for w, n in zip(wide_lines, narrow_lines):
        assert [c in blank for c in w] == [c == " " for c in n], (w, n)
        assert all(a == b for a, b in zip(w, n) if a.isascii()), (w, n)


# ---- a reader that went away --------------------------------------------------------------------


def _into_closed_pipe(argv: list[str], stderr_too: bool = False, stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run with stdout (and stderr) a pipe whose reader closed before gradcalc started:
    the first write fails, whatever the timing."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([*GRADCALC, *argv], stdout=write_end, stderr=write_end if stderr_too else subprocess.PIPE,
                              input=stdin.encode() if stdin is not None else None, env=plain_env(), timeout=60)
    finally:
        os.close(write_end)


CLOSED_STDOUT = {
    "eval": ["eval", "x*2", "x=3"],
    "eval --json": ["eval", "--json", "x*2", "x=3"],
    "eval --steps": ["eval", "x*2", "x=3", "--steps"],
    "eval --dot -": ["eval", "x*2", "x=3", "--dot", "-"],
    "ops": ["ops"],
    "--help": ["--help"],
    "--version": ["--version"],
    "check": ["check", "{checks}"],
    "export": ["export", "{checks}", "--to", "jax"],
    "plot --json": ["plot", "sin(x)", "x=0:1", "--points", "5", "--json"],
}


@pytest.mark.parametrize("name", list(CLOSED_STDOUT))
def test_every_command_into_a_closed_pipe_exits_141_quietly(tmp_path, name):
    if name == "export":
        pytest.importorskip("jax")  # (export --to jax copies adapters that import JAX; without it, an error says so)
    checks = tmp_path / "c.gc"
    checks.write_text("x = 2\ncheck x ** 2\n")
    done = _into_closed_pipe([a.format(checks=checks) for a in CLOSED_STDOUT[name]])
    assert done.returncode == 141, (done.returncode, done.stderr)
    assert done.stderr == b"", done.stderr


@pytest.mark.parametrize("argv", [["eval", "nosuch"], ["run", "/nonexistent/a.gc"], ["eval", "(1"]],
                         ids=["name error", "missing file", "syntax error"])
def test_an_error_into_a_closed_pipe_is_not_status_1(argv):
    done = _into_closed_pipe(argv, stderr_too=True)
    assert done.returncode in (2, 141), done.returncode


STDERR_WRITERS = {  # commands that write to stderr: errors of each kind, a report sent there, a failing check
    "name error": (["eval", "nosuch"], None),
    "syntax error": (["eval", "(1"], None),
    "missing file": (["run", "/nonexistent/a.gc"], None),
    "unknown option (typer)": (["eval", "--bogus", "x"], None),
    "bad range": (["plot", "sin(x)", "x=3:1"], None),
    "error in stdin": (["run", "-"], "x = 2\nx * nosuch\n"),
    "report on stderr": (["eval", "x*2", "x=3", "--dot", "-"], None),
    "failing check": (["eval", "check x**2 == 2*x + 1", "x=3"], None),  # (status 1, and nothing on stderr)
    "json error": (["eval", "--json", "nosuch"], None),
}


def _closed_pipe_end() -> int:
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end


@pytest.mark.parametrize("sink", ["closed pipe", "full disk"])
@pytest.mark.parametrize("name", list(STDERR_WRITERS))
def test_a_stderr_that_cannot_be_written_keeps_the_command_s_status(name, sink):
    """Whatever a command writes to a stderr whose reader went away or whose disk is full is
    dropped, and the command exits as it does with a working stderr (stdout is left as is)."""
    argv, stdin = STDERR_WRITERS[name]
    given = stdin.encode() if stdin is not None else None
    usual = subprocess.run([*GRADCALC, *argv], input=given, capture_output=True, env=plain_env(), timeout=60)
    target = _closed_pipe_end() if sink == "closed pipe" else os.open("/dev/full", os.O_WRONLY)
    try:
        done = subprocess.run([*GRADCALC, *argv], input=given, stdout=subprocess.PIPE, stderr=target, env=plain_env(), timeout=60)
    finally:
        os.close(target)
    assert (usual.stderr != b"" or name == "failing check") and usual.returncode in (0, 1, 2)
    assert done.returncode == usual.returncode, (done.returncode, usual.returncode)
    assert done.stdout == usual.stdout


# ---- JSON stays JSON --------------------------------------------------------------------------


JSON_EDGES = [
    ("nan", 0), ("-inf", 0), ("10**400", 0), ("zeros(0)", 0), ("zeros(3, 0)", 0), ("[[]]", 0), ("mean(zeros(0))", 0),
    ("(nan, inf)", 0), ("value_and_grad(log)(0.0)", 0), ("jacobian(log(v), v)", 0), ("hessian(sum(log(v)), v)", 0),
    ("help(sin)", 0), ("sin", 0), ("lambda t: t", 0), ("v > 0", 0), ("len(v)", 0), ("-0.0", 0), ("5e-324", 0),
    ("max(zeros(0))", 2), ("None", 2), ("'abc'", 2), ("", 2), ("x = 3", 2), ("(1 +", 2),
]


@pytest.mark.parametrize("expression, status", JSON_EDGES, ids=[repr(e) for e, _ in JSON_EDGES])
def test_eval_json_is_one_valid_document_at_every_edge(expression, status):
    done = gradcalc("eval", "--json", expression, "v=[0, -1]")
    assert done.returncode == status, done.stderr
    document = json.loads(done.stdout)
    assert ("error" in document) == (status == 2), document
    assert "internal error" not in done.stderr


def test_eval_json_without_an_expression_is_an_error_document():
    done = raw_run(["eval", "--json"])
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["kind"] == "usage"


@pytest.mark.parametrize("content", [None, b"\xff\xfex\x00=\x001\x00"], ids=["missing", "not UTF-8"])
def test_run_json_of_a_file_it_cannot_read_is_an_error_object(tmp_path, content):
    script = tmp_path / "s.gc"
    if content is not None:
        script.write_bytes(content)
    done = raw_run(["run", "--json", str(script)])
    assert done.returncode == 2
    [line] = done.stdout.splitlines()
    assert "error" in json.loads(line)


JSON_ERRORS = {  # command, its words (--json goes in among them), stdin: every way each command with --json can fail
    "eval, no EXPR": ("eval", [], None),
    "eval, an unknown option": ("eval", ["x", "--bogus"], None),
    "eval, an option without its value": ("eval", ["x", "x=1", "--digits"], None),
    "eval, a value out of range": ("eval", ["x", "x=1", "--digits", "99"], None),
    "eval, a global option it does not take": ("--max-seconds 5 --engine scalar eval", ["x", "x=1", "--mode", "forward"], None),
    "eval, stdin closed": ("eval", ["-"], "closed"),
    "run, no FILE": ("run", [], None),
    "run, a missing file": ("run", ["missing.gc"], None),
    "run, not UTF-8": ("run", ["utf16.gc"], None),
    "run, a folder": ("run", ["folder"], None),
    "run, too large": ("run", ["ok.gc", "--max-input-bytes", "3"], None),
    "run, bindings alone": ("run", ["x=1"], None),
    "run, a bad binding": ("run", ["ok.gc", "x=(1"], None),
    "run, stdin closed": ("run", ["-"], "closed"),
    "run, an unknown option": ("run", ["ok.gc", "--bogus"], None),
    "check, no FILE": ("check", [], None),
    "check, a missing file": ("check", ["missing.gc"], None),
    "check, not UTF-8": ("check", ["utf16.gc"], None),
    "check, a folder without scripts": ("check", ["folder"], None),
    "check, a pipe in a folder": ("check", ["piped"], None),
    "check, bindings alone": ("check", ["x=1"], None),
    "check, a bad binding": ("check", ["ok.gc", "x=(1"], None),
    "check, --junit-xml over its input": ("check", ["ok.gc", "--junit-xml", "ok.gc"], None),
    "check, a global option it does not take": ("--digits 4 check", ["ok.gc"], None),
    "check, a bad --method": ("check", ["ok.gc", "--method", "nope"], None),
    "plot, no EXPR": ("plot", [], None),
    "plot, no range": ("plot", ["sin(x)"], None),
    "plot, --csv too": ("plot", ["sin(x)", "x=0:1", "--csv"], None),
    "plot, an extra argument": ("plot", ["sin(x)", "x=0:1", "y=0:1", "z=0:1"], None),
}


@pytest.mark.parametrize("name", list(JSON_ERRORS))
def test_every_error_under_json_is_one_error_document(tmp_path, name):
    """Each command's errors with --json (put at a random place among its words): exit 2, and
    stdout holds one line, the error document, whose message stderr says too."""
    (tmp_path / "ok.gc").write_text("x = 2\ncheck x ** 2\n")
    (tmp_path / "utf16.gc").write_bytes(b"\xff\xfex\x00=\x001\x00")
    (tmp_path / "folder").mkdir()
    (tmp_path / "piped").mkdir()
    os.mkfifo(tmp_path / "piped" / "p.gc")
    command, words, stdin = JSON_ERRORS[name]
    words = list(words)
    words.insert(random.Random(name).randint(0, len(words)), "--json")
    kwargs = {"stdin": subprocess.DEVNULL} if stdin is None else {"preexec_fn": lambda: os.close(0)}
    done = raw_run([*command.split(), *words], cwd=tmp_path, timeout=30, **kwargs)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    [line] = done.stdout.splitlines()
    error = json.loads(line)["error"]
    assert set(error) >= {"kind", "message", "line", "column"}, error
    assert done.stderr.startswith(f"error: {error['message']}"), (error, done.stderr)


def test_run_json_interrupted_leaves_whole_lines(tmp_path):
    (tmp_path / "slow.gc").write_text("x = 2\nx*3\ndef f(n) = f(n-1) + f(n-1) if n > 0 else 1\nf(60)\nx*5\n")
    process = subprocess.Popen([*GRADCALC, "run", "--json", "slow.gc", "--max-seconds", "100", "--max-steps", "10000000000"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=plain_env(),
                               start_new_session=True)
    time.sleep(1.5)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130 and err == "interrupted\n", err
    assert [json.loads(line)["value"] for line in out.splitlines()] == [6.0]


# ---- scripts that are not plain files or not plain text -----------------------------------------


def _script_cases(folder: Path) -> dict[str, tuple[Path, str]]:
    """name -> (script path, a part of the error it must give)."""
    (folder / "loop_a.gc").symlink_to("loop_b.gc")
    (folder / "loop_b.gc").symlink_to("loop_a.gc")
    (folder / "dangling.gc").symlink_to("nowhere.gc")
    (folder / "folder.gc").mkdir()
    files = {
        "nul.gc": (b"x = 2\x00\nx*3\n", "unexpected character '\\x00'  [{}:1:6]"),
        "cr.gc": (b"x = 2\ry = 3\rx*y\r", "unexpected character '\\r'  [{}:1:6]"),
        "tabs.gc": (b"s = 0\nfor i in range(3):\n    s = s + 1\n\ts = s + 10\ns\n", "[{}:4:2]"),
        "bom2.gc": (b"\xef\xbb\xbf\xef\xbb\xbfx = 1\n", "unexpected character '\\ufeff'  [{}:1:1]"),
        "utf16.gc": (b"\xff\xfex\x00=\x001\x00", "is not UTF-8: byte 0xff at offset 0 (line 1, column 1)"),
        "cut.gc": (b"x = 2\nx*3 # \xf0\x9f\x98\n", "is not UTF-8: byte 0xf0 at offset 12 (line 2, column 7)"),
    }
    cases = {"symlink loop": (folder / "loop_a.gc", "Too many levels of symbolic links"),
             "dangling link": (folder / "dangling.gc", "No such file or directory"),
             "folder": (folder / "folder.gc", "Is a directory")}
    for name, (data, message) in files.items():
        (folder / name).write_bytes(data)
        cases[name] = (folder / name, message.format(folder / name))
    return cases


def test_odd_script_files_are_one_error_at_their_place(tmp_path):
    cases = _script_cases(tmp_path)
    for name, (script, message) in cases.items():
        done = gradcalc("run", str(script))
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert done.stderr.startswith("error: ") and message in done.stderr, (name, done.stderr)
        assert done.stdout == "" and "internal error" not in done.stderr


def test_a_symlink_to_a_script_runs_it(tmp_path):
    (tmp_path / "real.gc").write_text("x = 2\nx * 3\n")
    (tmp_path / "link.gc").symlink_to("real.gc")
    done = gradcalc("run", "link.gc", cwd=tmp_path)
    assert done.returncode == 0 and "== link.gc:2  x * 3\nvalue: 6.0\n" in done.stdout


def test_check_of_a_folder_holding_a_named_pipe_does_not_hang(tmp_path):
    (tmp_path / "a.gc").write_text("x = 2\ncheck x ** 2\n")
    os.mkfifo(tmp_path / "b.gc")
    try:
        done = raw_run(["check", str(tmp_path)], timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("gradcalc check hung on the named pipe b.gc in the folder")
    assert done.returncode in (1, 2) and "b.gc" in done.stdout + done.stderr


def _special(path: Path, kind: str) -> None:
    """Make a file of `kind` at `path`: a named pipe, a socket, or a link to one or to a device."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":  # (bound by a relative name: a socket's path is limited to about 100 bytes)
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(os.path.relpath(path))
    elif kind == "link to a fifo":
        os.mkfifo(path.with_name(path.name + ".pipe"))
        path.symlink_to(path.name + ".pipe")
    else:  # a link to a character device
        path.symlink_to("/dev/null")


SPECIAL = ["fifo", "socket", "link to a fifo", "link to a device"]


@pytest.mark.parametrize("seed", range(10))
def test_check_of_a_folder_reads_only_its_files(tmp_path, monkeypatch, seed):
    """Random folders of scripts, links to scripts, subfolders (some named like a script,
    some empty), links to folders and things that are not files, at random depths: gradcalc
    check FOLDER runs the checks of every file it reaches without following a link to a
    folder, or, when the walk meets a pipe, a socket or a device, refuses it by name before
    reading anything; never a hang."""
    monkeypatch.chdir(tmp_path)
    rng = random.Random(seed)
    folders = [Path("d")]
    scripts, specials = [], []
    kinds = [rng.choice(["file", "file", "link to a file", "subfolder", "link to a folder"]) for _ in range(rng.randint(0, 10))]
    if seed % 2:  # half the folders hold one or two things that are not files, anywhere in the walk
        kinds += rng.choices(SPECIAL, k=rng.randint(1, 2))
        rng.shuffle(kinds)
    for i, kind in enumerate(kinds):
        where = rng.choice(folders) / f"s{i}.gc"
        where.parent.mkdir(parents=True, exist_ok=True)
        if kind == "subfolder":  # named like a script or not, and walked into either way
            folders.append(rng.choice(folders) / rng.choice([f"sub{i}", f"sub{i}.gc"]))
            folders[-1].mkdir(parents=True)  # (an empty one too)
        elif kind == "link to a folder":  # (named like a script; the walk does not follow it)
            target = Path("elsewhere") / f"f{i}"
            target.mkdir(parents=True)
            (target / "inside.gc").write_text("z = 1\ncheck z ** 3\n")
            where.symlink_to(os.path.relpath(target, where.parent), target_is_directory=True)
        elif kind == "file":
            where.write_text(f"x = {i + 1}\ncheck x ** 2\n")
            scripts.append(where)
        elif kind == "link to a file":
            target = Path("outside") / f"t{i}.gc"  # (outside the folder: it is checked once, through the link)
            target.parent.mkdir(exist_ok=True)
            target.write_text(f"y = {i + 1}\ncheck sin(y)\n")
            where.symlink_to(os.path.relpath(target, where.parent))
            scripts.append(where)
        else:
            _special(where, kind)
            specials.append(where)
    Path("d").mkdir(exist_ok=True)
    try:
        done = raw_run(["check", "d"], timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gradcalc check hung on one of {specials}")
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    if specials:
        assert done.returncode == 2 and done.stdout == "", done.stderr
        [line] = done.stderr.splitlines()
        named = line.removeprefix("error: ").partition(": is not a regular file (a device, a pipe or a socket)")[0]
        assert Path(named) in specials, line
    elif scripts:
        assert done.returncode == 0, done.stderr
        assert done.stdout.endswith(f"{len(scripts)} passed, 0 failed, 0 errors\n"), done.stdout
        assert {line.split()[1].rpartition(":")[0] for line in done.stdout.splitlines()[:-1]} == {str(s) for s in scripts}
    else:
        assert done.returncode == 2 and done.stderr == "error: d is a folder with no .gc files in it\n", done.stderr


def test_check_of_a_folder_with_a_subfolder_named_like_a_script(tmp_path):
    (tmp_path / "a.gc").write_text("x = 2\ncheck x ** 2\n")
    (tmp_path / "c.gc").mkdir()
    done = raw_run(["check", str(tmp_path)])
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr


# ---- bulk: nesting, long lines, blank lines -----------------------------------------------------


def test_a_hundred_thousand_nested_brackets_run_and_unclosed_ones_are_placed(tmp_path):
    (tmp_path / "deep.gc").write_text("x = 2\n" + "(" * 100_000 + "x" + ")" * 100_000 + " * 3\n")
    done = gradcalc("run", "deep.gc", cwd=tmp_path)
    assert done.returncode == 0 and "value: 6.0" in done.stdout
    (tmp_path / "open.gc").write_text("x = 2\n" + "(" * 100_000 + "x\n")
    done = gradcalc("run", "open.gc", cwd=tmp_path)
    assert done.returncode == 2 and "unfinished input: expected ')' or ','  [open.gc:2:100002]" in done.stderr
    assert len(done.stderr.splitlines()[1]) < 200  # the line shown is cut, not 100,000 brackets


@pytest.mark.slow
def test_an_error_at_the_end_of_a_400000_character_line_is_placed_and_cut(tmp_path):
    (tmp_path / "long.gc").write_text("x = 1\ny = " + "+".join(["x"] * 200_000) + " + nosuch\n")
    done = gradcalc("run", "long.gc", cwd=tmp_path)
    assert done.returncode == 2 and "unknown name 'nosuch'  [long.gc:2:400007]" in done.stderr
    assert max(map(len, done.stderr.splitlines())) < 200


def _address_space(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def test_a_million_blank_lines_run_in_little_memory(tmp_path):
    env = plain_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    (tmp_path / "one.gc").write_text("x = 2\nx * 3\n")
    (tmp_path / "blank.gc").write_text("x = 2\n" + "\n" * 1_000_000 + "x * 3\n")
    limit = _address_space(1_000_000_000)
    small = raw_run(["run", "one.gc"], cwd=tmp_path, env=env, preexec_fn=limit)
    assert small.returncode == 0 and "value: 6.0" in small.stdout, small.stderr  # the limit leaves room for gradcalc
    done = raw_run(["run", "blank.gc"], cwd=tmp_path, env=env, preexec_fn=limit)
    assert "Traceback" not in done.stderr
    assert done.returncode == 0 and "value: 6.0" in done.stdout, done.stderr


# ---- data files at their edges ------------------------------------------------------------------


def _header_only_npy(path: Path, header: str) -> None:
    """An .npy file of a hand-written header (and eight bytes of data)."""
    text = header + " " * (64 - (len(header) + 11) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1") + bytes(8))


def test_data_files_at_their_edges(tmp_path):
    np.save(tmp_path / "zero_d.npy", np.array(3.5))
    np.save(tmp_path / "empty.npy", np.zeros(0))
    np.save(tmp_path / "nonfinite.npy", np.array([np.nan, np.inf, -np.inf]))
    np.save(tmp_path / "when.npy", np.array(["2020-01-01"], dtype="datetime64[D]"))
    marker = tmp_path / "executed"
    _header_only_npy(tmp_path / "code.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': "
                     f"(__import__('pathlib').Path('{marker}').touch(),), }}")
    _header_only_npy(tmp_path / "wide.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (10000000000, 0), }")
    _header_only_npy(tmp_path / "negative.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }")
    (tmp_path / "nonfinite.json").write_text("[NaN, Infinity, -Infinity]")
    fine = {"zero_d.npy": (3.5, []), "empty.npy": ([], [0]), "nonfinite.npy": (["nan", "inf", "-inf"], [3]),
            "nonfinite.json": (["nan", "inf", "-inf"], [3])}
    for name, (value, shape) in fine.items():
        done = gradcalc("eval", "--json", "v", f"v=@{name}", cwd=tmp_path)
        document = json.loads(done.stdout)
        assert done.returncode == 0 and (document["value"], document["shape"]) == (value, shape), (name, document)
    refused = {"when.npy": "holds datetime64[D] data", "code.npy": "not a valid .npy file",
               "wide.npy": "an empty dimension counts as 1", "negative.npy": "negative dimension"}
    for name, message in refused.items():
        done = gradcalc("eval", "--json", "v", f"v=@{name}", cwd=tmp_path)
        assert done.returncode == 2 and message in json.loads(done.stdout)["error"]["message"], (name, done.stdout)
    assert not marker.exists()  # the header's code never ran


def test_a_bound_name_is_one_the_program_can_use():
    bound = gradcalc("eval", "x", "x=1", "é=3")
    used = gradcalc("eval", "é * 2", "é=3")
    assert bound.returncode == 2 or (used.returncode == 0 and "value: 6.0" in used.stdout), (bound.stdout, used.stderr)


# ---- the REPL: Ctrl-C, and history it cannot keep ----------------------------------------------


@pytest.mark.slow
def test_ctrl_c_in_a_loop_and_in_load_keeps_the_repl_all_or_nothing(tmp_path):
    script = tmp_path / "slow.gc"
    script.write_text("a = 1\ndef f(n) = f(n-1) + f(n-1) if n > 0 else 1\nf(60)\nb = 2\n")
    pexpect, child = spawn_repl(tmp_path)
    try:
        said(child, "s = 0; x = 5")
        for line in ("for i in range(10**9): s = s + 1", f":load {script}"):
            child.sendline(line)
            time.sleep(2.0)
            child.sendintr()
            child.expect(">>> ")
            shown = ANSI.sub("", child.before)
            assert "interrupted" in shown and "Traceback" not in shown, shown
        assert "value: 0.0" in said(child, "s")  # the loop is one statement: all or nothing
        assert "unknown name 'i'" in said(child, "i")
        assert "value: 1.0" in said(child, "a")  # :load: the statements before the interrupted one stay
        assert "unknown name 'b'" in said(child, "b")
        assert "value: 5.0" in said(child, "x")
        child.sendline(":quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


@pytest.mark.parametrize("place", ["fifo", "home in /proc"])
def test_history_that_cannot_be_kept_is_said_once_and_the_repl_works(tmp_path, place):
    if place == "fifo":
        (tmp_path / "data" / "gradcalc").mkdir(parents=True)
        os.mkfifo(tmp_path / "data" / "gradcalc" / "history")
        pexpect, child = spawn_repl(tmp_path)
    else:  # (root ignores file modes; nothing can be made under /proc)
        pexpect, child = spawn_repl(tmp_path, HOME="/proc", XDG_DATA_HOME=None)
    try:
        assert "cannot use the history file" in ANSI.sub("", child.before)
        said(child, "x = 2")
        assert "value: 42.0" in said(child, "x * 21")
        child.sendline(":quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


# ---- export -------------------------------------------------------------------------------------


def _python_value(program: str) -> float:
    """The program's last result as Python computes it (a check's expression likewise)."""
    *setup, last = program.splitlines()
    namespace: dict[str, object] = {}
    exec("\n".join(setup) + f"\n_result = {last.removeprefix('check ')}", namespace)
    return float(namespace["_result"])  # type: ignore[arg-type]


REBINDING = ["x = 1\nx = x + 1\nx", "x = 2\nx = x * 3\ncheck x ** 2", "w = 2\nfor i in range(3): w = w * 2\nw"]


@pytest.mark.parametrize("program", REBINDING, ids=["rebound", "check after rebinding", "loop"])
def test_export_of_a_rebound_variable_gives_python_s_value(tmp_path, program):
    pytest.importorskip("torch")
    (tmp_path / "p.gc").write_text(program + "\n")
    out = tmp_path / "exported.py"
    done = gradcalc("export", str(tmp_path / "p.gc"), "--to", "torch", "-o", str(out))
    assert done.returncode == 0, done.stderr
    spec = importlib.util.spec_from_file_location(out.stem, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    name = module.RESULTS[-1]
    theirs = float(getattr(module, name)(**module.inputs(name)))
    assert theirs == _python_value(program), (theirs, _python_value(program))


def test_the_oracle_reads_the_programs_as_python():
    assert [_python_value(p) for p in REBINDING] == [2.0, 36.0, 16.0]
