"""`gradcalc check --format github`: GitHub Actions workflow commands, so that a failing
check shows on the line of the diff that holds it.

    ::error file=examples/seed.gc,line=7,title=gradcheck failed::(a*b).relu() wrt a ...

Passing checks print as plain lines, so the log still lists every check. Escaping follows
GitHub's toolkit (@actions/core): '%', CR and LF in a message; also ':' and ',' in a
property value.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradcalc.parser.check_statements import CheckOutcome


def _message(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _message(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, outcome: CheckOutcome, title: str, message: str) -> str:
    where = [f"file={_property(outcome.file)}"] if outcome.file and not outcome.file.startswith("<") else []
    where += [f"line={outcome.line}", f"title={_property(title)}"]
    return f"::{kind} {','.join(where)}::{_message(message)}"


def github_lines(outcome: CheckOutcome, plain_line: str) -> list[str]:
    """What one outcome prints as: an error annotation for a failure or an error, a
    warning annotation per warning, the plain line for a pass."""
    lines = []
    if outcome.status == "fail":
        numbers = (f"max abs error {outcome.max_abs_error:.3g}, max rel error {outcome.max_rel_error:.3g} "
                   f"(atol {outcome.atol:g}, rtol {outcome.rtol:g}, {outcome.how})")
        detail = f"; {outcome.message}" if outcome.message else ""
        wrt = f" wrt {', '.join(outcome.variables)}" if outcome.variables else ""  # none for `check A == B`
        lines.append(command("error", outcome, "gradcheck failed", f"{outcome.text}{wrt}: {numbers}{detail}"))
    elif outcome.status == "error":
        lines.append(command("error", outcome, "gradcheck error", f"{outcome.text}: {outcome.message}"))
    else:
        lines.append(plain_line.split("\n")[0])
    lines += [command("warning", outcome, "gradcheck warning", f"{outcome.text}: {w}") for w in outcome.warnings]
    return lines
