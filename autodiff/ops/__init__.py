"""Every op of the tensor engine, one module per family. Importing this package imports
the families, and each family registers its ops as it is imported (registry.defop)."""
from . import (  # noqa: F401
    activations,
    arithmetic,
    comparisons,
    constructors,
    elementwise,
    integer,
    layout,
    linalg,
    losses,
    reductions,
    scans,
    shaping,
    special,
    statistics,
)
