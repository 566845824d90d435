"""The docs stay true: the function table matches the registry, and examples run."""
from __future__ import annotations

import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gradcalc.parser import Session
from gradcalc.parser.check_statements import make_check_handler
from tests import launch

from .test_cli import gradcalc

ROOT = Path(__file__).resolve().parent.parent


def test_language_doc_function_table_matches_the_registry():
    text = (ROOT / "docs" / "language.md").read_text()
    block = text.split("<!-- ops:start -->\n")[1].split("<!-- ops:end -->")[0]
    assert block == gradcalc("ops", "--markdown").stdout, "regenerate it: python -m gradcalc.cli.oplist docs/language.md"


def test_language_doc_edge_table_is_the_registrys():
    """The edge table is each op's Edge conventions, one row each, as help prints them."""
    from gradcalc.autodiff import REGISTRY
    from gradcalc.cli.oplist import edge_table
    from gradcalc.parser.help import describe

    text = (ROOT / "docs" / "language.md").read_text()
    block = text.split("<!-- edges:start -->\n")[1].split("<!-- edges:end -->")[0]
    assert block == edge_table(), "regenerate it: python -m gradcalc.cli.oplist docs/language.md"
    rows = block.splitlines()[2:]
    edges = [(op, edge) for op in REGISTRY.values() if op.public for edge in op.edges]
    assert len(rows) == len(edges)
    for op, edge in edges:
        case = edge.case.replace("|", "\\|")  # (a bar in a cell is escaped)
        call = next(row for row in rows if row.startswith(f"| `{op.name}(") and f"| {case} |" in row)
        help_line = next(line for line in describe(op.name) if line.startswith(f"  {edge.case}: {op.name}("))
        assert call.split(" | ")[0].strip("| `") in help_line


def test_language_doc_program_example_runs():
    text = (ROOT / "docs" / "language.md").read_text()
    first_block = re.search(r"```\n(.*?)```", text, re.S).group(1)
    Session(on_check=make_check_handler()).run_source(first_block)


def test_readme_python_example_runs():
    text = (ROOT / "README.md").read_text()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr


def test_readme_starts_with_the_two_commands():
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    fence = lines.index("```sh") if "```sh" in lines else lines.index("```bash")
    commands = lines[fence + 1 : fence + 3]
    assert "gradcalc eval" in commands[0]
    assert "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci


# ---- every example shown in README.md and docs/*.md runs and prints what is shown -----------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent


def fenced_blocks(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, lines) of every fenced block without a language (shell and REPL)."""
    blocks, current, start = [], None, 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if current is None and line.startswith("```"):
            current, start = ([] if line.strip() == "```" else None), number
            if current is None:
                current = "skip"
        elif current is not None and line.startswith("```"):
            if current != "skip":
                blocks.append((start, current))
            current = None
        elif current is not None and current != "skip":
            current.append(line)
    return blocks


def examples(prompt: str, continuation: str | None = None) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """Per block with `prompt` lines (`$ ` for the shell, `>>> ` for the REPL): (place,
    [(input, output lines)]); `continuation` lines (`... `) extend the input before them."""
    found = []
    for path in DOCS:
        for start, lines in fenced_blocks(path):
            steps: list[tuple[str, list[str]]] = []
            for line in lines:
                if line.startswith(prompt):
                    steps.append((line[len(prompt):], []))
                elif continuation and line.startswith(continuation) and steps and not steps[-1][1]:
                    steps[-1] = (steps[-1][0] + "\n" + line[len(continuation):], [])
                elif steps:
                    steps[-1][1].append(line)
            if steps:
                found.append((f"{path.name}:{start}", steps))
    return found


SHELL_EXAMPLES = examples("$ ")
REPL_EXAMPLES = examples(">>> ", "... ")


# A central difference's error is rounding noise that the host's BLAS kernels move by a
# factor of a few, so in a check line of that method the two error figures match any number.
CENTRAL_ERRORS = re.compile(r"(  central  abs )\S+(  rel )\S+")


# `<n>` in a line shown stands for any whole number: a count that grows with the examples
# (`<n> passed` in a summary of every example check) is not written down to go stale.
ANY_COUNT = "<n>"


def _literal(text: str) -> str:
    return "[0-9]+".join(re.escape(part) for part in text.split(ANY_COUNT))


def _line_pattern(line: str) -> str:
    parts = CENTRAL_ERRORS.split(line.rstrip(), maxsplit=1)
    if len(parts) == 1:
        return _literal(parts[0]) + "\n"
    before, abs_label, rel_label, after = parts
    number = r"[0-9][0-9.e+-]*"
    return re.escape(before + abs_label) + number + re.escape(rel_label) + number + re.escape(after) + "\n"


def matches(shown: list[str], actual: list[str]) -> bool:
    """Line by line; a line `...` in the docs stands for any number of lines, `<n>` for
    any whole number."""
    pattern = "".join(r"(?:.*\n)*?" if line.strip() == "..." else _line_pattern(line) for line in shown)
    return re.fullmatch(pattern, "".join(line.rstrip() + "\n" for line in actual)) is not None


GRADCALC_COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*gradcalc\b")
# `$ python -c "import numpy as np; np.save('data.npy', ...)"`: how an example makes its data
# file (a `.npy` for `X=@data.npy`), shown so that a reader can make the same one.
DATA_COMMAND = re.compile(r"^python -c ")
LIBRARY_ENGINE = re.compile(r"--(?:engine|against|to)[ =](jax|torch)\b|against=(jax|torch)")


# Shell syntax beyond words, quotes and `NAME=value` before the command: run by bash.
_SHELL_SYNTAX = re.compile(r"[|&;<>()$`*?\[\]{}~\\]")


def _shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A docs command's output as a terminal shows it (stdout and stderr in one), run as bash
    would run it; a plain `gradcalc ...` line by the tests' launcher (tests/launch.py)."""
    unquoted = re.sub(r"'[^']*'|\"[^\"\\$`]*\"", "", command)
    if _SHELL_SYNTAX.search(unquoted):
        return subprocess.run(["bash", "-c", command + " 2>&1"], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    words = shlex.split(command, comments=True)
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env = {**env, name: value}
    return launch.run(words[1:], cwd=cwd, env=env, timeout=120, merged=True)


@pytest.mark.parametrize("place, steps", SHELL_EXAMPLES, ids=[p for p, _ in SHELL_EXAMPLES])
@pytest.mark.slow
def test_shell_examples_in_the_docs_print_what_they_show(place, steps, tmp_path):
    """Each `$ gradcalc ...` line runs in a fresh folder (with examples/), and its output
    (stdout and stderr, as a terminal shows them) must be the lines shown under it. `$ cat
    FILE` makes FILE from the lines shown. A trailing `# comment` marks the lines shown as
    an excerpt of the output; a command shown without output is an illustration, not run;
    `$ python -c ...` runs (with this environment's Python: it makes a data file) and must
    succeed; other programs (pip, pytest) are not run."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "NO_COLOR": "1", "COLUMNS": "80"}
    made = ""  # the files the block made: an engine they ask for (against=jax) is needed too
    for command, shown in steps:
        if command.startswith("cat ") and " " not in command[4:]:  # the docs show a file: make it
            (tmp_path / command[4:]).write_text("\n".join(shown) + "\n")
            made += "\n".join(shown)
            continue
        if DATA_COMMAND.match(command):
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
            assert done.returncode == 0 and not shown, f"{place}: $ {command}\n{done.stderr}"
            continue
        if not GRADCALC_COMMAND.match(command) or not any(line.strip() for line in shown):
            continue
        # --engine jax and the like (in the command, or a file it reads): skipped without that extra
        for library in {a or b for a, b in LIBRARY_ENGINE.findall(command + "\n" + made)}:
            if importlib.util.find_spec(library) is None:
                pytest.skip(f"{place}: needs {library} (pip install 'gradcalc[{library}]')")
        done = _shell(command, cwd=tmp_path, env=env)
        actual = done.stdout.rstrip("\n").splitlines()
        excerpt = " # " in command
        expected = ["...", *shown, "..."] if excerpt else shown
        assert matches(expected, actual), f"{place}: $ {command}\nshown:\n" + "\n".join(shown) + "\nactual:\n" + done.stdout


@pytest.mark.parametrize("place, steps", REPL_EXAMPLES, ids=[p for p, _ in REPL_EXAMPLES])
def test_repl_transcripts_in_the_docs_print_what_they_show(place, steps, capsys):
    """Through the Repl class with the terminal renderer (80 columns, no colour), as a
    user sees it."""
    from rich.console import Console

    from gradcalc.cli import render
    from gradcalc.cli.repl import Repl

    renderer = render.RichRenderer(render.Style(rich=True))
    repl = Repl(renderer=renderer)
    for text, shown in steps:
        renderer.console = Console(file=io.StringIO(), width=80, color_system=None, force_terminal=False)
        repl.handle(text)
        actual = renderer.console.file.getvalue().splitlines() + capsys.readouterr().err.splitlines()
        assert matches(shown, actual), f"{place}: >>> {text}\nshown:\n" + "\n".join(shown) + "\nactual:\n" + "\n".join(actual)
