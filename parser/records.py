"""A base for plain record classes, in place of dataclasses on the start-up path.

Importing dataclasses and building each class with it cost a one-shot command a few
milliseconds (docs/performance.md), so the records a plain `gradcalc eval` builds are
written out by hand on this base: fields named in `__slots__`, equality and repr by
fields, as a dataclass has them.
"""
from __future__ import annotations


class Record:
    __slots__: tuple[str, ...] = ()
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value (as a dataclass)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{name}={getattr(self, name)!r}' for name in self.__slots__)})"
