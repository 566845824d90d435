"""Parse tree to a flat list of instructions, per statement.

The tree is walked with an explicit work stack, never by recursion, so 5000 levels of
nesting compile like any other input. The instructions run on the stack machine in
`machine.py`; a program is compiled once and can be run many times.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


def span_of(node: Tree | Token) -> Span:
    if isinstance(node, Token):
        return (node.line or 1, node.column or 1, node.end_line or node.line or 1, node.end_column or (node.column or 1) + len(node))
    meta = node.meta
    if getattr(meta, "empty", True):
        return (1, 1, 1, 1)
    return (meta.line, meta.column, meta.end_line, meta.end_column)


def source_text(source: str, span: Span) -> str:
    lines = source.split("\n")
    line, column, end_line, end_column = span
    if line == end_line:
        return lines[line - 1][column - 1 : end_column - 1]
    parts = [lines[line - 1][column - 1 :], *lines[line : end_line - 1], lines[end_line - 1][: end_column - 1]]
    return "\n".join(parts)


def _split_arguments(node: Tree | None) -> tuple[list[Any], list[tuple[str, Any]]]:
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
                raise LanguageError("syntax", f"keyword argument {name!s} given twice").at(span_of(arg))
            keywords.append((str(name), value))
        else:
            if keywords:
                raise LanguageError("syntax", "a positional argument cannot follow a keyword argument").at(span_of(arg))
            positional.append(arg)
    return positional, keywords


def compile_expression(root: Tree | Token) -> list[Instruction]:
    """Instructions that leave the value of `root` on the stack."""
    code: list[Instruction] = []
    work: list[tuple[str, Any]] = [("visit", root)]
    while work:
        task, item = work.pop()
        if task == "emit":
            code.append(item)
            continue
        if task == "label":
            item.target = len(code)
            continue
        tasks = _expand(item)
        work.extend(reversed(tasks))
    return [(op, arg.target, span) if isinstance(arg, _Label) else (op, arg, span) for op, arg, span in code]


def _visit_all(nodes: list[Any]) -> list[tuple[str, Any]]:
    return [("visit", n) if n is not None else ("emit", (NONE, None, (1, 1, 1, 1))) for n in nodes]


def _expand(node: Tree | Token) -> list[tuple[str, Any]]:
    """The tasks that compile one node: visit its children, then emit its instruction."""
    span = span_of(node)
    if isinstance(node, Token):  # only reached for a bare expression token
        raise LanguageError("syntax", f"unexpected {node!s}").at(span)
    kind, children = node.data, node.children
    if kind == "number":
        return [("emit", (CONST, float(children[0]), span))]
    if kind == "string":
        return [("emit", (STRING, str(children[0])[1:-1], span))]
    if kind in ("true", "false"):
        return [("emit", (CONST, 1.0 if kind == "true" else 0.0, span))]
    if kind == "name":
        return [("emit", (LOAD, str(children[0]), span))]
    if kind in BINARY_OPS:
        left, right = children[0], children[-1]
        return [("visit", left), ("visit", right), ("emit", (BINARY, BINARY_OPS[kind], span))]
    if kind == "compare":
        left, op, right = children
        return [("visit", left), ("visit", right), ("emit", (BINARY, COMPARISONS[str(op)], span))]
    if kind in ("neg", "pos"):
        return [("visit", children[0]), ("emit", (UNARY, kind, span))]
    if kind == "conditional":
        value, condition, alternative = children
        otherwise, done = _Label(), _Label()
        return [
            ("visit", condition), ("emit", (JUMP_IF_FALSE, otherwise, span_of(condition))),
            ("visit", value), ("emit", (JUMP, done, span)),
            ("label", otherwise), ("visit", alternative), ("label", done),
        ]
    if kind in ("call", "method"):
        if kind == "call":
            name, arguments = children
            head: list[tuple[str, Any]] = []
        else:
            target, name, arguments = children
            head = [("visit", target)]
        positional, keywords = _split_arguments(arguments)
        if str(name).startswith("_"):
            raise LanguageError("safety", f"names starting with '_' cannot be called: {name!s}").at(span)
        arg = (str(name), len(positional), tuple(k for k, _ in keywords))
        return [*head, *_visit_all(positional), *_visit_all([v for _, v in keywords]), ("emit", (CALL if kind == "call" else METHOD, arg, span))]
    if kind == "attribute":
        target, name = children
        if str(name).startswith("_"):
            raise LanguageError("safety", f"attributes starting with '_' are not accessible: .{name!s}").at(span_of(name))
        return [("visit", target), ("emit", (ATTR, str(name), span))]
    if kind == "index":
        target, *parts = children
        return [("visit", target), *_visit_all(parts), ("emit", (INDEX, len(parts), span))]
    if kind == "slice":
        return [*_visit_all(list(children)), ("emit", (SLICE, None, span))]
    if kind == "tensor":
        items = [c for c in children if c is not None]
        return [*_visit_all(items), ("emit", (TENSOR, len(items), span))]
    raise LanguageError("syntax", f"unsupported construct {kind}").at(span)


def _compile_statement(node: Tree, source: str) -> Statement:
    span = span_of(node)
    text = source_text(source, span)
    kind, children = node.data, node.children
    if kind == "expr_stmt":
        return Statement("expr", compile_expression(children[0]), span, text)
    if kind == "assign":
        name, value = children
        return Statement("assign", compile_expression(value), span, text, targets=(str(name),))
    if kind == "multi_assign":
        *names, value = children
        return Statement("assign", compile_expression(value), span, text, targets=tuple(str(n) for n in names))
    if kind == "aug_assign":
        name, op, value = children
        code = [(LOAD, str(name), span_of(name)), *compile_expression(value), (BINARY, AUGMENTED[str(op)], span)]
        return Statement("assign", code, span, text, targets=(str(name),))
    if kind == "funcdef":
        name, *params, body = children
        names = tuple(str(p) for p in params if p is not None)
        if len(set(names)) != len(names):
            raise LanguageError("syntax", f"a parameter name is repeated in def {name!s}").at(span)
        function = UserFunction(str(name), names, compile_expression(body), text)
        return Statement("def", [], span, text, targets=(str(name),), function=function)
    if kind == "check":
        expression, *rest = children
        wrt = tuple(str(t) for t in rest if isinstance(t, Token))
        options = {}
        for option in (t for t in rest if isinstance(t, Tree)):
            key, value = option.children
            options[str(key)] = (compile_expression(value), span_of(option))
        return Statement("check", compile_expression(expression), span, source_text(source, span_of(expression)), wrt=wrt, options=options)
    raise LanguageError("syntax", f"unsupported statement {kind}").at(span)


def compile_program(source: str) -> Program:
    """Parse and compile `source`. Raises LanguageError with the place of the problem."""
    tree = parse_tree(source)
    return Program(source, [_compile_statement(child, source) for child in tree.children if child is not None])
