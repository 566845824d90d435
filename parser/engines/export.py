"""`gradcalc export FILE --to jax|torch`: the program as a Python module of that library.

The module holds one function per `def`, and one function per result of the program (each
`check` and each expression statement), of the variables the result depends on (its
graph's named leaves, as gradcalc reports them), with beside it that result's gradient by
the library (`jax.grad`, `torch.func.grad`) and the values the program gives those
variables. A result's function runs the statements it needs, in order (a slice of the
program), on the library's arrays, through the op table's counterparts; `grad(y, x)`
becomes the library's transformation of y written as a function of x (the statements
defining y substituted into it). The module imports only the library and NumPy: the op
table's adapters it calls are copied into it.

What has no place in such a module is refused by name: a vjp rule of the user's, a file
read by load(), help().
"""
from __future__ import annotations

import inspect
import keyword
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from gradcalc.autodiff import lookup
from gradcalc.autodiff.arguments import counts
from gradcalc.autodiff.binding import SPELLINGS

from ..backends import CONSTANTS, public_ops
from ..builtins import BUILTINS
from ..compiler import (
    ATTR,
    BINARY,
    CALL,
    CALL_VALUE,
    CONST,
    FUNCTION,
    INDEX,
    JUMP,
    JUMP_IF_FALSE,
    LOAD,
    METHOD,
    NONE,
    SLICE,
    STRING,
    TENSOR,
    TUPLE,
    UNARY,
    Instruction,
    Program,
    Statement,
)
from ..errors import LanguageError
from .table import LIBRARIES, Gap, counterpart

_PYTHON = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@", "pow": "**", "floor_divide": "//", "remainder": "%",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_COMPARE = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
# The module's own names, which a program's variables must not take.
_TAKEN = frozenset({"jax", "jnp", "np", "torch", "F", "lax", "INPUTS", "RESULTS", "result", "result_grad"})

# The small helpers every module carries, per library (how a number becomes an array, ...).
_HELPERS = {
    "jax": '''
def _c(value):
    """A number written in the program: a float64 array (true and false: booleans)."""
    return jnp.asarray(value, dtype=None if isinstance(value, bool) else jnp.float64)


def _stop(value):
    """A value computed inside `with no_grad:` (or by an op without gradient): a constant."""
    return jax.lax.stop_gradient(value)


def _f(value):
    """Booleans (a comparison's) as the numbers 0.0 and 1.0, as every op takes them."""
    return jnp.asarray(value, dtype=jnp.float64)


def _grad(function, argnums):
    """grad of the sum of a function's result (of one element, for hessian)."""
    return jax.grad(lambda *xs: jnp.sum(function(*xs)), argnums=argnums)


def _scalar(function):
    return lambda *xs: jnp.reshape(function(*xs), ())


def _truth(value):
    return bool(value)
''',
    "torch": '''
def _c(value):
    """A number written in the program: a float64 tensor (true and false: booleans)."""
    return torch.tensor(value, dtype=None if isinstance(value, bool) else torch.float64)


def _stop(value):
    """A value computed inside `with no_grad:` (or by an op without gradient): a constant."""
    return value.detach() if hasattr(value, "detach") else value


def _f(value):
    """Booleans (a comparison's) as the numbers 0.0 and 1.0, as every op takes them."""
    return value.to(torch.float64)


def _grad(function, argnums):
    """grad of the sum of a function's result."""
    return torch.func.grad(lambda *xs: function(*xs).sum(), argnums=argnums)


def _scalar(function):
    return lambda *xs: function(*xs).reshape(())


def _truth(value):
    return bool(value)
''',
}
_COMMON_HELPERS = '''

def _p(value):
    """A parameter (an axis, a shape, a count) from a value: a whole number, or a tuple of them."""
    # (tolist, not NumPy: inside torch.func a tensor made there is wrapped and has no storage to read)
    data = np.asarray(value.detach().cpu().tolist() if hasattr(value, "detach") else value, dtype=float).reshape(-1)
    items = tuple(int(v) if float(v).is_integer() else float(v) for v in data)
    return items[0] if np.ndim(value) == 0 else items


def _ix(value):
    """An index: a whole number, or an array of them, or a mask."""
    if hasattr(value, "detach"):  # a tensor indexes PyTorch's tensors as it is (inside torch.func too)
        return value if str(value.dtype).endswith("bool") else value.long()
    data = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value)
    if data.dtype == bool:
        return data
    return int(data) if data.ndim == 0 else data.astype(np.intp)


def _at(value, index):
    """value[index]: a result of several, or the elements of a tensor."""
    return value[index[0]] if isinstance(value, tuple) else op_getitem(value, index[0] if len(index) == 1 else index)


def _args(value):
    return value if isinstance(value, tuple) else (value,)
'''


class Expr:
    """A decompiled expression: its text, and what is known of it at export time (a
    constant's value; a list literal's items; a tuple's items)."""

    __slots__ = ("text", "const", "items", "kind", "source", "ident")

    def __init__(self, text: str, const: Any = None, items: list[Expr] | None = None, kind: str = "") -> None:
        self.text, self.const, self.items, self.kind = text, const, items, kind
        self.source: tuple[list[Instruction], int, int] | None = None  # the code it was written from (its instructions from, to)
        self.ident = ""  # a name's own, as the program writes it


class Exporter:
    """The program translated for `library` ("jax" or "torch")."""

    def __init__(self, program: Program, library: str) -> None:
        self.program, self.library = program, library
        self.adapters: set[str] = set()
        defs = [s for s in program.statements if s.kind == "def"]
        for statement in program.statements:
            if statement.kind == "vjp":
                raise _refused(statement, "a vjp rule of yours is not exported (the module would need it as the library's custom derivative)")
        names = [s.function.name for s in defs if s.function is not None]
        if len(set(names)) != len(names):
            raise LanguageError("argument", "export: a function defined twice; export writes one Python function per def")
        self.defs = {s.function.name: s.function for s in defs if s.function is not None}
        self.free = self._free_names()
        self._where: tuple[list[Instruction], set[str], dict[str, list[Instruction]], set[str] | None] = ([], set(), {}, None)

    # ---- names ---------------------------------------------------------------------------
    @staticmethod
    def name(name: str) -> str:
        """A program's name as the module's (a Python keyword or one of the module's own gets `_`)."""
        return f"{name}_" if keyword.iskeyword(name) or name in _TAKEN or name in ("l", "O", "I") or name.startswith(("op_", "_")) else name

    def _free_names(self) -> dict[str, list[str]]:
        """For each def, the program's variables it reads (through the defs it calls too):
        the exported function takes them by keyword."""
        direct = {name: _reads(f.code) - set(f.params) - set(self.defs) - set(CONSTANTS) for name, f in self.defs.items()}
        direct = {name: {n for n in found if n not in public_ops() and n not in BUILTINS and n not in ("None", "...")}
                  for name, found in direct.items()}
        calls = {name: _reads(f.code) & set(self.defs) for name, f in self.defs.items()}
        free = {name: set(found) for name, found in direct.items()}
        changed = True
        while changed:
            changed = False
            for name in free:
                for callee in calls[name]:
                    if not free[callee] <= free[name]:
                        free[name] |= free[callee]
                        changed = True
        return {name: sorted(found) for name, found in free.items()}

    # ---- expressions ---------------------------------------------------------------------------
    def expression(self, code: list[Instruction], local: set[str], inline: dict[str, list[Instruction]], bound: set[str] | None = None) -> Expr:
        """The code's value as Python. `local`: the names of parameters in scope; `inline`:
        definitions substituted for names inside a derivative (`bound`: the names it is by)."""
        return self._range(code, 0, len(code), local, inline, bound)

    def _range(self, code: list[Instruction], start: int, end: int, local: set[str], inline: dict[str, list[Instruction]],
               bound: set[str] | None) -> Expr:
        stack: list[Expr] = []
        starts: list[int] = []  # where each value's instructions begin (grad(y, x) writes y again, as a function of x)
        pc = start
        while pc < end:
            at, depth = pc, len(stack)
            op, arg, span = code[pc]
            pc += 1
            self._where = (code, local, inline, bound)
            try:
                if op == JUMP_IF_FALSE:  # `a if c else b`: the then-branch ends in a JUMP past the else-branch
                    condition = stack.pop()
                    skip = code[pc + arg - 1][1]
                    then = self._range(code, pc, pc + arg - 1, local, inline, bound)
                    otherwise = self._range(code, pc + arg, pc + arg + skip, local, inline, bound)
                    stack.append(Expr(f"({then.text} if _truth({condition.text}) else {otherwise.text})"))
                    pc += arg + skip
                elif op == JUMP:
                    raise LanguageError("argument", "export: a jump outside a conditional expression")
                else:
                    self._step(op, arg, stack, local, inline, bound)
            except LanguageError as err:
                raise err.at(span) from None
            kept = len(stack) - 1
            first = min([*starts[kept:depth], at])
            del starts[kept:]
            starts.append(first)
            stack[-1].source = (code, first, pc)
        return stack.pop()

    def _step(self, op: int, arg: Any, stack: list[Expr], local: set[str], inline: dict[str, list[Instruction]], bound: set[str] | None) -> None:
        if op == CONST:
            stack.append(Expr(f"_c({_literal(arg)})", const=arg))
        elif op == STRING:
            stack.append(Expr(repr(arg), const=arg, kind="string"))
        elif op == NONE:
            stack.append(Expr("None", kind="none"))
        elif op == LOAD:
            stack.append(self._load(arg, local, inline, bound))
        elif op == BINARY:
            b, a = stack.pop(), stack.pop()
            if arg in _COMPARE:
                stack.append(Expr(f"({a.text} {_PYTHON[arg]} {b.text})", kind="bool"))
            else:
                stack.append(Expr(f"({_operand(a)} {_PYTHON[arg]} {_operand(b)})"))
        elif op == UNARY:
            a = stack.pop()
            number = isinstance(a.const, (int, float)) and not isinstance(a.const, bool)
            stack.append(Expr(f"(-{a.text})", const=-a.const if number else None) if arg == "neg" else a)
        elif op in (CALL, METHOD, CALL_VALUE):
            self._call(op, arg, stack, local)
        elif op == FUNCTION:
            params = set(arg.params) | local
            body = self.expression(arg.code, params, inline, bound)
            stack.append(Expr(f"(lambda {', '.join(self.name(p) for p in arg.params)}: {_bare(body.text)})", kind="function"))
        elif op == ATTR:
            stack.append(self._attribute(stack.pop(), arg))
        elif op == INDEX:
            parts = [stack.pop() for _ in range(arg)][::-1]
            target = stack.pop()
            stack.append(Expr(f"_at({target.text}, ({', '.join(_index(p) for p in parts)},))"))
        elif op == SLICE:
            if arg is not None:  # `:` (the compiler's slice without bounds)
                stack.append(Expr("slice(None, None, None)", kind="slice"))
            else:
                step, stop, begin = stack.pop(), stack.pop(), stack.pop()
                stack.append(Expr(f"slice({', '.join(_whole(p) for p in (begin, stop, step))})", kind="slice"))
        elif op == TENSOR:
            items = [stack.pop() for _ in range(arg)][::-1]
            stack.append(self._literal(items))
        elif op == TUPLE:
            items = [stack.pop() for _ in range(arg)][::-1]
            stack.append(Expr(f"({', '.join(i.text for i in items)}{',' if len(items) == 1 else ''})", items=items, kind="tuple"))
        else:
            raise LanguageError("argument", f"export: an instruction it cannot write ({op})")

    def _load(self, name: str, local: set[str], inline: dict[str, list[Instruction]], bound: set[str] | None) -> Expr:
        if name == "None":
            return Expr("None", kind="none")
        if name == "...":
            return Expr("Ellipsis", kind="none")
        if name in local:
            return _named(self.name(name), name)
        if bound is not None and name not in bound and name in inline:  # inside a derivative: y written as a function of x
            return Expr(f"({self.expression(inline[name], local, inline, bound).text})")
        if name in self.defs:
            free = self.free[name]
            if not free:
                return Expr(self.name(name), kind="function")
            passed = ", ".join(f"{n}={self.name(n)}" for n in free)
            return Expr(f"(lambda *args: {self.name(name)}(*args, {passed}))", kind="function")
        if name in CONSTANTS and name not in inline:
            return Expr(f"_c({_literal(CONSTANTS[name])})", const=CONSTANTS[name])
        if name in public_ops() and name not in inline:
            return Expr(self._counterpart(name), kind="function")
        return _named(self.name(name), name)

    def _counterpart(self, name: str) -> str:
        op = lookup(name)
        assert op is not None
        spec = counterpart(op.name, self.library)
        if isinstance(spec, Gap):
            raise LanguageError("argument", f"export: {op.name} has no {LIBRARIES[self.library]} counterpart here ({spec.reason})")
        if spec.startswith("op_"):
            self.adapters.add(spec)
        return spec

    def _attribute(self, target: Expr, name: str) -> Expr:
        if name == "T":
            return Expr(f"{self._counterpart('transpose')}({target.text})")
        if name == "mT":
            return Expr(f"{self._counterpart('swapaxes')}({target.text}, axis1=-2, axis2=-1)")
        array = "jnp.asarray" if self.library == "jax" else "torch.tensor"
        what = {"shape": "tuple(_v.shape)", "ndim": "_v.ndim", "size": "_v.size if hasattr(_v, 'size') and not callable(_v.size) else _v.numel()"}[name]
        return Expr(f"{array}((lambda _v: {what})({target.text}))")

    def _literal(self, items: list[Expr]) -> Expr:
        if any(i.kind == "none" for i in items):  # vmap's in_axes=(0, None)
            return Expr(f"({', '.join(str(i.const) if i.const is not None else 'None' for i in items)},)", items=items, kind="axes")
        consts = [i.const if i.items is None else _nested(i) for i in items]
        if all(c is not None for c in consts):
            return Expr(f"_c({_literal(consts)})", const=consts, items=items, kind="list")
        stack = self._counterpart("stack")
        return Expr(f"{stack}({', '.join(i.text for i in items)})", items=items, kind="list")

    # ---- calls -----------------------------------------------------------------------------------
    def _call(self, op: int, arg: Any, stack: list[Expr], local: set[str]) -> None:
        if op == CALL_VALUE:
            n_positional, keywords = arg
            name = None
        else:
            name, n_positional, keywords = arg
        named = {key: stack.pop() for key in reversed(keywords)}
        named = dict(reversed(list(named.items())))
        args = stack[len(stack) - n_positional:]
        del stack[len(stack) - n_positional:]
        if op == METHOD:
            args = [stack.pop(), *args]
        elif op == CALL_VALUE:
            callee = stack.pop()
            stack.append(Expr(f"{callee.text}({_arguments(args, named)})"))
            return
        assert name is not None
        builtin = BUILTINS.get(name)  # a built-in that is not an op (parser/builtins.py)
        if op == CALL and (name in local or name not in self.defs and name not in public_ops() and builtin is None):
            stack.append(Expr(f"{self.name(name)}({_arguments(args, named)})"))  # a function value held by a variable
        elif op == CALL and name in self.defs:  # (with the program's variables it reads, by keyword)
            passed = {n: Expr(self.name(n)) for n in self.free[name]}
            stack.append(Expr(f"{self.name(name)}({_arguments(args, {**named, **passed})})"))
        elif builtin is not None and builtin.transform and (not builtin.expression or args and args[0].kind == "function"):
            stack.append(self._transform(name, args, named))
        elif builtin is not None and builtin.expression:
            stack.append(self.derivative(name, args, named))
        elif builtin is not None:
            raise LanguageError("argument", f"export: {name}(...) has no place in an exported module")
        else:
            stack.append(self._op(name, args, named))

    def _op(self, name: str, args: list[Expr], named: dict[str, Expr]) -> Expr:
        op = lookup(name)
        if op is None:
            raise LanguageError("name", f"export: unknown function {name!r}")
        leading = [p for p in op.leading if p not in named]
        params: dict[str, Expr] = {}
        while leading and args and args[0].kind == "string":
            params[leading.pop(0)] = args.pop(0)
        if op.listed and len(args) == 1 and args[0].items is not None and args[0].kind in ("list", "tuple"):
            args = list(args[0].items)  # concatenate([a, b]): the list is the inputs
        n_in = len(args) if op.n_in is None else op.n_in
        inputs, extra = args[:n_in], args[n_in:]
        for key, value in named.items():
            params[SPELLINGS.get(key, key) if SPELLINGS.get(key) in op.param_names else key] = value
        written_params = {k: _param(op, k, v) for k, v in params.items()}
        if op.variadic_param is not None and extra:  # reshape(x, 3, 2) and reshape(x, (3, 2)): shape=(3, 2)
            one = _param(op, op.variadic_param, extra[0])
            written_params[op.variadic_param] = one if len(extra) == 1 and (one.startswith("(") or one.startswith("_p(")) else \
                f"({', '.join(_param(op, op.variadic_param, e) for e in extra)},)"
        else:
            written_params.update({k: _param(op, k, v) for k, v in zip(op.param_names, extra)})
        function = self._counterpart(name)
        written = [_bare(i.text) if op.name == "getitem" else _number(i) for i in inputs] + [f"{k}={v}" for k, v in written_params.items()]
        call = f"{function}({', '.join(written)})"
        # an op without gradient gives a constant, as in gradcalc (torch would refuse to differentiate floor_divide)
        return Expr(call if op.has_gradient or not inputs or op.name == "detach" else f"_stop({call})")

    def _transform(self, name: str, args: list[Expr], named: dict[str, Expr]) -> Expr:
        f, rest = args[0], args[1:]
        options = dict(zip(["in_axes", "out_axes"] if name == "vmap" else ["argnums"], rest)) | named
        jax = self.library == "jax"
        lib = "jax" if jax else "torch.func"
        if name == "vmap":
            axes = {k: v.text if v.kind == "axes" else _param_value(v) for k, v in options.items()}  # (in_axes=(0, None) is written as it is)
            spelled = {"in_axes": "in_axes" if jax else "in_dims", "out_axes": "out_axes" if jax else "out_dims"}
            given = ", ".join(f"{spelled[k]}={v}" for k, v in axes.items())
            return Expr(f"{lib}.vmap({f.text}{', ' + given if given else ''})", kind="function")
        argnums = _param_value(options["argnums"]) if "argnums" in options else "0"
        if name == "grad":
            return Expr(f"{lib}.grad(_scalar({f.text}), argnums={argnums})", kind="function")
        if name == "value_and_grad":
            made = f"jax.value_and_grad(_scalar({f.text}), argnums={argnums})" if jax else \
                f"(lambda *xs: tuple(reversed(torch.func.grad_and_value(_scalar({f.text}), argnums={argnums})(*xs))))"
            return Expr(made, kind="function")
        if name in ("jacrev", "jacobian", "jacfwd"):
            return Expr(f"{lib}.{'jacfwd' if name == 'jacfwd' else 'jacrev'}({f.text}, argnums={argnums})", kind="function")
        if name == "hessian":
            return Expr(f"{lib}.hessian(_scalar({f.text}), argnums={argnums})", kind="function")
        if name == "jvp":
            return Expr(f"{lib}.jvp({f.text}, _args({rest[0].text}), _args({rest[1].text}))")
        if name == "hvp":
            return Expr(f"{lib}.jvp({lib}.grad(_scalar({f.text})), _args({rest[0].text}), _args({rest[1].text}))[1]")
        pulled = f"{lib}.vjp({f.text}, {', '.join(r.text for r in rest)})"
        return Expr(f"(lambda _r: (_r[0], lambda u: tuple(_r[1](u))))({pulled})")

    def derivative(self, kind: str, args: list[Expr], named: dict[str, Expr]) -> Expr:
        """grad(y, x), jacobian(y, x), hessian(y, x): the library's transformation of y written
        again as a function of x (names y was computed from substituted by their definitions)."""
        if named or len(args) != 2 or args[0].source is None:
            raise LanguageError("argument", f"export: {kind}(y, x) takes the output y and the variable x")
        y, x = args
        names = [x] if x.items is None else x.items
        if any(n.kind != "name" for n in names):
            raise LanguageError("argument", f"export: {kind}(y, x) is written for x a variable's name, or a tuple of names")
        targets = [n.ident for n in names]
        code, local, inline, _ = self._where
        assert y.source is not None
        source, start, end = y.source
        written = _bare(self._range(source, start, end, local - set(targets), inline, set(targets)).text)
        params = ", ".join(self.name(t) for t in targets)
        lib = "jax" if self.library == "jax" else "torch.func"
        argnums = tuple(range(len(targets))) if x.items is not None else 0
        if kind == "grad":
            return Expr(f"_grad(lambda {params}: {written}, {argnums})({params})")
        if kind == "jacobian":
            return Expr(f"{lib}.jacrev(lambda {params}: {written}, argnums={argnums})({params})")
        return Expr(f"{lib}.hessian(_scalar(lambda {params}: {written}), argnums={argnums})({params})")

    def value(self, code: list[Instruction], local: set[str], inline: dict[str, list[Instruction]]) -> str:
        """A statement's value, as Python."""
        return _bare(self.expression(code, local, inline).text)

    # ---- statements ----------------------------------------------------------------------------------
    def body(self, statements: Iterable[Statement], indent: str, inline: dict[str, list[Instruction]], stop: bool = False) -> list[str]:
        lines: list[str] = []
        for s in statements:
            if s.kind in ("def", "expr", "check", "error"):
                continue
            if s.kind == "no_grad":
                lines += self.body(s.body, indent, inline, stop=True)
            elif s.kind == "for":
                for name in _defines(s):
                    _forget(inline, name)
                if s.over is not None:
                    head = f"for {self.name(s.targets[0])} in {self.value(s.over[0], set(), inline)}:"
                else:
                    head = f"for {self.name(s.targets[0])} in range({', '.join(f'_p({self.value(c, set(), inline)})' for c, _ in s.bounds)}):"
                lines.append(indent + head)
                lines += self.body(s.body, indent + "    ", inline, stop) or [indent + "    pass"]
                for name in _defines(s):
                    _forget(inline, name)
            elif s.kind in ("assign", "unpack", "update"):
                value = self.value(s.code, set(), inline)
                if stop:
                    value = f"_stop({value})" if s.kind != "unpack" else f"tuple(_stop(v) for v in {value})"
                lines.append(f"{indent}{', '.join(self.name(t) for t in s.targets)} = {value}")
                for name in s.targets:
                    _forget(inline, name)
                if s.kind == "assign":
                    inline[s.targets[0]] = s.code
            else:
                raise _refused(s, f"a {s.kind} statement is not exported")
        return lines

    def result_function(self, name: str, statement: Statement, before: list[Statement], origins: dict[str, int]) -> list[str]:
        """def NAME(params): the statements `before` that the result needs, then its value;
        `origins` holds the parameters, each with the statement that gave it its value."""
        params = list(origins)
        slice_ = _slice(statement, before, origins, self)
        inline: dict[str, list[Instruction]] = {}
        lines = [f"def {name}({', '.join(self.name(p) for p in params)}):", f'    """{_docstring(statement)}"""']
        lines += self.body(slice_, "    ", inline)
        lines.append(f"    return {self.value(statement.code, set(), inline)}")
        return lines

    def def_function(self, function: Any) -> list[str]:
        params = [self.name(p) for p in function.params]
        free = [self.name(n) for n in self.free[function.name]]
        signature = ", ".join(params + (["*", *free] if free else []))
        body = self.value(function.code, set(function.params), {})  # (bare: no parentheses around it all)
        return [f"def {self.name(function.name)}({signature}):", f'    """{_docstring_text(function.text)}"""', f"    return {body}"]

    def adapter_source(self) -> list[str]:
        """The op table's adapters the module calls, and the helpers they call, as source."""
        import importlib

        try:
            module = importlib.import_module(f"gradcalc.parser.engines.{self.library}_ops")
        except ModuleNotFoundError as err:  # (the adapters are copied from the module that imports the library)
            name = {"jax": "JAX", "torch": "PyTorch"}[self.library]
            raise LanguageError("argument", f"export --to {self.library} needs {name} installed (its adapters are copied from "
                                            f"gradcalc's own, which import it; missing: {err.name}): pip install "
                                            f"'gradcalc[{self.library}]'") from None
        wanted = sorted(self.adapters | {"op_getitem"})
        seen: list[str] = []
        queue = list(wanted)
        while queue:
            name = queue.pop(0)
            if name in seen:
                continue
            seen.append(name)
            queue += [n for n in _names_read(getattr(module, name)) if _copyable(getattr(module, n, None), module.__name__)]
        return [_copied(name, getattr(module, name)) for name in sorted(seen)]


def _names_read(definition: Any) -> set[str]:
    """The global names a function reads, or a class's functions do (an autograd.Function's
    forward, backward and jvp)."""
    if inspect.isfunction(definition):
        return set(definition.__code__.co_names)
    found: set[str] = set()
    for member in vars(definition).values():
        function = getattr(member, "__func__", member)  # (a staticmethod's function)
        if inspect.isfunction(function):
            found |= set(function.__code__.co_names)
    return found


def _copyable(definition: Any, module: str) -> bool:
    """A function or class the adapters' module defines (or the shared refusals): copied."""
    return (inspect.isfunction(definition) or inspect.isclass(definition)) and definition.__module__ in (module, REFUSALS)


# The checks both engines share (autodiff/ops/refusals.py), copied in under the name the
# adapters import them by; what they raise for a shape is a ValueError there.
REFUSALS = "gradcalc.autodiff.ops.refusals"
SHAPE_ERROR = "_ShapeError = ValueError  # (gradcalc's ShapeError, for a shape the function cannot take)"


def _copied(name: str, function: Any) -> str:
    source = _unannotated(inspect.getsource(function))
    if function.__module__ == REFUSALS:
        source = source.replace(f"def {function.__name__}(", f"def {name}(", 1)
    return source


# ---- what code reads and defines -----------------------------------------------------------------


def _unannotated(source: str) -> str:
    """A function's source without its type hints (the module imports nothing to spell them)."""
    import ast

    lines = source.split("\n")
    cuts: list[tuple[int, int, int]] = []  # (line, from, to) of each hint's text
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            for argument in [*node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]:
                if argument is not None and argument.annotation is not None:
                    hint = argument.annotation
                    cuts.append((argument.lineno - 1, argument.col_offset + len(argument.arg), hint.end_col_offset or 0))
            if node.returns is not None:
                line = node.returns.lineno - 1
                cuts.append((line, lines[line].rindex("->", 0, node.returns.col_offset) - 1, node.returns.end_col_offset or 0))
    for line, start, end in sorted(cuts, reverse=True):
        lines[line] = lines[line][:start] + lines[line][end:]
    return "\n".join(lines).rstrip()


def _bare(text: str) -> str:
    """An expression without the parentheses around all of it (a tuple keeps them)."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for k, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0 and k < len(text) - 1:
            return text  # (a, b) + c: the first parenthesis closes early
        if depth == 1 and char == "," :
            return text
    inner = text[1:-1]
    return text if inner.startswith(("lambda", "-")) or " if " in inner or not inner else inner


def _reads(code: list[Instruction]) -> set[str]:
    found = set()
    for op, arg, _ in code:
        if op == LOAD:
            found.add(arg)
        elif op == CALL:
            found.add(arg[0])
        elif op == FUNCTION:
            found |= _reads(arg.code) - set(arg.params)
    return found


def _statement_reads(s: Statement, exporter: Exporter) -> set[str]:
    codes = [s.code] + ([s.expected] if s.expected else []) + [c for c, _ in s.bounds] + ([s.over[0]] if s.over else [])
    found = set().union(*(_reads(c) for c in codes)) if codes else set()
    for inner in s.body:
        found |= _statement_reads(inner, exporter)
    for name in list(found):
        if name in exporter.defs:
            found |= set(exporter.free[name])
    return found


def _defines(s: Statement) -> set[str]:
    found = set(s.targets)
    for inner in s.body:
        found |= _defines(inner)
    return found


def _slice(target: Statement, before: list[Statement], origins: dict[str, int], exporter: Exporter) -> list[Statement]:
    """The statements before `target` that compute what it reads. A parameter p is given the
    value its name had after statement origins[p]: the statements after that one that
    rebind p (x = x + 1, a loop) are kept, those up to it are not needed for p."""
    needed = _statement_reads(target, exporter)
    kept: list[Statement] = []
    for index in range(len(before) - 1, -1, -1):
        s = before[index]
        if s.kind in ("def", "expr", "check", "error", "vjp"):
            continue
        given = {p for p, at in origins.items() if at >= index}  # the parameters, from here back
        defined = _defines(s)
        if not defined & (needed - given):
            continue
        kept.append(s)
        if s.kind == "assign" or s.kind == "unpack":
            needed -= defined
        reads = _statement_reads(s, exporter)
        earlier = reads & given - defined if s.kind in ("assign", "unpack") else reads & given
        if earlier:  # it reads a value the name held before the one the function is given
            name = sorted(earlier)[0]
            raise _refused(target, f"{name} is read at line {s.span[0]} before it was given the value this result "
                                   f"uses (inside with no_grad: or by an assignment): give one of them another name")
        needed |= reads
        if s.kind == "for":
            needed -= {s.targets[0]}
    return kept[::-1]


def _forget(inline: dict[str, list[Instruction]], name: str) -> None:
    """`name` is assigned: its definition, and those that read it, no longer hold."""
    inline.pop(name, None)
    for other in [n for n, code in inline.items() if name in _reads(code)]:
        _forget(inline, other)


def _operands(code: list[Instruction]) -> tuple[list[Instruction] | None, list[Instruction] | None]:
    """The code of a two-argument call's operands (y's, then x's), split where x's begins:
    x is a name or a tuple of names."""
    if code and code[-1][0] == LOAD:
        return code[-1:], code[:-1]
    if code and code[-1][0] == TUPLE:
        n = code[-1][1]
        if len(code) > n and all(c[0] == LOAD for c in code[-1 - n:-1]):
            return code[-1 - n:], code[:-1 - n]
    return None, None


# ---- numbers and parameters ---------------------------------------------------------------------------


def _named(text: str, name: str) -> Expr:
    expr = Expr(text, kind="name")
    expr.ident = name
    return expr


def _literal(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, bool):
        return repr(value)
    number = float(value)
    if math.isnan(number):
        return "float('nan')"
    if math.isinf(number):
        return "float('inf')" if number > 0 else "float('-inf')"
    return repr(number)


def _nested(expr: Expr) -> Any:
    if expr.items is None:
        return expr.const
    found = [_nested(i) for i in expr.items]
    return None if any(f is None for f in found) else found


def _param_value(expr: Expr, whole: bool = True) -> str:
    """A parameter's value as Python: the number (or tuple of numbers) written, a string,
    or, for one computed, _p(the value) at run time. `whole`: whole numbers as int."""
    if expr.kind == "string":
        return expr.text
    if expr.kind == "none":
        return "None"
    value = _nested(expr) if expr.items is not None else expr.const
    if value is None:
        return f"_p({_bare(expr.text)})"
    if isinstance(value, bool):
        return repr(value)
    flat = np.asarray(value, dtype=float)
    items = [repr(int(v)) if whole and float(v).is_integer() else _literal(float(v)) for v in flat.reshape(-1)]
    return items[0] if flat.ndim == 0 else f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def _param(op: Any, name: str, expr: Expr) -> str:
    """A parameter as the op takes it: whole numbers where it counts things (an axis, a
    shape), the number itself where it is a value (full's value, clip's bounds)."""
    return _param_value(expr, whole=counts(op, name))


def _whole(expr: Expr) -> str:
    if expr.kind == "none":
        return "None"
    if expr.const is not None:
        return repr(int(float(expr.const)))
    return f"_ix({_bare(expr.text)})"


def _index(expr: Expr) -> str:
    if expr.kind in ("slice", "none"):
        return expr.text
    if isinstance(expr.const, (int, float)) and not isinstance(expr.const, bool):
        return repr(int(float(expr.const)))
    return f"_ix({_bare(expr.text)})"


def _number(expr: Expr) -> str:
    """An operand as the op takes it: a comparison's booleans as 0.0 and 1.0."""
    return f"_f({_bare(expr.text)})" if expr.kind == "bool" else _bare(expr.text)


def _operand(expr: Expr) -> str:
    """An operand of an operator, its parentheses kept: booleans as numbers."""
    return f"_f({_bare(expr.text)})" if expr.kind == "bool" else expr.text


def _arguments(args: list[Expr], named: dict[str, Expr]) -> str:
    return ", ".join([*(_bare(a.text) for a in args), *(f"{k}={_bare(v.text)}" for k, v in named.items())])


def _refused(statement: Statement, why: str) -> LanguageError:
    return LanguageError("argument", f"export: {why}").at(statement.span)


def _docstring(statement: Statement) -> str:
    what = f"check {statement.text}" if statement.kind == "check" else statement.text
    return _docstring_text(f"line {statement.span[0]}: {what}")


def _docstring_text(text: str) -> str:
    return " ".join(text.split()).replace("\\", "\\\\").replace('"""', "'''")



class Result:
    """A result of the program, as gradcalc computed it: the statement, and the named
    leaves of its graph (the exported function's parameters) with their values."""

    __slots__ = ("statement", "index", "params", "values", "value", "origins")

    def __init__(self, statement: Statement, index: int, params: list[str], values: list[np.ndarray], value: Any,
                 origins: dict[str, int]) -> None:
        self.statement, self.index, self.params, self.values, self.value = statement, index, params, values, value
        self.origins = origins  # each parameter's statement: where its value was given (the statements after it recompute it)


def results_of(program: Program, base_dir: Any = None) -> list[Result]:
    """Run the program with gradcalc (the tensor engine) and collect each result."""
    from ..analysis import variables_in
    from ..machine import CheckStatementResult, ExpressionResult, Session

    found: list[Result] = []
    current: list[int] = [0]
    # The statement that bound each variable (a leaf) a name held: a result's parameter is
    # the value a name had there, and the statements after it that rebind the name
    # (x = x + 1, a loop) belong to the result's function. (The leaves are kept, so that no
    # other object takes one's id.)
    bound: dict[int, tuple[Any, int]] = {}

    def record(session: Any, statement: Statement, value: Any) -> None:
        leaves = variables_in(value) if hasattr(value, "parents") else []
        named = {leaf.name: leaf for leaf in leaves}
        if len(named) < len(leaves):  # a function has one parameter per name
            twice = next(leaf.name for leaf in leaves if named[leaf.name] is not leaf)
            raise _refused(statement, f"{twice} names two variables in this result (a value it held before it was given "
                                      "another, inside with no_grad: or by an assignment): give one of them another name")
        for name in statement.wrt:
            if name not in named and name in session.variables:
                named[name] = session.variables[name]
        origins = {name: bound.get(id(leaf), (None, current[0]))[1] for name, leaf in named.items()}
        found.append(Result(statement, current[0], list(named), [np.asarray(v.data) for v in named.values()], value, origins))

    session = Session(on_check=record, base_dir=base_dir)
    for index, statement in enumerate(program.statements):
        current[0] = index
        result = session.run_statement(statement)
        for value in session.variables.values():
            if getattr(value, "op", True) is None and id(value) not in bound:
                bound[id(value)] = (value, index)
        if isinstance(result, ExpressionResult):
            record(session, statement, result.value)
        elif result is not None and not isinstance(result, CheckStatementResult):
            raise _refused(statement, "a result that is not a tensor (a function, help text) is not exported")
    return found


_IMPORTS = {"jax": ["import jax", "import jax.numpy as jnp", "import numpy as np"], "torch": ["import numpy as np", "import torch"]}
_SETUP = {"jax": 'jax.config.update("jax_enable_x64", True)  # float64, as gradcalc', "torch": "torch.set_default_dtype(torch.float64)  # as gradcalc"}


def write_module(source: str, origin: str, library: str, base_dir: Any = None) -> str:
    """The Python module of the program in `source` for `library` (see the module's docstring)."""
    from ..compiler import compile_program

    program = compile_program(source)
    exporter = Exporter(program, library)
    results = results_of(program, base_dir)
    if not results:
        raise LanguageError("argument", "export: the program has no result (an expression or a check) to export")
    defs = [line for function in exporter.defs.values() for line in [*exporter.def_function(function), "", ""]]
    names: list[str] = []
    functions: list[str] = []
    inputs: list[str] = []
    grad_of = "jax" if library == "jax" else "torch.func"
    for result in results:
        name = f"line_{result.statement.span[0]}"
        name = name if name not in names else f"{name}_{sum(n.startswith(name) for n in names) + 1}"
        names.append(name)
        functions += exporter.result_function(name, result.statement, program.statements[: result.index], result.origins)
        differentiable = result.params and np.asarray(result.value.data).dtype.kind == "f"
        if differentiable:
            functions += ["", "", f"{name}_grad = _grad({name}, {tuple(range(len(result.params)))})  # {grad_of}.grad of sum({name})"]
        functions += ["", ""]
        inputs += [f"    {name!r}: {{", *(_wrapped(f"        {p!r}: {_array(v)},") for p, v in zip(result.params, result.values)), "    },"]
    helpers = _HELPERS[library].strip() + "\n" + _COMMON_HELPERS
    adapters = "\n\n\n".join(exporter.adapter_source())
    body = "\n".join([helpers.rstrip(), "", "", f"# The op table's adapters (gradcalc/parser/engines/{library}_ops.py) this module calls.", "", adapters,
                      "", "", *defs, *functions])
    imports = list(_IMPORTS[library])
    if re.search(r"(?<![\w.])lax\.", body):
        imports.append("from jax import lax")
    if "F." in body and library == "torch":
        body = "F = torch.nn.functional\n\n\n" + body
    if "_ShapeError(" in body:
        body = SHAPE_ERROR + "\n\n\n" + body
    last = names[-1]
    title = f"{origin}, written by `gradcalc export --to {library}`"
    lines = [
        f'"""{_docstring_text(title)}.',
        "",
        "One function per def of the program, and one per result (a check or an expression statement), named",
        f"after its line: a function of the variables the result depends on, with its gradient by {LIBRARIES[library]}",
        f"({grad_of}.grad of the result's sum) beside it as NAME_grad. INPUTS holds the values the program gives",
        "those variables; `result` is the program's last result.",
        '"""',
        *sorted(imports, key=lambda line: (line.startswith("from"), line)),
        "",
        _SETUP[library],
        "",
        "",
        body.rstrip(),
        "",
        "",
        "INPUTS = {",
        *inputs,
        "}",
        _wrapped(f"RESULTS = {names!r}"),
        f"result = {last}",
        "",
        "",
        "def inputs(name):",
        f'    """The values of INPUTS[name] as {LIBRARIES[library]} arrays."""',
        f"    return {{key: {'jnp.asarray' if library == 'jax' else 'torch.tensor'}(value) for key, value in INPUTS[name].items()}}",
        "",
    ]
    return "\n".join(lines)


WIDTH = 150  # characters of a line of the module's INPUTS


def _wrapped(line: str) -> str:
    """A long line of numbers broken after commas (inside brackets Python reads on)."""
    if len(line) <= WIDTH:
        return line
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    lines, current = [], ""
    for piece in line.split(", "):
        if current and len(current) + len(piece) + 2 > WIDTH:
            lines.append(current + ",")
            current = indent + piece
        else:
            current = f"{current}, {piece}" if current else piece
    return "\n".join([*lines, current])


def _array(value: np.ndarray) -> str:
    array = np.asarray(value)
    if array.dtype == bool:
        return f"np.array({array.tolist()!r})"
    return f"np.array({_literal(array.astype(float).tolist()) if array.ndim else _literal(float(array))})"
