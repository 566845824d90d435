"""The PyTorch oracles of the ops and the edge points where gradcalc and PyTorch agree,
read from the registry.

Each op's defop holds its oracle beside its Check (`torch=Torch(...)`, or `NotInTorch`
with the reason; autodiff/registry.py says what a Torch holds): TORCH and NOT_IN_TORCH
are views of those records for the tests that walk them (tests/test_torch_differential.py,
tests/test_edges.py), not a second table. An entry's `fn` takes the torch module first,
then the op's inputs as torch tensors, then its parameters under gradcalc's names.

torch is imported by the tests, never here, so this module loads without it.
"""
from __future__ import annotations

from typing import Any

from gradcalc.autodiff import REGISTRY
from gradcalc.autodiff.registry import NotInTorch, Torch

TORCH: dict[str, Torch] = {op.name: op.torch for op in REGISTRY.values() if isinstance(op.torch, Torch)}
NOT_IN_TORCH: dict[str, str] = {op.name: op.torch.reason for op in REGISTRY.values() if isinstance(op.torch, NotInTorch)}


# Points (zeros, ties, kinks, inf, nan, empty) where gradcalc gives what PyTorch gives,
# value, gradients and second derivatives: (op name, inputs, params[, order]), from each
# op's Torch record (`agrees_at`). Where gradcalc differs from PyTorch on purpose, the
# op's defop says so in an Edge (tests/test_edges.py checks that the difference is real).
EDGE_POINTS: list[tuple[Any, ...]] = [(name, *point) for name, oracle in TORCH.items() for point in oracle.agrees_at]
