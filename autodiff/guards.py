"""The zero-gradient guards of derivative rules: a gradient (or tangent) that is exactly 0
at an entry passes exactly 0 on, even where the local derivative it multiplies is inf or
nan. Every VJP and JVP that can meet such a derivative ends in one of these (a
registry-wide test holds each op to the rule, in both modes)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .batching import Batched, lazy_physical
from .namespaces import ARRAY_MATH
from .tensor import squares_finite


def masked(m: Any, g: Any, out: Any) -> Any:
    """A VJP's result `out` (computed from `g`), made exactly 0 where g is 0 and out is nan.

    An input that the output does not depend on at a point (the branch where() did not
    take) receives gradient exactly 0 there; without this the chain rule multiplies that 0
    by an infinite or undefined local derivative (sqrt'(0), log'(-1)) and leaks nan, as
    PyTorch and JAX do. Only nan entries with g == 0 change, so elsewhere this is the
    plain product, and its own derivatives (grad of grad) are the plain product's. The
    check is one pass: the dot product of the flattened values with themselves is nan
    exactly when an entry is, as squares are never negative (no inf - inf); complex
    entries, unconjugated, may raise a false alarm, which only costs the exact test.
    (The array's own `dot`, not np.vdot, whose dispatch through NumPy's function
    protocol costs more than the product on the small arrays where this matters.)
    """
    raw = out if m is ARRAY_MATH else tested(m, out)  # (a plain pass, the common one, without the call)
    if type(raw) is np.ndarray and raw.ndim:
        flat = raw.ravel("K")  # (in memory order: a view of a transposed product too, not a copy)
        total = flat.dot(flat)
    else:
        total = raw
    if total == total:
        return out
    if type(out) is Batched or type(g) is Batched:  # (a batch's raw arrays are its physical ones: the mask by ops)
        return m.where(m.mul(m.eq(g, 0.0), m.ne(out, out)), 0.0, out)
    return m.where((m.raw(g) == 0) & np.isnan(raw), 0.0, out)


def scaled(m: Any, g: Any, factor: Any) -> Any:
    """masked(m, g, g * factor): the usual VJP, a gradient times a local derivative. With
    every entry of the factor finite, the product is nan only where g is nan or inf, never
    where g is 0, so there is nothing to mask; that is tested on the factor, which is
    smaller than the product when g is a batch (a Jacobian's tangents times one row's
    derivative), and the product is tested only when the factor is not finite."""
    out = g * factor
    if squares_finite(factor if m is ARRAY_MATH else tested(m, factor)):
        return out
    return masked(m, g, out)


def tested(m: Any, value: Any) -> Any:
    """The numbers a nan test reads of a value: its array, or for a batch of scaled rows not
    yet made dense their diagonal, which holds every value but exact zeros (the test need
    not make the rows)."""
    if m is ARRAY_MATH:
        return value
    return lazy_physical(value).data if type(value) is Batched else m.raw(value)


def guarded(m: Any, unreached: Any, out: Any) -> Any:
    """masked's rule for a VJP or JVP whose every result entry gathers several incoming
    ones (a reduction, a softmax row, a running sum, a matrix): `out` made exactly 0
    where `unreached` (booleans broadcastable to out: no non-zero gradient or tangent
    reaches that entry) and out is nan. Elsewhere out is untouched, a nan included."""
    raw = out if m is ARRAY_MATH else m.raw(out)
    lost = np.isnan(raw)
    if not lost.any():
        return out
    if type(out) is Batched or type(unreached) is Batched:  # (the mask by ops, as in masked)
        return m.where(m.mul(unreached, m.ne(out, out)), 0.0, out)
    return m.where(np.asarray(unreached) & lost, 0.0, out)
