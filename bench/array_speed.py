"""The workloads of "transforms at array speed" (issue 37): vmap, per-example gradients,
Jacobians, Hessians and a training step, each written once over the libraries that run
it (gradcalc's Python API, PyTorch's torch.func, JAX under jax.jit), beside the same
numbers computed by hand in NumPy and through gradcalc's language in a Session.

    V(x, W) = sum(tanh(x @ W) ** 2)    x a row of 8, W 8 x 8: vmap(V) and vmap(grad(V))
    f(x) = tanh(W @ x)                 x of n, W n x n: jacrev(f), jacfwd(f)
    h(x) = sum(tanh(W @ x))            hessian(h)
    the MLP of examples/train_mlp.gc   2 -> 16 -> 16 -> 1, relu, 40 points, max-margin + L2

Every workload returns a function of no arguments that computes the numbers once and
gives (a number, [arrays]) for the suite's agreement check: all float64, on one thread
(bench/run.py sets OPENBLAS_NUM_THREADS, XLA_FLAGS; the worker torch.set_num_threads).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Result = tuple[float, list[np.ndarray]]
Workload = Callable[[], Result]

ROW = 8  # the length of a row of vmap's data
ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


# ---- the data, the same for every contender ------------------------------------------------------


def rows_data(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """X, rows of 8 standard normal numbers; W, 8 x 8, scaled so that tanh is not flat."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, ROW)), rng.standard_normal((ROW, ROW)) / np.sqrt(ROW)


def square_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """W, n x n, and x, n: W @ x has entries of about unit size."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n)


MLP_SIZES = (2, 16, 16, 1)
LEARNING_RATE = 0.1


def mlp_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """examples/train_mlp.gc's problem: 20 points on each of two half-moons with a little
    noise, labels +1 and -1, weights uniform in [-1, 1) and zero biases (NumPy's draws)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, np.pi, 20)
    upper = np.stack([np.cos(t), np.sin(t)], axis=1)
    lower = np.stack([1 - np.cos(t), 0.5 - np.sin(t)], axis=1)
    X = np.concatenate([upper, lower]) + 0.1 * rng.standard_normal((40, 2))
    y = np.concatenate([np.ones(20), -np.ones(20)])
    params: list[np.ndarray] = []
    for nin, nout in zip(MLP_SIZES, MLP_SIZES[1:]):
        params += [rng.uniform(-1, 1, (nin, nout)), np.zeros(nout)]
    return X, y, params


# ---- the libraries, behind one interface ------------------------------------------------------------


@dataclass
class Library:
    """What a workload needs of an autodiff library: its array functions (`m.tanh`,
    `m.sum`, `m.mean`), its transformations with JAX's signatures, how arrays go in and
    out, and `compile` (jax.jit; nothing for the others)."""

    m: Any
    relu: Callable[[Any], Any]
    vmap: Callable[[Callable[..., Any], tuple[int | None, ...]], Callable[..., Any]]
    grad: Callable[..., Callable[..., Any]]
    jacrev: Callable[[Callable[..., Any]], Callable[..., Any]]
    jacfwd: Callable[[Callable[..., Any]], Callable[..., Any]]
    hessian: Callable[[Callable[..., Any]], Callable[..., Any]]
    array: Callable[[np.ndarray], Any]
    numpy: Callable[[Any], np.ndarray]
    compile: Callable[[Callable[..., Any]], Callable[..., Any]] = lambda f: f


def gradcalc_api() -> Library:
    from gradcalc.autodiff import Tensor, grad, hessian, jacfwd, jacrev, ops, vmap

    return Library(ops, ops.relu, lambda f, axes: vmap(f, in_axes=axes), lambda f, argnums=0: grad(f, argnums=argnums),
                   jacrev, jacfwd, hessian, Tensor, lambda t: t.data)


def torch_func() -> Library:
    import torch
    import torch.func as tf

    torch.set_num_threads(1)
    return Library(torch, torch.relu, lambda f, axes: tf.vmap(f, in_dims=axes), lambda f, argnums=0: tf.grad(f, argnums=argnums),
                   tf.jacrev, tf.jacfwd, tf.hessian, torch.from_numpy, lambda t: t.detach().numpy())


def jax_jit() -> Library:
    os.environ.setdefault("XLA_FLAGS", ONE_THREAD_XLA)  # (read when jax first starts its CPU client)
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # float64, as every other contender
    return Library(jnp, jax.nn.relu, lambda f, axes: jax.vmap(f, in_axes=axes), lambda f, argnums=0: jax.grad(f, argnums=argnums),
                   jax.jacrev, jax.jacfwd, jax.hessian, jnp.asarray, np.asarray, compile=jax.jit)


LIBRARIES: dict[str, Callable[[], Library]] = {"gradcalc": gradcalc_api, "torch": torch_func, "jax": jax_jit}


# ---- the functions, written once over a library's array functions -----------------------------------


def per_row(m: Any) -> Callable[[Any, Any], Any]:
    """V(x, W) = sum(tanh(x @ W) ** 2)."""
    return lambda x, W: m.sum(m.tanh(x @ W) ** 2)


def layer(m: Any, W: Any) -> Callable[[Any], Any]:
    """f(x) = tanh(W @ x)."""
    return lambda x: m.tanh(W @ x)


def layer_sum(m: Any, W: Any) -> Callable[[Any], Any]:
    """h(x) = sum(tanh(W @ x))."""
    return lambda x: m.sum(m.tanh(W @ x))


def mlp_loss(lib: Library, X: Any, y: Any) -> Callable[..., Any]:
    """examples/train_mlp.gc's loss: mean(relu(1 - y * score)) + 1e-4 * (sum of squares)."""
    m, relu = lib.m, lib.relu

    def loss(W1: Any, b1: Any, W2: Any, b2: Any, W3: Any, b3: Any) -> Any:
        score = (relu(relu(X @ W1 + b1) @ W2 + b2) @ W3 + b3)[:, 0]
        l2 = m.sum(W1**2) + m.sum(b1**2) + m.sum(W2**2) + m.sum(b2**2) + m.sum(W3**2) + m.sum(b3**2)
        return m.mean(relu(1 - y * score)) + 1e-4 * l2

    return loss


def _vector(out: np.ndarray) -> Result:
    return float(np.sum(out)), [out]


# ---- vmap(V), vmap(grad(V)) ---------------------------------------------------------------------------

# argnums of grad(V): 0 differentiates by the row (the issue's `vmap(grad(V), in_axes=(0,
# None))(X, W)`, an 8-vector a row), 1 by the weights (an 8 x 8 matrix a row: the
# per-example gradients of training, as Opacus and DP-SGD take them).


def vmap_rows(library: str, rows: int, argnums: int | None = None) -> Workload:
    """vmap(V) over `rows` rows (argnums None), or vmap(grad(V, argnums))."""
    lib = LIBRARIES[library]()
    X, W = rows_data(rows)
    V = per_row(lib.m)
    mapped = lib.compile(lib.vmap(V if argnums is None else lib.grad(V, argnums), (0, None)))
    Xa, Wa = lib.array(X), lib.array(W)
    return lambda: _vector(lib.numpy(mapped(Xa, Wa)))


def vmap_rows_numpy(rows: int, argnums: int | None = None) -> Workload:
    """The same by hand: t = tanh(X @ W); V = sum of t**2 per row; its gradient by the
    row is (2 t (1 - t**2)) @ W.T, by the weights the outer product of x and 2 t (1 - t**2)."""
    X, W = rows_data(rows)

    def run() -> Result:
        t = np.tanh(X @ W)
        if argnums is None:
            return _vector(np.einsum("ij,ij->i", t, t))
        slope = 2 * t * (1 - t * t)
        return _vector(slope @ W.T if argnums == 0 else X[:, :, None] * slope[:, None, :])

    return run


# ---- Jacobians and the Hessian at n -----------------------------------------------------------------


def _diagonal_batches(on: bool, run: Workload) -> Workload:
    """`run`, with gradcalc's diagonal batches turned off while it runs unless `on` (and
    on again after: --smoke runs every workload in one process)."""
    if on:
        return run
    from gradcalc.autodiff import batching

    def without() -> Result:
        batching.DIAGONAL_BATCHES[0] = False
        try:
            return run()
        finally:
            batching.DIAGONAL_BATCHES[0] = True

    return without


def jacobian(library: str, mode: str, n: int, diagonal: bool = True) -> Workload:
    """jacrev(f)(x) or jacfwd(f)(x) (`mode`); `diagonal=False` turns gradcalc's diagonal
    batches off (the identity's rows as a dense batch: the ledger's comparison)."""
    lib = LIBRARIES[library]()
    W, x = square_data(n)
    jac = lib.compile(getattr(lib, mode)(layer(lib.m, lib.array(W))))
    xa = lib.array(x)
    return _diagonal_batches(diagonal, lambda: _vector(lib.numpy(jac(xa))))


def jacobian_numpy(n: int) -> Workload:
    """The closed form: d tanh(W x) / dx = (1 - tanh(W x)**2)[:, None] * W."""
    W, x = square_data(n)

    def run() -> Result:
        t = np.tanh(W @ x)
        return _vector((1 - t * t)[:, None] * W)

    return run


def hessian(library: str, n: int, diagonal: bool = True) -> Workload:
    """hessian(h)(x) for h(x) = sum(tanh(W @ x))."""
    lib = LIBRARIES[library]()
    W, x = square_data(n)
    hess = lib.compile(lib.hessian(layer_sum(lib.m, lib.array(W))))
    xa = lib.array(x)
    return _diagonal_batches(diagonal, lambda: _vector(lib.numpy(hess(xa))))


def hessian_numpy(n: int) -> Workload:
    """The closed form: W.T @ diag(-2 t (1 - t**2)) @ W, t = tanh(W x) (the diagonal
    applied as a scaling of W's rows, as anyone writing it by hand would)."""
    W, x = square_data(n)

    def run() -> Result:
        t = np.tanh(W @ x)
        return _vector(W.T @ ((-2 * t * (1 - t * t))[:, None] * W))

    return run


# ---- a training step ----------------------------------------------------------------------------------


def train_step(library: str) -> Workload:
    """One step of gradient descent: the loss, every weight's gradient from one backward
    pass (no graph recorded for the gradients), every weight stepped. The weights carry
    over from call to call, as in training; each call gives its loss and gradients."""
    lib = LIBRARIES[library]()
    X, y, initial = mlp_data()
    loss = mlp_loss(lib, lib.array(X), lib.array(y))
    if library == "gradcalc":
        from gradcalc.autodiff import Tensor, grad

        params = [Tensor(p, requires_grad=True) for p in initial]

        def gradcalc_step() -> Result:
            L = loss(*params)
            grads = grad(L, params)  # one backward pass, create_graph=False
            params[:] = [Tensor(p.data - LEARNING_RATE * g.data, requires_grad=True) for p, g in zip(params, grads)]
            return float(L.data), [g.data for g in grads]

        return gradcalc_step
    if library == "torch":
        import torch

        tensors = [torch.tensor(p, requires_grad=True) for p in initial]

        def torch_step() -> Result:
            L = loss(*tensors)
            grads = torch.autograd.grad(L, tensors)
            with torch.no_grad():
                for p, g in zip(tensors, grads):
                    p -= LEARNING_RATE * g
            return float(L.detach()), [g.numpy() for g in grads]

        return torch_step
    import jax

    @jax.jit
    def jitted(params: Sequence[Any]) -> Any:
        L, grads = jax.value_and_grad(lambda ps: loss(*ps))(params)
        return L, grads, [p - LEARNING_RATE * g for p, g in zip(params, grads)]

    state = [lib.array(p) for p in initial]

    def jax_step() -> Result:
        L, grads, state[:] = jitted(state)
        return float(L), [np.asarray(g) for g in grads]

    return jax_step


def train_step_numpy() -> Workload:
    """The same step by hand: forward keeping what backward needs, backward, the step."""
    X, y, params = mlp_data()
    count = len(y)

    def run() -> Result:
        W1, b1, W2, b2, W3, b3 = params
        a1 = X @ W1 + b1
        h1 = np.maximum(a1, 0.0)
        a2 = h1 @ W2 + b2
        h2 = np.maximum(a2, 0.0)
        margin = 1 - y * (h2 @ W3 + b3)[:, 0]
        L = np.maximum(margin, 0.0).mean() + 1e-4 * sum(np.sum(p * p) for p in params)
        g_score = (-y * (margin > 0) / count)[:, None]
        g_a2 = (g_score @ W3.T) * (a2 > 0)
        g_a1 = (g_a2 @ W2.T) * (a1 > 0)
        grads = [X.T @ g_a1, g_a1.sum(axis=0), h1.T @ g_a2, g_a2.sum(axis=0), h2.T @ g_score, g_score.sum(axis=0)]
        grads = [g + 2e-4 * p for g, p in zip(grads, params)]
        for p, g in zip(params, grads):
            p -= LEARNING_RATE * g
        return float(L), grads

    return run


# ---- the language: a statement run in a Session ------------------------------------------------------

TRAIN_STEP = """\
L = loss(W1, b1, W2, b2, W3, b3)
with no_grad:
    gW1, gb1, gW2, gb2, gW3, gb3 = grad(L, (W1, b1, W2, b2, W3, b3))
    W1 -= lr * gW1
    b1 -= lr * gb1
    W2 -= lr * gW2
    b2 -= lr * gb2
    W3 -= lr * gW3
    b3 -= lr * gb3
"""
MLP_DEFINITIONS = """\
def score(X, W1, b1, W2, b2, W3, b3) = (relu(relu(X @ W1 + b1) @ W2 + b2) @ W3 + b3)[:, 0]
def l2(W1, b1, W2, b2, W3, b3) = sum(W1**2) + sum(b1**2) + sum(W2**2) + sum(b2**2) + sum(W3**2) + sum(b3**2)
def loss(W1, b1, W2, b2, W3, b3) = mean(relu(1 - y * score(X, W1, b1, W2, b2, W3, b3))) + 1e-4 * l2(W1, b1, W2, b2, W3, b3)
"""
STATEMENTS = {  # what a user types, with the data bound as variables (as X=@data.npy binds)
    "vmap": ("def V(x, W) = sum(tanh(x @ W) ** 2)", "vmap(V, in_axes=(0, None))(X, W)"),
    "vmap grad": ("def V(x, W) = sum(tanh(x @ W) ** 2)", "vmap(grad(V), in_axes=(0, None))(X, W)"),
    "vmap grad W": ("def V(x, W) = sum(tanh(x @ W) ** 2)", "vmap(grad(V, argnums=1), in_axes=(0, None))(X, W)"),
    "jacrev": ("def f(x) = tanh(W @ x)", "jacrev(f)(x)"),
    "jacfwd": ("def f(x) = tanh(W @ x)", "jacfwd(f)(x)"),
    "hessian": ("def h(x) = sum(tanh(W @ x))", "hessian(h)(x)"),
    "train step": (MLP_DEFINITIONS + f"lr = {LEARNING_RATE}", TRAIN_STEP),
}


def language(workload: str, size: int = 0) -> Workload:
    """gradcalc's language: `workload`'s definitions run once, then its statement compiled
    once and run in the same Session at each call (a REPL line, a script's statement;
    `gradcalc eval` also reports the gradients of the value's sum, which is not timed)."""
    from gradcalc.autodiff import Tensor
    from gradcalc.parser import Session, compile_program

    definitions, statement = STATEMENTS[workload]
    if workload.startswith("vmap"):
        X, W = rows_data(size)
        data = {"X": X, "W": W}
    elif workload == "train step":
        X, y, params = mlp_data()
        data = {"X": X, "y": y, **dict(zip(("W1", "b1", "W2", "b2", "W3", "b3"), params))}
    else:
        W, x = square_data(size)
        data = {"W": W, "x": x}
    session = Session()
    session.run(compile_program(definitions), bindings={name: Tensor(a) for name, a in data.items()})
    program = compile_program(statement)

    def run() -> Result:
        results = session.run(program)
        if workload == "train step":
            grads = [session.variables[name].data for name in ("gW1", "gb1", "gW2", "gb2", "gW3", "gb3")]
            return float(session.variables["L"].data), grads
        return _vector(results[0].value.data)

    return run
