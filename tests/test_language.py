"""The expression language: syntax, precedence, the registry, autodiff, errors, safety, depth."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.autodiff import REGISTRY, Tensor
from gradcalc.parser import LanguageError, Session, compile_program
from gradcalc.parser.analysis import analyze
from gradcalc.parser.backends import public_ops


def value(source, engine="tensor"):
    results = Session(engine=engine).run_source(source)
    out = results[-1].value
    return out.data.tolist() if isinstance(out, Tensor) else out.data


def error(source, engine="tensor"):
    with pytest.raises(LanguageError) as info:
        Session(engine=engine).run_source(source)
    return info.value


# ---- syntax and precedence --------------------------------------------------------------------


@pytest.mark.parametrize("source, expected", [
    ("-2**2", -4.0),
    ("2**3**2", 512.0),
    ("2^3", 8.0),
    ("2**-1", 0.5),
    ("1 + 2 * 3", 7.0),
    ("(1 + 2) * 3", 9.0),
    ("10 - 4 - 3", 3.0),
    ("12 / 3 / 2", 2.0),
    ("-3 + 5", 2.0),
    ("+3", 3.0),
    ("2 * -3", -6.0),
    ("1.5e3", 1500.0),
    (".5 + 1.", 1.5),
    ("2e-3 * 1000", 2.0),
    ("1 < 2", 1.0),
    ("1 + 1 == 2", 1.0),
    ("3 >= 4", 0.0),
    ("2 != 2", 0.0),
    ("true + true", 2.0),
    ("false", 0.0),
    ("1 if 2 > 1 else 0", 1.0),
    ("1 if 2 < 1 else 3 if 1 < 2 else 4", 3.0),
])
def test_precedence_and_literals(source, expected):
    assert value(source) == expected


def test_matmul_binds_like_multiplication():
    s = Session()
    s.run_source("a = [[1, 2], [3, 4]]; b = [[0, 1], [1, 0]]")
    assert s.run_source("a @ b * 2")[0].value.data.tolist() == ((np.array([[1, 2], [3, 4]]) @ np.array([[0, 1], [1, 0]])) * 2).tolist()
    assert s.run_source("a.T @ a")[0].value.data.tolist() == [[10.0, 14.0], [14.0, 20.0]]
    assert s.run_source("2 * a @ b")[0].value.data.tolist() == ((2 * np.array([[1, 2], [3, 4]])) @ np.array([[0, 1], [1, 0]])).tolist()


def test_constants():
    assert value("pi") == math.pi
    assert value("e") == math.e
    assert value("inf") == math.inf
    assert math.isnan(value("nan"))


def test_a_variable_may_shadow_a_constant():
    assert value("e = 3; e * 2") == 6.0


def test_statements_newlines_semicolons_and_comments():
    source = """
    # set up
    x = 2   # a comment after code
    y = 3; z = x * y

    z + 1
    """
    assert value(source) == 7.0


def test_newlines_inside_brackets_do_not_end_a_statement():
    assert value("m = [[1, 2],\n     [3, 4]]\nsum(m,\n axis=0)") == [4.0, 6.0]


def test_augmented_assignment():
    assert value("x = 10; x += 5; x -= 3; x *= 2; x /= 4") is None if False else True
    assert value("x = 10; x += 5; x -= 3; x *= 2; x /= 4; x") == 6.0


def test_tensor_literals_indexing_and_slicing():
    s = Session()
    s.run_source("m = [[1, 2, 3], [4, 5, 6]]; v = [1, 2, 3, 4, 5]")
    ask = lambda src: s.run_source(src)[0].value.data.tolist()  # noqa: E731
    assert ask("m[0, 1:3]") == [2.0, 3.0]
    assert ask("m[1]") == [4.0, 5.0, 6.0]
    assert ask("m[:, 0]") == [1.0, 4.0]
    assert ask("v[::2]") == [1.0, 3.0, 5.0]
    assert ask("v[-1]") == 5.0
    assert ask("v[[0, 0, 4]]") == [1.0, 1.0, 5.0]
    assert ask("m.T.shape") == [3.0, 2.0]
    assert ask("m.size") == 6.0


def test_calls_with_keywords_and_methods():
    s = Session()
    s.run_source("m = [[1, -2], [3, -4]]")
    ask = lambda src: s.run_source(src)[0].value.data.tolist()  # noqa: E731
    assert ask("sum(m, axis=1)") == [-1.0, -1.0]
    assert ask("m.sum(axis=0, keepdims=true)") == [[4.0, -6.0]]
    assert ask("m.relu().sum()") == 4.0
    assert ask("reshape(m, 4)") == [1.0, -2.0, 3.0, -4.0]
    assert ask("m.reshape(1, 4)") == [[1.0, -2.0, 3.0, -4.0]]
    assert ask("clip(m, low=-1, high=1)") == [[1.0, -1.0], [1.0, -1.0]]
    assert ask("concat(m, m, axis=1).shape") == [2.0, 4.0]
    assert ask("stack(m[0], m[1])") == [[1.0, -2.0], [3.0, -4.0]]


def test_multiple_results_unpack():
    assert value("a, b, c = split(arange(6), 3); b") == [2.0, 3.0]
    assert value("split(arange(4), 2)[1]") == [2.0, 3.0]


# ---- every op is reachable ------------------------------------------------------------------------

SAMPLE_ARGS = {
    "cross_entropy": ["[1.0, 2.0, 3.0]", "1"],
    "where": ["[1, 0]", "[1, 2]", "[3, 4]"],
    "reshape": ["[1, 2, 3, 4]", "2", "2"],
    "transpose": ["[[1, 2], [3, 4]]"],
    "broadcast_to": ["[1, 2]", "3", "2"],
    "split": ["[1, 2, 3, 4]", "2"],
    "full": ["[2, 2]", "7"],
    "linspace": ["0", "1", "5"],
    "arange": ["4"],
    "eye": ["3"],
    "matmul": ["[[1, 2], [3, 4]]", "[1, 1]"],
    "concatenate": ["[1, 2]", "[3]"],
    "concat": ["[1, 2]", "[3]"],
    "stack": ["[1, 2]", "[3, 4]"],
    "clip": ["[0.5, 2.0]", "0", "1"],
    "swapaxes": ["[[1, 2], [3, 4]]", "0", "1"],
    "mse": ["[1, 2]", "[1, 3]"],
}


def sample_args(name, op):
    if name in SAMPLE_ARGS:
        return SAMPLE_ARGS[name]
    if op.category == "constructor":
        return ["2", "3"]
    if op.n_in == 2:
        return ["[0.5, 2.0]", "[1.5, 0.25]"]
    return ["[0.5, 2.0]"]


@pytest.mark.parametrize("name", sorted(n for n in public_ops() if n != "getitem"))
def test_every_public_op_is_callable_from_the_language(name):
    op = public_ops()[name]
    args = sample_args(name, op)
    out = Session().run_source(f"{name}({', '.join(args)})")[0].value
    assert out is not None
    if op.method:
        method_out = Session().run_source(f"t = {args[0]}\nt.{name}({', '.join(args[1:])})")[0].value
        np.testing.assert_array_equal(np.asarray(method_out.data), np.asarray(out.data))


def test_getitem_is_reached_by_indexing():
    assert value("[[1, 2], [3, 4]][1, 0]") == 3.0


def test_private_ops_are_not_in_the_language():
    assert "unindex" not in public_ops() and "unindex" in REGISTRY
    assert error("unindex([1], 0, 2)").kind == "name"


# ---- autodiff in the language -------------------------------------------------------------------


def test_nested_grad():
    assert value("x = 2; grad(grad(x**3, x), x)") == 12.0


def test_grad_through_a_user_function():
    assert value("def f(x, y) = x**2 * y; x = 3; grad(f(x, 2), x)") == 12.0


def test_jacobian_and_hessian():
    assert value("x = [1, 2]; jacobian(x * x, x)") == [[2.0, 0.0], [0.0, 4.0]]
    assert value("v = [1, 2]; hessian(v[0]**2 * v[1], v)") == [[4.0, 2.0], [2.0, 0.0]]


def test_conditional_records_only_the_branch_taken():
    s = Session()
    out = s.run_source("x = 2; y = x * 3 if x > 0 else exp(x)")
    y = s.variables["y"]
    assert y.label == "mul"
    assert {n.label for n in __import__("gradcalc.autodiff", fromlist=["x"]).topological_order(y)} == {"", "mul"}
    assert out == []


def test_recursive_user_function_rebuilds_its_graph_at_each_call():
    s = Session()
    s.run_source("def p(x, n) = 1 if n == 0 else x * p(x, n - 1)\nx = 1.5")
    assert s.run_source("grad(p(x, 4), x)")[0].value.item() == pytest.approx(4 * 1.5**3)
    assert s.run_source("grad(p(x, 2), x)")[0].value.item() == pytest.approx(2 * 1.5)


def test_micrograd_sanity_case_in_the_language():
    s = Session()
    s.run_source("""
x = -4
z = 2 * x + 2 + x
q = z.relu() + z * x
h = (z * z).relu()
y = h + q + q * x
""")
    a = analyze(s.variables["y"])
    assert a.value.item() == -20.0
    assert a.grads["x"].item() == 46.0


def test_micrograd_more_ops_case_in_the_language():
    s = Session()
    s.run_source("""
a = -4
b = 2
c = a + b
d = a * b + b**3
c += c + 1
c += 1 + c + (-a)
d += d * 2 + (b + a).relu()
d += 3 * d + (b - a).relu()
e = c - d
f = e**2
g = f / 2.0
g += 10.0 / f
""")
    result = analyze(s.variables["g"])
    assert result.value.item() == pytest.approx(24.70408163265306, rel=1e-12)
    assert result.grads["a"].item() == pytest.approx(138.83381924198252, rel=1e-12)
    assert result.grads["b"].item() == pytest.approx(645.5772594752186, rel=1e-12)


@pytest.mark.parametrize("engine", ["tensor", "scalar"])
def test_seed_example_on_both_engines(engine):
    s = Session(engine=engine)
    for name, v in {"a": 2, "b": -3, "c": 10}.items():
        s.run_source(f"{name} = {v}")
    out = s.run_source("(a*b + exp(c)).relu()/a")[0].value
    result = analyze(out)
    assert float(result.value) == pytest.approx(11010.232897403359, rel=1e-14)
    assert result.grads["a"].item() == pytest.approx(-5506.6164487016795, rel=1e-13)
    assert result.grads["b"].item() == pytest.approx(1.0, rel=1e-13)
    assert result.grads["c"].item() == pytest.approx(11013.232897403359, rel=1e-13)
    assert [n.name for n in result.stats.fan_out] == ["a"]


# ---- errors carry places ---------------------------------------------------------------------------


def test_parse_error_has_line_column_and_readable_expectation():
    err = error("x = 1\ny = (2 + ) * 3")
    assert err.kind == "syntax"
    assert (err.line, err.column) == (2, 10)
    assert "expected an expression" in err.message and "')'" in err.message
    for internal in ("__ANON", "RPAR", "LPAR", "$END"):
        assert internal not in err.message


@pytest.mark.parametrize("source", ["(a*", "[1, 2", "f(x,", "x = ", "a +", "y = [[1, 2],\n [3"])
def test_unfinished_input_is_reported_as_unfinished(source):
    err = error(source)
    assert err.kind == "incomplete" and err.incomplete


@pytest.mark.parametrize("source", ["1 2", "a + )", "x = = 1", "f(x))", "]"])
def test_wrong_input_is_not_reported_as_unfinished(source):
    assert error(source).kind == "syntax"


def test_unknown_name_suggests_the_nearest():
    err = error("value = 3\nvalu + 1")
    assert err.kind == "name" and "'valu'" in err.message and "value" in err.message
    assert (err.line, err.column) == (2, 1)
    assert "sigmoid" in error("sigmod(1)").message


def test_shape_mismatch_names_both_shapes_and_operator():
    err = error("a = [1, 2]\nb = [1, 2, 3]\nc = a + b")
    assert err.kind == "shape"
    assert "(2,)" in err.message and "(3,)" in err.message and "+" in err.message
    assert (err.line, err.column) == (3, 5)
    assert "(2, 3)" in error("ones(2, 3) @ ones(2, 3)").message


def test_wrong_argument_names_the_function_and_signature():
    err = error("sum([1, 2], axs=0)")
    assert err.kind == "argument" and "sum(x, axis=None, keepdims=False)" in err.message
    assert "where(cond, a, b)" in error("where([1])").message


def test_an_error_keeps_earlier_variables():
    s = Session()
    s.run_source("x = 5")
    with pytest.raises(LanguageError):
        s.run_source("y = 2\nx = nosuch + 1")
    assert s.variables["x"].item() == 5.0 and s.variables["y"].item() == 2.0


def test_scalar_engine_explains_what_it_cannot_do():
    assert "tensor" in error("[1, 2]", engine="scalar").message
    assert "--engine tensor" in error("x = 2; sin(x)", engine="scalar").message
    assert value("x = 2; sigmoid(x) + x**2", engine="scalar") == pytest.approx(1 / (1 + math.exp(-2)) + 4)


# ---- safety ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["x = 1; x.__class__", "().__class__", "__import__('os')", "x = 1; x._data", "x = 1; x._prev()", "x = [1]; x.__dict__"])
def test_dunder_and_private_access_is_refused(source):
    err = error(source)
    assert err.kind in ("safety", "syntax", "name")
    assert "Traceback" not in err.message


def test_a_variable_may_be_called_underscore():
    assert value("_ = 4; _ * 2") == 8.0


def test_oversized_tensors_are_refused_before_allocation():
    start = time.perf_counter()
    for source in ["zeros(100000, 100000)", "ones(10**9)", "randn(10**4, 10**4)", "ones(4000, 1) * ones(4000)"]:
        assert error(source).kind == "size"
    assert time.perf_counter() - start < 5  # refused, not allocated and then freed


def test_the_size_cap_is_configurable():
    from gradcalc.autodiff import set_max_elements

    previous = set_max_elements(100)
    try:
        assert error("ones(101)").kind == "size"
        assert value("ones(100).sum()") == 100.0
    finally:
        set_max_elements(previous)


# ---- depth ---------------------------------------------------------------------------------------


def test_deeply_nested_calls_evaluate():
    depth = 5000
    source = "x = 0.001\n" + "tanh(" * depth + "x" + ")" * depth
    assert value(source) == pytest.approx(0.001, rel=1e-2)


def test_deeply_nested_exp_gives_inf_not_a_crash():
    depth = 5000
    assert value("exp(" * depth + "1" + ")" * depth) == math.inf


def test_deeply_nested_parentheses_evaluate():
    depth = 5000
    assert value("x = 3\n" + "(" * depth + "x" + ")" * depth) == 3.0


def test_sum_of_a_hundred_thousand_terms():
    source = "x = 1\n" + " + ".join(["x"] * 100_000)
    s = Session()
    out = s.run_source(source)[0].value
    result = analyze(out)
    assert result.value.item() == 100_000.0 and result.grads["x"].item() == 100_000.0


def test_deep_recursion_is_capped_with_a_clear_error():
    err = error("def down(n) = 0 if n == 0 else down(n - 1)\ndown(10000)")
    assert err.kind == "recursion" and "200" in err.message


# ---- parse once, run many ----------------------------------------------------------------------


def test_a_parsed_program_runs_again_at_new_values():
    program = compile_program("y = x**3 + a*x\ny")
    s = Session()
    first = s.run(program, bindings={"x": Tensor(2.0), "a": Tensor(1.0)})[0].value
    second = Session().run(program, bindings={"x": Tensor(3.0), "a": Tensor(2.0)})[0].value
    assert first.item() == 10.0 and second.item() == 33.0
    assert analyze(second).grads["x"].item() == 3 * 9 + 2


# ---- fuzzing ---------------------------------------------------------------------------------------

TOKENS = ["x", "y", "1", "2.5", "1e3", "+", "-", "*", "/", "**", "^", "@", "(", ")", "[", "]", ",", ".", ":", ";",
          "\n", "=", "+=", "<", "==", "if", "else", "def", "check", "wrt", "true", "exp", "sum", "relu", "T",
          "grad", "axis", "'s'", "#c", "_", "__class__", "1.", ".5", "nan", "inf", "f"]


def run_anything(source):
    """Run, then analyse and format every result (backward pass, graph tools) as the CLI
    does: only the language's own error may come out."""
    from gradcalc.autodiff.graph import format_array, graph_dot

    s = Session()
    s.run_source("x = [1, 2]\ny = 0.5\ndef f(a) = a * 2")
    try:
        for result in s.run_source(source):
            analysis = analyze(result.value, None, s.variables)
            format_array(analysis.value)
            graph_dot(analysis.output)
    except LanguageError:
        pass


@settings(max_examples=1200)
@given(st.lists(st.sampled_from(TOKENS), max_size=25).map(" ".join))
def test_fuzz_token_sequences_raise_only_language_errors(source):
    run_anything(source)


@settings(max_examples=1000)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40))
def test_fuzz_random_text_raises_only_language_errors(source):
    run_anything(source)
