"""The two namespaces every derivative rule and batching rule is written against: `m.exp(x)`.

ARRAY_MATH holds the ops' forwards over raw arrays (fast, records nothing), TENSOR_MATH the
registered ops over Tensors (records a graph when grad is enabled, and batches a Batched
value by the op's rule). registry.defop fills both as each op is defined.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .tensor import Tensor


class _Namespace:
    """Attribute access to ops: `m.exp(x)`. Filled as ops are defined."""

    def __init__(self, kind: str) -> None:
        self.kind = kind


ARRAY_MATH: Any = _Namespace("array")
TENSOR_MATH: Any = _Namespace("tensor")
ARRAY_MATH.raw = lambda x: x
TENSOR_MATH.raw = lambda x: x.data if isinstance(x, Tensor) else np.asarray(x)
