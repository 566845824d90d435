"""`--engine jax` and `--engine torch` through the real command: the published numbers of the
seed examples, named values, derivatives and transformations, what needs gradcalc's own graph,
the device, and a missing extra.

The expected numbers are closed forms and the seed's published results, never gradcalc's
own output; each test runs once per library and skips when its extra is not installed.
"""
from __future__ import annotations

import json
import math
import os

import pytest

from tests.test_cli import gradcalc

LIBRARIES = ("jax", "torch")


@pytest.fixture(params=LIBRARIES)
def engine(request):
    pytest.importorskip(request.param)
    return request.param


def number(text: str, label: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(label))
    return float(line.split(":", 1)[1])


def test_the_seed_expression_gives_its_published_value_and_gradients(engine):
    done = gradcalc("eval", "(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10", "--engine", engine)
    assert done.returncode == 0, done.stderr
    value = (2 * -3 + math.exp(10)) / 2
    assert number(done.stdout, "value") == pytest.approx(value, rel=1e-15)
    assert number(done.stdout, "grad a") == pytest.approx(-3 / 2 - value / 2, rel=1e-14)
    assert number(done.stdout, "grad b") == pytest.approx(1.0, rel=1e-15)
    assert number(done.stdout, "grad c") == pytest.approx(math.exp(10) / 2, rel=1e-15)
    assert f"graph: kept by {'JAX' if engine == 'jax' else 'PyTorch'}, not gradcalc" in done.stdout


@pytest.mark.slow
def test_micrographs_sanity_case_and_named_intermediates(engine):
    # micrograd's test_sanity_check: y = -20, dy/dx = 46 at x = -4; z's adjoint is dy/dz = relu'(z)... by hand below.
    program = "z = 2 * x + 2 + x; q = z.relu() + z * x; h = (z * z).relu(); y = h + q + q * x; y"
    doc = json.loads(gradcalc("eval", program, "x=-4", "--engine", engine, "--json").stdout)
    assert doc["value"] == -20.0 and doc["grads"]["x"] == 46.0
    # z = -10: h = z^2 (z*z > 0), q = z*x (relu(z) = 0), y = z^2 + (1 + x) z x: dy/dz = 2z + (1 + x) x = -20 + 12 = -8
    assert doc["grads"]["z"] == -8.0
    assert doc["graph"] is None and doc["engine"]["name"] == engine


@pytest.mark.slow
def test_derivatives_and_transformations_give_closed_forms(engine):
    program = ("def f(t) = t ** 3 * w; g = grad(f); "
               "[grad(f(x), x), grad(grad(f(x), x), x), g(x), grad(g(x), w), hessian(f(x), x), jvp(f, x, 1)[1], hvp(f, x, 1)]")
    doc = json.loads(gradcalc("eval", program, "x=1.5", "w=2", "--engine", engine, "--json").stdout)
    x, w = 1.5, 2.0
    assert doc["value"] == pytest.approx([3 * x**2 * w, 6 * x * w, 3 * x**2 * w, 3 * x**2, 6 * x * w, 3 * x**2 * w, 6 * x * w], rel=1e-15)
    # d/dx of the sum: 3x^2 w + 6xw + 3x^2 w + 3x^2 + 6xw + 3x^2 w + 6xw
    assert doc["grads"]["x"] == pytest.approx(6 * x * w * 3 + 6 * w * 3 + 6 * x, rel=1e-14)


@pytest.mark.slow
def test_vmap_of_a_per_row_gradient_and_a_closure(engine):
    program = "vmap(grad(lambda r: sum(r ** 2) * w))(X)"
    doc = json.loads(gradcalc("eval", program, "X=[[1, 2], [3, 4]]", "w=3", "--engine", engine, "--json").stdout)
    assert doc["value"] == [[6.0, 12.0], [18.0, 24.0]]
    assert doc["grads"]["X"] == [[6.0, 6.0], [6.0, 6.0]] and doc["grads"]["w"] == 20.0


@pytest.mark.slow
def test_a_rule_of_yours_is_the_librarys_custom_derivative(engine):
    # The rule's gradient is softmax, finite where the body's overflows (docs/transforms.md).
    program = "def lse(x) = log(sum(exp(x))); vjp lse(x, g) = g * softmax(x); lse(v)"
    doc = json.loads(gradcalc("eval", program, "v=[1000, 1001]", "--engine", engine, "--json").stdout)
    e = math.exp(1)
    assert doc["grads"]["v"] == pytest.approx([1 / (1 + e), e / (1 + e)], rel=1e-15)


@pytest.mark.slow
def test_what_needs_gradcalcs_graph_says_so(engine):
    for flag in (["--tree"], ["--dot", "g.dot"]):
        done = gradcalc("eval", "x * 2", "x=1", "--engine", engine, *flag)
        assert done.returncode == 2 and "gradcalc's own graph" in done.stderr and "--engine tensor" in done.stderr
    steps = gradcalc("eval", "sin(x) * x", "x=1", "--engine", engine, "--steps")
    if engine == "jax":  # the jaxpr of the gradient
        assert steps.returncode == 0 and "make_jaxpr" in steps.stdout and "cos" in steps.stdout
    else:
        assert steps.returncode == 2 and "--steps" in steps.stderr


@pytest.mark.slow
def test_a_gpu_asked_for_where_there_is_none_is_said_plainly(engine):
    import importlib

    library = importlib.import_module(engine)
    has_gpu = library.cuda.is_available() if engine == "torch" else any(d.platform == "gpu" for d in library.devices())
    if has_gpu:
        pytest.skip("this machine has a GPU")
    done = gradcalc("eval", "x * 2", "x=1", "--engine", engine, "--device", "gpu")
    assert done.returncode == 2
    assert "--device gpu" in done.stderr and "no GPU" in done.stderr and "--device cpu" in done.stderr
    assert gradcalc("eval", "x * 2", "x=1", "--engine", engine, "--device", "cpu").returncode == 0


def test_a_missing_extra_names_the_one_to_install(tmp_path, engine):
    (tmp_path / f"{engine}.py").write_text("raise ImportError('not installed here')\n")
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = gradcalc("eval", "x * 2", "x=1", "--engine", engine, env=env)
    assert done.returncode == 2
    assert f"pip install 'gradcalc[{engine}]'" in done.stderr


@pytest.mark.slow
def test_an_op_error_is_the_tensor_engines_message(engine):
    done = gradcalc("eval", "[1, 2] + [1, 2, 3]", "--engine", engine)
    tensor = gradcalc("eval", "[1, 2] + [1, 2, 3]")
    assert done.returncode == tensor.returncode == 2 and done.stderr == tensor.stderr


@pytest.mark.slow
def test_plot_gives_the_derivatives_by_the_library(engine):
    done = gradcalc("plot", "tanh(x)", "x=-1:1", "--points", "5", "--engine", engine, "--csv")
    assert done.returncode == 0, done.stderr
    for row in done.stdout.splitlines()[1:]:
        x, f, d1, d2 = map(float, row.split(","))
        t = math.tanh(x)
        assert (f, d1, d2) == pytest.approx((t, 1 - t * t, -2 * t * (1 - t * t)), rel=1e-14, abs=1e-15)


def test_plot_of_a_branch_on_the_variable_goes_point_by_point(engine):
    done = gradcalc("plot", "x if x > 0 else x ** 2", "x=-1:1", "--points", "5", "--engine", engine, "--csv")
    rows = [tuple(map(float, row.split(","))) for row in done.stdout.splitlines()[1:]]
    assert rows == [(x, x if x > 0 else x * x, 1.0 if x > 0 else 2 * x, 0.0 if x > 0 else 2.0) for x in (-1.0, -0.5, 0.0, 0.5, 1.0)]


def test_the_repl_switches_to_the_engine(engine, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    from gradcalc.cli import render
    from gradcalc.cli.repl import Repl

    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    for line in (f":engine {engine}", "x = 2", "def f(t) = t ** 3", "grad(f)(x) * x", ":tree"):
        repl.handle(line)
    captured = capsys.readouterr()
    assert f"engine: {engine}" in captured.out and "value: 24.0" in captured.out and "grad x: 36.0" in captured.out
    assert ":tree shows gradcalc's own graph" in captured.err


def test_the_notebook_magic_takes_the_engine(engine, monkeypatch):
    pytest.importorskip("IPython")
    import IPython.display

    from gradcalc.cli import notebook

    monkeypatch.setattr(IPython.display, "display", lambda item: None)
    nb = notebook.Notebook({})
    result = nb.line(f"sum(x ** 2) x='[1, 2]' --engine {engine}")
    assert float(result.value) == 5.0 and result.grads["x"].tolist() == [2.0, 4.0] and result.graph is None
    assert "kept by" in result._repr_html_()
    cell = nb.cell(f"--engine {engine}", "y = 3\ngrad(y ** 3, y)")
    assert float(cell.value) == 27.0 and float(cell.grads["y"]) == 18.0


@pytest.mark.slow
def test_on_jax_a_program_runs_under_jit_and_the_report_says_so():
    pytest.importorskip("jax")
    done = gradcalc("eval", "h = tanh(x * w); sum(h * h)", "x=[0.5, -1]", "w=2", "--engine", "jax")
    assert done.returncode == 0, done.stderr
    assert "note: under jax.jit: compiled and ran in" in done.stdout
    t = [math.tanh(1.0), math.tanh(-2.0)]
    assert number(done.stdout, "value") == pytest.approx(t[0] ** 2 + t[1] ** 2, rel=1e-15)
    # d/dw sum(tanh(x w)^2) = sum(2 tanh(x w) (1 - tanh^2) x)
    assert number(done.stdout, "grad w") == pytest.approx(2 * t[0] * (1 - t[0] ** 2) * 0.5 - 2 * t[1] * (1 - t[1] ** 2), rel=1e-14)


@pytest.mark.parametrize("program, reason", [
    ("x if x > 0 else -x", "a value decides a branch, an index or a parameter at line 1, column 6"),
    ("sum(x[x > 0])", "at line 1, column 5"),
    ("y = 0; for i in range(3): y += x\ny", "a for loop would be unrolled"),
])
def test_and_why_not_when_not(program, reason):
    pytest.importorskip("jax")
    done = gradcalc("eval", program, "x=[2]", "--engine", "jax")
    assert done.returncode == 0, done.stderr
    note = next(line for line in done.stdout.splitlines() if line.startswith("note: not under jax.jit"))
    assert reason in note and note.endswith("ran op by op")
