"""Run a gradcalc command for a test as a process of its own, without paying Python's,
NumPy's (and with the engine extras, JAX's and PyTorch's) start-up each time.

A test of the command line wants what a user's shell gets: a separate process with its
own standard streams, environment, working directory, signals and exit status. Starting
one costs 0.25 s (3 s with JAX or PyTorch imported) on a two-core machine, and the suite
starts about 1,700 of them: most of the time CI took. So each xdist worker keeps one
server process, started as `gradcalc` itself starts (the same interpreter and
environment) that imports gradcalc's modules and the engine libraries, and then only
forks: each command is a child of it, given the test's pipes as fds 0, 1 and 2 and the
test's argv, environment and directory, which runs the command's entry point and exits
with its status, as multiprocessing's forkserver does. The server never runs a command
itself, so each child starts from the state a fresh `gradcalc` starts from, with its
imports done. (Importing JAX and PyTorch starts no threads; each child starts its own.)

What a fork cannot give, a real start does: a command whose environment changes what
Python or a library reads when it starts (_STARTUP below) runs as a real process, and so does
every command when GRADCALC_TEST_LAUNCH=exec. Tests of the start-up itself, of signals,
terminals and closed streams start the real `gradcalc` with subprocess, as before.
"""
from __future__ import annotations

import os
import pickle
import selectors
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

BIN = Path(sys.executable).with_name("gradcalc")
GRADCALC = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "gradcalc.cli"]
_ARGV0 = str(BIN) if BIN.exists() else "gradcalc"  # a forked child's sys.argv[0]
# Read as a process starts, by Python itself or by the libraries as they load (threads,
# allocators, JAX's configuration): a child of the server has the server's.
_STARTUP = ("PYTHON", "LANG", "LC_", "OPENBLAS_", "OMP_", "MKL_", "JAX_", "XLA_", "TORCH", "MALLOC_")


def run(args: list[str], *, input: str | bytes | None = None, env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None, timeout: float | None = None,
        text: bool = True, merged: bool = False, **popen: object) -> subprocess.CompletedProcess:
    """subprocess.run([*GRADCALC, *args], capture_output=True, ...), by a fork of the server;
    by subprocess itself where anything else is asked of the process (preexec_fn, an
    encoding) or where the environment differs in what is read at start-up. `merged`:
    stderr into stdout, in the order written (a shell's `2>&1`)."""
    environment = dict(os.environ if env is None else env)
    if popen or os.environ.get("GRADCALC_TEST_LAUNCH") == "exec" or _startup_differs(environment):
        streams = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT} if merged else {"capture_output": True}
        return subprocess.run([*GRADCALC, *args], input=input, env=environment, cwd=cwd,  # type: ignore[call-overload]
                              timeout=timeout, text=text, **streams, **popen)
    data = input.encode() if isinstance(input, str) else input
    returncode, out, err = _server().run([_ARGV0, *args], data, environment, str(cwd or os.getcwd()), timeout, merged)
    if text:
        out, err = _decoded(out), _decoded(err)
    return subprocess.CompletedProcess([*GRADCALC, *args], returncode, out, err)


def _startup_differs(environment: dict[str, str]) -> bool:
    def startup(e: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in e.items() if k.startswith(_STARTUP)}
    return startup(environment) != startup(_Server.started_with)


def _decoded(data: bytes) -> str:
    # as subprocess's text mode: the locale's encoding, universal newlines
    import locale

    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


class _Server:
    started_with: dict[str, str] = dict(os.environ)
    _current: _Server | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.socket = ours
        self.process = subprocess.Popen([sys.executable, "-c", f"from tests.launch import serve; serve({theirs.fileno()})"],
                                        pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, cwd=Path(__file__).resolve().parent.parent,
                                        env=_Server.started_with)
        theirs.close()
        self.reader = self.socket.makefile("rb")

    def run(self, argv: list[str], data: bytes | None, env: dict[str, str], cwd: str,
            timeout: float | None, merged: bool) -> tuple[int, bytes, bytes]:
        with _Server._lock:
            stdin_r, stdin_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            if merged:  # (the stderr pipe is left with no writer: empty)
                os.close(err_w)
                err_w = os.dup(out_w)
            request = pickle.dumps((argv, env, cwd))
            socket.send_fds(self.socket, [len(request).to_bytes(8, "big") + request], [stdin_r, out_w, err_w])
            for fd in (stdin_r, out_w, err_w):
                os.close(fd)
            pid = pickle.load(self.reader)
            if isinstance(pid, str):  # the server could not fork
                for fd in (stdin_w, out_r, err_r):
                    os.close(fd)
                raise RuntimeError(pid)
            try:
                out, err = _communicate(stdin_w, out_r, err_r, data, timeout)
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                pickle.load(self.reader)
                raise subprocess.TimeoutExpired(argv, timeout) from None
            status = pickle.load(self.reader)
            return os.waitstatus_to_exitcode(status), out, err


def _server() -> _Server:
    server = _Server._current
    if server is not None and server.process.poll() is not None:
        raise RuntimeError(f"the test's gradcalc server exited with status {server.process.returncode}")
    if server is None:
        server = _Server._current = _Server()
    return server


def _communicate(stdin_w: int, out_r: int, err_r: int, data: bytes | None, timeout: float | None) -> tuple[bytes, bytes]:
    """Write the input and read both outputs to their ends (as Popen.communicate)."""
    import time

    deadline = None if timeout is None else time.monotonic() + timeout
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    pending = memoryview(data or b"")
    with selectors.DefaultSelector() as selector:
        selector.register(out_r, selectors.EVENT_READ)
        selector.register(err_r, selectors.EVENT_READ)
        if pending:
            os.set_blocking(stdin_w, False)
            selector.register(stdin_w, selectors.EVENT_WRITE)
        else:
            os.close(stdin_w)
        try:
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired("gradcalc", timeout or 0)
                for key, _ in selector.select(left):
                    fd = key.fd
                    if fd == stdin_w:
                        try:
                            pending = pending[os.write(fd, pending[:65536]):]
                        except BrokenPipeError:
                            pending = pending[:0]
                        if not pending:
                            selector.unregister(fd)
                            os.close(fd)
                        continue
                    chunk = os.read(fd, 65536)
                    if chunk:
                        chunks[fd].append(chunk)
                    else:
                        selector.unregister(fd)
                        os.close(fd)
        finally:
            for key in list(selector.get_map().values()):
                os.close(key.fd)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r])


# ---- the server -------------------------------------------------------------------------------


def serve(fd: int) -> None:
    """Import what the commands import, then fork a child for each request until the test
    process closes the socket."""
    # as the `gradcalc` script's: its folder first on the path, not the folder the server started in
    sys.path[0] = str(BIN.parent)
    _preload()
    # A fresh `gradcalc` has no exit handlers of libraries it did not import (JAX's and
    # PyTorch's take 50 ms), and its collector does not walk the server's objects (which a
    # child would copy page by page).
    import atexit
    import gc

    atexit._clear()
    gc.freeze()
    sock = socket.socket(fileno=fd)
    writer = sock.makefile("wb")
    while True:
        try:
            head, fds, _, _ = socket.recv_fds(sock, 8, 3)
        except OSError:
            return
        if not head:
            return
        size = int.from_bytes(head, "big")
        body = b""
        while len(body) < size:
            part = sock.recv(size - len(body))
            if not part:
                return
            body += part
        argv, env, cwd = pickle.loads(body)
        try:
            pid = os.fork()
        except OSError as err:
            pickle.dump(f"fork failed: {err}", writer)
            writer.flush()
            continue
        if pid == 0:
            sock.close()
            _child(argv, env, cwd, fds)
        for f in fds:
            os.close(f)
        pickle.dump(pid, writer)
        writer.flush()
        _, status = os.waitpid(pid, 0)
        pickle.dump(status, writer)
        writer.flush()


def _preload() -> None:
    import importlib
    import pkgutil

    # (gradcalc's three packages, each walked: an editable install's gradcalc has no folder of its own)
    packages = [importlib.import_module(f"gradcalc.{name}") for name in ("autodiff", "parser", "cli")]
    for module in (m for p in packages for m in pkgutil.walk_packages(p.__path__, f"{p.__name__}.")):
        if module.name.endswith("__main__"):  # (runs the command)
            continue
        try:
            importlib.import_module(module.name)
        except Exception:  # noqa: BLE001,S112 (an optional library's adapters: a child imports them, or says it cannot)
            continue


def _child(argv: list[str], env: dict[str, str], cwd: str, fds: list[int]) -> None:
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(argv)
        from gradcalc.cli.entry import run as entry

        code = _exit_code(entry())
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:
        # as Python does when KeyboardInterrupt ends a program: killed by SIGINT
        import traceback

        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 1
    try:
        import atexit
        import threading

        threading._shutdown()  # type: ignore[attr-defined]  # (as Python's exit: its threads, then its exit handlers)
        atexit._run_exitfuncs()
    finally:
        os._exit(code if _flush() else 120)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _flush() -> bool:
    """Flush the standard streams as Python does at exit; False where stdout could not be."""
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            ok = ok and stream is not sys.stdout
    return ok
