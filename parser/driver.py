"""The parser: grammar.lark's LALR(1) tables (tables.py, written by generate.py), read by
a loop of our own. It is the only parser gradcalc runs.

Per token the loop does only what the result needs: one regular expression match (the
token and the blanks before it, lexer.py), a Token only for the terminals a node keeps,
and for each reduction the node its rule builds (`Node`, with where it starts and ends).
A rule like `?sum: product` passes its only child on: the loop does not reduce it, it
only moves to the state after it (a reduction's goto and the chain of such rules after
it are one cached lookup).

The newline rule of the grammar ("a newline inside brackets or after an operator is a
blank, elsewhere it ends a statement") is applied here, as the tokens come, and so is the
record of where each statement starts and ends.

A keyword the parser cannot take where it can take a name is a name (`x.if`, `x = if`:
the compiler then says a keyword cannot be a name). A keyword run into a word is not
split off it (`x ifa else b` is the name `ifa`, which the parser refuses).

The body of a loop (`for ...:`) or of `with no_grad:` is a block, told to the parser by
two tokens no text is lexed as: `_INDENT` after the statement's colon and `_DEDENT` where
the body ends, as Python's tokenizer gives them. The body is the rest of the line after
the colon (`for i in range(3): a; b`), or, when the colon ends its line, the lines after
it indented deeper than the statement's own line, up to the first line that is not (a
`_NL` then separates the block's statement from what follows). Outside blocks
indentation means nothing, as before.

When the source has a syntax error, `parse` raises `Stuck` with what the table says
there (the state stack, from which `accepted` reads the terminals that could come
next); syntax.py words the message.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import tables
from .lexer import BLANKS, BLOCKS, CLOSERS, CONTINUES, END, IGNORED, NEWLINE, OPENERS, PATTERN, RENAMES, SEPARATORS, STOPS, Token, token

Range = tuple[int, int]  # start and end offsets in the source (end exclusive)


class Node:
    """A node of the parse tree: its kind (the rule or its alias: add, call, assign, ...),
    its children (Nodes, Tokens, None for a left-out `[x]`) and where it starts and ends
    in the source: from its rule's first symbol to its last, so brackets and signs the
    tree does not keep are in (`f(x)`, `-x`; in `(a + b) * c` the product starts at
    "("). A rule that only passes its child on (`"(" expr ")"`) leaves the child's range
    as it was: the sum is `a + b`."""

    __slots__ = ("kind", "children", "start", "end")

    def __init__(self, kind: str, children: list[Any], start: int, end: int) -> None:
        self.kind, self.children, self.start, self.end = kind, children, start, end

    def __repr__(self) -> str:
        return f"Node({self.kind!r}, {self.children!r}, {self.start}, {self.end})"


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


# state -> {symbol: s >= 0 shift (or go) to state s, ~r reduce by rule r}
ACTIONS: tuple[dict[str, int], ...] = tuple(dict(zip(symbols.split(), map(int, actions.split()))) for symbols, actions in tables.ACTIONS)


def _rule(text: str) -> tuple[int, str, str, Any, Any]:
    """size, the name of the goto, shape ("unit", "child", "slice", "build"), kind and
    argument (generate._rule), from tables.py's line of text."""
    size, name, shape, kind, arg = text.split(" ")
    steps = [None if step == "-" else int(step) for step in arg.split(",")] if arg else []
    if shape == "slice":
        return int(size), name, shape, kind, slice(*steps)
    return int(size), name, shape, None if kind == "-" else kind, steps[0] if shape in ("unit", "child") else tuple(steps)


RULES = [_rule(text) for text in tables.RULES]
# A statement that starts with two names is a derivative rule (`vjp f(x, g) = ...`); the
# grammar cannot say that the first must be `vjp` without making it a keyword, so the
# parser refuses the second name of `sin x` here, where it is wrong, rather than waiting
# for a '(' that would make `sin x` look unfinished. (The state after a statement's first
# name, and after its second.)
AFTER_STATEMENT_NAME = ACTIONS[tables.START_STATE]["NAME"]
_RULE_NAMED = ACTIONS[AFTER_STATEMENT_NAME]["NAME"]
RULE_WORD = "vjp"
KEPT = frozenset(tables.KEPT)
# What the loop looks at beyond the parser's own work: keywords, brackets, separators,
# dropped tokens, and the colon that opens a block
_LOOKED_AT = frozenset(RENAMES) | OPENERS | CLOSERS | SEPARATORS | IGNORED | {"COLON"}
INDENT, DEDENT = "_INDENT", "_DEDENT"
_ON_THE_LINE = -1  # a block that is the rest of its line (else a block's indentation)
# (state below, state, terminal) -> the state after every unit reduction that terminal
# leads to; (state below, rule name, terminal) -> the state after the goto on that rule
# and the unit reductions after it. Filled as met.
_UNITS: dict[tuple[int, int, str], int] = {}
_GOTOS: dict[tuple[int, str, str], int] = {}


def parse(source: str) -> tuple[Node, list[Range]]:
    """The parse tree of `source` and where each statement starts and ends; raises Stuck
    at a syntax error."""
    actions, rules, kept, keywords, units, gotos = ACTIONS, RULES, KEPT, RENAMES, _UNITS, _GOTOS
    end_state = tables.END_STATE
    state = tables.START_STATE
    states = [state]  # the parser's state stack and value stack
    values: list[Any] = []
    starts: list[int] = []  # where each value starts (beside the value stack)
    shifted = 0  # where the last token given to the parser ends: where a reduction's range ends
    statements: list[Range] = []
    depth = 0  # open brackets
    previous = ""  # the last token given to the parser
    first = last = -1  # the statement being read: its first token's start, its last token's end
    end = 0
    looked_at = _LOOKED_AT
    new_token = str.__new__
    kind: Any  # a terminal's name (a match's last group is always a terminal's)
    # Blocks (see the module's docstring): those open, innermost last, each _ON_THE_LINE
    # or its indentation; a `for` waiting for its colon; a colon just read (the next token
    # says which block it opens); a colon that ended its line (the next line's indentation
    # opens the block), with that line's indentation; a separating newline just read.
    blocks: list[int] = []
    heads: list[int] = []  # the indentation of each open block's loop
    header = opened = awaiting = False
    header_indent = loop_indent = 0  # the indentation of the line of the loop whose block opens; of the last `for`
    line_start = True
    extra: list[tuple[str, int]] = []  # tokens no text is lexed as, to give before this one
    for match in PATTERN.finditer(source):
        if match.lastgroup in STOPS:  # the end, or a character no terminal matches
            bad = match.start(match.lastgroup)  # (after the blanks the match already read)
            if bad != len(source):
                raise Stuck(bad, None, states, first, statements)
            if first >= 0:
                statements.append((first, last))
            kind, value, start = END, None, len(source)
            if blocks:
                extra = [(DEDENT, last)] * len(blocks)
                blocks = heads = []
        else:
            kind = match.lastgroup
            start, end = match.span(kind)
            at = start  # where a statement starts, if this token starts one
            if kind in looked_at:
                if kind in keywords:  # a keyword, unless the parser takes only a name here (`x.if`)
                    keyword = keywords[kind].get(source[start:end])
                    if keyword is not None and (keyword in actions[state] or kind not in actions[state]):
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
                        if blocks and blocks[-1] == _ON_THE_LINE:
                            raise _stuck(source, kind, start, end, states, first, statements, _NESTED_ON_THE_LINE)
                        awaiting = line_start = True
                        continue
                    blocks.append(_ON_THE_LINE)
                    heads.append(header_indent)
                    extra, line_start = [(INDENT, last)], False
                elif kind == NEWLINE:  # (a separating one)
                    if awaiting:  # blank and comment lines before the body's first line
                        continue
                    line_start = True
                    while blocks and blocks[-1] == _ON_THE_LINE:  # a newline ends every block on its line
                        blocks.pop()
                        heads.pop()
                        extra.append((DEDENT, last))
                elif line_start:  # the first token of a line
                    line_start = False
                    indent = start - source.rfind("\n", 0, start) - 1
                    if awaiting:
                        awaiting = False
                        if indent > header_indent:
                            blocks.append(indent)
                            heads.append(header_indent)
                            extra = [(INDENT, last)]
                        # else the parser, wanting _INDENT, says that a block is expected here
                    elif blocks and indent != blocks[-1]:
                        if indent > blocks[-1]:
                            raise _stuck(source, kind, start, end, states, first, statements, _TOO_DEEP)
                        while blocks and blocks[-1] > indent:
                            blocks.pop()
                            extra.append((DEDENT, last))
                            if indent > heads.pop() and (not blocks or indent != blocks[-1]):
                                raise _stuck(source, kind, start, end, states, first, statements, _NO_SUCH_BLOCK)
                        extra.append((NEWLINE, last))  # the loop has ended: a separator before what follows
                        if not blocks:
                            statements.append((first, last))
                            first = -1
                if kind == "COLON" and header and depth == 0:
                    header, opened, header_indent = False, True, loop_indent
            if depth == 0 and kind in SEPARATORS and not blocks:
                if first >= 0:
                    statements.append((first, last))
                first = at = -1
            if first < 0:
                first = at
            if kind not in SEPARATORS:
                last = end
            previous = kind
            if kind in kept:
                value = new_token(Token, source[start:end])
                value.kind, value.start, value.end = kind, start, end
            else:
                value = None
        # The tokens no text is lexed as (_INDENT, _DEDENT, a separating _NL) go first, all
        # at the end of the token before them (so a loop's range ends at its body's last
        # token); a syntax error among them is reported at the token that follows them.
        feed: Sequence[tuple[str, Token | None, int, int]]
        if extra:
            shifted = extra[0][1]
            feed = [(made, None, at, at) for made, at in extra]
            feed.append((kind, value, start, end))
            extra = []
        else:
            feed = ((kind, value, start, end),)
        for fed, fed_value, fed_start, fed_end in feed:
            while True:  # feed the token: reduce until it can be shifted
                action = actions[state].get(fed)
                if action is None:
                    raise _stuck(source, kind, start, end, states, first, statements, value=value)
                if action >= 0:
                    if action == _RULE_NAMED and values[-1] != RULE_WORD:
                        raise _stuck(source, kind, start, end, states, first, statements, value=value)
                    state = action
                    states.append(state)
                    values.append(fed_value)
                    starts.append(fed_start)
                    shifted = fed_end
                    break
                size, name, shape, kind_of, arg = rules[~action]
                if shape == "unit":  # `?sum: product`: the value stays, only the state moves on
                    # (met here only after a shift: a reduction's goto follows these rules itself)
                    unit = (states[-2], state, fed)
                    after = units.get(unit)
                    if after is None:
                        after = units[unit] = _after_units(states[-2], state, fed)
                    state = states[-1] = after
                    continue
                if not size:  # an empty rule: it starts and ends where it is
                    begin = shifted
                    value_of = _built(kind_of, arg, [], 0, begin, shifted) if shape == "build" else Node(kind_of, [], begin, shifted)
                else:
                    begin = starts[-size]
                    if shape == "slice":
                        value_of = Node(kind_of, values[arg], begin, shifted)
                    elif shape == "child":  # `"(" expr ")"`: the expression keeps its own range
                        value_of = values[arg - size]
                    else:
                        value_of = _built(kind_of, arg, values, len(values) - size, begin, shifted)
                    del values[-size:], states[-size:], starts[-size:]
                values.append(value_of)
                starts.append(begin)
                below = states[-1]
                goto = (below, name, fed)
                next_state = gotos.get(goto)
                if next_state is None:
                    next_state = actions[below][name]
                    if next_state != end_state or fed is not END:  # (parsing stops at the end state)
                        next_state = _after_units(below, next_state, fed)
                    gotos[goto] = next_state
                state = next_state
                states.append(state)
                if state == end_state and fed is END:
                    return values[-1], statements
    raise AssertionError("the parser read past the end of its input")  # pragma: no cover - END always ends it


_NESTED_ON_THE_LINE = "a block on one line (after for ...: or with no_grad:) cannot hold a block of indented lines; write the outer one as indented lines too"
_TOO_DEEP = "unexpected indent: this line is indented deeper than the block it is in"
_NO_SUCH_BLOCK = "this line's indentation matches no block around it"


def _stuck(
    source: str, kind: str, start: int, end: int, states: list[int], first: int, statements: list[Range], reason: str = "",
    value: Token | None = None,
) -> Stuck:
    """Stuck at the token `kind` from `start` to `end` (`value`, when it was made already)."""
    if value is None:
        value = token(kind, "", start, start) if kind is END else token(kind, source[start:end], start, end)
    return Stuck(start, value, states, first, statements, reason)


def indentation(source: str, offset: int) -> int:
    """How many blanks begin the line that holds `offset`."""
    line = source.rfind("\n", 0, offset) + 1
    blanks = BLANKS.match(source, line)
    assert blanks is not None  # (blanks may be none at all: it always matches)
    return blanks.end() - line


def _built(kind: str | None, steps: tuple[int | None, ...], values: list[Any], base: int, start: int, end: int) -> Any:
    """A node from the values from `base` on, as `steps` pick them (generate._rule): i >= 0
    value i, ~i the children of value i (a `_rule`'s list), None a left-out `[x]`. A kind
    of None is a `_rule`: its value is the list itself."""
    children: list[Any] = []
    for step in steps:
        if step is None:
            children.append(None)
        elif step >= 0:
            children.append(values[base + step])
        elif children:
            children += values[base + ~step]
        else:  # the list of a left-recursive `_rule` grows in place (a copy per item is quadratic)
            children = values[base + ~step]
    return children if kind is None else Node(kind, children, start, end)


def _after_units(below: int, state: int, kind: str) -> int:
    """The state reached from `state` (with `below` under it) by reducing unit rules while
    `kind` is the next token: each one only replaces the top state with the goto from
    `below`, so the whole chain depends on these three alone."""
    while True:
        action = ACTIONS[state].get(kind)
        if action is None or action >= 0 or RULES[~action][2] != "unit":
            return state
        state = ACTIONS[below][RULES[~action][1]]


def accepted(states: list[int]) -> set[str]:
    """The terminals the parser could take next with this state stack: those for which
    the table has an action that, after its reductions, shifts (or ends the input)."""
    return {symbol for symbol in ACTIONS[states[-1]] if symbol.isupper() and _takes(list(states), symbol)}


def _takes(states: list[int], terminal: str) -> bool:
    while True:
        action = ACTIONS[states[-1]].get(terminal)
        if action is None:
            return False
        if action >= 0:
            return True
        size, name = RULES[~action][:2]
        if size:
            del states[-size:]
        states.append(ACTIONS[states[-1]][name])
        if terminal == END and states[-1] == tables.END_STATE:
            return True
