"""A derivative speaks of the user's function, through the real command: where the function
differentiated is not finite (grad(log(det(A)), A) at det(A) < 0 is a finite A^-T of a nan),
and which of the user's ops a node of a derivative's graph belongs to (the abs that
softsign's rule computes is "the derivative of softsign")."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pexpect
import pytest

from gradcalc.autodiff import REGISTRY, Tensor, grad, made_by, topological_order
from tests.test_cli import GRADCALC, gradcalc

SWAP = "A=[[0, 1], [1, 0]]"  # det(A) = -1, so log(det(A)) is nan; A^-T = A (a permutation)
LOG_DET = "the function differentiated is not finite here (the first nan came from log(-1.0)): it has no derivative at this point"
LOG_AT_1 = ("the function differentiated is not finite here (the first nan came from log at element [1]: log(-1.0)): "
            "it has no derivative at this point")


def test_eval_says_the_function_differentiated_is_nan_where_its_gradient_is_finite():
    done = gradcalc("eval", "grad(log(det(A)), A)", SWAP)
    assert done.returncode == 0
    assert "value: [[0.0, 1.0], [1.0, 0.0]]" in done.stdout  # d log det A / dA = A^-T
    assert f"note: {LOG_DET}" in done.stdout
    done = gradcalc("eval", "grad(sum(log(x)), x)", "x=[1, -1, 2]")
    assert "value: [1.0, -1.0, 0.5]" in done.stdout and f"note: {LOG_AT_1}" in done.stdout


@pytest.mark.parametrize("expression", ["hessian(log(det(A)), A)", "sum(grad(log(det(A)), A) * 3)", "jacobian(log(det(A)) * A, A)"])
def test_what_is_computed_from_such_a_derivative_says_so_too(expression):
    assert f"note: {LOG_DET}" in gradcalc("eval", expression, SWAP).stdout


def test_a_constant_that_is_not_finite_is_named_by_its_op():
    # y = 2x + log(-1) is nan everywhere, its derivative 2 a constant: log is still named.
    done = gradcalc("eval", "grad(x * 2 + log(-1), x)", "x=[1, 3]")
    assert "value: [2.0, 2.0]" in done.stdout and f"note: {LOG_DET}" in done.stdout


@pytest.mark.parametrize("expression, point", [
    ("grad(where(x > 0, log(x), 0), x)", "x=-1"),  # y = 0: the derivative 0 is the truth
    ("grad(log(det(A)), A)", "A=[[2, 1], [1, 2]]"),
    ("grad(x ** 2, x)", "x=3"),
])
def test_no_such_note_where_the_function_is_finite(expression, point):
    assert "function differentiated" not in gradcalc("eval", expression, point).stdout


def test_run_says_it_for_each_statement(tmp_path):
    script = tmp_path / "logdet.gc"
    script.write_text(f"{SWAP}\ng = grad(log(det(A)), A)\ng\ngrad(A[0, 0] ** 2, A)\n")
    blocks = gradcalc("run", str(script)).stdout.split("== ")
    assert LOG_DET in blocks[1] and "function differentiated" not in blocks[2]


def test_check_warns_and_its_json_carries_the_warning(tmp_path):
    script = tmp_path / "logdet.gc"
    script.write_text(f"{SWAP}\ncheck grad(log(det(A)), A)\nx = [1, -1, 2]\ncheck grad(sum(log(x)), x) == 1 / x\n"
                      "check grad(sum(x * x), x)\n")
    done = gradcalc("check", str(script))
    assert f"warning: {LOG_DET}" in done.stdout and f"warning: {LOG_AT_1}" in done.stdout
    results = json.loads(gradcalc("check", "--json", str(script)).stdout)["checks"]
    assert [r["warnings"] for r in results] == [[LOG_DET], [LOG_AT_1], []]


def test_the_repl_says_it():
    env = {**os.environ, "NO_COLOR": "1", "XDG_DATA_HOME": "/nonexistent-dir-for-history", "TERM": "dumb"}
    child = pexpect.spawn(GRADCALC[0], GRADCALC[1:], env=env, encoding="utf-8", timeout=30, dimensions=(40, 250))
    try:
        child.expect(">>> ")
        child.sendline(SWAP)
        child.expect(">>> ")
        child.sendline("grad(log(det(A)), A)")
        child.expect(">>> ")
        assert LOG_DET in " ".join(child.before.split()), child.before
    finally:
        child.terminate(force=True)


# ---- the user's op, not the ops of its derivative rule ----------------------------------------

def test_a_kink_inside_a_derivative_rule_is_named_by_the_users_op():
    # softsign' = 1 / (1 + |x|)^2 has a kink at 0 (softsign'' jumps from 2 to -2): the abs
    # that softsign's rule computes is the user's softsign, said as its derivative.
    done = gradcalc("check", "-", stdin="x = 0\ncheck grad(softsign(x), x)\ncheck grad(grad(softsign(x), x), x)\ncheck softsign(x)\n")
    lines = done.stdout.splitlines()
    assert lines[1].strip() == "warning: evaluated at a kink of the derivative of softsign: the derivative there is a convention, not a limit"
    assert "kink of the derivative of softsign" in lines[3]
    assert "kink of softsign:" in lines[5]
    assert "of abs" not in done.stdout


def test_an_inf_made_by_a_derivative_rule_is_named_by_the_users_op():
    done = gradcalc("eval", "grad(sqrt(x), x)", "x=0")
    assert "note: the first inf came from the derivative of sqrt(0.0): div(1.0, 0.0) in its rule" in done.stdout
    done = gradcalc("eval", "grad(grad(log(x), x), x)", "x=0")
    assert "backward pass of the second derivative of log(0.0): div(-inf, 0.0) in its rule" in done.stdout
    done = gradcalc("eval", "grad(sum(sqrt(x)), x)", "x=[1, 0]")
    assert "note: the first inf came from the derivative of sqrt at element [1]: sqrt(0.0), div(1.0, 0.0) in its rule" in done.stdout


def _elementwise_ops():
    return sorted(name for name, op in REGISTRY.items() if op.public and op.has_gradient and op.n_in == 1
                  and op.category == "elementwise" and not op.param_names)


def test_check_warnings_of_every_elementwise_ops_derivative_name_only_the_users_ops(tmp_path):
    # At points where ops kink, are singular or out of their domain, each warning and blame
    # of a second-derivative check names the op the user wrote, never one of its rule's.
    ops = _elementwise_ops()
    assert len(ops) > 30
    script = tmp_path / "every.gc"
    script.write_text("x = [0.0, 1.0, -1.0, 1e-300, 2.0]\n" + "".join(f"check grad(sum({name}(x)), x)\n" for name in ops))
    results = json.loads(gradcalc("check", "--json", str(script)).stdout)["checks"]
    assert len(results) == len(ops)
    named = {"kink of ": r"kink of (.+?): ", "disagrees: ": r"disagrees: (.+?)(?:;|$)", "going into ": r"going into (.+?) \("}
    offending = []
    for name, result in zip(ops, results):
        for text in [*result["warnings"], result.get("message", "")]:
            for pattern in named.values():
                for said in re.findall(pattern, text):
                    if not re.fullmatch(rf"(?:\w+, in )?the (?:second |third )?derivative of {name}|{name}|sum", said):
                        offending.append((name, said))
    assert offending == []


def test_every_node_of_a_derivative_carries_the_users_node_and_order():
    x = Tensor([0.5, -2.0], requires_grad=True)
    y = REGISTRY["softsign"](x).sum()
    first = grad(y, x, create_graph=True)
    second = grad(first.sum(), x, create_graph=True)
    user = {id(node) for node in topological_order(y)}
    for result, most in ((first, 1), (second, 2)):
        made = [node for node in topological_order(result) if id(node) not in user]
        assert made and all(made_by(node) is not None for node in made)
        assert {made_by(node).node.label for node in made} <= {"softsign", "sum"}
        assert max(made_by(node).order for node in made) == most
    # the nodes differentiated are left as they were
    assert all(made_by(node) is None for node in topological_order(y))
    np.testing.assert_allclose(first.data, 1 / (1 + np.abs(x.data)) ** 2)  # closed form


def _points(op):
    """The op's own check inputs, and the same at 0 and rounded to whole numbers: where
    abs, max and their kin inside derivative rules kink."""
    spec = op.check
    rng = np.random.default_rng(0)
    if spec.make is not None:
        inputs, params = spec.make(rng)
    else:
        inputs, params = [rng.uniform(spec.low, spec.high, shape) for shape in spec.shapes[0]], dict(spec.params)
    diff = list(spec.diff) if spec.diff is not None else list(range(len(inputs)))
    for move in (np.asarray, np.zeros_like, np.round):
        yield [move(np.asarray(x, dtype=float)) if i in diff else x for i, x in enumerate(inputs)], params, diff


def test_kinks_in_every_ops_derivative_are_named_by_that_op():
    from gradcalc.autodiff.gradcheck import kinks
    from tests.test_every_op import DIFFERENTIABLE, outputs_of

    said_as_derivative, offending = set(), []
    for op in DIFFERENTIABLE:
        for inputs, params, diff in _points(op):
            for f in outputs_of(op, params):
                ts = [Tensor(x, requires_grad=i in diff) for i, x in enumerate(inputs)]
                try:
                    gs = grad(f(*ts).sum(), [ts[i] for i in diff], create_graph=True)
                except Exception:  # noqa: BLE001 - a point outside the op's domain (a singular matrix): no graph
                    continue
                total = sum(g.sum() for g in gs)
                for said in kinks(total) if isinstance(total, Tensor) else []:
                    if said.startswith("the derivative of "):
                        said_as_derivative.add(op.name)
                    if said not in (op.name, f"the derivative of {op.name}"):
                        offending.append((op.name, said))
    assert offending == []
    assert said_as_derivative >= {"softsign", "atan2", "huber", "norm"}  # their rules compute abs, hypot, ...


def test_a_wrong_rule_inside_another_rule_is_blamed_in_the_users_words():
    # quartic_quarter's rule calls cubed_wrongly, whose own VJP is wrong (2g, not 3g x^2): a
    # check of the second derivative blames it as part of the derivative of quartic_quarter.
    from gradcalc.autodiff import defop
    from gradcalc.autodiff.registry import Check, unregister
    from gradcalc.cli.parallel import run_checks
    from gradcalc.parser.check_statements import CheckDefaults

    defop("cubed_wrongly", lambda x: x ** 3, (lambda m, g, ans, x: g * 2.0,), doc="x^3 with a wrong VJP", category="elementwise", check=Check())
    defop("quartic_quarter", lambda x: x ** 4 / 4, (lambda m, g, ans, x: g * m.cubed_wrongly(x),), doc="x^4/4", category="elementwise", check=Check())
    try:
        [(_, [outcome])] = run_checks([("t.gc", "x = 1.5\ncheck grad(quartic_quarter(x), x)\n")], CheckDefaults(), [])
    finally:
        unregister("quartic_quarter")
        unregister("cubed_wrongly")
    assert outcome.status == "fail"
    assert outcome.message.endswith("ops whose VJP disagrees: cubed_wrongly, in the derivative of quartic_quarter"), outcome.message
