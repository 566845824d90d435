"""examples/train_mlp.gc, micrograd's MLP trained in the language: through the real command,
the loss at every tenth step against the same training written in PyTorch float64, the first
steps against micrograd itself, and the loss going down to a classifier that is right on the
data. The data and the first weights are recomputed here with NumPy (the language's rand and
randn are NumPy's default_rng with the given seed), not read back from gradcalc."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from .test_cli import gradcalc

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_mlp.gc"
SIZES = [(2, 16), (16, 16), (16, 1)]


def data() -> tuple[np.ndarray, np.ndarray]:
    t = np.linspace(0, np.pi, 20)
    upper = np.stack([np.cos(t), np.sin(t)], axis=1)
    lower = np.stack([1 - np.cos(t), 0.5 - np.sin(t)], axis=1)
    X = np.concatenate([upper, lower]) + 0.1 * np.random.default_rng(0).standard_normal((40, 2))
    return X, np.concatenate([np.ones(20), -np.ones(20)])


def first_weights() -> list[np.ndarray]:
    """W1, b1, W2, b2, W3, b3 as the example draws them."""
    params = []
    for seed, shape in enumerate(SIZES, start=1):
        params += [np.random.default_rng(seed).random(shape) * 2 - 1, np.zeros(shape[1])]
    return params


def run(source: str) -> list[dict]:
    done = gradcalc("run", "--json", "-", stdin=source)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def torch_losses(steps: int) -> tuple[list[float], float]:
    torch = pytest.importorskip("torch")
    X, y = (torch.tensor(a, dtype=torch.float64) for a in data())
    params = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in first_weights()]
    W1, b1, W2, b2, W3, b3 = params

    def score():
        return (torch.relu(torch.relu(X @ W1 + b1) @ W2 + b2) @ W3 + b3)[:, 0]

    losses = []
    for k in range(steps):
        loss = torch.relu(1 - y * score()).mean() + 1e-4 * sum((p**2).sum() for p in params)
        losses.append(loss.item())
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= (1.0 - 0.9 * k / 100) * g
    with torch.no_grad():
        accuracy = ((score() > 0) == (y > 0)).double().mean().item()
    return losses, accuracy


def test_the_example_trains_as_pytorch_does_and_the_loss_goes_down():
    shown, accuracy, check = run(EXAMPLE.read_text())
    expected, expected_accuracy = torch_losses(100)
    assert shown["value"] == pytest.approx(expected[::10], rel=1e-9)
    assert accuracy["value"] == expected_accuracy == 1.0
    assert check["status"] == "pass"
    losses = shown["value"]
    assert losses[-1] < losses[0] / 40     # 0.56 down to 0.012
    assert sum(b < a for a, b in zip(losses, losses[1:])) >= 7   # down at most of the marks


def test_the_first_steps_match_micrograd():
    micrograd = pytest.importorskip("micrograd.nn")
    steps = 3
    source = EXAMPLE.read_text().replace("range(100)", f"range({steps})") + "\nlosses\n"
    losses = run(source)[-1]["value"]

    X, y = data()
    model = micrograd.MLP(2, [16, 16, 1])
    for layer, W, b in zip(model.layers, first_weights()[::2], first_weights()[1::2]):
        for j, neuron in enumerate(layer.neurons):
            for i, w in enumerate(neuron.w):
                w.data = float(W[i, j])
            neuron.b.data = float(b[j])
    expected = []
    for k in range(steps):
        scores = [model(list(map(float, row))) for row in X]
        data_loss = sum((1 + -yi * si).relu() for yi, si in zip(y, scores)) * (1.0 / len(y))
        loss = data_loss + 1e-4 * sum(p * p for p in model.parameters())
        expected.append(loss.data)
        model.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.data -= (1.0 - 0.9 * k / 100) * p.grad
    assert losses == pytest.approx(expected, rel=1e-12)
