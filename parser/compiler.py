"""Parse tree to a flat list of instructions, per statement.

The tree is walked with an explicit work stack, never by recursion, so 5000 levels of
nesting compile like any other input. The instructions run on the stack machine in
`machine.py`; a program is compiled once and can be run many times.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from gradcalc.autodiff import collector_paused

from .errors import LanguageError, Span
from .syntax import Token, Tree, parse_tree

# Opcodes. Each instruction is (opcode, argument, span).
CONST, STRING, NONE, LOAD, BINARY, UNARY, CALL, METHOD, ATTR, INDEX, SLICE, TENSOR = range(12)
JUMP_IF_FALSE, JUMP = 12, 13

Instruction = tuple[int, Any, Span]

BINARY_OPS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "matmul": "matmul", "pow": "pow"}
COMPARISONS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
AUGMENTED = {"+=": "add", "-=": "sub", "*=": "mul", "/=": "div"}
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@", "pow": "**",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "neg": "-", "pos": "+"}


@dataclass
class UserFunction:
    name: str
    params: tuple[str, ...]
    code: list[Instruction]
    text: str


@dataclass
class Statement:
    """One statement. kind: expr, assign, def, check."""

    kind: str
    code: list[Instruction]
    span: Span
    text: str
    targets: tuple[str, ...] = ()
    function: UserFunction | None = None
    wrt: tuple[str, ...] = ()
    options: dict[str, tuple[list[Instruction], Span]] = field(default_factory=dict)


@dataclass
class Program:
    source: str
    statements: list[Statement]


class _Label:
    __slots__ = ("target",)

    def __init__(self) -> None:
        self.target = -1


# A place in the source: line, column, end line, end column (1-based, end exclusive),
# then the start and end offsets.
Place = tuple[int, int, int, int, int, int]
_CLOSE_AFTER = {"call", "method", "index", "tensor"}
_OPEN_BEFORE = {"tensor": "[", "neg": "-", "pos": "+"}


class _Places:
    """Where each node of the tree sits in the source, computed bottom-up from tokens.

    The parser does not record positions on tree nodes (that doubles parsing time), so a
    node's place runs from its first token to its last, widened to take in a closing
    bracket or a leading sign the tree does not keep.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.known: dict[int, Place | None] = {}
        self.line_starts = [0] + [i + 1 for i, ch in enumerate(source) if ch == "\n"]

    def of(self, node: Any) -> Place | None:
        if node is None:
            return None
        if isinstance(node, Token):
            return (node.line, node.column, node.end_line, node.end_column, node.start_pos, node.end_pos)
        key = id(node)
        if key not in self.known:
            self.known[key] = self._compute(node)
        return self.known[key]

    def span(self, node: Any) -> Span | None:
        place = self.of(node)
        return None if place is None else place[:4]

    def _compute(self, node: Tree) -> Place | None:
        # Children are placed before their parent (the compiler works bottom-up), so this
        # looks one or two levels down at most.
        parts = [p for p in (self.of(c) for c in node.children) if p is not None]
        if not parts:
            return None
        start, end = parts[0][4], parts[-1][5]
        kind = node.data
        if kind in _OPEN_BEFORE:
            before = self.source.rfind(_OPEN_BEFORE[kind], 0, start)
            if before >= 0 and not self.source[before + 1 : start].strip():
                start = before
        unopened = self.source.count(")", start, end) - self.source.count("(", start, end)
        for _ in range(unopened):  # `(a*b).relu()`: the "(" of a parenthesized operand is no token in the tree
            start = max(self.source.rfind("(", 0, start), 0)
        if kind in _CLOSE_AFTER:
            source, rest = self.source, end
            while rest < len(source) and source[rest] in " \t\r\n\\":
                rest += 1
            if kind in ("call", "method") and source.startswith("(", rest):  # no arguments: `x.sum()`
                rest = source.index(")", rest)
            if rest < len(source) and source[rest] in ")]":
                end = rest + 1
        return (*self._line_column(start), *self._line_column(end), start, end)

    def _line_column(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1


def source_text(source: str, span: Span) -> str:
    lines = source.split("\n")
    line, column, end_line, end_column = span
    if line == end_line:
        return lines[line - 1][column - 1 : end_column - 1]
    parts = [lines[line - 1][column - 1 :], *lines[line : end_line - 1], lines[end_line - 1][: end_column - 1]]
    return "\n".join(parts)


def _split_arguments(node: Tree | None, places: _Places) -> tuple[list[Any], list[tuple[str, Any]]]:
    if node is None:
        return [], []
    positional: list[Any] = []
    keywords: list[tuple[str, Any]] = []
    for arg in node.children:
        if arg is None:
            continue
        if isinstance(arg, Tree) and arg.data == "keyword":
            name, value = arg.children
            if name in [k for k, _ in keywords]:
                raise LanguageError("syntax", f"keyword argument {name!s} given twice").at(places.span(name))
            keywords.append((str(name), value))
        else:
            if keywords:
                raise LanguageError("syntax", "a positional argument cannot follow a keyword argument").at(places.span(arg))
            positional.append(arg)
    return positional, keywords


def compile_expression(root: Tree | Token, places: _Places) -> list[Instruction]:
    """Instructions that leave the value of `root` on the stack.

    Tasks on the work stack: ("visit", node) expands a node into tasks for its children
    and its own instruction; ("emit", (op, arg), node) emits an instruction placed where
    `node` is (its children are done by then); ("label", label) marks a jump target.
    """
    code: list[Instruction] = []
    work: list[tuple[Any, ...]] = [("visit", root)]
    while work:
        task = work.pop()
        if task[0] == "emit":
            (op, arg), node = task[1], task[2]
            code.append((op, arg, places.span(node)))
        elif task[0] == "label":
            task[1].target = len(code)
        else:
            work.extend(reversed(_expand(task[1], places)))
    return [(op, arg.target, span) if isinstance(arg, _Label) else (op, arg, span) for op, arg, span in code]


def _visit_all(nodes: list[Any]) -> list[tuple[Any, ...]]:
    return [("visit", n) if n is not None else ("emit", (NONE, None), None) for n in nodes]


def _expand(node: Tree | Token, places: _Places) -> list[tuple[Any, ...]]:
    """The tasks that compile one node: visit its children, then emit its instruction."""
    if isinstance(node, Token):  # only reached for a bare expression token
        raise LanguageError("syntax", f"unexpected {node!s}").at(places.span(node))
    kind, children = node.data, node.children
    if kind == "number":
        return [("emit", (CONST, float(children[0])), node)]
    if kind == "string":
        return [("emit", (STRING, str(children[0])[1:-1]), node)]
    if kind in ("true", "false"):
        return [("emit", (CONST, 1.0 if kind == "true" else 0.0), node)]
    if kind == "name":
        return [("emit", (LOAD, str(children[0])), node)]
    if kind in BINARY_OPS:
        left, right = children[0], children[-1]
        return [("visit", left), ("visit", right), ("emit", (BINARY, BINARY_OPS[kind]), node)]
    if kind == "compare":
        left, op, right = children
        return [("visit", left), ("visit", right), ("emit", (BINARY, COMPARISONS[str(op)]), node)]
    if kind in ("neg", "pos"):
        return [("visit", children[0]), ("emit", (UNARY, kind), node)]
    if kind == "conditional":
        value, condition, alternative = children
        otherwise, done = _Label(), _Label()
        return [
            ("visit", condition), ("emit", (JUMP_IF_FALSE, otherwise), condition),
            ("visit", value), ("emit", (JUMP, done), condition),
            ("label", otherwise), ("visit", alternative), ("label", done),
        ]
    if kind in ("call", "method"):
        if kind == "call":
            name, arguments = children
            head: list[tuple[Any, ...]] = []
        else:
            target, name, arguments = children
            head = [("visit", target)]
        positional, keywords = _split_arguments(arguments, places)
        if str(name).startswith("_"):
            raise LanguageError("safety", f"names starting with '_' cannot be called: {name!s}").at(places.span(name))
        arg = (str(name), len(positional), tuple(k for k, _ in keywords))
        return [*head, *_visit_all(positional), *_visit_all([v for _, v in keywords]), ("emit", (CALL if kind == "call" else METHOD, arg), node)]
    if kind == "attribute":
        target, name = children
        if str(name).startswith("_"):
            raise LanguageError("safety", f"attributes starting with '_' are not accessible: .{name!s}").at(places.span(name))
        return [("visit", target), ("emit", (ATTR, str(name)), node)]
    if kind == "index":
        target, *parts = children
        return [("visit", target), *_visit_all(parts), ("emit", (INDEX, len(parts)), node)]
    if kind == "slice":
        return [*_visit_all(list(children)), ("emit", (SLICE, None), node)]
    if kind == "tensor":
        items = [c for c in children if c is not None]
        return [*_visit_all(items), ("emit", (TENSOR, len(items)), node)]
    raise LanguageError("syntax", f"unsupported construct {kind}").at(places.span(node))


def _compile_statement(node: Tree, source: str, places: _Places) -> Statement:
    kind, children = node.data, node.children

    def compiled(expression: Any) -> list[Instruction]:
        return compile_expression(expression, places)

    code = compiled(children[-1]) if kind in ("expr_stmt", "assign", "multi_assign", "aug_assign") else []
    span = places.span(node) or (1, 1, 1, 1)
    text = source_text(source, span)
    if kind == "expr_stmt":
        return Statement("expr", code, span, text)
    if kind == "assign":
        return Statement("assign", code, span, text, targets=(str(children[0]),))
    if kind == "multi_assign":
        return Statement("assign", code, span, text, targets=tuple(str(n) for n in children[:-1]))
    if kind == "aug_assign":
        name, op, _ = children
        code = [(LOAD, str(name), places.span(name)), *code, (BINARY, AUGMENTED[str(op)], span)]
        return Statement("assign", code, span, text, targets=(str(name),))
    if kind == "funcdef":
        name, *params, body = children
        names = tuple(str(p) for p in params if p is not None)
        if len(set(names)) != len(names):
            raise LanguageError("syntax", f"a parameter name is repeated in def {name!s}").at(span)
        function = UserFunction(str(name), names, compiled(body), text)
        return Statement("def", [], span, text, targets=(str(name),), function=function)
    if kind == "check":
        expression, *rest = children
        wrt = tuple(str(t) for t in rest if isinstance(t, Token))
        options = {}
        for option in (t for t in rest if isinstance(t, Tree)):
            key, value = option.children
            options[str(key)] = (compiled(value), places.span(option) or span)
        code = compiled(expression)
        return Statement("check", code, span, source_text(source, places.span(expression) or span), wrt=wrt, options=options)
    raise LanguageError("syntax", f"unsupported statement {kind}").at(span)


def compile_program(source: str) -> Program:
    """Parse and compile `source`. Raises LanguageError with the place of the problem."""
    with collector_paused():  # parse trees and code hold no reference cycles
        tree = parse_tree(source)
        places = _Places(source)
        return Program(source, [_compile_statement(child, source, places) for child in tree.children if child is not None])
