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
from typing import TYPE_CHECKING, Any

import numpy as np

from .batching import BROADCAST, BatchRule
from .binding import describe_signature
from .namespaces import ARRAY_MATH, TENSOR_MATH
from .tensor import Tensor
from .wiring import apply, checked_forward

VJP = Callable[..., Any]
if TYPE_CHECKING:  # (evaluated, np.random would import NumPy's random module on every start-up)
    Make = Callable[[np.random.Generator], tuple[list[np.ndarray], dict[str, Any]]]


class Check:
    """How the every-op gradient check exercises an op.

    `shapes` lists alternative input shape tuples (one shape per tensor input);
    inputs are drawn uniformly from [low, high]. `make(rng)` replaces all of that for ops
    whose inputs need structure (class targets, say) and returns (inputs, params).
    `diff` names the inputs that are differentiated (default: all).
    `kink_gap` keeps inputs at least that far from the op's kinks (see OpDef.kink).
    What the tests compare the op with sits beside the Check in its defop (`torch=`,
    `reference=`): together they are the op's test record, as PyTorch's OpInfo is.

    A plain class, not a dataclass: every op makes one at import, on every start-up.
    """

    __slots__ = ("shapes", "low", "high", "params", "make", "diff", "kink_gap", "second_order")

    def __init__(
        self, shapes: tuple[tuple[tuple[int, ...], ...], ...] = (((),), ((3,),), ((2, 3),)), low: float = -2.0,
        high: float = 2.0, params: dict[str, Any] | None = None,
        make: Make | None = None,
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


class Torch:
    """How PyTorch (float64) computes an op: the oracle tests/test_torch_differential.py
    compares values, first and second derivatives with (tests/test_edges.py too).

    `fn` is PyTorch's own function by name ("torch.exp", "torch.nn.functional.silu"),
    called with the op's inputs and its parameters as gradcalc names them; or, where
    PyTorch spells the call otherwise (`dim=` for `axis=`), a function
    `fn(t, *inputs, **params)` of the torch module `t` that translates. A name is also
    the PyTorch engine's counterpart of the op (parser/engines/table.py reads it here).
    `variants` are keyword sets tried beside the Check's own params; `make(rng)` gives
    (inputs, params) where the Check does not fit or there is none, `extra_makes` more of
    them; `args` are a constructor's positional arguments. `agrees_at` are points where
    the two agree though the calculus is delicate (zeros, ties, infinities, nan, empty),
    each (inputs, params) or (inputs, params, 1) where only first derivatives agree; where
    gradcalc differs on purpose, an Edge says so. Nothing here imports torch: the tests
    pass it in.
    """

    __slots__ = ("name", "fn", "variants", "make", "extra_makes", "args", "agrees_at")

    def __init__(
        self, fn: str | Callable[..., Any], *, variants: tuple[dict[str, Any], ...] = (), make: Make | None = None,
        extra_makes: tuple[Make, ...] = (), args: tuple[Any, ...] | None = None, agrees_at: tuple[tuple[Any, ...], ...] = (),
    ) -> None:
        self.name = fn if isinstance(fn, str) else None
        self.fn = _by_name(fn) if isinstance(fn, str) else fn
        self.variants, self.make, self.extra_makes, self.args, self.agrees_at = variants, make, extra_makes, args, agrees_at

    def __repr__(self) -> str:
        return f"Torch({self.name or self.fn!r})"


def _by_name(name: str) -> Callable[..., Any]:
    def call(t: Any, *inputs: Any, **params: Any) -> Any:
        found = t
        for part in name.split(".")[1:]:  # (the first part is the torch module itself)
            found = getattr(found, part)
        return found(*inputs, **params)

    return call


class Gap:
    """No counterpart in a library, and why: an op PyTorch cannot serve as the oracle of
    (where else it is checked), or one a library engine's table (parser/engines/table.py)
    refuses by name."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"Gap({self.reason!r})"


NotInTorch = Gap  # (a defop's torch=: the oracle's gap, spelt for what it says)


class Reference:
    """A one-input elementwise op's exact values, for tests/test_accuracy.py's 50-digit
    comparison: its value, first and second derivatives as mpmath expressions in `x`, and
    the grid of its domain.

    The expressions are text (mpmath is a test dependency, never the engine's): Python
    over mpmath's functions (`exp`, `log1p`, `sech`, `npdf`, `mpf`, `pi`, ...), Python's
    `abs` and `max`, and REFERENCE_HELPERS. Write a derivative in a closed form that does
    not cancel where the function is flat (sigmoid'' as -logistic(x) logistic(-x)
    tanh(x / 2), not s' (1 - 2 s)); `slope=None` has mpmath differentiate numerically.
    `grid` is NumPy text over spread(low, high, n=121) (denser near 0), magnitudes(lo_exp,
    hi_exp, n=121) and both_signs(lo_exp, hi_exp, n=61); every op is also tried on the
    whole float range.
    """

    __slots__ = ("value", "slope", "grid", "second")

    def __init__(self, value: str, slope: str | None, grid: str, *, second: str | None = None) -> None:
        self.value, self.slope, self.grid, self.second = value, slope, grid, second

    def __repr__(self) -> str:
        return f"Reference({self.value!r})"


# Functions a Reference's expressions may use beside mpmath's, as expressions in x too.
REFERENCE_HELPERS = {
    "logistic": "1 / (1 + exp(-x))",
    # mpmath's erfc overflows from about 1e154 on; there erfc is 0 or 2 to far more than 50 digits.
    "erfc_wide": "erfc(x) if abs(x) < 1e10 else mpf(0 if x > 0 else 2)",
    "ncdf_wide": "erfc_wide(-x / sqrt(2)) / 2",  # the normal distribution function, as far out
}


BINARY_SHAPES = (((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ()))


class OpDef:
    """One registered op. Calling it applies it to tensors (or numbers, or arrays).

    A plain class rather than a dataclass: importing dataclasses and building the class
    cost every start-up a few milliseconds."""

    __slots__ = (
        "name", "forward", "vjps", "n_in", "n_ret", "doc", "category", "complex_safe", "method", "public", "kink", "check",
        "variadic_param", "param_names", "signature", "leading", "out_shape", "rule", "jvp", "jvp_rule", "blame", "edges",
        "batch", "no_gradient", "torch", "reference", "listed",
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
        no_gradient: str = "",  # why an op without VJPs has none (a step function, a constant, ...)
        torch: Torch | NotInTorch | None = None,  # its PyTorch oracle, for the tests
        reference: Reference | None = None,  # its mpmath values, for the tests
        listed: bool = False,  # its inputs may come as one list, as NumPy's concatenate([a, b]) takes them
    ) -> None:
        self.name, self.forward, self.vjps, self.n_in, self.n_ret = name, forward, vjps, n_in, n_ret
        self.doc, self.category, self.complex_safe, self.method, self.public = doc, category, complex_safe, method, public
        self.kink, self.check, self.variadic_param = kink, check, variadic_param
        self.param_names, self.signature, self.leading, self.out_shape, self.rule = param_names, signature, leading, out_shape, rule
        self.jvp, self.jvp_rule, self.blame, self.edges, self.batch = jvp, jvp_rule, blame, edges, batch
        self.no_gradient, self.torch, self.reference, self.listed = no_gradient, torch, reference, listed

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
    no_gradient: str = "",
    torch: Torch | NotInTorch | None = None,
    reference: Reference | None = None,
    listed: bool = False,
) -> OpDef:
    """Register an op: its forward (over arrays), a VJP per tensor input, and facts about it.

    `variadic` names a parameter that collects the remaining positional arguments into a
    tuple (`reshape(x, 2, 3)`: shape=(2, 3)). `operators` binds Tensor dunders (`__radd__`-style names apply the op with the operands
    swapped); `method=True` makes `x.name(...)` work. `leading` names keyword-only
    parameters of an op with any number of inputs that may also be given positionally
    before the inputs (`einsum('ij,jk->ik', a, b)`: subscripts); `listed`, that an op
    with any number of inputs also takes them as one list or tuple, as NumPy's
    `concatenate([a, b])` does (in the language and the Python API alike). `jvp` is the op's
    forward-mode rule beside its VJPs: a function `jvp(m, tangents, ans, *inputs, **params)`
    or one of forward.py's structural rules (DIAGONAL, LINEAR, ...), bound to the op here.
    `jvp_rule` is a JVP function's formula as `--steps --mode forward` shows it, in the
    inputs and their tangents (`dx` for x); a structural rule's text is made from the op.
    `edges` are its conventions where the derivative is a choice (see Edge), each stated
    as numbers that tests/test_edges.py evaluates; help and docs/language.md show them.
    `batch` is its batching rule (batching.py: how vmap and the batched Jacobians run it
    on inputs that carry a batch); an op whose JVP is DIAGONAL acts element by element and
    broadcasts, so its rule is BROADCAST unless it says otherwise. An op without VJPs
    (`vjps=None`) says why in `no_gradient`.

    The rest is for the tests, as PyTorch's OpInfo is: `torch`, how PyTorch computes the op
    (a Torch, or NotInTorch with the reason), and for a one-input elementwise op
    `reference`, its exact values in mpmath (a Reference). `missing_steps(op)` names what
    of CONTRIBUTING.md's recipe an op still lacks.
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
        no_gradient=no_gradient, torch=torch, reference=reference, listed=listed,
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



def missing_steps(op: OpDef) -> list[str]:
    """What `op` still lacks of CONTRIBUTING.md's recipe ("Adding an op"), each step named
    in the recipe's words, then what to give; [] for a complete op. The tests demand each
    of these. An op has a gradient unless it says why not (`no_gradient=`). The engine
    table row and the docs live outside the engine: the tests' check
    (tests/test_op_recipe.py) adds those two.
    """
    steps = []
    gradient = not op.no_gradient
    if gradient and op.vjps is None:
        steps.append("VJP: one per input (vjps=), or no_gradient='why' for an op without a gradient")
    if not gradient and op.vjps is not None:
        steps.append("VJP: the op has VJPs and says it has no gradient (no_gradient=); keep one of the two")
    if gradient and op.jvp is None:
        steps.append("JVP: jvp= beside the VJPs (DIAGONAL for an elementwise op)")
    if op.n_in != 0 and op.batch is None:
        steps.append("batching rule: batch= (BROADCAST, along_axis(...), LEADING or own(...))")
    if gradient and op.check is None:
        steps.append("Check: check=Check(...), the inputs the every-op gradcheck draws")
    if op.kink is not None and not op.edges:
        steps.append("edges: edges=(Edge(...), ...), its value and gradients at its kinks")
    if op.public and op.torch is None:
        steps.append("PyTorch oracle: torch=Torch(...), or NotInTorch('why') for an op PyTorch lacks")
    if gradient and op.category == "elementwise" and op.n_in == 1:
        if op.reference is None:
            steps.append("mpmath reference: reference=Reference(value, slope, grid), its exact values as mpmath text")
        if op.reference is None or op.reference.second is None:
            steps.append("second derivative: Reference(..., second=...), in a closed form")
    return steps
