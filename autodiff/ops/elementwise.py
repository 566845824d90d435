"""Elementwise functions, one line each: forward beside its VJP."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..forward import DIAGONAL
from ..registry import ARRAY_MATH, BINARY_SHAPES, Check, Edge, Reference, Torch, defop
from ..tensor import Tensor, to_array
from . import torch_calls
from .arithmetic import ELEM, ONE, ZERO_NUMBER, elementwise, is_real, masked, near_zero, scaled


def _gate(m: Any, g: Any, factor: Any) -> Any:
    """g * factor for a piecewise-constant derivative factor (0, 1/2, 1, -1 or nan): exactly
    0 where the factor is 0, even where g is inf or nan (a branch not taken passes nothing),
    and where g is 0, even where the factor is nan (`abs(nan) ** 0` is the constant 1)."""
    return masked(m, g, m.where(factor == 0, 0.0, g * factor))


# NumPy compares and combines an array with a 0-d array faster than with a Python number
# (the same value, so the same result bit for bit).
_ZERO = np.array(0.0)


def _nonnegative_real(x: Any) -> Any:
    # .real is the attribute of arrays and NumPy scalars alike; np.real's Python-level
    # wrapper cost a complex-step replay of sigmoid more than the arithmetic.
    return (x.real if isinstance(x, (np.ndarray, np.generic)) else np.real(x)) >= 0


def _sigmoid(x: Any) -> Any:
    # 1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below: exp never overflows, the tails
    # keep full relative precision (4.25e-18 at -40). For complex inputs (complex step)
    # the branch is chosen on the real part and each branch is the same analytic function.
    if is_real(x) or not np.iscomplexobj(x):  # (is_real first: the cheap test for the engine's arrays)
        e = np.exp(-np.abs(x))
        r = 1.0 / (1.0 + e)
        return np.where(x >= 0, r, e * r)
    positive = _nonnegative_real(x)
    e = np.exp(np.where(positive, -x, x))
    return np.where(positive, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(x: Any) -> Any:
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): exact in both tails, never overflows.
    if is_real(x) or not np.iscomplexobj(x):
        return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))
    positive = _nonnegative_real(x)
    return np.where(positive, x, 0.0) + np.log1p(np.exp(np.where(positive, -x, x)))


def _relu(x: Any) -> Any:
    if is_real(x):  # nan <= 0 is false, so nan stays nan; -0.0 becomes 0.0
        if not x.ndim:  # one number: the branch in Python, not where(); a NumPy scalar, so nothing is shared
            return ZERO_NUMBER if x <= _ZERO else x[()]
        # max(x, 0), then + 0, which makes a -0.0 that NumPy's max keeps (the sign it
        # gives a tie of zeros is unspecified) +0.0: a select (np.where) costs twice this.
        return np.maximum(x, _ZERO) + _ZERO
    # (complex step: the branch chosen on the real part, each branch analytic)
    real = np.real(x)
    return np.where(real > 0, x, np.where(np.isnan(real), x, 0.0))


def _relu_slope(x: Any) -> Any:
    return np.where(np.isnan(x), np.nan, x > 0)


def _relu_vjp(m: Any, g: Any, ans: Any, x: Any) -> Any:
    if m is ARRAY_MATH and is_real(x) and is_real(g):
        # _gate(g, _relu_slope(x)) in one pass: g where x > 0, and elsewhere relu's own
        # output, which is +0.0 (x <= 0) or nan (x nan), as the slope gives; masked makes
        # it 0 at nan where g is 0 (relu(nan) ** 0 is the constant 1), as the scalar engine does.
        if not x.ndim and not g.ndim:  # one number: the branch in Python (a NumPy scalar: nothing shared)
            return masked(m, g, (g if x > _ZERO else ans)[()])
        return masked(m, g, np.where(x > _ZERO, g, ans))
    return _gate(m, g, _relu_slope(m.raw(x)))


# Past this, cosh overflows; sech^2 is below 1e-616 there, so 0 either way.
_COSH_MAX = np.array(710.0)


def _tanh_vjp(m: Any, g: Any, ans: Any, x: Any) -> Any:
    # sech^2 x = (1 / cosh|x|)^2: 1 - tanh^2 cancels catastrophically for |x| > 1 (relative
    # error 1e-8 at 10, 0 instead of 1.7e-17 past 19); this form does not, and costs two
    # passes fewer than 4 e^(-2|x|) / (1 + e^(-2|x|))^2. |x| is held below cosh's
    # overflow, which would warn for a result that is right.
    if m is ARRAY_MATH and is_real(x):  # no graph: the same values as below, with NumPy's own calls
        if not x.ndim:  # (NumPy gives scalars for 0-d arrays, which have no place to write to)
            s = 1.0 / np.cosh(np.minimum(np.abs(x), _COSH_MAX))
            return scaled(m, g, s * s)
        s = np.abs(x)  # in place: no temporaries
        np.minimum(s, _COSH_MAX, out=s)
        np.cosh(s, out=s)
        np.divide(ONE, s, out=s)
        s *= s
        return scaled(m, g, s)
    # On a graph (and for complex steps) through sech, whose own derivative -sech tanh
    # keeps tanh'' = -2 sech**2 tanh a normal number out to |x| = 350 (through 1 / cosh,
    # the quotient rule's 1 / cosh**3 underflowed from 250 on).
    s = m.sech(x)
    return scaled(m, g, s * s)


_SECH_FAR = np.array(700.0)


def _sech(x: Any) -> Any:
    if np.iscomplexobj(x):  # complex step: the analytic form
        return 1.0 / np.cosh(x)
    # 1 / cosh(x); past 700, where cosh would overflow, 2 e**-|x| (the e**-2|x| beside it
    # is below the last digit). The tail is made only when an entry reaches it: a derivative
    # of tanh takes a sech, and the tail's four passes were half of its cost.
    size = np.abs(x)
    near = 1.0 / np.cosh(np.minimum(size, _SECH_FAR))
    if size.max(initial=0.0) < _SECH_FAR:
        return near
    return np.where(size < _SECH_FAR, near, 2.0 * np.exp(-size))


sech = defop(
    "sech", _sech, (lambda m, g, ans, x: masked(m, g, -g * ans * m.tanh(x)),),
    doc="1 / cosh(x), the derivatives of tanh and sigmoid", category=ELEM, complex_safe=True, public=False,
    check=Check(), jvp=DIAGONAL,
    reference=Reference("sech(x)", "-sech(x) * tanh(x)", "spread(-750, 750)", second="sech(x) * (2 * tanh(x) ** 2 - 1)"),
)


def _sigmoid_vjp(m: Any, g: Any, ans: Any, x: Any) -> Any:
    # sigmoid(x) sigmoid(-x) written as sech(x / 2)**2 / 4, the same number: differentiated
    # again it gives -sech(x / 2)**2 tanh(x / 2) / 4, where the product rule on
    # sigmoid(x) sigmoid(-x) leaves sigmoid(-x) - sigmoid(x), which cancels near 0.
    s = m.sech(0.5 * x)
    return scaled(m, g, 0.25 * (s * s))


exp = elementwise(
    "exp", lambda x: np.exp(x), lambda m, g, ans, x: scaled(m, g, ans), "e ** x",
    edges=(Edge("at +-inf", [[math.inf, -math.inf]], [math.inf, 0.0], ([math.inf, 0.0],), order=1),),
    torch=Torch("torch.exp", agrees_at=(([[1000.0, -1000.0, 700.0]], {}),)),
    reference=Reference("exp(x)", "exp(x)", "spread(-700, 700)", second="exp(x)"),
)
log = elementwise(
    "log", lambda x: np.log(x), lambda m, g, ans, x: masked(m, g, g / x), "natural logarithm", low=0.2, high=3.0,
    aliases=("ln",), edges=(Edge("at 0", [0.0], -math.inf, (math.inf,), order=1),),
    torch=Torch("torch.log", agrees_at=(([[0.0, 1e-300, -1.0]], {}),)),
    reference=Reference("log(x)", "1 / x", "np.concatenate([magnitudes(-300, 300), 1 + spread(-1e-3, 1e-3, 21)])", second="-1 / x**2"),
)
log1p = elementwise(
    "log1p", lambda x: np.log1p(x), lambda m, g, ans, x: masked(m, g, g / (1 + x)), "log(1 + x), accurate for small x",
    low=-0.5, edges=(Edge("at -1", [-1.0], -math.inf, (math.inf,), order=1),),
    torch=Torch("torch.log1p"),
    reference=Reference(
        "log1p(x)", "1 / (1 + x)", "np.concatenate([-1 + magnitudes(-15, -1, 29), spread(-0.99, 10), magnitudes(-20, 300)])", second="-1 / (1 + x) ** 2",
    ),
)
sqrt = elementwise(
    "sqrt", lambda x: np.sqrt(x), lambda m, g, ans, x: masked(m, g, g / (2 * ans)), "square root", low=0.2, high=3.0,
    edges=(Edge("at 0", [0.0], 0.0, (math.inf,), order=1, note="the limit of the slope"),),
    torch=Torch("torch.sqrt", agrees_at=(([[0.0, 1e-300, 1e300]], {}), ([[-0.0, -math.inf]], {}, 1))),
    reference=Reference("sqrt(x)", "1 / (2 * sqrt(x))", "magnitudes(-300, 300)", second="-1 / (4 * x * sqrt(x))"),
)
sin = elementwise(
    "sin", lambda x: np.sin(x), lambda m, g, ans, x: scaled(m, g, m.cos(x)), "sine", torch=Torch("torch.sin"),
    reference=Reference("sin(x)", "cos(x)", "spread(-1e4, 1e4)", second="-sin(x)"),
)
cos = elementwise(
    "cos", lambda x: np.cos(x), lambda m, g, ans, x: masked(m, g, -g * m.sin(x)), "cosine", torch=Torch("torch.cos"),
    reference=Reference("cos(x)", "-sin(x)", "spread(-1e4, 1e4)", second="-cos(x)"),
)
tan = elementwise(
    "tan", lambda x: np.tan(x), lambda m, g, ans, x: scaled(m, g, 1 + ans * ans), "tangent", low=-1.2, high=1.2,
    torch=Torch("torch.tan"),
    reference=Reference("tan(x)", "1 / cos(x) ** 2", "spread(-1.57, 1.57)", second="2 * tan(x) / cos(x) ** 2"),
)
tanh = elementwise(
    "tanh", lambda x: np.tanh(x), _tanh_vjp, "hyperbolic tangent", rule="g / cosh(x) ** 2",
    edges=(Edge("far in a tail", [20.0], 1.0, (4.0 / (math.exp(20.0) + math.exp(-20.0)) ** 2,), order=1,
                torch="gradient 0 past |x| = 19 (1 - tanh(x) ** 2)", note="the slope keeps its digits"),),
    torch=Torch("torch.tanh"),
    reference=Reference("tanh(x)", "1 / cosh(x) ** 2", "spread(-300, 300)", second="-2 * tanh(x) * sech(x) ** 2"),
)
sigmoid = elementwise(
    "sigmoid", _sigmoid, _sigmoid_vjp, "logistic 1 / (1 + e ** -x); accurate in both tails",
    rule="g * sigmoid(x) * sigmoid(-x)",
    edges=(Edge("far in the left tail", [-40.0], math.exp(-40.0) / (1.0 + math.exp(-40.0)),
                (math.exp(-40.0) / (1.0 + math.exp(-40.0)) ** 2,), order=1),
           Edge("far in the right tail", [40.0], 1.0, (math.exp(-40.0) / (1.0 + math.exp(-40.0)) ** 2,), order=1,
                torch="gradient 0 (s (1 - s) with s rounded to 1; 1e-3 off at 30)", note="the slope keeps its digits")),
    torch=Torch("torch.sigmoid", agrees_at=(([[-1000.0, -40.0, 1000.0, math.nan]], {}),)),
    reference=Reference("logistic(x)", "logistic(x) * logistic(-x)", "spread(-700, 700)", second="-logistic(x) * logistic(-x) * tanh(x / 2)"),
)
softplus = elementwise(
    "softplus", _softplus, lambda m, g, ans, x: scaled(m, g, m.sigmoid(x)), "log(1 + e ** x), without overflow",
    edges=(Edge("far in the right tail", [25.0], 25.0 + math.log1p(math.exp(-25.0)), (1.0 / (1.0 + math.exp(-25.0)),),
                second=(math.exp(-25.0) / (1.0 + math.exp(-25.0)) ** 2,),
                torch="second derivative 0 past 20 (softplus is x there)", note="the second derivative keeps its digits"),),
    torch=Torch(lambda t, x: t.nn.functional.softplus(x, threshold=30.0), agrees_at=(([[-1000.0, -40.0, 1000.0]], {}),)),
    reference=Reference("log1p(exp(x))", "logistic(x)", "spread(-700, 700)", second="logistic(x) * logistic(-x)"),
)
relu = elementwise(
    "relu", _relu, _relu_vjp, "max(x, 0); gradient 0 at 0; nan stays nan",
    kink=near_zero, kink_gap=1e-3, rule="g * (x > 0)",
    edges=(Edge("at 0", [0.0], 0.0, (0.0,)),
           Edge("at nan", [math.nan], math.nan, (math.nan,), order=1, torch="gradient 1", note="nan in, nan out")),
    torch=Torch("torch.relu", agrees_at=(([[-1.0, 0.0, 2.0, -math.inf, math.inf]], {}),)),
    reference=Reference("max(x, 0)", "(mpf(1) if x > 0 else mpf(0))", "spread(-1e300, 1e300)", second="mpf(0)"),
)
def _abs(x: Any) -> Any:
    if not np.iscomplexobj(x):
        return np.abs(x)
    # complex step: x or -x as the real part's sign says (np.abs would be the modulus,
    # which is not analytic)
    return np.where(np.real(x) < 0, -x, x)


abs_ = elementwise(
    "abs", _abs, lambda m, g, ans, x: _gate(m, g, np.sign(m.raw(x))),
    "absolute value; gradient 0 at 0", kink=near_zero, kink_gap=1e-3,
    edges=(Edge("at 0", [0.0], 0.0, (0.0,)),
           Edge("at nan", [math.nan], math.nan, (math.nan,), order=1, torch="gradient 0", note="nan in, nan out")),
    torch=Torch("torch.abs", agrees_at=(([[0.0, -0.0, -math.inf, math.inf, -2.0]], {}),)),
    reference=Reference("abs(x)", "sign(x)", "spread(-1e300, 1e300)", second="mpf(0)"),
)


def _share(loses: Any, a: Any, b: Any) -> Any:
    """The derivative factor of one side of maximum/minimum, as torch computes it: 0 where
    it loses, 1/2 at a tie, 1 otherwise (so both sides get the gradient when one is nan)."""
    return np.where(loses, 0.0, 1.0) / (1.0 + (a == b))


def _tied(a: Any, b: Any, tol: float = 0.0) -> bool:
    return bool(np.any(np.abs(a - b) <= tol))


def _pair_edges() -> tuple[Edge, ...]:
    """maximum's and minimum's: the same at a tie and with a nan."""
    return (Edge("at a tie", [1.0, 1.0], 1.0, (0.5, 0.5), note="half to each"),
            Edge("with a nan", [math.nan, 1.0], math.nan, (1.0, 1.0), order=1, note="the gradient to both: the nan stays visible"))


maximum = defop(
    "maximum", lambda a, b: np.maximum(a, b),
    (lambda m, g, ans, a, b: _gate(m, g, _share(m.raw(a) < m.raw(b), m.raw(a), m.raw(b))),
     lambda m, g, ans, a, b: _gate(m, g, _share(m.raw(b) < m.raw(a), m.raw(a), m.raw(b)))),
    doc="elementwise larger of a and b (nan if either is)", category=ELEM, n_in=2, method=True, kink=_tied, complex_safe=True,
    rule="a: g * (a > b);  b: g * (b > a);  half each at a tie", jvp=DIAGONAL,
    check=Check(shapes=BINARY_SHAPES, kink_gap=1e-3), edges=_pair_edges(),
    torch=Torch("torch.maximum", agrees_at=(([[1.0, 2.0, math.nan, 1.0, math.nan], [1.0, 3.0, 1.0, math.nan, math.nan]], {}),)),
)
minimum = defop(
    "minimum", lambda a, b: np.minimum(a, b),
    (lambda m, g, ans, a, b: _gate(m, g, _share(m.raw(a) > m.raw(b), m.raw(a), m.raw(b))),
     lambda m, g, ans, a, b: _gate(m, g, _share(m.raw(b) > m.raw(a), m.raw(a), m.raw(b)))),
    doc="elementwise smaller of a and b (nan if either is)", category=ELEM, n_in=2, method=True, kink=_tied, complex_safe=True,
    rule="a: g * (a < b);  b: g * (b < a);  half each at a tie", jvp=DIAGONAL,
    check=Check(shapes=BINARY_SHAPES, kink_gap=1e-3), edges=_pair_edges(),
    torch=Torch("torch.minimum", agrees_at=(([[1.0, 2.0, math.nan, 1.0, math.nan], [1.0, 3.0, 1.0, math.nan, math.nan]], {}),)),
)


def _bounds(bounds: tuple[Any, ...], low: Any, high: Any) -> tuple[Any, Any]:
    """clip's (low, high): positional bounds are tensor inputs (differentiable), keyword
    bounds constants. None means unbounded on that side."""
    if len(bounds) > 2:
        raise ArgumentError(f"clip takes at most two bounds (low, high), got {len(bounds)}")
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, Tensor) and value.requires_grad:
            raise ArgumentError(f"clip: give the bound {name} positionally, clip(x, low, high), so that its gradient is kept")
    if bounds and low is not None or len(bounds) > 1 and high is not None:
        raise ArgumentError("clip: a bound given both positionally and by keyword")
    low = bounds[0] if bounds else low
    high = bounds[1] if len(bounds) > 1 else high
    if low is None and high is None:
        raise ArgumentError("clip needs a bound: clip(x, low, high), clip(x, low=...) or clip(x, high=...)")
    return (None if low is None else to_array(low)), (None if high is None else to_array(high))


def _clip(x: Any, *bounds: Any, low: Any = None, high: Any = None) -> Any:
    low, high = _bounds(bounds, low, high)
    out = x if low is None else np.maximum(x, low)
    return out if high is None else np.minimum(out, high)


def _clip_source(x: Any, low: Any, high: Any) -> tuple[Any, Any, Any]:
    """Masks of where the output came from: x, low or high. As torch.clamp, x at a bound
    keeps its gradient; when low > high the output is high and so is the gradient."""
    lifted = x if low is None else np.maximum(x, low)
    from_high = np.zeros(np.shape(lifted), bool) if high is None else lifted > high
    from_low = np.zeros(np.shape(lifted), bool) if low is None else ~from_high & (x < low)
    return ~from_high & ~from_low, from_low, from_high


def _clip_vjp(m: Any, g: Any, ans: Any, x: Any, *bounds: Any, low: Any = None, high: Any = None, k: int) -> Any:
    low, high = _bounds(tuple(m.raw(b) for b in bounds), low, high)
    return _gate(m, g, _clip_source(m.raw(x), low, high)[k])


def _clip_kink(x: Any, *bounds: Any, low: Any = None, high: Any = None, tol: float = 0.0) -> bool:
    low, high = _bounds(bounds, low, high)
    return any(bound is not None and bool(np.any(np.abs(x - bound) <= tol)) for bound in (low, high))


def _clip_check(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [rng.uniform(-2, 2, (3, 4)), rng.uniform(-1, -0.2, (3, 1)), rng.uniform(0.2, 1, (4,))], {}


_CLIP_NAMES = ("x", "low", "high")
clip = defop(
    "clip", _clip, _clip_vjp, n_in=None,
    doc="x limited to [low, high]; bounds given positionally are tensors that get gradients "
    "(any broadcastable shape), keyword bounds are constants",
    category=ELEM, method=True, kink=_clip_kink, check=Check(make=_clip_check, kink_gap=1e-3), complex_safe=True,
    rule="x: g * (low <= x <= high);  low: g * (x < low);  high: g * (x > high)", jvp=DIAGONAL,
    edges=(Edge("x at a bound", [[-1.0, 0.0, 1.0], [-1.0, 0.0, 0.5], [1.0, 1.0, 1.0]], [-1.0, 0.0, 1.0],
                ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]), names=_CLIP_NAMES,
                note="the gradient to x, not to the bound; PyTorch 2.14 changed clamp's gradient here"),
           Edge("low > high", [0.0, 1.0, -1.0], -1.0, (0.0, 0.0, 1.0), names=_CLIP_NAMES, note="the output is high, and so is the gradient"),
           Edge("at nan", [math.nan, -1.0, 1.0], math.nan, (1.0, 0.0, 0.0), order=1, names=_CLIP_NAMES,
                torch="0 to x and to the bounds", note="the nan stays visible")),
    torch=Torch(
        torch_calls.clip,
        extra_makes=(torch_calls.clip_keyword_bounds, torch_calls.clip_one_bound),
        agrees_at=(
            ([[-1.0, 0.5, 2.0], [-0.5, 0.0, 0.0], [1.0, 1.0, 1.0]], {}),
            ([[-1.0, 0.0, 1.0], [-1.0, 0.0, 0.5], [1.0, 1.0, 1.0]], {}),  # x on a bound keeps the gradient
            ([[0.0], [1.0], [-1.0]], {}),  # low > high: the output is high, and so is the gradient
        ),
    ),
)


where = defop(
    "where", lambda cond, a, b: np.where(cond != 0, a, b),
    (None,
     lambda m, g, ans, c, a, b: m.where(m.raw(c), g, 0.0),
     lambda m, g, ans, c, a, b: m.where(m.raw(c), 0.0, g)),
    doc="a where cond is non-zero, else b (no gradient flows to cond; the branch not taken gets exactly 0)", category=ELEM, n_in=3,
    complex_safe=True,
    check=Check(
        make=lambda rng: ([rng.integers(0, 2, (3, 4)).astype(float), rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (4,))], {}),
        diff=(1, 2),
    ),
    jvp=DIAGONAL,
    edges=(Edge("the branch not taken", [False, math.inf, 1.0], 1.0, (0.0, 1.0), wrt=(1, 2),
                note="exactly 0 to the branch not taken, even where its own derivative is inf or nan: "
                "where(x > 0, sqrt(x), 0) at -1 has gradient 0 (PyTorch's: nan)"),),
    torch=Torch(torch_calls.where, make=torch_calls.where_make, agrees_at=(([[1.0, 0.0], [1.0, 2.0], [3.0, 4.0]], {}),)),
)
