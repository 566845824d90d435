"""Every op has its entries in the oracle tables the differential tests read.

This runs without PyTorch: an op added without an oracle fails here on any machine, with
what to add, not only where the differential test (tests/test_torch_differential.py,
which needs torch) runs.
"""
from __future__ import annotations

from gradcalc.autodiff import REGISTRY

from .oracles import EDGE_POINTS, NOT_IN_TORCH, TORCH

PUBLIC = [op.name for op in REGISTRY.values() if op.public]


def test_every_public_op_has_a_torch_oracle_or_a_reason():
    missing = [name for name in PUBLIC if name not in TORCH and name not in NOT_IN_TORCH]
    assert not missing, (
        f"tests/oracles.py has no entry for {missing}: add each to TORCH, as what PyTorch (float64) calls it "
        "(e.g. \"logaddexp\": TorchOracle(lambda t, a, b: t.logaddexp(a, b))), or to NOT_IN_TORCH with the reason PyTorch has none"
    )


def test_the_tables_name_only_ops_that_exist():
    named = [*TORCH, *NOT_IN_TORCH, *(case[0] for case in EDGE_POINTS)]
    stale = sorted({name for name in named if name not in REGISTRY})
    assert not stale, f"tests/oracles.py names ops that do not exist: {stale}"
    both = sorted(set(TORCH) & set(NOT_IN_TORCH))
    assert not both, f"tests/oracles.py lists {both} in both TORCH and NOT_IN_TORCH"
