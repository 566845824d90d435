"""`eval --steps` and `:steps`: the backward pass node by node, and the rule text of every op."""
from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcalc.autodiff import REGISTRY, defop
from gradcalc.autodiff.registry import unregister
from gradcalc.autodiff.rules import NO_RULE, input_rule, op_rule, rule_text, vjp_rule
from gradcalc.autodiff.step_records import backward_steps
from gradcalc.parser import Session

from .test_cli import gradcalc
from .test_repl import data_home, drive  # noqa: F401  (data_home, autouse: the REPL's history stays out of $HOME)

SEED = ("(a*b + exp(c)).relu()/a", "a=2", "b=-3", "c=10")
# Closed forms at a=2, b=-3, c=10: out = (ab + e^c)/a, so the division sends
# -out/a = -(ab + e^c)/a^2 to a, and the product sends b/a to it; the two sum to
# a's gradient -5506.6164487016795 (-(e^c)/a^2 in total).
E10 = math.exp(10)
FROM_DIV = -(-6 + E10) / 4
FROM_MUL = -3 * 0.5


def test_seed_example_line_by_line():
    """Numbers from closed forms; each rule line is the registry's rule for the op (their
    wording is pinned in test_rules_read_without_the_plumbing)."""
    done = gradcalc("eval", *SEED, "--steps")
    assert done.returncode == 0, done.stderr
    steps = done.stdout.split("backward pass:")[1].splitlines()
    assert steps == [
        " 5 steps in the order they run, from d output/d output = 1.0",
        "#1 div  g = 1.0",
        f"   rule  {rule_text(REGISTRY['div'])}",
        "   #2 relu += 0.5",
        f"   #5 a += {FROM_DIV!r}",
        "#2 relu  g = 0.5",
        f"   rule  {rule_text(REGISTRY['relu'])}",
        "   #3 add += 0.5",
        "#3 add  g = 0.5",
        f"   rule  {rule_text(REGISTRY['add'])}",
        "   #4 mul += 0.5",
        "   #7 exp += 0.5",
        "#7 exp  g = 0.5",
        f"   rule  {rule_text(REGISTRY['exp'])}",
        f"   #8 c += {0.5 * E10!r}",
        "#4 mul  g = 0.5",
        f"   rule  {rule_text(REGISTRY['mul'])}",
        f"   #5 a += {FROM_MUL!r}  (now -5506.6164487016795)",
        "   #6 b += 1.0",
        "gradients: a -5506.6164487016795, b 1.0, c 11013.232897403359",
    ]
    assert FROM_DIV + FROM_MUL == -5506.6164487016795
    # The usual report comes first, unchanged; the numbering is --tree's.
    assert done.stdout.startswith("value: 11010.232897403359\ngrad a: -5506.6164487016795\n")
    tree = gradcalc("eval", *SEED, "--tree").stdout
    assert "#5 a  2.0" in tree and "#7 exp" in tree and "#4 mul" in tree


def test_seed_example_on_the_scalar_engine():
    """Division is a primitive there too, with the tensor engine's div rules."""
    done = gradcalc("eval", *SEED, "--steps", "--engine", "scalar")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "   rule  /: a: g / b;  b: -g * ans / b" in out
    assert f"   #5 a += {FROM_DIV!r}\n" in out
    assert f"   #5 a += {FROM_MUL!r}  (now -5506.6164487016795)" in out
    assert "   rule  relu: g * (x > 0)" in out


def test_every_scalar_primitive_has_its_registry_rule():
    out = gradcalc("eval", "sigmoid(x) + softplus(x) + tanh(x) * exp(x) + log(x) - relu(x) / 2 + sqrt(x) + abs(x)", "x=0.7",
                   "--steps", "--engine", "scalar").stdout
    rules = [line.strip().removeprefix("rule  ").split(": ", 1) for line in out.splitlines() if line.strip().startswith("rule")]
    named = {label: text for label, text in rules if label in REGISTRY}
    assert {"relu", "tanh", "exp", "log", "sigmoid", "softplus"} <= set(named)
    assert all(text == op_rule(REGISTRY[label]) for label, text in named.items())
    assert not any("(no rule text)" in text for _, text in rules)


def test_fan_in_to_one_node_twice_shows_both_slots():
    """x*x at 3: each slot sends g * x = 3 to x, which ends at 6 = d(x^2)/dx (both engines)."""
    for engine in ("tensor", "scalar"):
        out = gradcalc("eval", "x*x", "x=3", "--steps", "--engine", engine).stdout
        assert "   #2 x += 3.0\n   #2 x += 3.0  (now 6.0)" in out, out


def test_json_gives_the_steps_as_a_list():
    doc = json.loads(gradcalc("eval", *SEED, "--steps", "--json").stdout)
    assert doc["grads"]["a"] == -5506.6164487016795  # the contract's keys are all still there
    steps = doc["steps"]
    assert [s["op"] for s in steps] == ["div", "relu", "add", "exp", "mul"]
    to_a = [add for s in steps for add in s["adds"] if add["title"] == "a"]
    assert [add["grad"] for add in to_a] == [FROM_DIV, FROM_MUL]
    assert [add["accumulated"] for add in to_a] == [False, True]
    assert to_a[-1]["total"] == -5506.6164487016795
    div = REGISTRY["div"]
    assert steps[0] == {
        "node": 1, "title": "div", "op": "div", "rule": op_rule(div), "shape": [], "grad": 1.0,
        "adds": [
            {"to": 2, "title": "relu", "input": 0, "rule": input_rule(div, 0), "grad": 0.5, "total": 0.5, "accumulated": False},
            {"to": 5, "title": "a", "input": 1, "rule": input_rule(div, 1), "grad": FROM_DIV, "total": FROM_DIV, "accumulated": False},
        ],
    }


def test_dot_with_steps_labels_each_edge_with_its_gradient(tmp_path):
    path = tmp_path / "g.dot"
    assert gradcalc("eval", *SEED, "--steps", "--dot", str(path)).returncode == 0
    edges = [line.strip() for line in path.read_text().splitlines() if "->" in line]
    assert len(edges) == 8 and all("label=" in e for e in edges)
    assert sum(f'label="{-5505.12}"' in e for e in edges) == 1  # division -> a, at 6 digits
    assert sum('label="-1.5"' in e for e in edges) == 1  # product -> a
    plain = tmp_path / "plain.dot"
    gradcalc("eval", *SEED, "--dot", str(plain))
    assert "label=" not in "".join(line for line in plain.read_text().splitlines() if "->" in line)


def test_tensors_show_shapes_and_a_summary():
    """sum(x*x) over x = 0..19 as 4x5: each slot of the product sends x (min 0, max 19,
    mean 9.5); the second brings x's total to 2x."""
    out = gradcalc("eval", "sum(x*x)", "x=reshape(arange(20), 4, 5)", "--steps").stdout
    assert "#1 sum  g = 1.0" in out
    assert "   #2 mul += <4x5 tensor: min 1, max 1, mean 1>" in out
    assert "   #3 x += <4x5 tensor: min 0, max 19, mean 9.5>\n" in out
    assert "   #3 x += <4x5 tensor: min 0, max 19, mean 9.5>  (now <4x5 tensor: min 0, max 38, mean 19>)" in out
    small = gradcalc("eval", "sum(w * 2)", "w=[1, 2]", "--steps").stdout
    assert "   #3 w += [2.0, 2.0] (2)" in small


def test_broadcast_gradient_is_un_broadcast_before_it_is_added():
    """Lucid's trap: b (4,) added to a (3, 4) tensor, times arange(12): b's gradient is
    the column sums of arange(12).reshape(3, 4), [12, 15, 18, 21]."""
    s = Session()
    s.run_source("x = zeros(3, 4); b = zeros(4)")
    out = s.run_source("(x + b) * reshape(arange(12), 3, 4)")[-1].value
    trace = backward_steps(out)
    to_b = [c for step in trace.steps for c in step.contributions if c.parent.name == "b"]
    assert len(to_b) == 1 and to_b[0].grad.tolist() == [12.0, 15.0, 18.0, 21.0]


@given(st.floats(-3, 3), st.floats(0.5, 3), st.floats(-3, 3))
def test_the_replay_ends_where_the_engine_ends(x, y, z):
    """The recorded totals equal PyTorch's gradients, on both engines."""
    torch = pytest.importorskip("torch")
    source = "(x*y + tanh(z) * x).relu() * x / (y*y + 1) + exp(z) * log(y)"
    tx, ty, tz = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (x, y, z))
    torch.exp(tz).mul(torch.log(ty)).add(torch.relu(tx * ty + torch.tanh(tz) * tx) * tx / (ty * ty + 1)).backward()
    expected = {"x": tx.grad.item(), "y": ty.grad.item(), "z": tz.grad.item()}
    for engine in ("tensor", "scalar"):
        s = Session(engine=engine)
        s.run_source(f"x = {x!r}; y = {y!r}; z = {z!r}")
        trace = backward_steps(s.run_source(source)[-1].value)
        got = {n.name: float(np.asarray(g)) for n, g in trace.grads.items() if not n.parents and n.name}
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
        # and each leaf's running totals add up: the last total is the sum of what came
        for name in "xyz":
            adds = [c for step in trace.steps for c in step.contributions if c.parent.name == name]
            assert float(np.asarray(adds[-1].total)) == pytest.approx(sum(float(np.asarray(c.grad)) for c in adds), rel=1e-12, abs=1e-300)


def test_the_tensor_replay_leaves_grad_fields_alone():
    s = Session()
    s.run_source("a = 2")
    out = s.run_source("a * a")[-1].value
    backward_steps(out)
    assert s.variables["a"].grad is None


def test_every_registered_op_has_rule_text():
    for op in REGISTRY.values():
        text = rule_text(op)
        assert text.startswith(f"{op.name}: ") and len(text) > len(op.name) + 2
        if op.has_gradient:
            assert NO_RULE not in text, f"{op.name}: its rule could not be read from its VJPs"
        else:
            assert text == f"{op.name}: no gradient"


def test_rules_read_without_the_plumbing():
    assert rule_text(REGISTRY["relu"]) == "relu: g * (x > 0)"  # its VJP: g * (m.raw(x) > 0)
    assert rule_text(REGISTRY["sin"]) == "sin: g * cos(x)"  # m.cos(x)
    assert rule_text(REGISTRY["abs"]) == "abs: g * sign(x)"  # np.sign(m.raw(x))
    assert rule_text(REGISTRY["mul"]) == "mul: a: g * b;  b: g * a"  # two lambdas on one line


def test_an_explicit_rule_wins_and_missing_source_falls_back():
    op = defop("_rule_probe", lambda x: x * 3, (lambda m, g, ans, x: g * 3,), doc="probe", category="test", rule="g * 3 (thrice)")
    try:
        assert rule_text(op) == "_rule_probe: g * 3 (thrice)"
    finally:
        unregister("_rule_probe")
    two = defop("_rule_pair", lambda a, b: a * b, (lambda m, g, ans, a, b: g * b, lambda m, g, ans, a, b: g * a),
                doc="probe", category="test", n_in=2, rule="a: g * b;  b: g * a")
    try:
        assert [input_rule(two, 0), input_rule(two, 1)] == ["g * b", "g * a"]  # each input its part
    finally:
        unregister("_rule_pair")
    clip = REGISTRY["clip"]  # any number of inputs: the parts by position
    if clip.rule and clip.n_in is None:
        assert input_rule(clip, 1) == clip.rule.split(";  ")[1].split(": ", 1)[1]
    no_source = eval("lambda m, g, ans, x: g")  # noqa: S307  (a function without a source file)
    assert vjp_rule(no_source) == NO_RULE


def test_repl_steps_replays_the_last_result(capsys):
    drive(":steps\na = 2\nb = -3\nc = 10\n(a*b + exp(c)).relu()/a\n:steps\n")
    captured = capsys.readouterr()
    assert "no result yet" in captured.err
    assert f"   #5 a += {FROM_MUL!r}  (now -5506.6164487016795)" in captured.out
    drive(":help\n")
    assert ":steps" in capsys.readouterr().out


def test_steps_of_a_constant_say_there_are_none():
    out = gradcalc("eval", "2 * 3", "--steps").stdout
    assert "backward pass: no steps" in out


def test_rules_read_through_guards_and_short_helpers(tmp_path, monkeypatch):
    """Guards that keep nan and inf exact (masked, gate, where(isnan...), a special case
    chosen by .any()) are not part of the math, and a one-line helper reads as its formula;
    a name used twice is said once, after `where`."""
    (tmp_path / "vjp_probe.py").write_text(textwrap.dedent("""
        import numpy as np

        def masked(m, g, out):
            return out

        def _slope(x):
            return np.where(np.isnan(x), np.nan, x > 0)

        def vjp(m, g, ans, a, b):
            e = m.exp(-m.abs(a))
            special = m.raw(a) == 0
            power = b - 1 if not special.any() else m.where(special, 1.0, b - 1)
            return masked(m, g, g * e * _slope(m.raw(b)) * a ** power / e)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    from vjp_probe import vjp

    assert vjp_rule(vjp) == "g * e * (b > 0) * a ** (b - 1) / e  where e = exp(-abs(a))"


def test_rules_speak_the_users_words():
    """A rule as --steps prints it calls only functions the user can call (the language's
    own); the engine's helpers (expand_reduced, unindex, swap_last...) have no meaning to
    a reader. Words that read as math (Phi, phi, for gelu's normal CDF and density) are
    named in the rule itself."""

    from gradcalc.autodiff import REGISTRY
    from gradcalc.autodiff.rules import op_rule
    from gradcalc.parser.backends import public_ops

    callable_words = set(public_ops())
    offending = {}
    for op in REGISTRY.values():
        if op.public and op.has_gradient and unexplained_calls(op_rule(op), callable_words):
            offending[op.name] = unexplained_calls(op_rule(op), callable_words)
    assert offending == {}


def unexplained_calls(rule, callable_words):
    """The functions a rule calls that the user cannot call and that it does not name in words too."""
    import re

    calls = set(re.findall(r"([A-Za-z_]\w*)\(", rule)) - callable_words
    return sorted(word for word in calls if not re.search(rf"\b{word}\b[^(]", rule))


def test_the_derivatives_docs_engine_md_states_are_the_rules_steps_prints():
    # One formula per op: the text in the docs is the registry's rule text, which is what
    # `eval --steps` prints (rules.op_rule), which is read from the VJP or given beside it.
    import re
    from pathlib import Path

    from gradcalc.autodiff import REGISTRY
    from gradcalc.autodiff.rules import op_rule

    text = " ".join((Path(__file__).resolve().parent.parent / "docs" / "engine.md").read_text().split())
    stated = re.findall(r"`(\w+)`'s derivative (?:is|rule is) `([^`]+)`", text)
    assert {name for name, _ in stated} >= {"tanh", "sigmoid", "softplus", "pow"}
    for name, rule in stated:
        assert rule == " ".join(op_rule(REGISTRY[name]).split()), name  # (the docs wrap lines)
