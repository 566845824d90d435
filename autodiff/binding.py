"""How a call's arguments meet an op's parameters: the signature read from its forward
when the op is defined, and the binding of each call's arguments to it.

An op's forward takes its tensor inputs first (`n_in` of them, or all positional
arguments for an op with any number of inputs), then its parameters. A call may give
the parameters by keyword, or positionally after the inputs; PyTorch's spellings
(`dim=`, `keepdim=`) are accepted for NumPy's.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ArgumentError

if TYPE_CHECKING:
    from .registry import OpDef

_NO_DEFAULT = inspect.Parameter.empty
_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL


def _parameters(forward: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """(name, kind, default or _NO_DEFAULT) for each parameter of `forward`, in order."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(forward).parameters.values()]


def describe_signature(
    name: str, forward: Callable[..., Any], n_in: int | None, variadic: str | None, leading: Sequence[str] = ()
) -> tuple[tuple[str, ...], str]:
    """The names of an op's parameters (after its tensor inputs) and its signature text."""
    names: list[str] = []
    shown: list[str] = list(leading)
    for i, p in enumerate(inspect.signature(forward).parameters.values()):
        if p.name in leading:  # (shown already, first)
            names.append(p.name)
            continue
        if p.kind is p.VAR_POSITIONAL or p.name == variadic:
            shown.append(f"*{p.name}")
        else:
            shown.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
        if p.kind is p.KEYWORD_ONLY or (n_in is not None and i >= n_in and p.kind is not p.VAR_POSITIONAL):
            names.append(p.name)
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
    if n_in == len(args) and not params:  # the common call: the inputs and nothing else
        return args, params
    if n_in is None:
        tensor_args, extra = tuple(args), ()
        if op.listed and len(args) == 1 and isinstance(args[0], (list, tuple)):  # stack([a, b]), as in NumPy
            tensor_args = tuple(args[0])
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
