"""The PyTorch side of the op table: the adapters for ops whose PyTorch counterpart has
another signature (table.py names them `op_<name>`; the rest are PyTorch's own functions
by name). PyTorch says `dim` and `keepdim` where gradcalc, as NumPy, says `axis` and
`keepdims`, and reduces over one axis or a list of them, never None.

Each adapter is a short function of float64 tensors and gradcalc's parameter names, and
uses nothing but `torch`, `np` and the helpers here: `gradcalc export` copies the ones a
program uses into the module it writes, which imports only PyTorch and NumPy. Imported
only when the PyTorch engine is asked for.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

# (underscored: `gradcalc export` copies each into the module it writes, beside the program's names)
from gradcalc.autodiff.ops.refusals import equal_sections as _equal_sections
from gradcalc.autodiff.ops.refusals import given_probabilities as _given_probabilities
from gradcalc.autodiff.ops.refusals import matrix as _matrix
from gradcalc.autodiff.ops.refusals import norm_order as _norm_order
from gradcalc.autodiff.ops.refusals import not_vector_or_matrix as _not_vector_or_matrix
from gradcalc.autodiff.ops.refusals import one_element as _one_element
from gradcalc.autodiff.ops.refusals import pad_pairs as _pad_pairs
from gradcalc.autodiff.ops.refusals import positive_delta as _positive_delta
from gradcalc.autodiff.ops.refusals import reduction as _reduction
from gradcalc.autodiff.ops.refusals import solvable as _solvable
from gradcalc.autodiff.ops.refusals import vectors as _vectors

F = torch.nn.functional


def _dims(x: Any, axis: Any) -> list[int]:
    """An axis, a tuple of axes or None (every axis) as PyTorch's list of dims."""
    return list(range(x.ndim)) if axis is None else list(axis) if isinstance(axis, tuple) else [axis]


def _as(x: Any, value: Any) -> Any:
    """A number or array as a float64 tensor beside x (on its device)."""
    return value if torch.is_tensor(value) else torch.as_tensor(np.asarray(value, dtype=np.float64), device=x.device)


def _reduce(per_item: Any, reduction: str) -> Any:
    """A loss's items reduced as PyTorch's reduction= does."""
    how = _reduction(reduction)
    return per_item if how == "none" else per_item.sum() if how == "sum" else per_item.mean()


def _distribution(scores: Any, target: Any) -> Any:
    """A loss's target as probabilities shaped like the scores: itself, or one-hot of class indices."""
    if _given_probabilities("cross_entropy", scores.shape, target.shape):
        return target
    return F.one_hot(target.long(), scores.shape[-1]).to(scores.dtype)


def _minus_weighted(t: Any, logp: Any) -> Any:
    """-sum(t * logp) over the classes, where only non-zero targets count (0 * -inf is 0)."""
    return 0.0 - torch.where(t != 0, t * logp, torch.zeros_like(logp)).sum(-1)


def _reduced(f: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """A reduction over gradcalc's axis (None: all of them) by a torch function of dim and keepdim."""
    return f(x, dim=_dims(x, axis), keepdim=keepdims) if x.ndim else x.clone()


def op_sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return _reduced(torch.sum, x, axis, keepdims)


def op_mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return _reduced(torch.mean, x, axis, keepdims)


def op_max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return _reduced(torch.amax, x, axis, keepdims)


def op_min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return _reduced(torch.amin, x, axis, keepdims)


def op_logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return _reduced(torch.logsumexp, x, axis, keepdims)


def op_prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    if not x.ndim:
        return x.clone()
    dims = sorted({d % x.ndim for d in _dims(x, axis)})
    for d in reversed(dims):  # (torch.prod takes one dim at a time)
        x = torch.prod(x, dim=d, keepdim=True)
    return x if keepdims else x.reshape([n for i, n in enumerate(x.shape) if i not in dims])


def op_var(x: Any, axis: Any = None, keepdims: bool = False, ddof: float = 0) -> Any:
    return torch.var(x, dim=_dims(x, axis), keepdim=keepdims, correction=ddof)


def op_std(x: Any, axis: Any = None, keepdims: bool = False, ddof: float = 0) -> Any:
    return _root(op_var(x, axis, keepdims, ddof), 2.0)


def _root(s: Any, p: float) -> Any:
    """s ** (1 / p) of s >= 0, its derivative 0 where s is 0 (torch.std's and
    vector_norm's convention, and gradcalc's). Their own rules set that 0 in place, which
    PyTorch refuses to differentiate a third time (forward over reverse: a Hessian's
    gradient); this does it with a select, which differentiates again. A nan stays nan."""
    zero = s == 0
    return torch.where(zero, 0.0, torch.where(zero, 1.0, s) ** (1.0 / p))


def op_norm(x: Any, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Any:
    p, dims = _norm_order(ord), _dims(x, axis)
    if p in (1, float("inf")) or x.numel() == 0 or not x.ndim:
        return torch.linalg.vector_norm(x, ord=p, dim=dims, keepdim=keepdims)
    # Scaled by the largest |x| (held constant: the norm is homogeneous), as the tensor
    # engine's: the squares of 1e200 overflow, of 1e-200 underflow, the norm is neither.
    top = x.detach().abs().amax(dim=dims, keepdim=True)
    scale = torch.where((top > 0) & (top < float("inf")), top, torch.ones_like(top))
    y = x / scale
    if p > 1:  # (torch's vector_norm for these is what _root replaces)
        out = _root((y.abs() ** p).sum(dim=dims, keepdim=True), p) * scale
    else:
        out = torch.linalg.vector_norm(y, ord=p, dim=dims, keepdim=True) * scale
    return out if keepdims else out.reshape(torch.linalg.vector_norm(x.detach(), ord=p, dim=dims).shape)


def op_argmax(x: Any, axis: Any = None) -> Any:
    return torch.argmax(x, dim=axis)


def op_argmin(x: Any, axis: Any = None) -> Any:
    return torch.argmin(x, dim=axis)


def _scanned(f: Any, x: Any, axis: Any) -> Any:
    """A scan along gradcalc's axis (None: the flattened tensor) by a torch function of dim."""
    return f(x.reshape(-1), 0) if axis is None else f(x, axis)


def op_cumsum(x: Any, axis: Any = None) -> Any:
    return _scanned(torch.cumsum, x, axis)


def op_cumprod(x: Any, axis: Any = None) -> Any:
    return _scanned(torch.cumprod, x, axis)


def op_logcumsumexp(x: Any, axis: Any = None) -> Any:
    return _scanned(_LogCumSumExp.apply, x, axis)


class _LogCumSumExp(torch.autograd.Function):
    """torch.logcumsumexp with derivatives of every order. PyTorch's own backward works in
    log space (the log of the gradient), and its derivative where the gradient is 0 is
    nan: the third derivative of a logcumsumexp came out nan where it is 0. These rules
    are the tensor engine's (autodiff/ops/scans.py), made of ops that differentiate again:
    d ans_i / d x_j is the softmax of the prefix x_0..x_i at j, and a zero gradient or
    tangent adds exactly 0, even beside the nan of a prefix that is all -inf."""

    generate_vmap_rule = True  # (the rules are torch ops, which vmap batches)

    @staticmethod
    def forward(x: Any, dim: int) -> Any:
        return torch.logcumsumexp(x, dim)

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])
        ctx.dim = inputs[1]

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (x,) = ctx.saved_tensors
        return _weighted(_prefix_softmax(x, ctx.dim), g.movedim(ctx.dim, -1).unsqueeze(-1), -2).movedim(-1, ctx.dim), None  # g as [..., i, 1]

    @staticmethod
    def jvp(ctx: Any, t: Any, _: Any) -> Any:
        (x,) = ctx.saved_tensors
        return _weighted(_prefix_softmax(x, ctx.dim), t.movedim(ctx.dim, -1).unsqueeze(-2), -1).movedim(-1, ctx.dim)  # t as [..., 1, j]


def _weighted(weights: Any, values: Any, dim: int) -> Any:
    """The sum over dim of values * weights, a zero value adding exactly 0 (beside a nan weight too)."""
    return torch.where(values == 0, 0.0, values * weights).sum(dim)


def _prefix_softmax(x: Any, dim: int) -> Any:
    """[..., i, j], the scanned axis last: exp(x_j - logcumsumexp(x)_i) for j <= i, 0 above."""
    xt = x.movedim(dim, -1)
    n = xt.shape[-1]
    lower = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    return torch.where(lower, torch.softmax(torch.where(lower, xt.unsqueeze(-2), -torch.inf), dim=-1), 0.0)


def op_softmax(x: Any, axis: Any = -1) -> Any:
    return torch.exp(op_log_softmax(x, axis))


def op_log_softmax(x: Any, axis: Any = -1) -> Any:
    return torch.log_softmax(x, dim=axis) if isinstance(axis, int) else x - torch.logsumexp(x, dim=_dims(x, axis), keepdim=True)


def op_gelu(x: Any, approximate: str = "none") -> Any:
    return F.gelu(x, approximate=approximate)


def op_leaky_relu(x: Any, slope: float = 0.01) -> Any:
    return F.leaky_relu(x, slope)


def op_elu(x: Any, alpha: float = 1.0) -> Any:
    return F.elu(x, alpha)


def op_softplus(x: Any) -> Any:
    return torch.logaddexp(x, torch.zeros_like(x))


def op_cbrt(x: Any) -> Any:
    return torch.sign(x) * torch.abs(x) ** (1.0 / 3.0)


def op_where(cond: Any, a: Any, b: Any) -> Any:
    return torch.where(cond != 0, a, b)


def op_clip(x: Any, *bounds: Any, low: Any = None, high: Any = None) -> Any:
    low, high = (bounds + (low, high)[len(bounds):])[:2] if bounds else (low, high)
    return torch.clamp(x, None if low is None else _as(x, low), None if high is None else _as(x, high))


def op_detach(x: Any) -> Any:
    return x.detach()


def op_item(x: Any) -> Any:
    _one_element(tuple(x.shape))
    return x.detach().reshape(())


def op_len(x: Any) -> Any:
    if not x.ndim:
        raise TypeError("len() of a 0-d tensor: it has no first axis")
    return np.int64(x.shape[0])


def op_round(x: Any, decimals: int = 0) -> Any:
    return torch.round(x, decimals=decimals)


def op_reshape(x: Any, shape: Any) -> Any:
    return torch.reshape(x, shape)


def op_flatten(x: Any) -> Any:
    return torch.reshape(x, (-1,))


def op_transpose(x: Any, axes: Any = ()) -> Any:
    return torch.permute(x, axes or tuple(reversed(range(x.ndim))))


def op_swapaxes(x: Any, axis1: int, axis2: int) -> Any:
    return torch.swapaxes(x, axis1, axis2)


def op_broadcast_to(x: Any, shape: Any) -> Any:
    return torch.broadcast_to(x, shape)


def op_getitem(x: Any, index: Any) -> Any:
    parts = index if isinstance(index, tuple) else (index,)
    x, parts = _forward_steps(x, parts)
    # NumPy counts an int among index arrays as an index array too, so arrays set apart by a
    # slice put their axes first (x[0, :, [0, 1]] is 2 x 3 for an x of 2 x 3 x 4); PyTorch
    # counts it as a plain int (3 x 2). Among arrays, an int goes in as an array of one element.
    arrays = any(getattr(p, "ndim", 0) for p in parts)
    return x[tuple(torch.as_tensor(p, device=x.device) if isinstance(p, np.ndarray)
                   else torch.tensor([p], device=x.device) if arrays and type(p) is int else p for p in parts)]


def _forward_steps(x: Any, parts: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """x and an index's parts with each slice of negative step (x[::-1], x[2::-2]) made a
    slice of positive step along that axis of x flipped: the same elements in the same
    order, which PyTorch's slicing, without negative steps, can take."""
    if not any(_backward(p) for p in parts):
        return x, parts
    read = sum(_axes_read(p) for p in parts)
    axis, flipped, out = 0, [], []
    for p in parts:
        if p is Ellipsis:
            axis += x.ndim - read
        elif _backward(p):
            picked = range(*p.indices(x.shape[axis]))
            if picked:  # (element i of the axis is element n - 1 - i of the flipped one)
                first = x.shape[axis] - 1 - picked[0]
                flipped.append(axis)
                p = slice(first, first - p.step * (len(picked) - 1) + 1, -p.step)
            else:
                p = slice(0, 0)
            axis += 1
        else:
            axis += _axes_read(p)
        out.append(p)
    return (torch.flip(x, flipped) if flipped else x), tuple(out)


def _backward(part: Any) -> bool:
    """Whether an index part is a slice with a negative step."""
    return type(part) is slice and part.step is not None and part.step < 0


def _axes_read(part: Any) -> int:
    """How many axes of the indexed tensor an index part reads: a mask as many as it has,
    None (a new axis) and ... (counted apart) none, anything else one."""
    if part is None or part is Ellipsis:
        return 0
    return int(part.ndim) if str(getattr(part, "dtype", "")).endswith("bool") else 1


def op_concatenate(*xs: Any, axis: int = 0) -> Any:
    return torch.cat(xs, dim=axis)


def op_stack(*xs: Any, axis: int = 0) -> Any:
    return torch.stack(xs, dim=axis)


def op_split(x: Any, sections: Any = 2, axis: int = 0) -> Any:
    n = x.shape[axis]
    if isinstance(sections, tuple):
        bounds = [0, *sections, n]
        return tuple(torch.narrow(x, axis, a, max(b - a, 0)) for a, b in zip(bounds, bounds[1:]))
    return tuple(torch.split(x, _equal_sections(n, sections), dim=axis))


def op_squeeze(x: Any, axis: Any = None) -> Any:
    return torch.squeeze(x) if axis is None else torch.squeeze(x, axis)


def op_unsqueeze(x: Any, axis: int) -> Any:
    return torch.unsqueeze(x, axis)


def op_flip(x: Any, axis: Any = None) -> Any:
    return torch.flip(x, _dims(x, axis))


def op_roll(x: Any, shift: Any, axis: Any = None) -> Any:
    return torch.roll(x, shift, axis)


def op_tile(x: Any, reps: Any) -> Any:
    return torch.tile(x, reps)


def op_repeat(x: Any, repeats: Any, axis: Any = None) -> Any:
    counts = torch.as_tensor(np.asarray(repeats, dtype=np.int64), device=x.device)
    return torch.repeat_interleave(x.reshape(-1) if axis is None else x, counts, dim=0 if axis is None else axis)


def op_sort(x: Any, axis: int = -1, descending: bool = False) -> Any:
    return torch.sort(x, dim=axis, descending=descending, stable=True).values if x.ndim else x


def op_pad(x: Any, widths: Any, value: float = 0.0) -> Any:
    return F.pad(x, [w for pair in reversed(_pad_pairs(widths, x.ndim)) for w in pair], value=value)


def op_einsum(*operands: Any, subscripts: str) -> Any:
    return torch.einsum(subscripts, *operands)


def op_dot(a: Any, b: Any) -> Any:
    _vectors("dot", a.ndim, b.ndim, " (use @ or matmul for matrices)")
    return torch.dot(a, b)


def op_outer(a: Any, b: Any) -> Any:
    _vectors("outer", a.ndim, b.ndim)
    return torch.outer(a, b)


def op_trace(x: Any) -> Any:
    _matrix("trace", x.ndim)
    return torch.trace(x)


def op_diag(x: Any, k: int = 0) -> Any:
    if x.ndim not in (1, 2):
        raise _not_vector_or_matrix("diag", x.ndim)
    return torch.diag(x, k)


def op_triu(x: Any, k: int = 0) -> Any:
    return torch.triu(x, k)


def op_tril(x: Any, k: int = 0) -> Any:
    return torch.tril(x, k)


def op_slogdet(a: Any) -> Any:
    return torch.linalg.slogdet(a.detach())[0], _LogAbsDet.apply(a)  # (the sign is piecewise constant: no gradient)


class _LogAbsDet(torch.autograd.Function):
    """log|det a| with rules that differentiate again: torch.func's third derivative of
    PyTorch's own slogdet (forward over reverse, then reverse) was not the tensor engine's.
    These are the tensor engine's: the gradient inv(a)^T, the tangent trace(inv(a) da),
    and nan for a singular matrix, where log|det| = -inf has no derivative."""

    generate_vmap_rule = True

    @staticmethod
    def forward(a: Any) -> Any:
        return torch.linalg.slogdet(a)[1]

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (a,) = ctx.saved_tensors
        return g[..., None, None] * _inverse_transpose(a)

    @staticmethod
    def jvp(ctx: Any, da: Any) -> Any:
        (a,) = ctx.saved_tensors
        return (_inverse_transpose(a) * da).sum((-2, -1))


def _inverse_transpose(a: Any) -> Any:
    """inv(a)^T, nan for a singular matrix (inv_ex: a singular matrix is no error)."""
    inverse, info = torch.linalg.inv_ex(a)
    return torch.where((info == 0)[..., None, None], inverse.mT, torch.nan)


def op_solve(a: Any, b: Any) -> Any:
    _solvable(tuple(a.shape), b.ndim)
    if b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1]):  # (PyTorch's vectors: a column each)
        return _Solve.apply(a, b.unsqueeze(-1)).squeeze(-1)
    return _Solve.apply(a, b)


class _Solve(torch.autograd.Function):
    """torch.linalg.solve of matrices with rules that differentiate again: torch.func's
    third derivative of PyTorch's own solve (forward over reverse, then reverse) was not
    the tensor engine's. These are the tensor engine's rules (autodiff/ops/linalg.py), each
    a solve of its own and a product: a x = b gives gb = solve(a^T, g), ga = -gb x^T, and
    a dx = db - da x."""

    generate_vmap_rule = True

    @staticmethod
    def forward(a: Any, b: Any) -> Any:
        return torch.linalg.solve(a, b)

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        ctx.save_for_backward(inputs[0], output)
        ctx.save_for_forward(inputs[0], output)
        ctx.b_shape = inputs[1].shape  # (b is not kept: its gradient is summed back to its shape)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        a, x = ctx.saved_tensors
        gb = _Solve.apply(a.mT, g)
        return (-gb @ x.mT).sum_to_size(a.shape), gb.sum_to_size(ctx.b_shape)

    @staticmethod
    def jvp(ctx: Any, da: Any, db: Any) -> Any:
        a, x = ctx.saved_tensors
        rhs = -(da @ x) if db is None else db if da is None else db - da @ x
        return _Solve.apply(a, rhs)


def op_cross_entropy(logits: Any, target: Any, label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    t = _distribution(logits, target)
    t = t * (1.0 - label_smoothing) + label_smoothing / logits.shape[-1] if label_smoothing else t
    return _reduce(_minus_weighted(t, torch.log_softmax(logits, dim=-1)), reduction)


def op_nll_loss(logp: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce(_minus_weighted(_distribution(logp, target), logp), reduction)


def op_mse(pred: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce((pred - target) ** 2, reduction)


def op_binary_cross_entropy(p: Any, target: Any, reduction: str = "mean") -> Any:
    # (the formula, not F.binary_cross_entropy, which refuses a target outside [0, 1]: a check's differences step there)
    return _reduce(-(target * torch.clamp(torch.log(p), min=-100.0) + (1.0 - target) * torch.clamp(torch.log1p(-p), min=-100.0)), reduction)


def op_binary_cross_entropy_with_logits(z: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce(F.binary_cross_entropy_with_logits(z, target.expand_as(z) if target.shape != z.shape else target, reduction="none"), reduction)


def op_l1_loss(pred: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce(torch.abs(pred - target), reduction)


def op_huber(pred: Any, target: Any, delta: float = 1.0, reduction: str = "mean") -> Any:
    _positive_delta(delta)
    # c (d - c / 2), c the error clipped to [-delta, delta]: d^2 / 2 within delta, delta (|d| -
    # delta / 2) beyond, to the last bit. Not F.huber_loss, whose backward has no forward-mode
    # rule in PyTorch: hvp and jacfwd(grad(f)) of it were internal errors.
    d = pred - target
    c = d.clamp(-delta, delta)
    return _reduce(c * (d - 0.5 * c), reduction)


# Constructors: constants, made as the tensor engine makes them (rand and randn with
# NumPy's generator, so a seed gives the same numbers on every engine).
def _made(array: Any) -> Any:
    return torch.as_tensor(np.asarray(array, dtype=np.float64), device=torch.get_default_device())


def op_zeros(shape: Any = ()) -> Any:
    return _made(np.zeros(shape))


def op_ones(shape: Any = ()) -> Any:
    return _made(np.ones(shape))


def op_full(shape: Any, value: float) -> Any:
    return _made(np.full(shape, value))


def op_eye(n: int, m: Any = None) -> Any:
    return _made(np.eye(n, m))


def op_arange(start: float, stop: Any = None, step: float = 1.0) -> Any:
    return _made(np.arange(0.0 if stop is None else start, start if stop is None else stop, step))


def op_linspace(start: float, stop: float, num: int = 50) -> Any:
    return _made(np.linspace(start, stop, num))


def op_rand(shape: Any = (), seed: Any = None) -> Any:
    return _made(np.random.default_rng(seed).random(shape))


def op_randn(shape: Any = (), seed: Any = None) -> Any:
    return _made(np.random.default_rng(seed).standard_normal(shape))
