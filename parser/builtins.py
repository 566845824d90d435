"""The language's built-in names that are not ops: one `defbuiltin` record each.

What `defop` is for an op (autodiff/registry.py), a record here is for the transformations
(grad(f), vmap(f), jvp(f, x, v), ...), the expression forms grad(y, x), jacobian(y, x)
and hessian(y, x), and the language's own load, range and help: its name, how it is
written (its forms: the first is its signature), what it computes, an example, and how it
is called. Everything that knows these names reads them here: the machine (which calls
them), the compiler (which reads the expression forms' and a loop's arguments its own
way), help, the REPL's completion, `gradcalc ops` and docs/language.md's function table
(which `python -m gradcalc.cli.oplist` writes from `gradcalc ops`). A new record is a new
built-in for all of them.

How a record is called (`call`, `rule`) is named as "module:function" of this package
and imported when first called, so that the table costs start-up nothing and imports
none of the modules that implement it (which read it). A callable works too.

    call(session, name, args, kwargs) -> value   what `name(...)` gives
    rule(session, f, what, option, args, kwargs) -> value   a transformation's function called
    rule(session, f, rest) -> value              a value at a point (jvp, vjp, hvp)
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

Implementation = Callable[..., Any] | str | None

AUTODIFF, LANGUAGE = "autodiff", "language"
# What `help` and `gradcalc ops` say of each category.
CATEGORIES = {
    AUTODIFF: "autodiff (acts on the graph of its first argument)",
    LANGUAGE: "language (a form of the language, not an op)",
}


class BuiltinDef:
    """One built-in name of the language that is not an op (see the module's docstring).

    `forms` are the ways it is written, the first its signature; a form whose first
    argument is `f` is the transformation, and its keyword arguments are the
    transformation's `options`, with their defaults. `expression`: grad(y, x) is the
    derivative of a value (the compiler reads a tuple written as x as the variables, and
    the engine's backend computes it), when the first argument is not a function.
    `primals`: a tuple written in place is a tuple of primals (jvp(f, (x, y), (u, v))).
    `pointwise`: the transformation gives values at a point, not a function. `statement`:
    `name(NAME)` is a statement whose argument is a name, not evaluated (help); its call
    gives lines of text. `loop`: only a for loop's header, which the compiler reads
    (range). `scalar`: the scalar engine has it too. `files`: the data files (name ->
    text) the example reads, written to a fresh folder where it runs. `transform_as`: the
    record whose transformation this one makes (jacobian(f) is jacrev(f)). `scalar_output`:
    the transformed function must give one number (grad(f): JAX's and torch.func's too).

    A plain class, as OpDef is: the table is built on every start-up."""

    __slots__ = ("name", "forms", "doc", "example", "category", "call", "rule", "options", "expression", "primals", "pointwise",
                 "statement", "loop", "scalar", "files", "transform_as", "scalar_output")

    def __init__(
        self, name: str, forms: tuple[str, ...], doc: str, example: str, category: str, call: Implementation, rule: Implementation,
        expression: bool, primals: bool, pointwise: bool, statement: bool, loop: bool, scalar: bool, files: dict[str, str],
        transform_as: str | None, scalar_output: bool,
    ) -> None:
        self.name, self.forms, self.doc, self.example, self.category = name, forms, doc, example, category
        self.call, self.rule, self.expression, self.primals, self.pointwise = call, rule, expression, primals, pointwise
        self.statement, self.loop, self.scalar, self.files, self.transform_as = statement, loop, scalar, files, transform_as
        self.scalar_output = scalar_output
        self.options = _options(self.transform or "")

    @property
    def signature(self) -> str:
        return self.forms[0]

    @property
    def usage(self) -> str:
        """Every form: `range(stop), range(start, stop), range(start, stop, step)`."""
        return ", ".join(self.forms)

    @property
    def line(self) -> str:
        """`forms: doc`, as help's first line and the REPL's completion menu show it."""
        return f"{self.usage}: {self.doc}"

    @property
    def transform(self) -> str | None:
        """The form that takes a function first (`grad(f, argnums=0)`), if there is one."""
        return next((form for form in self.forms if form.startswith(f"{self.name}(f")), None)

    @property
    def is_value(self) -> bool:
        """Whether the name is a function value of the language (`g = grad`), as an op's
        name is; a statement's or a loop's name is not."""
        return not (self.statement or self.loop)

    def run(self, session: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """`name(...)` with these arguments: what the record's call gives."""
        return self.resolved("call")(session, self.name, args, kwargs)

    def resolved(self, which: str) -> Callable[..., Any]:
        """The function `call` or `rule` names, imported the first time it is asked for."""
        found = getattr(self, which)
        if isinstance(found, str):
            import importlib

            module, _, attribute = found.partition(":")
            found = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
            setattr(self, which, found)
        if found is None:
            raise LookupError(f"the built-in {self.name} has no {which}")
        return found  # type: ignore[no-any-return]  # (a callable, given or imported)

    def __repr__(self) -> str:
        return f"<builtin {self.signature}>"


def _options(form: str) -> dict[str, Any]:
    """A form's keyword arguments and their defaults: `vmap(f, in_axes=0, out_axes=0)` ->
    {'in_axes': 0, 'out_axes': 0} (a default is a whole number, or None)."""
    options: dict[str, Any] = {}
    for part in form[form.find("(") + 1 : -1].split(", "):
        key, equals, default = part.partition("=")
        if equals:
            options[key] = None if default == "None" else int(default)
    return options


BUILTINS: dict[str, BuiltinDef] = {}
# How many times the table has changed: what is computed from it is computed again after.
GENERATION = [0]


def defbuiltin(
    name: str, *forms: str, doc: str, example: str, category: str = AUTODIFF, call: Implementation = None, rule: Implementation = None,
    expression: bool = False, primals: bool = False, pointwise: bool = False, statement: bool = False, loop: bool = False,
    scalar: bool = False, files: dict[str, str] | None = None, transform_as: str | None = None, scalar_output: bool = False,
) -> BuiltinDef:
    """Put a built-in in the table (replacing one of the same name) and return it."""
    if not forms or not all(form.startswith(f"{name}(") and form.endswith(")") for form in forms):
        raise ValueError(f"defbuiltin {name}: each form is a call of {name}, as in {name}(x)")
    if call is None and not loop:
        raise ValueError(f"defbuiltin {name}: give the function that implements it (call=)")
    record = BuiltinDef(name, forms, doc, example, category, call, rule, expression, primals, pointwise, statement, loop, scalar,
                        files or {}, transform_as, scalar_output)
    BUILTINS[name] = record
    GENERATION[0] += 1
    return record


def names(which: Callable[[BuiltinDef], bool]) -> frozenset[str]:
    """The names of the records for which `which` holds."""
    return frozenset(name for name, record in BUILTINS.items() if which(record))


def is_value(record: BuiltinDef) -> bool:
    return record.is_value


def on_scalar_engine(record: BuiltinDef) -> bool:
    return record.scalar


class Lines(Mapping[str, str]):
    """name -> help's first line, of the records of one category: read from the table
    at each look-up, so a record added later is in it."""

    def __init__(self, category: str) -> None:
        self.category = category

    def __getitem__(self, name: str) -> str:
        record = BUILTINS.get(name)
        if record is None or record.category != self.category:
            raise KeyError(name)
        return record.line

    def __iter__(self) -> Iterator[str]:
        return (name for name, record in BUILTINS.items() if record.category == self.category)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# ---- the table ------------------------------------------------------------------------------

_TRANSFORM = "transforms:make"  # every transformation is made there, from its record

defbuiltin("grad", "grad(y, x)", "grad(f, argnums=0)",
           doc="dy/dx (of the sum of y if it is not a scalar), differentiable again; of a function f with a scalar output, "
               "the function x -> df/dx",
           example="x = 2\ngrad(x ** 3, x)", call=_TRANSFORM, rule="transforms:gradient_of", expression=True,
           scalar_output=True)
defbuiltin("jacobian", "jacobian(y, x)", "jacobian(f, argnums=0)",
           doc="dy/dx with shape y.shape + x.shape; of a function f, jacrev(f)",
           example="x = [1, 2]\njacobian(x ** 2, x)", call=_TRANSFORM, expression=True, transform_as="jacrev")
defbuiltin("hessian", "hessian(y, x)", "hessian(f, argnums=0)",
           doc="second derivatives of a scalar y, shape x.shape + x.shape; of a function f, "
               "the function x -> d2f/dx2, forward over reverse",
           example="x = [1, 2]\nhessian(sum(x ** 3), x)", call=_TRANSFORM, rule="transforms:hessian_of", expression=True,
           scalar_output=True)
defbuiltin("value_and_grad", "value_and_grad(f, argnums=0)",
           doc="the function x -> (f(x), df/dx), for f with a scalar output",
           example="value_and_grad(lambda t: sin(t) * t)(0.5)", call=_TRANSFORM, rule="transforms:value_and_gradient_of",
           scalar_output=True)
defbuiltin("jacrev", "jacrev(f, argnums=0)",
           doc="the function x -> df/dx of shape f(x).shape + x.shape, by one backward pass of a batch of cotangents",
           example="jacrev(lambda v: v ** 2)([1, 2, 3])", call=_TRANSFORM, rule="transforms:jacobian_of")
defbuiltin("jacfwd", "jacfwd(f, argnums=0)",
           doc="the function x -> df/dx as jacrev gives it, by one forward pass of a batch of tangents",
           example="jacfwd(lambda v: sin(v) * v[0])([0.5, 1])", call=_TRANSFORM, rule="transforms:jacobian_forward_of")
defbuiltin("vmap", "vmap(f, in_axes=0, out_axes=0)",
           doc="the function that maps f over an axis of its arguments (in_axes: one axis, "
               "or one per argument, None for one not mapped) and stacks the results on a new axis (out_axes, the first)",
           example="vmap(lambda row: sum(row ** 2))([[1, 2], [3, 4]])", call=_TRANSFORM, rule="transforms:mapped")
defbuiltin("jvp", "jvp(f, primals, tangents)",
           doc="f(x) and J v, by forward mode; several arguments as tuples, jvp(f, (x, y), (u, v))",
           example="jvp(lambda t: t ** 3, 2, 1)", call=_TRANSFORM, rule="transforms:jvp_at", pointwise=True, primals=True)
defbuiltin("vjp", "vjp(f, *primals)",
           doc="f(x) and the function u -> u J (the cotangent of each primal), by reverse mode",
           example="y, back = vjp(lambda t: t ** 2, 3)\nback(1)", call=_TRANSFORM, rule="transforms:vjp_at", pointwise=True)
defbuiltin("hvp", "hvp(f, primals, tangents)",
           doc="the Hessian of a scalar f at x times v, forward over reverse",
           example="hvp(lambda v: sum(v ** 3), [1, 2], [1, 0])", call=_TRANSFORM, rule="transforms:hvp_at", pointwise=True, primals=True)

# Calls of load written the ways it takes them (datafiles' messages quote them).
LOAD_HELP = 'load("weights.npy"), load("data.npz", "W") or load("data.npz:W")'
defbuiltin("load", "load(file)", "load(file, name)",
           doc="the array a .npy, .npz, .csv or .json file holds (name: an archive's member, "
               f"a column), a constant until assigned; the file is relative to the script's folder: {LOAD_HELP}",
           example='load("data.csv")', files={"data.csv": "1,2\n3,4\n"}, category=LANGUAGE, call="datafiles:load_builtin", scalar=True)
defbuiltin("range", "range(stop)", "range(start, stop)", "range(start, stop, step)",
           doc="the whole numbers a loop runs over, as in for i in range(10): x += i (only in a for loop)",
           example="s = 0\nfor i in range(4): s += i\ns", category=LANGUAGE, loop=True)
defbuiltin("help", "help(NAME)",
           doc="what a function computes, its derivative rule and an example; help() lists the functions",
           example="help(exp)", category=LANGUAGE, call="help:answer", statement=True)
