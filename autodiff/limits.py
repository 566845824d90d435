"""Limits that keep one command from eating the machine: an element cap and a step budget.

The element cap: a calculator must refuse `zeros(10**5, 10**5)` before allocating it.
Every op's result is checked before its forward runs (`wiring.apply`, with the op's
`out_shape` hook when its result can be larger than its broadcast inputs), and so are the
Jacobians that `jacobian`, `hessian` and gradient checks build.

The step budget: `def f(n) = f(n-1) + f(n-1) if n > 0 else 1; f(40)` allocates nothing
big, it just never ends. Inside `step_budget()` every instruction of the language's
machine, every engine op (`apply`) and every node a backward or forward pass visits
counts one step; past the budget, StepLimitError. Outside it (the engine used as a
library) nothing is counted.

The time and memory budgets are looked at every CHUNK steps, and, where the platform has
interval timers, also every WAKE seconds of CPU time (see `_Alarm`): a statement of a few
huge ops (a forward pass over a batch of 10^6 tangents) takes few steps, and would
otherwise run for minutes between two looks at the clock.
"""
from __future__ import annotations

import math
import os as _os
import time
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from .errors import SizeLimitError
from .shapes import broadcast_shapes

DEFAULT_MAX_ELEMENTS = 10**7
DEFAULT_MAX_STEPS = 10**7
DEFAULT_MAX_INPUT_BYTES = 50_000_000  # a script or data file larger than this is refused (a link to /dev/zero)
_max_elements = DEFAULT_MAX_ELEMENTS
_max_input_bytes = DEFAULT_MAX_INPUT_BYTES


def max_input_bytes() -> int:
    """The most bytes a command reads from one script or data file."""
    return _max_input_bytes


def set_max_input_bytes(n: int) -> int:
    """Set the byte limit of files read and return the previous one."""
    global _max_input_bytes
    if n < 1:
        raise ValueError("the input limit must be at least 1 byte")
    previous, _max_input_bytes = _max_input_bytes, int(n)
    return previous

MAX_DIMENSIONS = 64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32  # NumPy's own limit

# A result tensor costs memory beyond its numbers (the Python objects, about 200 bytes):
# an op with many outputs (`split` into 10^7 sections) is charged this many elements for
# each output that is smaller.
OUTPUT_COST = 32


def max_elements() -> int:
    return _max_elements


def set_max_elements(n: int) -> int:
    """Set the cap and return the previous one (so callers can restore it)."""
    global _max_elements
    if n < 1:
        raise ValueError("the element cap must be at least 1")
    previous, _max_elements = _max_elements, int(n)
    return previous


def cost(dims: Sequence[int]) -> int:
    """What a tensor of this shape is charged against the cap: its number of elements,
    with empty dimensions counted as 1. A (10**10, 0) tensor holds no numbers, but
    everything that walks it row by row (printing, JSON's nested lists) makes 10**10
    empty rows, and `sum(zeros(0, 10**10), axis=0)` would make 10**10 zeros: it costs as
    much as a (10**10,) one. Raises SizeLimitError for a negative dimension."""
    n = 1
    for d in dims:
        d = int(d)  # a NumPy integer would overflow the product silently
        if d > 1:
            n *= d
        elif d < 0:
            raise SizeLimitError(f"negative dimension in shape {tuple(map(int, dims))}")
    return n


def check_size(shape: Sequence[int], what: str) -> None:
    """Raise SizeLimitError if a tensor of `shape` would be larger than the cap."""
    try:
        n = cost(shape)
    except SizeLimitError as err:
        raise SizeLimitError(f"{what}: {err}") from None
    if len(shape) > MAX_DIMENSIONS:  # lists nested 65 deep, say
        raise SizeLimitError(f"{what}: a tensor of {len(shape)} dimensions; at most {MAX_DIMENSIONS} are possible")
    if n > _max_elements:
        dims = tuple(map(int, shape))
        size = f"{_many(n)} elements" if math.prod(dims) == n else f"0 elements, counted as {_many(n)} (an empty dimension counts as 1)"
        shown = str(dims) if max(dims) < 10**18 else f"({', '.join(map(_many, dims))})"
        raise SizeLimitError(f"{what}: a tensor of shape {shown} would have {size}, over the cap of {_max_elements:,} (--max-elements raises it)")


def _many(n: int) -> str:
    """A count as a user reads it: digits in groups, or 1.209e+24 once they are too many
    (arange(-1e300, 1e300) asks for 2e300 elements)."""
    if n < 10**18:
        return f"{n:,}"
    from decimal import Decimal  # here, on an error's path: importing it costs every command's start-up 1.6%

    return f"{Decimal(n):.3e}"


def check_outputs(count: int, shape: Sequence[int], what: str) -> None:
    """Raise SizeLimitError if `count` results of `shape` each would be over the cap."""
    check_size(shape, what)
    total = count * max(cost(shape), OUTPUT_COST)
    if total > _max_elements:
        raise SizeLimitError(
            f"{what}: {count:,} results of shape {tuple(shape)} are over the cap of {_max_elements:,} elements "
            f"(each result counts as at least {OUTPUT_COST}; --max-elements raises the cap)"
        )


# ---- predicted shapes, for ops whose result can outgrow their inputs ----------------------


def matmul_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """The shape of a @ b (NumPy's rules: 1-d operands are vectors, leading axes broadcast).
    A mismatch is left for the forward to report."""
    a, b = tuple(a), tuple(b)
    if len(a) == 2 and len(b) == 2:  # two matrices, the common case
        return (a[0], b[1])
    if not a or not b:
        return a or b
    lead_a, lead_b = (a[:-2], b[:-2])
    rows = a[-2:-1] if len(a) > 1 else ()
    cols = b[-1:] if len(b) > 1 else ()
    if lead_a == lead_b or not lead_b:  # matrices (the common case) need no broadcasting
        batch = lead_a
    elif not lead_a:
        batch = lead_b
    else:
        try:
            batch = broadcast_shapes(lead_a, lead_b)
        except ValueError:
            batch = ()
    return (*batch, *rows, *cols)


def joined_shape(shapes: Sequence[Sequence[int]], axis: int, new_axis: bool) -> tuple[int, ...]:
    """The shape of concatenate (new_axis False) or stack (True) of tensors of `shapes`."""
    if not shapes:
        return (0,)
    first = tuple(shapes[0])
    if new_axis:
        axis = axis % (len(first) + 1) if -len(first) - 1 <= axis <= len(first) else 0
        return (*first[:axis], len(shapes), *first[axis:])
    if not first:
        return first
    axis = axis % len(first) if -len(first) <= axis < len(first) else 0
    return (*first[:axis], sum(int(s[axis]) if len(s) > axis else 0 for s in shapes), *first[axis + 1 :])


def indexed_shape(shape: Sequence[int], index: Any) -> tuple[int, ...]:
    """The shape of x[index] for x of `shape`, worked out from the index alone.

    Basic parts (ints, slices, None, ...) keep, drop or add axes; the integer and boolean
    arrays (and ints, when there are arrays) broadcast together to one block of axes,
    placed where NumPy places it: in place when they are adjacent, first otherwise. Nothing of the size of the
    result is built. A malformed index is left for the forward to report."""
    parts = index if isinstance(index, tuple) else (index,)
    used = 0  # the axes of x the parts take up
    has_arrays = False
    for p in parts:  # (one loop, not a sum and an any of generators: x[:, 0] is in every training step)
        if isinstance(p, np.ndarray):
            has_arrays = True
            used += p.ndim if p.dtype == bool else 1
        elif p is not None and p is not Ellipsis:
            used += 1
    dims = list(shape)
    out: list[int] = []
    arrays: list[tuple[int, ...]] = []
    first_array = -1
    last_kind = ""
    separated = False
    axis = 0
    for p in parts:
        if p is Ellipsis:
            for _ in range(max(len(dims) - used, 0)):
                out.append(dims[axis] if axis < len(dims) else 1)
                axis += 1
            last_kind = "basic"
            continue
        if p is None:
            out.append(1)
            last_kind = "basic"
            continue
        if isinstance(p, slice):
            n = dims[axis] if axis < len(dims) else 0
            out.append(len(range(*p.indices(n))))
            axis += 1
            last_kind = "basic"
            continue
        if isinstance(p, (int, np.integer)) and not has_arrays:
            axis += 1
            last_kind = "int"
            continue
        array = np.asarray(p)  # with arrays about, an int is one too (of shape ())
        if array.dtype == bool:
            arrays.append((int(np.count_nonzero(array)),))
            axis += max(array.ndim, 1)
        else:
            arrays.append(array.shape)
            axis += 1
        if first_array < 0:
            first_array = len(out)
        elif last_kind == "basic":
            separated = True
        last_kind = "array"
    out.extend(dims[axis:])
    if not arrays:
        return tuple(out)
    try:
        block = tuple(broadcast_shapes(*arrays))
    except ValueError:
        return tuple(out)
    if separated:
        return (*block, *out)
    return (*out[:first_array], *block, *out[first_array:])


# ---- the statement's budgets: steps, time, memory ----------------------------------------


class StepLimitError(SizeLimitError):
    """A statement ran more steps than the budget allows."""

    kind = "steps"


class TimeLimitError(StepLimitError):
    """A statement ran longer than its time budget."""

    kind = "time"


class MemoryLimitError(StepLimitError):
    """A statement took gradcalc's memory over its budget."""

    kind = "memory"


DEFAULT_MAX_SECONDS = 5.0
DEFAULT_MAX_MEMORY = 2_000_000_000  # bytes
CHUNK = 10_000  # steps between looks at the clock and the memory
BIG_RESULT = 1 << 17  # elements (1 MiB of float64): a result this large makes apply look at the memory


class StepBudget:
    """The running statement's budget: `left` counts down the steps of the current chunk
    (`inf` when no budget is running). At the end of a chunk, `spent` adds it up and
    looks at the clock and the memory: the hot paths (apply, the machine's loop, the
    backward and forward passes) pay one subtraction and one comparison per step for all
    three limits. `finished` is what the last statement spent, (steps, CPU seconds), for
    the passes of its report, which continue its budget (`continued_budget`)."""

    __slots__ = ("left", "limit", "granted", "used", "seconds", "deadline", "memory", "started", "finished", "over", "peak", "base")

    def __init__(self) -> None:
        self.left: float = math.inf
        self.limit = DEFAULT_MAX_STEPS
        self.granted = 0  # steps the current chunk started with
        self.used = 0  # steps of the chunks before it
        self.seconds = DEFAULT_MAX_SECONDS
        self.deadline = math.inf  # process CPU time at which the statement is over its time
        self.memory = DEFAULT_MAX_MEMORY
        self.started = 0.0  # process CPU time at which the budget started (less what it continues)
        self.finished: tuple[int, float, int] = (0, 0.0, -1)
        # The memory the process held when the statement was first looked at (-1: not yet),
        # what the statement is measured from: read at the first look rather than at every
        # statement's start (a microsecond; most statements are never looked at), it leaves
        # out what came before that look, at most an op result or 20 ms of work.
        self.base = -1
        self.over: StepLimitError | None = None  # the error of a budget that is over, raised again at every step
        self.peak = 0  # memory over the budget that the alarm saw (a peak may be gone by the next step)

    def start(self, used: int = 0, seconds_used: float = 0.0, base: int = -1) -> None:
        """A fresh budget, or (`used` steps, `seconds_used` CPU seconds, from `base` bytes
        of memory) one that goes on."""
        now = time.process_time()
        self.over, self.peak = None, 0
        self.base = base
        self.used, self.granted = used, max(min(CHUNK, self.limit - used), 0)
        self.left = self.granted
        self.started = now - seconds_used
        self.deadline = self.started + self.seconds
        if not _ALARM.armed:
            _ALARM.arm()

    def stop(self) -> None:
        """The budget ends: remember what it spent (`finished`) and stop counting."""
        left = self.left if self.left >= 0 else 0
        self.finished = (self.used + self.granted - int(left), time.process_time() - self.started, self.base)
        self.left, self.over = math.inf, None

    def taken(self) -> int:
        """The steps spent so far under the running budget."""
        return self.used + self.granted - int(self.left)

    def spent(self, where: str = "") -> None:
        """The current chunk is used up (`left` < 0): raise if a budget is over, else
        start the next chunk. A budget once over stays over until the statement ends: every
        later step raises the same error again, so that code which tries another way after
        an error (a batched replay falling back to one by one) cannot run on past it."""
        if self.over is not None:
            self.left = -1
            raise type(self.over)(*self.over.args)
        self.used += self.granted - int(self.left)
        if self.used > self.limit:
            self.exceeded(StepLimitError(
                f"{where + ': ' if where else ''}the statement ran over its budget of {self.limit:,} steps "
                f"(ops executed){RECURSION_GUESS} (--max-steps raises the budget)"
            ))
        if time.process_time() > self.deadline:
            self.exceeded(TimeLimitError(
                f"{where + ': ' if where else ''}the statement ran over its time budget of {self.seconds:g} "
                f"second{'' if self.seconds == 1 else 's'} of CPU time (after {self.used:,} steps{_time_hint(self.used)} "
                "(--max-seconds raises the budget)"
            ))
        check_memory(where)
        self.granted = min(CHUNK, self.limit - self.used)
        self.left = self.granted

    def exceeded(self, err: StepLimitError) -> NoReturn:
        """Raise `err`, and again at every later step of the statement."""
        self.over = err
        self.granted, self.left = 0, -1
        raise err


STEPS = StepBudget()
# What a budget's message guesses of a statement that ran many small steps; a loop, which
# says it ran too long as a whole, drops the guess (parser/machine.py).
RECURSION_GUESS = "; is a recursion doubling its work?"
# A statement that spent its time in this many steps or more was running many small ops
# (the time message asks about a recursion); in fewer than FEW_STEPS, a few large ones (it
# says so); in between (17,000 steps of a loop on the JAX engine, one dispatch each) neither.
MANY_STEPS = 100_000
FEW_STEPS = 2_000


def _time_hint(steps: int) -> str:
    """The end of the time budget's "(after N steps" and what those steps suggest."""
    if steps >= MANY_STEPS:
        return ")" + RECURSION_GUESS
    if steps < FEW_STEPS:
        return ", each on large tensors; CPU time counts every thread the matrix library runs)"
    return ")"


def set_max_steps(n: int) -> int:
    """Set the budget each statement gets and return the previous one."""
    if n < 1:
        raise ValueError("the step budget must be at least 1")
    previous, STEPS.limit = STEPS.limit, int(n)
    return previous


def max_steps() -> int:
    return STEPS.limit


def set_max_seconds(seconds: float) -> float:
    """Set the CPU seconds each statement may run and return the previous budget."""
    if not seconds > 0:
        raise ValueError("the time budget must be more than 0 seconds")
    previous, STEPS.seconds = STEPS.seconds, float(seconds)
    return previous


def max_seconds() -> float:
    return STEPS.seconds


def set_max_memory(n: int) -> int:
    """Set the bytes of memory gradcalc may hold while a statement runs; returns the previous budget."""
    if n < 1:
        raise ValueError("the memory budget must be at least 1 byte")
    previous, STEPS.memory = STEPS.memory, int(n)
    return previous


def max_memory() -> int:
    return STEPS.memory


def resident_bytes() -> int:
    """The memory the process holds now (its resident set), 0 where it cannot be read.
    Read from a file kept open (under a microsecond), opened again in a child process,
    whose /proc/self is another."""
    global _STATM
    try:
        if _STATM is None:
            _STATM = _os.open("/proc/self/statm", _os.O_RDONLY)
        return int(_os.pread(_STATM, 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


_STATM: int | None = None


def _statm_forgotten() -> None:
    global _STATM
    _STATM = None


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_statm_forgotten)


try:
    _PAGE = _os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):
    _PAGE = 4096


def check_memory(where: str = "") -> None:
    """Raise MemoryLimitError when, inside a statement, the process holds more than the
    memory budget beyond what it held when the statement started (registry.apply asks
    after every result of BIG_RESULT elements or more, the step budget every CHUNK steps,
    the alarm every WAKE seconds). Counted from the statement's start, so that what the
    process held before (the libraries, a notebook's own arrays, earlier statements'
    values) is not charged to it."""
    if STEPS.left == math.inf:
        return  # not inside a statement: the engine used as a library
    held = max(resident_bytes(), STEPS.peak)
    if STEPS.base < 0:
        STEPS.base = held
    if held - STEPS.base > STEPS.memory:
        STEPS.exceeded(MemoryLimitError(
            f"{where + ': ' if where else ''}the statement took {held - STEPS.base:,} bytes of memory (the process's from "
            f"{STEPS.base:,} to {held:,}), over the budget of {STEPS.memory:,} (--max-memory raises it); "
            "a graph holds every intermediate tensor until the statement ends"
        ))


class step_budget:  # noqa: N801 - used as a function: `with step_budget():`
    """Count steps, time and memory against fresh budgets while the block runs (nested
    blocks share the outer one). A class rather than a @contextmanager generator, which
    costs twice as much: every statement enters one."""

    __slots__ = ("outer",)

    def __enter__(self) -> None:
        self.outer = STEPS.left != math.inf
        if not self.outer:
            STEPS.start()

    def __exit__(self, *exc: object) -> None:
        if not self.outer:
            STEPS.stop()


class continued_budget:  # noqa: N801 - used as a function: `with continued_budget():`
    """The budget of the statement that ran last, going on where it stopped, for the work
    done on its value after it (the backward and forward passes of its report, `--steps`):
    a statement and its report share one budget of steps, time and memory. Inside a
    running budget, the block shares that one."""

    __slots__ = ("outer",)

    def __enter__(self) -> None:
        self.outer = STEPS.left != math.inf
        if not self.outer:
            STEPS.start(*STEPS.finished)

    def __exit__(self, *exc: object) -> None:
        if not self.outer:
            STEPS.stop()


def charge(steps: int, where: str) -> None:
    """Spend `steps` of the running budget (work done outside `apply`, such as one
    backward pass per row of a Jacobian)."""
    STEPS.left -= steps
    if STEPS.left < 0:
        STEPS.spent(where)


# ---- a look at the clock and the memory every WAKE seconds of CPU time ------------------

WAKE = 0.02  # CPU seconds between two looks while a budget runs


class _Alarm:
    """An interval timer of the process's CPU time (ITIMER_PROF) whose signal looks at the
    clock and the memory of the running budget, and when either is over, ends the current
    chunk of steps (`left` = 0): the next step then raises, at a place where the step budget
    could have raised anyway. Nothing else changes, so a step count stays exact.

    Armed when a budget starts (the first time, the handler is installed: in the main
    thread, where no other handler or timer of SIGPROF is in place); it stays armed across
    statements and disarms itself when it rings with no budget running, so that outside
    gradcalc's statements (a notebook's other cells) at most one signal arrives. The
    handler is never removed while the timer may ring (the signal's default action would end
    the process), and the timer is stopped when Python exits. Where
    there are no interval timers (Windows) or the signal is someone else's, only the
    chunks of steps look."""

    __slots__ = ("armed", "usable")

    def __init__(self) -> None:
        self.armed = False
        self.usable: bool | None = None  # not yet known

    def arm(self) -> None:
        if self.usable is None:
            self.usable = _install()
        if self.usable:
            import signal

            signal.setitimer(signal.ITIMER_PROF, WAKE, WAKE)
            self.armed = True

    def disarm(self) -> None:
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_PROF, 0)
            self.armed = False


_ALARM = _Alarm()


def _install() -> bool:
    """Install the handler of SIGPROF if the signal is free here; whether it was."""
    try:
        import signal

        if signal.getitimer(signal.ITIMER_PROF)[0]:
            return False
        if signal.getsignal(signal.SIGPROF) not in (signal.SIG_DFL, signal.SIG_IGN, None):
            return False  # a profiler's
        signal.signal(signal.SIGPROF, _ring)  # (outside the main thread: ValueError, so not usable; no threading import at start-up)
    except (ImportError, AttributeError, ValueError, OSError):
        return False
    import atexit

    _os.register_at_fork(after_in_child=_forked)
    atexit.register(_at_exit)
    return True


def _at_exit() -> None:
    """Stop the timer, and ignore a signal it sent just before: Python's finalisation would
    restore SIGPROF's default action, which ends the process (under valgrind, whose signals
    arrive late, a session's last tick killed the process at exit)."""
    import signal

    _ALARM.disarm()
    if signal.getsignal(signal.SIGPROF) is _ring:
        signal.signal(signal.SIGPROF, signal.SIG_IGN)


def _forked() -> None:
    _ALARM.armed = False  # (a child process has no interval timers of its parent's)


def _ring(signum: int, frame: object) -> None:
    """SIGPROF: end the running chunk if the time or the memory is over."""
    steps = STEPS
    if steps.left == math.inf:
        _ALARM.disarm()  # no budget running: ring no more until one starts
        return
    if steps.left < 0:
        return  # (the step just taken is looking already)
    held = resident_bytes()
    if steps.base < 0:
        steps.base = held
    if held - steps.base > steps.memory:
        steps.peak = max(steps.peak, held)  # (what a batch held at its peak may be freed before the next step looks)
    if steps.peak or time.process_time() > steps.deadline:
        steps.granted -= int(steps.left)  # (the steps of the chunk not taken are not counted as spent)
        steps.left = 0

