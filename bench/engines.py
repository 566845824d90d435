"""Adapters: each engine the benchmarks compare, behind the same small interface.

A scalar adapter makes leaves and constants; the values it returns support + - * / **,
and .relu() .tanh() .exp() .log(). A tensor adapter does the same over 2-d arrays and
adds matmul, sum, mean. The anchors (micrograd, torch, HIPS autograd) are optional: an
adapter whose library is missing reports why and is skipped.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class ScalarEngine:
    name: str
    leaf: Callable[[float], Any]
    backward: Callable[[Any], None]
    grad: Callable[[Any], float]
    value: Callable[[Any], float]
    node_count: Callable[[Any], int] | None = None


def _count_prev(root: Any, attr: str = "_prev") -> int:
    seen = {id(root)}
    stack = [root]
    while stack:
        node = stack.pop()
        for p in getattr(node, attr):
            if id(p) not in seen:
                seen.add(id(p))
                stack.append(p)
    return len(seen)


def gradcalc_scalar() -> ScalarEngine:
    from gradcalc.autodiff import Value

    return ScalarEngine("gradcalc scalar", Value, lambda y: y.backward(), lambda v: v.grad, lambda v: v.data, _count_prev)


def _micrograd_value() -> Any:
    """micrograd 0.1.0's Value, with tanh, exp and log added in micrograd's own closure
    style (as in its lecture), since the package ships only relu."""
    from micrograd.engine import Value

    if not hasattr(Value, "tanh"):
        def tanh(self: Any) -> Any:
            t = math.tanh(self.data)
            out = Value(t, (self,), "tanh")

            def _backward() -> None:
                self.grad += (1 - t * t) * out.grad
            out._backward = _backward
            return out

        def exp(self: Any) -> Any:
            e = math.exp(self.data)
            out = Value(e, (self,), "exp")

            def _backward() -> None:
                self.grad += e * out.grad
            out._backward = _backward
            return out

        def log(self: Any) -> Any:
            out = Value(math.log(self.data), (self,), "log")

            def _backward() -> None:
                self.grad += out.grad / self.data
            out._backward = _backward
            return out

        Value.tanh, Value.exp, Value.log = tanh, exp, log
    return Value


def micrograd_scalar() -> ScalarEngine:
    Value = _micrograd_value()
    return ScalarEngine("micrograd 0.1.0", Value, lambda y: y.backward(), lambda v: v.grad, lambda v: v.data, _count_prev)


def torch_scalar() -> ScalarEngine:
    import torch

    torch.set_num_threads(1)

    def leaf(x: float) -> Any:
        return torch.tensor(float(x), dtype=torch.float64, requires_grad=True)

    return ScalarEngine("torch 0-d", leaf, lambda y: y.backward(), lambda v: float(v.grad), lambda v: float(v.detach()), None)


SCALAR_ENGINES: dict[str, Callable[[], ScalarEngine]] = {
    "gradcalc scalar": gradcalc_scalar,
    "micrograd": micrograd_scalar,
    "torch": torch_scalar,
}


@dataclass
class TensorEngine:
    """run(inputs) -> (value, grads): forward and backward of one workload."""

    name: str
    available: bool
    note: str = ""


def load(factory: Callable[[], Any]) -> tuple[Any | None, str]:
    try:
        return factory(), ""
    except ImportError as err:
        return None, f"not installed ({err.name}); pip install '.[bench]'"


def numpy_array(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)
