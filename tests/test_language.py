"""The expression language: syntax, precedence, the registry, autodiff, errors, safety, depth."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.autodiff import REGISTRY, Tensor
from gradcalc.parser import LanguageError, Session, compile_program
from gradcalc.parser.analysis import analyze
from gradcalc.parser.backends import public_ops
from gradcalc.parser.machine import HelpResult


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
    "item": ["[2.5]"],
    "mse": ["[1, 2]", "[1, 3]"],
}


def literal(value):
    """A Python value written in the language: lists for arrays and tuples, quoted strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, np.ndarray):
        return repr(value.tolist())
    if isinstance(value, tuple):
        return repr([float(v) for v in value])
    return repr(value)


def sample_args(name, op):
    """Arguments for a call: hand-picked, else the op's own Check case (the inputs and
    parameters the every-op gradcheck uses), so a new op needs no entry here."""
    if name in SAMPLE_ARGS:
        return SAMPLE_ARGS[name]
    if op.check is not None:
        rng = np.random.default_rng(0)
        spec = op.check
        if spec.make is not None:
            inputs, params = spec.make(rng)
        else:
            inputs, params = [rng.uniform(spec.low, spec.high, s) for s in spec.shapes[0]], spec.params
        named = [f"{k}={literal(v)}" for k, v in params.items() if v is not None]
        return [literal(x) for x in inputs] + named
    if op.category == "constructor":
        return ["2", "3"]
    if op.n_in == 2:
        return ["[0.5, 2.0]", "[1.5, 0.25]"]
    return ["[0.5, 2.0]"]


def values_of(result):
    return [np.asarray(r.data) for r in result] if isinstance(result, tuple) else [np.asarray(result.data)]


@pytest.mark.parametrize("name", sorted(n for n in public_ops() if n != "getitem"))
def test_every_public_op_is_callable_from_the_language(name):
    op = public_ops()[name]
    args = sample_args(name, op)
    out = Session().run_source(f"{name}({', '.join(args)})")[0].value
    assert out is not None
    if op.method:
        method_out = Session().run_source(f"t = {args[0]}\nt.{name}({', '.join(args[1:])})")[0].value
        for got, expected in zip(values_of(method_out), values_of(out), strict=True):
            np.testing.assert_array_equal(got, expected)


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
    # Where the session is a REPL, the hint is how to switch there.
    with pytest.raises(LanguageError) as info:
        Session(engine="scalar", switch_engine=":engine {engine}").run_source("x = 2; x ** x")
    assert ":engine tensor" in info.value.message and "--engine" not in info.value.message
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
    import tracemalloc  # NumPy reports its arrays' memory to it

    tracemalloc.start()
    try:
        for source in ["zeros(100000, 100000)", "ones(10**9)", "randn(10**4, 10**4)", "ones(4000, 1) * ones(4000)"]:
            assert error(source).kind == "size"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50_000_000  # refused, not allocated and then freed (the smallest would take 128 MB)


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


@pytest.mark.slow
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


# ---- booleans ---------------------------------------------------------------------------------------


def test_comparisons_give_booleans_and_a_mask_selects():
    s = Session()
    [mask, picked] = s.run_source("x = [1, 5, 2, 7]\nx > 3\nx[x > 3]")
    assert mask.value.data.dtype == np.bool_ and mask.value.data.tolist() == [False, True, False, True]
    assert picked.value.data.tolist() == [5.0, 7.0]  # not [1, 1, 1, 2, 2, 2] (0/1 used as indices)


def test_a_masked_selection_scatters_its_gradient_back():
    # d/dx sum(x[x > 3] ** 2) = 2x where x > 3, else 0
    assert value("x = [1, 5, 2, 7]; grad(sum(x[x > 3] ** 2), x)") == [0.0, 10.0, 0.0, 14.0]
    assert value("M = [[1, -2], [-3, 4]]; grad(sum(M[M < 0] * 3), M)") == [[0.0, 3.0], [3.0, 0.0]]
    assert value("x = [1, 2, 3]; x[[true, false, true]]") == [1.0, 3.0]


def test_arithmetic_on_booleans_gives_float64():
    assert value("x = [1, 5]; (x > 3) + (x > 3)") == [0.0, 2.0]  # not logical or
    assert value("x = [1, 5]; -(x > 3)") == [-0.0, -1.0]
    assert value("x = [1, 5]; sum(x > 0)") == 2.0
    assert value("true + true") == 2.0
    assert value("x = [1., -2.]; where(x > 0, x, 0) * 2") == [2.0, 0.0]


@settings(max_examples=60)
@given(
    data=st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=8),
    threshold=st.floats(-5, 5, allow_nan=False),
)
def test_masked_selection_matches_numpy_and_its_gradient_is_the_mask(data, threshold):
    x = np.array(data)
    s = Session()
    s.run_source(f"x = {x.tolist()!r}\nt = {threshold!r}")
    [picked, gradient] = s.run_source("x[x > t]\ngrad(sum(x[x > t] ** 2), x)")
    np.testing.assert_array_equal(picked.value.data, x[x > threshold])
    np.testing.assert_array_equal(gradient.value.data, np.where(x > threshold, 2 * x, 0.0))


def test_a_mask_of_the_wrong_length_is_a_shape_error():
    assert error("x = [1, 2, 3]; x[[true, false]]").kind == "shape"


# ---- values without gradients -------------------------------------------------------------------


def test_detach_gives_a_constant_that_stays_constant_when_named():
    s = Session()
    [result] = s.run_source("x = 3\nc = detach(x)\nd = c * 2\nc * x + d * x + stop_gradient(x) * x")
    grads = analyze(result.value, None, s.variables).grads
    # c = 3 and d = 6 are constants: d/dx (c x + d x + 3 x) = 12, and neither is reported
    assert grads == {"x": 12.0}
    assert not s.variables["c"].requires_grad and not s.variables["d"].requires_grad
    assert value("x = [1., 2.]; x.detach() * x") == [1.0, 4.0]


def test_a_typed_constant_is_a_variable_and_detach_is_how_to_say_constant():
    s = Session()
    [with_k] = s.run_source("x = 2\nk = 3\nk * x")
    assert analyze(with_k.value, None, s.variables).grads == {"k": 2.0, "x": 3.0}
    [with_c] = s.run_source("c = detach(3)\nc * x")
    assert analyze(with_c.value, None, s.variables).grads == {"x": 3.0}


def test_results_of_ops_without_gradient_are_not_variables():
    s = Session()
    s.run_source("x = [1.5, -2.5]\nm = x > 0\nn = floor(x)\ni = argmax(x)\nsz = x.size\ng = grad(3 * x[0], x)")
    for name in ("m", "n", "i", "sz"):
        assert not s.variables[name].requires_grad, name
    # A named derivative records its graph only when read (test_deferred_gradients.py); built, this one is a constant.
    assert not s.backend.is_variable(s.variables["g"]) and not s.variables["g"].requires_grad
    assert s.variables["m"].data.dtype == np.bool_


# ---- grad(y, x): what x may be -------------------------------------------------------------------


@pytest.mark.parametrize("function", ["grad", "jacobian", "hessian"])
@pytest.mark.parametrize("second", ["3", "x * 2", "detach(x)"])
def test_differentiating_by_a_constant_or_an_expression_is_an_error(function, second):
    err = error(f"x = 2; {function}(x ** 2, {second})")
    assert err.kind == "argument" and "x must be a variable" in err.message and f"{function}(y, x)" in err.message


def test_differentiating_by_a_named_intermediate_gives_its_adjoint():
    # y = 2x; d(y**3)/dy = 3y^2 = 48; d^2/dy^2 = 6y = 24
    assert value("x = 2; y = x * 2; grad(y ** 3, y)") == 48.0
    assert value("x = 2; y = x * 2; hessian(y ** 3, y)") == 24.0
    assert value("x = [1., 2.]; y = x * 2; jacobian(y ** 2, y)") == [[4.0, 0.0], [0.0, 8.0]]
    assert value("def d(u) = grad(u ** 2, u); x = 3; d(x * 2)") == 12.0  # a parameter bound to an intermediate


def test_a_variable_the_output_does_not_use_gives_zeros():
    assert value("x = 2; z = [1., 2.]; grad(x ** 2, z)") == [0.0, 0.0]
    assert value("x = 2; y = x * 3; grad(x ** 2, y)") == 0.0


def test_grad_with_the_wrong_number_of_arguments_says_how_to_call_it():
    err = error("x = 2; grad(x ** 2)")
    assert err.message == "grad(y, x) takes two arguments, the output y and the variable x; got 1"


# ---- NumPy and PyTorch habits ------------------------------------------------------------------


@pytest.mark.parametrize("source, expected", [
    ("a = [1, 2]; b = [3, 4]; concatenate([a, b])", [1.0, 2.0, 3.0, 4.0]),
    ("a = [1, 2]; b = [3, 4, 5]; concatenate([a, b])", [1.0, 2.0, 3.0, 4.0, 5.0]),
    ("a = [1, 2]; b = [3, 4]; stack([a, b])", [[1.0, 2.0], [3.0, 4.0]]),
    ("a = [1, 2]; b = [3, 4]; stack([a, b], axis=1)", [[1.0, 3.0], [2.0, 4.0]]),
    ("M = [[1, 2], [3, 4]]; concatenate(M, axis=0)", [1.0, 2.0, 3.0, 4.0]),
    ("split(arange(6), [2, 4])[1]", [2.0, 3.0]),
    ("split(arange(6), [2, 4])[2]", [4.0, 5.0]),
    ("split(arange(6), 3)[2]", [4.0, 5.0]),
    ("reshape(arange(6), (3, 2))", [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]),
    ("arange(6).reshape((2, 3))[1]", [3.0, 4.0, 5.0]),
    ("x = [1, 2, 3]; x[None]", [[1.0, 2.0, 3.0]]),
    ("x = [1, 2, 3]; x[:, None]", [[1.0], [2.0], [3.0]]),
    ("M = [[1, 2], [3, 4]]; M[..., 0]", [1.0, 3.0]),
    ("M = [[1, 2], [3, 4]]; M.mT", [[1.0, 3.0], [2.0, 4.0]]),
    ("M = [[1, 2], [3, 4]]; swapaxes(M, 0, 1)", [[1.0, 3.0], [2.0, 4.0]]),
    ("M = [[1, 2], [3, 4]]; sum(M, dim=1, keepdim=true)", [[3.0], [7.0]]),
    ("M = [[1, 2], [3, 4]]; M.mean(dim=0)", [2.0, 3.0]),
    ("x = (1, 2); x * 2", [2.0, 4.0]),
])
def test_numpy_and_pytorch_spellings(source, expected):
    assert value(source) == expected


def test_habits_against_numpy():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    s = Session()
    s.run_source(f"A = {A.tolist()}\nB = {B.tolist()}")
    ask = lambda src: s.run_source(src)[0].value.data  # noqa: E731
    np.testing.assert_array_equal(ask("concatenate([A, B])"), np.concatenate([A, B]))
    np.testing.assert_array_equal(ask("concatenate([A, A], axis=1)"), np.concatenate([A, A], axis=1))
    np.testing.assert_array_equal(ask("stack([A, A], axis=2)"), np.stack([A, A], axis=2))
    np.testing.assert_array_equal(ask("split(B, [1, 3])[1]"), np.split(B, [1, 3])[1])
    np.testing.assert_array_equal(ask("split(B, [1], axis=1)[1]"), np.split(B, [1], axis=1)[1])
    np.testing.assert_array_equal(ask("B[None, ..., 1]"), B[None, ..., 1])
    np.testing.assert_array_equal(ask("B[B > 0]"), B[B > 0])


def test_gradients_through_joins_and_splits_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a, b, w = rng.normal(size=3), rng.normal(size=2), rng.normal(size=5)
    s = Session()
    s.run_source(f"a = {a.tolist()}\nb = {b.tolist()}\nw = {w.tolist()}")
    [result] = s.run_source("p, q, r = split(concatenate([a, b]) * w, [1, 4])\nsum(q ** 2) + sum(r) * p[0] + sum(stack([a, a * 2], axis=1) ** 3)")
    grads = analyze(result.value, None, s.variables).grads
    ta, tb, tw = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (a, b, w))
    p, q, r = torch.tensor_split(torch.cat([ta, tb]) * tw, [1, 4])
    (torch.sum(q**2) + torch.sum(r) * p[0] + torch.sum(torch.stack([ta, ta * 2], dim=1) ** 3)).backward()
    for name, t in (("a", ta), ("b", tb), ("w", tw)):
        np.testing.assert_allclose(grads[name], t.grad.numpy(), rtol=1e-13, err_msg=name)


# ---- messages that say what is accepted --------------------------------------------------------


@pytest.mark.parametrize("source, words", [
    ("x = 1; y = 2; sin(x, y)", ["sin(x) takes 1 argument, got 2"]),
    ("max(1, 2)", ["max(x, 2)", "a scalar has no axis", "maximum(a, b)"]),
    ("x = [1, -2]; max(x, 0)", ["max(x, axis=0)", "maximum(a, b)"]),  # Python's max(x, 0) is not NumPy's
    ("A = [[1, 2], [3, 4]]; y = [1, 2]; max(A, y)", ["maximum(a, b)", "axis="]),
    ("A = [[1, 2], [3, 4]]; min(A, 0.5)", ["min(x, 0.5): 0.5 is not an axis", "minimum(a, b)"]),  # not axis=0.5, itself an error
    ("A = [[1, 2], [3, 4]]; A.min(0)", ["min(x, axis=0)", "minimum(a, b)"]),
    ("A = [[1, 2], [3, 4]]; max(A, axis=0.5)", ["max", "axis", "whole number", "0.5"]),
    ("x = [1, 2, 3, 4]; split(x, 0)", ["split", "sections", "positive whole number", "got 0"]),
    ("x = [1, 2, 3]; split(x, 2)", ["split", "length 3", "2 equal sections", "indices"]),
    ("x = [[1, 2]]; sum(x, axis=1.5)", ["sum", "axis", "whole number", "1.5"]),
    ("randn(3, seed='a')", ["randn", "seed", "whole number", "'a'"]),
    ("x = [1, 2]; sum(x, keepdims=2)", ["sum", "keepdims", "true or false"]),
    ("v = [1, 2, 3, 4]; v['a']", ["index", "string 'a'"]),
    ("v = [1, 2, 3, 4]; v[split(v, 2)]", ["index", "2 results"]),
    ("a = [1, 2]; b = [3, 4, 5]; [a, b] + 1", ["ragged", "(2,)", "(3,)", "concatenate"]),
    ("a = None", ["None", "index"]),
])
def test_messages_name_the_function_the_argument_and_what_it_accepts(source, words):
    err = error(source)
    assert err.kind in ("argument", "shape", "value", "name")
    for word in words:
        assert word in err.message, (word, err.message)


@pytest.mark.parametrize("keyword", ["if", "else", "def", "check", "wrt", "true", "false", "None"])
def test_keywords_cannot_be_assigned(keyword):
    err = error(f"{keyword} = 3")
    assert err.kind == "name" and f"'{keyword}' is a keyword" in err.message and err.line == 1
    assert "keyword" in error(f"def {keyword}(x) = x").message or error(f"def {keyword}(x) = x").kind == "syntax"


def test_a_def_that_shadows_a_built_in_warns():
    seen = []
    s = Session(on_warning=seen.append)
    s.run_source("def sin(x) = x * 2\ndef sin(x) = x * 3\ndef f(x) = x")
    assert len(seen) == 1 and "def sin shadows the built-in function sin" in seen[0]
    assert s.warnings == seen
    assert s.run_source("sin(2)")[0].value.item() == 6.0


@pytest.mark.parametrize("digits", ["\u0663", "\u0663 + 1", "\uff11", "1\u0660"])
def test_only_ascii_digits_are_numbers(digits):
    assert error(digits).kind == "syntax"


# ---- Python's integer arithmetic, literals and methods -----------------------------------------


@pytest.mark.parametrize("source, expected", [
    ("1_000 + 1", 1001.0),
    ("1_000.000_5", 1000.0005),
    ("2e1_0", 2e10),
    ("remainder(7, 2)", 1.0),
    ("remainder(-7, 2)", 1.0),      # Python: -7 % 2 == 1
    ("remainder(7, -2)", -1.0),     # the sign of the divisor
    ("mod(7.5, 2)", 1.5),
    ("floor_divide(-7, 2)", -4.0),  # Python: -7 // 2 == -4
    ("len([[1, 2], [3, 4], [5, 6]])", 3.0),
    ("x = [2.5]; x.item()", 2.5),
    ("x = [1, 2]; x.pow(3)", [1.0, 8.0]),
    ("x = [1, 2]; x.add(1).mul(2)", [4.0, 6.0]),
])
def test_python_integer_arithmetic_literals_and_methods(source, expected):
    assert value(source) == expected


def test_remainder_gradients_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-5, 5, 6), rng.choice([-1.0, 1.0], 6) * rng.uniform(0.5, 2, 6)
    s = Session()
    s.run_source(f"a = {a.tolist()}\nb = {b.tolist()}")
    [result] = s.run_source("sum(remainder(a, b) ** 2 + floor_divide(a, b))")
    grads = analyze(result.value, None, s.variables).grads
    ta, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (a, b))
    (torch.remainder(ta, tb) ** 2 + torch.floor_divide(ta.detach(), tb.detach())).sum().backward()  # no gradient there
    np.testing.assert_allclose(result.value.item(), (np.remainder(a, b) ** 2 + np.floor_divide(a, b)).sum(), rtol=1e-14)
    np.testing.assert_allclose(grads["a"], ta.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(grads["b"], tb.grad.numpy(), rtol=1e-13)


def test_item_and_len_are_constants():
    s = Session()
    s.run_source("x = [2.5]\ni = x.item()\nn = len(x)")
    assert not s.variables["i"].requires_grad and not s.variables["n"].requires_grad
    assert "size 1" in error("x = [1, 2]; x.item()").message


# ---- fuzzing ---------------------------------------------------------------------------------------

TOKENS = ["x", "y", "1", "2.5", "1e3", "+", "-", "*", "/", "**", "^", "@", "(", ")", "[", "]", ",", ".", ":", ";",
          "\n", "=", "+=", "<", "==", "if", "else", "def", "check", "wrt", "true", "exp", "sum", "relu", "T",
          "grad", "axis", "'s'", "#c", "_", "__class__", "1.", ".5", "nan", "inf", "f", "None", "...", "detach",
          "split", "concatenate", "mT", "dim", "max", "seed", ">", "false", "1_0", "remainder", "item"]


def run_anything(source):
    """Run, then analyse and format every result (backward pass, graph tools) as the CLI
    does: only the language's own error may come out."""
    from gradcalc.cli.formatting import format_array, graph_dot

    s = Session()
    s.run_source("x = [1, 2]\ny = 0.5\ndef f(a) = a * 2")
    try:
        for result in s.run_source(source):
            if isinstance(result, HelpResult):  # text, not a value (the CLI prints its lines)
                continue
            analysis = analyze(result.value, None, s.variables)
            format_array(analysis.value)
            graph_dot(analysis.output)
    except LanguageError:
        pass


# Fuzz inputs: grammar tokens in any order, and any text.
TOKEN_SOUP = st.lists(st.sampled_from(TOKENS), max_size=25).map(" ".join)
RANDOM_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)

@settings(max_examples=1200)
@given(TOKEN_SOUP)
@pytest.mark.slow
def test_fuzz_token_sequences_raise_only_language_errors(source):
    run_anything(source)


@settings(max_examples=1000)
@given(RANDOM_TEXT)
@pytest.mark.slow
def test_fuzz_random_text_raises_only_language_errors(source):
    run_anything(source)


def test_the_repl_prints_warnings_and_its_own_engine_switch(capsys):
    from gradcalc.cli import render
    from gradcalc.cli.repl import Repl

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    repl.handle("def exp(x) = x + 1")
    assert "warning: def exp shadows the built-in function exp" in capsys.readouterr().err
    repl.handle(":engine scalar")
    repl.handle("x = 2; x ** x")
    err = capsys.readouterr().err
    assert ":engine tensor" in err and "--engine" not in err


@pytest.mark.parametrize("expression, words", [
    ("sin(x, x)", "sin(x) takes 1 argument, got 2"),
    ("grad(x**2)", "grad(y, x) takes two arguments"),
    ("grad(x**2, 3)", "x must be a variable"),
    ("split([1, 2, 3, 4], 0)", "sections must be a positive whole number"),
    ("sum([[1, 2]], axis=1.5)", "axis must be a whole number"),
    ("randn(3, seed='a')", "seed must be a whole number"),
    ("v = [1, 2]; v['a']", "not the string 'a'"),
    ("v = [1, 2, 3, 4]; v[split(v, 2)]", "not 2 results"),
    ("wrt = 2", "'wrt' is a keyword"),
    ("\u0663 + 1", "digits 0-9"),
])
def test_reported_messages_through_the_command(expression, words):
    from .test_cli import gradcalc

    done = gradcalc("eval", expression, "x=2")
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert "internal error" not in done.stderr


# ---- // and % --------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, expected", [
    ("7 // 2", 3.0), ("-7 // 2", -4.0), ("7 // -2", -4.0), ("7.5 // 2", 3.0),
    ("-7 % 2", 1.0), ("7 % -2", -1.0), ("7.5 % 2", 1.5),
    ("2 * 7 % 4", 2.0),        # same level as *, left to right: (2 * 7) % 4
    ("2 * 7 // 4", 3.0),
    ("1 + 7 % 4", 4.0),        # tighter than +
    ("2 ** 3 % 5", 3.0),       # looser than **
    ("x = 7; x //= 2; x", 3.0), ("x = -7; x %= 3; x", 2.0),
    ("x = 1 //\n 2; x", 0.0),  # a line ending in // continues
])
def test_floor_division_and_remainder_operators(source, expected):
    assert value(source) == expected


def test_floor_division_and_remainder_follow_python_elementwise():
    a, b = [-7.5, -3.0, 2.5, 7.0], [2.0, -2.0, 0.75, -3.0]
    assert value(f"{a} // {b}") == [x // y for x, y in zip(a, b)]
    assert value(f"{a} % {b}") == [x % y for x, y in zip(a, b)]


def test_remainder_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    a, b = np.array([-7.3, 5.2, 3.1]), np.array([2.0, -1.5, 0.7])
    s = Session()
    s.run_source(f"a = {a.tolist()}\nb = {b.tolist()}")
    [result] = s.run_source("sum((a % b) * [1, 2, 3]) + sum(a // b)")
    grads = analyze(result.value, None, s.variables).grads
    np.testing.assert_allclose(grads["a"], [1.0, 2.0, 3.0], rtol=0)
    np.testing.assert_allclose(grads["b"], -np.floor(a / b) * [1, 2, 3], rtol=0)
    ta, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (a, b))
    (torch.sum(torch.remainder(ta, tb) * torch.tensor([1.0, 2, 3], dtype=torch.float64))).backward()
    np.testing.assert_allclose(grads["a"], ta.grad.numpy(), rtol=1e-15)
    np.testing.assert_allclose(grads["b"], tb.grad.numpy(), rtol=1e-15)


def test_floor_division_has_no_gradient_as_in_torch():
    assert value("x = 7.5; grad(x // 2 + x, x)") == 1.0


def test_repl_colours_the_new_operators():
    from gradcalc.cli.repl import colour

    ops = [text for style, text in colour("a //= b % c // d %= 2", set()) if style == "class:operator"]
    assert ops == ["//=", "%", "//", "%="]


# ---- hexadecimal, binary and octal literals -----------------------------------------------------


@pytest.mark.parametrize("source, expected", [
    ("0x10", 16.0), ("0XfF", 255.0), ("0b101", 5.0), ("0o17", 15.0), ("0xFF_FF", 65535.0), ("0b1_0", 2.0), ("0x_1", 1.0),
    ("1_000", 1000.0), ("0x10 + 0b101 * 0o17", 91.0), ("-0x10", -16.0), ("[0x1, 0b1][1]", 1.0),
])
def test_hexadecimal_binary_and_octal_literals(source, expected):
    assert value(source) == expected


@pytest.mark.parametrize("source", ["0x", "0b102", "0o8", "0x1__0"])
def test_bad_prefixed_literals_are_syntax_errors(source):
    assert error(source).kind == "syntax"


def test_a_prefixed_literal_too_large_for_float64_says_so():
    err = error("0x" + "f" * 300)
    assert err.kind == "syntax" and "too large" in err.message and (err.line, err.column) == (1, 1)


def test_repl_colours_prefixed_literals_as_numbers():
    from gradcalc.cli.repl import colour

    assert [text for style, text in colour("0x1F + 0b10", set()) if style == "class:number"] == ["0x1F", "0b10"]


# ---- unsupported syntax says so -------------------------------------------------------------------


@pytest.mark.parametrize("source, column, width", [
    ("1j", 1, 2), ("x = 2.5j", 5, 4), ("y = 1\nz = 3 + 1e3J", 9, 4), ("1_0j", 1, 4), ("0x1j", 1, 4),
])
def test_complex_literals_are_reported_as_unsupported(source, column, width):
    err = error(source)
    assert err.kind == "syntax" and err.message.startswith("complex numbers are not supported")
    assert (err.line, err.column, err.end_column) == (source.count("\n") + 1, column, column + width)


@pytest.mark.parametrize("source, column", [("5!", 2), ("!x", 1), ("x = 1; y = !(x > 0)", 12)])
def test_exclamation_mark_is_reported_as_unsupported(source, column):
    err = error(source)
    assert err.kind == "syntax" and err.message.startswith("'!' is not supported") and err.column == column


def test_a_name_after_a_space_is_still_an_ordinary_syntax_error():
    assert error("j = 2; 3 j").message.startswith("expected")
    assert value("x = 3; x != 2") == 1.0


@pytest.mark.parametrize("expression, words", [
    ("2.5j * x", "complex numbers are not supported"), ("x!", "'!' is not supported"),
])
def test_unsupported_syntax_through_the_command(expression, words):
    from .test_cli import gradcalc

    done = gradcalc("eval", expression, "x=2")
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


@given(st.text(alphabet="ab \n", max_size=60), st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=20))
def test_range_span_is_the_line_and_column_of_each_offset(source, pairs):
    """range_span remembers the line of its last answer: any order of offsets, any lines,
    gives what counting the newlines before each offset gives."""
    from gradcalc.parser.compiler import _Places

    places = _Places(source)

    def line_column(offset: int) -> tuple[int, int]:
        line = source.count("\n", 0, offset) + 1
        return line, offset - (source.rfind("\n", 0, offset) + 1) + 1

    for a, b in pairs:
        start, end = min(a, b, len(source)), min(max(a, b), len(source))
        assert places.range_span(start, end) == (*line_column(start), *line_column(end))
