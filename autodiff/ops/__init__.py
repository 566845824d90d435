"""Every op of the tensor engine. Importing this package fills the registry.

The op modules are found, not listed: every module in this folder is imported (in name
order), so a new file of ops needs no edit here or anywhere else. Modules whose name
starts with `_` hold helpers and are skipped. (The folder is listed with `os`, not
`pkgutil`, whose imports cost every start-up a millisecond or two.)
"""
from __future__ import annotations

import importlib
import os

MODULES = tuple(sorted({
    entry.name.split(".")[0] for folder in __path__ for entry in os.scandir(folder)
    if entry.name.endswith(".py") and not entry.name.startswith("_") and entry.name.count(".") == 1
}))

for _name in MODULES:
    importlib.import_module(f"{__name__}.{_name}")
