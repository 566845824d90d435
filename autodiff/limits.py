"""The element cap: a calculator must refuse `zeros(10**5, 10**5)` before allocating it."""
from __future__ import annotations

import math
from collections.abc import Iterable

from .errors import SizeLimitError

DEFAULT_MAX_ELEMENTS = 10**7
_max_elements = DEFAULT_MAX_ELEMENTS


def max_elements() -> int:
    return _max_elements


def set_max_elements(n: int) -> int:
    """Set the cap and return the previous one (so callers can restore it)."""
    global _max_elements
    if n < 1:
        raise ValueError("the element cap must be at least 1")
    previous, _max_elements = _max_elements, int(n)
    return previous


def check_size(shape: Iterable[int], what: str) -> None:
    """Raise SizeLimitError if a tensor of `shape` would be larger than the cap."""
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise SizeLimitError(f"{what}: negative dimension in shape {dims}")
    n = math.prod(dims)
    if n > _max_elements:
        raise SizeLimitError(
            f"{what}: a tensor of shape {dims} has {n:,} elements, over the cap of "
            f"{_max_elements:,}"
        )
