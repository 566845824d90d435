"""`check` statements on the JAX and PyTorch engines, and a second engine in every check.

On `--engine jax|torch` a check holds the library's derivative (jax.jacrev, or jacfwd for
mode=forward) against central differences of the program replayed on that library.

`check ... against=torch` (or `gradcalc check --against torch`) runs the program a second
time, on that engine (a mirror session that runs every statement the check's session
ran), takes that engine's derivative of the check, and sets it beside gradcalc's and the
numerical one. gradcalc and the numbers agreeing while the engine differs is a verdict of
its own, "engines disagree", with the largest difference and where: the user's math is not
what failed.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from gradcalc.autodiff import topological_order
from gradcalc.autodiff.gradcheck import CENTRAL_STEP, compare, describe_worst, numerical_jacobian, position, resolve_tolerances

from ..errors import LanguageError
from .compiled import jitted
from .table import LIBRARIES
from .values import EngineValue, replay

# Two reverse modes of one function agree to rounding, whatever the formulas behind them:
# held to complex step's standard, far tighter than central differences'.
AGAINST_TOLERANCES = (1e-10, 1e-8)


def engine_jacobians(backend: Any, value: EngineValue, leaves: list[EngineValue], mode: str = "reverse") -> list[np.ndarray]:
    """d value / d leaf for each leaf, as (value.size, leaf.size) matrices, by the library's
    jacrev (jacfwd for mode="forward"): of the graph replayed with an offset at each leaf,
    at 0, so that a named intermediate gets its adjoint and a variable its total derivative."""
    library = backend.library
    order = topological_order(value)
    keys = [id(leaf) for leaf in leaves]

    def f(*offsets: Any) -> Any:
        return replay(library, [value], {}, order, dict(zip(keys, offsets)))[0]

    if not value.requires_grad:
        return [np.zeros((value.size, leaf.size)) for leaf in leaves]
    kind, argnums = "jacfwd" if mode == "forward" else "jacrev", tuple(range(len(leaves)))
    zeros = [library.array(np.zeros(leaf.shape)) for leaf in leaves]
    fast = jitted(library, ("jacobian", kind), order, [value], [], leaves,
                  lambda run: lambda bound, _, offsets: library.transform(kind, lambda *o: run(bound, [], list(o))[0], argnums)(*offsets))
    found = fast([], zeros) if fast is not None else library.transform(kind, f, argnums)(*zeros)
    return [library.host(j).astype(np.float64).reshape(value.size, leaf.size) for j, leaf in zip(found, leaves)]


def numeric_jacobians(backend: Any, value: EngineValue, leaves: list[EngineValue]) -> list[np.ndarray]:
    """The same Jacobians by central differences of the replayed graph."""
    library = backend.library
    order = topological_order(value)
    keys = [id(leaf) for leaf in leaves]

    fast = jitted(library, "value", order, [value], [], leaves, lambda run: lambda bound, _, offsets: run(bound, [], offsets)[0])

    def f(offsets: list[np.ndarray]) -> np.ndarray:
        if fast is not None:
            return library.host(fast([], offsets))
        given = {key: library.array(o) for key, o in zip(keys, offsets) if np.any(o)}
        return library.host(replay(library, [value], {}, order, given)[0])

    return numerical_jacobian(f, [np.zeros(leaf.shape) for leaf in leaves], range(len(leaves)), "central", CENTRAL_STEP)


def check_jacobians(backend: Any, value: EngineValue, leaves: list[EngineValue], mode: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """engine_jacobians and numeric_jacobians; on JAX both from one compiled function (the
    central differences of every column at once, by vmap), which costs less to compile than
    JAX's eager transformations cost op by op."""
    library = backend.library
    if library.name != "jax" or not value.requires_grad:
        return engine_jacobians(backend, value, leaves, mode), numeric_jacobians(backend, value, leaves)
    jax, jnp = library.jax, library.jnp  # type: ignore[attr-defined]
    kind, argnums = "jacfwd" if mode == "forward" else "jacrev", tuple(range(len(leaves)))

    def make(run: Any) -> Any:
        def both(bound: list[Any], _: Any, offsets: list[Any]) -> Any:
            def f(*o: Any) -> Any:
                return run(bound, [], list(o))[0]

            numeric = []
            for i, zero in enumerate(offsets):
                steps = jnp.eye(zero.size).reshape((zero.size, *zero.shape)) * CENTRAL_STEP

                def at(d: Any, i: int = i) -> Any:
                    return f(*[d if k == i else o for k, o in enumerate(offsets)])

                numeric.append(((jax.vmap(at)(steps) - jax.vmap(at)(-steps)) / (2 * CENTRAL_STEP)).reshape(zero.size, -1).T)
            return library.transform(kind, f, argnums)(*offsets), numeric

        return both

    fast = jitted(library, ("check", kind), topological_order(value), [value], [], leaves, make)
    if fast is None:
        return engine_jacobians(backend, value, leaves, mode), numeric_jacobians(backend, value, leaves)
    analytic, numeric = fast([], [np.zeros(leaf.shape) for leaf in leaves])
    return ([library.host(j).astype(np.float64).reshape(value.size, leaf.size) for j, leaf in zip(analytic, leaves)],
            [library.host(j).astype(np.float64) for j in numeric])


def run_engine_check(session: Any, statement: Any, value: Any, options: tuple[str, str, float | None, float | None], leaves: list[Any]) -> Any:
    """A check on the JAX or PyTorch engine: the library's Jacobian against central differences."""
    from ..check_statements import CheckOutcome

    method, mode, atol, rtol = options
    session.backend.library.relieve()
    if method == "complex":
        raise LanguageError("argument", f"method=complex needs the tensor engine (--engine {session.engine} checks by central differences)")
    analytic, numeric = check_jacobians(session.backend, value, leaves, mode)
    atol, rtol = resolve_tolerances("central", atol, rtol)
    max_abs, max_rel, passed, worst = compare(analytic, numeric, atol, rtol)
    names = [(leaf.name or f"leaves[{k}]", leaf.shape) for k, leaf in enumerate(leaves)]
    outcome = CheckOutcome(text=statement.text, line=statement.span[0], status="pass" if passed else "fail", variables=[n for n, _ in names],
                           method="central", mode=mode, max_abs_error=max_abs, max_rel_error=max_rel, atol=atol, rtol=rtol)
    if not passed:
        outcome.message = describe_worst(worst, value.shape, names).replace("analytic", LIBRARIES[session.engine])
    return outcome


# ---- a second engine --------------------------------------------------------------------------


class Mirror:
    """The program run again on another engine: a session that runs the statements the
    check's session ran (its history), up to the check."""

    def __init__(self, session: Any, engine: str) -> None:
        from ..machine import Session

        self.session = Session(engine=engine, base_dir=session.base_dir, on_check=lambda *_: None)
        self.ran = 0
        self.failed: list[str] = []
        assigned = {name for s in session.history for name in getattr(s, "targets", ())}
        for name, value in session.variables.items():  # what the command line bound (NAME=VALUE), never reassigned
            if name not in assigned and getattr(value, "op", None) is None and hasattr(value, "data"):
                self.session.assign(name, self.session.backend.from_array(np.asarray(value.data)))

    def sync(self, history: list[Any]) -> None:
        for statement in history[self.ran:]:
            self.ran += 1
            if statement.kind in ("check", "error"):
                continue
            try:
                self.session.run_statement(statement)
            except LanguageError as err:
                self.failed.append(f"line {statement.span[0]}: {err.message}")


_MIRRORS: weakref.WeakKeyDictionary[Any, dict[str, Mirror]] = weakref.WeakKeyDictionary()


def mirror_of(session: Any, engine: str) -> Mirror:
    mirrors = _MIRRORS.setdefault(session, {})
    if engine not in mirrors:
        mirrors[engine] = Mirror(session, engine)
    mirror = mirrors[engine]
    mirror.sync(session.history)
    return mirror


def against(session: Any, statement: Any, value: Any, leaves: list[Any], result: Any, outcome: Any, engine: str, mode: str) -> None:
    """Set `engine`'s derivative of the check beside gradcalc's (`result.analytic`) and the
    numerical one (`result.numeric`), and give the verdict when they disagree."""
    title = LIBRARIES[engine]
    outcome.against = engine
    try:
        from .library import load

        load(engine)
        mirror = mirror_of(session, engine)
        their_backend: Any = mirror.session.backend
        their_backend.library.relieve()
        theirs = mirror.session.evaluate(statement.code)
        missing = [leaf.name or "an unnamed value" for leaf in leaves if not leaf.name or leaf.name not in mirror.session.variables]
        if missing or not isinstance(theirs, EngineValue):
            raise LanguageError("value", f"{', '.join(missing) or 'the value'} is not there on {title}"
                                         + (f" ({mirror.failed[0]})" if mirror.failed else ""))
        their_leaves = [mirror.session.variables[leaf.name] for leaf in leaves]
        jacobians = engine_jacobians(mirror.session.backend, theirs, their_leaves, mode)
    except LanguageError as err:
        outcome.warnings.append(f"not compared with {title}: {err.message}")
        outcome.against = ""
        return
    atol, rtol = AGAINST_TOLERANCES
    values_differ = not np.allclose(theirs.data, value.data, rtol=rtol, atol=atol, equal_nan=True)
    max_abs, max_rel, agree, worst = compare(result.analytic, jacobians, atol, rtol)
    outcome.against_abs_error, outcome.against_rel_error = max_abs, max_rel
    if agree and not values_differ:
        return
    if values_differ:
        flat = int(np.argmax(np.abs(np.ravel(theirs.data) - np.ravel(value.data))))
        said = (f"the values differ at out{position(value.shape, flat)}: gradcalc {np.ravel(value.data)[flat].item()!r}, "
                f"{title} {np.ravel(theirs.data)[flat].item()!r}")  # (Python's numbers: NumPy 2's repr is np.float64(0.0))
    else:
        assert worst is not None
        name, shape = (leaves[worst.k].name or "?"), leaves[worst.k].shape
        numeric = result.numeric[worst.k][worst.row, worst.column]
        said = (f"largest difference {max_abs:.3g} at d out{position(value.shape, worst.row)} / d {name}{position(shape, worst.column)}: "
                f"gradcalc {worst.analytic!r}, {title} {worst.numeric!r}, numeric {float(numeric)!r}")
    if outcome.status == "pass":
        outcome.status, outcome.message = "disagree", f"engines disagree: {said}"
    else:
        outcome.message = f"{outcome.message}; {title}: {said}" if outcome.message else f"{title}: {said}"
