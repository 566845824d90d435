"""Functions as values: a `def`, a built-in function, a `lambda`, and what the
transformations (grad(f), vmap(f), ...) make of them.

A function value is called by the machine (machine.py): a `def` or a lambda runs on its
frames, as a call by name does; a built-in goes to the engine; a transformation's result
calls its function back through `Session.call_function`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .compiler import UserFunction


class FunctionValue:
    """A function as a value: bound to a name, passed, returned, called."""

    __slots__ = ()

    def signature(self) -> str:
        """How messages and printing name it: f(x), <lambda x>, sin, <grad of f>."""
        raise NotImplementedError

    def arity(self) -> int | None:
        """How many arguments it takes, if that is known."""
        return None

    def apply(self, session: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Its value at `args` (a transformation's; the machine calls the others itself)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        shown = self.signature()
        return shown if shown.startswith("<") else f"<function {shown}>"


class Defined(FunctionValue):
    """A `def` or a lambda; a lambda keeps the parameters of the functions it was made
    in (`closure`), so `def compose(f, g) = lambda x: f(g(x))` returns a working function."""

    __slots__ = ("function", "closure")

    def __init__(self, function: UserFunction, closure: dict[str, Any] | None = None) -> None:
        self.function, self.closure = function, closure

    def signature(self) -> str:
        return self.function.signature

    def arity(self) -> int | None:
        return len(self.function.params)


class Builtin(FunctionValue):
    """A function of the registry (sin, sum, ...), or an autodiff function, by name."""

    __slots__ = ("name", "n_in")

    def __init__(self, name: str, n_in: int | None = None) -> None:
        self.name, self.n_in = name, n_in

    def signature(self) -> str:
        return self.name

    def arity(self) -> int | None:
        return self.n_in

    def __repr__(self) -> str:
        return f"<built-in function {self.name}>"


def describe_value(value: Any) -> str:
    """A value in a message: a function by its signature, anything else by its kind."""
    if isinstance(value, FunctionValue):
        return f"the function {value.signature()}"
    if isinstance(value, tuple):
        return f"{len(value)} results"
    if isinstance(value, str):
        return f"the string {value!r}"
    shape = getattr(value, "shape", None)
    if shape:
        return f"a tensor of shape {tuple(shape)}"
    data = getattr(value, "data", value)
    if getattr(data, "dtype", None) == np.bool_:
        return f"the boolean {'true' if data else 'false'}"
    try:
        return f"the number {float(data):g}"
    except (TypeError, ValueError):
        return "a value"
