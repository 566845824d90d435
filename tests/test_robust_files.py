"""Files, through the real command: no output is ever written over (or through a link
to) a file the command read, and hostile data files of every format end in one
`error: FILE: ...` line with status 2, never a traceback or an internal error.

Both are generated: outputs as (command, output option) x (what was read: the script, a
NAME=@file binding, a load()ed file) x (how the output reaches it: the same path, a
symlink, a hard link, a path through a symlinked folder); hostile files per format from
fixed cases (a link to /dev/zero, too many bytes, too many numbers, truncated, not
UTF-8, a 100,001-digit integer, an .npz of many members or a compressed bomb) and from
hypothesis-made bytes.
"""
from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.launch import run
from tests.test_cli import gradcalc

# ---- outputs never replace inputs -------------------------------------------------------------

# (name, the argv of the command given {input}, {out} and {script}, the output's suffix,
# the kinds of input the command can read)
OUTPUTS = [
    ("eval --save", ["eval", "sum(v) * 2", "v=@{input}", "--save", "{out}"], ".json", ("binding",)),
    ("eval --save load", ["eval", 'sum(load("{input}")) * 2', "--save", "{out}"], ".json", ("load",)),
    ("eval --dot", ["eval", "sum(v) * 2", "v=@{input}", "--dot", "{out}"], ".dot", ("binding",)),
    ("run --save", ["run", "{script}", "v=@{input}", "--save", "{out}"], ".json", ("script", "binding", "load")),
    ("check --junit-xml", ["check", "{script}", "v=@{input}", "--junit-xml", "{out}"], ".xml", ("script", "binding", "load")),
    ("check -j 2 --junit-xml", ["check", "-j", "2", "{script}", "{script2}", "v=@{input}", "--junit-xml", "{out}"], ".xml",
     ("script", "binding", "load")),
    ("plot --out", ["plot", "sum(v) * x", "x=0:1", "v=@{input}", "--points", "5", "--out", "{out}"], ".svg", ("binding",)),
]
LINKS = ("same path", "symlink", "hard link", "through a symlinked folder")


def _cases():
    for name, argv, suffix, kinds in OUTPUTS:
        for kind in kinds:
            for link in LINKS:
                if link == "same path" and kind != "script" and suffix not in (".json", ".xml"):
                    continue  # a .dot or .svg path cannot also be a data file
                yield pytest.param(argv, suffix, kind, link, id=f"{name}-{kind}-{link}")


@pytest.mark.parametrize("argv, suffix, kind, link", list(_cases()))
def test_no_output_is_written_over_a_file_the_command_read(tmp_path, argv, suffix, kind, link):
    data = tmp_path / "data"
    data.mkdir()
    data_file = data / "in.json"
    data_file.write_text("[1.0, 2.0]\n")
    script = data / ("a.json" if suffix == ".json" else "a.gc")  # `run script.json --save script.json`
    loads = kind == "load"
    script.write_text(('w = load("in.json")\n' if loads else "") + "check v * 2\nv * 3\n")
    (data / "b.gc").write_text("check v * 4\n")
    victim = script if kind == "script" else data_file
    before = victim.read_bytes()
    if link == "same path":
        out = victim
    elif link == "symlink":
        out = tmp_path / f"out{suffix}"
        out.symlink_to(victim)
    elif link == "hard link":
        out = tmp_path / f"out{suffix}"
        os.link(victim, out)
    else:
        (tmp_path / "alias").symlink_to(data, target_is_directory=True)
        out = tmp_path / "alias" / victim.name
        if suffix not in (".json", ".xml") and kind != "script":
            out = tmp_path / "alias" / f"out{suffix}"
            (data / f"out{suffix}").symlink_to(victim.name)
    input_name = "in.json" if loads else str(data_file)
    if loads and argv[0] == "eval":
        input_name = str(data_file)  # eval's load() is relative to the current folder
    args = [a.format(input=input_name, out=out, script=script, script2=data / "b.gc") for a in argv]
    if loads and argv[0] != "eval":
        args = [a for a in args if not a.startswith("v=@")]
        script.write_text('v = load("in.json")\ncheck v * 2\nv * 3\n')
        (data / "b.gc").write_text('v = load("in.json")\ncheck v * 4\n')
        before = victim.read_bytes()
    done = gradcalc(*args, cwd=tmp_path)
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert "would overwrite the input file" in done.stderr, done.stderr
    assert victim.read_bytes() == before
    assert not victim.is_symlink()
    if link == "symlink":
        assert out.is_symlink()  # the link is left as it was, not replaced by the output either
    leftovers = [p.name for p in tmp_path.rglob(".*.tmp")]
    assert not leftovers


def test_an_output_beside_the_inputs_is_still_written(tmp_path):
    data = tmp_path / "in.json"
    data.write_text("[1.0, 2.0]\n")
    done = gradcalc("eval", "sum(v)", f"v=@{data}", "--save", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out.json").read_text())["grad_v"] == [1.0, 1.0]


# ---- hostile data files ----------------------------------------------------------------------

SUFFIXES = (".npy", ".npz", ".csv", ".json")


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=array.dtype.hasobject)
    return buffer.getvalue()


def _npz_bytes(members: dict[str, np.ndarray], compress: bool = False) -> bytes:
    buffer = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buffer, **members)
    return buffer.getvalue()


def _bomb() -> bytes:
    """An .npz whose one member is 10^8 zeros compressed to about 100 kB."""
    buffer = io.BytesIO()
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**8,)})
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("W.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            chunk = bytes(8 * 10**6)
            for _ in range(100):
                member.write(chunk)
    return buffer.getvalue()


@pytest.mark.slow
def test_a_compressed_bomb_is_refused_from_its_header(tmp_path):
    (tmp_path / "bomb.npz").write_bytes(_bomb())
    for binding in ("v=@bomb.npz", "@bomb.npz", "v=@bomb.npz:W"):
        done = gradcalc("eval", "sum(v)", binding, "--max-elements", "1000", cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr.startswith("error: bomb.npz") and "over the cap of 1,000" in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["eval", "check"])
def test_a_json_integer_of_100001_digits_is_an_error_at_its_place(tmp_path, command):
    (tmp_path / "long.json").write_text("[1,\n  " + "7" * 100_001 + "]")
    (tmp_path / "s.gc").write_text("check v * 2\n")
    argv = ["eval", "sum(v)"] if command == "eval" else ["check", "s.gc"]
    done = gradcalc(*argv, "v=@long.json", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: long.json: line 2, column 3: an integer of 100,001 digits"), done.stderr


def hostile_files(folder: Path) -> dict[str, str]:
    """file name -> what its error must say (a part of the message)."""
    cases: dict[str, tuple[bytes | None, str]] = {
        "big.csv": (b"1.5\n" * 2000, "larger than 5,000 bytes"),
        "big.json": (b"[" + b"1, " * 3000 + b"1]", "larger than 5,000 bytes"),
        "many.csv": (b"1\n" * 400, "more than 100 numbers"),
        "many.json": (b"[" + b"1," * 300 + b"1]", "over the cap of 100"),
        "many.npy": (_npy_bytes(np.zeros(101)), "over the cap of 100"),
        "members.npz": (_npz_bytes({f"m{k}": np.zeros(10) for k in range(11)}), "holds 11 arrays"),  # load() takes one
        "truncated.npy": (_npy_bytes(np.zeros(50))[:-8], "truncated"),
        "truncated.npz": (_npz_bytes({"W": np.zeros(5)})[:-30], "npz"),
        "latin.csv": (b"1,2\n3,\xe9\n", "line 2, column 3: not UTF-8"),
        "latin.json": (b'[1, "\xe9"]', "line 1, column 6: not UTF-8"),
        "deep.json": (b"[" * 2400 + b"]" * 2400, "nested too deeply"),
        "ragged.csv": (b"1,2\n3\n", "line 2: 1 columns"),
        "object.npy": (_npy_bytes(np.array([1, "a"], dtype=object)), "unpickled"),
        "text.npz": (b"this is not a zip archive", "not a valid .npz"),
        "empty.csv": (b"", "no rows"),
        "empty.json": (b"", "not valid JSON"),
    }
    found = {}
    for name, (data, expected) in cases.items():
        path = folder / name
        path.write_bytes(data)
        found[name] = expected
    linked = {".csv": ("big.csv", "larger than"), ".json": ("big.json", "larger than"), ".npy": ("many.npy", "over the cap"),
              ".npz": ("members.npz", "holds 11 arrays")}
    for suffix in SUFFIXES:
        (folder / f"zero{suffix}").symlink_to("/dev/zero")
        found[f"zero{suffix}"] = "not a regular file"
        target, message = linked[suffix]
        os.link(folder / target, folder / f"hard{suffix}")
        found[f"hard{suffix}"] = message
    return found


LIMITS = ("--max-input-bytes", "5000", "--max-elements", "100")


def test_hostile_data_files_through_load_are_each_one_error(tmp_path):
    expected = hostile_files(tmp_path)
    names = sorted(expected)
    script = tmp_path / "hostile.gc"
    script.write_text("".join(f'check sum(load("{name}")) == 0\n' for name in names))
    # (the links to /dev/zero are outside the script's folder: allowed here, so that what is refused is the device)
    done = gradcalc("check", "--json", *LIMITS, str(script), env={"GRADCALC_ALLOW_READ": "/dev"})
    assert done.returncode == 1, done.stderr
    results = json.loads(done.stdout)["checks"]
    assert len(results) == len(names)
    for name, result in zip(names, results):
        assert result["status"] == "error", (name, result)
        assert name in result["message"] and expected[name] in result["message"], (name, result["message"])
        assert "internal" not in result["message"]


@pytest.mark.parametrize("command", ["eval", "run", "check", "plot"])
def test_hostile_data_files_as_bindings_exit_2_with_one_line(tmp_path, command):
    expected = hostile_files(tmp_path)
    (tmp_path / "s.gc").write_text("check sum(v) * 2\n")
    for name in ("zero.csv", "zero.npz", "latin.csv", "members.npz", "hard.npy"):
        binding = f"v=@{name}" if name != "members.npz" else f"@{name}"
        argv = {"eval": ["eval", "1"], "run": ["run", "s.gc"], "check": ["check", "s.gc"], "plot": ["plot", "x", "x=0:1", "--points", "5"]}[command]
        done = gradcalc(*argv, binding, *LIMITS, cwd=tmp_path)
        message = "together hold more than 100 numbers" if name == "members.npz" else expected[name]  # @file.npz binds all
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert done.stderr.startswith(f"error: {name}: ") and message in done.stderr, (name, done.stderr)
        assert "internal error" not in done.stderr


FORMAT_STARTS = {".npy": b"\x93NUMPY", ".npz": b"PK\x03\x04", ".csv": b"", ".json": b"["}


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.binary(max_size=300), min_size=len(SUFFIXES), max_size=len(SUFFIXES)), st.data())
def test_generated_malformed_files_never_crash(tmp_path_factory, blobs, data):
    folder = tmp_path_factory.mktemp("generated")
    names = []
    for k, (suffix, blob) in enumerate(zip(SUFFIXES, blobs)):
        start = FORMAT_STARTS[suffix] if data.draw(st.booleans()) else b""
        (folder / f"g{k}{suffix}").write_bytes(start + blob)
        names.append(f"g{k}{suffix}")
    script = folder / "g.gc"
    script.write_text("".join(f'check sum(load("{name}")) == sum(load("{name}"))\n' for name in names))
    done = gradcalc("check", "--json", *LIMITS, str(script))
    assert done.returncode in (0, 1), done.stderr
    for name, result in zip(names, json.loads(done.stdout)["checks"]):
        if result["status"] == "error":
            assert name in result["message"] and "internal" not in result["message"], result


# ---- a named pipe is not a data file -----------------------------------------------------------
# Opening a FIFO waits for a writer that never comes: the command hung. A data file is named
# as a file, so anything else (a pipe, a device, a link to one) is refused before it is read
# (scripts are different: `-` and `<(...)` are pipes given deliberately, read up to
# --max-input-bytes).


@pytest.mark.parametrize("suffix, how", [*((s, how) for s in SUFFIXES for how in ("binding", "load")), (".npz", "npz member")])
def test_a_named_pipe_as_a_data_file_is_refused_at_once(tmp_path, suffix, how):
    os.mkfifo(tmp_path / f"pipe{suffix}")
    spec = f"pipe{suffix}:W" if how == "npz member" else f"pipe{suffix}"
    argv = ["eval", f'sum(load("{spec}"))'] if how == "load" else ["eval", "sum(v)", f"v=@{spec}"]
    done = run(argv, cwd=tmp_path, timeout=30, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 2, done.stdout + done.stderr
    first = done.stderr.splitlines()[0]  # (load() is then placed: line 1, column 5, and a caret)
    assert first.startswith(f"error: pipe{suffix}: is not a regular file (a device or a pipe); gradcalc reads data from files"), done.stderr
    assert "Traceback" not in done.stderr


def test_a_named_pipe_bound_in_a_check_file_is_an_error_of_that_check(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    (tmp_path / "c.gc").write_text('x = 2\ncheck sum(load("pipe.csv")) * x\ncheck x ** 2\n')
    done = run(["check", "c.gc"], cwd=tmp_path, timeout=30, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ERROR") and "pipe.csv: is not a regular file" in lines[0], done.stdout
    assert lines[1].startswith("PASS"), done.stdout


def test_a_folder_named_as_a_data_file_is_called_a_folder(tmp_path):
    (tmp_path / "d.json").mkdir()
    done = gradcalc("eval", "sum(v)", "v=@d.json", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr == "error: d.json: is a folder, not a data file\n", done.stderr
