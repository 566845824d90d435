"""`gradcalc export FILE --to jax|torch [-o module.py]`: the program as a Python module of
that library (parser/engines/export.py writes it)."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from gradcalc.parser import LanguageError

from . import render
from .common import OutputFileError, fail, prepare_engine, read_sources, usage_error, write_file

if TYPE_CHECKING:
    from pathlib import Path


def export_action(file: Path, *, to: str, output: Path | None, max_input: int) -> int:
    """Write the module to `output` (stdout without it); exit 2 for what cannot be exported."""
    prepare_engine(None, None, max_input)
    from gradcalc.parser.engines.export import write_module

    from .dataio import script_folder

    ((origin, source),) = read_sources([file], max_input)
    try:
        text = write_module(source, origin, to, script_folder(origin))
    except LanguageError as err:
        fail(err, source, False, origin)
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        write_file(output, text)
    except OutputFileError as err:
        usage_error(str(err))
    render.wrote(output)
    return 0
