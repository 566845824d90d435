"""JAX and PyTorch as the language sees them: arrays, the op table's functions, and each
library's own autodiff and transformations, behind one small interface.

Everything the two libraries do differently is here; the backend (backend.py) and the
graph it records (values.py) are the same for both. float64 throughout (JAX's
jax_enable_x64), on the library's default device unless `--device` chose one.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import LanguageError
from .table import LIBRARIES, Gap, counterpart
from .values import HOSTS

EXTRAS = {"jax": "jax", "torch": "torch"}  # the pip extra that installs each
DEVICES = ("cpu", "gpu")


class ValueDependent(LanguageError):
    """A value that JAX or PyTorch is tracing (under jit, vmap or a transformation) was
    asked for as a number: for a condition, an index, a parameter, a loop's bound."""

    def __init__(self, library: str, what: str = "this") -> None:
        super().__init__("value", f"{what} needs a number that {LIBRARIES[library]} is tracing (inside jit, vmap or grad(f) it is not known "
                                  "until the whole function runs): a condition, an index or a parameter cannot depend on it there; "
                                  "use where(cond, a, b) for a condition")
        self.library = library


class Library:
    """One library: its array namespace, the op table's functions for it, and its autodiff."""

    name = ""
    title = ""

    def __init__(self, device: str | None) -> None:
        self.functions: dict[str, Callable[..., Any] | Gap] = {}
        self.device_asked = device

    # ---- the op table ------------------------------------------------------------------
    def function(self, op: str) -> Callable[..., Any] | Gap:
        """The op's counterpart, resolved once: a callable, or the Gap it is refused for."""
        found = self.functions.get(op)
        if found is None:
            spec = counterpart(op, self.name)
            found = self.functions[op] = spec if isinstance(spec, Gap) else self.resolve(spec)
        return found

    def resolve(self, spec: str) -> Callable[..., Any]:
        """"op_sum" (an adapter), "jnp.exp", "jax.nn.silu", "torch.linalg.det"."""
        if spec.startswith("op_"):
            return getattr(self.adapters, spec)  # type: ignore[no-any-return]
        root, *path = spec.split(".")
        found: Any = self.roots[root]
        for part in path:
            found = getattr(found, part)
        return found  # type: ignore[no-any-return]

    # ---- what each library gives ---------------------------------------------------------
    adapters: Any = None
    roots: dict[str, Any] = {}

    def array(self, data: Any) -> Any:
        raise NotImplementedError

    def host(self, value: Any) -> np.ndarray:
        raise NotImplementedError

    def is_array(self, value: Any) -> bool:
        raise NotImplementedError

    def floating(self, value: Any) -> Any:
        """A boolean or integer array as float64, as every op takes them (True + True is 2)."""
        raise NotImplementedError

    def detach(self, value: Any) -> Any:
        raise NotImplementedError

    def device(self) -> str:
        raise NotImplementedError

    def transform(self, kind: str, f: Callable[..., Any], option: Any) -> Callable[..., Any]:
        """grad, value_and_grad, jacrev, jacfwd, hessian (option: argnums) or vmap (option:
        in_axes, out_axes) of a Python function of arrays, as the library makes it."""
        raise NotImplementedError

    def jvp(self, f: Callable[..., Any], primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
        raise NotImplementedError

    def vjp(self, f: Callable[..., Any], primals: list[Any]) -> tuple[Any, Callable[..., Any]]:
        raise NotImplementedError

    def custom_rule(self, body: Callable[..., Any], rule: Callable[..., Any]) -> Callable[..., Any]:
        """A function of arrays whose reverse-mode derivative is `rule(primals, g)` (a tuple,
        one cotangent per primal), as jax.custom_vjp and torch.autograd.Function make one."""
        raise NotImplementedError

    def no_grad(self) -> Any:
        """A context in which nothing is recorded for differentiation."""
        raise NotImplementedError

    def relieve(self) -> None:
        """Let go of what the library keeps that a statement does not need (JAX's compiled code)."""

    def dependent(self) -> tuple[type[Exception], ...]:
        """What the library raises when an op needs a value it is tracing (a boolean mask under jit)."""
        return ()

    def errors(self) -> tuple[type[Exception], ...]:
        """What the library raises for a call that does not fit (shapes, arguments)."""
        raise NotImplementedError


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class JaxLibrary(Library):
    name, title = "jax", "JAX"

    def __init__(self, device: str | None) -> None:
        super().__init__(device)
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        from . import jax_ops

        self.jax, self.jnp, self.adapters = jax, jnp, jax_ops
        self.roots = {"jax": jax, "jnp": jnp}
        self._device = _jax_device(jax, device)
        self._tracer = jax.core.Tracer
        _register(self._tracer, self.host)
        _register(jax.Array, np.asarray)

    def array(self, data: Any) -> Any:
        return self.jax.device_put(np.asarray(data), self._device)

    def host(self, value: Any) -> np.ndarray:
        if isinstance(value, self._tracer):
            raise ValueDependent("jax")
        return np.asarray(value)

    def is_array(self, value: Any) -> bool:
        return isinstance(value, (self.jax.Array, self._tracer))

    def floating(self, value: Any) -> Any:
        return value.astype(self.jnp.float64) if value.dtype.kind in "biu" else value

    def detach(self, value: Any) -> Any:
        return self.jax.lax.stop_gradient(value)

    def device(self) -> str:
        return str(self._device.platform)

    def transform(self, kind: str, f: Callable[..., Any], option: Any) -> Callable[..., Any]:
        jax = self.jax
        if kind == "vmap":
            in_axes, out_axes = option
            return jax.vmap(f, in_axes=in_axes, out_axes=out_axes)  # type: ignore[no-any-return]
        made = {"grad": jax.grad, "value_and_grad": jax.value_and_grad, "jacrev": jax.jacrev, "jacfwd": jax.jacfwd,
                "hessian": jax.hessian}[kind]
        return made(f, argnums=option)  # type: ignore[no-any-return]

    def jvp(self, f: Callable[..., Any], primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
        out, tangent = self.jax.jvp(f, tuple(primals), tuple(tangents))
        return out, tangent

    def vjp(self, f: Callable[..., Any], primals: list[Any]) -> tuple[Any, Callable[..., Any]]:
        out, pull = self.jax.vjp(f, *primals)
        return out, pull

    def custom_rule(self, body: Callable[..., Any], rule: Callable[..., Any]) -> Callable[..., Any]:
        made = self.jax.custom_vjp(body)
        made.defvjp(lambda *xs: (body(*xs), xs), lambda xs, g: tuple(rule(xs, g)))
        return made  # type: ignore[no-any-return]

    def no_grad(self) -> Any:
        return _Null()  # (JAX records nothing: a derivative is asked for by transforming a function)

    def relieve(self) -> None:
        """Let go of JAX's compiled code once the process holds half the memory budget.

        JAX compiles every op it runs, for each shape and each transformation, and keeps the
        code: a check file's many small derivatives fill the process with it, and the memory
        budget counts the process. Dropped (and handed back to the system: glibc keeps freed
        memory otherwise), it is compiled again when needed."""
        from gradcalc.autodiff.limits import max_memory, resident_bytes

        if resident_bytes() < max_memory() // 2:
            return
        import ctypes
        import gc

        from .compiled import forget

        forget()
        self.jax.clear_caches()
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc: what was freed is reused by the process all the same
            pass

    def errors(self) -> tuple[type[Exception], ...]:
        return (TypeError, ValueError, IndexError, self.jax.errors.JAXTypeError, self.jax.errors.JAXIndexError)

    def dependent(self) -> tuple[type[Exception], ...]:
        errors = self.jax.errors
        return (errors.ConcretizationTypeError, errors.NonConcreteBooleanIndexError, errors.TracerArrayConversionError,
                errors.TracerIntegerConversionError)


def _jax_device(jax: Any, asked: str | None) -> Any:
    if asked is None:
        return jax.devices()[0]
    try:
        return jax.devices("gpu" if asked == "gpu" else "cpu")[0]
    except RuntimeError:
        raise LanguageError("argument", f"--device {asked}: JAX finds no {asked.upper()} here (its devices: "
                                        f"{', '.join(sorted({d.platform for d in jax.devices()}))}); use --device cpu") from None


class TorchLibrary(Library):
    name, title = "torch", "PyTorch"

    def __init__(self, device: str | None) -> None:
        super().__init__(device)
        import torch

        from . import torch_ops

        self.torch, self.adapters = torch, torch_ops
        self.roots = {"torch": torch}
        if device == "gpu" and not torch.cuda.is_available():
            raise LanguageError("argument", "--device gpu: PyTorch finds no GPU here (torch.cuda.is_available() is false); use --device cpu")
        self._device = torch.device("cuda" if device == "gpu" or (device is None and torch.cuda.is_available()) else "cpu")
        torch.set_default_device(self._device)  # (constructors in torch_ops make their tensors there)
        _register(torch.Tensor, self.host)

    def array(self, data: Any) -> Any:
        data = np.asarray(data)
        if data.dtype.kind == "f" and data.dtype != np.float64:
            data = data.astype(np.float64)
        return self.torch.as_tensor(data, device=self._device)

    def host(self, value: Any) -> np.ndarray:
        if not self.torch.is_tensor(value):
            return np.asarray(value)
        try:
            return value.detach().cpu().numpy()  # type: ignore[no-any-return]
        except RuntimeError:  # a tensor torch.func is transforming, or one of PyTorch's zero tensors
            pass
        kind = getattr(np, str(value.dtype).removeprefix("torch."), None)  # (an empty list keeps its dtype and shape)
        if value._is_zerotensor():  # (a derivative PyTorch knows is 0, sign's: a tensor without storage)
            return np.zeros(tuple(value.shape), dtype=kind)
        # Inside torch.func.grad every op's result is wrapped, a constant's too (z[-1], z[n - 1]),
        # and has no storage to copy; its numbers are known all the same, as they are to the
        # tensor engine's grad(f), which runs f define-by-run. Inside vmap they differ by row:
        # PyTorch refuses them, and so do we.
        try:
            return np.asarray(value.detach().cpu().tolist(), dtype=kind).reshape(tuple(value.shape))
        except RuntimeError as err:
            raise ValueDependent("torch") from err

    def is_array(self, value: Any) -> bool:
        return self.torch.is_tensor(value)  # type: ignore[no-any-return]

    def floating(self, value: Any) -> Any:
        return value.to(self.torch.float64) if not value.is_floating_point() and not value.is_complex() else value

    def detach(self, value: Any) -> Any:
        return value.detach()

    def device(self) -> str:
        return "gpu" if self._device.type == "cuda" else "cpu"

    def transform(self, kind: str, f: Callable[..., Any], option: Any) -> Callable[..., Any]:
        func = self.torch.func
        if kind == "vmap":
            return self._vmap(f, *option)
        if kind == "value_and_grad":  # (torch gives the gradient first)
            both = func.grad_and_value(f, argnums=option)
            return lambda *xs: tuple(reversed(both(*xs)))
        made = {"grad": func.grad, "jacrev": func.jacrev, "jacfwd": func.jacfwd, "hessian": func.hessian}[kind]
        return made(f, argnums=option)  # type: ignore[no-any-return]

    def _vmap(self, f: Callable[..., Any], in_axes: Any, out_axes: Any) -> Callable[..., Any]:
        """torch.func.vmap, and over a batch of no rows vmap's answer, f's results for none:
        PyTorch's own raises an IndexError there. f runs on one row of zeros added to the
        inputs (so that the empty result stays on their graph), and that row is cut off."""
        torch = self.torch
        mapped = torch.func.vmap(f, in_dims=in_axes, out_dims=out_axes)

        def run(*args: Any) -> Any:
            axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
            batched = {i: k % a.ndim for i, (a, k) in enumerate(zip(args, axes)) if k is not None and torch.is_tensor(a) and a.ndim}
            if not batched or any(args[i].shape[k] for i, k in batched.items()):  # (rows, or sizes torch.func refuses itself)
                return mapped(*args)
            padded = list(args)
            for i, k in batched.items():
                a = args[i]
                padded[i] = torch.cat([a, a.new_zeros(a.shape[:k] + (1,) + a.shape[k + 1:])], dim=k)
            out = mapped(*padded)
            outs = out if isinstance(out, tuple) else (out,)
            where = out_axes if isinstance(out_axes, tuple) else (out_axes,) * len(outs)
            cut = tuple(o.narrow(k, 0, 0) for o, k in zip(outs, where))
            return cut if isinstance(out, tuple) else cut[0]

        return run

    def jvp(self, f: Callable[..., Any], primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
        found = self.torch.func.jvp(f, tuple(primals), tuple(tangents))
        return found[0], found[1]

    def vjp(self, f: Callable[..., Any], primals: list[Any]) -> tuple[Any, Callable[..., Any]]:
        found = self.torch.func.vjp(f, *primals)
        return found[0], found[1]

    def custom_rule(self, body: Callable[..., Any], rule: Callable[..., Any]) -> Callable[..., Any]:
        function: Any = self.torch.autograd.Function

        class Rule(function):  # type: ignore[misc, valid-type]  # the user's rule is this function's backward
            generate_vmap_rule = True

            @staticmethod
            def forward(*xs: Any) -> Any:
                return body(*xs)

            @staticmethod
            def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
                ctx.save_for_backward(*inputs)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return tuple(rule(ctx.saved_tensors, g))

        return Rule.apply  # type: ignore[no-any-return]

    def no_grad(self) -> Any:
        return self.torch.no_grad()

    def errors(self) -> tuple[type[Exception], ...]:
        return (TypeError, ValueError, IndexError, RuntimeError)


def _register(kind: type, convert: Callable[[Any], np.ndarray]) -> None:
    if all(k is not kind for k, _ in HOSTS):
        HOSTS.append((kind, convert))


_LIBRARIES: dict[tuple[str, str | None], Library] = {}


def load(name: str, device: str | None = None) -> Library:
    """The library `name` ("jax" or "torch") on `device`, imported once; a clear error when
    its extra is not installed."""
    key = (name, device)
    found = _LIBRARIES.get(key)
    if found is None:
        try:
            importlib.import_module(name)
        except ImportError:
            raise LanguageError("argument", f"--engine {name} needs {LIBRARIES[name]}, which is not installed here: "
                                            f"pip install 'gradcalc[{EXTRAS[name]}]'") from None
        found = _LIBRARIES[key] = (JaxLibrary if name == "jax" else TorchLibrary)(device)
    return found


def library_of(value: Any) -> Library:
    """The loaded library whose array `value` is (the first loaded one for a NumPy constant)."""
    loaded = list(_LIBRARIES.values())
    return next((library for library in loaded if library.is_array(value)), loaded[0])
