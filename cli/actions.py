"""What `gradcalc eval` and `gradcalc run` do, as plain functions.

cli/options.py declares the commands' arguments and options (with their defaults, so
these functions have none); typer (cli/main.py) or the plain path (cli/entry.py) calls
them with every one. Each returns the exit status (or exits 2 through common.fail /
common.usage_error).
"""
from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any

from gradcalc.parser import CheckStatementResult, ExpressionResult, HelpResult, LanguageError, Session, compile_program
from gradcalc.parser.analysis import Analysis, analyze

from . import render
from .bindings import BindingError, bind
from .common import OutputFileError, dot_format, fail, prepare_engine, read_sources, shorten, usage_error, write_dot
from .common import wrt_names as parse_wrt

if TYPE_CHECKING:
    from pathlib import Path

    from gradcalc.parser.check_statements import CheckOutcome


def evaluate_expression(
    expr: str, bindings: list[str], engine: str, wrt: list[str] | None, mode: str = "reverse", jit: bool = True,
) -> tuple[Analysis | HelpResult | None, list[CheckOutcome]]:
    """Bind the NAME=VALUE pairs as variables, run EXPR and analyse its last expression
    (or give its help text, for help(NAME)); with the outcome of each `check` statement in
    it, run as a check file runs them (the analysis is None when EXPR has checks and no
    expression).

    Gradients are reported for every bound name (0 for one the output does not use) and
    for every other named value in the output's graph (see analyze), unless `wrt` names
    them; `mode` "forward" finds them by forward mode. An error in a binding is a BindingError."""
    session = Session(engine=engine, on_check=_run_check, on_warning=render.warn, on_notice=render.notice)
    bind(session, bindings)
    names = list(session.variables)
    program = compile_program(expr)
    if not program.statements:
        raise LanguageError("argument", "nothing to evaluate: the expression is empty")
    if engine == "jax" and mode == "reverse" and jit:  # the program whole under jax.jit, where it can be
        from gradcalc.parser.engines.jit import jitted_analysis

        jitted = jitted_analysis(program, session, wrt, names)
        if jitted is not None:
            return jitted, []
    ran = session.run(program)
    checks = [r.outcome for r in ran if isinstance(r, CheckStatementResult)]
    results = [r for r in ran if isinstance(r, ExpressionResult | HelpResult)]
    if not results:
        if checks:
            return None, checks
        raise LanguageError("argument", "nothing to show: the last statement assigns; end with an expression")
    last = results[-1]
    if isinstance(last, HelpResult):
        return last, checks
    code = next((s.code for s in program.statements if s.span == last.span), None)
    return analyze(last.value, wrt, session.variables, names, session=session, code=code, mode=mode, span=last.span), checks


def _run_check(session: Any, statement: Any, value: Any) -> CheckOutcome:
    """eval's Session.on_check: the checker is imported only by an EXPR with a check in it
    (gradcheck and its batching are a large part of a one-shot command's imports)."""
    from gradcalc.parser.check_statements import make_check_handler

    outcome: CheckOutcome = make_check_handler()(session, statement, value)
    return outcome


def eval_action(
    expr: str, bindings: list[str] | None, *, tree: bool, dot: str | None, steps: bool, mode: str, engine: str, device: str | None,
    wrt: str | None, as_json: bool,
    digits: int | None, full: bool, max_elements: int | None, max_steps: int | None, max_input: int, save: Path | None,
    max_seconds: float | None, max_memory: int | None,
) -> int:
    """`gradcalc eval`: the value, the gradient per variable and the graph's statistics."""
    prepare_engine(max_elements, max_steps, max_input, max_seconds, max_memory)
    if mode == "forward" and engine == "scalar" and not steps:
        usage_error("--mode forward needs the tensor engine for gradients (the scalar engine's forward mode is only what --steps shows)", as_json)
    from .engines import choose_engine, refuse_graph_options

    choose_engine(engine, device, as_json)
    refuse_graph_options(engine, [("--tree", tree), ("--dot", dot), ("--steps", steps and engine != "jax")], as_json)
    if mode == "forward" and engine in ("jax", "torch"):
        usage_error(f"--mode forward is gradcalc's forward mode; --engine {engine} reports {engine}'s reverse-mode gradients "
                    "(write jacfwd(f) in the program for that library's forward mode)", as_json)
    jaxpr, steps = steps and engine == "jax", steps and engine != "jax"  # (--steps on JAX: the jaxpr of the gradient)
    if save is not None:  # (dataio imports pathlib, which a plain eval does without: start-up)
        from .dataio import refuse_save_suffix

        refuse_save_suffix(save, as_json)
    if dot is not None:
        try:
            dot_format(dot)  # refuse an unknown format before computing anything
        except OutputFileError as err:
            usage_error(str(err), as_json)
    # `--dot -`: stdout carries the DOT text alone, for `| dot -Tsvg`; the report (or the
    # JSON document) goes to stderr.
    stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr) if dot == "-" else contextlib.nullcontext():
        if expr.strip() == "-":
            expr = read_sources(["-"], max_input, as_json)[0][1]
        try:
            wrt_names = parse_wrt(wrt) if wrt is not None else None
        except ValueError as err:
            usage_error(str(err), as_json)
        try:
            analysis, checks = evaluate_expression(expr, bindings or [], engine, wrt_names, "forward" if mode == "forward" and not steps else "reverse",
                                                   jit=not jaxpr)  # (the jaxpr shown is of the graph run op by op)
        except BindingError as err:
            fail(err.error, err.source, as_json)
        except LanguageError as err:
            fail(err, expr, as_json)
        status = 0 if all(o.passed for o in checks) else 1
        if analysis is None:  # only checks: their verdicts, as `gradcalc check` gives them
            from .check_command import report_checks

            given = [flag for flag, on in (("--tree", tree), ("--steps", steps), ("--dot", dot), ("--save", save)) if on]
            if given:
                usage_error(f"{given[0]} shows an expression's result, and this one has only checks", as_json)
            report_checks(checks, as_json, rich=style(digits, full).rich)
            return status
        if checks and not as_json:
            from .check_command import check_line

            for outcome in checks:
                print(check_line(outcome))
        if not isinstance(analysis, Analysis):  # help(NAME): its text is the result
            if save is not None:  # (refused before it is shown, as a file that cannot be written is)
                usage_error(f"--save writes a value and its gradients, and this result is {_unsaveable(analysis)}: nothing to save", as_json)
            if as_json:
                from .jsonout import dumps, lines_object

                print(dumps(_with_checks(lines_object(analysis.lines, analysis.value), checks)))
            else:
                render.renderer(style(digits, full)).lines(analysis.lines)
            return status
        if save is not None:  # before the report: a file that cannot be written is the one document
            from .dataio import save_or_exit

            save_or_exit(save, analysis, as_json)
        output = analysis.output

        def draw(labels: dict[tuple[int, int], str] | None) -> None:
            """--dot, before the report: a graph that cannot be written is the one error."""
            if dot is not None:
                try:
                    with contextlib.redirect_stdout(stdout):
                        write_dot(output, dot, edge_labels=labels)
                except OutputFileError as err:
                    usage_error(str(err), as_json)

        if steps:  # the report and the backward pass; the DOT file has gradients on its edges
            from gradcalc.parser.budgets import report_budget

            from .step_display import eval_with_steps

            try:
                with report_budget(analysis.span):  # (the pass shown is the statement's too: its budget goes on)
                    eval_with_steps(analysis, as_json=as_json, style=style(digits, full), tree=tree, mode=mode, draw=draw)
            except LanguageError as err:
                fail(err, expr, as_json)
        else:
            draw(None)
            if as_json:
                from .jsonout import analysis_object, dumps

                print(dumps(_with_checks(analysis_object(analysis), checks)))
            else:
                render.renderer(style(digits, full)).analysis(analysis, tree=tree)
            if jaxpr:
                from gradcalc.parser.engines.report import gradient_jaxpr

                print(f"steps: the gradient as JAX computes it (jax.make_jaxpr of jax.grad):\n{gradient_jaxpr(analysis)}")
        return status


def _unsaveable(result: HelpResult) -> str:
    """What a result that --save cannot write is (a tuple's items can be saved one by one)."""
    if isinstance(result.value, tuple):
        return "a tuple (save one of its items, as in r[0])"
    return "a function" if result.value is not None else "help text"


def _with_checks(document: dict[str, Any], checks: list[CheckOutcome]) -> dict[str, Any]:
    """eval's JSON document with the outcomes of EXPR's checks, as `check --json` gives them."""
    if not checks:
        return document
    from .check_command import outcome_object

    return {**document, "checks": [outcome_object(o) for o in checks]}


def default_action(*, engine: str, device: str | None, digits: int | None, max_elements: int | None, max_steps: int | None, max_input: int,
                   max_seconds: float | None, max_memory: int | None) -> int:
    """`gradcalc` with no command: the REPL on a terminal, or piped stdin run as a script."""
    if sys.stdin is None:
        usage_error("stdin is closed: nothing to run (start gradcalc on a terminal for the REPL)")
    prepare_engine(max_elements, max_steps, max_input, max_seconds, max_memory)
    from .engines import choose_engine

    choose_engine(engine, device)
    if sys.stdin.isatty():
        from .repl import start_repl

        start_repl(engine, digits)
        return 0
    return run_sources(read_sources(["-"], max_input), engine, as_json=False, style=style(digits, False), tree=False)


def style(digits: int | None, full: bool) -> Any:
    """How numbers and tensors print on stdout: rich on a terminal, plain in a pipe."""
    return render.Style(digits, render.use_rich(sys.stdout), full)


def run_action(
    files: list[Path], *, engine: str, device: str | None, as_json: bool, tree: bool, digits: int | None, full: bool, max_elements: int | None,
    max_steps: int | None, max_input: int, save: Path | None, max_seconds: float | None, max_memory: int | None,
) -> int:
    """`gradcalc run`: FILE and NAME=VALUE arguments, every script run statement by statement."""
    from .dataio import refuse_save_suffix, split_bindings

    prepare_engine(max_elements, max_steps, max_input, max_seconds, max_memory)
    from .engines import choose_engine, refuse_graph_options

    choose_engine(engine, device, as_json)
    refuse_graph_options(engine, [("--tree", tree)], as_json)
    refuse_save_suffix(save, as_json)
    paths, bindings = split_bindings(files, as_json)
    return run_sources(read_sources(paths, max_input, as_json), engine, as_json, style(digits, full), tree, bindings, save)


def run_sources(sources: list[tuple[str, str]], engine: str, as_json: bool, style: Any, tree: bool,
                bindings: list[str] | None = None, save: Path | None = None) -> int:
    """Run scripts statement by statement, printing each expression statement's result.
    Returns the exit code: 2 after an error, 1 if a check failed, else 0."""
    from gradcalc.parser.check_statements import make_check_handler

    from .check_command import check_line, outcome_object
    from .dataio import apply_bindings, bound_or_exit, save_or_exit, script_folder
    from .jsonout import analysis_object, dumps, lines_object

    out = render.renderer(style)
    code = 0
    bound = bound_or_exit(bindings or [], engine, as_json)
    last: tuple[str, Analysis | HelpResult] | None = None  # the last result shown, where it was: what --save writes
    for origin, source in sources:
        session = Session(
            engine=engine, on_check=make_check_handler(), base_dir=script_folder(origin), on_warning=render.warn, on_notice=render.notice,
        )
        apply_bindings(session, bound)
        try:
            program = compile_program(source)
            if engine == "jax":  # the script whole under jax.jit, where it can be (else each report says why not)
                from gradcalc.parser.engines.jit import jitted_reports

                reports = jitted_reports(program, session, None, [])
                for report in reports or []:
                    last = f"{origin}:{report.line}", report.analysis
                    if as_json:
                        print(dumps({"file": origin, "line": report.line, "expression": report.text, **analysis_object(report.analysis)}))
                    else:
                        out.heading(f"{origin}:{report.line}  {shorten(report.text)}")
                        out.analysis(report.analysis, tree=tree)
                if reports is not None:
                    continue
            for statement in program.statements:
                result = session.run_statement(statement)
                if isinstance(result, ExpressionResult):
                    analysis = analyze(result.value, None, session.variables, session=session, code=statement.code, span=result.span)
                    last = f"{origin}:{result.span[0]}", analysis
                    if as_json:
                        print(dumps({"file": origin, "line": result.span[0], "expression": result.text, **analysis_object(analysis)}))
                    else:
                        out.heading(f"{origin}:{result.span[0]}  {shorten(result.text)}")
                        out.analysis(analysis, tree=tree)
                elif isinstance(result, HelpResult):
                    last = f"{origin}:{result.span[0]}", result
                    if as_json:
                        print(dumps({"file": origin, "line": result.span[0], **lines_object(result.lines, result.value)}))
                    else:
                        out.lines(result.lines)
                elif isinstance(result, CheckStatementResult):
                    outcome = result.outcome
                    outcome.file = origin
                    code = max(code, 0 if outcome.passed else 1)
                    if as_json:
                        print(dumps(outcome_object(outcome)))
                    else:
                        out.write(check_line(outcome))
        except LanguageError as err:
            if as_json:
                print(dumps({"file": origin, **{"error": err.as_dict()}}))
            render.print_error(err, source, origin)
            code = 2
    if save is not None:
        where, shown = last if last is not None else ("", None)
        if shown is not None and not isinstance(shown, Analysis):
            usage_error(f"--save writes a value and its gradients, and the last result shown, {where}, is {_unsaveable(shown)}: "
                        "nothing saved", as_json)
        save_or_exit(save, shown, as_json)
    return code
