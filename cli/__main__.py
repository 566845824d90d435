"""`python -m gradcalc.cli` runs the gradcalc command."""
from .main import run

run()
