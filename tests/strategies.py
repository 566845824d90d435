"""Hypothesis strategies made once, for the generators that draw inside other draws.

Hypothesis validates a strategy the first time it is drawn from. A generator that makes
`st.sampled_from(options)` or calls a composite at every draw pays that validation each
time: a fifth to a third of the time of the tests that write programs (py-spy). The same
strategy, kept, draws the same data, so the generated examples do not change.
"""
from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

_SAMPLED: dict[tuple[Any, ...], st.SearchStrategy[Any]] = {}

# A composite strategy function whose strategy is made once per arguments:
# `@kept` above `@st.composite`.
kept = functools.cache


def sampled(options: Any) -> st.SearchStrategy[Any]:
    """st.sampled_from(options), made once per options (each option's type in the key:
    1, 1.0 and True are equal)."""
    try:
        key = tuple((type(o), o) for o in options)
        found = _SAMPLED.get(key)
    except TypeError:  # (options that do not hash)
        return st.sampled_from(options)
    if found is None:
        found = _SAMPLED[key] = st.sampled_from(options)
    return found
