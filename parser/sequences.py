"""A value read as a sequence, as Python and JAX read one: `a, b = value` and `for v in value`.

A tuple of results (`grad(L, (W1, b1))`, `split(x, 2)`) gives its results; a tensor its
slices along the first axis (the rows of a matrix, the elements of a vector), as
iterating a NumPy, JAX or PyTorch array does. Each slice is `value[i]`, a node of the
graph when the tensor has a gradient, so `for row in W: L += sum(row ** 2)` differentiates
to W. A list written in place (`a, b = [x, y]`, `for W in [W1, W2]`) never gets here as a
tensor: the compiler makes it the tuple of its items (compiler._sequence_code), so each
keeps its own shape and graph, as in Python.
"""
from __future__ import annotations

from typing import Any

from .errors import LanguageError
from .functions import FunctionValue, describe_value


def length(value: Any, what: str) -> int:
    """How many items `value` has as a sequence; `what` says what is done with it (for the
    message when it is no sequence: a number, a function)."""
    if isinstance(value, tuple):
        return len(value)
    if isinstance(value, FunctionValue) or value is None or isinstance(value, str):
        raise LanguageError("argument", f"{what}: {describe_value(value) if value is not None else 'None'} has no items")
    shape = tuple(getattr(value, "shape", ()))
    if not shape:
        raise LanguageError("argument", f"{what}: {describe_value(value)} has no items (a scalar has no first axis to go along)")
    return int(shape[0])


def item(backend: Any, value: Any, i: int) -> Any:
    """Item `i` of `value` as a sequence: a result of a tuple, or `value[i]`."""
    if isinstance(value, tuple):
        return value[i]
    return backend.index(value, [backend.constant(float(i))])


def unpacked(backend: Any, value: Any, count: int) -> list[Any]:
    """`value` unpacked into `count` names (`a, b = value`): its items, which must be `count`."""
    if type(value) is tuple and len(value) == count:  # grad(L, (W1, b1)) into as many names: nothing to check
        return list(value)
    names = f"{count} name{'s' * (count != 1)}"
    found = length(value, f"cannot unpack into {names}")
    if found != count:
        if isinstance(value, tuple):
            raise LanguageError("value", f"cannot unpack {found} value{'s' * (found != 1)} into {names}")
        shape = tuple(value.shape)
        raise LanguageError("value", f"cannot unpack a tensor of shape {shape} into {names}: it has {found} "
                                     f"item{'s' * (found != 1)} along its first axis")
    return [item(backend, value, i) for i in range(count)]
