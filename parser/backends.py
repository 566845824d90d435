"""How language operations map onto an engine: the tensor engine or the scalar engine.

The machine calls the same methods on either; each backend turns them into engine calls
and says what the engine cannot do in words a user understands.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from gradcalc.autodiff import ALIASES, REGISTRY, Tensor, Value, grad, hessian, is_grad_enabled, jacobian, topological_order, whole_numbers
from gradcalc.autodiff.arguments import counts
from gradcalc.autodiff.batching import CHOOSE, Batched, unbatched, varies
from gradcalc.autodiff.binding import SPELLINGS
from gradcalc.autodiff.derivatives import Deferred
from gradcalc.autodiff.limits import check_size
from gradcalc.autodiff.registry import OpDef
from gradcalc.autodiff.scalar import SCALAR_FUNCTIONS
from gradcalc.autodiff.tensor import new_tensor, to_array
from gradcalc.autodiff.wiring import apply

from .builtins import AUTODIFF, BUILTINS, GENERATION, Lines, is_value, names, on_scalar_engine
from .errors import LanguageError

# True and False are Python's spellings of true and false, accepted as users type them.
CONSTANTS: dict[str, float | bool] = {
    "pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan, "true": True, "false": False, "True": True, "False": False,
}
ATTRIBUTES = ("T", "mT", "shape", "ndim", "size")
# The autodiff built-ins by name, each as help's first line: a view of the built-in table.
AUTODIFF_FUNCTIONS = Lines(AUTODIFF)


_public: tuple[tuple[int, int, int], dict[str, OpDef], frozenset[str]] = ((-1, -1, -1), {}, frozenset())


def public_ops() -> dict[str, OpDef]:
    """The registry's ops that the language offers, by every name (aliases included), and
    beside them every function name the language knows (looked up at every call). Rebuilt
    only when the registry or the built-in table has grown (tests register throwaway ops)."""
    global _public
    key = (len(REGISTRY), len(ALIASES), GENERATION[0])
    if _public[0] != key:
        ops = {name: op for name, op in REGISTRY.items() if op.public}
        ops.update({alias: REGISTRY[name] for alias, name in ALIASES.items() if REGISTRY[name].public})
        _public = (key, ops, frozenset([*ops, *names(is_value)]))
    return _public[1]


def to_param(value: Any, what: str, counts: bool = True) -> Any:
    """A language value as an op parameter, a vector as a tuple: a whole number as int
    where the parameter `counts` things (an axis, a shape), else the float it is."""
    if type(value) is int:  # (an option's default, argnums=0: no trip through NumPy for what it already is)
        return value if counts else float(value)
    if isinstance(value, str) or value is None:
        return value
    if type(value) is Batched:  # inside vmap: a parameter (an axis, a shape, a count) is one for all rows
        raise LanguageError("value", varies(what, "a parameter is one for every row"))
    if value is Ellipsis:
        raise LanguageError("argument", f"{what} cannot be ...: it only indexes, as in x[..., 0]")
    if isinstance(value, tuple):
        raise LanguageError("argument", f"{what} must be a number or a list of numbers, got {len(value)} results")
    data = np.asarray(value.data if isinstance(value, (Tensor, Value)) else value)
    if data.ndim > 1:
        raise LanguageError("argument", f"{what} must be a number or a list of numbers, got a tensor of shape {data.shape}")
    if np.iscomplexobj(data):
        data = data.real
    items = [int(v) if counts and v.is_integer() else v for v in map(float, np.ravel(data))]
    return items[0] if data.ndim == 0 else tuple(items)


def _param(op: OpDef, name: str | None, value: Any) -> Any:
    """One parameter of a call (arguments.check tests it against the op's signature)."""
    return to_param(value, f"{op.name}: {name or 'parameter'}", counts(op, name))


# max(x, 0) is the larger of two values in Python and the largest element along axis 0
# in NumPy; numbers here carry no int/float type to tell them apart, so max and min take
# their axis by keyword only, and a second positional argument says which op to write.
_EXTREMES = {"max": ("maximum", "larger", "largest"), "min": ("minimum", "smaller", "smallest")}


def _ambiguous_extreme(op: OpDef, x: Any, second: Any) -> LanguageError:
    elementwise, pairwise, overall = _EXTREMES[op.name]
    use = f"use {elementwise}(a, b) for the elementwise {pairwise} of two values"
    if isinstance(second, Tensor) and (second.ndim or second.requires_grad):
        return LanguageError("argument", f"{op.name}(x, y) with a tensor y: {use}; {op.name} takes one tensor, and its axis by keyword ({op.name}(x, axis=0))")
    shown = _shown(second)
    if isinstance(x, Tensor) and x.ndim == 0:
        return LanguageError("argument", f"{op.name}(x, {shown}): a scalar has no axis; {use}")
    if not _whole_number(to_param(second, op.name)):  # not an axis at all: only the elementwise op fits
        return LanguageError("argument", f"{op.name}(x, {shown}): {shown} is not an axis (an axis is a whole number); {use}")
    return LanguageError(
        "argument", f"{op.name}(x, {shown}): an axis or a value? write {op.name}(x, axis={shown}) for the {overall} "
        f"element along axis {shown}, or {use}",
    )


def _whole_number(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool)


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    data = np.asarray(getattr(value, "data", value))
    return format(data.item(), "g") if data.ndim == 0 else f"a tensor of shape {data.shape}"


class TensorList(tuple):
    """A list literal whose items do not stack into one tensor ([a, b] with shapes (2,)
    and (3,)): usable only as the inputs of concatenate or stack."""

    def error(self) -> LanguageError:
        shapes = {tuple(np.shape(i.data)) for i in self}
        listed = " and ".join(str(s) for s in sorted(shapes, key=len))
        return LanguageError("shape", f"ragged tensor literal: its elements have shapes {listed} "
                                      f"(a list of unequal tensors is only the inputs of concatenate or stack)")


def not_a_sequence(op: OpDef) -> LanguageError:
    return LanguageError("argument", f"{op.name} takes tensors, or one list of them: {op.name}([a, b])")


def _sequence(value: Any, op: OpDef) -> list[Any]:
    """One argument of concatenate or stack as NumPy reads it: a sequence of tensors, the
    slices along its first axis. A list literal [a, b] gives back a and b themselves
    (unequal shapes arrive as a TensorList; equal ones were stacked by the literal)."""
    if isinstance(value, TensorList):
        return list(value)
    if not isinstance(value, Tensor) or value.ndim == 0:
        raise not_a_sequence(op)
    count = value.shape[0]  # (inside vmap, each row's: the data's first axis is the batch's)
    if type(value) is not Batched:
        if value.op is REGISTRY["stack"] and value.params == {} and len(value.parents) == count:
            return list(value.parents)  # the literal's own items: no extra nodes in the graph
        if not value.requires_grad:
            return [_cut(Tensor(row), (value,)) for row in value.data]
    return [value[i] for i in range(count)]  # type: ignore[index]  # (indexing is an op, registered at import; it batches)


def _index_part(part: Any) -> Any:
    if part is None or part is Ellipsis or isinstance(part, slice):
        return part
    if type(part) is Batched:  # inside vmap: an index is one for all rows
        raise LanguageError("value", varies("an index"))
    if isinstance(part, str):
        raise LanguageError("argument", f"an index must be a whole number, a slice, a list of whole numbers or a mask, not the string {part!r}")
    if isinstance(part, tuple):
        raise LanguageError("argument", "an index must be a whole number, a slice, a list of whole numbers or a mask, "
                                        f"not {len(part)} results; pick one with [k]")
    data = np.asarray(part.data)
    if data.dtype == np.bool_:
        return data  # a mask selects, as in NumPy (x[x > 0])
    if data.ndim == 0:  # a number (x[:, 0]): as a Python float, its tests without NumPy's calls
        number = float(data.real)
        if not number.is_integer():
            raise LanguageError("argument", f"an index must be a whole number, got {data.item()!r}")
        if abs(number) > _LARGEST_INDEX:
            raise LanguageError("argument", f"index {number:g} is out of range for any axis")
        return int(number)
    if not np.all(np.equal(np.mod(data.real, 1), 0)):
        raise LanguageError("argument", "an index tensor must hold whole numbers")
    if data.size and np.max(np.abs(data.real)) > _LARGEST_INDEX:
        raise LanguageError("argument", f"index {np.max(np.abs(data.real)):g} is out of range for any axis")
    return data.real.astype(np.intp)


_LARGEST_INDEX = 2.0**53  # (no axis is longer; past it NumPy's indices overflow)


_WITH_RESPECT_TO = "x must be a variable (a name given a value, as in x = 3) or a named value that y was computed from"


def _written_list(x: Any) -> list[Any] | None:
    """The items of a list or tuple written in place as grad's second argument,
    `grad(L, (W1, b1))` (the compiler passes them as a tuple), or None for one value."""
    return list(x) if isinstance(x, tuple) else None


def derivative_call(name: str, args: list[Any], kwargs: dict[str, Any], kind: Any) -> tuple[str, Any, Any, bool]:
    """grad(y, x), jacobian(y, x), hessian(y, x) checked (y a value of the engine's `kind`):
    its usage text, y, x, and whether the derivative is recorded. Inside `with no_grad:` a
    plain backward pass, recording nothing (torch.autograd.grad without create_graph);
    elsewhere the result is differentiable again."""
    usage = BUILTINS[name].signature
    if kwargs:
        raise LanguageError("argument", f"{usage} takes no keyword arguments, got {', '.join(kwargs)}=")
    if len(args) != 2:
        raise LanguageError("argument", f"{usage} takes two arguments, the output y and the variable x; got {len(args)}")
    y, x = args
    if not isinstance(y, kind):
        raise LanguageError("argument", f"{usage}: y must be a tensor")
    recorded = is_grad_enabled()
    if not recorded and not y.requires_grad and (y.detached or y.op is not None):
        raise LanguageError("argument", f"{usage}: y has no graph to differentiate (it was computed inside with no_grad:, "
                                        "where nothing is recorded, or from values without gradients); compute y from the variables "
                                        "before the block, and take its gradient inside")
    return usage, y, x, recorded


def _check_differentiable(usage: str, y: Any, x: Any, kind: Any = Tensor) -> None:
    """What grad(y, x) may differentiate by: a variable (zeros when y does not use it), or
    a named intermediate (its adjoint, as retain_grad() gives). A constant has no
    gradient, and an expression written in place (`grad(x**2, x*2)`) is a new node y
    was not computed from, so both are errors rather than silent zeros."""
    if not isinstance(x, kind):  # (kind: the engine's values)
        raise LanguageError("argument", f"{usage}: {_WITH_RESPECT_TO}")
    if type(x) is Deferred:  # a derivative named: whether it has a graph is known once built
        x.built()
    if not x.requires_grad:
        what = "a constant made by detach(), by an op without gradient or inside a no_grad block" if x.detached else "a constant"
        hint = (f" (to update {x.name} and keep it a variable, write {x.name} -= step inside with no_grad:, "
                f"not {x.name} = ... or {x.name} = detach(...))") if x.detached and x.name else ""
        raise LanguageError("argument", f"{usage}: {_WITH_RESPECT_TO}; got {what}{hint}")
    if x.is_leaf or x.name is not None:
        return
    if y.requires_grad and any(node is x for node in topological_order(y)):
        return  # a function's parameter bound to an intermediate: y was computed from it
    raise LanguageError(
        "argument", f"{usage}: {_WITH_RESPECT_TO}; got an expression computed in place, which y does not depend on "
        f"(name it first: h = x * 2, then use h in y and in grad(y, h))",
    )


# Methods in the language beyond the ops bound to Tensor (method=True in defop, as
# x.pow(2), x.add(y), x.matmul(W) are): item (Tensor.item is Python's float).
LANGUAGE_METHODS = frozenset({"item"})


def _is_method(op: OpDef) -> bool:
    return op.method or op.name in LANGUAGE_METHODS


def _cut(result: Any, inputs: Any, always: bool = False) -> Any:
    """Mark a result without gradient as `detached` (a constant that stays a constant
    when named) when it was computed from values with gradients or from detached ones,
    or `always` (ops without gradient that take tensors: x > 0, floor, detach)."""
    if type(result) is Tensor:  # the usual result
        if not result.requires_grad and (always or _from_graph(inputs)):  # (every op inside `with no_grad:`)
            result.detached = True
        return result
    for t in result if isinstance(result, tuple) else (result,):
        if isinstance(t, Tensor) and not t.requires_grad and (always or _from_graph(inputs)):
            t.detached = True
    return result


def all_tensors(values: Any) -> bool:
    """Whether every value is a Tensor as it is (the usual arguments: nothing to check).
    A loop rather than all() of a generator, whose making costs more than the check."""
    for v in values:
        if type(v) is not Tensor:
            return False
    return True


def _from_graph(inputs: Any) -> bool:
    """Whether an input has a gradient or was cut from a graph."""
    for i in inputs:
        if isinstance(i, Tensor) and (i.requires_grad or i.detached):
            return True
    return False


class TensorBackend:
    """The default engine: n-dimensional NumPy tensors, every registry op."""

    name = "tensor"
    switch = ""  # (the scalar engine's messages say how to switch to this one)

    def constant(self, value: float) -> Tensor:
        return new_tensor(to_array(value), (), None, None)  # (Tensor(value) without its keyword arguments and defaults)

    def variable(self, value: Any, name: str) -> Any:
        """The value bound to a name. A constant the user gave (a number, a literal, a
        constructor's result) becomes a leaf that requires grad: a variable. A constant
        cut from a graph (`detached`: detach(x), x > 0) and a boolean stay constants."""
        if isinstance(value, Tensor):
            # A derivative whose graph is not yet recorded is never a user's constant, and
            # reading its op would record the graph (built constant, it is detached).
            unbuilt = type(value) is Deferred and value.pending is not None
            user_constant = not unbuilt and value.op is None and not value.detached and value.data.dtype != np.bool_
            if user_constant and not (value.requires_grad and value.name):
                return Tensor(value.data, requires_grad=True, name=name)
            if value.name is None:
                value.name = name
        return value

    def is_variable(self, value: Any) -> bool:
        """A leaf that requires grad: what `variable` makes of a constant the user gave."""
        return isinstance(value, Tensor) and value.op is None and value.requires_grad

    def leaf(self, value: Any, name: str) -> Any:
        """A new variable holding `value`'s numbers, cut from the graph that computed them."""
        if not isinstance(value, Tensor):
            return self.variable(value, name)
        return Tensor(value.data, requires_grad=True, name=name)

    def counter(self, i: int) -> Any:
        """A loop's number: a whole-number constant, as x.shape's are."""
        return _cut(whole_numbers(i), (), always=True)

    def binary(self, op: str, a: Any, b: Any) -> Any:
        op_def = REGISTRY[op]
        result = apply(op_def, (a, b), {})  # (op_def(a, b) without its frame)
        if type(result) is Tensor and result.requires_grad:  # a node of the graph: nothing to cut (_cut's first test)
            return result
        return _cut(result, (a, b), not op_def.has_gradient)

    def unary(self, op: str, a: Any) -> Any:
        return _cut(-a, (a,)) if op == "neg" else a

    def truth(self, value: Any) -> bool:
        if type(value) is Batched:  # inside vmap: each row would take its own branch
            raise LanguageError("value", varies("the condition of 'if'", CHOOSE))
        data = np.asarray(value.data)
        if data.size != 1:
            raise LanguageError("value", f"the condition of 'if' must be a scalar, got shape {data.shape}; use where(cond, a, b) for tensors")
        return bool(data.reshape(()).real != 0)

    def function_names(self) -> frozenset[str]:
        public_ops()  # (which rebuilds the names when the registry has grown)
        return _public[2]

    def from_array(self, data: np.ndarray) -> Tensor:
        return Tensor(data)

    def method_names(self) -> list[str]:
        return sorted(name for name, op in public_ops().items() if _is_method(op))

    def call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        op = public_ops().get(name)
        if op is None:
            builtin = BUILTINS.get(name)  # (no op has a built-in's name)
            if builtin is not None and builtin.expression:  # grad(y, x), jacobian(y, x), hessian(y, x)
                return self._autodiff(name, args, kwargs)
            # another library's spelling (x.t(), float(x)), or an unknown name (habits.py)
            from .habits import call_spelled

            return call_spelled(self, name, args, kwargs, method=False)
        return self._apply(op, args, kwargs)

    def method(self, target: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        op = public_ops().get(name)
        if op is None or not _is_method(op):
            from .habits import call_spelled

            return call_spelled(self, name, [target, *args], kwargs, method=True)
        return self._apply(op, [target, *args], kwargs)

    def _apply(self, op: OpDef, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if not kwargs and len(args) == op.n_in and all_tensors(args):  # f(x): nothing below to check
            return self._run(op, args, [], {})
        n_in = len(args) if op.n_in is None else op.n_in
        if len(args) < n_in:
            raise LanguageError("argument", f"{op.signature} needs {n_in} input{'s' * (n_in != 1)}, got {len(args)}")
        if op.listed and len(args) == 1:
            args = self._sequence(args[0], op)  # concatenate([a, b]): the list is the inputs, as in NumPy
            n_in = len(args)
        for arg in args:
            if type(arg) is Tensor:  # (the usual argument: neither case below)
                continue
            if isinstance(arg, TensorList):
                raise arg.error()
            if arg is None:  # (x.clip(None): a method's arguments are not checked as operands)
                raise LanguageError("argument", f"{op.signature}: None is not a value; it only adds an axis in an index, as in x[None]")
        if kwargs:
            known = set(op.param_names) | ({op.variadic_param} if op.variadic_param else set())
            for key in kwargs:
                if key not in known and SPELLINGS.get(key) not in known:
                    raise LanguageError("argument", f"{op.signature} has no parameter {key!r}")
        inputs = args[:n_in]
        if len(args) == n_in and not kwargs:  # the common call, f(x): no parameters to check
            return self._run(op, inputs, [], {})
        extra = args[n_in:]
        if extra and op.name in _EXTREMES:
            raise _ambiguous_extreme(op, args[0], extra[0])
        names: list[str | None] = [op.variadic_param] * len(extra) if op.variadic_param else list(op.param_names)
        names += [None] * (len(extra) - len(names))  # too many: _bind_params says so
        params = [_param(op, name, value) for name, value in zip(names, extra)]
        named = {key: _param(op, SPELLINGS.get(key, key), value) for key, value in kwargs.items()}
        return self._run(op, inputs, params, named)

    def _run(self, op: OpDef, inputs: list[Any], params: list[Any], named: dict[str, Any]) -> Any:
        """The op on its inputs, with its parameters checked: `params` positional after the
        inputs, `named` by keyword (the JAX and PyTorch engines run it on their arrays)."""
        if not params and not named:
            result = apply(op, tuple(inputs), {})
            if type(result) is Tensor and result.requires_grad:  # (as in binary)
                return result
            return _cut(result, inputs, not op.has_gradient and len(inputs) > 0)
        return _cut(op(*inputs, *params, **named), inputs, not op.has_gradient and len(inputs) > 0)

    def _sequence(self, value: Any, op: OpDef) -> list[Any]:
        return _sequence(value, op)

    def call_with_rule(self, session: Any, function: Any, args: list[Any]) -> Any:
        """A call of a function that has a vjp rule of the user's (user_rules.py)."""
        from .user_rules import call_with_rule

        return call_with_rule(session, function, args)

    def _autodiff(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        usage, y, x, recorded = derivative_call(name, args, kwargs, Tensor)
        targets = _written_list(x)
        if targets is not None:  # grad(L, (W1, b1, W2)): every gradient from one pass, as a tuple
            return self._autodiff_many(name, usage, y, targets, args)
        _check_differentiable(usage, y, x)
        if name == "grad":
            result = grad(y, x, create_graph=recorded)
        elif name == "jacobian":
            result = jacobian(y, x, create_graph=recorded)
        elif y.size != 1:
            raise LanguageError("shape", f"hessian needs a scalar output, got shape {y.shape}")
        else:
            result = hessian(y, x, create_graph=recorded)
        return _cut(result, args, always=True)  # a derivative that is constant is not a user's value

    def _autodiff_many(self, name: str, usage: str, y: Tensor, targets: list[Any], args: list[Any]) -> tuple[Any, ...]:
        """grad(y, (a, b, c)) and jacobian(y, (a, b, c)): the derivative by each, from one
        backward pass (torch.autograd.grad's list of inputs, JAX's tuple argnums)."""
        if name == "hessian":
            raise LanguageError("argument", f"{usage} takes one variable; for the blocks of several, hessian(f, argnums=(0, 1))")
        for t in targets:
            _check_differentiable(usage, y, t)
        recorded = is_grad_enabled()
        if name == "grad":
            results = grad(y, targets, create_graph=recorded)
        else:
            results = jacobian(y, targets, create_graph=recorded)
        return tuple(_cut(r, args, always=True) for r in results)

    def attribute(self, target: Any, name: str) -> Any:
        if not isinstance(target, Tensor):
            raise LanguageError("argument", f"only tensors have attributes, not {type(target).__name__}")
        if name == "T":
            return _cut(target.T, (target,))
        if name == "mT":
            if target.ndim < 2:
                raise LanguageError("shape", f".mT swaps the last two axes and needs 2 or more, got shape {target.shape}")
            return _cut(target.mT, (target,))
        if name in ("shape", "ndim", "size"):
            return _cut(whole_numbers(getattr(target, name)), (), always=True)
        if name == "grad":
            raise LanguageError("name", "tensors have no attribute 'grad': grad(y, x) is dy/dx, and a result's report lists the gradient "
                                        "of each variable")
        raise LanguageError("name", f"tensors have no attribute {name!r} (attributes: {', '.join(ATTRIBUTES)})")

    def index(self, target: Any, parts: list[Any]) -> Any:
        if isinstance(target, tuple):
            if len(parts) != 1:
                raise LanguageError("argument", "a tuple of results takes one index")
            k = _index_part(parts[0])
            if not isinstance(k, int) or not -len(target) <= k < len(target):
                raise LanguageError("argument", f"index {k} is out of range for {len(target)} results")
            return target[k]
        index = tuple([_index_part(p) for p in parts])
        picked = _cut(apply(REGISTRY["getitem"], (target,), {"index": index[0] if len(index) == 1 else index}), (target,))
        if isinstance(target, Tensor) and picked.dtype != target.dtype and not target.requires_grad:
            # Ops take booleans and integers as float64, but indexing only picks elements: a
            # mask's element is a boolean, a shape's a whole number (exactly: 0/1 and
            # integers below 2**53 survive the round trip through float64).
            physical = unbatched(picked)[0]  # (a batch: its physical tensor, ours alone)
            physical.data = physical.data.astype(target.dtype)
        return picked

    def tensor_literal(self, items: list[Any]) -> Any:
        if not items:
            return Tensor(np.zeros(0))
        if any(type(i) is Batched for i in items):  # inside vmap: the items' shapes are each row's
            if len({tuple(i.shape) for i in items}) > 1:
                return TensorList(items)
            return REGISTRY["stack"](*items)
        shapes = {tuple(np.shape(i.data)) for i in items}
        if len(shapes) > 1:
            return TensorList(items)  # an error unless it is the inputs of concatenate or stack
        check_size((len(items), *shapes.pop()), "tensor literal")
        if any(i.requires_grad for i in items):
            return _cut(REGISTRY["stack"](*items), items)  # (a constant inside with no_grad:)
        return _cut(Tensor(np.stack([i.data for i in items])), items)


_ARITHMETIC = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv}
_COMPARISONS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq, "ne": operator.ne}


class DetachedValue(Value):
    """The scalar engine's constant cut from a graph (detach(x), x > 0, or computed from
    such constants): it stays a constant when named, like a detached Tensor."""

    __slots__ = ()


def _boolean(truth: bool) -> DetachedValue:
    """A comparison's result: a constant holding a bool (which prints as true or false),
    as the tensor engine's comparisons give bool arrays."""
    value = DetachedValue(0.0, requires_grad=False)
    value.data = bool(truth)
    return value


def _operand(value: Any) -> Any:
    """A detached value as the plain constant that Value's arithmetic takes (it wraps
    anything but a Value, a subclass included, as a number), its bool as 0.0 or 1.0."""
    return Value(value.data, requires_grad=False) if type(value) is DetachedValue else value


def _carry(result: Value, *operands: Any) -> Value:
    """A result without gradient computed from a detached value is detached too; inside
    `with no_grad:` every result computed from values with gradients is (the scalar
    engine records its graph whatever the grad mode: the language cuts it here)."""
    if result.requires_grad and result._prev and not is_grad_enabled():
        return DetachedValue(result.data, requires_grad=False)
    if not result.requires_grad and any(isinstance(o, DetachedValue) for o in operands):
        return DetachedValue(result.data, requires_grad=False)
    return result


_DETACH = ("detach", "stop_gradient")
_scalar_names: tuple[int, frozenset[str]] = (-1, frozenset())


class ScalarBackend:
    """The course's scalar engine: one node per number, eleven primitives and composites."""

    name = "scalar"
    switch = "--engine tensor"  # how to switch to the tensor engine; the Session sets it

    def constant(self, value: float) -> Value:
        return Value(value, requires_grad=False)

    def variable(self, value: Any, name: str) -> Any:
        if isinstance(value, DetachedValue):
            return value
        if isinstance(value, Value) and (not value.requires_grad or (not value._prev and not value.name)):
            return Value(value.data, name=name)
        if isinstance(value, Value) and value.name is None:
            value.name = name
        return value

    def is_variable(self, value: Any) -> bool:
        return isinstance(value, Value) and not isinstance(value, DetachedValue) and value.requires_grad and not value._prev

    def leaf(self, value: Any, name: str) -> Any:
        return Value(value.data, name=name) if isinstance(value, Value) else self.variable(value, name)

    def counter(self, i: int) -> Any:
        return DetachedValue(float(i), requires_grad=False)

    def binary(self, op: str, a: Any, b: Any) -> Any:
        if op in _ARITHMETIC:
            return _carry(_ARITHMETIC[op](_operand(a), _operand(b)), a, b)
        if op == "pow":
            if b.requires_grad:  # a value computed from constants alone (-1, 1/2) is a constant
                raise LanguageError("argument", f"the scalar engine takes only constant exponents (x ** 2, not x ** y); use {self.switch}")
            return _carry(a ** b.data, a)
        if op in _COMPARISONS:  # a constant: comparisons carry no gradient
            return _boolean(_COMPARISONS[op](a.data, b.data))
        raise LanguageError("argument", f"the scalar engine has no '{op}'; use {self.switch}")

    def unary(self, op: str, a: Any) -> Any:
        return _carry(-a, a) if op == "neg" else a

    def truth(self, value: Any) -> bool:
        return value.data != 0

    def function_names(self) -> frozenset[str]:
        global _scalar_names
        if _scalar_names[0] != GENERATION[0]:  # (made again when a built-in is added)
            _scalar_names = (GENERATION[0], frozenset([*SCALAR_FUNCTIONS, *_DETACH, *names(on_scalar_engine)]))
        return _scalar_names[1]

    def from_array(self, data: np.ndarray) -> Value:
        if data.size != 1:
            raise LanguageError("argument", f"the scalar engine holds single numbers, not shape {data.shape}; use {self.switch}")
        return Value(float(data.reshape(())), requires_grad=False)

    def method_names(self) -> list[str]:
        return sorted([*SCALAR_FUNCTIONS, *_DETACH])

    def call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if name in _DETACH and len(args) == 1 and not kwargs:
            return DetachedValue(args[0].data, requires_grad=False)
        if name not in SCALAR_FUNCTIONS:
            known = name in public_ops() or name in BUILTINS
            hint = f"; use {self.switch}" if known else ""
            raise LanguageError("name", f"{'the scalar engine has no function' if known else 'unknown function'} {name!r}{hint}")
        if len(args) != 1 or kwargs:
            raise LanguageError("argument", f"{name}(x) takes one argument")
        return _carry(getattr(args[0], name)(), args[0])

    def method(self, target: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return self.call(name, [target, *args], kwargs)

    def attribute(self, target: Any, name: str) -> Any:
        raise LanguageError("name", f"scalar values have no attribute {name!r}")

    def index(self, target: Any, parts: list[Any]) -> Any:
        raise LanguageError("argument", f"the scalar engine has no tensors to index; use {self.switch}")

    def tensor_literal(self, items: list[Any]) -> Any:
        raise LanguageError("argument", f"the scalar engine has no tensors; use {self.switch}")

    def call_with_rule(self, session: Any, function: Any, args: list[Any]) -> Any:
        from .user_rules import call_with_rule

        return call_with_rule(session, function, args)  # (which says that rules need the tensor engine)


# What the language's machine asks of an engine: values for constants, names and arrays;
# the operators, calls, methods, attributes, indexing and tensor literals; and the names it
# offers. The two backends answer the same methods.
Backend = TensorBackend | ScalarBackend


def _engine(name: str) -> Callable[[], Backend]:
    """The JAX or PyTorch engine (parser/engines/), imported only when asked for."""

    def made() -> Backend:
        from .engines import engine_backend

        return engine_backend(name)

    return made


BACKENDS: dict[str, Callable[[], Backend]] = {"tensor": TensorBackend, "scalar": ScalarBackend, "jax": _engine("jax"), "torch": _engine("torch")}
