"""`gradcalc plot --engine jax|torch`: f and its derivatives by that library.

The expression becomes a function of the plotted variables' values (the program run
through a session of the engine), and the library's own transformations give the rest:
`vmap` of it, of its `grad` and of the `grad` of that over all the points at once. A
program that branches on the variable's value cannot be traced by vmap; it is then
evaluated point by point, as the tensor engine does for a program that is not
elementwise. Kinks are not marked: finding them needs gradcalc's own graph.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gradcalc.parser import ExpressionResult, LanguageError, Program, Session
from gradcalc.parser.engines.values import EngineValue

from .sampling import Curve, Surface


def _run(program: Program, base: Session, names: list[str], values: list[Any]) -> tuple[Session, Any]:
    """A session of the engine with `names` set to `values` (the library's, maybe traced; or
    NumPy's, made variables), and the program's last value there."""
    session = Session(engine=base.engine, variables=dict(base.variables), functions=dict(base.functions))
    for name, value in zip(names, values):
        session.assign(name, session.backend.from_array(value) if isinstance(value, np.ndarray) else EngineValue(value, requires_grad=True, name=name))
    ran = [r for r in session.run(program) if isinstance(r, ExpressionResult)]
    if not ran:
        raise LanguageError("argument", "nothing to plot: end EXPR with an expression")
    out = ran[-1].value
    if not isinstance(out, EngineValue) or out.size != 1:
        raise LanguageError("value", "plot needs a number for each point, not several results")
    return session, out


def _function(program: Program, base: Session, names: list[str]) -> Any:
    """The program's last value as a function of the arrays of `names`: one number."""

    def f(*values: Any) -> Any:
        session, out = _run(program, base, names, list(values))
        return session.backend.read(out).reshape(())  # type: ignore[union-attr]

    return f


def _at_point(program: Program, base: Session, names: list[str], point: list[Any], orders: tuple[int, ...]) -> list[float]:
    """f and its derivatives at one point, by grad(y, x) (the branch the point takes is the one recorded)."""
    session, out = _run(program, base, names, point)
    backend = session.backend
    leaves = [session.variables[name] for name in names]
    if len(names) == 2:
        return [float(out.data.reshape(())), *(float(backend.call("grad", [out, x], {}).data) for x in leaves)]
    found, current = {0: out}, out
    for k in range(1, max(orders) + 1):
        current = found[k] = backend.call("grad", [current, leaves[0]], {})
    return [float(found[k].data.reshape(())) for k in orders]


def _over_points(library: Any, functions: list[Any], grids: list[np.ndarray], one_point: Any) -> list[np.ndarray]:
    """Each function at every point: one vmap over them all, or, where the program's control
    flow depends on the values (vmap cannot trace it), `one_point` at each point."""
    arrays = [library.array(g.reshape(-1)) for g in grids]
    try:
        return [library.host(library.transform("vmap", f, (0, 0))(*arrays)) for f in functions]
    except LanguageError as err:
        if err.kind != "value":
            raise
    rows = [one_point([np.asarray(v) for v in point]) for point in zip(*(g.reshape(-1) for g in grids))]
    return [np.array([row[k] for row in rows], dtype=float) for k in range(len(functions))]


def sample_on_engine(program: Program, base: Session, names: list[str], axes: list[np.ndarray], orders: tuple[int, ...]) -> Curve | Surface:
    """Curve (one variable: f and the derivatives of `orders`) or Surface (two: f and both partials)."""
    library = base.backend.library  # type: ignore[union-attr]
    f = _function(program, base, names)
    if len(names) == 1:
        derived = {0: f}
        if max(orders) >= 1:
            derived[1] = library.transform("grad", f, 0)
        if max(orders) >= 2:
            derived[2] = library.transform("grad", derived[1], 0)
        values = _over_points(library, [derived[k] for k in orders], [axes[0]], lambda point: _at_point(program, base, names, point, orders))
        return Curve(names[0], axes[0], {k: np.asarray(v, dtype=float).reshape(axes[0].shape) for k, v in zip(orders, values)})
    gx, gy = np.meshgrid(axes[0], axes[1])
    dx, dy = library.transform("grad", f, 0), library.transform("grad", f, 1)
    values = _over_points(library, [f, dx, dy], [gx, gy], lambda point: _at_point(program, base, names, point, (0, 1)))
    f_value, dfdx, dfdy = (np.asarray(v, dtype=float).reshape(gx.shape) for v in values)
    return Surface((names[0], names[1]), axes[0], axes[1], f_value, dfdx, dfdy)
