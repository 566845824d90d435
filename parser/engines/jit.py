"""A program on JAX, whole, under `jax.jit`.

The program becomes one function of the values bound to its variables (eval's NAME=VALUE):
it runs every statement through a session of the JAX engine on the tracers jit gives it,
and returns the last expression's value with the gradient of its sum by each name the
report gives (one reverse pass, `jax.value_and_grad` of the graph replayed). XLA compiles
it whole, fusing the program's ops and the gradient's; a second call with values of the
same shapes runs the compiled code. The report says whether the program ran so, and why
not when not: a condition, an index or a parameter that depends on a value (which jit
cannot know until it runs), a loop (jit would compile each iteration), checks (which
replay the program at many points).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import LanguageError
from .library import ValueDependent
from .report import EngineAnalysis, Selection
from .values import EngineValue, replay

_COMPILED: dict[Any, tuple[Callable[..., Any], list[dict[str, Any]]]] = {}
LARGEST_CACHE = 16


def reason_not(program: Any, last: bool = True) -> str | None:
    """Why `program` is not run under jax.jit, seen from its statements alone (None: it is
    tried). `last`: the report is of its last statement, which must be an expression."""
    kinds = {s.kind for s in program.statements}
    if "check" in kinds:
        return "check statements replay the program at many points, op by op"
    if "for" in kinds:
        return "a for loop would be unrolled, every iteration compiled"
    if "expr" not in kinds or last and program.statements[-1].kind != "expr":
        return "the program does not end with an expression"
    return None


class Report:
    """One expression statement's report, from a run under jax.jit."""

    __slots__ = ("line", "text", "analysis")

    def __init__(self, line: int, text: str, analysis: EngineAnalysis) -> None:
        self.line, self.text, self.analysis = line, text, analysis


def jitted_analysis(program: Any, session: Any, wrt: list[str] | None, always: list[str]) -> EngineAnalysis | None:
    """The report of the program's last expression (eval's), computed under jax.jit; None
    when it is not run so (the reason is in `session.engine_notes`, for the report of the
    program run op by op)."""
    reports = jitted_reports(program, session, wrt, always, last=True)
    return reports[-1].analysis if reports else None


def jitted_reports(program: Any, session: Any, wrt: list[str] | None, always: list[str], last: bool = False) -> list[Report] | None:
    """The reports of the program's expression statements, computed under jax.jit from the
    values bound in `session`, or None (see jitted_analysis)."""
    reason = reason_not(program, last)
    if reason is not None:
        session.engine_notes = [f"not under jax.jit: {reason}; ran op by op"]
        return None
    inputs = {name: value for name, value in session.variables.items() if isinstance(value, EngineValue)}
    arrays = [value.value for value in inputs.values()]
    key = (program.source, last, tuple(inputs), tuple((tuple(np.shape(a)), str(a.dtype)) for a in arrays), tuple(wrt or ()), tuple(always))
    cached = _COMPILED.get(key)
    compiling = cached is None
    if cached is None:
        traced: list[dict[str, Any]] = []  # (each result's names and text, filled when jit traces the program)
        cached = (session.backend.library.jax.jit(_whole(program, session, list(inputs), wrt, always, traced, last)), traced)
    function, metas = cached
    started = time.perf_counter()
    try:
        found = function(arrays)
    except ValueDependent as err:
        session.engine_notes = [f"not under jax.jit: {_placed(err)}; ran op by op"]
        return None
    except LanguageError as err:  # an error of the program: the run op by op says it, in its place
        session.engine_notes = [f"not under jax.jit: {err.message}"]
        return None
    if len(_COMPILED) >= LARGEST_CACHE:
        del _COMPILED[next(iter(_COMPILED))]
    _COMPILED[key] = cached
    seconds = time.perf_counter() - started
    library = session.backend.library
    done = "compiled and ran" if compiling else "ran the compiled program"
    note = f"under jax.jit: {done} in {seconds:.3g} s (XLA fuses the program's ops and its gradients')"
    reports = []
    for (value, grads), meta in zip(found, metas):
        value = library.host(value)
        analysis = EngineAnalysis(EngineValue(value), value, {name: library.host(g) for name, g in zip(meta["names"], grads)}, meta["names"],
                                  meta["leaf_names"], meta["earlier"], "jax", library.device(), [note])
        reports.append(Report(meta["line"], meta["text"], analysis))
    return reports


def _whole(program: Any, session: Any, names: list[str], wrt: list[str] | None, always: list[str], metas: list[dict[str, Any]],
           last: bool) -> Callable[..., Any]:
    """The program as a function of the values of `names`: (value, gradients) of each
    expression statement (of the last one alone, with `last`)."""
    from ..machine import ExpressionResult, Session

    def whole(arrays: list[Any]) -> Any:
        inner = Session(engine="jax", functions=dict(session.functions), base_dir=session.base_dir, on_warning=session.on_warning,
                        on_notice=session.on_notice)
        for name, value in session.variables.items():
            if name not in names:
                inner.variables[name] = value  # (a function value bound on the command line)
        for name, array in zip(names, arrays):
            inner.assign(name, EngineValue(array))
        metas.clear()
        found = []
        for statement in program.statements:
            result = inner.run_statement(statement)
            if result is None or last and statement is not program.statements[-1]:
                continue
            if not isinstance(result, ExpressionResult) or not isinstance(result.value, EngineValue):
                raise LanguageError("value", f"line {statement.span[0]}: the value is not a tensor (a function, a tuple, help)")
            selected = Selection(result.value, wrt, inner.variables, always)
            metas.append({"names": selected.names, "leaf_names": selected.leaf_names, "earlier": selected.earlier, "line": statement.span[0],
                          "text": result.text})
            found.append(_value_and_gradients(inner, result.value, selected))
        return found

    return whole


def _value_and_gradients(session: Any, output: EngineValue, selected: Selection) -> tuple[Any, list[Any]]:
    """The output and the gradient of its sum by each name, from one reverse pass over the
    graph replayed (inside jit: XLA keeps one forward computation of the two)."""
    library = session.backend.library
    jnp = library.jnp
    shapes = [n.shape if n is not None else () for n in selected.nodes.values()]
    nodes = {id(n): n for n in selected.wanted}
    if not nodes:
        return (session.backend.read(output) if output.dtype.kind == "f" else output.value), [jnp.zeros(shape) for shape in shapes]
    keys = list(nodes)

    def total(offsets: list[Any]) -> Any:
        out = replay(library, [output], {}, selected.order, dict(zip(keys, offsets)))[0]
        return out.sum(), out

    (_, out), found = library.jax.value_and_grad(total, has_aux=True)([jnp.zeros(n.shape) for n in nodes.values()])
    by_node = dict(zip(keys, found))
    return out, [by_node[id(n)] if id(n) in by_node else jnp.zeros(shape) for n, shape in zip(selected.nodes.values(), shapes)]


def _placed(err: LanguageError) -> str:
    where = f"line {err.line}, column {err.column}" if err.line is not None else "the program"
    return f"a value decides a branch, an index or a parameter at {where}, and jit traces values without knowing them"
