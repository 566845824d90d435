"""Linear algebra: einsum (and dot, inner, outer, kron through it), trace, diag, triu,
tril, det, slogdet, inv, solve, and vector norms.

einsum's VJP is einsum again: for `ij,jk->ik`, d/dA = einsum('ik,jk->ij', g, B). The
other contractions reuse that rule, so their gradients are right by construction.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..batching import LEADING, BatchRule, along_axis, batch_shape, call, logical_ndim, own, prefixed, spread
from ..forward import LINEAR, MULTILINEAR, OVER_AXIS, OVER_MATRIX
from ..registry import ARRAY_MATH, Check, Edge, Torch, defop
from . import refusals, torch_calls
from .arithmetic import _swap_last as matrix_transpose
from .arithmetic import masked
from .reductions import Axis, expand_reduced, kept_shape, normalize_axes

# string.ascii_lowercase and ascii_letters, spelled out: importing `string` builds string.Template at every start-up
_LOWERCASE = "abcdefghijklmnopqrstuvwxyz"
_LETTERS = _LOWERCASE + _LOWERCASE.upper()

LINALG = "linear algebra"

# ---- einsum --------------------------------------------------------------------------------


def parse_subscripts(subscripts: str, n_operands: int) -> tuple[list[str], str]:
    """The subscripts of each operand and of the output ('ij,jk' means 'ij,jk->ik')."""
    text = str(subscripts).replace(" ", "")
    if "." in text:
        raise ValueError("einsum: '...' is not supported; name every axis with a letter")
    inputs_text, arrow, output = text.partition("->")
    inputs = inputs_text.split(",")
    if not arrow:  # implicit mode: the letters that appear once, in alphabetical order
        output = "".join(sorted(c for c in set(inputs_text) if inputs_text.count(c) == 1 and c.isalpha()))
    if len(inputs) != n_operands:
        raise ValueError(f"einsum: {subscripts!r} names {len(inputs)} operands, got {n_operands}")
    if not all(c.isalpha() for c in "".join(inputs) + output):
        raise ValueError(f"einsum: subscripts must be letters, got {subscripts!r}")
    return inputs, output


def _einsum(*operands: Any, subscripts: str) -> Any:
    inputs, output = parse_subscripts(subscripts, len(operands))
    return np.einsum(f"{','.join(inputs)}->{output}", *operands)


def einsum_shape(*operands: Any, subscripts: str) -> tuple[int, ...]:
    """The result's shape, worked out before anything is computed (for the size cap)."""
    inputs, output = parse_subscripts(subscripts, len(operands))
    sizes = {c: n for sub, op in zip(inputs, operands) for c, n in zip(sub, np.shape(op))}
    return tuple(sizes.get(c, 0) for c in output)


def _einsum_vjp(m: Any, g: Any, ans: Any, *operands: Any, subscripts: str, k: int) -> Any:
    """d/d operand k: contract g with the other operands into operand k's subscripts.

    Two cases need a helper operand: a letter repeated in operand k (a diagonal, 'ii')
    is renamed and tied back with an identity matrix; a letter that only operand k has
    (summed over at once, 'ij->i') gets a vector of ones, which broadcasts the gradient.
    """
    inputs, output = parse_subscripts(subscripts, len(operands))
    sizes = {c: n for sub, op in zip(inputs, operands) for c, n in zip(sub, op.shape)}
    terms = [output] + [s for j, s in enumerate(inputs) if j != k]
    args = [g] + [op for j, op in enumerate(operands) if j != k]
    fresh = (c for c in _LETTERS if c not in subscripts)
    target = ""
    for c in inputs[k]:
        if c in target:
            new = next(fresh)
            terms.append(c + new)
            args.append(np.eye(sizes[c]))
            c = new
        target += c
    present = set("".join(terms))
    for c in target:
        if c not in present:
            terms.append(c)
            args.append(np.ones(sizes[c]))
    return m.einsum(*args, subscripts=f"{','.join(terms)}->{target}")


def _einsum_case(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    cases: list[tuple[str, list[tuple[int, ...]]]] = [
        ("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->", [(3, 3)]), ("ii->i", [(3, 3)]), ("ij->j", [(2, 3)]),
        ("i,i", [(4,), (4,)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]), ("ij,j,k->ik", [(2, 3), (3,), (2,)]),
    ]
    subscripts, shapes = cases[int(rng.integers(len(cases)))]
    return [rng.uniform(-2, 2, s) for s in shapes], {"subscripts": subscripts}


# ---- how each contraction runs on a batch (batching.py) ---------------------------------------

def _einsum_in_batch(m: Any, nb: int, args: list[Any], flags: list[bool], inputs: list[str], output: str) -> Any:
    """einsum of the items: every batched operand gets the batch's letters first, and so
    does the output (the batch axes broadcast to their full size: einsum's letters do not)."""
    used = "".join(inputs) + output
    fresh = "".join(c for c in _LETTERS if c not in used)[:nb]
    batch = batch_shape(args, flags, nb)
    operands = [spread(m, a, True, nb, batch) if f else a for a, f in zip(args, flags)]
    subscripts = ",".join(fresh + s if f else s for s, f in zip(inputs, flags)) + "->" + fresh + output
    return m.einsum(*operands, subscripts=subscripts)


def _einsum_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    inputs, output = parse_subscripts(params["subscripts"], len(args))
    return _einsum_in_batch(m, nb, args, flags, inputs, output)


def _contraction_batch(subscripts_of: Any) -> BatchRule:
    def run(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
        ranks = [logical_ndim(a, f, nb) for a, f in zip(args, flags)]
        inputs, output = parse_subscripts(subscripts_of(*ranks), 2)
        return _einsum_in_batch(m, nb, args, flags, inputs, output)

    return own(run, "einsum of the items, the batch's axes named first")


def _outer_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    (a, b), (fa, fb) = args, flags
    if logical_ndim(a, fa, nb) != 1 or logical_ndim(b, fb, nb) != 1:  # the op's own error, for one item
        call(m, op, a[(0,) * nb] if fa else a, b[(0,) * nb] if fb else b)
    column = m.reshape(a, shape=tuple(a.shape) + (1,))
    row = m.reshape(b, shape=tuple(b.shape[:-1]) + (1, b.shape[-1]))
    return m.mul(column, row)  # (a product keeps the sign of a zero, as outer does)


def _kron_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    items = [tuple(x.shape[nb:]) if f else tuple(x.shape) for x, f in zip(args, flags)]
    n = max(len(s) for s in items)
    sa, sb = ((1,) * (n - len(s)) + s for s in items)
    a = m.reshape(args[0], shape=(tuple(args[0].shape[:nb]) if flags[0] else ()) + sa)
    b = m.reshape(args[1], shape=(tuple(args[1].shape[:nb]) if flags[1] else ()) + sb)
    inputs, output = parse_subscripts(_kron_subscripts(n), 2)
    blocks = _einsum_in_batch(m, nb, [a, b], flags, inputs, output)
    return m.reshape(blocks, shape=tuple(blocks.shape[:nb]) + tuple(x * y for x, y in zip(sa, sb)))


def _trace_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    if x.ndim - nb != 2:
        call(m, op, x[(0,) * nb])
    return m.sum(m.getitem(x, index=prefixed(diagonal_index(tuple(x.shape[nb:]), 0), nb)), axis=-1)


def _diag_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x, k = args[0], int(params.get("k", 0))
    item = tuple(x.shape[nb:])
    if len(item) == 2:
        return m.getitem(x, index=prefixed(diagonal_index(item, k), nb))
    if len(item) == 1:
        n = item[0] + abs(k)
        return m.unindex(x, index=prefixed(diagonal_index((n, n), k), nb), shape=tuple(x.shape[:nb]) + (n, n))
    return call(m, op, x[(0,) * nb], **params)


def _triangle_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    if x.ndim - nb == 1:  # NumPy makes a matrix of a vector's rows first
        n = x.shape[-1]
        x = m.broadcast_to(m.reshape(x, shape=tuple(x.shape[:-1]) + (1, n)), shape=tuple(x.shape[:-1]) + (n, n))
    elif x.ndim - nb == 0:
        return call(m, op, x[(0,) * nb], **params)
    return call(m, op, x, **params)


def _solve_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    (a, b), (fa, fb) = args, flags
    na, nbb = logical_ndim(a, fa, nb), logical_ndim(b, fb, nb)
    if na < 2 or nbb < 1 or (nbb == 1 and na != 2):  # the op's own error, for one item
        call(m, op, a[(0,) * nb] if fa else a, b[(0,) * nb] if fb else b)
    if nbb == 1:  # a vector: a column of a one-column matrix, for NumPy's stacked solve
        b = m.reshape(b, shape=tuple(b.shape) + (1,))
    if fa:
        a = m.reshape(a, shape=tuple(a.shape[:nb]) + (1,) * (max(nbb, 2) - na) + tuple(a.shape[nb:])) if max(nbb, 2) > na else a
    if fb and nbb > 1 and na > nbb:
        b = m.reshape(b, shape=tuple(b.shape[:nb]) + (1,) * (na - nbb) + tuple(b.shape[nb:]))
    if not fa:
        batch = tuple(b.shape[:nb])
        a = m.broadcast_to(a, shape=batch + (1,) * (b.ndim - nb - a.ndim) + tuple(a.shape))
    if not fb:
        batch = tuple(a.shape[:nb])
        b = m.broadcast_to(b, shape=batch + (1,) * (a.ndim - nb - b.ndim) + tuple(b.shape))
    out = call(m, op, a, b)
    return m.reshape(out, shape=tuple(out.shape[:-1])) if nbb == 1 else out


einsum = defop(
    "einsum", _einsum, _einsum_vjp, n_in=None, leading=("subscripts",),
    doc="Einstein summation, letters naming axes: einsum(a, b, subscripts='ij,jk->ik') ('...' not supported)",
    category=LINALG, complex_safe=True, check=Check(make=_einsum_case), out_shape=einsum_shape,
    rule="operand k: einsum of g with the other operands, into operand k's subscripts",
    jvp=MULTILINEAR,
    batch=own(_einsum_batch, "einsum of the items, the batch's axes named first"),
    torch=Torch(lambda t, *xs, subscripts: t.einsum(subscripts, *xs)),
)

# ---- dot, inner, outer, kron: contractions with einsum's gradient ------------------------------


def _letters(ndim: int, first: int) -> str:
    return _LOWERCASE[first : first + ndim]


def _inner_subscripts(a_ndim: int, b_ndim: int) -> str:
    """NumPy's inner: contract the last axes (a plain product when one side is a number)."""
    if a_ndim == 0 or b_ndim == 0:
        return f"{_letters(a_ndim, 0)},{_letters(b_ndim, 10)}->{_letters(a_ndim, 0)}{_letters(b_ndim, 10)}"
    a, b = _letters(a_ndim - 1, 0), _letters(b_ndim - 1, 10)
    return f"{a}z,{b}z->{a}{b}"


def _kron_subscripts(ndim: int) -> str:
    """kron as einsum: 'a,A->aA' for vectors, 'ab,AB->aAbB' for matrices (then reshaped)."""
    a, b = _letters(ndim, 0), _letters(ndim, 0).upper()
    return f"{a},{b}->{''.join(x + y for x, y in zip(a, b))}"


def _contraction(subscripts_of: Any) -> dict[str, Any]:
    """Forward, VJPs and result shape of a two-operand einsum whose subscripts depend on
    the ranks (keyword arguments for defop)."""

    def forward(a: Any, b: Any) -> Any:
        return _einsum(a, b, subscripts=subscripts_of(np.ndim(a), np.ndim(b)))

    def vjp(k: int) -> Any:
        return lambda m, g, ans, a, b: _einsum_vjp(m, g, ans, a, b, subscripts=subscripts_of(a.ndim, b.ndim), k=k)

    def out_shape(a: Any, b: Any) -> tuple[int, ...]:
        return einsum_shape(a, b, subscripts=subscripts_of(np.ndim(a), np.ndim(b)))

    return {"forward": forward, "vjps": (vjp(0), vjp(1)), "out_shape": out_shape}


def _dot_subscripts(a_ndim: int, b_ndim: int) -> str:
    refusals.vectors("dot", a_ndim, b_ndim, " (use @ or matmul for matrices)")
    return "i,i->"


def _outer_subscripts(a_ndim: int, b_ndim: int) -> str:
    refusals.vectors("outer", a_ndim, b_ndim)
    return "i,j->ij"


def _outer(a: Any, b: Any) -> Any:
    _outer_subscripts(np.ndim(a), np.ndim(b))
    return np.multiply.outer(a, b)


_VECTORS = (((4,), (4,)),)
dot = defop(
    "dot", **_contraction(_dot_subscripts), n_in=2, method=True,
    doc="sum(a * b) of two 1-d vectors", category=LINALG, complex_safe=True, check=Check(shapes=_VECTORS),
    rule="a: g * b;  b: g * a",
    jvp=MULTILINEAR,
    batch=_contraction_batch(_dot_subscripts),
    torch=Torch("torch.dot"),
)
inner = defop(
    "inner", **_contraction(_inner_subscripts), n_in=2, method=True,
    doc="sum over the last axes of a and b (NumPy's inner)", category=LINALG, complex_safe=True,
    check=Check(shapes=(((4,), (4,)), ((2, 3), (4, 3)), ((), (3,)))),
    rule="a: g contracted with b;  b: g contracted with a (einsum's rule)",
    jvp=MULTILINEAR,
    batch=_contraction_batch(_inner_subscripts),
    torch=Torch("torch.inner"),
)
outer = defop(
    # NumPy's einsum adds each product to a 0, so 0 * -0 would come out +0; the product
    # itself keeps the sign of zero, as torch.outer does.
    "outer", **{**_contraction(_outer_subscripts), "forward": _outer}, n_in=2, method=True,
    doc="a[i] * b[j] as a matrix, for 1-d a and b", category=LINALG, complex_safe=True,
    check=Check(shapes=(((3,), (4,)),)),
    rule="a: g @ b;  b: g.T @ a",
    jvp=MULTILINEAR,
    batch=own(_outer_batch, "a column of each a times a row of each b"),
    torch=Torch("torch.outer"),
)


def _kron_operands(a: Any, b: Any) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """Both shapes padded with leading 1s to one rank (NumPy's rule)."""
    n = max(np.ndim(a), np.ndim(b))
    return n, (1,) * (n - np.ndim(a)) + np.shape(a), (1,) * (n - np.ndim(b)) + np.shape(b)


def _kron_shape(a: Any, b: Any) -> tuple[int, ...]:
    _, sa, sb = _kron_operands(a, b)
    return tuple(x * y for x, y in zip(sa, sb))


def _kron(a: Any, b: Any) -> Any:
    n, sa, sb = _kron_operands(a, b)
    blocks = _einsum(np.reshape(a, sa), np.reshape(b, sb), subscripts=_kron_subscripts(n))
    return np.reshape(blocks, _kron_shape(a, b))


def _kron_vjp(k: int) -> Any:
    def vjp(m: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
        n, sa, sb = _kron_operands(a, b)
        blocks = m.reshape(g, shape=tuple(d for pair in zip(sa, sb) for d in pair))
        operands = [m.reshape(a, shape=sa), m.reshape(b, shape=sb)]
        return _einsum_vjp(m, blocks, None, *operands, subscripts=_kron_subscripts(n), k=k)

    return vjp


kron = defop(
    "kron", _kron, (_kron_vjp(0), _kron_vjp(1)), n_in=2, method=True,
    doc="Kronecker product: every element of a times the whole of b, as blocks", category=LINALG,
    complex_safe=True, check=Check(shapes=(((2, 3), (2, 2)), ((3,), (2,)), ((2,), (2, 3)))), out_shape=_kron_shape,
    rule="a: each block of g contracted with b;  b: the blocks of g weighted by a and summed",
    jvp=MULTILINEAR,
    batch=own(_kron_batch, "einsum of the items' blocks, the batch's axes named first"),
    torch=Torch("torch.kron"),
)

# ---- trace, diag, triu, tril ---------------------------------------------------------------------


def _trace(x: Any) -> Any:
    refusals.matrix("trace", np.ndim(x))
    return np.trace(x)


def diagonal_index(shape: tuple[int, ...], k: int) -> tuple[Any, Any]:
    """Rows and columns of the k-th diagonal of a matrix of `shape` (k > 0 above)."""
    rows, cols = shape
    count = max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))
    i = np.arange(count)
    return (i, i + k) if k >= 0 else (i - k, i)


def _diag_shape(x: Any, k: int = 0) -> tuple[int, ...]:
    if np.ndim(x) == 1:
        return (len(x) + abs(int(k)),) * 2
    return (len(diagonal_index(np.shape(x), int(k))[0]),) if np.ndim(x) == 2 else ()


def _diag(x: Any, k: int = 0) -> Any:
    if np.ndim(x) == 2:
        return x[diagonal_index(np.shape(x), int(k))]
    if np.ndim(x) == 1:
        n = len(x) + abs(int(k))
        out = np.zeros((n, n), dtype=np.result_type(x, np.float64))
        out[diagonal_index((n, n), int(k))] = x
        return out
    raise refusals.not_vector_or_matrix("diag", np.ndim(x))


def _diag_vjp(m: Any, g: Any, ans: Any, x: Any, k: int = 0) -> Any:
    if x.ndim == 2:  # read: put the gradient back on the diagonal
        return m.unindex(g, index=diagonal_index(x.shape, int(k)), shape=x.shape)
    return m.getitem(g, index=diagonal_index(g.shape, int(k)))


trace = defop(
    "trace", _trace, (lambda m, g, ans, x: g * np.eye(*x.shape),),
    doc="sum of the diagonal of a matrix", category=LINALG, method=True, complex_safe=True,
    check=Check(shapes=(((3, 3),), ((2, 4),))),
    rule="g * eye",
    jvp=LINEAR,
    batch=own(_trace_batch, "the sum of each item's diagonal"),
    torch=Torch("torch.trace"),
)
diag = defop(
    "diag", _diag, (_diag_vjp,),
    doc="the k-th diagonal of a matrix, or a matrix with vector x on its k-th diagonal", category=LINALG,
    method=True, complex_safe=True, check=Check(shapes=(((3, 4),), ((3,),)), params={"k": 1}), out_shape=_diag_shape,
    rule="g read from (or put back on) the k-th diagonal",
    jvp=LINEAR,
    batch=own(_diag_batch, "the diagonal of each item, read or written"),
    torch=Torch(lambda t, x, k=0: t.diag(x, k), variants=({"k": -1}, {"k": 0})),
)
triu = defop(
    "triu", lambda x, k=0: np.triu(x, int(k)), (lambda m, g, ans, x, k=0: m.triu(g, k=k),),
    doc="x with the elements below the k-th diagonal set to 0", category=LINALG, method=True,
    complex_safe=True, check=Check(shapes=(((3, 4),), ((2, 3, 3),))),
    jvp=LINEAR,
    batch=own(_triangle_batch, "NumPy's stacked triangles"),
    torch=Torch(lambda t, x, k=0: t.triu(x, k), variants=({"k": 1},)),
)
tril = defop(
    "tril", lambda x, k=0: np.tril(x, int(k)), (lambda m, g, ans, x, k=0: m.tril(g, k=k),),
    doc="x with the elements above the k-th diagonal set to 0", category=LINALG, method=True,
    complex_safe=True, check=Check(shapes=(((3, 4),), ((2, 3, 3),)), params={"k": -1}),
    jvp=LINEAR,
    batch=own(_triangle_batch, "NumPy's stacked triangles"),
    torch=Torch(lambda t, x, k=0: t.tril(x, k), variants=({"k": 0},)),
)

# ---- det, slogdet, inv, solve ------------------------------------------------------------------


def _well_conditioned(rng: np.random.Generator, shape: tuple[int, ...] = (3, 3)) -> np.ndarray:
    """A random matrix kept away from singular (the identity times 3 plus noise in [-1, 1])."""
    return 3.0 * np.eye(shape[-1]) + rng.uniform(-1, 1, shape)


def _matrices(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    return [_well_conditioned(rng, [(3, 3), (2, 2, 2)][int(rng.integers(2))])], {}


def _per_matrix(m: Any, v: Any) -> Any:
    """A value per matrix, shaped to broadcast against the matrices (..., 1, 1)."""
    return m.reshape(v, shape=v.shape + (1, 1))


def _inverse_transpose(m: Any, a: Any) -> Any:
    return matrix_transpose(m, m.inv(a))


def _singular(a: Any) -> bool:
    """Some matrix of the stack has no inverse (LU meets a zero pivot)."""
    try:
        np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return True
    return False


def cofactors(a: np.ndarray) -> np.ndarray:
    """d det(a) / da, the transposed adjugate, also for singular matrices: with
    a = U diag(s) V^T it is det(U) det(V) U diag(prod of the other s_j) V^T. nan for a
    matrix with an inf or nan entry, where the SVD does not converge."""
    finite = np.isfinite(a).all(axis=(-2, -1))[..., None, None]
    if not finite.all():
        return np.where(finite, cofactors(np.where(finite, a, 0.0)), np.nan)
    u, s, vt = np.linalg.svd(a)
    n = s.shape[-1]
    others = np.prod(np.where(np.eye(n, dtype=bool), 1.0, s[..., None, :]), axis=-1)
    signs = np.linalg.det(u) * np.linalg.det(vt)
    return signs[..., None, None] * (u * others[..., None, :]) @ vt


def _cofactors_on_graph(m: Any, a: Any) -> Any:
    """cofactors(a) as a graph, for grad of grad at a singular matrix, where inv(a) does not
    exist: C_ij = (-1)**(i+j) det(a without row i and column j), each minor a product
    with constant selection matrices, so det's own VJP differentiates it (again through
    minors where a minor is singular). n**2 determinants: only a singular matrix pays."""
    n = a.shape[-1]
    if n == 1:
        return np.ones(a.shape)  # d a00 / d a00; the 0 x 0 minor's determinant is 1
    drop = [np.delete(np.eye(n), i, axis=0) for i in range(n)]
    minors = [(-1.0) ** (i + j) * m.det(m.matmul(m.matmul(drop[i], a), drop[j].T)) for i in range(n) for j in range(n)]
    return m.reshape(m.stack(*minors, axis=-1), shape=a.shape)


def _det_vjp(m: Any, g: Any, ans: Any, a: Any) -> Any:
    if _singular(m.raw(a)):
        # inv(a) does not exist: the cofactors, from the SVD on a plain pass, as a graph
        # of minors when the gradient is to be differentiated again.
        return _per_matrix(m, g) * (cofactors(a) if m is ARRAY_MATH else _cofactors_on_graph(m, a))
    return _per_matrix(m, g * ans) * _inverse_transpose(m, a)


def _with_nan(a: Any) -> Any:
    """Where a matrix of the stack has a nan entry (a mask shaped like det's result), or None.
    LU pivoting skips a nan (no comparison with it holds), so LAPACK can call such a
    matrix singular: det([[0, 1], [nan, 2]]) came out 0, where it is nan (as in torch)."""
    lost = np.isnan(a).any(axis=(-2, -1))
    return lost if lost.any() else None


def _det(a: Any) -> Any:
    out = np.linalg.det(a)
    lost = _with_nan(a)
    return out if lost is None else np.where(lost, np.nan, out)


def _slogdet(a: Any) -> Any:
    sign, logabsdet = np.linalg.slogdet(a)
    lost = _with_nan(a)
    if lost is not None:
        sign, logabsdet = np.where(lost, np.nan, sign), np.where(lost, np.nan, logabsdet)
    return sign, logabsdet


def _slogdet_vjp(m: Any, g: Any, ans: Any, a: Any, *, output: int) -> Any:
    if output == 0:
        return None  # the sign is piecewise constant
    if _singular(m.raw(a)):
        return _per_matrix(m, g) * np.full(a.shape, np.nan)  # log|det| = -inf has no derivative
    return _per_matrix(m, g) * _inverse_transpose(m, a)


def _slogdet_jvp(m: Any, tangents: Any, ans: Any, a: Any, *, output: int) -> Any:
    # d log|det a| = trace(a^-1 da), the sum of da * a^-T; the sign has none.
    if output == 0:
        return None
    return m.sum(tangents[0] * _slogdet_vjp(m, np.ones(a.shape[:-2]), ans, a, output=1), axis=(-2, -1))


def _solve_jvp(m: Any, tangents: Any, ans: Any, a: Any, b: Any) -> Any:
    # a x = b gives a dx = db - da x.
    ta, tb = tangents
    rhs = tb if ta is None else (-(ta @ ans) if tb is None else tb - ta @ ans)
    return m.solve(a, rhs)


_SINGULAR = [[1.0, 2.0], [2.0, 4.0]]
det = defop(
    "det", _det, (_det_vjp,),
    doc="determinant of a square matrix (or of each in a stack)",
    category=LINALG, method=True, complex_safe=True, check=Check(make=_matrices),
    rule="g * ans * inv(a).T (the cofactor matrix where a is singular)",
    jvp=OVER_MATRIX,
    edges=(
        Edge("singular", [_SINGULAR], 0.0, ([[4.0, -2.0], [-2.0, 1.0]],), second=([[1.0, -1.0], [-1.0, 1.0]],), order=1,
             torch="gradient 0", note="the cofactor matrix: det([[1 + h, 2], [2, 4]]) = 4h; differentiated again, the minors' signed determinants"),
        Edge("a nan entry", [[[0.0, 1.0], [math.nan, 2.0]]], math.nan, ([[math.nan, math.nan], [math.nan, math.nan]],), order=1,
             note="LAPACK's pivoting skips a nan: NumPy's det of this is 0"),
    ),
    batch=LEADING,
    torch=Torch("torch.linalg.det", agrees_at=(([[[0.0, 0.0], [0.0, 0.0]]], {}, 1),)),
)
slogdet = defop(
    "slogdet", _slogdet, (_slogdet_vjp,), n_ret=2,
    doc="sign and log|det| of a square matrix, as two outputs: s, l = slogdet(a)", category=LINALG,
    method=True, check=Check(make=_matrices),
    rule="log|det|: g * inv(a).T;  sign: no gradient",
    jvp=_slogdet_jvp, jvp_rule="sign: 0;  logabsdet: sum(da * inv(a).T) (the trace of inv(a) @ da)",
    edges=(Edge("singular", [_SINGULAR], (0.0, -math.inf), ([[math.nan, math.nan], [math.nan, math.nan]],), order=1,
                torch="-0, -inf; gradient [[-inf, inf], [inf, -inf]]"),),
    batch=LEADING,
    torch=Torch(lambda t, a: tuple(t.linalg.slogdet(a))),
)
inv = defop(
    "inv", lambda a: np.linalg.inv(a),
    (lambda m, g, ans, a: -(matrix_transpose(m, ans) @ g @ matrix_transpose(m, ans)),),
    doc="inverse of a square matrix (or of each in a stack)", category=LINALG, method=True, aliases=("inverse",),
    complex_safe=True, check=Check(make=_matrices),
    jvp=lambda m, tangents, ans, a: -(ans @ tangents[0] @ ans), jvp_rule="-(ans @ da @ ans)",
    rule='-(ans.T @ g @ ans.T), ans = inv(a) (.T swaps the last two axes)',
    edges=(Edge("singular", [_SINGULAR], error="the matrix is singular"),),
    batch=LEADING,
    torch=Torch("torch.linalg.inv"),
)


def _solve(a: Any, b: Any) -> Any:
    refusals.solvable(np.shape(a), np.ndim(b))
    return np.linalg.solve(a, b)


def _solve_db(m: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    return m.solve(matrix_transpose(m, a), g)


def _solve_da(m: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    # x = a^-1 b gives da = -(a^-T g) x^T.
    gb = _solve_db(m, g, ans, a, b)
    if b.ndim == 1:
        return -(m.reshape(gb, shape=(-1, 1)) * m.reshape(ans, shape=(1, -1)))
    return -(gb @ matrix_transpose(m, ans))


def _solve_case(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    b_shape = [(3,), (3, 2)][int(rng.integers(2))]
    return [_well_conditioned(rng), rng.uniform(-2, 2, b_shape)], {}


solve = defop(
    "solve", _solve, (_solve_da, _solve_db), n_in=2,
    doc="x with a @ x = b, for a square matrix a and a vector or matrix b", category=LINALG,
    complex_safe=True, check=Check(make=_solve_case),
    rule="a: -solve(a.T, g) @ ans.T;  b: solve(a.T, g)",
    jvp=_solve_jvp, jvp_rule="solve(a, db - da @ ans)",
    edges=(Edge("singular", [_SINGULAR, [1.0, 2.0]], error="the matrix is singular"),),
    batch=own(_solve_batch, "NumPy's stacked solve, a vector b as a one-column matrix"),
    torch=Torch("torch.linalg.solve"),
)

# ---- vector norms -------------------------------------------------------------------------------

def _norm(x: Any, ord: Any = 2, axis: Axis = None, keepdims: bool = False) -> Any:
    p, size = refusals.norm_order(ord), np.abs(x)
    if p == 1:
        return np.sum(size, axis=axis, keepdims=keepdims)
    if p == math.inf:
        return np.max(size, axis=axis, keepdims=keepdims)
    # Scaled by the largest |x|, as hypot is: the squares of 1e-200 underflow to 0 and
    # those of 1e200 overflow, while the norm is a normal number in both.
    scale = _norm_scale(size, axis)
    scaled = size / scale
    out = np.sqrt(np.sum(scaled * scaled, axis=axis, keepdims=True)) * scale
    return out if keepdims else np.reshape(out, np.shape(np.sum(size, axis=axis)))


def _norm_scale(size: Any, axis: Axis) -> Any:
    """The largest |x| of each slice (kept dims), or 1 where it is 0, inf, nan or empty."""
    if size.size == 0:
        return np.ones(kept_shape(size.shape, axis))
    top = np.max(size, axis=axis, keepdims=True)
    return np.where((top > 0) & (top < np.inf), top, 1.0)


def _norm_vjp(m: Any, g: Any, ans: Any, x: Any, ord: Any = 2, axis: Axis = None, keepdims: bool = False) -> Any:
    # Subgradients where the norm has a kink: sign(0) = 0 for ord 1, 0 at x = 0 for ord 2
    # (as PyTorch), and ties for the largest |x| share the gradient for ord inf.
    p, gx = refusals.norm_order(ord), expand_reduced(m, g, x.shape, axis)
    if p == 1:
        return masked(m, gx, gx * np.sign(m.raw(x)))
    if p == math.inf:
        hits = np.abs(m.raw(x)) == np.reshape(m.raw(ans), kept_shape(x.shape, axis))
        return masked(m, gx, gx * np.sign(m.raw(x)) * (hits / np.sum(hits, axis=normalize_axes(axis, x.ndim), keepdims=True)))
    # x / ans, from x scaled as the forward scales it: a subnormal x over its norm loses
    # digits, and a norm that overflowed to inf has a unit vector all the same.
    y = x / _norm_scale(np.abs(m.raw(x)), axis)
    length = m.norm(y, axis=axis, keepdims=True)
    return masked(m, gx, gx * y / m.where(m.raw(length) == 0, 1.0, length))


def _norm_kink(x: Any, ord: Any = 2, axis: Axis = None, keepdims: bool = False, tol: float = 0.0) -> bool:
    p, size = refusals.norm_order(ord), np.abs(x)
    if p == 1:
        return bool(np.any(size <= tol))
    if p == math.inf:
        top = np.max(size, axis=axis, keepdims=True)
        return bool(np.any(np.sum(top - size <= tol, axis=axis) > 1) or np.any(top <= tol))
    return bool(np.any(np.sqrt(np.sum(size * size, axis=axis)) <= tol))


def _norm_case(rng: np.random.Generator) -> tuple[list[np.ndarray], dict[str, Any]]:
    ord = [1, 2, math.inf, "fro"][int(rng.integers(4))]
    axis = [None, -1][int(rng.integers(2))]
    return [rng.uniform(-2, 2, (3, 4))], {"ord": ord, "axis": axis}


norm = defop(
    "norm", _norm, (_norm_vjp,),
    doc="vector norm over axis (all elements by default): ord 1, 2 (= 'fro') or inf; gradient 0 at 0",
    category="reduction", method=True, kink=_norm_kink, check=Check(make=_norm_case, kink_gap=1e-3),
    rule="ord 1: g * sign(x); ord 2: g * x / ans (0 where ans = 0); ord inf: g * sign(x) at the largest |x|, ties sharing",
    jvp=OVER_AXIS,
    edges=(
        Edge("at 0", [[0.0, 0.0, 0.0]], 0.0, ([0.0, 0.0, 0.0],), order=1, note="a subgradient, never nan"),
        Edge("at 0, ord 1", [[0.0, 0.0, 0.0]], 0.0, ([0.0, 0.0, 0.0],), params={"ord": 1}),
        Edge("ties for the largest, ord inf", [[1.0, -1.0, 0.5]], 1.0, ([0.5, -0.5, 0.0],), params={"ord": math.inf},
             note="shared equally"),
        Edge("tiny elements", [[1e-200, 1e-200]], math.sqrt(2.0) * 1e-200, ([math.sqrt(0.5), math.sqrt(0.5)],), order=1,
             torch="0; gradient 0", note="scaled by the largest |x|, as hypot"),
        Edge("huge elements", [[3e200, 4e200]], 5e200, ([0.6, 0.8],), order=1, torch="inf; gradient 0",
             note="scaled by the largest |x|, as hypot: the squares overflow, the norm does not"),
    ),
    batch=along_axis(),
    torch=Torch(
        torch_calls.norm,
        variants=({"ord": 1, "axis": 0}, {"ord": float("inf"), "axis": -1}, {"ord": "fro", "keepdims": True}),
        agrees_at=(
            ([[0.0, 0.0, 0.0]], {"ord": 2}, 1),
            ([[0.0, 0.0, 0.0]], {"ord": 1}),
            ([[1.0, -1.0, 0.5]], {"ord": math.inf}),
        ),
    ),
)
