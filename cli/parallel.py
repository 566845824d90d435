"""`gradcalc check -j N`: files, and the checks of one large file, over N worker processes.

The batch is cut into parts (see check_runner.Part): a small file is one part, a large one
is cut between checks. Results are put back in file and statement order, so the report,
exit status, JSON and JUnit are those of a serial run (apart from times). Workers are
started with "spawn" (no fork of a process that may be running a progress-bar thread)
and receive the element cap, the step budget and the bindings once, when they start.
"""
from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gradcalc.autodiff.limits import max_elements, max_input_bytes, max_memory, max_seconds, max_steps
from gradcalc.parser.datafiles import files_read, note_files_read

from .check_runner import Part, check_indices, compile_file, run_part
from .common import prepare_engine, usage_error

if TYPE_CHECKING:
    from gradcalc.parser.check_statements import CheckDefaults, CheckOutcome

    from .dataio import Bound

PARTS_PER_WORKER = 4  # smaller parts balance the load; each repeats its file's setup
MIN_PART = 8  # checks: below this a part is not worth its setup


def worker_count(jobs: int) -> int:
    """-j 0 means one worker per core this process may use."""
    if jobs > 0:
        return jobs
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def plan(sources: list[tuple[str, str]], workers: int, min_part: int = MIN_PART) -> list[Part]:
    """Parts in file and statement order."""
    compiled = [(origin, source, compile_file(origin, source)[0]) for origin, source in sources]
    total = sum(len(check_indices(p)) for _, _, p in compiled if p is not None)
    size = max(min_part, math.ceil(total / (workers * PARTS_PER_WORKER))) if workers > 1 else max(total, 1)
    parts = []
    for origin, source, program in compiled:
        checks = check_indices(program) if program is not None else []
        if len(checks) <= size:
            parts.append(Part(origin, source, 0, None))
            continue
        first = 0
        for start in range(0, len(checks), size):
            chunk = checks[start:start + size]
            stop = None if start + size >= len(checks) else chunk[-1] + 1
            parts.append(Part(origin, source, first, stop))
            first = stop or 0
    return parts


def run_checks(
    sources: list[tuple[str, str]], defaults: CheckDefaults, bound: Bound, jobs: int = 1,
    advance: Callable[[], None] = lambda: None,
) -> list[tuple[str, list[CheckOutcome]]]:
    """Every check of every file, grouped by file in the order given."""
    workers = worker_count(jobs)
    parts = plan(sources, workers)
    if workers == 1 or len(parts) == 1:
        done = [run_part(part, defaults, bound, on_outcome=lambda _o: advance()) for part in parts]
    else:
        done = _in_workers(parts, defaults, bound, min(workers, len(parts)), advance)
    grouped: list[tuple[str, list[CheckOutcome]]] = []
    for part, outcomes in zip(parts, done):
        if part.first == 0:  # a file's first part
            grouped.append((part.origin, []))
        grouped[-1][1].extend(outcomes)
    return grouped


def _in_workers(parts: list[Part], defaults: CheckDefaults, bound: Bound, workers: int, advance: Callable[[], None]) -> list[list[CheckOutcome]]:
    import multiprocessing  # (only -j N needs these)
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    done: list[list[CheckOutcome]] = [[] for _ in parts]
    context = multiprocessing.get_context("spawn")
    limits = (max_elements(), max_steps(), max_input_bytes(), max_seconds(), max_memory())
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(limits, defaults, bound)) as pool:
        try:
            with _interrupts_held():  # the workers start (at the first submit) with Ctrl-C blocked
                futures = {pool.submit(_run_in_worker, part): k for k, part in enumerate(parts)}
            for future in as_completed(futures):
                done[futures[future]], read = future.result()
                note_files_read(read)  # what the worker's load()s read: no report may replace it
                for _ in done[futures[future]]:
                    advance()
        except BrokenProcessPool:
            usage_error("a worker process died (killed, or out of memory?); run with -j 1 to find the check")
        except BaseException:  # Ctrl-C: stop the workers rather than wait for them
            _stop_workers(pool)
            raise
    return done


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """SIGINT blocked while the workers are started: a process inherits the signal mask,
    so Ctrl-C (sent to the whole process group) never reaches a worker, which would print
    a KeyboardInterrupt traceback of its own; the command stops them (_stop_workers). A
    Ctrl-C that comes meanwhile is delivered to this process when the block ends."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _stop_workers(pool: Any) -> None:
    """Ctrl-C: end the workers at once (they never see SIGINT: _interrupts_held) and
    wait for the pool to notice, so that the command can leave with `interrupted`."""
    import multiprocessing

    for process in multiprocessing.active_children():
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


_worker_state: tuple[CheckDefaults, Bound] | None = None


def _start_worker(limits: tuple[int, int, int, float, int], defaults: CheckDefaults, bound: Bound) -> None:
    global _worker_state
    prepare_engine(*limits)  # the command's limits and budgets, and NumPy kept quiet
    _worker_state = (defaults, bound)


def _run_in_worker(part: Part) -> tuple[list[CheckOutcome], list[tuple[str, tuple[int, int] | None]]]:
    assert _worker_state is not None
    return run_part(part, *_worker_state), files_read()
