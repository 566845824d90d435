"""The language's functions as rows, read from the op registry (and the autodiff builtins)."""
from __future__ import annotations

from gradcalc.autodiff import ALIASES, REGISTRY
from gradcalc.parser.backends import AUTODIFF_FUNCTIONS


def op_rows() -> list[tuple[str, str, str, bool, str]]:
    """(name, signature, category, has gradient, description), one per function."""
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
    for name, doc in AUTODIFF_FUNCTIONS.items():
        signature, _, text = doc.partition(": ")
        rows.append((name, signature, "autodiff", True, text))
    # Groups from the everyday to the specialised; a category not listed yet comes after
    # them, and grad/jacobian/hessian, which act on the others, always close the list.
    order = [
        "arithmetic", "integer arithmetic", "elementwise", "reduction", "linear algebra", "shape",
        "softmax and losses", "no gradient", "constructor",
    ]

    def group(category: str) -> int:
        if category == "autodiff":
            return len(order) + 1
        return order.index(category) if category in order else len(order)

    return sorted(rows, key=lambda r: (group(r[2]), r[0]))


def ops_action(name: str | None, *, markdown: bool, digits: int | None) -> int:
    """`gradcalc ops`: a Markdown table, a rich table on a terminal, or aligned plain lines;
    `gradcalc ops NAME`: all about one function."""
    import sys

    if name is not None:
        from gradcalc.parser import LanguageError
        from gradcalc.parser.help import describe

        from . import render

        try:
            lines = describe(name, digits=digits)
        except LanguageError as err:
            render.error(err.message)
            return 2
        print("\n".join(lines))
        return 0

    rows = op_rows()
    if markdown:
        print("| function | category | gradient | description |\n|---|---|---|---|")
        for _name, signature, category, has_grad, doc in rows:
            print(f"| `{signature}` | {category} | {'yes' if has_grad else 'no'} | {doc} |")
        return 0
    from . import render

    if render.use_rich(sys.stdout):
        from rich.console import Console
        from rich.table import Table

        table = Table(show_edge=False, pad_edge=False)
        for column in ("signature", "category", "grad", "description"):
            table.add_column(column)
        for _name, signature, category, has_grad, doc in rows:
            table.add_row(signature, category, "yes" if has_grad else "-", doc)
        Console().print(table)
        return 0
    width = max(len(r[1]) for r in rows)
    for _name, signature, _category, has_grad, doc in rows:
        print(f"{signature:<{width}}  {doc}{'' if has_grad else '  (no gradient)'}")
    return 0
