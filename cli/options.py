"""The options several typer commands declare alike.

Only the typer declarations (cli/main.py, cli/plot.py) import this module, and with it
typer: a plain one-shot command (cli/entry.py) never pays for either.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import Engine

EngineOption = Annotated[Engine, typer.Option("--engine", help="tensor (NumPy arrays) or scalar (one node per number, for teaching).")]
DigitsOption = Annotated[int | None, typer.Option(
    "--digits", min=1, max=17, help="Round numbers to N significant digits for display (default: full precision).")]
FullOption = Annotated[bool, typer.Option("--full", help="Print every element of large tensors (default: a summary).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (see docs/cli.md) instead of text.")]
MaxElementsOption = Annotated[int | None, typer.Option("--max-elements", min=1, help="Largest tensor allowed, in elements (default 10,000,000).")]
MaxStepsOption = Annotated[int | None, typer.Option("--max-steps", min=1, help="Most ops one statement may execute (default 10,000,000).")]
MaxInputOption = Annotated[int, typer.Option("--max-input-bytes", min=1, help="Largest script read, in bytes.")]
SaveOption = Annotated[Path | None, typer.Option("--save", metavar="FILE", help="Write the value and each gradient (value, grad_NAME) to FILE: .npz or .json.")]


def as_typed(expr: str) -> str:
    """The expression as it was typed: main.protect_expression puts a space before one
    that starts with a dash, so that it is not read as an option; error places count
    columns in the text as typed."""
    return expr[1:] if expr.startswith(" -") else expr
