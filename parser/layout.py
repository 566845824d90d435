"""The layout pass: the one place that says how lines, brackets and indentation make
statements and blocks. It sits between the lexer (lexer.py) and the LALR loop
(driver.py), as Lark's `Indenter` post-lexer does, and gives the loop the tokens the
grammar reads: comments and `\\` continuations dropped, a newline only where it ends a
statement, and `_INDENT` / `_DEDENT` around a block.

The rules, Python's where the language has the construct:

- A newline inside brackets, or right after an operator, a comma or a keyword that needs
  more (`+`, `,`, `if`, `check`, ...), is a blank; elsewhere it ends a statement, as `;`
  does. A `\\` at the end of a line joins the next one. Blank and comment lines are blanks.
- The body of a loop (`for ...:`) or of `with no_grad:` is a block, told to the parser by
  two tokens no text is lexed as: `_INDENT` after the statement's colon and `_DEDENT`
  where the body ends, as Python's tokenizer gives them. The body is the rest of the line
  after the colon (`for i in range(3): a; b`), or, when the colon ends its line, the lines
  after it indented deeper than the statement's own line, up to the first line that is
  not (a `_NL` then separates the block's statement from what follows). A block on one
  line cannot hold a block of lines. Outside blocks indentation means nothing.
- A line indented deeper than the block it is in, or back to a depth no open block has,
  is an error of its own (`Stuck` with a `reason`).

The tokens made here (`_INDENT`, `_DEDENT`, a `_NL` that ends a block) have no text: each
starts and ends where the token before it ends, so a loop's range ends at its body's
last token. Along the way the pass records where each statement starts and ends.

A keyword the parser cannot take where it can take a name is a name (`x.if`); the pass
asks the parser (`keyword_here`) at each keyword, as Lark's contextual lexer asks its
parser's state, because `for` opens a block and `if` continues a line only as keywords.
Read without a parser (statement_end, the REPL's "is the input complete"), a keyword is a
keyword wherever it is.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from . import tables
from .lexer import BAD, BLANKS, BLOCKS, CLOSERS, CONTINUES, END, IGNORED, NEWLINE, OPENERS, PATTERN, RENAMES, SEPARATORS, STOPS, Token

Range = tuple[int, int]  # start and end offsets in the source (end exclusive)
# What the layout pass gives the parser: terminal, the Token (for the terminals a node
# keeps, else None), start, end. A made token (_INDENT, _DEDENT, a block's _NL) has start ==
# end and no Token; so has END alone of the lexed ones.
Lexeme = tuple[str, "Token | None", int, int]
INDENT, DEDENT = "_INDENT", "_DEDENT"
_ON_THE_LINE = -1  # a block that is the rest of its line (else a block's indentation)
# What the pass looks at beyond lexing: keywords, brackets, separators, dropped tokens,
# and the colon that opens a block
_LOOKED_AT = frozenset(RENAMES) | OPENERS | CLOSERS | SEPARATORS | IGNORED | {"COLON"}
KEPT = frozenset(tables.KEPT)  # the terminals a node keeps: these alone are made Tokens

NESTED_ON_THE_LINE = (
    "a block on one line (after for ...: or with no_grad:) cannot hold a block of indented lines; write the outer one as indented lines too"
)
TOO_DEEP = "unexpected indent: this line is indented deeper than the block it is in"
NO_SUCH_BLOCK = "this line's indentation matches no block around it"


class Stuck(Exception):
    """A syntax error, as the parser met it: `token` (None for a character no terminal
    matches, at `position`), the parser's state stack there, where the statement being
    read started (-1: between statements) and the statements read before it. `reason`
    says what is wrong when the table cannot (a line indented where no block is)."""

    def __init__(
        self, position: int, token: Token | None, states: list[int], statement: int, statements: list[Range], reason: str = "",
    ) -> None:
        super().__init__(position)
        self.position, self.token, self.states, self.statement, self.statements = position, token, states, statement, statements
        self.reason = reason


class Layout:
    """One pass over `source`: iterate it for the parser's tokens (`Lexeme`s). While and
    after it runs, `statements` holds where each statement read so far starts and ends
    (outside blocks: a loop is one statement with its body) and `first` where the one
    being read starts (-1 between statements). `keyword_here(keyword, terminal)` says
    whether a keyword is read as one where it stands (None: always).

    The pass reads from offset `start` with `depth` brackets open. For text that need not
    parse (`strict` False: statement_end, the REPL), a character no terminal matches is a
    token of kind BAD, and a line indented where no block is, is read as if it were not.
    Once the pass has ended, `depth`, `previous` and `opened` tell whether the text could
    end where it does (the REPL's "is the input complete").
    """

    __slots__ = ("source", "keyword_here", "start", "strict", "first", "statements", "depth", "previous", "opened")

    def __init__(
        self, source: str, keyword_here: Callable[[str, str], bool] | None = None, start: int = 0, depth: int = 0, strict: bool = True,
    ) -> None:
        self.source, self.keyword_here, self.start, self.strict = source, keyword_here, start, strict
        self.first = -1
        self.statements: list[Range] = []
        self.depth = depth  # brackets open: at the start, and once the pass has ended, at the end
        self.previous = ""  # once the pass has ended: the last token given to the parser
        self.opened = False  # once the pass has ended: whether a block's colon came, and no body after it

    def __iter__(self) -> Iterator[Lexeme]:
        source, keyword_here, statements, strict = self.source, self.keyword_here, self.statements, self.strict
        keywords, looked_at, kept = RENAMES, _LOOKED_AT, KEPT
        depth = self.depth  # open brackets
        previous = ""  # the last token given to the parser
        first = last = -1  # the statement being read: its first token's start, its last token's end
        new_token = str.__new__
        kind: str
        value: Token | None
        # Blocks: those open, innermost last, each _ON_THE_LINE or its indentation (and the
        # indentation of its loop's line); a `for` waiting for its colon; a colon just read
        # (the next token says which block it opens); a colon that ended its line (the next
        # line's indentation opens the block), with that line's indentation.
        blocks: list[int] = []
        heads: list[int] = []
        header = opened = awaiting = False
        header_indent = loop_indent = 0  # the indentation of the line of the loop whose block opens; of the last `for`
        line_start = True
        extra: list[str] = []  # made tokens to give before this one
        for match in PATTERN.finditer(source, self.start):
            group = match.lastgroup
            assert group is not None  # (a match's last group is always a terminal's or a stop's)
            if group in STOPS:  # the end, or a character no terminal matches
                start = match.start(group)  # (after the blanks the match already read)
                if start == len(source):
                    if first >= 0:
                        statements.append((first, last))
                    self.depth, self.previous, self.opened = depth, previous, opened or awaiting
                    for _ in blocks:
                        yield DEDENT, None, last, last
                    yield END, None, start, start
                    return
                if strict:
                    raise Stuck(start, None, [], first, statements)
                kind, end = BAD, start + 1  # (a token like any other, for text that need not parse)
            else:
                kind = group
                start, end = match.span(kind)
            at = start  # where a statement starts, if this token starts one
            if kind in looked_at:
                if kind in keywords:  # a keyword, unless the parser takes only a name here (`x.if`)
                    keyword = keywords[kind].get(source[start:end])
                    if keyword is not None and (keyword_here is None or keyword_here(keyword, kind)):
                        kind = keyword
                        if kind in BLOCKS:
                            header, loop_indent = True, indentation(source, start)
                elif kind in OPENERS:
                    depth += 1
                elif kind in CLOSERS:
                    depth = depth - 1 if depth else 0
                elif kind in IGNORED or (kind == NEWLINE and (depth or previous in CONTINUES)):
                    continue
            if blocks or opened or awaiting or header:  # (only near loops: elsewhere none of this is asked)
                if opened:  # the token after a loop's colon
                    opened = False
                    if kind == NEWLINE:  # the body is the lines indented under the loop
                        if blocks and blocks[-1] == _ON_THE_LINE and strict:
                            raise _stuck(source, kind, start, end, first, statements, NESTED_ON_THE_LINE)
                        awaiting = line_start = True
                        continue
                    blocks.append(_ON_THE_LINE)
                    heads.append(header_indent)
                    extra, line_start = [INDENT], False
                elif kind == NEWLINE:  # (a separating one)
                    if awaiting:  # blank and comment lines before the body's first line
                        continue
                    line_start = True
                    while blocks and blocks[-1] == _ON_THE_LINE:  # a newline ends every block on its line
                        blocks.pop()
                        heads.pop()
                        extra.append(DEDENT)
                elif line_start:  # the first token of a line
                    line_start = False
                    indent = start - source.rfind("\n", 0, start) - 1
                    if awaiting:
                        awaiting = False
                        if indent > header_indent:
                            blocks.append(indent)
                            heads.append(header_indent)
                            extra = [INDENT]
                        # else the parser, wanting _INDENT, says that a block is expected here
                    elif blocks and indent > blocks[-1]:
                        if strict:  # (else read as a line of the block)
                            raise _stuck(source, kind, start, end, first, statements, TOO_DEEP)
                    elif blocks and indent < blocks[-1]:
                        while blocks and blocks[-1] > indent:
                            blocks.pop()
                            extra.append(DEDENT)
                            if indent > heads.pop() and (not blocks or indent != blocks[-1]) and strict:
                                raise _stuck(source, kind, start, end, first, statements, NO_SUCH_BLOCK)
                        extra.append(NEWLINE)  # the loop has ended: a separator before what follows
                        if not blocks:
                            statements.append((first, last))
                            first = self.first = -1
                if kind == "COLON" and header and depth == 0:
                    header, opened, header_indent = False, True, loop_indent
            if depth == 0 and kind in SEPARATORS and not blocks:
                if first >= 0:
                    statements.append((first, last))
                first = self.first = at = -1
            if first < 0:
                first = self.first = at
            # The made tokens go first, all where the token before them ends (`last`, not
            # yet moved on); a syntax error among them is reported at the token after them.
            if extra:
                for made in extra:
                    yield made, None, last, last
                extra = []
            if kind not in SEPARATORS:
                last = end
            previous = kind
            if kind in kept:
                value = new_token(Token, source[start:end])
                value.kind, value.start, value.end = kind, start, end
            else:
                value = None
            yield kind, value, start, end
        raise AssertionError("the lexer's pattern ends every source with its end")  # pragma: no cover


def _stuck(source: str, kind: str, start: int, end: int, first: int, statements: list[Range], reason: str) -> Stuck:
    """Stuck, for `reason`, at the token `kind` from `start` to `end`."""
    made = str.__new__(Token, source[start:end])
    made.kind, made.start, made.end = kind, start, end
    return Stuck(start, made, [], first, statements, reason)


def indentation(source: str, offset: int) -> int:
    """How many blanks begin the line that holds `offset`."""
    line = source.rfind("\n", 0, offset) + 1
    blanks = BLANKS.match(source, line)
    assert blanks is not None  # (blanks may be none at all: it always matches)
    return blanks.end() - line
