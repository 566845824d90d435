"""`gradcalc plot` and `:plot`, read back: CSV and JSON against closed-form derivatives, the
SVG's curves and labels, the terminal picture at a fixed size, and the errors."""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import kept, sampled

from .test_cli import gradcalc
from .test_repl import data_home, drive  # noqa: F401  (data_home, autouse: the REPL's history stays out of $HOME)

BRAILLE = re.compile("[\u2801-\u28ff]")


def in_process(*args):
    """The command run by typer's test runner: no new interpreter (matplotlib's import
    is paid once), for cases the subprocess tests already cover end to end."""
    from typer.testing import CliRunner

    from gradcalc.cli.main import app, protect_expression

    result = CliRunner().invoke(app, protect_expression(["plot", *args]), env={"NO_COLOR": "1"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def rows(text):
    table = list(csv.reader(io.StringIO(text)))
    return table[0], np.array([[float(v) for v in row] for row in table[1:]])


def test_csv_columns_match_closed_form_derivatives():
    """f = sin(x) e^(-x/2): f' = e^(-x/2) (cos x - sin(x)/2), f'' = e^(-x/2) (-sin x - cos x + sin(x)/4)."""
    done = gradcalc("plot", "sin(x) * exp(-x/2)", "x=-2:3", "--points", "51")
    assert done.returncode == 0, done.stderr
    header, table = rows(done.stdout)  # piped: CSV without asking
    assert header == ["x", "f", "df/dx", "d2f/dx2"]
    x, f, d1, d2 = table.T
    assert len(x) == 51 and x[0] == -2.0 and x[-1] == 3.0
    e = np.exp(-x / 2)
    np.testing.assert_allclose(f, np.sin(x) * e, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(d1, e * (np.cos(x) - np.sin(x) / 2), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(d2, e * (-np.sin(x) - np.cos(x) + np.sin(x) / 4), rtol=1e-12, atol=1e-14)


def test_csv_is_at_full_precision_and_exact_where_the_math_is():
    """x**3: f'' = 6x exactly in floating point (a difference quotient could not give it)."""
    header, table = rows(gradcalc("plot", "x**3", "x=0:1", "--points", "11", "--csv").stdout)
    x, f, d1, d2 = table.T
    assert list(d2) == [6 * v for v in x]
    assert list(d1) == [3 * v**2 for v in x]
    text = gradcalc("plot", "x / 3", "x=0:1", "--points", "2", "--order", "0").stdout
    assert text.splitlines() == ["x,f", "0.0,0.0", f"1.0,{1 / 3!r}"]


def test_json_gives_the_same_columns_as_arrays_and_the_kinks():
    doc = json.loads(gradcalc("plot", "abs(x - 0.5) + relu(x)", "x=-1:1", "--json").stdout)
    assert set(doc) == {"x", "f", "df/dx", "d2f/dx2", "kinks", "vectorised"}
    x = np.array(doc["x"])
    np.testing.assert_array_equal(doc["f"], np.abs(x - 0.5) + np.maximum(x, 0))
    inside = (np.abs(x) > 1e-9) & (np.abs(x - 0.5) > 1e-9)
    np.testing.assert_array_equal(np.array(doc["df/dx"])[inside], (np.sign(x - 0.5) + (x > 0))[inside])
    assert doc["kinks"] == pytest.approx([0.0, 0.5], abs=1e-12)
    assert doc["vectorised"] is True
    # Kinks of different ops on neighbouring points stay two kinks; between samples, the nearer side.
    doc = json.loads(gradcalc("plot", "maximum(x, 0.25) + clip(x, -0.5, 0.5)", "x=-1:1", "--points", "9", "--json").stdout)
    assert doc["kinks"] == [-0.5, 0.25, 0.5]
    doc = json.loads(gradcalc("plot", "relu(x - 0.3)", "x=0:1", "--points", "11", "--json").stdout)
    assert doc["kinks"] == pytest.approx([0.3], abs=1e-12)


@pytest.mark.parametrize(
    "expr, values, vectorised",
    [
        ("sin(x) * x", lambda x: np.sin(x) * x, True),
        ("x - mean(x)", lambda x: 0 * x, False),  # at one point x - mean(x) is 0
        ("where(x > mean(x), x, 0)", lambda x: 0 * x, False),  # the mask records no gradient: only the probe sees it
        ("sum(x**2)", lambda x: x**2, False),
        ("x * sum(w)", lambda x: 3 * x, True),  # a sum not of x is fine
        ("x if x > 0 else -x", np.abs, False),  # a branch needs one point at a time
    ],
)
def test_one_vector_pass_only_when_the_expression_is_elementwise(expr, values, vectorised):
    doc = json.loads(gradcalc("plot", expr, "x=-1:2", "w=[1, 2]", "--points", "9", "--json", "--order", "0").stdout)
    assert doc["vectorised"] is vectorised
    np.testing.assert_allclose(doc["f"], values(np.array(doc["x"])), rtol=1e-15, atol=1e-15)


def test_non_finite_points_are_gaps():
    """log on -1:1: nan left of 0 in the numbers, and nothing drawn there."""
    header, table = rows(gradcalc("plot", "log(x)", "x=-1:1", "--points", "5").stdout)
    assert [math.isnan(v) for v in table[:, 1]] == [True, True, False, False, False]
    picture = gradcalc("plot", "log(x)", "x=-1:1", "--order", "0", "--draw", env={"COLUMNS": "60", "LINES": "20"}).stdout
    canvas = [line[5:59] for line in picture.splitlines()[2:-4]]
    assert any(BRAILLE.search(row) for row in canvas)
    assert not any(BRAILLE.search(row[: len(row) * 45 // 100]) for row in canvas)


def test_terminal_plot_at_a_fixed_size():
    """One panel per order, each the window's rows (less the prompt's two and the legend)
    over the orders, at least PANEL_ROWS, at the window's width."""
    from gradcalc.cli.figures import PANEL_ROWS

    done = gradcalc("plot", "x**2 - 1", "x=-2:2", "--draw", env={"COLUMNS": "60", "LINES": "40"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.rstrip("\n").split("\n")
    picture, legend = lines[:-1], lines[-1]
    assert len(picture) == 3 * max((38 - 1) // 3, PANEL_ROWS)
    assert all(len(line) == 60 for line in picture)
    assert picture[0].strip() == "x**2 - 1"
    assert "\x1b" not in done.stdout  # no colour in a pipe
    assert sum(len(BRAILLE.findall(line)) for line in picture) > 100
    assert legend.startswith("── f   ── df/dx   ── d2f/dx2   (401 points, one vectorised pass)")
    assert sum(line.lstrip().startswith("┌") for line in picture) == 3  # three panels
    assert picture[-1].split() == ["d2f/dx2", "x"] and "-2.0" in picture[-2] and "2.0" in picture[-2]
    # f = x^2 - 1 on [-2, 2] spans [-1, 3]; f' = 2x spans [-4, 4]; f'' = 2 is flat: each
    # panel's y labels cover its own order's range
    panels = "\n".join(picture).split("┌")[1:]
    ranges = [[float(v) for v in re.findall(r"^\s*(-?[\d.]+)┤", panel, re.M)] for panel in panels]
    assert max(ranges[0]) < 3.5 and min(ranges[0]) > -1.5
    assert max(ranges[1]) > 3.5 and min(ranges[1]) < -3.5
    assert ranges[2] and all(0.5 <= v <= 3.5 for v in ranges[2])  # 2, padded
    def crossed(panel: str) -> bool:  # a line inside the box, not its border
        return any(row.count("─") > 20 and not row.lstrip().startswith(("┌", "└")) for row in panel.split("\n")[1:])

    assert [crossed(panel) for panel in panels] == [True, True, False]  # the zero line where 0 is in range


def test_terminal_colours_read_on_dark_and_light_terminals():
    """Foreground colours only (a background would be a white bar on a dark terminal),
    and none at all without colour."""
    from gradcalc.cli.figures import curve_text
    from gradcalc.cli.sampling import Curve

    x = np.linspace(-1, 1, 50)
    curve = Curve("x", x, {0: x**2 - 0.5, 1: 2 * x})
    coloured = curve_text(curve, "f", 60, 30, colour=True)
    codes = set(re.findall(r"\x1b\[([0-9;]*)m", coloured))
    assert codes and all(code == "0" or code.startswith("38;5;") for code in codes), codes
    assert "\x1b" not in curve_text(curve, "f", 60, 30, colour=False)
    done = gradcalc("plot", "x**2 - 0.5", "x=-1:1", "--draw", env={"COLUMNS": "60", "LINES": "30", "NO_COLOR": "1"})
    assert "\x1b" not in done.stdout


def test_terminal_colours_one_per_order():
    from gradcalc.cli.figures import ORDER_COLOURS, curve_text
    from gradcalc.cli.sampling import Curve

    x = np.linspace(-1, 1, 50)
    text = curve_text(Curve("x", x, {0: x**2, 1: 2 * x, 2: 2 + 0 * x}), "x**2", 60, 20, colour=True)
    for colour in ORDER_COLOURS.values():
        assert f"38;5;{colour}m" in text


def svg_panels(svg: str) -> list[str]:
    """The SVG of each axes (panel) of a matplotlib figure, top to bottom."""
    starts = [m.start() for m in re.finditer(r'<g id="axes_\d+">', svg)]
    return [svg[a:b] for a, b in zip(starts, [*starts[1:], len(svg)])]


def y_ticks(panel: str) -> list[float]:
    labels = re.findall(r'<g id="ytick_\d+">.*?<text[^>]*>([^<]*)</text>', panel, re.S)
    return [float(t.replace("\u2212", "-")) for t in labels]


@pytest.mark.slow
def test_svg_has_one_panel_per_order_with_axis_labels(tmp_path):
    pytest.importorskip("matplotlib")
    from gradcalc.cli.figures import FILE_COLOURS

    path = tmp_path / "f.svg"
    done = gradcalc("plot", "relu(x) + x**3", "x=-1:1", "--out", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # a file asked for, nothing on stdout
    assert done.stderr == f"wrote {path}\n"
    svg = path.read_text()
    panels = svg_panels(svg)
    assert [re.findall(r'<g id="curve-([^"]+)">\s*<path', p) for p in panels] == [["f"], ["df/dx"], ["d2f/dx2"]]
    for order, panel in enumerate(panels):  # each curve in its order's colour
        [style] = re.findall(r'<g id="curve-[^"]+">\s*<path[^>]*style="([^"]*)"', panel)
        assert f"stroke: {FILE_COLOURS[order]}" in style
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    for label in ("x", "f", "df/dx", "d2f/dx2", "kink", "relu(x) + x**3"):
        assert label in texts
    assert '<g id="kinks">' in panels[0] and '<g id="zero-line-f">' in panels[0]
    two = tmp_path / "g.svg"
    in_process("x**2", "x=-1:1", "--order", "0,1", "--out", str(two))
    assert re.findall(r'<g id="curve-([^"]+)">', two.read_text()) == ["f", "df/dx"]


@pytest.mark.slow
def test_each_order_has_its_own_scale_in_a_file(tmp_path):
    """tan on [-3, 3]: f within tens, f'' in the tens of thousands; one axis for both made
    tan look flat. 1/x on [-2, 2] is odd, so its panel is symmetric about 0."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "tan.svg"
    assert gradcalc("plot", "tan(x)", "x=-3:3", "--out", str(path)).returncode == 0
    f, df, d2f = (y_ticks(p) for p in svg_panels(path.read_text()))
    assert max(map(abs, f)) <= 100 and max(f) > 10
    assert max(df) > 1000 and min(df) >= -1000
    assert max(map(abs, d2f)) > 10_000
    path = tmp_path / "inv.svg"
    assert gradcalc("plot", "1/x", "x=-2:2", "--order", "0,1", "--out", str(path)).returncode == 0
    f, df = (y_ticks(p) for p in svg_panels(path.read_text()))
    assert min(f) == -max(f)
    assert max(df) <= 100 and min(df) < -100  # -1/x^2: negative everywhere


def test_png_and_pdf(tmp_path):
    pytest.importorskip("matplotlib")
    for suffix, magic in ((".png", b"\x89PNG"), (".pdf", b"%PDF")):
        path = tmp_path / f"f{suffix}"
        assert in_process("tanh(x)", "x=-3:3", "--out", str(path)).exit_code == 0
        assert path.read_bytes().startswith(magic)


def test_two_variables_gradient_field(tmp_path):
    """f = x^2 - y^2: df/dx = 2x, df/dy = -2y at every grid point."""
    header, table = rows(gradcalc("plot", "x**2 - y**2", "x=-2:2", "y=-1:1", "--points", "5").stdout)
    assert header == ["x", "y", "f", "df/dx", "df/dy"]
    x, y, f, dx, dy = table.T
    assert len(x) == 25
    np.testing.assert_array_equal(f, x**2 - y**2)
    np.testing.assert_array_equal(dx, 2 * x)
    np.testing.assert_array_equal(dy, -2 * y)
    picture = gradcalc("plot", "x**2 - y**2", "x=-2:2", "y=-1:1", "--draw", env={"COLUMNS": "60", "LINES": "20"}).stdout
    lines = picture.rstrip("\n").split("\n")
    assert len(lines) == 18 and lines[1].strip().startswith("1 ")
    cells = [line[10:] for line in lines[1:-2]]
    assert set("".join(cells)) <= set(" .:-=+*#%@→↗↑↖←↙↓↘")  # a ramp without colour, and arrows
    # Uphill is away from x = 0 along the middle row (y = 0), towards it in y above and below.
    middle = cells[len(cells) // 2]
    assert set(re.findall("[→↗↑↖←↙↓↘]", middle[:20])) == {"←"} and set(re.findall("[→↗↑↖←↙↓↘]", middle[-20:])) == {"→"}
    top_arrows = "".join(re.findall("[→↗↑↖←↙↓↘]", "".join(cells[:4])))
    assert "↓" in top_arrows and not set(top_arrows) & set("↑↗↖")
    if pytest.importorskip("matplotlib"):
        path = tmp_path / "field.svg"
        assert in_process("x**2 - y**2", "x=-2:2", "y=-1:1", "--out", str(path)).exit_code == 0
        svg = path.read_text()
        assert '<g id="gradient">' in svg
        texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
        assert "x" in texts and "y" in texts


def test_missing_matplotlib_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        f"sys.argv = ['gradcalc', 'plot', 'x**2', 'x=0:1', '--out', {str(tmp_path / 'f.svg')!r}]\n"
        "from gradcalc.cli.entry import run\nrun()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 2
    assert "pip install 'gradcalc[plot]'" in done.stderr and "Traceback" not in done.stderr


def test_missing_plotext_says_how_to_install_it():
    code = (
        "import sys; sys.modules['plotext'] = None\n"
        "sys.argv = ['gradcalc', 'plot', 'x**2', 'x=0:1', '--draw']\n"
        "from gradcalc.cli.entry import run\nrun()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 2
    assert "needs plotext" in done.stderr and "pip install 'gradcalc[plot]'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["x**2", "x=3:1"], "the start must be below the end, as in x=1:3"),
        (["x**2", "x=a:b"], "its ends must be finite numbers"),
        (["x**2"], "give one variable a range"),
        (["x**2", "x=1:1"], "the start must be below the end"),
        (["x**2", "x=0:1", "x=2:3"], "x has two ranges"),
        (["x*y*z", "x=0:1", "y=0:1", "z=0:1"], "3 ranges"),
        (["x**2", "x=0:1:2"], "a range has two ends"),
        (["x**2", "x=0:1", "x=3"], "x has a range and a value"),
        (["x*y", "x=0:1", "y=0:1", "--order", "0"], "--order is for one variable"),
        (["x**2", "x=0:1", "--order", "3"], "bad --order"),
        (["x**2", "x=0:1", "--out", "f.txt"], "must end in .svg, .png, .pdf"),
        (["x * [1, 2]", "x=0:1"], "one number per point"),
        (["x*y", "x=0:1", "y=0:1", "--points", "4000"], "4000 x 4000 points is more than the 10,000,000 elements"),
        (["x *", "x=0:1"], "unfinished input"),
        (["x * nosuch", "x=0:1"], "unknown name 'nosuch'"),
    ],
)
def test_bad_ranges_and_requests_exit_2(args, words):
    done = in_process(*args)
    assert done.exit_code == 2, done.stdout
    assert words in done.stderr and done.stdout == ""


def test_a_bad_range_through_the_real_command():
    done = gradcalc("plot", "x**2", "x=3:1")
    assert done.returncode == 2 and done.stderr == "error: bad range 'x=3:1': the start must be below the end, as in x=1:3\n"


def test_an_expression_starting_with_minus_and_range_ends_as_expressions():
    header, table = rows(gradcalc("plot", "-x**2", "x=-pi:2*pi", "--points", "3").stdout)
    assert table[:, 0].tolist() == [-math.pi, math.pi / 2, 2 * math.pi]
    assert table[:, 2].tolist() == [-2 * v for v in table[:, 0]]


def test_eval_imports_no_plotting_library():
    """plotext and matplotlib are imported by plot alone (start-up time of every other command)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gradcalc.cli", "eval", "x**2", "x=3"],
        capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0 and "value: 9.0" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "numpy" in imported and not imported & {"plotext", "matplotlib"}


def test_repl_plot_uses_the_session(capsys, tmp_path):
    drive(f"a = 2\ndef g(t) = t**3\n:plot a * g(x) x=-1:1\n:plot x x=3:1\n:plot g(x) x=0:1 --order 1 --out {tmp_path / 'g.svg'}\na\n")
    captured = capsys.readouterr()
    assert BRAILLE.search(captured.out) and "── f   ── df/dx   ── d2f/dx2" in captured.out
    assert "the start must be below the end" in captured.err
    assert "value: 2.0" in captured.out  # the session carries on
    if (tmp_path / "g.svg").exists():
        assert re.findall(r'<g id="curve-([^"]+)">', (tmp_path / "g.svg").read_text()) == ["df/dx"]
    else:
        assert "gradcalc[plot]" in captured.err
    drive(":engine scalar\n:plot x x=0:1\n")
    assert "tensor engine" in capsys.readouterr().err


UNARY = ["sin", "cos", "tanh", "sigmoid", "relu", "abs", "softplus"]


@kept  # (drawn inside its own draws: one strategy per depth)
@st.composite
def elementwise_expressions(draw, depth=3):
    """Random compositions of elementwise ops in x (and a bound w)."""
    if depth == 0 or draw(st.booleans()):
        return draw(sampled(["x", "w", "0.5", "x", "2"]))
    if draw(st.booleans()):
        return f"{draw(sampled(UNARY))}({draw(elementwise_expressions(depth - 1))})"
    op = draw(sampled(["+", "-", "*"]))
    return f"({draw(elementwise_expressions(depth - 1))} {op} {draw(elementwise_expressions(depth - 1))})"


@given(elementwise_expressions())
@pytest.mark.slow
def test_the_vector_pass_agrees_with_point_by_point(expr):
    """Whatever the expression, one vector pass (when taken) gives the numbers that
    evaluating each point on its own gives."""
    from gradcalc.cli.sampling import Sampler, _point_by_point, sample_curve
    from gradcalc.parser import Session, compile_program

    base = Session()
    base.run_source("w = 0.75")
    sampler = Sampler(compile_program(expr), base)
    x = np.linspace(-2, 2, 17)
    curve = sample_curve(sampler, "x", x, (0, 1, 2))
    pointwise, _ = _point_by_point(sampler, {"x": x}, (0, 1, 2), None)
    for k, values in zip((0, 1, 2), pointwise):
        np.testing.assert_allclose(curve.values[k], values, rtol=1e-12, atol=1e-12, err_msg=f"{expr}: order {k}")


def test_the_progress_bar_appears_only_after_a_second(monkeypatch):
    from gradcalc.cli import render

    now = [100.0]
    monkeypatch.setattr(render, "time", types.SimpleNamespace(monotonic=lambda: now[0]))  # render's clock only
    monkeypatch.setattr(render, "use_rich", lambda stream: True)
    progress = render.LateProgress("point by point", delay=1.0)  # started at 100.0
    now[0] = 100.4
    progress(1, 10)  # 0.4 s in: nothing yet
    assert progress.bar is None
    now[0] = 101.2
    progress(2, 10)  # 1.2 s in: the bar starts, already at 2 of 10
    assert progress.bar is not None and progress.bar.tasks[0].completed == 2
    progress(3, 10)
    assert progress.bar.tasks[0].completed == 3
    progress.close()


@pytest.mark.parametrize("low, high, points", [(-1e308, 1e308, 3), (-1.7976931348623157e308, 1.7976931348623157e308, 5), (-1e308, 9e307, 4)])
def test_a_range_wider_than_the_largest_float_is_sampled_without_overflow(low, high, points):
    """The span high - low overflows to inf here (np.linspace gives nan and inf); mpmath
    computes the evenly spaced points exactly; np.linspace's own rounding is an ulp or so."""
    import mpmath

    done = gradcalc("plot", "x", f"x={low!r}:{high!r}", "--points", str(points), "--csv", "--order", "0")
    assert done.returncode == 0, done.stderr
    x = rows(done.stdout)[1][:, 0]
    with mpmath.workprec(2000):
        expected = [float(mpmath.mpf(low) + (mpmath.mpf(high) - mpmath.mpf(low)) * i / (points - 1)) for i in range(points)]
    assert x[0] == low and x[-1] == high
    np.testing.assert_allclose(x, expected, rtol=1e-15, atol=0)


def _box_and_points(panel: str) -> tuple[tuple[float, float, float, float], list[tuple[float, float]]]:
    """The legend's frame (x0, y0, x1, y1) and the curve's vertices, in the SVG's coordinates."""
    def pairs(d: str) -> list[tuple[float, float]]:
        numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", d)]
        return list(zip(numbers[::2], numbers[1::2]))

    [frame] = re.findall(r'<g id="legend_\d+">\s*<g id="patch_\d+">\s*<path d="([^"]+)"', panel)
    xs, ys = zip(*pairs(frame))
    curve = "".join(re.findall(r'<g id="curve-[^"]+">\s*<path d="([^"]+)"', panel))
    return (min(xs), min(ys), max(xs), max(ys)), pairs(curve)


@pytest.mark.parametrize("expr, span", [
    ("abs(x)", "x=-3:3"), ("relu(x)", "x=-3:3"), ("-relu(-x)", "x=-3:3"), ("x**2", "x=-1:1"), ("tanh(x)", "x=-3:3"),
    ("relu(x - 1) + relu(-1 - x)", "x=-3:3"), ("maximum(x, 0.5) * x", "x=-2:2"), ("-abs(x)", "x=-3:3"), ("exp(x)", "x=-2:2"),
])
@pytest.mark.slow
def test_no_legend_covers_a_curve(tmp_path, expr, span):
    """The maximum of f in a kink plot (abs, relu: at a corner) and every other point of
    each curve are outside each panel's legend."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "f.svg"
    assert gradcalc("plot", expr, span, "--out", str(path)).returncode == 0
    for panel in svg_panels(path.read_text()):
        (x0, y0, x1, y1), points = _box_and_points(panel)
        # along every segment of the path, not only at its vertices (a straight stretch has two)
        along = [(a + (c - a) * s / 50, b + (d - b) * s / 50) for (a, b), (c, d) in zip(points, points[1:]) for s in range(51)]
        assert along and not [(x, y) for x, y in along if x0 <= x <= x1 and y0 <= y <= y1], (expr, panel[:80])
