"""Every built-in, given every kind of value, answers with a result or a clear error at its
place (issue 38): every op of the registry and every language built-in (grad, jacobian,
hessian, value_and_grad, jacrev, jacfwd, vmap, jvp, vjp, hvp, load, range, help) is fed
functions, tuples, strings, booleans, huge and non-finite numbers and empty arrays, in
every argument position and keyword, as methods, and in the language's other forms
(indexing, slices, operators, loops, rules), on both engines.

Through the command line: the whole table runs through `gradcalc eval --json`'s own code
(cli.entry's dispatch, in this process, for speed), and a generated sample of it through
the real command as a subprocess. Through the notebook magic: the whole table through the
`%%gradcalc` magic's code, and a generated sample in a real Jupyter kernel. Never a
traceback, never "internal error", always exit status 0 or 2 with a message in the
language's words (not Python's: no NoneType, no 'Builtin' object, no C long)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradcalc.parser.backends import AUTODIFF_FUNCTIONS, public_ops
from gradcalc.parser.builtins import BUILTINS as TABLE
from tests.launch import run

KINDS = {
    "function": "sin", "lambda": "lambda t: t * 2", "def": "f", "tuple": "(1, 2)", "results": "value_and_grad(f)(2.0)",
    "string": "'abc'", "boolean": "true", "huge": "1e308", "huge whole": "2**63", "huge negative": "-1e308",
    "subnormal": "5e-324", "inf": "inf", "nan": "nan", "-inf": "-inf", "empty": "zeros(0)", "empty rows": "zeros(0, 3)",
    "empty columns": "zeros(3, 0)", "matrix": "[[1, 2], [3, 4]]", "vector": "[1.0, -2.0, 3.0]", "number": "2.5", "zero": "0",
    "negative": "-1", "whole": "3", "None": "None", "...": "...", "booleans": "[true, false, true]", "huge vector": "[1e308, -1e308]",
}
PRELUDE = "def f(t) = t * t\n"
BUILTINS = sorted(set(public_ops()) | set(TABLE))
# Python's words, which a message of the language never holds.
PYTHON_WORDS = re.compile(
    r"NoneType|'Builtin'|'Defined'|'Transformed'|object has no attribute|not supported between instances|argument must be|"
    r"unhashable|object is not|takes \d+ positional|got an unexpected keyword|Python int|C long|cannot convert float|"
    r"object cannot be interpreted|only integer scalar|invalid literal|'tuple'|'str'|'float'|'int'|'list'|numpy\.|ufunc|"
    r"dtype\(|<class |Traceback|RecursionError|maximum recursion")


def programs(name: str) -> Iterator[str]:
    """The programs that feed `name` every kind of value."""
    op = public_ops().get(name)
    for value in KINDS.values():
        if name in TABLE and TABLE[name].loop:  # range
            yield f"for i in range({value}): 1\n1"
            yield f"for i in range(0, {value}, 1): 1\n1"
            continue
        if name in TABLE and TABLE[name].statement:  # help
            yield f"help({value})"
            continue
        yield from (f"{name}({value})", f"{name}({value}, {value})", f"{name}([1.0, 2.0], {value})", f"{name}({value}, [1.0, 2.0])",
                    f"{name}(f, {value})", f"{name}({value}, {value}, {value})")
        yield from (f"{name}([[1.0, 2.0], [3.0, 4.0]], {p}={value})" for p in (op.param_names if op else ()))
        if op is not None and op.method:
            yield f"[1.0, 2.0].{name}({value})"
            yield from (f"[[1.0, 2.0], [3.0, 4.0]].{name}({p}={value})" for p in op.param_names)
        if name in AUTODIFF_FUNCTIONS:
            yield from (f"{name}(f)({value})", f"{name}(lambda t: sum(t))({value})", f"{name}({value})(2.0)",
                        f"{name}(f, argnums={value})(2.0)", f"{name}(f, in_axes={value})([1.0, 2.0])")


FORMS = ("x[{v}]", "x[{v}:]", "x[:{v}:{v}]", "{v} + {v}", "{v} @ {v}", "-{v}", "{v} ** {v}", "{v} < 1", "1 if {v} else 2",
         "[{v}, {v}]", "[{v}, 1.0]", "{v}.T", "{v}.shape", "{v}[0]", "y = {v}\ny += {v}\ny", "{v}({v})", "{v}(2.0)",
         "grad({v}, {v})", "jacobian({v}, x)", "grad({v}, x)", "hessian({v} * x * x, x)", "with no_grad:\n    y = {v}\ny",
         "(lambda t: t)({v})", "f({v})", "def g(t) = {v}\ng(1.0)", "def g(t) = t\nvjp g(t, gg) = {v}\ng(x)",
         "def g(t) = {v}\nvjp g(t, gg) = gg\ng(x)", "for r in {v}: 1\n1", "a, b = {v}\na", "check {v}", "check {v} == {v}")


def form_programs() -> Iterator[str]:
    for value in KINDS.values():
        for form in FORMS:
            yield "x = [1.0, 2.0]\n" + form.replace("{v}", value)


@pytest.fixture
def in_process():
    """The command's code run in this process: its limits and NumPy's error state restored after."""
    from gradcalc.autodiff import limits

    saved = (limits.max_seconds(), limits.max_steps(), limits.max_memory(), limits.max_elements())
    with np.errstate(), warnings.catch_warnings():
        yield
    limits.set_max_seconds(saved[0])
    limits.set_max_steps(saved[1])
    limits.set_max_memory(saved[2])
    limits.set_max_elements(saved[3])


def answered(argv: list[str]) -> tuple[int, str, str]:
    """`gradcalc ARGV` by its own code in this process: (status, stdout, stderr); a
    Python exception escaping it is what the command shows as an internal error."""
    from gradcalc.cli.entry import _dispatch

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = _dispatch(argv)
    except SystemExit as done:
        status = done.code
    return status or 0, out.getvalue(), err.getvalue()


def assert_clear(program: str, status: int, stdout: str, stderr: str) -> None:
    """Exit 0 or 2; on 2 a JSON error whose message is the language's, not Python's."""
    output = stdout + stderr
    assert status in (0, 2), (program, status, output)
    assert "internal error" not in output and "Traceback" not in output, (program, output)
    document = json.loads(stdout.splitlines()[0])
    if status == 2:
        message = document["error"]["message"]
        assert message and not PYTHON_WORDS.search(message), (program, message)


@pytest.mark.parametrize("engine", ["tensor", "scalar"])
@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_given_every_kind_of_value_answers_clearly(in_process, name, engine):
    for program in programs(name):
        assert_clear(program, *answered(["eval", "--json", "--engine", engine, "--max-seconds", "2", PRELUDE + program]))


@pytest.mark.parametrize("engine", ["tensor", "scalar"])
def test_every_form_of_the_language_given_every_kind_of_value_answers_clearly(in_process, engine):
    for program in form_programs():
        assert_clear(program, *answered(["eval", "--json", "--engine", engine, "--max-seconds", "2", PRELUDE + program]))


ALL = [program for name in BUILTINS for program in programs(name)] + list(form_programs())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL))
def test_a_sample_through_the_real_command_answers_clearly(program):
    done = run(["eval", "--json", PRELUDE + program], timeout=60, env={**os.environ, "NO_COLOR": "1"})
    assert_clear(program, done.returncode, done.stdout, done.stderr)


# ---- the notebook magic ---------------------------------------------------------------------


def shown_texts(program: str) -> list[str]:
    """What `%%gradcalc --no-graph` shows for `program` in a fresh session: every
    display's HTML and text form."""
    import IPython.display

    from gradcalc.cli import notebook

    shown: list = []
    original = IPython.display.display
    IPython.display.display = shown.append
    try:
        result = notebook.Notebook({}).cell("--no-graph", PRELUDE + program)
    finally:
        IPython.display.display = original
    return [item._repr_html_() + repr(item) for item in [*shown, *([result] if result is not None else [])]]


def assert_shown_clearly(program: str, texts: list[str]) -> None:
    for text in texts:
        assert "internal error" not in text and "Traceback" not in text, (program, text)
        error = re.search(r'class="gradcalc-error"[^>]*>(.*?)</pre>', text, re.S)
        assert error is None or not PYTHON_WORDS.search(error.group(1)), (program, error.group(1))


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_given_every_kind_of_value_through_the_magic(name):
    pytest.importorskip("IPython")
    for program in programs(name):
        assert_shown_clearly(program, shown_texts(program))


def test_every_form_given_every_kind_of_value_through_the_magic():
    pytest.importorskip("IPython")
    for program in form_programs():
        assert_shown_clearly(program, shown_texts(program))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ALL), min_size=12, max_size=12, unique=True))
@pytest.mark.slow
def test_a_sample_in_a_real_kernel_shows_clearly(sample):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    cells = ["%load_ext gradcalc", *(f"%%gradcalc --no-graph\n{PRELUDE}{program}" for program in sample), "%gradcalc x * 3 x=2"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True).execute()
    for program, cell in zip(["%load_ext", *sample, "last"], notebook.cells):
        texts = [out.get("data", {}).get("text/html", "") + out.get("data", {}).get("text/plain", "") + out.get("text", "")
                 + "".join(out.get("traceback", [])) for out in cell.outputs]
        assert not any(out.get("output_type") == "error" for out in cell.outputs), (program, texts)
        assert not any("RuntimeWarning" in text for text in texts), (program, texts)  # NumPy's warnings stay out of the cell
        assert_shown_clearly(program, texts)
    assert "6.0" in "".join(out.get("data", {}).get("text/plain", "") for out in notebook.cells[-1].outputs)
