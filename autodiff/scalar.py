"""The scalar engine, after the course's `Value`: one graph node per number.

Eleven primitives carry derivative code (+, *, /, ** constant, sqrt, relu, tanh, exp, log,
sigmoid, softplus); every other operation is composed from them (a - b is a + (-b), abs is
relu(x) + relu(-x)), so it needs none. The course composes a / b as a * b**-1 too; here
division, sigmoid and softplus are primitives because their composed forms overflow where
the true values and derivatives are finite: b**-1 has derivative -b**-2, which is -inf for
b = 1e-300, so x/x got gradient -inf where the truth is 0; exp(1000) overflows in the
sigmoid's tails. sqrt is one so that sqrt(-0.0) is -0.0 with gradient -inf, as in the
tensor engine and PyTorch. Each primitive computes what the tensor engine's op computes,
so the engines agree there. Each node's `_backward` closure refers only to the node's parents, never to
the node itself: the graph has no reference cycles, so the garbage collector never has
to trace it (a cost that is about half of micrograd's run time).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from .backprop import topological_order

Number = int | float


def _noop(g: float) -> None:
    pass


class Value:
    """A scalar in a define-by-run graph: data, grad, _prev (parents), _backward, _op."""

    __slots__ = ("data", "grad", "_prev", "_backward", "_op", "name", "requires_grad")

    def __init__(
        self, data: Number, _prev: tuple[Value, ...] = (), _op: str = "", name: str | None = None, requires_grad: bool = True
    ) -> None:
        self.data = float(data)
        self.grad = 0.0
        self._prev = _prev
        self._backward: Callable[[float], None] = _noop
        self._op = _op
        self.name = name
        # False for numbers that entered as constants (2 in 2 * x) and for results computed
        # from constants alone: the graph tools count them as constants, and the language
        # turns such a value into a fresh variable when it is assigned to a name.
        # Gradients still flow into them, as in micrograd.
        self.requires_grad = requires_grad

    # The graph protocol shared with Tensor.
    @property
    def parents(self) -> tuple[Value, ...]:
        return self._prev

    @property
    def label(self) -> str:
        return self._op

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def __repr__(self) -> str:
        return f"Value(data={self.data!r}, grad={self.grad!r})"

    def _repr_html_(self) -> str:
        from .display import node_html

        return node_html("Value", self.data, self.grad, self._op or None, self.name)

    # ---- the primitives --------------------------------------------------------
    def __add__(self, other: Value | Number) -> Value:
        if other.__class__ is not Value:  # (faster than isinstance, which mypy would follow)
            other = Value(other, (), "", None, False)  # type: ignore[arg-type]
        out = Value(self.data + other.data, (self, other), "+", None, self.requires_grad or other.requires_grad)

        def _backward(g: float) -> None:
            self.grad += g
            other.grad += g

        out._backward = _backward
        return out

    def __mul__(self, other: Value | Number) -> Value:
        if other.__class__ is not Value:  # (faster than isinstance, which mypy would follow)
            other = Value(other, (), "", None, False)  # type: ignore[arg-type]
        out = Value(self.data * other.data, (self, other), "*", None, self.requires_grad or other.requires_grad)

        def _backward(g: float) -> None:
            self.grad += g * other.data
            other.grad += g * self.data

        out._backward = _backward
        return out

    def __truediv__(self, other: Value | Number) -> Value:
        # A primitive, not the course's self * other**-1 (see the module docstring). The
        # rules are the tensor engine's div: g / b, and -g * (a / b) / b, which stays
        # finite where b**-2 overflows (x/x at 1e-300: 1e300 - 1e300 = 0).
        if other.__class__ is not Value:  # (faster than isinstance, which mypy would follow)
            other = Value(other, (), "", None, False)  # type: ignore[arg-type]
        q = _divide(self.data, other.data)
        out = Value(q, (self, other), "/", None, self.requires_grad or other.requires_grad)

        def _backward(g: float) -> None:
            self.grad += _divide(g, other.data)
            other.grad += _divide(-g * q, other.data)

        out._backward = _backward
        return out

    def __pow__(self, n: Number | Value) -> Value:
        if isinstance(n, Value):
            # A value computed from constants alone (-1, 1/2) is a constant exponent.
            if n.requires_grad:
                raise TypeError("the scalar engine supports only constant exponents (x ** 2, not x ** y)")
            n = n.data
        out = Value(_power(self.data, n), (self,), _power_label(n), None, self.requires_grad)

        def _backward(g: float) -> None:
            # d x**0 / dx is 0, also at x = 0 where n * x**(n-1) would be 0 * inf.
            if n != 0:
                self.grad += g * n * _power(self.data, n - 1)

        out._backward = _backward
        return out

    def sqrt(self) -> Value:
        s = _power(self.data, 0.5)
        out = Value(s, (self,), "sqrt", None, self.requires_grad)

        def _backward(g: float) -> None:
            self.grad += _divide(g, 2.0 * s)  # the tensor engine's g / (2 * ans): -inf at -0.0

        out._backward = _backward
        return out

    def relu(self) -> Value:
        x = self.data
        out = Value(x if x > 0 or x != x else 0.0, (self,), "relu", None, self.requires_grad)

        def _backward(g: float) -> None:
            if x > 0 or x != x:  # nan in, nan out; 0 (not g * 0) where x <= 0
                self.grad += g * (1.0 if x > 0 else x)

        out._backward = _backward
        return out

    def tanh(self) -> Value:
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh", None, self.requires_grad)

        def _backward(g: float) -> None:
            self.grad += g * _sech_squared(self.data)

        out._backward = _backward
        return out

    def exp(self) -> Value:
        e = _exp(self.data)
        out = Value(e, (self,), "exp", None, self.requires_grad)

        def _backward(g: float) -> None:
            self.grad += g * e

        out._backward = _backward
        return out

    def log(self) -> Value:
        out = Value(_log(self.data), (self,), "log", None, self.requires_grad)

        def _backward(g: float) -> None:
            self.grad += g / self.data if self.data != 0 else g * math.copysign(math.inf, self.data)

        out._backward = _backward
        return out

    def sigmoid(self) -> Value:
        s = _sigmoid(self.data)
        out = Value(s, (self,), "sigmoid", None, self.requires_grad)

        def _backward(g: float) -> None:
            self.grad += g * s * _sigmoid(-self.data)

        out._backward = _backward
        return out

    def softplus(self) -> Value:
        x = self.data
        out = Value(max(x, 0.0) + math.log1p(_exp(-abs(x))) if x == x else x, (self,), "softplus", None, self.requires_grad)

        def _backward(g: float) -> None:
            self.grad += g * _sigmoid(x)

        out._backward = _backward
        return out

    # ---- composites: no derivative code of their own ----------------------------------
    def __neg__(self) -> Value:
        return self * -1

    def __sub__(self, other: Value | Number) -> Value:
        return self + (-other)

    def __radd__(self, other: Number) -> Value:
        return self + other

    def __rmul__(self, other: Number) -> Value:
        return self * other

    def __rsub__(self, other: Number) -> Value:
        return other + (-self)

    def __rtruediv__(self, other: Number) -> Value:
        return Value(other, (), "", None, False) / self

    def abs(self) -> Value:
        return self.relu() + (-self).relu()

    def backward(self) -> None:
        """Accumulate d(self)/d(node) into every node's grad, in reverse topological order.

        Interior grads are reset first, so calling backward twice adds each leaf's
        gradient once more (27, then 54 for x*x*x at 3), never compounding through the
        interior nodes.
        """
        order = topological_order(self)
        interior = [node for node in order if node._prev]
        for node in interior:
            node.grad = 0.0
        self.grad = 1.0
        for node in reversed(interior):
            # A node whose gradient is exactly 0 passes nothing back, not 0 * inf = nan:
            # the tensor engine's convention (see docs/engine.md, "where").
            if node.grad:
                node._backward(node.grad)


SCALAR_FUNCTIONS: dict[str, str] = {
    "relu": "max(x, 0)", "tanh": "hyperbolic tangent", "exp": "e ** x", "log": "natural logarithm",
    "sigmoid": "1 / (1 + exp(-x))", "softplus": "log(1 + exp(x))", "sqrt": "square root",
    "abs": "relu(x) + relu(-x)",
}
"""Functions the scalar engine offers (the language's `--engine scalar` reads this)."""


@lru_cache(maxsize=64)
def _power_label(n: Number) -> str:
    return f"**{n:g}"


def _power(x: float, n: Number) -> float:
    """x ** n as NumPy computes it: nan for a negative base (-inf too) and a fractional
    exponent, where Python's pow gives (-inf) ** 0.5 = inf; x ** 0.5 is sqrt, so
    (-0.0) ** 0.5 is -0.0."""
    if n == 0.5:
        return math.sqrt(x) if x >= 0 else math.nan  # x >= 0 holds for -0.0; nan fails it
    if x < 0 and math.isfinite(n) and not float(n).is_integer():
        return math.nan
    try:
        result = x**n
    except (ZeroDivisionError, OverflowError):  # 0 ** -n, or |x ** n| too large
        return math.copysign(math.inf, x) if float(n).is_integer() and int(n) % 2 else math.inf
    return result if isinstance(result, float | int) else math.nan  # a negative base to a fractional power


def _divide(a: float, b: float) -> float:
    """a / b in IEEE arithmetic, as NumPy: Python raises at b == 0 (and never overflows)."""
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _sigmoid(x: float) -> float:
    # The tensor engine's formula: exp never overflows, both tails keep full precision.
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    if x < 0:
        e = math.exp(x)
        return e / (1.0 + e)
    return x  # nan


def _sech_squared(x: float) -> float:
    """1 - tanh(x)**2 without cancellation (see the tensor engine's tanh)."""
    e = math.exp(-2.0 * abs(x))
    return 4.0 * e / ((1.0 + e) * (1.0 + e))


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _log(x: float) -> float:
    if x > 0:
        return math.log(x)
    if x == 0:
        return -math.inf
    return math.nan
