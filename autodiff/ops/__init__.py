"""Every op of the tensor engine. Importing this package fills the registry.

The op modules are found, not listed: every module in this folder is imported (in name
order), so a new file of ops needs no edit here or anywhere else. Modules whose name
starts with `_` hold helpers and are skipped.
"""
from __future__ import annotations

import importlib
import pkgutil

MODULES = tuple(sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")))

for _name in MODULES:
    importlib.import_module(f"{__name__}.{_name}")
