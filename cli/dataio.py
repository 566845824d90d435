"""Data in and out for commands: NAME=VALUE bindings for run and check, and `--save`.

A result is saved as `value` plus `grad_<name>` for every reported gradient, in .npz
(NumPy arrays) or .json (nested lists; inf and nan as strings, as in gradcalc's JSON).
The file is written beside its destination under a temporary name and renamed into
place, so a reader never sees half a file.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from gradcalc.parser import Session
    from gradcalc.parser.analysis import Analysis

Bound = list[tuple[str, np.ndarray]]
SAVE_SUFFIXES = (".npz", ".json")


def split_bindings(arguments: list[Path]) -> tuple[list[Path], list[str]]:
    """FILE and NAME=VALUE arguments apart: an argument is a binding when it starts with
    '@' or is NAME=... with NAME a name, and no such file exists."""
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
    return files, bindings


def evaluate_bindings(bindings: list[str], engine: str) -> Bound:
    """Each binding evaluated once, in order (later ones may use earlier ones), as arrays
    that every file's session receives as fresh leaves. Raises LanguageError."""
    from gradcalc.parser import Session

    from .main import _bind

    session = Session(engine=engine)
    for binding in bindings:
        _bind(session, binding)
    return [(name, np.asarray(value.data)) for name, value in session.variables.items()]


def bound_or_exit(bindings: list[str], engine: str) -> Bound:
    """evaluate_bindings for a command: a bad binding is reported and exits with status 2."""
    from gradcalc.parser import LanguageError

    try:
        return evaluate_bindings(bindings, engine)
    except LanguageError as err:
        from .main import _fail

        return _fail(err, None, as_json=False)


def apply_bindings(session: Session, bound: Bound) -> None:
    for name, data in bound:
        session.assign(name, session.backend.from_array(data))


def script_folder(origin: str) -> Path:
    """Where a script's `load("...")` looks: its own folder (stdin: the current one)."""
    return Path() if origin.startswith("<") else Path(origin).parent


def save_result(path: Path, analysis: Analysis) -> None:
    """Write the value and every gradient by name, atomically. Raises OSError or ValueError."""
    suffix = path.suffix.lower()
    if suffix not in SAVE_SUFFIXES:
        raise ValueError(f"--save writes .npz or .json files, not {path.name!r}")
    arrays = {"value": np.real(analysis.value), **{f"grad_{name}": np.real(g) for name, g in analysis.grads.items()}}
    if suffix == ".npz":
        _write_atomically(path, lambda stream: np.savez(stream, **{k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}))
    else:
        from .jsonout import dumps, plain

        text = dumps({key: plain(value) for key, value in arrays.items()}) + "\n"
        _write_atomically(path, lambda stream: stream.write(text.encode()))


def save_or_exit(path: Path, analysis: Analysis | None) -> None:
    """save_result for a command: a result that cannot be written exits with status 2."""
    import typer

    from . import render

    if analysis is None:
        render.warn(f"nothing to save in {path}: no expression statement ran")
        raise typer.Exit(2)
    try:
        save_result(path, analysis)
    except (OSError, ValueError) as err:
        render.warn(f"cannot write {path}: {getattr(err, 'strerror', None) or err}")
        raise typer.Exit(2) from None


def _write_atomically(path: Path, write: Any) -> None:
    import tempfile

    folder = path.parent if str(path.parent) else Path()
    handle = tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    try:
        with handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)  # mkstemp makes the file private; give it the mode a plain open() would
        os.umask(umask)
        os.chmod(handle.name, 0o666 & ~umask)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
