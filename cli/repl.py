"""The interactive REPL (prompt_toolkit): history, completion, colouring, continuation lines.

`Repl.handle` does the work for one complete input and is what the tests drive; `start_repl`
wraps it in a prompt loop. Ctrl-C cancels the line being typed, Ctrl-D leaves, and an
error never loses a variable.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.lexers import Lexer
from prompt_toolkit.styles import Style

from gradcalc.autodiff.limits import max_input_bytes
from gradcalc.parser import CheckStatementResult, ExpressionResult, HelpResult, LanguageError, Session, Statement, compile_program
from gradcalc.parser.analysis import Analysis, analyze
from gradcalc.parser.backends import ATTRIBUTES, AUTODIFF_FUNCTIONS, public_ops
from gradcalc.parser.budgets import command_budget
from gradcalc.parser.check_statements import make_check_handler
from gradcalc.parser.functions import FunctionValue
from gradcalc.parser.help import describe
from gradcalc.parser.lexer import COMMENTS, KEYWORDS, NAMES, NUMBERS, RENAMES, STRINGS, tokens
from gradcalc.parser.syntax import PendingInput

from . import render
from .check_command import check_line
from .common import OutputFileError, SourceError, load_source, set_limits, shorten, write_dot, wrt_names
from .formatting import SUMMARY_THRESHOLD
from .options import LIBRARY_ENGINES, LIMITS, REPL, Option, OptionError, options_of, refusal, unknown
from .plot import plot_in_repl
from .step_display import steps_in_repl
from .streams import Interrupted

# The REPL's own commands, which act (on the last result, the session, a file). Its
# settings are gradcalc eval's options, as cli/options.py declares them: SETTINGS.
COMMANDS = {
    ":help [NAME]": "this help; with a name, that function's signature, rule, edges and example",
    ":vars": "variables with their values (and shapes) and user functions",
    ":tree": "the graph of the last result as a tree",
    ":dot FILE": "write the last result's graph as DOT (.svg/.png/.pdf draws it; - prints it)",
    ":reset": "forget every variable and function",
    ":load FILE": "run a script into this session",
    ":plot F x=A:B": "plot F and its derivatives over a range (see gradcalc plot --help)",
    ":steps": "the backward pass of the last result, step by step (:steps forward [NAME]: forward mode's pass, value + tangent ε)",
    ":quit": "leave (Ctrl-D does too)",
}
SETTINGS = {f":{option.word}": option for option in options_of(REPL)}
SETTINGS_HELP = ("Settings, as gradcalc eval's options (each from now on; alone, back to its default; "
                 ":engine resets the variables):")
HELP = """Type an expression to see its value, its gradient per variable and its graph;
assign with x = 3 (a variable is a leaf you can differentiate by); define functions with
def f(x, y) = x*y; check a gradient with check EXPR [wrt x] (mode=forward checks forward
mode's). `_` (or `ans`) is the last result.
An unfinished line (an open bracket, a trailing operator or `\\`) continues on the next one.
Ctrl-C stops a long computation and leaves every variable as it was.
Functions: help(tanh) or :help tanh tells about one; `gradcalc ops` lists them all."""
FILE_COMMANDS = frozenset(c.split()[0] for c in COMMANDS if c.endswith(" FILE"))  # their argument completes as a path
COMMAND_NAMES = sorted({*(c.split()[0] for c in COMMANDS), *SETTINGS})  # what completes after `:`
LAST_RESULT = ("_", "ans")  # names that hold the last result


def history_path() -> Path:
    """$XDG_DATA_HOME/gradcalc/history; a relative XDG_DATA_HOME is ignored, as the XDG
    base directory specification says."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "gradcalc" / "history"


def join_lines(lines: list[str]) -> str:
    """Continuation lines as one input, as typed: the parser reads a newline inside
    brackets, after an operator or after a `\\` as a blank, and every place in the input
    (an error's line and column) is where it was typed."""
    return "\n".join(lines)


class Repl:
    def __init__(self, engine: str = "tensor", renderer: render.PlainRenderer | None = None) -> None:
        self.engine = engine
        self.out = renderer or render.renderer(render.Style(None, render.use_rich(sys.stdout)))
        self.session = self._new_session(engine)
        self.last: Analysis | None = None
        self.wrt: list[str] | None = None
        self.mode = "reverse"
        self.settings: dict[str, Any] = {}

    @staticmethod
    def _new_session(engine: str) -> Session:
        return Session(
            engine=engine, on_check=make_check_handler(), on_warning=render.warn, switch_engine=":engine {engine}", on_notice=render.notice,
        )

    def words(self) -> list[str]:
        """What completion offers: names, functions, methods and :commands."""
        return sorted({*self.session.names(), *self.session.backend.method_names(), *COMMAND_NAMES})

    def completions(self, before_cursor: str) -> tuple[str, list[str]]:
        """(the word being completed, candidates) for the text before the cursor: a
        :command at the start of a line, a file name after `:load` or `:dot`, a method or
        attribute after `name.`, otherwise a name or function."""
        command = re.fullmatch(r"\s*(:\w*)", before_cursor)
        if command:
            return command.group(1), COMMAND_NAMES
        given_file = re.fullmatch(r"\s*(:\w+)\s+(.*)", before_cursor, re.S)
        if given_file and given_file.group(1) in FILE_COMMANDS:
            return given_file.group(2), file_names(given_file.group(2))
        word, before = _completion_context(before_cursor)
        if before is not None and before.kind == "DOT":
            attributes = list(ATTRIBUTES) if self.session.engine != "scalar" else []
            return word, sorted({*self.session.backend.method_names(), *attributes})
        called = _called(before_cursor) if before is not None and before.kind in ("LPAR", "COMMA") else None
        keywords = [f"{k}=" for k in self.keywords(called)] if called else []
        return word, [*keywords, *sorted({*self.session.names(), *self.session.backend.method_names()})]

    def keywords(self, name: str) -> list[str]:
        """The keyword arguments of the function `name`: a registry op's parameters with a
        default, as its signature shows them (`axis`, `keepdims`), or an autodiff
        function's (`argnums`)."""
        if name in self.session.functions:
            return []
        op = public_ops().get(name)
        text = op.signature if op is not None else AUTODIFF_FUNCTIONS.get(name, "")
        return list(dict.fromkeys(re.findall(r"(\w+)=", text)))

    def signature(self, name: str) -> str:
        """What the completion menu shows beside a name: a function's signature."""
        if name in self.session.functions:
            f = self.session.functions[name]
            return f"{name}({', '.join(f.params)})"
        op = public_ops().get(name)
        if op is not None:
            return op.signature
        return AUTODIFF_FUNCTIONS[name].partition(": ")[0] if name in AUTODIFF_FUNCTIONS else ""

    def handle(self, text: str) -> bool:
        """Run one complete input. Returns False when the user asked to leave."""
        stripped = text.strip()
        if not stripped:
            return True
        render.forget_notices()
        if stripped.startswith(":"):
            return self._command(stripped)
        first = next(line for line in text.splitlines() if line.strip())
        if first[:1] in (" ", "\t"):
            self._unexpected_indent(text, first)
            return True
        self._run(text)
        return True

    def _unexpected_indent(self, text: str, first: str) -> None:
        """An input that starts indented is refused, as Python's REPL refuses it: typed line by
        line, a blank line ends a block, so the rest of a pasted body after a blank line
        would otherwise run once, after the loop (a paste the terminal brackets is one input,
        blank lines and all)."""
        line = text.splitlines().index(first) + 1
        indent = len(first) - len(first.lstrip())
        err = LanguageError("syntax", "unexpected indent: no block is open here (a blank line ended the last one, as in Python's "
                                      "REPL); nothing of this input was run", line, 1, line, indent + 1)
        self._error(err, text, "")

    def _run(self, source: str, origin: str = "") -> None:
        """Run statements one by one, showing each result (under its `file:line` when
        `origin` names a file, as `gradcalc run` shows them). Each statement is all or
        nothing: when it fails, is interrupted (Ctrl-C) or meets a bug, the variables and
        functions are as they were before it, and the rest of this input is skipped."""
        try:
            statements = compile_program(source).statements
        except LanguageError as err:
            self._error(err, source, origin)
            return
        for statement in statements:
            saved = dict(self.session.variables), dict(self.session.functions)
            try:
                self._show(self.session.run_statement(statement), statement, origin)
                continue
            except LanguageError as err:
                self._error(err, source, origin)
            except (KeyboardInterrupt, Interrupted):
                render.warn("interrupted; variables are as they were before this statement")
            except Exception as err:  # noqa: BLE001 - a bug must not end the session
                if os.environ.get("GRADCALC_DEBUG"):
                    raise
                render.internal_error(err, "the session goes on")
            self.session.variables, self.session.functions = saved
            return

    def _error(self, err: LanguageError, source: str, origin: str) -> None:
        # The parser speaks of command-line options; here the REPL's own settings apply.
        for name in SETTINGS:
            err.message = re.sub(f"--{name[1:]}\\b(?!-)", name, err.message)
        render.print_error(err, source, origin)

    def _show(self, result: Any, statement: Statement, origin: str = "") -> None:
        if isinstance(result, ExpressionResult):
            analysis = analyze(result.value, self._wrt_in_use(), self.session.variables, session=self.session, code=statement.code,
                               span=result.span, mode=self.mode)
            if origin:
                self.out.heading(f"{origin}:{result.span[0]}  {shorten(result.text)}")
            self.out.analysis(analysis)
            self.last = analysis
            for name in LAST_RESULT:
                self.session.variables[name] = result.value
        elif isinstance(result, CheckStatementResult):
            if origin:
                result.outcome.file = origin
            self.out.write(check_line(result.outcome))
        elif isinstance(result, HelpResult):
            self._help_lines(result.lines)

    def _help_lines(self, lines: list[str], indent: int = 4) -> None:
        """Help text, each long line wrapped at the terminal's width (not when piped) with
        its continuation indented past the line's own indent, so that where an entry
        starts stays plain."""
        width = terminal_width()
        for line in lines:
            self.out.lines(hanging(line, width, indent) if width else [line])

    def _wrt_in_use(self) -> list[str] | None:
        if self.wrt is None:
            return None
        return [name for name in self.wrt if name in self.session.variables]

    def _setting(self, name: str, arg: str) -> None:
        """`:NAME VALUE` sets gradcalc eval's option NAME for the rest of the session (a
        switch: `:full`, `:full off`); `:NAME` alone sets it back to its default. A value
        the option does not take is refused, in the words the command line uses, and the
        setting stays as it was."""
        option = SETTINGS[name]
        try:
            value = option.read(arg, name) if arg else (True if option.kind == "flag" else option.default)
        except OptionError as err:
            render.error(str(err))
            return
        setter: Callable[[Any, Option], str | None] = getattr(self, f"_set_{option.key}", self._keep)
        shown = self._set_limit(value, option) if option in LIMITS else setter(value, option)
        if shown is not None:
            self.out.write(f"{option.word}: {shown}")

    def _set_engine(self, engine: str, option: Option) -> str | None:
        try:
            session = self._new_session(engine)
        except LanguageError as err:  # jax or torch not installed: the extra to install
            render.error(err.message.replace(f"--engine {engine}", f":engine {engine}"))
            return None
        self.engine, self.session, self.last = engine, session, None
        return f"{engine} (variables reset)"

    def _set_digits(self, digits: int | None, option: Option) -> str:
        """Rounds what is shown, as `--digits N` does; the values keep every bit."""
        self.out.style = self.out.style._replace(digits=digits)
        return "full precision" if digits is None else str(digits)

    def _set_full(self, full: bool, option: Option) -> str:
        self.out.style = self.out.style._replace(full=full)
        return "every element" if full else "a summary of large tensors"

    def _set_mode(self, mode: str, option: Option) -> str:
        self.mode = mode
        return mode

    def _keep(self, value: Any, option: Option) -> str:
        """An option the REPL has no code of its own for: kept in `settings` for what reads it."""
        self.settings[option.key] = value
        return str(value)

    def _set_limit(self, value: Any, option: Option) -> str:
        set_limits({option.key: "default" if value is None else value})
        return "its default" if value is None else f"{value:g}"

    def _set_wrt(self, arg: str | None, option: Option) -> str | None:
        """`:wrt a,b` for variables that exist, `:wrt` alone for all; anything else is
        refused and the choice stays as it was."""
        try:
            names = wrt_names(arg, ":wrt") if arg else None
        except ValueError as err:
            render.error(str(err))
            return None
        unknown_names = [n for n in names or () if n not in self.session.variables or n in LAST_RESULT]
        if unknown_names:
            render.error(f":wrt names {', '.join(map(repr, unknown_names))}, which {'is' if len(unknown_names) == 1 else 'are'} "
                         "not a variable (:vars lists them)")
            return None
        self.wrt = names
        return ", ".join(self.wrt) if self.wrt else "every variable"

    def _command(self, line: str) -> bool:
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        if name in (":quit", ":q", ":exit"):
            return False
        if name == ":help" and arg:
            try:
                self._help_lines(describe(arg, self.session, digits=self.out.style.digits))
            except LanguageError as err:
                render.print_error(err, None)
        elif name == ":help":
            self.out.write(HELP)
            for line, indent in help_lines():  # (a long description goes on under itself)
                self._help_lines([line], indent)
        elif name == ":vars":
            self._vars()
        elif name in (":tree", ":dot", ":steps") and self.session.engine in LIBRARY_ENGINES:
            render.warn(f"{name} shows gradcalc's own graph, which the {self.session.engine} engine does not keep; :engine tensor has it")
        elif name == ":tree":
            if self.last is None:
                render.warn("no result yet: evaluate an expression first")
            else:
                self.out.analysis(self.last, tree=True)
        elif name == ":dot":
            self._dot(arg)
        elif name in SETTINGS:
            self._setting(name, arg)
        elif name == ":reset":
            self.session, self.last = self._new_session(self.engine), None
            self.out.write("variables and functions forgotten")
        elif name == ":load":
            self._load(arg)
        elif name == ":plot":
            plot_in_repl(self, arg)
        elif name == ":steps":
            self._steps(arg)
        else:  # (an option of gradcalc eval's that means nothing here: why, as its declaration says)
            render.error(str(refusal(REPL, name) or f"{unknown(name, COMMAND_NAMES, 'command')}; :help lists them"))
        return True

    def _steps(self, arg: str) -> None:
        """`:steps`: its passes under a budget of their own, as a statement's."""
        try:
            with command_budget():
                steps_in_repl(self, arg)
        except LanguageError as err:
            render.print_error(err, None)

    def _vars(self) -> None:
        variables = {k: v for k, v in self.session.variables.items() if k not in LAST_RESULT}
        if not variables and not self.session.functions:
            self.out.write("no variables yet")
        for var, value in sorted(variables.items()):
            self.out.write(f"{var} = {_describe(value, self.out.style)}")
        for function in self.session.functions.values():
            self.out.write(function.text)
            if function.rule is not None:
                self.out.write(function.rule.rule.text)

    def _dot(self, path: str) -> None:
        if not path:
            render.warn("usage: :dot FILE  (FILE.dot, .svg, .png, .pdf, or - to print the DOT text)")
        elif self.last is None:
            render.warn("no result yet: evaluate an expression first")
        else:
            target = os.path.expanduser(path)
            try:
                write_dot(self.last.output, target)
            except OutputFileError as err:
                render.error(str(err))

    def _load(self, path: str) -> None:
        if not path:
            render.warn("usage: :load FILE")
            return
        try:
            origin, source = load_source(os.path.expanduser(path), max_input_bytes())
        except SourceError as err:
            render.error(str(err))
            return
        self._run(source, origin)


def file_names(typed: str) -> list[str]:
    """The paths that complete `typed` (as typed: `~` stays `~`), folders ending in `/`;
    hidden entries only once their leading `.` is typed."""
    folder, slash, start = typed.rpartition("/")
    where = (os.path.expanduser(folder) or "/") if slash else "."
    try:
        entries = list(os.scandir(where))
    except OSError:  # no such folder, or not readable: nothing to offer
        return []
    prefix = folder + slash
    names = []
    for entry in entries:
        if entry.name.startswith(start) and (start.startswith(".") or not entry.name.startswith(".")):
            try:
                is_folder = entry.is_dir()
            except OSError:
                is_folder = False
            names.append(prefix + entry.name + ("/" if is_folder else ""))
    return sorted(names)


def _describe(value: Any, style: render.Style) -> str:
    """A variable for :vars: its value as a result shows it; a large tensor summarised,
    with its shape."""
    if isinstance(value, tuple):
        return f"({len(value)} results)"
    if isinstance(value, FunctionValue):
        return repr(value)
    data = np.asarray(value.data if hasattr(value, "data") else value)
    if data.size <= SUMMARY_THRESHOLD or style.full:
        return style.number(data)
    return f"{style.number(data)}  (shape {'x'.join(map(str, data.shape))})"


COMMAND_INDENT = 15  # where :help's descriptions start, past the two blanks before each command


def help_lines() -> list[tuple[str, int]]:
    """:help's lines for the commands, then the settings (from their declarations), each
    with the indent its continuation takes when it wraps."""
    return [*(line for command, text in COMMANDS.items() for line in _entry(command, text)), (SETTINGS_HELP, 4),
            *(line for name, option in SETTINGS.items() for line in _entry(option.usage(name), option.help))]


def _entry(usage: str, text: str) -> list[tuple[str, int]]:
    """`  usage  text`, the text at COMMAND_INDENT + 2; after a longer usage, on a line of its own."""
    if len(usage) < COMMAND_INDENT - 1:
        return [(f"  {usage:<{COMMAND_INDENT - 1}} {text}", COMMAND_INDENT)]
    return [(f"  {usage}", COMMAND_INDENT), (f"{' ' * (COMMAND_INDENT + 2)}{text}", 0)]


def terminal_width() -> int | None:
    """The terminal's columns (at least render.MIN_COLUMNS, as for results), or None when
    stdout is not a terminal (a pipe gets no hard wraps)."""
    return max(shutil.get_terminal_size().columns, render.MIN_COLUMNS) if sys.stdout.isatty() else None


def hanging(line: str, width: int, indent: int) -> list[str]:
    """`line` wrapped at `width`, its continuation lines indented `indent` past its own
    indent (a word longer than the room is cut)."""
    lead = len(line) - len(line.lstrip(" "))
    if len(line) <= width:
        return [line]
    room = max(width - 1, lead + indent + 10)  # (the last column: a terminal may wrap a full line itself)
    return textwrap.wrap(line[lead:], room, initial_indent=" " * lead, subsequent_indent=" " * (lead + indent), break_on_hyphens=False) or [line]


_WORDS = NAMES | frozenset(keyword for renames in RENAMES.values() for keyword in renames.values())
_QUIET = NAMES | NUMBERS | STRINGS | COMMENTS | frozenset({"_NL", "CONTINUATION", "BAD"})  # every other token is an operator


def _called(before_cursor: str) -> str | None:
    """The name of the function whose call's brackets the cursor is in (`softmax(x, ` gives
    softmax), or None (inside a list literal, or not in brackets)."""
    stack: list[str | None] = []
    previous = None
    for token in tokens(before_cursor):
        if token.kind in ("LPAR", "LSQB", "LBRACE"):
            stack.append(str(previous) if token.kind == "LPAR" and previous is not None and previous.kind in NAMES else None)
        elif token.kind in ("RPAR", "RSQB", "RBRACE") and stack:
            stack.pop()
        previous = token
    return stack[-1] if stack else None


def _completion_context(before_cursor: str) -> tuple[str, Any]:
    """The word being typed at the cursor ('' if none) and the token before it, as the
    parser's lexer reads the line."""
    found = list(tokens(before_cursor))
    if found and found[-1].kind in _WORDS and found[-1].end == len(before_cursor):
        return str(found[-1]), found[-2] if len(found) > 1 else None
    return "", found[-1] if found else None


def colour(line: str, functions: set[str]) -> list[tuple[str, str]]:
    """`line` in (style, text) pieces, read by the parser's lexer: keywords, known
    functions, numbers, comments and operators each have a style; blanks have none."""
    parts, at = [], 0
    for t in tokens(line):
        if t.start > at:
            parts.append(("", line[at:t.start]))
        if t in KEYWORDS:
            style = "class:keyword"
        elif t.kind in NAMES:
            style = "class:function" if t in functions else ""
        elif t.kind in NUMBERS:
            style = "class:number"
        elif t.kind in COMMENTS:
            style = "class:comment"
        else:
            style = "" if t.kind in _QUIET else "class:operator"
        parts.append((style, str(t)))
        at = t.end
    if at < len(line):
        parts.append(("", line[at:]))
    return parts


def _lexer(words: Any) -> Any:
    class GradcalcLexer(Lexer):
        def lex_document(self, document: Any) -> Any:
            lines = document.lines
            functions = set(words())
            return lambda i: colour(lines[i], functions)

    return GradcalcLexer()


def make_prompt_session(repl: Repl, **kwargs: Any) -> Any:
    class Words(Completer):
        def get_completions(self, document: Any, complete_event: Any) -> Any:
            word, candidates = repl.completions(document.text_before_cursor)
            for candidate in candidates:
                if candidate.startswith(word) and candidate != word:
                    yield Completion(candidate, start_position=-len(word), display_meta=repl.signature(candidate))

    history = _history(history_path())
    style = Style.from_dict({"number": "ansicyan", "function": "ansigreen", "keyword": "ansimagenta bold",
                              "comment": "ansibrightblack", "operator": "ansiyellow"})
    # enable_history_search: Up recalls the earlier lines that start with what is typed.
    return PromptSession(history=history, completer=Words(), lexer=_lexer(repl.words), style=style, complete_while_typing=False,
                         enable_history_search=True, **kwargs)


def _history(path: Path) -> Any:
    """A file history that warns once and goes on in memory when the file cannot be used
    (a directory, a symlink to /dev/full, a full disk): typed lines must always run."""
    class SafeFileHistory(FileHistory):
        def store_string(self, string: str) -> None:
            try:
                super().store_string(string)
            except OSError as err:
                render.warn(f"cannot save history to {path}: {err.strerror}; this session's history will not be saved")
                self.store_string = lambda string: None  # type: ignore[method-assign]

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            if not path.is_file():
                raise OSError(0, "not a regular file")
            open(path, "rb").close()  # (readable)
    except OSError as err:
        render.warn(f"cannot use the history file {path}: {err.strerror}; history will not be saved")
        return InMemoryHistory()
    return SafeFileHistory(str(path))


def read_input(prompt: Any, repl: Repl) -> str | None:
    """One complete input, asking for continuation lines while it is unfinished.
    None at end of input (Ctrl-D); '' when the line was cancelled (Ctrl-C). The parser's
    PendingInput tells finished from unfinished one line at a time (brackets, including
    those in strings, counted by its lexer), so a long paste is not parsed once per line."""
    pending = PendingInput()
    while True:
        try:
            line = prompt.prompt("... " if pending.lines else ">>> ")
        except (KeyboardInterrupt, Interrupted):
            return ""
        except EOFError:
            return None if not pending.lines else join_lines(pending.lines)
        if not pending.lines and line.lstrip().startswith(":"):
            return line  # a REPL command is one line
        if pending.lines and not line.strip():
            pending.lines.append(line)
            return join_lines(pending.lines)  # a blank continuation line ends the input, finished or not
        if pending.add(line):
            return join_lines(pending.lines)


def loop(repl: Repl, prompt: Any) -> None:
    while True:
        text = read_input(prompt, repl)
        try:
            if text is None or not repl.handle(text):
                return
        except (KeyboardInterrupt, Interrupted):  # between statements: nothing to undo
            render.warn("interrupted")


def start_repl(engine: str = "tensor", digits: int | None = None) -> None:
    """The REPL on this terminal; the engine's limits are set up by the caller."""
    repl = Repl(engine)
    repl.out.style = repl.out.style._replace(digits=digits)
    repl.out.write(f"gradcalc REPL ({engine} engine). :help for help, Ctrl-D to leave.")
    loop(repl, make_prompt_session(repl))
