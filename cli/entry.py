"""The console-script entry point, and the plain path that reads a command without typer.

Importing typer and building its command tree costs about a third of what importing
NumPy does, which was most of a one-shot command's own start-up (docs/performance.md).
So an invocation that the declarations in cli/options.py read unambiguously (known
options with values of the declared kind and range, positional arguments that do not
start with a dash) calls the command's action directly. Anything else (`--help`, an
unknown option, a value typer would refuse, `--`, `--version`, shell completion) goes
through typer, built from the same declarations, which says what is wrong.
"""
from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from typing import Any

from .options import COMMANDS, GLOBAL_OPTIONS, Command, Option, OptionError
from .streams import Interrupted, StdoutError, guard_stdout, interrupt_handler, output_failed, reader_gone

COMPLETION_VARIABLE = "_GRADCALC_COMPLETE"  # typer's shell completion asks through it
_GLOBAL = {name: option for option in GLOBAL_OPTIONS for name in option.names}


def plain_call(argv: list[str]) -> Callable[[], int] | None:
    """The action `argv` asks for, when typer is not needed to understand it."""
    if COMPLETION_VARIABLE in os.environ:
        return None
    given: dict[str, Any] = {}  # the global options before the command
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i = _read_option(_GLOBAL, argv, i, given)
        if i < 0:
            return None
    if i == len(argv):
        from .actions import default_action

        values = {option.key: given.get(option.key, option.default) for option in GLOBAL_OPTIONS}
        return lambda: default_action(**values)
    command = COMMANDS.get(argv[i])
    if command is None:
        return None
    return _command_call(command, argv[i + 1 :], given)


def _command_call(command: Command, argv: list[str], given: dict[str, Any]) -> Callable[[], int] | None:
    options = {name: option for option in command.options for name in option.names}
    keys = {option.key for option in command.options}
    if not given.keys() <= keys:
        return None  # typer refuses a global option the command does not take
    values = {option.key: option.default for option in command.options}
    values.update(given)
    positional: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i].startswith("-") and argv[i] != "-":  # ("-" is stdin, an argument)
            i = _read_option(options, argv, i, values)
            if i < 0:
                return None
        else:
            positional.append(argv[i])
            i += 1
    for argument in command.arguments:
        if argument.many:
            taken, positional = positional, []
            if not taken and argument.required:
                return None  # typer reports the missing argument
            values[argument.key] = [_path(p) for p in taken] if argument.kind == "path" else (taken or None)
        elif positional:
            values[argument.key] = positional.pop(0)
        elif argument.required:
            return None  # typer reports the missing argument
        else:
            values[argument.key] = None
    if positional:
        return None  # typer reports the extra argument
    action = command.function()
    return lambda: action(**values)


def _read_option(options: dict[str, Option], argv: list[str], i: int, values: dict[str, Any]) -> int:
    """Store the option at argv[i] (and its value) in `values`; the index after it, or -1
    when typer should read it (unknown, missing or unreadable value, out of range)."""
    name, equals, attached = argv[i].partition("=")
    option = options.get(name)
    if option is None:
        return -1
    if option.kind == "flag":
        if equals:
            return -1
        values[option.key] = True
        return i + 1
    if equals:
        text, after = attached, i + 1
    elif i + 1 < len(argv) and (argv[i + 1] == "-" or not argv[i + 1].startswith("-")):
        text, after = argv[i + 1], i + 2
    else:
        return -1
    value = _value(option, text)
    if value is None:
        return -1
    values[option.key] = value
    return after


def _value(option: Option, text: str) -> Any:
    """`text` as the option's kind, or None when it is not a valid one (typer then says why,
    in the declaration's words)."""
    try:
        value = option.read(text)
    except OptionError:
        return None
    return _path(value) if option.kind == "path" else value


def _path(text: str) -> Any:
    from pathlib import Path  # here: an eval needs no paths, and pathlib is slow to import

    return Path(text)


def _dispatch(argv: list[str]) -> Any:
    """Run the command `argv` names; returns its exit status."""
    action = plain_call(argv)
    if action is not None:
        return action()
    from .main import app, protect_expression

    try:
        app(args=protect_expression(argv), prog_name="gradcalc")
    except SystemExit as exit:
        return exit.code
    return 0


def run() -> None:
    """Console-script entry point. A bug in gradcalc shows as one line, not a traceback,
    unless GRADCALC_DEBUG is set; Ctrl-C prints `interrupted` and exits 130; output that
    cannot be written (a closed pipe, a full disk) ends the command quietly or in one line."""
    if sys.stdout is None:
        print("error: stdout is closed; gradcalc needs somewhere to print", file=sys.stderr)
        raise SystemExit(2)
    guard_stdout()
    code: Any = 0
    try:
        with interrupt_handler():
            try:
                code = _dispatch(sys.argv[1:])
            except SystemExit as exit:
                code = exit.code
            sys.stdout.flush()
            if reader_gone():
                code = output_failed(OSError(errno.EPIPE, "Broken pipe"))
    except (Interrupted, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        code = 130
    except StdoutError as err:
        code = output_failed(err.error)
    except MemoryError:  # the machine's memory (or a ulimit) ran out outside any statement's budget
        print("error: out of memory (lower --max-elements or --max-memory so that gradcalc refuses sooner)", file=sys.stderr)
        code = 2
    except Exception as err:  # noqa: BLE001 - the last line of defence for users
        if os.environ.get("GRADCALC_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err} (a gradcalc bug; run with GRADCALC_DEBUG=1 for details)", file=sys.stderr)
        code = 2
    raise SystemExit(code)
