"""Standard streams that fail in ways a user can act on.

click turns a broken pipe into exit status 1 (the "check failed" status) and Ctrl-C into
a silent 130; gradcalc wants a quiet exit that is not 1 for the first, and `interrupted`
for the second. Both are raised past click as exceptions it does not know. A write to
stderr that fails has nowhere to be reported: it is dropped, and the command ends with
its own status.
"""
from __future__ import annotations

import codecs
import contextlib
import errno
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

BROKEN_PIPE_STATUS = 128 + signal.SIGPIPE  # what a shell reports for a process killed by SIGPIPE


class StdoutError(Exception):
    """Writing to stdout failed (not an OSError, so that click lets it through)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror)
        self.error = error


class Interrupted(BaseException):
    """Ctrl-C (SIGINT) while a command runs; click catches KeyboardInterrupt itself."""


class _GuardedStream:
    """stdout: a failed write raises StdoutError."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as err:
            self._failed(err)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as err:
            self._failed(err)

    def _failed(self, err: OSError) -> None:
        raise StdoutError(err) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _QuietStream(_GuardedStream):
    """stderr: a failed write (its reader gone, `gradcalc eval nosuch 2>&1 | true`, or a
    full disk) is dropped, and so is the rest, so that the error being reported keeps its
    own exit status. Raised, it would end in the internal-error handler, whose own line
    fails too, and Python would exit 1, the "a check failed" status."""

    def _failed(self, err: OSError) -> None:
        _discard(self._stream)


def guard_stdout() -> None:
    """Guard stdout and stderr (both named here: the entry point calls this alone)."""
    if not isinstance(sys.stdout, _GuardedStream):
        _write_any_character(sys.stdout)
        sys.stdout = _GuardedStream(sys.stdout)  # type: ignore[assignment]
    if sys.stderr is not None and not isinstance(sys.stderr, _GuardedStream):
        sys.stderr = _QuietStream(sys.stderr)  # type: ignore[assignment]


_ESCAPE_ERRORS = "gradcalc.escape"


def _escape(err: UnicodeError) -> tuple[str | bytes, int]:
    """The replacement for a character stdout's encoding cannot hold (ε or é in an ASCII or
    Latin-1 locale, braille anywhere but UTF-8). A byte of a file name or argument that was
    not valid text (decoded as U+DC80..U+DCFF, Python's surrogateescape) goes out as that
    byte, so the name reads as it did; any other character as a Python escape (\\u03b5), as
    stderr writes it."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    char = err.object[err.start]
    if 0xDC80 <= ord(char) <= 0xDCFF:
        return bytes([ord(char) - 0xDC00]), err.start + 1
    return char.encode("ascii", "backslashreplace").decode("ascii"), err.start + 1


def _write_any_character(stream: Any) -> None:
    """Make `stream` write every character, escaping what its encoding cannot hold: a report
    holds ε, ─ and a user's names, and a UnicodeEncodeError midway would end the command as
    an internal error with half its output. An error handler the user chose (other than
    Python's defaults, strict and, in a C locale, surrogateescape) is kept."""
    if getattr(stream, "errors", None) not in ("strict", "surrogateescape") or not hasattr(stream, "reconfigure"):
        return
    codecs.register_error(_ESCAPE_ERRORS, _escape)
    with contextlib.suppress(OSError, ValueError):  # (a closed stdout fails later, where it says so)
        stream.reconfigure(errors=_ESCAPE_ERRORS)


def output_failed(err: OSError) -> int:
    """Stop writing to stdout for good and return the exit status: quiet for a reader that
    went away (`| head`), one line on stderr for anything else (a full disk)."""
    _discard(sys.__stdout__)
    if err.errno == errno.EPIPE:
        return BROKEN_PIPE_STATUS
    print(f"error: cannot write to stdout: {err.strerror or err}", file=sys.stderr)
    return 2


def _discard(stream: Any) -> None:
    """Send what is still buffered for `stream`, and all that follows, nowhere: a flush at
    exit that failed again would print Python's own complaint and exit 120."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it. A large write into such a pipe
    can end quietly: the kernel takes part of it before the reader leaves, Python counts
    that as written, and only the next write would fail (`gradcalc plot ... --points
    100000 | head -1`, whose CSV is one write). Asked once, after the last write."""
    import select
    import stat

    if sys.__stdout__ is None:
        return False
    try:
        fd = sys.__stdout__.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


@contextlib.contextmanager
def interrupt_handler() -> Iterator[None]:
    """Ctrl-C raises Interrupted inside the block. A file-size limit (RLIMIT_FSIZE) makes
    writes fail with an error instead of killing the process (SIGXFSZ)."""
    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted()

    previous = signal.signal(signal.SIGINT, interrupt)
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
