"""The machine's calls answered with JAX or PyTorch: the backend of `--engine jax|torch`.

It is the tensor engine's backend (parser/backends.py) for everything the language checks
(names, arguments, parameters, axes, the messages), with each op run by the op table's
counterpart on the library's arrays instead of by gradcalc's engine. A value records the
step that made it and its inputs (values.py) when it is on a graph, as a tensor does.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gradcalc.autodiff import REGISTRY, Tensor, is_grad_enabled
from gradcalc.autodiff import arguments as _arguments
from gradcalc.autodiff.binding import split_args
from gradcalc.autodiff.errors import EngineError
from gradcalc.autodiff.limits import STEPS, check_size
from gradcalc.autodiff.registry import OpDef
from gradcalc.autodiff.shapes import broadcast_shapes
from gradcalc.autodiff.tensor import to_array
from gradcalc.autodiff.wiring import _refuse_broadcast, _refuse_outgrown

from ..backends import TensorBackend, TensorList, _check_differentiable, _index_part, _written_list, derivative_call, not_a_sequence
from ..errors import LanguageError
from .library import Library, ValueDependent
from .table import Gap, refusal
from .values import SUBSTITUTED, EngineValue, OpStep

# Ops that combine their inputs element by element (broadcasting), as gradcalc's forwards
# do with NumPy: shapes that do not broadcast are refused in NumPy's words, so the message
# is the tensor engine's.
_ELEMENTWISE = frozenset({"arithmetic", "elementwise", "no gradient", "integer arithmetic"})


class Capture:
    """The values made before a call began that its body used while on a graph: a call
    computed again (a replay) must read them as the replay gives them (closures)."""

    __slots__ = ("start", "used")

    def __init__(self) -> None:
        self.start = EngineValue(None).serial
        self.used: dict[int, EngineValue] = {}


class EngineBackend(TensorBackend):
    """The JAX or PyTorch engine behind the language (see the module's docstring)."""

    def __init__(self, library: Library) -> None:
        self.library = library
        self.name = library.name
        self.captures: list[Capture] = []

    # ---- values ----------------------------------------------------------------------------
    def constant(self, value: float) -> Any:
        return EngineValue(to_array(value))

    def from_array(self, data: np.ndarray) -> Any:
        return EngineValue(to_array(data))

    def counter(self, i: int) -> EngineValue:
        return _detached(EngineValue(np.asarray(i, dtype=np.int64)))

    def node(self, value: Any) -> EngineValue:
        """A language value as this engine's: a tensor engine's or NumPy's array as a constant."""
        if isinstance(value, EngineValue):
            return value
        if isinstance(value, Tensor):
            return EngineValue(np.asarray(value.data))
        return EngineValue(to_array(value))

    def read(self, node: EngineValue) -> Any:
        """The array an input holds, as an op takes it: the library's (a constant written in
        the program stays NumPy's until an op lifts it), booleans and integers as float64.
        Noted by every call running that began after the input was made (closures)."""
        for capture in self.captures:
            if node.serial < capture.start and node.requires_grad:
                capture.used.setdefault(id(node), node)
        value = node.value
        if SUBSTITUTED:
            from .values import value_of

            value = value_of(node)
        if isinstance(value, np.ndarray):
            if value.dtype.kind in "biu":
                value = value.astype(np.float64)
            return self.library.array(value) if self.name == "torch" else value
        return self.library.floating(value)

    def variable(self, value: Any, name: str) -> Any:
        """As the tensor engine's: a constant the user gave becomes a variable (a leaf that
        requires grad), a constant cut from a graph and a boolean stay constants."""
        if isinstance(value, Tensor):
            value = self.node(value)
        if isinstance(value, EngineValue):
            user_constant = not value._prev and not value.detached and value.dtype != np.bool_
            if user_constant and not (value.requires_grad and value.name):
                return self._new_variable(value, name)
            if value.name is None:
                value.name = name
        return value

    def _new_variable(self, value: EngineValue, name: str) -> EngineValue:
        array = value.value
        if isinstance(array, np.ndarray) or not self.library.is_array(array):
            array = self.library.array(to_array(array))
        if self.name == "torch":  # (a leaf of PyTorch's graph of its own)
            array = array.detach().requires_grad_(array.is_floating_point() or array.is_complex())
        made = EngineValue(array, requires_grad=True, name=name)
        made._host = value._host
        return made

    def is_variable(self, value: Any) -> bool:
        return isinstance(value, EngineValue) and not value._prev and value.requires_grad

    def leaf(self, value: Any, name: str) -> Any:
        if not isinstance(value, EngineValue):
            return self.variable(value, name)
        fresh = EngineValue(value.value if self.name == "jax" else self.library.detach(value.value))
        fresh._host = value._host
        return self._new_variable(fresh, name)

    # ---- operators and ops --------------------------------------------------------------------
    def binary(self, op: str, a: Any, b: Any) -> Any:
        return self._run(REGISTRY[op], [a, b], [], {})

    def unary(self, op: str, a: Any) -> Any:
        return self._run(REGISTRY["neg"], [a], [], {}) if op == "neg" else a

    def _run(self, op: OpDef, inputs: list[Any], params: list[Any], named: dict[str, Any]) -> Any:
        """The op's counterpart on the inputs' arrays, with the parameters bound and checked
        as the tensor engine binds and checks them."""
        steps = STEPS
        steps.left -= 1
        if steps.left < 0:
            steps.spent(op.name)
        nodes = [self.node(x) for x in inputs]
        if params or named or op.n_in != len(nodes):
            args, bound = split_args(op, (*nodes, *params), named)
            nodes = list(args)
            if bound:
                _arguments.check(op, nodes, bound)
                kinds = _arguments._spec(op)[1]  # (true and false are 1 and 0 until here; the libraries want bool)
                bound = {k: bool(v) if kinds.get(k) is _arguments.TRUTH and isinstance(v, int) else v for k, v in bound.items()}
        else:
            bound = {}
        function = self.library.function(op.name)
        if isinstance(function, Gap):
            raise LanguageError("argument", refusal(op.name, self.name, function, self.switch or "--engine tensor"))
        self._refuse_too_big(op, nodes, bound)
        arrays = [self.read(n) for n in nodes]
        if op.name == "pow" and self.name == "torch" and isinstance(nodes[1].value, np.ndarray) and nodes[1].size == 1:
            # A number written as the exponent is PyTorch's scalar exponent: as a tensor, torch.func's
            # forward mode multiplies its zero tangent by log(base), nan for a negative base.
            arrays[1] = float(nodes[1].value.reshape(()))
        record = op.has_gradient and is_grad_enabled() and any(n.requires_grad for n in nodes)
        try:
            if record or self.name != "torch":
                out = function(*arrays, **bound)
            else:
                with self.library.no_grad():
                    out = function(*arrays, **bound)
        except LanguageError:
            raise
        except EngineError:
            raise
        except self.library.dependent():  # (a mask under jit: a shape that depends on the values)
            raise ValueDependent(self.name, op.name) from None
        except self.library.errors() as err:
            raise _arguments.reworded(op, nodes, bound, err) from None
        step = OpStep(op.name) if record else None
        if op.n_ret == 1:
            return self._made(out, nodes, step, bound, record, op)
        return tuple(self._made(o, nodes, step, {**bound, "output": k}, record, op) for k, o in enumerate(out))

    def _made(self, out: Any, nodes: Sequence[EngineValue], step: Any, params: dict[str, Any], record: bool, op: OpDef) -> EngineValue:
        made = EngineValue(out, tuple(nodes) if record else (), step, params if record else None, requires_grad=record)
        if not record and nodes and (not op.has_gradient or any(n.requires_grad or n.detached for n in nodes)):
            made.detached = True  # as the tensor engine's _cut
        return made

    def _refuse_too_big(self, op: OpDef, nodes: Sequence[EngineValue], params: dict[str, Any]) -> None:
        """The element cap, before anything is computed, on stand-ins of the inputs' shapes;
        and shapes that do not broadcast, refused in NumPy's words."""
        stand_ins = [np.broadcast_to(np.zeros((), dtype=np.float64), n.shape) for n in nodes]
        if op.out_shape is not None:
            _refuse_outgrown(op, stand_ins, params)
            return
        if len(stand_ins) > 1 and op.category in _ELEMENTWISE:
            try:
                broadcast_shapes(*(s.shape for s in stand_ins))
            except ValueError:
                raise _arguments.reworded(op, nodes, params, ValueError("operands could not be broadcast together")) from None
            _refuse_broadcast(op, stand_ins)

    def _sequence(self, value: Any, op: OpDef) -> list[Any]:
        if isinstance(value, TensorList):
            return list(value)
        if not isinstance(value, EngineValue) or value.ndim == 0:
            raise not_a_sequence(op)
        if isinstance(value.step, OpStep) and value.step.op == "stack" and not value.params and len(value._prev) == value.shape[0]:
            return list(value._prev)  # the literal's own items
        return [self.index(value, [EngineValue(np.asarray(float(k)))]) for k in range(value.shape[0])]

    # ---- attributes, indexing, literals ---------------------------------------------------------
    def attribute(self, target: Any, name: str) -> Any:
        if not isinstance(target, EngineValue):
            return super().attribute(target, name)
        if name == "T":
            return self._run(REGISTRY["transpose"], [target], [], {})
        if name == "mT":
            if target.ndim < 2:
                raise LanguageError("shape", f".mT swaps the last two axes and needs 2 or more, got shape {target.shape}")
            return self._run(REGISTRY["swapaxes"], [target], [-2, -1], {})
        if name in ("shape", "ndim", "size"):
            return _detached(EngineValue(np.asarray(getattr(target, name), dtype=np.int64)))
        return super().attribute(Tensor(0.0), name)  # (the tensor engine's message for any other name)

    def index(self, target: Any, parts: list[Any]) -> Any:
        if isinstance(target, tuple):
            return super().index(target, parts)
        target = self.node(target)
        index = tuple(_index_part(p) for p in parts)
        picked = self._run(REGISTRY["getitem"], [target], [], {"index": index[0] if len(index) == 1 else index})
        kind = target.dtype
        if kind.kind in "biu" and not target.requires_grad and picked.dtype != kind:
            # (ops take booleans and whole numbers as float64; indexing only picks them)
            picked.value = picked.value.astype(kind) if isinstance(picked.value, np.ndarray) or self.name == "jax" \
                else picked.value.to(getattr(self.library.roots["torch"], str(kind)))
            picked._host = None
        return picked

    def tensor_literal(self, items: list[Any]) -> Any:
        if not items:
            return EngineValue(np.zeros(0))
        nodes = [self.node(i) for i in items]
        if len({n.shape for n in nodes}) > 1:
            return TensorList(nodes)  # an error unless it is the inputs of concatenate or stack
        check_size((len(nodes), *nodes[0].shape), "tensor literal")
        if all(isinstance(n.value, np.ndarray) and not n.requires_grad for n in nodes):
            made = EngineValue(np.stack([n.value for n in nodes]))
            made.detached = any(n.detached for n in nodes)
            return made
        return self._run(REGISTRY["stack"], nodes, [], {})

    # ---- derivatives and rules ----------------------------------------------------------------
    def _autodiff(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        from .derivatives import expression_derivative

        usage, y, x, recorded = derivative_call(name, args, kwargs, EngineValue)
        targets = _written_list(x)
        if targets is not None and name == "hessian":
            raise LanguageError("argument", f"{usage} takes one variable; for the blocks of several, hessian(f, argnums=(0, 1))")
        for t in targets if targets is not None else [x]:
            _check_differentiable(usage, y, t, EngineValue)
        if name == "hessian" and y.size != 1:
            raise LanguageError("shape", f"hessian needs a scalar output, got shape {y.shape}")
        found = expression_derivative(self, name, y, targets if targets is not None else [x], recorded)
        return tuple(found) if targets is not None else found[0]

    def call_with_rule(self, session: Any, function: Any, args: list[Any]) -> Any:
        from .transforms import call_with_rule

        return call_with_rule(session, function, args)


def _detached(value: EngineValue) -> EngineValue:
    value.detached = True
    return value
