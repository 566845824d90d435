"""The op table: each op of the registry and its JAX and PyTorch counterparts.

The language runs on those libraries' own arrays and autodiff; gradcalc's engine is not
ported. Each entry names the counterpart:

- `"jnp.exp"`, `"jax.nn.silu"`: the library's own function, called with the op's inputs
  and its parameters under gradcalc's names (most are NumPy's, which jax.numpy shares);
- `OWN`, in the PyTorch column: PyTorch's own function, the one the op's defop names as
  its oracle (`torch=Torch("torch.exp")`), read from there: the op's PyTorch name is
  stated once, and the differential tests hold the tensor engine to that same function;
- `"op_sum"`: a one-line adapter of that name in jax_ops.py or torch_ops.py, where the
  library spells the op otherwise (`dim=` for `axis=`, a list of arrays for *xs) or where
  the engine keeps gradcalc's conventions (its messages, NumPy's constructors and seeds):
  there the oracle stays PyTorch's own function, apart from the engine's adapter;
- `Gap(reason)`: no counterpart here; the op is refused by name on that engine ("sech has
  no JAX counterpart here: ...; use --engine tensor"), never computed another way.

This module imports neither library: the table is read by tests, `gradcalc ops` and the
docs without them. tests/test_engine_table.py walks the registry: every op has an entry,
and each entry gives the tensor engine's values and gradients on the op's Check inputs.
"""
from __future__ import annotations

from gradcalc.autodiff.registry import Gap, Torch, lookup

Spec = str | Gap

# The PyTorch column's "as the op's record names it" (see above).
OWN = "<the op's own PyTorch function>"

# gradcalc's own derivative rules use these; the engines differentiate with their own.
_INTERNAL = Gap("an internal op of gradcalc's own derivative rules, which the library replaces with its autodiff")


class Counterparts:
    __slots__ = ("jax", "torch")

    def __init__(self, jax: Spec, torch: Spec) -> None:
        self.jax, self.torch = jax, torch

    def of(self, library: str) -> Spec:
        return self.jax if library == "jax" else self.torch


def _same(name: str) -> Counterparts:
    """jax.numpy's function of that name, and PyTorch's own as the op's record names it."""
    return Counterparts(f"jnp.{name}", OWN)


def _adapted(name: str) -> Counterparts:
    """An adapter on both sides."""
    return Counterparts(f"op_{name}", f"op_{name}")


TABLE: dict[str, Counterparts] = {
    # arithmetic
    "add": _same("add"), "sub": Counterparts("jnp.subtract", OWN), "mul": Counterparts("jnp.multiply", OWN),
    "div": Counterparts("jnp.divide", OWN), "neg": Counterparts("jnp.negative", OWN),
    "pow": Counterparts("jnp.power", OWN), "matmul": _same("matmul"),
    "floor_divide": _same("floor_divide"), "remainder": _same("remainder"),
    # elementwise
    **{name: _same(name) for name in (
        "exp", "log", "log1p", "sqrt", "sin", "cos", "tan", "tanh", "abs", "maximum", "minimum", "log2", "log10", "exp2", "expm1",
        "square", "reciprocal", "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan", "atan2", "hypot", "sign",
        "floor", "ceil", "round",
    )},
    "erf": Counterparts("jax.scipy.special.erf", OWN), "erfc": Counterparts("jax.scipy.special.erfc", OWN),
    "cbrt": Counterparts("jnp.cbrt", "op_cbrt"),
    "sigmoid": Counterparts("jax.nn.sigmoid", OWN), "relu": Counterparts("jax.nn.relu", OWN),
    "softplus": _adapted("softplus"), "gelu": _adapted("gelu"), "silu": Counterparts("jax.nn.silu", OWN),
    "softsign": Counterparts("jax.nn.soft_sign", OWN),
    "logsigmoid": Counterparts("jax.nn.log_sigmoid", OWN),
    "leaky_relu": _adapted("leaky_relu"), "elu": Counterparts("jax.nn.elu", "op_elu"),
    "clip": _adapted("clip"), "where": _adapted("where"),
    # without gradient
    "lt": Counterparts("jnp.less", OWN), "le": Counterparts("jnp.less_equal", OWN),
    "gt": Counterparts("jnp.greater", OWN), "ge": Counterparts("jnp.greater_equal", OWN),
    "eq": Counterparts("jnp.equal", OWN), "ne": Counterparts("jnp.not_equal", OWN),
    "argmax": _adapted("argmax"), "argmin": _adapted("argmin"), "detach": Counterparts("jax.lax.stop_gradient", "op_detach"),
    "item": _adapted("item"), "len": _adapted("len"),
    # reductions and scans
    "sum": Counterparts("jnp.sum", "op_sum"), "mean": Counterparts("jnp.mean", "op_mean"), "prod": Counterparts("jnp.prod", "op_prod"),
    "max": Counterparts("jnp.max", "op_max"), "min": Counterparts("jnp.min", "op_min"),
    "var": _adapted("var"), "std": _adapted("std"), "norm": _adapted("norm"),
    "cumsum": Counterparts("jnp.cumsum", "op_cumsum"), "cumprod": Counterparts("jnp.cumprod", "op_cumprod"),
    "logcumsumexp": _adapted("logcumsumexp"),
    # shape
    "reshape": _adapted("reshape"), "flatten": Counterparts("jnp.ravel", "op_flatten"), "transpose": _adapted("transpose"),
    "swapaxes": Counterparts("jnp.swapaxes", "op_swapaxes"), "broadcast_to": Counterparts("jnp.broadcast_to", "op_broadcast_to"),
    "getitem": _adapted("getitem"), "concatenate": _adapted("concatenate"), "stack": _adapted("stack"), "split": _adapted("split"),
    "squeeze": Counterparts("jnp.squeeze", "op_squeeze"), "unsqueeze": Counterparts("jnp.expand_dims", "op_unsqueeze"),
    "flip": Counterparts("jnp.flip", "op_flip"), "roll": Counterparts("jnp.roll", "op_roll"), "tile": Counterparts("jnp.tile", "op_tile"),
    "repeat": Counterparts("jnp.repeat", "op_repeat"), "sort": _adapted("sort"), "pad": _adapted("pad"),
    # linear algebra
    "einsum": _adapted("einsum"), "dot": _adapted("dot"), "inner": _same("inner"), "outer": _adapted("outer"), "kron": _same("kron"),
    "trace": _adapted("trace"), "diag": _adapted("diag"), "triu": Counterparts("jnp.triu", "op_triu"), "tril": Counterparts("jnp.tril", "op_tril"),
    "det": Counterparts("jnp.linalg.det", OWN), "slogdet": _adapted("slogdet"),
    "inv": Counterparts("jnp.linalg.inv", OWN), "solve": _adapted("solve"),
    # softmax and losses
    "logsumexp": Counterparts("jax.scipy.special.logsumexp", "op_logsumexp"),
    "softmax": Counterparts("jax.nn.softmax", "op_softmax"), "log_softmax": Counterparts("jax.nn.log_softmax", "op_log_softmax"),
    **{name: _adapted(name) for name in (
        "cross_entropy", "mse", "binary_cross_entropy", "binary_cross_entropy_with_logits", "nll_loss", "l1_loss", "huber",
    )},
    # constructors: constants (rand and randn from NumPy's generator, as the tensor engine draws them)
    **{name: _adapted(name) for name in ("zeros", "ones", "full", "eye", "arange", "linspace", "rand", "randn")},
    # gradcalc's own
    "sech": Counterparts(_INTERNAL, _INTERNAL), "one_minus_square": Counterparts(_INTERNAL, _INTERNAL),
    "unindex": Counterparts(_INTERNAL, _INTERNAL),
}

LIBRARIES = {"jax": "JAX", "torch": "PyTorch"}


def counterpart(name: str, library: str) -> Spec:
    """The entry of op `name` for `library` ("jax" or "torch"); a Gap for an op not in the table."""
    entry = TABLE.get(name)
    if entry is None:
        return Gap("not in gradcalc's table of counterparts yet")
    spec = entry.of(library)
    if spec == OWN:
        return own_torch_function(name)
    return spec


def own_torch_function(name: str) -> str:
    """The PyTorch function the op's record names as its oracle ("torch.exp")."""
    op = lookup(name)
    oracle = op.torch if op is not None else None
    if not isinstance(oracle, Torch) or oracle.name is None:
        raise LookupError(f"the op table reads {name}'s PyTorch function from its defop, which names none (torch=Torch(\"torch.<name>\"))")
    return oracle.name


def refusal(name: str, library: str, gap: Gap, switch: str = "--engine tensor") -> str:
    """The message an op without a counterpart is refused with."""
    return f"{name} has no {LIBRARIES[library]} counterpart here ({gap.reason}); use {switch}"
