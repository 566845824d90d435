"""The op table: every op by name, and `defop`, which puts one there.

An op is a forward function over NumPy arrays and, beside it, one VJP per tensor input.
`defop` registers both and binds the op's Tensor operators and methods; the wiring
(wiring.py: `apply`) does everything else for every op, and backprop.py un-broadcasts
and accumulates the gradients.

A VJP is written once and runs two ways. Its first argument `m` is a namespace of ops:
`ARRAY_MATH` (the forwards themselves, over raw arrays: fast, records nothing) for an
ordinary backward pass, or `TENSOR_MATH` (the registered ops, over Tensors: records a
graph) when `create_graph=True`, which is what makes grad of grad work for free. So a
VJP uses Python operators and `m.<op>(...)`, never `np.<fn>` on its inputs.

    vjp(m, g, ans, *inputs, **params) -> gradient for one input

where `g` is the gradient of the output and `ans` the output itself.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .batching import BROADCAST, BatchRule
from .binding import describe_signature
from .namespaces import ARRAY_MATH, TENSOR_MATH
from .tensor import Tensor
from .wiring import apply, checked_forward

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


# The PyTorch an Edge's torch="same" was checked against (the `oracles` extra pins it):
# tests/test_edges.py fails when another is installed, until each "same" is checked again.
TORCH_CHECKED = "2.13.0"


class Edge:
    """One convention of an op where calculus has no single answer (a kink, a tie, a zero,
    an infinity, a singular matrix), stated as numbers that a test evaluates.

    At `inputs` (with `params`) the op gives `value` (a tuple for several outputs), and
    the gradient of sum(w * output) (w: `weights`, ones by default) with respect to input
    k of `wrt` (all inputs by default) is grads[k]; `second`, when given, is the gradient
    of the sum of those gradients (a second derivative). With `error` the op refuses the
    inputs with a message that contains it. `case` says in words where this is (`at 0`,
    `at a tie`), `note` what the numbers alone do not. `torch` is "same" where PyTorch
    (TORCH_CHECKED, float64) gives the same numbers (value and gradient; to second order
    too unless order=1), or what PyTorch gives instead.
    """

    __slots__ = ("case", "inputs", "params", "value", "grads", "second", "error", "wrt", "weights", "torch", "order", "note", "names")

    def __init__(
        self, case: str, inputs: Sequence[Any], value: Any = None, grads: Sequence[Any] | None = None, *,
        params: dict[str, Any] | None = None, second: Sequence[Any] | None = None, error: str | None = None,
        wrt: Sequence[int] | None = None, weights: Any = None, torch: str = "same", order: int = 2, note: str = "",
        names: Sequence[str] | None = None,
    ) -> None:
        self.case, self.inputs, self.params, self.value, self.grads = case, tuple(inputs), params or {}, value, grads
        self.second, self.error, self.wrt, self.weights = second, error, None if wrt is None else tuple(wrt), weights
        self.torch, self.order, self.note, self.names = torch, order, note, names  # names: of the inputs, where the signature has none

    def differentiated(self) -> tuple[int, ...]:
        """The positions of the inputs whose gradients `grads` lists."""
        return self.wrt if self.wrt is not None else tuple(range(len(self.inputs)))

    def __repr__(self) -> str:
        return f"Edge({self.case!r}, {self.inputs!r})"


BINARY_SHAPES = (((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ()))


class OpDef:
    """One registered op. Calling it applies it to tensors (or numbers, or arrays).

    A plain class rather than a dataclass: importing dataclasses and building the class
    cost every start-up a few milliseconds."""

    __slots__ = (
        "name", "forward", "vjps", "n_in", "n_ret", "doc", "category", "complex_safe", "method", "public", "kink", "check",
        "variadic_param", "param_names", "signature", "leading", "out_shape", "rule", "jvp", "jvp_rule", "blame", "edges",
        "batch",
    )

    def __init__(
        self, name: str, forward: Callable[..., Any], vjps: tuple[VJP | None, ...] | VJP | None, n_in: int | None,
        n_ret: int | None, doc: str, category: str, complex_safe: bool, method: bool, public: bool,
        kink: Callable[..., bool] | None, check: Check | None, variadic_param: str | None, param_names: tuple[str, ...],
        signature: str, leading: tuple[str, ...] = (), out_shape: Callable[..., tuple[int, ...]] | None = None,
        rule: str | None = None,  # the derivative rule as text; without it, read from the VJPs (rules.py)
        jvp: Callable[..., Any] | None = None,  # the forward-mode rule (forward.py)
        jvp_rule: str | None = None,  # that rule as text; without it, read from the rule's structure (rules.py)
        # How a failing check names the op, told which inputs' VJPs disagree; without it, by its name
        # (an op made outside the registry, such as a rule the user wrote, names the inputs too).
        blame: Callable[[list[int]], str] | None = None,
        edges: tuple[Edge, ...] = (),  # its conventions at kinks, ties, zeros, infinities (help and docs show them)
        batch: BatchRule | None = None,  # how it runs on a batch (batching.py); None: it cannot
    ) -> None:
        self.name, self.forward, self.vjps, self.n_in, self.n_ret = name, forward, vjps, n_in, n_ret
        self.doc, self.category, self.complex_safe, self.method, self.public = doc, category, complex_safe, method, public
        self.kink, self.check, self.variadic_param = kink, check, variadic_param
        self.param_names, self.signature, self.leading, self.out_shape, self.rule = param_names, signature, leading, out_shape, rule
        self.jvp, self.jvp_rule, self.blame, self.edges, self.batch = jvp, jvp_rule, blame, edges, batch

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


REGISTRY: dict[str, OpDef] = {}
ALIASES: dict[str, str] = {}




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
    jvp: Any = None,
    jvp_rule: str | None = None,
    edges: Sequence[Edge] = (),
    batch: BatchRule | None = None,
) -> OpDef:
    """Register an op: its forward (over arrays), a VJP per tensor input, and facts about it.

    `variadic` names a parameter that collects the remaining positional arguments into a
    tuple (`reshape(x, 2, 3)`: shape=(2, 3)). `operators` binds Tensor dunders (`__radd__`-style names apply the op with the operands
    swapped); `method=True` makes `x.name(...)` work. `leading` names keyword-only
    parameters of an op with any number of inputs that may also be given positionally
    before the inputs (`einsum('ij,jk->ik', a, b)`: subscripts). `jvp` is the op's
    forward-mode rule beside its VJPs: a function `jvp(m, tangents, ans, *inputs, **params)`
    or one of forward.py's structural rules (DIAGONAL, LINEAR, ...), bound to the op here.
    `jvp_rule` is a JVP function's formula as `--steps --mode forward` shows it, in the
    inputs and their tangents (`dx` for x); a structural rule's text is made from the op.
    `edges` are its conventions where the derivative is a choice (see Edge), each stated
    as numbers that tests/test_edges.py evaluates; help and docs/language.md show them.
    `batch` is its batching rule (batching.py: how vmap and the batched Jacobians run it
    on inputs that carry a batch); an op whose JVP is DIAGONAL acts element by element and
    broadcasts, so its rule is BROADCAST unless it says otherwise.
    """
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    if vjps is not None and (n_in is None) != callable(vjps):
        raise ValueError(f"op {name!r}: give one VJP per input as a tuple, or one VJP taking k= for any number of inputs")
    if isinstance(vjps, tuple) and n_in is not None and len(vjps) != n_in:
        raise ValueError(f"op {name!r}: {n_in} inputs but {len(vjps)} VJPs")
    param_names, signature = describe_signature(name, forward, n_in, variadic, leading)
    op = OpDef(
        name=name, forward=forward, vjps=vjps, n_in=n_in, n_ret=n_ret, doc=doc, category=category,
        complex_safe=complex_safe, method=method, public=public, kink=kink, check=check,
        variadic_param=variadic, param_names=param_names, signature=signature, leading=tuple(leading),
        out_shape=out_shape, rule=rule, jvp_rule=jvp_rule, edges=tuple(edges),
        batch=BROADCAST if batch is None and getattr(jvp, "kind", None) == "diagonal" else batch,
    )
    op.jvp = jvp.bind(op) if hasattr(jvp, "bind") else jvp
    REGISTRY[name] = op
    for alias in aliases:
        ALIASES[alias] = name
    # VJPs on a plain backward pass call the forwards directly: those that can outgrow
    # their inputs are checked there too.
    raw = forward if out_shape is None else checked_forward(op)
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

