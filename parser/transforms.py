"""JAX's function transformations in the language: grad(f), value_and_grad(f), jacrev(f),
jacfwd(f), hessian(f), vmap(f), and jvp(f, x, v), vjp(f, x), hvp(f, x, v).

Each takes a function value and gives a function value (or, for jvp, vjp and hvp, the
values at a point). They are the engine's transformations (autodiff/transforms.py)
applied to the language's function values, which they call back through the session:
vmap calls the function once on values that carry a batch; jacrev is one backward pass
of a batch of cotangents, jacfwd one forward pass of a batch of tangents, hessian forward
over reverse. Every derivative is built with its own graph (create_graph), so a
transformation of a transformation (grad(grad(f)), jacfwd(jacrev(f)), vmap(grad(f)))
differentiates it again. What this module adds is the language's words: which
arguments are wrong and why, and which results are constants.

An argument that already has a gradient (a variable, or a value inside another
transformation) is differentiated by through a node of its own (an identity), so the
result stays connected to it, and a function that also uses that variable directly (a
closure, as in grad(lambda t: t * w)(w)) gets JAX's answer: the argument is an input of
its own. A result that depends on nothing but the transformation's own inputs is a
constant, as grad(3 * x, x) is.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from gradcalc.autodiff import REGISTRY, Tensor, grad, is_grad_enabled, jacobian, jacobian_forward, set_grad_enabled, tangent_of
from gradcalc.autodiff import transforms as engine
from gradcalc.autodiff.batching import BatchError, batched, unbatched
from gradcalc.autodiff.derivatives import graph_leaves
from gradcalc.autodiff.errors import ArgumentError, ShapeError
from gradcalc.autodiff.limits import check_size

from .backends import TensorList, to_param
from .builtins import BUILTINS
from .compiler import LAMBDA
from .errors import LanguageError
from .functions import Defined, FunctionValue, describe_value

ENGINES = ("jax", "torch")  # (parser/engines: these run the libraries' own transformations)
# Transformations (grad(f)(x)) call their function back from Python, one machine inside
# another: this many at most, far below Python's own recursion limit.
MAX_NESTED_CALLS = 40


def short(f: FunctionValue) -> str:
    """A function's name inside another's signature: f, lambda x, sin, grad of f."""
    if isinstance(f, Defined) and f.function.name != LAMBDA:
        return f.function.name
    shown = f.signature()
    return shown[1:-1] if shown.startswith("<") else shown


_LONGEST = 40  # characters of a lambda's text in a message


def label(f: FunctionValue) -> str:
    """A function as messages write it: f, sin, lambda x: x ** 2, grad(f)."""
    if isinstance(f, Defined) and f.function.name == LAMBDA:
        text = " ".join(f.function.text.split())
        return text if len(text) <= _LONGEST else text[: _LONGEST - 3] + "..."
    if isinstance(f, Transformed):
        return f"{f.kind}({label(f.f)})"
    if isinstance(f, Pullback):
        return f"the pullback of {label(f.f)}"
    return short(f)


class Transformed(FunctionValue):
    """What a transformation makes of a function: grad(f), vmap(f, in_axes=1), ..."""

    __slots__ = ("kind", "f", "option")

    def __init__(self, kind: str, f: FunctionValue, option: Any) -> None:
        self.kind, self.f, self.option = kind, f, option

    def signature(self) -> str:
        return f"<{self.kind} of {short(self.f)}>"

    def arity(self) -> int | None:
        return self.f.arity()

    def apply(self, session: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if session.backend.name in ENGINES:  # JAX's or torch.func's own transformation
            from .engines.transforms import apply_transform

            return apply_transform(session, self, args, kwargs)
        return _running(BUILTINS[self.kind].resolved("rule"), session, self.f, label(self), self.option, args, kwargs)


class Pullback(FunctionValue):
    """vjp's second result: u -> u J, the cotangent of each primal, as a tuple of one per
    primal (one primal too: `back(u)[0]`, `g, = back(u)`), as JAX's and torch.func's are."""

    __slots__ = ("f", "out", "inputs")

    def __init__(self, f: FunctionValue, out: Tensor, inputs: list[Tensor]) -> None:
        self.f, self.out, self.inputs = f, out, inputs  # (the inputs: fresh, one per primal)

    def signature(self) -> str:
        return f"<vjp of {short(self.f)}>"

    def arity(self) -> int | None:
        return 1

    def apply(self, session: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return _running(self._pull, args, kwargs)

    def _pull(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        what = label(self)
        if kwargs or len(args) != 1:
            raise LanguageError("argument", f"{what} takes one argument, the cotangent u of the output (shape {self.out.shape}); got {len(args) + len(kwargs)}")
        u = _tensor(args[0], what, "the cotangent")
        if u.shape != self.out.shape and u.size != 1:
            raise LanguageError("shape", f"{what}: the cotangent has shape {u.shape}, the output {self.out.shape}")
        # u J is the gradient of sum(out * u): built so, it stays on u's graph, as JAX's does
        weighted = REGISTRY["sum"](REGISTRY["mul"](self.out, u))
        cotangents = grad(weighted, self.inputs, create_graph=True)
        return _result(tuple(cotangents), self.inputs)


def make(session: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`name(f, ...)`: the transformed function, or for jvp, vjp and hvp their values (as
    the built-in table's record of `name` says: its options, whether it is pointwise)."""
    record = BUILTINS[name]
    _refuse_too_deep(name, args[0] if args else None)
    usage = str(record.transform) if not args or not isinstance(args[0], FunctionValue) else f"{name}({label(args[0])})"
    if not args or not isinstance(args[0], FunctionValue):
        got = f", got {describe_value(args[0])}" if args else ""
        raise LanguageError("argument", f"{usage} takes a function first, as in {name}(f) or {name}(lambda x: x ** 2){got}")
    if session.backend.name == "scalar":
        raise LanguageError("name", f"the scalar engine has no {name}(f); use {session.backend.switch}")
    f, rest = args[0], args[1:]
    if record.pointwise:
        if kwargs:
            raise LanguageError("argument", f"{usage} has no parameter {next(iter(kwargs))!r}")
        if session.backend.name in ENGINES:
            from .engines.transforms import pointwise

            return pointwise(session, name, f, rest)
        return _running(record.resolved("rule"), session, f, rest)
    options = record.options
    names = list(options)
    for key in kwargs:
        if key not in options:
            listed = " and ".join(f"{n}=" for n in names)
            raise LanguageError("argument", f"{usage} has no parameter {key!r} (its parameter{'s are' if len(names) > 1 else ' is'} {listed})")
    if len(rest) > len(names) or any(n in kwargs for n in names[: len(rest)]):
        listed = " and ".join(names)
        raise LanguageError("argument", f"{usage} takes the function and {listed}, got {len(args) + len(kwargs)} arguments")
    given = {**options, **dict(zip(names, rest)), **kwargs}
    if "in_axes" in options:  # vmap's axes
        option: Any = (_in_axes(given["in_axes"], usage), _out_axes(given["out_axes"], usage))
    else:
        option = _argnums(given["argnums"], usage, f)
    return Transformed(record.transform_as or name, f, option)


def _refuse_too_deep(name: str, f: Any) -> None:
    """A transformation of a transformation ... nested past the cap of nested calls
    (MAX_NESTED_CALLS) is refused where it is made: calling it would nest that many
    calls, and its description alone would nest as deep in Python."""
    depth = 0
    while isinstance(f, Transformed):
        depth, f = depth + 1, f.f
    if depth >= MAX_NESTED_CALLS:
        raise LanguageError("recursion", f"{name}(...): transformations nested deeper than {MAX_NESTED_CALLS} (a transformation "
                                         "of a transformation ... calls its function that many calls deep)")




# ---- options ------------------------------------------------------------------------------


def _argnums(value: Any, usage: str, f: FunctionValue) -> int | tuple[int, ...]:
    """argnums: a whole number, or a tuple of them (each within f's arguments, if known)."""
    param = _option(value, f"{usage}: argnums")
    items = param if isinstance(param, tuple) else (param,)
    if not items or not all(isinstance(k, int) and not isinstance(k, bool) for k in items):
        raise LanguageError("argument", f"{usage}: argnums must be a whole number or a tuple of them, got {_shown_option(value)}")
    n = f.arity()
    for k in items:
        if n is not None and not -n <= k < n:
            raise LanguageError("argument", f"{usage}: argnums {k} is out of range: the function takes {_count(n)}")
    return param  # type: ignore[no-any-return]  # (an int or a tuple of ints, checked above)


def _in_axes(value: Any, usage: str) -> int | None | tuple[int | None, ...]:
    """in_axes: an axis for every argument, None (not mapped), or a tuple of those, one per argument."""
    if value is None:
        return None
    if isinstance(value, AxisSpec):
        return tuple(None if v is None else _axis(v, usage) for v in value)
    param = _option(value, f"{usage}: in_axes")
    items = param if isinstance(param, tuple) else (param,)
    if not all(isinstance(k, int) and not isinstance(k, bool) for k in items):
        raise LanguageError("argument", f"{usage}: in_axes must be an axis (a whole number), None, or a tuple of them, got {_shown_option(value)}")
    return param  # type: ignore[no-any-return]  # (an int or a tuple of ints, checked above)


def _out_axes(value: Any, usage: str) -> int | tuple[int, ...]:
    """out_axes: the axis of each result the batch goes to, or one per result."""
    param = _option(value, f"{usage}: out_axes")
    items = param if isinstance(param, tuple) else (param,)
    if not items or not all(isinstance(k, int) and not isinstance(k, bool) for k in items):
        raise LanguageError("argument", f"{usage}: out_axes must be an axis (a whole number) or a tuple of them, one per result, "
                                        f"got {_shown_option(value)}")
    return param  # type: ignore[no-any-return]  # (an int or a tuple of ints, checked above)


def _shown_option(value: Any) -> str:
    """An option's value as the user wrote it: 0.5, (0.5,), (0, 1.5), true; a tuple literal
    is a tensor by now, and "a tensor of shape (1,)" is not what was written."""
    if isinstance(value, Tensor) and value.ndim <= 1 and value.size <= 8:
        data = np.asarray(value.data)
        if data.dtype == np.bool_:
            if data.ndim == 0:
                return describe_value(value)  # the boolean true
            items = ["true" if v else "false" for v in data.reshape(-1)]
        else:
            items = [format(float(v), "g") for v in data.reshape(-1).real]
        return items[0] if data.ndim == 0 else "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return describe_value(value)


def _option(value: Any, what: str) -> Any:
    """An option's value as to_param gives it; left as it is (for the caller's error) when
    to_param would misread it: a string, a function, a boolean (true is not argument 1)."""
    if isinstance(value, (str, FunctionValue)) or (isinstance(value, Tensor) and value.data.dtype == np.bool_):
        return value
    return to_param(value, what)


def _axis(value: Any, usage: str) -> int:
    param = _option(value, f"{usage}: in_axes")
    if not isinstance(param, int) or isinstance(param, bool):
        raise LanguageError("argument", f"{usage}: in_axes must be an axis (a whole number), None, or a tuple of them, got {_shown_option(value)}")
    return param


class AxisSpec(TensorList):
    """A literal holding None, as in in_axes=(0, None): only vmap's in_axes takes it."""

    def error(self) -> LanguageError:
        return LanguageError("argument", "a list with None in it is only vmap's in_axes, as in vmap(f, in_axes=(0, None))")


# ---- inputs and results -----------------------------------------------------------------------


def _count(n: int) -> str:
    return f"{n} argument{'s' * (n != 1)}"


def _tensor(value: Any, what: str, which: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise LanguageError("argument", f"{what}: {which} must be a tensor, got {describe_value(value)}")
    return value


def _fresh(value: Any, what: str, k: int) -> Tensor:
    """An input to differentiate by (the engine's transforms.fresh), once it is a tensor."""
    return engine.fresh(_tensor(value, what, f"argument {k}"))


def _positions(argnums: int | tuple[int, ...], n: int, what: str) -> list[int]:
    items = argnums if isinstance(argnums, tuple) else (argnums,)
    for k in items:
        if not -n <= k < n:
            raise LanguageError("argument", f"{what}: argnums {k} is out of range for {_count(n)}")
    return [k % n for k in items]


def _call_at(session: Any, f: FunctionValue, what: str, argnums: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, list[Tensor]]:
    """f called with the arguments picked by argnums replaced by fresh inputs (the
    engine's call_at: inside vmap an input the same in every row gets each row's own)."""
    for k in _positions(argnums, len(args), what):
        _tensor(args[k], what, f"argument {k}")
    return engine.call_at(lambda *xs: session.call_function(f, list(xs), kwargs), argnums, args)


def _scalar_output(y: Any, what: str, f: FunctionValue) -> Tensor:
    y = _tensor(y, what, "the function's result")
    if y.size != 1:
        raise LanguageError("shape", f"{what}: the function must return a scalar, got shape {y.shape}; "
                                     f"for the derivatives of each output use jacrev or jacfwd")
    return y


def _outputs(y: Any, what: str, f: FunctionValue) -> list[Tensor]:
    """The tensors of the function's result: its tuples opened at any depth (JAX's pytree
    leaves: value_and_grad(f, argnums=(0, 1)) gives (y, (gx, gw)))."""
    return [_tensor(o, what, "the function's result") for o in engine.leaves(y)]


# How many transformations are being evaluated, the one at hand included (see _result).
_RUNNING = [0]


def _running(apply: Callable[..., Any], *args: Any) -> Any:
    _RUNNING[0] += 1
    try:
        # A transformation differentiates its function wherever it is called: inside
        # `with no_grad:` or a vjp rule's evaluation too, as torch.func.grad does under
        # torch.no_grad() (with nothing recorded there, grad(f)(x) was silently 0); what
        # it gives there records nothing, as any value computed there.
        recording = is_grad_enabled()
        with set_grad_enabled(True):
            value = apply(*args)
        return value if recording else _constant(value)
    finally:
        _RUNNING[0] -= 1


def _result(value: Any, fresh: list[Tensor]) -> Any:
    """`value` as a constant when it depends on nothing but the fresh inputs `fresh`.
    For the outermost transformation only a named leaf is a variable: the inputs of the
    transformations inside it, which have finished, are not (grad(lambda x: grad(lambda
    y: x*y*y)(2))(3) is a constant); inside one, the inputs of those around it are."""
    own = {id(unbatched(x)[0]) for x in fresh}  # (inside vmap: the physical inputs)
    return value if _outside(value, own, _RUNNING[0] == 1) else _constant(value)


def _outside(item: Any, own: set[int], outermost: bool) -> bool:
    """Whether `item` is connected to a variable outside the transformation (_result):
    then it keeps its graph. (A function of its own: a closure calling itself is a cycle.)"""
    if isinstance(item, tuple):
        return any(_outside(part, own, outermost) for part in item)
    return isinstance(item, Tensor) and item.requires_grad and any(
        node.requires_grad and (node.name is not None if outermost else id(node) not in own)
        for node in graph_leaves(unbatched(item)[0]))


def _constant(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_constant(v) for v in value)
    if not isinstance(value, Tensor):
        return value
    physical, levels = unbatched(value)
    made = Tensor(physical.data)
    made.detached = True  # a derivative that came out constant stays a constant when named
    return batched(made, levels)


# ---- reverse and forward mode -----------------------------------------------------------------


def gradient_of(session: Any, f: FunctionValue, what: str, argnums: Any, args: list[Any], kwargs: dict[str, Any], with_value: bool = False) -> Any:
    y, inputs = _call_at(session, f, what, argnums, args, kwargs)
    y = _scalar_output(y, what, f)
    grads = grad(y, inputs, create_graph=True)
    g = engine.by_argnums(argnums, grads)
    return _result((y, g) if with_value else g, inputs)


def _blocks(one: Callable[..., Any], outs: Any, inputs: list[Any], argnums: Any, what: str) -> list[Any]:
    """Per output, its Jacobian by each input as `one` takes it (jacobian, a backward
    pass per output, or jacobian_forward, one forward pass for them all; every input's
    block from that pass): a tuple of them when argnums is a tuple, else the one."""
    for out in outs:
        for x in inputs:
            check_size(out.shape + x.shape, what)
    return [engine.by_argnums(argnums, blocks) for blocks in one(outs, inputs, create_graph=True)]


def jacobian_of(session: Any, f: FunctionValue, what: str, argnums: Any, args: list[Any], kwargs: dict[str, Any], one: Any = jacobian) -> Any:
    """jacrev (`one` is jacobian: one backward pass of a batch of cotangents per output)
    or jacfwd (jacobian_forward: one forward pass of a batch of tangents)."""
    y, inputs = _call_at(session, f, what, argnums, args, kwargs)
    return _result(engine.rebuilt(y, _blocks(one, _outputs(y, what, f), inputs, argnums, what)), inputs)


def hessian_of(session: Any, f: FunctionValue, what: str, argnums: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Forward over reverse, as JAX's hessian = jacfwd(jacrev(f)): the gradient by a
    backward pass, then its Jacobian by a batched forward pass (a batched backward pass
    where the function's graph has a vjp rule of the user's, which forward mode cannot use)."""
    y, inputs = _call_at(session, f, what, argnums, args, kwargs)
    y = _scalar_output(y, what, f)
    rows = _blocks(engine.jacobian_of_gradient, grad(y, inputs, create_graph=True, defer=False), inputs, argnums, what)
    return _result(engine.by_argnums(argnums, rows), inputs)




# ---- vmap ---------------------------------------------------------------------------------


def mapped(session: Any, f: FunctionValue, what: str, axes_given: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """f on each slice along the mapped axes, the results stacked on a new axis (out_axes,
    the first by default), as JAX's vmap gives: f is called once, on values that carry the
    batch (the engine's vmap), so gradients flow through it as through any op."""
    in_axes, out_axes = axes_given
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise LanguageError("argument", f"{what}: in_axes has {len(in_axes)} entries for {_count(len(args))}")
        axes = in_axes
    else:
        axes = (in_axes,) * len(args)
    size, first = None, (0, 0)
    for k, (a, axis) in enumerate(zip(args, axes)):
        if axis is None:
            continue
        a = _tensor(a, what, f"argument {k}")
        if not -a.ndim <= axis < a.ndim:
            has = "is a scalar, which has no axis to map over" if a.ndim == 0 else f"has shape {a.shape}, which has no axis {axis}"
            raise LanguageError("shape", f"{what}: argument {k} {has} (in_axes=None leaves an argument as it is)")
        length = a.shape[axis]
        if size is None:
            size, first = length, (k, axis)
        elif length != size:
            raise LanguageError("shape", f"{what}: the mapped axes differ in length: argument {first[0]} has {size} along axis {first[1]}, "
                                         f"argument {k} has {length} along axis {axis}")
    if size is None:
        raise LanguageError("argument", f"{what}: in_axes maps none of the arguments")

    def body(*xs: Any) -> Any:
        out = session.call_function(f, list(xs), kwargs)
        _outputs(out, what, f)
        return out

    try:
        return engine.vmap(body, in_axes=list(axes), out_axes=out_axes)(*args)
    except BatchError as err:
        raise LanguageError("value", f"{what}: {err}") from None
    except (ArgumentError, ShapeError) as err:  # out_axes that do not fit the results
        raise LanguageError("argument" if isinstance(err, ArgumentError) else "shape", str(err).replace("vmap:", f"{what}:", 1)) from None


value_and_gradient_of = partial(gradient_of, with_value=True)
jacobian_forward_of = partial(jacobian_of, one=jacobian_forward)


# ---- values at a point: jvp, vjp, hvp ------------------------------------------------------------


def _spread(value: Any, f: FunctionValue, what: str, which: str) -> list[Any]:
    """primals or tangents: one value for a function of one argument, else one per
    argument, as a tuple (x, y) (whose items are the tensors written in it)."""
    n = f.arity()
    if isinstance(value, tuple):
        items = list(value)
    elif n is None or n == 1 or not isinstance(value, Tensor):
        items = [value]
    elif value.op is REGISTRY["stack"] and not value.params and len(value.parents) == n:
        items = list(value.parents)  # the literal's own items
    elif value.ndim and value.shape[0] == n:
        items = [value[i] for i in range(n)]  # type: ignore[index]  # (indexing is an op)
    else:
        raise LanguageError("argument", f"{what}: the function takes {_count(n)}, so the {which} are {n} values, as in (x, y); "
                                        f"got {describe_value(value)}")
    if n is not None and len(items) != n:
        written = "; a tuple written here lists them, as in JAX: one vector is [1, 2] or ([1, 2],)" if isinstance(value, tuple) else ""
        raise LanguageError("argument", f"{what}: the function takes {_count(n)}, got {len(items)} {which}{written}")
    return items


def _at_point(f: FunctionValue, what: str, rest: list[Any]) -> tuple[list[Tensor], list[Tensor]]:
    """The fresh primals and the tangents of jvp(f, primals, tangents) and hvp."""
    if len(rest) != 2:
        raise LanguageError("argument", f"{what.split('(')[0]}(f, primals, tangents) takes the function, the primals and the tangents; "
                                        f"got {_count(len(rest) + 1)}")
    primals, tangents = _spread(rest[0], f, what, "primals"), _spread(rest[1], f, what, "tangents")
    if len(primals) != len(tangents):
        raise LanguageError("argument", f"{what}: {len(primals)} primals but {len(tangents)} tangents")
    xs = [_fresh(p, what, k) for k, p in enumerate(primals)]
    ts = []
    for k, (x, t) in enumerate(zip(xs, tangents)):
        t = _tensor(t, what, f"tangent {k}")
        if t.shape != x.shape:
            raise LanguageError("shape", f"{what}: tangent {k} has shape {t.shape}, its primal {x.shape}; they must be the same")
        ts.append(t)
    return xs, ts


def jvp_at(session: Any, f: FunctionValue, rest: list[Any]) -> Any:
    """(f(x), J v): one forward pass, the tangents pushed through f's graph."""
    what = f"jvp({label(f)})"
    xs, ts = _at_point(f, what, rest)
    y = session.call_function(f, list(xs), {})
    outs = _outputs(y, what, f)
    tangents = [tangent_of(o, xs, ts, create_graph=True) for o in outs]
    return _result((engine.rebuilt(y, outs), engine.rebuilt(y, tangents)), xs)


def vjp_at(session: Any, f: FunctionValue, rest: list[Any]) -> Any:
    """(f(x), the pullback u -> u J): f runs once; each call of the pullback is a backward pass."""
    what = f"vjp({label(f)})"
    if not rest:
        raise LanguageError("argument", "vjp(f, *primals) takes the primals after the function, as in vjp(f, x)")
    xs = [_fresh(p, what, k) for k, p in enumerate(rest)]
    out = _tensor(session.call_function(f, list(xs), {}), what, "the function's result")
    return _result(out, xs), Pullback(f, out, xs)


def hvp_at(session: Any, f: FunctionValue, rest: list[Any]) -> Any:
    """H v of a scalar f: the gradient by a backward pass, then its directional
    derivative along v by a forward pass (forward over reverse)."""
    what = f"hvp({label(f)})"
    xs, ts = _at_point(f, what, rest)
    y = _scalar_output(session.call_function(f, list(xs), {}), what, f)
    grads = grad(y, xs, create_graph=True, defer=False)  # (pushed forward at once)
    parts = [tangent_of(g, xs, ts, create_graph=True) for g in grads]
    return _result(parts[0] if len(parts) == 1 else tuple(parts), xs)

