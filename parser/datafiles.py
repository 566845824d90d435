"""Arrays from data files, for bindings (`W=@weights.npy`) and the language's `load(...)`.

    .npy         one array            .npz   one array by key (`data.npz:W`), or all
    .csv         numbers, an optional header row; one column gives a vector
    .json        a number or nested lists of numbers ("inf", "-inf", "nan" too); an object's member by key

Files are data, never code: NumPy files are read with allow_pickle=False semantics (an
object array is refused by its header, before anything else is read), and sizes are held
to the element cap (gradcalc.autodiff.limits) before the data is read: from the header
of a .npy file, while a CSV file or a parsed JSON document is walked. Every error names
the file, and for CSV and JSON the line and column.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from gradcalc.autodiff.errors import SizeLimitError
from gradcalc.autodiff.limits import check_size, max_elements, max_input_bytes

from .builtins import LOAD_HELP
from .errors import LanguageError, place_of, too_large
from .lexer import is_name

SUFFIXES = (".npy", ".npz", ".csv", ".json")


# ---- the files a command read ----------------------------------------------------------------
# Every file a command reads (scripts, bindings, load()) is noted here, by the path it was
# opened as and by the file itself (device and inode, so that a hard link or a symlink to
# it is the same file): no output of the command may be written over one of them.
_read_paths: dict[str, str] = {}  # absolute path as opened -> that path as given
_read_files: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) -> the path as given


def note_read(path: Path | str, stream: Any = None) -> None:
    """Remember that the command read `path` (through `stream` when it is open: the file
    it is, whatever links led there)."""
    shown = str(path)
    _read_paths.setdefault(os.path.abspath(shown), shown)
    try:
        info = os.fstat(stream.fileno()) if stream is not None else os.stat(shown)
    except (OSError, AttributeError, ValueError):
        return
    _read_files.setdefault((info.st_dev, info.st_ino), shown)


def files_read() -> list[tuple[str, tuple[int, int] | None]]:
    """What note_read remembered, to pass from a worker process back to the command."""
    by_path: list[tuple[str, tuple[int, int] | None]] = [(p, None) for p in _read_paths.values()]
    return by_path + [(shown, key) for key, shown in _read_files.items()]


def note_files_read(found: list[tuple[str, tuple[int, int] | None]]) -> None:
    """Add what files_read gave in another process."""
    for shown, key in found:
        if key is None:
            _read_paths.setdefault(os.path.abspath(shown), shown)
        else:
            _read_files.setdefault((int(key[0]), int(key[1])), shown)


def read_by_this_command(target: Path | str) -> str | None:
    """The input file (as it was named) that writing `target` would replace or write
    through to, or None: the same path, the same file by a hard link, or a symlink at
    `target` (or a folder on its way) that leads to one."""
    shown = str(target)
    found = _read_paths.get(os.path.abspath(shown))
    if found is not None:
        return found
    try:
        info = os.stat(shown)  # follows links: the file a write through them would change
    except OSError:
        return None
    return _read_files.get((info.st_dev, info.st_ino))
NONFINITE = ("inf", "-inf", "nan")  # how gradcalc's own JSON writes them
def file_error(where: Path | str, message: str, kind: str = "file") -> LanguageError:
    return LanguageError(kind, f"{where}: {message}")


# A message quotes a file's text (a cell, a column name, a member's value) only so far: an
# excerpt says which one is meant, and a message must not print a file that was never meant
# to be read (a token in a JSON file, a password in a CSV header).
EXCERPT = 12  # characters of one value
LISTED = 5  # names in a list


def excerpt(text: str) -> str:
    """At most EXCERPT characters of `text`, quoted, with an ellipsis where it is cut."""
    cut = text if len(text) <= EXCERPT else text[:EXCERPT] + "…"
    return repr(cut)


def listed(names: Any) -> str:
    """Names from a file, as a message lists them: the first LISTED, each an excerpt."""
    names = [str(name) for name in names]
    shown = ", ".join(name if name.isidentifier() and len(name) <= EXCERPT else excerpt(name) for name in names[:LISTED])
    return shown + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")


def split_spec(spec: str) -> tuple[str, str | None]:
    """'data.npz:W' -> ('data.npz', 'W'). A colon counts only after a data-file suffix, so
    'C:/data/w.npy' stays a path."""
    head, sep, key = spec.rpartition(":")
    if sep and head.lower().endswith(SUFFIXES) and key:
        return head, key
    return spec, None


def load_array(
    spec: str | Path, key: str | None = None, base: Path | None = None, on_header: Callable[[str], Any] | None = None,
) -> np.ndarray:
    """The array in a data file, as float64. `spec` may carry the key ('data.npz:W');
    a relative path is taken from `base` (a script's folder). `on_header` hears which
    row of a CSV file was read as its header, and what it holds."""
    if key is None:
        spec, key = split_spec(str(spec))
    path = Path(spec).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise file_error(path, f"unknown kind of data file; use one of {', '.join(SUFFIXES)}")
    if key is not None and suffix == ".npy":
        raise file_error(path, f"a .npy file holds one array; there is no key {key!r}")
    try:
        if suffix == ".npy":
            with open_data(path) as stream:
                return _read_npy(stream, os.fstat(stream.fileno()).st_size, path)
        if suffix == ".npz":
            return _read_npz(path, key)
        if suffix == ".csv":
            return _read_csv(path, key, on_header)
        return _read_json(path, key)
    except OSError as err:
        raise file_error(path, f"cannot read: {err.strerror or err}") from None
    except SizeLimitError as err:
        raise file_error(path, str(err), kind="size") from None
    except MemoryError:
        raise file_error(path, "out of memory while reading it (a lower --max-elements or --max-input-bytes refuses it sooner)", kind="size") from None


def open_data(path: Path) -> IO[bytes]:
    """A data file opened for reading, and noted as read; anything but a regular file is
    refused, and so is a file over the byte limit. A data file is named as a file: a device
    (a link to /dev/zero) has no size to trust and never ends, and opening a named pipe
    waits for a writer that may never come (the command hung), so the file is opened
    without waiting and looked at first."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise file_error(path, "is a folder, not a data file")
        if not stat.S_ISREG(info.st_mode):
            raise file_error(path, "is not a regular file (a device or a pipe); gradcalc reads data from files", kind="size")
        stream = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    note_read(path, stream)
    if info.st_size > max_input_bytes():
        stream.close()
        raise _too_large(path)
    return stream


def _too_large(path: Path) -> LanguageError:
    return file_error(path, f"is larger than {max_input_bytes():,} bytes; raise the limit with --max-input-bytes", kind="size")


def read_capped(stream: IO[bytes], limit: int) -> bytes | None:
    """All of `stream`, or None once it holds more than `limit` bytes. Read in pieces:
    `read(limit + 1)` would ask for the whole limit's memory at once, whatever the file
    holds (a raised --max-input-bytes under `ulimit -v` was an out-of-memory error)."""
    pieces: list[bytes] = []
    total = 0
    while True:
        piece = stream.read(min(1 << 20, limit + 1 - total))
        if not piece:
            return b"".join(pieces)
        pieces.append(piece)
        total += len(piece)
        if total > limit:
            return None


def _read_bytes(path: Path) -> bytes:
    """The whole file, read up to the byte limit (a file that never ends stops there)."""
    with open_data(path) as stream:
        data = read_capped(stream, max_input_bytes())
    if data is None:  # (it grew while it was read)
        raise _too_large(path)
    return data


def _text(path: Path, data: bytes) -> str:
    """UTF-8 text (a BOM dropped); otherwise the byte that is wrong and its place."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line, column = place_of(data, err.start)
        raise file_error(path, f"line {line}, column {column}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None


def load_builtin(session: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """`load(...)` as the built-in table calls it (parser/builtins.py): the array as a
    value of the session's engine."""
    return session.backend.from_array(load_call(args, kwargs, session.base_dir, session.header_read))


def load_call(
    args: list[Any], kwargs: dict[str, Any], base: Path | None, on_header: Callable[[str], Any] | None = None,
) -> np.ndarray:
    """The language's `load(...)`: file names are strings, relative to the script's folder,
    and the file must be in that folder (or one below it, or a folder allowed: `readable`)."""
    if kwargs or not 1 <= len(args) <= 2 or not all(isinstance(a, str) for a in args):
        raise LanguageError("argument", f"load takes a file name in quotes: {LOAD_HELP}")
    spec, key = (args[0], args[1]) if len(args) == 2 else split_spec(args[0])
    return load_array(readable(spec, base or Path()), key, None, on_header)


# A program may read the files of its own folder, and of the folders named here.
ALLOW_READ = "GRADCALC_ALLOW_READ"


def readable(spec: str, base: Path) -> Path:
    """The file `spec` names, from the program's folder `base`, if the program may read it:
    when it is in `base` or below it, or in a folder that GRADCALC_ALLOW_READ names (folders
    separated by os.pathsep), links followed. A program is often someone else's (a check
    file in a pull request, which the pytest plugin runs in CI; a shared notebook), and
    what it reads it can print: that is the folder it came in, unless the person running
    it allows more. Files named on the command line (NAME=@FILE) are not held to this: the
    person typed them. Raises a LanguageError of kind "safety" otherwise."""
    path = Path(spec).expanduser()
    if not path.is_absolute():
        path = base / path
    real = os.path.realpath(path)
    roots = [base, *(Path(folder).expanduser() for folder in os.environ.get(ALLOW_READ, "").split(os.pathsep) if folder.strip())]
    for root in roots:
        inside = os.path.realpath(root)
        if os.path.commonpath([real, inside]) == inside:
            return path
    folder = os.path.abspath(base)
    raise LanguageError(
        "safety", f"load: {spec} is outside the program's folder {folder}: a program reads the files in its own folder and below "
        f"it; to let it read {os.path.dirname(real)}, name that folder in {ALLOW_READ} (folders separated by {os.pathsep!r}), "
        f"or bind the file on the command line (NAME=@{spec})")


def file_bindings(
    binding: str, base: Path | None = None, on_header: Callable[[str], Any] | None = None,
) -> list[tuple[str, np.ndarray]] | None:
    """The variables a command-line binding from a file sets, or None when `binding` is
    not one. `W=@w.npy` binds W; `@data.npz:W` binds W; `@data.npz` binds every array
    by its key; `@table.csv` binds `table` (the file's stem)."""
    text = binding.strip()
    if text.startswith("@"):
        name, spec = None, text[1:]
    else:
        name, sep, value = binding.partition("=")
        if not sep or not value.strip().startswith("@"):
            return None
        name, spec = name.strip(), value.strip()[1:]
    if not spec.strip():
        raise LanguageError("argument", f"bad binding {binding!r}: a file's name goes after the @, as in {name or 'X'}=@data.npy")
    path, key = split_spec(spec)
    if name is None and key is None and path.lower().endswith(".npz"):
        found, total = [], 0
        for k in npz_keys(Path(path) if base is None else base / path):
            array = load_array(path, k, base)
            total += array.size
            if total > max_elements():  # each member is under the cap; together they are held to it too
                raise file_error(path, f"its arrays together hold more than {max_elements():,} numbers (the element cap; "
                                       "--max-elements raises it)", kind="size")
            found.append((_checked_name(k, binding), array))
        return found
    if name is None:
        name = key or Path(path).stem
    return [(_checked_name(name, binding), load_array(path, key, base, on_header))]


def npz_keys(path: Path) -> list[str]:
    import zipfile  # here and below: only a command that reads such a file pays for the import

    try:
        with open_data(path) as stream, zipfile.ZipFile(stream) as archive:
            return [n[: -len(".npy")] for n in archive.namelist() if n.endswith(".npy")]
    except OSError as err:
        raise file_error(path, f"cannot read: {err.strerror or err}") from None
    except zipfile.BadZipFile:
        raise file_error(path, "not a valid .npz file (not a zip archive)") from None


def _checked_name(name: str, binding: str) -> str:
    if not is_name(name) or name.startswith("__"):
        raise LanguageError("argument", f"bad binding {binding!r}: {name!r} is not a usable variable name; write NAME=@FILE")
    return name


# ---- NumPy ---------------------------------------------------------------------------------------


def _read_npy(stream: IO[bytes], size: int, where: Path | str) -> np.ndarray:
    """Header first (shape, dtype), checked, then exactly the bytes it promises."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        if version == (1, 0):
            shape, fortran_order, dtype = fmt.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran_order, dtype = fmt.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except (ValueError, SyntaxError, EOFError) as err:
        raise file_error(where, f"not a valid .npy file ({err})") from None
    if dtype.hasobject:
        raise file_error(where, "holds Python objects, which would have to be unpickled; gradcalc never unpickles files", kind="safety")
    if dtype.kind not in "biuf":
        raise file_error(where, f"holds {dtype} data; gradcalc reads numbers (bool, int or float)")
    check_size(shape, f"the array in {where}")
    count = math.prod(shape)
    expected = count * dtype.itemsize
    available = size - stream.tell()
    if available < expected:
        raise file_error(where, f"truncated: the header promises {expected:,} bytes of data, the file holds {max(available, 0):,}")
    data = np.frombuffer(stream.read(expected), dtype=dtype, count=count)
    return np.array(data.reshape(shape, order="F" if fortran_order else "C"), dtype=np.float64)  # a fresh, writable float64 array


def _read_npz(path: Path, key: str | None) -> np.ndarray:
    import zipfile

    try:
        with open_data(path) as file, zipfile.ZipFile(file) as archive:
            members = {n[: -len(".npy")]: n for n in archive.namelist() if n.endswith(".npy")}
            if key is None:
                if len(members) != 1:
                    first = next(iter(members), "W")[:EXCERPT]
                    raise file_error(path, f"holds {len(members)} arrays ({listed(members) or 'none'}); name one, as in {path}:{first}")
                key = next(iter(members))
            if key not in members:
                raise file_error(path, f"has no array {key!r} (it holds: {listed(members) or 'nothing'})")
            info = archive.getinfo(members[key])
            with archive.open(info) as stream:
                return _read_npy(stream, info.file_size, f"{path}:{key}")
    except zipfile.BadZipFile:
        raise file_error(path, "not a valid .npz file (not a zip archive)") from None
    except (zipfile.LargeZipFile, EOFError, ValueError) as err:
        raise file_error(path, f"damaged .npz file ({err})") from None


# ---- CSV -----------------------------------------------------------------------------------------


def _read_csv(path: Path, column: str | None, on_header: Callable[[str], Any] | None = None) -> np.ndarray:
    """Rows of numbers; a first row that is not all numbers is the header (said to
    `on_header`), unless most of it is numbers: then it is data with a bad cell. Blank
    lines are skipped. The element count is held to the cap while reading, and the numbers
    go into one flat array of doubles (8 bytes each, not a Python float in a list per row)."""
    import csv
    import io
    from array import array

    cap = max_elements()
    data = _read_bytes(path)
    fast = _plain_table(data, cap, path) if b'"' not in data else None
    if fast is not None:
        names, table, names_line = fast
        if names is not None:
            _say_header(on_header, path, names_line, names)
        return _csv_result(path, table, names, column)
    text = _text(path, data)
    del data
    values = array("d")
    rows = 0
    header: list[str] | None = None
    width = first_line = 0
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            line = reader.line_num
            if not rows and header is None and not all(_is_number(cell) for cell in row):
                header, width, first_line = _header(row, path, line), len(row), line
                _say_header(on_header, path, line, header)
                continue
            if not width:
                width, first_line = len(row), line
            if len(row) != width:
                raise file_error(path, f"line {line}: {len(row)} columns, but line {first_line} has {width}")
            rows += 1
            if rows * width > cap:
                raise file_error(path, f"more than {cap:,} numbers (the element cap; --max-elements raises it)", kind="size")
            try:
                values.extend(map(float, row))
            except ValueError:
                at, cell = next((k, cell) for k, cell in enumerate(row, start=1) if not _is_number(cell))
                raise file_error(path, f"line {line}, column {at}: {excerpt(cell.strip())} is not a number") from None
    except csv.Error as err:
        raise file_error(path, f"line {reader.line_num}: {err}") from None
    del text
    if not rows:
        raise file_error(path, "holds no rows of numbers")
    return _csv_result(path, np.frombuffer(values, dtype=np.float64).reshape(rows, width).copy(), header, column)


def _plain_table(data: bytes, cap: int, path: Path) -> tuple[list[str] | None, np.ndarray, int] | None:
    """A CSV file without quotes read by NumPy's parser (half the instructions of csv's rows
    in Python: docs/performance.md's ledger): the header, the table and the header's line, or None when NumPy cannot
    read it as it is (not UTF-8, a line of spaces, a cell float() reads and NumPy does not, a ragged row),
    for csv's reader to read or to say exactly what is wrong. NumPy stops reading one row
    past the cap (its `max_rows` counts rows of data, not blank lines)."""
    import io
    import warnings

    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # a byte-order mark
    while True:
        end = data.find(b"\n", start)
        line = data[start:] if end < 0 else data[start:end]
        if line.strip() or end < 0:
            break
        start = end + 1
    try:
        first = line.decode().rstrip("\r").split(",")
    except UnicodeDecodeError:
        return None
    line_number = data.count(b"\n", 0, start) + 1
    header = None if all(_is_number(cell) for cell in first) else _header(first, path, line_number)
    stream = io.BytesIO(data)
    stream.seek(start if header is None else len(data) if end < 0 else end + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": csv's reader says it better
            table = np.loadtxt(io.TextIOWrapper(stream, encoding="utf-8", newline=""), delimiter=",", comments=None,
                               ndmin=2, dtype=np.float64, max_rows=cap // len(first) + 1)
    except ValueError:  # UnicodeDecodeError too
        return None
    if not table.size or table.shape[1] != len(first):
        return None
    if table.size > cap:
        raise file_error(path, f"more than {cap:,} numbers (the element cap; --max-elements raises it)", kind="size")
    return header, table, line_number


def _csv_result(path: Path, table: np.ndarray, header: list[str] | None, column: str | None) -> np.ndarray:
    width = table.shape[1]
    if column is not None:
        if header is None or column not in header:
            raise file_error(path, f"has no column {column!r}" + (f" (columns: {listed(header)})" if header else " (it has no header row)"))
        return table[:, header.index(column)]
    return table[:, 0] if width == 1 else table


def _header(row: list[str], path: Path, line: int) -> list[str]:
    """The column names of a first row that is not all numbers. A row that is at least
    half numbers (`1,2` with a stray byte after the 2) is data with a bad cell: taken as a
    header, it would drop a row of data without a word."""
    numbers = sum(_is_number(cell) for cell in row)
    if 2 * numbers >= len(row):
        column, cell = next((k, cell) for k, cell in enumerate(row, start=1) if not _is_number(cell))
        raise file_error(path, f"line {line}, column {column}: {excerpt(cell.strip())} is not a number "
                               f"({numbers} of the row's {len(row)} cells are numbers: it is data, not a header)")
    return [cell.strip() for cell in row]


def _say_header(on_header: Callable[[str], Any] | None, path: Path, line: int, header: list[str]) -> None:
    if on_header is not None:
        on_header(f"{path} line {line}: {listed(header)} (column names, not data)")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


# ---- JSON ----------------------------------------------------------------------------------------


def _read_json(path: Path, key: str | None) -> np.ndarray:
    import json

    text = _text(path, _read_bytes(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise file_error(path, f"line {err.lineno}, column {err.colno}: not valid JSON ({err.msg})") from None
    except ValueError as err:  # an integer of more digits than Python converts (4,300)
        raise _long_integer(path, text, err) from None
    except RecursionError:
        raise file_error(path, "nested too deeply") from None
    if isinstance(data, dict):
        if key is None:
            raise file_error(path, f"holds an object; name one of its members, as in {path}:{next(iter(data), 'W')[:EXCERPT]}")
        if key not in data:
            raise file_error(path, f"has no member {key!r} (it has: {listed(data) or 'nothing'})")
        data = data[key]
    elif key is not None:
        raise file_error(path, f"holds no object, so there is no member {key!r}")
    shape = _nested_shape(data, path)
    try:
        return np.array(data, dtype=np.float64).reshape(shape)
    except OverflowError:  # a whole number past float64's range: Python says "int too large to convert to float"
        raise _huge_integer(path, text) from None


def _huge_integer(path: Path, text: str) -> LanguageError:
    import re

    found = re.search(r"-?\d{309,}", text)
    if found is None:
        return file_error(path, too_large("a whole number"))
    line, column = place_of(text, found.start())
    return file_error(path, f"line {line}, column {column}: " + too_large(f"a whole number of {len(found.group().lstrip('-'))} digits"))


def _long_integer(path: Path, text: str, err: ValueError) -> LanguageError:
    """The error for an integer too long to convert, at its place in the file."""
    import re
    import sys

    limit = sys.get_int_max_str_digits() or 4300
    found = re.search(rf"-?\d{{{limit + 1},}}", text)
    if found is None:
        return file_error(path, f"not valid JSON ({err})")
    line, column = place_of(text, found.start())
    digits = len(found.group().lstrip("-"))
    return file_error(path, f"line {line}, column {column}: an integer of {digits:,} digits, more than {limit:,}; "
                            "write such a number with an exponent (1e100000 is inf in float64)")


def _kind_of(item: Any) -> str:
    """A JSON value that is not a number, as a message names it (a string by an excerpt)."""
    if isinstance(item, str):
        return f"the string {excerpt(item)}"
    if isinstance(item, bool):
        return "true" if item else "false"
    return "a list" if isinstance(item, list) else "an object" if isinstance(item, dict) else "null" if item is None else "a value"


def _nested_shape(data: Any, path: Path) -> tuple[int, ...]:
    """The shape of nested lists, level by level (no recursion), checked against the cap
    before any array is made; ragged lists and non-numbers are errors."""
    shape: list[int] = []
    probe = data
    while isinstance(probe, list):
        shape.append(len(probe))
        if not probe:
            break
        probe = probe[0]
    level = [data]
    for depth, length in enumerate(shape):
        below: list[Any] = []
        for item in level:
            if not isinstance(item, list) or len(item) != length:
                found = f"a list of {len(item)}" if isinstance(item, list) else "a number"
                raise file_error(path, f"ragged nested lists: at depth {depth + 1} found {found} where the first has {length}")
            below.extend(item)
        check_size(shape[: depth + 1], f"the array in {path}")
        level = below
    for item in level:
        if item not in NONFINITE and (isinstance(item, (list, bool)) or not isinstance(item, (int, float))):
            what = _kind_of(item)
            raise file_error(path, f"ragged nested lists or a non-number: found {what} where a number belongs")
    return tuple(shape)
