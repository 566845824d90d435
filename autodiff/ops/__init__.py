"""Every op of the tensor engine. Importing this package fills the registry."""
from . import arithmetic, comparisons, constructors, elementwise, integer, losses, reductions, shaping  # noqa: F401
