"""Help for one name of the language: `help(sin)`, `:help sin`, `gradcalc ops sin`.

Everything is read from what the program runs: the built-in table (builtins.py) gives
the forms, text and example of the names that are not ops; the op registry gives the signature, the
description, the derivative rule (the text `--steps` prints) and the conventions at the
op's edges (each a point and the numbers the op gives there, which tests/test_edges.py
evaluates; docs/language.md's edge table is made of the same text); the example is
evaluated when help is asked for, so its numbers are the program's own. The inputs of an
example come from the op's gradient-check recipe (the shapes and range its every-op test
draws from), rounded to short literals.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gradcalc.autodiff import ALIASES, REGISTRY, TORCH_CHECKED, Edge
from gradcalc.autodiff.rules import jvp_rule, op_rule

from .backends import CONSTANTS, public_ops
from .builtins import BUILTINS, CATEGORIES, BuiltinDef
from .compiler import LAMBDA
from .errors import LanguageError
from .functions import Defined, FunctionValue
from .literals import literal as _literal
from .literals import shown
from .suggestions import suggest

if TYPE_CHECKING:
    from .compiler import UserFunction
    from .machine import Session

# Example values inside an op's check range: varied signs and sizes, few digits.
_PATTERN = (0.5, -1.25, 2.0, -0.75, 1.5, 0.25, -2.0, 1.0, -0.5, 0.75, -1.5, 1.25)
_EXAMPLE_ELEMENTS = 6  # the smallest listed input shapes are used, up to this many elements


def describe(name: str, session: Session | None = None, digits: int | None = None) -> list[str]:
    """Help as lines of text, the example's numbers rounded to `digits` significant
    digits when given. Raises LanguageError for a name with no help."""
    functions = session.functions if session is not None else {}
    if name in functions:
        return _user_function(functions[name])
    if name in BUILTINS:
        return builtin_help(BUILTINS[name], digits)
    op = public_ops().get(name)
    if op is not None:  # (x.repeat(...) is PyTorch's, where the function repeat is NumPy's: habits.py)
        from .habits import describe as spelling

        return op_help(op, name, digits) + (spelling(name) or [])[:1]
    if session is not None and name in session.variables:  # (before the constants: `e = 3` makes e yours)
        value = session.variables[name]
        if isinstance(value, FunctionValue):
            return [f"{name}: {value!r}" + (f" = {value.function.text}" if isinstance(value, Defined) and value.function.name == LAMBDA else "")]
        if isinstance(value, tuple):
            return [f"{name}: {len(value)} results"]
        return [f"{name}: a variable, shape {tuple(np.shape(value.data))}"]
    if name in CONSTANTS:
        return [f"{name}: the constant {CONSTANTS[name]!r}"]
    from .habits import describe as spelling

    lines = spelling(name)  # x.t(), clamp, diff: another library's word
    if lines is not None:
        return lines
    known = [*public_ops(), *BUILTINS, *functions, *CONSTANTS]
    raise LanguageError("name", f"no help for {name!r}: not a function, constant or variable{suggest(name, known)}")


def answer(session: Session, name: str, args: list[Any], kwargs: dict[str, Any]) -> list[str]:
    """The statement `help(NAME)` (`help()`: the overview), as the built-in table calls it."""
    [topic] = args
    return describe(topic, session) if topic else overview()


def overview() -> list[str]:
    """`help()`: how to ask, and the functions by category."""
    by_category: dict[str, list[str]] = {}
    for op in REGISTRY.values():
        if op.public:
            by_category.setdefault(op.category, []).append(op.name)
    for builtin in BUILTINS.values():
        by_category.setdefault(builtin.category, []).append(builtin.name)
    lines = ["help(NAME) tells what a function computes, its derivative rule and an example:", "  help(tanh)", ""]
    lines += [f"{category}: {', '.join(sorted(names))}" for category, names in by_category.items()]
    return lines


def op_help(op: Any, name: str | None = None, digits: int | None = None) -> list[str]:
    aliases = sorted(alias for alias, target in ALIASES.items() if target == op.name)
    lines = [f"{op.signature}: {op.doc}"]
    if name is not None and name != op.name:
        lines.append(f"({name} is another name for {op.name})")
    about = [f"category: {op.category}"]
    if aliases:
        about.append(f"also called: {', '.join(aliases)}")
    if op.method:
        about.append(f"also a method: {_method_form(op)}")
    lines.append("; ".join(about))
    lines.append(f"derivative (as --steps shows it): {op_rule(op)}" if op.has_gradient
                 else "derivative: none (no gradient flows through it)")
    if op.has_gradient:
        lines.append(f"forward (as --steps --mode forward shows it): {jvp_rule(op)}")
    return [*lines, *edge_lines(op), "example:", *example_of(op, digits)]


def edge_lines(op: Any) -> list[str]:
    """The op's conventions at its edges, one line each (`edges: none` for an op without)."""
    if not op.edges:
        return ["edges: none (no point where its derivative is a choice)"]
    lines = [f"edges (where the derivative is a convention; PyTorch {TORCH_CHECKED} beside it):"]
    for edge in op.edges:
        case, said, torch = edge_cells(op, edge)
        lines.append(f"  {case}: {edge_call(op, edge)} {'is' if edge.error else '='} {said}; PyTorch: {torch}")
    return lines


def edge_cells(op: Any, edge: Edge) -> tuple[str, str, str]:
    """(where, what gradcalc gives, what PyTorch gives) as words: the edge table's cells."""
    torch = edge.torch if edge.torch != "same" else "the same" if edge.order == 1 or edge.error else "the same, second derivatives too"
    if edge.error is not None:
        return edge.case, f"an error: {edge.error}", torch
    names = edge_names(op, edge)
    value = edge.value if not isinstance(edge.value, tuple) else list(edge.value)
    said = _short(value)
    if edge.grads is not None:
        of = "" if edge.weights is None else f" of sum({_short(edge.weights)} * y)"
        said += f"; gradient {_per_input(edge.grads, [names[k] for k in edge.differentiated()])}{of}"
    if edge.second is not None:
        said += f"; second derivative {_per_input(edge.second, [names[k] for k in edge.differentiated()])}"
    if edge.note:
        said += f" ({edge.note})"
    return edge.case, said, torch


def _per_input(values: Any, names: list[str]) -> str:
    shown = [_short(v) for v in values]
    if len(shown) == 1:
        return shown[0]
    return ", ".join(f"{v} to {n}" for v, n in zip(shown, names))


def _short(x: Any) -> str:
    """A number or a nested list of them, each to 6 significant digits: 0, 0.5, -inf, 1.69934e-17."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return f"{float(x):.6g}"
    return "[" + ", ".join(_short(row) for row in x) + "]"


def edge_names(op: Any, edge: Edge) -> list[str]:
    return list(edge.names) if edge.names is not None else _input_names(op, len(edge.inputs))


def edge_call(op: Any, edge: Edge) -> str:
    """The edge as a call in the language: `maximum(1, 1)`, `max([1, 1, 0])`."""
    args = [_literal(np.asarray(x), digits=None, whole=True) for x in edge.inputs] + [f"{k}={_param(v)}" for k, v in edge.params.items()]
    return f"{op.name}({', '.join(args)})"


def edge_program(op: Any, edge: Edge) -> str:
    """The edge as a program whose inputs are variables, so that their gradients are
    reported: one assignment per input, then the call."""
    names = edge_names(op, edge)
    assigns = [f"{n} = {_literal(np.asarray(x), digits=None, whole=True)}" for n, x in zip(names, edge.inputs)]
    call = f"{op.name}({', '.join([*names, *(f'{k}={_param(v)}' for k, v in edge.params.items())])})"
    if edge.weights is not None:
        call = f"sum({_short(edge.weights)} * {call})"
    return "\n".join([*assigns, call])


def _method_form(op: Any) -> str:
    inside = op.signature[op.signature.index("(") + 1:-1]
    first, _, rest = inside.partition(", ")
    return f"{first}.{op.name}({rest})"


def _user_function(f: UserFunction) -> list[str]:
    lines = [f"{f.name}({', '.join(f.params)}): a function you defined", f"  {f.text.strip()}"]
    if f.rule is not None:  # its derivative rule, which backward passes use instead of the body's
        lines += ["derivative: your vjp rule", f"  {f.rule.rule.text.strip()}"]
    return lines


def builtin_help(builtin: BuiltinDef, digits: int | None = None) -> list[str]:
    """A built-in that is not an op: its forms and what it computes, its category, and its
    example evaluated now."""
    return [builtin.line, f"category: {CATEGORIES.get(builtin.category, builtin.category)}", "example:",
            *builtin_example(builtin, digits)]


def builtin_example(builtin: BuiltinDef, digits: int | None = None) -> list[str]:
    """A built-in's example program, then what its last statement gives: a value and each
    variable's gradient, a function or a tuple as one line, or help's first line. The files
    it reads are written to a fresh folder, where it runs."""
    from .machine import ExpressionResult, Session

    lines = [f"  {'>>>' if k == 0 or not line.startswith(' ') else '...'} {line}" for k, line in enumerate(builtin.example.split("\n"))]
    if builtin.files:
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as folder:
            for file, text in builtin.files.items():
                (Path(folder) / file).write_text(text, encoding="utf-8")
            session, results = _run_example(builtin, Session(base_dir=Path(folder)))
    else:
        session, results = _run_example(builtin, Session())
    last = results[-1]
    if not isinstance(last, ExpressionResult):  # a function, a tuple, or help's lines
        return [*lines, *(f"  {line}" for line in last.lines[:1])]
    from .analysis import analyze

    analysis = analyze(last.value, None, session.variables)
    lines.append(f"  value {_shown(np.asarray(analysis.value), digits)}")
    return lines + [f"  d/d{var} {_shown(np.asarray(g), digits)}" for var, g in analysis.grads.items()]


def _run_example(builtin: BuiltinDef, session: Session) -> tuple[Session, list[Any]]:
    try:
        return session, session.run_source(builtin.example)
    except LanguageError as err:  # an example the program refuses is a bug in its record
        raise LanguageError("argument", f"the example of {builtin.name} fails: {builtin.example}: {err.message}") from None


def example_of(op: Any, digits: int | None = None) -> list[str]:
    """The example program, then its value and each input's gradient, evaluated now."""
    from .machine import Session

    text = example_expression(op)
    session = Session()
    try:
        [result] = session.run_source(text)
        if isinstance(result.value, tuple):  # several results (split, slogdet): the first
            lead, _, call = text.rpartition("\n")
            text = f"{lead}\n{call}[0]" if lead else f"{call}[0]"
            [result] = session.run_source(text.rpartition("\n")[2])
    except LanguageError as err:  # an example the program refuses is a bug in its recipe
        raise LanguageError("argument", f"the example of {op.name} fails: {text}: {err.message}") from None
    from .analysis import analyze

    analysis = analyze(result.value, None, session.variables)
    lines = [f"  >>> {line}" for line in text.split("\n")]
    lines.append(f"  value {_shown(np.asarray(analysis.value), digits)}")
    lines += [f"  d/d{var} {_shown(np.asarray(g), digits)}" for var, g in analysis.grads.items()]
    return lines


# Arguments of the constructors' examples, by parameter name.
_CONSTRUCTOR_ARGS = {"shape": "(2, 3)", "value": "1.5", "start": "0", "stop": "1", "step": "0.25", "num": "5", "n": "3",
                     "seed": "seed=0"}


def example_expression(op: Any) -> str:
    """A short program: one assignment per input (named after the op's parameters), then
    the call with the recipe's parameters."""
    check = op.check
    if op.n_in == 0:  # a constructor: its arguments by name
        args = [_CONSTRUCTOR_ARGS[p] for p in op.param_names if p in _CONSTRUCTOR_ARGS]
        if op.signature.startswith(f"{op.name}(*shape"):
            args[0] = "2, 3"
        return f"{op.name}({', '.join(args)})"
    if check is None:  # an op without gradient: one small vector per input (a number for item)
        shape = () if op.name == "item" else (3,)
        inputs, params = [np.roll(_pattern(shape, -2.0, 2.0), k) for k in range(op.n_in or 2)], {}
    elif check.make is not None:
        inputs, params = check.make(np.random.default_rng(0))
        inputs = [np.round(x, 2) if np.asarray(x).dtype.kind == "f" else x for x in inputs]
    else:
        shapes = min(check.shapes, key=lambda s: sum(int(np.prod(x)) for x in s))
        inputs = [_pattern(shape, check.low, check.high) for shape in shapes]
        params = dict(check.params)
    names = _input_names(op, len(inputs))
    assigns = [f"{n} = {_literal(np.asarray(x))}" for n, x in zip(names, inputs)]
    if "index" in params:  # indexing is written as such: x[0:2, 1]
        return "\n".join([*assigns, f"{names[0]}[{_index(params['index'])}]"])
    args = [*names, *(f"{k}={_param(v)}" for k, v in params.items())]
    return "\n".join([*assigns, f"{op.name}({', '.join(args)})"])


def _index(index: Any) -> str:
    parts = index if isinstance(index, tuple) else (index,)

    def one(i: Any) -> str:
        if isinstance(i, slice):
            return ":".join("" if v is None else str(v) for v in (i.start, i.stop)) + ("" if i.step is None else f":{i.step}")
        return str(i)

    return ", ".join(one(i) for i in parts)


def _input_names(op: Any, n: int) -> list[str]:
    inside = op.signature[op.signature.index("(") + 1:-1]
    words = [w.strip().lstrip("*").split("=")[0] for w in inside.split(",")]
    words = [w for w in words if w and w not in op.param_names and w not in op.leading]
    if len(words) >= n and len(set(words[:n])) == n:
        return words[:n]
    return [f"x{i + 1}" for i in range(n)]


def _pattern(shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    size = int(np.prod(shape))
    mid, half = (low + high) / 2, (high - low) / 2
    values = [mid + half * v / 2.0 for v in _PATTERN[:size]] if size <= len(_PATTERN) else np.linspace(low, high, size + 2)[1:-1]
    return np.round(np.asarray(values, dtype=float), 3).reshape(shape)


def _shown(x: np.ndarray, digits: int | None) -> str:
    """A result: every digit, or `digits` significant ones (as --digits rounds)."""
    if digits is None or x.dtype.kind != "f":
        return _literal(x, digits=None)
    rounded = np.vectorize(lambda v: float(f"{v:.{digits}g}") if np.isfinite(v) else v, otypes=[float])(x)
    return _literal(np.asarray(rounded), digits=None)


def _param(v: Any) -> str:
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(_param(i) for i in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, np.ndarray):
        return _literal(v)
    return repr(v)


__all__ = ["answer", "builtin_help", "describe", "edge_call", "edge_cells", "edge_lines", "edge_program", "example_of", "op_help", "overview",
           "shown"]
