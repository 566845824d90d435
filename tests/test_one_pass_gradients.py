"""Many gradients from one backward pass: grad(L, (W1, b1, W2)) as torch.autograd.grad
takes a list of inputs, value_and_grad with a tuple of argnums, a training step of
examples/train_mlp.gc; against PyTorch float64, counting the engine's passes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcalc.autodiff.backprop import PASSES
from gradcalc.parser import LanguageError, Session

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(4)
X, W1, b1, W2 = RNG.normal(size=(5, 3)), RNG.normal(size=(3, 4)), RNG.normal(size=4), RNG.normal(size=(4, 1))
MODEL = "def model(W1, b1, W2) = sum(tanh(X @ W1 + b1) @ W2 ** 2)\n"


def run(source):
    s = Session()
    for name, value in {"X": X, "W1": W1, "b1": b1, "W2": W2}.items():
        s.assign(name, s.backend.from_array(value))
    return s, s.run_source(source)


def torch_gradients():
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (W1, b1, W2)]
    L = (torch.tanh(torch.tensor(X) @ ts[0] + ts[1]) @ ts[2] ** 2).sum()
    return [g.numpy() for g in torch.autograd.grad(L, ts)]


@pytest.mark.parametrize("spelling", ["(W1, b1, W2)", "[W1, b1, W2]"])
def test_grad_by_a_tuple_of_variables_is_one_pass_and_torchs_gradients(spelling):
    before = PASSES.backward
    _, results = run(MODEL + f"grad(model(W1, b1, W2), {spelling})")
    grads = results[-1].value
    assert isinstance(grads, tuple) and len(grads) == 3
    assert PASSES.backward - before == 1
    for got, want in zip(grads, torch_gradients()):
        np.testing.assert_allclose(got.data, want, rtol=1e-12)


def test_value_and_grad_with_a_tuple_of_argnums_is_one_pass():
    before = PASSES.backward
    _, results = run(MODEL + "value_and_grad(model, argnums=(0, 1, 2))(W1, b1, W2)")
    value, grads = results[-1].value
    assert PASSES.backward - before == 1
    for got, want in zip(grads, torch_gradients()):
        np.testing.assert_allclose(got.data, want, rtol=1e-12)


def test_unpacked_gradients_inside_no_grad_are_constants_from_a_plain_pass():
    s, _ = run(MODEL + "L = model(W1, b1, W2)\nwith no_grad:\n    gW1, gb1, gW2 = grad(L, (W1, b1, W2))\n")
    for name, want in zip(("gW1", "gb1", "gW2"), torch_gradients()):
        got = s.variables[name]
        np.testing.assert_allclose(got.data, want, rtol=1e-12)
        assert not got.requires_grad  # no graph was recorded for it


def test_jacobian_by_a_tuple_is_one_pass():
    before = PASSES.backward
    _, results = run("jacobian(tanh(X @ W1 + b1), (W1, b1))")
    jw, jb = results[-1].value
    assert PASSES.backward - before == 1
    assert jw.shape == (5, 4, 3, 4) and jb.shape == (5, 4, 4)
    tw, tb = torch.autograd.functional.jacobian(lambda w, b: torch.tanh(torch.tensor(X) @ w + b), (torch.tensor(W1), torch.tensor(b1)))
    np.testing.assert_allclose(jw.data, tw.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(jb.data, tb.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("source", "words"), [
    ("grad(model(W1, b1, W2), (W1, 2 * b1))", "computed in place"),
    ("hessian(model(W1, b1, W2), (W1, b1))", "takes one variable"),
    ("with no_grad: g = grad(model(W1, b1, W2), (W1, b1))", "no graph to differentiate"),
])
def test_bad_tuples_of_variables_are_refused_at_the_place(source, words):
    with pytest.raises(LanguageError) as err:
        run(MODEL + source)
    assert words in err.value.message and err.value.line is not None


def test_a_training_step_of_the_example_is_one_backward_pass():
    """examples/train_mlp.gc takes all six gradients of a step in one plain backward pass."""
    source = (ROOT / "examples" / "train_mlp.gc").read_text()
    steps = source.replace("range(100)", "range(7)").split("losses[::10]")[0]
    before = PASSES.backward
    Session().run_source(steps)
    assert PASSES.backward - before == 7


def test_the_example_trains_through_the_command():
    done = subprocess.run([sys.executable, "-m", "gradcalc", "run", str(ROOT / "examples" / "train_mlp.gc"), "--digits", "4"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "value: 1" in done.stdout  # accuracy 1 on the two moons
