"""The gradcalc command: eval, run, check, ops, and the REPL.

Only typer is imported at start-up; the engine, the parser, rich and prompt_toolkit are
imported by the commands that use them, so a one-shot command stays quick.
"""
from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

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


class Engine(str, Enum):
    tensor = "tensor"
    scalar = "scalar"


EngineOption = Annotated[Engine, typer.Option("--engine", help="tensor (NumPy arrays) or scalar (one node per number, for teaching).")]
DigitsOption = Annotated[Optional[int], typer.Option("--digits", min=1, max=17, help="Round numbers to N significant digits for display (default: full precision).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (see docs/cli.md) instead of text.")]
MaxElementsOption = Annotated[Optional[int], typer.Option("--max-elements", min=1, help="Largest tensor allowed, in elements (default 10,000,000).")]


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
) -> None:
    """Start the REPL (on a terminal) or run piped stdin as a script.

    Example: echo 'x = 3; x**2' | gradcalc
    """
    if ctx.invoked_subcommand is not None:
        return
    if sys.stdin.isatty():
        from .repl import start_repl

        start_repl(engine.value)
        return
    _prepare_engine(None)
    raise typer.Exit(_run_sources([("<stdin>", sys.stdin.read())], engine.value, as_json=False, digits=None, tree=False))


# ---- eval ----------------------------------------------------------------------------------------


def _bind(session: Session, binding: str) -> None:
    from gradcalc.parser import LanguageError, compile_program

    name, sep, text = binding.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier() or not text.strip():
        raise LanguageError("argument", f"bad binding {binding!r}: write NAME=VALUE, as in x=3 or W='randn(3, 3, seed=0)'")
    if name.startswith("__"):
        raise LanguageError("safety", f"bad binding {binding!r}: names starting with '__' are not allowed")
    try:
        program = compile_program(text)
        results = session.run(program)
    except LanguageError as err:
        err.message = f"in the value of {name}: {err.message}"
        raise
    if len(results) != 1 or not hasattr(results[-1], "value"):
        raise LanguageError("argument", f"bad binding {binding!r}: the value must be one expression")
    session.assign(name, results[-1].value)


def evaluate_expression(expr: str, bindings: list[str], engine: str, wrt: list[str] | None) -> Analysis:
    """Bind the NAME=VALUE pairs as variables, run EXPR and analyse its last expression.

    Gradients are reported for every bound name (0 for one the output does not use) and
    for every other named value in the output's graph (see analyze), unless `wrt` names them."""
    from gradcalc.parser import ExpressionResult, LanguageError, Session, compile_program
    from gradcalc.parser.analysis import analyze

    from . import render

    session = Session(engine=engine, on_warning=render.warn)
    for binding in bindings:
        _bind(session, binding)
    bound = list(session.variables)
    program = compile_program(expr)
    if not program.statements:
        raise LanguageError("argument", "nothing to evaluate: the expression is empty")
    results = [r for r in session.run(program) if isinstance(r, ExpressionResult)]
    if not results:
        raise LanguageError("argument", "nothing to show: the last statement assigns; end with an expression")
    return analyze(results[-1].value, wrt, session.variables, always=bound)


@app.command("eval")
def eval_command(
    expr: Annotated[str, typer.Argument(metavar="EXPR", help="The expression; several statements may be separated by ';'.", show_default=False)],
    bindings: Annotated[Optional[list[str]], typer.Argument(metavar="[NAME=VALUE]...", help="Variables; each VALUE is an expression.", show_default=False)] = None,
    tree: Annotated[bool, typer.Option("--tree", help="Draw the computation graph as a tree.")] = False,
    dot: Annotated[Optional[Path], typer.Option("--dot", metavar="FILE", help="Write the graph as Graphviz DOT; .svg or .png renders a picture.")] = None,
    engine: EngineOption = Engine.tensor,
    wrt: Annotated[Optional[str], typer.Option("--wrt", metavar="a,b", help="Only these variables' gradients.")] = None,
    as_json: JsonOption = False,
    digits: DigitsOption = None,
    max_elements: MaxElementsOption = None,
) -> None:
    """Evaluate an expression: its value, gradient per variable and graph statistics.

    Example: gradcalc eval '(a*b + exp(c)).relu()/a' a=2 b=-3 c=10 --tree
    """
    from gradcalc.parser import LanguageError

    from . import render

    _prepare_engine(max_elements)
    wrt_names = [w.strip() for w in wrt.split(",") if w.strip()] if wrt else None
    try:
        analysis = evaluate_expression(expr, bindings or [], engine.value, wrt_names)
    except LanguageError as err:
        _fail(err, expr, as_json)
    if as_json:
        from .jsonout import analysis_object, dumps

        print(dumps(analysis_object(analysis)))
    else:
        render.renderer(render.Style(digits, render.use_rich(sys.stdout))).analysis(analysis, tree=tree)
    if dot is not None:
        _write_dot(analysis.output, dot)


def _prepare_engine(max_elements: int | None) -> None:
    """Set up the engine for a command: the element cap, and NumPy told not to warn about
    overflow or nan (results show inf and nan, and a note names the op that made them)."""
    import numpy as np

    np.seterr(all="ignore")
    if max_elements is not None:
        from gradcalc.autodiff import set_max_elements

        set_max_elements(max_elements)


def _fail(err: LanguageError, source: str | None, as_json: bool, origin: str = "") -> Any:
    from . import render

    if as_json:
        from .jsonout import dumps, error_object

        print(dumps(error_object(err)))
    render.print_error(err, source, origin)
    raise typer.Exit(2)


def _write_dot(output: Any, path: Path) -> None:
    import shutil
    import subprocess

    from gradcalc.autodiff import graph_dot

    from . import render

    text = graph_dot(output)
    suffix = path.suffix.lower()
    try:
        if suffix in (".svg", ".png"):
            if shutil.which("dot") is None:
                render.warn(f"cannot draw {path}: Graphviz's `dot` is not installed (Debian: apt-get install graphviz); "
                            f"name a .dot file to write the DOT text instead")
                raise typer.Exit(2)
            done = subprocess.run(["dot", f"-T{suffix[1:]}", "-o", str(path)], input=text, text=True, capture_output=True, check=False)
            if done.returncode != 0:
                render.warn(f"Graphviz failed to draw {path}: {done.stderr.strip()}")
                raise typer.Exit(2)
        else:
            path.write_text(text)
    except OSError as err:
        render.warn(f"cannot write {path}: {err.strerror}")
        raise typer.Exit(2) from None


# ---- run -----------------------------------------------------------------------------------------


def _read_sources(files: list[Path]) -> list[tuple[str, str]]:
    from . import render

    sources = []
    for path in files:
        if str(path) == "-":
            sources.append(("<stdin>", sys.stdin.read()))
            continue
        try:
            sources.append((str(path), path.read_text()))
        except OSError as err:
            render.warn(f"cannot read {path}: {err.strerror}")
            raise typer.Exit(2) from None
    return sources


def _run_sources(sources: list[tuple[str, str]], engine: str, as_json: bool, digits: int | None, tree: bool) -> int:
    """Run scripts statement by statement, printing each expression statement's result.
    Returns the exit code: 2 after an error, 1 if a check failed, else 0."""
    from gradcalc.parser import CheckStatementResult, ExpressionResult, LanguageError, Session, compile_program
    from gradcalc.parser.analysis import analyze
    from gradcalc.parser.checks import make_check_handler

    from . import render
    from .checking import check_line, outcome_object
    from .jsonout import analysis_object, dumps

    out = render.renderer(render.Style(digits, render.use_rich(sys.stdout)))
    code = 0
    for origin, source in sources:
        session = Session(engine=engine, on_check=make_check_handler(), on_warning=render.warn)
        try:
            program = compile_program(source)
            for statement in program.statements:
                result = session.run_statement(statement)
                if isinstance(result, ExpressionResult):
                    analysis = analyze(result.value, None, session.variables)
                    if as_json:
                        print(dumps({"line": result.span[0], "expression": result.text, **analysis_object(analysis)}))
                    else:
                        out.heading(f"{origin}:{result.span[0]}  {result.text}")
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
    return code


@app.command("run")
def run_command(
    files: Annotated[list[Path], typer.Argument(metavar="FILE...", help="Scripts to run ('-' reads stdin).", show_default=False)],
    engine: EngineOption = Engine.tensor,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per expression statement, one per line.")] = False,
    tree: Annotated[bool, typer.Option("--tree", help="Draw each result's graph.")] = False,
    digits: DigitsOption = None,
    max_elements: MaxElementsOption = None,
) -> None:
    """Run scripts; every expression statement prints its value, gradients and graph.

    Example: gradcalc run examples/mlp.gc
    """
    _prepare_engine(max_elements)
    raise typer.Exit(_run_sources(_read_sources(files), engine.value, as_json, digits, tree))


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


from . import checking as _checking  # noqa: E402  (registers `gradcalc check`)

_checking.register(app)


def _protect_expression(argv: list[str]) -> list[str]:
    """`gradcalc eval '-a*b' a=2` must not read '-a*b' as an option: a leading space
    (which the language ignores) keeps it an argument."""
    if "eval" not in argv:
        return argv
    args = list(argv)
    start = args.index("eval") + 1
    for i in range(start, len(args)):
        token = args[i]
        if token == "--":
            break
        if token.startswith("-") and not token.startswith("--") and token != "-h" and len(token) > 1:
            args[i] = " " + token
    return args


def run() -> None:
    """Console-script entry point. A bug in gradcalc shows as one line, not a traceback,
    unless GRADCALC_DEBUG is set."""
    import os

    try:
        app(args=_protect_expression(sys.argv[1:]), prog_name="gradcalc")
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as err:  # noqa: BLE001 - the last line of defence for users
        if os.environ.get("GRADCALC_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err} (a gradcalc bug; run with GRADCALC_DEBUG=1 for details)", file=sys.stderr)
        raise SystemExit(2) from None
