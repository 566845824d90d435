"""Derivatives of tensors: grad, jacobian and hessian, each one pass of the engine.

grad is one backward pass (backprop.py); jacobian one backward pass of a batch of
cotangents, the rows of the identity (batching.py); hessian the gradient's graph pushed
forward with a batch of tangents (forward.py). Inside vmap each row's derivative is its
own: a pass over the physical graph gives it, as rows never mix.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .backprop import _seed, _undefined_stays_undefined, _zeros_of, backprop
from .batching import Batched, batched, from_level, identity_rows, merged, new_level, rebased, reshaped, unbatched
from .forward import NoJVPError, jacobian_forward
from .limits import check_size
from .namespaces import TENSOR_MATH
from .tensor import Tensor, made_by


def grad(y: Tensor, xs: Tensor | Sequence[Tensor], grad_output: Any = None, create_graph: bool = False, *, defer: bool = True) -> Any:
    """dy/dx for each x (of the sum of y when y is not a scalar), as Tensors, from one
    backward pass: one Tensor for one x, a tuple of them for a list or tuple of xs.

    Leaves' `.grad` are not touched. With `create_graph=True` the results can be
    differentiated again (grad of grad, Hessians): the pass is a plain one, and the
    results' own graph is recorded only when something asks for it (Deferred). Inside
    vmap (y or an x batched) each row's gradient is its own. `defer=False` records the
    graph now, for a caller about to differentiate the results (a Hessian).
    """
    single = isinstance(xs, Tensor)
    targets = [xs] if isinstance(xs, Tensor) else list(xs)
    if type(y) is Batched or type(grad_output) is Batched or any(type(x) is Batched for x in targets):
        out = _grad_of_batch(y, targets, grad_output, create_graph, defer)
    elif not y.requires_grad:
        out = [_zeros_of(x, y, create_graph) for x in targets]
    else:
        seed = _seed(y, grad_output)
        if create_graph and defer and DEFERRED[0]:
            out = deferred(y, targets, seed, lambda: recorded_grad(y, targets, seed))
        else:
            out = recorded_grad(y, targets, seed) if create_graph else _plain_grad(y, targets, seed)
    return out[0] if single else tuple(out)  # (a tuple for several, whether given as a list or a tuple: torch.autograd.grad's)


def _plain_grad(y: Tensor, targets: list[Tensor], seed: Any) -> list[Tensor]:
    grads = backprop(y, seed, False, keep=set(targets), only=True)
    return [_zeros_of(x, y, False) if grads.get(x) is None else Tensor(grads[x]) for x in targets]


def recorded_grad(y: Tensor, targets: list[Tensor], seed: Any) -> list[Tensor]:
    """grad with create_graph, built now: each result carries the graph that computed it."""
    grads = backprop(y, seed if isinstance(seed, Tensor) else Tensor(seed), True, keep=set(targets), only=True)
    out: list[Tensor] = []
    for x in targets:
        g = grads.get(x)
        out.append(_zeros_of(x, y, True) if g is None else _undefined_stays_undefined(g, x, y))
    return out


# ---- derivatives whose graph is built when asked for ----------------------------------------------------

_PREV, _OP, _PARAMS = Tensor.__dict__["_prev"], Tensor.__dict__["op"], Tensor.__dict__["params"]
DEFERRED = [True]  # (tests build every derivative's graph at once to compare)


def _built(slot: Any) -> Any:
    """A Tensor field of a Deferred that builds its graph first when read."""

    def read(self: Deferred) -> Any:
        self._build()
        return slot.__get__(self)

    def write(self: Deferred, value: Any) -> None:
        slot.__set__(self, value)

    return property(read, write)


class Deferred(Tensor):
    """A derivative from a plain backward pass, whose own graph (what a second derivative
    differentiates) is recorded the first time anything looks at its graph: a backward or
    forward pass through it, a check, a tree. Until then it costs a plain pass; a gradient
    that is only stepped with or printed never pays for its graph. It says it requires
    grad (its graph may well depend on the variables); built, it is an identity node on
    the recorded derivative's node (its op and inputs), or a constant if it has no graph."""

    __slots__ = ("pending", "__weakref__")

    pending: _Pending | None

    def _build(self) -> None:
        if self.pending is not None:
            self.pending.build()

    def built(self) -> Tensor:
        """This derivative with its graph recorded: an identity node on it, or a constant
        (detached: a derivative that came out constant is no user's value)."""
        self._build()  # (a build that finds a constant marks it detached: _Pending.build)
        return self

    # The graph's fields, which build the graph when read (the data and the shape do not).
    _prev = _built(_PREV)
    op = _built(_OP)
    params = _built(_PARAMS)


class _Pending:
    """The recipe of one pass's deferred results, run once for all of them. `source` is
    the output differentiated: whether its graph reads a variable says whether theirs can."""

    __slots__ = ("recipe", "made", "source")

    def __init__(self, recipe: Callable[[], list[Tensor]], source: Tensor) -> None:
        self.recipe: Callable[[], list[Tensor]] | None = recipe
        self.made: list[Any] = []
        self.source = source

    def build(self) -> None:
        recipe, self.recipe = self.recipe, None
        if recipe is None:
            return
        reals = recipe()
        for k, ref in self.made:
            real, d = reals[k], ref()
            if d is None:
                continue
            d.pending = None
            origin = made_by(real)
            if origin is not None:  # (where it came from, as every node of a derivative's graph says)
                d.made_by = origin
            if not real.requires_grad:  # a derivative that came out constant: no user's value (as built() says)
                d.requires_grad = False
                d.detached = True
            elif real.op is not None:  # it takes the recorded node's place (graphs count no extra node)
                _OP.__set__(d, real.op)
                _PARAMS.__set__(d, real.params)
                _PREV.__set__(d, real._prev)
            else:  # (a leaf with a gradient: an identity node on it)
                _OP.__set__(d, RESHAPE[0])
                _PARAMS.__set__(d, {"shape": tuple(real.shape)})
                _PREV.__set__(d, (real,))
        self.made = []


def graph_leaves(root: Tensor) -> list[Tensor]:
    """The leaves `root`'s graph reads, without recording any Deferred derivative's graph:
    one not yet built stands for the output it differentiates, whose graph holds every leaf
    its own could read (a superset: building it may find fewer, even none)."""
    found: list[Tensor] = []
    seen: set[Tensor] = set()  # (nodes hash by identity)
    stack = [root]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if type(node) is Deferred and node.pending is not None:
            stack.append(node.pending.source)
            continue
        if node.op is None:
            found.append(node)
        else:
            stack.extend(node._prev)
    return found


RESHAPE: list[Any] = []  # the registry's reshape (an identity here), found at first use


def deferred(y: Tensor, targets: list[Tensor], seed: Any, recipe: Callable[[], list[Tensor]]) -> list[Tensor]:
    """The plain pass's results as Deferred derivatives, sharing one recipe."""
    if not RESHAPE:
        from .registry import REGISTRY

        RESHAPE.append(REGISTRY["reshape"])
    grads = backprop(y, seed, False, keep=set(targets), only=True)
    pending = _Pending(recipe, y)
    out: list[Tensor] = []
    for x in targets:
        g = grads.get(x)
        if g is None:
            out.append(_zeros_of(x, y, True))
            continue
        d = _new(Deferred)
        d.data = np.array(g, dtype=np.result_type(g, np.float64)) if not isinstance(g, np.ndarray) or g.dtype not in (np.float64, np.complex128) else g
        d.grad, d.requires_grad, d.name, d.retains_grad, d.detached = None, True, None, False, False
        _PREV.__set__(d, ())
        _OP.__set__(d, None)
        _PARAMS.__set__(d, None)
        d.pending = pending
        pending.made.append((len(out), weakref.ref(d)))  # (the recipe gives every target's, in order)
        out.append(d)
    return out


_new = object.__new__


def _grad_of_batch(y: Tensor, targets: list[Tensor], grad_output: Any, create_graph: bool, defer: bool = True) -> list[Any]:
    """grad where a value is batched: one backward pass over the physical graph, which
    gives each row its own gradient (rows do not mix). An x that is the same in every row
    of a level y varies over gets its rows' gradients by forward mode (a backward pass would
    sum them)."""
    yv, ylev = unbatched(y)
    if grad_output is None:
        seed: Any = np.ones(yv.shape)
    else:
        if tuple(getattr(grad_output, "shape", np.shape(grad_output))) != tuple(y.shape):
            raise ValueError(f"the seed gradient has shape {tuple(np.shape(grad_output))}, the output {y.shape}")
        seed = rebased(grad_output, ylev, tuple(yv.shape))
    physical = [unbatched(x) for x in targets]
    by_backward = [k for k, (_, xlev) in enumerate(physical) if set(ylev) <= set(xlev)]
    results: list[Any] = [None] * len(targets)
    if by_backward and yv.requires_grad:
        xvs = [physical[k][0] for k in by_backward]
        grads: list[Any]
        if create_graph and defer and DEFERRED[0] and not isinstance(seed, Tensor):  # (a plain seed: nothing tied to a live batch)
            grads = deferred(yv, xvs, seed, lambda: recorded_grad(yv, xvs, seed))
        elif create_graph:
            grads = recorded_grad(yv, xvs, seed if isinstance(seed, Tensor) else Tensor(seed))
        else:
            found = backprop(yv, seed, False, keep=set(xvs), only=True)
            grads = [None if found.get(xv) is None else found[xv] if isinstance(found[xv], Tensor) else Tensor(found[xv]) for xv in xvs]
        for k, g in zip(by_backward, grads):
            if g is not None:
                results[k] = merged(g, physical[k][1])
    for k, x in enumerate(targets):
        if k not in by_backward:
            jac = jacobian_forward(y, x, create_graph=True if create_graph else False)
            weights = TENSOR_MATH.ones(*y.shape) if grad_output is None else grad_output
            per_row = TENSOR_MATH.reshape(weights, shape=tuple(y.shape) + (1,) * x.ndim) * jac
            results[k] = TENSOR_MATH.sum(per_row, axis=tuple(range(len(y.shape)))) if y.shape else per_row
        elif results[k] is None:  # (zeros of each row's shape, in the batch's layout: x's physical zeros)
            xv, xlev = physical[k]
            results[k] = merged(_zeros_of(xv, yv, create_graph), xlev)
    return results


def jacobian(f_out: Tensor | Sequence[Tensor], x: Tensor | Sequence[Tensor], create_graph: bool = False) -> Any:
    """d out / d x as a tensor of shape out.shape + x.shape, in one backward pass of a
    batch of cotangents (the rows of the identity): jacrev, as JAX's vmap of vjp. For a
    list of xs, the list of their Jacobians from the same pass; for a list of outputs, one
    such entry per output, a pass each."""
    if not isinstance(f_out, Tensor):
        return [jacobian(o, x, create_graph) for o in f_out]
    targets = [x] if isinstance(x, Tensor) else list(x)
    for t in targets:
        check_size(f_out.shape + t.shape, "jacobian")  # before the pass, not after
    yv, ylev = unbatched(f_out)
    physical = [unbatched(t) for t in targets]
    out: list[Any] = [None] * len(targets)
    for k, (t, (_, xlev)) in enumerate(zip(targets, physical)):
        if f_out.size == 0 or not yv.requires_grad:  # the zeros of that shape, as torch.func.jacrev gives
            out[k] = Tensor(np.zeros(f_out.shape + t.shape))
        elif not set(ylev) <= set(xlev):  # x the same in every row: each row's own derivative, by forward mode
            out[k] = jacobian_forward(f_out, t, create_graph)
    wanted = [k for k in range(len(targets)) if out[k] is None]
    if wanted:
        n = f_out.size
        with new_level() as level:
            seed: Tensor = identity_rows(tuple(f_out.shape), level, (1,) * len(ylev))
            if ylev:  # (every row of the vmap's batch: its own copy of the seed)
                seed = batched(Tensor(np.broadcast_to(seed.data, (n, *yv.shape))), (level,))
            grads = backprop(yv, seed, create_graph, keep={physical[k][0] for k in wanted}, only=True)
            for k in wanted:
                xv, xlev = physical[k]
                g = grads.get(xv)
                if g is None:
                    out[k] = Tensor(np.zeros(f_out.shape + targets[k].shape))
                    continue
                rows = from_level(g if isinstance(g, Tensor) else Tensor(g), level, len(xlev), n)  # (x's batch, out's elements, x's item)
                shape = tuple(rows.shape[: len(xlev)]) + tuple(f_out.shape) + tuple(targets[k].shape)
                out[k] = batched(reshaped(rows, shape), xlev)
    return out[0] if isinstance(x, Tensor) else out


def hessian(y: Tensor, x: Tensor, create_graph: bool = False) -> Tensor:
    """Second derivatives of a scalar y, shape x.shape * 2: forward over reverse, the
    gradient by one backward pass, then its Jacobian by one batched forward pass (by one
    batched backward pass where an op on the gradient's graph has no forward-mode rule)."""
    if y.size != 1:
        raise ValueError(f"hessian needs a scalar output, got shape {y.shape}")
    check_size(x.shape + x.shape, "hessian")  # before the passes, not after
    g = grad(y, x, create_graph=True, defer=False)  # (its graph is pushed forward at once)
    try:
        return jacobian_forward(g, x, create_graph=create_graph)
    except NoJVPError:  # an op with no JVP (a user's vjp rule) on the gradient's graph: reverse over reverse
        return jacobian(g, x, create_graph=create_graph)
