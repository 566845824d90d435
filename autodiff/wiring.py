"""The wiring every op goes through (Lucid's `func_op`): `apply` turns numbers into
tensors, refuses a result over the element cap before computing it, counts the step,
runs the forward, restates NumPy's errors in the op's words, and records the graph when
an input requires grad; `unbroadcast` sums a gradient back to its input's shape. An
op's author writes only its forward and VJPs (registry.defop).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import arguments
from . import limits as _limits  # its _max_elements, read once per op
from . import tensor as _grad_mode  # its _grad_enabled, read once per op
from .batching import Batched, apply_batched
from .binding import split_args
from .errors import EngineError, SizeLimitError
from .limits import BIG_RESULT, STEPS, check_memory, check_outputs, check_size
from .namespaces import ARRAY_MATH
from .shapes import broadcast_shapes
from .tensor import Tensor, new_tensor, to_array

if TYPE_CHECKING:
    from .registry import OpDef


def _refuse_outgrown(op: OpDef, arrays: Sequence[np.ndarray], params: dict[str, Any]) -> None:
    """Raise SizeLimitError before computing if the result of an op with an `out_shape`
    hook would be over the cap."""
    try:
        shape = op.out_shape(*arrays, **params) if params else op.out_shape(*arrays)  # type: ignore[misc]
    except (ValueError, IndexError, TypeError):
        return  # a malformed call: the forward reports it in its own words
    if op.n_ret == 1:
        check_size(shape, op.name)
    else:
        check_outputs(shape[0], shape[1:], op.name)


def _refuse_broadcast(op: OpDef, arrays: Sequence[np.ndarray]) -> None:
    """Raise SizeLimitError before computing if the broadcast result of an op without an
    `out_shape` hook would be over the cap."""
    try:
        shape = broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        return  # the forward reports the mismatch with both shapes
    check_size(shape, op.name)


def checked_forward(op: OpDef) -> Callable[..., Any]:
    def forward(*arrays: Any, **params: Any) -> Any:
        _refuse_outgrown(op, arrays, params)
        return op.forward(*arrays, **params)

    return forward


def _gather(inputs: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[np.ndarray], bool, int]:
    """apply's inputs in general: each as a Tensor (a number or an array becomes one in its
    place), their arrays as the forward takes them, whether any requires grad, and the
    product of their sizes when there are several (0 for one input)."""
    arrays: list[np.ndarray] = []
    bound = 1
    wanted = False
    for t in inputs:
        if type(t) is not Tensor:
            if type(t) is Batched:  # a batch of tensors: the op's batching rule runs instead
                return inputs, None, False, 0  # type: ignore[return-value]
            if not isinstance(t, Tensor):  # (a derivative whose graph is deferred is a Tensor as it is)
                # The loop still walks the tuple it started with, so each is converted once, at its turn.
                t = Tensor(t)
                i = len(arrays)
                inputs = (*inputs[:i], t, *inputs[i + 1 :])
        if t.requires_grad:
            wanted = True
        a = t.data
        if a.dtype not in _NATIVE:
            # Booleans (what comparisons give) and integers (argmax, len) enter every op as
            # float64, as PyTorch promotes them against a float tensor: True + True is 2,
            # and no forward has to handle bool or integer arrays.
            a = a.astype(np.float64)
        arrays.append(a)
        bound *= a.size
    return inputs, arrays, wanted, bound if len(arrays) > 1 else 0


def apply(op: OpDef, args: tuple[Any, ...], params: dict[str, Any]) -> Any:
    """Run `op` on `args`, recording the graph when any input requires grad.

    Every op of the tensor engine passes here, so here it is checked against the element
    cap (before it runs) and counted against the step budget (see limits.py). On small
    tensors this wiring costs more than NumPy's arithmetic, so the common call (Tensors
    in, as many as the op takes, no parameters) goes straight through."""
    steps = STEPS
    steps.left -= 1
    if steps.left < 0:
        steps.spent(op.name)  # raises when a budget (steps, time, memory) is over
    inputs = args
    if params or len(args) != op.n_in or type(args) is not tuple:
        inputs, params = split_args(op, args, params)
        if params:
            arguments.check(op, inputs, params)
    # One or two Tensors of float64 or complex128 (nearly every call) are read without a
    # loop; `bound`, the product of the input sizes, bounds a broadcast result's size.
    arrays: Sequence[np.ndarray]
    n = len(inputs)
    if n == 1 and type(t := inputs[0]) is Tensor and (a := t.data).dtype in _NATIVE:
        arrays, wanted, bound = (a,), t.requires_grad, 0  # (a result no bigger than an input that exists)
    elif (n == 2 and type(t := inputs[0]) is Tensor and type(u := inputs[1]) is Tensor
          and (a := t.data).dtype in _NATIVE and (b := u.data).dtype in _NATIVE):
        arrays, wanted, bound = (a, b), t.requires_grad or u.requires_grad, a.size * b.size
    else:
        inputs, arrays, wanted, bound = _gather(inputs)
        if arrays is None:
            return apply_batched(op, tuple(t if isinstance(t, Tensor) else Tensor(t) for t in inputs), params)
    if op.out_shape is not None:
        _refuse_outgrown(op, arrays, params)
    elif bound > _limits._max_elements:
        _refuse_broadcast(op, arrays)  # the exact shape, only when the cap could be hit
    try:
        # Without ** when there are no parameters (the common case): a cheaper call.
        out = op.forward(*arrays, **params) if params else op.forward(*arrays)
    except EngineError:
        raise
    except MemoryError:
        raise _out_of_memory(op, inputs) from None
    except (ValueError, IndexError, TypeError) as err:
        raise arguments.reworded(op, inputs, params, err) from None
    record = wanted and op.vjps is not None and _grad_mode._grad_enabled
    if op.n_ret == 1:
        if type(out) is not np.ndarray or out.dtype not in _NATIVE:  # _as_output, inline: once per op
            # (the 0-d results of NumPy's arithmetic are scalars: to_array's answer without its call)
            out = np.asarray(out) if type(out) is np.float64 else _as_output(out, op.vjps is None)
        if out.size >= BIG_RESULT:
            check_memory(op.name)
        return new_tensor(out, inputs, op, params) if record else new_tensor(out, (), None, None)
    return _outputs(op, out, inputs, params, record)


# (apply's rare cases are functions of their own: a generator or closure in apply would
# make its locals cells, which cost every call.)
def _outputs(op: OpDef, out: Any, inputs: tuple[Tensor, ...], params: dict[str, Any], record: bool) -> tuple[Tensor, ...]:
    """The nodes of a multi-output op's results, each recording which output it is."""
    return tuple(
        new_tensor(_as_output(o), inputs if record else (), op if record else None, {**params, OUTPUT: k} if record else None)
        for k, o in enumerate(out)
    )


def _out_of_memory(op: OpDef, inputs: tuple[Tensor, ...]) -> SizeLimitError:
    shapes = " and ".join(str(t.shape) for t in inputs)
    return SizeLimitError(f"{op.name}: out of memory computing a result from inputs of shape {shapes} (lower --max-elements)")


# A node made by a multi-output op records which output it is under this key of its
# params; the op's VJP receives it as a keyword.
OUTPUT = "output"


def recorded_params(node: Tensor) -> tuple[dict[str, Any], int | None]:
    """The parameters a node's op was called with, and which of its outputs the node is
    (None for a single-output op)."""
    params = dict(node.params or {})
    return params, params.pop(OUTPUT, None)


_NATIVE = (np.dtype(np.float64), np.dtype(np.complex128))
_FLOAT = _NATIVE[0]


def _as_output(out: Any, counts: bool = False) -> np.ndarray:
    """An op's result as the engine keeps it: an array (NumPy gives scalars for 0-d
    results) of float64, complex128 or bool. `counts`, for an op without gradient, keeps
    NumPy's integers too, as int64: what counts or indexes (argmax, len) is a whole
    number, never a real one, and has no gradient to carry (docs/engine.md, "The tensor engine")."""
    if type(out) is np.ndarray and out.dtype in _NATIVE:
        return out
    if counts:
        array = np.asarray(out)
        if array.dtype.kind in "iu":
            return array.astype(np.int64, copy=False)
    return to_array(out)


# A plain backward pass takes a gradient back to an input's shape (un-broadcasting it,
# or spreading a reduction's over the reduced axes) by NumPy's own calls rather than
# through the ops: a reshape to a shape that exists needs no check of the cap (the
# fast-path ledger, docs/performance.md; tests turn it off to compare).
DIRECT_SHAPES = [True]


def unbroadcast(m: Any, g: Any, shape: tuple[int, ...]) -> Any:
    """Sum `g` down to `shape`: over the leading axes broadcasting added, then (keeping
    dims) over every axis where the input had size 1. Correct for every NumPy broadcast."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead < 0:  # a VJP that returned a broadcastable gradient rather than a full one
        return m.broadcast_to(g, shape=shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    if m is ARRAY_MATH and DIRECT_SHAPES[0]:  # a plain pass, down to the shape of an input that exists: no cap to check
        return (np.add.reduce(g, axis=axes, keepdims=True) if axes else g).reshape(shape)  # (the method: np.reshape's wrapper costs as much)
    if axes:
        g = m.sum(g, axis=axes, keepdims=True)
    return m.reshape(g, shape=shape)
