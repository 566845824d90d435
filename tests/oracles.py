"""Independent oracles for every op, one entry per op: what PyTorch (float64) calls it.

tests/test_torch_differential.py walks the registry and compares every public op with its
entry here (value, first and second derivatives); an op with no PyTorch equivalent is
listed in NOT_IN_TORCH with the reason. Adding an op means adding ONE line to one of the
two tables: tests/test_oracle_tables.py fails until you do, with or without torch installed.

An entry's `fn` takes the torch module first, then the op's tensor inputs as torch
tensors, then the op's parameters under gradcalc's names (it translates `axis` to
`dim`, say). `variants` are extra parameter sets (keyword variants) tried beside the
op's own Check params; `make(rng)` gives (inputs, params) for an op whose Check does not
fit or that has none; `args` are the positional arguments of a constructor.

torch is imported by the tests, never here, so this module loads without it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Make = Callable[[np.random.Generator], tuple[list[np.ndarray], dict[str, Any]]]


@dataclass(frozen=True)
class TorchOracle:
    fn: Callable[..., Any]
    variants: tuple[dict[str, Any], ...] = ()
    make: Make | None = None
    args: tuple[Any, ...] | None = None
    extra_makes: tuple[Make, ...] = field(default=())


def _dim(axis: Any) -> Any:
    return list(axis) if isinstance(axis, tuple) else axis


def _reduction(name: str) -> Callable[..., Any]:
    """A torch reduction with gradcalc's axis=None (all axes) and keepdims spelling."""

    def fn(t: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        f = getattr(t, name)
        if axis is None:
            out = f(x)
            return out.reshape([1] * x.ndim) if keepdims else out
        if name == "prod":  # torch.prod takes one dim at a time
            axes = sorted((a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,))), reverse=True)
            for a in axes:
                x = t.prod(x, dim=a, keepdim=True)
            return x if keepdims else x.reshape([n for i, n in enumerate(x.shape) if i not in axes])
        return f(x, dim=_dim(axis), keepdim=keepdims)

    return fn


def _logsumexp(t: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    dims = list(range(x.ndim)) if axis is None else _dim(axis)
    if x.ndim == 0:
        return x.clone()
    return t.logsumexp(x, dim=dims, keepdim=keepdims)


def _cross_entropy(t: Any, logits: Any, target: Any, label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    classes = logits.shape[-1]
    flat = logits.reshape(-1, classes)
    flat_target = target.reshape(-1, classes) if target.shape == logits.shape else target.reshape(-1).long()
    out = t.nn.functional.cross_entropy(flat, flat_target, label_smoothing=label_smoothing, reduction=reduction)
    return out.reshape(logits.shape[:-1]) if reduction == "none" else out


def _mse(t: Any, a: Any, b: Any, reduction: str = "mean") -> Any:
    return t.nn.functional.mse_loss(*t.broadcast_tensors(a, b), reduction=reduction)


def _clip(t: Any, x: Any, *bounds: Any, low: Any = None, high: Any = None) -> Any:
    if bounds:
        low = bounds[0]
    if len(bounds) > 1:
        high = bounds[1]
    # torch.clamp takes two tensors or two numbers, not one of each.
    as_tensor = [b if b is None or t.is_tensor(b) else t.tensor(b, dtype=t.float64) for b in (low, high)]
    return t.clamp(x, min=as_tensor[0], max=as_tensor[1])


def _where(t: Any, cond: Any, a: Any, b: Any) -> Any:
    return t.where(cond != 0, a, b)


def _getitem(t: Any, x: Any, index: Any) -> Any:
    parts = index if isinstance(index, tuple) else (index,)
    return x[tuple(t.as_tensor(p) if isinstance(p, np.ndarray) else p for p in parts)]


def _transpose(t: Any, x: Any, axes: tuple[int, ...] = ()) -> Any:
    return x.permute(*(axes or reversed(range(x.ndim))))


def _split(t: Any, x: Any, sections: int = 2, axis: int = 0) -> Any:
    return t.chunk(x, int(sections), dim=axis)


def _round(t: Any, x: Any, decimals: int = 0) -> Any:
    return t.round(x, decimals=int(decimals))


def _arg(name: str) -> Callable[..., Any]:
    def fn(t: Any, x: Any, axis: Any = None) -> Any:
        return getattr(t, name)(x, dim=axis).double()

    return fn


def _where_make(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.integers(0, 2, (3, 4)).astype(float), rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4,))], {}


def _clip_keyword_bounds(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-2, 2, (3, 4))], {"low": -0.5, "high": 0.25}


def _clip_one_bound(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    """One 2-D tensor bound (low) and a keyword high."""
    return [rng.uniform(-2, 2, (3, 4)), rng.uniform(-1.0, -0.2, (3, 4))], {"high": 0.5}


def _unary_pair(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4,))], {}


def _rounding_input(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    # Away from .5 ties (torch and NumPy both round halves to even, but keep it clean).
    return [np.round(rng.uniform(-3, 3, (3, 4)), 2) + 0.003], {}


def _cross_entropy_make(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-3, 3, (4, 5)), rng.integers(0, 5, (4,)).astype(float)], {}


def _cross_entropy_probs(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    p = rng.uniform(0.1, 1.0, (4, 5))
    return [rng.uniform(-3, 3, (4, 5)), p / p.sum(-1, keepdims=True)], {}


def _cross_entropy_probs_smoothed(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    inputs, _ = _cross_entropy_probs(rng)
    return inputs, {"label_smoothing": 0.2, "reduction": str(rng.choice(["mean", "sum", "none"]))}


# One line per op: gradcalc name -> how torch computes it.
TORCH: dict[str, TorchOracle] = {
    # arithmetic
    "add": TorchOracle(lambda t, a, b: a + b),
    "sub": TorchOracle(lambda t, a, b: a - b),
    "mul": TorchOracle(lambda t, a, b: a * b),
    "div": TorchOracle(lambda t, a, b: a / b),
    "neg": TorchOracle(lambda t, x: -x),
    "pow": TorchOracle(lambda t, a, b: a**b),
    "matmul": TorchOracle(lambda t, a, b: t.matmul(a, b)),
    # no gradient
    "lt": TorchOracle(lambda t, a, b: (a < b).double(), make=_unary_pair),
    "le": TorchOracle(lambda t, a, b: (a <= b).double(), make=_unary_pair),
    "gt": TorchOracle(lambda t, a, b: (a > b).double(), make=_unary_pair),
    "ge": TorchOracle(lambda t, a, b: (a >= b).double(), make=_unary_pair),
    "eq": TorchOracle(lambda t, a, b: (a == b).double(), make=_unary_pair),
    "ne": TorchOracle(lambda t, a, b: (a != b).double(), make=_unary_pair),
    "sign": TorchOracle(lambda t, x: t.sign(x), make=_rounding_input),
    "floor": TorchOracle(lambda t, x: t.floor(x), make=_rounding_input),
    "ceil": TorchOracle(lambda t, x: t.ceil(x), make=_rounding_input),
    "round": TorchOracle(_round, make=_rounding_input, variants=({"decimals": 1},)),
    "argmax": TorchOracle(_arg("argmax"), make=_rounding_input, variants=({"axis": 0}, {"axis": 1})),
    "argmin": TorchOracle(_arg("argmin"), make=_rounding_input, variants=({"axis": 0}, {"axis": -1})),
    "detach": TorchOracle(lambda t, x: x.detach(), make=_rounding_input),
    "item": TorchOracle(lambda t, x: x.detach().reshape(()), make=lambda rng: ([rng.uniform(-2, 2, (1, 1))], {})),
    "len": TorchOracle(lambda t, x: t.tensor(float(len(x)), dtype=t.float64), make=_rounding_input),
    # integer arithmetic (Python's // and %, torch's floor_divide and remainder)
    "floor_divide": TorchOracle(lambda t, a, b: t.floor_divide(a, b), make=_unary_pair),
    "remainder": TorchOracle(lambda t, a, b: t.remainder(a, b)),
    # constructors
    "zeros": TorchOracle(lambda t, *shape: t.zeros(*shape, dtype=t.float64), args=(2, 3)),
    "ones": TorchOracle(lambda t, *shape: t.ones(*shape, dtype=t.float64), args=(3,)),
    "full": TorchOracle(lambda t, shape, v: t.full(shape, v, dtype=t.float64), args=((2, 3), 7.0)),
    "eye": TorchOracle(lambda t, n, m=None: t.eye(n, m if m is not None else n, dtype=t.float64), args=(3, 4)),
    "arange": TorchOracle(lambda t, *a: t.arange(*a, dtype=t.float64), args=(1, 2, 0.25)),
    "linspace": TorchOracle(lambda t, a, b, n: t.linspace(a, b, n, dtype=t.float64), args=(0, 1, 7)),
    # elementwise
    "exp": TorchOracle(lambda t, x: t.exp(x)),
    "log": TorchOracle(lambda t, x: t.log(x)),
    "log1p": TorchOracle(lambda t, x: t.log1p(x)),
    "sqrt": TorchOracle(lambda t, x: t.sqrt(x)),
    "sin": TorchOracle(lambda t, x: t.sin(x)),
    "cos": TorchOracle(lambda t, x: t.cos(x)),
    "tan": TorchOracle(lambda t, x: t.tan(x)),
    "tanh": TorchOracle(lambda t, x: t.tanh(x)),
    "sigmoid": TorchOracle(lambda t, x: t.sigmoid(x)),
    # torch returns x itself above `threshold`; at 30 that is exact to 1e-13.
    "softplus": TorchOracle(lambda t, x: t.nn.functional.softplus(x, threshold=30.0)),
    "relu": TorchOracle(lambda t, x: t.relu(x)),
    "abs": TorchOracle(lambda t, x: t.abs(x)),
    "maximum": TorchOracle(lambda t, a, b: t.maximum(a, b)),
    "minimum": TorchOracle(lambda t, a, b: t.minimum(a, b)),
    "clip": TorchOracle(_clip, extra_makes=(_clip_keyword_bounds, _clip_one_bound)),
    "where": TorchOracle(_where, make=_where_make),
    # reductions
    "sum": TorchOracle(_reduction("sum"), variants=({}, {"axis": -1, "keepdims": True}, {"axis": (0, 1)})),
    "mean": TorchOracle(_reduction("mean"), variants=({}, {"axis": 0}, {"axis": (0, 1), "keepdims": True})),
    "prod": TorchOracle(_reduction("prod"), variants=({}, {"axis": 0}, {"axis": (0, 1), "keepdims": True})),
    "max": TorchOracle(_reduction("amax"), variants=({}, {"axis": 0, "keepdims": True}, {"axis": (0, 1)})),
    "min": TorchOracle(_reduction("amin"), variants=({}, {"axis": 1}, {"axis": (0, 1), "keepdims": True})),
    # softmax and losses
    "logsumexp": TorchOracle(_logsumexp, variants=({}, {"axis": 0, "keepdims": True})),
    "softmax": TorchOracle(lambda t, x, axis=-1: t.softmax(x, dim=axis), variants=({"axis": 0},)),
    "log_softmax": TorchOracle(lambda t, x, axis=-1: t.log_softmax(x, dim=axis), variants=({"axis": 0},)),
    "cross_entropy": TorchOracle(
        _cross_entropy, make=_cross_entropy_make, extra_makes=(_cross_entropy_probs, _cross_entropy_probs_smoothed),
        variants=({"label_smoothing": 0.1}, {"reduction": "sum"}, {"reduction": "none", "label_smoothing": 0.3}),
    ),
    "mse": TorchOracle(_mse, variants=({"reduction": "sum"}, {"reduction": "none"})),
    # shape
    "reshape": TorchOracle(lambda t, x, shape: x.reshape(shape)),
    "flatten": TorchOracle(lambda t, x: x.reshape(-1)),
    "transpose": TorchOracle(_transpose, variants=({"axes": (1, 0)},)),
    "swapaxes": TorchOracle(lambda t, x, axis1, axis2: t.swapaxes(x, axis1, axis2)),
    "broadcast_to": TorchOracle(lambda t, x, shape: x.broadcast_to(shape)),
    "getitem": TorchOracle(_getitem, variants=({"index": (np.array([0, 2, 0]),)}, {"index": (Ellipsis, 1)})),
    "concatenate": TorchOracle(lambda t, *xs, axis=0: t.cat(xs, dim=axis)),
    "stack": TorchOracle(lambda t, *xs, axis=0: t.stack(xs, dim=axis)),
    "split": TorchOracle(_split),
}

# ---- the functions added beside the first set ---------------------------------------------------


def _scan(name: str) -> Callable[..., Any]:
    """A torch scan with NumPy's axis=None (the flattened tensor)."""

    def fn(t: Any, x: Any, axis: Any = None) -> Any:
        return getattr(t, name)(x.reshape(-1), 0) if axis is None else getattr(t, name)(x, axis)

    return fn


def _moment(name: str) -> Callable[..., Any]:
    def fn(t: Any, x: Any, axis: Any = None, keepdims: bool = False, ddof: float = 0) -> Any:
        return getattr(t, name)(x, dim=_dim(axis), keepdim=keepdims, correction=ddof)

    return fn


def _norm(t: Any, x: Any, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Any:
    order = 2 if ord == "fro" else float(ord)
    return t.linalg.vector_norm(x, ord=order, dim=_dim(axis), keepdim=keepdims)


def _pad(t: Any, x: Any, widths: Any, value: float = 0.0) -> Any:
    from gradcalc.autodiff.ops.layout import pad_widths

    # torch lists (before, after) pairs from the last axis backwards.
    pairs = pad_widths(widths, x.ndim)
    return t.nn.functional.pad(x, [w for pair in reversed(pairs) for w in pair], value=value)


def _loss(name: str, classes: bool = False) -> Callable[..., Any]:
    def fn(t: Any, pred: Any, target: Any, reduction: str = "mean", **params: Any) -> Any:
        return getattr(t.nn.functional, name)(pred, target.long() if classes else target, reduction=reduction, **params)

    return fn


def _squashed(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    """A matrix in (-2, 2) for the keyword variants of one-input ops."""
    return [rng.uniform(-2, 2, (3, 4))], {}


TORCH.update({
    # elementwise
    "log2": TorchOracle(lambda t, x: t.log2(x)),
    "log10": TorchOracle(lambda t, x: t.log10(x)),
    "exp2": TorchOracle(lambda t, x: t.exp2(x)),
    "expm1": TorchOracle(lambda t, x: t.expm1(x)),
    "sinh": TorchOracle(lambda t, x: t.sinh(x)),
    "cosh": TorchOracle(lambda t, x: t.cosh(x)),
    "asinh": TorchOracle(lambda t, x: t.asinh(x)),
    "acosh": TorchOracle(lambda t, x: t.acosh(x)),
    "atanh": TorchOracle(lambda t, x: t.atanh(x)),
    "asin": TorchOracle(lambda t, x: t.asin(x)),
    "acos": TorchOracle(lambda t, x: t.acos(x)),
    "atan": TorchOracle(lambda t, x: t.atan(x)),
    "atan2": TorchOracle(lambda t, y, x: t.atan2(y, x)),
    "hypot": TorchOracle(lambda t, a, b: t.hypot(a, b)),
    "erf": TorchOracle(lambda t, x: t.erf(x)),
    "erfc": TorchOracle(lambda t, x: t.erfc(x)),
    "square": TorchOracle(lambda t, x: t.square(x)),
    "cbrt": TorchOracle(lambda t, x: t.sign(x) * t.abs(x) ** (1.0 / 3.0)),  # torch has no cbrt
    "reciprocal": TorchOracle(lambda t, x: t.reciprocal(x)),
    "gelu": TorchOracle(lambda t, x, approximate="none": t.nn.functional.gelu(x, approximate=approximate)),
    "silu": TorchOracle(lambda t, x: t.nn.functional.silu(x)),
    "softsign": TorchOracle(lambda t, x: t.nn.functional.softsign(x)),
    "logsigmoid": TorchOracle(lambda t, x: t.nn.functional.logsigmoid(x)),
    "leaky_relu": TorchOracle(
        lambda t, x, slope=0.01: t.nn.functional.leaky_relu(x, slope), variants=({"slope": 0.2},), make=_squashed,
    ),
    "elu": TorchOracle(lambda t, x, alpha=1.0: t.nn.functional.elu(x, alpha), variants=({"alpha": 1.5},), make=_squashed),
    # reductions and scans
    "var": TorchOracle(_moment("var"), variants=({}, {"axis": 0, "keepdims": True}, {"axis": (0, 1), "ddof": 0})),
    "std": TorchOracle(_moment("std"), variants=({"ddof": 1}, {"axis": 1, "keepdims": True})),
    "norm": TorchOracle(_norm, variants=({"ord": 1, "axis": 0}, {"ord": float("inf"), "axis": -1}, {"ord": "fro", "keepdims": True})),
    "cumsum": TorchOracle(_scan("cumsum"), variants=({"axis": 0}, {"axis": None})),
    "cumprod": TorchOracle(_scan("cumprod"), variants=({"axis": -1}, {"axis": None})),
    "logcumsumexp": TorchOracle(_scan("logcumsumexp"), variants=({"axis": 0}, {"axis": -1})),
    # linear algebra
    "dot": TorchOracle(lambda t, a, b: t.dot(a, b)),
    "inner": TorchOracle(lambda t, a, b: t.inner(a, b)),
    "outer": TorchOracle(lambda t, a, b: t.outer(a, b)),
    "kron": TorchOracle(lambda t, a, b: t.kron(a, b)),
    "einsum": TorchOracle(lambda t, *xs, subscripts: t.einsum(subscripts, *xs)),
    "trace": TorchOracle(lambda t, x: t.trace(x)),
    "diag": TorchOracle(lambda t, x, k=0: t.diag(x, k), variants=({"k": -1}, {"k": 0})),
    "triu": TorchOracle(lambda t, x, k=0: t.triu(x, k), variants=({"k": 1},)),
    "tril": TorchOracle(lambda t, x, k=0: t.tril(x, k), variants=({"k": 0},)),
    "det": TorchOracle(lambda t, a: t.linalg.det(a)),
    "slogdet": TorchOracle(lambda t, a: tuple(t.linalg.slogdet(a))),
    "inv": TorchOracle(lambda t, a: t.linalg.inv(a)),
    "solve": TorchOracle(lambda t, a, b: t.linalg.solve(a, b)),
    # shape
    "squeeze": TorchOracle(lambda t, x, axis=None: t.squeeze(x) if axis is None else t.squeeze(x, axis)),
    "unsqueeze": TorchOracle(lambda t, x, axis: t.unsqueeze(x, axis), variants=({"axis": 0}, {"axis": -1})),
    "flip": TorchOracle(lambda t, x, axis=None: t.flip(x, tuple(range(x.ndim)) if axis is None else (axis,)), variants=({"axis": None},)),
    "roll": TorchOracle(lambda t, x, shift, axis=None: t.roll(x, shift, axis), variants=({"shift": -1, "axis": 0},)),
    "tile": TorchOracle(lambda t, x, reps: t.tile(x, reps), variants=({"reps": (3,)},)),
    "repeat": TorchOracle(lambda t, x, repeats, axis=None: t.repeat_interleave(x, repeats, axis), variants=({"repeats": 3},)),
    "sort": TorchOracle(
        lambda t, x, axis=-1, descending=False: t.sort(x, dim=axis, descending=descending, stable=True).values,
        variants=({"axis": 0, "descending": True},),
    ),
    "pad": TorchOracle(_pad, variants=({"widths": 2}, {"widths": (0, 3), "value": -1.0})),
    # losses
    "binary_cross_entropy": TorchOracle(_loss("binary_cross_entropy")),
    "binary_cross_entropy_with_logits": TorchOracle(_loss("binary_cross_entropy_with_logits")),
    "nll_loss": TorchOracle(_loss("nll_loss", classes=True)),
    "l1_loss": TorchOracle(_loss("l1_loss")),
    "huber": TorchOracle(_loss("huber_loss")),
})


# Public ops with no PyTorch float64 counterpart, and why; checked elsewhere.
NOT_IN_TORCH: dict[str, str] = {
    "rand": "random: NumPy's generator, not torch's (tests/test_language.py checks seeds)",
    "randn": "random: NumPy's generator, not torch's (tests/test_language.py checks seeds)",
}


nan, inf = float("nan"), float("inf")

# Edge points (zeros, ties, kinks, inf, nan, empty) where gradcalc gives what PyTorch gives,
# value, gradients and second derivatives: (op name, inputs, params[, order]); order 1
# where only the first derivatives agree. Where gradcalc differs from PyTorch on purpose,
# the op's defop says so in an Edge (tests/test_edges.py checks that the difference is real).
EDGE_POINTS: list[tuple[Any, ...]] = [
    ("relu", [[-1.0, 0.0, 2.0, -inf, inf]], {}),
    ("abs", [[0.0, -0.0, -inf, inf, -2.0]], {}),
    ("maximum", [[1.0, 2.0, nan, 1.0, nan], [1.0, 3.0, 1.0, nan, nan]], {}),
    ("minimum", [[1.0, 2.0, nan, 1.0, nan], [1.0, 3.0, 1.0, nan, nan]], {}),
    ("max", [[1.0, 1.0, 0.0]], {}),
    ("min", [[0.0, 1.0, 0.0]], {}),
    ("max", [[nan, 1.0]], {}, 1),  # (its second derivative is nan, torch's 0: max's Edge "with a nan")
    ("pow", [[0.0, 0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 2.0, -1.0], [0.0, -1.0, -1.0, 1.0, 2.0, 0.5, -0.5, 0.0, 2.0]], {}, 1),
    ("pow", [[0.0, 2.0], [-1.0, 1.0]], {}),
    ("prod", [[0.0, 2.0, 3.0]], {}),
    ("prod", [[0.0, 0.0, 3.0]], {}),
    ("prod", [[[0.0, 2.0], [3.0, 0.0], [4.0, 5.0]]], {"axis": 0}),
    ("sqrt", [[0.0, 1e-300, 1e300]], {}),
    ("log", [[0.0, 1e-300, -1.0]], {}),
    ("exp", [[1000.0, -1000.0, 700.0]], {}),
    ("sigmoid", [[-1000.0, -40.0, 1000.0, nan]], {}),
    ("softplus", [[-1000.0, -40.0, 1000.0]], {}),
    ("logsumexp", [[-inf, 1.0, 2.0]], {}),
    ("logsumexp", [[-inf, -inf]], {}),
    ("logsumexp", [[1000.0, 1000.0]], {}),
    ("softmax", [[-inf, 1.0, 2.0]], {}),
    ("log_softmax", [[-inf, 1.0, 2.0]], {}),
    ("cross_entropy", [[[-inf, 1.0, 2.0]], [1.0]], {}),
    ("cross_entropy", [[[1e308, -1e308]], [0.0]], {}),
    ("cross_entropy", [[[nan, 1.0]], [0.0]], {}),
    ("clip", [[-1.0, 0.5, 2.0], [-0.5, 0.0, 0.0], [1.0, 1.0, 1.0]], {}),
    ("clip", [[-1.0, 0.0, 1.0], [-1.0, 0.0, 0.5], [1.0, 1.0, 1.0]], {}),  # x on a bound keeps the gradient
    ("clip", [[0.0], [1.0], [-1.0]], {}),  # low > high: the output is high, and so is the gradient
    ("mean", [np.zeros(0)], {}),
    ("sum", [np.zeros(0)], {}),
    ("where", [[1.0, 0.0], [1.0, 2.0], [3.0, 4.0]], {}),
    ("pow", [[nan, 0.0, -2.0], [0.0, 0.0, 0.0]], {}, 1),  # a**0 passes exactly 0 back, also at nan
    ("div", [[1e-300, 0.0, 1e308], [1e-300, 0.0, 1e308]], {}),
    ("sqrt", [[-0.0, -inf]], {}, 1),
    ("prod", [[1e200, 1e200, 1e-300]], {}),
    ("sign", [[-2.0, 0.0, 3.0]], {}),
    # the functions added beside the first set
    ("logsigmoid", [[-1000.0, -40.0, 0.0, 40.0, 1000.0]], {}),
    ("binary_cross_entropy_with_logits", [[1000.0, -1000.0, 1000.0, -1000.0], [1.0, 0.0, 0.0, 1.0]], {"reduction": "none"}),
    ("silu", [[-1000.0, -40.0, 0.0, 40.0]], {}),
    ("gelu", [[-40.0, -10.0, 0.0, 10.0]], {}),
    ("leaky_relu", [[-1.0, 0.0, 1.0]], {}),
    ("elu", [[-1.0, 0.0, 1.0, 1000.0]], {}, 1),
    ("softsign", [[-1.0, 0.0, 1.0]], {}),
    ("norm", [[0.0, 0.0, 0.0]], {"ord": 2}, 1),
    ("norm", [[0.0, 0.0, 0.0]], {"ord": 1}),
    ("sort", [[1.0, 1.0, 0.0]], {}),
    ("cumprod", [[0.0, 2.0, 3.0, 0.0, 5.0]], {}),
    ("std", [[2.0, 2.0]], {}, 1),
    ("var", [[1.0]], {"ddof": 1}, 1),
    ("logcumsumexp", [[-inf, 0.0, 1000.0]], {}),
    ("logcumsumexp", [[1000.0, -1000.0, 1000.0]], {}),
    ("atan2", [[0.0, 0.0, 1.0], [1.0, -1.0, 0.0]], {}),
    ("hypot", [[0.0], [0.0]], {}),
    ("erf", [[inf, -inf, 0.0, 30.0]], {}, 1),
    ("erfc", [[inf, -inf, 30.0, -30.0]], {}, 1),
    ("expm1", [[-1000.0, 1000.0, 1e-20]], {}),
    ("norm", [[1.0, -1.0, 0.5]], {"ord": inf}),
    ("sort", [[2.0, 1.0, 2.0]], {"descending": True}),
    ("asin", [[1.0, -1.0]], {}, 1),
    ("atanh", [[1.0, -1.0]], {}, 1),
    ("reciprocal", [[0.0, -0.0]], {}),
    ("log2", [[0.0, -1.0, inf]], {}),
    ("gelu", [[nan, inf, -inf]], {}),
    ("silu", [[inf, -inf]], {}),
    ("logsigmoid", [[inf, -inf]], {}),
    ("binary_cross_entropy_with_logits", [[inf, -inf], [1.0, 0.0]], {"reduction": "none"}),
    ("det", [[[0.0, 0.0], [0.0, 0.0]]], {}, 1),
    ("cumprod", [[[1.0, 0.0, 2.0], [3.0, 4.0, 0.0]]], {"axis": 1}),
    ("hypot", [[3.0, 0.0, 1e300], [4.0, 2.0, 1e300]], {}),
]

