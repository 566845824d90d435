"""Graph tools for either engine: statistics, a tree that draws shared nodes once, the
first node that is not finite.

They rely only on the graph protocol (`Node`), which both engines' nodes follow.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from .backprop import topological_order
from .tensor import made_by


class Node(Protocol):
    """A node of either engine's graph (Tensor, Value), as the graph tools read it."""

    data: Any
    grad: Any
    name: str | None
    requires_grad: bool

    @property
    def parents(self) -> Sequence[Node]:
        """The inputs of the op that made the node (none for a leaf)."""
        ...

    @property
    def label(self) -> str:
        """The op that made the node, or '' for a leaf."""
        ...


class GraphStats(NamedTuple):
    nodes: int
    edges: int
    leaves: int
    constants: int
    op_nodes: int
    fan_out: list[Node]
    depth: int
    histogram: dict[str, int]


def graph_stats(root: Node, order: list[Node] | None = None) -> GraphStats:
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


def node_title(node: Node) -> str:
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

    node: Node
    number: int
    children: list[TreeNode]
    ref: int | None = None


def graph_tree(root: Node) -> TreeNode:
    """The graph as a tree from the output down; a node reached again is a reference.

    Nodes are numbered in drawing order (depth first, inputs in order), so the first
    time a node appears it is drawn with its inputs, and every later `ref` points up the
    page. Built iteratively: deep graphs do not hit the recursion limit.
    """
    numbers: dict[int, int] = {id(root): 1}
    top = TreeNode(root, 1, [])
    stack: list[tuple[TreeNode, Node]] = [(top, p) for p in reversed(root.parents)]
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


_DERIVATIVES = {1: "the derivative", 2: "the second derivative", 3: "the third derivative"}


def in_users_words(node: Node) -> str:
    """The op that made `node`, said as the user wrote it: its own op, or for a node that
    a derivative rule made while a higher-order graph was built (see Provenance) the
    user's op whose derivative it is part of: `the derivative of softsign`, not the abs
    that softsign's rule computes."""
    origin = made_by(node)
    if origin is None or not origin.node.parents:
        return node.label
    return f"{derivative_words(origin.order)} of {origin.node.label}"


def derivative_words(order: int) -> str:
    """`the derivative`, `the second derivative`, ...: which derivative a Provenance's order is."""
    return _DERIVATIVES.get(order, f"the {order}th derivative")


def first_nonfinite(root: Node, order: list[Node] | None = None) -> Node | None:
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


def first_nonfinite_gradient(root: Node, order: list[Node] | None = None) -> tuple[Node, Node] | None:
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
