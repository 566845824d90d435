"""`check` statements: gradient checks written in the language.

    check EXPR [wrt a, b] [tol=1e-6] [atol=...] [rtol=...] [method=central] [mode=forward]
    check A == B [tol=...]

The expression's recorded graph is checked: reverse mode (mode="forward": forward mode,
the JVPs) against complex step where every op on it is complex-safe, central
differences otherwise (see gradcalc.autodiff.gradcheck). A failed check names the entry
that disagrees most by variable and index, and the ops whose own VJP (JVP) disagrees. `check A == B` compares two
values elementwise instead (A may be a gradient: `check grad(x**2, x) == 2*x`).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcalc.autodiff import SizeLimitError, Tensor, topological_order
from gradcalc.autodiff.forward import NoJVPError
from gradcalc.autodiff.gradcheck import MODES, CheckResult, extreme_inside, gradcheck_graph, position, relative_error, suspect_ops
from gradcalc.autodiff.tensor import all_finite

from .analysis import differentiated_nonfinite, rebound_leaves, undefined_note, variables_in
from .backends import to_param
from .budgets import limit_errors
from .compiler import LOAD, Statement
from .errors import LanguageError, Span

METHODS = ("auto", "complex", "central")
OPTIONS = ("tol", "atol", "rtol", "method", "mode", "against")
# `check A == B`: values computed two ways agree to rounding unless told otherwise.
VALUE_TOLERANCES = (1e-12, 1e-9)  # atol, rtol


@dataclass
class CheckOutcome:
    """One check's result. status: pass, fail or error."""

    text: str
    line: int
    status: str
    variables: list[str] = field(default_factory=list)
    method: str = ""
    mode: str = "reverse"  # the derivatives checked: reverse mode's (VJPs) or forward mode's (JVPs)
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    atol: float = 0.0
    rtol: float = 0.0
    warnings: list[str] = field(default_factory=list)
    message: str = ""
    file: str = ""
    seconds: float = 0.0  # wall time of the check (JUnit's `time`)
    # A second engine's derivative beside gradcalc's (against=jax|torch: engines/engine_checks.py):
    # which engine, and its largest differences from gradcalc's ("" when not compared).
    against: str = ""
    against_abs_error: float = 0.0
    against_rel_error: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def how(self) -> str:
        """The method as a report shows it: `complex`, or `forward complex` for forward mode."""
        return f"forward {self.method}" if self.mode == "forward" and self.method != "value" else self.method


@dataclass
class CheckDefaults:
    """Run-wide overrides (`gradcalc check --tol/--method/--mode`); a check's own options win."""

    method: str = "auto"
    mode: str = "reverse"
    atol: float | None = None
    rtol: float | None = None
    against: str | None = None  # `gradcalc check --against jax|torch`
    engine: str = "tensor"  # the engine the files run on (`gradcalc check --engine jax`), and its --device
    device: str | None = None


def error_outcome(text: str, span: Span, err: LanguageError) -> CheckOutcome:
    return CheckOutcome(text=text, line=span[0], status="error", message=err.located())


def make_check_handler(defaults: CheckDefaults | None = None) -> Any:
    """A Session.on_check that runs the check and returns a CheckOutcome."""
    return functools.partial(run_check, defaults=defaults or CheckDefaults())


# Options whose value is one of a few words, written bare (`mode=forward`) or quoted.
WORDS = {"method": METHODS, "mode": MODES, "against": ("jax", "torch")}


def _options(session: Any, statement: Statement, defaults: CheckDefaults) -> tuple[str, str, float | None, float | None]:
    method, mode, atol, rtol = defaults.method, defaults.mode, defaults.atol, defaults.rtol
    for key, given in (("--tol", atol), ("--tol", rtol)):
        if given is not None and not (math.isfinite(given) and given >= 0):
            raise LanguageError("argument", f"{key} must be a finite non-negative number, got {given!r}").at(statement.span)
    for key, (code, span) in statement.options.items():
        if key not in OPTIONS:
            raise LanguageError("argument", f"unknown check option {key!r} (options: {', '.join(OPTIONS)})").at(span)
        if key in WORDS:
            # The word written bare (`mode=forward`: a lone name that is not a variable), or an expression's value.
            bare = len(code) == 1 and code[0][0] == LOAD and code[0][1] not in session.variables
            word = str(code[0][1]) if bare else to_param(session.evaluate(code), f"check option {key}")
            if word not in WORDS[key]:
                raise LanguageError("argument", f"{key} must be one of {', '.join(WORDS[key])}, not {word!r}").at(span)
            if key == "against":  # (read by _against)
                continue
            if key == "method":
                method = word
            else:
                mode = word
            continue
        value = to_param(session.evaluate(code), f"check option {key}")
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise LanguageError("argument", f"{key} must be a finite non-negative number, got {value!r}").at(span)
        elif key == "tol":
            atol = rtol = float(value)
        elif key == "atol":
            atol = float(value)
        else:
            rtol = float(value)
    return method, mode, atol, rtol


def _named_off_graph(session: Any, statement: Statement, leaves: list[Tensor], order: list[Tensor]) -> list[Tensor]:
    """The variables `statement` names that are not among `leaves`, the variables on its
    value's graph (a set difference of names first: what every check pays)."""
    on = {leaf.name for leaf in leaves}
    # In the order the statement names them (a set's order changes with string hashing, from
    # run to run and between -j workers; the report must not).
    names = list(dict.fromkeys(code[1] for code in statement.code if code[0] == LOAD and code[1] not in on))
    if not names:
        return []
    on_graph = set(order)
    named = (session.variables.get(name) for name in names)
    return list({id(v): v for v in named if getattr(v, "requires_grad", False) and v not in on_graph}.values())


def run_check(session: Any, statement: Statement, value: Any, defaults: CheckDefaults) -> CheckOutcome:
    """A check statement's outcome. Its passes (the reverse or forward Jacobian, the
    replays, the ops blamed) run under the statement's budget; a budget or the element cap
    that stops them is an error of the statement, in the machine's words and kinds."""
    with limit_errors(statement.span):
        return _run_check(session, statement, value, defaults)


def _run_check(session: Any, statement: Statement, value: Any, defaults: CheckDefaults) -> CheckOutcome:
    line = statement.span[0]
    if session.engine == "scalar":
        raise LanguageError("argument", "check statements need the tensor engine").at(statement.span)
    if isinstance(value, tuple) or not _is_tensor(value):
        raise LanguageError("value", "check needs an expression with a tensor value").at(statement.span)
    method, mode, atol, rtol = _options(session, statement, defaults)
    if statement.expected is not None:
        return _compare_values(session, statement, value, atol, rtol)
    order = topological_order(value)  # once: every step of the check walks this graph
    if statement.wrt:
        leaves = []
        for name in statement.wrt:
            if name not in session.variables:
                raise LanguageError("name", f"check ... wrt {name}: {name!r} is not a variable").at(statement.span)
            leaves.append(session.variables[name])
        # `wrt x, x` (or two names for one value) is one input: perturbing it twice per
        # column made its numeric derivative 0 and failed a correct gradient.
        leaves = list({id(leaf): leaf for leaf in leaves}.values())
        on_graph = set(order)
        off_graph = [leaf for leaf in leaves if leaf not in on_graph]
    else:
        # The variables on the value's graph, and those the expression names that are not
        # on it (grad(sum(2 * x), x) is constant in x): its derivative by those is 0.
        leaves = variables_in(value, order)
        off_graph = _named_off_graph(session, statement, leaves, order)
        leaves += off_graph
    if not leaves:
        raise LanguageError("value", "nothing to check: the expression uses no variables").at(statement.span)
    if session.engine != "tensor":  # the library's derivative against differences of the program on it
        from .engines.engine_checks import run_engine_check

        return run_engine_check(session, statement, value, (method, mode, atol, rtol), leaves)
    try:
        result = gradcheck_graph(value, leaves, method=method, atol=atol, rtol=rtol, order=order, mode=mode)
    except NoJVPError as err:  # an op defined outside gradcalc, without a forward rule
        raise LanguageError("argument", f"check ... mode=forward: {err}").at(statement.span) from None
    warnings = [*result.notes, *_undefined(order)]
    warnings += [f"{leaf.name} reaches the value through no op with a gradient: its derivative by {leaf.name} is 0, "
                 "which replaying the graph cannot test" for leaf in off_graph]
    warnings += [f"evaluated at a kink of {name}: the derivative there is a convention, not a limit" for name in result.kinks]
    warnings += [f"{leaf.name} here is the value {leaf.name} held earlier (it has been rebound since): the check is with respect to that value"
                 for leaf in rebound_leaves(leaves, session.variables)]
    outcome = CheckOutcome(
        text=statement.text, line=line, status="pass" if result.passed else "fail",
        variables=[leaf.name or "?" for leaf in leaves], method=result.method, mode=mode,
        max_abs_error=result.max_abs_error, max_rel_error=result.max_rel_error, atol=result.atol, rtol=result.rtol,
        warnings=warnings,
    )
    # Where the value or the derivative is not finite nothing can be checked, even when
    # nan meets nan or inf meets inf: such a check fails, whatever the numbers (it
    # passed with a warning when they agreed by accident: `exp(x)` at 1e300 passed,
    # `x*2` at inf failed).
    not_finite = _not_finite(value.data)
    infinite = "" if not_finite else _not_finite_derivative(result.analytic, value, leaves)
    if not_finite or (infinite and result.passed):
        outcome.status, outcome.message = "fail", not_finite or infinite
    if not_finite:  # the numeric side measured nothing (pi / 1e-20 for the complex step of log at -1)
        outcome.max_abs_error = outcome.max_rel_error = math.nan
    elif not result.passed:
        outcome.message = _explain(value, result, infinite, order, mode)
    engine = _against(session, statement, defaults)
    if engine is not None:  # a second engine's derivative beside these two
        from .engines.engine_checks import against

        against(session, statement, value, leaves, result, outcome, engine, mode)
    return outcome


def _against(session: Any, statement: Statement, defaults: CheckDefaults) -> str | None:
    """The engine a check is compared with: its own `against=`, else `--against`."""
    given = statement.options.get("against")
    if given is None:
        return defaults.against
    code, _ = given
    bare = len(code) == 1 and code[0][0] == LOAD and code[0][1] not in session.variables
    return str(code[0][1]) if bare else str(to_param(session.evaluate(code), "check option against"))


def _is_tensor(value: Any) -> bool:
    """A tensor of the session's engine: gradcalc's, or a JAX or PyTorch engine's value."""
    return isinstance(value, Tensor) or type(value).__name__ == "EngineValue"


def _undefined(order: list[Any]) -> list[str]:
    """A warning when the value checked is a derivative of a function that is not finite
    at the point (grad(log(x), x) at x < 0): its numbers can agree, but of nothing."""
    culprit = differentiated_nonfinite(order)
    return [] if culprit is None else [undefined_note(culprit)]


def _explain(value: Tensor, result: CheckResult, infinite: str, order: list[Any], mode: str) -> str:
    """A failed check's message: the worst entry, and the ops whose own VJP (JVP, for a
    check of forward mode) disagrees with their forward; else why the numbers cannot tell (`infinite`: a derivative that
    is not finite, where the op would be blamed for sqrt at 0; a value inside out of
    range; a step too coarse for the point: CheckResult.unresolved)."""
    suspects = [] if infinite else suspect_ops(value, mode=mode)
    if suspects:
        return f"{result.worst}; ops whose {'JVP' if mode == 'forward' else 'VJP'} disagrees: {', '.join(suspects)}"
    reason = infinite or extreme_inside(value, order) or result.unresolved
    return f"{result.worst}; {reason}: move the point" if reason else result.worst


def _not_finite_derivative(jacobians: list[np.ndarray], value: Tensor, leaves: list[Tensor]) -> str:
    """The first entry of the reverse-mode Jacobians that is not finite, as a reason ('' if none)."""
    for jacobian, leaf in zip(jacobians, leaves):
        if all_finite(jacobian):
            continue
        flat, found = _first_not_finite(jacobian)
        row, column = divmod(flat, jacobian.shape[1])
        where = f"d out{position(value.shape, row)} / d {leaf.name or '?'}{position(leaf.shape, column)}"
        return f"the derivative is not finite at this point ({found!r} at {where}), so there is no number to check it against"
    return ""


def _first_not_finite(data: Any) -> tuple[int, Any]:
    """The flat index of the first entry that is not finite, and that entry."""
    flat = int(np.argmax(~np.isfinite(data).reshape(-1)))
    return flat, np.reshape(data, -1)[flat].item()


def _not_finite(data: Any) -> str:
    """Why a check cannot pass when the function is not finite at the point ('' if it is)."""
    if all_finite(data):
        return ""
    flat, found = _first_not_finite(data)
    return (
        f"the value is not finite at this point ({found!r} at out{position(np.shape(data), flat)}): the function has no derivative "
        "there to check; choose another point"
    )


def _compare_values(session: Any, statement: Statement, left: Tensor, atol: float | None, rtol: float | None) -> CheckOutcome:
    """`check A == B`: equal shapes (or B a scalar) and every |A - B| <= atol + rtol * |B|."""
    assert statement.expected is not None
    right = session.evaluate(statement.expected)
    if isinstance(right, tuple) or not _is_tensor(right):
        raise LanguageError("value", "check A == B needs a tensor value on the right").at(statement.span)
    atol = VALUE_TOLERANCES[0] if atol is None else atol
    rtol = VALUE_TOLERANCES[1] if rtol is None else rtol
    outcome = CheckOutcome(text=statement.text, line=statement.span[0], status="pass", method="value", atol=atol, rtol=rtol)
    for side in (left, right):
        outcome.warnings += [w for w in _undefined(topological_order(side)) if w not in outcome.warnings]
    shown_a, shown_b = np.asarray(left.data), np.asarray(right.data)
    # Booleans and whole numbers (a < b, argmax) compare as the numbers they stand for
    # (NumPy refuses to subtract booleans); a failure shows them as they were.
    a, b = (data.astype(np.float64) if data.dtype.kind in "biu" else data for data in (shown_a, shown_b))
    if a.shape != b.shape and b.size != 1:
        outcome.status = "fail"
        outcome.message = f"shapes differ: left {a.shape}, right {b.shape}"
        return outcome
    if not all_finite(a):  # nan meets nan, inf meets inf: equal, but say that it is not a number that was checked
        flat, found = _first_not_finite(a)
        outcome.warnings.append(f"the value is not finite at this point ({found!r} at left{position(a.shape, flat)}): "
                                "where both sides agree there, they agree as inf or nan, not as numbers")
    b = np.broadcast_to(b.reshape(()) if b.shape != a.shape else b, a.shape)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    diff = np.where(same, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)
    if diff.size:
        outcome.max_abs_error = float(diff.max())
        outcome.max_rel_error = float(np.max(relative_error(diff, b)))
    if np.all(diff <= atol + rtol * np.abs(np.where(np.isfinite(b), b, 0.0))):
        return outcome
    flat = int(np.argmax(diff.reshape(-1)))
    where = position(a.shape, flat)
    outcome.status = "fail"
    shown_b = np.broadcast_to(shown_b.reshape(()) if shown_b.shape != a.shape else shown_b, a.shape)
    outcome.message = f"left{where} = {_item(shown_a, flat)}, right{where} = {_item(shown_b, flat)}"
    return outcome


def _item(data: np.ndarray, flat: int) -> str:
    """Element `flat` of a value as the language writes it (true and false for booleans)."""
    item = data.reshape(-1)[flat].item()
    return ("true" if item else "false") if isinstance(item, bool) else repr(item)


def statement_outcome(session: Any, statement: Statement) -> CheckOutcome | None:
    """Run one statement of a check file: a check's outcome, an error outcome (for any
    statement), or None for setup that ran. `gradcalc check -j` and the pytest plugin run
    files statement by statement through here too."""
    from .machine import CheckStatementResult

    text = statement.text if statement.kind in ("check", "error") else f"(setup) {statement.text}"
    try:
        result = session.run_statement(statement)
    except LanguageError as err:
        return error_outcome(text, statement.span, err)
    except SizeLimitError as err:  # the check's own Jacobian over the cap: a limit, as for any op
        return error_outcome(text, statement.span, LanguageError("size", str(err)))
    except MemoryError:
        return error_outcome(text, statement.span, LanguageError("size", "out of memory (a lower --max-elements refuses this sooner)"))
    except Exception as err:  # noqa: BLE001 - a bug in one check must not lose the batch
        return error_outcome(text, statement.span, LanguageError("internal", f"internal error: {type(err).__name__}: {err}"))
    return result.outcome if isinstance(result, CheckStatementResult) else None


def nothing_checked(program: Any) -> CheckOutcome | None:
    """The error of a file without checks (unless it already has errors of its own)."""
    if any(s.kind in ("check", "error") for s in program.statements):
        return None
    return CheckOutcome(text="(file)", line=1, status="error", message="no check statements: this file checks nothing")
