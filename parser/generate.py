"""Write parser/tables.py from parser/grammar.lark: the build step of the parser.

    python -m gradcalc.parser.generate

Lark reads the grammar and builds its LALR(1) tables; this module writes them, and what
the lexer needs, as plain Python data (tables.py). At run time gradcalc imports neither
Lark nor this module: lexer.py and driver.py read tables.py. grammar.lark stays the
source of truth; tests/test_parser.py fails when tables.py is out of date.

What is written, and why in that form:

- the terminals in the order the lexer tries them (one regular expression of
  alternatives takes the first that matches). Lark's lexer order (priority, then the
  longest possible match first) is kept wherever two terminals can begin with the same
  character; elsewhere common terminals come first (`_quick_order`), which halves the
  lexing time;
- the keywords: fixed strings that NAME's pattern also matches, which the lexer reads
  as a NAME and then renames, as Lark's lexer does;
- the action table, each state's row as two lines of text (its symbols, and their
  actions as numbers), and the rules as text: a fresh process without a .pyc compiles a
  string at once, where a dict of dicts took as long as all the rest of gradcalc's parser;
  the states are numbered in a fixed order (breadth first from the start
  state, symbols in sorted order) so the file does not change with Python's hash seed;
- for each rule, how the driver builds its node: the shape Lark's tree builder gives it
  (`?rule` passes a single child on, `-> alias` names the node, anonymous tokens are left
  out, `_rule` children are spliced in, `[x]` leaves a None), decided here once.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GRAMMAR = HERE / "grammar.lark"
TABLES = HERE / "tables.py"
START = "program"
END = "$END"

HEADER = '''# Generated from grammar.lark by `python -m gradcalc.parser.generate`; do not edit.
"""The parser's tables: the lexer's terminals and keywords, the LALR(1) action table and
how each rule builds its node (generate.py says what each holds and why)."""
'''


def build(grammar: str) -> dict[str, Any]:
    """The tables for `grammar`, as plain data (what tables.py holds)."""
    from lark import Lark
    from lark.common import ParserConf
    from lark.parsers.lalr_analysis import LALR_Analyzer, Shift

    lark = Lark(grammar, parser="lalr", start=START, maybe_placeholders=True)
    terminals = {t.name: t for t in lark.terminals}
    if any(t.pattern.flags for t in terminals.values()):
        raise RuntimeError("generate.py: a terminal has regular expression flags; the lexer does not take them")
    keywords, renamed = _keywords(list(terminals.values()))
    ignored = set(lark.ignore_tokens)
    blanks = [t for name, t in terminals.items() if name in ignored and _first_characters(t.pattern.to_regexp()) <= _BLANK_STARTS]
    lexed = [t for t in terminals.values() if t not in blanks and t.name not in renamed]
    if any(_first_characters(t.pattern.to_regexp()) & _BLANK_STARTS for t in lexed):
        raise RuntimeError("generate.py: a token can begin with a blank; the lexer matches blanks before each token")
    # Lark's lexer order: priority, then the longest possible match, then the longest pattern
    lexed.sort(key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))

    analysis = LALR_Analyzer(ParserConf(lark.rules, {}, [START]))
    analysis.compute_lalr()
    table = analysis.parse_table
    order = _state_order(table.states, table.start_states[START])
    number = {state: i for i, state in enumerate(order)}
    rule_index = {rule: i for i, rule in enumerate(lark.rules)}
    actions = []
    for state in order:
        row = sorted(table.states[state].items())
        symbols = " ".join(symbol for symbol, _ in row)
        actions.append((symbols, " ".join(str(number[arg] if action is Shift else ~rule_index[arg]) for _, (action, arg) in row)))
    kept = {
        str(symbol.name) for rule in lark.rules for symbol in rule.expansion
        if symbol.is_term and (rule.options.keep_all_tokens or not getattr(symbol, "filter_out", False))
    }
    return {
        "TERMINALS": tuple((t.name, t.pattern.to_regexp()) for t in _quick_order(lexed)),
        "BLANK": "|".join(t.pattern.to_regexp() for t in blanks),
        "IGNORED": tuple(sorted(name for name in ignored if name not in {t.name for t in blanks})),
        "KEYWORDS": keywords,
        "KEPT": tuple(sorted(kept)),
        "LITERALS": {name: t.pattern.value for name, t in sorted(terminals.items()) if t.pattern.type == "str"},
        "ACTIONS": tuple(actions),
        "RULES": tuple(_rule_text(_rule(rule)) for rule in lark.rules),
        "START_STATE": number[table.start_states[START]],
        "END_STATE": number[table.end_states[START]],
    }


def _keywords(terminals: list[Any]) -> tuple[dict[str, dict[str, str]], set[str]]:
    """{terminal: {text: keyword terminal}} for the fixed strings a pattern terminal matches
    whole (NAME: "if" -> IF), as Lark's lexer renames them; and the renamed terminals."""
    keywords: dict[str, dict[str, str]] = {}
    renamed = set()
    for pattern in terminals:
        if pattern.pattern.type != "re":
            continue
        for fixed in terminals:
            text = fixed.pattern.value
            if fixed.pattern.type == "str" and fixed.priority == pattern.priority and re.fullmatch(pattern.pattern.to_regexp(), text):
                keywords.setdefault(pattern.name, {})[text] = fixed.name
                renamed.add(fixed.name)
    return {name: dict(sorted(texts.items())) for name, texts in sorted(keywords.items())}, renamed


def _state_order(states: dict[Any, dict[str, Any]], start: Any) -> list[Any]:
    """Every state, breadth first from `start` by the shifts and gotos of each state in the
    order of their symbols: the same numbering whatever order Lark's sets come in."""
    from lark.parsers.lalr_analysis import Shift

    order, seen = [start], {start}
    for state in order:
        for _, (action, arg) in sorted(states[state].items()):
            if action is Shift and arg not in seen:
                seen.add(arg)
                order.append(arg)
    if len(order) != len(states):
        raise RuntimeError("generate.py: a state of the table cannot be reached from the start")
    return order


def _rule(rule: Any) -> tuple[int, str, str, str | None, Any]:
    """(size, the name its goto is by, shape, node kind, argument): how the driver builds
    the value of `rule` from its symbols' values, as Lark's tree builder would.

    Shapes: "unit" (a `?rule` of one symbol: the value passes on, argument None); "child"
    (a `?rule` that keeps one symbol: that one passes on, argument its index); "slice"
    (a node of the values picked by a (start, stop, step) slice of the value stack);
    "build" (the general case: the argument lists, in order, i >= 0 for value i, ~i for
    the children of value i spliced in (a `_rule`), None for an empty `[x]`). A kind of
    None is a `_rule`: its value is the list of its children, spliced into its parent."""
    options, expansion = rule.options, rule.expansion
    size, origin = len(expansion), str(rule.origin.name)
    kind = None if origin.startswith("_") else str(rule.alias or origin)
    expand1 = options.expand1 and not rule.alias
    nones = _nones_before(size, options.empty_indices)
    steps: list[int | None] = []
    for i, symbol in enumerate(expansion):
        steps += [None] * nones[i]
        if options.keep_all_tokens or not (symbol.is_term and getattr(symbol, "filter_out", False)):
            steps.append(~i if not symbol.is_term and symbol.name.startswith("_") else i)
    steps += [None] * nones[size]
    picks = [s for s in steps if s is not None and s >= 0]
    if expand1:
        if len(steps) != 1 or steps[0] is None or steps[0] < 0:
            raise RuntimeError(f"generate.py: the `?{origin}` rule {rule} may give one child or several; the driver does not build that")
        return (size, origin, "unit", None, None) if size == 1 else (size, origin, "child", None, steps[0])
    spacing = {b - a for a, b in zip(picks, picks[1:])}
    if kind is not None and picks and len(picks) == len(steps) and len(spacing) <= 1:
        stop = picks[-1] - size + 1
        return size, origin, "slice", kind, (picks[0] - size, stop or None, spacing.pop() if spacing else 1)
    return size, origin, "build", kind, tuple(steps)


def _rule_text(rule: tuple[int, str, str, str | None, Any]) -> str:
    """A rule as one line of text, "size name shape kind argument" ("-" for None; a slice or
    steps as numbers joined by commas): a string compiles in no time where a tuple of
    tuples costs a fresh process (no .pyc) as much as the rest of the import together."""
    size, name, shape, kind, arg = rule
    if arg is None:
        text = "-"
    elif isinstance(arg, int):
        text = str(arg)
    else:
        text = ",".join("-" if step is None else str(step) for step in arg)
    return f"{size} {name} {shape} {kind or '-'} {text}"


def _nones_before(size: int, empty_indices: tuple[bool, ...]) -> list[int]:
    """How many None placeholders come before each symbol, and after the last (Lark's
    maybe_placeholders: `[x]` left out is a None in the tree)."""
    if not empty_indices:
        return [0] * (size + 1)
    runs = "".join(str(int(empty)) for empty in empty_indices).split("0")
    return [len(run) for run in runs]


# ---- the order the lexer tries its terminals --------------------------------------------------

# Terminals tried first when nothing forbids it, commonest first (by their counts in the
# examples and docs, and in long expressions): trying the alternatives in Lark's order
# (longest pattern first) took twice as long.
_COMMON = ("NAME", "LPAR", "RPAR", "COMMA", "NUMBER", "PLUS", "MINUS", "STAR", "SLASH", "_NL", "EQUAL", "LSQB", "RSQB", "DOT")
_BLANK_STARTS = frozenset(map(ord, " \t\f"))


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
    character); when unsure, all of them. Reads the pattern with the standard library's
    own regular expression parser: a build-time tool, never run by gradcalc itself."""
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


# ---- tables.py --------------------------------------------------------------------------------

_COMMENTS = {
    "TERMINALS": "the lexer's terminals, (name, regular expression), in the order it tries them",
    "BLANK": "what the lexer skips before each token (the ignored terminals that begin with a blank)",
    "IGNORED": "terminals lexed as tokens and then dropped (comments, line continuations)",
    "KEYWORDS": "terminal -> {text: keyword terminal}: words the lexer reads as that terminal, then renames",
    "KEPT": "the terminals some rule keeps in its node (the parser makes a Token of these only)",
    "LITERALS": "the terminals that are one fixed string, and that string (for messages)",
    "ACTIONS": "state -> (its symbols, and for each: s >= 0 shift (or go) to state s, ~r reduce by rule r), as text",
    "RULES": "rule -> 'size, the name its goto is by, shape, node kind, argument' (see generate._rule), as text",
    "START_STATE": "where parsing starts",
    "END_STATE": "the state after the goto on the whole program at the end of input",
}


def source(tables: dict[str, Any]) -> str:
    """tables.py's text: each table a Python literal, one entry per line."""
    parts = [HEADER]
    for name, value in tables.items():
        parts.append(f"\n# {_COMMENTS[name]}\n{name} = {_literal(value)}\n")
    return "".join(parts)


def _literal(value: Any) -> str:
    if isinstance(value, tuple) and len(value) > 2:
        return "(\n" + "".join(f"    {item!r},\n" for item in value) + ")"
    if isinstance(value, dict) and value:
        return "{\n" + "".join(f"    {key!r}: {item!r},\n" for key, item in value.items()) + "}"
    return repr(value)


def generated() -> str:
    """What tables.py must hold for the current grammar.lark and Lark."""
    return source(build(GRAMMAR.read_text()))


def main() -> None:
    TABLES.write_text(generated())
    print(f"wrote {TABLES}", file=sys.stderr)


if __name__ == "__main__":
    main()
