"""softmax, log_softmax, logsumexp, cross_entropy and mse, all max-shifted for stability.

The shift uses the real part of the maximum, so the same code runs on complex inputs and
the complex-step check applies to these ops too.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ShapeError
from ..registry import Check, defop
from .reductions import Axis, checked_axis, expand_reduced, kept_shape

NN = "softmax and losses"


def _top(x: Any, axis: Axis) -> Any:
    """max(real x) over axis, kept dims (zeros for an empty x)."""
    if x.size == 0:
        return np.zeros(kept_shape(x.shape, axis))
    return np.max(np.real(x), axis=axis, keepdims=True)


def _shift(x: Any, axis: Axis) -> Any:
    """max(x) over axis (kept dims), 0 where that max is infinite so no inf - inf appears."""
    top = _top(x, axis)
    return np.where(np.isfinite(top), top, 0.0)


def _logsumexp(x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    axis = checked_axis("logsumexp", axis, np.ndim(x))
    top = _shift(x, axis)
    out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.reshape(out, np.sum(np.real(x), axis=axis).shape)


def _at_infinity(x: Any, axis: Axis) -> Any:
    """Where a slice's maximum is +inf: the softmax limit shares all mass equally among
    its +inf entries (softmax([inf, 1]) = [1, 0]; PyTorch gives nan)."""
    at_inf = np.real(x) == np.inf
    return at_inf / np.maximum(np.sum(at_inf, axis=axis, keepdims=True), 1)


def _softmax(x: Any, axis: Axis = -1) -> Any:
    axis = checked_axis("softmax", axis, np.ndim(x))
    e = np.exp(x - _shift(x, axis))
    out = e / np.sum(e, axis=axis, keepdims=True)
    top = _top(x, axis)
    return np.where(top == np.inf, _at_infinity(x, axis), out) if np.any(top == np.inf) else out


def _log_softmax(x: Any, axis: int = -1) -> Any:
    # (x - max) - log(sum(exp(x - max))): x - logsumexp(x) would lose x's low digits
    # next to a huge logsumexp and make inf - inf at +inf logits.
    axis = checked_axis("log_softmax", axis, np.ndim(x))
    shifted = x - _shift(x, axis)
    out = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    top = _top(x, axis)
    return np.where(top == np.inf, np.log(_at_infinity(x, axis)), out) if np.any(top == np.inf) else out


def _logsumexp_vjp(m: Any, g: Any, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    # d logsumexp / dx = softmax(x) over the reduced axes (computed max-shifted, which is
    # more exact than exp(x - logsumexp)).
    return expand_reduced(m, g, x.shape, axis) * m.softmax(x, axis=axis)


def _softmax_vjp(m: Any, g: Any, ans: Any, x: Any, axis: int = -1) -> Any:
    # J = diag(s) - s s^T, so J^T g = s * (g - <g, s>).
    return ans * (g - m.sum(g * ans, axis=axis, keepdims=True))


def _log_softmax_vjp(m: Any, g: Any, ans: Any, x: Any, axis: int = -1) -> Any:
    return g - m.exp(ans) * m.sum(g, axis=axis, keepdims=True)


logsumexp = defop(
    "logsumexp", _logsumexp, (_logsumexp_vjp,),
    doc="log(sum(exp(x))) over axis, shifted by the max so it never overflows", category=NN,
    method=True, complex_safe=True, check=Check(shapes=(((4,),), ((3, 4),)), params={"axis": -1}),
)
softmax = defop(
    "softmax", _softmax, (_softmax_vjp,),
    doc="exp(x) / sum(exp(x)) along axis, max-shifted", category=NN, method=True, complex_safe=True,
    check=Check(shapes=(((4,),), ((3, 4),))),
)
log_softmax = defop(
    "log_softmax", _log_softmax, (_log_softmax_vjp,),
    doc="x - logsumexp(x) along axis, stable for large logits", category=NN, method=True,
    complex_safe=True, check=Check(shapes=(((4,),), ((3, 4),))),
)

# ---- losses ------------------------------------------------------------------------------


def _targets(logits: Any, target: Any) -> tuple[np.ndarray, bool]:
    """The target as a probability array shaped like the logits; True if it was classes."""
    logits_shape, target_shape = np.shape(logits), np.shape(target)
    if target_shape == logits_shape and logits_shape != ():
        return target, False
    if logits_shape and target_shape == logits_shape[:-1]:
        classes = np.real(np.asarray(target))
        n_classes = logits_shape[-1]
        if np.any(classes != np.round(classes)) or np.any(classes < 0) or np.any(classes >= n_classes):
            raise ValueError(f"class targets must be integers in [0, {n_classes}), got {classes}")
        return np.eye(n_classes)[classes.astype(int)], True
    raise ShapeError(
        f"cross_entropy: logits of shape {logits_shape} need class targets of shape "
        f"{logits_shape[:-1]} or probabilities of shape {logits_shape}, got {target_shape}"
    )


def _batch(logits_shape: tuple[int, ...]) -> int:
    return int(np.prod(logits_shape[:-1]))


def _cross_entropy(logits: Any, target: Any) -> Any:
    probs, _ = _targets(logits, target)
    log_p = _log_softmax(logits, axis=-1)
    # Only the terms with a non-zero target count (0 * log 0 is 0 here, not nan), so a
    # -inf logit for a class that is not the target costs nothing, as in PyTorch.
    terms = np.where(probs != 0, probs * log_p, 0.0)
    return -np.sum(terms) / _batch(np.shape(logits))


def _ce_dlogits(m: Any, g: Any, ans: Any, logits: Any, target: Any) -> Any:
    probs, is_classes = _targets(m.raw(logits), m.raw(target))
    t = probs if is_classes else target
    p = m.softmax(logits, axis=-1)
    return (p * m.sum(t, axis=-1, keepdims=True) - t) * (g / _batch(logits.shape))


def _ce_dtarget(m: Any, g: Any, ans: Any, logits: Any, target: Any) -> Any:
    if _targets(m.raw(logits), m.raw(target))[1]:
        return None  # class indices are not differentiable
    return -m.log_softmax(logits, axis=-1) * (g / _batch(logits.shape))


def _ce_check(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-3, 3, (4, 5)), rng.integers(0, 5, (4,)).astype(float)], {}


cross_entropy = defop(
    "cross_entropy", _cross_entropy, (_ce_dlogits, _ce_dtarget), n_in=2,
    doc="mean cross-entropy of logits (classes on the last axis) against class indices or probabilities",
    category=NN, complex_safe=True, check=Check(make=_ce_check, diff=(0,)),
)


def _mse(pred: Any, target: Any) -> Any:
    diff = pred - target
    return np.mean(diff * diff)


def _size(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return int(np.prod(np.broadcast_shapes(a, b)))


mse = defop(
    "mse", _mse,
    (lambda m, g, ans, a, b: (a - b) * (2.0 * g / _size(a.shape, b.shape)),
     lambda m, g, ans, a, b: (b - a) * (2.0 * g / _size(a.shape, b.shape))),
    doc="mean squared error mean((pred - target) ** 2)", category=NN, n_in=2, complex_safe=True,
    check=Check(shapes=(((3, 4), (3, 4)), ((3, 4), (4,)))),
)
