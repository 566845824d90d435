"""Values written as literals of the language: what help's examples and the REPL's
one-line results show, and what a program can read back."""
from __future__ import annotations

from typing import Any

import numpy as np


def literal(x: np.ndarray, digits: int | None = 4, whole: bool = False) -> str:
    """`x` as a literal of the language: rounded to `digits` decimals, or with every digit
    (an edge's input: 1e-200 stays 1e-200); whole numbers without their ".0" when rounded,
    or when asked for (`whole`)."""
    if x.dtype.kind in "iub":
        return str(x.tolist()).replace("True", "true").replace("False", "false")

    def number(v: float) -> str:
        r = float(np.round(v, digits)) if digits is not None and np.isfinite(v) else float(v)
        text = repr(r)
        return text[:-2] if text.endswith(".0") and (whole or digits == 4) else text

    if x.ndim == 0:
        return number(float(x))
    return "[" + ", ".join(literal(row, digits, whole) if row.ndim else number(float(row)) for row in x) + "]"


def shown(value: Any) -> str:
    """A value as one line: a tuple in parentheses, each part as a literal of the language
    with every digit, or as a function prints."""
    if isinstance(value, tuple):
        return "(" + ", ".join(shown(part) for part in value) + ("," if len(value) == 1 else "") + ")"
    return literal(np.asarray(value.data), digits=None) if hasattr(value, "data") else repr(value)
