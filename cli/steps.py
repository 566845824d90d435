"""`eval --steps` and `:steps`: the backward pass shown node by node, as it runs.

The engine records the steps (autodiff/steps.py); this module decides how they look:
text lines, a JSON list, and gradient labels on the edges of a DOT picture. Nodes are
numbered as in `--tree`, so the two views can be read side by side.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gradcalc.autodiff.graph import graph_tree, node_title, walk_tree
from gradcalc.autodiff.steps import BackwardSteps, backward_steps

from .formatting import SUMMARY_THRESHOLD, format_array, format_number

if TYPE_CHECKING:
    from gradcalc.parser.analysis import Analysis

    from .render import PlainRenderer, Style

SHOWN_ELEMENTS = 6  # a tensor with more elements is summarised in the text
STEP_LIMIT = 400  # steps shown in the text before it is cut short
RULE_WIDTH = 120  # characters of a rule shown in the text


def node_numbers(root: Any) -> dict[int, int]:
    """The number `--tree` gives each node (by id): depth first from the output."""
    return {id(item.node): item.number for _, item in walk_tree(graph_tree(root)) if item.ref is None}


def brief(value: Any, digits: int | None = None) -> str:
    """A number in full; a small tensor with its shape; a larger one summarised."""
    array = np.asarray(value)
    if array.ndim == 0:
        return format_number(array.item(), digits)
    shape = "x".join(str(n) for n in array.shape)
    if array.size <= SHOWN_ELEMENTS:
        return f"{format_array(array, digits)} ({shape})"
    if array.size == 0:
        return f"empty ({shape})"
    real = array.real if np.iscomplexobj(array) else array
    parts = [f"min {format_number(np.min(real), digits or 6)}", f"max {format_number(np.max(real), digits or 6)}",
             f"mean {format_number(np.mean(real), digits or 6)}"]
    return f"<{shape} tensor: {', '.join(parts)}>"


def step_lines(trace: BackwardSteps, digits: int | None = None, limit: int = STEP_LIMIT) -> list[tuple[str, str]]:
    """(kind, text) per line, kind one of heading, step, rule, add, total."""
    numbers = node_numbers(trace.root)

    def title(node: Any) -> str:
        return f"#{numbers.get(id(node), '?')} {node_title(node)}"

    if not trace.steps:
        return [("heading", "backward pass: no steps (the output depends on no variable)")]
    lines = [("heading", f"backward pass: {len(trace.steps)} steps in the order they run, "
                         f"from d output/d output = {brief(trace.seed, digits)}")]
    for i, step in enumerate(trace.steps):
        if i == limit:
            lines.append(("heading", f"... cut at {limit} of {len(trace.steps)} steps (--json gives them all)"))
            break
        lines.append(("step", f"{title(step.node)}  g = {brief(step.grad, digits)}"))
        lines.append(("rule", f"   rule  {step.op}: {_clip(step.rule)}"))
        for c in step.contributions:
            text = f"   {title(c.parent)} += {brief(c.grad, digits)}"
            if c.accumulated:
                text += f"  (now {brief(c.total, digits)})"
            lines.append(("add", text))
    named = [(node, trace.grads[node]) for node in trace.order if not node.parents and getattr(node, "name", None) and node in trace.grads]
    if named:
        lines.append(("total", "gradients: " + ", ".join(f"{node.name} {brief(g, digits)}" for node, g in named)))
    return lines


def _clip(rule: str) -> str:
    """Long rules (an index computed in place, say) are cut in the text; JSON has them whole."""
    return rule if len(rule) <= RULE_WIDTH else rule[: RULE_WIDTH - 4] + " ..."


def _value(value: Any) -> Any:
    """A gradient in JSON: numbers in full up to SUMMARY_THRESHOLD elements, else a summary."""
    from .jsonout import json_number, plain

    array = np.asarray(value)
    if array.size <= SUMMARY_THRESHOLD:
        return plain(array)
    real = array.real if np.iscomplexobj(array) else array
    return {"min": json_number(np.min(real)), "max": json_number(np.max(real)), "mean": json_number(np.mean(real))}


def steps_object(trace: BackwardSteps) -> list[dict[str, Any]]:
    """The steps as JSON-ready dicts, in the order they ran."""
    numbers = node_numbers(trace.root)
    return [
        {
            "node": numbers.get(id(step.node)), "title": node_title(step.node), "op": step.op, "rule": step.rule,
            "shape": list(np.shape(step.grad)), "grad": _value(step.grad),
            "adds": [
                {"to": numbers.get(id(c.parent)), "title": node_title(c.parent), "input": c.slot, "rule": c.rule,
                 "grad": _value(c.grad), "total": _value(c.total), "accumulated": c.accumulated}
                for c in step.contributions
            ],
        }
        for step in trace.steps
    ]


def edge_labels(trace: BackwardSteps, digits: int | None = 6) -> dict[tuple[int, int], str]:
    """The gradient that flowed along each edge, keyed (id(node), input slot) for graph_dot."""
    return {(id(step.node), c.slot): brief(c.grad, digits) for step in trace.steps for c in step.contributions}


def print_steps(out: PlainRenderer, trace: BackwardSteps, digits: int | None) -> None:
    lines = step_lines(trace, digits)
    console = getattr(out, "console", None)
    if console is None:
        for _, text in lines:
            out.write(text)
        return
    from rich.markup import escape

    styles = {"heading": "bold cyan", "step": "bold", "rule": "dim", "add": "", "total": "green"}
    for kind, text in lines:
        style = styles[kind]
        console.print(f"[{style}]{escape(text)}[/]" if style else escape(text), highlight=False)


def eval_with_steps(analysis: Analysis, *, as_json: bool, style: Style, tree: bool, dot: str | None) -> None:
    """`gradcalc eval ... --steps`: the usual report followed by the backward pass."""
    from . import render
    from .common import OutputFileError, usage_error, write_dot

    trace = backward_steps(analysis.output)
    if as_json:
        from .jsonout import analysis_object, dumps

        print(dumps({**analysis_object(analysis), "steps": steps_object(trace)}))
    else:
        out = render.renderer(style)
        out.analysis(analysis, tree=tree)
        print_steps(out, trace, style.digits)
    if dot is not None:
        try:
            write_dot(analysis.output, dot, edge_labels=edge_labels(trace, style.digits or 6))
        except OutputFileError as err:
            usage_error(str(err))


def steps_in_repl(repl: Any) -> None:
    """`:steps`: the backward pass of the last result."""
    from . import render

    if repl.last is None:
        render.warn("no result yet: evaluate an expression first")
        return
    print_steps(repl.out, backward_steps(repl.last.output), repl.out.style.digits)
