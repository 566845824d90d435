"""The language's one error type: a kind, a message and the place in the source."""
from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .compiler import UserFunction

Span = tuple[int, int, int, int]  # line, column, end line, end column (1-based; end exclusive)


class ErrorKind(StrEnum):
    """The kinds of error the JSON contract documents (docs/cli.md): a closed set, so a
    misspelt kind at a raise site fails where it is made, not in a consumer's `if`.
    A StrEnum, so a kind compares equal to its word and is written as it."""

    SYNTAX = "syntax"
    INCOMPLETE = "incomplete"  # the input stopped early: the REPL asks for another line
    NAME = "name"
    SHAPE = "shape"
    ARGUMENT = "argument"
    SIZE = "size"
    VALUE = "value"
    RECURSION = "recursion"
    SAFETY = "safety"
    FILE = "file"
    STEPS = "steps"  # the budgets (--max-steps, --max-seconds, --max-memory)
    TIME = "time"
    MEMORY = "memory"
    USAGE = "usage"  # a wrong option on the command line
    INTERNAL = "internal"  # a bug of gradcalc's, said as one


class LanguageError(Exception):
    """Anything wrong with user input: its ErrorKind, a message and its place."""

    def __init__(
        self, kind: ErrorKind | str, message: str, line: int | None = None, column: int | None = None, end_line: int | None = None,
        end_column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = ErrorKind(kind)  # (an unknown word raises ValueError here, at the raise site)
        self.message = message
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column
        # When the place is in the body of a user function: its name, and the source its
        # `def` was compiled from (in a REPL, an earlier input, not the one that failed).
        self.function: str | None = None
        self.source: str | None = None

    def __repr__(self) -> str:
        return f"LanguageError({self.kind!r}, {self.message!r}, line={self.line}, column={self.column})"

    def __str__(self) -> str:
        return self.message

    @property
    def incomplete(self) -> bool:
        """True when the input stopped early (an open bracket, a trailing operator)."""
        return self.kind == "incomplete"

    def at(self, span: Span | None, function: UserFunction | None = None) -> LanguageError:
        """This error placed at `span` unless it already has a place; `function` is the
        user function whose body `span` is in, if any."""
        if span is not None and self.line is None:
            self.line, self.column, self.end_line, self.end_column = span
            if function is not None:
                self.function, self.source = function.name, function.source
        return self

    def located(self) -> str:
        where = f"line {self.line}, column {self.column}: " if self.line is not None else ""
        return f"{where}{self.message}"

    def as_dict(self) -> dict[str, object]:
        place: dict[str, object] = {"kind": self.kind, "message": self.message, "line": self.line, "column": self.column}
        return place if self.function is None else {**place, "function": self.function}


def place_of(text: bytes | str, offset: int) -> tuple[int, int]:
    """(line, column), from 1, of the character or byte at `offset` of `text`."""
    newline = b"\n" if isinstance(text, bytes) else "\n"
    line = text.count(newline, 0, offset) + 1  # type: ignore[arg-type]  # bytes with bytes, str with str
    return line, offset - text.rfind(newline, 0, offset)  # type: ignore[arg-type]


FLOAT64_RANGE = "a float64 holds at most about 1.8e308"


def too_large(what: str) -> str:
    """The words for a whole number that does not fit a float64 (Python's own are "int too
    large to convert to float")."""
    return f"{what} is too large for a float64 ({FLOAT64_RANGE}; 1e400 written so is inf)"

