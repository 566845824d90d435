"""Source text to a Lark parse tree, with readable errors.

The LALR parser is Lark's stand-alone parser generated from grammar.lark (see
generate.py): a fresh process loads its tables without importing Lark or analysing the
grammar. It is built once per process and reused.
"""
from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from .errors import LanguageError
from .standalone import Lark_StandAlone, Token, Tree, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

__all__ = ["Token", "Tree", "describe_expected", "lark_parser", "parse_tree"]
_OPENERS = {"LPAR", "LSQB"}
_CLOSERS = {"RPAR", "RSQB"}


class _BracketNewlines:
    """Post-lexer: a newline inside brackets is whitespace, elsewhere it ends a statement."""

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        for token in stream:
            if token.type in _OPENERS:
                depth += 1
            elif token.type in _CLOSERS:
                depth = max(depth - 1, 0)
            elif token.type == "_NL" and depth:
                continue
            yield token


@lru_cache(maxsize=1)
def lark_parser() -> Any:
    return Lark_StandAlone(postlex=_BracketNewlines())


_READABLE = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "_NL": "end of line",
    "$END": "end of input", "COMPARE": "a comparison", "AUGOP": "'+=', '-=', '*=' or '/='", "POW": "'**'",
}
_EXPRESSION_STARTS = {"NAME", "NUMBER", "LPAR", "LSQB", "MINUS"}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "AT", "POW", "COMPARE", "DOT", "LSQB", "IF"}


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
    try:
        return lark_parser().parse(source)
    except UnexpectedInput as err:
        raise _syntax_error(source, err) from None


def _syntax_error(source: str, err: UnexpectedInput) -> LanguageError:
    if isinstance(err, UnexpectedCharacters):
        char = source[err.pos_in_stream] if err.pos_in_stream < len(source) else "?"
        message = f"unexpected character {char!r}"
        if char in "'\"":
            message = "unterminated string"
        return LanguageError("syntax", message, err.line, err.column, err.line, err.column + 1)
    if isinstance(err, UnexpectedEOF):
        line, column = _end_position(source)
        return LanguageError("incomplete", f"unfinished input: expected {describe_expected(set(err.expected))}", line, column)
    assert isinstance(err, UnexpectedToken)
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
    width = max(len(str(token.value)), 1) if token.type != "_NL" else 1
    return LanguageError(
        "syntax", f"expected {expected}, found {_found(token)}", token.line, token.column, token.end_line or token.line,
        (token.column or 1) + width,
    )


def _end_position(source: str) -> tuple[int, int]:
    text = source.rstrip()
    lines = text.split("\n") if text else [""]
    return len(lines), len(lines[-1]) + 1
