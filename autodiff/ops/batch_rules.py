"""The batching rules of the ops whose rule is not read off their JVP (temporary home:
each moves into its op's defop)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..batching import (
    BROADCAST,
    BROADCAST_TO,
    FLATTEN,
    GETITEM,
    LEADING,
    MATMUL,
    RESHAPE,
    TILE,
    TRANSPOSE,
    UNINDEX,
    BatchRule,
    Unbatched,
    _product,
    _reshaped,
    _scaling,
    along_axis,
    batch_shape,
    call,
    logical_ndim,
    own,
    prefixed,
    spread,
)
from ..registry import REGISTRY
from . import comparisons, integer, reductions, scans, shaping, statistics  # noqa: F401  (their ops are registered first)
from .layout import pad_widths
from .linalg import _LETTERS, _dot_subscripts, _inner_subscripts, _kron_subscripts, diagonal_index, parse_subscripts
from .losses import REDUCTIONS


def _pad(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    pairs = pad_widths(params["widths"], x.ndim - nb)
    flat = [0] * (2 * nb) + [w for pair in pairs for w in pair]
    return m.pad(x, widths=tuple(flat), **{k: v for k, v in params.items() if k != "widths"})


PAD = own(_pad, "no padding on the batch axes")


# Elementwise, with batches of scaled identity rows kept so (batching.py).
SCALING = BatchRule("broadcast", BROADCAST.run, BROADCAST.text, sparse="elementwise", diagonal=_scaling)


def _einsum_in_batch(m: Any, nb: int, args: list[Any], flags: list[bool], inputs: list[str], output: str) -> Any:
    """einsum of the items: every batched operand gets the batch's letters first, and so
    does the output (the batch axes broadcast to their full size: einsum's letters do not)."""
    used = "".join(inputs) + output
    fresh = "".join(c for c in _LETTERS if c not in used)[:nb]
    batch = batch_shape(args, flags, nb)
    operands = [spread(m, a, True, nb, batch) if f else a for a, f in zip(args, flags)]
    subscripts = ",".join(fresh + s if f else s for s, f in zip(inputs, flags)) + "->" + fresh + output
    return m.einsum(*operands, subscripts=subscripts)


def _einsum(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    inputs, output = parse_subscripts(params["subscripts"], len(args))
    return _einsum_in_batch(m, nb, args, flags, inputs, output)


def _contraction(subscripts_of: Any) -> BatchRule:
    def run(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
        ranks = [logical_ndim(a, f, nb) for a, f in zip(args, flags)]
        inputs, output = parse_subscripts(subscripts_of(*ranks), 2)
        return _einsum_in_batch(m, nb, args, flags, inputs, output)

    return own(run, "einsum of the items, the batch's axes named first")


def _outer(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    (a, b), (fa, fb) = args, flags
    if logical_ndim(a, fa, nb) != 1 or logical_ndim(b, fb, nb) != 1:  # the op's own error, for one item
        call(m, op, a[(0,) * nb] if fa else a, b[(0,) * nb] if fb else b)
    column = m.reshape(a, shape=tuple(a.shape) + (1,))
    row = m.reshape(b, shape=tuple(b.shape[:-1]) + (1, b.shape[-1]))
    return m.mul(column, row)  # (a product keeps the sign of a zero, as outer does)


def _kron(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    items = [tuple(x.shape[nb:]) if f else tuple(x.shape) for x, f in zip(args, flags)]
    n = max(len(s) for s in items)
    sa, sb = ((1,) * (n - len(s)) + s for s in items)
    a = m.reshape(args[0], shape=(tuple(args[0].shape[:nb]) if flags[0] else ()) + sa)
    b = m.reshape(args[1], shape=(tuple(args[1].shape[:nb]) if flags[1] else ()) + sb)
    inputs, output = parse_subscripts(_kron_subscripts(n), 2)
    blocks = _einsum_in_batch(m, nb, [a, b], flags, inputs, output)
    return m.reshape(blocks, shape=tuple(blocks.shape[:nb]) + tuple(x * y for x, y in zip(sa, sb)))


def _trace(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    if x.ndim - nb != 2:
        call(m, op, x[(0,) * nb])
    return m.sum(m.getitem(x, index=prefixed(diagonal_index(tuple(x.shape[nb:]), 0), nb)), axis=-1)


def _diag(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x, k = args[0], int(params.get("k", 0))
    item = tuple(x.shape[nb:])
    if len(item) == 2:
        return m.getitem(x, index=prefixed(diagonal_index(item, k), nb))
    if len(item) == 1:
        n = item[0] + abs(k)
        return m.unindex(x, index=prefixed(diagonal_index((n, n), k), nb), shape=tuple(x.shape[:nb]) + (n, n))
    return call(m, op, x[(0,) * nb], **params)


def _triangle(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    if x.ndim - nb == 1:  # NumPy makes a matrix of a vector's rows first
        n = x.shape[-1]
        x = m.broadcast_to(m.reshape(x, shape=tuple(x.shape[:-1]) + (1, n)), shape=tuple(x.shape[:-1]) + (n, n))
    elif x.ndim - nb == 0:
        return call(m, op, x[(0,) * nb], **params)
    return call(m, op, x, **params)


def _solve(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    (a, b), (fa, fb) = args, flags
    na, nbb = logical_ndim(a, fa, nb), logical_ndim(b, fb, nb)
    if na < 2 or nbb < 1 or (nbb == 1 and na != 2):  # the op's own error, for one item
        call(m, op, a[(0,) * nb] if fa else a, b[(0,) * nb] if fb else b)
    if nbb == 1:  # a vector: a column of a one-column matrix, for NumPy's stacked solve
        b = m.reshape(b, shape=tuple(b.shape) + (1,))
    if fa:
        a = m.reshape(a, shape=tuple(a.shape[:nb]) + (1,) * (max(nbb, 2) - na) + tuple(a.shape[nb:])) if max(nbb, 2) > na else a
    if fb and nbb > 1 and na > nbb:
        b = m.reshape(b, shape=tuple(b.shape[:nb]) + (1,) * (na - nbb) + tuple(b.shape[nb:]))
    if not fa:
        batch = tuple(b.shape[:nb])
        a = m.broadcast_to(a, shape=batch + (1,) * (b.ndim - nb - a.ndim) + tuple(a.shape))
    if not fb:
        batch = tuple(a.shape[:nb])
        b = m.broadcast_to(b, shape=batch + (1,) * (a.ndim - nb - b.ndim) + tuple(b.shape))
    out = call(m, op, a, b)
    return m.reshape(out, shape=tuple(out.shape[:-1])) if nbb == 1 else out


def _reduced(m: Any, per_item: Any, nb: int, reduction: str) -> Any:
    """Each row's loss from its items' losses, as the reduction says."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if reduction == "none":
        return per_item
    axes = tuple(range(nb, per_item.ndim))
    return m.sum(per_item, axis=axes) if reduction == "sum" else m.mean(per_item, axis=axes)


def _elementwise_loss(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    reduction = params.get("reduction", "mean")
    per_item = BROADCAST.run(m, op, nb, args, flags, {**params, "reduction": "none"})
    return _reduced(m, per_item, nb, reduction)


def _class_loss(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
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
    return _reduced(m, m.reshape(per_item, shape=batch + item_x[:-1]), nb, reduction)


def _item(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    if int(np.prod(x.shape[nb:], dtype=np.int64)) != 1:
        call(m, op, x[(0,) * nb])
    return m.detach(m.reshape(x, shape=tuple(x.shape[:nb])))


def _len(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    return Unbatched(call(m, op, x[(0,) * nb]))


_RULES: dict[str, BatchRule] = {
    "neg": SCALING, "mul": SCALING, "div": SCALING, "lt": BROADCAST, "le": BROADCAST, "gt": BROADCAST, "ge": BROADCAST, "eq": BROADCAST, "ne": BROADCAST,
    "sign": BROADCAST, "floor": BROADCAST, "ceil": BROADCAST, "round": BROADCAST, "detach": BROADCAST, "floor_divide": BROADCAST,
    "matmul": BatchRule("own", MATMUL.run, MATMUL.text, diagonal=_product),
    "argmax": along_axis(none="flatten"), "argmin": along_axis(none="flatten"),
    "item": own(_item, "each row's one element"), "len": own(_len, "the length of an item's first axis, the same in every row"),
    "squeeze": along_axis(none="squeeze", sparse="view"), "unsqueeze": along_axis(new_axis=True, sparse="view"), "flip": along_axis(),
    "roll": along_axis(none="flatten-restore"), "tile": TILE, "repeat": along_axis(none="flatten"),
    "sort": along_axis(none="flatten"), "pad": PAD,
    "sum": along_axis(sparse="total"), "mean": along_axis(sparse="average"), "prod": along_axis(), "max": along_axis(), "min": along_axis(),
    "einsum": own(_einsum, "einsum of the items, the batch's axes named first"),
    "dot": _contraction(_dot_subscripts),
    "inner": _contraction(_inner_subscripts),
    "outer": own(_outer, "a column of each a times a row of each b"),
    "kron": own(_kron, "einsum of the items' blocks, the batch's axes named first"),
    "trace": own(_trace, "the sum of each item's diagonal"), "diag": own(_diag, "the diagonal of each item, read or written"),
    "triu": own(_triangle, "NumPy's stacked triangles"), "tril": own(_triangle, "NumPy's stacked triangles"),
    "det": LEADING, "slogdet": LEADING, "inv": LEADING,
    "solve": own(_solve, "NumPy's stacked solve, a vector b as a one-column matrix"),
    "norm": along_axis(), "logsumexp": along_axis(), "softmax": along_axis(), "log_softmax": along_axis(),
    "cross_entropy": own(_class_loss, "each row's items as one list of items, then each row's reduction"),
    "nll_loss": own(_class_loss, "each row's items as one list of items, then each row's reduction"),
    "mse": own(_elementwise_loss, "elementwise, then each row's reduction"),
    "binary_cross_entropy": own(_elementwise_loss, "elementwise, then each row's reduction"),
    "binary_cross_entropy_with_logits": own(_elementwise_loss, "elementwise, then each row's reduction"),
    "l1_loss": own(_elementwise_loss, "elementwise, then each row's reduction"),
    "huber": own(_elementwise_loss, "elementwise, then each row's reduction"),
    "cumsum": along_axis(none="flatten"), "cumprod": along_axis(none="flatten"), "logcumsumexp": along_axis(none="flatten"),
    "reshape": BatchRule("reshape", RESHAPE.run, RESHAPE.text, sparse="view", diagonal=_reshaped),
    "flatten": FLATTEN, "transpose": TRANSPOSE, "swapaxes": along_axis("axis1", "axis2"),
    "broadcast_to": BROADCAST_TO, "getitem": GETITEM, "unindex": UNINDEX,
    "concatenate": along_axis(none="flatten"), "stack": along_axis(new_axis=True), "split": along_axis(),
    "var": along_axis(), "std": along_axis(),
}
for _name, _rule in _RULES.items():
    REGISTRY[_name].batch = _rule
