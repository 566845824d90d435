"""The JAX side of the op table: the adapters for ops whose JAX counterpart has another
signature (table.py names them `op_<name>`; the rest are JAX's own functions by name).

Each adapter is a short function of jax.numpy arrays and gradcalc's parameter names, and
uses nothing but `jax`, `jnp`, `lax`, `np` and the helpers here: `gradcalc export` copies
the ones a program uses into the module it writes, which imports only JAX and NumPy.
Imported only when the JAX engine is asked for (the default engine never imports JAX).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

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


def _reduce(per_item: Any, reduction: str) -> Any:
    """A loss's items reduced as PyTorch's reduction= does."""
    how = _reduction(reduction)
    return per_item if how == "none" else jnp.sum(per_item) if how == "sum" else jnp.mean(per_item)


def _distribution(scores: Any, target: Any) -> Any:
    """A loss's target as probabilities shaped like the scores: itself, or one-hot of class indices."""
    if _given_probabilities("cross_entropy", scores.shape, target.shape):
        return target
    return jax.nn.one_hot(target.astype(int), scores.shape[-1], dtype=scores.dtype)


def _minus_weighted(t: Any, logp: Any) -> Any:
    """-sum(t * logp) over the classes, where only non-zero targets count (0 * -inf is 0)."""
    return 0.0 - jnp.sum(jnp.where(t != 0, t * logp, 0.0), axis=-1)


def _sections(n: int, sections: Any) -> list[int]:
    """Where split cuts an axis of length n: between equal parts, or at the given indices."""
    if isinstance(sections, tuple):
        return list(sections)
    part = _equal_sections(n, sections)
    return [k * part for k in range(1, sections)]


def op_gelu(x: Any, approximate: str = "none") -> Any:
    return jax.nn.gelu(x, approximate=approximate == "tanh")


def op_leaky_relu(x: Any, slope: float = 0.01) -> Any:
    return jax.nn.leaky_relu(x, negative_slope=slope)


def op_softplus(x: Any) -> Any:
    return jnp.logaddexp(x, 0.0)


def op_where(cond: Any, a: Any, b: Any) -> Any:
    return jnp.where(cond != 0, a, b)


def op_clip(x: Any, *bounds: Any, low: Any = None, high: Any = None) -> Any:
    low, high = (bounds + (low, high)[len(bounds):])[:2] if bounds else (low, high)
    x = x if low is None else jnp.maximum(x, low)
    return x if high is None else jnp.minimum(x, high)


def op_item(x: Any) -> Any:
    _one_element(tuple(x.shape))
    return lax.stop_gradient(jnp.reshape(x, ()))


def op_len(x: Any) -> Any:
    if not x.ndim:
        raise TypeError("len() of a 0-d tensor: it has no first axis")
    return np.int64(x.shape[0])


def op_argmax(x: Any, axis: Any = None) -> Any:
    return np.int64(0) + jnp.argmax(x, axis=axis).astype(jnp.int64)


def op_argmin(x: Any, axis: Any = None) -> Any:
    return np.int64(0) + jnp.argmin(x, axis=axis).astype(jnp.int64)


def op_logcumsumexp(x: Any, axis: Any = None) -> Any:
    return lax.cumlogsumexp(jnp.ravel(x) if axis is None else x, axis=0 if axis is None else axis % x.ndim)


def op_reshape(x: Any, shape: Any) -> Any:
    return jnp.reshape(x, shape)


def op_transpose(x: Any, axes: Any = ()) -> Any:
    return jnp.transpose(x, axes or None)


def op_getitem(x: Any, index: Any) -> Any:
    # JAX clamps an index past the end (x[5] of 3 elements is x[2]) where NumPy, PyTorch and
    # the tensor engine refuse it: the index is checked as NumPy would take it first, on a
    # view of x's shape with no elements behind it (the parts are the language's own:
    # Python ints, slices, None, ..., NumPy arrays of whole numbers or a mask).
    np.broadcast_to(np.empty((), dtype=bool), tuple(x.shape))[index]
    return x[index]


def op_concatenate(*xs: Any, axis: int = 0) -> Any:
    return jnp.concatenate(xs, axis=axis)


def op_stack(*xs: Any, axis: int = 0) -> Any:
    return jnp.stack(xs, axis=axis)


def op_split(x: Any, sections: Any = 2, axis: int = 0) -> Any:
    return tuple(jnp.split(x, _sections(x.shape[axis], sections), axis=axis))


def op_sort(x: Any, axis: int = -1, descending: bool = False) -> Any:
    return jnp.sort(x, axis=axis, descending=descending) if x.ndim else x


def op_pad(x: Any, widths: Any, value: float = 0.0) -> Any:
    return jnp.pad(x, _pad_pairs(widths, x.ndim), constant_values=value)


def op_einsum(*operands: Any, subscripts: str) -> Any:
    return jnp.einsum(subscripts, *operands)


def op_dot(a: Any, b: Any) -> Any:
    _vectors("dot", a.ndim, b.ndim, " (use @ or matmul for matrices)")
    return jnp.dot(a, b)


def op_outer(a: Any, b: Any) -> Any:
    _vectors("outer", a.ndim, b.ndim)
    return jnp.outer(a, b)


def op_trace(x: Any) -> Any:
    _matrix("trace", x.ndim)
    return jnp.trace(x)


def op_diag(x: Any, k: int = 0) -> Any:
    if x.ndim not in (1, 2):
        raise _not_vector_or_matrix("diag", x.ndim)
    return jnp.diag(x, k=k)


def op_slogdet(a: Any) -> Any:
    return tuple(jnp.linalg.slogdet(a))


def op_solve(a: Any, b: Any) -> Any:
    _solvable(tuple(a.shape), b.ndim)
    return jnp.linalg.solve(a, b)


def op_norm(x: Any, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Any:
    p = _norm_order(ord)
    if p == 1:
        return jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims)
    if p == float("inf"):
        return jnp.max(jnp.abs(x), axis=axis, keepdims=keepdims)
    if x.size == 0:
        return jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=keepdims))
    # Scaled by the largest |x| (held constant: the norm is homogeneous), as the tensor
    # engine's: the squares of 1e200 overflow, of 1e-200 underflow, the norm is neither.
    top = lax.stop_gradient(jnp.max(jnp.abs(x), axis=axis, keepdims=True))
    scale = jnp.where((top > 0) & (top < jnp.inf), top, 1.0)
    # (behind a barrier: where x is a constant of a jitted program, XLA's simplifier would
    # rewrite (x / s) * (x / s) as (x * x) / (s * s), which overflows again: nan)
    scaled = lax.optimization_barrier(x / scale)
    out = jnp.sqrt(jnp.sum(scaled * scaled, axis=axis, keepdims=True)) * scale
    return out if keepdims else jnp.reshape(out, jnp.sum(x, axis=axis).shape)


def op_var(x: Any, axis: Any = None, keepdims: bool = False, ddof: float = 0) -> Any:
    return jnp.var(x, axis=axis, keepdims=keepdims, ddof=int(ddof))


def op_std(x: Any, axis: Any = None, keepdims: bool = False, ddof: float = 0) -> Any:
    return jnp.std(x, axis=axis, keepdims=keepdims, ddof=int(ddof))


def op_cross_entropy(logits: Any, target: Any, label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    t = _distribution(logits, target)
    t = t * (1.0 - label_smoothing) + label_smoothing / logits.shape[-1] if label_smoothing else t
    return _reduce(_minus_weighted(t, jax.nn.log_softmax(logits, axis=-1)), reduction)


def op_nll_loss(logp: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce(_minus_weighted(_distribution(logp, target), logp), reduction)


def op_mse(pred: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce((pred - target) ** 2, reduction)


def op_binary_cross_entropy(p: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce(-(target * jnp.maximum(jnp.log(p), -100.0) + (1.0 - target) * jnp.maximum(jnp.log1p(-p), -100.0)), reduction)


def op_binary_cross_entropy_with_logits(z: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce(jnp.logaddexp(0.0, z) - target * z, reduction)


def op_l1_loss(pred: Any, target: Any, reduction: str = "mean") -> Any:
    return _reduce(jnp.abs(pred - target), reduction)


def op_huber(pred: Any, target: Any, delta: float = 1.0, reduction: str = "mean") -> Any:
    _positive_delta(delta)
    size = jnp.abs(pred - target)
    return _reduce(jnp.where(size <= delta, 0.5 * size * size, delta * (size - 0.5 * delta)), reduction)


# Constructors: constants, made as the tensor engine makes them (rand and randn with
# NumPy's generator, so a seed gives the same numbers on every engine).
def op_zeros(shape: Any = ()) -> Any:
    return jnp.zeros(shape, dtype=jnp.float64)


def op_ones(shape: Any = ()) -> Any:
    return jnp.ones(shape, dtype=jnp.float64)


def op_full(shape: Any, value: float) -> Any:
    return jnp.full(shape, value, dtype=jnp.float64)


def op_eye(n: int, m: Any = None) -> Any:
    return jnp.eye(n, m, dtype=jnp.float64)


def op_arange(start: float, stop: Any = None, step: float = 1.0) -> Any:
    return jnp.asarray(np.arange(0.0 if stop is None else start, start if stop is None else stop, step, dtype=np.float64))


def op_linspace(start: float, stop: float, num: int = 50) -> Any:
    return jnp.asarray(np.linspace(start, stop, num))


def op_rand(shape: Any = (), seed: Any = None) -> Any:
    return jnp.asarray(np.random.default_rng(seed).random(shape))


def op_randn(shape: Any = (), seed: Any = None) -> Any:
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape))
