"""What the commands share: option types, engine set-up, reading scripts, writing DOT,
reporting a fatal error.

Every command module (main, checking, repl) imports from here and nothing imports them
back, so cli/ reads top-down: main -> repl -> checking -> common -> render, jsonout.
"""
from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer

if TYPE_CHECKING:
    from gradcalc.parser import LanguageError


class Engine(str, Enum):
    tensor = "tensor"
    scalar = "scalar"


EngineOption = Annotated[Engine, typer.Option("--engine", help="tensor (NumPy arrays) or scalar (one node per number, for teaching).")]
DigitsOption = Annotated[Optional[int], typer.Option("--digits", min=1, max=17, help="Round numbers to N significant digits for display (default: full precision).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (see docs/cli.md) instead of text.")]
MaxElementsOption = Annotated[Optional[int], typer.Option("--max-elements", min=1, help="Largest tensor allowed, in elements (default 10,000,000).")]


def prepare_engine(max_elements: int | None) -> None:
    """Set up the engine for a command: the element cap, and NumPy told not to warn about
    overflow or nan (results show inf and nan, and a note names the op that made them)."""
    import numpy as np

    np.seterr(all="ignore")
    if max_elements is not None:
        from gradcalc.autodiff import set_max_elements

        set_max_elements(max_elements)


def fail(err: LanguageError, source: str | None, as_json: bool, origin: str = "") -> NoReturn:
    """Report a language error (as JSON too when asked) and exit with status 2."""
    from . import render

    if as_json:
        from .jsonout import dumps, error_object

        print(dumps(error_object(err)))
    render.print_error(err, source, origin)
    raise typer.Exit(2)


def read_sources(files: list[Path]) -> list[tuple[str, str]]:
    """(origin, text) per file; '-' is stdin. A file that cannot be read exits 2."""
    from . import render

    sources = []
    for path in files:
        if str(path) == "-":
            sources.append(("<stdin>", sys.stdin.read()))
            continue
        try:
            sources.append((str(path), path.read_text()))
        except OSError as err:
            render.warn(f"cannot read {path}: {err.strerror}")
            raise typer.Exit(2) from None
    return sources


def write_dot(output: Any, path: Path) -> None:
    """The graph of `output` as DOT text, or as a picture when `path` ends in .svg/.png."""
    import shutil
    import subprocess

    from gradcalc.autodiff import graph_dot

    from . import render

    text = graph_dot(output)
    suffix = path.suffix.lower()
    try:
        if suffix in (".svg", ".png"):
            if shutil.which("dot") is None:
                render.warn(f"cannot draw {path}: Graphviz's `dot` is not installed (Debian: apt-get install graphviz); "
                            f"name a .dot file to write the DOT text instead")
                raise typer.Exit(2)
            done = subprocess.run(["dot", f"-T{suffix[1:]}", "-o", str(path)], input=text, text=True, capture_output=True, check=False)
            if done.returncode != 0:
                render.warn(f"Graphviz failed to draw {path}: {done.stderr.strip()}")
                raise typer.Exit(2)
        else:
            path.write_text(text)
    except OSError as err:
        render.warn(f"cannot write {path}: {err.strerror}")
        raise typer.Exit(2) from None
