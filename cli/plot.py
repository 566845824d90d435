"""`gradcalc plot` and `:plot` (in progress)."""
from __future__ import annotations

from typing import Any


def plot_in_repl(repl: Any, arg: str) -> None:
    from . import render

    render.warn(":plot is not ready yet")
