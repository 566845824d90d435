"""The docs stay true: the function table matches the registry, and examples run."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from gradcalc.parser import Session
from gradcalc.parser.checks import make_check_handler

from .test_cli import gradcalc

ROOT = Path(__file__).resolve().parent.parent


def test_language_doc_function_table_matches_the_registry():
    text = (ROOT / "docs" / "language.md").read_text()
    block = text.split("<!-- ops:start -->\n")[1].split("<!-- ops:end -->")[0]
    assert block == gradcalc("ops", "--markdown").stdout, "regenerate with: gradcalc ops --markdown"


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


def test_generated_standalone_parser_matches_the_grammar():
    """parser/standalone.py is generated from grammar.lark; regenerate it after editing
    the grammar: python -m gradcalc.parser.generate"""
    from lark import Lark

    from gradcalc.parser.syntax import lark_parser

    fresh = Lark((ROOT / "parser" / "grammar.lark").read_text(), parser="lalr", start="program")
    generated = lark_parser()
    assert sorted(map(str, fresh.rules)) == sorted(map(str, generated.rules))
    assert sorted((t.name, t.pattern.value) for t in fresh.terminals) == sorted((t.name, t.pattern.value) for t in generated.terminals)
