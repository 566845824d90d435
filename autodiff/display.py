"""How a Tensor or Value shows itself in a notebook (`_repr_html_`): a small table of its
data, gradient, op and name. Plain strings only: the engine imports no UI."""
from __future__ import annotations

import html
from typing import Any

import numpy as np


def _text(value: Any) -> str:
    array = np.asarray(value)
    # a number as Python writes it (the shortest repr that round-trips), not NumPy's `4.`
    return repr(array.item()) if array.ndim == 0 else np.array2string(array, precision=17, separator=", ")


def node_html(kind: str, data: Any, grad: Any, op: str | None, name: str | None) -> str:
    array = np.asarray(data)
    rows = [("data", _text(array)), ("grad", "None" if grad is None else _text(grad))]
    if array.ndim:
        rows.append(("shape", "x".join(map(str, array.shape))))
    if op:
        rows.append(("op", op))
    if name:
        rows.append(("name", name))
    body = "".join(f"<tr><th style=\"text-align:left\">{key}</th><td><pre style=\"margin:0\">{html.escape(text)}</pre></td></tr>"
                   for key, text in rows)
    return f'<table class="gradcalc-{kind.lower()}"><caption style="text-align:left">{kind}</caption>{body}</table>'
