"""`check` statements: gradient checks written in the language.

    check EXPR [wrt a, b] [tol=1e-6] [atol=...] [rtol=...] [method="central"]

The expression's recorded graph is checked: reverse mode against complex step where
every op on it is complex-safe, central differences otherwise (see
gradcalc.autodiff.gradcheck). A failed check names the ops whose own VJP disagrees.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradcalc.autodiff import Tensor
from gradcalc.autodiff.gradcheck import gradcheck_graph, suspect_ops

from .analysis import variables_in
from .backends import to_param
from .compiler import Statement
from .errors import LanguageError, Span

METHODS = ("auto", "complex", "central")
OPTIONS = ("tol", "atol", "rtol", "method")


@dataclass
class CheckOutcome:
    """One check's result. status: pass, fail or error."""

    text: str
    line: int
    status: str
    variables: list[str] = field(default_factory=list)
    method: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    atol: float = 0.0
    rtol: float = 0.0
    warnings: list[str] = field(default_factory=list)
    message: str = ""
    file: str = ""
    seconds: float = 0.0  # wall time of the check (JUnit's `time`)

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass
class CheckDefaults:
    """Run-wide overrides (`gradcalc check --tol/--method`); a check's own options win."""

    method: str = "auto"
    atol: float | None = None
    rtol: float | None = None


def error_outcome(text: str, span: Span, err: LanguageError) -> CheckOutcome:
    return CheckOutcome(text=text, line=span[0], status="error", message=err.located())


def make_check_handler(defaults: CheckDefaults | None = None) -> Any:
    """A Session.on_check that runs the check and returns a CheckOutcome."""
    defaults = defaults or CheckDefaults()

    def handle(session: Any, statement: Statement, value: Any) -> CheckOutcome:
        return run_check(session, statement, value, defaults)

    return handle


def _options(session: Any, statement: Statement, defaults: CheckDefaults) -> tuple[str, float | None, float | None]:
    method, atol, rtol = defaults.method, defaults.atol, defaults.rtol
    for key, (code, span) in statement.options.items():
        if key not in OPTIONS:
            raise LanguageError("argument", f"unknown check option {key!r} (options: {', '.join(OPTIONS)})").at(span)
        value = to_param(session.evaluate(code), f"check option {key}")
        if key == "method":
            if value not in METHODS:
                raise LanguageError("argument", f"method must be one of {', '.join(METHODS)}").at(span)
            method = value
        elif not isinstance(value, (int, float)) or value < 0:
            raise LanguageError("argument", f"{key} must be a non-negative number").at(span)
        elif key == "tol":
            atol = rtol = float(value)
        elif key == "atol":
            atol = float(value)
        else:
            rtol = float(value)
    return method, atol, rtol


def run_check(session: Any, statement: Statement, value: Any, defaults: CheckDefaults) -> CheckOutcome:
    line = statement.span[0]
    if session.engine != "tensor":
        raise LanguageError("argument", "check statements need the tensor engine").at(statement.span)
    if isinstance(value, tuple) or not isinstance(value, Tensor):
        raise LanguageError("value", "check needs an expression with a tensor value").at(statement.span)
    method, atol, rtol = _options(session, statement, defaults)
    if statement.wrt:
        leaves = []
        for name in statement.wrt:
            if name not in session.variables:
                raise LanguageError("name", f"check ... wrt {name}: {name!r} is not a variable").at(statement.span)
            leaves.append(session.variables[name])
    else:
        leaves = variables_in(value)
    if not leaves:
        raise LanguageError("value", "nothing to check: the expression uses no variables").at(statement.span)
    result = gradcheck_graph(value, leaves, method=method, atol=atol, rtol=rtol)
    warnings = [f"evaluated at a kink of {name}: the derivative there is a convention, not a limit" for name in result.kinks]
    outcome = CheckOutcome(
        text=statement.text, line=line, status="pass" if result.passed else "fail",
        variables=[leaf.name or "?" for leaf in leaves], method=result.method,
        max_abs_error=result.max_abs_error, max_rel_error=result.max_rel_error, atol=result.atol, rtol=result.rtol,
        warnings=warnings,
    )
    if not result.passed:
        suspects = suspect_ops(value)
        outcome.message = result.worst + (f"; ops whose VJP disagrees: {', '.join(suspects)}" if suspects else "")
    return outcome
