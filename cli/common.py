"""What the commands share: engine set-up, reading scripts, writing DOT,
reporting a fatal error.

Every command module imports from here and nothing imports them back, so cli/ reads
top-down: entry -> main (typer) -> actions, check_command, repl -> common -> render, jsonout.
Nothing here imports typer: the plain one-shot path (cli/entry.py) runs without it.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pathlib import Path

    from gradcalc.parser import LanguageError


MAX_INPUT_BYTES = 50_000_000  # a script larger than this is refused, not read to the end (/dev/zero)


class SourceError(Exception):
    """A script that cannot be read: missing, too large, not UTF-8."""


class OutputFileError(Exception):
    """A report or picture that cannot be written; the file there before is left as it was."""


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def shorten(text: str, limit: int = 100) -> str:
    """Source text for a heading or a report line: one line of at most `limit` characters,
    cut with an ellipsis, control characters written as \\xNN so that they cannot act on
    the terminal (JSON keeps the whole text)."""
    line = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", " ".join(text.split()))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def prepare_engine(max_elements: int | None, max_steps: int | None = None, max_input: int | None = None,
                   max_seconds: float | None = None, max_memory: int | None = None) -> None:
    """Set up the engine for a command: the element cap, the step, time and memory
    budgets, the byte limit of data files, and NumPy told not to warn about overflow or
    nan (results show inf and nan, and a note names the op that made them)."""
    import warnings

    import numpy as np

    np.seterr(all="ignore")
    # NumPy's own RuntimeWarnings (a mean of nothing) would print its source paths.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="numpy")
    set_limits({"max_elements": max_elements, "max_steps": max_steps, "max_seconds": max_seconds, "max_memory": max_memory,
                "max_input": max_input})


# Each limit option's key (cli/options.py's LIMITS) and its name in autodiff/limits.py.
_LIMITS = {"max_elements": "elements", "max_steps": "steps", "max_seconds": "seconds", "max_memory": "memory", "max_input": "input_bytes"}


def set_limits(values: dict[str, Any]) -> dict[str, Any]:
    """Set the limits given (by option key; None leaves one as it is, "default" restores
    its default) and return what they were, to set back."""
    from gradcalc.autodiff import limits

    before = {}
    for key, value in values.items():
        if value is not None:
            name = _LIMITS[key]
            value = getattr(limits, f"DEFAULT_MAX_{name.upper()}") if value == "default" else value
            before[key] = getattr(limits, f"set_max_{name}")(value)
    return before


def fail(err: LanguageError, source: str | None, as_json: bool, origin: str = "") -> NoReturn:
    """Report a language error (as JSON too when asked) and exit with status 2."""
    from . import render

    if as_json:
        from .jsonout import dumps, error_object

        print(dumps(error_object(err)))
    render.print_error(err, source, origin)
    raise SystemExit(2)


def decode_source(origin: str, data: bytes) -> str:
    """UTF-8 text (a leading BOM is dropped); otherwise say which byte is wrong and where."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        from gradcalc.parser.errors import place_of

        line, column = place_of(data, err.start)
        raise SourceError(f"{origin} is not UTF-8: byte 0x{data[err.start]:02x} at offset {err.start} "
                          f"(line {line}, column {column})") from None


def _read_limited(stream: Any, origin: str, limit: int) -> bytes:
    from gradcalc.parser.datafiles import read_capped

    data = read_capped(stream, limit)
    if data is None:
        raise SourceError(f"{origin} is larger than {limit:,} bytes; raise the limit with --max-input-bytes")
    return data


def load_source(path: str, limit: int = MAX_INPUT_BYTES) -> tuple[str, str]:
    """(origin, text) of a script; '-' reads stdin. Raises SourceError."""
    if path == "-":
        if sys.stdin is None:
            raise SourceError("cannot read stdin: it is closed")
        return "<stdin>", decode_source("<stdin>", _read_limited(sys.stdin.buffer, "<stdin>", limit))
    try:
        with open(path, "rb") as stream:
            from gradcalc.parser.datafiles import note_read

            note_read(path, stream)
            return path, decode_source(path, _read_limited(stream, path, limit))
    except OSError as err:
        raise SourceError(f"cannot read {path}: {err.strerror}") from None


def read_sources(files: list[Path] | list[str], limit: int = MAX_INPUT_BYTES, as_json: bool = False) -> list[tuple[str, str]]:
    """(origin, text) per file (a path or its text); '-' is stdin. A file that cannot be read exits 2."""
    try:
        return [load_source(str(path), limit) for path in files]
    except SourceError as err:
        usage_error(str(err), as_json)


def wrt_names(text: str, option: str = "--wrt") -> list[str]:
    """The names of `--wrt a,b` (or `:wrt`); an empty name (`--wrt ,,`, `a,,b`) is a
    ValueError, so that a typo cannot quietly report nothing."""
    names = [w.strip() for w in text.split(",")]
    if not any(names):
        raise ValueError(f"{option} {text!r} names no variable; give names separated by commas, as in {option} a,b")
    if not all(names):
        raise ValueError(f"{option} {text!r} has an empty name between commas; give names separated by commas, as in {option} a,b")
    return names


def usage_error(text: str, as_json: bool = False) -> NoReturn:
    """A fatal problem outside the language: `error: ...` on stderr, exit status 2; under
    --json also the error document (kind "usage") on stdout, as every error gives one."""
    from . import render

    if as_json:
        from .jsonout import dumps

        print(dumps({"error": {"kind": "usage", "message": text, "line": None, "column": None}}))
    render.error(text)
    raise SystemExit(2)


def refuse_overwriting(output: Path, option: str, as_json: bool = False) -> None:
    """Exit 2 when writing `output` would replace, or write through a link to, a file
    the command has read so far (write_file refuses it again when it comes to write)."""
    from gradcalc.parser.datafiles import read_by_this_command

    source = read_by_this_command(output)
    if source is not None:
        usage_error(f"{option} {output} would overwrite the input file {source}; name another file", as_json)


def write_file(path: Path, data: str | bytes) -> None:
    """Write a report whole or not at all: into a temporary file in the same folder, then
    renamed over `path`. A file the command read (by its path, a hard link or a
    symlink to it) is never written. A symlink at `path` is replaced, never written through; a failed
    write (full disk, file-size limit) leaves the old file intact. Devices and pipes
    (/dev/stdout) are written directly. Raises OutputFileError."""
    import tempfile
    from pathlib import Path

    from gradcalc.parser.datafiles import read_by_this_command

    payload = data.encode() if isinstance(data, str) else data
    source = read_by_this_command(path)
    if source is not None:  # scripts, bindings, load()ed files: no output replaces an input
        raise OutputFileError(f"cannot write {path}: it would overwrite the input file {source}; nothing was written")
    try:
        if path.exists() and not path.is_symlink() and not path.is_file() and not path.is_dir():
            with open(path, "wb") as stream:
                stream.write(payload)
            return
        folder = path.parent if str(path.parent) else Path(".")
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise OutputFileError(f"cannot write {path}: {err.strerror}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise OutputFileError(f"cannot write {path}: {err.strerror}; it was left as it was") from None


# Graphviz output formats that gradcalc renders by extension (`dot -T<ext>`).
PICTURE_FORMATS = ("svg", "png", "pdf", "jpg", "jpeg", "gif", "ps", "eps")
TEXT_FORMATS = ("dot", "gv")


def dot_format(target: str) -> str:
    """What `--dot target` writes: 'text' (DOT, '-' for stdout) or a Graphviz output
    format. Raises OutputFileError for an unknown extension, or a picture without
    Graphviz, so that a command can refuse before it computes anything."""
    import shutil
    from pathlib import Path

    if target == "-":
        return "text"
    path = Path(target)
    suffix = path.suffix.lower().lstrip(".")
    if suffix in TEXT_FORMATS:
        return "text"
    if suffix not in PICTURE_FORMATS:
        raise OutputFileError(f"cannot write {path}: unknown extension {path.suffix or '(none)'}; "
                              f"use .dot or .gv for DOT text, or one of .{', .'.join(PICTURE_FORMATS)} for a picture")
    if shutil.which("dot") is None:
        raise OutputFileError(f"cannot draw {path}: Graphviz's `dot` is not installed (Debian: apt-get install graphviz); "
                              f"name a .dot file to write the DOT text instead")
    return "jpeg" if suffix == "jpg" else suffix


def write_dot(output: Any, target: str, edge_labels: dict[tuple[int, int], str] | None = None) -> None:
    """The graph of `output` as DOT text (.dot/.gv, or '-' for stdout), or a picture drawn
    by Graphviz for the formats in PICTURE_FORMATS (`edge_labels`: see graph_dot). Raises
    OutputFileError."""
    import subprocess
    from pathlib import Path

    from .formatting import graph_dot

    kind = dot_format(target)
    text = graph_dot(output, edge_labels=edge_labels)
    if target == "-":
        sys.stdout.write(text)
    elif kind == "text":
        write_file(Path(target), text)
    else:
        done = subprocess.run(["dot", f"-T{kind}"], input=text.encode(), capture_output=True, check=False)
        if done.returncode != 0:
            raise OutputFileError(f"Graphviz failed to draw {target}: {done.stderr.decode(errors='replace').strip()}")
        write_file(Path(target), done.stdout)
    if target != "-":
        from .render import wrote

        wrote(target)
