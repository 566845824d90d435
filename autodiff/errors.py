"""Errors the engine raises on bad use: each says what went wrong in the user's terms."""
from __future__ import annotations


class EngineError(ValueError):
    """Base class for every error the engine raises on purpose."""


class ShapeError(EngineError):
    """Operands whose shapes do not fit the operation."""


class SizeLimitError(EngineError):
    """A tensor would exceed the configured element cap."""


class ArgumentError(EngineError, TypeError):
    """An op was called with arguments that do not match its signature."""
