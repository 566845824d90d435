"""Notes that explain an inf or nan: which op first produced it, from which inputs, and
which op's backward pass first made a gradient infinite.

The engine records no graph for ops on constants, so for `log(0)` the output is a bare
constant; the statement is then evaluated once more with its constants recorded, only to
find the op (the first result is what the user sees).
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from gradcalc.autodiff import Tensor, first_nonfinite, topological_order
from gradcalc.autodiff.graph import first_nonfinite_gradient, format_number
from gradcalc.parser import Session
from gradcalc.parser.analysis import Analysis, analyze
from gradcalc.parser.backends import TensorBackend


def analyse(
    session: Session, value: Any, wrt: list[str] | None = None, code: list[Any] | None = None, always: list[str] | None = None,
) -> Analysis:
    """`analyze` plus notes about inf and nan; `code` (the statement's) lets a result made
    from constants alone be traced to its op; `always` as for analyze."""
    analysis = analyze(value, wrt, session.variables, always)
    gradients_finite = all(_finite(g) for g in analysis.grads.values())
    retrace = (lambda: _retrace(session, code)) if code is not None else None
    analysis.notes += nonfinite_notes(analysis.output, retrace, gradients_finite, list(analysis.grads.values()))
    analysis.nonfinite = None  # said in the notes
    return analysis


def nonfinite_notes(output: Any, retrace: Any = None, gradients_finite: bool = False, reported: list[Any] | None = None) -> list[str]:
    """Notes for an output whose value (or, unless `gradients_finite` says they are all
    finite, whose reported gradients, `reported`) hold an inf or nan; `retrace` returns
    the output again with its constants recorded."""
    notes = []
    if not _finite(output.data):
        source = output
        culprit = first_nonfinite(source)
        # An op on constants alone records no graph (`log(0)`, or `log(0) + x`, where the
        # add's input is the constant -inf): evaluated again with constants recorded, the
        # op that made it can be named.
        if retrace is not None and (culprit is None or not culprit.parents) and not getattr(culprit, "name", None):
            traced = retrace()
            if traced is not None:
                source, culprit = traced, first_nonfinite(traced)
        if culprit is not None and culprit.parents:
            notes.append(f"the first {_kind(culprit.data)} came from {_at_first_bad(culprit, culprit.data)}")
        elif culprit is source:
            notes.append(f"the {_kind(culprit.data)} was computed from constants alone, so no op was recorded to name")
        elif culprit is not None:
            notes.append(f"the first {_kind(culprit.data)} is already in the input {culprit.name or '(a constant)'}")
    blamed = None if gradients_finite else _first_bad_gradient(output, reported)
    if blamed is not None:
        op, parent = blamed
        kind = _kind(parent.grad)
        notes.append(f"{'a' if kind == 'nan' else 'an'} {kind} gradient came from the backward pass of {_at_first_bad(op, parent.grad, parent)}")
    return notes


def _first_bad_gradient(output: Any, reported: list[Any] | None) -> tuple[Any, Any] | None:
    """Where a backward pass first made a gradient not finite, as first_nonfinite_gradient
    finds it; when the reported gradients hold nan, where one first became nan (`sin(x)/x`
    at 0 makes an inf on one path and a nan on the other: the note is about the nan shown)."""
    order = topological_order(output)
    blamed = first_nonfinite_gradient(output, order)
    if blamed is None or not reported or not any(np.isnan(g).any() for g in reported) or np.isnan(blamed[1].grad).any():
        return blamed
    for node in reversed(order):
        if node.grad is None or np.isnan(node.grad).any():
            continue
        for parent in node.parents:
            grad = getattr(parent, "grad", None)
            if grad is not None and np.isnan(grad).any():
                return node, parent
    return blamed


def _finite(data: Any) -> bool:
    return bool(np.all(np.isfinite(data)))


def _kind(data: Any) -> str:
    array = np.asarray(data)
    return "nan" if np.isnan(array).any() and not np.isinf(array).any() else "inf" if not np.isnan(array).any() else "inf or nan"


_POINTWISE = ("elementwise", "arithmetic")  # the categories of ops that map elements to elements (but matmul)


def _at_first_bad(op: Any, bad: Any, through: Any = None) -> str:
    """`log(-1.0)`, or for tensors `log at element [2]: log(-1.0)`, at the first element
    of `bad` that is not finite (`bad` has the shape of `through`, else of the op's output)."""
    bad = np.asarray(bad)
    index = tuple(int(i) for i in np.argwhere(~np.isfinite(bad))[0]) if bad.ndim else ()
    where = through if through is not None else op
    shape = np.shape(where.data)
    # An input's element at that index is the op's input there only for an op that works
    # element by element; det's gradient at [0, 0] is not det of x[0, 0].
    definition = getattr(op, "op", None)  # (a scalar-engine node has none: its inputs are numbers)
    pointwise = definition is None or (definition.category in _POINTWISE and definition.out_shape is None)
    args = ", ".join(_input_at(p, index if pointwise else (), shape) for p in op.parents)
    call = f"{op.label}({args})" if op.label.isidentifier() else f"{op.label} of {args}"  # scalar labels: **0.5
    return call if not index else f"{op.label} at element {list(index)}: {call}"


def _input_at(node: Any, index: tuple[int, ...], shape: tuple[int, ...]) -> str:
    data = np.asarray(node.data)
    if data.size == 1:
        return format_number(data.reshape(()).item())
    if data.shape == shape and index:
        return format_number(data[index].item())
    return f"<{'x'.join(map(str, data.shape))} tensor>"


class _ConstantsRecorded(TensorBackend):
    """The tensor engine, with every literal a leaf that records the ops applied to it."""

    def constant(self, value: float) -> Tensor:
        return Tensor(value, requires_grad=True)


def _retrace(session: Session, code: list[Any]) -> Any:
    if session.engine != "tensor":
        return None
    tracer = copy.copy(session)
    tracer.backend = _ConstantsRecorded()
    try:
        traced = tracer.evaluate(code)
    except Exception:  # noqa: BLE001 - only a diagnosis: without it the note is vaguer, nothing worse
        return None
    return traced if hasattr(traced, "parents") else None
