"""Floor division and remainder, with Python's sign rule (as NumPy and PyTorch's
`remainder`): the remainder takes the sign of the divisor, and a == b * (a // b) + a % b.

    a // b   no gradient (piecewise constant; PyTorch's floor_divide has none either)
    a % b    = a - b * (a // b): d/da = 1, d/db = -(a // b)

Both jump where a / b is a whole number; their gradient check stays away from there.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..batching import BROADCAST
from ..forward import DIAGONAL
from ..registry import Check, Edge, Torch, defop
from . import torch_calls
from .arithmetic import masked
from .comparisons import STEP

INT = "integer arithmetic"


def _near_whole_quotient(a: Any, b: Any, tol: float = 0.0) -> bool:
    """a / b within tol of a whole number: where a // b and a % b jump."""
    q = np.asarray(a) / np.asarray(b)
    return bool(np.any(np.abs(q - np.round(q)) <= tol))


floor_divide = defop(
    "floor_divide", lambda a, b: np.floor_divide(a, b), None, n_in=2, aliases=("floordiv",),
    doc="Python's a // b: the largest whole number <= a / b", category=INT,
    operators=("__floordiv__", "__rfloordiv__"),
    edges=(Edge("by 0", [[1.0, -1.0, 0.0], 0.0], [math.inf, -math.inf, math.nan], note="as NumPy"),),
    batch=BROADCAST, no_gradient=STEP,
    torch=Torch("torch.floor_divide", make=torch_calls.unary_pair),
)
def _remainder_db(m: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    # -(a // b), NumPy's floor division: the quotient np.remainder subtracts b times. Not
    # floor(a / b), whose a / b is rounded first: 1 % 0.1 is 1 - 9 * 0.1, yet 1 / 0.1
    # rounds to 10.0 (and -1e-300 / 1e300 to -0.0, where a // b is -1).
    return masked(m, g, -g * np.floor_divide(m.raw(a), m.raw(b)))


remainder = defop(
    "remainder", lambda a, b: np.remainder(a, b),
    (lambda m, g, ans, a, b: g, _remainder_db),
    doc="Python's a % b = a - b * (a // b), with the sign of b; gradient 1 for a and -(a // b) for b",
    category=INT, n_in=2, aliases=("mod",), operators=("__mod__", "__rmod__"),
    kink=_near_whole_quotient,
    check=Check(shapes=(((3, 4), (3, 4)), ((3, 4), (4,)), ((), (2, 3))), low=0.5, high=3.0, kink_gap=1e-3), jvp=DIAGONAL,
    edges=(Edge("at a whole quotient", [2.0, 1.0], 0.0, (1.0, -2.0), note="where a % b jumps: the right-hand side's"),
           Edge("by 0", [1.0, 0.0], math.nan, (1.0, -math.inf), order=1)),
    torch=Torch("torch.remainder"),
)
