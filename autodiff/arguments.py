"""An op's call checked against its signature, and what NumPy still raises said in the op's words.

`check` runs before a forward whenever a call has parameters or an unusual number of
inputs (wiring.apply): every parameter the signature requires is given, and each
parameter is what its name (or its default) says it is: a whole number, a list of them,
a number, true or false, a string. `reworded` turns what a forward raises anyway (shapes
that do not broadcast, matrices that do not fit, an axis out of range) into a message
about the op and the shapes of its inputs; a message that still reads like Python's or
NumPy's internals becomes a plain statement of the call that failed.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from numbers import Integral, Real
from typing import Any

import numpy as np

from .binding import _NO_DEFAULT, _VAR_POSITIONAL, _parameters
from .errors import ArgumentError, EngineError, ShapeError

WHOLE, WHOLES, NUMBER, FINITE, TRUTH, STRING, NUMBER_OR_STRING = (
    "a whole number", "a whole number or a list of whole numbers", "a number", "a finite number", "true or false",
    "a string", "a number or a string",
)
# What a parameter is, by its name; otherwise by its default's type.
_KINDS = {
    "axis": WHOLES, "axis1": WHOLE, "axis2": WHOLE, "k": WHOLE, "n": WHOLE, "m": WHOLE, "num": WHOLE, "decimals": WHOLE,
    "ddof": WHOLE, "seed": WHOLE, "sections": WHOLES, "repeats": WHOLES, "shift": WHOLES, "shape": WHOLES, "reps": WHOLES,
    "axes": WHOLES, "widths": WHOLES, "keepdims": TRUTH, "descending": TRUTH, "start": FINITE, "stop": FINITE,
    "step": FINITE, "ord": NUMBER_OR_STRING, "subscripts": STRING,
}
_VALUES = frozenset({"low", "high", "value"})  # clip's bounds and full's value: numbers, or tensors that broadcast
_BY_DEFAULT = {bool: TRUTH, int: WHOLE, float: NUMBER, str: STRING}
# Ops whose axis is one axis, never a list (NumPy's accumulations, sorts and joins).
_ONE_AXIS = frozenset({"argmax", "argmin", "concatenate", "cumprod", "cumsum", "logcumsumexp", "repeat", "sort", "split", "stack"})
_LARGEST = 2**53  # beyond it a whole number is no longer exact in float64, and C's int is too small


# By op (not by id: a test's throwaway op may reuse one): the parameters its signature
# requires, and what each parameter must be (_KINDS).
_SPECS: dict[Any, tuple[tuple[str, ...], dict[str, str]]] = {}


def _spec(op: Any) -> tuple[tuple[str, ...], dict[str, str]]:
    spec = _SPECS.get(op)
    if spec is None:
        parameters = _parameters(op.forward)
        n_in = op.n_in
        if n_in is None:  # inputs fill the positional parameters up to *xs
            n_in = next((i for i, (_, kind, _) in enumerate(parameters) if kind is _VAR_POSITIONAL), len(parameters))
        required, kinds = [], {}
        for name, kind, default in parameters[n_in:]:
            if kind is _VAR_POSITIONAL and name != op.variadic_param:
                continue
            if default is _NO_DEFAULT and kind is not _VAR_POSITIONAL:
                required.append(name)
            described = _KINDS.get(name) or _BY_DEFAULT.get(type(default))
            if described is not None:
                kinds[name] = WHOLE if described is WHOLES and name == "axis" and op.name in _ONE_AXIS else described
        spec = _SPECS[op] = (tuple(required), kinds)
    return spec


def counts(op: Any, name: str | None) -> bool:
    """Whether parameter `name` of `op` counts things (an axis, a shape, an index) rather
    than holding a number (full's value, arange's start): the language gives a whole
    number as an int to the first kind, and a value its float (full(2, 1e30))."""
    return name not in _VALUES and _spec(op)[1].get(name or "") not in (NUMBER, FINITE, NUMBER_OR_STRING)


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def shown(value: Any) -> str:
    """A parameter's value as the language writes it."""
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return f"a list of {len(value)}" if not all(isinstance(v, Real) for v in value) else "[" + ", ".join(shown(v) for v in value) + "]"
    if isinstance(value, Real):
        number = float(value)
        return "inf" if number == np.inf else "-inf" if number == -np.inf else format(number, "g") if abs(number) < 1e16 else f"{number:.3g}"
    shape = getattr(value, "shape", None)
    return f"a tensor of shape {tuple(shape)}" if shape is not None else "a value of another kind"


def _whole(value: Any) -> bool:
    if type(value) is int:  # (the usual parameter, an axis or a length: no trip through the ABCs below)
        return -_LARGEST <= value <= _LARGEST
    return isinstance(value, Integral) and not isinstance(value, bool) and -_LARGEST <= int(value) <= _LARGEST


def _fits(value: Any, kind: str) -> bool:
    if kind is WHOLE:
        return _whole(value)
    if kind is WHOLES:
        if isinstance(value, (tuple, list)):  # pad's widths may be pairs: [[1, 2], [0, 1]]
            for v in value:  # (a loop, not all() of a generator: a shape is checked at every reshape a batched pass makes)
                if not (_whole(v) or (isinstance(v, (tuple, list)) and all(_whole(w) for w in v))):
                    return False
            return True
        return _whole(value)
    if kind is TRUTH:
        return isinstance(value, (bool, np.bool_)) or (isinstance(value, Integral) and value in (0, 1))
    if kind is STRING:
        return isinstance(value, str)
    if kind is NUMBER_OR_STRING and isinstance(value, str):
        return True
    if not isinstance(value, Real) or isinstance(value, str):
        return False
    return kind is not FINITE or bool(np.isfinite(float(value)))


# Values as the language and Python callers give parameters; anything else (an array a
# VJP passes, say) is the forward's business.
_PLAIN = (int, float, bool, str, tuple, list, np.integer, np.floating, np.bool_)


def check(op: Any, inputs: Sequence[Any], params: dict[str, Any]) -> None:
    """Raise ArgumentError if `params` do not fit the signature of `op`."""
    required, kinds = _spec(op)
    missing = [name for name in required if name not in params]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ArgumentError(f"{op.signature}: {_names(missing)} {verb} missing")
    for name, value in params.items():
        kind = kinds.get(name)
        if kind is None or value is None or not isinstance(value, _PLAIN) or _fits(value, kind):
            continue
        if kind is WHOLE and isinstance(value, (tuple, list)) and name == "axis":
            raise ArgumentError(f"{op.signature}: {op.name} takes one axis, a whole number, got {shown(value)}")
        items = value if isinstance(value, (tuple, list)) else (value,)
        if kind in (WHOLE, WHOLES) and all(isinstance(v, Integral) and not isinstance(v, bool) for v in items):
            raise ArgumentError(f"{op.signature}: {name} is too large: {shown(value)}")
        raise ArgumentError(f"{op.signature}: {name} must be {kind}, got {shown(value)}")


# NumPy's words -> the language's, with the op and its input shapes around them.
# (Patterns compiled at the first error, not at every start-up.)
_NUMPY_WORDS: tuple[tuple[str, str], ...] = (
    (r"operands could not be broadcast together.*", "the shapes {shapes} do not broadcast together"),
    (r".*(core dimension|gufunc|does not have enough dimensions).*", "the shapes {shapes} do not fit together{fit}"),
    (r"(\d+)-dimensional array given\. Array must be at least two-dimensional", "a matrix (2 or more axes) is needed, got shape {shapes}"),
    (r"Last 2 dimensions of the array must be square", "square matrices are needed, got shape {shapes}"),
    (r"axis (-?\d+) is out of bounds for array of dimension (\d+)", r"axis \1 is out of range for a tensor with \2 axes (shape {shapes})"),
    (r"zero-dimensional arrays cannot be concatenated", "only tensors of 1 or more axes can be joined, got shapes {shapes}"),
    (r"all the input array dimensions except for the concatenation axis must match exactly.*",
     "the shapes {shapes} differ on an axis other than the one joined"),
    (r"all the input arrays must have same number of dimensions.*", "the inputs must have the same number of axes, got shapes {shapes}"),
    (r"all input arrays must have the same shape", "the inputs must have the same shape, got shapes {shapes}"),
    (r"need at least one array to (concatenate|stack)", "at least one tensor is needed"),
    (r"cannot reshape array of size (\d+) into shape (.*)", r"cannot reshape a tensor of size \1 into shape \2"),
    (r"too many indices for array: array is (\d+)-dimensional, but (\d+) were indexed",
     r"too many indices: the tensor has \1 axes and \2 were given"),
    (r"axes don't match array", "the axes must name each of the tensor's axes once (shape {shapes})"),
    (r"could not broadcast input array from shape (\S+) into shape (\S+)", r"cannot broadcast shape \1 to shape \2"),
    (r"cannot select an axis to squeeze out which has size not equal to one", "only an axis of size 1 can be squeezed out (shape {shapes})"),
    (r"boolean index did not match indexed array along axis (\d+); size of axis is (\d+) but size of corresponding boolean axis is (\d+)",
     r"the mask has length \3 where axis \1 has length \2"),
    (r"negative dimensions are not allowed", "a shape cannot have negative sizes"),
    (r"Singular matrix", "the matrix is singular (shape {shapes})"),
)
# What a message must not say to a user: the words of Python's and NumPy's machinery.
FOREIGN = (
    r"positional argument|keyword-only|keyword argument|gufunc|C long|cannot be interpreted|dtype|NoneType|'tuple'|'list'"
    r"|'float'|'int'|'str'|ndarray|non-int|Python int|operand type|argument must be|object|array|iterable|sequence|numpy"
    r"|indices must be|not supported between|(^|[\s(.'])_[A-Za-z]\w*"
)


# NumPy reports a shape problem as a ValueError with one of these words (or an IndexError,
# which covers bad indices and axes); anything else is a bad argument.
_SHAPE_WORDS = ("shape", "broadcast", "align", "dimension", "size", "split")


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[tuple[re.Pattern[str], str], ...], re.Pattern[str]]:
    return tuple((re.compile(p), r) for p, r in _NUMPY_WORDS), re.compile(FOREIGN)


def _shapes(inputs: Sequence[Any]) -> str:
    return " and ".join(str(tuple(np.shape(getattr(t, "data", t)))) for t in inputs)


def _inner_axes(op: Any, inputs: Sequence[Any]) -> str:
    """For a matrix product: which two axes had to be as long as each other."""
    if op.name not in ("matmul", "dot", "inner") or len(inputs) != 2:
        return ""
    a, b = (np.shape(getattr(t, "data", t)) for t in inputs)
    if not a or not b:
        return f": {op.name} needs 1 or more axes in each"
    inner = "its only" if len(b) == 1 else "its next-to-last"
    if op.name == "inner":
        inner = "its last"
    return f": the first's last axis has length {a[-1]}, the second's ({inner} axis) {b[0] if len(b) == 1 else b[-1 if op.name == 'inner' else -2]}"


def reworded(op: Any, inputs: Sequence[Any], params: dict[str, Any], err: Exception) -> Exception:
    """The error to raise for `err`, which op's forward raised on `inputs` and `params`."""
    try:
        check(op, inputs, params)  # a call that never fitted its signature says so first
    except EngineError as mismatch:
        return mismatch
    text = str(err).strip()
    shape_like = isinstance(err, IndexError)
    patterns, foreign = _compiled()
    for pattern, words in patterns:
        match = pattern.fullmatch(text)
        if match is not None:
            fit = _inner_axes(op, inputs)
            text = match.expand(words.replace("{shapes}", _shapes(inputs)).replace("{fit}", fit))
            shape_like = True
            break
    else:
        if shape_like or (isinstance(err, ValueError) and any(w in text for w in _SHAPE_WORDS)):
            text = f"{text} (input shape{'s' * (len(inputs) > 1)} {_shapes(inputs)})"
            shape_like = True
    if foreign.search(text):
        given = ", ".join(f"{k}={shown(v)}" for k, v in params.items())
        inputs_text = f"inputs of shape {_shapes(inputs)}" if inputs else "no inputs"
        plain = f"{op.signature} cannot take {inputs_text}" + (f" with {given}" if given else "")
        return ShapeError(plain) if shape_like else ArgumentError(plain)
    if shape_like:
        return ShapeError(f"{op.name}: {text}")
    return ArgumentError(f"{op.signature}: {text}")
