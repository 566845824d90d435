"""Numbers and tensors as text, and a graph as Graphviz DOT text with its values: how the
command line shows what the engine computed."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from gradcalc.autodiff import topological_order
from gradcalc.autodiff.graph import node_title

SUMMARY_THRESHOLD = 1000  # elements; a larger tensor is summarised unless asked in full
EDGE_ITEMS = 3  # items kept at each end of a summarised axis


def format_array(value: Any, digits: int | None = None, full: bool = False, edge: int = EDGE_ITEMS, rows: bool = False,
                 threshold: int = SUMMARY_THRESHOLD) -> str:
    """A number or tensor as text, the same way at every size: numbers at full precision
    (the shortest repr that round-trips, as Python prints a float) or rounded to `digits`
    significant digits; a tensor as nested lists. A tensor of more than
    `threshold` (SUMMARY_THRESHOLD) elements keeps `edge` items at each end of every long axis, with
    `...` between, and ends by saying how many elements are shown, unless `full`.
    `rows` puts each row of a matrix on its own line (for a terminal)."""
    array = np.asarray(value)
    if array.ndim == 0:
        return format_number(array.item(), digits)
    # An empty tensor can still have a huge shape (zeros(10**10, 0)): count the brackets.
    summarise = not full and max(array.size, math.prod(array.shape[:-1])) > threshold
    keep = edge if summarise else None
    text = _nested(array, digits, keep, rows)
    if summarise:
        shown = math.prod(min(n, 2 * edge) for n in array.shape)
        if shown < array.size:
            text += ("\n" if rows else "  ") + f"({shown} of {array.size} elements shown)"
    return text


def _kept(n: int, keep: int | None) -> tuple[list[int], int | None]:
    """Indices shown along an axis of length n, and where `...` goes (None: nowhere)."""
    if keep is None or n <= 2 * keep:
        return list(range(n)), None
    return [*range(keep), *range(n - keep, n)], keep


def _nested(array: np.ndarray, digits: int | None, keep: int | None, rows: bool, depth: int = 1) -> str:
    indices, gap = _kept(array.shape[0], keep)
    if array.ndim == 1:
        items = [format_number(array[i].item(), digits) for i in indices]
        separator = ", "
    else:
        items = [_nested(array[i], digits, keep, rows, depth + 1) for i in indices]
        # On a terminal each row gets its own line, indented under its bracket (as NumPy).
        separator = ",\n" + "\n" * (array.ndim - 2) + " " * depth if rows else ", "
    if gap is not None:
        items.insert(gap, "...")
    return "[" + separator.join(items) + "]"


def format_number(x: float | complex, digits: int | None = None) -> str:
    # A boolean or an integer (an element of a comparison's or argmax's result) is exact:
    # it prints as the language writes it, never rounded.
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if not isinstance(x, complex):
        x = float(x)
    return repr(x) if digits is None else f"{x:.{digits}g}"


_DOT_RECORD_SPECIALS = str.maketrans({c: "\\" + c for c in '\\"|{}<>'} | {"\n": "\\n"})


def _dot_field(text: str) -> str:
    """Text safe inside one field of a Graphviz record label."""
    return text.translate(_DOT_RECORD_SPECIALS)


def graph_dot(root: Any, digits: int | None = 6, edge_labels: dict[tuple[int, int], str] | None = None) -> str:
    """Graphviz DOT text: one record per node with its title, value and grad (when it has
    one: constants do not). `edge_labels` labels the edge into input slot k of a node,
    keyed (id(node), k)."""
    order = topological_order(root)
    index = {id(n): i for i, n in enumerate(order)}
    lines = ["digraph gradcalc {", '  rankdir="LR";', '  node [shape=record, fontname="Helvetica"];']
    for node in order:
        i = index[id(node)]
        fields = [node_title(node), f"data {_short(node.data, digits)}"]
        if node.grad is not None:  # constants have none, and show none
            fields.append(f"grad {_short(node.grad, digits)}")
        label = " | ".join(_dot_field(f) for f in fields)
        style = ', style=filled, fillcolor="#e8f0fe"' if not node.parents else ""
        lines.append(f'  n{i} [label="{{{label}}}"{style}];')
    for node in order:
        for k, parent in enumerate(node.parents):
            edge = (edge_labels or {}).get((id(node), k))
            attributes = f' [label="{_dot_field(edge)}"]' if edge else ""
            lines.append(f"  n{index[id(parent)]} -> n{index[id(node)]}{attributes};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _short(value: Any, digits: int | None) -> str:
    array = np.asarray(value)
    if array.ndim == 0:
        return format_number(array.item(), digits)
    if array.size <= 6:
        return format_array(array, digits)
    return f"shape {array.shape}"


def count(n: int, one: str, many: str) -> str:
    """`1 leaf`, `2 leaves`, `0 ops`."""
    return f"{n} {one if n == 1 else many}"
