"""How plots look: a braille curve or a heat map on the terminal (plotext), and figure
files (matplotlib, an optional extra). Both libraries are imported here alone, and this
module only when something is drawn.
"""
from __future__ import annotations

import io
import math
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from gradcalc.parser import LanguageError

from .common import OutputFileError, write_file
from .render import MIN_COLUMNS
from .sampling import Curve, Surface, column_names

INSTALL_PLOT = "pip install 'gradcalc[plot]'"  # plotext and matplotlib
# 256-colour codes, one per derivative order, shared by the terminal plot and its legend.
ORDER_COLOURS = {0: 33, 1: 208, 2: 34}
KINK_COLOUR = 201
ZERO_COLOUR = 244
PANEL_ROWS = 10  # at least, per derivative order: a shorter window scrolls rather than squashes
BACKGROUND = re.compile("\x1b\\[48;5;\\d+m")
FILE_COLOURS = {0: "#1f77b4", 1: "#ff7f0e", 2: "#2ca02c"}


def _finite_runs(x: Any, y: Any) -> list[tuple[Any, Any]]:
    """The stretches of consecutive finite points: non-finite points are gaps."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], np.isfinite(y), [0]])))  # starts and ends, in turn
    return [(x[start:end], y[start:end]) for start, end in zip(edges[::2], edges[1::2])]


def visible_range(curves: list[Any], pad: float = 0.05) -> tuple[float, float]:
    """The y range to show: all finite values, unless a few (next to a pole) dwarf the
    rest; then the 1st to 99th percentile, so the curves stay readable."""
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
    """The window's columns and rows (COLUMNS and LINES win), at least MIN_COLUMNS x 12."""
    size = shutil.get_terminal_size((80, 24))
    return max(size.columns, MIN_COLUMNS), max(size.lines, 12)


def _plotext() -> Any:
    try:
        import plotext
    except ImportError:
        raise LanguageError("argument", f"the terminal plot needs plotext, an optional extra: {INSTALL_PLOT} (or use --csv or --json)") from None
    return plotext


def _new_figure(width: int, height: int, colour: bool) -> Any:
    plt = _plotext()
    fig = plt.figure
    fig.clear()
    plt.terminal.limit(False, False)  # the size asked for, not clipped to the terminal plotext sees
    fig.plot_size(width, height)
    fig.theme("simple" if colour else "colorless")
    return fig


def curve_text(curve: Curve, title: str, width: int, height: int, colour: bool) -> str:
    """A braille plot of `height` rows in all (legend included) and `width` columns: one
    panel per derivative order, stacked over the same x range, each with its own y range
    (f' of tan is thousands where f is ones: on one axis f would look flat)."""
    shown = _shown(curve)
    orders = list(shown)
    rows = max((height - 1) // max(len(orders), 1), PANEL_ROWS)
    names = dict(zip(orders, column_names(curve.name, tuple(orders))))
    marked = _kink_points(curve, shown)
    panels = []
    for i, order in enumerate(orders):
        last = i == len(orders) - 1
        panels.append(_panel_text(curve, shown[order], order, marked if i == 0 else [], title if i == 0 else "",
                                  names[order], width, rows, colour, x_label=last))
    legend = "   ".join(_ansi(f"── {names[k]}", ORDER_COLOURS[k], colour) for k in orders)
    if marked:
        legend += "   " + _ansi("x kink", KINK_COLOUR, colour)
    legend += f"   ({len(curve.x)} points, {'one vectorised pass' if curve.vectorised else 'point by point'})"
    return "\n".join(panels) + "\n" + legend


def _panel_text(curve: Curve, values: Any, order: int, marked: list[tuple[float, float]], title: str, name: str,
                width: int, height: int, colour: bool, x_label: bool) -> str:
    plt = _plotext()

    low, high = visible_range([values])
    values = np.where((values < low) | (values > high), np.nan, values)  # beyond the window: a gap, not a spike
    fig = _new_figure(width, height, colour)
    if title:
        fig.title(title)
    x0, x1 = float(curve.x[0]), float(curve.x[-1])
    if low < 0 < high:
        fig.line(0, pixel=plt.pixel(foreground=ZERO_COLOUR))
    marker = plt.marker("braille", plt.pixel(foreground=ORDER_COLOURS[order]))
    for xs, ys in _finite_runs(curve.x, values):
        fig.draw(fig.signal(xs.tolist(), ys.tolist(), marker=marker).lines())
    if marked:
        fig.draw(fig.signal(*map(list, zip(*marked)), marker=plt.marker("x", plt.pixel(foreground=KINK_COLOUR))))
    fig.ruler("y").lim(low, high)
    fig.ruler("x").lim(x0, x1)
    fig.label(name, axis="y")
    if x_label:
        fig.label(curve.name, axis="x")
    # plotext gives a line() a white background of its own, a bright bar on a dark
    # terminal: the plot sets foreground colours only, which read on dark and light alike.
    return BACKGROUND.sub("", fig.build().string(colorless=not colour).rstrip("\n"))


def _kink_points(curve: Curve, shown: dict[int, Any]) -> list[tuple[float, float]]:
    """Kinks marked on f (or on the lowest order shown) where it is finite."""
    if not shown:
        return []
    values = shown[min(shown)]
    return [(float(curve.x[i]), float(values[i])) for i in curve.kinks if np.isfinite(values[i])]


RAMP = " .:-=+*#%@"


ARROWS = "→↗↑↖←↙↓↘"  # by angle, counter-clockwise from east


def surface_text(surface: Surface, title: str, width: int, height: int, colour: bool) -> str:
    """A heat map of f, high y at the top: coloured cells (viridis), or a ramp of
    characters without colour; arrows on a sparse grid point uphill (the gradient)."""
    f = surface.f[::-1]  # row 0 is the lowest y; the top row of the picture is the highest
    finite = np.isfinite(f)
    low, high = visible_range([f[finite]], pad=0.0)
    cols, rows = width - 10, height - 3
    # Nearest sample for each character cell.
    xi = np.linspace(0, f.shape[1] - 1, cols).round().astype(int)
    yi = np.linspace(0, f.shape[0] - 1, rows).round().astype(int)
    cells = f[np.ix_(yi, xi)]
    scaled = np.clip((cells - low) / (high - low), 0, 1)
    arrows = _arrows(surface, xi, yi)
    x_name, y_name = surface.names
    lines = [title]
    for r in range(rows):
        label = f"{float(surface.y[::-1][yi[r]]):9.3g} " if r in (0, rows - 1) else " " * 10
        lines.append(label + "".join(_cell(v, colour, arrows.get((r, c), "")) for c, v in enumerate(scaled[r])))
    axis = f"{float(surface.x[0]):<10.3g}"
    lines.append(" " * 10 + axis + f"{x_name:^{max(cols - 20, 1)}}" + f"{float(surface.x[-1]):>10.3g}")
    scale = "".join(_cell(t, colour) for t in np.linspace(0, 1, len(RAMP)))
    key = f"f: {low:.4g} {scale} {high:.4g}"
    lines.append(f"{key}  ({y_name} up, {x_name} across, arrows uphill; {'one vectorised pass' if surface.vectorised else 'point by point'})")
    return "\n".join(lines)


def _arrows(surface: Surface, xi: Any, yi: Any) -> dict[tuple[int, int], str]:
    """An arrow in every few cells, pointing the way the gradient points as drawn: a
    step (dx, dy) covers dx / x_span of the columns and dy / y_span of the rows, and a
    row is about twice as tall as a column is wide."""
    rows, cols = len(yi), len(xi)
    gx = surface.dfdx[::-1][np.ix_(yi, xi)]
    gy = surface.dfdy[::-1][np.ix_(yi, xi)]
    u = gx * cols / (surface.x[-1] - surface.x[0])
    v = gy * 2 * rows / (surface.y[-1] - surface.y[0])
    step_r, step_c = max(rows // 5, 2), max(cols // 10, 5)
    arrows = {}
    for r in range(step_r // 2, rows, step_r):
        for c in range(step_c // 2, cols, step_c):
            if np.isfinite(u[r, c]) and np.isfinite(v[r, c]) and (u[r, c] or v[r, c]):
                arrows[(r, c)] = ARROWS[round(math.atan2(v[r, c], u[r, c]) / (math.pi / 4)) % 8]
    return arrows


def _cell(value: float, colour: bool, mark: str = "") -> str:
    if not np.isfinite(value):
        return mark or " "
    if not colour:
        return mark or RAMP[min(int(value * len(RAMP)), len(RAMP) - 1)]
    r, g, b = _viridis(value)
    ink = "38;2;0;0;0" if value > 0.6 else "38;2;255;255;255"  # legible on light and dark cells
    return f"\x1b[48;2;{r};{g};{b};{ink}m{mark or ' '}\x1b[0m"


_VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


def _viridis(t: float) -> tuple[int, int, int]:
    """Viridis, interpolated between five of its colours."""
    position = t * (len(_VIRIDIS) - 1)
    i = min(int(position), len(_VIRIDIS) - 2)
    w = position - i
    r, g, b = (round(a + (b - a) * w) for a, b in zip(_VIRIDIS[i], _VIRIDIS[i + 1]))
    return r, g, b


def _braille_in_ascii(cell: int) -> str:
    """The ASCII character that looks most like a braille cell: its dots' rows (bits 0 and
    3 are the top row, 1 and 4, 2 and 5 the middle ones, 6 and 7 the bottom)."""
    rows = [r for r, bits in enumerate((0b1001, 0b10010, 0b100100, 0b11000000)) if cell & bits]
    if not rows:
        return " "
    top, bottom = rows[0], rows[-1]
    if bottom - top >= 2:
        return "|"
    return "'" if top == 0 else "." if bottom == 3 else "-"


_ASCII_PICTURE = {
    **{0x2800 + cell: _braille_in_ascii(cell) for cell in range(256)},
    **{ord(box): plain for box, plain in zip("─│┌┐└┘├┤┬┴┼", "-|+++++++++")},
    **{ord(arrow): plain for arrow, plain in zip(ARROWS, ">/^\\</v\\")},
}


def fit_encoding(picture: str, encoding: str | None) -> str:
    """`picture` drawn in ASCII (braille as ' - . |, box lines as - | +, arrows as > / ^ ...)
    when `encoding` (stdout's: an ASCII or Latin-1 locale) cannot hold it: escaping each
    character, as other output is, would make every cell six columns wide."""
    try:
        picture.encode(encoding or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return picture.translate(_ASCII_PICTURE)
    return picture


# ---- figure files ---------------------------------------------------------------------


def write_figure(data: Curve | Surface, title: str, path: Path) -> None:
    """A figure through matplotlib (without pyplot: no global state, no GUI backend). A
    curve gets one panel per derivative order, sharing x, each with its own y axis."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise LanguageError("argument", f"--out needs matplotlib, an optional extra: {INSTALL_PLOT}") from None
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, editable
    if isinstance(data, Curve):
        panels = len(data.values)
        figure = Figure(figsize=(7, 1.2 + 2.4 * panels), layout="constrained")
        column = list(figure.subplots(panels, 1, sharex=True, squeeze=False)[:, 0])
        _draw_curve(column, data)
        column[0].set_title(title)
    else:
        figure = Figure(figsize=(7, 4.5), layout="constrained")
        axes = figure.add_subplot()
        _draw_surface(figure, axes, data)
        axes.set_title(title)
    buffer = io.BytesIO()
    suffix = path.suffix.lower()
    figure.savefig(buffer, format=suffix.lstrip("."), metadata={"Date": None} if suffix == ".svg" else None)
    try:
        write_file(path, buffer.getvalue())  # whole or not at all, and never over a file the command read
    except OutputFileError as err:
        raise LanguageError("argument", str(err)) from None


def _draw_curve(panels: list[Any], curve: Curve) -> None:
    """One order on each of `panels`, each clipped to its own visible range."""
    shown = _shown(curve)
    marked = _kink_points(curve, shown)
    for axes, (order, values), name in zip(panels, shown.items(), column_names(curve.name, tuple(shown))):
        low, high = visible_range([values])
        values = np.where((values < low) | (values > high), np.nan, values)
        axes.plot(curve.x, values, color=FILE_COLOURS[order], label=name, gid=f"curve-{name}", linewidth=1.6)
        axes.axhline(0, color="0.6", linewidth=0.8, gid=f"zero-line-{name}")
        if marked and axes is panels[0]:
            xs, ys = zip(*marked)
            axes.plot(xs, ys, linestyle="none", marker="x", color="#d62728", markersize=8, label="kink", gid="kinks")
        axes.set_xlim(curve.x[0], curve.x[-1])
        axes.set_ylim(low, high)
        axes.set_ylabel(name)
        axes.grid(True, alpha=0.3)
        # Where it hides the fewest points of the curves ("best"): a fixed corner covered
        # the maximum of f in a kink plot, and a legend over a curve hides what it labels.
        axes.legend(loc="best")
    panels[-1].set_xlabel(curve.name)


def _draw_surface(figure: Any, axes: Any, surface: Surface) -> None:
    x_name, y_name = surface.names
    f = np.where(np.isfinite(surface.f), surface.f, np.nan)
    filled = axes.contourf(surface.x, surface.y, f, levels=20, cmap="viridis")
    axes.contour(surface.x, surface.y, f, levels=10, colors="white", linewidths=0.5, alpha=0.6)
    figure.colorbar(filled, ax=axes, label="f")
    step = max(len(surface.x) // 12, 1), max(len(surface.y) // 12, 1)  # about 12 arrows a side
    gx, gy = np.meshgrid(surface.x[:: step[0]], surface.y[:: step[1]])
    axes.quiver(gx, gy, surface.dfdx[:: step[1], :: step[0]], surface.dfdy[:: step[1], :: step[0]], color="white", angles="xy", gid="gradient")
    axes.set_xlabel(x_name)
    axes.set_ylabel(y_name)
