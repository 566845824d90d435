"""Files and names (issue 38): what `load()` may read and what its errors quote; a name
means what it was bound to last, as in Python (`def e`, a parameter holding a number).

Oracles: a model of a folder tree with links, walked as the operating system walks paths,
for what is inside the program's folder; Python's exec of the same bindings for names."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradcalc.parser import LanguageError, Session
from tests.strategies import sampled
from tests.test_cli import gradcalc

# ---- load() reads the program's folder --------------------------------------------------------------


def test_load_by_absolute_path_dotdot_or_tilde_outside_the_folder_is_refused(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "home").mkdir()
    np.save(tmp_path / "secret.npy", np.arange(3.0))
    np.save(tmp_path / "home" / "secret.npy", np.arange(3.0))
    env = {"HOME": str(tmp_path / "home")}
    for spec in (str(tmp_path / "secret.npy"), "../secret.npy", "~/secret.npy"):
        done = gradcalc("eval", "--json", f'sum(load("{spec}"))', cwd=tmp_path / "proj", env=env)
        error = json.loads(done.stdout)["error"]
        assert done.returncode == 2 and error["kind"] == "safety", done.stdout
        assert error["message"].startswith(f"load: {spec} is outside the program's folder {tmp_path / 'proj'}")
        assert "GRADCALC_ALLOW_READ" in error["message"] and (error["line"], error["column"]) == (1, 5)
    allowed = gradcalc("eval", "--json", 'sum(load("../secret.npy"))', cwd=tmp_path / "proj", env={"GRADCALC_ALLOW_READ": str(tmp_path)})
    assert json.loads(allowed.stdout)["value"] == 3.0
    bound = gradcalc("eval", "--json", "sum(v)", "v=@../secret.npy", cwd=tmp_path / "proj")  # named on the command line
    assert json.loads(bound.stdout)["value"] == 3.0


def test_a_script_reads_its_own_folder_wherever_it_is_run_from(tmp_path):
    (tmp_path / "proj" / "data").mkdir(parents=True)
    np.save(tmp_path / "proj" / "data" / "w.npy", np.ones(4))
    (tmp_path / "proj" / "s.gc").write_text('sum(load("data/w.npy"))\n')
    done = gradcalc("run", "--json", str(tmp_path / "proj" / "s.gc"), cwd=tmp_path)
    assert json.loads(done.stdout)["value"] == 4.0


# The model: tmp/{proj/{sub/, data/, in_link -> sub, out_link -> ../outside}, outside/, home/}
LINKS = {("proj", "in_link"): ("proj", "sub"), ("proj", "out_link"): ("outside",), ("proj", "data", "up"): ("proj",),
         ("proj", "data", "root"): ()}
FOLDERS = [(), ("proj",), ("proj", "sub"), ("proj", "data"), ("outside",), ("home",)]
PARTS = [".", "..", "proj", "sub", "data", "in_link", "out_link", "outside", "home", "up", "root"]


def _walk(start: tuple[str, ...], parts: list[str]) -> tuple[str, ...] | None:
    """Where the path leads, as the operating system resolves it (a link is replaced by its
    target, then `..` goes up from there); None where it leads to nothing."""
    at = list(start)
    for part in parts:
        if part == ".":
            continue
        if part == "..":
            if not at:  # above the tree: somewhere this model does not know (refused, or not found)
                return None
            at.pop()
            continue
        at.append(part)
        if tuple(at) in LINKS:
            at = list(LINKS[tuple(at)])
        elif tuple(at) not in FOLDERS:
            return None
    return tuple(at)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    for folder in FOLDERS:
        (root.joinpath(*folder)).mkdir(parents=True, exist_ok=True)
        np.save(root.joinpath(*folder, "a.npy"), np.full(2, float(len(folder))))
    for link, target in LINKS.items():
        root.joinpath(*link).symlink_to(root.joinpath(*target), target_is_directory=True)
    return root


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["relative", "absolute", "home"]), st.lists(st.sampled_from(PARTS), max_size=6))
def test_load_reads_inside_the_program_s_folder_and_nowhere_else(tree, monkeypatch, start, parts):
    monkeypatch.setenv("HOME", str(tree / "home"))
    monkeypatch.delenv("GRADCALC_ALLOW_READ", raising=False)
    origin = {"relative": ("proj",), "absolute": (), "home": ("home",)}[start]
    where = _walk(origin, parts)
    prefix = {"relative": "", "absolute": f"{tree}/", "home": "~/"}[start]
    spec = prefix + "/".join([*parts, "a.npy"])
    session = Session(base_dir=tree / "proj")
    try:
        session.run_source(f'v = load("{spec}")')
        refused = None
    except LanguageError as err:
        refused = err
    if where is None:
        assert refused is not None  # (no such folder: refused, or not found)
        return
    inside = where[:1] == ("proj",)
    if inside:
        assert refused is None, (spec, where, refused)
        assert float(session.variables["v"].data[0]) == len(where)  # the file it is, by what it holds
    else:
        assert refused is not None and refused.kind == "safety", (spec, where, refused)


# ---- what an error quotes of a file ---------------------------------------------------------------

LONG = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=9, max_size=120).map(
    lambda text: "key-" + text)  # (never a number: a value a file was not meant to show)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(LONG, st.sampled_from(["csv cell", "csv header", "json value", "json key", "npz member"]))
def test_an_error_quotes_at_most_an_excerpt_of_a_value_in_the_file(tmp_path, secret, place):
    folder = tmp_path / place.replace(" ", "_")
    folder.mkdir(exist_ok=True)
    if place == "csv cell":
        (folder / "f.csv").write_text(f"1,2\n3,{secret}\n")
        call = 'load("f.csv")'
    elif place == "csv header":
        (folder / "f.csv").write_text(f"{secret},b\n1,2\n")
        call = 'load("f.csv", "nope")'
    elif place == "json value":
        (folder / "f.json").write_text(json.dumps({"w": [1, secret]}))
        call = 'load("f.json:w")'
    elif place == "json key":
        (folder / "f.json").write_text(json.dumps({secret: [1], "b": [2]}))
        call = 'load("f.json:nope")'
    else:
        np.savez(folder / "f.npz", **{secret: np.zeros(2), "b": np.zeros(2)})
        call = 'load("f.npz:nope")'
    notices: list[str] = []
    with pytest.raises(LanguageError) as err:
        Session(base_dir=folder, on_notice=lambda label, text: notices.append(text)).run_source(f"v = {call}")
    for said in (err.value.message, *notices):
        assert secret[:13] not in said, said
    assert secret[:12] in err.value.message  # which value is meant is still said


# ---- a name means what it was bound to last -------------------------------------------------------

NAMES = ["e", "pi", "inf", "nan", "g"]


@st.composite
def bindings(draw):
    """A few bindings of the names, and a use of one: (gradcalc source, Python source)."""
    ours, python = [], ["import math", "e, pi, inf, nan = math.e, math.pi, math.inf, math.nan"]
    for _ in range(draw(st.integers(1, 4))):
        name = draw(sampled(NAMES))
        kind = draw(sampled(["def", "number", "parameter"]))
        if kind == "def":
            ours.append(f"def {name}(x) = x * 10")
            python.append(f"def {name}(x): return x * 10")
        elif kind == "number":
            k = draw(st.integers(1, 5))
            ours.append(f"{name} = {k}")
            python.append(f"{name} = {k}")
        else:  # a function whose parameter is called like a def elsewhere
            ours.append(f"def f(x, {name}) = {name}(x)")
            python.append(f"def f(x, {name}): return {name}(x)")
    name = draw(sampled(NAMES))
    use = draw(sampled(["{n}(2)", "{n} + 1", "f(2, 3)", "f(2, lambda t: t + 1)"]))
    if "f(" in use and not any(line.startswith("def f(") for line in ours):
        use = "{n}(2)"
    ours.append(use.format(n=name))
    python.append("result = " + use.format(n=name))
    return "\n".join(ours), "\n".join(python)


@settings(max_examples=300)
@given(bindings())
def test_names_mean_what_python_makes_them_mean(program):
    ours, python = program
    scope: dict = {}
    try:
        exec(python, scope)  # noqa: S102 - the oracle: Python's own meaning of the same bindings
        expected = scope["result"]
    except (TypeError, NameError):  # calling a number, adding to a function; a name never bound
        expected = TypeError
    try:
        results = Session().run_source(ours)
        got = results[-1].value
    except LanguageError as err:
        assert expected is TypeError, (ours, expected, err.message)
        assert any(words in err.message for words in ("not a function", "cannot be used with", "unknown")), err.message
        return
    assert expected is not TypeError, (ours, got)
    number = float(np.asarray(got.data))
    assert number == expected or (math.isnan(number) and math.isnan(expected)), (ours, number, expected)


@pytest.mark.parametrize("name", ["e", "pi", "inf", "nan"])
def test_def_of_a_constant_makes_the_name_yours(name):
    done = gradcalc("eval", "--json", f"def {name}(x) = x * 2\n{name}(3) + 1")
    assert json.loads(done.stdout)["value"] == 7.0
    assert f"def {name} shadows the built-in constant {name}: from here on, {name} means yours" in done.stderr
    bare = gradcalc("eval", f"def {name}(x) = x * 2\n{name}")
    assert bare.returncode == 0 and f"<function {name}(x)>" in bare.stdout  # the bare name too: it was the constant


def test_a_parameter_holding_a_number_does_not_call_a_def_of_its_name():
    done = gradcalc("eval", "--json", "def g(x) = x * 10\ndef f(g) = g(2)\nf(3)")
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 2 and error["message"] == "g is not a function: the parameter g holds the number 3, which cannot be called"
    assert (error["line"], error["column"]) == (2, 12)
    assert json.loads(gradcalc("eval", "--json", "def g(x) = x * 10\ndef f(g) = g(2)\nf(lambda t: t + 1)").stdout)["value"] == 3.0
