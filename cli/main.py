"""The gradcalc command as typer declares it: eval, run, check, ops, plot, and the REPL.

The work is done by plain functions (cli/actions.py, cli/checking.py); cli/entry.py calls
them without this module for a plain one-shot command. Here only typer is imported at
start-up; the engine, the parser, rich and prompt_toolkit are imported by the commands
that use them.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .actions import default_action, eval_action, run_action
from .checking import check_action
from .common import MAX_INPUT_BYTES, Engine, usage_error
from .options import (
    DigitsOption,
    EngineOption,
    FullOption,
    JsonOption,
    MaxElementsOption,
    MaxInputOption,
    MaxStepsOption,
    SaveOption,
    as_typed,
)
from .plot import register_plot

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
    raise typer.Exit(default_action(engine=engine.value, max_elements=max_elements, max_steps=max_steps, max_input=max_input))


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


@app.command("eval")
def eval_command(
    expr: Annotated[str, typer.Argument(
        metavar="EXPR", help="The expression; several statements may be separated by ';'. '-' reads it from stdin.", show_default=False)],
    bindings: Annotated[list[str] | None, typer.Argument(metavar="[NAME=VALUE]...", help="Variables; each VALUE is an expression.", show_default=False)] = None,
    tree: Annotated[bool, typer.Option("--tree", help="Draw the computation graph as a tree.")] = False,
    dot: Annotated[str | None, typer.Option(
        "--dot", metavar="FILE", help="Write the graph as Graphviz DOT (.dot, .gv, '-' for stdout); .svg, .png, .pdf... draw a picture.")] = None,
    steps: Annotated[bool, typer.Option("--steps", help="Show the backward pass step by step (with --dot: gradients on the edges).")] = False,
    engine: EngineOption = Engine.tensor,
    wrt: Annotated[str | None, typer.Option("--wrt", metavar="a,b", help="Only these variables' gradients.")] = None,
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
    raise typer.Exit(eval_action(
        as_typed(expr), bindings, tree=tree, dot=dot, steps=steps, engine=engine.value, wrt=wrt, as_json=as_json, digits=digits, full=full,
        max_elements=max_elements, max_steps=max_steps, max_input=max_input, save=save,
    ))


# ---- run -----------------------------------------------------------------------------------------


@app.command("run")
def run_command(
    files: Annotated[list[Path], typer.Argument(
        metavar="FILE... [NAME=VALUE]...", help="Scripts to run ('-' reads stdin), and variables for them (W=@weights.npy).", show_default=False)],
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
    raise typer.Exit(run_action(
        files, engine=engine.value, as_json=as_json, tree=tree, digits=digits, full=full, max_elements=max_elements,
        max_steps=max_steps, max_input=max_input, save=save,
    ))


# ---- check ---------------------------------------------------------------------------------------


@app.command("check")
def check_command(
    files: Annotated[list[Path], typer.Argument(
        metavar="FILE... [NAME=VALUE]...", help="Gradcheck files ('-' reads stdin), and variables for them (W=@weights.npy).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print all results as one JSON document.")] = False,
    junit: Annotated[Path | None, typer.Option("--junit-xml", metavar="PATH", help="Also write JUnit XML for CI.")] = None,
    tol: Annotated[float | None, typer.Option("--tol", min=0, help="atol and rtol for every check without its own.")] = None,
    method: Annotated[str, typer.Option("--method", help="auto, complex or central.")] = "auto",
    max_elements: MaxElementsOption = None,
    max_steps: MaxStepsOption = None,
    max_input: MaxInputOption = MAX_INPUT_BYTES,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=0, help="Worker processes (0: one per core); results as with -j 1.")] = 1,
    output_format: Annotated[str, typer.Option("--format", help="text, or github (GitHub Actions annotations).")] = "text",
) -> None:
    """Run the `check` statements of gradcheck files and report each one.

    Exit status: 0 when every check passes, 1 when any fails or errors, 2 on bad usage.

    Example: gradcalc check examples/*.gc --junit-xml report.xml
    """
    raise typer.Exit(check_action(
        files, as_json=as_json, junit=junit, tol=tol, method=method, max_elements=max_elements, max_steps=max_steps,
        max_input=max_input, jobs=jobs, output_format=output_format,
    ))


# ---- ops -----------------------------------------------------------------------------------------


@app.command("ops")
def ops_command(
    name: Annotated[str | None, typer.Argument(help="One function: its signature, derivative rule and an example.")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print a Markdown table (docs/language.md uses it).")] = False,
) -> None:
    """List every function of the language with its signature and a one-line description,
    or tell all about one.

    Examples: gradcalc ops | grep soft;  gradcalc ops softmax
    """
    if name is not None:
        from gradcalc.parser import LanguageError
        from gradcalc.parser.help import describe

        try:
            lines = describe(name)
        except LanguageError as err:
            from . import render

            render.error(err.message)
            raise typer.Exit(2) from None
        print("\n".join(lines))
        return
    from .oplist import op_rows

    rows = op_rows()
    if markdown:
        print("| function | category | gradient | description |\n|---|---|---|---|")
        for _name, signature, category, has_grad, doc in rows:
            print(f"| `{signature}` | {category} | {'yes' if has_grad else 'no'} | {doc} |")
        return
    from . import render

    if render.use_rich(sys.stdout):
        from rich.console import Console
        from rich.table import Table

        table = Table(show_edge=False, pad_edge=False)
        for column in ("signature", "category", "grad", "description"):
            table.add_column(column)
        for _name, signature, category, has_grad, doc in rows:
            table.add_row(signature, category, "yes" if has_grad else "-", doc)
        Console().print(table)
        return
    width = max(len(r[1]) for r in rows)
    for _name, signature, _category, has_grad, doc in rows:
        print(f"{signature:<{width}}  {doc}{'' if has_grad else '  (no gradient)'}")


register_plot(app)


def protect_expression(argv: list[str]) -> list[str]:
    """`gradcalc eval '-a*b' a=2` (or `'--a'`) must not read the expression as an option:
    a leading space (which the language ignores; options.as_typed takes it off again)
    keeps it an argument. A token with one
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
