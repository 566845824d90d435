"""Gradient checking: reverse-mode (or forward-mode) Jacobians against numerical ones.

Complex step (Squire & Trapp 1998): for f analytic, f(x + ih) = f(x) + ih f'(x) + O(h^2),
so f'(x) = Im f(x + ih) / h with no subtraction, hence no cancellation: with h = 1e-20 the
result is exact to rounding. It needs every op on the path to extend analytically to
complex inputs (the registry's `complex_safe`). Otherwise: central differences,
(f(x + h) - f(x - h)) / 2h, whose error is O(h^2) truncation plus O(eps/h) rounding.

The Jacobian checked is reverse mode's (one backward pass per output element: the VJPs)
or, with mode="forward", forward mode's (one forward pass per input element: the JVPs),
against the same numbers.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backprop import backprop, topological_order
from .forward import push_forward
from .graph import in_users_words
from .limits import StepLimitError
from .replay import Tape, check_jacobian_size
from .tensor import Tensor, made_by
from .wiring import recorded_params

MODES = ("reverse", "forward")  # the Jacobian checked: the VJPs', or the JVPs'
COMPLEX_STEP = 1e-20
CENTRAL_STEP = 1e-6

# Defaults in the spirit of torch.autograd.gradcheck for central differences; complex
# step agrees to rounding, so it is held to a far tighter standard.
TOLERANCES = {"central": (1e-5, 1e-3), "complex": (1e-10, 1e-8)}


@dataclass
class CheckResult:
    method: str
    max_abs_error: float
    max_rel_error: float
    passed: bool
    atol: float
    rtol: float
    kinks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Why the numbers cannot tell a wrong VJP from a step too coarse for the point
    # ('' when they can): a value inside too close to 0 for complex step (see
    # tiny_inside), or central differences straddling points near 0 (see near_zero).
    unresolved: str = ""
    analytic: list[np.ndarray] = field(default_factory=list)
    numeric: list[np.ndarray] = field(default_factory=list)
    # The entry that disagrees most (None when all agree exactly), with the output's shape
    # and each leaf's name and shape: what `worst` names.
    worst_entry: Worst | None = None
    output_shape: tuple[int, ...] = ()
    leaves: Sequence[tuple[str, Sequence[int]]] = ()

    @property
    def worst(self) -> str:
        """The worst entry, said in words ('' if every entry agrees exactly): described
        when asked for, as only a failing check is."""
        return describe_worst(self.worst_entry, self.output_shape, self.leaves)


def complex_unsafe(output: Any, order: list[Any] | None = None) -> list[str]:
    """The ops on the graph of `output` (`order`: its topological order, if known) that
    have no complex extension (so no complex step)."""
    nodes = topological_order(output) if order is None else order
    return sorted({n.op.name for n in nodes if getattr(n, "op", None) is not None and not n.op.complex_safe})


def choose_method(output: Any, method: str, order: list[Any] | None = None) -> tuple[str, list[str]]:
    """The method a check uses, and a note when the one asked for cannot be used:
    complex step needs every op on the path to be complex-safe, else central differences.
    The piecewise ops (relu, abs, maximum, clip, ...) are complex-safe: each piece is
    analytic and the real part picks it, so away from a kink the step is exact, as the
    course takes it. At a kink, "auto" keeps central differences, whose average of the
    two sides shows that the convention is one (the kink warning says why)."""
    unsafe = complex_unsafe(output, order) if method in ("auto", "complex") else []
    if method == "auto":
        return ("central" if unsafe or kinks(output, order=order) else "complex"), []
    if method == "complex" and unsafe:
        names = ", ".join(unsafe)
        return "central", [f"complex step asked for, but {names} {'is' if len(unsafe) == 1 else 'are'} not complex-safe: used central differences"]
    return method, []


def kinks(output: Any, tol: float = 0.0, order: list[Any] | None = None) -> list[str]:
    """The ops on the path evaluated at a point where they are not differentiable, in the
    user's words (in_users_words: a kink inside a derivative rule is one of the user's op's derivative)."""
    found = []
    for node in topological_order(output) if order is None else order:
        op = getattr(node, "op", None)
        if op is None or op.kink is None:
            continue
        params, _ = recorded_params(node)
        if op.kink(*[p.data for p in node.parents], tol=tol, **params) and (name := in_users_words(node)) not in found:
            found.append(name)
    return found


def replay(output: Tensor, values: dict[int, Any], order: list[Any] | None = None) -> np.ndarray:
    """Recompute the recorded graph of `output` with some leaves' data replaced.

    The graph acts as a function of its leaves (a trace, in JAX's terms): every op
    node runs its forward again on its parents' new data. Branches taken while the
    graph was recorded (`a if c else b`) stay taken. Checks replay many times and
    compile the graph once (batching.Tape); this is one replay.
    """
    return Tape(output, topological_order(output) if order is None else order).replay(values)


_UNIT = np.ones(())


def _zero_jacobians(output: Tensor, leaves: Sequence[Tensor]) -> list[np.ndarray]:
    """One (output.size, leaf.size) matrix of zeros per leaf, each refused first if over the cap."""
    for leaf in leaves:
        check_jacobian_size(output.size, leaf.size)
    return [np.zeros((output.size, leaf.size)) for leaf in leaves]


def reverse_jacobian(output: Tensor, leaves: Sequence[Tensor], order: list[Any] | None = None) -> list[np.ndarray]:
    """d output / d leaf for each leaf as (output.size, leaf.size) matrices, one backward
    pass per output element (what `grad` gives, seeded with each unit vector)."""
    jacs = _zero_jacobians(output, leaves)
    if not output.requires_grad:
        return jacs
    rows = output.size
    order = topological_order(output) if order is None else order
    keep = set(leaves)
    for row in range(rows):
        if rows == 1:  # (a backward pass never writes into its seed, so one array serves every number)
            seed = _UNIT if not output.ndim else np.ones(output.shape)
        else:
            seed = np.zeros(rows)
            seed[row] = 1.0
            seed = seed.reshape(output.shape)
        grads = backprop(output, seed, keep=keep, order=order)
        for jac, leaf in zip(jacs, leaves):
            g = grads.get(leaf)
            if g is not None:  # a leaf the output does not reach keeps its zeros
                g = g.real if isinstance(g, (np.ndarray, np.generic)) else np.real(g)  # (np.real's own test, without its call)
                jac[row] = g if g.ndim <= 1 else g.reshape(-1)
    return jacs


def forward_jacobian(output: Tensor, leaves: Sequence[Tensor], order: list[Any] | None = None) -> list[np.ndarray]:
    """reverse_jacobian's matrices by forward mode: one forward pass per leaf element
    (what `jvp` gives, seeded with each unit vector), the column of that element. A leaf
    inside the graph (a named intermediate) is seeded where it stands, so its column is
    d output / d leaf with what comes before it held fixed, as its adjoint is."""
    jacs = _zero_jacobians(output, leaves)
    if not output.requires_grad:
        return jacs
    order = topological_order(output) if order is None else order
    for jac, leaf in zip(jacs, leaves):
        for column in range(leaf.size):
            seed = np.zeros(leaf.size)
            seed[column] = 1.0
            tangent = push_forward([output], {leaf: seed.reshape(leaf.shape)}, order=order).get(output)
            if tangent is not None:  # (None: the output does not depend on this leaf)
                jac[:, column] = np.real(np.asarray(tangent)).reshape(-1)
    return jacs


def numerical_jacobian(
    f: Callable[[list[np.ndarray]], np.ndarray], inputs: Sequence[np.ndarray], wrt: Sequence[int], method: str,
    step: float | Callable[[float], float] | None = None,
) -> list[np.ndarray]:
    """d f / d input by complex step or central differences, one column per element.
    `f` maps a list of input arrays to an output array; `step` is the step, or gives it
    for an element's value (None: the method's own)."""
    jacs = []
    for i in wrt:
        x = np.asarray(inputs[i], dtype=np.float64)
        columns = []
        for j in range(x.size):
            columns.append(numerical_column(f, inputs, i, j, method, step))
            if j == 0:  # the first column tells the Jacobian's size, before the others are made
                check_jacobian_size(columns[0].size, x.size)
        jacs.append(np.stack(columns, axis=1) if columns else np.zeros((0, 0)))
    return jacs


def numerical_column(
    f: Callable[[list[np.ndarray]], np.ndarray], inputs: Sequence[np.ndarray], i: int, j: int, method: str,
    step: float | Callable[[float], float] | None = None,
) -> np.ndarray:
    """Column j of d f / d inputs[i] (j a flat index): f evaluated with that one element
    perturbed, by +ih (complex step) or by +h and -h (central differences)."""
    x = np.asarray(inputs[i], dtype=np.float64)
    if callable(step):
        step = step(float(x.reshape(-1)[j]))
    if method == "complex":
        h = step or COMPLEX_STEP
        bumped = x.astype(np.complex128).reshape(-1)
        bumped[j] += 1j * h
        return np.imag(f(_replace(inputs, i, bumped.reshape(x.shape)))).reshape(-1) / h
    h = step or CENTRAL_STEP
    up, down = x.copy().reshape(-1), x.copy().reshape(-1)
    up[j] += h
    down[j] -= h
    f_up = np.real(f(_replace(inputs, i, up.reshape(x.shape))))
    f_down = np.real(f(_replace(inputs, i, down.reshape(x.shape))))
    return ((f_up - f_down) / (2 * h)).reshape(-1)


def _replace(inputs: Sequence[Any], i: int, value: Any) -> list[Any]:
    return [value if k == i else x for k, x in enumerate(inputs)]


@dataclass
class Worst:
    """The entry of the Jacobians that disagrees most: leaf k, output element `row`,
    leaf element `column` (flat indices), and both values there."""

    k: int
    row: int
    column: int
    analytic: float
    numeric: float


def compare(analytic: Sequence[np.ndarray], numeric: Sequence[np.ndarray], atol: float, rtol: float) -> tuple[float, float, bool, Worst | None]:
    """Max absolute and relative error and whether every entry is within atol + rtol*|numeric|.

    An infinity against the same infinity, and nan against nan, agree; nan against a
    number differs by inf. The worst entry is the first (by leaf, then row, then column)
    with the largest difference, None when every entry agrees exactly."""
    parts = [(k, a, n) for k, (a, n) in enumerate(zip(analytic, numeric)) if a.size]
    if not parts:
        return 0.0, 0.0, True, None
    if sum(a.size for _, a, _ in parts) <= FEW_ENTRIES:  # the entries in order, as the flat arrays below hold them
        found = _compare_few(
            [x for _, a, _ in parts for x in a.reshape(-1).tolist()], [x for _, _, n in parts for x in n.reshape(-1).tolist()],
            atol, rtol,
        )
        if found is not None:
            max_abs, max_rel, passed, flat = found
            return max_abs, max_rel, passed, _worst_at(parts, flat) if max_abs > 0 else None
    # Every leaf's entries in one flat array: one pass of NumPy, whatever the leaf count.
    a = np.concatenate([a.reshape(-1) for _, a, _ in parts]) if len(parts) > 1 else parts[0][1].reshape(-1)
    n = np.concatenate([n.reshape(-1) for _, _, n in parts]) if len(parts) > 1 else parts[0][2].reshape(-1)
    diff = np.abs(a - n)
    if np.isfinite(diff).all():  # so a and n are finite: the common case, in fewer passes
        rel = relative_error(diff, n)
        passed = bool(np.all(diff <= atol + rtol * np.abs(n)))
    else:
        both_inf = np.isinf(a) & np.isinf(n) & (np.sign(a) == np.sign(n))
        diff = np.where(both_inf, 0.0, diff)
        diff = np.where(np.isnan(a) & np.isnan(n), 0.0, diff)
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = relative_error(diff, n)
        passed = bool(np.all(diff <= atol + rtol * np.abs(np.where(np.isfinite(n), n, 0.0))))
    flat = int(np.argmax(diff))
    max_abs, max_rel = float(diff[flat]), float(rel.max())
    return max_abs, max_rel, passed, _worst_at(parts, flat) if max_abs > 0 else None


def relative_error(diff: np.ndarray, reference: Any) -> np.ndarray:
    """|a - b| / |b| entry by entry: 0 where they agree, inf where they differ and the
    reference is 0 (no relative error exists there; dividing by the smallest float
    instead printed `rel 9.98e+291` for a difference of 2e-16)."""
    size = np.abs(reference)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = diff / size
    return np.where(diff == 0, 0.0, np.where(size == 0, np.inf, rel))


FEW_ENTRIES = 16  # Jacobians this small are compared in plain floats (NumPy's calls cost more)
_TINY = float(np.finfo(float).tiny)


def _compare_few(a: list[float], n: list[float], atol: float, rtol: float) -> tuple[float, float, bool, int] | None:
    """compare's arithmetic on a few finite entries, in Python floats (the same IEEE
    operations): (max abs, max rel, passed, flat index of the first largest difference),
    or None when some entry is not finite (compare's rules for nan and inf apply)."""
    diffs = [abs(x - y) for x, y in zip(a, n)]
    largest = max(diffs)
    if not math.isfinite(sum(diffs)):
        return None
    passed, max_rel = True, 0.0  # every ratio below is >= 0 (and none is nan: all are finite)
    for d, y in zip(diffs, n):
        size = abs(y)
        passed = passed and d <= atol + rtol * size
        max_rel = max(max_rel, d / size if size else math.inf if d else 0.0)
    return largest, max_rel, passed, diffs.index(largest)


def _worst_at(parts: list[tuple[int, np.ndarray, np.ndarray]], flat: int) -> Worst:
    """The entry at flat index `flat` of compare's concatenated entries."""
    offset = 0
    for k, a_k, n_k in parts:
        if flat < offset + a_k.size:
            r, c = divmod(flat - offset, a_k.shape[1])
            return Worst(k, r, c, float(a_k[r, c]), float(n_k[r, c]))
        offset += a_k.size
    raise IndexError(flat)


def position(shape: Sequence[int], flat: int) -> str:
    """A flat index as the index a user writes: `[1, 2]` ('' for a scalar)."""
    if not shape:
        return ""
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, tuple(shape))) + "]"


def describe_worst(worst: Worst | None, output_shape: Sequence[int], leaves: Sequence[tuple[str, Sequence[int]]]) -> str:
    """'d out[3, 0] / d W[1, 2]: analytic 0.5, numeric 0.25': the entry named by variable
    and index, never by flat positions."""
    if worst is None:
        return ""
    name, shape = leaves[worst.k]
    return (
        f"d out{position(output_shape, worst.row)} / d {name}{position(shape, worst.column)}: "
        f"analytic {worst.analytic!r}, numeric {worst.numeric!r}"
    )


def resolve_tolerances(method: str, atol: float | None, rtol: float | None) -> tuple[float, float]:
    """(atol, rtol): those given, else the method's defaults (TOLERANCES)."""
    default_atol, default_rtol = TOLERANCES[method]
    return (default_atol if atol is None else atol), (default_rtol if rtol is None else rtol)


def _finish(
    method: str, atol: float | None, rtol: float | None, analytic: list[np.ndarray], numeric: list[np.ndarray], output: Any,
    leaves: Sequence[tuple[str, Sequence[int]]], notes: list[str] | None = None, order: list[Any] | None = None,
    verdict: tuple[float, float, bool, Worst | None] | None = None, inputs: Sequence[np.ndarray] = (),
) -> CheckResult:
    """The verdict; `inputs` are the inputs checked, in the Jacobians' order."""
    atol, rtol = resolve_tolerances(method, atol, rtol)
    max_abs, max_rel, passed, worst = verdict or compare(analytic, numeric, atol, rtol)
    unresolved = ""
    if not passed and method == "complex":
        unresolved = tiny_inside(output, order)
    if not passed and method == "central" and worst is not None and worst.k < len(inputs):
        unresolved = near_zero(float(np.real(np.asarray(inputs[worst.k])).reshape(-1)[worst.column]))
    return CheckResult(
        method=method, max_abs_error=max_abs, max_rel_error=max_rel, passed=passed, atol=atol, rtol=rtol,
        worst_entry=worst, output_shape=np.shape(output.data), leaves=leaves, kinks=kinks(output, order=order),
        analytic=list(analytic), numeric=list(numeric), notes=notes or [], unresolved=unresolved,
    )


# Complex step is exact only while h is small against the scale on which f changes,
# which near a singularity is the distance to it: with h = 1e-20, log at 1e-18, sqrt at
# 1e-300 and sqrt(x + 1e-30) at x = 0 fail correct VJPs. Smaller steps are no cure for
# the whole function: imaginary parts of values inside underflow (x * 1e-290 * 1e308),
# and two smaller steps can agree on a column that still lacks the singular term
# (log(x) + 1e300 * x * x at 1e-150), so searching for a step that agrees could pass a
# wrong VJP. The check keeps its verdict, and says when a value inside is this close to
# 0 (RESOLVED_FROM); each op alone, being one op, is checked again with a step small
# against its inputs before it is blamed (suspect_ops).
RESOLVED_FROM = COMPLEX_STEP * 1e8  # |value| below this, complex step's 1e-20 is not small against it


def tiny_inside(output: Any, order: list[Any] | None = None) -> str:
    """The first value going into an op on the graph that is nonzero and within
    RESOLVED_FROM of 0, as a reason a complex-step check cannot tell ('' if none)."""
    for node in topological_order(output) if order is None else order:
        if getattr(node, "op", None) is None:
            continue
        for parent in node.parents:
            size = np.abs(np.asarray(parent.data))
            small = (size > 0) & (size < RESOLVED_FROM)
            if small.any():
                value = np.asarray(parent.data).reshape(-1)[int(np.argmax(small.reshape(-1)))].item()
                return (
                    f"a value going into {in_users_words(node)} ({value!r}) is so close to 0 that complex step's "
                    f"{COMPLEX_STEP:g} is not small against it"
                )
    return ""


def extreme_inside(output: Any, order: list[Any] | None = None) -> str:
    """The first value of the graph, in evaluation order, that is not finite or is
    subnormal (an input, or what an op made of normal inputs), as a reason a check
    cannot tell ('' if none): replays through it cannot show the derivative (`1/(1/y)`
    at 1e-310, `sqrt(x*x + y*y)` at 1e-155)."""
    for node in topological_order(output) if order is None else order:
        data = np.asarray(node.data)
        extreme = ~np.isfinite(data) | _subnormal(data)
        if extreme.any():
            found = data.reshape(-1)[int(np.argmax(extreme.reshape(-1)))].item()
            what = "not finite" if not math.isfinite(abs(found)) else "subnormal"
            where = f"from {in_users_words(node)}" if node.op is not None else f"in {node.name or 'an input'}"
            return f"a value inside is {what} at this point ({found!r} {where}), and replays through it cannot show the derivative"
    return ""


def _step_small_against(value: float) -> float:
    """A complex step small against `value` (1e-8 of it) where 1e-20 is not, kept a normal number."""
    return max(abs(value) * 1e-8, _TINY) if 0 < abs(value) < RESOLVED_FROM else COMPLEX_STEP


# Central differences at an input within this many steps of 0 sample f on both sides of
# points as near to 0 as the input, where sqrt, log and 1/x are singular and relu kinks.
CENTRAL_STEPS_FROM_ZERO = 100


def near_zero(x: float) -> str:
    """Why central differences at an input element equal to `x` may not show the
    derivative ('' when x is 0 or not within CENTRAL_STEPS_FROM_ZERO steps of it)."""
    if x == 0 or not abs(x) < CENTRAL_STEPS_FROM_ZERO * CENTRAL_STEP:
        return ""
    return (
        f"the input there ({x!r}) is within {CENTRAL_STEPS_FROM_ZERO} steps ({CENTRAL_STEP:g}) of 0, and central "
        "differences across a singularity or a kink there are not the derivative"
    )


def gradcheck(
    f: Callable[..., Tensor],
    inputs: Sequence[Any],
    wrt: Sequence[int] | None = None,
    method: str = "auto",
    atol: float | None = None,
    rtol: float | None = None,
    step: float | Callable[[float], float] | None = None,
    mode: str = "reverse",
) -> CheckResult:
    """Check the reverse-mode (or, mode="forward", forward-mode) Jacobian of `f` (Tensors
    in, a Tensor out) at `inputs`.

    method: "complex", "central", or "auto" (complex step when every op on the path is
    complex-safe). Tolerances default per method (TOLERANCES). `f` is called again for
    each perturbation, with inputs that require grad (so `f` may itself take gradients).
    """
    arrays = [np.asarray(x, dtype=np.float64) for x in inputs]
    wrt = list(range(len(arrays))) if wrt is None else list(wrt)

    def value(values: list[np.ndarray]) -> np.ndarray:
        return f(*[Tensor(x, requires_grad=i in wrt) for i, x in enumerate(values)]).data

    tensors = [Tensor(x, requires_grad=i in wrt) for i, x in enumerate(arrays)]
    output = f(*tensors)
    method, notes = choose_method(output, method)
    analytic = (forward_jacobian if mode == "forward" else reverse_jacobian)(output, [tensors[i] for i in wrt])
    numeric = numerical_jacobian(value, arrays, wrt, method, step)
    names = [(f"inputs[{i}]", arrays[i].shape) for i in wrt]
    return _finish(method, atol, rtol, analytic, numeric, output, names, notes, inputs=[arrays[i] for i in wrt])


def gradcheck_graph(
    output: Tensor, leaves: Sequence[Tensor], method: str = "auto", atol: float | None = None, rtol: float | None = None,
    order: list[Any] | None = None, batched: bool = True, mode: str = "reverse",
) -> CheckResult:
    """Check a recorded graph: reverse mode (or forward mode, `mode`) against differences
    of the replayed graph.

    The replays run batched where every op on the graph allows and there are at least
    BATCHED_FROM of them (see batching.py), else one per column; `batched=False` forces
    the latter. A batched result is used only if
    sampled columns of it agree with replays per column (see `_verified`). `order` may
    pass in `topological_order(output)` when the caller has it."""
    order = topological_order(output) if order is None else order
    method, notes = choose_method(output, method, order)
    keys = [id(leaf) for leaf in leaves]
    tape = Tape(output, order)

    inputs = [np.real(leaf.data) for leaf in leaves]
    inner = [leaf.op is not None for leaf in leaves]  # named intermediates (`check ... wrt y`)
    from_inside = any(inner)

    def evaluate(values: list[np.ndarray]) -> np.ndarray:
        if from_inside:
            # An intermediate is given only in the replays that perturb it: in the others
            # it is recomputed from the inputs that are perturbed (a total derivative).
            given = zip(keys, values, inputs, inner)
            return tape.replay({key: v for key, v, recorded, interior in given if not (interior and v is recorded)})
        return tape.replay(dict(zip(keys, values)))  # replay(output, ..., order), compiled once

    analytic = (forward_jacobian if mode == "forward" else reverse_jacobian)(output, leaves, order)  # the Jacobian checked (MODES)
    atol, rtol = resolve_tolerances(method, atol, rtol)
    step = COMPLEX_STEP if method == "complex" else CENTRAL_STEP
    # A batched replay pays for itself, and for the columns it checks again, from about
    # BATCHED_FROM replays per column on.
    replays = sum(leaf.size for leaf in leaves) * (2 if method == "central" else 1)
    numeric = verdict = None
    if replays < SCALAR_BATCHED_FROM and _numbers(leaves):
        numeric = number_columns(tape, leaves, method)  # the reference's replays, without its copies
    elif batched and replays >= BATCHED_FROM:
        numeric = tape.batched_jacobian(leaves, method, step)
        if numeric is not None:
            verdict = compare(analytic, numeric, atol, rtol)
            if not _verified(numeric, verdict[3], evaluate, inputs, method, atol, rtol):
                numeric = verdict = None
    if numeric is None:
        numeric = numerical_jacobian(evaluate, inputs, range(len(leaves)), method)
    names = [(leaf.name or f"leaves[{k}]", leaf.shape) for k, leaf in enumerate(leaves)]
    return _finish(method, atol, rtol, analytic, numeric, output, names, notes, order, verdict, [leaf.data for leaf in leaves])


def _numbers(leaves: Sequence[Tensor]) -> bool:
    """Whether every leaf holds one float64 number (0-d), each leaf given once."""
    for leaf in leaves:
        data = leaf.data
        if type(data) is not np.ndarray or data.ndim or data.dtype != np.float64:
            return False
    return len({id(leaf) for leaf in leaves}) == len(leaves)


def number_columns(tape: Tape, leaves: Sequence[Tensor], method: str) -> list[np.ndarray]:
    """numerical_jacobian(evaluate, ...) of gradcheck_graph for leaves that each hold one
    float64 number (see _numbers): the same replays, each input perturbed by the same
    IEEE operations (x + ih as complex(x) + 1j*h, x + h, x - h, as numerical_column
    forms them), without numerical_column's array copies, the numbers carried as NumPy
    scalars. Most checks of a check file are of such inputs, and there this is a good
    part of a check's time. The columns are numerical_jacobian's bit for bit: the
    arithmetic ops call NumPy's ufuncs, so a scalar takes the array loops' path (see
    ops/arithmetic.py)."""
    jacobians = []
    tape.plan([(id(leaf),) for leaf in leaves])  # every column's replay, planned in one pass
    for leaf in leaves:
        x, key = float(leaf.data), id(leaf)
        # (.imag and .real: the attributes every replay's array has; np.imag and np.real
        # cost a dispatch each)
        if method == "complex":
            column = tape.replay({key: np.complex128(complex(x) + 1j * COMPLEX_STEP)}).imag / COMPLEX_STEP
        else:
            f_up = tape.replay({key: np.float64(x + CENTRAL_STEP)}).real
            f_down = tape.replay({key: np.float64(x - CENTRAL_STEP)}).real
            column = (f_up - f_down) / (2 * CENTRAL_STEP)
        if column.size > 1:  # (one entry is under any cap)
            check_jacobian_size(column.size, 1)
        jacobians.append(column.reshape(-1, 1))
    return jacobians


BATCHED_FROM = 6  # replays per column (2 a column for central differences), measured: see docs/gradcheck.md
# Inputs that are all numbers are replayed one by one (number_columns) below this many
# replays: cheaper than a batch and the replays that check it, measured (docs/gradcheck.md).
SCALAR_BATCHED_FROM = 12
VERIFIED_COLUMNS = 8  # at most, of a batched numerical Jacobian, replayed per column again
VERIFY_FRACTION = 0.01  # of the check's tolerance, the most a verified column may differ


def _verified(
    numeric: list[np.ndarray], worst: Worst | None, f: Callable[[list[np.ndarray]], np.ndarray],
    inputs: Sequence[np.ndarray], method: str, atol: float, rtol: float,
) -> bool:
    """Whether sampled columns of a batched numerical Jacobian agree with replays per
    column, to a hundredth of the check's tolerance (nan with nan, inf with the same inf):
    a guard against a batched replay gone wrong passing or failing a check silently.

    The column holding the worst entry (it decides the report), or the middle column
    when every entry agrees; for wide checks also the first, middle and last column of
    each input."""
    widths = [jac.shape[1] for jac in numeric]
    total = sum(widths)
    if total == 0:
        return True
    if worst is not None:
        picks = [(worst.k, worst.column)]
    else:
        k, j = 0, total // 2
        while j >= widths[k]:
            j -= widths[k]
            k += 1
        picks = [(k, j)]
    if total > 16:
        picks += [(k, j) for k, width in enumerate(widths) for j in sorted({0, width // 2, width - 1}) if width]
    for k, j in list(dict.fromkeys(picks))[:VERIFIED_COLUMNS]:
        direct = numerical_column(f, inputs, k, j, method)
        batched = numeric[k][:, j]
        if (direct == batched).all():
            continue
        with np.errstate(invalid="ignore"):
            same = (direct == batched) | (np.isnan(direct) & np.isnan(batched))
            close = np.abs(direct - batched) <= VERIFY_FRACTION * (atol + rtol * np.abs(direct))
        if not np.all(same | close):
            return False
    return True


def suspect_ops(output: Tensor, method: str = "auto", limit: int = 200, mode: str = "reverse") -> list[str]:
    """The ops on the graph whose own VJP (mode="forward": JVP) disagrees with differences
    of their own forward, each checked at the inputs it saw: where a failing check points.

    Each op is checked by complex step when it is complex-safe ("auto"; then blamed only
    if central differences disagree too), else by central differences ("central":
    central differences for every op). Before an op is blamed,
    a failure that its step could explain is checked again with a step small against
    its inputs: complex step at inputs near 0 (log at 1e-18), central differences within
    100 steps of 0 (relu at 1e-7); a wrong VJP fails either way."""
    suspects: list[str] = []
    blamed: set[str] = set()  # (op names: an op is blamed once)
    for node in topological_order(output)[::-1][:limit]:
        op = node.op
        if op is None or op.name in blamed or not op.has_gradient:
            continue
        parents = list(node.parents)
        wrt = [k for k, p in enumerate(parents) if p.requires_grad and op.vjp_for(k) is not None]
        if not wrt:
            continue
        if mode == "forward" and op.jvp is None:  # forward mode cannot pass through it at all
            blamed.add(op.name)
            suspects.append(op.name)
            continue
        params, pick = recorded_params(node)

        def local(*ts: Tensor, op: Any = op, params: dict[str, Any] = params, pick: Any = pick) -> Tensor:
            out = op(*ts, **params)
            return out if pick is None else out[pick]

        inputs = [np.real(p.data) for p in parents]
        # (at its kink a piecewise op is checked by central differences, as the whole check is)
        at_kink = method == "auto" and op.kink is not None and op.kink(*inputs, tol=0.0, **params)
        use = "complex" if method in ("auto", "complex") and op.complex_safe and not at_kink else "central"
        try:
            wrong = _disagrees(local, inputs, wrt, use, mode)
            if wrong and use == "complex" and method == "auto" and not _near_zero_anywhere(inputs):
                # Imaginary parts can underflow inside an op's own forward (x * 1e-300 *
                # 1e300): blamed only if central differences disagree too, where their
                # step is small against the inputs.
                wrong = _disagrees(local, inputs, wrt, "central", mode)
        except StepLimitError:  # a budget over is the statement's end, not a suspect
            raise
        except Exception:  # noqa: BLE001 - a check that cannot even run is a suspect too
            wrong = True
        if wrong:
            blamed.add(op.name)
            label = op.name if op.blame is None else op.blame(_inputs_that_disagree(local, inputs, wrt, use, mode))
            # (an op of a derivative rule is named with the user's op it serves: `mul, in the derivative of softsign`)
            suspects.append(label if made_by(node) is None else f"{label}, in {in_users_words(node)}")
    return suspects


def _inputs_that_disagree(local: Callable[..., Tensor], inputs: list[np.ndarray], wrt: list[int], method: str, mode: str) -> list[int]:
    """Which inputs of a blamed op have a VJP (JVP) of their own that disagrees, each
    checked alone (all of them when none does alone)."""
    found = []
    for k in wrt:
        try:
            if _disagrees(local, inputs, [k], method, mode):
                found.append(k)
        except StepLimitError:  # a budget over is the statement's end, not a suspect
            raise
        except Exception:  # noqa: BLE001 - as in suspect_ops: a check that cannot run is a suspect
            found.append(k)
    return found or list(wrt)


def _disagrees(local: Callable[..., Tensor], inputs: list[np.ndarray], wrt: list[int], method: str, mode: str) -> bool:
    """Whether an op's own check fails by `method`, its step being no excuse: a failure
    its step could explain is checked again with a step small against the inputs."""
    result = gradcheck(local, inputs, wrt=wrt, method=method, mode=mode)
    if result.passed or not result.unresolved:
        return not result.passed
    if method == "complex" and any(np.any(_subnormal(x)) for x in inputs):
        return False  # a subnormal input: no step is small against it and still a normal number
    step = _central_step_near_zero if method == "central" else _step_small_against
    again = gradcheck(local, inputs, wrt=wrt, method=method, step=step, mode=mode)
    # a smaller step whose imaginary parts underflowed to 0 shows nothing
    return not again.passed or _underflowed(result.numeric, again.numeric)


def _subnormal(data: Any) -> np.ndarray:
    """Where `data` holds a subnormal number (few significant digits left)."""
    size = np.abs(np.asarray(data))
    return (size > 0) & (size < _TINY)


def _underflowed(first: Sequence[np.ndarray], again: Sequence[np.ndarray]) -> bool:
    """Whether a replay with a smaller step lost entries to underflow: 0 where the first
    step gave a number (x * x * 1e300 at 1e-160: 2 x h underflows for h = 1e-168)."""
    return any(bool(np.any((a != 0) & (b == 0))) for a, b in zip(first, again))


def _near_zero_anywhere(inputs: Sequence[np.ndarray]) -> bool:
    """Whether some input element is nonzero and within CENTRAL_STEPS_FROM_ZERO central steps of 0."""
    bound = CENTRAL_STEPS_FROM_ZERO * CENTRAL_STEP
    return any(bool(np.any((x != 0) & (np.abs(x) < bound))) for x in inputs)


def _central_step_near_zero(x: float) -> float:
    return min(CENTRAL_STEP, abs(x) / CENTRAL_STEPS_FROM_ZERO) if x else CENTRAL_STEP
