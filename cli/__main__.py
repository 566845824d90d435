"""`python -m gradcalc.cli` runs the gradcalc command."""
from .entry import run

run()
