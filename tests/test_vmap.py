"""vmap in the language, as one evaluation of the function on batched values, against
torch.func (float64) and NumPy's closed forms, through the session, the one-shot
command, scripts and check files."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradcalc.parser import LanguageError, Session
from gradcalc.parser.functions import Defined
from gradcalc.parser.machine import ExpressionResult
from tests.launch import run

torch = pytest.importorskip("torch")
tf = torch.func

RNG = np.random.default_rng(0)
X = RNG.normal(size=(6, 3))
W = RNG.normal(size=(3, 2))
B = RNG.normal(size=(6, 2))


def session(**values):
    s = Session()
    for name, value in values.items():
        s.assign(name, s.backend.from_array(np.asarray(value, dtype=float)))
    return s


def value(source, **values):
    results = session(**values).run_source(source)
    last = results[-1]
    return last.value if isinstance(last, ExpressionResult) else last.value


def t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


def V_torch(x, w):
    return (torch.tanh(x @ w) ** 2).sum()


V = "def V(x, w) = sum(tanh(x @ w) ** 2)\n"


def test_vmap_values_and_per_example_gradients_match_torch_func():
    got = value(V + "vmap(V, in_axes=(0, None))(X, W)", X=X, W=W)
    want = tf.vmap(V_torch, in_dims=(0, None))(t(X), t(W))
    np.testing.assert_allclose(got.data, want.numpy(), rtol=1e-12)
    got = value(V + "vmap(grad(V), in_axes=(0, None))(X, W)", X=X, W=W)
    want = tf.vmap(tf.grad(V_torch), in_dims=(0, None))(t(X), t(W))
    np.testing.assert_allclose(got.data, want.numpy(), rtol=1e-12)
    # each example's gradient by the weights (passed whole): a batch of weight gradients
    got = value(V + "vmap(grad(V, argnums=1), in_axes=(0, None))(X, W)", X=X, W=W)
    want = tf.vmap(tf.grad(V_torch, argnums=1), in_dims=(0, None))(t(X), t(W))
    np.testing.assert_allclose(got.data, want.numpy(), rtol=1e-12, atol=1e-15)


def test_vmap_of_jacrev_jacfwd_hessian_and_jvp_match_torch_func():
    f_torch = lambda x, w: torch.tanh(x @ w)  # noqa: E731
    f = "def f(x, w) = tanh(x @ w)\n"
    for transform, theirs in (("jacrev", tf.jacrev(f_torch)), ("jacfwd", tf.jacfwd(f_torch))):
        got = value(f + f"vmap({transform}(f), in_axes=(0, None))(X, W)", X=X, W=W)
        np.testing.assert_allclose(got.data, tf.vmap(theirs, in_dims=(0, None))(t(X), t(W)).numpy(), rtol=1e-12, atol=1e-15)
    got = value(V + "vmap(hessian(V), in_axes=(0, None))(X, W)", X=X, W=W)
    want = tf.vmap(tf.hessian(V_torch), in_dims=(0, None))(t(X), t(W))
    np.testing.assert_allclose(got.data, want.numpy(), rtol=1e-12, atol=1e-14)
    got = value("vmap(lambda x, v: jvp(sin, x, v)[1])(X, B)", X=X[:, :2], B=B)
    np.testing.assert_allclose(got.data, np.cos(X[:, :2]) * B, rtol=1e-14)


def test_in_axes_out_axes_and_nesting():
    np.testing.assert_allclose(value("vmap(lambda r: sum(r * r), in_axes=1)(X)", X=X).data, (X * X).sum(0))
    np.testing.assert_allclose(value("vmap(lambda r: r * 2, out_axes=1)(X)", X=X).data, 2 * X.T)
    np.testing.assert_allclose(value("vmap(lambda r, b: r @ W + b)(X, B)", X=X, W=W, B=B).data, X @ W + B)
    cube = RNG.normal(size=(4, 5, 3))
    np.testing.assert_allclose(value("vmap(vmap(lambda r: sum(exp(r))))(C)", C=cube).data, np.exp(cube).sum(-1))
    np.testing.assert_allclose(value("vmap(lambda m: vmap(lambda r: r @ W)(m))(C)", C=cube, W=W).data, cube @ W)


def test_closures_lambdas_and_user_rules_batch():
    got = value("def scale(k) = lambda r: r * k\nvmap(scale(3))(X)", X=X)
    np.testing.assert_allclose(got.data, 3 * X)
    rule = "def f(x, y) = sum(x * y)\nvjp f(x, y, g) = (g * y, g * x)\n"
    got = value(rule + "vmap(lambda r: f(r, w))(X)", X=X, w=[1.0, 2.0, 3.0])
    np.testing.assert_allclose(got.data, X @ [1.0, 2.0, 3.0])
    got = value(rule + "vmap(grad(f, argnums=1), in_axes=(0, None))(X, w)", X=X, w=[1.0, 2.0, 3.0])
    np.testing.assert_allclose(got.data, X)  # each row's gradient by the shared w is that row
    got = value(rule + "grad(sum(vmap(lambda r: f(r, w))(X)), w)", X=X, w=[1.0, 2.0, 3.0])
    np.testing.assert_allclose(got.data, X.sum(0))  # through the rule, summed over the rows


def test_gradients_flow_through_vmap_as_through_an_op():
    got = value("grad(sum(vmap(lambda r: sin(r) * r)(X)), X)", X=X)
    np.testing.assert_allclose(got.data, np.cos(X) * X + np.sin(X), rtol=1e-14)
    got = value("hessian(sum(vmap(lambda r: sum(r ** 3))(x[None])), x)", x=[1.0, 2.0])
    np.testing.assert_allclose(got.data, np.diag([6.0, 12.0]))


def test_the_function_is_called_once_whatever_the_batch(monkeypatch):
    calls = []
    real = Session.call_function

    def counted(self, callee, args, kwargs):
        if isinstance(callee, Defined):  # (not the call of vmap(f) itself)
            calls.append(len(args))
        return real(self, callee, args, kwargs)

    monkeypatch.setattr(Session, "call_function", counted)
    for rows in (1, 10, 1000):
        calls.clear()
        value(f"vmap(lambda r: sum(r))(ones({rows}, 3))")
        assert len(calls) == 1



@pytest.mark.parametrize("transform", ["grad(V, argnums=1)", "value_and_grad(V, argnums=1)", "jacrev(V, argnums=1)",
                                       "jacfwd(V, argnums=1)", "hessian(V, argnums=1)", "grad(V, argnums=(0, 1))"])
def test_a_derivative_by_an_input_passed_whole_calls_the_function_once(monkeypatch, transform):
    # Each row's derivative by W (in_axes None) is its own: W gets the rows' axis before
    # the call, known from the other arguments, rather than after a first call that found it.
    calls = []
    real = Session.call_function

    def counted(self, callee, args, kwargs):
        if isinstance(callee, Defined) and callee.function.name == "V":
            calls.append(len(args))
        return real(self, callee, args, kwargs)

    monkeypatch.setattr(Session, "call_function", counted)
    V = "def V(x, W) = sum(tanh(x @ W) ** 2)\n"
    got = value(V + f"vmap({transform}, in_axes=(0, None))(X, W)", X=X, W=W)
    assert len(calls) == 1
    spelled = transform.replace("V", "fV").replace("value_and_grad", "grad_and_value")
    fV = lambda x, w: (torch.tanh(x @ w) ** 2).sum()  # noqa: E731, F841 - read by eval
    want = tf.vmap(eval("tf." + spelled, {"tf": tf, "fV": fV}), in_dims=(0, None))(torch.tensor(X), torch.tensor(W))
    if transform.startswith("value_and_grad"):
        want = (want[1], want[0])  # (torch.func's grad_and_value gives them the other way round)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g.data, w.numpy(), rtol=1e-12, atol=1e-14)


def test_a_batch_read_from_a_closure_still_gives_each_row_its_derivative():
    # The inner function reads the outer vmap's row from its closure, not from its
    # arguments: the batch is found in the result and the function called again.
    got = value("vmap(lambda r: grad(lambda w: sum(tanh(r @ w) ** 2))(W))(X)", X=X, W=W)
    want = tf.vmap(lambda r: tf.grad(lambda w: (torch.tanh(r @ w) ** 2).sum())(torch.tensor(W)))(torch.tensor(X))
    np.testing.assert_allclose(got.data, want.numpy(), rtol=1e-12, atol=1e-14)

@pytest.mark.parametrize(("source", "words"), [
    ("vmap(lambda r: r if r > 0 else 0)(v)", "the condition of 'if' would differ from one row of the batch to another"),
    ("vmap(lambda r: sum(X, axis=r))(v)", "axis would differ from one row"),
    ("vmap(lambda r: X[r])(v)", "an index would differ from one row"),
    ("vmap(lambda r: zeros(r))(v)", "would differ from one row"),
])
def test_control_flow_and_parameters_that_vary_by_row_are_refused_at_the_place(source, words):
    with pytest.raises(LanguageError) as err:
        value(source, v=[1.0, 2.0], X=X)
    assert words in err.value.message
    assert err.value.line is not None and err.value.column is not None


def test_where_batches_and_shape_facts_are_each_rows():
    np.testing.assert_allclose(value("vmap(lambda r: where(r > 0, r, 0))(v)", v=[1.0, -2.0, 3.0]).data, [1.0, 0.0, 3.0])
    np.testing.assert_allclose(value("vmap(lambda r: r.shape)(X)", X=X).data, np.tile([3], (6, 1)))
    np.testing.assert_allclose(value("vmap(lambda r: len(r) * r)(X)", X=X).data, 3 * X)


def test_vmap_through_the_command_a_script_and_a_check_file(tmp_path):
    np.save(tmp_path / "data.npy", X)
    done = run(["eval", V + "vmap(grad(V), in_axes=(0, None))(X, W)", "X=@" + str(tmp_path / "data.npy"),
                           "W=randn(3, 2, seed=1)", "--json"])
    assert done.returncode == 0, done.stderr
    script = tmp_path / "per_example.gc"
    script.write_text(V + "W = randn(3, 2, seed=1)\nG = vmap(grad(V), in_axes=(0, None))(load('data.npy'), W)\nsum(G)\n")
    done = run(["run", str(script)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    checks = tmp_path / "checks.gc"
    checks.write_text(V + "W = randn(3, 2, seed=1)\nX = load('data.npy')\ncheck vmap(V, in_axes=(0, None))(X, W)\n"
                      "check sum(vmap(grad(V), in_axes=(0, None))(X, W)) wrt W\n")
    done = run(["check", str(checks)], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout or "PASS" in done.stdout


def test_the_python_api_has_the_same_transforms():
    from gradcalc.autodiff import Tensor, grad, hessian, jacfwd, jacrev, vmap

    def v(x, w):
        return ((x @ w).tanh() ** 2).sum()

    per_example = vmap(grad(v), in_axes=(0, None))(Tensor(X), Tensor(W))
    np.testing.assert_allclose(per_example.data, tf.vmap(tf.grad(V_torch), in_dims=(0, None))(t(X), t(W)).numpy(), rtol=1e-12)
    f = lambda x: (Tensor(W.T) @ x).tanh()  # noqa: E731
    want = tf.jacrev(lambda x: torch.tanh(t(W.T) @ x))(t(X[0])).numpy()
    np.testing.assert_allclose(jacrev(f)(Tensor(X[0])).data, want, rtol=1e-12)
    np.testing.assert_allclose(jacfwd(f)(Tensor(X[0])).data, want, rtol=1e-12)
    h = hessian(lambda x: v(x, Tensor(W)))(Tensor(X[0]))
    np.testing.assert_allclose(h.data, tf.hessian(lambda x: V_torch(x, t(W)))(t(X[0])).numpy(), rtol=1e-12, atol=1e-14)


ROOT = Path(__file__).resolve().parents[1]


# ---- indexing a boolean inside a batch keeps its type, as outside one ------------------------------

MASK_INDEXES = ["[1]", "[0:1]", "[-1]", "[::2]", "[None, 0]", "[..., 2]"]


@pytest.mark.parametrize("index", MASK_INDEXES)
def test_an_index_of_a_mask_inside_vmap_is_the_rows_index_of_it(index):
    """`(r > 2)[k]` per row, through the command: booleans, as NumPy gives per row and as
    the same index gives outside vmap (it raised an internal error, and gave floats before)."""
    import json

    X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.0, 3.0, 2.5]])
    expected = np.stack([eval(f"(row > 2){index}") for row in X])  # noqa: S307 - the index forms above
    done = run(["eval", f"vmap(lambda r: (r > 2){index})(X)", f"X={X.tolist()}", "--json"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dtype"] == "bool"
    np.testing.assert_array_equal(np.array(report["value"]), expected)


def test_a_vjp_rule_indexing_a_mask_of_its_cotangent_batches_under_jacrev():
    """A rule that reads `(g > -1)[0]` gives each row of jacrev its own answer (every row's
    g is a row of the identity, so the factor is True in each): the Jacobian PyTorch takes
    of the same rule as a torch.autograd.Function (it gave a zero row before)."""
    import json

    class U(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2 * (g > -1)[0]

    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    expected = torch.autograd.functional.jacobian(U.apply, x).numpy()
    done = run(["eval", "def u(x) = x * 2; vjp u(x, g) = g * 2 * (g > -1)[0]; jacrev(u)(x)", "x=[1,2]", "--json"])
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.array(json.loads(done.stdout)["value"]), expected)


RULES = ["g / x", "-g / x", "g / (x * x)", "g * (1 / x)", "g / x * 0"]


@pytest.mark.parametrize("rule", RULES)
def test_a_vjp_rule_dividing_its_cotangent_rows_by_zero_gives_pytorchs_jacobian(rule):
    """jacrev runs a user's rule once on the identity's rows; where the rule divides them by
    a 0, each row's 0 / 0 off its own element is nan, as PyTorch's Jacobian of the same rule
    has it (the rows kept scaled had lost it)."""
    import json

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return eval(rule)  # noqa: S307 - the rules above, the same text as the language's

    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    U = type("U", (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
    for point in ([0.0, 2.0], [3.0, 0.0, -1.0]):
        x = torch.tensor(point, dtype=torch.float64)
        expected = torch.autograd.functional.jacobian(U.apply, x).numpy()
        program = f"def s(x) = x**2; vjp s(x, g) = {rule}; jacrev(s)(x)"
        done = run(["eval", program, f"x={point}", "--json"])
        assert done.returncode == 0, done.stderr
        got = np.array(json.loads(done.stdout)["value"], dtype=float)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=program)
        np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(expected), err_msg=program)


def test_a_mask_of_a_row_used_as_an_index_inside_vmap_is_refused_at_its_place():
    done = run(["eval", "vmap(lambda r: r[(r > 2)[0:1]])(X)", "X=[[1,2,3],[4,5,6]]"])
    assert done.returncode == 2
    assert "an index would differ from one row of the batch to another" in done.stderr
    assert "column 16" in done.stderr and "Traceback" not in done.stderr


# ---- derivatives of what does not depend on the batched input ------------------------------------

def test_a_per_row_gradient_of_a_constant_keeps_its_shape_through_the_command():
    done = run(["eval", "vmap(grad(lambda t: 3.0))([1, 2, 3])"])
    assert "value: [0.0, 0.0, 0.0]  (shape 3)" in done.stdout, done.stdout + done.stderr


UNREACHED = [  # (gradcalc's form over the rows X (3 x 2) and w (2), torch.func's): y never reads the mapped value
    ("vmap(grad(lambda t: 3.0))(X)", lambda X, w: tf.vmap(tf.grad(lambda t: torch.tensor(3.0) + 0 * t.sum().detach()))(X)),
    ("vmap(grad(lambda t: sum(floor(t))))(X)", lambda X, w: tf.vmap(tf.grad(lambda t: torch.floor(t).sum()))(X)),
    ("vmap(grad(lambda t, v: sum(v * v), argnums=1), in_axes=(0, None))(X, w)",
     lambda X, w: tf.vmap(tf.grad(lambda t, v: (v * v).sum(), argnums=1), in_dims=(0, None))(X, w)),
    ("vmap(grad(lambda t, v: sum(t * t)), in_axes=(None, 0))(w, X)",
     lambda X, w: tf.vmap(tf.grad(lambda t, v: (t * t).sum()), in_dims=(None, 0))(w, X)),
    ("vmap(lambda r: value_and_grad(lambda t: 2.0)(r)[1])(X)",
     lambda X, w: tf.vmap(lambda r: tf.grad(lambda t: 0 * t.sum().detach() + 2.0)(r))(X)),
    ("vmap(lambda r: vjp(lambda t: w * 2, r)[1](w)[0])(X)",
     lambda X, w: tf.vmap(lambda r: tf.vjp(lambda t: w * 2 + 0 * t.detach(), r)[1](w)[0])(X)),
    ("vmap(hessian(lambda t: sum(w)))(X)", lambda X, w: tf.vmap(tf.hessian(lambda t: w.sum() + 0 * t.sum().detach()))(X)),
    ("vmap(hessian(lambda t: sum(t * 2)))(X)", lambda X, w: tf.vmap(tf.hessian(lambda t: (t * 2).sum()))(X)),
    ("vmap(jacrev(grad(lambda t: sum(t * 2))))(X)", lambda X, w: tf.vmap(tf.jacrev(tf.grad(lambda t: (t * 2).sum())))(X)),
    ("vmap(vmap(grad(lambda t: 1.0)))(X)", lambda X, w: tf.vmap(tf.vmap(tf.grad(lambda t: 0 * t.detach() + 1.0)))(X)),
]


@pytest.mark.parametrize(("source", "oracle"), UNREACHED, ids=[s for s, _ in UNREACHED])
def test_derivatives_of_what_the_rows_do_not_reach_are_torchs(source, oracle):
    """Zeros of each row's shape, as many rows as the batch: torch.func's shapes and values."""
    X, w = [[1.0, -2.0], [0.5, 3.0], [2.5, 0.0]], [0.25, -1.5]
    session = Session()
    session.run_source(f"X = {X}\nw = {w}")
    ours = session.run_source(source)[-1].value.data
    expected = oracle(torch.tensor(X, dtype=torch.float64), torch.tensor(w, dtype=torch.float64)).numpy()
    assert ours.shape == expected.shape
    np.testing.assert_array_equal(ours, expected)


ZERO_ROWS = [  # over a mapped axis of length 0: JAX's and torch.func's empty results, of the shape each row would give
    ("vmap(lambda x: x * 2)(zeros(0, 3))", lambda: tf.vmap(lambda x: x * 2)(torch.zeros(0, 3))),
    ("vmap(grad(lambda r: sum(r ** 2)))(zeros(0, 3))", lambda: tf.vmap(tf.grad(lambda r: (r ** 2).sum()))(torch.zeros(0, 3))),
    ("vmap(jacrev(lambda r: r ** 2))(zeros(0, 3))", lambda: tf.vmap(tf.jacrev(lambda r: r ** 2))(torch.zeros(0, 3))),
    ("vmap(lambda x, w: x @ w, in_axes=(0, None))(zeros(0, 3), ones(3, 2))",
     lambda: tf.vmap(lambda x, w: x @ w, in_dims=(0, None))(torch.zeros(0, 3), torch.ones(3, 2))),
    ("vmap(lambda x: sum(x), in_axes=1)(zeros(3, 0))", lambda: tf.vmap(lambda x: x.sum(), in_dims=1)(torch.zeros(3, 0))),
    ("vmap(vmap(lambda t: t + 1))(zeros(2, 0))", lambda: torch.zeros(2, 0)),  # (JAX's shape: torch.func's inner vmap over 0 raises)
]


@pytest.mark.parametrize(("source", "oracle"), ZERO_ROWS, ids=[s for s, _ in ZERO_ROWS])
def test_vmap_over_no_rows_gives_an_empty_batch(source, oracle):
    ours = Session().run_source(source)[-1].value.data
    assert ours.shape == tuple(oracle().shape)


def test_vmap_over_no_rows_of_a_data_file_through_the_command(tmp_path):
    np.save(tmp_path / "none.npy", np.zeros((0, 4)))
    done = run(["eval", "vmap(grad(lambda r: sum(tanh(r) ** 2)))(X)", f"X=@{tmp_path / 'none.npy'}"])
    assert done.returncode == 0 and "(shape 0x4)" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("leave", [lambda x: x.numpy(), int, float, lambda x: x.item()])
def test_a_batched_value_refuses_to_leave_the_engine(leave):
    """NumPy code on a row inside the Python API's vmap would see every row at once: refused,
    as JAX refuses a tracer's array and torch.func a batched tensor's."""
    from gradcalc.autodiff import Tensor, vmap
    from gradcalc.autodiff.batching import BatchError

    with pytest.raises(BatchError, match="would differ from one row"):
        vmap(lambda x: Tensor(np.sum(leave(x))))(Tensor([[1.0, -2.0, 3.0], [4.0, 5.0, 6.0]]))
    with pytest.raises(BatchError):
        vmap(lambda x: Tensor(leave(x)))(Tensor([1.0, 2.0]))


def test_per_example_gradients_differentiated_again_need_no_batch_of_matrices(tmp_path):
    """d sum(P) / dW of P = vmap(grad(V), in_axes=(0, None))(X, W): JAX's jaxpr holds nothing
    bigger than (rows, 8); a batch of rows times W lifted to a stack of 1 x 8 products made
    the gradient by W a (rows, 8, 8) stack, over the cap where the result is far under it."""
    rng = np.random.default_rng(0)
    rows, weights = rng.normal(size=(2000, 8)), rng.normal(size=(8, 8))
    np.save(tmp_path / "X.npy", rows)
    np.save(tmp_path / "W.npy", weights)
    done = run(["eval", "--json", "--max-elements", "100000",
                           "def V(x, W) = sum(tanh(x @ W) ** 2); vmap(grad(V), in_axes=(0, None))(X, W)",
                           f"X=@{tmp_path / 'X.npy'}", f"W=@{tmp_path / 'W.npy'}"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    W = torch.tensor(weights, requires_grad=True)
    X = torch.tensor(rows, requires_grad=True)
    per_row = tf.vmap(tf.grad(lambda x, w: (torch.tanh(x @ w) ** 2).sum()), in_dims=(0, None))(X, W)
    gX, gW = torch.autograd.grad(per_row.sum(), (X, W))
    np.testing.assert_allclose(report["value"], per_row.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(report["grads"]["W"], gW.numpy(), rtol=1e-10)
    np.testing.assert_allclose(report["grads"]["X"], gX.numpy(), rtol=1e-10, atol=1e-13)


# ---- a list inside the mapped function: its length is the literal's, not the batch's ----------------

@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 4), items=st.integers(1, 4), op=st.sampled_from(["stack", "concatenate"]),
       axis=st.sampled_from([None, 0, 1, -1]), form=st.sampled_from(["literal", "matrix", "constant"]))
def test_stack_and_concatenate_of_a_list_batch_as_each_row_does(rows, items, op, axis, form):
    """Found by a new user: vmap(lambda x: stack([x, 2 * x, 3 * x]))(X) read the list's length
    from the batch's physical first axis (2 rows: 2 items, the third dropped, the gradient
    3 where it is 6), or failed in getitem when the batch had more rows than the list. Every
    way a list reaches stack or concatenate (a literal, a matrix's rows, a constant), at every
    batch size and list length, against torch.func for values and per-row gradients."""
    if op == "concatenate" and axis == 1:
        axis = 0  # (a vector's items have one axis)
    keyword = "" if axis is None else f", axis={axis}"
    rng = np.random.default_rng(rows * 10 + items)
    data = rng.normal(size=(rows, 2))
    scales = list(range(1, items + 1))
    listed = {"literal": "[" + ", ".join(f"{k} * x" for k in scales) + "]",
              "matrix": f"outer({scales}, x)",
              "constant": "[" + ", ".join(f"{k} * c" for k in scales) + "] + 0 * x[0]"}[form]
    source = f"c = [0.5, -1.5]\ndef f(x) = sum({op}({listed}{keyword}) ** 2)\n"
    got = value(source + "vmap(lambda x: " + f"{op}({listed}{keyword})" + ")(X)", X=data)
    per_example = value(source + "vmap(grad(f))(X)", X=data)

    joined = getattr(torch, "stack" if op == "stack" else "cat")
    c = torch.tensor([0.5, -1.5], dtype=torch.float64)

    def listed_torch(x):
        if form == "constant":
            return [k * c + 0 * x[0] for k in scales]
        return [k * x for k in scales]

    def body(x):
        return joined(listed_torch(x), dim=0 if axis is None else axis)

    X_t = torch.tensor(data)
    np.testing.assert_allclose(got.data, tf.vmap(body)(X_t).numpy(), rtol=1e-14)
    want = tf.vmap(tf.grad(lambda x: (body(x) ** 2).sum()))(X_t)
    np.testing.assert_allclose(per_example.data, want.numpy(), rtol=1e-13, atol=1e-15)
    if form == "literal":  # the Python API takes the list as NumPy and torch do: ops.stack([a, b])
        from gradcalc.autodiff import Tensor, ops
        from gradcalc.autodiff import grad as api_grad
        from gradcalc.autodiff import vmap as api_vmap

        def api_body(x):
            return getattr(ops, op)([k * x for k in scales], **({} if axis is None else {"axis": axis}))

        np.testing.assert_allclose(api_vmap(api_body)(Tensor(data)).data, got.data, rtol=0)
        api_grads = api_vmap(api_grad(lambda x: ops.sum(api_body(x) ** 2)))(Tensor(data))
        np.testing.assert_allclose(api_grads.data, want.numpy(), rtol=1e-13, atol=1e-15)
