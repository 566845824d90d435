"""gradcalc, a command-line autodiff calculator: the engine is gradcalc.autodiff, the
language gradcalc.parser, the command line gradcalc.cli (`python -m gradcalc`)."""

__version__ = "0.1.0"  # the one place the version is written: pyproject.toml reads it from here


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext gradcalc` in Jupyter: the %gradcalc and %%gradcalc magics
    (gradcalc.cli.notebook, imported only then)."""
    from gradcalc.cli.notebook import load_ipython_extension as load

    load(ipython)
