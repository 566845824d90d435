"""Every error is shown where it is: through the real command (and the REPL), the line and
column it names and the caret under the source, counted by hand."""
from __future__ import annotations

import pytest

from gradcalc.cli import render
from gradcalc.cli.repl import Repl

from .test_cli import gradcalc
from .test_repl import drive


def shown(done) -> list[str]:
    """The error's own lines: the message with its place, the source line, the caret."""
    lines = done.stderr.rstrip("\n").split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("error:"))
    return lines[first:first + 3]


@pytest.mark.parametrize(("args", "expected"), [
    # a bracketed operand is in its parent's place, and only its own text is its place
    (["(a) + (b)", "b=1"], ["error: unknown name 'a'  [line 1, column 2]", "1 | (a) + (b)", "     ^"]),
    (["(a) + (b)", "a=[1, 2]", "b=[1, 2, 3]"],
     ["error: shapes do not fit for +: (2,) + (3,)  [line 1, column 1]", "1 | (a) + (b)", "    ^^^^^^^^^"]),
    (["x * (a + b)", "x=1", "a=[1, 2]", "b=[1, 2, 3]"],
     ["error: shapes do not fit for +: (2,) + (3,)  [line 1, column 6]", "1 | x * (a + b)", "         ^^^^^"]),
    (["x * (a + b)", "x=[1, 2, 3]", "a=1", "b=[1, 2]"],
     ["error: shapes do not fit for *: (3,) * (2,)  [line 1, column 1]", "1 | x * (a + b)", "    ^^^^^^^^^^^"]),
    (["f(x, (y))", "x=1", "y=2"], ["error: unknown function 'f'  [line 1, column 1]", "1 | f(x, (y))", "    ^^^^^^^^^"]),
    (["sin(x, (zz))", "x=1"], ["error: unknown name 'zz'  [line 1, column 9]", "1 | sin(x, (zz))", "            ^^"]),
    # keywords used as names: the name itself
    (["x = if"], ["error: 'if' is a keyword of the language and cannot be used as a name; choose another  [line 1, column 5]",
                  "1 | x = if", "        ^^"]),
    (["check = 3"], ["error: 'check' is a keyword of the language and cannot be used as a name; choose another  [line 1, column 1]",
                     "1 | check = 3", "    ^^^^^"]),
    (["y = 1; def = 2"], ["error: 'def' is a keyword of the language and cannot be used as a name; choose another  [line 1, column 8]",
                          "1 | y = 1; def = 2", "           ^^^"]),
    (["def f(x, else) = x; f(1, 2)"],
     ["error: 'else' is a keyword of the language and cannot be used as a name; choose another  [line 1, column 10]",
      "1 | def f(x, else) = x; f(1, 2)", "             ^^^^"]),
    (["wrt += 1"], ["error: 'wrt' is a keyword of the language and cannot be used as a name; choose another  [line 1, column 1]",
                    "1 | wrt += 1", "    ^^^"]),
    # in a user function's body: placed in its definition
    (["def f(u) = (u) + (zz)\nf(1)"], ["error: unknown name 'zz'  [line 1, column 19]", "1 | def f(u) = (u) + (zz)", "                      ^^"]),
    # function values: the call, the transformation's call, or the text in the lambda's body
    (["x = 3; x(2)"], ["error: x is not a function: it holds the number 3, which cannot be called  [line 1, column 8]",
                       "1 | x = 3; x(2)", "           ^^^^"]),
    (["f = lambda x: x; f(1, 2)"], ["error: <lambda x> takes 1 argument, got 2  [line 1, column 18]", "1 | f = lambda x: x; f(1, 2)",
                                    "                     ^^^^^^^"]),
    (["y * grad(lambda x: [x, x])(1)", "y=2"],
     ["error: grad(lambda x: [x, x]): the function must return a scalar, got shape (2,); for the derivatives of each output use jacrev "
      "or jacfwd  [line 1, column 5]", "1 | y * grad(lambda x: [x, x])(1)", "        ^^^^^^^^^^^^^^^^^^^^^^^^^"]),
    (["g = grad(lambda x, y: x * y, argnums=2)"],
     ["error: grad(lambda x, y: x * y): argnums 2 is out of range: the function takes 2 arguments  [line 1, column 5]",
      "1 | g = grad(lambda x, y: x * y, argnums=2)", "        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"]),
    (["vmap(lambda x, y: x * y)([1, 2, 3], [1, 2])"],
     ["error: vmap(lambda x, y: x * y): the mapped axes differ in length: argument 0 has 3 along axis 0, argument 1 has 2 along axis 0  "
      "[line 1, column 1]", "1 | vmap(lambda x, y: x * y)([1, 2, 3], [1, 2])", "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"]),
    (["f = lambda x: x; 2 * (f + 1)"],
     ["error: the function <lambda x> cannot be used with +: call it, as in f(x), to use its value  [line 1, column 23]",
      "1 | f = lambda x: x; 2 * (f + 1)", "                          ^^^^^"]),
    (["grad(lambda x: x + (zz))(1)"], ["error: unknown name 'zz'  [line 1, column 21]", "1 | grad(lambda x: x + (zz))(1)", "                        ^^"]),
    (["def f(x) = x\ngrad(f)(1, 2)"], ["error: f(x) takes 1 argument, got 2  [line 2, column 1]", "2 | grad(f)(1, 2)", "    ^^^^^^^^^^^^^"]),
    # a syntax error, after a good statement and on a later line
    (["y = 2\nz = (y +* 2)"], ["error: expected an expression, found '*'  [line 2, column 9]", "2 | z = (y +* 2)", "            ^"]),
])
def test_eval_places_errors_exactly(args, expected):
    done = gradcalc("eval", *args)
    assert done.returncode == 2
    assert shown(done) == expected


def test_an_error_in_a_binding_is_placed_in_the_binding():
    done = gradcalc("eval", "y * 2", "x=1", "y=(x) + (zz)")
    assert done.returncode == 2
    assert shown(done) == ["error: in the value of y: unknown name 'zz'  [line 1, column 10]", "1 | y=(x) + (zz)", "             ^^"]
    done = gradcalc("eval", "y * 2", "x=[1, 2]", "y=(x) + [1, 2, 3]")
    assert shown(done) == ["error: in the value of y: shapes do not fit for +: (2,) + (3,)  [line 1, column 3]",
                           "1 | y=(x) + [1, 2, 3]", "      ^^^^^^^^^^^^^^^"]


def test_a_check_file_places_each_bad_statement(tmp_path):
    script = tmp_path / "checks.gc"
    script.write_text("x = 1\ncheck x ifa else 2\ncheck (x) * (zz)\ncheck x * 2\n")
    done = gradcalc("check", str(script))
    assert done.returncode == 1
    # `check x ifa` is a check with an option named ifa, which wants its `=`
    assert f"ERROR {script}:2  check x ifa else 2  line 2, column 13: expected '=', found 'else'" in done.stdout
    assert f"ERROR {script}:3  (x) * (zz)  line 3, column 14: unknown name 'zz'" in done.stdout
    assert f"PASS {script}:4" in done.stdout


def test_repl_continuation_lines_are_placed_as_typed(capsys):
    """The lines of an unfinished input are the input as typed: an error on the second
    line is on line 2, under what was typed there."""
    drive("y = (2 *\n  zz)\nw = 1 +\\\n   qq\nv = [1,\n 2] + [1, 2, 3]\n")
    err = capsys.readouterr().err
    assert "unknown name 'zz'  [line 2, column 3]\n2 |   zz)\n      ^^\n" in err
    assert "unknown name 'qq'  [line 2, column 4]\n2 |    qq\n       ^^\n" in err
    assert ("shapes do not fit for +: (2,) + (3,)  [line 1, column 5]\n1 | v = [1,\n        ^^^\n"
            "2 |  2] + [1, 2, 3]\n     ^^^^^^^^^^^^^^\n") in err


def test_a_span_over_several_lines_is_underlined_on_each(tmp_path):
    script = tmp_path / "s.gc"
    script.write_text("x = [1, 2]\ny = x +\\\n  [1, 2, 3]\n")
    done = gradcalc("run", str(script))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    # (a continuation's backslash is not underlined)
    assert "2 | y = x +\\\n        ^^^\n3 |   [1, 2, 3]\n      ^^^^^^^^^\n" in done.stderr
    # and one of more than four lines shows its first and last two
    script.write_text("x = [1, 2]\nz = (x\n +\n\n 3 *\n 4\n + [1, 2, 3])\n")
    done = gradcalc("run", str(script))
    assert done.stderr.endswith("2 | z = (x\n         ^\n3 |  +\n     ^\n  | ...\n6 |  4\n     ^\n"
                                "7 |  + [1, 2, 3])\n     ^^^^^^^^^^^\n"), done.stderr


def test_repl_syntax_error_on_a_continuation_line(capsys):
    drive("x = (1 +\n 2 3)\n")
    err = capsys.readouterr().err
    assert "expected an operator, ')' or ',', found '3'  [line 2, column 4]\n2 |  2 3)\n       ^\n" in err


def test_repl_colours_with_the_parsers_lexer():
    from gradcalc.cli.repl import colour

    assert colour("y = sin(x) if x else 1.5 # note", {"sin"}) == [
        ("", "y"), ("", " "), ("class:operator", "="), ("", " "), ("class:function", "sin"), ("class:operator", "("), ("", "x"),
        ("class:operator", ")"), ("", " "), ("class:keyword", "if"), ("", " "), ("", "x"), ("", " "), ("class:keyword", "else"),
        ("", " "), ("class:number", "1.5"), ("", " "), ("class:comment", "# note"),
    ]
    # a word with a keyword in it is a name, as the parser reads it; a string's brackets are text
    assert colour("iffy + '(['", set()) == [("", "iffy"), ("", " "), ("class:operator", "+"), ("", " "), ("", "'(['")]


def test_repl_completion_context_comes_from_the_lexer():
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle("x = [1, 2]")
    word, candidates = repl.completions("(x + 1).re")
    assert word == "re" and "relu" in candidates and "shape" in candidates
    word, candidates = repl.completions("y = 1.")  # a number with its point, not an attribute
    assert word == "" and "x" in candidates
    word, candidates = repl.completions("'x.' + si")
    assert word == "si" and "sin" in candidates and "shape" not in candidates
