"""Derivative rules written in the language: `vjp f(x, y, g) = (g * y, g * x)`.

A call of a function that has a rule is one node of the graph, as a call of a built-in
op is, made by an op of its own (an OpDef that is not in the registry): its forward
evaluates the function's body, its VJPs evaluate the rule. So

- a backward pass uses the rule and never sees the body's graph, as jax.custom_vjp and
  torch.autograd.Function do;
- with create_graph (grad of grad) the rule's own ops are recorded, so a second
  derivative is the derivative of the rule, where the rule is differentiable;
- a gradient check replays the node by evaluating the body, so the rule is held against
  the numeric derivative of the body, and a wrong rule is blamed by the same path that
  blames a built-in op whose VJP is wrong (gradcheck.suspect_ops).

Forward mode has no rule to use (the user gives a VJP, not a JVP) and says so, as JAX
refuses jvp of a custom_vjp function.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gradcalc.autodiff import OpDef, Tensor, is_grad_enabled, no_grad, set_grad_enabled, topological_order
from gradcalc.autodiff.batching import Batched, aligned, batched, new_level, own, unbatched
from gradcalc.autodiff.gradcheck import complex_unsafe
from gradcalc.autodiff.namespaces import TENSOR_MATH
from gradcalc.autodiff.shapes import broadcast_shapes
from gradcalc.autodiff.tensor import new_tensor
from gradcalc.autodiff.wiring import unbroadcast

from .compiler import Statement, UserFunction
from .errors import LanguageError, Span
from .functions import describe_value

if TYPE_CHECKING:
    from .machine import Session

CATEGORY = "your rule"


class Rule:
    """A function's rule: the rule compiled as a function of the def's parameters and the
    cotangent, where its result is written (errors about what it returns point there),
    and the ops its calls' nodes are made by (one complex-safe, one not: complex step
    may replay a call only when every op of its body takes complex numbers; and one per
    number of batch axes its inputs carry, for calls inside vmap)."""

    __slots__ = ("function", "rule", "result_span", "item_spans", "ops", "warned", "running")

    def __init__(self, function: UserFunction, rule: UserFunction, result_span: Span, item_spans: tuple[Span, ...]) -> None:
        self.function, self.rule, self.result_span, self.item_spans = function, rule, result_span, item_spans
        self.ops: dict[tuple[bool, int], tuple[Session, OpDef]] = {}
        self.warned = False
        self.running = False  # the rule is being evaluated (a rule that differentiates its own function would call itself)

    def op(self, session: Session, complex_safe: bool, nb: int = 0) -> OpDef:
        made = self.ops.get((complex_safe, nb))
        if made is None or made[0] is not session:  # (a copy of the functions in another session: its own ops)
            made = self.ops[complex_safe, nb] = (session, _rule_op(session, self, complex_safe, nb))
        return made[1]


def define_rule(session: Session, statement: Statement) -> UserFunction:
    """The function of `vjp NAME(...) = ...` with the rule attached (a copy: the def's
    compiled function is left as it is; a rule it had is replaced, as jax's defvjp and a
    loop running the statement again want). Refuses, at the place: a name that is not a
    def, a parameter count other than the def's and one cotangent."""
    rule = statement.function
    assert rule is not None
    name = statement.targets[0]
    name_span, params_span, result_span, *item_spans = statement.places
    function = session.functions.get(name)
    if function is None:
        if name in session.backend.function_names():
            message = f"vjp {name}: {name} is a built-in function, whose rule is its own; a vjp rule is for a function you define with def"
        else:
            message = f"vjp {name}: there is no function {name}; define it first (def {name}(x) = ...), then give its rule"
        raise LanguageError("name", message).at(name_span)
    params = function.params
    expected = (*params, "g")
    if len(rule.params) != len(params) + 1:
        raise LanguageError(
            "argument",
            f"vjp {name} takes {name}'s {_count(len(params), 'parameter')} and then the cotangent (the gradient of the output), "
            f"as in vjp {name}({', '.join(expected)}), got {_count(len(rule.params), 'parameter')}",
        ).at(params_span)
    bound = UserFunction(function.name, function.params, function.code, function.text, function.source)
    bound.rule = Rule(bound, rule, result_span, tuple(item_spans))
    return bound


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def call_with_rule(session: Session, function: UserFunction, args: list[Any]) -> Any:
    """A call of a function that has a rule: its body's value, as one node whose inputs
    are the arguments and whose op uses the rule (see the module's docstring)."""
    rule: Rule = function.rule
    if session.engine != "tensor":
        raise LanguageError(
            "argument", f"{function.name} has a vjp rule, and rules need the tensor engine ({session.switch_engine.format(engine='tensor')})"
        )
    operands = [session._operand(a, function.name) for a in args]
    if any(type(t) is Batched for t in operands):  # inside vmap: one node over the whole batch
        return _call_on_batch(session, function, operands)
    if not is_grad_enabled():
        return _one_value(session.evaluate(function.code, dict(zip(function.params, operands)), function), function)
    # The body runs on leaves of its own: its graph says which ops it used (for complex
    # step) and whether it reads variables from outside, and is then let go.
    leaves = [Tensor(t.data, requires_grad=True) for t in operands]
    out = _one_value(session.evaluate(function.code, dict(zip(function.params, leaves)), function), function)
    if out.data.dtype.kind not in "fc":  # booleans or whole numbers: no gradient to give
        return out
    order = topological_order(out)
    if not rule.warned:
        own = {id(leaf) for leaf in leaves}
        outside = sorted({n.name or "a variable" for n in order if n.op is None and n.requires_grad and id(n) not in own})
        if outside:
            rule.warned = True
            session.warn(
                f"{function.name} reads {', '.join(outside)} from outside its parameters: with a vjp rule it is a function of its "
                f"parameters only, so no gradient reaches {', '.join(outside)} through it; pass {'it' if len(outside) == 1 else 'them'} as a parameter"
            )
    if not any(t.requires_grad for t in operands):  # constants in, a constant out: nothing reaches the outside variables either
        return new_tensor(out.data, (), None, None)
    op = rule.op(session, not complex_unsafe(out, order))
    return new_tensor(out.data, tuple(operands), op, None)


def _call_on_batch(session: Session, function: UserFunction, operands: list[Any]) -> Any:
    """A call of a ruled function on batched values: the body evaluated on the batch (it
    batches through the ops it calls), as one node of an op that knows the batch's axes:
    its VJPs evaluate the rule on the batch in the same way."""
    levels = tuple(sorted({level for t in operands for level in unbatched(t)[1]}))
    physical = [_spread(unbatched(t)[0], unbatched(t)[1], levels) for t in operands]
    with no_grad():
        out = _one_value(session.evaluate(function.code, dict(zip(function.params, operands)), function), function)
    if not isinstance(out, Tensor) or out.data.dtype.kind not in "fc":
        return out
    if not any(t.requires_grad for t in physical):
        return out
    data = _spread(*unbatched(out), levels).data
    full = broadcast_shapes(data.shape, *(tuple(p.shape[: len(levels)]) + (1,) * (data.ndim - len(levels)) for p in physical))
    op = function.rule.op(session, False, len(levels))
    return batched(new_tensor(np.broadcast_to(data, full).copy(), tuple(physical), op, None), levels)


def _spread(value: Any, have: tuple[int, ...], levels: tuple[int, ...]) -> Any:
    """A value with an axis for every level of `levels` (size 1 for those it lacks)."""
    if not isinstance(value, Tensor):
        value = Tensor(value)
    if have == levels:
        return value
    return aligned(TENSOR_MATH, value, have, levels)


def _one_value(value: Any, function: UserFunction) -> Any:
    """The body's value of a function with a rule: one tensor (a rule gives one gradient
    per parameter for one output; a function value has no gradient to give)."""
    if isinstance(value, tuple):
        raise LanguageError("value", f"{function.name} has a vjp rule, so it must give one tensor; it gave {len(value)} results")
    if not isinstance(value, Tensor):
        raise LanguageError("value", f"{function.name} has a vjp rule, so it must give one tensor; it gave {describe_value(value)}")
    return value


def _rule_op(session: Session, rule: Rule, complex_safe: bool, nb: int = 0) -> OpDef:
    """The op of a ruled function's calls: the forward evaluates the body (on arrays, as
    every op's forward: a check's replays give it complex ones), input k's VJP is the
    rule's k-th result. With `nb`, the op of calls inside vmap: every input carries `nb`
    leading batch axes (of size 1 where it is the same in every row), which the body and
    the rule see as a batch (batching.py), so each row's values are its own."""
    function, written = rule.function, rule.rule
    params, n = function.params, len(function.params)
    # The VJPs of one node's inputs are asked for one after another with the same cotangent:
    # the rule runs once for all of them. (g, ans, inputs, results) of the last run; a node is
    # told by its inputs too, as two calls can give the same array (`def f(x, y) = x`).
    last: list[Any] = [None, None, (), None]

    def forward(*arrays: Any) -> Any:
        with no_grad(), _levels(nb) as levels:
            out = session.evaluate(function.code, dict(zip(params, [batched(Tensor(a), levels) for a in arrays])), function)
            value = _one_value(out, function)
            data = _spread(*unbatched(value), levels).data if nb else value.data
        if nb:
            data = np.broadcast_to(data, broadcast_shapes(data.shape, *(a.shape[:nb] + (1,) * (data.ndim - nb) for a in arrays)))
        return np.array(data)

    def gradients(m: Any, g: Any, ans: Any, inputs: tuple[Any, ...]) -> list[Any]:
        if last[0] is g and last[1] is ans and len(last[2]) == len(inputs) and all(a is b for a, b in zip(last[2], inputs)):
            return last[3]
        if rule.running:  # (placed by the machine where the rule asks for the derivative: grad(f) in its text)
            raise LanguageError(
                "argument", f"vjp {function.name}: the rule differentiates {function.name}, whose derivative is this rule: "
                "it would call itself without end; write the derivative with the ops of the body instead")
        rule.running = True
        try:
            return _evaluated(m, g, ans, inputs)
        finally:
            rule.running = False

    def _evaluated(m: Any, g: Any, ans: Any, inputs: tuple[Any, ...]) -> list[Any]:
        recorded = m.kind == "tensor"  # (a backward pass that records a graph: its values are Tensors)
        ts = inputs if recorded else tuple(Tensor(a) for a in inputs)
        cotangent = g if isinstance(g, Tensor) else Tensor(g)
        with set_grad_enabled(recorded), _levels(nb) as levels:
            seen = [_batch_of(t, levels) for t in (*ts, cotangent)]
            value = session.evaluate(written.code, dict(zip(written.params, seen)), written)
            results = _returned(value, rule, tuple(seen[:n]))
            if nb:  # each back to the physical input (a batch over an input the same in every row sums)
                results = [_to_input(r, levels, tuple(unbatched(t)[0].shape)) for r, t in zip(results, ts)]
        last[:] = g, ans, inputs, results if recorded else [r.data for r in results]
        return last[3]

    def vjp_of(k: int) -> Any:
        def vjp(m: Any, g: Any, ans: Any, *inputs: Any) -> Any:
            return gradients(m, g, ans, inputs)[k]

        return vjp

    made = OpDef(
        name=function.name, forward=forward, vjps=tuple(vjp_of(k) for k in range(n)), n_in=n, n_ret=1,
        doc=f"{function.text.strip()}, with a vjp rule", category=CATEGORY, complex_safe=complex_safe, method=False, public=False,
        kink=None, check=None, variadic_param=None, param_names=(), signature=f"{function.name}({', '.join(params)})",
        rule=f"{written.text.strip()}  (your rule)",
        blame=lambda ks: f"{function.name} (your vjp rule, for {', '.join(params[k] for k in ks)})",
    )
    made.batch = own(lambda m, op, nbatch, args, flags, ps: _batched_call(m, session, rule, complex_safe, nb, nbatch, args, flags),
                     "the body and the rule evaluated on the batch")
    return made


class _levels:  # noqa: N801 - used as a function: `with _levels(nb) as levels:`
    """`nb` new batch levels for the extent of one evaluation of a body or a rule."""

    def __init__(self, nb: int) -> None:
        self.nb, self.contexts = nb, [new_level() for _ in range(nb)]

    def __enter__(self) -> tuple[int, ...]:
        return tuple(c.__enter__() for c in self.contexts)

    def __exit__(self, *exc: Any) -> None:
        for c in reversed(self.contexts):
            c.__exit__(*exc)


def _batch_of(t: Any, levels: tuple[int, ...]) -> Any:
    """A physical value (its first len(levels) axes a batch) seen as that batch; a batch of
    cotangents (jacrev's) keeps its own levels, which come before these."""
    value, have = unbatched(t)
    return batched(value, have + levels) if levels else t


def _to_input(r: Any, levels: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    """The rule's result for an input, a batch over some of `levels` (and maybe a batch of
    cotangents of its own, whose levels stay), as the physical input's gradient: its batch
    axes become the input's leading ones, summed where the input has size 1 (the same
    value in every row: the rows' gradients add up)."""
    value, have = unbatched(r)
    extra = tuple(level for level in have if level not in levels)
    union = tuple(sorted({*have, *levels}))
    value = aligned(TENSOR_MATH, value, have, union)
    order = tuple(union.index(e) for e in extra) + tuple(union.index(v) for v in levels) + tuple(range(len(union), value.ndim))
    if order != tuple(range(value.ndim)):
        value = TENSOR_MATH.transpose(value, axes=order)
    g = batched(value, extra)
    full = broadcast_shapes(tuple(g.shape), shape)
    if tuple(g.shape) != full:
        g = TENSOR_MATH.broadcast_to(g, shape=full)
    return unbroadcast(TENSOR_MATH, g, shape)


def _batched_call(m: Any, session: Session, rule: Rule, complex_safe: bool, nb: int, nbatch: int, args: list[Any], flags: list[bool]) -> Any:
    """The batching rule of a ruled function's op: every input given the batch's axes
    (size 1 where it is the same in every row), then the op of that many axes."""
    spread = [a if f else m.reshape(a, shape=(1,) * nbatch + tuple(a.shape)) for a, f in zip(args, flags)]
    op = rule.op(session, complex_safe, nb + nbatch)
    from gradcalc.autodiff.batching import call

    return call(m, op, *spread)


def _returned(value: Any, rule: Rule, inputs: tuple[Tensor, ...]) -> list[Tensor]:
    """The rule's results, one per parameter of the function, each shaped as its argument."""
    function, written = rule.function, rule.rule
    params = function.params
    values = list(value) if isinstance(value, tuple) else [value]
    if len(values) != len(params):
        wanted = (f"one value, the gradient for {params[0]}" if len(params) == 1
                  else f"{len(params)} values, one per parameter of {function.name} ({', '.join(params)}), as a tuple")
        raise LanguageError("value", f"{written.name} gives {_count(len(values), 'value')}; it must give {wanted}").at(rule.result_span, written)
    # Each result is placed where it is written when the rule writes them out, `(gx, gy)`.
    spans = rule.item_spans if len(rule.item_spans) == len(values) else (rule.result_span,) * len(values)
    results = []
    for name, given, x, span in zip(params, values, inputs, spans):
        if not isinstance(given, Tensor):
            raise LanguageError("value", f"{written.name}: the gradient for {name} must be a tensor").at(span, written)
        if given.shape != x.shape:
            raise LanguageError(
                "shape", f"{written.name}: the gradient for {name} has shape {tuple(given.shape)}, but {name} has shape {tuple(x.shape)}; "
                "each gradient is shaped as its argument (sum over what broadcasting added)",
            ).at(span, written)
        results.append(given if given.data.dtype.kind in "fc" else Tensor(given.data.astype(np.float64)))
    return results
