"""`python -m gradcalc` runs the gradcalc command."""
from gradcalc.cli.entry import run

run()
