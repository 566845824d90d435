"""The language's one lexer: grammar.lark's terminals (tables.py) as one regular expression.

The layout pass (layout.py, and through it the parser, the REPL's "does this line
continue" and statement splitting for text that does not parse), the REPL's colouring
and completion all read tokens from here, with the same terminals, keywords and token
sets.

Each match of `PATTERN` is the blanks before a token, then the token (a named group per
terminal). Comments and line continuations are tokens too (the layout pass drops them:
they may hold a newline, which is counted). A keyword is lexed as a NAME and then renamed, as
Lark's lexer does; the parser reads one as a name where it can take only a name (`x.if`).
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from . import tables


class Token(str):
    """A token: its text, its terminal (`kind`: NAME, NUMBER, PLUS, ...) and where it
    starts and ends in the source (offsets, the end exclusive)."""

    kind: str
    start: int
    end: int

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {str(self)!r}, {self.start}, {self.end})"


def token(kind: str, text: str, start: int, end: int) -> Token:
    made = str.__new__(Token, text)
    made.kind, made.start, made.end = kind, start, end
    return made


# Atomic (a lookahead is never re-entered): `(?:[ \t]+)*` before a token that does not
# match would otherwise try every split of a run of spaces, 2^n of them.
_BLANKS = f"(?=(?P<_blanks>(?:{tables.BLANK})*))(?P=_blanks)"
# After the terminals, a character none of them matches and the end: every position
# matches something. Where nothing matched, the parser's finditer would search on from
# the next position, and from each blank of a run that no token follows re-read the rest
# of the run: quadratic in trailing spaces. (One pattern: compiling it is 1% of start-up.)
_TERMINALS = "|".join(f"(?P<{name}>{regexp})" for name, regexp in tables.TERMINALS)
PATTERN = re.compile(_BLANKS + "(?:" + _TERMINALS + r"|(?P<_BAD>[\s\S])|(?P<_END>\Z))")
STOPS = frozenset({"_BAD", "_END"})  # PATTERN's groups that are no token
BLANKS = re.compile(_BLANKS)

RENAMES: dict[str, dict[str, str]] = tables.KEYWORDS  # terminal -> {text: keyword terminal} (NAME -> {"if": "IF", ...})
# The language's keywords as written (from grammar.lark): the only list of them.
KEYWORDS = frozenset(text for texts in RENAMES.values() for text in texts)
IGNORED = frozenset(tables.IGNORED)  # lexed, then dropped by the parser
NEWLINE = "_NL"
END = "$END"
BAD = "BAD"  # what `tokens` calls a character no terminal matches

# What the layout pass's newline rule looks at: a newline inside brackets is a blank...
OPENERS = frozenset({"LPAR", "LSQB"})
CLOSERS = frozenset({"RPAR", "RSQB"})
# ...and so is a newline right after one of these: the statement cannot end there.
CONTINUES = frozenset({
    "PLUS", "MINUS", "STAR", "SLASH", "_FLOORDIV", "PERCENT", "AT", "POW", "COMPARE", "AUGOP", "EQUAL", "COMMA", "DOT",
    "IF", "ELSE", "CHECK", "DEF", "WRT",
})
SEPARATORS = frozenset({NEWLINE, "SEMICOLON"})  # outside brackets, these end a statement
BLOCKS = frozenset({"FOR", "WITH"})  # the keywords of the statements whose colon opens a block
NUMBERS = frozenset({"NUMBER"})
STRINGS = frozenset({"STRING"})
COMMENTS = frozenset({"COMMENT"})
NAMES = frozenset(RENAMES)  # the terminals keywords are read as (NAME)


_NAME = re.compile(dict(tables.TERMINALS)["NAME"])


def is_name(text: str) -> bool:
    """Whether `text`, whole, is a name the language reads (grammar.lark's NAME, ASCII, not a
    keyword): what a binding on the command line or a data file's member may be called.
    (str.isidentifier also takes names the language cannot read back: é, ñ.)"""
    return _NAME.fullmatch(text) is not None and text not in KEYWORDS


def tokens(text: str, start: int = 0) -> Iterator[Token]:
    """Every token of `text` from `start` on, comments and continuations included, read
    without the parser: a keyword is its keyword terminal wherever it is. A character no
    terminal matches is one token of kind BAD, and lexing goes on after it."""
    at, n = start, len(text)
    while at < n:
        match = PATTERN.match(text, at)
        assert match is not None  # (it matches everywhere: a stray character, or the end)
        kind = match.lastgroup or BAD
        if kind == "_END":
            return
        begin, at = match.span(kind)
        if kind == "_BAD":
            yield token(BAD, text[begin], begin, at)
            continue
        word = text[begin:at]
        kind = RENAMES.get(kind, {}).get(word, kind)
        yield token(kind, word, begin, at)
