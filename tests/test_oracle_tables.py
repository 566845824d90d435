"""Every op has its PyTorch oracle in its defop, and the tables that read it agree.

This runs without PyTorch: an op added without an oracle fails here on any machine, with
what to add, not only where the differential test (tests/test_torch_differential.py,
which needs torch) runs.
"""
from __future__ import annotations

import pytest

from gradcalc.autodiff import REGISTRY
from gradcalc.autodiff.registry import Torch, missing_steps
from gradcalc.parser.engines.table import OWN, TABLE, counterpart

from .oracles import EDGE_POINTS, NOT_IN_TORCH, TORCH


def test_every_public_op_has_a_torch_oracle_or_a_reason():
    missing = {op.name: step for op in REGISTRY.values() for step in missing_steps(op) if step.startswith("PyTorch oracle")}
    assert not missing, f"ops without their PyTorch oracle (give it in the op's defop): {missing}"


def test_each_point_of_agreement_is_inputs_params_and_an_order():
    """A Torch record's `agrees_at`: (inputs, params) or (inputs, params, 1), one input per
    input of the op."""
    for name, inputs, params, *order in EDGE_POINTS:
        op = REGISTRY[name]
        assert isinstance(params, dict) and order in ([], [1]), (name, inputs)
        assert op.n_in is None or len(inputs) == op.n_in, (name, inputs)
    assert sorted(set(TORCH) & set(NOT_IN_TORCH)) == []


def test_the_engine_table_spells_no_pytorch_function_of_its_own():
    """The PyTorch engine's counterpart and the oracle are one fact where the engine calls
    PyTorch's own function: the table reads it from the op's record (OWN) rather than
    spelling it again, so the two cannot drift apart."""
    spelled = sorted(name for name, entry in TABLE.items() if isinstance(entry.torch, str) and entry.torch.startswith("torch."))
    assert spelled == [], f"write OWN in parser/engines/table.py for {spelled}: the op's defop names its PyTorch function"
    for name, entry in TABLE.items():
        if entry.torch == OWN:
            oracle = REGISTRY[name].torch
            assert isinstance(oracle, Torch) and counterpart(name, "torch") == oracle.name, name


def test_every_oracle_named_is_a_pytorch_function():
    torch = pytest.importorskip("torch")
    for name, oracle in TORCH.items():
        if oracle.name is not None:
            found = torch
            for part in oracle.name.split(".")[1:]:
                found = getattr(found, part, None)
            assert callable(found), f"{name}: {oracle.name} is not a PyTorch function"
