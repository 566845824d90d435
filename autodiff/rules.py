"""Readable derivative rules for ops, for showing the backward pass step by step.

An op may carry its rule as text (`defop(..., rule="g * [x > 0]")`). Most do not: their
rule is read from the VJP itself, so the text can never disagree with the code that
runs. A lambda VJP's body is located exactly with the code object's instruction
positions (Python 3.11's `co_positions`; several lambdas often share one line), a
`def` VJP's from its final `return`, with names assigned before it inlined (or, when
used twice, said after `where`). The plumbing is then stripped: what makes one VJP
serve first and higher order (`m.raw(x)` reads `x`, `m.cos(x)` reads `cos(x)`,
`np.sign` reads `sign`, a helper's leading `m` and underscore go), and the guards
that keep nan and inf exact without changing the math (`masked`, `gate`,
`where(isnan(x), nan, ...)`, a special case chosen by `.any()`). A one-line helper
with a short formula reads as that formula. An explicit rule may be given per input
(`a: ...;  b: ...`), and then each input's part is its rule.

    relu:  return _gate(m, g, _relu_slope(m.raw(x)))   reads   g * (x > 0)

A VJP with a fast path for plain backward passes (`if m is ARRAY_MATH ...: return ...`)
reads as its final return, the general formula.

Forward mode's rules (`jvp_rule`) are made from the same texts: an elementwise op's JVP
is its VJP with the tangent in place of g (`relu: dx * (x > 0)`).
"""
from __future__ import annotations

import ast
import inspect
import linecache
import re
import textwrap
from collections.abc import Callable, Sequence
from functools import cache
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
    gives that input's part (found by name, or for an op with any number of inputs, such
    as clip(x, low, high), by position); otherwise the whole explicit rule."""
    explicit = getattr(op, "rule", None)
    if explicit:
        parts = dict(part.split(": ", 1) for part in explicit.split(";  ") if ": " in part)
        names = input_names(op) if op.n_in is not None else list(parts)
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


@cache
def vjp_rule(vjp: Callable[..., Any]) -> str:
    """The readable expression a VJP computes, or NO_RULE when its source is unavailable.
    A name a `def` VJP assigns and uses more than once stays a name, said after `where`."""
    try:
        readable = _Readable(vjp.__globals__)
        where: list[tuple[str, ast.expr]] = []
        if vjp.__name__ == "<lambda>":
            expr = _lambda_body(vjp)
        else:
            expr, where = _def_result(vjp, readable)
        if expr is None:
            return NO_RULE
        text = ast.unparse(readable.visit(expr))
        if where:
            text += "  where " + ", ".join(f"{name} = {ast.unparse(readable.visit(value))}" for name, value in where)
    except (OSError, TypeError, SyntaxError, ValueError, AttributeError):
        return NO_RULE
    return text or NO_RULE


def _lambda_body(fn: Callable[..., Any]) -> ast.expr | None:
    code = fn.__code__
    if not hasattr(code, "co_positions"):  # Python 3.10: only a lambda alone on its line
        return _only_lambda_on_line(code)
    import dis

    spans: list[Any] = [  # dis.Positions whose fields are all set
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


def _def_result(fn: Callable[..., Any], readable: _Readable) -> tuple[ast.expr | None, list[tuple[str, ast.expr]]]:
    """The final return expression: a name assigned once before it and used once is
    replaced by its value; one used more often is kept and listed with its value."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None, []
    returns = [s.value for s in func.body if isinstance(s, ast.Return) and s.value is not None]
    if not returns:
        return None, []
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
                assigned[statement.targets[0].id] = readable.visit(statement.value)
    once = {name: value for name, value in assigned.items() if counts.get(name) == 1 and name not in _uses(value, {name: value})}
    expr = readable.visit(returns[-1])  # first, so that names only a guard used drop out
    where: list[tuple[str, ast.expr]] = []
    pending = [expr]
    while pending:  # unfold names used once; keep the others, and unfold inside their values
        node = pending.pop()
        uses = _uses(node, once)
        single = {name: value for name, value in once.items() if uses.get(name) == 1 and name not in dict(where)}
        if single:
            replaced = _Inline(single).visit(node)
            if node is expr:
                expr = replaced
            else:
                where = [(n, replaced if v is node else v) for n, v in where]
            pending.append(replaced)
            continue
        for kept in once:
            if uses.get(kept, 0) > 1 and kept not in dict(where):
                where.append((kept, _copy(once[kept])))
                pending.append(where[-1][1])
    return expr, sorted(where, key=lambda item: list(once).index(item[0]))


def _uses(node: ast.AST, names: dict[str, ast.expr]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id in names:
            counts[child.id] = counts.get(child.id, 0) + 1
    return counts


class _Inline(ast.NodeTransformer):
    """Replace the given names by their values (one level; the caller repeats)."""

    def __init__(self, values: dict[str, ast.expr]) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.AST:
        value = self.values.get(node.id)
        return node if value is None else _copy(value)


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body


# Helpers that keep a gradient exact at nan and inf without changing its math, and what
# they compute otherwise: masked(m, g, out) and guarded(m, unreached, out) are out (they
# only keep a zero upstream gradient from turning into nan), gate(m, g, factor) is g * factor (exactly 0 where the
# factor is 0), and so is scaled(m, g, factor) (masked(m, g, g * factor)).
_GUARDS: dict[str, Callable[[list[ast.expr]], ast.expr]] = {
    "masked": lambda args: args[1],
    "guarded": lambda args: args[1],
    "gate": lambda args: ast.BinOp(left=args[0], op=ast.Mult(), right=args[1]),
    "scaled": lambda args: ast.BinOp(left=args[0], op=ast.Mult(), right=args[1]),
}


class _Readable(ast.NodeTransformer):
    """Strip the plumbing: m.raw(x) -> x, m.f(...) -> f(...), np.f -> f, helper(m, ...)
    -> helper(...), _helper -> helper, the guards above -> what they compute,
    `where(isnan(v), nan, e)` -> e (nan passes through), `A if <special case>.any() else B`
    -> the general formula (the shorter branch), and a one-line helper of the VJP's
    module whose formula is short -> that formula (`relu_slope(x)` -> `x > 0`)."""

    def __init__(self, namespace: dict[str, Any] | None = None, depth: int = 0) -> None:
        self.namespace = namespace or {}
        self.depth = depth

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "m" and func.attr == "raw" and len(node.args) == 1:
            return self.visit(node.args[0])
        if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "m":
            node.args = node.args[1:]
        name = func.id.lstrip("_") if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in _GUARDS and len(node.args) == 2 and not node.keywords:
            return self.visit(_GUARDS[name](node.args))
        if name == "where" and len(node.args) == 3 and _is_named(node.args[1], "nan"):
            test = node.args[0]
            if isinstance(test, ast.Call) and _is_named(test.func, "isnan"):
                return self.visit(node.args[2])
        if isinstance(func, ast.Name):
            inlined = self._inline_helper(func.id, node)
            if inlined is not None:
                return inlined
        return self.generic_visit(node)

    def _inline_helper(self, name: str, call: ast.Call) -> ast.expr | None:
        helper = self.namespace.get(name)
        if self.depth >= 3 or not inspect.isfunction(helper) or call.keywords:
            return None
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(helper))).body[0]
        except (OSError, TypeError, SyntaxError):
            return None
        statements = [s for s in getattr(body, "body", []) if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if not isinstance(body, ast.FunctionDef) or len(statements) != 1 or not isinstance(statements[0], ast.Return) or statements[0].value is None:
            return None
        params = [a.arg for a in body.args.args]
        if len(call.args) != len(params):
            return None
        formula = _Inline(dict(zip(params, call.args))).visit(_copy(statements[0].value))
        formula = _Readable(helper.__globals__, self.depth + 1).visit(formula)
        return formula if len(ast.unparse(formula)) <= SHORT_HELPER else None

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        guard = any(isinstance(n, ast.Attribute) and n.attr == "any" for n in ast.walk(node.test))
        if guard:
            general = min((node.body, node.orelse), key=lambda branch: len(ast.unparse(branch)))
            return self.visit(general)
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in _PLUMBING:
            return ast.Name(id=node.attr.lstrip("_") or node.attr, ctx=ast.Load())
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id.startswith("_") and node.id.strip("_"):
            return ast.Name(id=node.id.lstrip("_"), ctx=node.ctx)
        return node


SHORT_HELPER = 30  # characters: a helper's formula this short reads better than its name


def _is_named(node: ast.expr, word: str) -> bool:
    """`word` or `<anything>.word` (`nan`, `np.nan`)."""
    return (isinstance(node, ast.Name) and node.id == word) or (isinstance(node, ast.Attribute) and node.attr == word)


# ---- forward mode: the JVP rules as text ---------------------------------------------------

NO_JVP = "no JVP rule (forward mode cannot pass through it)"
# The ops a user writes as an operator: their rules read in the operator, not the op's name.
_LINEAR_FORMS = {"neg": "-{0}", "getitem": "{0}[index]"}
_BILINEAR_FORMS = {"matmul": "{0} @ {1}"}


def jvp_rule(op: Any, carried: Sequence[bool] | None = None) -> str:
    """The op's forward-mode rule: the tangent of its result in its inputs and their
    tangents (`dx` is the tangent of input `x`). With `carried` (which inputs carry a
    tangent at one node) only their terms are shown: the rule as that node used it.

    An op may state it (`defop(..., jvp_rule=...)`); a structural rule (forward.py) is
    made from the op's own VJP rules: an elementwise op's is its VJP with the tangent
    for g, summed over the inputs (`da * b + db * a` for a * b); a linear op's is the op
    applied to the tangent; a multilinear op's the sum with one input at a time replaced
    by its tangent; a reduction's the sum of tangent times partial derivative."""
    explicit = getattr(op, "jvp_rule", None)
    if explicit:
        return str(explicit)
    if op.jvp is None:
        return NO_JVP
    count = op.n_in if op.n_in is not None else len(carried) if carried is not None else len(_explicit_names(op)) or 1
    names = tangent_names(op, count)
    given = [k for k in range(count) if carried is None or (k < len(carried) and carried[k])]
    structure = getattr(op.jvp, "structure", None)
    kind = getattr(structure, "kind", None)
    if kind == "diagonal":
        terms = [_with_tangent(input_rule(op, k), names[k]) for k in given if input_rule(op, k) != NO_GRADIENT]
    elif kind == "linear":
        args = [f"d{name}" if k in given else "0" for k, name in enumerate(names)]
        form = _LINEAR_FORMS.get(op.name)
        params = [p for p in op.param_names if p != "index"] if form is None else []
        terms = [form.format(*args) if form else f"{op.name}({', '.join([*args, *params])})"]
    elif kind == "multilinear":
        form = _BILINEAR_FORMS.get(op.name)
        params = list(op.leading)
        terms = []
        for k in given:
            args = [f"d{name}" if j == k else name for j, name in enumerate(names)]
            terms.append(form.format(*args) if form else f"{op.name}({', '.join([*params, *args])})")
    elif kind == "partials":
        text = getattr(structure, "text", "")
        terms = [text.format(t=f"d{names[k]}", x=names[k]) for k in given]
    else:  # a JVP function without its text: read from its source, tangents[k] as dx
        read = vjp_rule(op.jvp)
        return re.sub(r"\btangents\[(\d+)\]", lambda m: f"d{names[int(m.group(1))]}" if int(m.group(1)) < len(names) else m.group(0), read)
    return " + ".join(terms).replace("+ -", "- ") if terms else "0"


def tangent_names(op: Any, count: int) -> list[str]:
    """The names of an op's inputs in its rules: its VJPs' (a, b; x for one input), or an
    explicit rule's for an op with any number of inputs (clip's x, low, high)."""
    if op.n_in is not None:
        names = input_names(op)
        if not any(" " in name for name in names):
            return names[:count] + [f"x{k}" for k in range(len(names), count)]
    parts = _explicit_names(op)
    if len(parts) >= count:
        return parts[:count]
    return [f"x{k}" for k in range(count)] if count > 1 else ["x"]


def _explicit_names(op: Any) -> list[str]:
    """The input names of an explicit rule written per input (`x: ...;  low: ...`)."""
    explicit = getattr(op, "rule", None) or ""
    parts = [part.split(": ", 1)[0] for part in explicit.split(";  ") if ": " in part]
    return parts if all(part.isidentifier() for part in parts) else []


def _with_tangent(rule: str, name: str) -> str:
    """A VJP rule with its incoming gradient g replaced by the tangent of input `name`."""
    return re.sub(r"\bg\b", f"d{name}", rule)
