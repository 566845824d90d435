"""Source text to a parse tree, with readable errors.

The pipeline: grammar.lark -> (generate.py, at build time, with Lark) tables.py -> the
lexer (lexer.py) and the LALR driver (driver.py), which are all gradcalc runs. This
module is their face: whole programs, programs that go on past a bad statement, the
words of a syntax error, and the REPL's "is the input finished?".
"""
from __future__ import annotations

from . import driver, tables
from .driver import Node, Range, Stuck
from .errors import LanguageError, place_of
from .layout import DEDENT, INDENT, Layout
from .lexer import BAD, CLOSERS, COMMENTS, CONTINUES, END, KEYWORDS, NEWLINE, OPENERS, SEPARATORS, Token, tokens
from .records import Record

__all__ = [
    "KEYWORDS", "BadStatement", "Node", "PendingInput", "Range", "Token", "describe_expected", "parse_recovering",
    "count_checks", "parse_statements", "parse_tree", "statement_end",
]

_READABLE = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", NEWLINE: "end of line", "_INDENT": "an indented block",
    "_DEDENT": "the end of the block",
    END: "end of input", "COMPARE": "a comparison", "AUGOP": "an update such as '+='", "POW": "'**'",
}
_EXPRESSION_STARTS = {"NAME", "NUMBER", "LPAR", "LSQB", "MINUS"}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "_FLOORDIV", "PERCENT", "AT", "POW", "COMPARE", "DOT", "LSQB", "LPAR", "IF"}


def _readable(terminal: str) -> str:
    if terminal in _READABLE:
        return _READABLE[terminal]
    text = tables.LITERALS.get(terminal)
    return terminal.lower() if text is None else f"'{text}'"


def describe_expected(expected: set[str]) -> str:
    """'an expression', "')'", "',' or ']'" ... never the grammar's terminal names."""
    words = []
    if _EXPRESSION_STARTS <= expected:
        words.append("an expression")
        expected = {t for t in expected if t not in _EXPRESSION_STARTS and t not in {"PLUS", "STRING", "TRUE", "FALSE", "LAMBDA"}}
    if len(expected & _OPERATORS) >= 3:
        words.append("an operator")
        expected = expected - _OPERATORS
    words += sorted({_readable(t) for t in expected if not t.startswith("__")})
    if not words:
        return "something else"
    if len(words) > 8:  # (where a statement may start: an expression, ';', check, def, for, with and the two ends)
        words = words[:8] + ["..."]
    return ", ".join(words[:-1]) + (" or " if len(words) > 1 else "") + words[-1]


def parse_tree(source: str) -> Node:
    """Parse a whole program. Raises LanguageError (kind 'incomplete' when the input just
    stopped early, so a REPL can ask for another line)."""
    return parse_statements(source)[0]


def parse_statements(source: str) -> tuple[Node, list[Range]]:
    """Parse a whole program; also return where each statement's text starts and ends."""
    try:
        return driver.parse(source)
    except Stuck as stuck:
        raise _syntax_error(source, stuck) from None


class BadStatement(Record):
    """A statement that does not parse: the error, and the text range it covers."""

    __slots__ = ("error", "start", "end")

    def __init__(self, error: LanguageError, start: int, end: int) -> None:
        self.error, self.start, self.end = error, start, end


MAX_SYNTAX_ERRORS = 100
_STATEMENT_KEYWORDS = frozenset({"CHECK", "DEF"})


def parse_recovering(source: str) -> tuple[Node, list[Range], list[BadStatement]]:
    """Parse a program, setting aside each statement that has a syntax error.

    A bad statement is blanked out (newlines kept, so every place stays where it was) and
    the program parsed again, so one mistake costs one statement, not the whole file.
    Each error costs a parse; after MAX_SYNTAX_ERRORS the rest of the source is one bad
    statement.
    """
    text = source
    bad: list[BadStatement] = []
    while True:
        try:
            return (*driver.parse(text), bad)
        except Stuck as stuck:
            error = _syntax_error(text, stuck)
            token = stuck.token
            if token is not None and token.kind in SEPARATORS and stuck.statement < 0 and stuck.statements:
                start = stuck.statements[-1][0]
            else:
                start = stuck.statement if 0 <= stuck.statement <= stuck.position else stuck.position
            end = max(statement_end(text, start), min(stuck.position + 1, len(text)))
            # `y = [1, 2` left open swallows the lines after it: a line that starts with
            # `check` or `def` is a statement of its own, so the bad one ends before it.
            end = _before_statement_line(text, start, end)
            carried, _ = _line_carried_on(text, stuck)
            if carried is not None:  # `check x wrt` then `y = 3`: the bad statement ends with its line, the next is its own
                line_end = text.find("\n", carried.end)
                end = min(end, len(text) if line_end < 0 else line_end + 1)
            if len(bad) + 1 >= MAX_SYNTAX_ERRORS:
                end = len(text)
            bad.append(BadStatement(error, start, end))
            # (a "\r" is blanked too: alone it is a bad character, kept it would be the same error for ever)
            text = text[:start] + "".join(ch if ch == "\n" else " " for ch in text[start:end]) + text[end:]


def _before_statement_line(source: str, start: int, end: int) -> int:
    """`end`, or the start of the first line between `start` and `end` that begins with
    `check` or `def`."""
    previous = ""
    for t in tokens(source, start):
        if t.start >= end:
            break
        if previous == NEWLINE and t.kind in _STATEMENT_KEYWORDS:
            return source.rfind("\n", 0, t.start) + 1  # the start of its line
        previous = t.kind
    return end


def statement_end(source: str, start: int) -> int:
    """The end of the statement that starts at `start`, by the layout rules alone (for
    text that does not parse): where the newline or ';' that ends it starts, or, for a
    loop or a `with`, where its body's last token ends."""
    layout = Layout(source, start=start, strict=False)
    for _, _, at, _ in layout:
        if layout.statements:  # (the token that ended the first statement)
            return at
    return len(source)


# What a statement follows: a separator, or the edge of a block
_STATEMENT_BOUNDS = SEPARATORS | {INDENT, DEDENT}


def count_checks(source: str) -> int:
    """How many statements of `source` are checks (`check ...`, not `check = ...`), as the
    layout pass reads it without the parser: for a count before running, so text that
    does not parse counts too."""
    count, check, starts = 0, False, True
    for kind, _, _, _ in Layout(source, strict=False):
        if check and kind != "EQUAL":
            count += 1
        check = starts and kind == "CHECK"
        starts = kind in _STATEMENT_BOUNDS
    return count


class PendingInput:
    """Lines typed at a prompt, told apart as finished or not one line at a time.

    `add(line)` answers "is the input complete now?" without parsing everything typed so
    far on every line: while a bracket is open, or the line ends with an operator or a
    `\\`, the input is unfinished and nothing is parsed; after a line that ends with a
    block's colon (a loop's, a `with no_grad:`), only a blank line ends the input (the
    lines between are the body); otherwise the whole input is parsed once. So a paste of n lines costs O(n),
    not O(n^2). The lines are the input as typed, joined by newlines (`text`), so every
    place in it is where it was typed.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0
        self.block = False  # a line ended with a block's colon: the input goes on to a blank line

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def add(self, line: str) -> bool:
        """Add one line; True when the input so far is complete (run it, then `clear()`)."""
        self.lines.append(line)
        if self._continues(line) or (self.block and line.strip()):
            return False
        try:
            parse_tree(self.text)
        except LanguageError as err:
            return not err.incomplete
        return True

    def clear(self) -> None:
        self.lines, self.depth, self.block = [], 0, False

    def _continues(self, line: str) -> bool:
        """Track bracket depth over one line (the layout pass, from the depth the lines
        before left); True when the input cannot end after it: a bracket is open, or its
        last token is an operator or a `\\` (not in a comment)."""
        layout = Layout(line, depth=self.depth, strict=False)
        bad = [at for kind, _, at, _ in layout if kind == BAD]
        # A `\\` ends the line only when nothing but blanks follows it (not even a comment).
        backslash = bool(bad) and line[bad[-1]] == "\\" and not line[bad[-1] + 1 :].strip(" \t\f")
        if backslash:
            bad.pop()
        if bad:
            return False  # a bad character: the parse reports it
        self.depth = layout.depth
        # A line that ends with a block's colon opens a block of indented lines.
        self.block = self.block or layout.opened
        return self.depth > 0 or layout.previous in CONTINUES or backslash


def _syntax_error(source: str, stuck: Stuck) -> LanguageError:
    token = stuck.token
    if token is None:  # a character no terminal matches
        line, column = place_of(source, stuck.position)
        char = source[stuck.position]
        message = f"unexpected character {char!r}"
        if char in "'\"":
            message = "unterminated string"
        elif char == "!":  # `!=` is a comparison; a lone `!` is Python's or C's habit, not ours
            message = "'!' is not supported: there is no factorial, and for 'not x' write x == 0"
        elif char in _SUPERSCRIPT_DIGITS:  # x², x⁻¹: a power as typeset
            written = _superscript_run(source, stuck.position)
            power = written.translate(_SUPERSCRIPTS)
            message = f"{written!r} is not an operator: write a power as ** {power}, as in x ** {power}"
            return LanguageError("syntax", message, line, column, line, column + len(written))
        elif char in _SYMBOLS:  # ×, ÷, −, √: mathematics as typeset
            message = f"{char!r} is not an operator: {_SYMBOLS[char]}"
        return LanguageError("syntax", message, line, column, line, column + 1)
    if stuck.reason:
        line, column = place_of(source, token.start)
        return LanguageError("syntax", stuck.reason, line, column, line, column + max(len(token), 1))
    expected_terminals = driver.accepted(stuck.states)
    if stuck.states[-1] == driver.AFTER_STATEMENT_NAME:
        expected_terminals.discard("NAME")  # a second name only after `vjp`, a rule's rare start (driver.py)
    expected = describe_expected(expected_terminals)
    ending, opened = _line_carried_on(source, stuck)
    if token.kind == END or (token.kind == NEWLINE and all(t.kind == NEWLINE or t.kind in COMMENTS for t in tokens(source, token.end))):
        # (at the end: just after the last character that is not a blank)
        line, column = place_of(source, len(source.rstrip()) if token.kind == END else token.start)
        unclosed = ""
        if opened is not None and place_of(source, opened.start)[0] < line:  # `sin(x,` then lines that never close it
            opened_line, opened_column = place_of(source, opened.start)
            unclosed = f" (the '{opened}' at line {opened_line}, column {opened_column} is not closed)"
        return LanguageError("incomplete", f"unfinished input: expected {expected}{unclosed}", line, column)
    if ending is not None:  # `check x ** 2 wrt` then `y = 3`: the mistake is at the end of the line before
        found = "end of line" if token.kind == NEWLINE else f"'{token}'"
        line, column = place_of(source, ending.start)
        return LanguageError("syntax", f"'{ending}' at the end of line {line} carries the statement on to line "
                                       f"{place_of(source, token.start)[0]}, which does not go on from it ({found} cannot follow): "
                                       f"finish line {line}", line, column, line, column + len(ending))
    line, column = place_of(source, token.start)
    number = _number_before(source, stuck)
    if number:
        return LanguageError(
            "syntax", "complex numbers are not supported (gradcalc works in real float64; complex step is internal)",
            line, column - number, line, column + 1,
        )
    before = _token_before(source, stuck)
    if before is not None and before.kind == "NUMBER" and token.kind == "NAME" and before.end == token.start:  # 2x, 2pi
        rest = "(...)" if token.kind == "LPAR" else str(token)
        return LanguageError("syntax", f"a number before {rest} does not multiply it: write {before} * {rest}",
                             *place_of(source, before.start), line, column + max(len(token), 1))
    found = "end of line" if token.kind == NEWLINE else f"'{token}'"
    width = 1 if token.kind == NEWLINE else max(len(token), 1)
    return LanguageError("syntax", f"expected {expected}, found {found}", line, column, line, column + width)


def _line_carried_on(source: str, stuck: Stuck) -> tuple[Token | None, Token | None]:
    """Why the statement the parser stuck in went on past the end of a line before the
    stuck token's: the token that ended that line when it is one that needs more (an
    operator, a comma, `wrt`), and the innermost bracket opened on an earlier line and
    still open (a newline inside brackets is a blank); None for either that did not."""
    token = stuck.token
    if token is None or stuck.statement < 0:
        return None, None
    opened: list[Token] = []
    previous = ending = None
    for t in tokens(source, stuck.statement):
        if t.start >= token.start:
            break
        if t.kind == NEWLINE:
            ending = previous
            continue
        if t.kind in COMMENTS:
            continue
        if t.kind in OPENERS:
            opened.append(t)
        elif t.kind in CLOSERS and opened:
            opened.pop()
        previous = t
    bracket = opened[-1] if opened and place_of(source, opened[-1].start)[0] < place_of(source, token.start)[0] else None
    if bracket is not None or ending is None or ending.kind not in CONTINUES:  # (`ending` ends an earlier line: a newline followed it)
        return None, bracket
    return ending, None


# Mathematics as typeset, and what the language writes for it.
_SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺"
_SUPERSCRIPTS = str.maketrans(_SUPERSCRIPT_DIGITS, "0123456789-+")
_SYMBOLS = {
    "×": "write * for a product (or @ for a matrix product)", "·": "write * for a product (or @ for a matrix product)",
    "⋅": "write * for a product (or @ for a matrix product)", "÷": "write / for a quotient", "−": "write - (the ASCII minus)",
    "√": "write sqrt(x) for a square root", "≤": "write <=", "≥": "write >=", "≠": "write !=",
}


def _superscript_run(source: str, start: int) -> str:
    end = start
    while end < len(source) and source[end] in _SUPERSCRIPT_DIGITS:
        end += 1
    return source[start:end]


def _token_before(source: str, stuck: Stuck) -> Token | None:
    """The token just before the one the parser stuck at, in its statement."""
    token = stuck.token
    if token is None or stuck.statement < 0:
        return None
    before = None
    for t in tokens(source, stuck.statement):
        if t.start >= token.start:
            break
        before = t
    return before


def _number_before(source: str, stuck: Stuck) -> int:
    """How long the number is that the stuck token makes a complex literal of (`1j`,
    `2.5e3J`): a `j` right after a number; 0 when it is not one."""
    token = stuck.token
    if token is None or token.kind != "NAME" or token not in ("j", "J"):
        return 0
    before = _token_before(source, stuck)
    return before.end - before.start if before is not None and before.kind == "NUMBER" and before.end == token.start else 0
