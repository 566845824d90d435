"""Issue 9's engine numerics: each reported case, value and every gradient, from closed
forms or PyTorch's published behaviour (float64), reproduced through the command where
the report used it."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gradcalc.autodiff import Tensor, Value, grad, hessian, ops
from gradcalc.autodiff.errors import ArgumentError

from .test_cli import gradcalc

nan, inf = math.nan, math.inf


def leaf(x):
    return Tensor(x, requires_grad=True)


def grads_of(y, *xs):
    return [g.data.tolist() for g in grad(y.sum(), list(xs))]


# ---- clip: tensor bounds get gradients, as torch.clamp ---------------------------------------


def test_clip_gives_tensor_bounds_their_gradient():
    x, lo, hi = leaf([-1.0, 0.5, 2.0]), leaf([-0.5, 0.0, 0.0]), leaf([1.0, 1.0, 1.0])
    y = ops.clip(x, lo, hi)
    assert y.data.tolist() == [-0.5, 0.5, 1.0]
    assert grads_of(y, x, lo, hi) == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]


def test_clip_takes_2d_bounds_that_broadcast():
    x = leaf([[-2.0, 0.0, 2.0], [0.3, -0.3, 5.0]])
    lo = leaf([[-1.0], [0.0]])
    hi = leaf([1.0, 1.0, 4.0])
    y = ops.clip(x, lo, hi)
    assert y.data.tolist() == [[-1.0, 0.0, 2.0], [0.3, 0.0, 4.0]]
    gx, glo, ghi = grads_of(y, x, lo, hi)
    assert gx == [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]  # x at a bound keeps its gradient (torch)
    assert glo == [[1.0], [1.0]]
    assert ghi == [0.0, 0.0, 1.0]


def test_clip_keyword_bounds_are_constants_and_a_tensor_keyword_is_refused():
    assert ops.clip(Tensor([-2.0, 2.0]), low=-1, high=1).data.tolist() == [-1.0, 1.0]
    with pytest.raises(ArgumentError, match="positionally"):
        ops.clip(Tensor([1.0]), low=leaf(0.0))
    with pytest.raises(ArgumentError, match="needs a bound"):
        ops.clip(Tensor([1.0]))


def test_clip_with_tensor_bounds_through_the_command():
    result = gradcalc("eval", "--json", "sum(clip(x, lo, hi))", "x=[-1, 0.5, 2]", "lo=[-0.5, 0, 0]", "hi=[[1, 1, 1], [2, 2, 2]]")
    assert result.returncode == 0, result.stderr
    grads = json.loads(result.stdout)["grads"]
    assert grads["lo"] == [2.0, 0.0, 0.0]
    assert grads["hi"] == [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert grads["x"] == [0.0, 2.0, 1.0]
