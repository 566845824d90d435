"""The language on JAX and PyTorch: `--engine jax` and `--engine torch`.

The program runs on that library's arrays and is differentiated by its own autodiff;
gradcalc's engine is neither ported nor duplicated. One table (table.py) maps each op of
the registry to its counterpart in each library; the backend (backend.py) answers the
machine's calls with them; values.py is the light record of how each value was made
(JAX has no tape); transforms.py and derivatives.py give the language's transformations
and derivatives as the library's own. Nothing here imports JAX or PyTorch until a
session asks for that engine.
"""
from __future__ import annotations

from typing import Any

ENGINES = ("jax", "torch")

# The device asked for with --device (None: the library's default, a GPU where one is present).
_SETTINGS: dict[str, Any] = {"device": None}


def configure(device: str | None) -> None:
    """Set the device the engines' sessions use from here on."""
    _SETTINGS["device"] = device


def engine_backend(name: str) -> Any:
    """A backend for the engine `name` ("jax" or "torch"); a LanguageError naming the extra
    to install when the library is missing."""
    from .backend import EngineBackend
    from .library import load

    return EngineBackend(load(name, _SETTINGS["device"]))
