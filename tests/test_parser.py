"""The parser (parser/driver.py on the tables generate.py writes): its trees and the places
of their nodes against Python's own parser where the two languages agree, and against
trees, places and messages written out by hand where they do not; the build step; and
what the parser may not touch at run time.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.parser import LanguageError, compile_program, generate
from gradcalc.parser.compiler import BINARY, CALL, CONST, JUMP, JUMP_IF_FALSE, LOAD, METHOD
from gradcalc.parser.lexer import PATTERN, Token, tokens
from gradcalc.parser.syntax import Node, parse_recovering, parse_statements, parse_tree
from tests.strategies import sampled

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ["lexer.py", "layout.py", "driver.py", "syntax.py", "tables.py", "compiler.py", "machine.py", "errors.py", "records.py"]


def shape(node: object) -> object:
    """A tree as nested tuples: (kind, children...) for a node, its text for a token."""
    if isinstance(node, Node):
        return (node.kind, *map(shape, node.children))
    return node if node is None else str(node)


def statement(source: str) -> Node:
    [only] = parse_tree(source).children
    return only


# ---- the build step and the run time ------------------------------------------------------------


def test_the_tables_are_generated_from_the_current_grammar():
    """parser/tables.py is written by `python -m gradcalc.parser.generate` (or `python
    parser/generate.py`) from grammar.lark; run it after editing the grammar."""
    assert (ROOT / "parser" / "tables.py").read_text() == generate.generated(), "run: python parser/generate.py"


def test_the_tables_are_plain_data():
    tree = ast.parse((ROOT / "parser" / "tables.py").read_text())
    assert all(isinstance(node, (ast.Assign, ast.Expr)) for node in tree.body)
    for node in tree.body:
        ast.literal_eval(node.value)  # literals only: no call, no import, no pickle


def test_parsing_imports_no_lark():
    code = ("import sys\nfrom gradcalc.parser import compile_program\ncompile_program('x = [1, 2]; y = x.sum() * 2')\n"
            "try:\n    compile_program('x +* 2')\nexcept Exception as err:\n    print(type(err).__name__)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lark' or m.endswith('generate')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["LanguageError", "[]"]


@pytest.mark.parametrize("name", RUNTIME)
def test_the_run_time_reads_no_private_api_of_lark_or_re(name):
    text = (ROOT / "parser" / name).read_text()
    for private in ("_parse_table", ".scanner", "sre_parse", "re._parser", "pickle", "zlib"):
        assert private not in text.lower(), (name, private)
    assert not re.search(r"\bimport lark|from lark|\blark\.[A-Za-z_]", text)  # (prose may name Lark: layout.py's model is its Indenter)


# ---- trees and places, against Python's parser ----------------------------------------------------

callables = st.sampled_from(["x", "y", "W", "_a1", "tanh", "iffy", "checked"])  # names Python reads as names everywhere
names = st.one_of(callables, st.sampled_from(["true", "None"]))
numbers = st.sampled_from(["1", "2.5", ".5", "1.", "1e3", "2.5E-3", "1_000", "0x1F", "0b101", "0o17"])
strings = st.sampled_from(["'s'", '"t"'])
blank = st.sampled_from(["", " ", "  "])


def _python_expression(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Expressions written alike in gradcalc and Python, meaning the same tree (no `^`,
    which is ** here; no chained comparisons, which gradcalc has not)."""
    binary = st.sampled_from(["+", "-", "*", "/", "@", "//", "%", "**"])
    comparison = st.sampled_from(["<", "<=", "==", "!=", ">", ">="])
    # (a comparison or a conditional is always bracketed: an operand of any operator)
    sums = inner
    argument = st.one_of(inner, st.tuples(callables, inner).map(lambda t: f"{t[0]}={t[1]}"))
    index = st.one_of(inner, st.sampled_from([":", "1:", ":2", "::2", "1:2:3", "..."]))
    return st.one_of(
        st.tuples(sums, binary, blank, sums).map(lambda t: f"{t[0]}{t[2]}{t[1]}{t[2]}{t[3]}"),
        st.tuples(sums, comparison, sums).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["-", "+", "- -"]), sums).map("".join),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        st.tuples(callables, st.lists(argument, max_size=3)).map(lambda t: f"{t[0]}({', '.join(_positional_first(t[1]))})"),
        st.tuples(inner, callables, st.lists(inner, max_size=2)).map(lambda t: f"({t[0]}).{t[1]}({', '.join(t[2])})"),
        st.tuples(inner, st.lists(inner, max_size=2)).map(lambda t: f"({t[0]})({', '.join(t[1])})"),  # a call of any value
        st.tuples(st.lists(callables, max_size=2, unique=True), inner).map(lambda t: f"(lambda {', '.join(t[0])}: {t[1]})"),
        st.tuples(inner, callables).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(inner, st.lists(index, min_size=1, max_size=3)).map(lambda t: f"({t[0]})[{', '.join(t[1])}]"),
        st.tuples(st.lists(inner, max_size=3), st.sampled_from(["", ","]), st.sampled_from(["", "\n"])).map(
            lambda t: f"[{t[2]}{', '.join(t[0])}{t[1] if t[0] else ''}{t[2]}]"),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: f"({', '.join(items)})"),
        st.sampled_from(["()", "(1,)", "[]"]),
        inner.map(lambda e: f"({e})"),
    )


def _positional_first(arguments: list[str]) -> list[str]:
    """Positional arguments, then keyword arguments, each keyword once (as Python requires)."""
    keywords = {}
    for a in arguments:
        name = re.match(r"(\w+)=(?!=)", a)
        if name:
            keywords.setdefault(name.group(1), a)
    return [a for a in arguments if not re.match(r"\w+=(?!=)", a)] + list(keywords.values())


python_expressions = st.recursive(st.one_of(names, numbers, strings), _python_expression, max_leaves=10)

_OPERATORS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul", ast.Pow: "pow",
              ast.FloorDiv: "floor_divide", ast.Mod: "remainder", ast.USub: "neg", ast.UAdd: "pos"}


def _offset(source: str, line: int, column: int) -> int:
    return sum(len(text) + 1 for text in source.split("\n")[: line - 1]) + column


def python_tree(node: ast.AST, source: str) -> object:
    """Python's tree in the form of `ours`: (kind, start, end, children...)."""
    def place(n: ast.AST) -> tuple[int, int]:
        return _offset(source, n.lineno, n.col_offset), _offset(source, n.end_lineno, n.end_col_offset)

    def of(n: ast.AST | None) -> object:
        if n is None:
            return None
        if isinstance(n, ast.Name):
            return ("name", *place(n), n.id)
        if isinstance(n, ast.Constant):
            start, end = place(n)
            if n.value is Ellipsis or n.value is None:
                return ("name", start, end, source[start:end])
            return ("string" if isinstance(n.value, str) else "number", start, end, source[start:end])
        if isinstance(n, ast.BinOp):
            return (_OPERATORS[type(n.op)], *place(n), of(n.left), of(n.right))
        if isinstance(n, ast.UnaryOp):
            return (_OPERATORS[type(n.op)], *place(n), of(n.operand))
        if isinstance(n, ast.Compare):
            start, end = place(n)
            return ("compare", start, end, of(n.left), source[place(n.left)[1]:place(n.comparators[0])[0]].strip(" ()"), of(n.comparators[0]))
        if isinstance(n, ast.IfExp):
            return ("conditional", *place(n), of(n.body), of(n.test), of(n.orelse))
        if isinstance(n, ast.Call):
            # A method is a call of an attribute, as in Python: x.relu() calls x.relu.
            arguments = [of(a) for a in n.args] + [of(k) for k in n.keywords]
            return ("call", *place(n), of(n.func), *arguments)
        if isinstance(n, ast.Lambda):
            return ("lambda", *place(n), *(a.arg for a in n.args.args), of(n.body))
        if isinstance(n, ast.keyword):
            return ("keyword", *place(n), n.arg, of(n.value))
        if isinstance(n, ast.Attribute):
            return ("attribute", *place(n), of(n.value), n.attr)
        if isinstance(n, ast.Subscript):
            # x[a, b] has two subscripts; x[(a, b)] one, a tuple (its range takes in the brackets)
            spread = isinstance(n.slice, ast.Tuple) and not _bracketed(source[slice(*place(n.slice))])
            parts = n.slice.elts if spread else [n.slice]
            return ("index", *place(n), of(n.value), *map(of, parts))
        if isinstance(n, ast.Slice):
            return ("slice", *place(n), *(of(p) for p in (n.lower, n.upper, n.step) if p is not None))
        if isinstance(n, (ast.List, ast.Tuple)):
            return ("tensor", *place(n), *map(of, n.elts))
        raise AssertionError(f"not in the generator: {ast.dump(n)}")

    return of(node)


def _bracketed(text: str) -> bool:
    """True when `text` is one bracketed whole: its first "(" closes at its last character."""
    depth = 0
    for i, char in enumerate(text):
        depth += (char in "([") - (char in ")]")
        if depth == 0:
            return text[0] == "(" and i == len(text) - 1
    return False


def ours(node: object) -> object:
    """Our tree as (kind, start, end, children...), None children left out (Python's tree
    has no placeholders) and a call's or method's arguments spread (Python has no node for them)."""
    if isinstance(node, Token):
        return str(node)
    assert isinstance(node, Node)
    children: list[object] = []
    for child in node.children:
        if isinstance(child, Node) and child.kind == "arguments":
            children += [ours(c) for c in child.children if c is not None]
        elif child is not None:
            children.append(ours(child))
    if node.kind in ("name", "number", "string"):
        children = [str(node.children[0])]
    elif node.kind == "pow":  # (its operator is kept: `**` or `^`; Python's tree has none)
        children = [c for c in children if not isinstance(c, str)]
    return (node.kind, node.start, node.end, *children)


@settings(max_examples=600)
@given(python_expressions)
@pytest.mark.slow
def test_trees_and_places_are_pythons(source):
    """Where the languages agree, every node is the node Python's parser gives, with the
    same start and end in the source (Python's brackets: `(a + b) * c`'s product starts
    at "(", its sum at "a")."""
    expected = python_tree(ast.parse(source, mode="eval").body, source)
    node = statement(source)
    assert node.kind == "expr_stmt"
    assert ours(node.children[0]) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("(a) + (b)", ("add", 0, 9, ("name", 1, 2, "a"), ("name", 7, 8, "b"))),
    ("x * (a + b)", ("mul", 0, 11, ("name", 0, 1, "x"), ("add", 5, 10, ("name", 5, 6, "a"), ("name", 9, 10, "b")))),
    ("f(x, (y))", ("call", 0, 9, ("name", 0, 1, "f"), ("name", 2, 3, "x"), ("name", 6, 7, "y"))),
    ("g(f)(x)", ("call", 0, 7, ("call", 0, 4, ("name", 0, 1, "g"), ("name", 2, 3, "f")), ("name", 5, 6, "x"))),
    ("x.t(1)", ("call", 0, 6, ("attribute", 0, 3, ("name", 0, 1, "x"), "t"), ("number", 4, 5, "1"))),
    ("-x ** -y ** 2", ("neg", 0, 13, ("pow", 1, 13, ("name", 1, 2, "x"), ("neg", 6, 13, ("pow", 7, 13, ("name", 7, 8, "y"), ("number", 12, 13, "2")))))),
])
def test_hand_placed_trees(source, expected):
    """Counted by hand, and Python's parser agrees."""
    assert ours(statement(source).children[0]) == expected == python_tree(ast.parse(source, mode="eval").body, source)


def test_a_caret_is_a_power():
    """`^` is `**` here, not Python's exclusive or."""
    assert shape(statement("x ^ 2 ^ 3")) == ("expr_stmt", ("pow", ("name", "x"), "^", ("pow", ("number", "2"), "^", ("number", "3"))))


# ---- statements: trees and ranges written out by hand ----------------------------------------------


@pytest.mark.parametrize(("source", "tree"), [
    ("x = 1", ("assign", "x", "=", ("number", "1"))),
    ("check = 3", ("assign", "check", "=", ("number", "3"))),
    ("a, b = f(x)", ("multi_assign", "a", "b", ("call", ("name", "f"), ("arguments", ("name", "x"))))),
    ("x //= 2", ("aug_assign", "x", "//=", ("number", "2"))),
    ("def f() = 1", ("funcdef", "f", None, ("number", "1"))),
    ("def g(u, v) = u", ("funcdef", "g", "u", "v", ("name", "u"))),
    ("check f(x) wrt x, y tol=1", ("check", ("call", ("name", "f"), ("arguments", ("name", "x"))), "x", "y", ("check_option", "tol", ("number", "1")))),
    ("check x", ("check", ("name", "x"), None)),
    ("x[..., None]", ("expr_stmt", ("index", ("name", "x"), ("name", "..."), ("name", "None")))),
    ("x[::]", ("expr_stmt", ("index", ("name", "x"), ("slice", None, None, None)))),
    ("x.if", ("expr_stmt", ("attribute", ("name", "x"), "if"))),
    ("x = if", ("assign", "x", "=", ("name", "if"))),
    ("1 if x else 2 if y else 3", ("expr_stmt", ("conditional", ("number", "1"), ("name", "x"),
                                                 ("conditional", ("number", "2"), ("name", "y"), ("number", "3"))))),
    ("(1,)", ("expr_stmt", ("tensor", ("number", "1"), None))),
    ("lambda x, y: x", ("expr_stmt", ("lambda", "x", "y", ("name", "x")))),
    ("lambda: 1", ("expr_stmt", ("lambda", None, ("number", "1")))),
    ("(lambda x: x)(2)", ("expr_stmt", ("call", ("lambda", "x", ("name", "x")), ("arguments", ("number", "2"))))),
    ("[1, 2,]", ("expr_stmt", ("tensor", ("number", "1"), ("number", "2")))),
])
def test_statement_trees(source, tree):
    assert shape(statement(source)) == tree


@pytest.mark.parametrize(("source", "ranges"), [
    ("", []), ("\n", []), ("# only a comment", []), ("x", [(0, 1)]), ("x;", [(0, 1)]), (";;x;;", [(2, 3)]),
    ("x \\\n + 1", [(0, 8)]), ("f(\n1,\n2\n)", [(0, 9)]), ("x +\n1", [(0, 5)]), ("x = 1 # c\ny = 2", [(0, 5), (10, 15)]),
    ("x\r\ny", [(0, 1), (3, 4)]), ("a = 1; b = [\n 2]\n\ncheck b wrt a", [(0, 5), (7, 16), (18, 31)]),
])
def test_statement_ranges(source, ranges):
    assert parse_statements(source)[1] == ranges


def test_a_long_program_and_a_long_literal_parse_in_linear_time():
    """A `_rule` list (the statements, a literal's items) grows in place, not copied per item."""
    tree = parse_tree("\n".join(f"y{i} = {i}" for i in range(20000)))
    assert len(tree.children) == 20000
    literal = statement("[" + ", ".join("1" for _ in range(50000)) + "]").children[0]
    assert len(literal.children) == 50000


@settings(max_examples=300)
@given(st.text(alphabet=" \t\f\\\n\r#x1+([$é'\"", max_size=40))
def test_the_parser_s_pattern_matches_at_every_position(text):
    """finditer searches on from a position where its pattern does not match, re-reading
    the blanks after it each time: quadratic in a run of blanks that no token follows
    (100,000 trailing spaces took 23 s). The driver's pattern matches everywhere."""
    assert all(PATTERN.match(text, at) is not None for at in range(len(text) + 1))


@pytest.mark.parametrize("tail", [" " * 400_000, "\t" * 400_000, " " * 400_000 + "$"], ids=["spaces", "tabs", "a character after"])
def test_a_long_run_of_trailing_blanks_reads_as_fast_as_none(tmp_path, tail):
    script = tmp_path / "blanks.gc"
    script.write_text("x = 2\nx * 3" + tail)
    done = subprocess.run([sys.executable, "-m", "gradcalc", "run", str(script)], capture_output=True, text=True, timeout=120)
    if tail.endswith("$"):  # the character no terminal matches, placed after the 400,000 blanks
        assert done.returncode == 2 and f"unexpected character '$'  [{script}:2:400006]" in done.stderr
    else:
        assert done.returncode == 0 and "value: 6.0" in done.stdout


# ---- every node's range is its own text ---------------------------------------------------------

spacing = st.sampled_from(["", " ", "  ", "\t", " \f", " \\\n ", " # note\\\n"])
word = st.sampled_from(["x", "y", "W", "_a1", "tanh", "checked", "iffy", "define", "wrt_", "true_"])
numeral = st.sampled_from(["1", "2.5", ".5", "1.", "1e3", "2.5E-3", "1_000", "0x1F", "0b101", "0o17", "٣"])
atom = st.one_of(word, numeral, st.sampled_from(["'s'", '"t"', "true", "false"]))


def joined(parts: list[str], spaces: list[str]) -> str:
    return "".join(part + space for part, space in zip(parts, spaces))


@st.composite
def spaced(draw, *parts: str) -> str:
    """`parts` with blanks (or newlines: they are inside brackets) between them."""
    spaces = draw(st.lists(st.one_of(spacing, st.just("\n")), min_size=len(parts) - 1, max_size=len(parts) - 1))
    return joined(list(parts), [*spaces, ""])


def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.sampled_from(["+", "-", "*", "/", "@", "//", "%", "**", "^", "<", "<=", "==", "!=", ">", ">="])
    return st.one_of(
        st.tuples(inner, binary, inner).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(st.sampled_from(["-", "+", "- -"]), inner).map("".join),
        st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} if {t[1]} else {t[2]}"),
        st.tuples(word, st.lists(inner, max_size=3), st.booleans()).map(
            lambda t: f"{t[0]}({', '.join(t[1])}{', axis=' + t[1][0] if t[2] and t[1] else ''})"),
        st.tuples(inner, word, st.lists(inner, max_size=2)).map(lambda t: f"({t[0]}).{t[1]}({', '.join(t[2])})"),
        st.tuples(inner, st.lists(inner, max_size=2)).map(lambda t: f"({t[0]})({', '.join(t[1])})"),
        st.tuples(st.lists(word, max_size=2), inner).map(lambda t: f"(lambda {', '.join(t[0])}: {t[1]})"),
        st.tuples(inner, word | st.sampled_from(["if", "else", "wrt", "check", "def"])).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(inner, st.lists(st.sampled_from(["0", ":", "1:", ":2", "::2", "1:2:3", "...", "None", "x"]), min_size=1, max_size=3))
        .map(lambda t: f"({t[0]})[{', '.join(t[1])}]"),
        st.tuples(st.lists(inner, max_size=4), st.sampled_from(["", ","])).flatmap(
            lambda t: spaced("[", ", ".join(t[0]) + (t[1] if t[0] else ""), "]")),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: f"({', '.join(items)})"),
        st.sampled_from(["()", "[]", "(1,)", "[1, 2,]"]),
        inner.flatmap(lambda e: spaced("(", e, ")")),
    )


expression = st.recursive(atom, extend, max_leaves=12)


@st.composite
def any_statement(draw) -> str:
    e = draw(expression)
    form = draw(sampled(["expr", "assign", "multi", "aug", "def", "check", "check_eq", "keyword"]))
    target = draw(word)
    if form == "assign":
        return f"{target} = {e}"
    if form == "multi":
        return f"{target}, y = {e}"
    if form == "aug":
        return f"{target} {draw(sampled(['+=', '-=', '*=', '/=', '//=', '%=']))} {e}"
    if form == "def":
        return f"def {target}({', '.join(draw(st.lists(word, max_size=3)))}) = {e}"
    if form == "check":
        wrt = draw(st.lists(word, max_size=2))
        return f"check {e}" + (f" wrt {', '.join(wrt)}" if wrt else "") + draw(sampled(["", " tol=1e-3", " at=1 h=2"]))
    if form == "check_eq":
        return f"check {e} == {draw(expression)}"
    if form == "keyword":
        return f"{draw(sampled(['check', 'def', 'lambda', 'true', 'false']))} = {e}"
    return e


programs = st.lists(st.tuples(any_statement(), st.sampled_from(["\n", ";", "; ", "\n\n", " # done\n", "\r\n", "\n  \n"])), max_size=6).map(
    lambda items: "".join(s + sep for s, sep in items))


EXPRESSIONS = {"add", "sub", "mul", "div", "matmul", "pow", "floor_divide", "remainder", "compare", "neg", "pos", "call", "lambda",
               "attribute", "index", "tensor", "conditional", "name", "number", "string"}


@settings(max_examples=300)
@given(programs)
@pytest.mark.slow
def test_each_node_is_placed_on_exactly_its_own_text(source):
    """Programs of every statement form, with blanks, comments, continuations and newlines
    inside brackets: the text of an expression node's range, parsed alone, is that node
    again (no bracket of its own missing, none of its parent's)."""
    try:
        tree = parse_tree(source)
    except LanguageError:
        return
    work = list(tree.children)
    while work:
        node = work.pop()
        if not isinstance(node, Node):
            continue
        work += node.children
        if node.kind in EXPRESSIONS and node.children[:1] != ["..."]:  # (`...` is only a subscript)
            alone = statement(source[node.start:node.end])
            assert alone.kind == "expr_stmt" and shape(alone.children[0]) == shape(node), (source, source[node.start:node.end])


@pytest.mark.slow
def test_most_generated_programs_parse():
    """Otherwise the test above would pass without testing anything."""
    parsed = []

    @settings(max_examples=200, database=None)
    @given(programs)
    def count(source):
        try:
            parse_tree(source)
            parsed.append(True)
        except LanguageError:
            parsed.append(False)

    count()
    assert sum(parsed) > 0.8 * len(parsed)


# ---- the lexer ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("x+=1 # c", [("NAME", "x"), ("AUGOP", "+="), ("NUMBER", "1"), ("COMMENT", "# c")]),
    ("a ** b ^ .5.x", [("NAME", "a"), ("POW", "**"), ("NAME", "b"), ("POW", "^"), ("NUMBER", ".5"), ("DOT", "."), ("NAME", "x")]),
    ("if iffy else_ wrt", [("IF", "if"), ("NAME", "iffy"), ("NAME", "else_"), ("WRT", "wrt")]),
    ("'([' $ \\\n", [("STRING", "'(['"), ("BAD", "$"), ("CONTINUATION", "\\\n")]),
    ("x[...]//2", [("NAME", "x"), ("LSQB", "["), ("ELLIPSIS", "..."), ("RSQB", "]"), ("_FLOORDIV", "//"), ("NUMBER", "2")]),
    ("'open", [("BAD", "'"), ("NAME", "open")]),
])
def test_tokens(text, expected):
    found = list(tokens(text))
    assert [(t.kind, str(t)) for t in found] == expected
    assert all(text[t.start:t.end] == t for t in found)


@cache
def larks_lexer() -> tuple[re.Pattern[str], dict[str, dict[str, str]]]:
    """The terminals in Lark's own lexer order (priority, longest match first), and the keywords."""
    from lark import Lark

    lark = Lark((ROOT / "parser" / "grammar.lark").read_text(), parser="lalr", start="program")
    keywords, renamed = generate._keywords(list(lark.terminals))
    terminals = [t for t in lark.terminals if t.name not in renamed and not t.name.startswith("__IGNORE")]
    terminals.sort(key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
    return re.compile("|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terminals)), keywords


@settings(max_examples=1500)
@given(st.text(alphabet="abcfiexX019_.+-*/^=<>!%@()[],:;'\"#\\ \t\n\r٣é", max_size=12))
@pytest.mark.slow
def test_the_lexers_order_of_terminals_lexes_as_larks(text):
    """generate.py puts common terminals first; where that could change a match it keeps
    Lark's order, the oracle here."""
    larks, keywords = larks_lexer()
    for start in range(len(text)):
        match = larks.match(text, start)
        if match is None or text[start] in " \t\f":
            continue
        [first] = list(tokens(text[start:]))[:1] or [None]
        assert first is not None and (first.kind if first.kind not in keywords.get("NAME", {}).values() else "NAME", str(first)) \
            == (match.lastgroup, match.group()), (text, start)


def test_first_characters_of_a_pattern():
    assert generate._first_characters(r"\*\*|\^") == {ord("*"), ord("^")}
    assert generate._first_characters(r"(\r?\n)+") == {ord("\r"), ord("\n")}
    assert generate._first_characters(r"\d+") == {*range(ord("0"), ord("9") + 1), 128}  # 128: any other character
    assert generate._first_characters(r"x?") == generate._ANY  # it can match nothing
    assert generate._first_characters(r"[^a]") == generate._ANY


# ---- syntax errors, in words written out by hand ----------------------------------------------------


@pytest.mark.parametrize(("source", "kind", "message", "place"), [
    ("x +* 2", "syntax", "expected an expression, found '*'", (1, 4, 1, 5)),
    ("1 2", "syntax", "expected an operator, ';', end of input or end of line, found '2'", (1, 3, 1, 4)),
    ("x = = 1", "syntax", "expected an expression, found '='", (1, 5, 1, 6)),
    (")", "syntax", "expected an expression, ';', 'check', 'def', 'for', 'with', end of input or end of line, found ')'", (1, 1, 1, 2)),
    ("x ifa else b", "syntax", "expected an operator, ',', ';', '=', an update such as '+=', end of input or end of line, found 'ifa'",
     (1, 3, 1, 6)),
    ("1 iffy else 2", "syntax", "expected ';', end of input or end of line, found 'iffy'", (1, 3, 1, 7)),
    ("z = (1 if x elsey)", "syntax", "expected 'else', found 'elsey'", (1, 13, 1, 18)),
    ("x.1", "syntax", "expected an operator, ',', ';', '=', an update such as '+=', end of input or end of line, found '.1'", (1, 2, 1, 4)),
    ("x = 1;;\n\n)", "syntax", "expected an expression, ';', 'check', 'def', 'for', 'with', end of input or end of line, found ')'", (3, 1, 3, 2)),
    ("a, , b = 1", "syntax", "expected '=' or a name, found ','", (1, 4, 1, 5)),
    ("1j", "syntax", "complex numbers are not supported (gradcalc works in real float64; complex step is internal)", (1, 1, 1, 3)),
    ("3 + 2.5e3J", "syntax", "complex numbers are not supported (gradcalc works in real float64; complex step is internal)", (1, 5, 1, 11)),
    ("1 ! 2", "syntax", "'!' is not supported: there is no factorial, and for 'not x' write x == 0", (1, 3, 1, 4)),
    ("x = 'abc", "syntax", "unterminated string", (1, 5, 1, 6)),
    ("x\r", "syntax", "unexpected character '\\r'", (1, 2, 1, 3)),
    ("é = 1", "syntax", "unexpected character 'é'", (1, 1, 1, 2)),
    ("x = ", "incomplete", "unfinished input: expected an expression", (1, 4, None, None)),
    ("(1 + 2", "incomplete", "unfinished input: expected ')' or ','", (1, 7, None, None)),
    ("x = 1\ny = (\n", "incomplete", "unfinished input: expected an expression or ')'", (2, 6, None, None)),
    ("x = 3 +\n", "incomplete", "unfinished input: expected an expression", (1, 8, None, None)),
    ("check", "incomplete", "unfinished input: expected an expression or '='", (1, 6, None, None)),
    ("1 if 2", "incomplete", "unfinished input: expected 'else'", (1, 7, None, None)),
])
def test_syntax_errors(source, kind, message, place):
    with pytest.raises(LanguageError) as caught:
        parse_tree(source)
    err = caught.value
    assert (err.kind, err.message, (err.line, err.column, err.end_line, err.end_column)) == (kind, message, place)


# A line for each token after which a newline does not end the statement (lexer.CONTINUES),
# ending with it: what follows on the next line (`b = 2`) cannot go on from it.
LINES_CARRIED_ON = {
    "PLUS": "y = a +", "MINUS": "y = a -", "STAR": "y = a *", "SLASH": "y = a /", "_FLOORDIV": "y = a //",
    "PERCENT": "y = a %", "AT": "y = a @", "POW": "y = a **", "COMPARE": "y = a <", "AUGOP": "y +=", "EQUAL": "y =",
    "COMMA": "check a wrt a ,", "DOT": "y = a .", "IF": "y = a if", "ELSE": "y = a if a else", "CHECK": "check", "DEF": "def",
    "WRT": "check a wrt",
}


@pytest.mark.parametrize("kind", sorted(LINES_CARRIED_ON))
def test_a_line_that_needs_more_is_blamed_not_the_next_one(kind):
    """Found by a new user: `check x**2 wrt` with nothing after `wrt` read the next line as
    its variables and reported "expected ',' ... found '='" on that line. The error is
    placed at the token that carried the statement on, and says so."""
    from gradcalc.parser.lexer import CONTINUES

    assert set(LINES_CARRIED_ON) == set(CONTINUES)  # (a new continuing token gets a line here)
    line = LINES_CARRIED_ON[kind]
    with pytest.raises(LanguageError) as caught:
        parse_tree(f"a = 1\n{line}\nb = 2\n")
    err = caught.value
    last = line.split()[-1]
    assert (err.line, err.column) == (2, len(line) - len(last) + 1), err.message
    assert err.message.startswith(f"'{last}' at the end of line 2 carries the statement on to line 3"), err.message


def test_a_bracket_never_closed_is_named_where_it_opened():
    with pytest.raises(LanguageError) as caught:
        parse_tree("x = 2\ny = sin(x,\nz = 3\n")
    assert caught.value.message == "unfinished input: expected ')' or ',' (the '(' at line 2, column 8 is not closed)"


@pytest.mark.parametrize(("source", "good"), [
    ("x ifa else b\nx + 1", "x + 1"), ("y = [1, 2\ncheck y\n", "check y"), ("1 +* 2; z = 3", "z = 3"),
    # a line carried on by its last token, which the next line cannot follow: that line is its own statement
    ("check x ** 2 wrt\ny = 3\n", "y = 3"), ("y = x +\nz = 3\n", "z = 3"),
])
def test_one_bad_statement_costs_one_statement(source, good):
    tree, ranges, bad = parse_recovering(source)
    assert len(bad) == 1 and bad[0].error.kind in ("syntax", "incomplete")
    assert [source[start:end] for start, end in ranges] == [good]


# ---- where compiled instructions are placed ----------------------------------------------------


@pytest.mark.parametrize(("source", "quoted"), [
    ("(a) + (b)", ["a", "b", "(a) + (b)"]),
    ("x * (a + b)", ["x", "a", "b", "a + b", "x * (a + b)"]),
    ("(a * b) + (c if d else (e))", ["a", "b", "a * b", "d", "c", "e", "(a * b) + (c if d else (e))"]),
    ("-(a).sum(axis = (0))", ["a", "0", "(a).sum(axis = (0))", "-(a).sum(axis = (0))"]),
    ("f(\n  (x),\n  [1, (2)],\n)", ["x", "1", "2", "[1, (2)]", "f(\n  (x),\n  [1, (2)],\n)"]),
])
def test_instructions_quote_their_own_text(source, quoted):
    """What an error under an instruction underlines: its own text, brackets and all."""
    [compiled] = compile_program(source).statements
    lines = source.split("\n")

    def text(span: tuple[int, int, int, int]) -> str:
        line, column, end_line, end_column = span
        if line == end_line:
            return lines[line - 1][column - 1 : end_column - 1]
        return "\n".join([lines[line - 1][column - 1 :], *lines[line : end_line - 1], lines[end_line - 1][: end_column - 1]])

    assert [text(span) for op, _, span in compiled.code if op not in (JUMP, JUMP_IF_FALSE)] == quoted


@pytest.mark.parametrize(("source", "expected"), [
    ("(a*b).relu() + f(x, (y))", [
        (LOAD, (1, 2, 1, 3)), (LOAD, (1, 4, 1, 5)), (BINARY, (1, 2, 1, 5)), (METHOD, (1, 1, 1, 13)),
        (LOAD, (1, 18, 1, 19)), (LOAD, (1, 22, 1, 23)), (CALL, (1, 16, 1, 25)), (BINARY, (1, 1, 1, 25)),
    ]),
    ("a\n(b +\n c).sum(axis=0)", [
        (LOAD, (2, 2, 2, 3)), (LOAD, (3, 2, 3, 3)), (BINARY, (2, 2, 3, 3)), (CONST, (3, 14, 3, 15)), (METHOD, (2, 1, 3, 16)),
    ]),
])
def test_instructions_are_placed_where_their_text_is(source, expected):
    """Spans counted by hand (line, column, end line, end column; 1-based, end exclusive)."""
    code = compile_program(source).statements[-1].code
    assert [(op, span) for op, _, span in code] == expected
