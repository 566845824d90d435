"""Every op of the tensor engine, one module per family. Importing this package registers
the families that bind Tensor's operators; the rest are registered on first need.

The op modules are found, not listed: every module in this folder is registered (in name
order), so a new file of ops needs no edit here or anywhere else. Modules whose name
starts with `_` hold helpers and are skipped. (The folder is listed with `os`, not
`pkgutil`, whose imports cost every start-up a millisecond or two.)

Why not all at once: loading and registering the other families took `gradcalc eval
'x*2' x=3` about 5 ms of its start-up (docs/performance.md), for ops it never calls. They
load on first need (registry.register_all), noticed where names are looked up: asking
the registry (REGISTRY, ALIASES, the ARRAY_MATH and TENSOR_MATH namespaces) or a Tensor
for a name it does not have yet registers every family first. Operators cannot wait:
Python looks `a < b` up on the class, never through `__getattr__`; so the families that
bind a dunder or a property of Tensor are EAGER (a test checks that no other one does).
"""
from __future__ import annotations

import importlib
import os

MODULES = tuple(sorted({
    entry.name.split(".")[0] for folder in __path__ for entry in os.scandir(folder)
    if entry.name.endswith(".py") and not entry.name.startswith("_") and entry.name.count(".") == 1
}))
EAGER = ("arithmetic", "comparisons", "integer", "shaping")  # operators, `x[i]` and `x.T`


def import_all() -> None:
    """Import (and so register) every op family; call registry.register_all() instead,
    which does this once."""
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")


for _name in EAGER:
    importlib.import_module(f"{__name__}.{_name}")
