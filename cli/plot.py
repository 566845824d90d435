"""`gradcalc plot` and `:plot`: a function and its derivatives over a range.

One variable: f, df/dx and d2f/dx2 (the engine's derivatives; cli/sampling.py computes
them) as a braille plot on the terminal (plotext), a figure file (matplotlib, an
optional extra), or columns of numbers (CSV when piped, or JSON). Two variables: a
heat map of f with its gradient as arrows in a file, a coloured heat map on the
terminal, and the same columns. plotext and matplotlib are imported only here.
"""
from __future__ import annotations

import math
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:
    from gradcalc.parser import Session

    from .sampling import Curve, Surface

FIGURE_SUFFIXES = (".svg", ".png", ".pdf")
INSTALL_MATPLOTLIB = "pip install 'gradcalc[plot]'"
DEFAULT_POINTS = (401, 41)  # one variable; two variables (per axis)
# 256-colour codes, one per derivative order, shared by the terminal plot and its legend.
ORDER_COLOURS = {0: 33, 1: 208, 2: 34}
KINK_COLOUR = 201
ZERO_COLOUR = 244
FILE_COLOURS = {0: "#1f77b4", 1: "#ff7f0e", 2: "#2ca02c"}


@dataclass
class Range:
    name: str
    low: float
    high: float
    text: str


@dataclass
class PlotRequest:
    """What to plot, parsed from the command line or a `:plot` line."""

    expr: str
    ranges: list[Range]
    bindings: list[str]
    orders: tuple[int, ...]
    points: int


def column_names(name: str, orders: tuple[int, ...]) -> list[str]:
    labels = {0: "f", 1: f"df/d{name}", 2: f"d2f/d{name}2"}
    return [labels[k] for k in orders]


# ---- reading the request --------------------------------------------------------------


def _error(message: str) -> Any:
    from gradcalc.parser import LanguageError

    return LanguageError("argument", message)


def is_range(binding: str) -> bool:
    """NAME=A:B, with the colon outside brackets (x=v[1:2] is a binding)."""
    _, sep, value = binding.partition("=")
    depth = 0
    for ch in value:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == ":" and depth == 0:
            return bool(sep)
    return False


def parse_range(binding: str) -> Range:
    name, _, value = binding.partition("=")
    name = name.strip()
    low_text, _, high_text = value.partition(":")
    if not name.isidentifier():
        raise _error(f"bad range {binding!r}: write NAME=A:B, as in x=-2:2")
    if ":" in high_text:
        raise _error(f"bad range {binding!r}: a range has two ends, as in {name}=-2:2")
    low, high = (_range_end(binding, name, text) for text in (low_text, high_text))
    if not low < high:
        swapped = f", as in {name}={high_text.strip()}:{low_text.strip()}" if low > high else ""
        raise _error(f"bad range {binding!r}: the start must be below the end{swapped}")
    return Range(name, low, high, binding)


def _range_end(binding: str, name: str, text: str) -> float:
    """A number, or an expression of constants (pi, 2*pi, -e)."""
    from gradcalc.parser import LanguageError, Session

    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        try:
            results = Session().run_source(text) if text else []
            value = float(results[-1].value.data) if len(results) == 1 and getattr(results[-1].value, "size", 0) == 1 else math.nan
        except (LanguageError, TypeError, ValueError):
            value = math.nan
    if not math.isfinite(value):
        raise _error(f"bad range {binding!r}: its ends must be finite numbers, as in {name}=-2:2 or {name}=0:2*pi ({text or 'nothing'!r} is not one)")
    return value


def parse_orders(text: str | None) -> tuple[int, ...]:
    if text is None:
        return (0, 1, 2)
    try:
        orders = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        orders = ()
    if not orders or any(k not in (0, 1, 2) for k in orders) or len(set(orders)) != len(orders):
        raise _error(f"bad --order {text!r}: a list of 0 (f), 1 (df/dx) and 2 (d2f/dx2), as in 0,1")
    return tuple(sorted(orders))


def make_request(expr: str, arguments: list[str], order: str | None, points: int | None) -> PlotRequest:
    ranges = [parse_range(a) for a in arguments if is_range(a)]
    bindings = [a for a in arguments if not is_range(a)]
    if not ranges:
        raise _error("nothing to plot against: give one variable a range, as in x=-2:2 (two for a heat map)")
    if len(ranges) > 2:
        raise _error(f"{len(ranges)} ranges: plot takes one (a curve) or two (a heat map)")
    names = [r.name for r in ranges]
    if len(set(names)) != len(names):
        raise _error(f"{names[0]} has two ranges; give it one")
    for binding in bindings:
        if binding.partition("=")[0].strip() in names:
            raise _error(f"{binding.partition('=')[0].strip()} has a range and a value; give it one of them")
    if len(ranges) == 2 and order is not None:
        raise _error("--order is for one variable; with two, plot shows f and its gradient")
    if points is not None and points < 2:
        raise _error("--points must be at least 2")
    points = points or DEFAULT_POINTS[len(ranges) - 1]
    from gradcalc.autodiff import max_elements

    if points ** len(ranges) > max_elements():
        grid = f"{points} x {points}" if len(ranges) == 2 else str(points)
        raise _error(f"{grid} points is more than the {max_elements():,} elements a tensor may hold (--max-elements)")
    return PlotRequest(expr, ranges, bindings, parse_orders(order), points)


# ---- sampling ---------------------------------------------------------------------------


class _LateProgress:
    """A progress bar on stderr, shown only once the work has taken a second."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from . import render

            if time.monotonic() - self.start < 1.0 or not render.use_rich(sys.stderr):
                return
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("point by point", total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def sample(request: PlotRequest, base: Session) -> Curve | Surface:
    import numpy as np

    from gradcalc.parser import compile_program

    from .sampling import Sampler, sample_curve, sample_surface

    program = compile_program(request.expr)
    if not program.statements:
        raise _error("nothing to plot: the expression is empty")
    sampler = Sampler(program, base)
    axes = [np.linspace(r.low, r.high, request.points) for r in request.ranges]
    progress = _LateProgress()
    try:
        if len(axes) == 1:
            return sample_curve(sampler, request.ranges[0].name, axes[0], request.orders, progress)
        return sample_surface(sampler, (request.ranges[0].name, request.ranges[1].name), axes[0], axes[1], progress)
    finally:
        progress.close()


# ---- numbers out ---------------------------------------------------------------------------


def _table(data: Curve | Surface) -> tuple[list[str], list[Any]]:
    """Column names and columns (flat arrays)."""
    from .sampling import Curve

    if isinstance(data, Curve):
        return [data.name, *column_names(data.name, tuple(data.values))], [data.x, *data.values.values()]
    import numpy as np

    gx, gy = np.meshgrid(data.x, data.y)
    x, y = data.names
    return [x, y, "f", f"df/d{x}", f"df/d{y}"], [a.ravel() for a in (gx, gy, data.f, data.dfdx, data.dfdy)]


def csv_text(data: Curve | Surface) -> str:
    """One row per point, every number at full precision (repr round-trips)."""
    names, columns = _table(data)
    rows = [",".join(names)]
    rows += [",".join(repr(float(v)) for v in row) for row in zip(*columns)]
    return "\n".join(rows) + "\n"


def json_object(data: Curve | Surface) -> dict[str, Any]:
    from .jsonout import plain
    from .sampling import Curve

    names, columns = _table(data)
    obj: dict[str, Any] = {name: plain(column) for name, column in zip(names, columns)}
    if isinstance(data, Curve):
        obj["kinks"] = [float(data.x[i]) for i in data.kinks]
    obj["vectorised"] = data.vectorised
    return obj


# ---- the terminal -------------------------------------------------------------------------


def _finite_runs(x: Any, y: Any) -> list[tuple[Any, Any]]:
    """The stretches of consecutive finite points: non-finite points are gaps."""
    import numpy as np

    finite = np.isfinite(y)
    runs, start = [], None
    for i, ok in enumerate([*finite, False]):
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            runs.append((x[start:i], y[start:i]))
            start = None
    return runs


def visible_range(curves: list[Any], pad: float = 0.05) -> tuple[float, float]:
    """The y range to show: all finite values, unless a few (next to a pole) dwarf the
    rest; then the 1st to 99th percentile, so the curves stay readable."""
    import numpy as np

    values = np.concatenate([c[np.isfinite(c)] for c in curves]) if curves else np.zeros(0)
    if values.size == 0:
        return -1.0, 1.0
    low, high = float(values.min()), float(values.max())
    p_low, p_high = (float(v) for v in np.percentile(values, [1, 99]))
    if high - low > 4 * (p_high - p_low) > 0:
        low, high = p_low, p_high
    if high == low:
        low, high = low - 1, high + 1
    margin = (high - low) * pad
    return low - margin, high + margin


def _shown(curve: Curve) -> dict[int, Any]:
    """The values drawn. A derivative is not drawn where f is not finite, nor at a kink
    (its value there is a convention, and a line would join the two sides' slopes)."""
    import numpy as np

    f = curve.values.get(0)
    shown = {}
    for k, v in curve.values.items():
        v = np.where(np.isfinite(f), v, np.nan) if f is not None else v.copy()
        if k > 0:
            v[curve.kinks] = np.nan
        shown[k] = v
    return shown


def _ansi(text: str, colour: int, on: bool) -> str:
    return f"\x1b[38;5;{colour}m{text}\x1b[0m" if on else text


def terminal_size() -> tuple[int, int]:
    """The window's columns and rows (COLUMNS and LINES win), at least 40 x 12."""
    size = shutil.get_terminal_size((80, 24))
    return max(size.columns, 40), max(size.lines, 12)


def _new_figure(width: int, height: int, colour: bool) -> Any:
    try:
        import plotext as plt
    except ImportError:
        raise _error("the terminal plot needs plotext: pip install plotext (or use --csv, --json or --out)") from None

    fig = plt.figure
    fig.clear()
    plt.terminal.limit(False, False)  # the size asked for, not clipped to the terminal plotext sees
    fig.plot_size(width, height)
    fig.theme("simple" if colour else "colorless")
    return fig


def curve_text(curve: Curve, title: str, width: int, height: int, colour: bool) -> str:
    """A braille plot of `height` rows (the legend line included) and `width` columns."""
    import numpy as np
    import plotext as plt

    shown = _shown(curve)
    low, high = visible_range(list(shown.values()))
    fig = _new_figure(width, height - 1, colour)
    fig.title(title)
    for order, values in shown.items():
        values = np.where((values < low) | (values > high), np.nan, values)  # beyond the window: a gap, not a spike
        marker = plt.marker("braille", plt.pixel(foreground=ORDER_COLOURS[order]))
        for xs, ys in _finite_runs(curve.x, values):
            fig.draw(fig.signal(xs.tolist(), ys.tolist(), marker=marker).lines())
    if low < 0 < high:
        fig.line(0, pixel=plt.pixel(foreground=ZERO_COLOUR))
    marked = _kink_points(curve, shown)
    if marked:
        fig.draw(fig.signal(*map(list, zip(*marked)), marker=plt.marker("x", plt.pixel(foreground=KINK_COLOUR))))
    fig.ruler("y").lim(low, high)
    fig.ruler("x").lim(float(curve.x[0]), float(curve.x[-1]))
    fig.label(curve.name, axis="x")
    picture = fig.build().string(colorless=not colour).rstrip("\n")
    names = column_names(curve.name, tuple(shown))
    legend = "   ".join(_ansi(f"── {name}", ORDER_COLOURS[k], colour) for k, name in zip(shown, names))
    if marked:
        legend += "   " + _ansi("x kink", KINK_COLOUR, colour)
    legend += f"   ({len(curve.x)} points, {'one vectorised pass' if curve.vectorised else 'point by point'})"
    return picture + "\n" + legend


def _kink_points(curve: Curve, shown: dict[int, Any]) -> list[tuple[float, float]]:
    """Kinks marked on f (or on the lowest order shown) where it is finite."""
    import numpy as np

    if not shown:
        return []
    values = shown[min(shown)]
    return [(float(curve.x[i]), float(values[i])) for i in curve.kinks if np.isfinite(values[i])]


RAMP = " .:-=+*#%@"


def surface_text(surface: Surface, title: str, width: int, height: int, colour: bool) -> str:
    """A heat map of f, high y at the top: coloured cells (viridis), or a ramp of
    characters without colour."""
    import numpy as np

    f = surface.f[::-1]  # row 0 is the lowest y; the top row of the picture is the highest
    finite = np.isfinite(f)
    low, high = visible_range([f[finite]], pad=0.0)
    cols, rows = width - 10, height - 3
    # Nearest sample for each character cell.
    xi = np.linspace(0, f.shape[1] - 1, cols).round().astype(int)
    yi = np.linspace(0, f.shape[0] - 1, rows).round().astype(int)
    cells = f[np.ix_(yi, xi)]
    scaled = np.clip((cells - low) / (high - low), 0, 1)
    x_name, y_name = surface.names
    lines = [title]
    for r in range(rows):
        label = f"{float(surface.y[::-1][yi[r]]):9.3g} " if r in (0, rows - 1) else " " * 10
        lines.append(label + "".join(_cell(v, colour) for v in scaled[r]))
    axis = f"{float(surface.x[0]):<10.3g}"
    lines.append(" " * 10 + axis + f"{x_name:^{max(cols - 20, 1)}}" + f"{float(surface.x[-1]):>10.3g}")
    key = f"f from {low:.4g} to {high:.4g}"
    lines.append(f"{key}  ({y_name} up, {x_name} across; {'one vectorised pass' if surface.vectorised else 'point by point'})")
    return "\n".join(lines)


def _cell(value: float, colour: bool) -> str:
    import numpy as np

    if not np.isfinite(value):
        return " "
    if not colour:
        return RAMP[min(int(value * len(RAMP)), len(RAMP) - 1)]
    r, g, b = _viridis(value)
    return f"\x1b[48;2;{r};{g};{b}m \x1b[0m"


_VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


def _viridis(t: float) -> tuple[int, int, int]:
    """Viridis, interpolated between five of its colours."""
    position = t * (len(_VIRIDIS) - 1)
    i = min(int(position), len(_VIRIDIS) - 2)
    w = position - i
    r, g, b = (round(a + (b - a) * w) for a, b in zip(_VIRIDIS[i], _VIRIDIS[i + 1]))
    return r, g, b


# ---- figure files ---------------------------------------------------------------------


def write_figure(data: Curve | Surface, title: str, path: Path) -> None:
    """A figure through matplotlib (without pyplot: no global state, no GUI backend)."""
    from .sampling import Curve

    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise _error(f"--out needs matplotlib, an optional extra: {INSTALL_MATPLOTLIB}") from None
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, editable
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.add_subplot()
    if isinstance(data, Curve):
        _draw_curve(axes, data)
    else:
        _draw_surface(figure, axes, data)
    axes.set_title(title)
    try:
        figure.savefig(path, metadata={"Date": None} if path.suffix.lower() == ".svg" else None)
    except OSError as err:
        raise _error(f"cannot write {path}: {err.strerror}") from None


def _draw_curve(axes: Any, curve: Curve) -> None:
    import numpy as np

    shown = _shown(curve)
    low, high = visible_range(list(shown.values()))
    for (order, values), name in zip(shown.items(), column_names(curve.name, tuple(shown))):
        values = np.where((values < low) | (values > high), np.nan, values)
        axes.plot(curve.x, values, color=FILE_COLOURS[order], label=name, gid=f"curve-{name}", linewidth=1.6)
    axes.axhline(0, color="0.6", linewidth=0.8, gid="zero-line")
    marked = _kink_points(curve, shown)
    if marked:
        xs, ys = zip(*marked)
        axes.plot(xs, ys, linestyle="none", marker="x", color="#d62728", markersize=8, label="kink", gid="kinks")
    axes.set_xlim(curve.x[0], curve.x[-1])
    axes.set_ylim(low, high)
    axes.set_xlabel(curve.name)
    axes.set_ylabel("value")
    axes.grid(True, alpha=0.3)
    axes.legend()


def _draw_surface(figure: Any, axes: Any, surface: Surface) -> None:
    import numpy as np

    x_name, y_name = surface.names
    f = np.where(np.isfinite(surface.f), surface.f, np.nan)
    filled = axes.contourf(surface.x, surface.y, f, levels=20, cmap="viridis")
    axes.contour(surface.x, surface.y, f, levels=10, colors="white", linewidths=0.5, alpha=0.6)
    figure.colorbar(filled, ax=axes, label="f")
    step = max(len(surface.x) // 15, 1), max(len(surface.y) // 15, 1)
    gx, gy = np.meshgrid(surface.x[:: step[0]], surface.y[:: step[1]])
    axes.quiver(gx, gy, surface.dfdx[:: step[1], :: step[0]], surface.dfdy[:: step[1], :: step[0]], color="white", gid="gradient")
    axes.set_xlabel(x_name)
    axes.set_ylabel(y_name)


# ---- the command and the REPL -----------------------------------------------------------------


def _title(request: PlotRequest) -> str:
    return " ".join([request.expr.strip(), *request.bindings])


def show(request: PlotRequest, data: Curve | Surface, *, out: Path | None, as_csv: bool, as_json: bool, draw: bool, colour: bool) -> None:
    if out is not None:
        write_figure(data, _title(request), out)
    if as_json:
        from .jsonout import dumps

        print(dumps(json_object(data)))
    elif as_csv or (out is None and not draw):
        sys.stdout.write(csv_text(data))
    if draw:
        print(terminal_text(request, data, colour))


def terminal_text(request: PlotRequest, data: Curve | Surface, colour: bool) -> str:
    from .sampling import Curve

    width, height = terminal_size()
    height = min(height - 2, 40)
    if isinstance(data, Curve):
        return curve_text(data, _title(request), width, height, colour)
    return surface_text(data, _title(request), width, height, colour)


def register_plot(app: typer.Typer) -> None:
    @app.command("plot")
    def plot_command(
        expr: Annotated[str, typer.Argument(metavar="EXPR", help="The function; several statements may be separated by ';'.", show_default=False)],
        arguments: Annotated[Optional[list[str]], typer.Argument(metavar="NAME=A:B [NAME=VALUE]...", help="A range for one variable (two for a heat map); values for the others.", show_default=False)] = None,
        order: Annotated[Optional[str], typer.Option("--order", metavar="0,1,2", help="Which to plot: 0 f, 1 df/dx, 2 d2f/dx2 (default all three).")] = None,
        points: Annotated[Optional[int], typer.Option("--points", min=2, max=1_000_000, help="Points along the range (default 401; 41 per axis for two variables).")] = None,
        out: Annotated[Optional[Path], typer.Option("--out", metavar="FILE", help=f"Write a figure: .svg, .png or .pdf (needs matplotlib: {INSTALL_MATPLOTLIB}).")] = None,
        as_csv: Annotated[bool, typer.Option("--csv", help="Print the numbers as CSV (what a pipe gets by default).")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON arrays.")] = False,
        draw: Annotated[bool, typer.Option("--draw", help="Draw on stdout even when it is not a terminal (sized by COLUMNS and LINES).")] = False,
        max_elements: Annotated[Optional[int], typer.Option("--max-elements", min=1, help="Largest tensor allowed.")] = None,
    ) -> None:
        """Plot a function and its derivatives over a range (the engine's derivatives).

        On a terminal: a braille plot; piped: CSV columns x, f, df/dx, d2f/dx2.
        Two ranges: a heat map of f with its gradient.

        Example: gradcalc plot 'tanh(x)' x=-3:3 --out tanh.svg
        """
        from gradcalc.parser import LanguageError, Session

        from . import render
        from .common import fail, prepare_engine
        from .main import BindingError, _bind

        prepare_engine(max_elements)
        try:
            if as_csv and as_json:
                raise _error("--csv and --json: choose one")
            if out is not None and out.suffix.lower() not in FIGURE_SUFFIXES:
                raise _error(f"--out {out}: the file must end in {', '.join(FIGURE_SUFFIXES)}")
            request = make_request(expr, arguments or [], order, points)
            base = Session(engine="tensor")
            bound: set[str] = set()
            for binding in request.bindings:
                _bind(base, binding, bound)
            data = sample(request, base)
            tty = sys.stdout.isatty()
            show(request, data, out=out, as_csv=as_csv, as_json=as_json,
                 draw=draw or (tty and out is None and not as_csv and not as_json), colour=render.use_rich(sys.stdout))
        except BindingError as err:
            fail(err.error, err.source, as_json)
        except LanguageError as err:
            fail(err, expr if err.line is not None else None, as_json)


def plot_in_repl(repl: Any, arg: str) -> None:
    """`:plot EXPR x=A:B [NAME=VALUE ...] [--order 0,1] [--points N] [--out FILE]`, with
    the session's variables and functions."""
    from gradcalc.parser import LanguageError

    from . import render

    try:
        tokens = shlex.split(arg)
    except ValueError as err:
        render.warn(f":plot: {err}")
        return
    options: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] in ("--order", "--points", "--out") and i + 1 < len(tokens):
            options[tokens[i]] = tokens[i + 1]
            i += 2
            continue
        rest.append(tokens[i])
        i += 1
    # Trailing NAME=... words are ranges and bindings; the words before them are EXPR.
    split = len(rest)
    while split > 0 and _is_binding(rest[split - 1]):
        split -= 1
    expr, arguments = " ".join(rest[:split]), rest[split:]
    if not expr:
        render.warn("usage: :plot EXPR x=A:B [NAME=VALUE ...] [--order 0,1,2] [--points N] [--out FILE]")
        return
    if repl.engine != "tensor":
        render.warn(":plot uses the tensor engine: switch with :engine tensor")
        return
    try:
        points = int(options["--points"]) if "--points" in options else None
        request = make_request(expr, arguments, options.get("--order"), points)
        from .main import BindingError, _bind

        base = repl.session
        if request.bindings:
            from gradcalc.parser import Session

            base = Session(engine="tensor", variables=dict(repl.session.variables), functions=dict(repl.session.functions))
            bound: set[str] = set()
            for binding in request.bindings:
                try:
                    _bind(base, binding, bound)
                except BindingError as err:
                    render.print_error(err.error, err.source)
                    return
        data = sample(request, base)
        if "--out" in options:
            write_figure(data, _title(request), Path(options["--out"]))
            repl.out.write(f"wrote {options['--out']}")
            return
        _emit(repl.out, terminal_text(request, data, repl.out.style.rich))
    except ValueError:
        render.warn("--points takes a whole number")
    except LanguageError as err:
        render.print_error(err, expr if err.line is not None else None)


def _is_binding(word: str) -> bool:
    name, sep, value = word.partition("=")
    return bool(sep) and name.isidentifier() and not value.startswith("=")


def _emit(out: Any, text: str) -> None:
    console = getattr(out, "console", None)
    if console is None:
        out.write(text)
        return
    from rich.text import Text

    console.print(Text.from_ansi(text))
