"""softmax, log_softmax, logsumexp, cross_entropy and mse, all max-shifted for stability.

The shift uses the real part of the maximum, so the same code runs on complex inputs and
the complex-step check applies to these ops too.
"""
from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np

from ..batching import BROADCAST, Batched, along_axis, batch_shape, call, own, spread
from ..forward import OVER_AXIS, TO_ITEMS
from ..registry import Check, Edge, Torch, defop
from ..shapes import broadcast_shapes
from . import refusals, torch_calls
from .arithmetic import guarded, masked
from .reductions import Axis, _mean, checked_axis, expand_reduced, kept_shape
from .refusals import REDUCTIONS

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


def _log_softmax(x: Any, axis: Axis = -1) -> Any:
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
    gx = expand_reduced(m, g, x.shape, axis)
    return masked(m, gx, gx * m.softmax(x, axis=axis))


def _softmax_vjp(m: Any, g: Any, ans: Any, x: Any, axis: int = -1) -> Any:
    # J = diag(s) - s s^T, so J^T g = s * (g - <g, s>); a row no gradient reaches passes
    # 0 back, even where a nan or inf in it made s nan.
    return guarded(m, _silent(m, g, axis), ans * (g - m.sum(g * ans, axis=axis, keepdims=True)))


def _silent(m: Any, v: Any, axis: int) -> Any:
    """Where a whole slice along axis of a gradient or tangent is 0 (kept dims)."""
    if type(v) is Batched:  # (a batch's raw arrays are its physical ones: by ops, which batch)
        return m.eq(m.sum(m.ne(v, 0.0), axis=axis, keepdims=True), 0.0)
    return np.all(m.raw(v) == 0, axis=axis, keepdims=True)


def _softmax_jvp(m: Any, tangents: Any, ans: Any, x: Any, axis: int = -1) -> Any:
    # J v = s * (v - <s, v>) along axis (J is symmetric).
    t = tangents[0]
    return guarded(m, _silent(m, t, axis), ans * (t - m.sum(ans * t, axis=axis, keepdims=True)))


def _log_softmax_jvp(m: Any, tangents: Any, ans: Any, x: Any, axis: int = -1) -> Any:
    t = tangents[0]
    return guarded(m, _silent(m, t, axis), t - m.sum(m.exp(ans) * t, axis=axis, keepdims=True))


def _log_softmax_vjp(m: Any, g: Any, ans: Any, x: Any, axis: int = -1) -> Any:
    return guarded(m, _silent(m, g, axis), g - m.exp(ans) * m.sum(g, axis=axis, keepdims=True))


# softmax([1, 2]): the weights the edges beside -inf entries come to.
_S1, _S2 = 1.0 / (1.0 + math.e), math.e / (1.0 + math.e)

def _reduced_batch(m: Any, per_item: Any, nb: int, reduction: str) -> Any:
    """Each row's loss from its items' losses, as the reduction says."""
    if refusals.reduction(reduction) == "none":
        return per_item
    axes = tuple(range(nb, per_item.ndim))
    return m.sum(per_item, axis=axes) if reduction == "sum" else m.mean(per_item, axis=axes)


def _per_item_loss_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    reduction = params.get("reduction", "mean")
    per_item = BROADCAST.run(m, op, nb, args, flags, {**params, "reduction": "none"})
    return _reduced_batch(m, per_item, nb, reduction)


def _class_loss_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    """cross_entropy and nll_loss of each row: the rows' items made one long list of items
    (classes on the last axis), their losses computed with reduction 'none', then each
    row's reduced."""
    (x, t), (fx, ft) = args, flags
    item_x = tuple(x.shape[nb:]) if fx else tuple(x.shape)
    item_t = tuple(t.shape[nb:]) if ft else tuple(t.shape)
    if not item_x or (item_t != item_x and item_t != item_x[:-1]):  # the op's own error, for one row
        call(m, op, x[(0,) * nb] if fx else x, t[(0,) * nb] if ft else t, **params)
    batch = batch_shape(args, flags, nb)
    x, t = spread(m, x, fx, nb, batch), spread(m, t, ft, nb, batch)
    rows = int(np.prod(batch, dtype=np.int64)) * int(np.prod(item_x[:-1], dtype=np.int64))
    flat_x = m.reshape(x, shape=(rows, item_x[-1]))
    flat_t = m.reshape(t, shape=(rows, item_x[-1]) if item_t == item_x else (rows,))
    reduction = params.get("reduction", "mean")
    per_item = call(m, op, flat_x, flat_t, **{**params, "reduction": "none"})
    return _reduced_batch(m, m.reshape(per_item, shape=batch + item_x[:-1]), nb, reduction)


logsumexp = defop(
    "logsumexp", _logsumexp, (_logsumexp_vjp,),
    doc="log(sum(exp(x))) over axis, shifted by the max so it never overflows", category=NN,
    method=True, complex_safe=True, check=Check(shapes=(((4,),), ((3, 4),)), params={"axis": -1}),
    jvp=OVER_AXIS,
    rule='g * softmax(x, axis), g repeated along the reduced axes',
    edges=(
        Edge("with inf", [[math.inf, 1.0]], math.inf, ([1.0, 0.0],), order=1, torch="inf; gradient [nan, 0]",
             note="the softmax limit"),
        Edge("with -inf", [[-math.inf, 1.0, 2.0]], math.log(math.e + math.e ** 2), ([0.0, _S1, _S2],),
             note="a -inf entry has weight 0"),
        Edge("all -inf", [[-math.inf, -math.inf]], -math.inf, ([math.nan, math.nan],)),
    ),
    batch=along_axis(),
    torch=Torch(
        torch_calls.logsumexp,
        variants=({}, {"axis": 0, "keepdims": True}),
        agrees_at=(
            ([[-math.inf, 1.0, 2.0]], {}),
            ([[-math.inf, -math.inf]], {}),
            ([[1000.0, 1000.0]], {}),
        ),
    ),
)
softmax = defop(
    "softmax", _softmax, (_softmax_vjp,),
    doc="exp(x) / sum(exp(x)) along axis, max-shifted", category=NN, method=True, complex_safe=True,
    check=Check(shapes=(((4,),), ((3, 4),))),
    jvp=_softmax_jvp, jvp_rule="ans * (dx - sum(ans * dx, axis, keepdims=True))",
    edges=(
        Edge("with inf", [[math.inf, 1.0]], [1.0, 0.0], ([0.0, 0.0],), weights=[1.0, 2.0], order=1, torch="nan",
             note="the limit"),
        Edge("with -inf", [[-math.inf, 1.0, 2.0]], [0.0, _S1, _S2], ([0.0, -_S1 * _S2, _S1 * _S2],), weights=[1.0, 2.0, 3.0],
             note="a -inf entry has weight 0"),
    ),
    batch=along_axis(),
    torch=Torch(lambda t, x, axis=-1: t.softmax(x, dim=axis), variants=({"axis": 0},), agrees_at=(([[-math.inf, 1.0, 2.0]], {}),)),
)
log_softmax = defop(
    "log_softmax", _log_softmax, (_log_softmax_vjp,),
    doc="x - logsumexp(x) along axis, stable for large logits", category=NN, method=True,
    complex_safe=True, check=Check(shapes=(((4,),), ((3, 4),))),
    jvp=_log_softmax_jvp, jvp_rule="dx - sum(exp(ans) * dx, axis, keepdims=True)",
    edges=(
        Edge("with inf", [[math.inf, 1.0]], [0.0, -math.inf], ([-1.0, 1.0],), order=1, torch="nan", note="the limit"),
        Edge("with -inf", [[-math.inf, 1.0, 2.0]], [-math.inf, -math.log1p(math.e), -math.log1p(1 / math.e)],
             ([1.0, 1.0 - 3.0 * _S1, 1.0 - 3.0 * _S2],), note="finite where the true value is"),
    ),
    batch=along_axis(),
    torch=Torch(lambda t, x, axis=-1: t.log_softmax(x, dim=axis), variants=({"axis": 0},), agrees_at=(([[-math.inf, 1.0, 2.0]], {}),)),
)

# ---- losses ------------------------------------------------------------------------------


def _targets(logits: Any, target: Any) -> tuple[np.ndarray, bool]:
    """The target as a probability array shaped like the logits; True if it was classes."""
    logits_shape, target_shape = np.shape(logits), np.shape(target)
    if refusals.given_probabilities("cross_entropy", logits_shape, target_shape):
        return target, False
    classes = np.real(np.asarray(target))  # class indices, one per row of the logits
    n_classes = logits_shape[-1]
    if np.any(classes != np.round(classes)) or np.any(classes < 0) or np.any(classes >= n_classes):
        raise ValueError(f"class targets must be integers in [0, {n_classes}), got {classes}")
    return np.eye(n_classes)[classes.astype(int)], True


def _batch(logits_shape: tuple[int, ...]) -> int:
    return int(np.prod(logits_shape[:-1]))


def _cross_entropy(logits: Any, target: Any, label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    probs, _ = _targets(logits, target)
    log_p = _log_softmax(logits, axis=-1)
    # Only the terms with a non-zero target count (0 * log 0 is 0 here, not nan), so a
    # -inf logit for a class that is not the target costs nothing, as in PyTorch.
    t = smoothed(probs, label_smoothing)
    # 0 - sum, not -sum: a certain prediction costs +0.0, as in PyTorch, not -0.0.
    per_item = 0.0 - np.sum(np.where(t != 0, t * log_p, 0.0), axis=-1)
    return reduce_loss(per_item, reduction)


def _ce_dlogits(m: Any, g: Any, ans: Any, logits: Any, target: Any, label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    probs, is_classes = _targets(m.raw(logits), m.raw(target))
    t = smoothed(probs if is_classes else target, label_smoothing)
    p = m.softmax(logits, axis=-1)
    item = item_gradient(m, g, reduction, _batch(logits.shape), per_row=True)
    return masked(m, item, (p * m.sum(t, axis=-1, keepdims=True) - t) * item)


def _ce_dtarget(m: Any, g: Any, ans: Any, logits: Any, target: Any, label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    if _targets(m.raw(logits), m.raw(target))[1]:
        return None  # class indices are not differentiable
    scale = item_gradient(m, g, reduction, _batch(logits.shape), per_row=True) * (1.0 - label_smoothing)
    return masked(m, scale, -m.log_softmax(logits, axis=-1) * scale)


def _ce_check(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    params = {"label_smoothing": float(rng.choice([0.0, 0.1])), "reduction": str(rng.choice(REDUCTIONS))}
    return [rng.uniform(-3, 3, (4, 5)), rng.integers(0, 5, (4,)).astype(float)], params


cross_entropy = defop(
    "cross_entropy", _cross_entropy, (_ce_dlogits, _ce_dtarget), n_in=2,
    doc="cross-entropy of logits (classes on the last axis) against class indices or probabilities; "
    "label_smoothing mixes in the uniform distribution; reduction 'mean' (over the batch), 'sum' or 'none'",
    category=NN, complex_safe=True, check=Check(make=_ce_check, diff=(0,)),
    jvp=TO_ITEMS,
    rule=("logits: g * (softmax(logits) - t) per row, t the target distribution (one-hot for classes, with "
          "label_smoothing mixed in), / rows for 'mean';  target: -g * log_softmax(logits)"),
    edges=(
        Edge("a -inf logit", [[[-math.inf, 1.0, 2.0]], [1.0]], math.log1p(math.e), ([[0.0, -_S2, _S2]],), wrt=(0,),
             note="log(1 + e): the -inf class has probability 0"),
        Edge("logits of +-1e308", [[[1e308, -1e308]], [0.0]], 0.0, ([[0.0, 0.0]],), wrt=(0,), note="no overflow"),
    ),
    batch=own(_class_loss_batch, "each row's items as one list of items, then each row's reduction"),
    torch=Torch(
        torch_calls.cross_entropy,
        make=torch_calls.cross_entropy_make,
        extra_makes=(torch_calls.cross_entropy_probs, torch_calls.cross_entropy_probs_smoothed),
        variants=({"label_smoothing": 0.1}, {"reduction": "sum"}, {"reduction": "none", "label_smoothing": 0.3}),
        agrees_at=(
            ([[[-math.inf, 1.0, 2.0]], [1.0]], {}),
            ([[[1e308, -1e308]], [0.0]], {}),
            ([[[math.nan, 1.0]], [0.0]], {}),
        ),
    ),
)


def _mse(pred: Any, target: Any, reduction: str = "mean") -> Any:
    diff = pred - target
    return reduce_loss(diff * diff, reduction)


def _size(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return int(np.prod(broadcast_shapes(a, b)))


def _mse_vjp(m: Any, g: Any, ans: Any, a: Any, b: Any, reduction: str = "mean") -> Any:
    # Guarded on the gradient each item gets: an item whose loss is not asked for passes
    # 0 back, even where a - b is inf.
    item = item_gradient(m, g, reduction, _size(a.shape, b.shape))
    return masked(m, item, (a - b) * (2.0 * item))


mse = defop(
    "mse", _mse,
    (_mse_vjp, lambda m, g, ans, a, b, reduction="mean": _mse_vjp(m, g, ans, b, a, reduction)),
    doc="squared error (pred - target) ** 2, reduced by reduction: 'mean', 'sum' or 'none'", category=NN, n_in=2,
    complex_safe=True, check=Check(shapes=(((3, 4), (3, 4)), ((3, 4), (4,)))),
    jvp=TO_ITEMS,
    rule="a: g * 2 * (a - b), / n for 'mean' (n elements);  b: g * 2 * (b - a), / n for 'mean'",
    batch=own(_per_item_loss_batch, "elementwise, then each row's reduction"),
    torch=Torch(torch_calls.mse, variants=({"reduction": "sum"}, {"reduction": "none"})),
)

# ---- reductions of a loss, and the losses after cross_entropy and mse ------------------------
# Every loss computes one value per item (element, or row for the class losses) and
# reduces them as PyTorch's `reduction=` does: 'mean' (the default), 'sum' or 'none'.



def reduce_loss(per_item: Any, reduction: str) -> Any:
    if refusals.reduction(reduction) == "none":
        return per_item
    # (the mean op's forward: the mean of no items is nan, without NumPy's "Mean of empty slice")
    return np.sum(per_item) if reduction == "sum" else _mean(per_item)


def item_gradient(m: Any, g: Any, reduction: str, count: int, per_row: bool = False) -> Any:
    """The gradient reaching each item's loss: g / count for 'mean', g itself otherwise
    (for 'none' g holds one value per item; `per_row` adds the class axis to broadcast)."""
    if reduction == "mean":
        return g / count
    if reduction == "none" and per_row:
        return m.reshape(g, shape=g.shape + (1,))
    return g


def smoothed(probs: Any, label_smoothing: float) -> Any:
    """Target probabilities mixed with the uniform distribution over the classes (last axis)."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing!r}")
    if label_smoothing == 0.0:
        return probs
    return probs * (1.0 - label_smoothing) + label_smoothing / probs.shape[-1]


def _pairs(low: float, high: float, target: Any) -> Any:
    """Check cases: predictions in [low, high] and targets from `target(rng, shape)`, with
    each reduction."""

    def make(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
        shape = [(4,), (2, 3)][int(rng.integers(2))]
        return [rng.uniform(low, high, shape), target(rng, shape)], {"reduction": str(rng.choice(REDUCTIONS))}

    return make


def _elementwise_loss(
    name: str, per_item: Any, d_pred: Any, d_target: Any, doc: str, check: Check, aliases: tuple[str, ...] = (),
    kink: Any = None, rule: str = "", edges: tuple[Edge, ...] = (), torch: Torch | None = None,
) -> Any:
    """A loss computed item by item from (pred, target) and then reduced. `per_item(p, t,
    **params)` is the forward, d_pred / d_target(m, p, t, **params) the derivatives of one
    item, `rule` those derivatives as text (for `eval --steps`; g there is the gradient that
    reaches each item: the output's, divided by N for reduction 'mean')."""

    def forward(pred: Any, target: Any, reduction: str = "mean", **params: Any) -> Any:
        return reduce_loss(per_item(pred, target, **params), reduction)

    def vjp(derivative: Any) -> Any:
        def item_vjp(m: Any, g: Any, ans: Any, pred: Any, target: Any, reduction: str = "mean", **params: Any) -> Any:
            item = item_gradient(m, g, reduction, _size(pred.shape, target.shape))
            return masked(m, item, derivative(m, pred, target, **params) * item)

        return item_vjp

    forward.__signature__ = _signature_with(per_item)  # type: ignore[attr-defined]
    return defop(
        name, forward, (vjp(d_pred), vjp(d_target)), doc=doc, category=NN, n_in=2, aliases=aliases,
        kink=kink, check=check, rule=rule, jvp=TO_ITEMS, edges=edges,
        batch=own(_per_item_loss_batch, "elementwise, then each row's reduction"), torch=torch,
    )


def _signature_with(per_item: Any) -> inspect.Signature:
    """(pred, target, <per_item's parameters>, reduction='mean'): what `gradcalc ops` shows."""
    params = list(inspect.signature(per_item).parameters.values())
    reduction = inspect.Parameter("reduction", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="mean")
    return inspect.Signature([*params, reduction])


# binary cross-entropy: as PyTorch, each log is clamped at -100 so that p = 0 or 1 gives a
# finite loss, and the gradient's denominator p (1 - p) at 1e-12.
LOG_FLOOR = -100.0


def _bce(p: Any, target: Any) -> Any:
    return -(target * np.maximum(np.log(p), LOG_FLOOR) + (1.0 - target) * np.maximum(np.log1p(-p), LOG_FLOOR))


def _bce_dp(m: Any, p: Any, t: Any) -> Any:
    return (p - t) / m.maximum(p * (1.0 - p), 1e-12)


def _bce_dt(m: Any, p: Any, t: Any) -> Any:
    return m.maximum(m.log1p(-p), LOG_FLOOR) - m.maximum(m.log(p), LOG_FLOOR)


def _probabilities(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.uniform(0.0, 1.0, shape)


binary_cross_entropy = _elementwise_loss(
    "binary_cross_entropy", _bce, _bce_dp, _bce_dt,
    "-(target log p + (1 - target) log(1 - p)) for probabilities p (logs clamped at -100, as PyTorch)",
    Check(make=_pairs(0.1, 0.9, _probabilities)),
    rule="pred: g * (pred - target) / (pred * (1 - pred));  target: g * (log(1 - pred) - log(pred))",
    edges=(Edge("p = 0 or 1, the wrong target", [[0.0, 1.0], [1.0, 0.0]], [100.0, 100.0], ([-1e12, 1e12], [100.0, -100.0]),
                params={"reduction": "none"}, order=1, torch="the same for p; +-inf to the target",
                note="each log clamped at -100 and p (1 - p) at 1e-12, as PyTorch; the target's gradient from the same clamped logs"),),
    torch=Torch(torch_calls.loss("binary_cross_entropy")),
)


def _bce_logits(z: Any, target: Any) -> Any:
    # softplus(z) - target z = -(target log sigmoid(z) + (1 - target) log sigmoid(-z)),
    # with softplus max-shifted: finite for logits of +-1000. For z > 0 it is spelled
    # (1 - target) z + softplus(-z), the same number: softplus(z) - z cancels all but the
    # last few digits of a loss as small as exp(-z) (at z = 37, target 1, all of them).
    with np.errstate(invalid="ignore"):  # (an infinite logit: where picks the side that is not nan)
        return np.where(z > 0, (1.0 - target) * z + np.logaddexp(0.0, -z), np.logaddexp(0.0, z) - target * z)


def _bce_logits_dz(m: Any, z: Any, t: Any) -> Any:
    # sigmoid(z) - t, spelled (1 - t) sigmoid(z) - t sigmoid(-z): at target 1 it is
    # -sigmoid(-z), with every digit where sigmoid(z) - 1 keeps only a few.
    return (1.0 - t) * m.sigmoid(z) - t * m.sigmoid(-z)


binary_cross_entropy_with_logits = _elementwise_loss(
    "binary_cross_entropy_with_logits", _bce_logits,
    _bce_logits_dz,
    lambda m, z, t: -z,
    "binary cross-entropy of sigmoid(z) against target, computed from the logits z: stable for any z",
    Check(make=_pairs(-4.0, 4.0, _probabilities)),
    rule="pred: g * (sigmoid(pred) - target);  target: -g * pred",
    edges=(Edge("logits of +-1000", [[1000.0, -1000.0], [0.0, 0.0]], [1000.0, 0.0], ([1.0, 0.0], [-1000.0, 1000.0]),
                params={"reduction": "none"}, note="exact for any logit"),),
    torch=Torch(
        torch_calls.loss("binary_cross_entropy_with_logits"),
        agrees_at=(
            ([[1000.0, -1000.0, 1000.0, -1000.0], [1.0, 0.0, 0.0, 1.0]], {"reduction": "none"}),
            ([[math.inf, -math.inf], [1.0, 0.0]], {"reduction": "none"}),
        ),
    ),
)


def _nll(logp: Any, target: Any, reduction: str = "mean") -> Any:
    probs, _ = _targets(logp, target)
    # Only the terms with a non-zero target count, as in cross_entropy: a class that is not
    # the target may have log-probability -inf (0 * -inf would be nan).
    return reduce_loss(-np.sum(np.where(probs != 0, probs * logp, 0.0), axis=-1), reduction)


def _nll_dlogp(m: Any, g: Any, ans: Any, logp: Any, target: Any, reduction: str = "mean") -> Any:
    probs, is_classes = _targets(m.raw(logp), m.raw(target))
    return -(probs if is_classes else target) * item_gradient(m, g, reduction, _batch(logp.shape), per_row=True)


def _nll_dtarget(m: Any, g: Any, ans: Any, logp: Any, target: Any, reduction: str = "mean") -> Any:
    if _targets(m.raw(logp), m.raw(target))[1]:
        return None
    return -logp * item_gradient(m, g, reduction, _batch(logp.shape), per_row=True)


def _nll_check(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-3, 0, (4, 5)), rng.integers(0, 5, (4,)).astype(float)], {"reduction": str(rng.choice(REDUCTIONS))}


nll_loss = defop(
    "nll_loss", _nll, (_nll_dlogp, _nll_dtarget), n_in=2,
    doc="negative log-likelihood -logp[target] of log-probabilities (classes on the last axis; "
    "cross_entropy(x, t) is nll_loss(log_softmax(x), t))",
    category=NN, check=Check(make=_nll_check, diff=(0,)),
    rule="logp: -g at each row's target entry, 0 elsewhere (/ rows for 'mean');  target: -g * logp (for probability targets)",
    jvp=TO_ITEMS,
    edges=(Edge("-inf at the target", [[[-math.inf, 0.0]], [0.0]], math.inf, ([[-1.0, 0.0]],), wrt=(0,)),
           Edge("-inf elsewhere", [[[-math.inf, 0.0]], [1.0]], 0.0, ([[0.0, -1.0]],), wrt=(0,), note="a class that is not the target may have probability 0")),
    batch=own(_class_loss_batch, "each row's items as one list of items, then each row's reduction"),
    torch=Torch(torch_calls.loss("nll_loss", classes=True)),
)


def _within(d: Any, tol: float, at: float) -> bool:
    return bool(np.any(np.abs(np.abs(d) - at) <= tol))


def _anywhere(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.uniform(-2.0, 2.0, shape)


l1_loss = _elementwise_loss(
    "l1_loss", lambda pred, target: np.abs(pred - target),
    lambda m, p, t: np.sign(m.raw(p) - m.raw(t)), lambda m, p, t: -np.sign(m.raw(p) - m.raw(t)),
    "absolute error |pred - target|; gradient 0 where they are equal",
    Check(make=_pairs(-2.0, 2.0, _anywhere), kink_gap=1e-3),
    kink=lambda p, t, tol=0.0, **params: _within(p - t, tol, 0.0),
    rule="pred: g * sign(pred - target);  target: -g * sign(pred - target)",
    edges=(Edge("pred = target", [1.0, 1.0], 0.0, (0.0, 0.0)),),
    torch=Torch(torch_calls.loss("l1_loss")),
)


def _huber(pred: Any, target: Any, delta: float = 1.0) -> Any:
    refusals.positive_delta(delta)
    size = np.abs(pred - target)
    return np.where(size <= delta, 0.5 * size * size, delta * (size - 0.5 * delta))


huber = _elementwise_loss(
    "huber", _huber,
    lambda m, p, t, delta=1.0: m.clip(p - t, low=-delta, high=delta),
    lambda m, p, t, delta=1.0: -m.clip(p - t, low=-delta, high=delta),
    "squared error / 2 within delta of the target, absolute error beyond (torch's huber_loss; "
    "smooth_l1 with delta=1 is torch's smooth_l1_loss)",
    Check(make=_pairs(-2.0, 2.0, _anywhere), kink_gap=1e-3), aliases=("smooth_l1",),
    kink=lambda p, t, delta=1.0, tol=0.0, **params: _within(p - t, tol, delta),
    rule="pred: g * clip(pred - target, -delta, delta);  target: -g * clip(pred - target, -delta, delta)",
    edges=(Edge("|pred - target| = delta", [1.0, 0.0], 0.5, (1.0,), wrt=(0,), second=(1.0,),
                torch="second derivative 0 (the absolute side's)", note="the second derivative of the squared side"),),
    torch=Torch(torch_calls.loss("huber_loss")),
)
