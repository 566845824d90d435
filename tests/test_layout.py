"""The layout pass (parser/layout.py) as a class: lines, brackets, indentation, blocks,
comments and blank lines, read as Python reads them.

Random programs in the part of the language that is also Python (assignments,
expressions, `for` and `with` blocks nested, one-line bodies, continuation inside
brackets and after a `\\`, comments, blank lines, tabs and spaces, CRLF, trailing
blanks, with and without a final newline) are read by our parser and by Python's `ast`
and `tokenize` on the same text: the statements, the blocks that hold them and where
each starts and ends must agree, and so must the tokens left after comments, blank
lines and continuations are dropped. The same programs, spoiled (a line's indentation
changed, a bracket left open, a body taken away), must give a LanguageError with its
place, never a traceback; where ours is an indentation error, Python's is one too, on
the same line. And the REPL's "is the input complete" (PendingInput) answers as
`codeop.compile_command` does for every prefix, line by line, where that is Python.
"""
from __future__ import annotations

import ast
import codeop
import io
import tokenize
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gradcalc.parser import LanguageError
from gradcalc.parser.layout import DEDENT, INDENT, NO_SUCH_BLOCK, TOO_DEEP, Layout
from gradcalc.parser.lexer import END, NEWLINE
from gradcalc.parser.syntax import Node, PendingInput, count_checks, parse_statements, parse_tree, statement_end
from tests.strategies import kept, sampled

# ---- programs that are also Python --------------------------------------------------------------

NAMES = ["a", "b", "x", "y", "z1", "f", "g"]  # names in both languages (none a keyword of either)
INDENT_UNITS = [" ", "  ", "    ", "\t", "\t  "]
# A newline after an operator, which our language reads as Python reads `\` and a newline:
# a blank before the newline in our text, the `\` in Python's, so that every place in
# the two texts is the same.
BREAK = "\x00"


@kept  # (drawn inside other draws: one strategy per arguments)
@st.composite
def expressions(draw: Any, depth: int = 0) -> str:
    """An expression; inside brackets it may run over lines (with blanks and comments)."""
    if depth > 2 or draw(st.booleans()):
        return draw(sampled([*NAMES, "1", "2.5", "1e3"]))
    left, right = draw(expressions(depth + 1)), draw(expressions(depth + 1))
    operator = draw(sampled([" + ", " - ", " * ", " / ", " ** ", " @ "]))
    form = draw(sampled(["plain", "paren", "list", "call"]))
    if form == "plain":
        return left + operator + right
    # Inside brackets a newline is a blank: after the operator or a comma, before the closer.
    gap = draw(sampled(["", "\n", "\n    ", "  # note\n  ", "\n\n        ", " \t\n"]))
    if form == "paren":
        return f"({left}{operator.rstrip()}{gap or ' '}{right})"
    if form == "list":
        return f"[{left},{gap or ' '}{right}]"
    return f"f({left},{gap or ' '}{right})"


@kept
@st.composite
def simple_statements(draw: Any) -> str:
    form = draw(sampled(["assign", "expr", "augmented", "continued", "operator"]))
    name, value = draw(sampled(NAMES)), draw(expressions())
    if form == "assign":
        return f"{name} = {value}"
    if form == "augmented":
        return f"{name} {draw(sampled(['+=', '-=', '*=']))} {value}"
    if form == "continued":  # a `\` joins the next line
        return f"{name} = {value} + \\\n    {draw(expressions())}"
    if form == "operator":  # so does an operator that ends the line (where Python has a `\`)
        return f"{name} = {value} +{BREAK}    {draw(expressions())}"
    return value


@kept
@st.composite
def lines_of(draw: Any, indent: str, depth: int) -> list[str]:
    """The lines of a block of statements at `indent` (blank and comment lines among them)."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(0, 1))):  # a blank or comment line, at any indentation
            lines.append(draw(sampled(["", "   ", "# a comment", "  # indented comment", "\t"])))
        kind = draw(sampled(["simple", "simple", "two", "block", "one-line"] if depth < 3 else ["simple", "two"]))
        comment = draw(sampled(["", "", "  # why"]))
        if kind == "simple":
            lines.append(indent + draw(simple_statements()) + comment)
        elif kind == "two":  # two statements on a line
            lines.append(f"{indent}{draw(simple_statements())}; {draw(simple_statements())}{comment}")
        else:
            head = draw(sampled(["for i in range(3):", "for row in [x, y]:", "with no_grad:"]))
            if kind == "one-line":
                body = "; ".join(draw(st.lists(simple_statements(), min_size=1, max_size=2)))
                lines.append(f"{indent}{head} {body}{comment}")
            else:
                lines.append(indent + head + comment)
                lines += draw(lines_of(indent + draw(sampled(INDENT_UNITS)), depth + 1))
    return lines


@st.composite
def programs(draw: Any) -> tuple[str, str]:
    """A program as our text and as Python's (the same but for the `\\` after an operator
    that ends a line): its lines, each with trailing blanks or not, joined by LF or CRLF,
    with or without a final newline."""
    lines = draw(lines_of("", 0))
    lines = [line + draw(sampled(["", "", " ", "\t "])) for line in lines]
    newline = draw(sampled(["\n", "\r\n"]))
    text = newline.join("\n".join(lines).split("\n")) + draw(sampled(["", newline, newline + newline]))
    return text.replace(BREAK, " " + newline), text.replace(BREAK, "\\" + newline)


def python_reads(text: str) -> ast.Module | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text)
        except SyntaxError:
            return None


# ---- both readings, as the same shape -----------------------------------------------------------

KINDS = {"assign": "assign", "aug_assign": "augmented", "expr_stmt": "expr", "for_loop": "for", "with_block": "with"}
PYTHON_KINDS = {ast.Assign: "assign", ast.AugAssign: "augmented", ast.Expr: "expr", ast.For: "for", ast.With: "with"}


def place(text: str, offset: int) -> tuple[int, int]:
    """Line (from 1) and column (from 0), as ast counts them."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset) - 1


def ours(text: str, node: Node) -> tuple[Any, ...]:
    kind = KINDS[node.kind]
    body = node.children[2:] if kind == "for" else node.children[1:] if kind == "with" else []
    return (kind, place(text, node.start), place(text, node.end), [ours(text, child) for child in body])


def pythons(node: ast.stmt) -> tuple[Any, ...]:
    kind = PYTHON_KINDS[type(node)]
    body = node.body if isinstance(node, ast.For | ast.With) else []
    return (kind, (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset), [pythons(child) for child in body])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
@pytest.mark.slow
def test_statements_and_blocks_are_read_as_python_reads_them(texts):
    text, python_text = texts
    module = python_reads(python_text)
    assume(module is not None)
    tree, ranges = parse_statements(text)
    assert [ours(text, node) for node in tree.children] == [pythons(node) for node in module.body], text
    # The layout pass's own record of the statements (what error messages and check files use)
    assert [(place(text, start), place(text, end)) for start, end in ranges] == [
        ((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)) for node in module.body]


def python_tokens(text: str) -> list[tuple[str, tuple[int, int]]]:
    dropped = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    found = tokenize.generate_tokens(io.StringIO(text).readline)
    return [(t.string, t.start) for t in found if t.type not in dropped]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
@pytest.mark.slow
def test_the_tokens_the_parser_gets_are_pythons_less_its_newlines(texts):
    text, python_text = texts
    assume(python_reads(python_text) is not None)
    made = {INDENT, DEDENT, NEWLINE, END}
    given_tokens = [(text[start:end], place(text, start)) for kind, _, start, end in Layout(text) if kind not in made]
    assert given_tokens == python_tokens(python_text), text


def test_made_tokens_stand_where_the_token_before_them_ends():
    text = "for i in x:\n    a = 1  # c\n\nb = 2\n"
    lexemes = [(kind, start, end) for kind, _, start, end in Layout(text)]
    assert (INDENT, 11, 11) in lexemes  # after the colon: the body starts
    one = text.index("1") + 1
    assert lexemes[lexemes.index((DEDENT, one, one)) + 1] == (NEWLINE, one, one)  # the loop ends after its last token


# ---- bad layout: a message with its place --------------------------------------------------------


@st.composite
def spoiled(draw: Any) -> tuple[str, str, str]:
    """A program with one thing wrong with its layout, as ours and as Python's text
    (programs), and what."""
    lines = draw(lines_of("", 0))
    how = draw(sampled(["indent", "dedent", "open bracket", "no body", "tab"]))
    # (mostly a line of a block: outside blocks indentation means nothing)
    inside = [j for j, text in enumerate(lines) if text[:1].isspace() and text.strip() and not text.strip().startswith("#")]
    i = draw(sampled(inside)) if inside and how != "open bracket" and draw(st.booleans()) else draw(st.integers(0, len(lines) - 1))
    line = lines[i]
    if how == "indent":
        lines[i] = draw(sampled([" ", "  ", "\t"])) + line
    elif how == "dedent":
        lines[i] = line[draw(st.integers(1, 3)):] if line[:1].isspace() else line
    elif how == "open bracket":
        lines[i] = line + " + (x"
    elif how == "no body":
        lines.insert(i, "for i in range(2):")
    else:
        lines[i] = line.replace("    ", "\t", 1)
    newline = draw(sampled(["\n", "\r\n"]))
    text = newline.join("\n".join(lines).split("\n")) + draw(sampled(["", newline]))
    return text.replace(BREAK, " " + newline), text.replace(BREAK, "\\" + newline), how


def _tab_sizes_agree(text: str) -> bool:
    """Whether Python reads `text` alike with tabs of 1 and of 8 columns (docs/language.md,
    "The layout pass": a tab counts as one column, and the blocks are Python's where its
    two sizes agree; where they do not, both refuse the program, perhaps on other lines)."""
    def verdict(tab: int) -> Any:
        try:
            compile(text.expandtabs(tab), "<text>", "exec")
        except SyntaxError as err:
            return type(err), err.lineno
        return None

    return verdict(1) == verdict(8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spoiled())
@pytest.mark.slow
def test_bad_layout_is_a_message_at_its_place(case):
    text, python_text, _ = case
    try:
        parse_tree(text)
    except LanguageError as err:
        lines = text.split("\n")
        assert err.message and "Traceback" not in err.message
        assert 1 <= err.line <= len(lines) and 1 <= err.column <= len(lines[err.line - 1]) + 1, (text, err)
        if err.message in (TOO_DEEP, NO_SUCH_BLOCK) and _tab_sizes_agree(python_text):  # Python's indentation rules are ours: the same line
            with pytest.raises(IndentationError) as python:
                compile(python_text, "<text>", "exec")
            assert python.value.lineno == err.line, (text, err, python.value)
        return
    module = python_reads(python_text)
    if module is not None:  # (a change Python still reads, as a program: ours reads it the same)
        tree, _ = parse_statements(text)
        assert [ours(text, node) for node in tree.children] == [pythons(node) for node in module.body], text


@pytest.mark.parametrize(("text", "message", "place"), [
    ("for i in x:\n    a\n      b\n", TOO_DEEP, (3, 7)),
    ("for i in x:\n    a\n  b\n", NO_SUCH_BLOCK, (3, 3)),
    ("for i in x: for j in y:\n    a\n", "a block on one line", (1, 24)),
    ("for i in x:\nb\n", "expected an indented block", (2, 1)),
    ("y = (1 +\n", "unfinished input", (1, 9)),  # (just after the last character)
])
def test_each_kind_of_bad_layout_has_its_words_and_place(text, message, place):
    with pytest.raises(LanguageError) as err:
        parse_tree(text)
    assert message in err.value.message
    assert (err.value.line, err.value.column) == place


# ---- the readings without the parser: statement_end, count_checks ------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
@pytest.mark.slow
def test_statement_end_is_where_the_parser_ends_each_statement(texts):
    text, python_text = texts
    assume(python_reads(python_text) is not None)
    _, ranges = parse_statements(text)
    for (start, end), after in zip(ranges, [*(s for s, _ in ranges[1:]), len(text)]):
        found = statement_end(text, start)
        assert end <= found <= after and not text[end:found].split("#")[0].strip(), (text, start)  # (a comment may be in)


def test_count_checks_counts_statements_that_are_checks():
    text = "check x\ncheck = 3\nfor i in r:\n    check i == i\ny = (1 +\n  check)\na; check b; x\n"
    assert count_checks(text) == 3  # not `check = 3`, not the name in brackets
    assert count_checks("x = $ + 1\ncheck y\n") == 1  # a bad character is counted past


# ---- the REPL: is the input complete? ------------------------------------------------------------


def python_says(text: str) -> bool | None:
    """codeop's answer (complete or not), None where Python finds an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return codeop.compile_command(text) is not None
        except (SyntaxError, ValueError, OverflowError):
            return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
@pytest.mark.slow
def test_the_repl_knows_the_input_is_complete_when_python_does(texts):
    text, python_text = texts
    assume(python_reads(python_text) is not None)
    pending = PendingInput()
    python_lines = python_text.replace("\r\n", "\n").split("\n")
    for n, line in enumerate(text.replace("\r\n", "\n").split("\n")):
        complete = pending.add(line)
        python = python_says("\n".join(python_lines[n + 1 - len(pending.lines) : n + 1]))
        # Two choices of the REPL's own: a loop with its body on its line is complete at once
        # (Python waits for a blank line after any compound statement, the REPL only after
        # a block of lines), and a line of blanks ends a block as an empty one does (an
        # editor's indentation left on it).
        first = pending.lines[0]
        one_line_loop = first.lstrip().startswith(("for ", "with ")) and not first.rstrip().endswith(":")
        blanks = line != "" and not line.strip()
        if python is not None and not ((one_line_loop or blanks) and complete):
            assert complete == python, pending.lines
        if complete:
            pending.clear()


# Found by a helper's hostile inputs: a run of blank lines was one repetition of a group in
# the newline's pattern, for which Python's regular expressions keep a state per line to
# backtrack into: a script of 1,000,000 blank lines (1 MB) took 850 MB to read. The
# pattern takes its run of newlines without backtracking now (possessive).
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("around", ["{run}", "x = 2{run}y = x", "for i in range(2):{run}    z = i{run}"])
def test_a_long_run_of_blank_lines_is_read_in_little_memory(newline, around):
    import tracemalloc

    from gradcalc.parser import compile_program

    run = newline * 200_000
    source = around.format(run=run) + newline
    tracemalloc.start()
    try:
        compiled = compile_program(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30_000_000, peak  # (the source itself is 0.2 to 0.4 MB; it was 200 MB)
    def shape(statements: Any) -> list[Any]:  # (the places differ: the blank lines are lines)
        return [(s.kind, [(op, arg) for op, arg, _ in s.code], shape(s.body)) for s in statements]

    assert shape(compiled.statements) == shape(compile_program(around.format(run=newline) + newline).statements)
