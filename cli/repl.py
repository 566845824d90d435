"""The interactive REPL (prompt_toolkit): history, completion, colouring, continuation lines.

`Repl.handle` does the work for one complete input and is what the tests drive; `start_repl`
wraps it in a prompt loop. Ctrl-C cancels the line being typed, Ctrl-D leaves, and an
error never loses a variable.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from gradcalc.parser import CheckStatementResult, ExpressionResult, LanguageError, Session, compile_program
from gradcalc.parser.analysis import Analysis, analyze
from gradcalc.parser.checks import make_check_handler

from . import render
from .checking import check_line

COMMANDS = {
    ":help": "this help",
    ":vars": "variables and user functions",
    ":tree": "the graph of the last result as a tree",
    ":dot FILE": "write the last result's graph as DOT (.svg/.png draws it)",
    ":engine NAME": "switch engine: tensor or scalar (variables are reset)",
    ":reset": "forget every variable and function",
    ":load FILE": "run a script into this session",
    ":quit": "leave (Ctrl-D does too)",
}
HELP = """Type an expression to see its value, its gradient per variable and its graph;
assign with x = 3 (a variable is a leaf you can differentiate by); define functions with
def f(x, y) = x*y; check a gradient with check EXPR [wrt x]. `_` is the last result.
An unfinished line (an open bracket, a trailing operator) continues on the next one.
Functions: `gradcalc ops` lists them all."""


def history_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "gradcalc" / "history"


class Repl:
    def __init__(self, engine: str = "tensor", renderer: render.PlainRenderer | None = None) -> None:
        self.engine = engine
        self.out = renderer or render.renderer(render.Style(None, render.use_rich(sys.stdout)))
        self.session = self._new_session(engine)
        self.last: Analysis | None = None

    @staticmethod
    def _new_session(engine: str) -> Session:
        return Session(engine=engine, on_check=make_check_handler(), on_warning=render.warn, switch_engine=":engine {engine}")

    def words(self) -> list[str]:
        """What completion offers: names, functions, methods and :commands."""
        return sorted({*self.session.names(), *self.session.backend.method_names(), *(c.split()[0] for c in COMMANDS)})

    def is_incomplete(self, text: str) -> bool:
        if text.lstrip().startswith(":"):
            return False
        try:
            compile_program(text)
        except LanguageError as err:
            return err.incomplete
        return False

    def handle(self, text: str) -> bool:
        """Run one complete input. Returns False when the user asked to leave."""
        stripped = text.strip()
        if not stripped:
            return True
        if stripped.startswith(":"):
            return self._command(stripped)
        self._run(text)
        return True

    def _run(self, source: str, origin: str = "") -> None:
        """Run statements one by one, showing each result; an error stops the rest of this
        input, and statements before it keep their effect."""
        try:
            for statement in compile_program(source).statements:
                self._show(self.session.run_statement(statement))
        except LanguageError as err:
            render.print_error(err, source, origin)

    def _show(self, result: Any) -> None:
        if isinstance(result, ExpressionResult):
            analysis = analyze(result.value, None, self.session.variables)
            self.last = analysis
            self.session.variables["_"] = result.value
            self.out.analysis(analysis)
        elif isinstance(result, CheckStatementResult):
            self.out.write(check_line(result.outcome))

    def _command(self, line: str) -> bool:
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        if name in (":quit", ":q", ":exit"):
            return False
        if name == ":help":
            self.out.write(HELP)
            for command, text in COMMANDS.items():
                self.out.write(f"  {command:<14} {text}")
        elif name == ":vars":
            self._vars()
        elif name == ":tree":
            if self.last is None:
                render.warn("no result yet: evaluate an expression first")
            else:
                self.out.analysis(self.last, tree=True)
        elif name == ":dot":
            self._dot(arg)
        elif name == ":engine":
            if arg not in ("tensor", "scalar"):
                render.warn(":engine takes tensor or scalar")
            else:
                self.engine, self.session, self.last = arg, self._new_session(arg), None
                self.out.write(f"engine: {arg} (variables reset)")
        elif name == ":reset":
            self.session, self.last = self._new_session(self.engine), None
            self.out.write("variables and functions forgotten")
        elif name == ":load":
            self._load(arg)
        else:
            render.warn(f"unknown command {name}; :help lists them")
        return True

    def _vars(self) -> None:
        from gradcalc.autodiff.graph import format_array

        if not self.session.variables and not self.session.functions:
            self.out.write("no variables yet")
        for var, value in sorted(self.session.variables.items()):
            data = value.data if hasattr(value, "data") else value
            self.out.write(f"{var} = {format_array(data)}" if not isinstance(value, tuple) else f"{var} = ({len(value)} results)")
        for function in self.session.functions.values():
            self.out.write(function.text)

    def _dot(self, path: str) -> None:
        import typer

        from .main import _write_dot

        if not path:
            render.warn(":dot needs a file name")
        elif self.last is None:
            render.warn("no result yet: evaluate an expression first")
        else:
            try:
                _write_dot(self.last.output, Path(path))
                self.out.write(f"wrote {path}")
            except typer.Exit:
                pass

    def _load(self, path: str) -> None:
        try:
            source = Path(path).read_text()
        except OSError as err:
            render.warn(f"cannot read {path or '(no file given)'}: {err.strerror}")
            return
        self._run(source, path)


_TOKEN = re.compile(r"(?P<comment>#.*)|(?P<number>(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<op>\*\*|[-+*/@^<>=!]=?|[()\[\],.;:])|(?P<space>\s+)|(?P<other>.)")
_KEYWORDS = {"if", "else", "def", "check", "wrt", "true", "false"}


def _lexer(words: Any) -> Any:
    from prompt_toolkit.lexers import Lexer

    class GradcalcLexer(Lexer):
        def lex_document(self, document: Any) -> Any:
            lines = document.lines
            functions = set(words())

            def line(i: int) -> list[tuple[str, str]]:
                parts = []
                for m in _TOKEN.finditer(lines[i]):
                    kind, text = m.lastgroup, m.group()
                    if kind == "name":
                        style = "class:keyword" if text in _KEYWORDS else "class:function" if text in functions else ""
                    else:
                        style = {"comment": "class:comment", "number": "class:number", "op": "class:operator"}.get(kind or "", "")
                    parts.append((style, text))
                return parts

            return line

    return GradcalcLexer()


def make_prompt_session(repl: Repl, **kwargs: Any) -> Any:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import Completer, Completion
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.styles import Style

    class Words(Completer):
        def get_completions(self, document: Any, complete_event: Any) -> Any:
            word = document.get_word_before_cursor(pattern=re.compile(r"[:A-Za-z_]\w*"))
            for candidate in repl.words():
                if word and candidate.startswith(word) and candidate != word:
                    yield Completion(candidate, start_position=-len(word))

    path = history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        history: Any = FileHistory(str(path))
    except OSError:
        history = InMemoryHistory()
    style = Style.from_dict({"number": "ansicyan", "function": "ansigreen", "keyword": "ansimagenta bold", "comment": "ansibrightblack", "operator": "ansiyellow"})
    return PromptSession(history=history, completer=Words(), lexer=_lexer(repl.words), style=style, complete_while_typing=False, **kwargs)


def read_input(prompt: Any, repl: Repl) -> str | None:
    """One complete input, asking for continuation lines while it is unfinished.
    None at end of input (Ctrl-D); '' when the line was cancelled (Ctrl-C)."""
    lines: list[str] = []
    while True:
        try:
            line = prompt.prompt("... " if lines else ">>> ")
        except KeyboardInterrupt:
            return ""
        except EOFError:
            return None if not lines else "\n".join(lines)
        lines.append(line)
        text = "\n".join(lines)
        if not repl.is_incomplete(text):
            return text


def loop(repl: Repl, prompt: Any) -> None:
    while True:
        text = read_input(prompt, repl)
        if text is None or not repl.handle(text):
            return


def start_repl(engine: str = "tensor") -> None:
    from .main import _prepare_engine

    _prepare_engine(None)
    repl = Repl(engine)
    repl.out.write(f"gradcalc REPL ({engine} engine). :help for help, Ctrl-D to leave.")
    loop(repl, make_prompt_session(repl))
