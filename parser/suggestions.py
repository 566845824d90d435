"""Did-you-mean: the names close to a misspelt one, as an error message ends with them.

Beside the errors and apart from the machine, so that whoever raises an error about a
name (the machine, help, the habits of other libraries) asks here and imports no other.
"""
from __future__ import annotations

from collections.abc import Iterable


def suggest(name: str, candidates: Iterable[str]) -> str:
    """'; did you mean a, b or c?' for the candidates close to `name`, else ''."""
    import difflib  # only on errors: keep it out of start-up

    close = difflib.get_close_matches(name, sorted(set(candidates)), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + (close[0] if len(close) == 1 else ", ".join(close[:-1]) + " or " + close[-1]) + "?"
