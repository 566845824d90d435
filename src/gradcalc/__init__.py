"""gradcalc, a command-line autodiff calculator: the engine is gradcalc.autodiff, the
language gradcalc.parser, the command line gradcalc.cli (`python -m gradcalc`)."""

__version__ = "0.1.0"  # the one place the version is written: pyproject.toml reads it from here
