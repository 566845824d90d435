"""`--engine jax|torch` and `--device` on the command line: checked before anything runs.

The library is imported here, once the command knows it needs it (a missing extra is a
usage error that names it), and never for the default engine.
"""
from __future__ import annotations

from .common import usage_error
from .options import LIBRARY_ENGINES

# What needs gradcalc's own graph, which the JAX and PyTorch engines do not keep.
GRAPH_OPTIONS = ("--tree", "--dot", "--steps")


def choose_engine(engine: str, device: str | None, as_json: bool = False) -> None:
    """Set up `engine` on `device` for this command, or exit 2 saying what is wrong."""
    if engine not in LIBRARY_ENGINES:
        if device is not None:
            usage_error(f"--device chooses where --engine jax or torch runs; the {engine} engine runs on the CPU", as_json)
        return
    from gradcalc.parser import LanguageError
    from gradcalc.parser.engines import configure
    from gradcalc.parser.engines.library import load

    configure(device)
    try:
        load(engine, device)
    except LanguageError as err:
        usage_error(err.message, as_json)


def refuse_graph_options(engine: str, given: list[tuple[str, object]], as_json: bool = False) -> None:
    """--tree, --dot, --steps on an engine that keeps no gradcalc graph: a usage error."""
    if engine not in LIBRARY_ENGINES:
        return
    for flag, value in given:
        if value:
            usage_error(f"{flag} shows gradcalc's own graph, which --engine {engine} does not keep (the library differentiates); "
                        "use --engine tensor" + (", or --steps on --engine jax for the jaxpr of the gradient" if flag == "--steps" else ""), as_json)


def choose_against(engine: str, device: str | None, against: str | None, as_json: bool = False) -> None:
    """`gradcalc check --engine E --against A`: the engine the checks run on, and the one
    they are compared with, each checked (and its library imported) before any check runs."""
    if engine == "scalar":
        usage_error("gradcalc check needs --engine tensor, jax or torch (the scalar engine checks nothing)", as_json)
    if against is not None:
        if engine != "tensor":
            usage_error(f"--against compares gradcalc's derivatives with another engine's; with --engine {engine} the checks are {engine}'s already",
                        as_json)
        choose_engine(against, device, as_json)
    choose_engine(engine, device, as_json)
