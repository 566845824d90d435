"""The transforms in the REPL: vmap, per-example gradients and one-pass gradients keep
the session's variables, and an error inside a batched function keeps them too."""
from __future__ import annotations

import numpy as np
import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from gradcalc.cli import render
from gradcalc.cli.repl import Repl, loop, make_prompt_session


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("NO_COLOR", "1")


def drive(text):
    repl = Repl(renderer=render.PlainRenderer(render.Style()))
    with create_pipe_input() as pipe:
        pipe.send_text(text)
        pipe.close()
        loop(repl, make_prompt_session(repl, input=pipe, output=DummyOutput()))
    return repl


def test_per_example_gradients_and_one_pass_gradients_in_the_repl(capsys):
    repl = drive(
        "X = [[1, 2], [3, 4], [5, 6]]\n"
        "def V(x) = sum(x ** 3)\n"
        "G = vmap(grad(V))(X)\n"
        "vmap(lambda r: r if r > 0 else 0)(X[0])\n"
        "w = [1, -1]\n"
        "gw, gX = grad(sum(X @ w) ** 2, (w, X))\n"
        "G\n"
    )
    captured = capsys.readouterr()
    X = np.array([[1, 2], [3, 4], [5, 6]], dtype=float)
    np.testing.assert_allclose(repl.session.variables["G"].data, 3 * X ** 2)
    assert "the condition of 'if' would differ from one row of the batch to another" in captured.err
    assert "value: [[3.0, 12.0], [27.0, 48.0], [75.0, 108.0]]" in captured.out  # G, after the error: nothing lost
    total = (X @ [1, -1]).sum()
    np.testing.assert_allclose(repl.session.variables["gw"].data, 2 * total * X.sum(0))
    np.testing.assert_allclose(repl.session.variables["gX"].data, 2 * total * np.tile([1, -1], (3, 1)))
