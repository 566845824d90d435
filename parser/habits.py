"""What users of PyTorch, NumPy, JAX and Python type, and what the language answers.

Three kinds of answer, each decided by what the other library really computes:

- **Accepted** (`ACCEPTED`): a spelling that means one of our ops exactly once its
  arguments are translated (`x.t()` is transpose for at most two axes, where PyTorch
  refuses more; `x.repeat(2, 1)` is tile; `x.size()` is the shape). A spelling that is
  the same op with the same arguments is an alias in the op's defop instead (`view`), and
  `gradcalc ops` lists it there.
- **Hinted** (`HINTS`): a name that is none of ours, or means something else here, is
  refused with ours named (`diff` -> grad, `size(x)` -> numel(x), `cat` -> concatenate).
- **Prefixed** (`Prefixed`): `np.sin(x)`, `torch.nn.functional.relu(x)`, `math.pi`: the
  compiler marks a module word that starts a dotted name, and when that word is no name
  of the session the error says to drop the prefix (or names ours).

And one warning: `transpose(x, 0, 1)` of a matrix, NumPy's identity permutation, where a
PyTorch user means a swap (`watched`).

These run only where a name is not found (and for calls of transpose), so a program that
uses none of them pays nothing.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import numpy as np

from .builtins import BUILTINS
from .errors import LanguageError


class Session(Protocol):
    """What a prefix's error asks of the session it is in (machine.Session answers)."""

    def names(self) -> list[str]: ...

Call = Callable[[Any, list[Any], dict[str, Any]], Any]  # (backend, arguments, keywords) -> value


class Spelling(NamedTuple):
    """Another library's name for what one of our ops computes: how it is written (`usage`,
    the forms it is accepted in), what it is here (`meaning`) and the translation (`run`)."""

    usage: str
    meaning: str
    run: Call
    method: bool = True
    function: bool = True


def _tensor(value: Any, usage: str) -> Any:
    """`value` when it is a tensor (of any engine: the tensor engine's, JAX's or PyTorch's)."""
    from .functions import FunctionValue, describe_value

    if isinstance(value, (FunctionValue, tuple, str)) or not hasattr(value, "ndim"):
        raise LanguageError("argument", f"{usage} takes a tensor, got {describe_value(value)}")
    return value


def _no_keywords(kwargs: dict[str, Any], usage: str) -> None:
    if kwargs:
        raise LanguageError("argument", f"{usage} has no parameter {next(iter(kwargs))!r}")


def _whole(backend: Any, value: Any, what: str) -> int:
    from .backends import to_param

    number = to_param(value, what)
    if not isinstance(number, int) or isinstance(number, bool):
        raise LanguageError("argument", f"{what} must be a whole number, got {number!r}")
    return number


def _counts(backend: Any, values: list[Any], what: str) -> tuple[int, ...]:
    """Whole numbers given one by one or as one list: (1, 0) or ((1, 0),), as PyTorch takes them."""
    from .backends import to_param

    if len(values) == 1 and getattr(values[0], "ndim", 0) == 1:
        items = to_param(values[0], what)
        listed = list(items) if isinstance(items, tuple) else [items]
    else:
        listed = [to_param(v, what) for v in values]
    for v in listed:
        if not isinstance(v, int) or isinstance(v, bool):
            raise LanguageError("argument", f"{what} must be whole numbers, got {v!r}")
    return tuple(listed)


def _t(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    usage = "x.t()"
    _no_keywords(kwargs, usage)
    x = _tensor(args[0], usage)
    if len(args) > 1:
        raise LanguageError("argument", f"{usage} takes no arguments; to permute axes, x.permute(1, 0) or transpose(x, 1, 0)")
    if x.ndim > 2:
        raise LanguageError("shape", f"{usage} transposes a tensor of at most 2 axes, as PyTorch's does, and this one has shape {tuple(x.shape)}: "
                                     "x.mT swaps the last two axes, x.T reverses them all, x.permute(...) orders them")
    return backend.call("transpose", [x], {})


def _size(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    usage = "x.size(dim=None)"
    x = _tensor(args[0], usage)
    given = [*args[1:], *([kwargs.pop("dim")] if "dim" in kwargs else [])]
    _no_keywords(kwargs, usage)
    if len(given) > 1:
        raise LanguageError("argument", f"{usage} takes one axis at most, got {len(given)}")
    if not given:
        return backend.attribute(x, "shape")
    axis = _whole(backend, given[0], "x.size: dim")
    if not -x.ndim <= axis < x.ndim:
        raise LanguageError("argument", f"x.size({axis}): a tensor of shape {tuple(x.shape)} has no axis {axis}")
    return backend.index(backend.attribute(x, "shape"), [backend.constant(float(axis))])


def _numel(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    _no_keywords(kwargs, "numel(x)")
    if len(args) != 1:
        raise LanguageError("argument", f"numel(x) takes the tensor alone, got {len(args)} arguments")
    return backend.attribute(_tensor(args[0], "numel(x)"), "size")


def _clamp(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """torch.clamp(x, min=None, max=None): clip's bounds, each a tensor that gets its
    gradient as clamp's does; a bound not given is -inf or inf, which never binds."""
    usage = "clamp(x, min=None, max=None)"
    x = args[0]
    bounds: list[Any] = [*args[1:], None, None][:2]
    if len(args) > 3:
        raise LanguageError("argument", f"{usage} takes at most 3 arguments, got {len(args)}")
    for k, name in enumerate(("min", "max")):
        if name in kwargs:
            if k < len(args) - 1:
                raise LanguageError("argument", f"{usage}: {name} is given twice, by position and by name")
            bounds[k] = kwargs.pop(name)
    _no_keywords(kwargs, usage)
    if bounds[0] is None and bounds[1] is None:
        raise LanguageError("argument", f"{usage} needs min or max (PyTorch's clamp refuses neither); clip(x, low, high) is the same op")
    low = backend.constant(-math.inf) if bounds[0] is None else bounds[0]
    high = backend.constant(math.inf) if bounds[1] is None else bounds[1]
    return backend.call("clip", [x, low, high], {})


def _permute(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    usage = "x.permute(*dims)"
    x = _tensor(args[0], usage)
    dims = [*args[1:], *([kwargs.pop("dims")] if "dims" in kwargs else [])]
    _no_keywords(kwargs, usage)
    order = _counts(backend, dims, "permute: dims")
    if len(order) != x.ndim:
        raise LanguageError("argument", f"{usage} orders all {x.ndim} axes of a tensor of shape {tuple(x.shape)}, as PyTorch's does; got {len(order)}")
    return backend.call("transpose", [x, *(backend.constant(float(d)) for d in order)], {})


def _repeat(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """PyTorch's x.repeat(*sizes): the whole of x repeated along each axis, our tile; a size
    for each of x's axes at least (more add leading axes), as PyTorch requires."""
    usage = "x.repeat(*sizes)"
    x = _tensor(args[0], usage)
    _no_keywords(kwargs, usage)
    sizes = _counts(backend, args[1:], "repeat: sizes")
    if len(sizes) < x.ndim:
        raise LanguageError("argument", f"{usage} takes a count for each of the {x.ndim} axes of a tensor of shape {tuple(x.shape)} (PyTorch's "
                                        f"repeat, our tile), got {len(sizes)}; NumPy's repeat, each element repeated, is repeat(x, n, axis)")
    return backend.call("tile", [x, *(backend.constant(float(s)) for s in sizes)], {})


def _filled(value: float | None) -> Call:
    """ones_like, zeros_like (value given) and full_like (value the second argument): a
    constant of x's shape, as NumPy's, JAX's and PyTorch's are."""
    name = "full_like" if value is None else ("ones_like" if value == 1 else "zeros_like")
    usage = f"{name}(x{', value' if value is None else ''})"

    def run(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if value is None and "fill_value" in kwargs:
            args = [*args, kwargs.pop("fill_value")]
        _dtype(kwargs, usage)
        _no_keywords(kwargs, usage)
        wanted = 1 if value is not None else 2
        if len(args) != wanted:
            raise LanguageError("argument", f"{usage} takes {wanted} argument{'s' * (wanted != 1)}, got {len(args)}")
        x = _tensor(args[0], usage)
        fill = backend.constant(value) if value is not None else args[1]
        return backend.call("full", [backend.attribute(x, "shape"), fill], {})

    return run


def _dtype(kwargs: dict[str, Any], usage: str) -> None:
    if "dtype" in kwargs:
        raise LanguageError("argument", f"{usage}: gradcalc computes in float64 only, so it takes no dtype; drop dtype=")


def _float(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    _no_keywords(kwargs, "float(x)")
    if len(args) != 1:
        raise LanguageError("argument", f"float(x) takes one argument, got {len(args)}")
    x = _tensor(args[0], "float(x)")
    if int(np.prod(x.shape)) != 1:
        raise LanguageError("shape", f"float(x) takes a tensor of one element, as Python's float of an array does; got shape {tuple(x.shape)}")
    return backend.call("item", [x], {})


def _data(name: str) -> Call:
    """tensor(data), array(data), asarray(data): the data as a tensor, which a literal
    already is. Of a value with a gradient the libraries differ (torch.tensor copies it
    as a constant, jnp.array keeps it differentiable), so that is refused with both ways."""
    usage = f"{name}(data)"

    def run(backend: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        _dtype(kwargs, usage)
        wants = kwargs.pop("requires_grad", None)
        _no_keywords(kwargs, usage)
        if len(args) != 1:
            raise LanguageError("argument", f"{usage} takes the data alone, got {len(args)} arguments")
        data = _tensor(args[0], usage)
        if data.requires_grad or getattr(data, "op", None) is not None or getattr(data, "_prev", ()):
            raise LanguageError("argument", f"{usage} of a value computed with a gradient: write the value itself to keep its gradient "
                                            f"(as jnp.array does), or detach(x) for a constant copy (as torch.tensor does)")
        if wants is not None and not backend.truth(wants):
            return backend.call("detach", [data], {})  # requires_grad=false: a constant, even when named
        return data

    return run


ACCEPTED: dict[str, Spelling] = {
    "t": Spelling("x.t()", "transpose(x) of a tensor of at most 2 axes (PyTorch refuses more)", _t),
    "size": Spelling("x.size(), x.size(dim)", "x.shape, or x.shape[dim] (x.size without a call is NumPy's count of elements)", _size,
                     function=False),
    "numel": Spelling("x.numel(), numel(x)", "the number of elements, x.size", _numel),
    "clamp": Spelling("x.clamp(min, max), clamp(x, min=..., max=...)",
                      "clip(x, min, max), each bound a tensor that gets its gradient; a bound left out never binds", _clamp),
    "permute": Spelling("x.permute(*dims)", "transpose(x, *dims), every axis ordered (PyTorch requires all of them)", _permute),
    "repeat": Spelling("x.repeat(*sizes)", "tile(x, *sizes), a size for each axis at least; the function repeat(x, n) is NumPy's", _repeat,
                       function=False),
    "ones_like": Spelling("ones_like(x)", "ones of x's shape, a constant", _filled(1.0), method=False),
    "zeros_like": Spelling("zeros_like(x)", "zeros of x's shape, a constant", _filled(0.0), method=False),
    "full_like": Spelling("full_like(x, value)", "full(x.shape, value), a constant", _filled(None), method=False),
    "float": Spelling("float(x)", "item(x): the one element of x as a constant, as Python's float of an array", _float, method=False),
    "tensor": Spelling("tensor(data)", "the data as a tensor, which a literal already is ([1, 2]); requires_grad=false keeps it a constant",
                       _data("tensor"), method=False),
    "array": Spelling("array(data)", "the data as a tensor, which a literal already is ([1, 2])", _data("array"), method=False),
    "asarray": Spelling("asarray(data)", "the data as a tensor, which a literal already is ([1, 2])", _data("asarray"), method=False),
}

_DERIVATIVE = "did you mean grad? grad(y, x) is dy/dx, grad(f) the derivative of a function f"
# Names that are none of ours, or ours with another meaning: what to write instead.
HINTS: dict[str, str] = {
    "diff": f"{_DERIVATIVE} (NumPy's diff, the differences of neighbours, is x[1:] - x[:-1])",
    "derivative": _DERIVATIVE, "deriv": _DERIVATIVE, "differentiate": _DERIVATIVE, "D": _DERIVATIVE,
    "gradient": f"{_DERIVATIVE} (NumPy's gradient, differences of samples, is no derivative)",
    "backward": "gradcalc runs the backward pass itself: a result reports the gradient of each variable; in a program, grad(y, x)",
    "size": "size(x) is NumPy's count of elements: numel(x) or x.size; PyTorch's x.size() is x.shape",
    "cat": "concatenate([a, b], axis=0) (or concat) joins tensors, as torch.cat does",
    "mm": "a @ b (or matmul(a, b)) is the matrix product", "bmm": "a @ b (or matmul(a, b)) multiplies stacks of matrices",
    "clone": "a value is never changed in place here: write x itself (or detach(x) for a constant copy)",
    "numpy": "a value is already a float64 NumPy array inside: write x itself",
    "tolist": "a value prints as a list already: write x itself",
    "ndimension": "x.ndim is the number of axes", "dim": "x.ndim is the number of axes",
}


def accepted(name: str, method: bool) -> Spelling | None:
    spelling = ACCEPTED.get(name)
    if spelling is None or not (spelling.method if method else spelling.function):
        return None
    return spelling


def hint(name: str) -> str:
    """'; NAME: what to write' for a name with a hint, else ''."""
    return f": {HINTS[name]}" if name in HINTS else ""


def call_spelled(backend: Any, name: str, args: list[Any], kwargs: dict[str, Any], method: bool) -> Any:
    """`name(...)` (or `x.name(...)`, x first in `args`) as another library's spelling, or
    the error for an unknown name, with what to write instead where there is a hint."""
    spelling = accepted(name, method)
    if spelling is not None:
        return spelling.run(backend, args, dict(kwargs))
    if method:
        raise LanguageError("name", f"tensors have no method {name!r}{hint(name)}")
    raise LanguageError("name", f"unknown function {name!r}{hint(name)}")


def describe(name: str) -> list[str] | None:
    """help(NAME) for a spelling of another library's, or None."""
    spelling = ACCEPTED.get(name)
    if spelling is not None:
        return [f"{spelling.usage}: {spelling.meaning}", "category: another library's spelling, translated to the ops named"]
    if name in HINTS:
        return [f"{name}: not a function of gradcalc; {HINTS[name]}"]
    return None


# ---- prefixes ---------------------------------------------------------------------------

# The words that begin a module's dotted name, and the library each says.
ROOTS = {
    "np": "NumPy", "numpy": "NumPy", "jnp": "JAX", "jax": "JAX", "torch": "PyTorch", "F": "PyTorch", "nn": "PyTorch",
    "linalg": "the linalg module", "math": "Python's math", "scipy": "SciPy", "tf": "TensorFlow",
}
# Words that may follow one in the middle: np.linalg.norm, torch.nn.functional.relu, jax.numpy.sin.
MODULE_WORDS = frozenset({"numpy", "nn", "functional", "linalg", "special", "random", "func", "autograd", "lax", "math"})
# What a PyTorch name with the prefix dropped would mean here, where that is not PyTorch's.
_TORCH_MEANINGS = {
    "transpose": "torch.transpose(x, 0, 1) swaps two axes: here that is swapaxes(x, 0, 1) (transpose(x, axes) is NumPy's permutation)",
    "var": "torch.var divides by N - 1: here that is var(x, ddof=1)",
    "std": "torch.std divides by N - 1: here that is std(x, ddof=1)",
}


class Prefixed(str):
    """The first word of a dotted name that starts with a module's prefix (`np` of
    `np.linalg.norm(x)`): a name like any other (a variable may be called F), which,
    when the session does not know it, is an error about the prefix. `written` is the
    dotted name, `rest` its last word, `called` whether it is called."""

    written: str
    rest: str
    called: bool

    def error(self, session: Session) -> LanguageError:
        prefix = self.written[: -len(self.rest)]
        library = ROOTS[str(self)]
        if library == "PyTorch" and self.rest in _TORCH_MEANINGS:
            return LanguageError("name", f"{self.written}: drop the prefix {prefix!r}, and mind the meaning: {_TORCH_MEANINGS[self.rest]}")
        if _ours(self.rest, session):
            shown = f"{self.rest}(...)" if self.called else self.rest
            return LanguageError("name", f"{self.written}: drop the prefix {prefix!r}: gradcalc's functions and constants have no module; "
                                         f"write {shown}")
        from .suggestions import suggest  # (only on errors: not at start-up)

        known = [*session.names(), *ACCEPTED]
        said = hint(self.rest) or suggest(self.rest, known)
        return LanguageError("name", f"{self.written}: {prefix!r} is {library}'s prefix, and gradcalc has no {self.rest}{said}")


def prefixed(name: str, chain: list[str], called: bool) -> Prefixed | None:
    """`name` (the first word of the dotted name `chain`) as a Prefixed, when the chain is a
    module's prefix and a last word (`np.sin`, `torch.nn.functional.relu`), else None."""
    if name not in ROOTS or len(chain) < 2 or not all(word in MODULE_WORDS for word in chain[1:-1]):
        return None
    made = str.__new__(Prefixed, name)
    made.written, made.rest, made.called = ".".join(chain), chain[-1], called
    return made


def _ours(name: str, session: Session) -> bool:
    """Whether `name` is a function or constant of ours on any engine (the scalar
    engine's own message then says it lacks the function): an op, a built-in, or a name
    the session knows (its constants among them)."""
    from gradcalc.autodiff import lookup

    op = lookup(name)
    return (op is not None and op.public) or name in BUILTINS or name in session.names() or accepted(name, method=False) is not None


# ---- the transpose warning ------------------------------------------------------------------

WATCHED = frozenset({"transpose"})  # calls looked at before they run (Session.evaluate)


def watched(name: str, args: list[Any], kwargs: dict[str, Any]) -> str | None:
    """A warning for `transpose(x, 0, 1)` (or `x.transpose(0, 1)`) of a matrix: NumPy's
    transpose permutes by the axes listed, and these list the axes in order, so x comes
    back as it was, where PyTorch's transpose(x, 0, 1) swaps them. Two axes given one by
    one is PyTorch's way of writing it; NumPy's identity written on purpose is rare."""
    if name != "transpose" or kwargs or len(args) != 3 or getattr(args[0], "ndim", None) != 2:
        return None
    given = [np.asarray(getattr(a, "data", a)) for a in args[1:]]
    if any(g.shape != () or g.dtype.kind not in "biuf" for g in given) or [float(g) for g in given] not in ([0, 1], [-2, -1], [0, -1], [-2, 1]):
        return None
    return ("transpose(x, 0, 1) of a matrix returns it unchanged: NumPy's transpose lists the axes in their new order, and 0, 1 is "
            "the order they have; for PyTorch's transpose(x, 0, 1), the swap, write swapaxes(x, 0, 1) or x.T")
