"""The console-script entry point, and the plain one-shot path that skips typer.

Importing typer and building its command tree costs about a third of what importing
NumPy does, which was most of a one-shot command's own start-up (docs/performance.md).
So a plain invocation, one of the commands below with positional arguments and only the
flags listed for it, calls the command's action directly. Everything else (any other
option, `--help`, an argument that starts with a dash, options before the command,
shell completion) goes through typer as before. tests/test_entry.py checks that these
flags, and the actions' defaults, match the typer declarations in cli/main.py.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

# command -> {flag: the action's keyword it sets to True}
PLAIN_FLAGS: dict[str, dict[str, str]] = {
    "eval": {"--json": "as_json", "--tree": "tree", "--steps": "steps", "--full": "full"},
    "run": {"--json": "as_json", "--tree": "tree", "--full": "full"},
    "check": {"--json": "as_json"},
}
COMPLETION_VARIABLE = "_GRADCALC_COMPLETE"  # typer's shell completion asks through it


def plain_call(argv: list[str]) -> Callable[[], int] | None:
    """The action `argv` asks for, when typer is not needed to understand it."""
    if COMPLETION_VARIABLE in os.environ:
        return None
    if not argv:
        from .actions import default_action

        return default_action
    command, rest = argv[0], argv[1:]
    if command not in PLAIN_FLAGS:
        return None
    flags: dict[str, Any] = {}
    positional: list[str] = []
    for token in rest:
        if token in PLAIN_FLAGS[command]:
            flags[PLAIN_FLAGS[command][token]] = True
        elif token.startswith("-"):
            return None
        else:
            positional.append(token)
    if not positional:
        return None  # typer reports the missing argument
    if command == "eval":
        from .actions import eval_action

        return lambda: eval_action(positional[0], positional[1:], **flags)
    from pathlib import Path  # here: an eval needs no paths, and pathlib is slow to import

    if command == "run":
        from .actions import run_action

        return lambda: run_action([Path(p) for p in positional], **flags)
    from .checking import check_action

    return lambda: check_action([Path(p) for p in positional], **flags)


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
    from .streams import Interrupted, StdoutError, guard_stdout, interrupt_handler, output_failed

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
    except (Interrupted, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        code = 130
    except StdoutError as err:
        code = output_failed(err.error)
    except Exception as err:  # noqa: BLE001 - the last line of defence for users
        if os.environ.get("GRADCALC_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err} (a gradcalc bug; run with GRADCALC_DEBUG=1 for details)", file=sys.stderr)
        code = 2
    raise SystemExit(code)
