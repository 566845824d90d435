"""Parse tree to a flat list of instructions, per statement.

The tree is walked with an explicit work stack, never by recursion, so 5000 levels of
nesting compile like any other input. The instructions run on the stack machine in
`machine.py`; a program is compiled once and can be run many times.
"""
from __future__ import annotations

import bisect
import math
import re
from typing import Any

from gradcalc.autodiff import collector_paused

from .builtins import BUILTINS
from .errors import LanguageError, Span, too_large
from .habits import prefixed
from .records import Record
from .syntax import KEYWORDS, Node, Range, Token, parse_recovering, parse_statements

# Opcodes. Each instruction is (opcode, argument, span).
CONST, STRING, NONE, LOAD, BINARY, UNARY, CALL, METHOD, ATTR, INDEX, SLICE, TENSOR = range(12)
# CALL_VALUE calls the value under its arguments (grad(f)(3)); FUNCTION makes a lambda's value.
# A jump's argument is an offset from the instruction after it (the machine does pc += offset),
# never an absolute place: code that holds jumps stays right wherever it is put, after a
# prefix, concatenated with other code (a rule's tuple, an update's LOAD), so no construct
# can get a target wrong. compile_expression is the only place that writes offsets.
JUMP_IF_FALSE, JUMP = 12, 13
TUPLE = 14  # the top n values as one tuple of results: what a vjp rule's `(gx, gy)` gives
CALL_VALUE, FUNCTION = 15, 16

Instruction = tuple[int, Any, Span | None]  # (no span: an instruction the source has no place for)

BINARY_OPS = frozenset({"add", "sub", "mul", "div", "matmul", "pow", "floor_divide", "remainder"})  # nodes named as their ops
COMPARISONS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
AUGMENTED = {"+=": "add", "-=": "sub", "*=": "mul", "/=": "div", "//=": "floor_divide", "%=": "remainder", "**=": "pow", "@=": "matmul"}
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@", "pow": "**", "floor_divide": "//", "remainder": "%",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "neg": "-", "pos": "+"}


# Words that cannot name a variable, a function or a parameter: the keywords, None,
# which stands for NumPy's new axis in an index (x[None]), and Python's True and False
# (constants: they mean true and false).
RESERVED = KEYWORDS | {"None", "True", "False"}


def refuse_reserved(name: str) -> None:
    if name in RESERVED:
        raise LanguageError("name", f"'{name}' is a keyword of the language and cannot be used as a name; choose another")


def _refuse_reserved_at(names: Any, places: _Places) -> None:
    """A keyword as an assignment's target or a def's name or parameter: refused at the
    name itself (the parser reads a keyword as a name where only a name fits)."""
    for name in names:
        if name is not None and name in RESERVED:
            try:
                refuse_reserved(str(name))
            except LanguageError as err:
                raise err.at(places.span(name)) from None


LAMBDA = "lambda"  # the name a lambda's UserFunction goes by


class UserFunction(Record):
    """A `def` or a `lambda`: its code, its text, and the source it was compiled from (the
    places in its code count lines and columns there). A lambda's name is LAMBDA. `rule`
    is the derivative rule a `vjp` statement gave a def (user_rules.Rule), None for none:
    a session binds a copy of the function that has one, so the compiled `def` itself
    never changes."""

    __slots__ = ("name", "params", "code", "text", "source", "rule")

    def __init__(self, name: str, params: tuple[str, ...], code: list[Instruction], text: str, source: str = "", rule: Any = None) -> None:
        self.name, self.params, self.code, self.text, self.source, self.rule = name, params, code, text, source, rule

    @property
    def signature(self) -> str:
        """How messages name it: f(x, y), or <lambda x, y>."""
        if self.name == LAMBDA:
            return f"<lambda {', '.join(self.params)}>" if self.params else "<lambda>"
        return f"{self.name}({', '.join(self.params)})"


class Statement(Record):
    """One statement. kind: expr, assign, unpack (`a, b = ...`), update (an augmented assignment, `w -= ...`:
    its code computes `w - ...`), def, vjp (a derivative rule for a def: `function` is
    the rule, its parameters the def's and the cotangent, `places` where the function's
    name and the parameters are written), check, for (a loop), no_grad (a `with no_grad:`
    block), or error (a statement that did not compile, kept in its place by
    `compile_program(..., recover=True)`).

    `text` is the statement's source text exactly as written (for a check, its expression).
    `options` are a check's options (name -> code and span); `expected` is B's code in
    `check A == B` (A's is `code`).
    """

    __slots__ = ("kind", "code", "span", "text", "targets", "function", "wrt", "options", "error", "expected", "body", "bounds", "places", "over")

    def __init__(
        self, kind: str, code: list[Instruction], span: Span, text: str, targets: tuple[str, ...] = (),
        function: UserFunction | None = None, wrt: tuple[str, ...] = (),
        options: dict[str, tuple[list[Instruction], Span]] | None = None, error: LanguageError | None = None,
        expected: list[Instruction] | None = None, body: list[Statement] | None = None,
        bounds: list[tuple[list[Instruction], Span]] | None = None, places: tuple[Span, ...] = (),
    ) -> None:
        self.kind, self.code, self.span, self.text, self.targets = kind, code, span, text, targets
        self.function, self.wrt, self.options = function, wrt, {} if options is None else options
        self.error, self.expected = error, expected
        # A loop (kind "for") or a `with no_grad:` block: the statements of its body; a
        # loop's code and place of each argument of its range(...).
        self.body: list[Statement] = [] if body is None else body
        self.bounds: list[tuple[list[Instruction], Span]] = [] if bounds is None else bounds
        self.places = places
        # A loop over a value (`for row in X`): the value's code, its place and its text;
        # None for a loop over range(...), whose arguments are `bounds`.
        self.over: tuple[list[Instruction], Span, str] | None = None


class Program(Record):
    __slots__ = ("source", "statements")

    def __init__(self, source: str, statements: list[Statement]) -> None:
        self.source, self.statements = source, statements


class _Places:
    """Where nodes sit in the source, as spans: every node and token carries its start
    and end offsets (the parser's, driver.py); this turns them into lines and columns."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.line_starts = [0, *(match.end() for match in re.finditer("\n", source))]
        self.line: tuple[Any, float, int] = (0, self.line_starts[1] if len(self.line_starts) > 1 else math.inf, 1)

    def span(self, node: Node | Token | None) -> Span | None:
        return None if node is None else self.range_span(node.start, node.end)

    def range_span(self, start: int, end: int) -> Span:
        """The span from offset `start` to offset `end`."""
        first, after, line = self.line  # the line of the last span: most spans in a row share one
        if first <= start and end < after:
            return line, start - first + 1, line, end - first + 1
        line_starts = self.line_starts
        line, end_line = bisect.bisect_right(line_starts, start), bisect.bisect_right(line_starts, end)
        if line == end_line:
            self.line = line_starts[line - 1], line_starts[line] if line < len(line_starts) else math.inf, line
        return line, start - line_starts[line - 1] + 1, end_line, end - line_starts[end_line - 1] + 1


def _check_text(source: str, node: Node, start: int, end: int) -> str:
    """The expression of `check EXPR [wrt ...] [options]`: the statement's text after
    `check`, up to `wrt` or the first option (found from their tokens' positions)."""
    start += len("check")
    for part in node.children[1:]:
        if part is not None:
            end = part.start
            before = source[start:end].rstrip()
            if isinstance(part, Token) and before.endswith("wrt"):
                end = start + len(before) - len("wrt")
            break
    return source[start:end].strip()


def _split_arguments(node: Node | None, places: _Places) -> tuple[list[Any], list[tuple[str, Any]]]:
    if node is None:
        return [], []
    positional: list[Any] = []
    keywords: list[tuple[str, Any]] = []
    for arg in node.children:
        if arg is None:
            continue
        if isinstance(arg, Node) and arg.kind == "keyword":
            name, value = arg.children
            if name in [k for k, _ in keywords]:
                raise LanguageError("syntax", f"{name!s}= is given twice; give each parameter once").at(places.span(name))
            keywords.append((str(name), value))
        else:
            if keywords:
                raise LanguageError("syntax", "an argument without a name cannot follow a named one (name=value)").at(places.span(arg))
            positional.append(arg)
    return positional, keywords


_LABEL = -1  # the work stack's task that marks a jump target (opcodes are >= 0)
# A lambda's body is compiled into code of its own: _BODY starts that code, _BODY_END
# gives it to the lambda's UserFunction and goes back to the code around it.
_BODY, _BODY_END = -2, -3
# A task on the work stack: a node to compile (a Node or Token), (opcode, argument, node)
# to emit an instruction placed where `node` is, or (_LABEL, label, None).
Task = Any


def compile_expression(root: Node | Token, places: _Places) -> list[Instruction]:
    """Instructions that leave the value of `root` on the stack.

    Jumps are relative (see JUMP): the code may be put after other code or joined to it.

    Tasks on the work stack: a node expands into tasks for its children and its own
    instruction; (opcode, argument, node) emits an instruction placed where `node` is
    (its children are done by then); (_LABEL, label, None) marks a jump target.
    """
    code: list[Instruction] = []
    jumps: list[int] = []  # where the instructions are whose argument is a label
    around: list[tuple[list[Instruction], list[int]]] = []  # the code a lambda's body is inside
    work: list[Task] = [root]
    span = places.range_span
    while work:
        task = work.pop()
        if task.__class__ is not tuple:  # a node (the tasks are tuples, nodes never are)
            # The two commonest nodes, done here as _expand would, without its call:
            if task.__class__ is Node:
                kind, children = task.kind, task.children
                if kind == "name" and children[0].__class__ is Token:  # (LOAD, name), placed where its token is
                    token = children[0]
                    code.append((LOAD, str(token), span(token.start, token.end)))
                    continue
                if kind in BINARY_OPS:
                    work += ((BINARY, kind, task), children[-1], children[0])
                    continue
            tasks = _expand(task, places)
            if len(tasks) > 1:
                work += reversed(tasks)
                continue
            task = tasks[0]  # a name or a number: its instruction, now
        op, arg, node = task
        if op < 0:
            if op == _LABEL:
                arg[0] = len(code)
            elif op == _BODY:
                around.append((code, jumps))
                code, jumps = [], []
            else:  # _BODY_END
                arg.code = _resolved(code, jumps)
                code, jumps = around.pop()
            continue
        if op == JUMP_IF_FALSE or op == JUMP:  # a jump: its target is known once the label is met
            jumps.append(len(code))
        code.append((op, arg, None if node is None else span(node.start, node.end)))
    return _resolved(code, jumps)


def _resolved(code: list[Instruction], jumps: list[int]) -> list[Instruction]:
    """`code` with each jump's label replaced by the offset from the instruction after the
    jump to the label (both in `code`: a lambda's body is code of its own)."""
    for i in jumps:
        op, label, where = code[i]
        code[i] = (op, label[0] - (i + 1), where)
    return code


def _primals(node: Any, places: _Places) -> list[Task]:
    """The tasks of one argument of jvp or hvp: a tuple in parentheses as a tuple of its
    items (brackets stay a tensor: [1, 2] is one primal)."""
    if _is_literal(node) and places.source[node.start] == "(":
        items = [c for c in node.children if c is not None]
        return [*items, (TUPLE, len(items), node)]
    return _visit_all([node])


def _is_literal(node: Any) -> bool:
    return node.__class__ is Node and node.kind == "tensor" and any(c is not None for c in node.children)


def _visit_all(nodes: list[Any]) -> list[Task]:
    return [(NONE, None, None) if n is None else n for n in nodes]


def _number(text: str) -> float:
    """A number literal's value: decimal (1_000, 2.5e-3) or a whole number in base 16, 2 or 8."""
    if text[1:2] not in ("x", "X", "b", "B", "o", "O"):
        return float(text)
    try:
        return float(int(text, 0))
    except OverflowError:
        raise LanguageError("syntax", too_large("this number")) from None


def _dotted(target: Any, last: Token, whole: Node, called: bool) -> list[Task] | None:
    """The tasks that compute `target` of `target.last` when the dotted name starts with a
    module's prefix (`np.sin`, `torch.nn.functional.relu`: habits.prefixed): its first word
    loaded as a Prefixed, placed over the whole dotted name, then the words between. Else None."""
    words, attributes, node = [str(last)], [], target
    while node.__class__ is Node and node.kind == "attribute":
        attributes.append(node)
        words.append(str(node.children[1]))
        node = node.children[0]
    if not (node.__class__ is Node and node.kind == "name" and node.children[0].__class__ is Token):
        return None
    words.append(str(node.children[0]))
    first = prefixed(words[-1], words[::-1], called)
    if first is None:
        return None
    return [(LOAD, first, whole), *((ATTR, str(a.children[1]), a) for a in reversed(attributes))]


def _expand(node: Node | Token, places: _Places) -> list[Task]:
    """The tasks that compile one node: visit its children, then emit its instruction."""
    if isinstance(node, Token):  # only reached for a bare expression token
        raise LanguageError("syntax", f"unexpected {node!s}").at(places.span(node))
    kind, children = node.kind, node.children
    if kind == "name":
        return [(LOAD, str(children[0]), node)]
    if kind in BINARY_OPS:
        return [children[0], children[-1], (BINARY, kind, node)]
    if kind == "number":
        if not children[0].isascii():  # the lexer's \d also matches other scripts' digits
            raise LanguageError("syntax", f"{children[0]!s} is not a number: numbers are written with the digits 0-9").at(places.span(node))
        try:
            return [(CONST, _number(str(children[0])), node)]
        except LanguageError as err:
            raise err.at(places.span(node)) from None
    if kind == "string":
        return [(STRING, str(children[0])[1:-1], node)]
    if kind in ("true", "false"):
        return [(CONST, 1.0 if kind == "true" else 0.0, node)]
    if kind == "compare":
        left, op, right = children
        return [left, right, (BINARY, COMPARISONS[str(op)], node)]
    if kind in ("neg", "pos"):
        return [children[0], (UNARY, kind, node)]
    if kind == "conditional":
        value, condition, alternative = children
        otherwise, done = [-1], [-1]  # labels: each a jump's target, set where the label is met
        return [
            condition, (JUMP_IF_FALSE, otherwise, condition),
            value, (JUMP, done, condition),
            (_LABEL, otherwise, None), alternative, (_LABEL, done, None),
        ]
    if kind == "call":
        # f(x) calls by name, x.relu() is a method; any other callee is a value (grad(f)(3)).
        callee, arguments = children
        if callee.__class__ is Node and (callee.kind == "number" or callee.kind in BINARY_OPS):  # 2(x + 1), (a + b)(c + d)
            shown = places.source[callee.start : callee.end] if callee.kind == "number" else "(...)"
            raise LanguageError("syntax", f"a product is written with *: {shown} * (...), not {shown}(...)").at(places.span(node))
        positional, keywords = _split_arguments(arguments, places)
        values = [*_visit_all(positional), *_visit_all([v for _, v in keywords])]
        named = tuple(k for k, _ in keywords)
        if callee.__class__ is Node and callee.kind in ("name", "attribute") and callee.children[-1].kind == "NAME":
            name = callee.children[-1]
            if str(name).startswith("_"):
                raise LanguageError("safety", f"names starting with '_' cannot be called: {name!s}").at(places.span(name))
            builtin = BUILTINS.get(str(name)) if callee.kind == "name" else None
            if callee.kind == "name":
                # (the built-in table's forms: builtins.py) grad(y, x), jacobian(y, x), hessian(y, x):
                # a list or tuple written as x lists variables. jvp(f, primals, tangents), hvp(...):
                # a tuple written in place, `(x, y)` or `(x,)`, is JAX's tuple of primals (or
                # tangents), where elsewhere a tuple literal is a tensor.
                if builtin is not None and builtin.expression and len(positional) == 2 and _is_literal(positional[1]):
                    # grad(L, (W1, b1)): the variables themselves, as a tuple, not a tensor stacked of them
                    items = [c for c in positional[1].children if c is not None]
                    values = [*_visit_all(positional[:1]), *items, (TUPLE, len(items), positional[1]),
                              *_visit_all([v for _, v in keywords])]
                elif builtin is not None and builtin.primals:
                    # jvp(f, (x,), (v,)): a tuple written there lists the primals and the tangents, as JAX's
                    values = [*(part for p in positional for part in _primals(p, places)), *_visit_all([v for _, v in keywords])]
                return [*values, (CALL, (str(name), len(positional), named), node)]
            target = _dotted(callee.children[0], name, callee, called=True) or [callee.children[0]]
            return [*target, *values, (METHOD, (str(name), len(positional), named), node)]
        return [callee, *values, (CALL_VALUE, (len(positional), named), node)]
    if kind == "lambda":
        *params, body = children
        _refuse_reserved_at(params, places)
        names = tuple(str(p) for p in params if p is not None)
        if len(set(names)) != len(names):
            raise LanguageError("syntax", "a parameter name is repeated in the lambda").at(places.span(node))
        function = UserFunction(LAMBDA, names, [], places.source[node.start : node.end], places.source)
        return [(_BODY, None, None), body, (_BODY_END, function, None), (FUNCTION, function, node)]
    if kind == "attribute":
        target, name = children
        if str(name).startswith("_"):
            raise LanguageError("safety", f"attributes starting with '_' are not accessible: .{name!s}").at(places.span(name))
        return [*(_dotted(target, name, node, called=False) or [target]), (ATTR, str(name), node)]
    if kind == "index":
        target, *parts = children
        return [target, *_visit_all(parts), (INDEX, len(parts), node)]
    if kind == "slice":
        if all(c is None for c in children):  # `:` and `::`, the commonest: the slice itself, made once
            return [(SLICE, slice(None), node)]
        return [*_visit_all(list(children)), (SLICE, None, node)]
    if kind == "tensor":
        items = [c for c in children if c is not None]
        return [*_visit_all(items), (TENSOR, len(items), node)]
    raise LanguageError("syntax", f"unsupported construct {kind}").at(places.span(node))


def _compile_statement(node: Node, source: str, places: _Places, where: Range) -> Statement:
    kind, children = node.kind, node.children

    def compiled(expression: Any) -> list[Instruction]:
        return compile_expression(expression, places)

    if kind == "for_loop":
        return _compile_loop(node, source, places, where)
    if kind == "with_block":
        return _compile_with(node, source, places, where)
    if kind == "multi_assign":
        return _compile_unpacking(node, source, places, where)
    if kind in ("assign", "aug_assign"):
        _refuse_reserved_at(children[:1], places)
    elif kind == "funcdef":
        _refuse_reserved_at(children[:-1], places)
    elif kind == "rule_def":
        return _compile_rule(node, source, places, where)
    code = compiled(children[-1]) if kind in ("expr_stmt", "assign") else []
    start, end = where
    span = places.range_span(start, end)
    text = source[start:end]
    if kind == "expr_stmt":
        return Statement("expr", code, span, text)
    if kind == "assign":
        return Statement("assign", code, span, text, targets=(str(children[0]),))
    if kind == "aug_assign":
        name, op, value = children
        code = [(LOAD, str(name), places.span(name)), *compiled(value), (BINARY, AUGMENTED[str(op)], span)]
        return Statement("update", code, span, text, targets=(str(name),))
    if kind == "funcdef":
        name, *params, body = children
        names = tuple(str(p) for p in params if p is not None)
        if len(set(names)) != len(names):
            raise LanguageError("syntax", f"a parameter name is repeated in def {name!s}").at(span)
        function = UserFunction(str(name), names, compiled(body), text, source)
        return Statement("def", [], span, text, targets=(str(name),), function=function)
    if kind == "check":
        expression, *rest = children
        wrt = tuple(str(t) for t in rest if isinstance(t, Token))
        options = {}
        for option in (t for t in rest if isinstance(t, Node)):
            key, value = option.children
            options[str(key)] = (compiled(value), places.span(option) or span)
        expected = None
        if isinstance(expression, Node) and expression.kind == "compare" and str(expression.children[1]) == "==":
            if wrt:
                raise LanguageError("syntax", "check A == B compares values: it takes no wrt").at(span)
            expression, expected = expression.children[0], compiled(expression.children[2])
        code = compiled(expression)
        text = _check_text(source, node, start, end)
        return Statement("check", code, span, text, wrt=wrt, options=options, expected=expected)
    raise LanguageError("syntax", f"unsupported statement {kind}").at(span)


RULE_KINDS = ("vjp",)  # the derivative rules a user may write for a def


def _compile_rule(node: Node, source: str, places: _Places, where: Range) -> Statement:
    """`vjp f(x, y, g) = expr`: the rule is compiled as a function of the def's parameters
    and the cotangent. The parser takes any two names in a row here (`vjp` stays an
    ordinary name elsewhere); that the first is `vjp` is checked now."""
    word, name, *params, body = node.children
    if str(word) not in RULE_KINDS:
        raise LanguageError("syntax", f"a statement that starts with two names is a derivative rule, vjp {name!s}(...) = ...; "
                            f"'{word!s}' is not one").at(places.span(word))
    _refuse_reserved_at([name, *params], places)
    names = tuple(str(p) for p in params if p is not None)
    if len(set(names)) != len(names):
        raise LanguageError("syntax", f"a parameter name is repeated in vjp {name!s}").at(places.span(node))
    start, end = where
    text = source[start:end]
    named = [p for p in params if p is not None]
    listed = places.range_span(named[0].start, named[-1].end) if named else places.range_span(name.end, body.start)
    # `(gx, gy)`, one gradient per parameter, is a tuple of results here, where elsewhere a
    # tuple literal is a tensor (reshape(W, (3, 2))); each is placed where it is written.
    items = [c for c in body.children if c is not None] if body.kind == "tensor" and source[body.start] == "(" else []
    if items:
        code = [instruction for item in items for instruction in compile_expression(item, places)]
        code.append((TUPLE, len(items), places.range_span(body.start, body.end)))
    else:
        code = compile_expression(body, places)
        items = [body]
    rule = UserFunction(f"vjp {name!s}", names, code, text, source)
    where_written = (places.range_span(name.start, name.end), listed, places.range_span(body.start, body.end),
                     *(places.range_span(item.start, item.end) for item in items))
    return Statement("vjp", [], places.range_span(start, end), text, targets=(str(name),), function=rule, places=where_written)


def _listed(node: Any) -> list[Any] | None:
    """The items of a list or tuple literal written in place (`[a, b]`, `(W1, b1)`), else
    None: on the right of `a, b = ...` and after `for v in`, Python's sequence of them (not
    a tensor stacked of them, so each keeps its own shape and graph)."""
    if _is_literal(node):
        return [c for c in node.children if c is not None]
    return None


def _sequence_code(values: list[Any], places: _Places) -> list[Instruction]:
    """Code that leaves the values of `values` as one tuple (a single value that is a
    list written in place gives its items; any other single value is left as it is)."""
    items = _listed(values[0]) if len(values) == 1 else values
    if items is None:
        return compile_expression(values[0], places)
    code = [instruction for item in items for instruction in compile_expression(item, places)]
    first, last = values[0], values[-1]
    return [*code, (TUPLE, len(items), places.range_span(first.start, last.end))]


def _compile_unpacking(node: Node, source: str, places: _Places, where: Range) -> Statement:
    """`a, b = expr` (a tuple of results, or a tensor unpacked along its first axis),
    `a, b = x, y` and `a, b = [x, y]` (the values themselves, as Python's tuple), `g, = expr`."""
    names = [c for c in node.children if isinstance(c, Token)]
    values = [c for c in node.children if isinstance(c, Node)]
    _refuse_reserved_at(names, places)
    start, end = where
    code = _sequence_code(values, places)
    return Statement("unpack", code, places.range_span(start, end), source[start:end], targets=tuple(map(str, names)))


def _range_call(node: Any) -> Node | None:
    """`range(...)` as a loop's header writes it (a built-in with `loop`: builtins.py), else None."""
    if node.__class__ is Node and node.kind == "call":
        callee = node.children[0]
        if callee.__class__ is Node and callee.kind == "name" and callee.children[0] in BUILTINS and BUILTINS[callee.children[0]].loop:
            return node
    return None


def _compile_loop(node: Node, source: str, places: _Places, where: Range) -> Statement:
    """`for NAME in range(...): body` (range's arguments are the loop's bounds) or `for
    NAME in EXPR: body` (its rows or items, in `over`): the body's statements, each
    compiled as at the top (a loop may hold loops)."""
    name, over, *body = node.children
    _refuse_reserved_at([name], places)
    statements = _compile_body(body, source, places, "a loop: check once the loop has run")
    start, end = where
    call = _range_call(over)
    if call is None:
        loop = Statement("for", [], places.range_span(start, end), source[start:end], targets=(str(name),), body=statements)
        loop.over = (_sequence_code([over], places), places.range_span(over.start, over.end), source[over.start : over.end])
        return loop
    arguments = call.children[1]
    positional, keywords = _split_arguments(arguments, places)
    if keywords:
        raise LanguageError("argument", "range takes its bounds by position: range(stop), range(start, stop) or range(start, stop, step)").at(
            places.span(keywords[0][1]))
    if not 1 <= len(positional) <= 3:
        raise LanguageError("argument", f"range takes 1 to 3 whole numbers (stop; start, stop; start, stop, step), got {len(positional)}").at(
            places.span(call))
    bounds = [(compile_expression(p, places), places.range_span(p.start, p.end)) for p in positional]
    return Statement("for", [], places.range_span(start, end), source[start:end], targets=(str(name),), body=statements, bounds=bounds)


NO_GRAD = "no_grad"  # the one context a `with` block takes


def _compile_with(node: Node, source: str, places: _Places, where: Range) -> Statement:
    """`with no_grad:` (or `with no_grad():`) and its block: the body's statements."""
    name, *body = node.children
    if name != NO_GRAD:
        raise LanguageError("syntax", f"with takes no_grad, as in `with no_grad:` (a block that records no graph), not {name!s}").at(
            places.span(name))
    start, end = where
    statements = _compile_body(body, source, places, "a no_grad block: check after the block")
    return Statement(NO_GRAD, [], places.range_span(start, end), source[start:end], body=statements)


def _compile_body(body: list[Node], source: str, places: _Places, where: str) -> list[Statement]:
    """The statements of a block, each compiled as at the top (a block may hold blocks);
    a check is refused (`where` says where it is and what to do)."""
    statements = []
    for inner in body:
        if inner.kind == "check":
            raise LanguageError("syntax", f"a check cannot be inside {where}").at(places.span(inner))
        statements.append(_compile_statement(inner, source, places, (inner.start, inner.end)))
    return statements


def compile_program(source: str, recover: bool = False) -> Program:
    """Parse and compile `source`. Raises LanguageError with the place of the problem.

    With `recover`, a statement that does not parse or compile becomes an "error"
    statement in its place (running it raises its error) and the others compile as usual:
    what a check file needs, where one mistake must not hide the other checks.
    """
    # Parse trees and code hold no reference cycles. The tree is freed before the collector
    # resumes (when _compile returns), or the collector's next pass would visit every node.
    with collector_paused():
        return _compile(source, recover)


def _compile(source: str, recover: bool) -> Program:
    places = _Places(source)
    tree, ranges, bad = parse_recovering(source) if recover else (*parse_statements(source), [])
    nodes = [child for child in tree.children if child is not None]
    statements: list[tuple[int, Statement]] = []
    for node, where in zip(nodes, ranges):
        try:
            statements.append((where[0], _compile_statement(node, source, places, where)))
        except LanguageError as err:
            if not recover:
                raise
            span = places.range_span(*where)
            statements.append((where[0], Statement("error", [], span, source[where[0] : where[1]], error=err.at(span))))
    for b in bad:
        text = source[b.start : b.end].strip()
        span = places.range_span(b.start, b.start + len(text))
        statements.append((b.start, Statement("error", [], span, text, error=b.error)))
    statements.sort(key=lambda item: item[0])
    return Program(source, [statement for _, statement in statements])
