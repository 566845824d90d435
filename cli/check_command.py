"""`gradcalc check`: run gradcheck batch files; a table, JSON, JUnit XML and exit codes."""
from __future__ import annotations

import itertools
import re
import sys
from typing import TYPE_CHECKING, Any

from gradcalc.parser.check_statements import CheckDefaults
from gradcalc.parser.syntax import count_checks

from . import render
from .annotations import github_lines
from .common import (
    OutputFileError,
    prepare_engine,
    read_sources,
    refuse_overwriting,
    shorten,
    usage_error,
    write_file,
)
from .dataio import bound_or_exit, split_bindings
from .jsonout import dumps, json_number
from .parallel import run_checks

if TYPE_CHECKING:
    from pathlib import Path

    from gradcalc.parser.check_statements import CheckOutcome

PROGRESS_THRESHOLD = 20  # checks; a progress bar on stderr for longer batches


def check_line(o: CheckOutcome) -> str:
    where = f"{o.file}:{o.line}" if o.file else f"line {o.line}"
    if o.status == "error":
        return f"ERROR {where}  {shorten(o.text)}  {o.message}"
    status = {"pass": "PASS ", "disagree": "DISAGREE "}.get(o.status, "FAIL ")
    wrt = f"  wrt {', '.join(o.variables)}" if o.variables else ""
    text = f"{status}{where}  {shorten(o.text)}{wrt}  {o.how}  abs {o.max_abs_error:.3g}  rel {o.max_rel_error:.3g}"
    if o.against:  # the second engine's derivative against gradcalc's
        text += f"  {o.against} abs {o.against_abs_error:.3g}  rel {o.against_rel_error:.3g}"
    if o.message:
        text += f"  ({o.message})"
    return text + "".join(f"\n      warning: {w}" for w in o.warnings)


def outcome_object(o: CheckOutcome) -> dict[str, Any]:
    return {
        "file": o.file, "line": o.line, "expression": o.text, "status": o.status, "variables": o.variables,
        "method": o.method, "mode": o.mode, "max_abs_error": json_number(o.max_abs_error), "max_rel_error": json_number(o.max_rel_error),
        "atol": o.atol, "rtol": o.rtol, "warnings": o.warnings, "message": o.message,
        **({"against": {"engine": o.against, "max_abs_error": json_number(o.against_abs_error), "max_rel_error": json_number(o.against_rel_error)}}
           if o.against else {}),
    }


# Characters XML 1.0 cannot hold at all, not even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _xml_text(text: str) -> str:
    """`text` with the characters XML cannot hold written as \\xNN (ElementTree escapes
    markup but passes control characters through, which makes the file unreadable)."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def junit_xml(outcomes_by_file: list[tuple[str, list[CheckOutcome]]]) -> str:
    """JUnit XML: a testsuite per file, a testcase per check, failure / error elements."""
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites", name="gradcalc check")
    for origin, outcomes in outcomes_by_file:
        suite = ET.SubElement(
            suites, "testsuite", name=origin, tests=str(len(outcomes)),
            failures=str(sum(o.status in ("fail", "disagree") for o in outcomes)), errors=str(sum(o.status == "error" for o in outcomes)),
            time=f"{sum(o.seconds for o in outcomes):.3f}",
        )
        for o in outcomes:
            case = ET.SubElement(suite, "testcase", classname=origin, name=f"line {o.line}: {o.text}", time=f"{o.seconds:.3f}")
            if o.status in ("fail", "disagree"):
                failure = ET.SubElement(case, "failure", message=f"max abs error {o.max_abs_error:.3g}, max rel error {o.max_rel_error:.3g} ({o.how})")
                failure.text = o.message
            elif o.status == "error":
                error = ET.SubElement(case, "error", message=o.message)
                error.text = o.message
            if o.warnings:
                ET.SubElement(case, "system-out").text = "\n".join(o.warnings)
    return _xml_text(ET.tostring(suites, encoding="unicode", xml_declaration=True))


def check_action(
    files: list[Path], *, as_json: bool, junit: Path | None, tol: float | None, method: str, mode: str, max_elements: int | None,
    max_steps: int | None, max_input: int, jobs: int, output_format: str, max_seconds: float | None, max_memory: int | None,
    engine: str, device: str | None, against: str | None,
) -> int:
    """`gradcalc check`: run the `check` statements of FILE arguments and report each one.
    Returns 0 when every check passes, 1 when any fails or errors (exits 2 on bad usage)."""
    prepare_engine(max_elements, max_steps, max_input, max_seconds, max_memory)
    from .engines import choose_against

    choose_against(engine, device, against, as_json)
    defaults = CheckDefaults(method=method, mode=mode, atol=tol, rtol=tol, against=against, engine=engine, device=device)
    files, bindings = split_bindings(files, as_json)
    sources, bound = read_sources(_in_folders(files, as_json), max_input, as_json), bound_or_exit(bindings, engine, as_json)
    if junit is not None:  # refused before any check runs (a file a check loads is refused when the report is written)
        refuse_overwriting(junit, "--junit-xml", as_json)
    # A bar for a long batch, on a terminal only: counting the checks lexes every file.
    total = sum(count_checks(s) for _, s in sources) if render.use_rich(sys.stderr) else 0
    progress, done = render.LateProgress("checking"), itertools.count(1)
    try:
        results = run_checks(sources, defaults, bound, jobs, (lambda: progress(next(done), total)) if total > PROGRESS_THRESHOLD else lambda: None)
    finally:
        progress.close()
    outcomes = [o for _, batch in results for o in batch]
    report_checks(outcomes, as_json, render.use_rich(sys.stdout) and output_format == "text", github=output_format == "github")
    if junit is not None:  # after the results are shown, so a failed write loses nothing
        sys.stdout.flush()
        try:
            write_file(junit, junit_xml(results))
        except OutputFileError as err:
            usage_error(str(err))
    return 0 if all(o.passed for o in outcomes) else 1


def _in_folders(files: list[Path], as_json: bool) -> list[Path]:
    """The files to check: a folder stands for every .gc file under it, in order of their
    paths (`gradcalc check examples/`, as pytest takes a folder)."""
    found: list[Path] = []
    for path in files:
        if str(path) != "-" and path.is_dir():
            inside = [p for p in sorted(path.rglob("*.gc")) if _script_in_walk(p, as_json)]
            if not inside:
                usage_error(f"{path} is a folder with no .gc files in it", as_json)
            found += inside
        else:
            found.append(path)
    return found


def _script_in_walk(path: Path, as_json: bool) -> bool:
    """Whether the folder walk's `path` is a script to read: a regular file or a link to
    one. A folder named like a script (`c.gc/`) is not: the walk goes into it as into any
    other (and not through a link to one, as rglob does not). A named pipe, socket or device is refused before anything is opened, as a data
    file is: opening a pipe waits for a writer that may never come, and nothing in a
    folder is a pipe on purpose (one named as FILE, `check <(...)`, is read). A path that
    cannot be looked at (a dangling link, a loop) is kept, so that reading it says why, as
    for a file named on the command line."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return True
    if stat.S_ISDIR(mode):
        return False
    if not stat.S_ISREG(mode):
        usage_error(f"{path}: is not a regular file (a device, a pipe or a socket); in a folder, gradcalc check "
                    f"reads only files (name a pipe itself to read it)", as_json)
    return True


def report_checks(outcomes: list[CheckOutcome], as_json: bool, rich: bool, github: bool = False) -> None:
    """The results on stdout: one JSON document, or a line (a table on a terminal) per
    check and the summary."""
    if as_json:
        print(dumps({"checks": [outcome_object(o) for o in outcomes], "summary": _summary_counts(outcomes)}))
    else:
        _report(outcomes, rich, github=github)


def _summary_counts(outcomes: list[CheckOutcome]) -> dict[str, int]:
    counts = {status: sum(o.status == status for o in outcomes) for status in ("pass", "fail", "error")}
    disagree = sum(o.status == "disagree" for o in outcomes)
    return {**counts, "disagree": disagree} if disagree else counts


def _summary(outcomes: list[CheckOutcome]) -> str:
    counts = _summary_counts(outcomes)
    warned = sum(bool(o.warnings) for o in outcomes)
    disagree = f", {counts['disagree']} where the engines disagree" if counts.get("disagree") else ""
    return f"{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors{disagree}" + (f" ({warned} with warnings)" if warned else "")


def _report(outcomes: list[CheckOutcome], rich: bool, console: Any = None, github: bool = False) -> None:
    if not rich:
        for o in outcomes:
            print("\n".join(github_lines(o, check_line(o))) if github else check_line(o))
        print(_summary(outcomes))
        return
    from rich.markup import escape
    from rich.table import Table

    console = console or render.console()
    wheres = [f"{o.file}:{o.line}" for o in outcomes]
    numbers = [("", "") if o.status == "error" else (f"{o.max_abs_error:.2e}", f"{o.max_rel_error:.2e}") for o in outcomes]
    variables = [", ".join(o.variables) for o in outcomes]
    # `file:line` is what a user copies into an editor: it is never split. The expression
    # gives up its width first (shortened with an ellipsis), then the variables (folded).
    marks = [o.status.upper() + ("*" if o.warnings else "") for o in outcomes]
    fixed = {
        "": _widest(marks, ""), "where": _widest(wheres, "where"), "method": _widest([o.how for o in outcomes], "method"),
        "max abs": _widest([n[0] for n in numbers], "max abs"), "max rel": _widest([n[1] for n in numbers], "max rel"),
    }
    room = console.width - sum(fixed.values()) - 3 * len(fixed)  # 3: the rule and padding between columns
    if room < _SHORTEST_CHECK:  # the method goes before the expression is cut to nothing
        room += fixed.pop("method") + 3
    if room < _SHORTEST_CHECK:  # a path too long for any table: whole lines, which the terminal wraps
        for o in outcomes:
            console.print(escape(check_line(o)), highlight=False, soft_wrap=True)
        console.print(_summary(outcomes), highlight=False)
        return
    show_wrt = room >= 24  # on a narrow terminal the variables go before the expression does
    wrt_width = max(3, min(_widest(variables, "wrt"), room // 3)) if show_wrt else 0
    check_width = max(_SHORTEST_CHECK, min(_widest([o.text for o in outcomes], "check"), room - wrt_width - 3 * show_wrt))
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("", width=fixed[""], no_wrap=True)
    table.add_column("where", width=fixed["where"], no_wrap=True)
    table.add_column("check", width=check_width, no_wrap=True, overflow="ellipsis")
    if show_wrt:
        table.add_column("wrt", width=wrt_width, overflow="fold")
    for column in ("method", "max abs", "max rel"):
        if column in fixed:
            table.add_column(column, width=fixed[column], no_wrap=True)
    colours = {"pass": "green", "fail": "red", "error": "red", "disagree": "yellow"}
    details = []
    for o, where, pair, names in zip(outcomes, wheres, numbers, variables):
        mark = f"[{colours[o.status]}]{o.status.upper()}[/]" + ("[yellow]*[/]" if o.warnings else "")
        table.add_row(mark, escape(where), escape(o.text), *([escape(names)] if show_wrt else []), *([o.how] if "method" in fixed else []), *pair)
        if o.message:
            details.append(f"[red]{escape(where)}[/] {escape(o.message)}")
        details += [f"[yellow]{escape(where)} warning:[/] {escape(w)}" for w in o.warnings]
    console.print(table)
    for line in details:
        console.print(line, highlight=False)
    console.print(_summary(outcomes))


_SHORTEST_CHECK = 8  # columns of the expression below which it says too little to keep


def _widest(texts: list[str], heading: str) -> int:
    return max([len(heading), *map(len, texts)])
