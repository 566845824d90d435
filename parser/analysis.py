"""What gradcalc reports about an output: value, gradients per variable, graph facts,
and where an inf or nan came from.

Data only; the CLI decides how it looks.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcalc.autodiff import GraphStats, Tensor, Value, first_nonfinite, graph_stats, made_by, topological_order
from gradcalc.autodiff.batching import batched, from_level, new_level
from gradcalc.autodiff.forward import NoJVPError, jacobian_forward, push_forward
from gradcalc.autodiff.graph import derivative_words, first_nonfinite_gradient
from gradcalc.autodiff.limits import max_elements
from gradcalc.autodiff.tensor import all_finite

from .backends import TensorBackend
from .budgets import report_budget
from .errors import LanguageError, Span

if TYPE_CHECKING:
    from .machine import Session


class Analysis:
    """An output's value, the gradient per name (of the sum when the output is not a
    scalar: `grad_of`), its graph's statistics, and where an inf or nan came from.

    `nonfinite` is the first node, in evaluation order, whose value is not finite while
    its inputs are (None when the value is finite), found in the graph of `nonfinite_root`:
    the output, or for an output computed from constants alone (the engine records no
    graph for them) the statement evaluated again with its constants recorded.
    `nonfinite_gradient` is (op node, input node) where a VJP first made a finite
    gradient infinite or nan, walking from the output down (None when every reported
    gradient is finite).
    `undefined` is, for an output computed from a derivative (grad(y, x) and what is
    computed from it), the node that first made an inf or nan in a y that was
    differentiated (see `differentiated_nonfinite`): the derivative is there, finite or
    not, but the function it is of is not defined at this point (None otherwise).
    `tangent_passes` is how many forward passes found the gradients (None: one backward
    pass did), pushing `tangents` tangents in all (one per element of each variable).
    `earlier` names the variables the output depends on an earlier value of
    (`earlier_values`), each with whether what the name holds now is in the graph.
    `span` is the place of the statement whose value this is (None when not known): what
    is computed from the analysis later (`--steps`) is placed there too."""

    def __init__(
        self, output: Any, value: np.ndarray, grads: dict[str, np.ndarray], grad_of: str | None, stats: GraphStats,
        variables: list[str], leaf_names: list[str] | None = None, nonfinite: Any | None = None,
        nonfinite_root: Any | None = None, nonfinite_gradient: tuple[Any, Any] | None = None, undefined: Any | None = None,
        tangent_passes: int | None = None, earlier: dict[str, bool] | None = None, tangents: int | None = None,
    ) -> None:
        self.output = output
        self.value = value
        self.grads = grads
        self.grad_of = grad_of
        self.stats = stats
        self.variables = variables
        self.leaf_names: list[str] = leaf_names or []
        self.nonfinite = nonfinite
        self.nonfinite_root = nonfinite_root if nonfinite_root is not None else output
        self.nonfinite_gradient = nonfinite_gradient
        self.undefined = undefined
        self.tangent_passes = tangent_passes
        self.tangents = tangents
        self.earlier: dict[str, bool] = earlier or {}
        self.span: Span | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> str | None:
        """'int64' or 'bool' for a value of whole numbers (argmax, len, x.shape) or
        booleans (x > 0), which has no gradient at all; None for a real (float) value."""
        return without_gradient(self.value)


def without_gradient(value: np.ndarray) -> str | None:
    """The type of a value that has no gradient, as PyTorch gives an integer or boolean
    tensor no grad_fn; None for a float or complex one. (floor and round give reals,
    whose gradient is zero: they are reported as such, as PyTorch does.)"""
    return str(value.dtype) if value.dtype.kind in "biu" else None


# The REPL's names for the last result (`_`, `ans`): aliases of whatever came last, so
# reporting them would repeat another name's gradient on every line.
LAST_RESULT = ("_", "ans")


def variables_in(output: Any, order: list[Any] | None = None) -> list[Any]:
    """The named leaves that require grad in the graph of `output`, in order of use."""
    nodes = order if order is not None else topological_order(output)
    return [n for n in nodes if not n.parents and getattr(n, "name", None) and n.requires_grad]


def named_values(order: list[Any], known: dict[str, Any]) -> dict[str, Any]:
    """Every name that stands for a node of the graph with a gradient, in order of use.

    The rule (docs/language.md, "Named values"): a name reports d(output)/d(the node it
    is bound to now) -- a leaf its total derivative, a named intermediate its adjoint, as
    PyTorch's retain_grad() gives. Aliases (`z = x`) report the node they share. Names
    come from the session's bindings (`known`); a named leaf of the graph whose name is
    bound to nothing is reported under its name (a graph made without a session). A
    leaf whose name is bound to another value now is not (`earlier_values`: the report
    says so). Constants (detach(x), comparisons) and the REPL's names for the last
    result are not reported unless asked for."""
    in_graph = {id(n) for n in order}
    names_of: dict[int, list[str]] = {}
    for name, node in known.items():
        if name not in LAST_RESULT and id(node) in in_graph and node.requires_grad:
            names_of.setdefault(id(node), []).append(name)
    found: dict[str, Any] = {}
    for node in order:
        for name in names_of.get(id(node), ()):
            found[name] = node
    for leaf in variables_in(None, order):
        if leaf.name not in found and leaf.name not in known:
            found[leaf.name] = leaf
    order_of = {id(n): i for i, n in enumerate(order)}
    return dict(sorted(found.items(), key=lambda item: order_of[id(item[1])]))


def earlier_values(output: Any, order: list[Any], known: dict[str, Any]) -> dict[str, bool]:
    """The names the output depends on an earlier value of: a named leaf of its graph
    (`x = 2; L = x**2`) whose name is bound to another value now (`x = 10`), so that
    the report's `grad x`, with respect to what x holds now, is not the derivative by
    that leaf. Each name maps to whether what it holds now is in the graph. A name
    rebound to a value computed from its old one through which alone the old value
    reaches the output (`L = L + ...`, `x = x * 3`) is left out: the derivative by the
    new value already carries the old one's."""
    in_graph = {id(n) for n in order}
    found: dict[str, bool] = {}
    for leaf in rebound_leaves(variables_in(None, order), known):
        name = leaf.name
        if name in found:
            continue
        now = known[name]
        on_graph = id(now) in in_graph
        if on_graph and (now is output or not _reaches_around(output, leaf, now)):
            continue
        found[name] = on_graph
    return found


def reported_names(wrt: list[str] | None, named: dict[str, Any], known: dict[str, Any], always: list[str] | None,
                   earlier: dict[str, bool]) -> list[str]:
    """The names a report gives the gradients of: those of --wrt (each a variable), else the
    names always reported (eval's bindings), the named values of the graph, and the names
    rebound since the output used them (their derivative by what they hold now, 0 off the
    graph). The same on every engine: it reads the graph, never a value."""
    if wrt is not None:
        for name in wrt:
            if name not in named and name not in known:
                raise LanguageError("name", f"--wrt names {name!r}, which is not a variable")
        return list(wrt)
    reported = [n for n in (always or []) if n in known and _has_gradient(known[n])]
    rebound = [n for n in earlier if n not in named and _has_gradient(known[n])]
    return reported + [n for n in [*named, *rebound] if n not in reported]


def rebound_leaves(leaves: list[Any], known: dict[str, Any]) -> list[Any]:
    """The named leaves whose name is bound to another value now."""
    return [leaf for leaf in leaves if leaf.name in known and known[leaf.name] is not leaf and leaf.name not in LAST_RESULT]


def _reaches_around(output: Any, target: Any, around: Any) -> bool:
    """Whether `target` is an ancestor of `output` through a path that avoids `around`."""
    seen, stack = {id(around)}, [output]
    while stack:
        node = stack.pop()
        if node is target:
            return True
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(node.parents)
    return False


def analyze(
    output: Any, wrt: list[str] | None = None, known: dict[str, Any] | None = None, always: list[str] | None = None,
    *, session: Session | None = None, code: list[Any] | None = None, mode: str = "reverse", span: Span | None = None,
) -> Analysis:
    """Run the backward pass from `output` (seeded with ones: the gradient of its sum)
    and collect d(output)/d(name) for every named value in its graph (see
    `named_values`), or for the names in `wrt`. `known` maps names to the values bound
    to them; `always` lists names reported even when the output does not use them (with
    zero gradients: eval's NAME=VALUE bindings). The `session` that computed the output
    and the statement's `code` let an inf or nan computed from constants alone be traced
    to its op (see Analysis). `mode="forward"` finds the same gradients by forward mode
    instead: a tangent per element of each name's node (J e_i, summed over the output),
    pushed in batches as `jacfwd` does: one forward pass per node when they fit.

    The passes are part of the statement that computed `output`: they run on under its
    budget of steps, time and memory (budgets.report_budget), and an error of theirs (a
    budget, the element cap, a vjp rule of the user's) is placed at `span`, the statement."""
    if not isinstance(output, (Tensor, Value)):
        from .engines.values import EngineValue  # (only the JAX and PyTorch engines' values get here)

        if isinstance(output, EngineValue):
            from .engines.report import analyze_engine

            return analyze_engine(output, wrt, known or {}, always, session)
        raise LanguageError("value", f"the result is not a number or tensor: {output!r}").at(span)
    with report_budget(span):
        analysis = _analyze(output, wrt, known or {}, always, session, code, mode)
    analysis.span = span
    return analysis


def _analyze(
    output: Any, wrt: list[str] | None, known: dict[str, Any], always: list[str] | None, session: Session | None,
    code: list[Any] | None, mode: str,
) -> Analysis:
    order = topological_order(output)  # once, for every fact below
    leaves = variables_in(output, order)
    named = named_values(order, known)
    earlier = earlier_values(output, order, known)
    names = reported_names(wrt, named, known, always, earlier)
    value = np.asarray(output.data)
    differentiable = without_gradient(value) is None
    if not differentiable:
        names = []  # nothing to differentiate: the report says so instead of listing zeros
    nodes = {name: named.get(name, known.get(name)) for name in names}
    if mode == "forward":
        if isinstance(output, Value):
            raise LanguageError("argument", "forward mode needs the tensor engine (--engine tensor)")
        try:
            grads, passes, tangents = _forward(output, order, nodes)
        except NoJVPError as err:  # an op without a forward rule: a function with a vjp rule of the user's
            raise LanguageError("argument", f"forward mode: {err}") from None
    else:
        grads, passes, tangents = _backward(output, order, nodes), None, None
    root, culprit = output, None
    if not all_finite(value):
        culprit = first_nonfinite(output, order)
        # An op on constants alone records no graph (`log(0)`, or `log(0) + x`, where the
        # add's input is the constant -inf): evaluated again with constants recorded, the
        # op that made it can be named.
        if session is not None and code is not None and (culprit is None or not culprit.parents) and not getattr(culprit, "name", None):
            traced = _retrace(session, code)
            if traced is not None:
                root, culprit = traced, first_nonfinite(traced)
    # (the blame reads the gradients a backward pass leaves on the nodes)
    finite = all(all_finite(g) for g in grads.values())
    blamed = None if finite or mode == "forward" else _first_bad_gradient(order, list(grads.values()))
    undefined = differentiated_nonfinite(order)
    if undefined is not None and not undefined.parents and not undefined.name and session is not None and code is not None:
        traced = _retrace(session, code)  # (a constant's op is named as for the value, above)
        retraced = differentiated_nonfinite(topological_order(traced)) if traced is not None else None
        undefined = retraced if retraced is not None else undefined  # (not `or`: a tensor has no truth value)
    return Analysis(
        output=output, value=value, grads=grads, grad_of="sum" if differentiable and (value.size != 1 or value.ndim) else None,
        stats=graph_stats(output, order), variables=names, leaf_names=[leaf.name for leaf in leaves],
        nonfinite=culprit, nonfinite_root=root, nonfinite_gradient=blamed, undefined=undefined,
        tangent_passes=passes, earlier=earlier, tangents=tangents,
    )


def differentiated_nonfinite(order: list[Any]) -> Any | None:
    """Where a function that was differentiated is not finite, for a graph (`order`)
    computed from derivatives: the node that first made an inf or nan (first_nonfinite)
    in the output y of a backward pass that made nodes of the graph (their Provenance),
    or of the y that such a y was itself the derivative of. None if every such y is finite.

    `grad(log(det(A)), A)` at det(A) < 0 is a finite A^-T, yet log(det(A)) is nan there: the
    nan is in no node of the derivative's graph, so nothing else would say so."""
    seen: set[int] = set()
    for node in order:
        origin = made_by(node)
        while origin is not None and id(origin.output) not in seen:
            y = origin.output
            seen.add(id(y))
            if not all_finite(y.data):
                return first_nonfinite(y)
            origin = made_by(y)
    return None


def rule_constant(culprit: Any) -> str | None:
    """Where a constant that is not finite came from when a derivative's rule wrote it in
    (log|det| at a singular matrix has no derivative, and its rule says nan): `the
    derivative of slogdet(<2x2 tensor>), a constant in its rule`; None for any other leaf."""
    origin = made_by(culprit)
    if culprit.parents or origin is None or not origin.node.parents:
        return None
    user = origin.node
    return f"{derivative_words(origin.order)} of {_call(user, (), np.shape(user.data))}, a constant in its rule"


def undefined_note(culprit: Any) -> str:
    """What to say of a derivative taken where the function is not finite (`culprit`:
    differentiated_nonfinite's node)."""
    kind = nonfinite_kind(culprit.data)
    if culprit.parents:
        where = f"the first {kind} came from {first_bad_call(culprit, culprit.data)}"
    elif rule_constant(culprit) is not None:
        where = f"the first {kind} came from {rule_constant(culprit)}"
    else:
        where = f"the {kind} is in the input {culprit.name or '(a constant)'}"
    return f"the function differentiated is not finite here ({where}): it has no derivative at this point"


def nonfinite_kind(data: Any) -> str:
    """'nan', 'inf', or 'inf or nan': what a value that is not finite holds."""
    array = np.asarray(data)
    return "nan" if np.isnan(array).any() and not np.isinf(array).any() else "inf" if not np.isnan(array).any() else "inf or nan"


_POINTWISE = ("elementwise", "arithmetic")  # the categories of ops that map elements to elements (but matmul)


def first_bad_call(op: Any, bad: Any, through: Any = None) -> str:
    """`log(-1.0)`, or for tensors `log at element [2]: log(-1.0)`, at the first element
    of `bad` that is not finite (`bad` has the shape of `through`, else of the op's
    output). A node that a derivative rule made is named by the user's op whose rule it
    is (its Provenance): `the derivative of sqrt(0.0): div(1.0, 0.0) in its rule`."""
    bad = np.asarray(bad)
    index = tuple(int(i) for i in np.argwhere(~np.isfinite(bad))[0]) if bad.ndim else ()
    shape = np.shape((through if through is not None else op).data)
    call = _call(op, index, shape)
    origin = made_by(op)
    if origin is not None and origin.node.parents:
        user = origin.node
        said = derivative_words(origin.order)
        user_call = _call(user, index if np.shape(user.data) == shape else (), shape)
        return f"{said} of {user_call}: {call} in its rule" if not index else \
            f"{said} of {user.label} at element {list(index)}: {user_call}, {call} in its rule"
    return call if not index else f"{op.label} at element {list(index)}: {call}"


def _call(op: Any, index: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """An op node as a call on its inputs' values (at `index` for an op that works element
    by element, whose inputs have `shape`; det's gradient at [0, 0] is not det of x[0, 0])."""
    definition = getattr(op, "op", None)  # (a scalar-engine node has none: its inputs are numbers)
    pointwise = definition is None or (definition.category in _POINTWISE and definition.out_shape is None)
    args = ", ".join(_input_at(p, index if pointwise else (), shape) for p in op.parents)
    return f"{op.label}({args})" if op.label.isidentifier() else f"{op.label} of {args}"  # scalar labels: **0.5


def _input_at(node: Any, index: tuple[int, ...], shape: tuple[int, ...]) -> str:
    data = np.asarray(node.data)
    if data.size == 1:
        return _number(data.reshape(()).item())
    if data.shape == shape and index:
        return _number(data[index].item())
    return f"<{'x'.join(map(str, data.shape))} tensor>"


def _number(x: Any) -> str:
    """A number at full precision, as the language writes it (true, false, 3, -1.0)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    return str(x) if isinstance(x, int) else repr(x)


def _first_bad_gradient(order: list[Any], reported: list[Any]) -> tuple[Any, Any] | None:
    """Where a backward pass first made a gradient not finite, as first_nonfinite_gradient
    finds it; when the reported gradients hold nan, where one first became nan (`sin(x)/x`
    at 0 makes an inf on one path and a nan on the other: the note is about the nan shown)."""
    blamed = first_nonfinite_gradient(order[-1], order)
    if blamed is None or not any(np.isnan(g).any() for g in reported) or np.isnan(blamed[1].grad).any():
        return blamed
    for node in reversed(order):
        if node.grad is None or np.isnan(node.grad).any():
            continue
        for parent in node.parents:
            grad = getattr(parent, "grad", None)
            if grad is not None and np.isnan(grad).any():
                return node, parent
    return blamed


class _ConstantsRecorded(TensorBackend):
    """The tensor engine, with every literal a leaf that records the ops applied to it."""

    def constant(self, value: float) -> Tensor:
        return Tensor(value, requires_grad=True)


def _retrace(session: Session, code: list[Any]) -> Any:
    if session.engine != "tensor":
        return None
    tracer = copy.copy(session)
    tracer.backend = _ConstantsRecorded()
    try:
        traced = tracer.evaluate(code)
    except Exception:  # noqa: BLE001 - only a diagnosis: without it the note is vaguer, nothing worse
        return None
    return traced if hasattr(traced, "parents") else None


def _has_gradient(value: Any) -> bool:
    """A value on a graph: a Tensor, a Value or a JAX or PyTorch engine's value (not a function, a number)."""
    return getattr(value, "requires_grad", False) is True


def _forward(output: Tensor, order: list[Any], nodes: dict[str, Any]) -> tuple[dict[str, np.ndarray], int, int]:
    """_backward's gradients by forward mode, how many forward passes found them and how
    many tangents those pushed: d(sum of output)/d(node) is the sum over the output of the
    Jacobian's column for each element of the node."""
    in_graph = {id(n) for n in order}
    widest = max(int(np.size(n.data)) for n in order)
    grads, passes, tangents = {}, 0, 0
    for name, node in nodes.items():
        if node is not None and id(node) in in_graph and _has_gradient(node):
            grads[name], made = _summed_columns(output, node, widest)
            passes += made
            tangents += int(np.size(node.data))
        else:
            grads[name] = np.zeros(np.shape(getattr(node, "data", node)))
    return grads, passes, tangents


def _summed_columns(output: Tensor, node: Tensor, widest: int) -> tuple[np.ndarray, int]:
    """d(sum of output)/d(node) by forward mode: the Jacobian's columns, one per element
    of `node`, summed over the output. The tangents go through the graph as batches (one
    forward pass each), of as many as keep every tangent the pass carries under the
    element cap (`widest`: the graph's largest tensor): all of them at once, as jacfwd,
    when they fit; a 10^6-element variable in many passes, each counted against the
    statement's budget, never one batch of 10^12 numbers. With the number of passes."""
    n = node.size
    rows = max(1, max_elements() // max(widest, 1))
    over_output = tuple(range(output.ndim))
    if rows >= n:
        return np.asarray(jacobian_forward(output, node).data).sum(axis=over_output), 1
    summed = np.empty(n)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        seed = np.zeros((stop - start, n))
        seed[np.arange(stop - start), np.arange(start, stop)] = 1.0
        with new_level() as level:
            tangents = push_forward([output], {node: batched(Tensor(seed.reshape((stop - start, *node.shape))), (level,))})
            t = tangents.get(output)
            summed[start:stop] = 0.0 if t is None else np.asarray(from_level(t, level, output.ndim, stop - start).data).sum(axis=over_output)
    return summed.reshape(node.shape), -(-n // rows)


def _backward(output: Any, order: list[Any], nodes: dict[str, Any]) -> dict[str, np.ndarray]:
    """d(output)/d(node) for each named node: every node's gradient is kept (retained),
    so a named intermediate reports its adjoint; a node outside the graph gets zeros."""
    if isinstance(output, Value):
        for node in order:
            node.grad = 0.0
        output.backward()
    else:
        for node in order:
            node.grad = None
        if output.requires_grad:
            output.backward(retain_grads=True)
    in_graph = {id(n) for n in order}
    grads = {}
    for name, node in nodes.items():
        g = node.grad if id(node) in in_graph and _has_gradient(node) else None
        grads[name] = np.zeros(np.shape(getattr(node, "data", node))) if g is None else np.asarray(g)
    return grads
