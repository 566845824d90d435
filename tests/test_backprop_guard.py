"""The nan guard left to the end of a plain backward pass (backprop.py) changes nothing.

backprop runs a plain pass without the VJPs' guard (`masked`: 0 where g is 0 and the
result nan) and keeps it when no gradient it returns has a nan. That is exact if every
VJP keeps the unguarded pass "equal or nan": fed a gradient that equals the guarded
pass's except for some entries that are nan, its result equals the guarded result
except where it is nan itself. Sums keep that, so by induction over the graph every
gradient of the unguarded pass is the guarded one wherever it is not nan.

A VJP that turns a nan of its gradient into a number (pow's exact 0 for a**0,
logcumsumexp's sums by sign) says so, and backprop then takes the guarded pass.

The first test checks the step for every op with a gradient, at inputs and gradients
full of zeros, infinities and nans; the second checks whole passes against the guarded
pass bit for bit.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gradcalc.autodiff import REGISTRY, Tensor, topological_order
from gradcalc.autodiff.backprop import _propagate, backprop
from gradcalc.autodiff.errors import EngineError
from gradcalc.autodiff.registry import NAN_GUARD, Check, defop, unregister

from .test_every_op import draw_case, ids, outputs_of

DIFFERENTIABLE = [op for op in REGISTRY.values() if op.has_gradient]
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 1e300, 1.0, -1.0]
GRADIENTS = st.sampled_from([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-300, 1e300])


def _pass(out: Tensor, seed: np.ndarray, guarded: bool) -> dict:
    """One pass, guarded or not; NAN_GUARD.dropped says afterwards whether a VJP dropped a nan."""
    NAN_GUARD.deferred, NAN_GUARD.dropped = not guarded, False
    try:
        return _propagate(out, seed, False, None, topological_order(out))
    finally:
        NAN_GUARD.deferred = False


def _same_bits(a, b) -> np.ndarray:
    """Entrywise: equal, signs of zero included, or both nan."""
    a, b = np.asarray(a), np.asarray(b)
    a, b = np.broadcast_arrays(a, b)
    both_nan = np.isnan(a) & np.isnan(b)
    equal = (a == b) & (np.signbit(np.real(a)) == np.signbit(np.real(b))) & (np.signbit(np.imag(a)) == np.signbit(np.imag(b)))
    return both_nan | equal


def _edged(data, inputs: list, diff: list) -> list:
    """The inputs, with entries of the differentiated ones replaced by edge values."""
    out = []
    for i, x in enumerate(inputs):
        x = np.array(x, dtype=np.float64) if i in diff else x
        if i in diff and x.size:
            flat = x.reshape(-1)
            picks = data.draw(st.lists(st.tuples(st.integers(0, x.size - 1), st.sampled_from(EDGES)), max_size=3), label=f"edges{i}")
            for j, value in picks:
                flat[j] = value
        out.append(x)
    return out


def _graph(op, data):
    inputs, params, diff = draw_case(op, data)
    inputs = _edged(data, inputs, diff) if data.draw(st.booleans(), label="edges") else inputs
    outputs = outputs_of(op, params)
    f = outputs[data.draw(st.integers(0, len(outputs) - 1), label="output")]
    leaves = [Tensor(x, requires_grad=i in diff) for i, x in enumerate(inputs)]
    try:
        with np.errstate(all="ignore"):
            out = f(*leaves)
    except EngineError:
        assume(False)
    assume(out.requires_grad)
    return leaves, out


def _draw_array(data, shape: tuple, elements, label: str, dtype=np.float64) -> np.ndarray:
    size = int(np.prod(shape))
    return np.array(data.draw(st.lists(elements, min_size=size, max_size=size), label=label), dtype=dtype).reshape(shape)


@pytest.mark.parametrize("op", DIFFERENTIABLE, ids=ids)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_each_vjp_keeps_the_unguarded_pass_equal_or_nan(op, data):
    leaves, out = _graph(op, data)
    g = _draw_array(data, out.shape, GRADIENTS, "g")
    holes = _draw_array(data, out.shape, st.booleans(), "holes", dtype=bool)
    g_unguarded = np.where(holes, np.nan, g)  # equal to g except where nan
    with np.errstate(all="ignore"):
        guarded = _pass(out, g, guarded=True)
        unguarded = _pass(out, g_unguarded, guarded=False)
    assert unguarded.keys() == guarded.keys()
    if NAN_GUARD.dropped:  # the VJP said it turned a nan into a number: backprop takes the guarded pass
        return
    for leaf in leaves:
        if leaf in guarded:  # (none for an output that passes no gradient back, slogdet's sign)
            got, want = unguarded[leaf], guarded[leaf]
            ok = _same_bits(got, want) | np.isnan(np.asarray(got))
            assert ok.all(), f"{op.name}: unguarded {got} against guarded {want} (g {g}, nan at {holes})"


@pytest.mark.parametrize("op", DIFFERENTIABLE, ids=ids)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_backprop_gives_the_guarded_pass_bit_for_bit(op, data):
    # Two layers, so a nan the guard would have made 0 meets a second VJP: op, then a
    # selection by the forward's values (relu) or a product, seeded with zeros and nans.
    leaves, out = _graph(op, data)
    top = data.draw(st.sampled_from(["relu", "mul", "exp"]), label="top")
    with np.errstate(all="ignore"):
        y = out.relu() if top == "relu" else out * out if top == "mul" else out.exp()
    seed = _draw_array(data, y.shape, GRADIENTS, "seed")
    with np.errstate(all="ignore"):
        want = _pass(y, seed, guarded=True)
        got = backprop(y, seed)
    assert got.keys() == want.keys()
    for node, g in want.items():
        assert np.asarray(got[node]).shape == np.asarray(g).shape
        assert _same_bits(got[node], g).all(), f"{op.name} then {top}: {got[node]} against {g}"


def test_a_nan_the_guard_removes_takes_the_guarded_pass():
    # sqrt'(0) is inf; with g = 0 there the guard makes 0 * inf a 0, not nan.
    x = Tensor(np.array([0.0, 4.0]), requires_grad=True)
    y = x.sqrt()
    assert backprop(y, np.array([0.0, 1.0]))[x].tolist() == [0.0, 0.25]
    x.grad = None
    (y * Tensor(np.array([0.0, 1.0]))).sum().backward()
    assert x.grad.tolist() == [0.0, 0.25]


def test_a_nan_dropped_by_a_vjp_takes_the_guarded_pass():
    # L is used twice: sqrt(L)'s VJP gives 0 * inf at L = 0, which the guard makes 0, so
    # L's gradient is 0 + 1 = 1 there; unguarded it is nan, and logcumsumexp's VJP drops a
    # nan (its sums by sign pass it nothing). Without its word the pass would stand, wrong.
    x = Tensor(np.array([0.0, 0.0]), requires_grad=True)
    L = x.logcumsumexp() - Tensor(np.array([0.0, 0.0]))
    y = (L.sqrt() * Tensor(np.array([0.0, 1.0]))).sum() + L.sum()
    with np.errstate(all="ignore"):
        want = _pass(y, np.array(1.0), guarded=True)[x]
        unguarded = _pass(y, np.array(1.0), guarded=False)[x]
        got = backprop(y, np.array(1.0))[x]
    assert NAN_GUARD.dropped and not np.isnan(unguarded).any() and not np.array_equal(unguarded, want)
    assert got.tolist() == want.tolist()
    assert np.isfinite(want).all()


def test_every_op_of_the_families_promises_to_keep_nans():
    # The promise the tests above hold them to; backprop trusts it.
    assert [op.name for op in DIFFERENTIABLE if not op.keeps_nan] == []


@pytest.mark.parametrize("promised", [None, True])
def test_an_op_defined_elsewhere_takes_the_guarded_pass_unless_it_promises(promised):
    # A VJP that eats a nan (np.fmax drops it) without saying so (found by a helper's
    # attack): sqrt's 0 * inf at 0 reaches it as nan unguarded, 0 guarded, and the guarded
    # answer is fmax(0, -1) = 0 where the unguarded pass would keep fmax(nan, -1) = -1.
    defop("eats_nan", lambda x: x * 1.0, (lambda m, g, ans, x: np.fmax(g, -1.0),), doc="test", category="test",
          check=Check(), keeps_nan=promised)
    try:
        x = Tensor(np.array([0.0, 2.0]), requires_grad=True)
        op = REGISTRY["eats_nan"]
        y = (op(x).sqrt() * Tensor(np.array([0.0, 1.0]))).sum()
        assert op.keeps_nan is bool(promised)
        with np.errstate(all="ignore"):
            guarded = _pass(y, np.array(1.0), guarded=True)[x]
            got = backprop(y, np.array(1.0))[x]
        assert guarded[0] == 0.0
        assert got.tolist() == (guarded.tolist() if not promised else [-1.0, guarded[1]])
    finally:
        unregister("eats_nan")
