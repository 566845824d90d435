"""gradcalc against broken files and streams, run for real: encodings, size limits, reports
that must not be lost or written over, closed and full outputs, pipes, Ctrl-C. Every child
runs under a memory limit so that a regression fails instead of taking the machine down."""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .test_cli import GRADCALC, gradcalc

MEMORY_LIMIT = 2 * 1024**3


def limited(file_size: int | None = None):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    return apply


def run_raw(*args, stdin=None, stdout=subprocess.PIPE, file_size=None, **kwargs):
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80"}
    done = subprocess.run([*GRADCALC, *args], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env,
                          preexec_fn=limited(file_size), timeout=60, **kwargs)
    assert b"Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_file_that_is_not_utf8_names_the_byte(tmp_path, command):
    script = tmp_path / "latin1.gc"
    script.write_bytes(b"x = 1\nx = 2 # caf\xe9\n")
    done = gradcalc(command, str(script))
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {script} is not UTF-8: byte 0xe9 at offset 17 (line 2, column 12)"


def test_a_byte_order_mark_is_accepted(tmp_path):
    script = tmp_path / "bom.gc"
    script.write_bytes(b"\xef\xbb\xbfx = 2\nx * 3\n")
    done = gradcalc("run", str(script))
    assert done.returncode == 0 and "value: 6.0" in done.stdout


def test_input_stops_at_the_size_limit():
    done = run_raw("run", "/dev/zero")  # would read forever without a limit
    assert done.returncode == 2
    assert b"larger than 50,000,000 bytes" in done.stderr and b"--max-input-bytes" in done.stderr
    done = run_raw("run", "-", "--max-input-bytes", "10", input=b"x = 1\ny = 2\nx + y\n")
    assert done.returncode == 2 and b"<stdin> is larger than 10 bytes" in done.stderr


def test_junit_xml_refuses_to_overwrite_an_input(tmp_path):
    check = tmp_path / "a.gc"
    check.write_text("x = 0.5\ncheck tanh(x)\n")
    done = gradcalc("check", str(check), "--junit-xml", str(check))
    assert done.returncode == 2 and "would overwrite the input file" in done.stderr
    assert check.read_text() == "x = 0.5\ncheck tanh(x)\n"


def test_dot_replaces_a_symlink_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "g.dot"
    link.symlink_to(victim)
    done = gradcalc("eval", "x*x", "x=3", "--dot", str(link))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me"
    assert not link.is_symlink() and link.read_text().startswith("digraph")


def test_a_failed_report_write_keeps_the_old_report_and_prints_results(tmp_path):
    check = tmp_path / "a.gc"
    check.write_text("x = 0.5\n" + "".join(f"check tanh(x) * {k}\n" for k in range(30)))
    report = tmp_path / "report.xml"
    report.write_text("<old/>")
    done = run_raw("check", str(check), "--junit-xml", str(report), file_size=1000)  # the report is larger
    assert done.returncode == 2
    assert b"30 passed" in done.stdout
    assert b"cannot write" in done.stderr and b"File too large" in done.stderr
    assert report.read_text() == "<old/>"
    assert [p.name for p in tmp_path.iterdir()] == sorted(["a.gc", "report.xml"]) or len(list(tmp_path.iterdir())) == 2


def test_a_report_on_a_full_disk_is_an_error_and_results_still_print(tmp_path):
    check = tmp_path / "a.gc"
    check.write_text("x = 0.5\ncheck tanh(x)\n")
    done = gradcalc("check", str(check), "--junit-xml", "/dev/full")
    assert done.returncode == 2
    assert "1 passed" in done.stdout and "No space left on device" in done.stderr


def test_junit_xml_is_well_formed_for_control_characters(tmp_path):
    from gradcalc.cli.check_command import junit_xml
    from gradcalc.parser.check_statements import CheckOutcome

    outcome = CheckOutcome(text="x\x01 + \x1b[31m", line=1, status="error", message="bad \x00 byte")
    outcome.file = "a\x02.gc"
    root = ET.fromstring(junit_xml([("a\x02.gc", [outcome])]))
    assert root.find(".//testcase").get("name") == "line 1: x\\x01 + \\x1b[31m"


def test_closed_stdout_and_stdin_are_one_line_errors():
    done = run_raw("eval", "1 + 1", stdout=subprocess.DEVNULL, pass_fds=())
    assert done.returncode == 0
    closed_stdout = subprocess.run([*GRADCALC, "eval", "1 + 1"], stdout=None, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"},
                                   preexec_fn=lambda: os.close(1), timeout=60)
    assert closed_stdout.returncode == 2 and closed_stdout.stderr.decode().count("\n") == 1
    assert b"stdout is closed" in closed_stdout.stderr
    closed_stdin = subprocess.run([*GRADCALC, "run", "-"], capture_output=True, env={**os.environ, "NO_COLOR": "1"},
                                  preexec_fn=lambda: os.close(0), timeout=60)
    assert closed_stdin.returncode == 2 and closed_stdin.stderr.decode().count("\n") == 1
    assert b"stdin" in closed_stdin.stderr and b"closed" in closed_stdin.stderr


def test_stdout_on_a_full_device_is_a_one_line_error():
    with open("/dev/full", "w") as full:
        done = run_raw("eval", "arange(100)", stdout=full)
    assert done.returncode == 2
    assert done.stderr.decode().strip() == "error: cannot write to stdout: No space left on device"


def test_a_broken_pipe_exits_quietly_and_not_with_status_1(tmp_path):
    script = tmp_path / "big.gc"
    script.write_text("".join(f"{k} * 2\n" for k in range(3000)))
    reader = subprocess.Popen([*GRADCALC, "run", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limited())
    first = reader.stdout.readline()
    reader.stdout.close()  # as `| head -1` does
    status = reader.wait(timeout=60)
    assert first.startswith(b"== ")
    assert status not in (0, 1) and reader.stderr.read() == b""


def test_ctrl_c_in_a_one_shot_command_prints_interrupted_and_exits_130():
    child = subprocess.Popen([*GRADCALC, "eval", "def f(n) = f(n-1)+f(n-1) if n>0 else 1; f(25)"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limited())
    time.sleep(2.0)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130
    assert err.decode().strip() == "interrupted"


def test_eval_reads_the_expression_from_stdin():
    done = gradcalc("eval", "-", "x=3", stdin="x ** 2\n")
    assert done.returncode == 0 and "value: 9.0" in done.stdout and "grad x: 6.0" in done.stdout


def test_a_binding_error_shows_the_binding_under_the_caret():
    done = gradcalc("eval", "x + y", "x=1", "y=(2")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert "in the value of y" in lines[0]
    assert lines[1] == "1 | y=(2"
    assert lines[2].index("^") == len("1 | y=(2")


def test_a_name_bound_twice_is_an_error():
    done = gradcalc("eval", "x", "x=1", "x=2")
    assert done.returncode == 2 and "x is given twice" in done.stderr


def test_run_json_names_the_file_of_each_result(tmp_path):
    first, second = tmp_path / "a.gc", tmp_path / "b.gc"
    first.write_text("1 + 1\n")
    second.write_text("2 * 3\n")
    objects = [json.loads(line) for line in gradcalc("run", str(first), str(second), "--json").stdout.splitlines()]
    assert [(o["file"], o["line"], o["value"]) for o in objects] == [(str(first), 1, 2.0), (str(second), 1, 6.0)]


@pytest.mark.parametrize("expr, note", [
    ("log(0)", "the first inf came from log(0.0)"),
    ("sqrt(-1)", "the first nan came from sqrt(-1.0)"),
    ("exp(1000)", "the first inf came from exp(1000.0)"),
    ("0/0", "the first nan came from div(0.0, 0.0)"),
    ("log(v)", "the first nan came from log at element [1]: log(-1.0)"),
    ("sqrt(x)", "an inf gradient came from the backward pass of sqrt(0.0)"),
])
def test_the_nonfinite_note_names_the_op_and_its_input(expr, note):
    out = gradcalc("eval", expr, "x=0", "v=[1, -1]").stdout
    assert f"note: {note}" in out
    assert "const" not in out.split("graph:")[1].split("\n", 1)[1]


def test_the_note_on_a_matrix_op_shows_the_matrix_not_one_of_its_elements():
    # It said `det at element [0, 0]: det(0.0)`, as if det took x[0, 0] alone.
    out = gradcalc("eval", "det(m)", "m=[[0, 1], [nan, 2]]").stdout
    assert "note: a nan gradient came from the backward pass of det at element [0, 0]: det(<2x2 tensor>)" in out
    out = gradcalc("eval", "sum(m @ m)", "m=[[0, 1], [inf, 2]]").stdout
    assert "note: an inf gradient came from the backward pass of matmul at element [0, 0]: matmul(<2x2 tensor>, <2x2 tensor>)" in out


@pytest.mark.parametrize("report", [[], ["--json"], ["--steps"], ["--steps", "--json"], ["--tree"]])
def test_dot_to_stdout_is_the_dot_text_alone(report):
    # stdout goes whole into `dot -Tsvg`; the report (or the JSON document) is on stderr
    done = gradcalc("eval", "x*y", "x=1", "y=2", "--dot", "-", *report)
    assert done.returncode == 0
    assert done.stdout.startswith("digraph gradcalc {") and done.stdout.rstrip().endswith("}")
    assert done.stdout.count("digraph") == 1 and "value" not in done.stdout
    if "--json" in report:
        assert json.loads(done.stderr)["value"] == 2.0
    else:
        assert done.stderr.startswith("value: 2.0\ngrad x: 2.0\ngrad y: 1.0\n")
    if shutil.which("dot"):
        drawn = subprocess.run(["dot", "-Tsvg"], input=done.stdout, capture_output=True, text=True, check=False)
        assert drawn.returncode == 0 and "<svg" in drawn.stdout, drawn.stderr


def test_dot_unknown_extensions(tmp_path):
    done = gradcalc("eval", "x * 2", "x=3", "--dot", str(tmp_path / "g.xyz"))
    assert done.returncode == 2 and done.stderr.startswith("error:") and "unknown extension .xyz" in done.stderr
    assert not (tmp_path / "g.xyz").exists() and done.stdout == ""  # refused before computing


def test_dot_shows_no_grad_for_constants():
    text = gradcalc("eval", "x * 2", "x=3", "--dot", "-").stdout
    const = next(line for line in text.splitlines() if "data 2" in line)
    assert "grad" not in const
    assert "grad 2" in next(line for line in text.splitlines() if "{x |" in line)


def test_fan_out_is_grouped_and_counted():
    out = gradcalc("eval", "def sq(t) = t * t; sq(x * 2) + sq(x * 3)", "x=3").stdout
    graph = next(line for line in out.splitlines() if line.startswith("graph:"))
    assert graph.endswith("fan-out: x, mul (2 nodes)")


@pytest.mark.parametrize("args", [["run", "/no/such/file.gc"], ["check", "/no/such/file.gc"], ["check", "--method", "foo", "x.gc"]])
def test_fatal_usage_errors_say_error(args):
    done = gradcalc(*args)
    assert done.returncode == 2 and done.stderr.startswith("error:") and "warning" not in done.stderr


def test_no_graphviz_for_a_picture_is_an_error(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    done = gradcalc("eval", "x*x", "x=3", "--dot", str(tmp_path / "g.svg"), env={"PATH": str(empty)})
    assert done.returncode == 2 and done.stderr.startswith("error:") and "Graphviz" in done.stderr


def test_control_characters_in_a_check_file_keep_the_xml_well_formed_and_the_terminal_safe(tmp_path):
    check = tmp_path / "ctl.gc"
    check.write_bytes(b"x = 0.5\ncheck tanh(x)\ny = \x01\x1b 2\ncheck x\x02\n")
    report = tmp_path / "r.xml"
    done = gradcalc("check", str(check), "--junit-xml", str(report))
    assert done.returncode == 1 and "1 passed, 0 failed, 2 errors" in done.stdout
    assert "\x1b" not in done.stdout and "\x01" not in done.stdout
    cases = ET.parse(report).getroot().findall(".//testcase")
    assert [c.get("name") for c in cases] == ["line 2: tanh(x)", "line 3: y = \\x01\\x1b 2", "line 4: check x\\x02"]


def test_a_script_with_a_syntax_error_runs_no_statement(tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("x = 3\nx**2\nx +\n")
    done = gradcalc("run", str(script))
    assert done.returncode == 2
    assert done.stdout == ""
    assert f"unfinished input: expected an expression  [{script}:3:4]" in done.stderr


def test_a_script_stops_at_a_run_time_error_after_printing_what_came_before():
    done = gradcalc("run", "-", stdin="x = 3; x**2; y\n")
    assert done.returncode == 2
    assert "value: 9.0" in done.stdout and "grad x: 6.0" in done.stdout
    assert "unknown name 'y'" in done.stderr


def test_a_name_repeated_after_wrt_is_checked_once(tmp_path):
    script = tmp_path / "repeat.gc"
    script.write_text("x = 0.7\ny = 0.2\ncheck x*x wrt x, x\ncheck x*y wrt x, y, x method='central'\n")
    done = gradcalc("check", str(script), "--json")
    outcomes = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert [check["status"] for check in outcomes["checks"]] == ["pass", "pass"]
    assert [check["variables"] for check in outcomes["checks"]] == [["x"], ["x", "y"]]


@pytest.mark.parametrize("options", [
    ["--wrt", ",,"], ["--dot", "g.xyz"], ["--engine", "scalar", "--mode", "forward"], ["--mode", "sideways"],
    ["--save", "g.txt"], ["--wrt", "zz"],
])
def test_eval_json_gives_one_error_document_for_every_error(options, tmp_path):
    done = gradcalc("eval", "x**2", "x=3", *options, "--json", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error:")
    document = json.loads(done.stdout)  # exactly one document: no success document before it
    assert set(document) == {"error"} and document["error"]["message"] in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_save_extension_is_refused_before_any_script_runs(tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("1 + 1\n")
    done = gradcalc("run", str(script), "--save", str(tmp_path / "out.txt"))
    assert done.returncode == 2 and "--save writes .npz or .json files" in done.stderr
    assert done.stdout == ""  # refused before the script ran


@pytest.mark.parametrize("report", [[], ["--steps"]])
def test_eval_json_with_an_unwritable_dot_file_is_one_error_document(report, tmp_path):
    done = gradcalc("eval", "x**2", "x=3", "--dot", str(tmp_path / "missing" / "g.dot"), "--json", *report)
    assert done.returncode == 2 and set(json.loads(done.stdout)) == {"error"}


def test_check_takes_a_folder_as_its_gc_files(tmp_path):
    # (found by a new user from CI: `gradcalc check examples/` said "cannot read examples: Is a directory")
    (tmp_path / "b").mkdir()
    (tmp_path / "a.gc").write_text("x = 2\ncheck x ** 2\n")
    (tmp_path / "b" / "c.gc").write_text("y = 3\ncheck sin(y) wrt y\n")
    (tmp_path / "notes.txt").write_text("not a program")
    done = gradcalc("check", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    checks = json.loads(done.stdout)["checks"]
    assert [(Path(c["file"]).name, c["status"]) for c in checks] == [("a.gc", "pass"), ("c.gc", "pass")]
    (tmp_path / "empty").mkdir()
    done = gradcalc("check", str(tmp_path / "empty"))
    assert done.returncode == 2 and "is a folder with no .gc files in it" in done.stderr
