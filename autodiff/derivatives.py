"""Derivatives of tensors: grad, jacobian and hessian, each one pass of the engine.

grad is one backward pass (backprop.py); jacobian one backward pass of a batch of
cotangents, the rows of the identity (batching.py); hessian the gradient's graph pushed
forward with a batch of tangents (forward.py). Inside vmap each row's derivative is its
own: a pass over the physical graph gives it, as rows never mix.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .backprop import _seed, _undefined_stays_undefined, _zeros_of, backprop
from .batching import Batched, batched, from_level, identity_rows, merged, new_level, rebased, unbatched
from .forward import NoJVPError, jacobian_forward
from .limits import check_size
from .namespaces import TENSOR_MATH
from .tensor import Tensor


def grad(y: Tensor, xs: Tensor | Sequence[Tensor], grad_output: Any = None, create_graph: bool = False) -> Any:
    """dy/dx for each x (of the sum of y when y is not a scalar), as Tensors, from one
    backward pass.

    Leaves' `.grad` are not touched. With `create_graph=True` the results carry a graph
    and can be differentiated again (grad of grad, Hessians). Inside vmap (y or an x
    batched) each row's gradient is its own.
    """
    single = isinstance(xs, Tensor)
    targets = [xs] if isinstance(xs, Tensor) else list(xs)
    if type(y) is Batched or type(grad_output) is Batched or any(type(x) is Batched for x in targets):
        out = _grad_of_batch(y, targets, grad_output, create_graph)
        return out[0] if single else out
    if not y.requires_grad:
        zeros = [_zeros_of(x, y, create_graph) for x in targets]
        return zeros[0] if single else zeros
    seed = _seed(y, grad_output)
    grads = backprop(y, Tensor(seed) if create_graph else seed, create_graph, keep=set(targets))
    out = []
    for x in targets:
        g = grads.get(x)
        if g is None:
            out.append(_zeros_of(x, y, create_graph))
        elif isinstance(g, Tensor):
            out.append(_undefined_stays_undefined(g, x, y))
        else:
            out.append(Tensor(g))
    return out[0] if single else out


def _grad_of_batch(y: Tensor, targets: list[Tensor], grad_output: Any, create_graph: bool) -> list[Any]:
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
        grads = backprop(yv, Tensor(seed) if create_graph and not isinstance(seed, Tensor) else seed, create_graph,
                         keep={physical[k][0] for k in by_backward})
        for k in by_backward:
            xv, xlev = physical[k]
            g = grads.get(xv)
            if g is not None:
                g = g if isinstance(g, Tensor) else Tensor(g)
                results[k] = merged(_undefined_stays_undefined(g, xv, yv) if create_graph and type(g) is Tensor else g, xlev)
    for k, x in enumerate(targets):
        if k not in by_backward:
            jac = jacobian_forward(y, x, create_graph=True if create_graph else False)
            weights = TENSOR_MATH.ones(*y.shape) if grad_output is None else grad_output
            per_row = TENSOR_MATH.reshape(weights, shape=tuple(y.shape) + (1,) * x.ndim) * jac
            results[k] = TENSOR_MATH.sum(per_row, axis=tuple(range(len(y.shape)))) if y.shape else per_row
        elif results[k] is None:
            results[k] = _zeros_of(x, yv, create_graph)
    return results


def jacobian(f_out: Tensor, x: Tensor | Sequence[Tensor], create_graph: bool = False) -> Any:
    """d out / d x as a tensor of shape out.shape + x.shape, in one backward pass of a
    batch of cotangents (the rows of the identity): jacrev, as JAX's vmap of vjp. For a
    list of xs, the list of their Jacobians from the same pass."""
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
            seed = identity_rows(tuple(f_out.shape), level, (1,) * len(ylev))
            if ylev:  # (every row of the vmap's batch: its own copy of the seed)
                seed = batched(Tensor(np.broadcast_to(seed.data, (n, *yv.shape))), (level,))
            grads = backprop(yv, seed, create_graph, keep={physical[k][0] for k in wanted})
            for k in wanted:
                xv, xlev = physical[k]
                g = grads.get(xv)
                if g is None:
                    out[k] = Tensor(np.zeros(f_out.shape + targets[k].shape))
                    continue
                rows = from_level(g if isinstance(g, Tensor) else Tensor(g), level, len(xlev), n)  # (x's batch, out's elements, x's item)
                shape = tuple(rows.shape[: len(xlev)]) + tuple(f_out.shape) + tuple(targets[k].shape)
                out[k] = batched(TENSOR_MATH.reshape(rows, shape=shape), xlev)
    return out[0] if isinstance(x, Tensor) else out


def hessian(y: Tensor, x: Tensor, create_graph: bool = False) -> Tensor:
    """Second derivatives of a scalar y, shape x.shape * 2: forward over reverse, the
    gradient by one backward pass, then its Jacobian by one batched forward pass (by one
    batched backward pass where an op on the gradient's graph has no forward-mode rule)."""
    if y.size != 1:
        raise ValueError(f"hessian needs a scalar output, got shape {y.shape}")
    check_size(x.shape + x.shape, "hessian")  # before the passes, not after
    g = grad(y, x, create_graph=True)
    try:
        return jacobian_forward(g, x, create_graph=create_graph)
    except NoJVPError:  # an op with no JVP (a user's vjp rule) on the gradient's graph: reverse over reverse
        return jacobian(g, x, create_graph=create_graph)
