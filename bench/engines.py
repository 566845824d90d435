"""Adapters: each engine the benchmarks compare, behind the same small interface.

A scalar adapter makes leaves; the values it returns support + - * / ** and .relu()
.tanh() .exp() .log(). Tensor workloads are written once over any tensor type with
those methods plus @, .sum() and .mean() (bench/workloads.py). The anchors (micrograd,
torch, HIPS autograd) are optional: a workload whose library is missing is skipped
with a note.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class ScalarEngine:
    name: str
    leaf: Callable[[float], Any]
    backward: Callable[[Any], None]
    grad: Callable[[Any], float]
    value: Callable[[Any], float]


def _count_prev(root: Any) -> int:
    """Nodes in a graph whose nodes keep their parents in `_prev` (gradcalc, micrograd)."""
    seen = {id(root)}
    stack = [root]
    while stack:
        node = stack.pop()
        for p in node._prev:
            if id(p) not in seen:
                seen.add(id(p))
                stack.append(p)
    return len(seen)


def gradcalc_scalar() -> ScalarEngine:
    from gradcalc.autodiff import Value

    return ScalarEngine("gradcalc scalar", Value, lambda y: y.backward(), lambda v: v.grad, lambda v: v.data)


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
    return ScalarEngine("micrograd 0.1.0", Value, lambda y: y.backward(), lambda v: v.grad, lambda v: v.data)


def torch_scalar() -> ScalarEngine:
    import torch

    torch.set_num_threads(1)

    def leaf(x: float) -> Any:
        return torch.tensor(float(x), dtype=torch.float64, requires_grad=True)

    return ScalarEngine("torch 0-d", leaf, lambda y: y.backward(), lambda v: float(v.grad), lambda v: float(v.detach()))


SCALAR_ENGINES: dict[str, Callable[[], ScalarEngine]] = {
    "gradcalc scalar": gradcalc_scalar,
    "micrograd": micrograd_scalar,
    "torch": torch_scalar,
}
