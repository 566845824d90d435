"""Data in and out for commands: NAME=VALUE bindings for run and check, and `--save`.

A result is saved as `value` plus `grad_<name>` for every reported gradient, in .npz
(NumPy arrays) or .json (nested lists; inf and nan as strings, as in gradcalc's JSON),
written whole or not at all (common.write_file). NumPy is imported by the functions that
use it.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gradcalc.parser import Session
from gradcalc.parser.functions import FunctionValue

from . import render
from .bindings import BindingError, bind  # the one meaning of NAME=VALUE, as eval has it
from .common import OutputFileError, fail, usage_error, write_file
from .jsonout import dumps, plain

if TYPE_CHECKING:
    from gradcalc.parser import Session
    from gradcalc.parser.analysis import Analysis

Bound = list[tuple[str, Any]]  # (name, numpy array) for every bound variable
SAVE_SUFFIXES = (".npz", ".json")


def split_bindings(arguments: list[Path], as_json: bool = False) -> tuple[list[Path], list[str]]:
    """FILE and NAME=VALUE arguments apart: an argument is a binding when it starts with
    '@' or is NAME=... with NAME a name, and no such file exists. No FILE exits 2."""
    files: list[Path] = []
    bindings: list[str] = []
    for argument in arguments:
        text = str(argument)
        name, sep, _ = text.partition("=")
        looks_bound = text.startswith("@") or (bool(sep) and name.strip().isidentifier())
        if looks_bound and not argument.exists():
            bindings.append(text)
        else:
            files.append(argument)
    if not files:
        usage_error("no FILE given: NAME=VALUE arguments only bind variables for the files", as_json)
    return files, bindings


def bound_or_exit(bindings: list[str], engine: str, as_json: bool = False) -> Bound:
    """Each binding evaluated once, in order (later ones may use earlier ones), as arrays
    that every file's session receives as fresh leaves (apply_bindings). A bad binding is
    reported with a caret into it, and exits with status 2."""
    session = Session(engine=engine, on_notice=render.notice)
    try:
        bind(session, bindings)
    except BindingError as err:
        fail(err.error, err.source, as_json)
    # (a function value, f='lambda x: x ** 2', is bound as it is)
    return [(name, value if isinstance(value, FunctionValue) else np.asarray(value.data)) for name, value in session.variables.items()]


def apply_bindings(session: Session, bound: Bound) -> None:
    for name, data in bound:
        session.assign(name, data if isinstance(data, FunctionValue) else session.backend.from_array(data))


def script_folder(origin: str) -> Path:
    """Where a script's `load("...")` looks: its own folder (stdin: the current one)."""
    return Path() if origin.startswith("<") else Path(origin).parent


def refuse_save_suffix(path: Path | None, as_json: bool) -> None:
    """Exit 2 for a --save FILE that is neither .npz nor .json, before any work is done."""
    if path is not None and path.suffix.lower() not in SAVE_SUFFIXES:
        usage_error(f"--save writes .npz or .json files, not {path.name!r}", as_json)


def save_or_exit(path: Path, analysis: Analysis | None, as_json: bool = False) -> None:
    """Write the value and every gradient by name (`path` passed refuse_save_suffix); no
    result, or one that cannot be written, exits with status 2."""
    if analysis is None:
        usage_error(f"nothing to save in {path}: no expression statement ran", as_json)
    suffix = path.suffix.lower()
    arrays = {"value": np.real(analysis.value), **{f"grad_{name}": np.real(g) for name, g in analysis.grads.items()}}
    try:
        if suffix == ".npz":
            buffer = io.BytesIO()
            columns: dict[str, Any] = {key: np.asarray(value, dtype=np.float64) for key, value in arrays.items()}
            np.savez(buffer, **columns)
            write_file(path, buffer.getvalue())
        else:
            write_file(path, dumps({key: plain(value) for key, value in arrays.items()}) + "\n")
    except OutputFileError as err:
        usage_error(str(err), as_json)
