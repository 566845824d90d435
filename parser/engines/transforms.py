"""The language's transformations on JAX and PyTorch: JAX's own (and torch.func's) applied
to the language's functions.

A language function becomes a Python function of arrays that runs it through the session
(the machine then calls the backend on the library's tracers); `jax.grad`, `jax.vmap`,
`torch.func.jacrev`, ... transform that. A function with a rule of yours (`vjp f(x, g) =
...`) becomes a `jax.custom_vjp` function or a `torch.autograd.Function`. Each result
records how to compute it again from its inputs and from the values the function read
from outside (its closure), so that it can be differentiated again, by a transformation or
by `grad(y, x)`, and checked.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradcalc.autodiff import is_grad_enabled

from ..builtins import BUILTINS
from ..errors import LanguageError
from ..functions import FunctionValue, describe_value
from ..transforms import Transformed, _spread, label
from .backend import Capture, EngineBackend
from .library import Library
from .values import CallStep, EngineValue


def _flat(tree: Any) -> tuple[list[Any], Any]:
    """The arrays of a result (nested tuples of arrays), and its structure."""
    if isinstance(tree, (tuple, list)):
        parts = [_flat(t) for t in tree]
        return [a for flat, _ in parts for a in flat], [shape for _, shape in parts]
    return [tree], None


def _built(flat: list[Any], structure: Any) -> Any:
    """The values back in the result's structure (consumed from the front of `flat`)."""
    if structure is None:
        return flat.pop(0)
    return tuple(_built(flat, s) for s in structure)


def _arrays(backend: EngineBackend, out: Any, what: str, scalar: bool) -> Any:
    """A function's result as the library's arrays (a tuple of them for several results)."""
    if isinstance(out, tuple):
        return tuple(_arrays(backend, o, what, scalar) for o in out)
    if not isinstance(out, EngineValue):
        raise LanguageError("argument", f"{what}: the function's result must be a tensor, got {describe_value(out)}")
    if scalar and out.size != 1:
        raise LanguageError("shape", f"{what}: the function must return a scalar, got shape {out.shape}; "
                                     "for the derivatives of each output use jacrev or jacfwd")
    array = backend.read(out)
    return array.reshape(()) if scalar else array


def as_function(session: Any, f: FunctionValue, what: str, scalar: bool = False, kwargs: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The language function `f` as a Python function of the library's arrays."""
    backend: EngineBackend = session.backend

    def run(*arrays: Any) -> Any:
        leaves = [EngineValue(a, requires_grad=True) for a in arrays]
        return _arrays(backend, session.call_function(f, leaves, kwargs or {}), what, scalar)

    return run


def _recorded(backend: EngineBackend, what: str, compute: Callable[[Library, list[Any]], Any], inputs: list[EngineValue]) -> Any:
    """compute(library, the inputs' arrays) as values of this engine, each recording how to
    compute it again from the inputs and from what the function read from outside."""
    capture = Capture()
    backend.captures.append(capture)
    try:
        result = compute(backend.library, [backend.read(n) for n in inputs])
    finally:
        backend.captures.remove(capture)
    flat, structure = _flat(result)
    parents = tuple(inputs) + tuple(capture.used.values())
    record = is_grad_enabled() and any(p.requires_grad for p in parents)

    def again(library: Library, values: list[Any]) -> Any:
        return _flat(compute(library, values[: len(inputs)]))[0]

    step = CallStep(what, again) if record else None
    made = []
    for k, array in enumerate(flat):
        node = EngineValue(array, parents if record else (), step, {"output": k} if record else None, requires_grad=record)
        node.detached = not record  # (a result of constants alone is a constant, as grad(3 * x, x) is)
        made.append(node)
    return _built(made, structure)


def _tensors(args: list[Any], what: str, which: str = "argument") -> list[EngineValue]:
    for k, a in enumerate(args):
        if not isinstance(a, EngineValue):
            raise LanguageError("argument", f"{what}: {which} {k} must be a tensor, got {describe_value(a)}")
    return args


def apply_transform(session: Any, transformed: Transformed, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """grad(f)(x), vmap(f)(X), ...: the library's transformation of f, at the arguments."""
    what = label(transformed)
    kind, f, option = transformed.kind, transformed.f, transformed.option
    inputs = _tensors(args, what)
    if kind == "vmap" and isinstance(option[0], tuple) and len(option[0]) != len(inputs):
        raise LanguageError("argument", f"{what}: in_axes has {len(option[0])} entries for {len(inputs)} argument{'s' * (len(inputs) != 1)}")
    run = as_function(session, f, what, BUILTINS[kind].scalar_output, kwargs)

    def compute(library: Library, values: list[Any]) -> Any:
        return library.transform(kind, run, option)(*values)

    return _recorded(session.backend, what, compute, inputs)


def pointwise(session: Any, name: str, f: FunctionValue, rest: list[Any]) -> Any:
    """jvp(f, primals, tangents), vjp(f, *primals), hvp(f, primals, tangents)."""
    what = f"{name}({label(f)})"
    if name == "vjp":
        if not rest:
            raise LanguageError("argument", "vjp(f, *primals) takes the primals after the function, as in vjp(f, x)")
        primals = _tensors(list(rest), what, "primal")
        run = as_function(session, f, what)
        out = _recorded(session.backend, what, lambda library, values: run(*values), primals)
        return out, Pullback(f, run, primals)
    if len(rest) != 2:
        raise LanguageError("argument", f"{name}(f, primals, tangents) takes the function, the primals and the tangents; got {len(rest) + 1} arguments")
    primals = _tensors(_spread(rest[0], f, what, "primals"), what, "primal")
    tangents = _tensors(_spread(rest[1], f, what, "tangents"), what, "tangent")
    if len(primals) != len(tangents):
        raise LanguageError("argument", f"{what}: {len(primals)} primals but {len(tangents)} tangents")
    for k, (x, t) in enumerate(zip(primals, tangents)):
        if x.shape != t.shape:
            raise LanguageError("shape", f"{what}: tangent {k} has shape {t.shape}, its primal {x.shape}; they must be the same")
    n = len(primals)
    if name == "jvp":
        run = as_function(session, f, what)

        def compute(library: Library, values: list[Any]) -> Any:
            return library.jvp(run, values[:n], values[n:])
    else:
        scalar = as_function(session, f, what, scalar=True)

        def compute(library: Library, values: list[Any]) -> Any:
            grad = library.transform("grad", scalar, tuple(range(n)))
            tangent = library.jvp(grad, values[:n], values[n:])[1]
            return tangent[0] if n == 1 else tuple(tangent)

    return _recorded(session.backend, what, compute, [*primals, *tangents])


class Pullback(FunctionValue):
    """vjp's second result, u -> u J: the library's pullback, called at u."""

    __slots__ = ("f", "run", "primals")

    def __init__(self, f: FunctionValue, run: Callable[..., Any], primals: list[EngineValue]) -> None:
        self.f, self.run, self.primals = f, run, primals

    def signature(self) -> str:
        return f"<vjp of {label(self.f)}>"

    def arity(self) -> int | None:
        return 1

    def apply(self, session: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        what = f"the pullback of {label(self.f)}"
        if kwargs or len(args) != 1:
            raise LanguageError("argument", f"{what} takes one argument, the cotangent u of the output; got {len(args) + len(kwargs)}")
        (u,) = _tensors(args, what, "cotangent")
        n = len(self.primals)

        def compute(library: Library, values: list[Any]) -> Any:
            out, pull = library.vjp(self.run, values[:n])
            cotangent = values[n]
            if tuple(cotangent.shape) != tuple(out.shape):
                cotangent = cotangent.reshape(()) if cotangent.size == 1 and not out.shape else cotangent
            return tuple(pull(cotangent))  # one cotangent per primal, a tuple of one too (as parser/transforms.py's Pullback)

        return _recorded(session.backend, what, compute, [*self.primals, u])


def call_with_rule(session: Any, function: Any, args: list[Any]) -> Any:
    """f(x) for a def with a rule of yours: its body forward, your rule backward, as the
    library's own custom derivative (jax.custom_vjp, torch.autograd.Function)."""
    backend: EngineBackend = session.backend
    rule = function.rule.rule
    inputs = [backend.node(session._operand(a, function.name)) for a in args]
    shapes = [tuple(n.shape) for n in inputs]

    def body(*arrays: Any) -> Any:
        leaves = [EngineValue(a, requires_grad=True) for a in arrays]
        return _arrays(backend, session.evaluate(function.code, dict(zip(function.params, leaves)), function), function.name, False)

    def backward(primals: Any, g: Any) -> Any:
        leaves = [EngineValue(a, requires_grad=True) for a in (*primals, g)]
        given = session.evaluate(rule.code, dict(zip(rule.params, leaves)), rule)
        items = list(given) if isinstance(given, tuple) else [given]
        if len(items) != len(primals):
            raise LanguageError("value", f"the vjp rule of {function.name} gives {len(items)} cotangent{'s' * (len(items) != 1)} "
                                         f"for {len(primals)} parameter{'s' * (len(primals) != 1)}")
        return [_unbroadcast(backend.library, backend.read(backend.node(item)), shape) for item, shape in zip(items, shapes)]

    def compute(library: Library, values: list[Any]) -> Any:
        return library.custom_rule(body, backward)(*values)

    return _recorded(backend, function.name, compute, inputs)


def _unbroadcast(library: Library, g: Any, shape: tuple[int, ...]) -> Any:
    """A cotangent summed down to its primal's shape (a rule may give a broadcast one)."""
    if tuple(g.shape) == shape:
        return g
    lead = len(g.shape) - len(shape)
    if lead < 0:
        return library.function("broadcast_to")(g, shape)  # type: ignore[operator]
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    summed = library.function("sum")(g, axis=axes, keepdims=True) if axes else g  # type: ignore[operator]
    return summed.reshape(shape)
