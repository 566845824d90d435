"""How a call's arguments meet an op's parameters: the signature read from its forward
when the op is defined, and the binding of each call's arguments to it.

An op's forward takes its tensor inputs first (`n_in` of them, or all positional
arguments for an op with any number of inputs), then its parameters. A call may give
the parameters by keyword, or positionally after the inputs; PyTorch's spellings
(`dim=`, `keepdim=`) are accepted for NumPy's.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ArgumentError

if TYPE_CHECKING:
    from .registry import OpDef

_NO_DEFAULT = object()
_VAR_POSITIONAL, _KEYWORD_ONLY, _OTHER = "var_positional", "keyword_only", "other"
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08  # the code flags of *args and **kwargs (inspect.CO_VARARGS, ...)


def _parameters(forward: Callable[..., Any]) -> list[tuple[str, str, Any]]:
    """(name, kind, default or _NO_DEFAULT) for each parameter of `forward`, in order.

    Read from a plain function's code object, as inspect.signature reads it: `inspect` is
    imported only for anything else (a wrapped function, a callable object), because
    asking it about every op took several milliseconds of every start-up.
    """
    code = getattr(forward, "__code__", None)
    if type(forward).__name__ != "function" or code is None or hasattr(forward, "__wrapped__") or hasattr(forward, "__signature__"):
        import inspect

        kinds: dict[Any, str] = {inspect.Parameter.VAR_POSITIONAL: _VAR_POSITIONAL, inspect.Parameter.KEYWORD_ONLY: _KEYWORD_ONLY}
        return [
            (p.name, kinds.get(p.kind, _OTHER), _NO_DEFAULT if p.default is p.empty else p.default)
            for p in inspect.signature(forward).parameters.values()
        ]
    n_positional, n_keyword = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    defaults = forward.__defaults__ or ()
    keyword_defaults = forward.__kwdefaults__ or {}
    first_default = n_positional - len(defaults)
    params = [(names[i], _OTHER, defaults[i - first_default] if i >= first_default else _NO_DEFAULT) for i in range(n_positional)]
    if code.co_flags & _CO_VARARGS:
        params.append((names[n_positional + n_keyword], _VAR_POSITIONAL, _NO_DEFAULT))
    for name in names[n_positional : n_positional + n_keyword]:
        params.append((name, _KEYWORD_ONLY, keyword_defaults.get(name, _NO_DEFAULT)))
    if code.co_flags & _CO_VARKEYWORDS:
        params.append((names[n_positional + n_keyword + bool(code.co_flags & _CO_VARARGS)], _OTHER, _NO_DEFAULT))
    return params


def describe_signature(
    name: str, forward: Callable[..., Any], n_in: int | None, variadic: str | None, leading: Sequence[str] = ()
) -> tuple[tuple[str, ...], str]:
    """The names of an op's parameters (after its tensor inputs) and its signature text."""
    names: list[str] = []
    shown: list[str] = list(leading)
    for i, (pname, kind, default) in enumerate(_parameters(forward)):
        if pname in leading:
            names.append(pname)
        elif kind is _VAR_POSITIONAL or pname == variadic:
            shown.append(f"*{pname}")
        else:
            shown.append(pname if default is _NO_DEFAULT else f"{pname}={default!r}")
        if kind is _KEYWORD_ONLY or (n_in is not None and i >= n_in and kind is not _VAR_POSITIONAL):
            names.append(pname)
    return tuple(names), f"{name}({', '.join(shown)})"


# PyTorch's names for NumPy's parameters, accepted as they are: sum(x, dim=1, keepdim=True).
SPELLINGS = {"dim": "axis", "keepdim": "keepdims"}


def bind_params(op: OpDef, extra: tuple[Any, ...], params: dict[str, Any]) -> dict[str, Any]:
    """Turn positional arguments after the tensor inputs into named parameters, and
    PyTorch's spellings into the op's own names."""
    params = dict(params)
    for spelling, name in SPELLINGS.items():
        if spelling in params and name in op.param_names and spelling not in op.param_names:
            if name in params:
                raise ArgumentError(f"{op.signature}: {name} given twice (as {spelling}= and {name}=)")
            params[name] = params.pop(spelling)
    if op.variadic_param is not None:
        if not extra:
            return params
        if op.variadic_param in params:
            raise ArgumentError(f"{op.signature}: {op.variadic_param} given twice")
        # `reshape(x, 2, 3)` and `reshape(x, (2, 3))` both mean shape (2, 3).
        if len(extra) == 1 and isinstance(extra[0], (tuple, list)):
            extra = tuple(extra[0])
        params[op.variadic_param] = extra
        return params
    if len(extra) > len(op.param_names):
        n_in = op.n_in or 0
        most, got = n_in + len(op.param_names), n_in + len(extra)
        bound = "at most " if op.param_names else ""
        raise ArgumentError(f"{op.signature} takes {bound}{most} argument{'s' * (most != 1)}, got {got}")
    for pname, value in zip(op.param_names, extra):
        if pname in params:
            raise ArgumentError(f"{op.signature}: {pname} given twice")
        params[pname] = value
    return params


def split_args(op: OpDef, args: tuple[Any, ...], params: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """An op's tensor inputs among `args`, and its parameters: those given by keyword
    (PyTorch's spellings renamed), the leading ones of ops with any number of inputs,
    and the positional arguments after the inputs."""
    n_in = op.n_in
    if n_in is None:
        tensor_args, extra = tuple(args), ()
        if op.leading:
            unnamed = [p for p in op.leading if p not in params]
            params = {**params, **dict(zip(unnamed, args))}
            tensor_args = tensor_args[len(unnamed) :]
    else:
        if len(args) < n_in:
            raise ArgumentError(f"{op.signature} needs {n_in} input{'s' * (n_in != 1)}, got {len(args)}")
        tensor_args, extra = tuple(args[:n_in]), tuple(args[n_in:])
    if extra or (params and not SPELLINGS.keys().isdisjoint(params)):
        params = bind_params(op, extra, params)
    return tensor_args, params
