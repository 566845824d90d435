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
from gradcalc.autodiff.gradcheck import complex_unsafe
from gradcalc.autodiff.tensor import new_tensor

from .compiler import Statement, UserFunction
from .errors import LanguageError, Span

if TYPE_CHECKING:
    from .machine import Session

CATEGORY = "your rule"


class Rule:
    """A function's rule: the rule compiled as a function of the def's parameters and the
    cotangent, where its result is written (errors about what it returns point there),
    and the ops its calls' nodes are made by (one complex-safe, one not: complex step
    may replay a call only when every op of its body takes complex numbers)."""

    __slots__ = ("function", "rule", "result_span", "item_spans", "ops", "warned")

    def __init__(self, function: UserFunction, rule: UserFunction, result_span: Span, item_spans: tuple[Span, ...]) -> None:
        self.function, self.rule, self.result_span, self.item_spans = function, rule, result_span, item_spans
        self.ops: dict[bool, tuple[Session, OpDef]] = {}
        self.warned = False

    def op(self, session: Session, complex_safe: bool) -> OpDef:
        made = self.ops.get(complex_safe)
        if made is None or made[0] is not session:  # (a copy of the functions in another session: its own ops)
            made = self.ops[complex_safe] = (session, _rule_op(session, self, complex_safe))
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


def _one_value(value: Any, function: UserFunction) -> Any:
    if isinstance(value, tuple):
        raise LanguageError("value", f"{function.name} has a vjp rule, so it must give one tensor; it gave {len(value)} results")
    return value


def _rule_op(session: Session, rule: Rule, complex_safe: bool) -> OpDef:
    """The op of a ruled function's calls: the forward evaluates the body (on arrays, as
    every op's forward: a check's replays give it complex ones), input k's VJP is the
    rule's k-th result."""
    function, written = rule.function, rule.rule
    params, n = function.params, len(function.params)
    # The VJPs of one node's inputs are asked for one after another with the same cotangent:
    # the rule runs once for all of them. (g, ans, inputs, results) of the last run; a node is
    # told by its inputs too, as two calls can give the same array (`def f(x, y) = x`).
    last: list[Any] = [None, None, (), None]

    def forward(*arrays: Any) -> Any:
        with no_grad():
            out = session.evaluate(function.code, dict(zip(params, [Tensor(a) for a in arrays])), function)
        return np.asarray(_one_value(out, function).data)

    def gradients(m: Any, g: Any, ans: Any, inputs: tuple[Any, ...]) -> list[Any]:
        if last[0] is g and last[1] is ans and len(last[2]) == len(inputs) and all(a is b for a, b in zip(last[2], inputs)):
            return last[3]
        recorded = m.kind == "tensor"  # (a backward pass that records a graph: its values are Tensors)
        ts = inputs if recorded else tuple(Tensor(a) for a in inputs)
        cotangent = g if isinstance(g, Tensor) else Tensor(g)
        with set_grad_enabled(recorded):
            value = session.evaluate(written.code, dict(zip(written.params, (*ts, cotangent))), written)
        results = _returned(value, rule, ts)
        last[:] = g, ans, inputs, results if recorded else [r.data for r in results]
        return last[3]

    def vjp_of(k: int) -> Any:
        def vjp(m: Any, g: Any, ans: Any, *inputs: Any) -> Any:
            return gradients(m, g, ans, inputs)[k]

        return vjp

    return OpDef(
        name=function.name, forward=forward, vjps=tuple(vjp_of(k) for k in range(n)), n_in=n, n_ret=1,
        doc=f"{function.text.strip()}, with a vjp rule", category=CATEGORY, complex_safe=complex_safe, method=False, public=False,
        kink=None, check=None, variadic_param=None, param_names=(), signature=f"{function.name}({', '.join(params)})",
        rule=f"{written.text.strip()}  (your rule)",
        blame=lambda ks: f"{function.name} (your vjp rule, for {', '.join(params[k] for k in ks)})",
    )


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
