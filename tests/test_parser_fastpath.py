"""The fast path of parsing (parser/fastpath.py) gives what Lark's parser gives, or nothing.

Where the fast path answers, its tree must equal Lark's tree token for token (type, text
and every position), and the statement ranges must be the same; where the source has a
syntax error it must not answer, so that Lark reports the error in the words it always
has. The sources: every example file and every block in the docs, programs generated
from the grammar's constructs (with blanks, comments, continuations and newlines inside
brackets), and token soup and random text, which are mostly errors.
"""
from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.parser import LanguageError, compile_program, fastpath, generate, syntax
from gradcalc.parser.compiler import BINARY, CALL, CONST, JUMP, JUMP_IF_FALSE, LOAD, METHOD
from gradcalc.parser.standalone import Token, Tree, UnexpectedInput

from .test_language import RANDOM_TEXT, TOKEN_SOUP

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.gc"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def lark(source: str) -> tuple[Tree, list[tuple[int, int]]] | None:
    """Lark's own parse (the slow path): the tree and statement ranges, or None on a syntax error."""
    parser = syntax.lark_parser()
    try:
        tree = parser.parse(source)
    except UnexpectedInput:
        return None
    return tree, parser.options.postlex.statements


def places(tree: Tree) -> list[tuple[object, ...]]:
    """Every token in the tree with all it carries (Tree equality compares type and text only)."""
    found, work = [], [tree]
    while work:  # iterative: generated trees may be deep
        node = work.pop()
        if isinstance(node, Tree):
            work += reversed(node.children)
        elif isinstance(node, Token):
            found.append((node.type, node.value, node.start_pos, node.line, node.column, node.end_line, node.end_column, node.end_pos))
    return found


def node_ranges(tree: Tree) -> list[tuple[str, tuple[int, int] | None]]:
    """The range the fast path gave each node of its tree (fastpath.parse), in the tree's order."""
    return [(node.data, node._meta) for node in tree.iter_subtrees_topdown()]


def agrees(source: str) -> bool:
    """The fast path gives Lark's result, or gives up; True when it answered."""
    fast = fastpath.parse(source)
    slow = lark(source)
    if fast is None:
        return False
    assert slow is not None, f"the fast path accepted what Lark rejects: {source!r}"
    assert fast[0] == slow[0], source
    assert places(fast[0]) == places(slow[0]), source
    assert fast[1] == slow[1], source
    return True


def test_a_one_line_command_parses_without_loading_larks_parser():
    """Every parse starts on the fast path, whose tables come pickled (prebuilt.py): a
    program without a syntax error never unpickles Lark's parser; one with an error does,
    for Lark's words about it."""
    code = ("from gradcalc.parser import compile_program, syntax; compile_program('x * 2'); print(syntax.lark_parser.cache_info().currsize); "
            "compile_program('y = [1, 2]; y.sum()')\ntry: compile_program('x +* 2')\nexcept Exception as e: print(type(e).__name__)\n"
            "print(syntax.lark_parser.cache_info().currsize)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "LanguageError", "1"]


def _comparable(tables: fastpath._Tables) -> dict[str, object]:
    """The tables as plain data: Lark's callbacks by their type and what they hold."""
    def callback(build: object) -> object:
        if build is None or not hasattr(build, "__dict__"):  # None, or a partial(Tree, name)
            return repr(build)
        return type(build).__name__, {key: callback(value) for key, value in vars(build).items()}

    fields = {name: getattr(tables, name) for name in tables.__slots__ if name not in ("units", "gotos", "rules")}
    fields["tokens"], fields["blank"] = tables.tokens.pattern, tables.blank.pattern
    fields["rules"] = [(size, name, callback(build), plain) for size, name, build, plain in tables.rules]
    return fields


def test_the_prebuilt_tables_are_the_ones_read_from_the_parser():
    """prebuilt.py holds the tables pickled (generate.py); they must be what build_tables
    reads from Lark's parser today, and their filled caches must agree with the table."""
    prebuilt, built = fastpath._tables(), fastpath.build_tables(syntax.lark_parser())
    assert prebuilt is not built
    assert _comparable(prebuilt) == _comparable(built)
    assert prebuilt.gotos  # filled by generate.WARM_UP's parses
    for source in generate.WARM_UP:
        ours, theirs = fastpath.parse(source, built), fastpath.parse(source, prebuilt)
        assert ours == theirs
        assert node_ranges(ours[0]) == node_ranges(theirs[0])
    for table in ("gotos", "units"):
        old, new = getattr(prebuilt, table), getattr(built, table)
        shared = old.keys() & new.keys()
        assert all(old[key] == new[key] for key in shared), table
    assert prebuilt.gotos.keys() & built.gotos.keys()


# ---- the examples and the docs -----------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_file_parses_the_same_on_the_fast_path(path):
    assert agrees(path.read_text())


def doc_sources() -> list[str]:
    """Every fenced block of the docs, and each line of it, and each quoted expression of a
    shell command in it: mostly programs, some not (those must give up)."""
    sources = []
    for path in DOCS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(), re.S):
            sources.append(block)
            for line in block.splitlines():
                sources.append(line.removeprefix(">>> ").removeprefix("... "))
                sources += re.findall(r"'([^']*)'", line)
    return sources


def test_every_doc_block_parses_the_same_on_the_fast_path():
    for source in doc_sources():
        answered = agrees(source)
        assert answered or lark(source) is None, f"a program the fast path left to Lark: {source!r}"


# ---- generated programs ---------------------------------------------------------------------------

blank = st.sampled_from(["", " ", "  ", "\t", " \f", " \\\n ", " # note\\\n"])
name = st.sampled_from(["x", "y", "W", "_a1", "tanh", "checked", "iffy", "define", "wrt_", "true_"])
number = st.sampled_from(["1", "2.5", ".5", "1.", "1e3", "2.5E-3", "1_000", "0x1F", "0b101", "0o17", "٣"])
atom = st.one_of(name, number, st.sampled_from(["'s'", '"t"', "true", "false"]))


def joined(parts: list[str], spaces: list[str]) -> str:
    return "".join(part + space for part, space in zip(parts, spaces))


@st.composite
def spaced(draw, *parts: str) -> str:
    """`parts` with blanks (or newlines: they are inside brackets) between them."""
    spaces = draw(st.lists(st.one_of(blank, st.just("\n")), min_size=len(parts) - 1, max_size=len(parts) - 1))
    return joined(list(parts), [*spaces, ""])


def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.sampled_from(["+", "-", "*", "/", "@", "//", "%", "**", "^", "<", "<=", "==", "!=", ">", ">="])
    return st.one_of(
        st.tuples(inner, binary, inner).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(st.sampled_from(["-", "+", "- -"]), inner).map("".join),
        st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} if {t[1]} else {t[2]}"),
        st.tuples(name, st.lists(inner, max_size=3), st.booleans()).map(
            lambda t: f"{t[0]}({', '.join(t[1])}{', axis=' + t[1][0] if t[2] and t[1] else ''})"),
        st.tuples(inner, name, st.lists(inner, max_size=2)).map(lambda t: f"({t[0]}).{t[1]}({', '.join(t[2])})"),
        st.tuples(inner, name | st.sampled_from(["if", "else", "wrt", "check", "def"])).map(lambda t: f"({t[0]}).{t[1]}"),
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
def statement(draw) -> str:
    e = draw(expression)
    form = draw(st.sampled_from(["expr", "assign", "multi", "aug", "def", "check", "check_eq", "keyword"]))
    target = draw(name)
    if form == "assign":
        return f"{target} = {e}"
    if form == "multi":
        return f"{target}, y = {e}"
    if form == "aug":
        return f"{target} {draw(st.sampled_from(['+=', '-=', '*=', '/=', '//=', '%=']))} {e}"
    if form == "def":
        return f"def {target}({', '.join(draw(st.lists(name, max_size=3)))}) = {e}"
    if form == "check":
        wrt = draw(st.lists(name, max_size=2))
        return f"check {e}" + (f" wrt {', '.join(wrt)}" if wrt else "") + draw(st.sampled_from(["", " tol=1e-3", " at=1 h=2"]))
    if form == "check_eq":
        return f"check {e} == {draw(expression)}"
    if form == "keyword":
        return f"{draw(st.sampled_from(['check', 'def', 'true', 'false']))} = {e}"
    return e


programs = st.lists(st.tuples(statement(), st.sampled_from(["\n", ";", "; ", "\n\n", " # done\n", "\r\n", "\n  \n"])), max_size=6).map(
    lambda items: "".join(s + sep for s, sep in items))


@settings(max_examples=400)
@given(programs)
def test_generated_programs_parse_the_same_on_the_fast_path(source):
    agrees(source)


def compiled(source: str) -> tuple[object, ...]:
    """What compiling `source` gives (each statement, or each error), comparable with ==."""
    try:
        program = compile_program(source, recover=True)
    except LanguageError as err:
        return ("raised", err.kind, err.message, err.line, err.column, err.end_line, err.end_column)
    return tuple(
        (s.kind, s.code, s.span, s.text, s.targets, s.wrt, s.options, s.expected, s.function,
         s.error and (s.error.kind, s.error.message, s.error.line, s.error.column, s.error.end_line, s.error.end_column))
        for s in program.statements
    )


def compiled_by_lark(source: str) -> tuple[object, ...]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fastpath, "parse", lambda text: None)
        return compiled(source)


@settings(max_examples=300)
@given(programs)
def test_generated_programs_compile_the_same_on_the_fast_path(source):
    """The same trees compile to the same code. Lark's tree comes without the nodes'
    ranges, so the fast path's is compiled here without them too; that its ranges are
    right is test_each_node_is_placed_on_exactly_its_own_text's business."""
    parse = fastpath.parse

    def without_ranges(text: str) -> object:
        parsed = parse(text)
        for node in [] if parsed is None else parsed[0].iter_subtrees():
            node._meta = None
        return parsed

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fastpath, "parse", without_ranges)
        assert compiled(source) == compiled_by_lark(source)


EXPRESSIONS = {"add", "sub", "mul", "div", "matmul", "pow", "floor_divide", "remainder", "compare", "neg", "pos", "call", "method",
               "attribute", "index", "tensor", "conditional", "name", "number", "string", "true", "false"}


@settings(max_examples=300)
@given(programs)
def test_each_node_is_placed_on_exactly_its_own_text(source):
    """The oracle is the parser itself: the text of an expression node's range, parsed
    alone, is that node again (no bracket of its own missing, none of its parent's)."""
    parsed = fastpath.parse(source)
    if parsed is None:
        return
    for node in parsed[0].iter_subtrees_topdown():
        if node.data in EXPRESSIONS and node.children[:1] != ["..."]:  # (`...` is only a subscript)
            start, end = node._meta
            alone = fastpath.parse(source[start:end])
            assert alone is not None, (source, source[start:end])
            [statement] = alone[0].children
            assert statement.data == "expr_stmt" and statement.children == [node], (source, source[start:end])


@pytest.mark.parametrize(("source", "quoted"), [
    ("(a) + (b)", ["a", "b", "(a) + (b)"]),
    ("x * (a + b)", ["x", "a", "b", "a + b", "x * (a + b)"]),
    ("(a * b) + (c if d else (e))", ["a", "b", "a * b", "d", "c", "e", "(a * b) + (c if d else (e))"]),
    ("-(a).sum(axis = (0))", ["a", "0", "(a).sum(axis = (0))", "-(a).sum(axis = (0))"]),
    ("f(\n  (x),\n  [1, (2)],\n)", ["x", "1", "2", "[1, (2)]", "f(\n  (x),\n  [1, (2)],\n)"]),
])
def test_instructions_quote_their_own_text(source, quoted):
    """What an error under an instruction underlines: its own text, brackets and all
    (`(a) + (b)` was quoted as `a) + (b`)."""
    [statement] = compile_program(source).statements
    lines = source.split("\n")

    def text(span: tuple[int, int, int, int]) -> str:
        line, column, end_line, end_column = span
        if line == end_line:
            return lines[line - 1][column - 1 : end_column - 1]
        return "\n".join([lines[line - 1][column - 1 :], *lines[line : end_line - 1], lines[end_line - 1][: end_column - 1]])

    assert [text(span) for op, _, span in statement.code if op not in (JUMP, JUMP_IF_FALSE)] == quoted


def test_most_generated_programs_take_the_fast_path():
    """Otherwise the tests above would pass without testing anything."""
    answered = []

    @settings(max_examples=200, database=None)
    @given(programs)
    def count(source):
        answered.append(fastpath.parse(source) is not None)

    count()
    assert sum(answered) > 0.8 * len(answered)


@settings(max_examples=1000)
@given(TOKEN_SOUP)
def test_token_soup_parses_the_same_or_falls_back(source):
    agrees(source)


@settings(max_examples=500)
@given(RANDOM_TEXT)
def test_random_text_parses_the_same_or_falls_back(source):
    agrees(source)


@pytest.mark.parametrize("source", [
    "", "\n", "  \n\n", "# only a comment", "x", "x\n", "x;", ";;x;;", "x \\\n + 1", "f(\n1,\n2\n)", "x +\n1", "x = 1 # c\ny = 2",
    "[1, 2,]", "(1,)", "()", "x[..., None]", "x[::]", "a, b = f(x)", "x //= 2", "def f() = 1", "check x wrt x tol=1",
    "check f(x) == 1", "check = 3", "true = 1", "x\r\ny", "1 if x else 2 if y else 3", "-x ** -y ** 2", "x.T.sum(axis=0)[0]",
])
def test_small_programs_take_the_fast_path_and_agree(source):
    assert agrees(source)


def test_nodes_built_without_the_callback_are_the_callbacks_nodes():
    """Where the loop makes `Tree(name, a slice of the values)` itself, Lark's callback makes
    the same node from the same children (each child a distinct marker)."""
    callbacks = list(syntax.lark_parser().parser.parser.parser.callbacks.values())
    plain = [(rule, callback) for rule, callback in zip(fastpath._tables().rules, callbacks) if rule[3] is not None]
    assert {rule[3][0] for rule, _ in plain} >= {"add", "mul", "name", "number", "call", "method", "index", "assign"}
    for (size, _, _, (name, kept)), callback in plain:
        values = [Token("X", str(i)) for i in range(size)]
        built = Tree(name, values[kept])
        assert built == callback(list(values))


@pytest.mark.parametrize("source", ["x = if", "x.if", "y = 1\nz = x.else + (a) * (b)\ncheck f(if) wrt x"])
def test_a_keyword_where_only_a_name_can_be_is_a_name_as_in_lark(source):
    """Lark's contextual lexer reads these keywords as names; so does the fast path (and
    so a whole file is not left to Lark, whose trees have no ranges, for one of them)."""
    assert agrees(source)


def test_where_lark_lexes_by_context_otherwise_the_fast_path_gives_up():
    assert fastpath.parse("1 iffy else 2") is None  # Lark's own lexer: `1 if fy else 2`
    agrees("1 iffy else 2")


@pytest.mark.parametrize("source, word, column", [
    ("1 iffy else 2", "iffy", 3), ("x ifa else b", "ifa", 3), ("y = x ifa else b", "ifa", 7), ("z = (1 if x elsey)", "elsey", 13),
])
def test_a_keyword_run_into_a_word_is_not_split_off_it(source, word, column):
    """Lark's contextual lexer, where only a keyword fits, split `ifa` into `if a`: `x ifa
    else b` ran as `x if a else b`. Words are read whole, as the fast path reads them."""
    with pytest.raises(LanguageError) as caught:
        compile_program(source)
    assert f"found '{word}'" in caught.value.message and caught.value.column == column
    [error, good] = compile_program(f"{source}\nx + 1", recover=True).statements
    assert error.kind == "error" and f"found '{word}'" in error.error.message and good.kind == "expr"


# ---- errors: reported exactly as before -----------------------------------------------------------

ERRORS = [
    "x = ", "(1 + 2", "f(1,", "[1, 2", "1 +", "x = 3 +\n", "x = 1\ny = (2\n", "1 2", "x = = 1", ")", "1 ! 2", "x = 'abc",
    "1j", "3 + 2.5e3J", "def = ", "check", "x.1", "f(a=1, 2)", "x @@ y", "1 if 2", "a, = 1", "x = 1;;\n\n)", "\\", "x\r",
    "y = [1, 2\ncheck y\n", "x = 1\ny = (\n", "é = 1",
]


def error_of(source: str) -> tuple[object, ...]:
    try:
        compile_program(source)
    except LanguageError as err:
        return (err.kind, err.message, err.line, err.column, err.end_line, err.end_column)
    return ()


@pytest.mark.parametrize("source", ERRORS)
def test_syntax_errors_fall_back_and_read_as_before(source, monkeypatch):
    agrees(source)  # a syntax error gives up; `f(a=1, 2)` parses, and the compiler refuses it
    fast, fast_recovered = error_of(source), compiled(source)
    assert fast
    monkeypatch.setattr(fastpath, "parse", lambda text: None)
    assert fast == error_of(source)
    assert fast_recovered == compiled(source)


@settings(max_examples=300)
@given(TOKEN_SOUP)
def test_token_soup_errors_read_as_before(source):
    fast, fast_recovered = error_of(source), compiled(source)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fastpath, "parse", lambda text: None)
        assert fast == error_of(source)
        assert fast_recovered == compiled(source)


def test_incomplete_input_is_still_incomplete_for_the_repl():
    pending = syntax.PendingInput()
    assert not pending.add("x = f(1,")
    assert pending.add("2)")
    with pytest.raises(LanguageError) as info:
        syntax.parse_tree("x = (1 +")
    assert info.value.incomplete


# ---- the lexer's order of alternatives --------------------------------------------------------------


@cache
def lexers() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The terminals as one regular expression in Lark's order, and in the fast path's order."""
    from gradcalc.parser.standalone import BasicLexer

    terminals = BasicLexer(syntax.lark_parser().lexer_conf).scanner.terminals
    return re.compile(fastpath._alternation(terminals)), re.compile(fastpath._alternation(fastpath._quick_order(terminals)))


@settings(max_examples=2000)
@given(st.text(alphabet="abcfiexX019_.+-*/^=<>!%@()[],:;'\"#\\ \t\n\r٣é", max_size=12))
def test_the_quick_order_of_terminals_lexes_as_lark_order(text):
    larks, quick = lexers()
    for start in range(len(text)):
        a, b = larks.match(text, start), quick.match(text, start)
        assert (a and (a.lastgroup, a.group())) == (b and (b.lastgroup, b.group()))


def test_first_characters_of_a_pattern():
    assert fastpath._first_characters(r"\*\*|\^") == {ord("*"), ord("^")}
    assert fastpath._first_characters(r"(\r?\n)+") == {ord("\r"), ord("\n")}
    assert fastpath._first_characters(r"\d+") == {*range(ord("0"), ord("9") + 1), 128}  # 128: any other character
    assert fastpath._first_characters(r"x?") == fastpath._ANY  # it can match nothing
    assert fastpath._first_characters(r"[^a]") == fastpath._ANY


# ---- where the compiled instructions are placed ----------------------------------------------


@pytest.mark.parametrize("source, expected", [
    # `(a*b)`'s "(" is no token: the method call's place reaches back to it, and on to its ")";
    # the call takes in both of its closing brackets (it was placed without the last one)
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
