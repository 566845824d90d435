"""`gradcalc export FILE --to jax|torch`: for every file in examples/, the module written
passes ruff, imports only that library and NumPy, and gives gradcalc's values and
gradients to 1e-12: each result's function at the values the program gives its variables,
and the library's gradient of its sum beside gradcalc's.
"""
from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcalc.autodiff import Tensor, grad
from gradcalc.parser import ExpressionResult, LanguageError, Session, compile_program
from gradcalc.parser.analysis import variables_in
from tests.test_cli import gradcalc

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.gc"))
RUFF = Path(sys.executable).with_name("ruff")


def gradcalcs_results(path: Path) -> list[tuple[object, dict[str, object]]]:
    """Each result's value, and the nodes of the names the check or expression depends on."""
    return gradcalcs_results_of(path.read_text(), path.parent)


def gradcalcs_results_of(source: str, base_dir: Path | None = None) -> list[tuple[object, dict[str, object]]]:
    found = []

    def record(session, statement, value):
        named = {leaf.name: leaf for leaf in variables_in(value)}
        named.update({n: session.variables[n] for n in statement.wrt if n not in named})
        found.append((value, named))

    session = Session(on_check=record, base_dir=base_dir)
    for statement in compile_program(source).statements:
        result = session.run_statement(statement)
        if isinstance(result, ExpressionResult):
            record(session, statement, result.value)
    return found


def imported(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def called(library: str, function, *args, **kwargs):
    """function(...) as a JAX user runs it: under jax.jit, or op by op where it reads a traced
    value as a number (a parameter from a value). Under jit an example's functions cost a
    third of their eager time here: one lowering each, not one per primitive (JAX's eager
    mode), and jit gives eager mode's numbers."""
    if library == "jax":
        import jax

        try:
            return jax.jit(function)(*args, **kwargs)
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError, jax.errors.TracerIntegerConversionError):
            pass
    return function(*args, **kwargs)


def close(theirs, ours, what):
    np.testing.assert_allclose(np.asarray(theirs, dtype=float), np.asarray(ours, dtype=float), rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("library", ["jax", "torch"])
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
@pytest.mark.slow
def test_the_exported_module_gives_gradcalcs_values_and_gradients(tmp_path, library, example):
    pytest.importorskip(library)
    out = tmp_path / f"{example.stem}_{library}.py"
    done = gradcalc("export", str(example), "--to", library, "-o", str(out))
    assert done.returncode == 0, done.stderr
    imports = {n.names[0].name.split(".")[0] if isinstance(n, ast.Import) else n.module.split(".")[0]
               for n in ast.walk(ast.parse(out.read_text())) if isinstance(n, ast.Import | ast.ImportFrom)}
    assert imports == {library, "numpy"}
    # this project's rules (pyproject.toml's), on the module alone, but the line length: an expression is written on one line
    rules = ["--select", "E,F,W,I,B,UP", "--ignore", "B905,E501"]
    linted = subprocess.run([str(RUFF), "check", "--isolated", *rules, str(out)], capture_output=True, text=True)
    assert linted.returncode == 0, linted.stdout
    module = imported(out)
    results = gradcalcs_results(example)
    assert len(module.RESULTS) == len(results)
    for name, (value, named) in zip(module.RESULTS, results):
        given = module.inputs(name)
        theirs = called(library, getattr(module, name), **given)
        to_numpy = (lambda a: a.detach().numpy()) if library == "torch" else np.asarray
        close(to_numpy(theirs), value.data, f"{example.name} {name}")
        if not hasattr(module, f"{name}_grad"):
            continue
        their_grads = called(library, getattr(module, f"{name}_grad"), *given.values())
        leaves = [named[n] for n in given]
        total = value.sum() if isinstance(value, Tensor) else value
        ours = grad(total, leaves) if total.requires_grad else [np.zeros(np.shape(leaf.data)) for leaf in leaves]
        for param, a, b in zip(given, their_grads, ours):
            close(to_numpy(a), getattr(b, "data", b), f"{example.name} {name}: d/d {param}")


def test_what_a_module_cannot_hold_is_refused_by_name(tmp_path):
    rule = tmp_path / "rule.gc"
    rule.write_text("def f(x) = x * x\nvjp f(x, g) = g * 2 * x\ncheck f(3)\n")
    done = gradcalc("export", str(rule), "--to", "jax")
    assert done.returncode == 2 and "a vjp rule of yours is not exported" in done.stderr and f"{rule}:2:1" in done.stderr
    wrong = gradcalc("export", str(rule), "--to", "numpy")
    assert wrong.returncode == 2 and "--to must be jax or torch" in wrong.stderr


# ---- programs that rebind their variables ---------------------------------------------------------------
# Found by a helper's hostile inputs: `x = 1; x = x + 1; x` exported a function returning its
# parameter x (1.0): the result's function began at the name's first value and skipped the
# rebinding. Generated programs rebind names by assignment, augmented assignment, loops,
# unpacking and `with no_grad:` steps; each result's function at INPUTS must give gradcalc's
# value and its gradient gradcalc's (Python's `exec` of the same program is the value's oracle).
_REBINDS = [
    "{x} = {x} * {k} + {y}", "{x} += {y} * {k}", "{x} *= {k}", "{x}, {y} = {y}, {x} * {k}",
    "for i in range(3): {x} = {x} * {k} + i", "with no_grad:\n    {x} -= {k} * 0.1", "{y} = {x} - {k}",
]


def _rebinding_program(rng) -> str:
    lines = [f"a = {rng.choice([1.5, -2.0, 0.5])}", f"b = {rng.choice([3.0, -0.25, 2.0])}"]
    for _ in range(rng.randint(1, 5)):
        x, y = rng.sample(["a", "b"], 2)
        lines.append(rng.choice(_REBINDS).format(x=x, y=y, k=rng.choice([2, 3, -1])))
    lines.append(rng.choice(["a * b", "a + b ** 2", "check a * b", "b - a"]))
    return "\n".join(lines) + "\n"


def _python_value(program: str) -> float:
    import contextlib

    namespace: dict = {"no_grad": contextlib.nullcontext()}
    *statements, last = program.strip().splitlines()
    exec("\n".join(statements), namespace)  # noqa: S102
    return float(eval(last.removeprefix("check "), namespace))  # noqa: S307


@pytest.mark.parametrize("library", ["jax", "torch"])
def test_a_program_that_rebinds_its_variables_exports_its_values_and_gradients(library):
    import random

    pytest.importorskip(library)
    from gradcalc.parser.engines.export import write_module

    rng = random.Random(5)
    exported = 0
    for _ in range(60):
        source = _rebinding_program(rng)
        [*_, (value, named)] = gradcalcs_results_of(source)
        leaves = variables_in(value)
        try:
            module = write_module(source, "p.gc", library)
        except LanguageError as err:
            # Refused, by name, where one function of the result's variables cannot give it: a
            # name standing for two of its variables, or a value read before the name was given
            # the one the result uses (a `with no_grad:` step between two uses).
            assert "names two variables" in err.message or "before it was given the value" in err.message, err.message
            assert "with no_grad" in source or len({leaf.name for leaf in leaves}) < len(leaves), source
            continue
        assert len({leaf.name for leaf in leaves}) == len(leaves), source
        exported += 1
        namespace: dict = {}
        exec(compile(module, "exported", "exec"), namespace)  # noqa: S102
        name = namespace["RESULTS"][-1]
        given = namespace["inputs"](name)
        theirs = float(np.asarray(namespace[name](**given)))
        assert theirs == pytest.approx(_python_value(source), rel=1e-12), source
        assert theirs == pytest.approx(float(value.data), rel=1e-12), source
        if f"{name}_grad" in namespace:
            their_grads = namespace[f"{name}_grad"](*given.values())
            ours = grad(value, [named[n] for n in given]) if value.requires_grad else [np.zeros(()) for _ in given]
            for key, t, o in zip(given, their_grads, ours):
                close(np.asarray(t.detach() if hasattr(t, "detach") else t), np.asarray(getattr(o, "data", o)), f"{source} d/d{key}")
    assert exported >= 30  # (most programs rebind without a no_grad step between two uses of a name)



@pytest.mark.parametrize(("library", "name"), [("jax", "JAX"), ("torch", "PyTorch")])
def test_export_without_its_library_says_which_to_install(monkeypatch, library, name):
    """Found by CI, whose first environment has neither library: export --to jax was an
    internal error (ModuleNotFoundError) where it copies the adapters that import JAX."""
    from gradcalc.parser.engines.export import write_module

    monkeypatch.setitem(sys.modules, library, None)  # (importing it raises ModuleNotFoundError)
    monkeypatch.delitem(sys.modules, f"gradcalc.parser.engines.{library}_ops", raising=False)
    with pytest.raises(LanguageError, match=rf"export --to {library} needs {name} installed.*pip install 'gradcalc\[{library}\]'"):
        write_module("x = 2\ncheck x ** 2\n", "c.gc", library)


def test_an_adapter_with_rules_of_its_own_is_copied_whole(tmp_path):
    """The torch adapter of logcumsumexp is an autograd.Function (PyTorch's own backward
    of it gave a third derivative of nan): the module gets the class and the helpers its
    rules call, passes ruff, and its Hessian's gradient is gradcalc's, 0 (closed form:
    logcumsumexp(x + t) = logcumsumexp(x) + t, so the sum of the Hessian is 0 at every x)."""
    pytest.importorskip("torch")
    program = tmp_path / "scan.gc"
    program.write_text("x = [0.3, 0.55, 0.7]\nhessian(sum(logcumsumexp(x) * [1, 2, 3]), x)\n")
    out = tmp_path / "scan_torch.py"
    done = gradcalc("export", str(program), "--to", "torch", "-o", str(out))
    assert done.returncode == 0, done.stderr
    linted = subprocess.run([str(RUFF), "check", "--isolated", "--select", "E,F,W,I,B,UP", "--ignore", "B905,E501", str(out)],
                            capture_output=True, text=True)
    assert linted.returncode == 0, linted.stdout
    module = imported(out)
    (value, named), = gradcalcs_results(program)
    x = module.inputs("line_2")["x"]
    close(module.line_2(x).detach().numpy(), value.data, "the Hessian")
    (third,) = module.line_2_grad(x)
    ours = grad(value.sum(), named["x"])
    close(third.detach().numpy(), ours.data, "the Hessian's gradient")
    close(third.detach().numpy(), np.zeros(3), "the Hessian's gradient, closed form")
