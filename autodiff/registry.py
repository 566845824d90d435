"""The op registry and the one wiring mechanism every op goes through (Lucid's `func_op`).

An op is a forward function over NumPy arrays and, beside it, one VJP per tensor input.
`defop` registers both; `apply` does everything else for every op: turning numbers into
tensors, OR-ing `requires_grad`, recording parents, and (in `backprop`) un-broadcasting
and accumulating gradients.

A VJP is written once and runs two ways. Its first argument `m` is a namespace of ops:
`ARRAY_MATH` (the forwards themselves, over raw arrays: fast, records nothing) for an
ordinary backward pass, or `TENSOR_MATH` (the registered ops, over Tensors: records a
graph) when `create_graph=True`, which is what makes grad of grad work for free. So a
VJP uses Python operators and `m.<op>(...)`, never `np.<fn>` on its inputs.

    vjp(m, g, ans, *inputs, **params) -> gradient for one input

where `g` is the gradient of the output and `ans` the output itself.
"""
from __future__ import annotations

import _thread
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import limits as _limits  # its _max_elements, read once per op
from . import tensor as _grad_mode  # its _grad_enabled, read once per op
from .errors import ArgumentError, EngineError, ShapeError, SizeLimitError
from .limits import STEPS, check_outputs, check_size
from .tensor import Tensor, _lazy_dir, _lazy_lookup, new_tensor, to_array

VJP = Callable[..., Any]


class Check:
    """How the every-op gradient check exercises an op.

    `shapes` lists alternative input shape tuples (one shape per tensor input);
    inputs are drawn uniformly from [low, high]. `make(rng)` replaces all of that for ops
    whose inputs need structure (class targets, say) and returns (inputs, params).
    `diff` names the inputs that are differentiated (default: all).
    `kink_gap` keeps inputs at least that far from the op's kinks (see OpDef.kink).

    A plain class, not a dataclass: every op makes one at import, on every start-up.
    """

    __slots__ = ("shapes", "low", "high", "params", "make", "diff", "kink_gap", "second_order")

    def __init__(
        self, shapes: tuple[tuple[tuple[int, ...], ...], ...] = (((),), ((3,),), ((2, 3),)), low: float = -2.0,
        high: float = 2.0, params: dict[str, Any] | None = None,
        make: Callable[[np.random.Generator], tuple[list[np.ndarray], dict[str, Any]]] | None = None,
        diff: tuple[int, ...] | None = None, kink_gap: float = 0.0, second_order: bool = True,
    ) -> None:
        self.shapes, self.low, self.high, self.params = shapes, low, high, {} if params is None else params
        self.make, self.diff, self.kink_gap, self.second_order = make, diff, kink_gap, second_order

    def __repr__(self) -> str:
        return "Check(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__) + ")"


BINARY_SHAPES = (((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ()))


class OpDef:
    """One registered op. Calling it applies it to tensors (or numbers, or arrays).

    A plain class rather than a dataclass: importing dataclasses and building the class
    cost every start-up a few milliseconds."""

    __slots__ = (
        "name", "forward", "vjps", "n_in", "n_ret", "doc", "category", "complex_safe", "method", "public", "kink", "check",
        "variadic_param", "param_names", "signature", "leading", "out_shape", "rule", "keeps_nan", "jvp",
    )

    def __init__(
        self, name: str, forward: Callable[..., Any], vjps: tuple[VJP | None, ...] | VJP | None, n_in: int | None,
        n_ret: int | None, doc: str, category: str, complex_safe: bool, method: bool, public: bool,
        kink: Callable[..., bool] | None, check: Check | None, variadic_param: str | None, param_names: tuple[str, ...],
        signature: str, leading: tuple[str, ...] = (), out_shape: Callable[..., tuple[int, ...]] | None = None,
        rule: str | None = None,  # the derivative rule as text; without it, read from the VJPs (rules.py)
        keeps_nan: bool = False,  # its VJPs keep a nan of g a nan or say they drop it (backprop.py)
        jvp: Callable[..., Any] | None = None,  # the forward-mode rule (forward.py)
    ) -> None:
        self.name, self.forward, self.vjps, self.n_in, self.n_ret = name, forward, vjps, n_in, n_ret
        self.doc, self.category, self.complex_safe, self.method, self.public = doc, category, complex_safe, method, public
        self.kink, self.check, self.variadic_param = kink, check, variadic_param
        self.param_names, self.signature, self.leading, self.out_shape, self.rule = param_names, signature, leading, out_shape, rule
        self.keeps_nan = keeps_nan
        self.jvp = jvp

    @property
    def has_gradient(self) -> bool:
        return self.vjps is not None

    def vjp_for(self, k: int) -> VJP | None:
        """The VJP of input k (variadic ops share one VJP that takes `k` as a keyword)."""
        if self.vjps is None:
            return None
        if callable(self.vjps):
            return self.vjps
        return self.vjps[k]

    def __call__(self, *args: Any, **params: Any) -> Any:
        return apply(self, args, params)

    def __repr__(self) -> str:
        return f"<op {self.signature}>"


_all_registered = False
_registering = False  # set while register_all imports the families (in the thread holding _lock)
_lock = _thread.RLock()  # (_thread: threading's own import costs start-up time)
_FAMILIES = f"{__package__}.ops."  # the modules of the op families (ops/__init__.py)


def register_all() -> None:
    """Register every op. Importing the package registers only the families that bind
    Tensor's operators (ops/__init__.py); the lookups below call this when a name is
    missing, so nothing outside this module needs to.

    Safe from threads (the others wait for the first to finish) and against an
    interruption (Ctrl-C while importing): the ops of a family whose import did not
    finish are taken out again, and the next lookup tries once more. A lookup made by a
    family's own import, while they load, sees the ops registered so far."""
    global _all_registered, _registering
    if _all_registered:
        return
    with _lock:
        if _all_registered or _registering:
            return
        _registering = True
        import importlib  # (the package's attribute `ops` is TENSOR_MATH, not this subpackage)

        ops = importlib.import_module(f"{__package__}.ops")
        try:
            ops.import_all()
        except BaseException:
            for name, op in list(dict.items(REGISTRY)):
                if getattr(op.forward, "__module__", None) not in sys.modules:
                    unregister(name)
            raise
        finally:
            _registering = False
        # In the families' order, as one import of them all gave it (the eager ones came first).
        rank = {f"{__package__}.ops.{name}": i for i, name in enumerate(ops.MODULES)}
        table: dict[str, Any]
        for table in (REGISTRY, ALIASES):
            # (dict's own methods: the table's would register every op again)
            entries = sorted(dict.items(table), key=lambda item: rank.get(_module_of(item[1]) or "", len(rank)))  # type: ignore[misc]
            dict.clear(table)  # type: ignore[misc]
            dict.update(table, entries)
        _all_registered = True
        # The hooks that noticed a missing name have done their work, and they cost every
        # attribute access while they exist: CPython sends all lookups on a class with
        # __getattr__ through a slower slot and does not specialize them (7% more
        # instructions on the 8x8 tensor chain, docs/performance.md). So they go.
        del _Namespace.__getattr__, Tensor.__getattr__, type(Tensor).__getattr__
        for name in _OpTable.HOOKS:  # type: ignore[attr-defined]  # the tables become plain dicts: a lookup is a C call again
            delattr(_OpTable, name)


def _module_of(entry: Any) -> str | None:
    op = dict.get(REGISTRY, entry) if isinstance(entry, str) else entry  # ALIASES hold names
    return getattr(getattr(op, "forward", None), "__module__", None)


class _OpTable(dict):  # type: ignore[type-arg]
    """A dict that registers every op before it answers what it may not hold yet: a
    missing name, its size or its contents. (A dict subclass: a plain lookup of a
    registered name costs what it did.)"""

    __slots__ = ()

    def __contains__(self, name: object) -> bool:
        if not _all_registered and not dict.__contains__(self, name):
            register_all()
        return dict.__contains__(self, name)

    def __missing__(self, name: Any) -> Any:
        if self.__contains__(name):  # (registered on the way)
            return dict.__getitem__(self, name)
        raise KeyError(name)

    def get(self, name: Any, default: Any = None) -> Any:
        return dict.__getitem__(self, name) if self.__contains__(name) else default


def _whole(method: Callable[..., Any]) -> Callable[..., Any]:
    def whole(self: _OpTable, *args: Any, **kwargs: Any) -> Any:
        register_all()
        return method(self, *args, **kwargs)

    whole.__name__ = method.__name__
    return whole


# Everything else that reads the whole table, or may meet a name not registered yet.
_WHOLE = ("__iter__", "__len__", "__reversed__", "__repr__", "__eq__", "__ne__", "__or__", "__ror__", "__ior__", "keys",
          "values", "items", "copy", "pop", "popitem", "setdefault", "update")
for _name in _WHOLE:
    setattr(_OpTable, _name, _whole(getattr(dict, _name)))
# What register_all takes away once every op is registered.
_OpTable.HOOKS = ("__contains__", "__missing__", "get", *_WHOLE)  # type: ignore[attr-defined]
del _name


REGISTRY: dict[str, OpDef] = _OpTable()
ALIASES: dict[str, str] = _OpTable()


class _Namespace:
    """Attribute access to ops: `m.exp(x)`. Filled as ops are defined."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __getattr__(self, name: str) -> Any:  # only for names not set yet, until register_all
        return _lazy_lookup(self, name, object.__getattribute__, "'_Namespace' object")

    def __dir__(self) -> list[str]:
        return _lazy_dir(self, object.__dir__)


ARRAY_MATH: Any = _Namespace("array")
TENSOR_MATH: Any = _Namespace("tensor")
ARRAY_MATH.raw = lambda x: x
TENSOR_MATH.raw = lambda x: x.data if isinstance(x, Tensor) else np.asarray(x)


# np.vdot and np.where without NumPy's __array_function__ dispatch, a Python-level call
# that costs as many instructions as an 8x8 product (the engine's arrays are plain
# ndarrays, which no override claims); the public functions where NumPy has no such attribute.
raw_vdot = getattr(np.vdot, "_implementation", np.vdot)
raw_where = getattr(np.where, "_implementation", np.where)


def has_nan(x: Any) -> bool:
    """Whether an array (or a NumPy scalar) has a nan entry, in one pass: the sum of the
    squares (np.vdot; of the moduli, for complex) is nan exactly when an entry is, as
    squares are never negative (no inf - inf); complex entries may raise a false alarm
    (inf * 0 in an imaginary part)."""
    total = raw_vdot(x, x) if type(x) is np.ndarray and x.ndim else x
    return total != total


class _NanGuard(_thread._local):
    """Whether the VJPs' nan guard (ops/arithmetic.py, `masked`) is left to the end of a
    plain backward pass (backprop.py says why), and whether a VJP of that pass turned a
    nan of its gradient into a number; per thread, as each pass is."""

    deferred = False
    dropped = False

    def drop(self) -> None:
        """Called by a VJP that turns a nan into a number: on a deferred pass that nan may
        stand for a value the guard would have kept, so the pass runs again, guarded."""
        if self.deferred:
            self.dropped = True


NAN_GUARD = _NanGuard()


_NO_DEFAULT = object()
_VAR_POSITIONAL, _KEYWORD_ONLY, _OTHER = "var_positional", "keyword_only", "other"
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08  # the code flags of *args and **kwargs (inspect.CO_VARARGS, ...)


def _parameters(forward: Callable[..., Any]) -> list[tuple[str, str, Any]]:
    """(name, kind, default or _NO_DEFAULT) for each parameter of `forward`, in order.

    Read from a plain function's code object, as inspect.signature reads it: `inspect` is
    imported only for anything else (a wrapped function, a callable object), because
    asking it about every op took several milliseconds of every start-up.
    """
    code = getattr(forward, "__code__", None)
    if type(forward).__name__ != "function" or code is None or hasattr(forward, "__wrapped__") or hasattr(forward, "__signature__"):
        import inspect

        kinds: dict[Any, str] = {inspect.Parameter.VAR_POSITIONAL: _VAR_POSITIONAL, inspect.Parameter.KEYWORD_ONLY: _KEYWORD_ONLY}
        return [
            (p.name, kinds.get(p.kind, _OTHER), _NO_DEFAULT if p.default is p.empty else p.default)
            for p in inspect.signature(forward).parameters.values()
        ]
    n_positional, n_keyword = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    defaults = forward.__defaults__ or ()
    keyword_defaults = forward.__kwdefaults__ or {}
    first_default = n_positional - len(defaults)
    params = [(names[i], _OTHER, defaults[i - first_default] if i >= first_default else _NO_DEFAULT) for i in range(n_positional)]
    if code.co_flags & _CO_VARARGS:
        params.append((names[n_positional + n_keyword], _VAR_POSITIONAL, _NO_DEFAULT))
    for name in names[n_positional : n_positional + n_keyword]:
        params.append((name, _KEYWORD_ONLY, keyword_defaults.get(name, _NO_DEFAULT)))
    if code.co_flags & _CO_VARKEYWORDS:
        params.append((names[n_positional + n_keyword + bool(code.co_flags & _CO_VARARGS)], _OTHER, _NO_DEFAULT))
    return params


def _describe_signature(
    name: str, forward: Callable[..., Any], n_in: int | None, variadic: str | None, leading: Sequence[str] = ()
) -> tuple[tuple[str, ...], str]:
    """The names of an op's parameters (after its tensor inputs) and its signature text."""
    names: list[str] = []
    shown: list[str] = list(leading)
    for i, (pname, kind, default) in enumerate(_parameters(forward)):
        if pname in leading:
            names.append(pname)
        elif kind is _VAR_POSITIONAL or pname == variadic:
            shown.append(f"*{pname}")
        else:
            shown.append(pname if default is _NO_DEFAULT else f"{pname}={default!r}")
        if kind is _KEYWORD_ONLY or (n_in is not None and i >= n_in and kind is not _VAR_POSITIONAL):
            names.append(pname)
    return tuple(names), f"{name}({', '.join(shown)})"


def _in_families(function: Any) -> bool:
    """Whether `function` was written in one of gradcalc's op families."""
    return (getattr(function, "__module__", None) or "").startswith(_FAMILIES)


def _our_vjps(vjps: tuple[VJP | None, ...] | VJP | None) -> bool:
    """Whether every VJP was written in gradcalc's op families."""
    return all(_in_families(f) for f in (vjps if isinstance(vjps, tuple) else (vjps,)) if f is not None)


def defop(
    name: str,
    forward: Callable[..., Any],
    vjps: tuple[VJP | None, ...] | VJP | None,
    *,
    doc: str,
    category: str,
    n_in: int | None = 1,
    n_ret: int | None = 1,
    complex_safe: bool = False,
    method: bool = False,
    variadic: str | None = None,
    operators: Sequence[str] = (),
    aliases: Sequence[str] = (),
    public: bool = True,
    kink: Callable[..., bool] | None = None,
    check: Check | None = None,
    leading: Sequence[str] = (),
    out_shape: Callable[..., tuple[int, ...]] | None = None,
    rule: str | None = None,
    keeps_nan: bool | None = None,
    jvp: Any = None,
) -> OpDef:
    """Register an op: its forward (over arrays), a VJP per tensor input, and facts about it.

    `variadic` names a parameter that collects the remaining positional arguments into a
    tuple (`reshape(x, 2, 3)`: shape=(2, 3)). `operators` binds Tensor dunders (`__radd__`-style names apply the op with the operands
    swapped); `method=True` makes `x.name(...)` work. `leading` names keyword-only
    parameters of an op with any number of inputs that may also be given positionally
    before the inputs (`einsum('ij,jk->ik', a, b)`: subscripts). `keeps_nan` says that
    each VJP, given a g with some entries nan, returns a nan wherever its result differs
    from the result for any other values there, or calls NAN_GUARD.drop(): then a plain
    backward pass through the op may leave the nan guard to its end (backprop.py). It
    defaults to True for the VJPs of gradcalc's own op families, which
    tests/test_backprop_guard.py checks, and to False for any other. `jvp` is the op's
    forward-mode rule beside its VJPs: a function `jvp(m, tangents, ans, *inputs, **params)`
    or one of forward.py's structural rules (DIAGONAL, LINEAR, ...), bound to the op here.
    """
    if not _in_families(forward):
        register_all()  # an op from outside the families: a clash with theirs is found here
    if dict.__contains__(REGISTRY, name):
        raise ValueError(f"op {name!r} is already registered")
    if vjps is not None and (n_in is None) != callable(vjps):
        raise ValueError(f"op {name!r}: give one VJP per input as a tuple, or one VJP taking k= for any number of inputs")
    if isinstance(vjps, tuple) and n_in is not None and len(vjps) != n_in:
        raise ValueError(f"op {name!r}: {n_in} inputs but {len(vjps)} VJPs")
    param_names, signature = _describe_signature(name, forward, n_in, variadic, leading)
    op = OpDef(
        name=name, forward=forward, vjps=vjps, n_in=n_in, n_ret=n_ret, doc=doc, category=category,
        complex_safe=complex_safe, method=method, public=public, kink=kink, check=check,
        variadic_param=variadic, param_names=param_names, signature=signature, leading=tuple(leading),
        out_shape=out_shape, rule=rule, keeps_nan=_our_vjps(vjps) if keeps_nan is None else keeps_nan,
    )
    op.jvp = jvp.bind(op) if hasattr(jvp, "bind") else jvp
    REGISTRY[name] = op
    for alias in aliases:
        ALIASES[alias] = name
    # VJPs on a plain backward pass call the forwards directly: those that can outgrow
    # their inputs are checked there too.
    raw = forward if out_shape is None else _checked_forward(op)
    for ns_name in (name, *aliases):
        setattr(ARRAY_MATH, ns_name, raw)
        setattr(TENSOR_MATH, ns_name, op)
    for dunder in operators:
        reflected = dunder.startswith("__r") and dunder != "__round__"
        setattr(Tensor, dunder, _operator(op, reflected, unary=dunder in _UNARY_DUNDERS))
    if method:
        for method_name in (name, *aliases):
            setattr(Tensor, method_name, _method(op))
    return op


_UNARY_DUNDERS = frozenset({"__neg__", "__pos__", "__abs__", "__invert__"})


def _operator(op: OpDef, reflected: bool, unary: bool) -> Callable[..., Any]:
    if unary:
        return lambda self: apply(op, (self,), {})
    if reflected:
        return lambda self, other: apply(op, (other, self), {})
    return lambda self, other: apply(op, (self, other), {})


def _method(op: OpDef) -> Callable[..., Any]:
    def method(self: Tensor, *args: Any, **params: Any) -> Any:
        return apply(op, (self, *args) if args else (self,), params)  # (`x.exp()` builds no list)

    method.__name__ = op.name
    method.__doc__ = f"{op.signature}: {op.doc}"
    return method


def unregister(name: str) -> None:
    """Remove an op and everything defop bound for it (tests register throwaway ops)."""
    op = REGISTRY.pop(name)
    names = [name, *(alias for alias, target in list(ALIASES.items()) if target == name)]
    for alias in names[1:]:
        del ALIASES[alias]
    for ns_name in names:
        for namespace in (ARRAY_MATH, TENSOR_MATH):
            if hasattr(namespace, ns_name):
                delattr(namespace, ns_name)
        if op.method and getattr(Tensor, ns_name, None) is not None:
            delattr(Tensor, ns_name)


def lookup(name: str) -> OpDef | None:
    """The op called `name`, following aliases."""
    return REGISTRY.get(ALIASES.get(name, name))


# ---- the wiring -----------------------------------------------------------------------


# PyTorch's names for NumPy's parameters, accepted as they are: sum(x, dim=1, keepdim=True).
SPELLINGS = {"dim": "axis", "keepdim": "keepdims"}


def _bind_params(op: OpDef, extra: tuple[Any, ...], params: dict[str, Any]) -> dict[str, Any]:
    """Turn positional arguments after the tensor inputs into named parameters, and
    PyTorch's spellings into the op's own names."""
    params = dict(params)
    for spelling, name in SPELLINGS.items():
        if spelling in params and name in op.param_names and spelling not in op.param_names:
            if name in params:
                raise ArgumentError(f"{op.signature}: {name} given twice (as {spelling}= and {name}=)")
            params[name] = params.pop(spelling)
    if op.variadic_param is not None:
        if not extra:
            return params
        if op.variadic_param in params:
            raise ArgumentError(f"{op.signature}: {op.variadic_param} given twice")
        # `reshape(x, 2, 3)` and `reshape(x, (2, 3))` both mean shape (2, 3).
        if len(extra) == 1 and isinstance(extra[0], (tuple, list)):
            extra = tuple(extra[0])
        params[op.variadic_param] = extra
        return params
    if len(extra) > len(op.param_names):
        n_in = op.n_in or 0
        most, got = n_in + len(op.param_names), n_in + len(extra)
        bound = "at most " if op.param_names else ""
        raise ArgumentError(f"{op.signature} takes {bound}{most} argument{'s' * (most != 1)}, got {got}")
    for pname, value in zip(op.param_names, extra):
        if pname in params:
            raise ArgumentError(f"{op.signature}: {pname} given twice")
        params[pname] = value
    return params


# NumPy reports a shape problem as a ValueError with one of these words (or an IndexError,
# which covers bad indices and axes); anything else is a bad argument.
_SHAPE_WORDS = ("shape", "broadcast", "align", "dimension", "size", "split")


def _input_error(op: OpDef, inputs: Sequence[Tensor], err: Exception) -> Exception:
    """NumPy's error for a failed forward, restated with the op and the input shapes."""
    text = str(err)
    if isinstance(err, IndexError) or (isinstance(err, ValueError) and any(w in text for w in _SHAPE_WORDS)):
        shapes = " and ".join(str(t.shape) for t in inputs)
        return ShapeError(f"{op.name}: {text} (input shape{'s' * (len(inputs) > 1)} {shapes})")
    return ArgumentError(f"{op.signature}: {text}")


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
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        return  # the forward reports the mismatch with both shapes
    check_size(shape, op.name)


def _checked_forward(op: OpDef) -> Callable[..., Any]:
    def forward(*arrays: Any, **params: Any) -> Any:
        _refuse_outgrown(op, arrays, params)
        return op.forward(*arrays, **params)

    return forward


def _split_args(op: OpDef, args: tuple[Any, ...], params: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """An op's tensor inputs among `args`, and its parameters: those given by keyword
    (PyTorch's spellings renamed), the leading ones of ops with any number of inputs,
    and the positional arguments after the inputs."""
    n_in = op.n_in
    if n_in is None:
        tensor_args, extra = tuple(args), ()
        if op.leading:
            unnamed = [p for p in op.leading if p not in params]
            params = {**params, **dict(zip(unnamed, args))}
            tensor_args = tensor_args[len(unnamed) :]
    else:
        if len(args) < n_in:
            raise ArgumentError(f"{op.signature} needs {n_in} input{'s' * (n_in != 1)}, got {len(args)}")
        tensor_args, extra = tuple(args[:n_in]), tuple(args[n_in:])
    if extra or (params and not SPELLINGS.keys().isdisjoint(params)):
        params = _bind_params(op, extra, params)
    return tensor_args, params


def _gather(inputs: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[np.ndarray], bool, int]:
    """apply's inputs in general: each as a Tensor (a number or an array becomes one in its
    place), their arrays as the forward takes them, whether any requires grad, and the
    product of their sizes when there are several (0 for one input)."""
    arrays: list[np.ndarray] = []
    bound = 1
    wanted = False
    for t in inputs:
        if type(t) is not Tensor:
            # The loop still walks the tuple it started with, so each is converted once, at its turn.
            t = Tensor(t)
            i = len(arrays)
            inputs = (*inputs[:i], t, *inputs[i + 1 :])
        if t.requires_grad:
            wanted = True
        a = t.data
        if a.dtype is _BOOL:
            # Booleans (what comparisons give) enter every op as float64 0 and 1, as in
            # PyTorch's promotion: True + True is 2, and no forward has to handle bool arrays.
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
        raise steps.exceeded(op.name)
    inputs = args
    if params or len(args) != op.n_in or type(args) is not tuple:
        inputs, params = _split_args(op, args, params)
    # One or two Tensors that are not boolean (nearly every call) are read without a loop;
    # `bound`, the product of the input sizes, bounds a broadcast result's size.
    arrays: Sequence[np.ndarray]
    n = len(inputs)
    if n == 1 and type(t := inputs[0]) is Tensor and (a := t.data).dtype is not _BOOL:
        arrays, wanted, bound = (a,), t.requires_grad, 0  # (a result no bigger than an input that exists)
    elif (n == 2 and type(t := inputs[0]) is Tensor and type(u := inputs[1]) is Tensor
          and (a := t.data).dtype is not _BOOL and (b := u.data).dtype is not _BOOL):
        arrays, wanted, bound = (a, b), t.requires_grad or u.requires_grad, a.size * b.size
    else:
        inputs, arrays, wanted, bound = _gather(inputs)
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
        raise _input_error(op, inputs, err) from None
    record = wanted and op.vjps is not None and _grad_mode._grad_enabled
    if op.n_ret == 1:
        if type(out) is not np.ndarray or out.dtype not in _NATIVE:  # _as_output, inline: once per op
            # (the 0-d results of NumPy's arithmetic are scalars: to_array's answer without its call)
            out = np.asarray(out) if type(out) is np.float64 else to_array(out)
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
_BOOL = np.dtype(np.bool_)
_FLOAT = _NATIVE[0]


def is_real(a: Any) -> bool:
    """Whether `a` is a float64 array, or the NumPy scalar that stands for a 0-d one: the
    engine's real values, for which VJPs may take a fast path (complex ones, and
    Tensors, take the general one)."""
    return (type(a) is np.ndarray and a.dtype is _FLOAT) or type(a) is np.float64


def _as_output(out: Any) -> np.ndarray:
    # NumPy returns scalars (np.float64) for 0-d results; the engine keeps arrays.
    if type(out) is np.ndarray and out.dtype in _NATIVE:
        return out
    return to_array(out)


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
    if m is ARRAY_MATH and type(g) is np.ndarray:
        # What m.sum and m.reshape do on a plain pass (np.sum is np.add.reduce for an
        # array; reshape's check of the cap is on `shape`), without the trips through the ops.
        check_size(shape, "reshape")
        return (np.add.reduce(g, axis=axes, keepdims=True) if axes else g).reshape(shape)
    if axes:
        g = m.sum(g, axis=axes, keepdims=True)
    return m.reshape(g, shape=shape)
