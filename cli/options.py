"""The command line, declared once: every command's arguments and options, and the global
options that may come before any command.

Two readers use this table. cli/main.py makes typer's commands of it (help, `--help`
output, shell completion, every error message for bad usage), and cli/entry.py reads a
plain invocation with it, without importing typer (a third of NumPy's import time), and
hands anything it is not sure of to typer. So a new option is one entry here, and the
action that takes it; a new global option is one entry in GLOBAL_OPTIONS.

This module imports nothing beyond what a one-shot command already has: kinds are names,
not classes (`pathlib` is not imported on the plain path).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from .common import MAX_INPUT_BYTES


class Option:
    """`--name VALUE` (or a flag, kind "flag"), stored under `key` for the action."""

    __slots__ = ("key", "names", "kind", "default", "help", "metavar", "low", "high")

    def __init__(self, key: str, names: tuple[str, ...], kind: str, default: object, help: str,
                 metavar: str | None = None, low: float | None = None, high: float | None = None) -> None:
        self.key, self.names, self.kind, self.default, self.help = key, names, kind, default, help
        self.metavar, self.low, self.high = metavar, low, high


class Argument:
    """A positional argument; `many` takes all that are left (at least one when `required`).
    Kind "expr" is an expression, which may start with a dash (main.protect_expression)."""

    __slots__ = ("key", "kind", "many", "required", "metavar", "help")

    def __init__(self, key: str, kind: str, metavar: str | None, help: str, many: bool = False, required: bool = True) -> None:
        self.key, self.kind, self.metavar, self.help, self.many, self.required = key, kind, metavar, help, many, required


class Command:
    """A command: its help (the first line is its summary), its parameters, and the action
    that runs it, as "module:function" under gradcalc.cli (imported only when it runs)."""

    __slots__ = ("name", "help", "action", "arguments", "options")

    def __init__(self, name: str, help: str, action: str, arguments: tuple[Argument, ...], options: tuple[Option, ...]) -> None:
        self.name, self.help, self.action, self.arguments, self.options = name, help, action, arguments, options

    def function(self) -> Any:
        """The action, imported now."""
        module, name = self.action.split(":")
        return getattr(import_module(f"{__package__}.{module}"), name)


# The kinds an option's value may have: how entry.py reads one (a value it cannot read goes
# to typer, which says what is wrong), and the choices of "engine".
ENGINES = ("tensor", "scalar", "jax", "torch")

ENGINE = Option("engine", ("--engine",), "engine", "tensor", "tensor (NumPy arrays), scalar (one node per number, for teaching), "
                "or jax or torch (that library's arrays and autodiff, an extra to install: docs/engines.md).")
DEVICE = Option("device", ("--device",), "str", None, "With --engine jax or torch: cpu or gpu (default: the library's default device).",
                metavar="cpu|gpu")
DIGITS = Option("digits", ("--digits",), "int", None, "Round numbers to N significant digits for display (default: full precision).", low=1, high=17)
FULL = Option("full", ("--full",), "flag", False, "Print every element of large tensors (default: a summary).")
JSON = Option("as_json", ("--json",), "flag", False, "Print JSON (see docs/cli.md) instead of text.")
MAX_ELEMENTS = Option("max_elements", ("--max-elements",), "int", None, "Largest tensor allowed, in elements (default 10,000,000).", low=1)
MAX_STEPS = Option("max_steps", ("--max-steps",), "int", None, "Most ops one statement may execute (default 10,000,000).", low=1)
MAX_INPUT = Option("max_input", ("--max-input-bytes",), "int", MAX_INPUT_BYTES, "Largest script or data file read, in bytes.", low=1)
MAX_SECONDS = Option("max_seconds", ("--max-seconds",), "float", None, "CPU seconds one statement may run (default 5).", low=0.001)
MAX_MEMORY = Option("max_memory", ("--max-memory",), "int", None, "Bytes gradcalc may hold while a statement runs (default 2,000,000,000).", low=1)
SAVE = Option("save", ("--save",), "path", None, "Write the value and each gradient (value, grad_NAME) to FILE: .npz or .json.", metavar="FILE")

# Given before the command (`gradcalc --engine scalar eval ...`), one of these becomes that
# command's default (its own option still wins); a command without it refuses it. With no
# command they go to the REPL or the piped script (actions.default_action takes each).
GLOBAL_OPTIONS = (ENGINE, DEVICE, DIGITS, MAX_ELEMENTS, MAX_STEPS, MAX_INPUT, MAX_SECONDS, MAX_MEMORY)


def _flag(key: str, name: str, help: str) -> Option:
    return Option(key, (name,), "flag", False, help)


FILES_HELP = "and variables for them (W=@weights.npy)."

COMMANDS = {command.name: command for command in (
    Command(
        "eval",
        "Evaluate an expression: its value, gradient per variable and graph statistics.\n\n"
        "Example: gradcalc eval '(a*b + exp(c)).relu()/a' a=2 b=-3 c=10 --tree",
        "actions:eval_action",
        (Argument("expr", "expr", "EXPR", "The expression; several statements may be separated by ';'. '-' reads it from stdin."),
         Argument("bindings", "str", "[NAME=VALUE]...", "Variables; each VALUE is an expression.", many=True, required=False)),
        (_flag("tree", "--tree", "Draw the computation graph as a tree."),
         Option("dot", ("--dot",), "str", None,
                "Write the graph as Graphviz DOT (.dot, .gv, '-' for stdout); .svg, .png, .pdf... draw a picture.", metavar="FILE"),
         _flag("steps", "--steps", "Show the backward pass step by step (with --dot: gradients on the edges)."),
         Option("mode", ("--mode",), "str", "reverse",
                "reverse (one backward pass) or forward (forward mode: a tangent pass per element of each variable); with "
                "--steps, the pass shown: each variable's tangent pushed to the output in turn, as value + tangent ε."),
         ENGINE, DEVICE,
         Option("wrt", ("--wrt",), "str", None, "Only these variables' gradients.", metavar="a,b"),
         JSON, DIGITS, FULL, MAX_ELEMENTS, MAX_STEPS, MAX_INPUT, MAX_SECONDS, MAX_MEMORY, SAVE),
    ),
    Command(
        "run",
        "Run scripts; every expression statement prints its value, gradients and graph.\n\n"
        "Example: gradcalc run examples/mlp.gc",
        "actions:run_action",
        (Argument("files", "path", "FILE... [NAME=VALUE]...", f"Scripts to run ('-' reads stdin), {FILES_HELP}", many=True),),
        (ENGINE, DEVICE,
         _flag("as_json", "--json", "One JSON object per expression statement, one per line."),
         _flag("tree", "--tree", "Draw each result's graph."),
         DIGITS, FULL, MAX_ELEMENTS, MAX_STEPS, MAX_INPUT, MAX_SECONDS, MAX_MEMORY, SAVE),
    ),
    Command(
        "check",
        "Run the `check` statements of gradcheck files and report each one.\n\n"
        "Exit status: 0 when every check passes, 1 when any fails or errors, 2 on bad usage.\n\n"
        "Example: gradcalc check examples/*.gc --junit-xml report.xml",
        "checking:check_action",
        (Argument("files", "path", "FILE... [NAME=VALUE]...", f"Gradcheck files ('-' reads stdin), {FILES_HELP}", many=True),),
        (_flag("as_json", "--json", "Print all results as one JSON document."),
         Option("junit", ("--junit-xml",), "path", None, "Also write JUnit XML for CI.", metavar="PATH"),
         Option("tol", ("--tol",), "float", None, "atol and rtol for every check without its own.", low=0),
         Option("method", ("--method",), "str", "auto", "auto, complex or central."),
         Option("mode", ("--mode",), "str", "reverse", "reverse (check the VJPs) or forward (the JVPs), for every check without its own mode=."),
         MAX_ELEMENTS, MAX_STEPS, MAX_INPUT, MAX_SECONDS, MAX_MEMORY,
         ENGINE, DEVICE,
         Option("against", ("--against",), "str", None,
                "Also take each check's derivative with that engine's autodiff and set the three side by side (docs/engines.md).",
                metavar="jax|torch"),
         Option("jobs", ("--jobs", "-j"), "int", 1, "Worker processes (0: one per core); results as with -j 1.", low=0),
         Option("output_format", ("--format",), "str", "text", "text, or github (GitHub Actions annotations).")),
    ),
    Command(
        "ops",
        "List every function of the language with its signature and a one-line description,\n"
        "or tell all about one.\n\n"
        "Examples: gradcalc ops | grep soft;  gradcalc ops softmax",
        "oplist:ops_action",
        (Argument("name", "str", None, "One function: its signature, derivative rule and an example.", required=False),),
        (_flag("markdown", "--markdown", "Print a Markdown table (docs/language.md uses it)."), DIGITS),
    ),
    Command(
        "plot",
        "Plot a function and its derivatives over a range (the engine's derivatives).\n\n"
        "On a terminal: a braille plot; piped: CSV columns x, f, df/dx, d2f/dx2.\n"
        "Two ranges: a heat map of f with its gradient.\n\n"
        "Example: gradcalc plot 'tanh(x)' x=-3:3 --out tanh.svg",
        "plot:plot_action",
        (Argument("expr", "expr", "EXPR", "The function; several statements may be separated by ';'."),
         Argument("arguments", "str", "NAME=A:B [NAME=VALUE]...", "A range for one variable (two for a heat map); values for the others.",
                  many=True, required=False)),
        (Option("order", ("--order",), "str", None, "Which to plot: 0 f, 1 df/dx, 2 d2f/dx2 (default all three).", metavar="0,1,2"),
         Option("points", ("--points",), "int", None, "Points along the range (default 401; 41 per axis for two variables).", low=2, high=1_000_000),
         Option("out", ("--out",), "path", None, "Write a figure: .svg, .png or .pdf (needs matplotlib, the 'plot' extra).", metavar="FILE"),
         _flag("as_csv", "--csv", "Print the numbers as CSV (what a pipe gets by default)."),
         _flag("as_json", "--json", "Print the numbers as JSON arrays."),
         _flag("draw", "--draw", "Draw on stdout even when it is not a terminal (sized by COLUMNS and LINES)."),
         MAX_ELEMENTS, MAX_STEPS, MAX_INPUT, MAX_SECONDS, MAX_MEMORY, ENGINE, DEVICE),
    ),
    Command(
        "export",
        "Write the program as a Python module of JAX or PyTorch: one function per def, one per result\n"
        "(a check or an expression statement) of the variables it depends on, with its gradient by that library.\n\n"
        "Example: gradcalc export examples/mlp.gc --to jax -o mlp_jax.py",
        "export:export_action",
        (Argument("file", "path", "FILE", "The program ('-' reads stdin)."),),
        (Option("to", ("--to",), "str", "jax", "jax or torch: the library the module uses (docs/engines.md).", metavar="jax|torch"),
         Option("output", ("--output", "-o"), "path", None, "Write the module to this file (default: stdout).", metavar="FILE"),
         MAX_INPUT),
    ),
)}


def as_typed(expr: str) -> str:
    """The expression as it was typed: main.protect_expression puts a space before one
    that starts with a dash, so that it is not read as an option; error places count
    columns in the text as typed."""
    return expr[1:] if expr.startswith(" -") else expr
