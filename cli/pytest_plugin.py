"""pytest collects gradcalc check files: every `check` of a `*.gc` file is one test item.

    pytest examples/              examples/seed.gc::7 (a*b + exp(c)).relu()/a  PASSED ...
    pytest -n auto examples/      the same checks over every core (pytest-xdist)

Registered through the `pytest11` entry point (pyproject.toml), so installing gradcalc
is enough. Collection is opt-in by place: .gc files are collected at or below the paths
given on the command line, or listed in `testpaths` when pytest runs without paths, and
nowhere else, so a bare `pytest` in a project does not start running check files it has
never asked for. `--gc=all` collects every .gc file pytest visits, `--gc=off` none; the
ini option `gradcalc_collect` sets the default. See docs/gradcheck.md.

An item's setup runs the file's statements before its check (once per file and worker:
the session is kept on the file's node); an error there fails the item at setup, with
that error. A failed check shows the check's report; a kink warning is a pytest warning.

pytest imports this module in every run of an environment holding gradcalc, so it
imports neither NumPy nor gradcalc's engine and parser until a .gc file is collected.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gradcalc.cli.check_runner import FileRun
    from gradcalc.parser import Program
    from gradcalc.parser.check_statements import CheckOutcome

MODES = ("auto", "all", "off")


class GradcheckWarning(UserWarning):
    """A check passed or failed at a point where the derivative is a convention (a kink)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcalc", "gradcalc check files (*.gc)")
    group.addoption(
        "--gc", dest="gradcalc_collect", choices=MODES, default=None,
        help="collect *.gc check files: auto (only under the paths given or testpaths; the default), all, or off",
    )
    parser.addini("gradcalc_collect", "collect *.gc check files: auto, all or off", default="auto")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".gc" or not _wanted(parent.config, file_path):
        return None
    return CheckFile.from_parent(parent, path=file_path)


def _wanted(config: pytest.Config, path: Path) -> bool:
    mode = config.getoption("gradcalc_collect") or config.getini("gradcalc_collect")
    if mode not in MODES:
        raise pytest.UsageError(f"gradcalc_collect must be one of {', '.join(MODES)}, not {mode!r}")
    if mode != "auto":
        return mode == "all"
    path = path.resolve()
    return any(path == root or root in path.parents for root in _chosen_roots(config))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """When nothing ran but the folder holds check files that the opt-in rule left out,
    say how to run them (pytest's own "no tests ran" does not know they are there)."""
    if exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED:
        return
    mode = config.getoption("gradcalc_collect") or config.getini("gradcalc_collect")
    if mode == "off":
        return
    found = _check_files(config.invocation_params.dir)
    if found:
        shown = ", ".join(str(p) for p in found[:3]) + (", ..." if len(found) > 3 else "")
        terminalreporter.write_line(
            f"gradcalc: {len(found)}{'+' if len(found) == HINT_LIMIT else ''} check file(s) not collected ({shown}): "
            "a bare pytest collects .gc files only under the paths it is given or its testpaths; "
            "run `pytest .` (or name their folder), list the folder in testpaths, or pass --gc=all", yellow=True)


HINT_LIMIT = 20  # check files counted for the hint: enough to say "there are some"


def _check_files(folder: Path) -> list[Path]:
    found = (path.relative_to(folder) for path in folder.rglob("*.gc"))
    return sorted(itertools.islice((path for path in found if not any(part.startswith(".") for part in path.parts)), HINT_LIMIT))


def _chosen_roots(config: pytest.Config) -> list[Path]:
    """The paths the user named (or testpaths named): not the invocation folder that
    pytest falls back to when neither names any."""
    source = getattr(config, "args_source", None)  # pytest >= 7.2; before, args are taken as given
    if source is not None and source.name == "INVOCATION_DIR":
        return []
    base = config.invocation_params.dir
    return [(base / arg.split("::")[0]).resolve() for arg in config.args]


class CheckFile(pytest.File):
    """A .gc file: its checks as items, and the session they share on one worker."""

    program: Program | None = None
    run: FileRun | None = None

    def collect(self) -> Iterator[CheckItem]:
        """An item per check and per statement that does not parse (as `gradcalc check`
        lists them, each in its place, and runs the rest); a file with no check at all,
        or one that cannot be read, is one item that fails with what is wrong. Never a
        collection error, which would interrupt the whole session."""
        from gradcalc.cli.check_runner import compile_file
        from gradcalc.parser.check_statements import CheckOutcome, nothing_checked

        try:
            source = self.path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            yield self._file_item(CheckOutcome(text="(file)", line=1, status="error", message=f"cannot read {self.path}: {err}"))
            return
        self.program, failed = compile_file(str(self.path), source)  # a statement that does not parse is an error in its place
        if self.program is None:
            assert failed is not None
            yield self._file_item(failed)
            return
        empty = nothing_checked(self.program)
        if empty is not None:  # as `gradcalc check` has it: a check file that checks nothing fails
            yield self._file_item(empty)
            return
        indices = [i for i, statement in enumerate(self.program.statements) if statement.kind in ITEM_KINDS]
        seen: dict[str, int] = {}
        for k, index in enumerate(indices):
            statement = self.program.statements[index]
            name = f"{statement.span[0]} {' '.join(statement.text.split())}"
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # two equal checks on one line
                name += f" #{seen[name]}"
            # `after`: the item before (-1: none); the setup statements between it and this
            # one report their errors through this item, and the last item those after it.
            yield CheckItem.from_parent(self, name=name, index=index, line=statement.span[0], after=indices[k - 1] if k else -1,
                                        last=k == len(indices) - 1)

    def _file_item(self, outcome: CheckOutcome) -> CheckItem:
        return CheckItem.from_parent(self, name=f"{outcome.line} {outcome.text}", index=None, line=outcome.line, after=-1, last=True,
                                     fixed=outcome)

    def run_before(self, index: int | None) -> FileRun | None:
        """The file's session with every setup statement before statement `index` (None:
        every one) run. Items usually come in file order; one that comes earlier starts a
        new session."""
        import numpy as np

        from gradcalc.cli.check_runner import FileRun
        from gradcalc.parser.check_statements import CheckDefaults

        if self.program is None:
            return None
        stop = len(self.program.statements) if index is None else index
        if self.run is None or self.run.next > stop:
            self.run = FileRun(str(self.path), self.program, CheckDefaults(), [], own=ITEM_KINDS)
        with np.errstate(all="ignore"):  # inf and nan are results here, not warnings
            self.run.setup_until(stop)
        return self.run

    def teardown(self) -> None:
        self.run = None  # the file's last item has run here: free its graphs


ITEM_KINDS = frozenset({"check", "error"})  # the statements that are items: checks, and those that do not parse


class CheckItem(pytest.Item):
    """One `check` statement (or one that does not parse, or the whole file when it
    checks nothing). It runs at setup, so that a check that cannot run is a pytest
    error, as `gradcalc check` counts it an ERROR; the test itself is its verdict."""

    def __init__(self, *, index: int | None, line: int, after: int, last: bool, fixed: CheckOutcome | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = index  # the statement's (None: the file's item)
        self.line = line
        self.after = after  # the index of the item's statement before this one (-1: none)
        self.last = last
        self.outcome = fixed

    @property
    def check_file(self) -> CheckFile:
        assert isinstance(self.parent, CheckFile)
        return self.parent

    def setup(self) -> None:
        import numpy as np

        run = self.check_file.run_before(self.index)
        if self.index is not None and run is not None:
            with np.errstate(all="ignore"):
                self.outcome = run.check(self.index)
        assert self.outcome is not None
        if self.outcome.status == "error":  # pytrace=False: the error itself, not gradcalc's traceback
            pytest.fail(check_report(self.outcome, self.check_file.nodeid, self.kind), pytrace=False)

    @property
    def kind(self) -> str:
        program = self.check_file.program
        return program.statements[self.index].kind if program is not None and self.index is not None else "file"

    def teardown(self) -> None:
        """A setup statement that failed is one error, as `gradcalc check` counts it, and the
        checks after it still run: the first item after the statement reports it, at its
        teardown (pytest counts that item's own verdict and the error apart), and the last
        item the errors of the statements after it. Which item reports is fixed by the
        file, so every xdist worker agrees."""
        run = self.check_file.run_before(None) if self.last else self.check_file.run
        stop = len(self.check_file.program.statements) if self.last and self.check_file.program else (self.index or 0)
        mine = [error for index, error in sorted((run.setup_errors if run else {}).items()) if self.after < index < stop]
        if mine:
            pytest.fail(setup_report(mine, self.check_file.nodeid), pytrace=False)

    def runtest(self) -> None:
        outcome = self.outcome
        assert outcome is not None  # (setup made it, or failed)
        for warning in outcome.warnings:
            self.warn(GradcheckWarning(warning))
        if not outcome.passed:
            pytest.fail(check_report(outcome, self.check_file.nodeid), pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        what = "check " if self.kind == "check" else ""
        return self.path, self.line - 1, f"{self.path.name}:{self.line}: {what}{self.name.split(' ', 1)[1]}"


def check_report(o: CheckOutcome, where: str, kind: str = "check") -> str:
    """A failed or erroring check as pytest shows it (`where`: the file, as pytest names
    it; `kind`: the statement's, "error" for one that does not parse, or "file"); the
    first line is the summary."""
    if o.status == "error" and kind == "error":
        return f"syntax error: {o.message}\n  {where}:{o.line}: {o.text}"
    if o.status == "error" and kind == "file":
        return f"{o.message}\n  {where}"
    if o.status == "error":
        return f"check could not run: {o.message}\n  {where}:{o.line}: check {o.text}"
    value = o.method == "value"  # `check A == B`
    rule = "|A - B| <= atol + rtol*|B|" if value else f"|{o.mode} - numeric| <= atol + rtol*|numeric|"
    lines = [
        f"{'value check' if value else f'gradcheck ({o.how})'} failed: max abs error {o.max_abs_error:.6g}, max rel error {o.max_rel_error:.6g}",
        f"  {where}:{o.line}: check {o.text}",
        *([f"  with respect to: {', '.join(o.variables)}"] if o.variables else []),
        f"  tolerances: atol {o.atol:g}, rtol {o.rtol:g} (an entry passes when {rule})",
    ]
    worst, _, suspects = o.message.partition("; ")
    if worst:
        lines.append(f"  largest error: {worst}")
    if suspects:
        lines.append(f"  {suspects}")
    lines += [f"  warning: {w}" for w in o.warnings]
    return "\n".join(lines)


def setup_report(errors: list[CheckOutcome], where: str) -> str:
    first = errors[0]
    lines = [f"setup failed at line {first.line}: {first.message.split(': ', 1)[-1]}"]
    lines += [f"  {where}:{e.line}: {e.text.removeprefix('(setup) ')}\n    error: {e.message}" for e in errors]
    return "\n".join(lines)
