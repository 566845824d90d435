"""The command line, declared once: every command's arguments and options, the global
options that may come before any command, and the notebook magic's own options.

Four readers use this table. cli/main.py makes typer's commands of it (help, `--help`
output, shell completion), and cli/entry.py reads a plain invocation with it, without
importing typer (a third of NumPy's import time), and hands anything it is not sure of to
typer. The REPL (cli/repl.py) makes a `:NAME VALUE` setting of each of `gradcalc eval`'s
options, and the notebook magic (cli/notebook.py) a `--NAME VALUE` for its line or cell,
unless the option's `unavailable` says why not. Each reader reads a value with
`Option.read` and words a bad one with it, so a value is refused in the same words
everywhere. So a new option is one entry here, and the action that takes it; a new global
option is one entry in GLOBAL_OPTIONS.

This module imports nothing beyond what a one-shot command already has: kinds are names,
not classes (`pathlib` is not imported on the plain path).
"""
from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from .common import MAX_INPUT_BYTES

# The readers besides the command line, as `Option.unavailable` names them.
REPL, NOTEBOOK = "repl", "notebook"


class OptionError(ValueError):
    """An option that cannot be read (unknown, without its value, or a value it does not
    take): the message is what every reader shows."""


class Option:
    """`--name VALUE` (or a flag, kind "flag"), stored under `key` for the action.

    `choices` are the only values it takes; `low` and `high` bound a number. `unavailable`
    maps a reader (REPL, NOTEBOOK) where the option means nothing to the reason, which
    that reader gives when asked for the option."""

    __slots__ = ("key", "names", "kind", "default", "help", "metavar", "low", "high", "choices", "unavailable")

    def __init__(self, key: str, names: tuple[str, ...], kind: str, default: object, help: str,
                 metavar: str | None = None, low: float | None = None, high: float | None = None,
                 choices: tuple[str, ...] = (), unavailable: Mapping[str, str] | None = None) -> None:
        self.key, self.names, self.kind, self.default, self.help = key, names, kind, default, help
        self.metavar, self.low, self.high, self.choices = metavar, low, high, choices
        self.unavailable: Mapping[str, str] = unavailable or {}

    @property
    def word(self) -> str:
        """The name without its dashes: the REPL's `:word`."""
        return self.names[0].lstrip("-")

    def usage(self, spelled: str | None = None) -> str:
        """The option with what its value is: `--digits N`, `--engine tensor|scalar|jax|torch`,
        `--steps` (the REPL's switch: `:full [on|off]`)."""
        name = spelled or self.names[0]
        if self.kind == "flag":
            return f"{name} [on|off]" if name.startswith(":") else name
        return f"{name} {'|'.join(self.choices) or self.metavar or ('N' if self.kind in ('int', 'float') else 'VALUE')}"

    def takes(self) -> str:
        """What a value of it is, in words: `a whole number from 1 to 17`."""
        if self.kind == "flag":
            return "on or off"
        if self.choices:
            return _either(self.choices)
        if self.kind in ("int", "float"):
            number = "a whole number" if self.kind == "int" else "a number"
            if self.low is not None and self.high is not None:
                return f"{number} from {_number(self.low)} to {_number(self.high)}"
            return f"{number} of at least {_number(self.low)}" if self.low is not None else number
        return self.metavar or "a value"

    def read(self, text: str, spelled: str | None = None) -> Any:
        """`text` as this option's value (a path stays text), or OptionError in the words
        every reader uses; `spelled` is the option as the reader spells it (`:digits`)."""
        if self.kind == "flag" and text in ("on", "off"):  # (the REPL's `:full off`; the command line's is the flag alone)
            return text == "on"
        if self.choices and text in self.choices or not self.choices and self.kind not in ("int", "float", "flag"):
            return text
        if self.kind in ("int", "float"):
            try:
                number: float = int(text) if self.kind == "int" else float(text)
            except ValueError:
                number = float("nan")
            # (nan passes no comparison: it is refused with the numbers out of range)
            if number == number and (self.low is None or number >= self.low) and (self.high is None or number <= self.high):
                return number
        raise OptionError(f"{spelled or self.names[0]} must be {self.takes()}, not {text!r}")

    def missing(self, spelled: str | None = None) -> OptionError:
        """The error of the option given without its value."""
        return OptionError(f"{spelled or self.names[0]} needs a value: {self.takes()}")


def _number(bound: float) -> str:
    """A bound as a reader writes it: 1,000,000, 0.001."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _either(words: tuple[str, ...]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def unknown(name: str, known: list[str], what: str = "option") -> OptionError:
    """The error of an option (or REPL command) that `known` does not have, naming the
    closest one."""
    from difflib import get_close_matches  # (here: a command that runs imports none of it)

    close = get_close_matches(name, known, n=1, cutoff=0.75)
    return OptionError(f"unknown {what} {name}" + (f" (did you mean {close[0]}?)" if close else ""))


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


LIBRARY_ENGINES = ("jax", "torch")  # (engines that are another library's arrays and autodiff)
ENGINES = ("tensor", "scalar", *LIBRARY_ENGINES)

# Where the REPL and the notebook have no use for an option of gradcalc eval's.
_DEVICE_FIXED = "the library's device is chosen once, when the process starts (gradcalc --engine jax --device gpu)"
_BOTH = (REPL, NOTEBOOK)

ENGINE = Option("engine", ("--engine",), "str", "tensor", "tensor (NumPy arrays), scalar (one node per number, for teaching), "
                "or jax or torch (that library's arrays and autodiff, an extra to install: docs/engines.md).", choices=ENGINES)
DEVICE = Option("device", ("--device",), "str", None, "With --engine jax or torch: where it runs (default: the library's default device).",
                choices=("cpu", "gpu"), unavailable=dict.fromkeys(_BOTH, _DEVICE_FIXED))
DIGITS = Option("digits", ("--digits",), "int", None, "Round numbers to N significant digits for display (default: full precision).", low=1, high=17)
FULL = Option("full", ("--full",), "flag", False, "Print every element of large tensors (default: a summary).")
JSON = Option("as_json", ("--json",), "flag", False, "Print JSON (see docs/cli.md) instead of text.", unavailable={
    REPL: "the REPL prints text (gradcalc eval --json prints JSON)",
    NOTEBOOK: "a notebook's result is a Python object already: .value, .grads and .graph (--out NAME binds it)"})
MAX_ELEMENTS = Option("max_elements", ("--max-elements",), "int", None, "Largest tensor allowed, in elements (default 10,000,000).", low=1)
MAX_STEPS = Option("max_steps", ("--max-steps",), "int", None, "Most ops one statement may execute (default 10,000,000).", low=1)
MAX_INPUT = Option("max_input", ("--max-input-bytes",), "int", MAX_INPUT_BYTES, "Largest script or data file read, in bytes.", low=1)
MAX_SECONDS = Option("max_seconds", ("--max-seconds",), "float", None, "CPU seconds one statement may run (default 5).", low=0.001)
MAX_MEMORY = Option("max_memory", ("--max-memory",), "int", None, "Bytes gradcalc may hold while a statement runs (default 2,000,000,000).", low=1)
SAVE = Option("save", ("--save",), "path", None, "Write the value and each gradient (value, grad_NAME) to FILE: .npz or .json.", metavar="FILE",
              unavailable={REPL: "the REPL keeps each result in _ (gradcalc eval --save writes one to a file)",
                           NOTEBOOK: "--out NAME hands the result to Python, where numpy.savez writes its .value and .grads"})
MODE = Option("mode", ("--mode",), "str", "reverse",
              "reverse (one backward pass) or forward (forward mode: a tangent per element of each variable, a batched pass per variable); with "
              "--steps, the pass shown: each variable's tangent pushed to the output in turn, as value + tangent ε.",
              choices=("reverse", "forward"))
LIMITS = (MAX_ELEMENTS, MAX_STEPS, MAX_INPUT, MAX_SECONDS, MAX_MEMORY)

# Given before the command (`gradcalc --engine scalar eval ...`), one of these becomes that
# command's default (its own option still wins); a command without it refuses it. With no
# command they go to the REPL or the piped script (actions.default_action takes each).
GLOBAL_OPTIONS = (ENGINE, DEVICE, DIGITS, *LIMITS)

# The notebook magic's own, beside gradcalc eval's: not options of any command.
NOTEBOOK_OPTIONS = (
    Option("out", ("--out",), "str", None, "Also bind the last result to NAME in Python.", metavar="NAME",
           unavailable={REPL: "the REPL keeps the last result in _ and ans"}),
    Option("no_graph", ("--no-graph",), "flag", False, "Do not draw the graph.",
           unavailable={REPL: "the REPL draws a graph only when asked (:tree)"}),
    Option("reset", ("--reset",), "flag", False, "Forget every variable and function first (with --engine: switch to it).",
           unavailable={REPL: ":reset forgets every variable and function, and :engine NAME switches"}),
)


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
        (Option("tree", ("--tree",), "flag", False, "Draw the computation graph as a tree.", unavailable={
             REPL: ":tree draws the last result's graph", NOTEBOOK: "the notebook draws each result's graph (--no-graph leaves it out)"}),
         Option("dot", ("--dot",), "str", None,
                "Write the graph as Graphviz DOT (.dot, .gv, '-' for stdout); .svg, .png, .pdf... draw a picture.", metavar="FILE",
                unavailable={REPL: ":dot FILE writes the last result's graph", NOTEBOOK: "the notebook draws each result's graph in the cell"}),
         Option("steps", ("--steps",), "flag", False, "Show the backward pass step by step (with --dot: gradients on the edges).",
                unavailable={REPL: ":steps shows the last result's backward pass (:steps forward, forward mode's)"}),
         MODE,
         ENGINE, DEVICE,
         Option("wrt", ("--wrt",), "str", None, "Only these variables' gradients.", metavar="a,b"),
         JSON, DIGITS, FULL, *LIMITS, SAVE),
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
        "check_command:check_action",
        (Argument("files", "path", "FILE... [NAME=VALUE]...", f"Gradcheck files ('-' reads stdin; a folder, every .gc file in it), {FILES_HELP}",
                  many=True),),
        (_flag("as_json", "--json", "Print all results as one JSON document."),
         Option("junit", ("--junit-xml",), "path", None, "Also write JUnit XML for CI.", metavar="PATH"),
         Option("tol", ("--tol",), "float", None, "atol and rtol for every check without its own.", low=0),
         Option("method", ("--method",), "str", "auto", "How the numerical derivative is taken.", choices=("auto", "complex", "central")),
         Option("mode", ("--mode",), "str", "reverse", "reverse (check the VJPs) or forward (the JVPs), for every check without its own mode=.",
                choices=MODE.choices),
         *LIMITS,
         ENGINE, DEVICE,
         Option("against", ("--against",), "str", None,
                "Also take each check's derivative with that engine's autodiff and set the three side by side (docs/engines.md).",
                choices=LIBRARY_ENGINES),
         Option("jobs", ("--jobs", "-j"), "int", 1, "Worker processes (0: one per core); results as with -j 1.", low=0),
         Option("output_format", ("--format",), "str", "text", "text, or github (GitHub Actions annotations).", choices=("text", "github"))),
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
         *LIMITS, ENGINE, DEVICE),
    ),
    Command(
        "export",
        "Write the program as a Python module of JAX or PyTorch: one function per def, one per result\n"
        "(a check or an expression statement) of the variables it depends on, with its gradient by that library.\n\n"
        "Example: gradcalc export examples/mlp.gc --to jax -o mlp_jax.py",
        "export:export_action",
        (Argument("file", "path", "FILE", "The program ('-' reads stdin)."),),
        (Option("to", ("--to",), "str", "jax", "The library the module uses (docs/engines.md).", choices=LIBRARY_ENGINES),
         Option("output", ("--output", "-o"), "path", None, "Write the module to this file (default: stdout).", metavar="FILE"),
         MAX_INPUT),
    ),
)}


def as_typed(expr: str) -> str:
    """The expression as it was typed: main.protect_expression puts a space before one
    that starts with a dash, so that it is not read as an option; error places count
    columns in the text as typed."""
    return expr[1:] if expr.startswith(" -") else expr


# What the REPL's `:` settings and the notebook magic's options are made of: gradcalc
# eval's options and the notebook's own. A reader leaves out those `unavailable` to it,
# and says why when one is asked for.
SESSION_OPTIONS = (*COMMANDS["eval"].options, *NOTEBOOK_OPTIONS)


def options_of(reader: str) -> tuple[Option, ...]:
    """The session options `reader` (REPL or NOTEBOOK) takes."""
    return tuple(option for option in SESSION_OPTIONS if reader not in option.unavailable)


def refusal(reader: str, name: str) -> OptionError | None:
    """Why `reader` does not take the option (or REPL command) `name`, when it is a session
    option unavailable there; None otherwise."""
    word = name.lstrip(":-")
    for option in SESSION_OPTIONS:
        if option.word == word and reader in option.unavailable:
            return OptionError(f"{name}: {option.unavailable[reader]}")
    return None
