"""gradcalc in Jupyter: `%load_ext gradcalc`, then `%gradcalc` and `%%gradcalc`.

One gradcalc session lives per notebook kernel, so variables and functions defined in one
cell are there in the next. A name the session does not know is looked up in the
notebook's Python namespace (a number, a boolean, a list of numbers or a NumPy array),
afresh in every cell, so that `x = np.linspace(...)` in Python is `x` in gradcalc. Each
expression statement displays as HTML (value, gradient table, graph statistics, the graph
as SVG, `--steps` as a table); the cell returns the last result to Python, where
`--out NAME` also binds it.

Nothing here is imported outside a notebook: IPython loads this module when the user
asks for the extension.
"""
from __future__ import annotations

import argparse
import builtins
import contextlib
import html
import keyword
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from gradcalc.autodiff.forward import NoJVPError
from gradcalc.autodiff.graph import node_title
from gradcalc.autodiff.limits import check_size
from gradcalc.autodiff.step_records import backward_steps
from gradcalc.parser import CheckStatementResult, ExpressionResult, HelpResult, LanguageError, Session, compile_program
from gradcalc.parser.analysis import Analysis, analyze
from gradcalc.parser.backends import CONSTANTS
from gradcalc.parser.budgets import report_budget
from gradcalc.parser.check_statements import make_check_handler
from gradcalc.parser.compiler import RESERVED
from gradcalc.parser.errors import too_large

from .bindings import BindingError, bind
from .check_command import check_line
from .common import set_limits
from .figures import write_figure
from .formatting import format_array, graph_dot
from .options import LIMITS, NOTEBOOK, Option, OptionError, options_of, refusal, unknown
from .plot import _title, read_words, sample_words
from .render import error_lines, graph_line, notes, tree_lines
from .step_display import forward_lines, forward_passes, step_lines

GRAPH_NODE_LIMIT = 200  # a bigger graph is summarised by its statistics, not drawn


class NotebookVariables(dict):  # type: ignore[type-arg]
    """The session's variables, falling back on the notebook's namespace.

    A name gradcalc has not bound is borrowed from Python when it holds numbers; the
    borrowed names are forgotten at the start of every cell (`refresh`), so a later
    Python assignment is seen, while a name assigned in gradcalc stays gradcalc's."""

    def __init__(self, namespace: dict[str, Any], kernel: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.namespace = namespace
        self.kernel = kernel or {}  # a one-off session's: the kernel session's variables, read by value
        self.borrowed: set[str] = set()
        self.session: Session | None = None

    def refresh(self) -> None:
        for name in self.borrowed:
            dict.pop(self, name, None)
        self.borrowed.clear()

    def __setitem__(self, name: str, value: Any) -> None:
        self.borrowed.discard(name)  # assigned in gradcalc: gradcalc's from now on
        super().__setitem__(name, value)

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (isinstance(name, str) and self._borrow(name))

    def __getitem__(self, name: str) -> Any:
        if not dict.__contains__(self, name):
            self._borrow(name)
        return dict.__getitem__(self, name)

    def _borrow(self, name: str) -> bool:
        value = self.namespace.get(name)
        if name in self.kernel:  # (a Tensor's or a Value's numbers; a function or a tuple is not lent)
            value = np.asarray(self.kernel[name].data) if hasattr(self.kernel[name], "data") else None
        session = self.session
        if session is None or name.startswith("_") or not _numeric(value) or _known(session, name):
            return False
        check_size(np.shape(np.asarray(value)), f"the notebook's {name}")
        backend = session.backend
        try:
            numbers = np.asarray(value, dtype=float)
        except OverflowError:  # a Python int past float64 (Python says "int too large to convert to float")
            raise LanguageError("value", too_large(f"the notebook's {name}, a whole number,")) from None
        dict.__setitem__(self, name, backend.variable(backend.from_array(numbers), name))
        self.borrowed.add(name)
        return True


def _known(session: Session, name: str) -> bool:
    """A name the language gives a meaning of its own (`e`, `true`, `sin`, a def): Python's
    value of it would change what gradcalc's documented names mean."""
    return name in CONSTANTS or name in RESERVED or name in session.functions or name in session.backend.function_names()


def _numeric(value: Any) -> bool:
    if isinstance(value, bool | int | float | np.number | np.bool_):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    if isinstance(value, list | tuple) and value:
        try:
            return np.asarray(value).dtype.kind in "biuf"
        except ValueError:  # ragged
            return False
    return False


class Result:
    """One expression's result as Python sees it: `value` and `grads` as NumPy arrays,
    `graph` the statistics as a dict. Displays as HTML in a notebook."""

    def __init__(self, text: str, analysis: Analysis, digits: int | None, graph: bool, steps: bool, mode: str = "reverse",
                 full: bool = False) -> None:
        self.text = text
        # (the passes `--steps` shows run now, under the statement's budget: not later, when the cell shows the result)
        s = analysis.stats  # (None on the JAX and PyTorch engines: the library keeps the graph)
        self._steps_html = steps_html(analysis, digits, mode) if steps and s is not None else None
        self.analysis = analysis
        self.value = np.asarray(analysis.value)
        self.grads = {name: np.asarray(g) for name, g in analysis.grads.items()}
        self.graph = None if s is None else {"nodes": s.nodes, "edges": s.edges, "leaves": s.leaves, "ops": s.op_nodes, "depth": s.depth,
                                             "fan_out": [node_title(n) for n in s.fan_out]}
        self._digits, self._show_graph, self._full = digits, graph, full

    def __repr__(self) -> str:
        grads = ", ".join(f"{name}={format_array(g, self._digits, self._full)}" for name, g in self.grads.items())
        return f"Result(value={format_array(self.value, self._digits, self._full)}, grads={{{grads}}})"

    def _repr_html_(self) -> str:
        return result_html(self.text, self.analysis, self._digits, self._show_graph, self._steps_html, self._full)


class CheckResult:
    """A `check` statement's verdict; `passed` is True or False."""

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.passed = bool(outcome.passed)
        self.line = check_line(outcome)

    def __repr__(self) -> str:
        return self.line

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        return f'<pre class="gradcalc-check" style="color:{colour}">{html.escape(self.line)}</pre>'


# ---- HTML -------------------------------------------------------------------------------------


def _number(value: Any, digits: int | None, full: bool = False) -> str:
    return html.escape(format_array(value, digits, full, rows=np.ndim(value) == 2))


def result_html(text: str, a: Analysis, digits: int | None, graph: bool = True, steps: str | None = None, full: bool = False) -> str:
    """A result as HTML; `steps`, the passes' table (steps_html), when they are shown;
    `full`, every element of a large tensor."""
    shape = "" if a.shape == () else f' <span class="gradcalc-shape">(shape {"x".join(map(str, a.shape))})</span>'
    parts = [f'<div class="gradcalc-result"><div><code>{html.escape(text)}</code></div>',
             f'<div class="gradcalc-value"><b>value</b> <pre style="display:inline">{_number(a.value, digits, full)}</pre>{shape}</div>']
    if a.grads:
        title = "gradient of sum(output)" if a.grad_of else "gradient"
        rows = "".join(f"<tr><td><code>{html.escape(name)}</code></td><td><pre>{_number(g, digits, full)}</pre></td></tr>"
                       for name, g in a.grads.items())
        parts.append(f'<table class="gradcalc-grads"><caption style="text-align:left">{title}</caption>'
                     f"<tr><th>variable</th><th>d output / d variable</th></tr>{rows}</table>")
    parts.append(f'<div class="gradcalc-graph-stats">graph: {html.escape(graph_line(a))}</div>')
    parts += [f'<div class="gradcalc-note">note: {html.escape(note)}</div>' for note in notes(a)]
    if graph and a.stats is not None:
        parts.append(graph_svg(a.output, a.stats.nodes, digits))
    if steps is not None:
        parts.append(steps)
    parts.append("</div>")
    return "\n".join(parts)


def error_html(err: LanguageError, source: str) -> str:
    return f'<pre class="gradcalc-error" style="color:#cf222e">{html.escape(chr(10).join(error_lines(err, source)))}</pre>'


def steps_html(a: Analysis, digits: int | None, mode: str = "reverse") -> str:
    """The backward pass (or, mode forward, forward mode's passes) as a table: one row
    per line `--steps` (`--steps --mode forward`) prints."""
    lines = forward_lines(forward_passes(a), digits) if mode == "forward" else step_lines(backward_steps(a.output), digits)
    rows = "".join(f'<tr class="gradcalc-step-{kind}"><td>{html.escape(text)}</td></tr>' for kind, text in lines)
    caption = "forward pass" if mode == "forward" else "backward pass"
    return f'<table class="gradcalc-steps"><caption style="text-align:left">{caption}</caption>{rows}</table>'


def graph_svg(output: Any, nodes: int, digits: int | None) -> str:
    """The graph drawn by Graphviz when it is installed, else as a plain SVG tree."""
    if nodes > GRAPH_NODE_LIMIT:
        return f'<div class="gradcalc-note">graph of {nodes} nodes: not drawn (more than {GRAPH_NODE_LIMIT})</div>'
    dot = shutil.which("dot")
    if dot is not None:
        done = subprocess.run([dot, "-Tsvg"], input=graph_dot(output, digits or 6), capture_output=True, text=True,
                              timeout=30, check=False)
        if done.returncode == 0 and "<svg" in done.stdout:
            return fitted(done.stdout)
    return fitted(tree_svg(output, digits))


def fitted(svg: str) -> str:
    """The SVG element of `svg` (what comes before it is XML's prologue), drawn at its own
    size unless the page is narrower: then scaled down to the page's width (a graph of a
    few dozen nodes is wider than a notebook's column)."""
    svg = svg[svg.index("<svg"):]
    return svg.replace("<svg", '<svg style="max-width:100%;height:auto"', 1)


def tree_svg(output: Any, digits: int | None, row: int = 18, indent: int = 18) -> str:
    """The `--tree` view as SVG: one text line per node, a connector from each to its
    parent line, so the picture needs nothing installed."""
    lines = tree_lines(output, digits)
    width = max((depth * indent + 8 * len(text) for depth, text in lines), default=100) + 40
    height = row * len(lines) + 10
    items: list[str] = []
    last_at_depth: dict[int, int] = {}
    for i, (depth, text) in enumerate(lines):
        y = row * (i + 1)
        x = 10 + depth * indent
        if depth > 0 and depth - 1 in last_at_depth:
            parent_y = last_at_depth[depth - 1]
            items.append(f'<path d="M{x - indent + 4},{parent_y + 4} V{y - 4} H{x - 2}" fill="none" stroke="#888"/>')
        last_at_depth[depth] = y
        items.append(f'<text x="{x}" y="{y}">{html.escape(text)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="gradcalc-tree" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="13">{"".join(items)}</svg>')


class Lines:
    """Lines of text, as the REPL prints them: help(name)'s, or a function value's."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def __repr__(self) -> str:
        return "\n".join(self.lines)

    def _repr_html_(self) -> str:
        return f'<pre class="gradcalc-lines">{html.escape(repr(self))}</pre>'


class Shown:
    """A display with its HTML and its text: the notebook shows the HTML, and the text is
    what a console, a log or an exported notebook's text/plain shows instead."""

    def __init__(self, markup: str, text: str) -> None:
        self.markup, self.text = markup, text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return self.markup


# ---- the magics ---------------------------------------------------------------------------------


class MagicUsage(Exception):
    """A magic line that cannot be read: shown with the usage, never as a traceback."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # (argparse would print to stderr and exit)
        raise MagicUsage(message)


# A magic's options, as cli/options.py declares them (gradcalc eval's and the notebook's
# own): those that mean something in a notebook; the others are refused with the reason
# their declaration gives.
MAGIC_OPTIONS = options_of(NOTEBOOK)
_BY_NAME = {name: option for option in MAGIC_OPTIONS for name in option.names}
_OPTION_NAMES = sorted(_BY_NAME)
_VALUED = frozenset(name for name, option in _BY_NAME.items() if option.kind != "flag")
_OPTION_WORD = re.compile(r"--[A-Za-z][\w-]*")
# Options whose absence means the kernel session's own setting, not the declared default.
_SESSION_KEEPS = frozenset({"engine", *(option.key for option in LIMITS)})


def _reader(option: Option) -> Callable[[str], Any]:
    """`option`'s value read from its text, or MagicUsage saying what it takes."""

    def read(text: str) -> Any:
        try:
            return option.read(text)
        except OptionError as err:
            raise MagicUsage(str(err)) from None

    return read


def _options(prog: str = "%%gradcalc") -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, add_help=False, exit_on_error=False, allow_abbrev=False)
    parser.add_argument("words", nargs="*", help="NAME=VALUE bindings (of a line magic)")
    for option in MAGIC_OPTIONS:
        if option.kind == "flag":
            parser.add_argument(*option.names, dest=option.key, action="store_true", help=option.help)
        else:
            default = None if option.key in _SESSION_KEEPS else option.default
            parser.add_argument(*option.names, dest=option.key, type=_reader(option), default=default, metavar=option.metavar, help=option.help)
    # Without a usage of its own, parse_intermixed_args formats one on every call, through
    # gettext's file lookups: 40% of a cell's time. Formatted once here ('%' doubled:
    # argparse applies %-formatting to a usage it is given).
    parser.usage = parser.format_usage().removeprefix("usage: ").rstrip("\n").replace("%", "%%")
    return parser


_LINE, _CELL = _options("%gradcalc"), _options("%%gradcalc")


def _parse(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """The options (and bindings) in `words`; an option the magics do not have is named
    (with the closest one they have, or why a notebook has no use for it)."""
    for word in words:
        name = word.partition("=")[0]
        if _OPTION_WORD.fullmatch(name) and name not in _BY_NAME:
            raise MagicUsage(str(refusal(NOTEBOOK, name) or unknown(name, _OPTION_NAMES)))
    try:
        options = parser.parse_intermixed_args(words)
    except argparse.ArgumentError as err:  # (what exit_on_error=False raises instead of calling error())
        missing = err.argument_name in _BY_NAME and err.message == "expected one argument"
        raise MagicUsage(str(_BY_NAME[str(err.argument_name)].missing()) if missing else str(err)) from None
    if options.out is not None:
        problem = _python_needs(options.out)
        if problem:
            raise MagicUsage(f"--out {options.out}: {problem}; choose another name")
    return options


# IPython's own names in a notebook's namespace (names starting with _ are Python's and IPython's too).
IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit"})


def _python_needs(name: str) -> str | None:
    """Why `--out NAME` may not bind `name` in the notebook, or None: a name that is not
    Python's, or one Python or IPython needs (binding `__builtins__` breaks every later cell)."""
    if not name.isidentifier():
        return "not a Python name"
    if keyword.iskeyword(name):
        return "a Python keyword"
    if name.startswith("_"):
        return "names that start with _ are Python's and IPython's own"
    if name in dir(builtins):
        return f"Python's built-in {name} (later cells would lose it)"
    if name in IPYTHON_NAMES:
        return f"IPython's {name} (later cells would lose it)"
    return None


_BINDING = re.compile(r"[A-Za-z_]\w*=(?!=)\S")


def read_line(line: str) -> tuple[str, argparse.Namespace]:
    """`%gradcalc [options] EXPR [NAME=VALUE ...] [options]` as EXPR, typed as it is (`x + 1`,
    `sum(A @ A)`, quotes around the whole of it dropped), and the options, with the
    bindings as `words`: options come before EXPR or anywhere after it, as on the command
    line. EXPR ends at the first word from which on each is a binding, an option or an
    option's value."""
    chunks = list(re.finditer(r"\S+", line))
    i = 0
    while i < len(chunks) and chunks[i].group().startswith("--"):  # options before EXPR
        name, equals, _ = chunks[i].group().partition("=")
        i += 2 if name in _VALUED and not equals else 1
    start = chunks[i].start() if i < len(chunks) else len(line)
    expr, rest = _expression_first(line[start:])
    return expr, _parse(_LINE, [*shlex.split(line[:start]), *rest])


def _expression_first(line: str) -> tuple[str, list[str]]:
    for chunk in list(re.finditer(r"\S+", line))[1:]:
        try:
            rest = shlex.split(line[chunk.start():])
        except ValueError:  # inside a quoted EXPR
            continue
        if _bindings_and_options(rest):
            return _unquoted(line[:chunk.start()].strip()), rest
    return _unquoted(line.strip()), []


def _bindings_and_options(words: list[str]) -> bool:
    after_option = False
    for word in words:
        if word.startswith("--"):  # (one the magics do not have may have a value after it: _parse names it)
            after_option = word in _VALUED or word not in _BY_NAME
        elif after_option or (_BINDING.match(word) and _balanced(word)):
            after_option = False
        else:
            return False
    return True


def _balanced(text: str) -> bool:
    """Brackets that close: `axis=0)` is the end of `sum(x, axis=0)`, not a binding."""
    depth = 0
    for c in text:
        depth += (c in "([{") - (c in ")]}")
        if depth < 0:
            return False
    return depth == 0


def _unquoted(expr: str) -> str:
    if len(expr) > 1 and expr[0] == expr[-1] and expr[0] in "'\"":
        words = shlex.split(expr)
        if len(words) == 1:
            return words[0]
    return expr


def _usage_error(err: BaseException) -> Shown:
    text = f"error: {err}\n{USAGE}"
    return Shown(f'<pre class="gradcalc-error">{html.escape(text)}</pre>', text)


def _internal_error(err: BaseException) -> Shown:
    text = f"internal error: {type(err).__name__}: {err} (a gradcalc bug; the session goes on; GRADCALC_DEBUG=1 shows the traceback)"
    return Shown(f'<pre class="gradcalc-error" style="color:#cf222e">{html.escape(text)}</pre>', text)


def _error(err: LanguageError, source: str) -> Shown:
    return Shown(error_html(err, source), "\n".join(error_lines(err, source)))


USAGE = "\n".join([
    "%gradcalc [options] EXPR [NAME=VALUE ...] [options]   one expression (a line magic)",
    "%gradcalc plot EXPR x=A:B [--order 0,1,2]                 a plot of EXPR and its derivatives",
    "%%gradcalc [options]                                       the cell is a gradcalc program",
    "%gradcalc --reset [--engine NAME]                          forget every variable and function",
    "options, for that line or cell only (the kernel's session keeps its engine and limits):",
    *(f"  {option.usage()}\n      {option.help}" for option in MAGIC_OPTIONS),
])


class Notebook:
    """The kernel's gradcalc session and what the magics do with it."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.reset("tensor")

    def reset(self, engine: str) -> None:
        self.variables, self.session = self._session(engine)

    def _session(self, engine: str, kernel: Session | None = None) -> tuple[NotebookVariables, Session]:
        """A session whose unknown names are read from Python; with `kernel`, a session for
        one line or cell on another engine, which reads the kernel session's variables by
        value and its functions, and changes neither."""
        variables = NotebookVariables(self.namespace, kernel.variables if kernel else None)
        session = Session(engine=engine, variables=variables, functions=dict(kernel.functions) if kernel else None,
                          on_check=make_check_handler(), on_warning=self._warn, switch_engine="--engine {engine}")
        variables.session = session
        return variables, session

    def _warn(self, message: str) -> None:
        from IPython.display import display

        text = f"warning: {message}"
        display(Shown(f'<div class="gradcalc-warning" style="color:#9a6700">{html.escape(text)}</div>', text))

    def line(self, line: str) -> Any:
        """`%gradcalc LINE`."""
        with _quiet():
            return self._line(line)

    def cell(self, line: str, source: str) -> Any:
        """`%%gradcalc LINE` over the cell `source`."""
        with _quiet():
            return self._cell(line, source)

    def _line(self, line: str) -> Any:
        try:
            words = shlex.split(line)
            if not words or words[0] in ("-h", "--help", "help"):
                return Shown(f"<pre>{html.escape(USAGE)}</pre>", USAGE)
            if words[0] == "plot":
                return self.plot(words[1:])
            expr, options = read_line(line)
        except (ValueError, MagicUsage) as err:  # ValueError: shlex's unclosed quote
            return _usage_error(err)
        if not expr and options.reset and not options.words:
            try:
                self.reset(options.engine or self.session.engine)
            except LanguageError as err:  # jax or torch asked for and not installed
                return _usage_error(MagicUsage(err.message))
            return Lines([f"session reset: no variables or functions; the {self.session.engine} engine"])
        if not expr:
            return _usage_error(MagicUsage("no expression to evaluate"))
        return self.run(expr, options, options.words)

    def _cell(self, line: str, source: str) -> Any:
        try:
            options = _parse(_CELL, shlex.split(line))
            if options.words:
                raise MagicUsage(f"%%gradcalc takes options, and the cell is the program: {' '.join(options.words)!r} is not an option")
        except (ValueError, MagicUsage) as err:
            return _usage_error(err)
        return self.run(source, options)

    def run(self, source: str, options: argparse.Namespace, bindings: Sequence[str] = ()) -> Any:
        """Run the NAME=VALUE `bindings` (as `gradcalc eval` does), then `source` statement by
        statement; display every result but the last, which is returned (so it becomes `_`);
        an error shows with its caret, and the statements before it keep their effect.
        `--engine` other than the session's runs this alone on that engine (`--reset
        --engine` switches the session)."""

        try:
            if options.reset:
                self.reset(options.engine or self.session.engine)
            variables, session = self.variables, self.session
            if options.engine and options.engine != session.engine:
                variables, session = self._session(options.engine, kernel=self.session)
        except LanguageError as err:  # jax or torch asked for and not installed
            return _usage_error(MagicUsage(err.message))
        self.variables.refresh()
        variables.refresh()
        before = set_limits({option.key: getattr(options, option.key) for option in LIMITS})  # (this line's or cell's)
        try:
            return self._run(session, source, options, bindings)
        finally:
            set_limits(before)

    def _run(self, session: Session, source: str, options: argparse.Namespace, bindings: Sequence[str]) -> Any:
        from IPython.display import display

        try:
            bind(session, list(bindings))
        except BindingError as err:
            return _error(err.error, err.source)
        wrt = [w.strip() for w in options.wrt.split(",") if w.strip()] if options.wrt else None
        shown: list[Any] = []
        try:
            program = compile_program(source)
            for statement in program.statements:
                result = session.run_statement(statement)
                if isinstance(result, ExpressionResult):
                    shown.append(self._result(session, result, statement, wrt, options))
                elif isinstance(result, CheckStatementResult):
                    shown.append(CheckResult(result.outcome))
                elif isinstance(result, HelpResult):  # help(name), or a function value: `<grad of f>`
                    shown.append(Lines(result.lines))
        except LanguageError as err:
            for item in shown:
                display(item)
            display(_error(err, source))
            return None
        except Exception as err:  # noqa: BLE001 - a bug of gradcalc's: one line, never a traceback in the cell
            if os.environ.get("GRADCALC_DEBUG"):
                raise
            for item in shown:
                display(item)
            display(_internal_error(err))
            return None
        for item in shown[:-1]:
            display(item)
        last = shown[-1] if shown else None
        if options.out and last is not None:
            self.namespace[options.out] = last
        return last

    @staticmethod
    def _result(session: Session, result: ExpressionResult, statement: Any, wrt: list[str] | None, options: Any) -> Result:
        # (as gradcalc eval: --mode forward finds the gradients by forward mode; with --steps it chooses the pass shown)
        mode = "forward" if options.mode == "forward" and not options.steps else "reverse"
        analysis = analyze(result.value, wrt, session.variables, session=session, code=statement.code, span=result.span, mode=mode)
        try:
            with report_budget(result.span):
                return Result(result.text, analysis, options.digits, not options.no_graph, options.steps, options.mode, options.full)
        except NoJVPError as err:  # (--steps --mode forward through a function with a vjp rule of the user's)
            raise LanguageError("argument", f"--steps --mode forward: {err}").at(result.span) from None

    def plot(self, words: list[str]) -> Any:
        """`%gradcalc plot EXPR x=A:B [NAME=VALUE ...] [--order 0,1,2] [--points N]`: the
        figure as inline SVG."""
        expr, arguments, options = read_words(words)
        if not expr or not arguments or "--out" in options:
            return _usage_error(ValueError("%gradcalc plot takes EXPR, then NAME=A:B (and NAME=VALUE), --order and --points"))
        self.variables.refresh()
        try:
            request, data = sample_words(expr, arguments, options, self.session)
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "plot.svg"
                write_figure(data, _title(request), path)
                svg = path.read_text()
        except BindingError as err:
            return _error(err.error, err.source)
        except LanguageError as err:
            return _error(err, expr)
        return Shown(fitted(svg), f"<figure: {_title(request)}>")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """NumPy's floating-point warnings off while a magic runs, as the command line has them
    (results show inf and nan, and a note names the op that made them); the notebook's own
    Python cells keep NumPy's settings."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext gradcalc`: registers the `%gradcalc` and `%%gradcalc` magics."""
    from IPython.core.magic import Magics, line_cell_magic, magics_class

    notebook = Notebook(ipython.user_ns)

    @magics_class
    class GradcalcMagics(Magics):  # type: ignore[misc]
        @line_cell_magic
        def gradcalc(self, line: str, cell: str | None = None) -> Any:
            try:
                return notebook.line(line) if cell is None else notebook.cell(line, cell)
            except Exception as err:  # noqa: BLE001 - a bug of gradcalc's: one line, never a traceback in the cell
                if os.environ.get("GRADCALC_DEBUG"):
                    raise
                return _internal_error(err)

    ipython.register_magics(GradcalcMagics)
