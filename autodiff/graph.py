"""Graph tools for either engine: statistics, a tree that draws shared nodes once, DOT.

They rely only on the graph protocol: `parents`, `label` (the op, '' for a leaf),
`data`, `grad`, `name`, `requires_grad`.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from .backprop import topological_order


class GraphStats(NamedTuple):
    nodes: int
    edges: int
    leaves: int
    constants: int
    op_nodes: int
    fan_out: list[Any]
    depth: int
    histogram: dict[str, int]


def graph_stats(root: Any, order: list[Any] | None = None) -> GraphStats:
    """Counts over the graph actually built.

    An edge is one input slot (x*x has two edges from x); a fan-out node is one used as
    an input more than once; depth is the longest path, in edges, from root to a leaf.
    """
    order = order if order is not None else topological_order(root)
    uses: Counter[int] = Counter()
    depth: dict[int, int] = {}
    edges = 0
    histogram: Counter[str] = Counter()
    for node in order:
        parents = node.parents
        edges += len(parents)
        for p in parents:
            uses[id(p)] += 1
        depth[id(node)] = 1 + max(depth[id(p)] for p in parents) if parents else 0
        if parents:
            histogram[node.label] += 1
    leaves = [n for n in order if not n.parents]
    return GraphStats(
        nodes=len(order),
        edges=edges,
        leaves=len(leaves),
        constants=sum(1 for n in leaves if not n.requires_grad),
        op_nodes=len(order) - len(leaves),
        fan_out=[n for n in order if uses[id(n)] > 1],
        depth=depth[id(root)],
        histogram=dict(histogram.most_common()),
    )


def node_title(node: Any) -> str:
    """How a node is named in trees and pictures: its variable name, op, or value."""
    name = getattr(node, "name", None)
    if name:
        return name if not node.parents else f"{name} = {node.label}"
    if node.parents:
        return node.label
    return "const" if not node.requires_grad else "leaf"


class TreeNode(NamedTuple):
    """One line of the tree view. `ref` is set when the node was drawn earlier, whose
    number is `ref`; its children are then not repeated."""

    node: Any
    number: int
    children: list[TreeNode]
    ref: int | None = None


def graph_tree(root: Any) -> TreeNode:
    """The graph as a tree from the output down; a node reached again is a reference.

    Nodes are numbered in drawing order (depth first, inputs in order), so the first
    time a node appears it is drawn with its inputs, and every later `ref` points up the
    page. Built iteratively: deep graphs do not hit the recursion limit.
    """
    numbers: dict[int, int] = {id(root): 1}
    top = TreeNode(root, 1, [])
    stack: list[tuple[TreeNode, Any]] = [(top, p) for p in reversed(root.parents)]
    while stack:
        parent, node = stack.pop()
        seen = numbers.get(id(node))
        if seen is not None:
            parent.children.append(TreeNode(node, seen, [], ref=seen))
            continue
        numbers[id(node)] = len(numbers) + 1
        item = TreeNode(node, numbers[id(node)], [])
        parent.children.append(item)
        stack.extend((item, p) for p in reversed(node.parents))
    return top


def walk_tree(tree: TreeNode) -> Iterator[tuple[int, TreeNode]]:
    """(depth, node) pairs in drawing order, without recursion."""
    stack = [(0, tree)]
    while stack:
        level, item = stack.pop()
        yield level, item
        stack.extend((level + 1, c) for c in reversed(item.children))


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
    if isinstance(x, complex):
        return repr(x) if digits is None else f"{x:.{digits}g}"
    x = float(x)
    if digits is None:
        return repr(x)
    return f"{x:.{digits}g}"


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


def first_nonfinite(root: Any, order: list[Any] | None = None) -> Any | None:
    """The first node, in evaluation order, whose value holds an inf or nan while all of
    its inputs are finite: the op that produced it (or a leaf that came in that way)."""
    bad: set[int] = set()
    for node in order if order is not None else topological_order(root):
        finite = bool(np.all(np.isfinite(node.data)))
        if finite:
            continue
        if not any(id(p) in bad for p in node.parents):
            return node
        bad.add(id(node))
    return None


def first_nonfinite_gradient(root: Any, order: list[Any] | None = None) -> tuple[Any, Any] | None:
    """After a backward pass that kept every gradient: (op node, input node) where the
    op's VJP first turned a finite gradient into an inf or nan for that input (sqrt at
    0), walking from the output down; None when every gradient is finite."""
    nodes = order if order is not None else topological_order(root)
    for node in reversed(nodes):
        if node.grad is None or not bool(np.all(np.isfinite(node.grad))):
            continue
        for parent in node.parents:
            grad = getattr(parent, "grad", None)
            if grad is not None and not bool(np.all(np.isfinite(grad))):
                return node, parent
    return None
