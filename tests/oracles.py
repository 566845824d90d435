"""The PyTorch oracles of the ops, read from the registry, and the edge points where gradcalc
and PyTorch agree.

Each op's defop holds its oracle beside its Check (`torch=Torch(...)`, or `NotInTorch`
with the reason; autodiff/registry.py says what a Torch holds): TORCH and NOT_IN_TORCH
are views of those records for the tests that walk them (tests/test_torch_differential.py,
tests/test_edges.py), not a second table. An entry's `fn` takes the torch module first,
then the op's inputs as torch tensors, then its parameters under gradcalc's names.

torch is imported by the tests, never here, so this module loads without it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gradcalc.autodiff import REGISTRY
from gradcalc.autodiff.registry import NotInTorch, Torch

TORCH: dict[str, Torch] = {op.name: op.torch for op in REGISTRY.values() if isinstance(op.torch, Torch)}
NOT_IN_TORCH: dict[str, str] = {op.name: op.torch.reason for op in REGISTRY.values() if isinstance(op.torch, NotInTorch)}


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

