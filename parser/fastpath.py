"""The fast path of parsing: Lark's own LALR tables, read by a loop of our own.

Why it exists: parsing with Lark's runtime costs one generator hop, two regular
expression matches (a token and the blank before it) and a Token with line and column per
token, and eight callbacks per operand on its way up the precedence levels. A program of
100 kB parsed at half the speed of a bare four-rule Lark calculator (issue 15). This loop
reads the same tables and builds the same tree, doing per token only what the result
needs. It is not a second parser: it only accepts what Lark's parser accepts, and builds
exactly Lark's tree (tests/test_parser_fastpath.py compares the two).

What it reads from the generated parser (parser/standalone.py, built from grammar.lark;
the tables are read once, by generate.py, and pickled in prebuilt.py, so a parse needs
only larktree.py's trees, tokens and callbacks):

- the terminals, made into one regular expression whose every match is one token with
  the spaces before it (Lark ignores them; comments and line continuations, which Lark ignores
  too, are matched as tokens and skipped, so that lines can be counted). The terminals
  are tried in Lark's order, except that common ones come first where that cannot change
  which one matches (`_quick_order`);
- the keywords that Lark's lexer lexes as NAME and then renames (its "unless" callback);
- the LALR(1) table (`parse_table.states`: for a state and a terminal, shift to a state or
  reduce by a rule; for a state and a rule's name, the state after it);
- the tree-building callback of each rule, so every node is made as Lark makes it. A
  rule like `?sum: product` returns its only child unchanged; the loop skips its call and
  only moves to the next state (the goto after a reduction and the chain of such rules
  after it are one cached lookup). A callback that only picks some children into a Tree
  (`sum "+" product -> add` keeps the first and the third) is read once, and the loop
  makes that Tree from a slice of its value stack; any other callback is called.

The post-lexer of syntax.py (a newline inside brackets or after an operator is a blank,
elsewhere it ends a statement; where each statement starts and ends) is done in the loop,
and so is what Lark's parser does not do without doubling its time: each node is given
where it starts and ends in the source (see `parse`), for the compiler's error places.

When anything is unexpected (a character no terminal matches, a token the table has no
action for) it gives up and returns None: the caller parses again with Lark's parser,
which reports the error exactly as it always did. So every error message comes from one
place. Lark's lexer is contextual (it tries only the terminals the parser can take next);
this one is not, and the two only differ where the context-free token is not one the
parser can take next. A keyword the parser cannot take where it can take a name is a
name, as in Lark (`x.if`, `x = if`: the compiler then refuses the name); anywhere else
the fast path gives up (`1 iffy else 2`, which Lark's lexer reads as `1 if fy else 2`).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache, partial
from typing import Any

from .larktree import ChildFilterLALR_NoPlaceholders, ExpandSingleChild, Token, Tree
from .records import Record

Range = tuple[int, int]  # start and end offsets in the source (end exclusive)

# What the post-lexer looks at (syntax.py's _BracketNewlines reads these too).
OPENERS = frozenset({"LPAR", "LSQB"})
CLOSERS = frozenset({"RPAR", "RSQB"})
# A newline right after one of these continues the statement: the line cannot end there.
CONTINUES = frozenset({
    "PLUS", "MINUS", "STAR", "SLASH", "_FLOORDIV", "PERCENT", "AT", "POW", "COMPARE", "AUGOP", "EQUAL", "COMMA", "DOT", "IF", "ELSE",
    "CHECK", "DEF", "WRT",
})
SEPARATORS = frozenset({"_NL", "SEMICOLON"})
NEWLINE = "_NL"


class _Tables(Record):
    tokens: re.Pattern[str]  # blanks, then one token (a named group per terminal)
    blank: re.Pattern[str]  # blanks alone: what may follow the last token
    multiline: frozenset[str]  # ignored terminals that hold a newline: matched as tokens, then skipped
    keywords: dict[str, dict[str, str]]  # terminal -> {text: keyword terminal} (NAME -> {"if": "IF", ...})
    kept: frozenset[str]  # terminals some rule keeps in the tree (the others are never looked at)
    post_lexed: frozenset[str]  # terminals the post-lexer looks at (keywords, brackets, newlines, separators)
    actions: dict[int, dict[str, int]]  # state -> symbol -> shift to state s (s >= 0) or reduce rule r (~r)
    # size, name, callback (None: the child), and when the callback only makes
    # `Tree(name, some children)`: that name and the slice of the value stack it takes
    rules: list[tuple[int, str, Callable[[list[Any]], Any] | None, tuple[str, slice] | None]]
    start: int
    end: int
    # (state below, state, terminal) -> the state after every unit reduction that
    # terminal leads to: a chain of `?rule: one_symbol` rules is one lookup (filled as met)
    units: dict[tuple[int, int, str], int]
    # (state below, rule name, terminal) -> the state after the goto on that rule and then
    # the unit reductions: a reduction and the chain after it, one lookup (filled as met)
    gotos: dict[tuple[int, str, str], int]
    __slots__ = tuple(__annotations__)  # a plain record: importing dataclasses cost start-up time

    def __init__(self, **fields: Any) -> None:
        fields.setdefault("units", {})
        fields.setdefault("gotos", {})
        for name in self.__slots__:
            setattr(self, name, fields.pop(name))
        if fields:
            raise TypeError(f"_Tables: unknown fields {sorted(fields)}")


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    """The tables, once per process: unpickled from prebuilt.py (generate.py builds them
    there with build_tables, with the caches of a few parses filled), so a one-line
    command neither loads Lark's parser nor reads its tables; built here when
    prebuilt.py is missing."""
    try:
        from .prebuilt import TABLES
    except ImportError:  # not generated (yet)
        from .syntax import lark_parser

        return build_tables(lark_parser())
    import pickle
    import zlib

    return pickle.loads(zlib.decompress(TABLES))


def build_tables(lark: Any) -> _Tables:
    """The fast path's tables, read from `lark` (the parser syntax.lark_parser() gives)."""
    from .standalone import BasicLexer, PatternStr, Rule, Shift, _create_unless, _regexp_has_newline

    conf = lark.lexer_conf
    # Lark's order, keywords taken out (they lex as NAME, then are renamed), as BasicLexer's
    # scanner has them (without building that scanner: its regular expression goes unused).
    lexer = BasicLexer(conf)
    terminals, renames = _create_unless(lexer.terminals, conf.g_regex_flags, lexer.re, conf.use_bytes)
    if conf.callbacks:
        raise RuntimeError("fastpath: the lexer has callbacks; the loop does not call them")
    keywords = {name: {t.pattern.value: t.name for t in callback.scanner.terminals} for name, callback in renames.items()}
    if any(not isinstance(t.pattern, PatternStr) for callback in renames.values() for t in callback.scanner.terminals):
        raise RuntimeError("fastpath: Lark renames a token to a terminal that is not a fixed string")
    # Lark matches an ignored terminal like any other and drops it. Here the blanks are
    # matched in front of each token: the same split as long as no token starts with a
    # character that starts a blank (space, tab, form feed), which holds for grammar.lark.
    # Blanks that may hold a newline (by Lark's own test) stay tokens, so lines can be counted.
    multiline = frozenset(t.name for t in terminals if t.name in conf.ignore and _regexp_has_newline(t.pattern.to_regexp()))
    blanks = "|".join(t.pattern.to_regexp() for t in terminals if t.name in conf.ignore and t.name not in multiline)
    matched = [t for t in terminals if t.name not in conf.ignore or t.name in multiline]
    if not conf.g_regex_flags:
        matched = _quick_order(matched)
    alternatives = _alternation(matched)
    # Atomic (a lookahead is never re-entered): `(?:[ \t]+)*` before a token that does not
    # match would otherwise try every split of a run of spaces, 2^n of them.
    blank = f"(?=(?P<_blanks>(?:{blanks})*))(?P=_blanks)"

    frontend = lark.parser
    table = frontend.parser._parse_table
    callbacks: dict[Any, Callable[[list[Any]], Any]] = frontend.parser.parser.callbacks
    if any(not isinstance(key, Rule) for key in callbacks):
        raise RuntimeError("fastpath: the parser has callbacks for tokens; the loop does not call them")
    index = {rule: i for i, rule in enumerate(callbacks)}
    rules = []
    for rule, callback in callbacks.items():
        unit = isinstance(callback, ExpandSingleChild) and len(rule.expansion) == 1  # returns its only child
        size = len(rule.expansion)
        rules.append((size, rule.origin.name, None if unit else callback, None if unit else _plain_node(callback, size)))
    actions = {
        state: {symbol: arg if action == Shift else ~index[arg] for symbol, (action, arg) in row.items()}
        for state, row in table.states.items()
    }
    kept = frozenset(
        symbol.name for rule in callbacks for symbol in rule.expansion
        if symbol.is_term and (rule.options.keep_all_tokens or not symbol.filter_out)
    )
    return _Tables(
        tokens=re.compile(f"{blank}(?:{alternatives})", conf.g_regex_flags), blank=re.compile(blank, conf.g_regex_flags),
        multiline=multiline, keywords=keywords, kept=kept,
        post_lexed=frozenset(keywords) | OPENERS | CLOSERS | SEPARATORS | multiline, actions=actions, rules=rules,
        start=table.start_states["program"], end=table.end_states["program"],
    )


def _plain_node(callback: Callable[[list[Any]], Any], size: int) -> tuple[str, slice] | None:
    """When all `callback` does is `Tree(name, some of the rule's children)`, and those
    children are evenly spaced (`sum "+" product`: the first and third): the name and
    the slice of the value stack that holds them; else None. Read from Lark's own
    callback, so the loop builds the same node without the calls through ChildFilter."""
    picks = list(range(size))
    if isinstance(callback, ChildFilterLALR_NoPlaceholders):
        if any(expand for _, expand in callback.to_include):  # `_rule` children are spliced in
            return None
        picks = [i for i, _ in callback.to_include]
        callback = callback.node_builder
    steps = {b - a for a, b in zip(picks, picks[1:])}
    plain = isinstance(callback, partial) and callback.func is Tree and len(callback.args) == 1 and not callback.keywords
    if not isinstance(callback, partial) or not plain or not picks or len(steps) > 1:
        return None
    stop = picks[-1] - size + 1
    return callback.args[0], slice(picks[0] - size, stop or None, steps.pop() if steps else 1)


def _alternation(terminals: list[Any]) -> str:
    """One regular expression for `terminals`, tried in this order, a named group each."""
    return "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terminals)


# Terminals tried first when nothing forbids it, commonest first (by their counts in the
# examples and docs, and in long expressions): trying the alternatives in Lark's order
# (longest pattern first) took twice as long.
_COMMON = ("NAME", "LPAR", "RPAR", "COMMA", "NUMBER", "PLUS", "MINUS", "STAR", "SLASH", "_NL", "EQUAL", "LSQB", "RSQB", "DOT")


def _quick_order(terminals: list[Any]) -> list[Any]:
    """`terminals` (Lark's order) in an order that lexes the same, common ones first.

    A regular expression of alternatives takes the first one that matches. Two terminals
    that can begin with the same character keep their order (`**` before `*`, NUMBER's
    `.5` before `.`); any other two can swap, since they never both match in one place.
    """
    firsts = [_first_characters(t.pattern.to_regexp()) for t in terminals]
    rank = [_COMMON.index(t.name) if t.name in _COMMON else len(_COMMON) for t in terminals]
    # A terminal that must be tried before a common one (AUGOP's `+=` before PLUS) is as
    # urgent as that one: else every `+` would first fail all the rare terminals.
    for i in reversed(range(len(terminals))):
        rank[i] = min([rank[i], *(rank[j] for j in range(i + 1, len(terminals)) if firsts[i] & firsts[j])])
    waiting = list(range(len(terminals)))
    order = []
    while waiting:
        free = [i for n, i in enumerate(waiting) if not any(firsts[i] & firsts[j] for j in waiting[:n])]
        chosen = min(free, key=lambda i: (rank[i], i))
        order.append(terminals[chosen])
        waiting.remove(chosen)
    return order


_ANY = frozenset(range(129))  # the ASCII characters, and 128: any other
_CATEGORIES = {name: pattern for pattern, name in (
    ("\\d", "CATEGORY_DIGIT"), ("\\D", "CATEGORY_NOT_DIGIT"), ("\\w", "CATEGORY_WORD"), ("\\W", "CATEGORY_NOT_WORD"),
    ("\\s", "CATEGORY_SPACE"), ("\\S", "CATEGORY_NOT_SPACE"))}


def _first_characters(regexp: str) -> frozenset[int]:
    """The characters a match of `regexp` can begin with (ASCII codes, 128 for any other
    character); when unsure, all of them."""
    try:
        from re import _parser as parser  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse as parser  # type: ignore[no-redef]
    first, nullable = _first_of(list(parser.parse(regexp)))
    return _ANY if nullable else frozenset(first)


def _first_of(items: list[Any]) -> tuple[set[int], bool]:
    """First characters of a parsed sequence, and whether it can match the empty string."""
    first: set[int] = set()
    for op, arg in items:
        name = op.name
        if name == "AT":  # ^, $, \b: no character
            continue
        if name == "SUBPATTERN" and not arg[1] and not arg[2]:  # a group, without flags
            inner, nullable = _first_of(list(arg[3]))
        elif name == "BRANCH":
            parts = [_first_of(list(branch)) for branch in arg[1]]
            inner, nullable = set().union(*(f for f, _ in parts)), any(n for _, n in parts)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            inner, nullable = _first_of(list(arg[2]))
            nullable = nullable or arg[0] == 0
        elif name == "LITERAL":
            inner, nullable = {min(arg, 128)}, False
        elif name == "IN" and all(o.name in ("LITERAL", "RANGE", "CATEGORY") for o, _ in arg):
            inner, nullable = set(), False
            for o, a in arg:
                if o.name == "LITERAL":
                    inner.add(min(a, 128))
                elif o.name == "RANGE":
                    inner |= {min(c, 128) for c in range(a[0], min(a[1], 128) + 1)}
                elif a.name in _CATEGORIES:
                    inner |= {c for c in range(128) if re.match(_CATEGORIES[a.name], chr(c))} | {128}
                else:
                    inner = set(_ANY)
        else:  # anything else (a negated class, a lookahead, flags): it may begin with anything
            inner, nullable = set(_ANY), False
        first |= inner
        if not nullable:
            return first, False
    return first, True


def parse(source: str, tables: _Tables | None = None) -> tuple[Tree, list[Range]] | None:
    """The tree Lark's parser gives for `source`, and where each statement starts and
    ends; None when the source has a syntax error or anything else this loop does not
    take (then Lark's parser decides). `tables` defaults to this process's.

    Each node of the tree carries where it starts and ends in the source, a (start, end)
    pair of offsets in the slot Lark keeps for its positions (`Tree._meta`: nothing reads
    a parse tree's positions; Lark's parser, which does not propagate them, leaves None).
    A node's range runs from the start of its rule's first symbol to the end of its last,
    so it takes in brackets and signs the tree does not keep: `f(x)`, `-x`, and in
    `(a + b) * c` the product starts at "(". A rule that only passes its child on (`"("
    sum ")"`) leaves the child's range as it was: the sum is `a + b`."""
    t = _tables() if tables is None else tables
    units, gotos = t.units, t.gotos
    actions, rules, kept, keywords, multiline, end_state = t.actions, t.rules, t.kept, t.keywords, t.multiline, t.end
    state: Any = t.start  # (an int: where gotos.get gives None, the loop finds it)
    key: tuple[Any, ...]
    states = [state]  # Lark's state stack and value stack
    values: list[Any] = []
    starts: list[int] = []  # where each value starts (beside the value stack)
    shifted = 0  # where the last token given to the parser ends: where a reduction's range ends
    statements: list[Range] = []
    line, line_start = 1, 0  # the line being read, and the offset where it starts
    depth = 0  # open brackets
    previous = ""  # the last token given to the parser
    first = last = -1  # the statement being read: its first token's start, its last token's end
    end = 0
    post_lexed = t.post_lexed
    new_token = str.__new__  # Token() first checks for a deprecated keyword: as much again
    next_match = t.tokens.scanner(source).match  # type: ignore[attr-defined]  # (undocumented, but in CPython's re for decades) each match starts where the last one ended
    while True:
        match = next_match()
        if match is None:  # the end, or a character no terminal matches
            if t.blank.match(source, end).end() != len(source):  # type: ignore[union-attr]  # (blank matches the empty string)
                return None
            if first >= 0:
                statements.append((first, last))
            kind, value = END, None
        else:
            kind = match.lastgroup
            start, end = match.span(kind)
            at = start  # where a statement starts, if this token starts one
            if kind in post_lexed:  # as syntax.py's post-lexer: brackets, newlines, separators
                if kind in keywords:  # a keyword, unless the parser takes only a name here (`x.if`)
                    keyword = keywords[kind].get(source[start:end])
                    if keyword is not None and (keyword in actions[state] or kind not in actions[state]):
                        kind = keyword
                elif kind in OPENERS:
                    depth += 1
                elif kind in CLOSERS:
                    depth = depth - 1 if depth else 0
                elif kind == NEWLINE or kind in multiline:
                    newlines = source.count("\n", start, end)
                    if newlines:
                        line += newlines
                        line_start = source.rindex("\n", start, end) + 1
                    if kind != NEWLINE or depth or previous in CONTINUES:
                        continue
                if depth == 0 and kind in SEPARATORS:
                    if first >= 0:
                        statements.append((first, last))
                    first = at = -1
            if first < 0:
                first = at
            last = end
            previous = kind
            if kind in kept:  # Lark's Token, as Lark's lexer places it (no kept token spans a newline)
                text = source[start:end]
                value = new_token(Token, text)
                value.type, value.value, value.start_pos, value.end_pos = kind, text, start, end
                value.line = value.end_line = line
                value.column, value.end_column = start - line_start + 1, end - line_start + 1
            else:
                value = None
        while True:  # Lark's ParserState.feed_token
            action = actions[state].get(kind)
            if action is None:
                return None
            if action >= 0:
                if kind is END:
                    return None
                state = action
                states.append(state)
                values.append(value)
                starts.append(start)
                shifted = end
                break
            size, name, build, plain = rules[~action]
            if build is None:  # `?sum: product`: the value stays, only the state moves on
                # (met here only after a shift: a reduction's goto follows these rules itself)
                key = (states[-2], state, kind)
                after = units.get(key)
                if after is None:
                    after = units[key] = _after_units(actions, rules, states[-2], state, kind)
                state = states[-1] = after
                continue
            if not size:  # an empty rule: it starts where it is, and has no range
                begin, tree = shifted, build([])
            else:
                begin = starts[-size]
                if plain is not None:  # Tree(name, the children it keeps), as the callback would
                    tree = Tree(plain[0], values[plain[1]], (begin, shifted))  # type: ignore[arg-type]  # a range where Lark keeps a Meta
                else:
                    children = values[-size:]
                    tree = build(children)
                    if not any(child is tree for child in children):  # (`"(" sum ")"`: the sum keeps its own range)
                        tree._meta = begin, shifted
                del values[-size:], states[-size:], starts[-size:]
            values.append(tree)
            starts.append(begin)
            below = states[-1]
            key = (below, name, kind)
            state = gotos.get(key)
            if state is None:
                state = actions[below][name]
                if state != end_state or kind is not END:  # (Lark stops at the end state)
                    state = _after_units(actions, rules, below, state, kind)
                gotos[key] = state
            states.append(state)
            if state == end_state and kind is END:
                return values[-1], statements


END = "$END"


def _after_units(actions: dict[int, dict[str, int]], rules: list[Any], below: int, state: int, kind: str) -> int:
    """The state reached from `state` (with `below` under it) by reducing unit rules while
    `kind` is the next token: each one only replaces the top state with the goto from
    `below`, so the whole chain depends on these three alone."""
    while True:
        action = actions[state].get(kind)
        if action is None or action >= 0 or rules[~action][2] is not None:
            return state
        state = actions[below][rules[~action][1]]
