"""Broadcasting of shapes, without NumPy's limit of 32 dimensions.

np.broadcast_shapes builds an iterator over its arguments, which takes at most 32
dimensions, while arrays may have 64: a value batched by 33 nested transformations
(jacfwd of jacfwd ..., each level an axis) failed there with a RuntimeError.
"""
from __future__ import annotations

from collections.abc import Sequence


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape NumPy broadcasts `shapes` to, or a ValueError in NumPy's words."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    source = [0] * ndim  # (which shape gave each axis its length, for the message)
    for k, s in enumerate(shapes):
        for i, n in enumerate(s, ndim - len(s)):
            if n == 1 or n == out[i]:
                continue
            if out[i] != 1:
                j = source[i]
                raise ValueError("shape mismatch: objects cannot be broadcast to a single shape.  Mismatch is between "
                                 f"arg {j} with shape {tuple(shapes[j])} and arg {k} with shape {tuple(s)}.")
            out[i], source[i] = n, k
    return tuple(out)
