"""The workloads, each defined once; engines plug in through bench/engines.py.

Every workload returns (value, gradients) so the suite can check that the engines agree
before it compares their times.
"""
from __future__ import annotations

import ast
import math
import os
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from engines import ScalarEngine

# ---- scalar engines ---------------------------------------------------------------------------


def scalar_chain(E: ScalarEngine, cycles: int = 100) -> tuple[float, list[float], Any]:
    """A 7-op cycle (mul, add, tanh, exp, log, relu, pow) repeated: 700 ops by default."""
    x = E.leaf(0.5)
    y = x
    for _ in range(cycles):
        y = y * 0.9 + 0.1
        y = y.tanh().exp().log().relu() ** 2
    E.backward(y)
    return E.value(y), [E.grad(x)], y


def resident_bytes() -> int:
    """This process's resident memory now (Linux), or 0 where /proc is missing."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def scalar_deep_chain(E: ScalarEngine, n: int, memory: list[int] | None = None) -> tuple[float, list[float], Any]:
    """A chain of n nodes, each the only input of the next (tanh and relu alternating).
    With `memory`, appends the resident memory at the peak: after backward, while the
    whole graph and its gradients are alive."""
    x = E.leaf(0.5)
    y = x
    for _ in range(n // 2):
        y = y.tanh().relu()
    E.backward(y)
    if memory is not None:
        memory.append(resident_bytes())
    return E.value(y), [E.grad(x)], None


def tensor_deep_chain(n: int) -> tuple[float, list[float], Any]:
    """The deep chain on gradcalc's tensor engine (0-d tensors)."""
    from gradcalc.autodiff import Tensor

    x = Tensor(0.5, requires_grad=True)
    y = x
    for _ in range(n // 2):
        y = y.tanh().relu()
    y.backward()
    return y.item(), [float(x.grad)], None


def mlp_parameters(sizes: list[int], seed: int = 1337) -> list[list[list[float]]]:
    """Weights per layer: for each neuron, nin weights then a bias (micrograd's layout)."""
    rng = random.Random(seed)
    return [[[rng.uniform(-1, 1) for _ in range(nin + 1)] for _ in range(nout)] for nin, nout in zip(sizes, sizes[1:])]


DEMO_X = [[2.0, 3.0], [-1.0, -1.0], [0.5, 1.0], [1.0, -1.5], [-2.0, 0.5], [0.3, -0.7], [1.7, 1.1], [-0.4, 2.2]]
DEMO_Y = [1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0]


def mlp_data(samples: int, seed: int = 7) -> tuple[list[list[float]], list[float]]:
    """Two-feature points and +-1 labels; the first eight are the demo's."""
    rng = random.Random(seed)
    xs = DEMO_X + [[rng.uniform(-2, 2), rng.uniform(-2, 2)] for _ in range(max(samples - len(DEMO_X), 0))]
    ys = DEMO_Y + [1.0 if x[0] * x[1] > 0 else -1.0 for x in xs[len(DEMO_Y):]]
    return xs[:samples], ys[:samples]


def scalar_mlp(E: ScalarEngine, sizes: list[int] | None = None, samples: int = 8) -> tuple[float, list[float], Any]:
    """micrograd's demo: an MLP 2-16-16-1 (ReLU), max-margin loss over 8 samples, L2 term."""
    sizes = sizes or [2, 16, 16, 1]
    data_x, data_y = mlp_data(samples)
    layers = [[[E.leaf(w) for w in neuron] for neuron in layer] for layer in mlp_parameters(sizes)]
    params = [p for layer in layers for neuron in layer for p in neuron]
    scores = []
    for xs in data_x:
        act: list[Any] = list(xs)
        for depth, layer in enumerate(layers):
            out = []
            for neuron in layer:
                total = neuron[-1]
                for w, a in zip(neuron[:-1], act):
                    total = total + w * a
                out.append(total.relu() if depth < len(layers) - 1 else total)
            act = out
        scores.append(act[0])
    losses = [(1 + -y * s).relu() for y, s in zip(data_y, scores)]
    data_loss = sum(losses) * (1.0 / len(losses))
    reg = 1e-4 * sum(p * p for p in params)
    loss = data_loss + reg
    E.backward(loss)
    return E.value(loss), [E.grad(p) for p in params], loss


def tensor_mlp(sizes: list[int], samples: int) -> tuple[float, list[float], Any]:
    """The same MLP and loss on gradcalc's tensor engine: one node per layer op."""
    from gradcalc.autodiff import Tensor

    data_x, data_y = mlp_data(samples)
    layers = []
    for layer in mlp_parameters(sizes):
        weights = np.array([neuron[:-1] for neuron in layer]).T
        layers.append((Tensor(weights, requires_grad=True), Tensor(np.array([neuron[-1] for neuron in layer]), requires_grad=True)))
    h = Tensor(np.array(data_x))
    for depth, (W, b) in enumerate(layers):
        h = h @ W + b
        if depth < len(layers) - 1:
            h = h.relu()
    scores = h.reshape(-1)
    data_loss = (1 + -Tensor(np.array(data_y)) * scores).relu().mean()
    reg = sum(((W * W).sum() + (b * b).sum() for W, b in layers), Tensor(0.0)) * 1e-4
    loss = data_loss + reg
    loss.backward()
    grads: list[float] = []
    for W, b in layers:  # in the scalar engine's order: per neuron, weights then bias
        for j in range(W.shape[1]):
            grads += list(W.grad[:, j]) + [float(b.grad[j])]
    return loss.item(), grads, loss


# ---- tensor engines -----------------------------------------------------------------------------


def tensor_inputs(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.uniform(0.1, 0.9, (n, n)),
        "W": rng.uniform(-1, 1, (n, n)) / n,
        "B": rng.uniform(-0.1, 0.1, (n, n)),
        "C": rng.uniform(0.5, 1.5, (n, n)),
    }


def _chain(x: Any, W: Any, B: Any, C: Any, cycles: int) -> Any:
    """7 ops a cycle (matmul, add, tanh, mul, exp, log, relu) and a final sum; written
    once for every engine whose tensors have these methods."""
    y = x
    for _ in range(cycles):
        y = (y @ W + B).tanh() * C
        y = y.exp().log().relu()
    return y.sum()


def chain_gradcalc(d: dict[str, np.ndarray], cycles: int) -> tuple[float, np.ndarray]:
    from gradcalc.autodiff import Tensor

    x = Tensor(d["x"], requires_grad=True)
    out = _chain(x, Tensor(d["W"]), Tensor(d["B"]), Tensor(d["C"]), cycles)
    out.backward()
    return out.item(), x.grad


def chain_torch(d: dict[str, np.ndarray], cycles: int) -> tuple[float, np.ndarray]:
    import torch

    x = torch.tensor(d["x"], requires_grad=True)
    out = _chain(x, *(torch.tensor(d[k]) for k in ("W", "B", "C")), cycles)
    out.backward()
    return out.item(), x.grad.numpy()


def chain_numpy(d: dict[str, np.ndarray], cycles: int) -> tuple[float, np.ndarray]:
    """The same math by hand: forward keeping what backward needs, then backward."""
    W, B, C = d["W"], d["B"], d["C"]
    y = d["x"]
    tape = []
    for _ in range(cycles):
        t = np.tanh(y @ W + B)
        e = np.exp(t * C)
        lg = np.log(e)
        r = np.where(lg > 0, lg, 0.0)
        tape.append((t, e, lg))
        y = r
    out = y.sum()
    g = np.ones_like(y)
    for t, e, lg in reversed(tape):
        g = g * (lg > 0)
        g = g / e
        g = g * e
        g = g * C
        g = g * (1 - t * t)
        g = g @ W.T
    return float(out), g


def chain_autograd(d: dict[str, np.ndarray], cycles: int) -> tuple[float, np.ndarray]:
    import autograd.numpy as anp
    from autograd import value_and_grad

    W, B, C = d["W"], d["B"], d["C"]

    def f(x: Any) -> Any:
        y = x
        for _ in range(cycles):
            y = anp.tanh(anp.dot(y, W) + B) * C
            y = anp.exp(y)
            y = anp.log(y)
            y = anp.maximum(y, 0.0)
        return anp.sum(y)

    value, g = value_and_grad(f)(d["x"])
    return float(value), g


def _mlp_step(x: Any, W1: Any, W2: Any, W3: Any, b: Any) -> Any:
    """12 ops: three layers (relu, tanh, linear) and a halved mean squared error."""
    h1 = (x @ W1 + b).relu()
    h2 = (h1 @ W2 + b).tanh()
    out = h2 @ W3 + b
    diff = out - x
    return (diff * diff).mean() * 0.5


def _mlp_arrays(d: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [d["x"], d["W"], d["C"] / 8, d["W"].T.copy(), d["B"][0]]


def mlp_step_gradcalc(d: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
    from gradcalc.autodiff import Tensor

    x, *params = [Tensor(a, requires_grad=i > 0) for i, a in enumerate(_mlp_arrays(d))]
    loss = _mlp_step(x, *params)
    loss.backward()
    return loss.item(), params[0].grad


def mlp_step_torch(d: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
    import torch

    x, *params = [torch.tensor(a, requires_grad=i > 0) for i, a in enumerate(_mlp_arrays(d))]
    loss = _mlp_step(x, *params)
    loss.backward()
    return loss.item(), params[0].grad.numpy()


def mlp_step_numpy(d: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
    x, W1, W2, W3, b = _mlp_arrays(d)
    a1 = x @ W1 + b
    h1 = np.where(a1 > 0, a1, 0.0)
    h2 = np.tanh(h1 @ W2 + b)
    out = h2 @ W3 + b
    diff = out - x
    loss = 0.5 * np.mean(diff * diff)
    g_out = diff / diff.size
    g_h2 = g_out @ W3.T
    g_a2 = g_h2 * (1 - h2 * h2)
    g_h1 = g_a2 @ W2.T
    g_a1 = g_h1 * (a1 > 0)
    return float(loss), x.T @ g_a1


def _big_chain(x: Any, B: Any, C: Any) -> Any:
    """15 elementwise ops on large tensors, then a sum (x is used twice)."""
    y = x * 0.5 + B
    y = y.tanh() * C
    y = y.exp() - 1.0
    y = y * x + B
    y = y.sigmoid() * C
    y = y.sqrt() + y
    y = y * y - B
    return y.sum()


def big_chain_gradcalc(d: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
    from gradcalc.autodiff import Tensor

    x = Tensor(d["x"], requires_grad=True)
    out = _big_chain(x, Tensor(d["B"]), Tensor(d["C"]))
    out.backward()
    return out.item(), x.grad


def big_chain_numpy(d: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
    x, B, C = d["x"], d["B"], d["C"]
    a = x * 0.5 + B
    t = np.tanh(a)
    b = t * C
    e = np.exp(b)
    c = e - 1.0
    dd = c * x + B
    s = 0.5 * (1.0 + np.tanh(0.5 * dd))
    f = s * C
    r = np.sqrt(f)
    h = r + f
    y = h * h - B
    out = y.sum()
    g_h = 2 * h
    g_f = g_h / (2 * r) + g_h
    g_dd = g_f * C * s * (1 - s)
    g_x = g_dd * c
    g_c = g_dd * x
    g_b = g_c * e
    g_a = g_b * C * (1 - t * t)
    g_x = g_x + g_a * 0.5
    return float(out), g_x


def big_chain_torch(d: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
    import torch

    x = torch.tensor(d["x"], requires_grad=True)
    out = _big_chain(x, torch.tensor(d["B"]), torch.tensor(d["C"]))
    out.backward()
    return out.item(), x.grad.numpy()


# ---- parsing -------------------------------------------------------------------------------------


def long_expression(chars: int, seed: int = 0) -> str:
    """A valid expression (in gradcalc and in Python) of about `chars` characters."""
    rng = random.Random(seed)
    terms = ["x * 1.5", "tanh(y)", "2.25 * x * y", "exp(x / 3)", "(x - y) * 0.5", "log(1 + x * x)", "sigmoid(y) * 4"]
    parts: list[str] = []
    size = 0
    while size < chars:
        term = rng.choice(terms)
        parts.append(term)
        size += len(term) + 3
    return " + ".join(parts)


def long_program(chars: int) -> str:
    """About `chars` characters as a program of short statements (Python reads it too)."""
    return "\n".join(f"y{i} = {long_expression(90, seed=i)}" for i in range(max(chars // 100, 1)))


CALCULATOR = r"""
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul | product "/" atom -> div
?atom: NUMBER -> number | NAME -> var | NAME "(" sum ")" -> call | "(" sum ")"
%import common.CNAME -> NAME
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""


def parse_gradcalc(text: str) -> Callable[[], Any]:
    """Parse and compile to the stack machine's instructions, as every command does."""
    from gradcalc.parser import compile_program

    return lambda: compile_program(text)


def parse_lark_calculator(text: str) -> Callable[[], Any]:
    """The yardstick: Lark's LALR parser on a bare four-rule calculator grammar."""
    from lark import Lark

    calculator = Lark(CALCULATOR, parser="lalr")
    return lambda: calculator.parse(text)


def parse_python(text: str) -> Callable[[], Any]:
    return lambda: ast.parse(text)


# ---- gradient checks ----------------------------------------------------------------------------

WIDE_FUNCTION = "sum(tanh(x) * sigmoid(x) + exp(-x * x) / 2)"


def wide_check_gradcalc(n: int) -> Callable[[], Any]:
    """`check` of one scalar function of n inputs, in a session (the statement alone)."""
    from gradcalc.parser import Session, compile_program
    from gradcalc.parser.check_statements import make_check_handler

    session = Session(on_check=make_check_handler())
    session.run_source(f"x = randn({n}, seed=0)")
    program = compile_program(f"check {WIDE_FUNCTION}")

    def run() -> Any:
        [result] = session.run(program)
        if not result.outcome.passed:
            raise AssertionError(result.outcome.message)
        return result.outcome

    return run


def wide_check_torch(n: int) -> Callable[[], Any]:
    """The same function through torch.autograd.gradcheck (float64, full Jacobian)."""
    import torch

    x = torch.tensor(np.random.default_rng(0).standard_normal(n), requires_grad=True)

    def f(x: Any) -> Any:
        return (torch.tanh(x) * torch.sigmoid(x) + torch.exp(-x * x) / 2).sum()

    return lambda: torch.autograd.gradcheck(f, (x,))


def checks_file(n: int) -> str:
    """A gradcheck file of n scalar checks (five expressions over three variables)."""
    lines = ["x = 0.7", "y = -1.3", "z = 2.1"]
    exprs = ["tanh(x) * y + exp(z / 3)", "sigmoid(x * y) - log(z)", "relu(x) * sin(y) + z**2",
             "(x*y + exp(z)).relu()/x", "softplus(x - y) * cos(z)"]
    return "\n".join(lines + [f"check {exprs[i % len(exprs)]}" for i in range(n)]) + "\n"


def relative_error(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = max(float(np.max(np.abs(b))), 1e-300) if b.size else 1.0
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


__all__ = ["math"]
