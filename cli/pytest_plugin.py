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
    from gradcalc.cli.checkrun import FileRun
    from gradcalc.parser import Program
    from gradcalc.parser.checks import CheckOutcome

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
        from gradcalc.cli.checkrun import check_indices, compile_file
        from gradcalc.parser.checks import nothing_checked

        try:
            source = self.path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise self.CollectError(f"cannot read {self.path}: {err}") from None
        self.program, failed = compile_file(str(self.path), source, recover=False)  # a parse error fails collection
        if self.program is None:
            assert failed is not None
            raise self.CollectError(f"{self.path.name}: {failed.message}")
        empty = nothing_checked(self.program)
        if empty is not None:  # as `gradcalc check` has it: a check file that checks nothing fails
            raise self.CollectError(f"{self.path.name}: {empty.message}")
        seen: dict[str, int] = {}
        previous = -1  # the check before: a setup statement's error is reported by the next check
        for index in check_indices(self.program):
            statement = self.program.statements[index]
            name = f"{statement.span[0]} {' '.join(statement.text.split())}"
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # two equal checks on one line
                name += f" #{seen[name]}"
            yield CheckItem.from_parent(self, name=name, index=index, line=statement.span[0], after=previous)
            previous = index

    def run_before(self, index: int) -> FileRun:
        """The file's session with every setup statement before statement `index` run.
        Items usually come in file order; one that comes earlier starts a new session."""
        import numpy as np

        from gradcalc.cli.checkrun import FileRun
        from gradcalc.parser.checks import CheckDefaults

        assert self.program is not None
        if self.run is None or self.run.next > index:
            self.run = FileRun(str(self.path), self.program, CheckDefaults(), [])
        with np.errstate(all="ignore"):  # inf and nan are results here, not warnings
            self.run.setup_until(index)
        return self.run

    def teardown(self) -> None:
        self.run = None  # the file's last item has run here: free its graphs


class CheckItem(pytest.Item):
    """One `check` statement."""

    def __init__(self, *, index: int, line: int, after: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = index
        self.line = line
        self.after = after  # the index of the check before this one (-1: none)

    @property
    def check_file(self) -> CheckFile:
        assert isinstance(self.parent, CheckFile)
        return self.parent

    def setup(self) -> None:
        self.check_file.run_before(self.index)

    def teardown(self) -> None:
        """A setup statement that failed is one error, as `gradcalc check` counts it, and the
        checks after it still run: the first check after the statement reports it, at its
        teardown (pytest counts that check's own verdict and the error apart). Which check
        reports is fixed by the file, so every xdist worker agrees."""
        run = self.check_file.run
        statements = self.check_file.program.statements if self.check_file.program else []
        first_line = statements[self.after].span[0] if self.after >= 0 else 0
        mine = [e for e in (run.setup_errors if run else []) if first_line < e.line < self.line]
        if mine:  # pytrace=False: the error itself, not gradcalc's traceback
            pytest.fail(setup_report(mine, self.check_file.nodeid), pytrace=False)

    def runtest(self) -> None:
        import numpy as np

        run = self.check_file.run_before(self.index)
        with np.errstate(all="ignore"):
            outcome = run.check(self.index)
        for warning in outcome.warnings:
            self.warn(GradcheckWarning(warning))
        if not outcome.passed:
            pytest.fail(check_report(outcome, self.check_file.nodeid), pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.line - 1, f"{self.path.name}:{self.line}: check {self.name.split(' ', 1)[1]}"


def check_report(o: CheckOutcome, where: str) -> str:
    """A failed or erroring check as pytest shows it (`where`: the file, as pytest names
    it); the first line is the summary."""
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
