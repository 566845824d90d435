"""Ops without a gradient (Lucid's has_gradient=False): comparisons, rounding, arg-reductions,
and detach.

Their results never require grad, so nothing flows back through them; `where(x > 0, ...)`
uses them as constant masks.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..batching import BROADCAST, Unbatched, along_axis, call, own
from ..registry import Edge, Torch, defop
from . import refusals, torch_calls

CMP = "no gradient"
# Why each has no gradient (the registry's recipe asks an op without VJPs to say).
STEP = "a step function: its derivative is 0 wherever it has one"
INDEX = "an integer: an index or a count, not a function of x's values to differentiate"


def _compare(name: str, fn: Any, symbol: str, dunder: str, torch: Torch) -> Any:
    # `2 < x` needs no reflected binding: Python tries x.__gt__(2) by itself.
    return defop(
        name, fn, None, n_in=2, doc=f"true where a {symbol} b, else false (booleans; arithmetic takes them as 1 and 0)",
        category=CMP, operators=(dunder,), batch=BROADCAST, no_gradient=STEP, torch=torch,
    )


lt = _compare("lt", lambda a, b: a < b, "<", "__lt__", torch=Torch("torch.lt", make=torch_calls.unary_pair))
le = _compare("le", lambda a, b: a <= b, "<=", "__le__", torch=Torch("torch.le", make=torch_calls.unary_pair))
gt = _compare("gt", lambda a, b: a > b, ">", "__gt__", torch=Torch("torch.gt", make=torch_calls.unary_pair))
ge = _compare("ge", lambda a, b: a >= b, ">=", "__ge__", torch=Torch("torch.ge", make=torch_calls.unary_pair))
eq = _compare("eq", lambda a, b: a == b, "==", "__eq__", torch=Torch("torch.eq", make=torch_calls.unary_pair))
ne = _compare("ne", lambda a, b: a != b, "!=", "__ne__", torch=Torch("torch.ne", make=torch_calls.unary_pair))

sign = defop(
    "sign", lambda x: np.sign(x), None, doc="-1, 0 or 1 by the sign of x", category=CMP, method=True,
    edges=(Edge("at 0", [0.0], 0.0), Edge("at nan", [math.nan], math.nan, torch="0")),
    batch=BROADCAST, no_gradient=STEP,
    torch=Torch("torch.sign", make=torch_calls.rounding_input, agrees_at=(([[-2.0, 0.0, 3.0]], {}),)),
)
floor = defop(
    "floor", lambda x: np.floor(x), None, doc="largest integer <= x", category=CMP, method=True, batch=BROADCAST, no_gradient=STEP,
    torch=Torch("torch.floor", make=torch_calls.rounding_input),
)
ceil = defop(
    "ceil", lambda x: np.ceil(x), None, doc="smallest integer >= x", category=CMP, method=True, batch=BROADCAST, no_gradient=STEP,
    torch=Torch("torch.ceil", make=torch_calls.rounding_input),
)
round_ = defop(
    "round", lambda x, decimals=0: np.round(x, int(decimals)), None,
    doc="x rounded to decimals places (halves to even)", category=CMP, method=True,
    edges=(Edge("halves", [[0.5, 1.5, 2.5, -0.5]], [0.0, 2.0, 2.0, -0.0], note="to even, as NumPy"),),
    batch=BROADCAST, no_gradient=STEP,
    torch=Torch("torch.round", make=torch_calls.rounding_input, variants=({"decimals": 1},)),
)


argmax = defop(
    "argmax", lambda x, axis=None: np.argmax(x, axis=axis), None, doc="index of the largest element (flat, or along axis)", category=CMP, method=True,
    edges=(Edge("with ties", [[1.0, 3.0, 3.0]], 1.0, note="the first of the tied"),),
    batch=along_axis(none="flatten"), no_gradient=INDEX,
    torch=Torch(torch_calls.arg("argmax"), make=torch_calls.rounding_input, variants=({"axis": 0}, {"axis": 1})),
)
argmin = defop(
    "argmin", lambda x, axis=None: np.argmin(x, axis=axis), None, doc="index of the smallest element (flat, or along axis)", category=CMP, method=True,
    edges=(Edge("with ties", [[2.0, 1.0, 1.0]], 1.0, note="the first of the tied"),),
    batch=along_axis(none="flatten"), no_gradient=INDEX,
    torch=Torch(torch_calls.arg("argmin"), make=torch_calls.rounding_input, variants=({"axis": 0}, {"axis": -1})),
)


def _detach(x: Any) -> Any:
    return np.array(x)  # a copy: the constant shares nothing with the graph it came from


detach = defop(
    "detach", _detach, None, aliases=("stop_gradient",), method=True, category=CMP,
    doc="x as a constant: no gradient flows back through it, and a name given it is not a variable",
    batch=BROADCAST, no_gradient="what it is for: to cut the graph",
    torch=Torch(lambda t, x: x.detach(), make=torch_calls.rounding_input),
)


def _item_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    if int(np.prod(x.shape[nb:], dtype=np.int64)) != 1:
        call(m, op, x[(0,) * nb])
    return m.detach(m.reshape(x, shape=tuple(x.shape[:nb])))


def _len_batch(m: Any, op: Any, nb: int, args: list[Any], flags: list[bool], params: dict[str, Any]) -> Any:
    x = args[0]
    return Unbatched(call(m, op, x[(0,) * nb]))


def _item(x: Any) -> Any:
    refusals.one_element(x.shape)
    return np.array(x.reshape(()))


def _len(x: Any) -> Any:
    if x.ndim == 0:
        raise TypeError("len() of a 0-d tensor: it has no first axis")
    return np.array(len(x))  # an integer: apply keeps it int64 (an op without gradient)


# Not bound as Tensor.item: in Python that returns a float (tensor.py); the language
# offers x.item() as a method all the same (parser/backends.py, LANGUAGE_METHODS).
item = defop(
    "item", _item, None, category=CMP,
    doc="the one element of x as a constant: item(x) or x.item(), as in PyTorch",
    batch=own(_item_batch, "each row's one element"), no_gradient="a constant: the element as a number, cut from the graph",
    torch=Torch(lambda t, x: x.detach().reshape(()), make=lambda rng: ([rng.uniform(-2, 2, (1, 1))], {})),
)
len_ = defop(
    "len", _len, None, category=CMP, doc="the length of x's first axis, as Python's len(x)",
    batch=own(_len_batch, "the length of an item's first axis, the same in every row"), no_gradient=INDEX,
    torch=Torch(lambda t, x: t.tensor(float(len(x)), dtype=t.float64), make=torch_calls.rounding_input),
)
