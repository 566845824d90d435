"""Habits of PyTorch, JAX and NumPy users get an answer (parser/habits.py): a spelling that
means one of our ops is accepted and computes what PyTorch computes (compared with
torch float64 on random inputs, values and gradients), one that does not is refused
naming ours, a module prefix is refused saying to drop it, and transpose(x, 0, 1) of a
matrix warns. Reported cases through the real command; the classes in process."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gradcalc.parser import LanguageError, Session
from gradcalc.parser.backends import AUTODIFF_FUNCTIONS, CONSTANTS, public_ops
from gradcalc.parser.habits import ACCEPTED, HINTS, ROOTS
from tests.test_cli import gradcalc

torch = pytest.importorskip("torch")


def run(source: str) -> Session:
    session = Session()
    session.run_source(source)
    return session


def error_of(source: str) -> LanguageError:
    with pytest.raises(LanguageError) as caught:
        Session().run_source(source)
    return caught.value


def last_value(source: str) -> np.ndarray:
    [result] = Session().run_source(source)
    return np.asarray(result.value.data)


# ---- transpose(x, 0, 1) ------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["x.transpose(0, 1)", "transpose(x, 0, 1)", "x.transpose(-2, -1)", "y = 2 * x\ny.transpose(0, -1)"])
def test_transpose_with_the_axes_in_order_warns_at_its_place(source):
    done = gradcalc("eval", source, "x=[[1, 2], [3, 4]]", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["shape"] == [2, 2]
    line = source.count("\n") + 1
    assert f"warning: line {line}, column 1: transpose(x, 0, 1) of a matrix returns it unchanged" in done.stderr, done.stderr
    assert "swapaxes(x, 0, 1) or x.T" in done.stderr


def test_what_the_warning_proposes_is_pytorch_s_transpose():
    x = np.random.default_rng(1).normal(size=(3, 4))
    for written in ("swapaxes(x, 0, 1)", "x.T"):
        np.testing.assert_array_equal(last_value(f"x = {x.tolist()}\n{written}"), torch.tensor(x).transpose(0, 1).numpy())


@pytest.mark.parametrize("source", ["transpose(x, 1, 0)", "transpose(x)", "x.permute(0, 1)", "transpose(x, (0, 1))", "transpose(v, 0)",
                                    "transpose(ones(2, 3, 4), 0, 2, 1)"])
def test_no_warning_where_no_swap_can_be_meant(source):
    warnings: list[str] = []
    Session(on_warning=warnings.append).run_source(f"x = [[1, 2], [3, 4]]\nv = [1, 2]\n{source}")
    assert warnings == []


def test_a_loop_warns_once_per_place():
    warnings: list[str] = []
    Session(on_warning=warnings.append).run_source("x = [[1, 2], [3, 4]]\nfor i in range(5): y = x.transpose(0, 1)\nz = transpose(x, 0, 1)")
    assert [w.split(":")[0] for w in warnings] == ["line 2, column 24", "line 3, column 5"]


# ---- prefixes -----------------------------------------------------------------------------------

PREFIXES = ["np.", "numpy.", "jnp.", "jax.numpy.", "torch.", "F.", "nn.functional.", "torch.nn.functional.", "linalg.", "np.linalg.",
            "torch.linalg.", "math.", "jax.", "torch.special."]
OURS = sorted({*public_ops(), *AUTODIFF_FUNCTIONS, *(n for n, s in ACCEPTED.items() if s.function)} - {"transpose", "var", "std"})


@pytest.mark.parametrize("prefix", PREFIXES)
def test_every_prefix_before_every_function_of_ours_says_drop_the_prefix(prefix):
    for name in OURS:
        err = error_of(f"x = [1, 2]\n{prefix}{name}(x)")
        assert (err.kind, err.line, err.column) == ("name", 2, 1), (name, err)
        assert err.message == (f"{prefix}{name}: drop the prefix {prefix!r}: gradcalc's functions and constants have no module; "
                               f"write {name}(...)"), err.message
    for name in ("pi", "e", "inf", "nan"):
        assert f"write {name}" in error_of(f"{prefix}{name} * 2").message


@pytest.mark.parametrize("prefix", ["torch.", "F.", "torch.nn.functional."])
def test_a_pytorch_name_that_means_another_op_here_names_ours(prefix):
    assert "swapaxes(x, 0, 1)" in error_of(f"x = [[1, 2]]\n{prefix}transpose(x, 0, 1)").message
    assert "var(x, ddof=1)" in error_of(f"x = [1, 2]\n{prefix}var(x)").message
    assert "std(x, ddof=1)" in error_of(f"x = [1, 2]\n{prefix}std(x)").message


@pytest.mark.parametrize(("source", "words"), [
    ("np.sinn(x)", "np.sinn: 'np.' is NumPy's prefix, and gradcalc has no sinn; did you mean sin"),
    ("torch.cat([x, x])", "gradcalc has no cat: concatenate([a, b], axis=0)"),
    ("jnp.diff(x)", "gradcalc has no diff: did you mean grad?"),
])
def test_a_prefix_before_a_name_that_is_not_ours_names_ours(source, words):
    assert words in error_of(f"x = [1, 2]\n{source}").message


def test_a_prefix_word_that_is_a_variable_is_the_variable():
    assert last_value("F = [1, 4]\nF.sqrt()").tolist() == [1.0, 2.0]
    assert last_value("np = 3\nnp.exp() * 0 + np").tolist() == 3.0


def test_prefixes_through_the_command():
    done = gradcalc("eval", "np.linalg.norm(x) + F.relu(x).sum()", "x=[3, 4]")
    assert done.returncode == 2 and "np.linalg.norm: drop the prefix 'np.linalg.'" in done.stderr and "write norm(...)" in done.stderr
    assert "[line 1, column 1]" in done.stderr and "^^^^^^^^^^^^^^" in done.stderr, done.stderr
    assert set(ROOTS) >= {"np", "jnp", "torch", "F", "nn", "linalg"}


# ---- PyTorch's spellings against PyTorch ----------------------------------------------------------


def torch_and_ours(rng: np.random.Generator, shape: tuple[int, ...], ours: str, theirs, weights_shape=None):
    """Value and gradient (of sum(result * w), w random) of `ours` (x in it) against torch's."""
    x = rng.normal(size=shape)
    tx = torch.tensor(x, requires_grad=True)
    out = theirs(tx)
    w = rng.normal(size=tuple(out.shape))
    (out * torch.tensor(w)).sum().backward()
    session = run(f"x = {x.tolist()}\nw = {w.tolist()}\ny = {ours}\ng = grad(sum(y * w), x)")
    np.testing.assert_allclose(session.variables["y"].data, out.detach().numpy(), rtol=1e-15, atol=0)
    np.testing.assert_allclose(session.variables["g"].data, tx.grad.numpy(), rtol=1e-14, atol=1e-15)  # (repeats summed in another order)


SHAPES = [(), (3,), (2, 3), (1, 4)]


@pytest.mark.parametrize("seed", range(5))
def test_each_accepted_spelling_computes_what_pytorch_computes(seed):
    rng = np.random.default_rng(seed)
    for shape in SHAPES:
        torch_and_ours(rng, shape, "x.t()", lambda t: t.t())
        n = int(np.prod(shape))
        torch_and_ours(rng, shape, f"x.view({n})", lambda t, n=n: t.view(n))
        torch_and_ours(rng, shape, "x.view(-1, 1)", lambda t: t.view(-1, 1))
        low, high = sorted(rng.normal(size=2))
        torch_and_ours(rng, shape, f"x.clamp({low}, {high})", lambda t, lo=low, hi=high: t.clamp(lo, hi))
        torch_and_ours(rng, shape, f"clamp(x, min={low})", lambda t, lo=low: torch.clamp(t, min=lo))
        torch_and_ours(rng, shape, f"x.clamp(max={high})", lambda t, hi=high: t.clamp(max=hi))
        order = [int(a) for a in rng.permutation(len(shape))]
        torch_and_ours(rng, shape, f"x.permute({', '.join(map(str, order))})" if order else "x.permute(())",
                       lambda t, o=order: t.permute(*o) if o else t.permute(()))
        sizes = [int(s) for s in rng.integers(1, 4, size=max(1, len(shape) + int(rng.integers(0, 2))))]
        torch_and_ours(rng, shape, f"x.repeat({', '.join(map(str, sizes))})", lambda t, s=sizes: t.repeat(*s))
        x = rng.normal(size=shape)
        session = run(f"x = {x.tolist()}\na = x.size()\nb = x.numel()\nc = numel(x)\nd = ones_like(x)\nz = zeros_like(x)\n"
                      f"f = full_like(x, 2.5)\nt = tensor({x.tolist()})\nr = array({x.tolist()})")
        values = {k: np.asarray(session.variables[k].data) for k in "abcdzftr"}
        tx = torch.tensor(x)
        assert values["a"].tolist() == list(tx.size()) and values["b"] == values["c"] == tx.numel()
        for k, expected in [("d", torch.ones_like(tx)), ("z", torch.zeros_like(tx)), ("f", torch.full_like(tx, 2.5)), ("t", torch.tensor(x)),
                            ("r", torch.tensor(x))]:
            np.testing.assert_array_equal(values[k], expected.numpy())
        for axis in range(-len(shape), len(shape)):
            assert last_value(f"x = {x.tolist()}\nx.size({axis})") == tx.size(axis)
    # clamp's bounds are tensors that get their gradients, as torch.clamp's do
    x, lo, hi = rng.normal(size=5), rng.normal(size=5) - 1, rng.normal(size=5) + 1
    t = [torch.tensor(v, requires_grad=True) for v in (x, lo, hi)]
    torch.clamp(t[0], t[1], t[2]).sum().backward()
    s = run(f"x = {x.tolist()}\nlo = {lo.tolist()}\nhi = {hi.tolist()}\ngx, glo, ghi = grad(sum(x.clamp(lo, hi)), (x, lo, hi))")
    for name, tensor in zip(("gx", "glo", "ghi"), t):
        np.testing.assert_array_equal(s.variables[name].data, tensor.grad.numpy())


@pytest.mark.parametrize(("source", "torch_refuses", "words"), [
    ("ones(2, 3, 4).t()", lambda: torch.ones(2, 3, 4).t(), "x.t() transposes a tensor of at most 2 axes"),
    ("ones(2, 3).repeat(2)", lambda: torch.ones(2, 3).repeat(2), "x.repeat(*sizes) takes a count for each of the 2 axes"),
    ("ones(2, 3).permute(0)", lambda: torch.ones(2, 3).permute(0), "x.permute(*dims) orders all 2 axes"),
    ("ones(2, 3).size(2)", lambda: torch.ones(2, 3).size(2), "a tensor of shape (2, 3) has no axis 2"),
    ("clamp(ones(2))", lambda: torch.clamp(torch.ones(2)), "needs min or max"),
    ("float(ones(2))", lambda: float(torch.ones(2)), "float(x) takes a tensor of one element"),
])
def test_where_pytorch_refuses_a_spelling_so_does_gradcalc(source, torch_refuses, words):
    with pytest.raises((RuntimeError, TypeError, IndexError, ValueError)):
        torch_refuses()
    done = gradcalc("eval", source)
    assert done.returncode == 2 and words in done.stderr and "column 1]" in done.stderr, done.stderr


def test_float_and_tensor_are_constants_as_in_pytorch():
    doc = json.loads(gradcalc("eval", "float(x[1]) * x + tensor([1, 2]) * x", "x=[3, 4]", "--json").stdout)
    # torch: float() leaves the graph, so d/dx of (4 x + [1, 2] x) is 4 + [1, 2]
    assert doc["value"] == [15.0, 24.0] and doc["grads"]["x"] == [5.0, 6.0]
    done = gradcalc("eval", "tensor(x)", "x=[3, 4]")
    assert done.returncode == 2 and "write the value itself" in done.stderr and "detach(x)" in done.stderr
    done = gradcalc("eval", "c = tensor([1, 2], requires_grad=false); c * x", "x=[3, 4]", "--json")
    assert sorted(json.loads(done.stdout)["grads"]) == ["x"], done.stdout  # a constant, not a variable


@pytest.mark.parametrize("source", ["x.t()", "x.view(4)", "x.size()", "x.numel()", "x.clamp(0, 2.5)", "x.permute(1, 0)", "x.repeat(2, 1)",
                                    "ones_like(x)", "float(x[0, 0])", "tensor([1, 2])", "array([1, 2])"])
def test_the_reported_spellings_run_through_the_command(source):
    done = gradcalc("eval", source, "x=[[1, 2], [3, 4]]")
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_every_hinted_name_is_refused_with_ours():
    for name, text in HINTS.items():
        method = name in ("backward", "clone", "numpy", "tolist", "ndimension", "dim")
        source = f"x = [1, 2]\n{'x.' + name + '()' if method else name + '(x)'}"
        err = error_of(source)
        assert err.kind == "name" and err.message.endswith(f": {text}"), (name, err.message)


@pytest.mark.parametrize("name", ["diff", "derivative"])
def test_derivative_words_ask_did_you_mean_grad(name):
    done = gradcalc("eval", f"{name}(x**2, x)", "x=3")
    assert done.returncode == 2 and f"unknown function '{name}': did you mean grad? grad(y, x) is dy/dx" in done.stderr, done.stderr


@pytest.mark.slow
def test_help_tells_about_spellings():
    for name, spelling in ACCEPTED.items():
        assert f"{spelling.usage}: {spelling.meaning}" in gradcalc("eval", f"help({name})").stdout
    assert "did you mean grad" in gradcalc("eval", "help(diff)").stdout
    assert "also called: view" in gradcalc("ops", "reshape").stdout
    assert set(ACCEPTED).isdisjoint(CONSTANTS)


# ---- mathematics as typeset ----------------------------------------------------------------------


@pytest.mark.parametrize(("source", "words", "place"), [
    ("2x + 1", "a number before x does not multiply it: write 2 * x", (1, 1)),
    ("y = 3 + 2pi", "write 2 * pi", (1, 9)),
    ("2(x + 1)", "a product is written with *: 2 * (...), not 2(...)", (1, 1)),
    ("(x + 1)(x - 1)", "a product is written with *: (...) * (...)", (1, 1)),
    ("x²", "'²' is not an operator: write a power as ** 2, as in x ** 2", (1, 2)),
    ("x⁻¹ + 1", "'⁻¹' is not an operator: write a power as ** -1", (1, 2)),
    ("x × 2", "'×' is not an operator: write * for a product", (1, 3)),
    ("x ÷ 2", "'÷' is not an operator: write / for a quotient", (1, 3)),
    ("x − 1", "'−' is not an operator: write - (the ASCII minus)", (1, 3)),
])
def test_mathematics_as_typeset_gets_a_hint_at_its_place(source, words, place):
    done = gradcalc("eval", source, "x=2")
    assert done.returncode == 2 and words in done.stderr and f"[line {place[0]}, column {place[1]}]" in done.stderr, done.stderr


# ---- JAX's tuples ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_jax_s_tuples_are_written_as_in_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f = lambda x: x ** 3 * jax.numpy.sin(x)  # noqa: E731
    text = "lambda x: x ** 3 * sin(x)"
    y, pull = jax.vjp(f, 3.0)
    cases = {
        f"y, f_vjp = vjp({text}, 3.0); f_vjp(1.0)[0]": pull(1.0)[0],
        f"y, f_vjp = vjp({text}, 3.0); g, = f_vjp(1.0); g": pull(1.0)[0],
        f"jvp({text}, (2.0,), (1.0,))[1]": jax.jvp(f, (2.0,), (1.0,))[1],
        f"jvp({text}, (2.0,), (1.0,))[0]": jax.jvp(f, (2.0,), (1.0,))[0],
        "jvp(lambda a, b: a * sin(b), (2.0, 0.5), (1.0, 3.0))[1]": jax.jvp(lambda a, b: a * jax.numpy.sin(b), (2.0, 0.5), (1.0, 3.0))[1],
        "y, back = vjp(lambda a, b: a * sin(b), 2.0, 0.5); back(1.0)[1]": jax.vjp(lambda a, b: a * jax.numpy.sin(b), 2.0, 0.5)[1](1.0)[1],
        "hvp(lambda x: x ** 4, (2.0,), (1.0,))": 48.0,
    }
    for source, expected in cases.items():
        doc = json.loads(gradcalc("eval", source, "--json").stdout or "{}")
        assert doc.get("shape") == [] and doc["value"] == pytest.approx(float(expected), rel=1e-15), (source, doc)
    shown = gradcalc("eval", "y, back = vjp(lambda x: x**2, [1, 2, 3]); back([1, 0, 1])").stdout
    assert shown == "([2.0, 0.0, 6.0],)\n"  # a tuple of one cotangent, as jax.vjp's pullback gives
    done = gradcalc("eval", "jvp(lambda x: sum(x**2), (1, 2), (1, 0))")
    assert done.returncode == 2 and "got 2 primals; a tuple written here lists them, as in JAX: one vector is [1, 2]" in done.stderr
    assert "[line 1, column 1]" in done.stderr


# ---- messages in the user's words ------------------------------------------------------------------


@pytest.mark.parametrize(("source", "words"), [
    ("vmap(sin, in_axes=(0.5,))([1.0])", "in_axes must be an axis (a whole number), None, or a tuple of them, got (0.5,)"),
    ("vmap(lambda a, b: a, in_axes=(0, 1.5))([1.0], [2.0])", "got (0, 1.5)"),
    ("vmap(sin, out_axes=(0.5,))([1.0])", "out_axes must be an axis (a whole number) or a tuple of them, one per result, got (0.5,)"),
    ("grad(sin, argnums=(0.5,))(1.0)", "argnums must be a whole number or a tuple of them, got (0.5,)"),
])
def test_options_are_shown_as_written(source, words):
    done = gradcalc("eval", source)
    assert done.returncode == 2 and words in done.stderr and "a tensor of shape" not in done.stderr, done.stderr


def test_a_whole_number_too_large_for_a_float_is_said_so(tmp_path):
    huge = "1" + "0" * 400
    (tmp_path / "big.json").write_text('{"a": [1, ' + huge + "]}")
    for args in (["eval", "x", "x=@big.json:a"], ["eval", 'load("big.json", "a")']):
        done = gradcalc(*args, cwd=tmp_path)
        assert done.returncode == 2 and "line 1, column 11: a whole number of 401 digits is too large for a float64" in done.stderr, done.stderr
        assert "int too large" not in done.stderr
    from gradcalc.cli.notebook import NotebookVariables

    variables = NotebookVariables({"big": int(huge)})
    session = Session(variables=variables)
    variables.session = session
    with pytest.raises(LanguageError) as caught:
        session.run_source("big * 2")
    assert caught.value.message.startswith("the notebook's big, a whole number, is too large for a float64")


def test_every_accepted_spelling_is_in_the_language_reference():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "language.md").read_text()
    section = text[text.index("### NumPy and PyTorch habits"):text.index("## Autodiff in the language")]
    for name in ACCEPTED:
        assert f"{name}(" in section, name
    for name in ("diff", "derivative", "np.", "jnp.", "torch.", "F.", "nn.functional.", "linalg.", "2x", "x²", "×", "÷"):
        assert name in section, name


@pytest.mark.parametrize("engine", ["jax", "torch"])
@pytest.mark.slow
def test_the_spellings_mean_the_same_on_every_engine(engine):
    if engine == "jax":
        pytest.importorskip("jax")
    program = "x = [[1., 2], [3, 4]]; [x.t()[0, 1], x.size(1), x.repeat(1, 2)[1, 2], clamp(x, max=2)[1, 1], float(x[0, 0]), numel(x)]"
    assert json.loads(gradcalc("--engine", engine, "eval", program, "--json").stdout)["value"] == [3.0, 2.0, 3.0, 2.0, 1.0, 4.0]
    done = gradcalc("--engine", engine, "eval", "x = [[1., 2], [3, 4]]; a, b = x; [b, a]; np.sin(x)")
    assert "np.sin: drop the prefix 'np.'" in done.stderr, done.stderr
    done = gradcalc("--engine", engine, "eval", "x = [[1., 2], [3, 4]]; L = 0; for row in x: L += sum(row ** 2)\nL", "--json")
    assert json.loads(done.stdout)["grads"]["x"] == [[2.0, 4.0], [6.0, 8.0]], done.stdout + done.stderr
