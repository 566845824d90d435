"""The values of the JAX and PyTorch engines, and the light graph they keep.

A value holds the library's array (or, for a constant the program wrote, a NumPy array
that becomes one when first used). Beside it each value records how it was made: the
step (an op of the table, a derivative, a call of a transformed function or of a function
with a rule of yours), its parameters and its inputs. That record is not an engine: JAX
has no tape, so `grad(y, x)` after the fact needs y as a function of x, which `replay`
builds by running the recorded steps again on other inputs (as PyTensor's JAX linker runs
a whole graph); checks replay it too, at perturbed inputs. The values follow gradcalc's
graph protocol (parents, name, requires_grad, data), so reports find named values the same
way on every engine.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcalc.autodiff import topological_order

if TYPE_CHECKING:
    from .library import Library

_SERIAL = itertools.count()


class Step:
    """How a value is computed from its inputs' values (`run`), and how reports name it."""

    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def run(self, library: Library, inputs: list[Any], params: dict[str, Any]) -> Any:
        raise NotImplementedError


class EngineValue:
    """A value of the JAX or PyTorch engine (see the module's docstring). `requires_grad`
    is the language's own: a variable, or a value computed from one while gradients are
    recorded; `detached` a constant cut from such a graph (detach(x), x > 0)."""

    __slots__ = ("value", "_prev", "step", "params", "name", "requires_grad", "detached", "serial", "_host", "grad", "__weakref__")

    def __init__(self, value: Any, parents: tuple[EngineValue, ...] = (), step: Step | None = None, params: dict[str, Any] | None = None,
                 requires_grad: bool = False, name: str | None = None) -> None:
        if isinstance(value, np.generic):  # (NumPy's 0-d results, as an adapter's len gives)
            value = np.asarray(value)
        self.value, self._prev, self.step, self.params = value, parents, step, params
        self.requires_grad, self.name, self.detached = requires_grad, name, False
        self.serial = next(_SERIAL)
        self._host: np.ndarray | None = value if isinstance(value, np.ndarray) else None
        self.grad = None  # (the graph protocol's: reports read gradients from the library instead)

    @property
    def parents(self) -> tuple[EngineValue, ...]:
        return self._prev

    @property
    def label(self) -> str:
        return "" if self.step is None else self.step.label

    @property
    def op(self) -> Step | None:
        return self.step

    @property
    def is_leaf(self) -> bool:
        return not self._prev

    @property
    def data(self) -> np.ndarray:
        """The value as a NumPy array, copied from the device once (raises ValueDependent
        for a value the library is tracing)."""
        if self._host is None:
            self._host = host(self.value)
        return self._host

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.data if dtype is None else self.data.astype(dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def ndim(self) -> int:
        return len(self.value.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.value.shape, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype[Any]:
        if isinstance(self.value, np.ndarray):
            return self.value.dtype
        return np.dtype(str(self.value.dtype).removeprefix("torch."))

    def __repr__(self) -> str:
        return f"EngineValue({self.value!r}{', ' + self.name if self.name else ''})"


class OpStep(Step):
    """An op of the table: its library function on the inputs' values and the parameters
    (`output`: which result of an op with several)."""

    __slots__ = ("op",)

    def __init__(self, op: str) -> None:
        super().__init__(op)
        self.op = op

    def run(self, library: Library, inputs: list[Any], params: dict[str, Any]) -> Any:
        params = dict(params)
        output = params.pop("output", None)
        function = library.function(self.op)
        assert callable(function)
        arrays = [library.floating(library.array(v) if isinstance(v, np.ndarray) else v) for v in inputs]
        if self.op == "pow" and library.name == "torch" and isinstance(inputs[1], np.ndarray) and inputs[1].size == 1:
            arrays[1] = float(inputs[1].reshape(()))  # (a number written as the exponent: see EngineBackend._run)
        out = function(*arrays, **params)
        return out if output is None else out[output]


class CallStep(Step):
    """A call computed again from its inputs' values by `again(library, inputs)`: a
    transformed function, a function with a rule of yours, a derivative."""

    __slots__ = ("again",)

    def __init__(self, label: str, again: Callable[[Library, list[Any]], Any]) -> None:
        super().__init__(label)
        self.again = again

    def run(self, library: Library, inputs: list[Any], params: dict[str, Any]) -> Any:
        out = self.again(library, inputs)
        output = params.get("output")
        return out if output is None else out[output]


# The values replaying substitutes, innermost last: a function called again inside a
# replay (a transformed function, a rule's body) reads the values it closes over from here.
SUBSTITUTED: list[dict[int, Any]] = []


def value_of(node: EngineValue) -> Any:
    """The array a value holds now: its replayed value while a replay substitutes it."""
    for given in reversed(SUBSTITUTED):
        found = given.get(id(node))
        if found is not None:
            return found
    return node.value


def replay(library: Library, outputs: Sequence[EngineValue], given: dict[int, Any], order: list[Any] | None = None,
           offsets: dict[int, Any] | None = None) -> list[Any]:
    """The values of `outputs` computed again from the recorded steps, with the values in
    `given` (by node id) in place of those nodes' own: the graph as a function of them.
    Branches taken while the graph was recorded stay taken. `offsets` are added to the
    values of those nodes where they are computed: the derivative by a node's offset (at
    0) is that node's adjoint, as retain_grad() gives it."""
    if order is None:
        order = _order(outputs)
    values = dict(given)
    SUBSTITUTED.append(values)
    try:
        for node in order:
            key = id(node)
            if key not in values:
                parents = node._prev
                values[key] = value_of(node) if not parents else node.step.run(library, [values[id(p)] for p in parents], node.params or {})
            if offsets is not None and key in offsets:
                values[key] = values[key] + offsets[key]
        return [values[id(o)] for o in outputs]
    finally:
        SUBSTITUTED.pop()


def _order(outputs: Sequence[EngineValue]) -> list[Any]:
    if len(outputs) == 1:
        return topological_order(outputs[0])
    seen: set[int] = set()
    order = []
    for out in outputs:
        for node in topological_order(out):
            if id(node) not in seen:
                seen.add(id(node))
                order.append(node)
    return order


# How each library's arrays come to the host: (array type, conversion), registered by the
# library when it is loaded (library.py).
HOSTS: list[tuple[type, Callable[[Any], np.ndarray]]] = []


def host(value: Any) -> np.ndarray:
    """A library's array (or a NumPy one) as a NumPy array."""
    if isinstance(value, np.ndarray):
        return value
    for kind, convert in HOSTS:
        if isinstance(value, kind):
            return convert(value)
    return np.asarray(value)
