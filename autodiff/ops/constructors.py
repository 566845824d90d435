"""Constructors: new constant tensors, refused before allocation when over the size cap."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..limits import check_size
from ..registry import NotInTorch, Torch, defop

NEW = "constructor"


def _dims(shape: Any, what: str) -> tuple[int, ...]:
    """A shape from ints, integral floats, or one list of them."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray)):
        shape = tuple(np.ravel(shape[0]))
    dims = []
    for d in shape:
        if isinstance(d, (bool, np.bool_)) or not float(d).is_integer():
            raise ArgumentError(f"{what}: dimensions must be whole numbers, got {d!r}")
        dims.append(int(d))
    check_size(dims, what)
    return tuple(dims)


def _zeros(shape: tuple[int, ...] = ()) -> Any:
    return np.zeros(_dims(shape, "zeros"))


def _ones(shape: tuple[int, ...] = ()) -> Any:
    return np.ones(_dims(shape, "ones"))


def _full(shape: Any, value: float) -> Any:
    return np.full(_dims((shape,), "full"), value)


def _eye(n: int, m: int | None = None) -> Any:
    rows, cols = _dims((n, n if m is None else m), "eye")
    return np.eye(rows, cols)


def _arange(start: float, stop: float | None = None, step: float = 1.0) -> Any:
    if stop is None:
        start, stop = 0.0, start
    if step == 0:
        raise ArgumentError("arange: step must not be 0")
    from fractions import Fraction  # here: importing it (and decimal) costs every command's start-up 1.6%

    count = max(math.ceil((Fraction(stop) - Fraction(start)) / Fraction(step)), 0)  # (exact: no overflow to inf)
    check_size((count,), "arange")
    return np.arange(start, stop, step, dtype=np.float64)


def _linspace(start: float, stop: float, num: int = 50) -> Any:
    return evenly_spaced(start, stop, _dims((num,), "linspace")[0])


def evenly_spaced(start: float, stop: float, num: int) -> Any:
    """np.linspace, also where stop - start overflows (-1e308 to 1e308), where NumPy's
    points are nan and inf: halving both ends, then doubling the points, is exact there
    (both ends are far above the subnormals)."""
    if np.isfinite(stop - start) or not (np.isfinite(start) and np.isfinite(stop)):
        return np.linspace(start, stop, num)
    return np.linspace(start / 2, stop / 2, num) * 2


def _generator(seed: int | None, what: str) -> Any:
    if seed is not None and seed < 0:
        raise ArgumentError(f"{what}: seed must be a whole number from 0 up, got {seed}")
    return np.random.default_rng(None if seed is None else int(seed))


def _rand(shape: tuple[int, ...] = (), seed: int | None = None) -> Any:
    return _generator(seed, "rand").random(_dims(shape, "rand"))


def _randn(shape: tuple[int, ...] = (), seed: int | None = None) -> Any:
    return _generator(seed, "randn").standard_normal(_dims(shape, "randn"))


def _new(name: str, fn: Any, doc: str, variadic: str | None = None, *, torch: Torch | NotInTorch) -> Any:
    return defop(name, fn, None, n_in=0, doc=doc, category=NEW, variadic=variadic, torch=torch, no_gradient="a constant: it has no inputs")


zeros = _new("zeros", _zeros, "a tensor of zeros: zeros(2, 3)", "shape",
             torch=Torch(lambda t, *shape: t.zeros(*shape, dtype=t.float64), args=(2, 3)))
ones = _new("ones", _ones, "a tensor of ones: ones(2, 3)", "shape", torch=Torch(lambda t, *shape: t.ones(*shape, dtype=t.float64), args=(3,)))
full = _new("full", _full, "a tensor of one value: full([2, 3], 7)",
            torch=Torch(lambda t, shape, v: t.full(shape, v, dtype=t.float64), args=((2, 3), 7.0)))
eye = _new("eye", _eye, "identity matrix n x n (or n x m)",
           torch=Torch(lambda t, n, m=None: t.eye(n, m if m is not None else n, dtype=t.float64), args=(3, 4)))
arange = _new("arange", _arange, "evenly spaced values in [start, stop): arange(5), arange(1, 2, 0.25)",
              torch=Torch(lambda t, *a: t.arange(*a, dtype=t.float64), args=(1, 2, 0.25)))
linspace = _new("linspace", _linspace, "num evenly spaced values from start to stop inclusive",
                torch=Torch(lambda t, a, b, n: t.linspace(a, b, n, dtype=t.float64), args=(0, 1, 7)))
_RANDOM = NotInTorch("random: NumPy's generator, not torch's (tests/test_language.py checks seeds)")
rand = _new("rand", _rand, "uniform samples in [0, 1): rand(2, 3, seed=0)", "shape", torch=_RANDOM)
randn = _new("randn", _randn, "standard normal samples: randn(3, 3, seed=0)", "shape", torch=_RANDOM)
