"""Op families register on first need (autodiff/ops/__init__.py): a one-line command that
only multiplies does not load ninety ops it never calls. These check, each in a fresh
process, that every way of asking for an op finds it whether or not its family was
loaded yet, and that the families left for later bind nothing Python looks up on the
class (an operator or a property would be missing until then)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from gradcalc.autodiff import REGISTRY, Tensor
from gradcalc.autodiff.ops import EAGER


def fresh(code: str) -> str:
    """Run `code` after importing the engine in a new process; its output."""
    setup = "import sys\nimport gradcalc.autodiff as ad\nfrom gradcalc.autodiff import registry\n"
    done = subprocess.run([sys.executable, "-c", setup + code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def loaded_families() -> str:
    return "sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('gradcalc.autodiff.ops.'))"


def test_importing_the_engine_loads_only_the_eager_families():
    assert fresh(f"print({loaded_families()})") == repr(sorted(EAGER))


@pytest.mark.parametrize("ask, expected", [
    ("ad.REGISTRY['exp'].name", "exp"),
    ("ad.REGISTRY.get('logsumexp').name", "logsumexp"),
    ("'softmax' in ad.REGISTRY", "True"),
    ("len(ad.REGISTRY) == len(list(ad.REGISTRY)) == len(ad.REGISTRY.keys()) > 100", "True"),
    ("sorted(ad.REGISTRY)[0] == sorted(ad.REGISTRY.items())[0][0] == min(ad.REGISTRY.values(), key=lambda op: op.name).name", "True"),
    ("ad.lookup('arctan').name", "atan"),
    ("ad.ALIASES.get('arctan')", "atan"),
    ("ad.ops.tanh(ad.Tensor(0.0)).item()", "0.0"),
    ("registry.ARRAY_MATH.exp(0.0)", "1.0"),
    ("ad.Tensor([1.0, 2.0]).sum().item()", "3.0"),
    ("ad.Tensor(4.0).sqrt().item()", "2.0"),
    ("hasattr(ad.Tensor(1.0), 'relu')", "True"),
])
def test_every_way_of_asking_finds_an_op_of_a_family_not_loaded_yet(ask, expected):
    assert fresh(f"print({ask})") == expected


def test_asking_for_what_no_family_has_still_fails_as_before():
    out = fresh(
        "print(ad.lookup('no_such_op'), 'no_such_op' in ad.REGISTRY, ad.REGISTRY.get('no_such_op', 7))\n"
        "for ask in (lambda: ad.REGISTRY['no_such_op'], lambda: ad.ops.no_such_op, lambda: ad.Tensor(1.0).no_such_op):\n"
        "    try:\n        ask()\n    except (KeyError, AttributeError) as err:\n        print(type(err).__name__, err)\n"
    )
    assert out.splitlines() == [
        "None False 7", "KeyError 'no_such_op'", "AttributeError '_Namespace' object has no attribute 'no_such_op'",
        "AttributeError 'Tensor' object has no attribute 'no_such_op'",
    ]


@pytest.mark.parametrize("ask", ["ad.Tensor(1.0).no_such_op", "ad.ops.no_such_op"])
def test_a_missing_name_asked_first_fails_as_python_says_it(ask):
    out = fresh(f"try:\n    {ask}\nexcept AttributeError as err:\n    print(err)\nprint(registry._all_registered)")
    assert out.splitlines()[1] == "True"
    assert out.splitlines()[0].endswith("object has no attribute 'no_such_op'")


def test_the_lookup_hooks_remove_themselves_once_every_op_is_registered():
    """A class with __getattr__ pays on every attribute access (CPython's slower slot,
    no specialization): 7% of the 8x8 tensor chain's instructions while they stayed."""
    assert fresh("print('__getattr__' in vars(ad.Tensor), '__getattr__' in vars(registry._Namespace))") == "True True"
    from gradcalc.autodiff import registry

    registry.register_all()
    assert "__getattr__" not in vars(Tensor) and "__getattr__" not in vars(registry._Namespace)


def test_an_op_defined_outside_the_families_meets_their_names_at_once():
    """A user's op named like a family's op clashes when it is defined, not later when
    the family loads."""
    out = fresh(
        "try:\n    ad.defop('softmax', lambda x: x, None, doc='mine', category='test')\n"
        "except ValueError as err:\n    print(err)\n"
    )
    assert out == "op 'softmax' is already registered"


def test_the_families_left_for_later_bind_only_methods():
    """Python finds operators (`a < b`), properties (`x.T`) and other dunders on the
    class, without calling __getattr__: a family that binds one must be EAGER."""
    out = fresh(
        "before = set(vars(ad.Tensor))\nregistry.register_all()\n"
        "print(sorted(name for name in set(vars(ad.Tensor)) - before if name.startswith('__') or not callable(vars(ad.Tensor)[name])))\n"
        f"print(len(set(vars(ad.Tensor)) - before) > 20, {loaded_families()} == sorted(__import__('gradcalc.autodiff.ops', fromlist=['x']).MODULES))"
    )
    assert out.splitlines() == ["[]", "True True"]


def test_every_method_and_operator_is_bound_once_all_are_loaded():
    for op in REGISTRY.values():
        if op.method:
            assert callable(getattr(Tensor, op.name)), op.name


def test_threads_asking_at_once_all_find_their_op():
    """The first lookup registers; the others wait for it instead of seeing a half-filled
    registry (seven of eight threads failed while the flag went up before the imports)."""
    out = fresh(
        "import threading\nbarrier = threading.Barrier(8)\nfailures = []\n"
        "def ask(name):\n    barrier.wait()\n    try:\n        getattr(ad.Tensor([1.0, 2.0]), name)()\n"
        "    except Exception as err:\n        failures.append(repr(err))\n"
        "names = ['exp', 'softmax', 'tanh', 'sigmoid', 'logsumexp', 'cumsum', 'norm', 'relu']\n"
        "threads = [threading.Thread(target=ask, args=(n,)) for n in names]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\nprint(failures)"
    )
    assert out == "[]"


def test_an_interrupted_registration_is_taken_back_and_tried_again():
    """Ctrl-C while the families import (the REPL's first `softmax(x)`): the ops of the
    family whose import did not finish are removed, and the next lookup registers all."""
    out = fresh(
        "real = registry.defop\ncalls = [0]\n"
        "def flaky(*args, **kwargs):\n    calls[0] += 1\n    if calls[0] == 60:\n        raise KeyboardInterrupt\n"
        "    return real(*args, **kwargs)\n"
        "registry.defop = flaky\n"
        "try:\n    ad.Tensor(1.0).softmax()\nexcept KeyboardInterrupt:\n    print('interrupted', registry._all_registered)\n"
        "registry.defop = real\n"
        "print(ad.Tensor([1.0, 2.0]).softmax().data.sum(), len(ad.REGISTRY) > 100, registry._all_registered)"
    )
    assert out.splitlines() == ["interrupted False", "1.0 True True"]


def test_class_level_lookups_and_dir_see_every_op():
    out = fresh(
        "print(callable(ad.Tensor.exp), getattr(ad.Tensor, 'tanh', None) is not None, 'softmax' in dir(ad.Tensor))\n"
        "print('softmax' in dir(ad.ops), 'softmax' in dir(ad.Tensor([1.0])))"
    )
    assert out.splitlines() == ["True True True", "True True"]


@pytest.mark.parametrize("ask, expected", [
    ("ad.REGISTRY.pop('tanh', 'missing') != 'missing'", "True"),
    ("ad.REGISTRY.setdefault('tanh', None) is not None", "True"),
    ("len(list(reversed(ad.REGISTRY))) == len(ad.REGISTRY) > 100", "True"),
    ("'softmax' in repr(ad.REGISTRY)", "True"),
    ("(registry.unregister('softmax'), 'softmax' in ad.REGISTRY)[1]", "False"),
    # the families' order, as when every family was imported at once (the first is activations)
    ("ad.REGISTRY[next(iter(ad.REGISTRY))].forward.__module__.rsplit('.', 1)[1]", "activations"),
])
def test_the_table_answers_every_dict_question_after_registering(ask, expected):
    assert fresh(f"print({ask})") == expected


def test_an_op_whose_forward_has_no_module_registers():
    out = fresh(
        "scope = {}\nexec('fwd = lambda x: x * 2.0\\nvjp = lambda m, g, ans, x: g * 2.0', scope)\n"
        "ad.defop('twice_anon', scope['fwd'], (scope['vjp'],), doc='2x', category='user', method=True)\n"
        "print(ad.Tensor(3.0).twice_anon().item())"
    )
    assert out == "6.0"
