"""Source text to a Lark parse tree, with readable errors.

The LALR parser is Lark's stand-alone parser generated from grammar.lark (see
generate.py): a fresh process loads its tables without importing Lark or analysing the
grammar. It is built once per process and reused. Every parse starts on the fast path
(fastpath.py), which needs only larktree.py; Lark's runtime (`_lark()`, standalone.py)
is imported when a source does not parse there, mostly for a syntax error's message.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from . import fastpath
from .errors import LanguageError
from .larktree import Token, Tree
from .records import Record

if TYPE_CHECKING:
    from .standalone import UnexpectedInput

__all__ = [
    "BadStatement", "PendingInput", "Token", "Tree", "describe_expected", "lark_parser", "parse_recovering", "parse_statements",
    "parse_tree",
]
# What the post-lexer looks at; the fast path reads the same sets.
_OPENERS, _CLOSERS, _CONTINUES, _SEPARATORS = fastpath.OPENERS, fastpath.CLOSERS, fastpath.CONTINUES, fastpath.SEPARATORS


class _BracketNewlines:
    """Post-lexer: a newline inside brackets or after an operator is whitespace, elsewhere
    it ends a statement.

    On the way it records where each statement's tokens start and end (`statements`, in
    source offsets), so the compiler can quote a statement's exact text without searching
    the source again (which made compiling quadratic in the number of statements).
    """

    always_accept = ("_NL",)
    source = ""  # the text being parsed, while _lark_parse runs (a class default: the parser is unpickled)

    def __init__(self) -> None:
        self.statements: list[tuple[int, int]] = []
        self.start = -1  # where the statement being read began (-1: between statements)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        statements: list[tuple[int, int]] = []
        self.statements = statements
        depth = 0
        start = end = -1
        previous = ""
        self.start = -1
        source, keywords = self.source, _keywords()
        token: Any  # (Lark types a token's place Optional; its lexer always sets it)
        for token in stream:
            kind = token.type
            if kind in keywords and token.end_pos < len(source) and _WORD.match(source, token.end_pos):
                # Lark's lexer is contextual: where only a keyword fits, it reads `iffy` as
                # `if fy` (`1 iffy else 2` would be `1 if fy else 2`). A word is read whole,
                # as the fast path reads it: here a name, which the parser then refuses.
                word = _WORD.match(source, token.start_pos)
                token = token.update("NAME", word.group())  # type: ignore[union-attr]  # (a keyword's token starts a word)
                kind = "NAME"
            if kind in _OPENERS:
                depth += 1
            elif kind in _CLOSERS:
                depth = max(depth - 1, 0)
            elif kind == "_NL" and (depth or previous in _CONTINUES):
                continue
            if depth == 0 and kind in _SEPARATORS:
                if start >= 0:
                    statements.append((start, end))
                    start = -1
            else:
                if start < 0:
                    start = token.start_pos
                end = token.end_pos
            self.start, previous = start, kind
            yield token
        if start >= 0:
            statements.append((start, end))


_WORD = re.compile(r"\w+")


@lru_cache(maxsize=1)
def _keywords() -> frozenset[str]:
    """The keywords' terminals (IF, ELSE, ...): the ones Lark's lexer renames NAME to."""
    return frozenset(keyword for renames in fastpath._tables().keywords.values() for keyword in renames.values())


def _lark() -> Any:
    """Lark's runtime, the generated standalone.py (imported once, on first need)."""
    from . import standalone

    return standalone


@lru_cache(maxsize=1)
def lark_parser() -> Any:
    """The parser, loaded once per process. Its post-lexer (a _BracketNewlines) holds the
    statement ranges of the latest parse.

    It is the parser build_lark_parser() gives, built ahead of time and pickled
    (prebuilt.py, written by generate.py): unpickling it costs a one-shot command a
    fraction of building it from the tables."""
    try:
        from .prebuilt import PARSER
    except ImportError:  # not generated (yet): build it
        return build_lark_parser()
    import pickle
    import zlib

    return pickle.loads(zlib.decompress(PARSER))


def build_lark_parser() -> Any:
    """The parser built from the generated tables (Lark's stand-alone loader)."""
    return _lark().Lark_StandAlone(postlex=_BracketNewlines())


@lru_cache(maxsize=1)
def _line_lexer() -> Any:
    """The parser's terminals as a plain lexer that keeps comments, built once (Lark's own
    `lex()` builds a new one on every call, which costs more than lexing a line)."""
    return lark_parser()._build_lexer(dont_ignore=True)


_BLANK = frozenset({"__IGNORE_0", "CONTINUATION"})  # the line lexer keeps comments and spaces


_READABLE = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "_NL": "end of line",
    "$END": "end of input", "COMPARE": "a comparison", "AUGOP": "'+=', '-=', '*=', '/=', '//=' or '%='", "POW": "'**'",
}
_EXPRESSION_STARTS = {"NAME", "NUMBER", "LPAR", "LSQB", "MINUS"}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "_FLOORDIV", "PERCENT", "AT", "POW", "COMPARE", "DOT", "LSQB", "IF"}


def _readable(terminal: str) -> str:
    if terminal in _READABLE:
        return _READABLE[terminal]
    try:
        pattern = lark_parser().get_terminal(terminal).pattern
    except KeyError:
        return terminal.lower()
    return f"'{pattern.value}'" if pattern.type == "str" else terminal.lower()


def describe_expected(expected: set[str]) -> str:
    """'an expression', "')'", "',' or ']'" ... never Lark's internal terminal names."""
    words = []
    if _EXPRESSION_STARTS <= expected:
        words.append("an expression")
        expected = {t for t in expected if t not in _EXPRESSION_STARTS and t not in {"PLUS", "STRING", "TRUE", "FALSE"}}
    if len(expected & _OPERATORS) >= 3:
        words.append("an operator")
        expected = expected - _OPERATORS
    words += sorted({_readable(t) for t in expected if not t.startswith("__")})
    if not words:
        return "something else"
    if len(words) > 6:
        words = words[:6] + ["..."]
    return ", ".join(words[:-1]) + (" or " if len(words) > 1 else "") + words[-1]


def _found(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    if token.type == "_NL":
        return "end of line"
    return f"'{token.value}'"


def _rest_is_blank(source: str, pos: int | None) -> bool:
    if pos is None:
        return True
    rest = source[pos:]
    return all(not line.strip() or line.strip().startswith("#") for line in rest.splitlines())


def parse_tree(source: str) -> Tree:
    """Parse a whole program. Raises LanguageError (kind 'incomplete' when the input just
    stopped early, so a REPL can ask for another line)."""
    return parse_statements(source)[0]


Range = tuple[int, int]  # start and end offsets in the source (end exclusive)


def parse_statements(source: str) -> tuple[Tree, list[Range]]:
    """Parse a whole program; also return where each statement's text starts and ends."""
    parsed = fastpath.parse(source)
    if parsed is not None:
        return parsed
    try:  # a syntax error (or input the fast path leaves to Lark): Lark's words for it
        tree = _lark_parse(source)
    except _lark().UnexpectedInput as err:
        raise _syntax_error(source, err) from None
    return tree, lark_parser().options.postlex.statements


def _lark_parse(source: str) -> Tree:
    """Lark's parse of `source`, its post-lexer shown the text (to read words whole)."""
    parser = lark_parser()
    recorder = parser.options.postlex
    recorder.source = source
    try:
        return parser.parse(source)
    finally:
        recorder.source = ""  # a parse that does not set it (generate.py's, a test's) reads tokens as Lark does




class BadStatement(Record):
    """A statement that does not parse: the error, and the text range it covers."""

    __slots__ = ("error", "start", "end")

    def __init__(self, error: LanguageError, start: int, end: int) -> None:
        self.error, self.start, self.end = error, start, end


MAX_SYNTAX_ERRORS = 100
_STATEMENT_LINE = re.compile(r"\n[ \t]*(check|def)\b")


def parse_recovering(source: str) -> tuple[Tree, list[Range], list[BadStatement]]:
    """Parse a program, setting aside each statement that has a syntax error.

    A bad statement is blanked out (newlines kept, so every place stays where it was) and
    the program parsed again, so one mistake costs one statement, not the whole file.
    Each error costs a parse; after MAX_SYNTAX_ERRORS the rest of the source is one bad
    statement.
    """
    text = source
    bad: list[BadStatement] = []
    while True:
        parsed = fastpath.parse(text)
        if parsed is not None:
            return *parsed, bad
        recorder = lark_parser().options.postlex  # loaded only when the fast path gives up (an error, mostly)
        try:
            return _lark_parse(text), recorder.statements, bad
        except _lark().UnexpectedInput as err:
            error = _syntax_error(text, err)
            position, is_separator = _error_position(text, err)
            if is_separator and recorder.statements:
                start = recorder.statements[-1][0]
            else:
                start = recorder.start if 0 <= recorder.start <= position else position
            end = max(statement_end(text, start), min(position + 1, len(text)))
            # `y = [1, 2` left open swallows the lines after it: a line that starts with
            # `check` or `def` is a statement of its own, so the bad one ends before it.
            keyword = _STATEMENT_LINE.search(text, start, end)
            if keyword is not None:
                end = keyword.start() + 1
            if len(bad) + 1 >= MAX_SYNTAX_ERRORS:
                end = len(text)
            bad.append(BadStatement(error, start, end))
            text = text[:start] + _blank(text[start:end]) + text[end:]


def _error_position(source: str, err: UnexpectedInput) -> tuple[int, bool]:
    """Where a parse error is (a source offset) and whether it is at a statement separator."""
    if isinstance(err, _lark().UnexpectedCharacters):
        return err.pos_in_stream, False
    token = getattr(err, "token", None)
    if token is None or token.type == "$END" or token.start_pos is None:
        return len(source), False
    return token.start_pos, token.type in _SEPARATORS


def _blank(text: str) -> str:
    # Newlines stay, so every place stays where it was. A "\r" does not: alone it is a
    # bad character, and kept it would be the same error again, for ever.
    return "".join(ch if ch == "\n" else " " for ch in text)


def statement_end(source: str, start: int) -> int:
    """The end of the statement that starts at `start`: the first newline or ';' outside
    brackets, strings and comments. A character scan, for text that does not parse."""
    depth = 0
    i, n = start, len(source)
    while i < n:
        ch = source[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(depth - 1, 0)
        elif ch in "'\"":
            close = source.find(ch, i + 1)
            newline = source.find("\n", i + 1)
            i = close if close >= 0 and (newline < 0 or close < newline) else i
        elif ch == "#":
            newline = source.find("\n", i)
            i = n if newline < 0 else newline - 1
        elif ch == "\\" and source.startswith("\n", i + 1):
            i += 1
        elif ch in "\n;" and depth == 0:
            return i
        i += 1
    return n


class PendingInput:
    """Lines typed at a prompt, told apart as finished or not one line at a time.

    `add(line)` answers "is the input complete now?" without parsing everything typed so
    far on every line: while a bracket is open, or the line ends with an operator or a
    `\\`, the input is unfinished and nothing is parsed; otherwise the whole input is
    parsed once. So a paste of n lines costs O(n), not O(n^2).
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def add(self, line: str) -> bool:
        """Add one line; True when the input so far is complete (run it, then `clear()`)."""
        self.lines.append(line)
        if self._continues(line):
            return False
        try:
            parse_tree(self.text)
        except LanguageError as err:
            return not err.incomplete
        return True

    def clear(self) -> None:
        self.lines, self.depth = [], 0

    def _continues(self, line: str) -> bool:
        """Track bracket depth over one line; True when the input cannot end after it: a
        bracket is open, or its last token is an operator or a `\\` (not in a comment)."""
        body = line.rstrip()
        backslash = body.endswith("\\")
        try:
            tokens = list(_lark().LexerThread.from_text(_line_lexer(), body[:-1] if backslash else body).lex(None))
        except _lark().UnexpectedInput:
            return False  # a bad character: the parse reports it
        last = ""
        for token in tokens:
            if token.type in _OPENERS:
                self.depth += 1
            elif token.type in _CLOSERS:
                self.depth = max(self.depth - 1, 0)
            if token.type not in _BLANK:
                last = token.type
        return self.depth > 0 or last in _CONTINUES or (backslash and last != "COMMENT")


def _syntax_error(source: str, err: UnexpectedInput) -> LanguageError:
    if isinstance(err, _lark().UnexpectedCharacters):
        char = source[err.pos_in_stream] if err.pos_in_stream < len(source) else "?"
        message = f"unexpected character {char!r}"
        if char in "'\"":
            message = "unterminated string"
        elif char == "!":  # `!=` is a comparison; a lone `!` is Python's or C's habit, not ours
            message = "'!' is not supported: there is no factorial, and for 'not x' write x == 0"
        return LanguageError("syntax", message, err.line, err.column, err.line, err.column + 1)
    if isinstance(err, _lark().UnexpectedEOF):
        line, column = _end_position(source)
        return LanguageError("incomplete", f"unfinished input: expected {describe_expected(set(err.expected))}", line, column)
    assert isinstance(err, _lark().UnexpectedToken)
    token = err.token
    try:  # what the parser would really accept here (LALR's lookahead sets are wider)
        acceptable = set(err.interactive_parser.accepts())
    except Exception:  # noqa: BLE001 - fall back to Lark's own list
        acceptable = set(err.expected)
    expected = describe_expected(acceptable)
    at_end = token.type == "$END" or (token.type == "_NL" and _rest_is_blank(source, token.end_pos))
    if at_end:
        line, column = _end_position(source) if token.type == "$END" else (token.line, token.column)
        return LanguageError("incomplete", f"unfinished input: expected {expected}", line, column)
    complex_literal = _complex_literal(source, token)
    if complex_literal:
        return LanguageError(
            "syntax", "complex numbers are not supported (gradcalc works in real float64; complex step is internal)",
            token.line, token.column - complex_literal, token.line, token.column + 1,
        )
    width = max(len(str(token.value)), 1) if token.type != "_NL" else 1
    return LanguageError(
        "syntax", f"expected {expected}, found {_found(token)}", token.line, token.column, token.end_line or token.line,
        (token.column or 1) + width,
    )


_NUMBER_BEFORE = re.compile(r"(0[xXbBoO][0-9a-fA-F_]+|\d[\d_]*\.?[\d_]*|\.\d[\d_]*)([eE][+-]?\d[\d_]*)?$")


def _complex_literal(source: str, token: Token) -> int:
    """How long the number is that `token` makes a complex literal of (`1j`, `2.5e3J`): a
    `j` right after a number; 0 when it is not one."""
    if token.type != "NAME" or token.value not in ("j", "J") or token.start_pos is None:
        return 0
    number = _NUMBER_BEFORE.search(source, 0, token.start_pos)
    return len(number.group()) if number else 0


def _end_position(source: str) -> tuple[int, int]:
    text = source.rstrip()
    lines = text.split("\n") if text else [""]
    return len(lines), len(lines[-1]) + 1
