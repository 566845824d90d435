"""The PyTorch engine's indexing (torch_ops.op_getitem, which `gradcalc export --to torch`
copies too) against NumPy's, on generated indexes: ints, slices of every step (negative
ones included, which PyTorch's own slicing refuses), None, ..., masks and arrays of whole
numbers. The values must be NumPy's, and the gradient of a weighted sum of the result
must be the weights scattered back to where NumPy's index reads them (np.add.at)."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from gradcalc.parser.engines.torch_ops import op_getitem  # noqa: E402  (after the skip: it imports torch)

from . import launch  # noqa: E402


@st.composite
def indexed(draw: Any) -> tuple[np.ndarray, tuple[Any, ...]]:
    """An array of 1 to 3 axes and an index of it as the language passes one (its parts
    Python ints, slices, None, ..., NumPy arrays of whole numbers or a mask): parts for
    some leading axes, or for some trailing ones after a `...`."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)))
    count = draw(st.integers(0, len(shape)))
    trailing = draw(st.booleans())
    axes = shape[len(shape) - count:] if trailing else shape[:count]
    parts: list[Any] = []
    advanced = False
    for n in axes:
        if draw(st.integers(0, 5)) == 0:
            parts.append(None)  # (a new axis, which reads none)
        kind = draw(st.sampled_from(["slice", "slice", "slice", "int", "array", "mask"]))
        if kind == "int" and n:
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "array" and n and not advanced:
            parts.append(np.array(draw(st.lists(st.integers(-n, n - 1), max_size=4)), dtype=np.intp))
            advanced = True
        elif kind == "mask" and not advanced:
            parts.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool))
            advanced = True
        else:
            bound = st.none() | st.integers(-n - 2, n + 2)
            parts.append(slice(draw(bound), draw(bound), draw(st.none() | st.integers(-3, 3).filter(bool))))
    if trailing:
        parts.insert(0, Ellipsis)
    elif draw(st.booleans()):
        parts.append(Ellipsis)
    data = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape) * 0.5
    return data, tuple(parts)


@settings(max_examples=300, deadline=None)
@given(indexed())
def test_getitem_on_torch_is_numpys(case: tuple[np.ndarray, tuple[Any, ...]]) -> None:
    data, index = case
    expected = data[index]
    x = torch.tensor(data, requires_grad=True)
    out = op_getitem(x, index if len(index) != 1 else index[0])
    np.testing.assert_array_equal(out.detach().numpy(), expected, err_msg=repr(index))
    weights = np.arange(1.0, 1.0 + expected.size).reshape(expected.shape)
    (grad,) = torch.autograd.grad((out * torch.tensor(weights)).sum(), x, allow_unused=True)
    scattered = np.zeros_like(data)
    np.add.at(scattered, index, weights)
    np.testing.assert_array_equal(np.zeros_like(data) if grad is None else grad.numpy(), scattered, err_msg=repr(index))


X = "[[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]"


@pytest.mark.parametrize(("source", "binding", "value", "gradient"), [
    ("x[::-1] * [1.0, 10.0, 100.0]", "x=[0.5, -1.0, 2.0]", [2.0, -10.0, 50.0], [100.0, 10.0, 1.0]),
    ("x[2::-2]", "x=[0.5, -1.0, 2.0]", [2.0, 0.5], [1.0, 0.0, 1.0]),
    ("x[-1:0:-1] * x[1:]", "x=[0.5, -1.0, 2.0]", [-2.0, -2.0], [0.0, 4.0, -2.0]),  # 2 x1 x2
    # an int and an array set apart by a slice: NumPy puts their axis first (PyTorch's own
    # indexing gave [[1, 3], [4, 6]], the transpose)
    ("X[0, :, [0, 2]]", f"X={X}", [[1.0, 4.0], [3.0, 6.0]], [[[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]], [[0.0] * 3, [0.0] * 3]]),
])
def test_indexing_through_the_command_on_torch(source: str, binding: str, value: list[Any], gradient: list[Any]) -> None:
    """`gradcalc eval ... --engine torch` gives NumPy's numbers: its values, and the
    gradient of their sum, where each element read gets 1 per read."""
    done = launch.run(["eval", source, binding, "--engine", "torch", "--json"], timeout=120)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    np.testing.assert_allclose(record["value"], value)
    np.testing.assert_allclose(next(iter(record["grads"].values())), gradient)


def test_the_numbers_of_a_tensor_inside_torch_func_grad() -> None:
    """Inside torch.func.grad every op's result is wrapped and has no storage to copy; the
    torch library reads its numbers all the same, with their dtype and shape (an empty
    index keeps its integers), and refuses them inside vmap, where they differ by row."""
    from torch.func import grad, vmap

    from gradcalc.parser.engines.library import ValueDependent, load

    library = load("torch", "cpu")
    seen: list[np.ndarray] = []

    def f(z: Any) -> Any:
        seen.append(library.host(torch.zeros((0, 3), dtype=torch.int64) + 1))
        seen.append(library.host(z * 2))
        return z.sum()

    grad(f)(torch.tensor([0.5, -1.0]))
    assert seen[0].dtype == np.int64 and seen[0].shape == (0, 3)
    np.testing.assert_array_equal(seen[1], [1.0, -2.0])
    with pytest.raises(ValueDependent):
        vmap(lambda r: library.host(r * 2))(torch.ones((2, 3)))
