"""Sampling an expression and its derivatives over a range, for `gradcalc plot`.

The derivatives are the engine's: `grad` of the output with respect to the plotted
variable, and `grad` of that gradient (built with create_graph) for the second. When
the expression is elementwise in the variable, one pass over a vector of all the points
gives every value and derivative at once (the gradient of the sum is then the
derivative at each point). That is verified, not assumed: on a probe of a few points
the vector pass must build only elementwise ops downstream of the variable, keep its
shape, and agree with point-by-point evaluation (which catches what the graph cannot
show, such as a mask computed from `mean(x)`, which records no gradient). Otherwise
every point is evaluated on its own.

Data only; cli/plot.py draws it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcalc.autodiff import Tensor, grad, topological_order
from gradcalc.autodiff.wiring import recorded_params
from gradcalc.parser import ExpressionResult, LanguageError, Program, Session

# Ops that act element by element (with broadcasting), by registry category.
ELEMENTWISE_CATEGORIES = frozenset({"elementwise", "arithmetic"})
NOT_ELEMENTWISE = frozenset({"matmul"})
PROBE_POINTS = 5
PROBE_RTOL = 1e-9

Progress = Callable[[int, int], None]


def column_names(name: str, orders: tuple[int, ...]) -> list[str]:
    """What f and its derivatives of `orders` are called, for the variable `name`."""
    labels = {0: "f", 1: f"df/d{name}", 2: f"d2f/d{name}2"}
    return [labels[k] for k in orders]


@dataclass
class Curve:
    """f and its derivatives of `orders` along one variable."""

    name: str
    x: np.ndarray
    values: dict[int, np.ndarray]  # order -> values at x (order 0 is f)
    kinks: list[int] = field(default_factory=list)  # indices of x next to a kink of relu, abs, ...
    vectorised: bool = True


@dataclass
class Surface:
    """f and its gradient over a grid of two variables; arrays are indexed [y, x]."""

    names: tuple[str, str]
    x: np.ndarray
    y: np.ndarray
    f: np.ndarray
    dfdx: np.ndarray
    dfdy: np.ndarray
    vectorised: bool = True


@dataclass
class _Kinks:
    """Where one kink-capable op (relu, abs, maximum, ...) saw its inputs, point by point."""

    op: Any
    params: dict[str, Any]
    inputs: list[np.ndarray]  # each with a leading axis of one entry per point


class Sampler:
    """Runs `program` with some variables set to arrays, the rest from `base`."""

    def __init__(self, program: Program, base: Session) -> None:
        self.program = program
        self.base = base

    def derivatives(self, values: dict[str, np.ndarray], orders: tuple[int, ...]) -> tuple[Tensor, list[Any], list[np.ndarray]]:
        """The output, the variables' leaves and, for one variable, the derivatives of
        each order in `orders` (0 is f itself); for two variables f and both partials."""
        session = Session(engine="tensor", variables=dict(self.base.variables), functions=dict(self.base.functions))
        xs = [session.assign(name, Tensor(np.asarray(v, dtype=float))) for name, v in values.items()]
        ran = [r for r in session.run(self.program) if isinstance(r, ExpressionResult)]
        if not ran:
            raise LanguageError("argument", "nothing to plot: end EXPR with an expression")
        out = ran[-1].value
        if not isinstance(out, Tensor):
            raise LanguageError("value", "plot needs a number for each point, not several results")
        if len(xs) == 2:
            gx, gy = grad(out, xs)
            return out, xs, [out.data, _array(gx), _array(gy)]
        x = xs[0]
        results = {0: out.data}
        if max(orders) >= 1:
            d1 = grad(out, x, create_graph=max(orders) >= 2)
            results[1] = _array(d1)
            if max(orders) >= 2:
                results[2] = _array(grad(d1, x))
        return out, xs, [results[k] for k in orders]


def _array(value: Any) -> np.ndarray:
    return np.array(value.data if isinstance(value, Tensor) else value, dtype=float)


def sample_curve(sampler: Sampler, name: str, x: np.ndarray, orders: tuple[int, ...], progress: Progress | None = None) -> Curve:
    vectorised = is_elementwise(sampler, {name: x}, orders)
    if vectorised:
        out, leaves, values = sampler.derivatives({name: x}, orders)
        sites = _kink_sites(out, leaves, x.shape)
    else:
        values, sites = _point_by_point(sampler, {name: x}, orders, progress)
    curve = Curve(name, x, {k: np.asarray(v, dtype=float).reshape(x.shape) for k, v in zip(orders, values)}, vectorised=vectorised)
    curve.kinks = kink_indices(sites, len(x))
    return curve


def sample_surface(sampler: Sampler, names: tuple[str, str], x: np.ndarray, y: np.ndarray, progress: Progress | None = None) -> Surface:
    gx, gy = np.meshgrid(x, y)
    grid = {names[0]: gx, names[1]: gy}
    vectorised = is_elementwise(sampler, grid, (0, 1))
    if vectorised:
        _, _, values = sampler.derivatives(grid, (0, 1))
    else:
        values, _ = _point_by_point(sampler, grid, (0, 1), progress)
    f, dfdx, dfdy = (np.asarray(v, dtype=float).reshape(gx.shape) for v in values)
    return Surface(names, x, y, f, dfdx, dfdy, vectorised)


def is_elementwise(sampler: Sampler, grid: dict[str, np.ndarray], orders: tuple[int, ...]) -> bool:
    """Whether one vector pass gives the same numbers as evaluating point by point."""
    size = next(iter(grid.values())).size
    picks = np.unique(np.linspace(0, size - 1, min(PROBE_POINTS, size)).round().astype(int))
    probe = {name: np.ravel(values)[picks] for name, values in grid.items()}
    try:
        out, leaves, vector = sampler.derivatives(probe, orders)
    except LanguageError:
        return False  # the vector pass fails (a shape mismatch, say): point by point will say why, if it must
    if out.shape != picks.shape or not _elementwise_graph(out, leaves):
        return False
    pointwise, _ = _point_by_point(sampler, probe, orders, None)
    return all(
        np.allclose(np.ravel(v), p, rtol=PROBE_RTOL, atol=0.0, equal_nan=True) and np.array_equal(np.isfinite(np.ravel(v)), np.isfinite(p))
        for v, p in zip(vector, pointwise)
    )


def _downstream(out: Tensor, leaves: list[Any]) -> list[Any]:
    """The op nodes of out's graph that depend on one of `leaves`, parents first."""
    depends = {id(leaf) for leaf in leaves}
    nodes = []
    for node in topological_order(out):
        if node.op is not None and any(id(p) in depends for p in node.parents):
            depends.add(id(node))
            nodes.append(node)
    return nodes


def _elementwise_graph(out: Tensor, leaves: list[Any]) -> bool:
    """Every op that depends on a variable is elementwise and keeps the points' shape."""
    shape = leaves[0].shape
    return all(
        node.op.category in ELEMENTWISE_CATEGORIES and node.op.name not in NOT_ELEMENTWISE and node.shape == shape
        for node in _downstream(out, leaves)
    )


def _point_by_point(
    sampler: Sampler, grid: dict[str, np.ndarray], orders: tuple[int, ...], progress: Progress | None
) -> tuple[list[np.ndarray], list[_Kinks]]:
    """Each point on its own: a scalar variable, its own graph. Also the kink ops' inputs,
    stacked across points when every point built the same ops (no branch changed)."""
    flat = {name: np.ravel(values) for name, values in grid.items()}
    total = next(iter(flat.values())).size
    columns: list[list[float]] = [[] for _ in range(3 if len(grid) == 2 else len(orders))]
    per_point: list[list[_Kinks]] = []
    for i in range(total):
        point = {name: values[i] for name, values in flat.items()}
        out, leaves, values = sampler.derivatives(point, orders)
        if out.size != 1:
            where = ", ".join(f"{n}={float(v)!r}" for n, v in point.items())
            raise LanguageError("value", f"plot needs one number per point; at {where} EXPR gives shape {out.shape}")
        for column, value in zip(columns, values):
            column.append(float(np.reshape(value, -1)[0]))
        per_point.append(_kink_sites(out, leaves, ()))
        if progress is not None:
            progress(i + 1, total)
    return [np.array(c) for c in columns], _stack_sites(per_point)


def _kink_sites(out: Tensor, leaves: list[Any], shape: tuple[int, ...]) -> list[_Kinks]:
    """The inputs of every op with a kink test that depends on the variables."""
    sites = []
    for node in _downstream(out, leaves):
        op = node.op
        if op.kink is None:
            continue
        params, _ = recorded_params(node)
        inputs = [np.broadcast_to(p.data, shape) if shape and p.data.shape != shape else p.data for p in node.parents]
        sites.append(_Kinks(op, params, inputs))
    return sites


def _stack_sites(per_point: list[list[_Kinks]]) -> list[_Kinks]:
    if not per_point:
        return []
    first = per_point[0]
    same = all(
        len(sites) == len(first) and all(s.op is f.op and [i.shape for i in s.inputs] == [i.shape for i in f.inputs] for s, f in zip(sites, first))
        for sites in per_point
    )
    if not same:  # branches differ between points: no marks rather than wrong ones
        return []
    return [
        _Kinks(site.op, site.params, [np.stack([sites[j].inputs[k] for sites in per_point]) for k in range(len(site.inputs))])
        for j, site in enumerate(first)
    ]


def kink_indices(sites: list[_Kinks], n: int) -> list[int]:
    """The points next to a kink: where an op's own kink test (the registry's) holds
    within half the change its inputs make to the neighbouring points. A run of points
    marked by one op is one kink, marked at its first point."""
    found: set[int] = set()
    for site in sites:
        if any(i.shape[:1] != (n,) for i in site.inputs):
            continue
        tol = np.zeros(n)
        for values in site.inputs:
            step = np.abs(np.diff(values.reshape(n, -1), axis=0)).max(axis=1) if n > 1 else np.zeros(0)
            reach = np.maximum(np.concatenate([[0.0], step]), np.concatenate([step, [0.0]]))
            tol += np.nan_to_num(reach, nan=0.0, posinf=0.0) / 2
        marked = np.zeros(n, dtype=bool)
        for i in range(n):
            try:
                marked[i] = bool(site.op.kink(*[values[i] for values in site.inputs], tol=tol[i], **site.params))
            except (TypeError, ValueError):
                break  # a kink test that cannot read these inputs: no marks from it
        found.update(i for i in range(n) if marked[i] and (i == 0 or not marked[i - 1]))
    return sorted(found)
