"""Readable derivative rules for ops, for showing the backward pass step by step.

An op may carry its rule as text (`defop(..., rule="g * [x > 0]")`). Most do not: their
rule is read from the VJP itself, so the text can never disagree with the code that
runs. A lambda VJP's body is located exactly with the code object's instruction
positions (Python 3.11's `co_positions`; several lambdas often share one line), a
`def` VJP's from its final `return`, with single assignments before it inlined. The
plumbing that makes one VJP serve first and higher order is then stripped:
`m.raw(x)` reads `x`, `masked(m, g, out)` reads `out`, `m.cos(x)` reads `cos(x)`, `np.sign` reads `sign`, and a
helper's leading `m` argument and underscore go.

    relu:  lambda m, g, ans, x: g * (m.raw(x) > 0)     reads   g * (x > 0)
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable
from functools import lru_cache
from typing import Any

NO_RULE = "(no rule text)"
NO_GRADIENT = "no gradient"
_PLUMBING = ("m", "np", "ARRAY_MATH", "TENSOR_MATH")


def rule_text(op: Any) -> str:
    """`name: rule` for one op, every input's rule when it has several inputs."""
    return f"{op.name}: {op_rule(op)}"


def op_rule(op: Any) -> str:
    """The op's derivative rule without its name: the explicit `rule` when given, else
    one rule per input read from the VJPs (`a: g * b;  b: g * a`)."""
    explicit = getattr(op, "rule", None)
    if explicit:
        return explicit
    if op.vjps is None:
        return NO_GRADIENT
    if callable(op.vjps):  # one VJP for any number of inputs, told which by k
        return vjp_rule(op.vjps)
    names = input_names(op)
    parts = [f"{name}: {vjp_rule(vjp) if vjp is not None else NO_GRADIENT}" for name, vjp in zip(names, op.vjps)]
    return parts[0].split(": ", 1)[1] if len(parts) == 1 else ";  ".join(parts)


def input_rule(op: Any, k: int) -> str:
    """The rule for input k alone. An explicit rule written per input (`a: ...;  b: ...`)
    gives that input's part; otherwise the whole explicit rule."""
    explicit = getattr(op, "rule", None)
    if explicit:
        names = input_names(op)
        parts = dict(part.split(": ", 1) for part in explicit.split(";  ") if ": " in part)
        return parts.get(names[k], explicit) if k < len(names) else explicit
    vjp = op.vjp_for(k) if op.vjps is not None else None
    return vjp_rule(vjp) if vjp is not None else NO_GRADIENT


def input_names(op: Any) -> list[str]:
    """The names the VJPs give the op's tensor inputs (after m, g, ans)."""
    vjps = op.vjps if isinstance(op.vjps, tuple) else ()
    for vjp in vjps:
        if vjp is not None:
            try:
                params = list(inspect.signature(vjp).parameters)[3:]
            except (TypeError, ValueError):
                break
            if op.n_in is not None and len(params) >= op.n_in:
                return params[: op.n_in]
    return [f"input {k}" for k in range(op.n_in or 1)]


@lru_cache(maxsize=None)
def vjp_rule(vjp: Callable[..., Any]) -> str:
    """The readable expression a VJP computes, or NO_RULE when its source is unavailable."""
    try:
        expr = _lambda_body(vjp) if vjp.__name__ == "<lambda>" else _def_result(vjp)
    except (OSError, TypeError, SyntaxError, ValueError, AttributeError):
        return NO_RULE
    if expr is None:
        return NO_RULE
    return ast.unparse(_Readable().visit(expr)) or NO_RULE


def _lambda_body(fn: Callable[..., Any]) -> ast.expr | None:
    code = fn.__code__
    if not hasattr(code, "co_positions"):  # Python 3.10: only a lambda alone on its line
        return _only_lambda_on_line(code)
    import dis

    spans = [
        ins.positions for ins in dis.get_instructions(code)
        if ins.positions is not None and ins.positions.lineno is not None and ins.positions.end_col_offset
    ]
    if not spans:
        return None
    start = min((p.lineno, p.col_offset) for p in spans)
    end = max((p.end_lineno, p.end_col_offset) for p in spans)
    lines = [linecache.getline(code.co_filename, n) for n in range(start[0], end[0] + 1)]
    if not all(lines):
        return None
    lines[-1] = lines[-1][: end[1]]
    lines[0] = lines[0][start[1] :]
    return ast.parse("\n".join(line.rstrip("\n") for line in lines).strip(), mode="eval").body


def _only_lambda_on_line(code: Any) -> ast.expr | None:
    source = "".join(linecache.getlines(code.co_filename))
    found = [
        node for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno
    ]
    return found[0].body if len(found) == 1 else None


def _def_result(fn: Callable[..., Any]) -> ast.expr | None:
    """The final return expression, with names assigned once before it inlined."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    returns = [s for s in func.body if isinstance(s, ast.Return) and s.value is not None]
    if not returns:
        return None
    # Only assignments at the top of the body count: one inside an `if` adjusts a
    # special case (a 1-d operand, say) and would hide the general rule.
    assigned: dict[str, ast.expr] = {}
    counts: dict[str, int] = {}
    for statement in func.body:
        if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        counts[name.id] = counts.get(name.id, 0) + 1
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
                assigned[statement.targets[0].id] = statement.value
    once = {name: value for name, value in assigned.items() if counts.get(name) == 1}
    return _Inline(once).visit(returns[-1].value)


class _Inline(ast.NodeTransformer):
    """Replace names assigned once by the expression assigned (one level at a time, so
    that a chain of assignments unfolds in order)."""

    def __init__(self, values: dict[str, ast.expr]) -> None:
        self.values = values
        self.active: set[str] = set()

    def visit_Name(self, node: ast.Name) -> ast.AST:
        value = self.values.get(node.id)
        if value is None or node.id in self.active:
            return node
        self.active.add(node.id)
        try:
            return self.visit(_copy(value))
        finally:
            self.active.discard(node.id)


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body


class _Readable(ast.NodeTransformer):
    """Strip the plumbing: m.raw(x) -> x, m.f(...) -> f(...), np.f -> f, helper(m, ...)
    -> helper(...), _helper -> helper."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "m" and func.attr == "raw" and len(node.args) == 1:
            return self.visit(node.args[0])
        # masked(m, g, out) only keeps a zero upstream gradient from turning into nan
        # (where()'s branch not taken); the rule it applies is `out`.
        if isinstance(func, ast.Name) and func.id == "masked" and len(node.args) == 3:
            return self.visit(node.args[2])
        # gate(m, g, factor) is g * factor, kept exactly 0 where the factor is 0.
        if isinstance(func, ast.Name) and func.id == "_gate" and len(node.args) == 3:
            return self.visit(ast.BinOp(left=node.args[1], op=ast.Mult(), right=node.args[2]))
        if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "m":
            node.args = node.args[1:]
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in _PLUMBING:
            return ast.Name(id=node.attr.lstrip("_") or node.attr, ctx=ast.Load())
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id.startswith("_") and node.id.strip("_"):
            return ast.Name(id=node.id.lstrip("_"), ctx=node.ctx)
        return node
