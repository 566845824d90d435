"""Error messages in the language's words: every op call is checked against the op's
signature before NumPy sees it, and what NumPy still raises is restated with the op and
its input shapes. The reported cases run through the real command; a fuzz calls every
op in the registry with wrong arities, types, shapes and axes."""
from __future__ import annotations

import os
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.parser import LanguageError, Session
from gradcalc.parser.backends import public_ops
from tests.strategies import sampled
from tests.test_augmented_assignment import evaluates_to
from tests.test_cli import gradcalc

# Words of Python's and NumPy's machinery that no message may show a user.
INTERNAL = re.compile(
    r"positional argument|keyword-only|unexpected keyword|gufunc|C long|cannot be interpreted|dtype\(|NoneType"
    r"|'(tuple|list|float|int|str)' object|ndarray|non-int|Python int|operand type|argument must be|numpy|array"
    r"|iterable|sequence|indices must be|not supported between|Traceback|internal error|(^|[\s(.'])_[A-Za-z]\w*\(",
)


@pytest.mark.parametrize(("source", "words"), [
    ("def f(x) = x; f(y=1)", "f(x) has no parameter 'y'"),
    ("def f(x, y) = x; f(1)", "f(x, y): y is missing"),
    ("def f(x) = x; f(1, 2)", "f(x) takes 1 argument, got 2"),
    ("def f(x) = x; f(1, x=2)", "f(x): x is given twice"),
    ("pad(0)", "pad(x, widths, value=0.0): widths is missing"),
    ("tile([0, 0])", "tile(x, *reps): reps is missing"),
    ("eye()", "eye(n, m=None): n is missing"),
    ("full(1)", "full(shape, value): value is missing"),
    ("swapaxes([1, 2])", "swapaxes(x, axis1, axis2): axis1 and axis2 are missing"),
    ("[1,2][2**63]", "index 9.22337e+18 is out of range"),
    ("[1,2][[2**64, 0]]", "index 1.84467e+19 is out of range"),
    ("arange(0, inf)", "arange(start, stop=None, step=1.0): stop must be a finite number, got inf"),
    ("argmax([1, 2], [0, 0])", "argmax takes one axis, a whole number, got [0, 0]"),
    ("sum([1, 2], axis=0.5)", "axis must be a whole number or a list of whole numbers, got 0.5"),
    ("sum([1, 2], keepdims=2)", "keepdims must be true or false, got 2"),
    ("swapaxes([[1, 2]], 1e300, 0)", "axis1 is too large: 1e+300"),
    ("gelu(1, approximate=2)", "approximate must be a string, got 2"),
    ("matmul(eye(2), zeros(0, 0))", "matmul: the shapes (2, 2) and (0, 0) do not fit together: the first's last axis has length 2"),
    ("matmul(1, [1, 2])", "matmul: the shapes () and (2,) do not fit together"),
    ("maximum([1, 2], [1, 2, 3])", "maximum: the shapes (2,) and (3,) do not broadcast together"),
    ("det([1, 2])", "det: a matrix (2 or more axes) is needed, got shape (2,)"),
    ("concatenate(1, 2)", "concatenate: only tensors of 1 or more axes can be joined, got shapes () and ()"),
    ("elu(0, [1, 2, 3])", "elu(x, alpha=1.0): alpha must be a number, got [1, 2, 3]"),
    ("sum([1, 2], 0, axis=0)", "axis given twice"),
    ("sum([1, 2], axis=0, axis=0)", "axis= is given twice"),
    ("sum(axis=0, [1, 2])", "an argument without a name cannot follow a named one"),
    ("sin(exp)", "the function exp cannot be used with sin: call it"),
    ("(lambda x, y: x)(1)", "<lambda x, y>: y is missing"),
    ("(lambda x: x)(y=1)", "<lambda x> has no parameter 'y'"),
    ("grad(lambda x: x, 1.5)", "grad(lambda x: x): argnums must be a whole number or a tuple of them, got 1.5"),
    ("grad(lambda x: x, foo=1)", "grad(lambda x: x) has no parameter 'foo' (its parameter is argnums=)"),
    ("vmap(sin)(3)", "vmap(sin): argument 0 is a scalar, which has no axis to map over"),
    ("vmap(sin, in_axes=(0, 1))([1, 2])", "vmap(sin): in_axes has 2 entries for 1 argument"),
    ("vmap(lambda x: x, in_axes=None)(1)", "vmap(lambda x: x): in_axes maps none of the arguments"),
    ("jvp(3, 1, 1)", "jvp(f, primals, tangents) takes a function first"),
    ("jvp(sin, 1)", "jvp(f, primals, tangents) takes the function, the primals and the tangents; got 2 arguments"),
    ("jvp(sin, 1, [1, 2])", "jvp(sin): tangent 0 has shape (2,), its primal (); they must be the same"),
    ("jvp(lambda x, y: x, (1, 2, 3), (1, 1, 1))",
     "jvp(lambda x, y: x): the function takes 2 arguments, got 3 primals; a tuple written here lists them, as in JAX"),
    ("jvp(lambda x, y: x, [1, 2, 3], [1, 1, 1])",
     "jvp(lambda x, y: x): the function takes 2 arguments, so the primals are 2 values, as in (x, y); got a tensor of shape (3,)"),
    ("vjp(sin)", "vjp(f, *primals) takes the primals after the function"),
    ("y, b = vjp(lambda x: x * 2, [1, 2]); b([1, 2, 3])", "the pullback of lambda x: x * 2: the cotangent has shape (3,), the output (2,)"),
    ("hvp(lambda x: x, [1, 2], [1, 1])", "hvp(lambda x: x): the function must return a scalar, got shape (2,)"),
    ("check lambda x: x", "check needs a value"),
    ("f = lambda x: x; f.T", "the function <lambda x> cannot be used with .T: call it"),
    ("f = lambda x: x; f[0]", "the function <lambda x> cannot be used with [...]: call it"),
    ("f = lambda x: x; [f, 1]", "the function <lambda x> cannot be used with [...]: call it"),
])
def test_reported_calls_are_answered_in_the_language_s_words(source, words):
    done = gradcalc("eval", source)
    assert done.returncode == 2, done.stdout
    assert words in done.stderr, done.stderr
    assert not INTERNAL.search(done.stderr.splitlines()[0]), done.stderr
    assert "^" in done.stderr  # placed


@pytest.mark.parametrize(("source", "value"), [
    ("True + True", "value: 2.0"),
    ("x = [3, 1]; sum(x, keepdims=True)", "value: [4.0]"),
    ("sort([3, 1, 2], descending=True)", "value: [3.0, 2.0, 1.0]"),
    ("sum([[1, 2], [3, 4]], axis=None)", "value: 10.0"),
    ("x = [1, 2]; x[None].shape", "value: [1, 2]"),
    ("1 if False else 2", "value: 2.0"),
    ("def f(x, y) = x - y; f(y=1, x=3)", "value: 2.0"),
])
def test_python_s_spellings_and_names_work_as_users_type_them(source, value):
    evaluates_to(source, value)


@pytest.mark.parametrize("source", ["True = 1", "False = 0", "None = 2", "def True(x) = x"])
def test_python_s_spellings_are_keywords_as_in_python(source):
    done = gradcalc("eval", source)
    assert done.returncode == 2 and "keyword" in done.stderr, done.stderr


VALUES = ["0", "1", "-1", "2.5", "-0.5", "3", "inf", "-inf", "nan", "2**63", "1e300", "true", "None", "'sum'", "'ij->j'",
          "[]", "[1, 2, 3]", "[0, 0]", "[1.5, 2]", "[[1, 2], [3, 4]]", "[[1, 2, 3], [4, 5, 6]]", "zeros(0, 0)", "zeros(2, 0)",
          "ones(2, 3, 4)", "(1, 2)", "v", "M", "s", "[[1, 2], [3]]", "slogdet(M)"]
KEYWORDS = ["axis", "dim", "keepdims", "keepdim", "foo", "x", "shape", "seed", "value", "reduction", "k", "ord", "low"]


@st.composite
def calls(draw):
    """A call of any op, right or wrong: any number of arguments of any kind, keywords
    known to the op, known to others or unknown, as a function or as a method."""
    name = draw(sampled(sorted(public_ops())))
    op = public_ops()[name]
    args = draw(st.lists(sampled(VALUES), max_size=4))
    keys = draw(st.lists(sampled(sorted({*op.param_names, *KEYWORDS})), max_size=2, unique=True))
    written = [*args, *(f"{k}={draw(sampled(VALUES))}" for k in keys)]
    if args and draw(st.booleans()):
        return f"({args[0]}).{name}({', '.join(written[1:])})"
    return f"{name}({', '.join(written)})"


@settings(max_examples=int(os.environ.get("MESSAGES_EXAMPLES", "600")))
@given(calls())
@pytest.mark.slow
def test_no_call_of_any_op_answers_in_python_s_or_numpy_s_words(call):
    session = Session()
    session.run_source("M = [[1, 2], [3, 4]]; v = [1, 2, 3]; s = 2")
    with np.errstate(all="ignore"):
        try:
            session.run_source(call)
        except LanguageError as err:
            assert not INTERNAL.search(err.message), f"{call}: {err.message}"
            assert err.line is not None, call  # placed


EMPTY = ["[]", "zeros(0, 0)", "zeros(2, 0)"]


@pytest.mark.parametrize("name", sorted(public_ops()))
def test_no_op_warns_of_an_empty_tensor(name):
    """An op on empty tensors answers (nan for a mean of nothing, as NumPy) or refuses in
    gradcalc's words; it never lets NumPy's Python warnings through ("Mean of empty
    slice" from the losses' mean reduction and from var and std, which a user of the
    engine from Python saw; the command filters them). Floating-point errors are NumPy's
    errstate, not these, and are ignored here."""
    others = [*EMPTY, "[[1, 2], [3, 4]]", "[1, 2, 3]"]
    calls = [[e] for e in EMPTY] + [[e, o] for e in EMPTY for o in others] + [[o, e] for e in EMPTY for o in others]
    for args in calls:
        source = f"{name}({', '.join(args)})"
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error", RuntimeWarning)
            try:
                Session().run_source(source)
            except LanguageError:
                pass
            except RuntimeWarning as warning:
                pytest.fail(f"{source}: {warning}")
