"""How results look: rich on a terminal, plain text in a pipe or with NO_COLOR.

The plain renderer prints with `print`, so a one-shot command writing to a pipe never
imports rich at all (start-up time), and nothing is wrapped or coloured.
"""
from __future__ import annotations

import functools
import os
import sys
import time
from collections import Counter
from typing import Any, NamedTuple, TextIO

import numpy as np

from gradcalc.autodiff.graph import graph_tree, node_title, walk_tree
from gradcalc.parser.analysis import Analysis, first_bad_call, nonfinite_kind, rule_constant, undefined_note
from gradcalc.parser.errors import LanguageError

from .formatting import EDGE_ITEMS, count, format_array

TREE_LIMIT = 400  # lines of a tree shown before it is cut short


def use_rich(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


MIN_COLUMNS = 40  # the narrowest terminal drawn for; a narrower one wraps the lines itself


def console(stderr: bool = False, **options: Any) -> Any:
    """A rich Console on stdout (or stderr) that is never narrower than MIN_COLUMNS. rich
    takes COLUMNS as it is: at 0 it prints nothing at all, not even an error, and at 1 a
    character a line, its tables without their names and numbers. COLUMNS of 0 (or none)
    means the terminal's own width, as for shutil.get_terminal_size."""
    return _console_class()(stderr=stderr, **options)


@functools.cache
def _console_class() -> Any:
    import shutil

    from rich.console import Console, ConsoleDimensions

    class WideEnough(Console):
        @property
        def size(self) -> ConsoleDimensions:
            width, height = Console.size.fget(self)  # type: ignore[attr-defined]
            if width <= 0:
                width = shutil.get_terminal_size((80, 24)).columns
            return ConsoleDimensions(max(width, MIN_COLUMNS), height)

        @size.setter
        def size(self, new_size: tuple[int, int]) -> None:
            Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    return WideEnough


class Style(NamedTuple):
    digits: int | None = None
    rich: bool = False
    full: bool = False  # every element of a large tensor, not a summary

    def number(self, value: Any) -> str:
        """A number or tensor on one line (pipes, JSON-like text)."""
        return format_array(value, self.digits, self.full)


def _shape(shape: tuple[int, ...]) -> str:
    return "scalar" if shape == () else "x".join(str(n) for n in shape)


def fan_out_text(nodes: list[Any]) -> str:
    """`x, mul (4 nodes), const (2 nodes)`: each title once, in order of first use, with how
    many of the nodes it stands for (`mul x4` read like a variable named x4)."""
    counts = Counter(node_title(n) for n in nodes)
    return ", ".join(title if k == 1 else f"{title} ({k} nodes)" for title, k in counts.items()) or "none"


def graph_line(a: Analysis) -> str:
    s = a.stats
    if s is None:  # the JAX and PyTorch engines: the library keeps the graph (parser/engines/report.py)
        return str(getattr(a, "graph_note", "not recorded"))
    fan = fan_out_text(s.fan_out)
    return (f"{count(s.nodes, 'node', 'nodes')}, {count(s.edges, 'edge', 'edges')}, "
            f"{count(s.leaves, 'leaf', 'leaves')} ({s.constants} constant), {count(s.op_nodes, 'op', 'ops')}, "
            f"depth {s.depth}, fan-out: {fan}")


def node_line(node: Any, digits: int | None) -> str:
    """`#n` aside, a node as a tree shows it: title, value and gradient. A node that needs
    no gradient (a constant) shows none, on either engine: the scalar engine's backward
    pass adds into every node's grad, constants' too."""
    value = _brief(node.data, digits)
    grad = getattr(node, "grad", None) if getattr(node, "requires_grad", True) else None
    grad_text = "" if grad is None else f"  grad {_brief(grad, digits)}"
    return f"{node_title(node)}  {value}{grad_text}"


def _brief(value: Any, digits: int | None) -> str:
    array = np.asarray(value)
    if array.size > 8:
        return f"<{_shape(array.shape)} tensor>"
    return format_array(array, digits)


def tree_lines(output: Any, digits: int | None) -> list[tuple[int, str]]:
    """(depth, text) per line; a node drawn before is a reference `see #n`."""
    lines: list[tuple[int, str]] = []
    for depth, item in walk_tree(graph_tree(output)):
        if len(lines) >= TREE_LIMIT:
            lines.append((0, f"... cut at {TREE_LIMIT} lines"))
            break
        if item.ref is not None:
            lines.append((depth, f"#{item.number} {node_title(item.node)}  (drawn above)"))
        else:
            lines.append((depth, f"#{item.number} {node_line(item.node, digits)}"))
    return lines


class PlainRenderer:
    def __init__(self, style: Style) -> None:
        self.style = style

    def write(self, text: str = "") -> None:
        print(text)

    def heading(self, text: str) -> None:
        self.write(f"== {text}")

    def lines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def analysis(self, a: Analysis, tree: bool = False) -> None:
        shape = "" if a.shape == () else f"  (shape {_shape(a.shape)})"
        self.write(f"value: {self.style.number(a.value)}{shape}")
        label = "grad of sum" if a.grad_of else "grad"
        for name, g in a.grads.items():
            self.write(f"{label} {name}: {self.style.number(g)}")
        if a.dtype is not None:
            self.write(f"grad: none ({no_gradient_text(a.dtype)})")
        self.write(f"graph: {graph_line(a)}")
        for note in notes(a):
            self.write(f"note: {note}")
        if tree:
            self.write("tree:")
            for depth, text in tree_lines(a.output, self.style.digits):
                self.write("  " * (depth + 1) + text)


def no_gradient_text(dtype: str) -> str:
    """Why a value of whole numbers or booleans reports no gradient."""
    return f"{'booleans' if dtype == 'bool' else 'whole numbers'} have no gradient"


def notes(a: Analysis) -> list[str]:
    """What explains an inf or nan: which op first produced it, from which inputs, and
    which op's backward pass first made a gradient infinite; for a derivative, where the
    function it is of is not finite; a name rebound since the value used it; and
    gradients found by forward mode say so."""
    found = []
    culprit = a.nonfinite
    if culprit is not None and culprit.parents:
        found.append(f"the first {nonfinite_kind(culprit.data)} came from {first_bad_call(culprit, culprit.data)}")
    elif culprit is not None and rule_constant(culprit) is not None:
        found.append(f"the first {nonfinite_kind(culprit.data)} came from {rule_constant(culprit)}")
    elif culprit is not None and culprit is a.nonfinite_root and not culprit.name:  # (`v` alone is its input)
        found.append(f"the {nonfinite_kind(culprit.data)} was computed from constants alone, so no op was recorded to name")
    elif culprit is not None:
        found.append(f"the first {nonfinite_kind(culprit.data)} is already in the input {culprit.name or '(a constant)'}")
    if a.nonfinite_gradient is not None:
        op, parent = a.nonfinite_gradient
        kind = nonfinite_kind(parent.grad)
        found.append(f"{'a' if kind == 'nan' else 'an'} {kind} gradient came from the backward pass of {first_bad_call(op, parent.grad, parent)}")
    if a.undefined is not None:
        found.append(undefined_note(a.undefined))
    if a.grads and not _finite(a.value) and all(_finite(g) for g in a.grads.values()):
        # log(det(A)) at det(A) < 0: nan, while A^-T is finite. The gradient is what the
        # rules compute, but there is no function there for it to be the derivative of.
        found.append(f"the value is not finite {_first_nonfinite_place(a.value)} but its gradients are: "
                     "the function has no derivative at this point, they are only what its ops' rules give")
    found += [earlier_note(name, on_graph, name in a.grads) for name, on_graph in a.earlier.items()]
    if a.tangent_passes is not None:
        found.append(f"the gradients are by forward mode: {count(a.tangents or 0, 'tangent', 'tangents')}, one per element of each "
                     f"variable, in {count(a.tangent_passes, 'forward pass', 'forward passes')} (reverse mode takes one backward pass for them all)")
    return found + list(getattr(a, "engine_notes", ()))  # (the JAX and PyTorch engines': jit, the device)


def earlier_note(name: str, on_graph: bool, reported: bool) -> str:
    """The output was computed from an earlier value of `name`, which holds another now:
    what its reported gradient is (Analysis.earlier)."""
    said = f"the value depends on an earlier value of {name}, which has been rebound since"
    if not reported:
        return f"{said} (to a value without gradient)"
    if on_graph:
        return f"{said}: grad {name} is with respect to what {name} holds now, and leaves out the paths from the earlier value that do not pass through it"
    return f"{said}: grad {name} is with respect to what {name} holds now, which the value does not depend on"


def _finite(data: Any) -> bool:
    return bool(np.isfinite(np.asarray(data, dtype=np.float64) if np.asarray(data).dtype.kind in "biu" else data).all())


def _first_nonfinite_place(value: np.ndarray) -> str:
    """'here' for a scalar, else 'at element [i, j]' of the first entry that is not finite."""
    if value.ndim == 0:
        return "here"
    return f"at element {[int(i) for i in np.argwhere(~np.isfinite(value))[0]]}"


class RichRenderer(PlainRenderer):
    def __init__(self, style: Style) -> None:
        super().__init__(style)
        self.console = console(highlight=False)

    def write(self, text: str = "") -> None:
        self.console.print(text, markup=False)

    def heading(self, text: str) -> None:
        self.console.print(f"[bold cyan]{_escape(text)}[/]")

    def analysis(self, a: Analysis, tree: bool = False) -> None:
        from rich.table import Table

        d = self.style.digits
        shape = "" if a.shape == () else f"  [dim](shape {_shape(a.shape)})[/]"
        value = self.fitted(a.value, self.console.width)
        if "\n" in value:  # a matrix: its rows below the heading
            self.console.print(f"[bold]value[/]{shape}\n{_escape(value)}")
        else:
            self.console.print(f"[bold]value[/] {_escape(value)}{shape}")
        if a.grads:
            title = "gradient of sum(output)" if a.grad_of else "gradient"
            table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
            # Folded, never cut with an ellipsis: on a narrow terminal a name or a number
            # takes more lines, and the report keeps every character of each.
            table.add_column("variable", style="cyan", overflow="fold")
            table.add_column("shape", style="dim", overflow="fold")
            table.add_column("d output / d variable", overflow="fold")
            room = self.console.width - max(len(n) for n in a.grads) - 12
            for name, g in a.grads.items():
                table.add_row(name, _shape(g.shape), self.fitted(g, room))
            self.console.print(table)
        if a.dtype is not None:
            self.console.print(f"[bold]gradient[/] none ({no_gradient_text(a.dtype)})")
        self.console.print(f"[bold]graph[/] {_escape(graph_line(a))}")
        for note in notes(a):
            self.console.print(f"[yellow]note:[/] {_escape(note)}")
        if tree:
            self.console.print(self._tree(a.output, d))

    def fitted(self, value: Any, width: int) -> str:
        """A matrix one row per line, with as many items kept at each end of a summarised
        row as fit the terminal, so that rows do not wrap in the middle."""
        array = np.asarray(value)
        if array.ndim < 2 or self.style.full:
            return self.style.number(array)
        text = format_array(array, self.style.digits, rows=True)
        for edge in (EDGE_ITEMS, 2, 1):
            if max(len(line) for line in text.splitlines()) <= width:
                break
            text = format_array(array, self.style.digits, edge=edge, rows=True, threshold=0)
        return text

    def _tree(self, output: Any, digits: int | None) -> Any:
        from rich.tree import Tree

        root: Any = None
        parents: list[Any] = []
        for depth, text in tree_lines(output, digits):
            label = _escape(text)
            if "(drawn above)" in text:
                label = f"[dim]{label}[/]"
            if root is None:
                root = Tree(label, guide_style="dim")
                parents = [root]
                continue
            del parents[depth:]
            node = parents[-1].add(label)
            parents.append(node)
        return root


def _escape(text: str) -> str:
    from rich.markup import escape  # only rich renderers call this

    return escape(text)


def renderer(style: Style) -> PlainRenderer:
    return RichRenderer(style) if style.rich else PlainRenderer(style)


def print_error(err: LanguageError, source: str | None, origin: str = "") -> None:
    """The message, the offending line and a caret under the span, on stderr."""
    error("\n".join(error_lines(err, source, origin)).removeprefix("error: "))


def error_lines(err: LanguageError, source: str | None, origin: str = "") -> list[str]:
    """`error: MESSAGE  [place]`, then the offending line and a caret under the span. A
    place in the body of a function defined by another source (an earlier input of a
    REPL, a loaded file) is shown in that source, as `in f, line 1, column 12`."""
    if err.source is not None and err.source != source:
        source, origin = err.source, ""
        where = f"in {err.function}, line {err.line}, column {err.column}"
    elif origin:
        where = origin + (f":{err.line}:{err.column}" if err.line is not None else "")
    else:
        where = f"line {err.line}, column {err.column}" if err.line is not None else ""
    lines = [f"error: {err.message}" + (f"  [{where}]" if where else "")]
    if source is not None and err.line is not None:
        lines += _excerpt(source.split("\n"), err)
    return lines


SPAN_LINES = 4  # lines of a span echoed whole; a longer one shows its first and last two


def _excerpt(text_lines: list[str], err: LanguageError) -> list[str]:
    """Each line the span covers, with carets under its part of the span: from the
    column on the first line, from the first character on the others, to the end column
    on the last line."""
    first = err.line or 1
    last = err.end_line if err.end_line and err.end_column and err.end_line >= first else first
    last = min(last, len(text_lines))
    if not 1 <= first <= len(text_lines):
        return []
    numbers = list(range(first, last + 1))
    if len(numbers) > SPAN_LINES:
        numbers = numbers[:2] + [0] + numbers[-2:]  # 0: the lines left out
    width = len(str(last))
    out = []
    for number in numbers:
        if number == 0:
            out.append(" " * width + " | ...")
            continue
        text = text_lines[number - 1]
        start = max((err.column or 1) - 1, 0) if number == first else len(text) - len(text.lstrip())
        if number == last:
            end = (err.end_column or 0) - 1 if last > first or err.end_line == err.line and err.end_column else start + 1
        else:  # (a continuation's backslash is not part of the span)
            end = len(text.rstrip().removesuffix("\\").rstrip())
        shown, at, wide = _window(text.translate(_ONE_CELL), start, max(min(end, len(text)) - start, 1))
        gutter = f"{number:>{width}} | "
        out += [f"{gutter}{shown}", " " * len(gutter) + " " * at + "^" * wide]
    return out


ECHO_LIMIT = 160  # characters of a source line echoed under an error
# An echoed line keeps one cell per character, so the caret stays under its span: a tab
# is a space, and a control character (which could act on the terminal) a `?`.
_ONE_CELL = {c: "?" for c in [*range(0x20), 0x7F]} | {0x09: " "}


def _window(text: str, start: int, width: int) -> tuple[str, int, int]:
    """A long line cut to about ECHO_LIMIT characters around the span (a 100,000-term line
    must not come back whole); returns the text, and the span's start and width in it."""
    if len(text) <= ECHO_LIMIT:
        return text, start, width
    width = min(width, ECHO_LIMIT - 40)
    left = max(0, min(start - 20, len(text) - ECHO_LIMIT))
    right = min(len(text), left + ECHO_LIMIT)
    prefix, suffix = ("…" if left else ""), ("…" if right < len(text) else "")
    return prefix + text[left:right] + suffix, start - left + len(prefix), width


class LateProgress:
    """A transient progress bar on stderr, when stderr is a terminal, shown only once the
    work has taken `delay` seconds; called with the work done and the whole of it."""

    def __init__(self, label: str, delay: float = 0.0) -> None:
        self.label, self.delay, self.start = label, delay, time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.start < self.delay or not use_rich(sys.stderr):
                return
            from rich.progress import Progress

            self.bar = Progress(console=console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def warn(text: str) -> None:
    """Something the user should know that does not stop the command."""
    _stderr_line("warning", "yellow", text)


def wrote(path: object) -> None:
    """Say which file an output option wrote, on stderr (stdout may carry data)."""
    if sys.stderr is not None:
        print(f"wrote {path}", file=sys.stderr)


def notice(label: str, text: str) -> None:
    """A fact about the input, labelled (`header: ...`): neither a warning nor an error.
    Said once (until forget_notices): a statement may be evaluated again for a report's
    note, and the file it reads is the same file."""
    if (label, text) in _NOTICED:
        return
    _NOTICED.add((label, text))
    _stderr_line(label, "cyan", text)


_NOTICED: set[tuple[str, str]] = set()  # the notices given by this command (or this REPL input)


def forget_notices() -> None:
    """The REPL's next input may read the file again: say it again then."""
    _NOTICED.clear()


def error(text: str) -> None:
    """A fatal problem outside the language (a file, an option); the caller exits 2."""
    _stderr_line("error", "bold red", text)


def internal_error(err: BaseException, consequence: str) -> None:
    """A bug in gradcalc, in one line (GRADCALC_DEBUG=1 shows the traceback)."""
    _stderr_line("internal error", "bold red", f"{type(err).__name__}: {err} (a gradcalc bug; {consequence})")


def _stderr_line(label: str, colour: str, text: str) -> None:
    if sys.stderr is None:  # stderr closed: nowhere to say it
        return
    if use_rich(sys.stderr):
        console(stderr=True, highlight=False).print(f"[{colour}]{label}:[/] {_escape(text)}")
    else:
        print(f"{label}: {text}", file=sys.stderr)
