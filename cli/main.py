"""The gradcalc command: eval, run, check, ops, and the REPL.

Only typer is imported at start-up; the engine, the parser, rich and prompt_toolkit are
imported by the commands that use them, so a one-shot command stays quick.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from .bindings import BindingError, bind
from .checking import check_line, outcome_object, register_check
from .common import (
    MAX_INPUT_BYTES, DigitsOption, Engine, EngineOption, FullOption, JsonOption, MaxElementsOption, MaxInputOption, MaxStepsOption, OutputFileError,
    dot_format, fail, prepare_engine, read_sources, shorten, usage_error, write_dot,
)
from .dataio import SaveOption
from .plot import register_plot

if TYPE_CHECKING:
    from gradcalc.parser import LanguageError, Session
    from gradcalc.parser.analysis import Analysis

app = typer.Typer(
    name="gradcalc",
    help="A command-line autodiff calculator: values, gradients, graphs and gradient checks.\n\n"
    "With no command: the REPL on a terminal, or a script read from piped stdin.",
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"gradcalc {version('gradcalc')}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def main(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")] = False,
    engine: EngineOption = Engine.tensor,
    max_elements: MaxElementsOption = None,
    max_steps: MaxStepsOption = None,
    max_input: MaxInputOption = MAX_INPUT_BYTES,
) -> None:
    """Start the REPL (on a terminal) or run piped stdin as a script.

    Example: echo 'x = 3; x**2' | gradcalc
    """
    if ctx.invoked_subcommand is not None:
        _pass_options_down(ctx, ctx.invoked_subcommand)
        return
    if sys.stdin is None:
        usage_error("stdin is closed: nothing to run (start gradcalc on a terminal for the REPL)")
    prepare_engine(max_elements, max_steps)
    if sys.stdin.isatty():
        from .repl import start_repl

        start_repl(engine.value)
        return
    raise typer.Exit(_run_sources(read_sources([Path("-")], max_input), engine.value, as_json=False, style=_style(None, False), tree=False))


_SHARED_OPTIONS = {"engine": "--engine", "max_elements": "--max-elements", "max_steps": "--max-steps", "max_input": "--max-input-bytes"}


def _pass_options_down(ctx: typer.Context, name: str) -> None:
    """`gradcalc --engine scalar eval ...`: an option given before the command becomes that
    command's default (the command's own option still wins); a command that has no such
    option refuses it rather than run without it."""
    command = ctx.command.get_command(ctx, name)  # type: ignore[attr-defined]  # the app is a group
    accepted = {p.name for p in command.params} if command is not None else set()
    defaults: dict[str, Any] = {}
    for key, flag in _SHARED_OPTIONS.items():
        source = ctx.get_parameter_source(key)
        if source is None or source.name != "COMMANDLINE":  # by name: typer may bring its own click
            continue
        if key not in accepted:
            usage_error(f"{flag} does not apply to `gradcalc {name}`")
        value = ctx.params[key]
        defaults[key] = value.value if isinstance(value, Engine) else value
    if defaults:
        ctx.default_map = {**(ctx.default_map or {}), name: {**((ctx.default_map or {}).get(name) or {}), **defaults}}


# ---- eval ----------------------------------------------------------------------------------------


def evaluate_expression(expr: str, bindings: list[str], engine: str, wrt: list[str] | None) -> Analysis:
    """Bind the NAME=VALUE pairs as variables, run EXPR and analyse its last expression.

    Gradients are reported for every bound name (0 for one the output does not use) and
    for every other named value in the output's graph (see analyze), unless `wrt` names
    them. An error in a binding is a BindingError."""
    from gradcalc.parser import ExpressionResult, LanguageError, Session, compile_program

    from . import render
    from .diagnosis import analyse

    session = Session(engine=engine, on_warning=render.warn)
    bound: set[str] = set()
    for binding in bindings:
        bind(session, binding, bound)
    names = list(session.variables)
    program = compile_program(expr)
    if not program.statements:
        raise LanguageError("argument", "nothing to evaluate: the expression is empty")
    results = [r for r in session.run(program) if isinstance(r, ExpressionResult)]
    if not results:
        raise LanguageError("argument", "nothing to show: the last statement assigns; end with an expression")
    code = next((s.code for s in program.statements if s.span == results[-1].span), None)
    return analyse(session, results[-1].value, wrt, code, always=names)


@app.command("eval")
def eval_command(
    expr: Annotated[str, typer.Argument(metavar="EXPR", help="The expression; several statements may be separated by ';'. '-' reads it from stdin.", show_default=False)],
    bindings: Annotated[Optional[list[str]], typer.Argument(metavar="[NAME=VALUE]...", help="Variables; each VALUE is an expression.", show_default=False)] = None,
    tree: Annotated[bool, typer.Option("--tree", help="Draw the computation graph as a tree.")] = False,
    dot: Annotated[Optional[str], typer.Option("--dot", metavar="FILE", help="Write the graph as Graphviz DOT (.dot, .gv, '-' for stdout); .svg, .png, .pdf... draw a picture.")] = None,
    steps: Annotated[bool, typer.Option("--steps", help="Show the backward pass step by step (with --dot: gradients on the edges).")] = False,
    engine: EngineOption = Engine.tensor,
    wrt: Annotated[Optional[str], typer.Option("--wrt", metavar="a,b", help="Only these variables' gradients.")] = None,
    as_json: JsonOption = False,
    digits: DigitsOption = None,
    full: FullOption = False,
    max_elements: MaxElementsOption = None,
    max_steps: MaxStepsOption = None,
    max_input: MaxInputOption = MAX_INPUT_BYTES,
    save: SaveOption = None,
) -> None:
    """Evaluate an expression: its value, gradient per variable and graph statistics.

    Example: gradcalc eval '(a*b + exp(c)).relu()/a' a=2 b=-3 c=10 --tree
    """
    from gradcalc.parser import LanguageError

    from . import render

    prepare_engine(max_elements, max_steps)
    if dot is not None:
        try:
            dot_format(dot)  # refuse an unknown format before computing anything
        except OutputFileError as err:
            usage_error(str(err))
    if expr.strip() == "-":
        expr = read_sources([Path("-")], max_input)[0][1]
    wrt_names = [w.strip() for w in wrt.split(",") if w.strip()] if wrt else None
    try:
        analysis = evaluate_expression(expr, bindings or [], engine.value, wrt_names)
    except BindingError as err:
        fail(err.error, err.source, as_json)
    except LanguageError as err:
        fail(err, expr, as_json)
    if steps:
        from .steps import eval_with_steps

        return eval_with_steps(analysis, as_json=as_json, style=_style(digits, full), tree=tree, dot=dot)
    if as_json:
        from .jsonout import analysis_object, dumps

        print(dumps(analysis_object(analysis)))
    else:
        render.renderer(_style(digits, full)).analysis(analysis, tree=tree)
    if dot is not None:
        try:
            write_dot(analysis.output, dot)
        except OutputFileError as err:
            usage_error(str(err))
    if save is not None:
        from .dataio import save_or_exit

        save_or_exit(save, analysis)


def _style(digits: int | None, full: bool) -> Any:
    from . import render

    return render.Style(digits, render.use_rich(sys.stdout), full)


# ---- run -----------------------------------------------------------------------------------------


def _run_sources(sources: list[tuple[str, str]], engine: str, as_json: bool, style: Any, tree: bool,
                 bindings: list[str] | None = None, save: Path | None = None) -> int:
    """Run scripts statement by statement, printing each expression statement's result.
    Returns the exit code: 2 after an error, 1 if a check failed, else 0."""
    from gradcalc.parser import CheckStatementResult, ExpressionResult, LanguageError, Session, compile_program
    from gradcalc.parser.checks import make_check_handler

    from . import render
    from .dataio import apply_bindings, bound_or_exit, save_or_exit, script_folder
    from .diagnosis import analyse
    from .jsonout import analysis_object, dumps

    out = render.renderer(style)
    code = 0
    bound, last = bound_or_exit(bindings or [], engine), None
    for origin, source in sources:
        session = Session(engine=engine, on_check=make_check_handler(), base_dir=script_folder(origin), on_warning=render.warn)
        apply_bindings(session, bound)
        try:
            program = compile_program(source)
            for statement in program.statements:
                result = session.run_statement(statement)
                if isinstance(result, ExpressionResult):
                    analysis = last = analyse(session, result.value, None, statement.code)
                    if as_json:
                        print(dumps({"file": origin, "line": result.span[0], "expression": result.text, **analysis_object(analysis)}))
                    else:
                        out.heading(f"{origin}:{result.span[0]}  {shorten(result.text)}")
                        out.analysis(analysis, tree=tree)
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
        save_or_exit(save, last)
    return code


@app.command("run")
def run_command(
    files: Annotated[list[Path], typer.Argument(metavar="FILE... [NAME=VALUE]...", help="Scripts to run ('-' reads stdin), and variables for them (W=@weights.npy).", show_default=False)],
    engine: EngineOption = Engine.tensor,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per expression statement, one per line.")] = False,
    tree: Annotated[bool, typer.Option("--tree", help="Draw each result's graph.")] = False,
    digits: DigitsOption = None,
    full: FullOption = False,
    max_elements: MaxElementsOption = None,
    max_steps: MaxStepsOption = None,
    max_input: MaxInputOption = MAX_INPUT_BYTES,
    save: SaveOption = None,
) -> None:
    """Run scripts; every expression statement prints its value, gradients and graph.

    Example: gradcalc run examples/mlp.gc
    """
    from .dataio import split_bindings

    prepare_engine(max_elements, max_steps)
    paths, bindings = split_bindings(files)
    raise typer.Exit(_run_sources(read_sources(paths, max_input), engine.value, as_json, _style(digits, full), tree, bindings, save))


# ---- ops -----------------------------------------------------------------------------------------


@app.command("ops")
def ops_command(
    markdown: Annotated[bool, typer.Option("--markdown", help="Print a Markdown table (docs/language.md uses it).")] = False,
) -> None:
    """List every function of the language with its signature and a one-line description.

    Example: gradcalc ops | grep soft
    """
    from .oplist import op_rows

    rows = op_rows()
    if markdown:
        print("| function | category | gradient | description |\n|---|---|---|---|")
        for name, signature, category, has_grad, doc in rows:
            print(f"| `{signature}` | {category} | {'yes' if has_grad else 'no'} | {doc} |")
        return
    from . import render

    if render.use_rich(sys.stdout):
        from rich.console import Console
        from rich.table import Table

        table = Table(show_edge=False, pad_edge=False)
        for column in ("signature", "category", "grad", "description"):
            table.add_column(column)
        for name, signature, category, has_grad, doc in rows:
            table.add_row(signature, category, "yes" if has_grad else "-", doc)
        Console().print(table)
        return
    width = max(len(r[1]) for r in rows)
    for name, signature, category, has_grad, doc in rows:
        print(f"{signature:<{width}}  {doc}{'' if has_grad else '  (no gradient)'}")


register_check(app)
register_plot(app)


def _protect_expression(argv: list[str]) -> list[str]:
    """`gradcalc eval '-a*b' a=2` (or `'--a'`) must not read the expression as an option:
    a leading space (which the language ignores) keeps it an argument. A token with one
    dash is never an option of eval or plot (but -h); one with two is the expression when
    it is not one of the command's options and no expression came before it."""
    command = next((c for c in ("eval", "plot") if c in argv), None)
    if command is None:
        return argv
    args = list(argv)
    start = args.index(command) + 1
    flags, valued = _option_names(command)
    expression_seen, skip = False, False
    for i in range(start, len(args)):
        token = args[i]
        if skip:
            skip = False
            continue
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if name in flags or (name in valued and "=" in token):
            continue
        if name in valued:
            skip = True  # its value follows
            continue
        if token.startswith("--") and len(token) > 2 and not expression_seen:
            args[i] = " " + token
        elif token.startswith("-") and not token.startswith("--") and token != "-h" and len(token) > 1:
            args[i] = " " + token
        expression_seen = True
    return args


def _option_names(command: str) -> tuple[set[str], set[str]]:
    """The command's option names: those that are flags, and those that take a value."""
    click_command = typer.main.get_command(app).get_command(None, command)  # type: ignore[attr-defined, arg-type]
    flags: set[str] = {"--help", "-h"}  # click adds these itself, not as params
    valued: set[str] = set()
    for param in getattr(click_command, "params", []):
        if getattr(param, "param_type_name", "") == "option":
            (flags if param.is_flag else valued).update(param.opts + param.secondary_opts)
    return flags, valued


def run() -> None:
    """Console-script entry point. A bug in gradcalc shows as one line, not a traceback,
    unless GRADCALC_DEBUG is set; Ctrl-C prints `interrupted` and exits 130; output that
    cannot be written (a closed pipe, a full disk) ends the command quietly or in one line."""
    import os

    from .streams import Interrupted, StdoutError, guard_stdout, interrupt_handler, output_failed

    if sys.stdout is None:
        print("error: stdout is closed; gradcalc needs somewhere to print", file=sys.stderr)
        raise SystemExit(2)
    guard_stdout()
    code: Any = 0
    try:
        with interrupt_handler():
            try:
                app(args=_protect_expression(sys.argv[1:]), prog_name="gradcalc")
            except SystemExit as exit:
                code = exit.code
            sys.stdout.flush()
    except (Interrupted, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        code = 130
    except StdoutError as err:
        code = output_failed(err.error)
    except Exception as err:  # noqa: BLE001 - the last line of defence for users
        if os.environ.get("GRADCALC_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err} (a gradcalc bug; run with GRADCALC_DEBUG=1 for details)", file=sys.stderr)
        code = 2
    raise SystemExit(code)
