"""The notebook extension, in a real Jupyter kernel: docs/notebook.ipynb is executed with
nbclient, and each of its displays is read back (HTML, SVG, the values handed to Python).

The expected numbers are closed forms: d/da (ab + e^c)/a = -e^c/a^2, d/db = 1,
d/dc = e^c/a at a=2, b=-3, c=10; d/du tanh(u) u = tanh(u) + u (1 - tanh(u)^2)."""
from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs" / "notebook.ipynb"


@pytest.fixture(scope="module")
def executed() -> list:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=False).execute()
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def outputs(cell, kind: str) -> str:
    """Everything the cell displayed under one MIME type, joined."""
    return "\n".join(out.get("data", {}).get(kind, "") for out in cell.outputs if "data" in out)


def cell_with(executed: list, source: str):
    [cell] = [c for c in executed if c.source.startswith(source)]
    return cell


def test_a_line_magic_shows_value_gradients_statistics_and_the_graph(executed):
    page = outputs(cell_with(executed, "%gradcalc '(a*b"), "text/html")
    a, c = 2.0, 10.0
    value = (a * -3 + math.exp(c)) / a
    assert repr(value) in page
    grads = dict(re.findall(r"<td><code>(\w+)</code></td><td><pre>([^<]+)</pre>", page))
    assert float(grads["a"]) == pytest.approx(-math.exp(c) / a**2, rel=1e-15)
    assert float(grads["b"]) == 1.0
    assert float(grads["c"]) == pytest.approx(math.exp(c) / a, rel=1e-15)
    assert "8 nodes, 8 edges" in page
    svg = page[page.index("<svg"):]
    assert "</svg>" in svg
    # the graph names every op of the expression (Graphviz's drawing or the plain tree)
    for op in ("div", "relu", "add", "mul", "exp"):
        assert op in svg


def test_a_cell_reads_numpy_arrays_from_python_and_returns_its_result(executed):
    xs = np.array([0.5, -1.0, 2.0])
    shown = outputs(cell_with(executed, "float(r.value)"), "text/plain")
    t = np.tanh(xs)
    expected_grad = t + xs * (1 - t * t)
    numbers = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", shown)]
    assert numbers[0] == pytest.approx(float(np.sum(t * xs)), rel=1e-15)
    assert np.allclose(numbers[1:4], expected_grad, rtol=1e-15, atol=0)


def test_steps_show_the_backward_pass_as_a_table(executed):
    page = outputs(cell_with(executed, "%%gradcalc --steps --no-graph"), "text/html")
    assert "gradcalc-steps" in page and "backward pass" in page
    assert "<svg" not in page  # --no-graph


def test_a_plot_is_inline_svg_with_one_panel_per_order(executed):
    page = outputs(cell_with(executed, "%gradcalc plot"), "text/html")
    assert page.lstrip().startswith("<svg") and page.rstrip().endswith("</svg>")
    assert "<path" in page


def test_a_check_prints_its_verdict(executed):
    page = outputs(cell_with(executed, "%%gradcalc\ncheck"), "text/html")
    assert "PASS" in page and "check" in page


def test_an_error_shows_its_caret_and_keeps_the_session(executed):
    page = outputs(cell_with(executed, "%gradcalc '(xs * '"), "text/html")
    assert "gradcalc-error" in page and "^" in page
    assert "Traceback" not in page


def test_tensors_display_as_html(executed):
    page = outputs(cell_with(executed, "from gradcalc.autodiff import Tensor"), "text/html")
    assert "gradcalc-tensor" in page
    assert "[2., 4.]" in page  # d/dt sum(t * t) = 2t at [1, 2]


def test_nothing_of_the_notebook_is_imported_outside_one():
    import subprocess
    import sys

    code = ("import sys, gradcalc; from gradcalc.cli import main; "
            "print(any(m.startswith(('IPython', 'gradcalc.cli.notebook')) for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_without_graphviz_the_graph_is_a_plain_svg_tree(monkeypatch):
    from gradcalc.cli import notebook

    monkeypatch.setattr(notebook.shutil, "which", lambda name: None)
    page = notebook.Notebook({}).cell("", "x = 2\n(x * 3) ** 2")._repr_html_()
    svg = page[page.index("<svg"):]
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="gradcalc-tree"')
    # one text line per node of the tree: pow, mul, x, 3, 2
    assert len(re.findall(r"<text ", svg)) == 5
    assert "#1 pow  36.0  grad 1.0" in svg


def test_steps_mode_forward_show_forward_mode_s_pass(executed):
    # f(u) = tanh(u) * u at x = 2, times 3: the tangent 3 (tanh(2) + 2 (1 - tanh(2)^2))
    page = outputs(cell_with(executed, "%%gradcalc --steps --mode forward"), "text/html")
    assert "gradcalc-steps" in page and "forward pass" in page and "forward pass along x: x = 2.0 + 1.0ε" in page
    t = math.tanh(2.0)
    [tangent] = re.findall(r"tangent of the output: ([-0-9.e]+)", page)
    assert float(tangent) == pytest.approx(3 * (t + 2 * (1 - t * t)), rel=1e-15)


@pytest.fixture
def magic(monkeypatch):
    """A Notebook over a Python namespace, its displays collected as HTML."""
    import IPython.display

    from gradcalc.cli import notebook

    shown: list[str] = []
    monkeypatch.setattr(IPython.display, "display", lambda item: shown.append(item._repr_html_()))
    namespace: dict = {}
    return notebook.Notebook(namespace), namespace, shown


@pytest.mark.parametrize("line, value", [
    ("x + 1 x=3", 4.0), ("sum(A @ A) A='[[1, 2], [3, 4]]'", 54.0), ("'x * y' x=2 y=5", 10.0), ("sum(x, axis=0) x=[1,2]", 3.0),
    ("x*2 x=3 --digits 3", 6.0), ("(x + 1)**2 --no-graph x=2", 9.0),
])
def test_a_line_magic_takes_the_expression_as_typed(magic, line, value):
    nb, _, shown = magic
    result = nb.line(line)
    assert shown == [] and float(result.value) == value


@pytest.mark.parametrize("line, message", [
    ("1 +", "unfinished input: expected an expression"), ("x x=+", "in the value of x: unfinished input"),
])
def test_a_line_magic_s_bad_input_is_an_error_with_its_place(magic, line, message):
    nb, _, shown = magic
    result = nb.line(line)
    pages = shown + ([result._repr_html_()] if result is not None else [])
    assert len(pages) == 1 and "gradcalc-error" in pages[0] and message in pages[0] and "^" in pages[0]


def test_an_unclosed_quote_is_a_usage_error(magic):
    nb, _, _ = magic
    assert "No closing quotation" in nb.line('"x + 1')._repr_html_()


def test_python_names_do_not_replace_the_language_s_own(magic):
    nb, namespace, shown = magic
    namespace.update(e=5, true=0, nan=2, sin=3, pi=1, x=2.0)
    assert float(nb.line("exp(1) - e").value) == 0.0
    assert float(nb.line("where(true, 1, 2)").value) == 1.0
    assert np.isnan(float(nb.line("nan").value))
    assert float(nb.line("sin(pi / 2) * x").value) == 2.0  # x, which gradcalc does not know, is borrowed
    assert shown == []


def test_a_borrowed_array_is_held_to_the_element_cap(magic):
    nb, namespace, shown = magic
    namespace["big"] = np.zeros(10**7 + 1)
    assert nb.line("sum(big)") is None
    assert "the notebook&#x27;s big: a tensor of shape (10000001,)" in shown[0] and "over the cap" in shown[0]


def test_a_function_value_shows_as_the_repl_shows_it(executed):
    cell = cell_with(executed, "%%gradcalc\ngrad(f)")
    assert "<pre" in outputs(cell, "text/html") and "&lt;grad of f&gt;" in outputs(cell, "text/html")
    assert "&lt;jacfwd of f&gt;" in outputs(cell, "text/html")
    assert "<jacfwd of f>" in outputs(cell, "text/plain")


@pytest.mark.parametrize("line, lines", [
    ("grad(lambda x: x**2)", "<grad of lambda x>"),
    ("sin", "<built-in function sin>"),
    ("help(sin)", "sin(x): "),
])
def test_a_line_magic_shows_a_function_or_help_as_the_repl_does(magic, line, lines):
    nb, _, shown = magic
    result = nb.line(line)
    assert shown == [] and repr(result).startswith(lines) and html.escape(lines) in result._repr_html_()


def test_a_def_name_in_a_cell_shows_its_function(magic):
    nb, _, shown = magic
    result = nb.cell("", "def f(x) = x * 2\nf\njacfwd(f)")
    assert [html.unescape(page) for page in shown] == ['<pre class="gradcalc-lines"><function f(x)></pre>']
    assert repr(result) == "<jacfwd of f>"
