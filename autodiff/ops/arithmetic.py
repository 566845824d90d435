"""The arithmetic operators: + - * / unary - ** and @."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..batching import MATMUL, SCALING, Batched
from ..forward import DIAGONAL, LINEAR, MULTILINEAR
from ..guards import guarded, masked, scaled  # noqa: F401  (the ops' VJPs take them from here too)
from ..limits import check_size, matmul_shape
from ..registry import ARRAY_MATH, BINARY_SHAPES, Check, Edge, Reference, Torch, defop
from ..tensor import all_finite

ARITH = "arithmetic"



def is_real(a: Any) -> bool:
    """Whether `a` is a float64 array, or the NumPy scalar that stands for a 0-d one: the
    engine's real values, for which VJPs take their fast paths (docs/performance.md, the
    ledger); complex ones, and Tensors, take the general one."""
    return (type(a) is np.ndarray and a.dtype is _FLOAT) or type(a) is np.float64


_FLOAT = np.dtype(np.float64)


def near_zero(x: Any, tol: float = 0.0, **params: Any) -> bool:
    """Some element is within tol of 0: the kink of relu, abs and their kin."""
    return bool(np.any(np.abs(x) <= tol))


ELEM = "elementwise"


def elementwise(
    name: str, forward: Any, vjp: Any, doc: str, *, aliases: tuple[str, ...] = (), complex_safe: bool = True,
    method: bool = True, low: float = -2.0, high: float = 2.0, kink: Any = None, kink_gap: float = 0.0,
    check: Check | None = None, rule: str | None = None, edges: tuple[Edge, ...] = (), torch: Torch | None = None,
    reference: Reference | None = None,
) -> Any:
    """Register a one-input elementwise op (a method too, as in PyTorch, unless method=False).
    `rule` is the derivative as text for `eval --steps` where the VJP's own text is not it."""
    return defop(
        name, forward, (vjp,), doc=doc, category=ELEM, complex_safe=complex_safe, method=method,
        aliases=aliases, kink=kink, check=check or Check(low=low, high=high, kink_gap=kink_gap), rule=rule, jvp=DIAGONAL,
        edges=edges, torch=torch, reference=reference,
    )


# Products, quotients and powers call NumPy's ufuncs rather than Python's operators: for
# two NumPy scalars an operator is NumPy's scalar arithmetic, which rounds a complex
# product without the fused multiply-adds of its array loops (and whose pow may differ
# from theirs), so a number (a replay in a check carries numbers as scalars) would not
# always give what the same number in an array gives. Sums and differences are exact.
def _mul(a: Any, b: Any) -> Any:
    return np.multiply(a, b)


def _div(a: Any, b: Any) -> Any:
    return np.divide(a, b)


_MINUS_INF = np.array(-np.inf)


def _pow(a: Any, b: Any) -> Any:
    out = np.asarray(a) ** b  # (a as an array, as above: `**` of an array, NumPy's shortcuts for x**2, x**0.5 included)
    # A negative base to a fractional power is nan, -inf included: C99's pow, which NumPy
    # follows for array exponents, gives (-inf) ** 0.5 = inf and (-inf) ** -0.5 = 0.
    if is_real(a):
        # Screened without np.any, which cost a power of numbers ten times the power
        # itself: a number is compared as it is, and an array of finite entries holds no
        # infinity.
        if a.ndim == 0:
            if a != _MINUS_INF:
                return out
        elif all_finite(a):
            return out
    elif isinstance(a, (np.ndarray, np.complexfloating)) and a.dtype.kind == "c":  # (complex step)
        return out
    if np.isrealobj(a) and np.isrealobj(b) and np.any(np.asarray(a) == -np.inf):
        fractional = np.isfinite(b) & (b != np.round(b))
        out = np.where((np.asarray(a) == -np.inf) & fractional, np.nan, out)
    return out


add = defop(
    "add", lambda a, b: a + b, (lambda m, g, ans, a, b: g, lambda m, g, ans, a, b: g),
    doc="a + b, elementwise with broadcasting", category=ARITH, n_in=2, complex_safe=True, method=True,
    operators=("__add__", "__radd__"), check=Check(shapes=BINARY_SHAPES), jvp=DIAGONAL,
    torch=Torch("torch.add"),
)
sub = defop(
    "sub", lambda a, b: a - b, (lambda m, g, ans, a, b: g, lambda m, g, ans, a, b: -g),
    doc="a - b, elementwise with broadcasting", category=ARITH, n_in=2, complex_safe=True, method=True,
    operators=("__sub__", "__rsub__"), check=Check(shapes=BINARY_SHAPES), jvp=DIAGONAL,
    torch=Torch("torch.sub"),
)
mul = defop(
    "mul", _mul, (lambda m, g, ans, a, b: scaled(m, g, b), lambda m, g, ans, a, b: scaled(m, g, a)),
    doc="a * b, elementwise with broadcasting", category=ARITH, n_in=2, complex_safe=True, method=True,
    operators=("__mul__", "__rmul__"), check=Check(shapes=BINARY_SHAPES), jvp=DIAGONAL,
    batch=SCALING,
    torch=Torch("torch.mul"),
)
div = defop(
    "div", _div, (lambda m, g, ans, a, b: masked(m, g, g / b), lambda m, g, ans, a, b: masked(m, g, -g * ans / b)),
    doc="a / b, elementwise with broadcasting", category=ARITH, n_in=2, complex_safe=True, method=True,
    operators=("__truediv__", "__rtruediv__"), check=Check(shapes=BINARY_SHAPES, low=0.5, high=2.0), jvp=DIAGONAL,
    edges=(Edge("by 0", [1.0, 0.0], math.inf, (math.inf, -math.inf), order=1, note="as IEEE division: no error"),
           Edge("0 / 0", [0.0, 0.0], math.nan, (math.inf, math.nan), order=1)),
    batch=SCALING,
    torch=Torch("torch.div", agrees_at=(([[1e-300, 0.0, 1e308], [1e-300, 0.0, 1e308]], {}),)),
)
neg = defop(
    "neg", lambda x: -x, (lambda m, g, ans, x: -g,),
    doc="-x", category=ARITH, complex_safe=True, method=True, operators=("__neg__",), check=Check(), jvp=LINEAR,
    batch=SCALING,
    torch=Torch("torch.neg"),
)


WHOLE_POWERS = [True]  # the path for a whole power below (tests turn it off to compare)


def _pow_dbase(m: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    # d(a**b)/da = b * a**(b - 1). Where a == b == 0 that is 0 * 0**-1 = nan, while the
    # derivative of a**0 is 0 (PyTorch's convention too); writing it b * a**1 there gives 0
    # and keeps every higher derivative of a polynomial finite at 0:
    # x**2 -> 2 x**1 -> 2 x**0 -> 0 * x**1 -> 0.
    if (WHOLE_POWERS[0] and m is ARRAY_MATH and type(b) is np.ndarray and b.ndim == 0 and b.dtype == np.float64
            and type(a) is np.ndarray and a.dtype == np.float64):
        k = float(b)
        if k >= 1.0 and k.is_integer():  # a whole power of a real base (the squares of an L2 term): none of the cases below can arise
            return masked(m, g, g * b * (a if k == 2.0 else a ** (k - 1.0)))
    raw_a, raw_b = m.raw(a), m.raw(b)
    zero_zero = (raw_a == 0) & (raw_b == 0)
    exponent = b - 1 if not zero_zero.any() else m.where(zero_zero, 1.0, b - 1)
    power = a**exponent
    # A negative base with a fractional exponent has no derivative (NumPy's (-inf) ** -0.5
    # is 0, which would say 0). On a graph the power is this op itself, whose forward
    # already says nan there; a nan written in as a constant would differentiate to 0, so
    # only a plain pass, whose `**` is NumPy's, needs it.
    if m is ARRAY_MATH and np.isrealobj(raw_a) and np.isrealobj(raw_b):
        no_real = (raw_a < 0) & np.isfinite(raw_b) & (raw_b != np.round(raw_b))
        power = m.where(no_real, np.nan, power) if no_real.any() else power
    # (g * b) first, as the scalar engine does: b * a**(b-1) alone overflows for a near
    # the top of the range (2 * 1e308) where the whole product is finite.
    out = masked(m, g, g * b * power)
    # a**0 is the constant 1, so it passes exactly 0 back, also where g * 0 * a**-1 is nan:
    # at a = nan, or g = inf (x**0 / x at 0). PyTorch and the scalar engine do the same.
    lost = (raw_b == 0) & np.isnan(m.raw(out))
    if lost.any():
        out = m.where(m.mul(raw_b == 0, m.ne(out, out)), 0.0, out) if type(out) is Batched else m.where(lost, 0.0, out)
    return out


# Constants the VJPs combine with: a 0-d array (NumPy combines arrays with it faster than
# with a Python number, to the same bits) and the NumPy scalar 0 (immutable: nothing can
# write into a result that is it).
ONE = np.array(1.0)
ZERO_NUMBER = np.float64(0.0)


def _pow_dexponent(m: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    # d(a**b)/db = a**b * log(a). At a == 0 with b >= 0 the limit is 0 (log is replaced by
    # 0 there, as PyTorch does); with b < 0 it is inf * -inf. For a < 0 the real power has
    # no derivative in b and log gives nan to say so. Only called when b requires grad.
    flat = (m.raw(a) == 0) & (np.real(m.raw(b)) >= 0)
    log_a = m.log(m.where(flat, 1.0, a)) if flat.any() else m.log(a)
    return scaled(m, g, ans * log_a)


pow_ = defop(
    "pow", _pow, (_pow_dbase, _pow_dexponent),
    doc="a ** b (also a ^ b); the exponent may be a tensor", category=ARITH, n_in=2, complex_safe=True, method=True,
    operators=("__pow__", "__rpow__"), check=Check(shapes=BINARY_SHAPES, low=0.5, high=2.0), jvp=DIAGONAL,
    # The VJPs special-case a == 0 so every order stays finite; this is the rule they apply.
    rule="a: g * b * a ** (b - 1);  b: g * ans * log(a)",
    edges=(
        Edge("0 ** 0", [0.0, 0.0], 1.0, (0.0, 0.0), order=1, note="x ** 0 is 1 everywhere, 0 included"),
        Edge("nan ** 0", [math.nan, 0.0], 1.0, (0.0, math.nan), order=1, note="a constant 1 passes nothing back to a"),
        Edge("0 ** b, b < 0", [[0.0, 0.0], [-1.0, -0.5]], [math.inf, math.inf], ([-math.inf, -math.inf], [-math.inf, -math.inf]), order=1),
        Edge("0 ** b, b > 0", [[0.0, 0.0], [2.0, 0.5]], [0.0, 0.0], ([0.0, math.inf], [0.0, 0.0]), order=1),
        Edge("(-1) ** b", [[-1.0, -1.0, -1.0], [0.5, 2.0, 3.0]], [math.nan, 1.0, -1.0], ([math.nan, -2.0, 3.0], [math.nan] * 3),
             order=1, note="as NumPy: nan for a fractional b; no real log(a) for the exponent"),
        Edge("(-inf) ** b, b fractional", [-math.inf, 1.5], math.nan, (math.nan, math.nan), order=1,
             torch="inf (C99's pow; x ** 0.5 is nan there)", note="no real power"),
        Edge("x ** 2 at 0, second order", [0.0, 2.0], 0.0, (0.0, 0.0), second=(2.0, 0.0),
             torch="second derivative nan", note="every order stays finite at a zero base"),
        Edge("mixed second derivative at b = 0", [2.0, 0.0], 1.0, (0.0, math.log(2.0)), second=(0.5, 0.5 + math.log(2.0) ** 2),
             torch="d2/da db = 0 (d/da is a constant 0 at b = 0)", note="d2/da db = 1/a"),
    ),
    torch=Torch(
        "torch.pow",
        agrees_at=(
            ([[0.0, 0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 2.0, -1.0], [0.0, -1.0, -1.0, 1.0, 2.0, 0.5, -0.5, 0.0, 2.0]], {}, 1),
            ([[0.0, 2.0], [-1.0, 1.0]], {}),
            ([[math.nan, 0.0, -2.0], [0.0, 0.0, 0.0]], {}, 1),  # a**0 passes exactly 0 back, also at nan
        ),
    ),
)


def _swap_last(m: Any, x: Any) -> Any:
    if m is ARRAY_MATH and x.ndim == 2:
        return x.T  # the view np.transpose gives, without the trip through the op
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return m.transpose(x, axes=axes)


def _matmul_operands(m: Any, g: Any, a: Any, b: Any) -> tuple[Any, Any, Any]:
    """Lift 1-d operands to matrices (a row, b a column) and g to match, as NumPy does."""
    if b.ndim == 1:
        g = m.reshape(g, shape=g.shape + (1,))
        b = m.reshape(b, shape=(-1, 1))
    if a.ndim == 1:
        g = m.reshape(g, shape=g.shape[:-1] + (1,) + g.shape[-1:])
        a = m.reshape(a, shape=(1, -1))
    return g, a, b


def _matrix_product(m: Any, x: Any, y: Any) -> Any:
    """m.matmul(x, y); for two matrices on a plain backward pass, the same check of the
    element cap and the same NumPy product, without the trip through the op."""
    if m is ARRAY_MATH and x.ndim == 2 and y.ndim == 2:
        check_size((x.shape[0], y.shape[1]), "matmul")
        return x @ y
    return m.matmul(x, y)


def _matmul_da(m: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    if m is ARRAY_MATH and g.ndim == 2 and b.ndim == 2:
        # Two matrices on a plain pass: what the lines below do (no lift, b.T, the same
        # check and product), without their three calls, which cost more than an 8x8 product.
        check_size((g.shape[0], b.shape[0]), "matmul")
        return g @ b.T
    if a.ndim == 1 and b.ndim == 2:  # a vector times a matrix: g @ b.T, a vector times a matrix too
        return _matrix_product(m, g, _swap_last(m, b))
    g2, _, b2 = _matmul_operands(m, g, a, b)
    # Not a bare @: on a plain backward pass `@` would be NumPy's, skipping the
    # element cap, and the (..., n, k) stack can be far larger than a, b or the output.
    da = _matrix_product(m, g2, _swap_last(m, b2))
    # A 1-d `a` came back as a (..., 1, k) stack; un-broadcasting sums it to (k,).
    return da


def _matmul_db(m: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    if m is ARRAY_MATH and g.ndim == 2 and a.ndim == 2:  # as in _matmul_da
        check_size((a.shape[1], g.shape[1]), "matmul")
        return a.T @ g
    if a.ndim == 2 and b.ndim == 1:  # a matrix times a vector: a.T @ g, without lifting g and b to columns
        return _matrix_product(m, _swap_last(m, a), g)
    g2, a2, _ = _matmul_operands(m, g, a, b)
    db = _matrix_product(m, _swap_last(m, a2), g2)
    if b.ndim == 1:  # drop the column axis the lift added
        db = m.reshape(db, shape=db.shape[:-1])
    return db


matmul = defop(
    "matmul", lambda a, b: a @ b, (_matmul_da, _matmul_db),
    doc="matrix product a @ b (1-d operands act as vectors; leading axes broadcast)", category=ARITH,
    n_in=2, complex_safe=True, method=True, operators=("__matmul__", "__rmatmul__"), jvp=MULTILINEAR,
    out_shape=lambda a, b: matmul_shape(a.shape, b.shape),
    # The VJPs lift 1-d operands to matrices first; this is the rule they apply.
    rule='a: g @ b.T;  b: a.T @ g (.T swaps the last two axes; a vector acts as a row or column)',
    check=Check(shapes=(((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)), ((2, 2, 3), (3, 2)))),
    batch=MATMUL,
    torch=Torch("torch.matmul"),
)
