"""The parser: grammar.lark's LALR(1) tables (tables.py, written by generate.py), read by
a loop of our own. It is the only parser gradcalc runs.

The tokens come from the layout pass (layout.py: lines, brackets, indentation and blocks,
over the one lexer, lexer.py), which also records where each statement starts and ends;
this module is the LALR loop alone. Per token it does only what the result needs: for
each reduction the node its rule builds (`Node`, with where it starts and ends). A rule
like `?sum: product` passes its only child on: the loop does not reduce it, it only
moves to the state after it (a reduction's goto and the chain of such rules after it
are one cached lookup).

A keyword the parser cannot take where it can take a name is a name (`x.if`, `x = if`:
the compiler then says a keyword cannot be a name); the layout pass asks the loop's
state (`_keyword_here`). A keyword run into a word is not split off it (`x ifa else b`
is the name `ifa`, which the parser refuses).

When the source has a syntax error, `parse` raises `Stuck` with what the table says
there (the state stack, from which `accepted` reads the terminals that could come
next); syntax.py words the message.
"""
from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from . import tables
from .layout import Layout, Lexeme, Range, Stuck
from .lexer import END, Token, token

__all__ = ["Node", "Range", "Stuck", "accepted", "parse"]


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
# (state below, state, terminal) -> the state after every unit reduction that terminal
# leads to; (state below, rule name, terminal) -> the state after the goto on that rule
# and the unit reductions after it. Filled as met.
_UNITS: dict[tuple[int, int, str], int] = {}
_GOTOS: dict[tuple[int, str, str], int] = {}


def parse(source: str) -> tuple[Node, list[Range]]:
    """The parse tree of `source` and where each statement starts and ends; raises Stuck
    at a syntax error."""
    actions, rules, units, gotos = ACTIONS, RULES, _UNITS, _GOTOS
    end_state = tables.END_STATE
    state = tables.START_STATE
    states = [state]  # the parser's state stack and value stack
    values: list[Any] = []
    starts: list[int] = []  # where each value starts (beside the value stack)
    shifted = 0  # where the last token given to the parser ends: where a reduction's range ends
    layout = Layout(source, partial(_keyword_here, states))
    lexemes = iter(layout)
    for kind, value, start, end in lexemes:
        if start == end and kind is not END:  # a made token: what it closes ends where it stands
            shifted = start
        while True:  # feed the token: reduce until it can be shifted
            action = actions[state].get(kind)
            if action is None:
                raise _stuck(source, kind, value, start, end, lexemes, states, layout)
            if action >= 0:
                if action == _RULE_NAMED and values[-1] != RULE_WORD:
                    raise _stuck(source, kind, value, start, end, lexemes, states, layout)
                state = action
                states.append(state)
                values.append(value)
                starts.append(start)
                shifted = end
                break
            size, name, shape, kind_of, arg = rules[~action]
            if shape == "unit":  # `?sum: product`: the value stays, only the state moves on
                # (met here only after a shift: a reduction's goto follows these rules itself)
                unit = (states[-2], state, kind)
                after = units.get(unit)
                if after is None:
                    after = units[unit] = _after_units(states[-2], state, kind)
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
            goto = (below, name, kind)
            next_state = gotos.get(goto)
            if next_state is None:
                next_state = actions[below][name]
                if next_state != end_state or kind is not END:  # (parsing stops at the end state)
                    next_state = _after_units(below, next_state, kind)
                gotos[goto] = next_state
            state = next_state
            states.append(state)
            if state == end_state and kind is END:
                return values[-1], layout.statements
    raise AssertionError("the parser read past the end of its input")  # pragma: no cover - END always ends it


def _keyword_here(states: list[int], keyword: str, terminal: str) -> bool:
    """Whether a keyword (`keyword`, lexed as `terminal`) is read as one with this state
    stack: where the parser takes it, or cannot take a name (`x.if` is a name)."""
    here = ACTIONS[states[-1]]
    return keyword in here or terminal not in here


def _stuck(
    source: str, kind: str, value: Token | None, start: int, end: int, lexemes: Iterator[Lexeme], states: list[int], layout: Layout,
) -> Stuck:
    """Stuck at the token `kind` from `start` to `end` (`value`, when it was made already).
    A made token (_INDENT, _DEDENT, a block's _NL) has no place of its own: the error is
    at the token that follows it."""
    while start == end and kind is not END:
        kind, value, start, end = next(lexemes)
    if value is None:
        value = token(kind, "", start, start) if kind is END else token(kind, source[start:end], start, end)
    return Stuck(start, value, states, layout.first, layout.statements)


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
