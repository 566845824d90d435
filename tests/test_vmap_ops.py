"""Every op in the registry batches by its rule, as JAX's lax_vmap_op_test holds each
primitive to stacked per-slice results.

For each op (its own Check gives the inputs): vmap(op) over a batch of three slices,
mapped along axis 0, along axis 1, and with each input in turn passed whole
(in_axes=None), equals the op applied to each slice and stacked: values, the gradient of a
weighted sum (first order) and its Hessian-vector products (second order). The batched
Jacobians are held to the same standard: jacrev (one backward pass of a batch of
cotangents through the op's VJP) and jacfwd (one forward pass of a batch of tangents
through its JVP) equal the plain passes made one row or column at a time.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from gradcalc.autodiff import REGISTRY, Tensor, jacfwd, jacrev, vmap
from gradcalc.autodiff.backprop import backprop
from gradcalc.autodiff.derivatives import grad
from gradcalc.autodiff.forward import push_forward, tangent_of

OPS = [op for op in REGISTRY.values() if op.n_in != 0]
BATCH = 3
# Ops without a Check (no gradient to check) whose inputs need a shape of their own.
UNCHECKED_SHAPES = {"item": ((1,),)}
TOL = dict(rtol=1e-10, atol=1e-10)


def ids(op):
    return op.name


@pytest.mark.parametrize("op", OPS, ids=ids)
def test_every_op_has_a_batching_rule(op):
    assert op.batch is not None, f"op {op.name} has no batching rule: give one in its defop (batch=...)"


def _draw(op, rng, like=None):
    """One example (inputs, params) of `op` from its Check; with `like`, one of the same
    shapes and parameters (a slice of the same batch)."""
    spec = op.check
    for _ in range(200):
        if spec is not None and spec.make is not None:
            inputs, params = spec.make(rng)
        else:
            shapes = spec.shapes[0] if spec is not None else UNCHECKED_SHAPES.get(op.name, ((3,),) * (op.n_in or 1))
            if like is not None:
                shapes = tuple(np.shape(x) for x in like[0])
            low, high = (spec.low, spec.high) if spec is not None else (-2.0, 2.0)
            inputs = [rng.uniform(low, high, shape) for shape in shapes]
            params = dict(spec.params) if spec is not None else {}
        if like is not None and ([np.shape(x) for x in inputs] != [np.shape(x) for x in like[0]] or params != like[1]):
            continue
        if op.kink is not None and op.kink(*inputs, tol=max(spec.kink_gap, 1e-3), **params):
            continue
        return [np.asarray(x, dtype=np.float64) for x in inputs], params
    pytest.skip(f"{op.name}: no slices of one shape drawn")


def _slices(op, seed):
    rng = np.random.default_rng(seed)
    first = _draw(op, rng)
    return [first] + [_draw(op, rng, like=first) for _ in range(BATCH - 1)]


def _outputs(op, params, inputs):
    out = op(*inputs, **params)
    return list(out) if isinstance(out, tuple) else [out]


def _axes_choices(inputs):
    """in_axes to try: all 0; all 1 where a slice has an axis; each input passed whole."""
    n = len(inputs)
    choices = [(0,) * n]
    if all(np.ndim(x) >= 1 for x in inputs):
        choices.append((1,) * n)
    if n > 1:
        choices += [tuple(None if j == k else 0 for j in range(n)) for k in range(n)]
    return choices


def _differentiated(op, n):
    if op.check is not None and op.check.diff is not None:
        return list(op.check.diff)
    return list(range(n))


@pytest.mark.parametrize("op", OPS, ids=ids)
def test_vmap_of_every_op_is_the_stacked_slices(op):
    slices = _slices(op, seed=len(op.name))
    params = slices[0][1]
    n = len(slices[0][0])
    for axes in _axes_choices(slices[0][0]):
        per_slice = [[o.data for o in _outputs(op, params, [Tensor(slices[0 if a is None else i][0][c]) for c, a in enumerate(axes)])]
                     for i in range(BATCH)]
        batched = [slices[0][0][k] if a is None else np.stack([xs[k] for xs, _ in slices], axis=a) for k, a in enumerate(axes)]
        xs = [Tensor(b, requires_grad=op.has_gradient) for b in batched]
        out = vmap(lambda *ts: op(*ts, **params), in_axes=axes)(*xs)
        outs = list(out) if isinstance(out, tuple) else [out]
        for j, o in enumerate(outs):
            expected = np.stack([p[j] for p in per_slice])
            np.testing.assert_allclose(o.data, expected, **TOL, err_msg=f"{op.name} in_axes={axes}, output {j}")
        if not op.has_gradient:
            continue
        rng = np.random.default_rng(1)
        weights = [rng.uniform(0.5, 1.5, o.shape) for o in outs]
        total = sum((o * w).sum() for o, w in zip(outs, weights) if o.data.dtype.kind == "f")
        diff = _differentiated(op, n)
        got = grad(total, [xs[k] for k in diff], create_graph=True)
        for k, g in zip(diff, got):
            want = []
            for i in range(BATCH):
                ts = [Tensor(slices[0 if a is None else i][0][c], requires_grad=True) for c, a in enumerate(axes)]
                souts = _outputs(op, params, ts)
                piece = sum((o * w[i]).sum() for o, w in zip(souts, weights) if o.data.dtype.kind == "f")
                want.append(grad(piece, ts[k]).data)
            expected = np.sum(want, axis=0) if axes[k] is None else np.stack(want, axis=axes[k])
            np.testing.assert_allclose(g.data, expected, **TOL, err_msg=f"{op.name} gradient by input {k}, in_axes={axes}")
        if op.check is not None and not op.check.second_order:
            continue
        # second order: the first input's gradient differentiated along a direction v, by
        # the same input, against each slice's own (an input passed whole sums its slices')
        k0 = diff[0]
        v = np.random.default_rng(2).uniform(-1, 1, got[0].shape)
        second = grad((got[0] * Tensor(v)).sum(), xs[k0])
        want = []
        for i in range(BATCH):
            ts = [Tensor(slices[0 if a is None else i][0][c], requires_grad=True) for c, a in enumerate(axes)]
            souts = _outputs(op, params, ts)
            piece = sum((o * w[i]).sum() for o, w in zip(souts, weights) if o.data.dtype.kind == "f")
            g = grad(piece, ts[k0], create_graph=True)
            vi = v if axes[k0] is None else np.take(v, i, axis=axes[k0])
            want.append(grad((g * Tensor(vi)).sum(), ts[k0]).data)
        expected = np.sum(want, axis=0) if axes[k0] is None else np.stack(want, axis=axes[k0])
        np.testing.assert_allclose(second.data, expected, **TOL, err_msg=f"{op.name} second derivative by input {k0}, in_axes={axes}")


@pytest.mark.parametrize("op", [op for op in OPS if op.has_gradient and (op.check is None or op.check.second_order)], ids=ids)
def test_per_row_gradients_of_every_op_differentiate_again_as_each_row_does(op):
    """vmap(grad(f)) of f = the op's weighted sum, differentiated again by the batch it was
    given, against each row's own second derivative: the per-example gradients of a
    training step, differentiated again (the checks above take grad outside vmap; here
    grad's pass runs inside it, on batched cotangents, and is recorded)."""
    from gradcalc.autodiff import grad_of

    slices = _slices(op, seed=len(op.name) + 7)
    params, n = slices[0][1], len(slices[0][0])
    k0 = _differentiated(op, n)[0]
    rng = np.random.default_rng(3)
    weights = [rng.uniform(0.5, 1.5, o.shape) for o in _outputs(op, params, [Tensor(x) for x in slices[0][0]])]

    def piece(*ts):
        return sum((o * Tensor(w)).sum() for o, w in zip(_outputs(op, params, ts), weights) if o.data.dtype.kind == "f")

    xs = [Tensor(np.stack([xs_i[c] for xs_i, _ in slices]), requires_grad=True) for c in range(n)]
    per_row = vmap(grad_of(piece, argnums=k0))(*xs)
    v = rng.uniform(-1, 1, per_row.shape)
    got = grad((per_row * Tensor(v)).sum(), xs[k0])
    want = []
    for i, (inputs, _) in enumerate(slices):
        ts = [Tensor(x, requires_grad=True) for x in inputs]
        g = grad(piece(*ts), ts[k0], create_graph=True)
        want.append(grad((g * Tensor(v[i])).sum(), ts[k0]).data)
    np.testing.assert_allclose(got.data, np.stack(want), **TOL, err_msg=f"{op.name}: the per-row gradients' gradient by input {k0}")


def _single_output(op, params, n_out, j):
    return lambda *ts: _outputs(op, params, ts)[j]


@pytest.mark.parametrize("op", [op for op in OPS if op.has_gradient], ids=ids)
def test_batched_jacobians_of_every_op_are_the_plain_passes(op):
    """jacrev and jacfwd run the op's VJP and JVP on a batch of cotangents or tangents: each
    equals the plain passes, one row (or column) of the identity at a time."""
    (inputs, params), *_ = _slices(op, seed=len(op.name) + 7)
    _jacobians_are_the_plain_passes(op, inputs, params, _differentiated(op, len(inputs)))


EDGES = [(op, edge) for op in OPS if op.has_gradient for edge in op.edges if edge.error is None]


@pytest.mark.parametrize(("op", "edge"), EDGES, ids=[f"{op.name}:{edge.case}" for op, edge in EDGES])
def test_batched_jacobians_at_every_edge_are_the_plain_passes(op, edge):
    """The same at each op's edges (infinities, nan, zeros, ties), where the zero-gradient
    guards take their slow paths: a batch of cotangents with zeros in every row must pass
    them as the plain passes do."""
    inputs = [np.asarray(x, dtype=np.float64) for x in edge.inputs]
    _jacobians_are_the_plain_passes(op, inputs, edge.params, list(edge.differentiated()))


def _same(got, want, what):
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, equal_nan=True, err_msg=what)


def _jacobians_are_the_plain_passes(op, inputs, params, diff):
    outs = _outputs(op, params, [Tensor(x) for x in inputs])
    for k in diff:
        for j, out in enumerate(outs):
            if out.data.dtype.kind != "f":
                continue
            f = _single_output(op, params, len(outs), j)
            rev = jacrev(f, argnums=k)(*[Tensor(x) for x in inputs]).data
            fwd = jacfwd(f, argnums=k)(*[Tensor(x) for x in inputs]).data
            ts = [Tensor(x, requires_grad=True) for x in inputs]
            y = f(*ts)
            rows = []
            for i in range(y.size):
                seed = np.zeros(y.size)
                seed[i] = 1.0
                g = backprop(y, seed.reshape(y.shape)).get(ts[k])
                rows.append(np.zeros(ts[k].shape) if g is None else np.asarray(g))
            plain_rev = np.stack(rows).reshape(y.shape + ts[k].shape) if rows else np.zeros(y.shape + ts[k].shape)
            _same(rev, plain_rev, f"{op.name}: jacrev by input {k}, output {j}")
            if op.jvp is None:
                continue
            columns = []
            for i in range(ts[k].size):
                e = np.zeros(ts[k].size)
                e[i] = 1.0
                t = push_forward([y], {ts[k]: e.reshape(ts[k].shape)}).get(y)
                columns.append(np.zeros(y.shape) if t is None else np.broadcast_to(np.asarray(t), y.shape))
            plain_fwd = np.stack(columns, axis=-1).reshape(y.shape + ts[k].shape) if columns else np.zeros(y.shape + ts[k].shape)
            _same(fwd, plain_fwd, f"{op.name}: jacfwd by input {k}, output {j}")


def test_vmap_composes_with_itself_and_the_derivatives():
    """Nested vmap, vmap of grad, grad of vmap, in_axes and out_axes, against NumPy's closed forms."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 5, 3))
    np.testing.assert_allclose(vmap(vmap(lambda x: (x * x).sum()))(Tensor(X)).data, (X * X).sum(-1))
    np.testing.assert_allclose(vmap(lambda x: x.sum(), in_axes=2)(Tensor(X)).data, X.sum((0, 1)))
    np.testing.assert_allclose(vmap(lambda x: x * 2, out_axes=1)(Tensor(X[0])).data, 2 * X[0].T)
    per_row = vmap(grad_of_sum_sin)(Tensor(X[0]))
    np.testing.assert_allclose(per_row.data, np.cos(X[0]))
    x = Tensor(X[0], requires_grad=True)
    through = grad(vmap(lambda r: (r.sin() * r).sum())(x).sum(), x)
    np.testing.assert_allclose(through.data, np.cos(X[0]) * X[0] + np.sin(X[0]))
    for axes in itertools.product((0, None), repeat=2):
        if axes == (None, None):
            continue
        a = X[0, 0] if axes[0] is None else X[:, 0]
        b = X[1, 1] if axes[1] is None else X[:, 1]
        out = vmap(lambda p, q: (p * q).sum(), in_axes=axes)(Tensor(a), Tensor(b))
        np.testing.assert_allclose(out.data, (np.broadcast_to(a, (4, 3)) * np.broadcast_to(b, (4, 3))).sum(-1))


def grad_of_sum_sin(x):
    from gradcalc.autodiff import grad_of

    return grad_of(lambda r: r.sin().sum())(x)


def test_tangent_of_a_batch():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = x.sin()
    v = vmap(lambda d: tangent_of(y, x, d))(Tensor(np.eye(2)))
    np.testing.assert_allclose(v.data, np.diag(np.cos([1.0, 2.0])))
