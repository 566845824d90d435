"""The Tensor: a NumPy array that remembers how it was made.

Arithmetic operators, methods such as `x.relu()` and `x.T` are not written here: the op
registry binds them when each op is defined (see `registry.defop`), so an op lives in
exactly one place.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from .registry import OpDef

_grad_enabled = True


def is_grad_enabled() -> bool:
    return _grad_enabled


class set_grad_enabled:  # noqa: N801 - used as a function: `with set_grad_enabled(False):`
    """Context manager: ops inside record a graph or not, as `enabled` says; the previous
    state comes back afterwards. A class rather than a @contextmanager generator, which
    costs twice as much, and every backward pass enters one."""

    __slots__ = ("enabled", "previous")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.previous = True

    def __enter__(self) -> None:
        global _grad_enabled
        self.previous, _grad_enabled = _grad_enabled, self.enabled

    def __exit__(self, *exc: object) -> None:
        global _grad_enabled
        _grad_enabled = self.previous


def no_grad() -> Any:
    """Context manager: ops inside record no graph (results do not require grad)."""
    return set_grad_enabled(False)


_KEPT = (np.dtype(np.float64), np.dtype(np.complex128), np.dtype(np.bool_))


def to_array(value: Any) -> np.ndarray:
    """float64 for every real number (ints included), complex128 for complex, and bool
    for booleans (comparisons give them; ops take them as 0.0 and 1.0, see apply)."""
    if isinstance(value, Tensor):
        return value.data
    array = np.asarray(value)
    if array.dtype in _KEPT:  # `in` tries identity first: the usual case compares nothing
        return array
    if np.iscomplexobj(array):
        return array.astype(np.complex128)
    if array.dtype == object:
        raise TypeError(f"cannot make a tensor from {type(value).__name__}")
    return array.astype(np.float64)


def squares_finite(data: Any) -> bool:
    """Whether the sum of the squares of an array's entries is finite, in one pass: not
    when an entry is nan or inf (no inf - inf: squares, and complex squares of an
    infinite entry, are inf or nan), nor when a huge entry overflows it. (The array's own
    `dot`: np.vdot's dispatch costs more than the product on small arrays.)"""
    flat = data.ravel("K") if type(data) is np.ndarray else np.asarray(data).ravel()
    return math.isfinite(abs(flat.dot(flat)))


def all_finite(data: Any) -> bool:
    """Whether every entry of an array is finite: squares_finite's one pass for the usual
    answer, each entry tested only when that sum is not finite."""
    return squares_finite(data) or bool(np.isfinite(data).all())


class Tensor:
    """An n-dimensional array node in a define-by-run graph.

    `_prev` (the parents), `op` and `params` describe the op that made the tensor (empty
    for a leaf);
    `grad` is a NumPy array filled by `backward()` for leaves that require grad and for
    tensors that called `retain_grad()`.
    `detached` marks a constant cut from a graph (`detach(x)`, or an op without gradient
    applied to values with one, such as `x > 0`): the language keeps it a constant when
    it is given a name, where a constant typed by the user becomes a variable.
    `x.detach()` is the registry's `detach` op (ops/comparisons.py).
    `made_by` is set only on a node that a VJP made while a backward pass built a graph
    of its own (create_graph): where it came from, as a Provenance. It is left unset on
    every other node, so that the constructor, which runs once per op, does not pay for
    it; read it with `made_by(node)`.
    """

    __slots__ = ("data", "grad", "requires_grad", "_prev", "op", "params", "name", "retains_grad", "detached", "made_by")
    # Makes `ndarray * Tensor` call Tensor.__rmul__ instead of NumPy looping over the tensor.
    __array_priority__ = 1000

    data: np.ndarray
    grad: np.ndarray | None
    requires_grad: bool
    _prev: tuple[Tensor, ...]
    op: OpDef | None
    params: dict[str, Any] | None
    name: str | None
    retains_grad: bool
    detached: bool
    made_by: Provenance
    # Properties the op table binds when their ops are defined (ops/shaping.py), declared
    # here for type checkers; the op methods (`x.exp()`) are bound the same way.
    T: Tensor
    mT: Tensor

    def __init__(self, data: Any, requires_grad: bool = False, name: str | None = None) -> None:
        # (an array of a kept dtype, the usual data, is to_array's answer without its call)
        self.data = data if type(data) is np.ndarray and data.dtype in _KEPT else to_array(data)
        self.grad = None
        self.requires_grad = requires_grad
        self._prev = ()
        self.op = None
        self.params = None
        self.name = name
        self.retains_grad = False
        self.detached = False

    # ---- array facts -------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def parents(self) -> tuple[Tensor, ...]:
        """The inputs of the op that made this tensor (the graph protocol)."""
        return self._prev

    @property
    def is_leaf(self) -> bool:
        return self.op is None

    @property
    def label(self) -> str:
        """The op that made this tensor, or '' for a leaf (the graph protocol)."""
        return self.op.name if self.op is not None else ""

    def item(self) -> float | complex:
        return self.data.item()

    def numpy(self) -> np.ndarray:
        return self.data

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return len(self.data)

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.data.reshape(()))

    def __float__(self) -> float:
        return float(self.data.real if np.iscomplexobj(self.data) else self.data)

    # Tensors are graph nodes compared by identity; `==` is the elementwise op.
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        grad = None if self.grad is None else str(self.grad)
        name = f", name={self.name!r}" if self.name else ""
        return f"Tensor({self.data}, grad={grad}{name})"

    def _repr_html_(self) -> str:
        from .display import node_html

        return node_html("Tensor", self.data, self.grad, getattr(self.op, "name", None), self.name)

    # ---- autodiff ----------------------------------------------------------------
    def backward(self, grad: Any = None, retain_grads: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's `.grad`.

        The seed is `grad`, or ones of this tensor's shape (the gradient of its sum).
        Interior gradients are dropped afterwards unless `retain_grads` is set or the
        tensor called `retain_grad()`.
        """
        from .backprop import backward

        backward(self, grad, retain_grads=retain_grads)

    def retain_grad(self) -> Tensor:
        self.retains_grad = True
        return self

    def zero_grad(self) -> None:
        self.grad = None

    def requires_grad_(self, flag: bool = True) -> Tensor:
        self.requires_grad = flag
        return self


class Provenance(NamedTuple):
    """Where a node of a derivative's graph came from (create_graph): `node`, the node of
    the user's own graph whose derivative rule (VJP) made it, through any number of grad
    of grad; `order`, which derivative of that node's op it belongs to (1 for the first);
    `output`, the output y of the backward pass that made it (dy/dx was asked for).
    Warnings and notes about a node made by a rule speak of the user's op through it
    (`the derivative of softsign`, not the abs inside softsign's rule)."""

    node: Any
    order: int
    output: Any


def made_by(node: Any) -> Provenance | None:
    """The Provenance of a node a derivative rule made, or None for any other node (of
    either engine)."""
    return getattr(node, "made_by", None)


_new_object = object.__new__


def new_tensor(data: np.ndarray, parents: tuple[Tensor, ...], op: OpDef | None, params: dict[str, Any] | None) -> Tensor:
    """The wiring's constructor (wiring.apply): no conversion, no checks, as it runs
    once per op. `data` must already be what `to_array` gives (or int64: whole_numbers)."""
    t = _new_object(Tensor)
    t.data = data
    t.grad = None
    t.requires_grad = op is not None
    t._prev = parents
    t.op = op
    t.params = params
    t.name = None
    t.retains_grad = False
    t.detached = False
    return t


def whole_numbers(values: Any) -> Tensor:
    """A constant of int64, which Tensor() would make float64: what counts things (a
    shape, a size) is a whole number, as the results of argmax and len are (registry.apply
    keeps an op's integers when it has no gradient)."""
    return new_tensor(np.asarray(values, dtype=np.int64), (), None, None)


def as_tensor(value: Any) -> Tensor:
    return value if isinstance(value, Tensor) else Tensor(value)
