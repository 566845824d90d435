"""The notebook extension, in a real Jupyter kernel: docs/notebook.ipynb is executed with
nbclient, and each of its displays is read back (HTML, SVG, the values handed to Python).

The expected numbers are closed forms: d/da (ab + e^c)/a = -e^c/a^2, d/db = 1,
d/dc = e^c/a at a=2, b=-3, c=10; d/du tanh(u) u = tanh(u) + u (1 - tanh(u)^2)."""
from __future__ import annotations

import builtins
import html
import keyword
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
# One worker for the file: its module fixtures run the tour and the magics in a Jupyter kernel once.
pytestmark = pytest.mark.xdist_group("notebook")

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


@pytest.mark.slow
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
    assert svg.startswith('<svg style="max-width:100%;height:auto" xmlns="http://www.w3.org/2000/svg" class="gradcalc-tree"')
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


# ---- the magics' options, displays and refusals, in a real kernel ----------------------------

MAGIC_CELLS = [
    "%load_ext gradcalc",
    "%%gradcalc --no-graph\nw = 5\nw * 2",
    "%gradcalc x*x x=3 --engine scalar",  # one line on the scalar engine ...
    "%gradcalc w * x x=4",  # ... and the session is the tensor one, w and all
    "%gradcalc --engine scalar x*x*x x=2",  # options before EXPR, as on the command line
    "%gradcalc --digits 3 --no-graph w / 3",
    "%gradcalc sum([1.0, 2.0] * w) --engine tensor",
    "%%gradcalc --engine scalar\nv = 2\nv * v",
    "%gradcalc w",  # the scalar cell's variables stay in that cell
    "%gradcalc '(1 +'",
    "%gradcalc plot 'sin(x)' x=0:3",
    "%gradcalc",
    "%%gradcalc\ndef sin(u) = u",
    "%%gradcalc --out __builtins__\n1",
    "len([1, 2])",
    "%gradcalc --out print 1",
    "%gradcalc --digits -5 x x=1",
    "%%gradcalc --bogus\n1",
    "%gradcalc --engine nosuch 1",
    "%gradcalc --reset",
    "%gradcalc w",
    "%gradcalc --reset --engine scalar",
    "%gradcalc x * 2 x=3",
    "%gradcalc x + 1 x='[1, 2]'",
]


@pytest.fixture(scope="module")
def magics() -> list:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in MAGIC_CELLS])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True).execute()
    return notebook.cells


def shown(magics: list, source: str, kind: str = "text/html") -> str:
    return outputs(magics[MAGIC_CELLS.index(source)], kind)


def grads_of(page: str) -> dict[str, float]:
    return {name: float(value) for name, value in re.findall(r"<td><code>(\w+)</code></td><td><pre>([^<]+)</pre>", page)}


def value_of(page: str) -> str:
    return html.unescape(re.search(r'<b>value</b> <pre style="display:inline">([^<]*)</pre>', page).group(1))


@pytest.mark.slow
def test_an_engine_option_applies_to_its_line_or_cell_only(magics):
    scalar = shown(magics, "%gradcalc x*x x=3 --engine scalar")
    assert value_of(scalar) == "9.0" and grads_of(scalar) == {"x": 6.0}
    assert "gradcalc-error" not in scalar
    after = shown(magics, "%gradcalc w * x x=4")  # w from the first cell: nothing was reset
    assert value_of(after) == "20.0" and grads_of(after) == {"w": 4.0, "x": 5.0}
    assert "mul" in after[after.index("<svg"):]  # the tensor engine's op names (the scalar engine's is *)
    cell = shown(magics, "%%gradcalc --engine scalar\nv = 2\nv * v")
    assert value_of(cell) == "4.0" and grads_of(cell) == {"v": 4.0}
    assert value_of(shown(magics, "%gradcalc w")) == "5.0"  # the kernel session's w, not the cell's v


def test_options_are_read_anywhere_on_the_line(magics):
    cube = shown(magics, "%gradcalc --engine scalar x*x*x x=2")
    assert value_of(cube) == "8.0" and grads_of(cube) == {"x": 12.0}
    third = shown(magics, "%gradcalc --digits 3 --no-graph w / 3")
    assert value_of(third) == "1.67" and "<svg" not in third
    assert value_of(shown(magics, "%gradcalc sum([1.0, 2.0] * w) --engine tensor")) == "15.0"


def test_reset_forgets_the_session_and_may_choose_its_engine(magics):
    assert shown(magics, "%gradcalc --reset", "text/plain") == "session reset: no variables or functions; the tensor engine"
    [before, after] = [outputs(c, "text/plain") for c in magics if c.source == "%gradcalc w"]
    assert before.startswith("Result(value=5.0") and "error: unknown name 'w'" in after
    switched = shown(magics, "%gradcalc --reset --engine scalar", "text/plain")
    assert switched == "session reset: no variables or functions; the scalar engine"
    doubled = shown(magics, "%gradcalc x * 2 x=3")
    assert value_of(doubled) == "6.0" and "mul" not in doubled[doubled.index("<svg"):]  # the scalar engine's graph
    assert "the scalar engine has no tensors" in shown(magics, "%gradcalc x + 1 x='[1, 2]'", "text/plain")


def test_every_display_has_a_text_form(magics):
    for cell in magics:
        for out in cell.outputs:
            text = out.get("data", {}).get("text/plain", "")
            assert "object at 0x" not in text and "<gradcalc." not in text and "<IPython." not in text, (cell.source, text)
    assert "error: unfinished input" in shown(magics, "%gradcalc '(1 +'", "text/plain")
    assert "^" in shown(magics, "%gradcalc '(1 +'", "text/plain")
    assert shown(magics, "%gradcalc plot 'sin(x)' x=0:3", "text/plain").startswith("<figure: ")
    assert shown(magics, "%gradcalc", "text/plain").startswith("%gradcalc [options] EXPR [NAME=VALUE ...] [options]")
    assert "warning: " in shown(magics, "%%gradcalc\ndef sin(u) = u", "text/plain")


def test_the_graph_fits_the_page(magics):
    page = shown(magics, "%gradcalc x*x x=3 --engine scalar")
    svg = page[page.index("<svg"):page.index(">", page.index("<svg")) + 1]
    assert "max-width:100%" in svg and "height:auto" in svg
    plot = shown(magics, "%gradcalc plot 'sin(x)' x=0:3")
    assert "max-width:100%" in plot[:plot.index(">", plot.index("<svg")) + 1]


def test_out_refuses_the_names_python_needs(magics):
    refused = shown(magics, "%%gradcalc --out __builtins__\n1", "text/plain")
    assert "--out __builtins__" in refused and "Python" in refused
    assert shown(magics, "len([1, 2])", "text/plain") == "2"  # Python still works
    assert "--out print" in shown(magics, "%gradcalc --out print 1", "text/plain")


def test_bad_options_say_what_is_wrong(magics):
    digits = shown(magics, "%gradcalc --digits -5 x x=1", "text/plain")
    assert "--digits" in digits and "from 1 to 17" in digits and "-5" in digits
    bogus = shown(magics, "%%gradcalc --bogus\n1", "text/plain")
    assert "unknown option --bogus" in bogus
    engine = shown(magics, "%gradcalc --engine nosuch 1", "text/plain")
    assert "--engine" in engine and "tensor" in engine and "scalar" in engine and "nosuch" in engine
    for source in MAGIC_CELLS:
        assert not [o for o in magics[MAGIC_CELLS.index(source)].outputs if o.get("output_type") == "error"], source


EXPRESSIONS = {  # EXPR as typed -> its value at x = 1.5, y = -2 (Python's own arithmetic)
    "x * y": 1.5 * -2, "(x + 1) ** 2": 2.5**2, "sum([x, y], axis=0)": 1.5 - 2, "x - y": 3.5, "-x*y": 3.0, "x * -y": 3.0,
}
OPTION_WORDS = [["--digits", "4"], ["--no-graph"], ["--wrt", "x"], ["--engine", "tensor"], ["--steps"], ["--mode", "reverse"]]


@given(st.sampled_from(sorted(EXPRESSIONS)), st.lists(st.sampled_from(range(len(OPTION_WORDS))), unique=True, max_size=4),
       st.data())
@settings(max_examples=150, deadline=None)
def test_options_anywhere_on_a_magic_line_leave_expr_and_bindings_as_typed(expr, chosen, data):
    """Options go before EXPR, between the bindings or after them, in any order; EXPR is
    read as typed and every option means what it means on its own."""
    from gradcalc.cli.notebook import read_line

    before: list[list[str]] = []
    after: list[list[str]] = [["x=1.5"], ["y=-2"]]
    for k in chosen:
        at = data.draw(st.integers(-1, len(after)))  # -1: before EXPR
        if at < 0:
            before.append(OPTION_WORDS[k])
        else:
            after.insert(at, OPTION_WORDS[k])
    line = " ".join([*(w for group in before for w in group), expr, *(w for group in after for w in group)])
    read, options = read_line(line)
    assert read == expr
    assert options.words == ["x=1.5", "y=-2"]
    assert (options.digits == 4) == (0 in chosen) and options.no_graph == (1 in chosen) and options.steps == (4 in chosen)
    assert options.wrt == ("x" if 2 in chosen else None) and options.engine == ("tensor" if 3 in chosen else None)
    from gradcalc.cli.notebook import Notebook

    assert float(Notebook({}).line(line).value) == EXPRESSIONS[expr]


def test_out_refuses_every_name_python_or_ipython_needs(magic):
    nb, namespace, _ = magic
    for name in sorted({*dir(builtins), *keyword.kwlist, "In", "Out", "get_ipython", "_", "__", "_i", "_oh", "x y", "1x"}):
        shown = nb.cell(f"--out '{name}'", "1 + 1")
        assert f"--out {name}: " in repr(shown) and "choose another name" in repr(shown), name
    assert namespace == {}


@given(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: n not in dir(builtins) and not keyword.iskeyword(n) and n not in ("In", "Out", "get_ipython")))
@settings(max_examples=60, deadline=None)
def test_out_binds_any_other_name(name):
    from gradcalc.cli.notebook import Notebook

    namespace: dict = {}
    result = Notebook(namespace).cell(f"--out {name}", "1 + 1")
    assert namespace[name] is result and float(result.value) == 2.0


def test_the_tour_runs_one_line_on_the_scalar_engine_and_keeps_its_session(executed):
    page = outputs(cell_with(executed, "%gradcalc --engine scalar"), "text/html")
    t = math.tanh(0.5)
    assert float(value_of(page)) == pytest.approx(t * 0.5, rel=1e-15)
    assert grads_of(page)["u"] == pytest.approx(t + 0.5 * (1 - t * t), rel=1e-15)
    assert "<svg" not in page
    assert "&lt;grad of f&gt;" in outputs(cell_with(executed, "%%gradcalc\ngrad(f)"), "text/html")  # f is still defined


def test_a_limit_on_a_magic_cell_holds_for_that_cell_only(magic):
    """`--max-steps 100` stops a loop of 500 additions in its cell; the same cell again,
    under the session's own limit, runs it (500, as Python's loop counts)."""
    nb, _, shown = magic
    loop = "s = 0\nfor i in range(500):\n    s = s + 1\ns"
    assert nb.cell("--max-steps 100", loop) is None
    assert "100 steps" in html.unescape(shown[0]) and "--max-steps" in html.unescape(shown[0])
    total = 0
    for _ in range(500):
        total += 1
    assert float(nb.cell("", loop).value) == total


def test_full_shows_every_element_on_its_line(magic):
    nb, _, _ = magic
    summary, full = repr(nb.line("ones(2000) * 2")), repr(nb.line("ones(2000) * 2 --full"))
    assert "..." in summary and "..." not in full
    assert full.count("2.0") == 2000
