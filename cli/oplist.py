"""The language's functions as rows, read from the op registry and the built-in table.

`python -m gradcalc.cli.oplist docs/language.md` rewrites the function table of that page
(between its `<!-- ops:start -->` and `<!-- ops:end -->` lines) and its edge table (between
`<!-- edges:start -->` and `<!-- edges:end -->`: every op's Edge conventions) from the
registry; tests/test_docs.py fails while either is not the current one.
"""
from __future__ import annotations

import sys

from gradcalc.autodiff import ALIASES, REGISTRY, TORCH_CHECKED
from gradcalc.parser import LanguageError
from gradcalc.parser.builtins import AUTODIFF, BUILTINS, LANGUAGE
from gradcalc.parser.help import describe, edge_call, edge_cells

from . import render


def op_rows() -> list[tuple[str, str, str, bool, str]]:
    """(name, signature, category, has gradient, description), one per function: every
    public op, then every built-in that is not an op (its forms as the signature)."""
    aliases: dict[str, list[str]] = {}
    for alias, name in ALIASES.items():
        aliases.setdefault(name, []).append(alias)
    rows = []
    for op in REGISTRY.values():
        if not op.public:
            continue
        doc = op.doc + (f" (also: {', '.join(aliases[op.name])})" if op.name in aliases else "")
        if op.method:
            doc += "; also a method"
        rows.append((op.name, op.signature, op.category, op.has_gradient, doc))
    for builtin in BUILTINS.values():
        rows.append((builtin.name, builtin.usage, builtin.category, builtin.category == AUTODIFF, builtin.doc))
    # Groups from the everyday to the specialised; a category not listed yet comes after
    # them, then the language's own forms (help, load, range), and the transformations,
    # which act on all the others, always close the list.
    order = [
        "arithmetic", "integer arithmetic", "elementwise", "reduction", "linear algebra", "shape",
        "softmax and losses", "no gradient", "constructor",
    ]

    closing = [LANGUAGE, AUTODIFF]

    def group(category: str) -> int:
        if category in closing:
            return len(order) + 1 + closing.index(category)
        return order.index(category) if category in order else len(order)

    return sorted(rows, key=lambda r: (group(r[2]), r[0]))


def markdown_table() -> str:
    """Every function as a row of a Markdown table (what `gradcalc ops --markdown` prints)."""
    lines = ["| function | category | gradient | description |", "|---|---|---|---|"]
    for _name, signature, category, has_grad, doc in op_rows():
        lines.append(f"| `{signature}` | {category} | {'yes' if has_grad else 'no'} | {doc} |")
    return "\n".join(lines) + "\n"


def edge_table() -> str:
    """Every op's edge conventions as rows of a Markdown table, in the function table's order:
    the call, where it is, what gradcalc gives and what PyTorch does (the text help shows)."""
    lines = [f"| call | case | gradcalc: value; gradient | PyTorch {TORCH_CHECKED} |", "|---|---|---|---|"]
    for name, *_ in op_rows():
        op = REGISTRY.get(name)
        for edge in op.edges if op is not None else ():
            case, said, torch = (cell.replace("|", "\\|") for cell in edge_cells(op, edge))
            lines.append(f"| `{edge_call(op, edge)}` | {case} | {said} | {torch} |")
    return "\n".join(lines) + "\n"


START, END = "<!-- ops:start -->\n", "<!-- ops:end -->"
EDGES_START, EDGES_END = "<!-- edges:start -->\n", "<!-- edges:end -->"


def _between(text: str, start: str, end: str, block: str, path: str) -> str:
    before, found, rest = text.partition(start)
    _, closed, after = rest.partition(end)
    if not found or not closed:
        raise SystemExit(f"{path}: no {start.strip()} ... {end} lines to put the table between")
    return before + start + block + end + after


def update_page(path: str) -> bool:
    """Put the current tables between the markers of the page at `path`; whether it changed."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    updated = _between(text, START, END, markdown_table(), path)
    if EDGES_START in text:
        updated = _between(updated, EDGES_START, EDGES_END, edge_table(), path)
    if updated != text:
        with open(path, "w", encoding="utf-8") as file:
            file.write(updated)
    return updated != text


def ops_action(name: str | None, *, markdown: bool, digits: int | None) -> int:
    """`gradcalc ops`: a Markdown table, a rich table on a terminal, or aligned plain lines;
    `gradcalc ops NAME`: all about one function."""
    if name is not None:
        try:
            lines = describe(name, digits=digits)
        except LanguageError as err:
            render.error(err.message)
            return 2
        print("\n".join(lines))
        return 0

    if markdown:
        print(markdown_table(), end="")
        return 0
    rows = op_rows()
    if render.use_rich(sys.stdout):
        from rich.table import Table

        table = Table(show_edge=False, pad_edge=False)
        for column in ("signature", "category", "grad", "description"):
            table.add_column(column)
        for _name, signature, category, has_grad, doc in rows:
            table.add_row(signature, category, "yes" if has_grad else "-", doc)
        render.console().print(table)
        return 0
    width = max(len(r[1]) for r in rows)
    for _name, signature, _category, has_grad, doc in rows:
        print(f"{signature:<{width}}  {doc}{'' if has_grad else '  (no gradient)'}")
    return 0


if __name__ == "__main__":
    for page in sys.argv[1:] or ["docs/language.md"]:
        print(f"{page}: {'updated' if update_page(page) else 'already current'}")
