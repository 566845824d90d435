"""The statement's budget around the work done on a value outside the machine: the backward
and forward passes of a report (analysis.py), `--steps`, a plot's samples.

The machine runs every statement inside a budget of steps, time and memory
(autodiff/limits.py) and turns the engine's limit errors into LanguageErrors at the
statement. What is computed from the statement's value afterwards is part of the same
command, so it runs under the same budget (`report_budget`: the statement's budget goes
on where the statement stopped), or under one of its own for a command that is one unit
of work (`command_budget`: a plot and every point it samples). Either way the engine's
limit errors, and a stack that runs out, come out as LanguageErrors with the machine's
words and kinds, so that every caller shows them as it shows any error of the language.
"""
from __future__ import annotations

from typing import Any

from gradcalc.autodiff import SizeLimitError
from gradcalc.autodiff.limits import StepLimitError, continued_budget, step_budget

from .errors import LanguageError, Span

OUT_OF_MEMORY = "out of memory (a lower --max-elements or --max-memory refuses such work sooner)"
TOO_DEEP = ("nested too deeply for Python's stack (transformations of transformations, or rules calling "
            "what calls them); nest fewer levels")


def as_language_error(err: BaseException) -> LanguageError | None:
    """The LanguageError the machine would have made of an engine's limit error (None for
    any other exception)."""
    if isinstance(err, StepLimitError):  # (the budgets: steps, time, memory)
        return LanguageError(err.kind, str(err))
    if isinstance(err, SizeLimitError):
        return LanguageError("size", str(err))
    if isinstance(err, MemoryError):
        return LanguageError("size", OUT_OF_MEMORY)
    if isinstance(err, RecursionError):
        return LanguageError("recursion", TOO_DEEP)
    return None


class limit_errors:  # noqa: N801 - used as a function: `with limit_errors(span):`
    """Inside a running budget: the engine's limit errors that leave the block leave it as
    LanguageErrors (as_language_error), and every LanguageError is placed at `span` when
    it has no place of its own."""

    __slots__ = ("span",)

    def __init__(self, span: Span | None = None) -> None:
        self.span = span

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, trace: Any) -> None:
        if err is None:
            return
        if isinstance(err, LanguageError):
            err.at(self.span)
            return
        translated = as_language_error(err)
        if translated is not None:
            raise translated.at(self.span) from None


class _Budgeted(limit_errors):
    """A budget (limits' context manager) whose limit errors leave as LanguageErrors."""

    __slots__ = ("budget",)

    def __init__(self, budget: Any, span: Span | None) -> None:
        super().__init__(span)
        self.budget = budget

    def __enter__(self) -> None:
        self.budget.__enter__()

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, trace: Any) -> None:
        self.budget.__exit__(kind, err, trace)
        super().__exit__(kind, err, trace)


def report_budget(span: Span | None = None) -> _Budgeted:
    """`with report_budget(span):` the work on the value of the statement that ran last,
    under that statement's budget, going on (errors placed at `span`, the statement)."""
    return _Budgeted(continued_budget(), span)


def command_budget(span: Span | None = None) -> _Budgeted:
    """`with command_budget():` a fresh budget for a command that is one unit of work; the
    statements run inside it share it."""
    return _Budgeted(step_budget(), span)
