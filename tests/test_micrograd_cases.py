"""micrograd's published test cases, on both engines (numbers from micrograd's test_engine.py)."""
import pytest

from gradcalc.autodiff import Tensor, Value


def tensor(x):
    return Tensor(x, requires_grad=True)


ENGINES = [pytest.param(Value, id="scalar"), pytest.param(tensor, id="tensor")]


def value_of(v):
    return float(v.data)


@pytest.mark.parametrize("make", ENGINES)
def test_sanity_check(make):
    x = make(-4.0)
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    assert value_of(y) == -20.0
    assert float(x.grad) == 46.0


@pytest.mark.parametrize("make", ENGINES)
def test_more_ops(make):
    a = make(-4.0)
    b = make(2.0)
    c = a + b
    d = a * b + b**3
    c += c + 1
    c += 1 + c + (-a)
    d += d * 2 + (b + a).relu()
    d += 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g += 10.0 / f
    g.backward()
    assert value_of(g) == pytest.approx(24.70408163265306, rel=1e-12)
    assert float(a.grad) == pytest.approx(138.83381924198252, rel=1e-12)
    assert float(b.grad) == pytest.approx(645.5772594752186, rel=1e-12)


@pytest.mark.parametrize("make", ENGINES)
def test_backward_twice_adds_the_leaf_gradient_once_more(make):
    # micrograd gives 27 then 72 here: its interior grads compound.
    x = make(3.0)
    y = x * x * x
    y.backward()
    assert float(x.grad) == 27.0
    y.backward()
    assert float(x.grad) == 54.0


@pytest.mark.parametrize("make", ENGINES)
def test_scalar_mixing_on_either_side(make):
    a = make(3.0)
    assert value_of(2 * a) == 6.0
    assert value_of(a / 2) == 1.5
    assert value_of(2 - a) == -1.0
    assert value_of(2 / a) == pytest.approx(2 / 3)
    assert value_of(a - 2) == 1.0
    assert value_of(-a) == -3.0
