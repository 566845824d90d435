"""`gradcalc check`: run gradcheck batch files; a table, JSON, JUnit XML and exit codes."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:
    from gradcalc.parser.checks import CheckDefaults, CheckOutcome

PROGRESS_THRESHOLD = 20  # checks; a progress bar on stderr for longer batches


def check_line(o: CheckOutcome) -> str:
    where = f"{o.file}:{o.line}" if o.file else f"line {o.line}"
    if o.status == "error":
        return f"ERROR {where}  {o.text}  {o.message}"
    status = "PASS " if o.passed else "FAIL "
    text = f"{status}{where}  {o.text}  wrt {', '.join(o.variables)}  {o.method}  abs {o.max_abs_error:.3g}  rel {o.max_rel_error:.3g}"
    if o.message:
        text += f"  ({o.message})"
    return text + "".join(f"\n      warning: {w}" for w in o.warnings)


def outcome_object(o: CheckOutcome) -> dict[str, Any]:
    from .jsonout import _number

    return {
        "file": o.file, "line": o.line, "expression": o.text, "status": o.status, "variables": o.variables,
        "method": o.method, "max_abs_error": _number(o.max_abs_error), "max_rel_error": _number(o.max_rel_error),
        "atol": o.atol, "rtol": o.rtol, "warnings": o.warnings, "message": o.message,
    }


def run_check_file(origin: str, source: str, defaults: CheckDefaults, on_outcome: Any = None) -> list[CheckOutcome]:
    """Every check of one file; an error in one statement never stops the others."""
    from .checkrun import Part, run_part

    return run_part(Part(origin, source, 0, None, 0), defaults, [], on_outcome)


def count_checks(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.lstrip().startswith("check"))


def junit_xml(outcomes_by_file: list[tuple[str, list[CheckOutcome]]]) -> str:
    """JUnit XML: a testsuite per file, a testcase per check, failure / error elements."""
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites", name="gradcalc check")
    for origin, outcomes in outcomes_by_file:
        suite = ET.SubElement(
            suites, "testsuite", name=origin, tests=str(len(outcomes)),
            failures=str(sum(o.status == "fail" for o in outcomes)), errors=str(sum(o.status == "error" for o in outcomes)),
            time=f"{sum(o.seconds for o in outcomes):.3f}",
        )
        for o in outcomes:
            case = ET.SubElement(suite, "testcase", classname=origin, name=f"line {o.line}: {o.text}", time=f"{o.seconds:.3f}")
            if o.status == "fail":
                failure = ET.SubElement(case, "failure", message=f"max abs error {o.max_abs_error:.3g}, max rel error {o.max_rel_error:.3g} ({o.method})")
                failure.text = o.message
            elif o.status == "error":
                error = ET.SubElement(case, "error", message=o.message)
                error.text = o.message
            if o.warnings:
                ET.SubElement(case, "system-out").text = "\n".join(o.warnings)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check_command(
        files: Annotated[list[Path], typer.Argument(metavar="FILE... [NAME=VALUE]...", help="Gradcheck files ('-' reads stdin), and variables for them (W=@weights.npy).", show_default=False)],
        as_json: Annotated[bool, typer.Option("--json", help="Print all results as one JSON document.")] = False,
        junit: Annotated[Optional[Path], typer.Option("--junit-xml", metavar="PATH", help="Also write JUnit XML for CI.")] = None,
        tol: Annotated[Optional[float], typer.Option("--tol", min=0, help="atol and rtol for every check without its own.")] = None,
        method: Annotated[str, typer.Option("--method", help="auto, complex or central.")] = "auto",
        max_elements: Annotated[Optional[int], typer.Option("--max-elements", min=1, help="Largest tensor allowed.")] = None,
        jobs: Annotated[int, typer.Option("--jobs", "-j", min=0, help="Worker processes (0: one per core); results as with -j 1.")] = 1,
        output_format: Annotated[str, typer.Option("--format", help="text, or github (GitHub Actions annotations).")] = "text",
    ) -> None:
        """Run the `check` statements of gradcheck files and report each one.

        Exit status: 0 when every check passes, 1 when any fails or errors, 2 on bad usage.

        Example: gradcalc check examples/*.gc --junit-xml report.xml
        """
        from gradcalc.parser.checks import METHODS, CheckDefaults

        from . import render
        from .dataio import bound_or_exit, split_bindings
        from .main import _prepare_engine, _read_sources
        from .parallel import run_checks

        if method not in METHODS:
            render.warn(f"--method must be one of {', '.join(METHODS)}, not {method!r}")
            raise typer.Exit(2)
        if output_format not in ("text", "github"):
            render.warn(f"--format must be text or github, not {output_format!r}")
            raise typer.Exit(2)
        _prepare_engine(max_elements)
        defaults = CheckDefaults(method=method, atol=tol, rtol=tol)
        paths, bindings = split_bindings(files)
        sources, bound = _read_sources(paths), bound_or_exit(bindings, "tensor")
        total = sum(count_checks(s) for _, s in sources)
        with _progress(total) as advance:
            results = run_checks(sources, defaults, bound, jobs, advance)
        outcomes = [o for _, batch in results for o in batch]
        if junit is not None:
            try:
                junit.write_text(junit_xml(results))
            except OSError as err:
                render.warn(f"cannot write {junit}: {err.strerror}")
                raise typer.Exit(2) from None
        if as_json:
            from .jsonout import dumps

            print(dumps({"checks": [outcome_object(o) for o in outcomes], "summary": _summary_counts(outcomes)}))
        else:
            _report(outcomes, render.use_rich(sys.stdout) and output_format == "text", output_format == "github")
        raise typer.Exit(0 if all(o.passed for o in outcomes) else 1)


def _summary_counts(outcomes: list[CheckOutcome]) -> dict[str, int]:
    return {status: sum(o.status == status for o in outcomes) for status in ("pass", "fail", "error")}


def _summary(outcomes: list[CheckOutcome]) -> str:
    counts = _summary_counts(outcomes)
    warned = sum(bool(o.warnings) for o in outcomes)
    return f"{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors" + (f" ({warned} with warnings)" if warned else "")


def _report(outcomes: list[CheckOutcome], rich: bool, github: bool = False) -> None:
    from .annotations import github_lines

    if not rich:
        for o in outcomes:
            print("\n".join(github_lines(o, check_line(o))) if github else check_line(o))
        print(_summary(outcomes))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    for column in ("", "where", "check", "wrt", "method", "max abs", "max rel"):
        table.add_column(column, overflow="fold")
    marks = {"pass": "[green]PASS[/]", "fail": "[red]FAIL[/]", "error": "[red]ERROR[/]"}
    details = []
    for o in outcomes:
        where = f"{o.file}:{o.line}"
        numbers = ("", "") if o.status == "error" else (f"{o.max_abs_error:.2e}", f"{o.max_rel_error:.2e}")
        table.add_row(marks[o.status] + ("[yellow]*[/]" if o.warnings else ""), escape(where), escape(o.text), ", ".join(o.variables), o.method, *numbers)
        if o.message:
            details.append(f"[red]{escape(where)}[/] {escape(o.message)}")
        details += [f"[yellow]{escape(where)} warning:[/] {escape(w)}" for w in o.warnings]
    console = Console()
    console.print(table)
    for line in details:
        console.print(line, highlight=False)
    console.print(_summary(outcomes))


class _progress:
    """A rich progress bar on stderr when the batch is long and stderr is a terminal."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> Any:
        from . import render

        if self.total > PROGRESS_THRESHOLD and render.use_rich(sys.stderr):
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            task = self.bar.add_task("checking", total=self.total)
            return lambda: self.bar.advance(task)
        return lambda: None

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
