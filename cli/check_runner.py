"""Running the checks of a check file, all of them or a slice: one place for
`gradcalc check` (serial and -j) and the pytest plugin.

A file's statements run in order in one session. Setup statements (assignments, defs)
always run; a check runs only when asked for, so a worker handed some of a file's
checks runs the setup and just those. Checks have no effect on the session, so skipping
some changes nothing for the others.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradcalc.autodiff import collector_paused
from gradcalc.parser import LanguageError, Session, compile_program
from gradcalc.parser.check_statements import CheckOutcome, make_check_handler, nothing_checked, statement_outcome

from . import render
from .dataio import apply_bindings, script_folder

if TYPE_CHECKING:
    from gradcalc.parser import Program, Statement
    from gradcalc.parser.check_statements import CheckDefaults

    from .dataio import Bound


@dataclass
class Part:
    """Statements [first, stop) of one file: their checks and their setup errors are
    this part's outcomes; the statements before `first` run as setup only."""

    origin: str
    source: str
    first: int
    stop: int | None  # None: to the end


@functools.lru_cache(maxsize=16)
def compile_file(origin: str, source: str, recover: bool = True) -> tuple[Program | None, CheckOutcome | None]:
    """The file's program, or the error outcome of a file that does not compile. With
    `recover` (as `gradcalc check` runs), a statement that does not parse is an error in
    its place. Cached: planning and each part of a file (in one process) parse it once."""
    try:
        return compile_program(source, recover=recover), None
    except LanguageError as err:
        return None, CheckOutcome(text="(file)", line=err.line or 0, status="error", message=err.located(), file=origin)


def check_indices(program: Program) -> list[int]:
    return [i for i, statement in enumerate(program.statements) if statement.kind == "check"]


class FileRun:
    """One file's session, advanced statement by statement. Statements of the kinds in
    `own` (checks) run only when asked for (`check`); setup runs the others."""

    def __init__(self, origin: str, program: Program, defaults: CheckDefaults, bound: Bound, on_notice: Callable[[str, str], None] | None = None,
                 own: frozenset[str] = frozenset({"check"})) -> None:
        self.origin = origin
        self.statements: list[Statement] = program.statements
        if defaults.engine != "tensor":  # (in a worker process too: the device asked for)
            from gradcalc.parser.engines import configure

            configure(defaults.device)
        self.session = Session(engine=defaults.engine, on_check=make_check_handler(defaults), base_dir=script_folder(origin), on_notice=on_notice)
        apply_bindings(self.session, bound)
        self.own = own
        self.next = 0  # the first statement not yet run (or skipped)
        self.setup_errors: dict[int, CheckOutcome] = {}  # by statement index, of the statements run so far

    def setup_until(self, stop: int) -> list[CheckOutcome]:
        """Run the setup statements before `stop` not run yet, skipping checks; the
        errors among them as outcomes."""
        errors = []
        for index in range(self.next, stop):
            if self.statements[index].kind not in self.own:
                for error in self.placed(statement_outcome(self.session, self.statements[index])):
                    self.setup_errors[index] = error
                    errors.append(error)
        self.next = max(self.next, stop)
        return errors

    def check(self, index: int) -> CheckOutcome:
        """Run the check at statement `index` (after the setup before it)."""
        self.setup_until(index)
        started = time.perf_counter()
        [outcome] = self.placed(statement_outcome(self.session, self.statements[index]))
        outcome.seconds = time.perf_counter() - started
        self.next = max(self.next, index + 1)
        return outcome

    def placed(self, outcome: CheckOutcome | None) -> list[CheckOutcome]:
        if outcome is None:
            return []
        outcome.file = self.origin
        return [outcome]


COLLECT_EVERY = 256  # statements run between the collector's passes (see run_part)


def run_part(part: Part, defaults: CheckDefaults, bound: Bound, on_outcome: Callable[[CheckOutcome], None] | None = None) -> list[CheckOutcome]:
    """The outcomes of one part, in statement order. An error in one statement never
    stops the others."""
    program, failed = compile_file(part.origin, part.source)
    if program is None:
        return [dataclasses.replace(failed)] if failed is not None and part.first == 0 else []
    # Every part runs its file's setup again: only the first says what the setup's loads read.
    run = FileRun(part.origin, program, defaults, bound, render.notice if part.first == 0 else None)
    run.setup_until(part.first)
    outcomes: list[CheckOutcome] = []

    def report(found: list[CheckOutcome]) -> None:
        outcomes.extend(found)
        if on_outcome is not None:
            for outcome in found:
                on_outcome(outcome)

    stop = len(program.statements) if part.stop is None else part.stop
    # Each statement runs with the collector paused; between statements it would collect
    # once per statement, its full passes walking every outcome and statement kept so far
    # (about a tenth of a 10,000-check file's time). So it resumes once per batch of
    # statements, which still collects whatever cycles they made.
    for first in range(part.first, stop, COLLECT_EVERY):
        with collector_paused():
            for index in range(first, min(first + COLLECT_EVERY, stop)):
                report([run.check(index)] if program.statements[index].kind == "check" else run.setup_until(index + 1))
    if part.stop is None:  # the file's last part
        report(run.placed(nothing_checked(program)))
    return outcomes
