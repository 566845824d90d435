"""`eval --steps` and `:steps`: the backward pass shown node by node, as it runs; with
`--mode forward` (`:steps forward`) the forward pass of forward mode instead, one pass
per variable, each node's value and tangent as a dual number.

The engine records the steps (autodiff/step_records.py); this module decides how they look:
text lines, a JSON list, and gradient (or tangent) labels on the edges of a DOT picture.
Nodes are numbered as in `--tree`, so the two views can be read side by side.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcalc.autodiff.backprop import topological_order
from gradcalc.autodiff.forward import NoJVPError
from gradcalc.autodiff.graph import graph_tree, node_title, walk_tree
from gradcalc.autodiff.step_records import BackwardSteps, ForwardSteps, backward_steps, forward_steps

from . import render
from .common import usage_error
from .formatting import SUMMARY_THRESHOLD, count, format_array, format_number
from .jsonout import analysis_object, dumps, json_number, plain
from .options import MODE

if TYPE_CHECKING:
    from collections.abc import Callable

    from gradcalc.parser.analysis import Analysis

    from .render import PlainRenderer, Style

MODES = MODE.choices  # the pass `--steps` shows: the backward pass, or forward mode's
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
    lines = [("heading", f"backward pass: {count(len(trace.steps), 'step', 'steps')} in the order they run, "
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


def print_lines(out: PlainRenderer, lines: list[tuple[str, str]]) -> None:
    """Step lines as text, or styled by kind on a terminal."""
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


def eval_with_steps(analysis: Analysis, *, as_json: bool, style: Style, tree: bool, mode: str,
                    draw: Callable[[dict[tuple[int, int], str]], None]) -> None:
    """`gradcalc eval ... --steps [--mode forward]`: the usual report followed by the
    backward pass, or by forward mode's passes (one per variable reported). `draw` is
    given the labels for the edges of `--dot` (see graph_dot) before the report."""
    if mode == "forward":
        try:
            passes = forward_passes(analysis)
        except NoJVPError as err:  # (an op without a forward rule: a function with a vjp rule of the user's)
            usage_error(f"--steps --mode forward: {err}", as_json)
        lines, labels, steps = forward_lines(passes, style.digits), forward_edge_labels(passes, style.digits or 6), forward_object(passes)
    else:
        trace = backward_steps(analysis.output)
        lines, labels, steps = step_lines(trace, style.digits), edge_labels(trace, style.digits or 6), steps_object(trace)
    draw(labels)
    if as_json:
        print(dumps({**analysis_object(analysis), **({"mode": "forward"} if mode == "forward" else {}), "steps": steps}))
    else:
        out = render.renderer(style)
        out.analysis(analysis, tree=tree)
        print_lines(out, lines)


def steps_in_repl(repl: Any, arg: str = "") -> None:
    """`:steps` (or `:steps reverse`): the backward pass of the last result; `:steps
    forward [NAME]`: forward mode's pass from each variable reported (or from NAME)."""
    mode, _, name = arg.partition(" ")
    mode, name = mode or "reverse", name.strip()
    if mode not in MODES or (name and mode != "forward"):
        render.warn("usage: :steps  (the backward pass),  :steps forward  or  :steps forward NAME  (forward mode)")
        return
    if repl.last is None:
        render.warn("no result yet: evaluate an expression first")
        return
    if mode == "reverse":
        print_lines(repl.out, step_lines(backward_steps(repl.last.output), repl.out.style.digits))
        return
    try:
        passes = forward_passes(repl.last, [name] if name else None)
    except KeyError:
        render.error(f":steps forward {name}: {name!r} is not a named value of the last result's graph")
        return
    except NoJVPError as err:
        render.error(f":steps forward: {err}")
        return
    print_lines(repl.out, forward_lines(passes, repl.out.style.digits))


# ---- forward mode ---------------------------------------------------------------------------


def forward_passes(analysis: Analysis, names: list[str] | None = None) -> list[ForwardSteps]:
    """One forward pass per name (default: every name the report gives a gradient, which
    --wrt and :wrt choose) that stands for a node of the output's graph, seeded with ones.
    A name not in the graph (a bound variable the output does not use) has no pass; a
    name asked for that is not there is a KeyError."""
    output = analysis.output
    nodes = {node.name: node for node in topological_order(output) if getattr(node, "name", None) and node.requires_grad}
    if names is not None:
        return [forward_steps(output, nodes[name]) for name in names]
    return [forward_steps(output, nodes[name]) for name in analysis.grads if name in nodes]


def dual(value: Any, tangent: Any, digits: int | None = None) -> str:
    """value + tangent ε, a dual number (a tangent of -t written `- t`)."""
    t = 0.0 if tangent is None else float(np.asarray(tangent))
    sign = "-" if math.copysign(1.0, t) < 0 else "+"
    return f"{format_number(float(np.asarray(value)), digits)} {sign} {format_number(abs(t), digits)}ε"


def forward_lines(passes: list[ForwardSteps], digits: int | None = None, limit: int = STEP_LIMIT) -> list[tuple[str, str]]:
    """(kind, text) per line, kind one of heading, step, rule, total; each pass's nodes in
    the order they run, a scalar as the dual number value + tangent ε."""
    if not passes:
        return [("heading", "forward pass: none (the output depends on no variable)")]
    lines: list[tuple[str, str]] = []
    for trace in passes:
        numbers = node_numbers(trace.root)
        name = trace.seed.name
        ops = sum(1 for step in trace.steps if step.op)
        start = (f"{name} = {dual(trace.seed.data, trace.direction, digits)}" if np.size(trace.seed.data) == 1
                 else f"the tangent of {name} is ones ({'x'.join(map(str, np.shape(trace.seed.data)))})")
        held = " (seeded where it stands: what it is made of is held fixed)" if trace.seed.parents else ""
        lines.append(("heading", f"forward pass along {name}{held}: {start}, every other variable's tangent 0; "
                                 f"{ops} op{'s' if ops != 1 else ''} in the order they run"))
        for i, step in enumerate(trace.steps):
            if i == limit:
                lines.append(("heading", f"... cut at {limit} of {len(trace.steps)} nodes (--json gives them all)"))
                break
            title = f"#{numbers.get(id(step.node), '?')} {node_title(step.node)}"
            if np.size(step.value) == 1 and np.ndim(step.value) == 0:
                text = f"{title}  {dual(step.value, step.tangent, digits)}"
            else:
                tangent = np.zeros(np.shape(step.value)) if step.tangent is None else step.tangent
                text = f"{title}  {brief(step.value, digits)}  tangent {brief(tangent, digits)}"
            if step.seeded:
                text += "  (seed)"
            elif step.op and step.tangent is None:
                text += "  (no tangent reaches it)"
            lines.append(("step", text))
            if step.rule:
                lines.append(("rule", f"   rule  {step.op}: {_clip(step.rule)}"))
        what = f"d output / d {name}" if np.size(trace.seed.data) == 1 else f"d output / d {name} times ones"
        lines.append(("total", f"tangent of the output: {brief(trace.tangent, digits)}  ({what})"))
    return lines


def forward_object(passes: list[ForwardSteps]) -> list[dict[str, Any]]:
    """The passes as JSON-ready dicts: per pass, the variable seeded, its tangent, the
    output's tangent, and every node in the order it ran."""
    out = []
    for trace in passes:
        numbers = node_numbers(trace.root)
        out.append({
            "along": trace.seed.name, "direction": _value(trace.direction), "tangent": _value(trace.tangent),
            "nodes": [
                {"node": numbers.get(id(step.node)), "title": node_title(step.node), "op": step.op, "rule": step.rule,
                 "shape": list(np.shape(step.value)), "value": _value(step.value),
                 "tangent": _value(np.zeros(np.shape(step.value)) if step.tangent is None else step.tangent), "seed": step.seeded}
                for step in trace.steps
            ],
        })
    return out


def forward_edge_labels(passes: list[ForwardSteps], digits: int | None = 6) -> dict[tuple[int, int], str]:
    """The tangent that flowed along each edge (the input's), keyed as edge_labels; with
    several passes, each pass's tangent after its variable's name."""
    labels: dict[tuple[int, int], list[str]] = {}
    for trace in passes:
        tangents = {id(step.node): step.tangent for step in trace.steps}
        for step in trace.steps:
            for slot, parent in enumerate(step.node.parents if step.op else ()):
                tangent = tangents.get(id(parent))
                if tangent is not None:
                    text = brief(tangent, digits)
                    labels.setdefault((id(step.node), slot), []).append(text if len(passes) == 1 else f"{trace.seed.name}: {text}")
    return {key: "; ".join(texts) for key, texts in labels.items()}
