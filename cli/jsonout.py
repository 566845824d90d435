"""The JSON contract of SPEC.md: one object per result, or {"error": {...}}.

JSON has no inf or nan, so those numbers are written as the strings "inf", "-inf" and
"nan" (documented in docs/cli.md).
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from gradcalc.autodiff.graph import node_title
from gradcalc.parser.analysis import Analysis
from gradcalc.parser.errors import LanguageError

from .render import notes


def json_number(x: float) -> float | str:
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def plain(value: Any) -> Any:
    """A number, or nested lists of numbers, from an array."""
    array = np.asarray(value)
    if np.iscomplexobj(array):
        array = array.real
    if array.ndim == 0:
        item = array.item()
        # Booleans and whole numbers keep their JSON types (true, 3); reals are floats (3.0).
        return item if isinstance(item, (bool, int)) else json_number(item)
    return [plain(row) for row in array]


def lines_object(lines: list[str], value: Any = None) -> dict[str, Any]:
    """A result shown as lines of text: a tuple's numbers ("values", tuples as arrays; the
    line too), a function's line ("function"), or help(NAME)'s text ("help")."""
    if isinstance(value, tuple):
        return {"values": _items(value), "shown": lines[0]}
    if value is not None:
        return {"function": lines[0]}
    return {"help": lines}


def _items(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_items(v) for v in value]
    data = getattr(value, "data", value)
    return plain(data) if isinstance(data, (np.ndarray, np.generic, float, int, bool)) else str(value)


def analysis_object(a: Analysis) -> dict[str, Any]:
    s = a.stats
    obj: dict[str, Any] = {
        "value": plain(a.value),
        "shape": list(a.shape),
        "grads": {name: plain(g) for name, g in a.grads.items()},
        "graph": None if s is None else {  # (None: the JAX and PyTorch engines keep no gradcalc graph)
            "nodes": s.nodes,
            "edges": s.edges,
            "leaves": a.leaf_names,
            "fan_out": [node_title(n) for n in s.fan_out],
            "depth": s.depth,
        },
    }
    if s is None:
        obj["engine"] = {"name": getattr(a, "engine", ""), "device": getattr(a, "device", "")}
    if a.grad_of:
        obj["grad_of"] = a.grad_of
    if a.dtype is not None:
        obj["dtype"] = a.dtype  # whole numbers or booleans: no gradient, `grads` is empty
    if a.tangent_passes is not None:
        obj["mode"], obj["tangent_passes"], obj["tangents"] = "forward", a.tangent_passes, a.tangents
    said = notes(a)
    if said:
        obj["notes"] = said  # the text report's notes (where an inf or nan came from, forward mode)
    return obj


def error_object(err: LanguageError) -> dict[str, Any]:
    return {"error": err.as_dict()}


def dumps(obj: Any) -> str:
    return json.dumps(obj, allow_nan=False)
