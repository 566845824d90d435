"""`gradcalc plot` and `:plot`: a function and its derivatives over a range.

One variable: f, df/dx and d2f/dx2 (the engine's derivatives; cli/sampling.py computes
them) as a braille plot on the terminal, a figure file, or columns of numbers (CSV when
piped, or JSON). Two variables: a heat map of f with its gradient as arrows in a file, a
coloured heat map on the terminal, and the same columns. Reading the request and the
numbers out are here; cli/figures.py draws.
"""
from __future__ import annotations

import math
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gradcalc import autodiff
from gradcalc.autodiff.ops.constructors import evenly_spaced
from gradcalc.parser import LanguageError, Session, compile_program
from gradcalc.parser.budgets import command_budget

from . import render
from .bindings import BindingError, bind, writable_name
from .common import fail, prepare_engine, usage_error
from .jsonout import dumps, plain
from .options import COMMANDS, OptionError
from .sampling import Curve, Sampler, Surface, column_names, sample_curve, sample_surface

FIGURE_SUFFIXES = (".svg", ".png", ".pdf")
DEFAULT_POINTS = (401, 41)  # one variable; two variables (per axis)


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


# ---- reading the request --------------------------------------------------------------


def _error(message: str) -> LanguageError:
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
    if not writable_name(name):
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
    if points ** len(ranges) > autodiff.max_elements():
        grid = f"{points} x {points}" if len(ranges) == 2 else str(points)
        raise _error(f"{grid} points is more than the {autodiff.max_elements():,} elements a tensor may hold (--max-elements)")
    return PlotRequest(expr, ranges, bindings, parse_orders(order), points)


# ---- sampling ---------------------------------------------------------------------------


def sample(request: PlotRequest, base: Session) -> Curve | Surface:
    """The numbers of the plot. Sampling is one unit of work under one budget of steps,
    time and memory: every point evaluated and every derivative taken at it count against
    it (a plot of 10^6 points, point by point, stops at --max-seconds, not after 10^6
    statements' budgets)."""
    program = compile_program(request.expr)
    if not program.statements:
        raise _error("nothing to plot: the expression is empty")
    sampler = Sampler(program, base)
    axes = [evenly_spaced(r.low, r.high, request.points) for r in request.ranges]  # as the language's linspace
    if base.engine in ("jax", "torch"):  # that library's own vmap and grad
        from .engine_plot import sample_on_engine

        with command_budget():
            return sample_on_engine(program, base, [r.name for r in request.ranges], axes, request.orders)
    progress = render.LateProgress("point by point", delay=1.0)
    try:
        with command_budget():
            if len(axes) == 1:
                return sample_curve(sampler, request.ranges[0].name, axes[0], request.orders, progress)
            return sample_surface(sampler, (request.ranges[0].name, request.ranges[1].name), axes[0], axes[1], progress)
    finally:
        progress.close()


# ---- numbers out ---------------------------------------------------------------------------


def _table(data: Curve | Surface) -> tuple[list[str], list[Any]]:
    """Column names and columns (flat arrays)."""
    if isinstance(data, Curve):
        return [data.name, *column_names(data.name, tuple(data.values))], [data.x, *data.values.values()]
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
    names, columns = _table(data)
    obj: dict[str, Any] = {name: plain(column) for name, column in zip(names, columns)}
    if isinstance(data, Curve):
        obj["kinks"] = [float(data.x[i]) for i in data.kinks]
    obj["vectorised"] = data.vectorised
    return obj


# ---- the command and the REPL -----------------------------------------------------------------


def _title(request: PlotRequest) -> str:
    return " ".join([request.expr.strip(), *request.bindings])


def terminal_text(request: PlotRequest, data: Curve | Surface, colour: bool) -> str:
    from .figures import curve_text, fit_encoding, surface_text, terminal_size

    width, height = terminal_size()
    height = min(height - 2, 40)
    if isinstance(data, Curve):
        picture = curve_text(data, _title(request), width, height, colour)
    else:
        picture = surface_text(data, _title(request), width, height, colour)
    return fit_encoding(picture, getattr(sys.stdout, "encoding", None))


def plot_action(
    expr: str, arguments: list[str] | None, *, order: str | None, points: int | None, out: Path | None, as_csv: bool, as_json: bool,
    draw: bool, max_elements: int | None, max_steps: int | None, max_input: int, max_seconds: float | None, max_memory: int | None,
    engine: str, device: str | None,
) -> int:
    """`gradcalc plot` (cli/options.py declares its arguments): the exit status."""
    prepare_engine(max_elements, max_steps, max_input, max_seconds, max_memory)
    from .engines import choose_engine

    choose_engine(engine, device, as_json)
    if engine == "scalar":
        usage_error("gradcalc plot needs --engine tensor, jax or torch (the scalar engine holds one number per node)", as_json)
    try:
        if as_csv and as_json:
            raise _error("--csv and --json: choose one")
        if out is not None and out.suffix.lower() not in FIGURE_SUFFIXES:
            raise _error(f"--out {out}: the file must end in {', '.join(FIGURE_SUFFIXES)}")
        request = make_request(expr, arguments or [], order, points)
        base = Session(engine=engine)
        bind(base, request.bindings)
        data = sample(request, base)
        draw = draw or (sys.stdout.isatty() and out is None and not as_csv and not as_json)
        if out is not None:
            from .figures import write_figure

            write_figure(data, _title(request), out)
            render.wrote(out)
        if as_json:
            print(dumps(json_object(data)))
        elif as_csv or (out is None and not draw):
            sys.stdout.write(csv_text(data))
        if draw:
            print(terminal_text(request, data, render.use_rich(sys.stdout)))
    except BindingError as err:
        fail(err.error, err.source, as_json)
    except LanguageError as err:
        fail(err, expr if err.line is not None else None, as_json)
    return 0


USAGE = "EXPR x=A:B [NAME=VALUE ...] [--order 0,1,2] [--points N] [--out FILE]"


# What `:plot` and `%gradcalc plot` take of gradcalc plot's options, as cli/options.py declares them.
_OPTIONS = {name: option for option in COMMANDS["plot"].options if option.key in ("order", "points", "out") for name in option.names}


def read_words(words: list[str]) -> tuple[str, list[str], dict[str, str]]:
    """The words of `:plot` and `%gradcalc plot` (USAGE): EXPR (the words before the
    NAME=... words at the end, which are ranges and bindings), those, and the options."""
    options: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(words):
        if words[i] in _OPTIONS and i + 1 < len(words):
            options[words[i]] = words[i + 1]
            i += 2
        else:
            rest.append(words[i])
            i += 1
    split = len(rest)
    while split > 0 and _is_binding(rest[split - 1]):
        split -= 1
    return " ".join(rest[:split]), rest[split:], options


def sample_words(expr: str, arguments: list[str], options: dict[str, str], session: Session) -> tuple[PlotRequest, Curve | Surface]:
    """What read_words read, sampled with the variables and functions of `session`
    (NAME=VALUE binds in a copy of it). Raises LanguageError and BindingError."""
    try:
        points = _OPTIONS["--points"].read(options["--points"]) if "--points" in options else None
    except OptionError as err:
        raise _error(str(err)) from None
    request = make_request(expr, arguments, options.get("--order"), points)
    if request.bindings:
        session = Session(engine=session.engine, variables=dict(session.variables), functions=dict(session.functions))
        bind(session, request.bindings)
    return request, sample(request, session)


def plot_in_repl(repl: Any, arg: str) -> None:
    """`:plot` (USAGE), with the session's variables and functions."""
    try:
        expr, arguments, options = read_words(shlex.split(arg))
    except ValueError as err:  # an unclosed quote
        render.warn(f":plot: {err}")
        return
    if not expr:
        render.warn(f"usage: :plot {USAGE}")
        return
    if repl.engine == "scalar":
        render.warn(":plot needs the tensor engine (or jax or torch): switch with :engine tensor")
        return
    try:
        request, data = sample_words(expr, arguments, options, repl.session)
        if "--out" in options:
            from .figures import write_figure

            write_figure(data, _title(request), Path(options["--out"]))
            render.wrote(options["--out"])
        else:
            _emit(repl.out, terminal_text(request, data, repl.out.style.rich))
    except BindingError as err:
        render.print_error(err.error, err.source)
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
