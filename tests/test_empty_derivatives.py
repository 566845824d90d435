"""Derivatives with nothing in them: empty outputs, empty inputs and both, in every
transform of the language, through the real command, against torch.func in float64.

torch's own transforms each raise on some of these shapes ("stack expects a non-empty
TensorList", "select(): index 0 out of range"), so every Jacobian here is torch.func.jacrev's,
or where that raises (an empty output of a 0-d input), torch.autograd.functional.jacobian's
by forward mode."""
from __future__ import annotations

import json

import numpy as np
import pytest

from .test_cli import gradcalc


def run_results(tmp_path, program: str) -> list[tuple[np.ndarray, tuple[int, ...]]]:
    """(value, shape) of each expression statement of `program`, by `gradcalc run --json`."""
    script = tmp_path / "program.gc"
    script.write_text(program)
    done = gradcalc("run", "--json", str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    return [(np.asarray(r["value"], dtype=float), tuple(r["shape"])) for r in results]


def test_the_jacobian_of_an_empty_output_is_zeros_of_its_shape():
    done = gradcalc("eval", "--json", "jacobian(x[0:0] * 2, x)", "x=[1,2,3]")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert (result["value"], result["shape"], result["grads"]) == ([], [0, 3], {"x": [0.0, 0.0, 0.0]})


def test_check_lines_of_empty_values_pass_and_compare_shapes(tmp_path):
    script = tmp_path / "empty.gc"
    script.write_text(
        "x = [1., 2., 3.]\ne = zeros(0)\nm = zeros(0, 3)\ns = 2.0\n"
        "check x[0:0] * 2\ncheck x[0:0] * s mode=forward\ncheck e * 2 wrt e\ncheck sum(e ** 2) + s\n"
        "check sum(m, axis=1)\ncheck grad(sum(x[0:0] ** 2), x)\ncheck hvp(lambda t: sum(t ** 3), e, e)\n"
        "check jacobian(x[0:0] * 2, x) == zeros(0, 3)\ncheck jacfwd(lambda t: t * 2)(e) == zeros(0, 0)\n"
        "check hessian(sum(m ** 3), m) == zeros(0, 3, 0, 3)\ncheck jacobian(x[0:0] * 2, x) == zeros(3, 0)\n"
    )
    done = gradcalc("check", "--json", str(script))
    statuses = [c["status"] for c in json.loads(done.stdout)["checks"]]
    assert statuses == ["pass"] * 10 + ["fail"], done.stdout  # the last: shapes (0, 3) and (3, 0) differ


torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")

# An input of each kind: empty, empty of two axes (both ways), a vector and a 0-d number.
INPUTS = [
    ("zeros(0)", np.zeros(0)), ("zeros(0, 3)", np.zeros((0, 3))), ("zeros(3, 0)", np.zeros((3, 0))),
    ("[0.5, -1.0, 2.0]", np.array([0.5, -1.0, 2.0])), ("0.75", np.array(0.75)),
]
# (gradcalc's body of f(t), torch's f, whether f is a scalar)
BODIES = [
    ("t.reshape(-1)[0:0] * 2", lambda t: t.reshape(-1)[0:0] * 2, False),  # empty output
    ("sin(t) * 2", lambda t: torch.sin(t) * 2, False),  # output shaped as the input
    ("zeros(0, 2) * sum(t ** 2)", lambda t: torch.zeros(0, 2, dtype=torch.float64) * (t ** 2).sum(), False),
    ("sum(t ** 3) + 1", lambda t: (t ** 3).sum() + 1, True),
]


def _jacobian(f, x):
    try:
        return tf.jacrev(f)(x)
    except IndexError:
        return torch.autograd.functional.jacobian(f, x, vectorize=True, strategy="forward-mode")


def _forms(k: int, oracle, scalar: bool, x) -> dict[str, object]:
    """Each transform of f_k at x, written in the language, and torch's value of it (J v
    as the Jacobian times v: torch.func.jvp raises on an empty output of a 0-d input)."""
    ones = torch.ones_like(x)
    jacobian = _jacobian(oracle, x)
    forms = {
        f"jacobian(f{k}(x), x)": jacobian,
        f"jacrev(f{k})(x)": jacobian,
        f"jacfwd(f{k})(x)": jacobian,
        f"jvp(f{k}, x, x * 0 + 1)[1]": torch.tensordot(jacobian, ones, dims=x.ndim),
        f"vjp(f{k}, x)[1](f{k}(x) * 0 + 1)[0]": tf.vjp(oracle, x)[1](torch.ones_like(oracle(x)))[0],
        f"grad(sum(f{k}(x)), x)": tf.grad(lambda t: oracle(t).sum())(x),
        f"grad(lambda t: sum(f{k}(t)))(x)": tf.grad(lambda t: oracle(t).sum())(x),
    }
    if scalar:
        hessian = tf.jacrev(tf.jacrev(oracle))(x)
        forms |= {
            f"hessian(f{k}(x), x)": hessian, f"hessian(f{k})(x)": hessian, f"jacfwd(jacrev(f{k}))(x)": hessian,
            f"jacrev(jacrev(f{k}))(x)": hessian, f"jacrev(jacfwd(f{k}))(x)": hessian,
            f"hvp(f{k}, x, x * 0 + 1)": torch.tensordot(hessian, ones, dims=x.ndim),
            f"value_and_grad(f{k})(x)[1]": tf.grad(oracle)(x),
        }
    return forms


@pytest.mark.parametrize(("given", "data"), INPUTS, ids=[text for text, _ in INPUTS])
def test_every_transform_of_empty_values_agrees_with_torch(given, data, tmp_path):
    x = torch.tensor(data, dtype=torch.float64)
    forms: dict[str, object] = {}
    for k, (_, oracle, scalar) in enumerate(BODIES):
        forms |= _forms(k, oracle, scalar, x)
    defs = "".join(f"def f{k}(t) = {body}\n" for k, (body, _, _) in enumerate(BODIES))
    got = run_results(tmp_path, f"x = {given}\n{defs}" + "\n".join(forms) + "\n")
    for (form, expected), (value, shape) in zip(forms.items(), got):
        want = expected.detach().numpy()
        assert shape == want.shape, form
        np.testing.assert_allclose(value.reshape(shape), want, rtol=1e-12, atol=1e-14, err_msg=form)
