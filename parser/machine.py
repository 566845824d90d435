"""The stack machine that runs compiled programs against an engine.

One loop, no recursion: nesting in the input becomes stack depth, and calls to user
functions push frames on an explicit list (with a depth cap), so neither deep
expressions nor recursive `def`s can exhaust Python's stack.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from gradcalc.autodiff import EngineError, ShapeError, SizeLimitError, Tensor, collector_paused, is_grad_enabled, lookup, set_grad_enabled
from gradcalc.autodiff.limits import RECURSION_GUESS, STEPS, StepLimitError, step_budget

from .backends import BACKENDS, CONSTANTS, Backend, TensorList, all_tensors, to_param
from .budgets import TOO_DEEP
from .builtins import BUILTINS, BuiltinDef
from .compiler import (
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
    NO_GRAD,
    NONE,
    SLICE,
    STRING,
    SYMBOLS,
    TENSOR,
    TUPLE,
    UNARY,
    Instruction,
    Program,
    Statement,
    UserFunction,
    compile_program,
    refuse_reserved,
)
from .errors import LanguageError, Span
from .functions import Builtin, Defined, FunctionValue, describe_value
from .habits import HINTS, WATCHED, Prefixed, hint, watched
from .sequences import item, length, unpacked
from .transforms import MAX_NESTED_CALLS, AxisSpec

if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_MAX_CALL_DEPTH = 200
# Words that stand for NumPy's index markers: x[None] adds an axis, x[..., 0] skips axes.
_INDEX_WORDS: dict[str, Any] = {"None": None, "...": Ellipsis}
_STORING = frozenset({"assign", "unpack", "update"})  # the statements that give names values


class ExpressionResult(NamedTuple):
    """The value of an expression statement."""

    value: Any
    text: str
    span: Span


class HelpResult(NamedTuple):
    """`help(name)` (a built-in statement form: builtins.py): lines of text about a
    function, a constant or a variable."""

    lines: list[str]
    text: str
    span: Span
    value: Any = None  # (a FunctionResult's value, for a program that runs the session)


class FunctionResult(HelpResult):
    """An expression whose value is a function or a tuple: shown as one line, as Python's
    REPL shows it: `<function f(x)>`, `(9.0, 6.0)` (a tuple's gradients: pick one with [k])."""

    __slots__ = ()


class CheckStatementResult(NamedTuple):
    """What a `check` statement found (see check_statements.py)."""

    text: str
    span: Span
    outcome: Any


class Session:
    """Variables, user functions and the engine, kept across programs (a REPL's state).

    `on_check` handles `check` statements; without one they are an error. `load("f.npy")`
    reads files relative to `base_dir` (a script's folder). Warnings (a `def` that
    shadows a built-in) go to `on_warning` when set, and are kept in `warnings` either
    way. `switch_engine` is how the user switches engines where the session runs
    (`--engine {engine}` on the command line, `:engine {engine}` in the REPL); messages
    about what the scalar engine lacks quote it. `on_notice(label, text)` hears facts about
    the input that are not warnings (a CSV file's first row read as its header: label
    "header").
    """

    def __init__(
        self, engine: str = "tensor", variables: dict[str, Any] | None = None, functions: dict[str, UserFunction] | None = None,
        max_call_depth: int = DEFAULT_MAX_CALL_DEPTH, on_check: Callable[[Session, Statement, Any], Any] | None = None,
        base_dir: Path | None = None, on_warning: Callable[[str], Any] | None = None, switch_engine: str = "--engine {engine}",
        warnings: list[str] | None = None, on_notice: Callable[[str, str], Any] | None = None,
    ) -> None:
        if engine not in BACKENDS:
            raise LanguageError("argument", f"unknown engine {engine!r}: choose {', '.join(BACKENDS)}")
        self.engine = engine
        self.variables: dict[str, Any] = {} if variables is None else variables
        self.functions: dict[str, UserFunction] = {} if functions is None else functions
        self.max_call_depth = max_call_depth
        self.on_check = on_check
        self._base_dir = base_dir
        self.on_warning = on_warning
        self.on_notice = on_notice
        self.switch_engine = switch_engine
        self.warnings: list[str] = [] if warnings is None else warnings
        self.nested_calls = 0
        self.backend: Backend = BACKENDS[self.engine]()
        self._rule_depth = 0  # the depth of calls of functions with vjp rules running now (_call_with_rule)
        self.history: list[Statement] = []  # the statements run, in order (a check against another engine runs them there too)
        self.backend.switch = self.switch_engine.format(engine="tensor")
        self._warned: dict[int, Instruction] = {}  # the calls warned about (_watch)

    @property
    def base_dir(self) -> Path:
        """The folder files are read relative to: the working directory unless given.
        Made when first asked for, so that evaluating an expression never imports pathlib
        (a tenth of a one-shot command's own start-up)."""
        if self._base_dir is None:
            from pathlib import Path

            self._base_dir = Path()
        return self._base_dir

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        if self.on_warning is not None:
            self.on_warning(message)

    def header_read(self, text: str) -> None:
        """A data file's first row was read as its header (datafiles: `on_header`)."""
        if self.on_notice is not None:
            self.on_notice("header", text)

    # ---- running -------------------------------------------------------------------
    def run_source(self, source: str) -> list[Any]:
        return self.run(compile_program(source))

    def run(self, program: Program, bindings: dict[str, Any] | None = None) -> list[Any]:
        """Run every statement; return the results of expression and check statements.

        `bindings` set variables first (as leaves that require grad), so a program parsed
        once can be run again at other values. On an error the variables assigned by the
        statements before it are kept, and nothing of the failing statement is.
        """
        for name, value in (bindings or {}).items():
            self.assign(name, value)
        results: list[Any] = []
        for statement in program.statements:
            result = self.run_statement(statement)
            if result is not None:
                results.append(result)
        return results

    def run_statement(self, statement: Statement) -> Any:
        """Run one statement under a budget of its own (see _run_statement)."""
        self.history.append(statement)
        # Graph building allocates many nodes and no cycles: see collector_paused.
        try:
            with collector_paused(), step_budget():
                return self._run_statement(statement)
        except LanguageError as err:
            raise err.at(statement.span) from None  # a place for errors that had none
        except RecursionError:  # (the last resort: depth caps stop every nesting the language can write first)
            raise LanguageError("recursion", TOO_DEEP).at(statement.span) from None

    def _run_statement(self, statement: Statement) -> Any:
        if statement.error is not None:  # a statement that did not compile (recover=True)
            raise statement.error
        kind = statement.kind
        if kind in _STORING:  # (the commonest statements first: a training loop's body is made of them)
            value = self.evaluate(statement.code)
            if kind == "update":
                self.update(statement.targets[0], value)
            else:
                self._store(statement, value)
            return None
        if kind == "def":
            assert statement.function is not None
            self._define(statement.function)
            return None
        if kind == "for":
            self._loop(statement)
            return None
        if kind == NO_GRAD:
            with set_grad_enabled(False):
                for inner in statement.body:
                    try:
                        self._run_statement(inner)
                    except LanguageError as err:
                        raise err.at(inner.span) from None
            return None
        if kind == "vjp":
            from .user_rules import define_rule

            function = define_rule(self, statement)
            self.functions[function.name] = function
            return None
        if kind == "check":
            if self.on_check is None:
                raise LanguageError("argument", "check statements run with `gradcalc check` or `gradcalc run`").at(statement.span)
            value = self.evaluate(statement.code)
            if isinstance(value, FunctionValue):
                raise LanguageError("argument", f"check needs a value, and this is {describe_value(value)}: check it at a point, "
                                                "as in check f(x)").at(statement.span)
            return CheckStatementResult(statement.text, statement.span, self.on_check(self, statement, value))
        topic = _statement_form(statement.code) if kind == "expr" else None
        if topic is not None:
            form, name, span = topic
            try:
                lines = BUILTINS[form].run(self, [name], {})
            except LanguageError as err:
                raise err.at(span) from None
            return HelpResult(lines, statement.text, statement.span)
        value = self.evaluate(statement.code)
        if isinstance(value, TensorList):
            raise value.error().at(statement.span)
        if isinstance(value, FunctionValue | tuple):
            from .literals import shown

            return FunctionResult([shown(value)], statement.text, statement.span, value)
        return ExpressionResult(value, statement.text, statement.span)

    def _loop(self, statement: Statement) -> None:
        """Run a loop's body once per number of its range, define-by-run: each statement
        builds its graph anew in every iteration. The loop is one statement: it shares one
        budget (steps, time, memory), and what its body's expressions give is not shown.
        The loop's name holds the iteration's number, a whole-number constant."""
        name = statement.targets[0]
        if statement.over is not None:  # for row in X: the rows, or the items of a tuple (sequences.py)
            code, span, text = statement.over
            over = self.evaluate(code)
            try:
                count = length(over, f"for {name} in {text}")
            except LanguageError as err:
                raise err.at(span) from None
            shown = text if len(text) <= 20 else "the sequence"
            steps: Any = ((i, f"{name} = {shown}[{i}]") for i in range(count))
        else:
            bounds = [_range_bound(self.evaluate(code), span) for code, span in statement.bounds]
            if len(bounds) == 3 and bounds[2] == 0:
                raise LanguageError("argument", "range's step cannot be 0").at(statement.bounds[2][1])
            steps = ((i, f"{name} = {i}") for i in range(*bounds))
        budget = STEPS
        for i, where in steps:
            budget.left -= 1  # an iteration is a step (its body may run no instruction: a def)
            if budget.left < 0:
                try:
                    budget.spent()
                except StepLimitError as err:
                    raise LanguageError(err.kind, _loop_budget(str(err), where)) from None
            if statement.over is None:
                self.variables[name] = self.backend.counter(i)
            else:
                self.assign(name, item(self.backend, over, i))
            for inner in statement.body:
                try:
                    self._run_statement(inner)
                except LanguageError as err:
                    if err.kind in _BUDGETS:  # placed at the loop, which ran too long as a whole
                        err.message = _loop_budget(err.message, where)
                        raise
                    raise _in_iteration(err.at(inner.span), where) from None

    def _define(self, function: UserFunction) -> None:
        for name in (function.name, *function.params):
            refuse_reserved(name)
        name = function.name
        if name not in self.functions and (name in self.backend.function_names() or name in CONSTANTS):
            what = "constant" if name in CONSTANTS else "function"
            self.warn(f"def {name} shadows the built-in {what} {name}: from here on, {name} means yours")
        elif name in self.functions and self.functions[name].rule is not None and self.functions[name].code is not function.code:
            # (not when a loop runs this same def again: the rule is one the loop gave, and gives again)
            self.warn(f"def {name} replaces the {name} that had a vjp rule: the new {name} has none (give it one with vjp {name}(...) = ...)")
        # A name means what it was bound to last, as in Python: `f = ...` then `def f`, the def is f now.
        self.variables.pop(name, None)
        self.functions[name] = function

    def assign(self, name: str, value: Any) -> Any:
        refuse_reserved(name)
        if value is None or value is Ellipsis:
            raise LanguageError("value", f"{name} = {'None' if value is None else '...'}: None and ... only index, as in x[None] or x[..., 0]")
        bound = self.backend.variable(value, name)
        self.variables[name] = bound
        self.functions.pop(name, None)  # (`def f` then `f = ...`: f is the value now, as in Python)
        return bound

    def update(self, name: str, value: Any) -> Any:
        """`name op= e` (`value` is `name op e`, already computed) is `name = name op e`,
        as in Python, except inside `with no_grad:` (no graph is recorded), where a
        variable (a leaf that requires grad) stays a variable: a new leaf holding the new
        value, as PyTorch's in-place step under torch.no_grad() leaves a parameter a leaf.
        So `with no_grad: w -= lr * grad(L, w)` can be repeated, each step costing the same."""
        if not is_grad_enabled() and self.backend.is_variable(self.variables.get(name)):
            refuse_reserved(name)
            bound = self.backend.leaf(value, name)
            self.variables[name] = bound
            return bound
        return self.assign(name, value)

    def _store(self, statement: Statement, value: Any) -> None:
        names = statement.targets
        if statement.kind == "assign":
            self.assign(names[0], value)
            return
        for name, part in zip(names, unpacked(self.backend, value, len(names))):  # a tuple's results, a tensor's rows
            self.assign(name, part)

    def names(self) -> list[str]:
        """Everything a name can refer to now, and the built-in forms (help, range): for
        completion and suggestions."""
        return sorted({*self.variables, *self.functions, *CONSTANTS, *self.backend.function_names(), *BUILTINS})

    # ---- the machine ---------------------------------------------------------------------
    def evaluate(self, code: list[Instruction], local: dict[str, Any] | None = None, inside: UserFunction | None = None) -> Any:
        """Run one statement's instructions (or a function's, with its parameters
        `local`) and return the value left on the stack (`inside`: the user function
        whose code it is, for the places of errors)."""
        backend = self.backend
        variables = self.variables
        stack: list[Any] = []
        frames: list[tuple[list[Instruction], int, dict[str, Any] | None, UserFunction | None]] = []
        pc = 0
        end = len(code)
        # Every instruction of either engine is a step (limits.py). A block of instructions
        # (a statement's, a function body's) is charged as a whole as it starts, and a jump
        # gives back the instructions it skips: the same count, without a test per instruction.
        steps = STEPS
        steps.left -= end
        if steps.left < 0:
            _spent(steps)
        while True:
            if pc >= end:
                if not frames:
                    break
                code, pc, local, inside = frames.pop()  # return from a user function
                end = len(code)
                continue
            op, arg, span = code[pc]
            pc += 1
            try:
                # (the commonest instructions first: each test of `op` costs every later one)
                if op == LOAD:  # a parameter or a variable, the commonest, without the call (None and ... are neither)
                    if local is not None and arg in local:
                        stack.append(local[arg])
                    elif arg in variables:
                        stack.append(variables[arg])
                    else:
                        stack.append(self._load(arg, local))
                elif op == BINARY:
                    b = stack.pop()
                    a = stack.pop()
                    if type(a) is not Tensor:  # (a Tensor is an operand as it is: _operand's first line, without the call)
                        a = self._operand(a, SYMBOLS[arg])
                    if type(b) is not Tensor:
                        b = self._operand(b, SYMBOLS[arg])
                    try:
                        stack.append(backend.binary(arg, a, b))
                    except ShapeError:
                        raise LanguageError("shape", f"shapes do not fit for {SYMBOLS[arg]}: {tuple(a.shape)} {SYMBOLS[arg]} {tuple(b.shape)}") from None
                elif op == CONST:
                    stack.append(backend.constant(arg))
                elif op == CALL or op == METHOD or op == CALL_VALUE:
                    if op == CALL_VALUE:
                        n_positional, keywords = arg
                    else:
                        name, n_positional, keywords = arg
                    kwargs = {}
                    if keywords:
                        kwargs = dict(zip(keywords, stack[-len(keywords):]))
                        del stack[-len(keywords):]
                    args = stack[len(stack) - n_positional:]  # the top n_positional, in order
                    del stack[len(stack) - n_positional:]
                    if op == METHOD:
                        target = stack.pop()
                        if name in WATCHED:  # x.transpose(0, 1): a habit that gives another answer here (habits.py)
                            self._watch(name, [target, *args], kwargs, code[pc - 1], inside)
                        _parameters(kwargs, f".{name}")
                        args = [_not_function(a, f".{name}") for a in args]
                        stack.append(backend.method(self._operand(target, "."), name, args, kwargs))
                        continue
                    callee: Any = self._callee(name, local) if op == CALL else stack.pop()
                    if callee is None:  # a built-in, by name
                        if name in WATCHED:
                            self._watch(name, args, kwargs, code[pc - 1], inside)
                        stack.append(self._call(name, args, kwargs))
                        continue
                    closure = None
                    if callee.__class__ is Defined:
                        callee, closure = callee.function, callee.closure
                    elif callee.__class__ is not UserFunction:  # a built-in or a transformation as a value
                        stack.append(self.call_function(callee, args, kwargs))
                        continue
                    if kwargs or len(args) != len(callee.params):
                        args = _bound(callee, args, kwargs)
                    if callee.rule is not None:  # one node, whose op uses the rule (user_rules.py)
                        stack.append(self._call_with_rule(callee, args, len(frames)))
                        continue
                    if len(frames) >= self.max_call_depth:
                        raise self._too_deep(callee)
                    frames.append((code, pc, local, inside))
                    params = dict(zip(callee.params, args))
                    code, pc, local, inside = callee.code, 0, params if closure is None else {**closure, **params}, callee
                    end = len(code)
                    steps.left -= end  # (the body's instructions, as a block)
                    if steps.left < 0:
                        steps.spent()  # raises when a budget (steps, time, memory) is over
                elif op == UNARY:
                    stack.append(backend.unary(arg, self._operand(stack.pop(), SYMBOLS[arg])))
                elif op == FUNCTION:  # a lambda: its parameters' names, and the names it sees where it is made
                    stack.append(Defined(arg, local))
                elif op == JUMP_IF_FALSE:  # (offsets from the next instruction: compiler.JUMP)
                    if not backend.truth(self._operand(stack.pop(), "if")):
                        pc += arg
                        steps.left += arg  # (the instructions skipped were charged with the block)
                elif op == JUMP:
                    pc += arg
                    steps.left += arg
                elif op == ATTR:
                    stack.append(backend.attribute(_not_function(stack.pop(), f".{arg}"), arg))
                elif op == INDEX:
                    parts = [stack.pop() for _ in range(arg)][::-1]
                    parts = [_not_function(p, "[...]", none=True) for p in parts]
                    stack.append(backend.index(_not_function(stack.pop(), "[...]"), parts))
                elif op == SLICE:
                    if arg is not None:  # a slice without bounds, made by the compiler
                        stack.append(arg)
                        continue
                    stop_step = [stack.pop(), stack.pop()]
                    start = stack.pop()
                    stack.append(slice(*(None if v is None else _whole(v) for v in (start, stop_step[1], stop_step[0]))))
                elif op == TENSOR:
                    items = [stack.pop() for _ in range(arg)][::-1]
                    if any(i is None for i in items):
                        stack.append(AxisSpec(items))  # in_axes=(0, None)
                        continue
                    stack.append(backend.tensor_literal([self._operand(i, "[...]") for i in items]))
                elif op == STRING:
                    stack.append(arg)
                elif op == TUPLE:
                    items = stack[len(stack) - arg:]
                    del stack[len(stack) - arg:]
                    stack.append(tuple(items))
                elif op == NONE:
                    stack.append(None)
            except LanguageError as err:
                if err.kind == "name" and op == LOAD and pc < end and code[pc][0] == ATTR:
                    _file_name_hint(err, arg, code[pc][1])
                raise err.at(span, inside) from None
            except StepLimitError as err:  # placed at the statement: all of it ran too long (or too big)
                raise LanguageError(err.kind, str(err)) from None
            except SizeLimitError as err:
                raise LanguageError("size", str(err)).at(span, inside) from None
            except ShapeError as err:
                raise LanguageError("shape", str(err)).at(span, inside) from None
            except OverflowError:  # (Python's words: "Python int too large to convert to C long")
                raise LanguageError("argument", TOO_LARGE).at(span, inside) from None
            except (EngineError, TypeError, ValueError, ZeroDivisionError) as err:
                raise LanguageError("argument", str(err)).at(span, inside) from None
        return stack.pop()

    def _watch(self, name: str, args: list[Any], kwargs: dict[str, Any], instruction: Instruction, inside: UserFunction | None) -> None:
        """Warn, once per place, when a call means something else than in the library
        whose habit it looks like (habits.watched)."""
        message = watched(name, args, kwargs)
        if message is None or id(instruction) in self._warned:
            return
        self._warned[id(instruction)] = instruction  # (kept, so that no later instruction takes its id)
        span = instruction[2]
        where = f"line {span[0]}, column {span[1]}: " if span is not None else ""
        self.warn(f"{where}{message}" + (f" (in {inside.signature})" if inside is not None else ""))

    def _call_with_rule(self, function: UserFunction, args: list[Any], depth: int) -> Any:
        """A call of a function that has a vjp rule runs its body in an evaluation of its
        own, so such calls nested in each other count against the depth cap together."""
        self._rule_depth += depth + 1
        try:
            if self._rule_depth > self.max_call_depth:
                raise self._too_deep(function)
            return self.backend.call_with_rule(self, function, args)
        finally:
            self._rule_depth -= depth + 1

    def _too_deep(self, function: UserFunction) -> LanguageError:
        return LanguageError("recursion", f"calls nested deeper than {self.max_call_depth} (in {function.name}); is a recursion missing its base case?")

    def _load(self, name: str, local: dict[str, Any] | None) -> Any:
        if name in _INDEX_WORDS:
            return _INDEX_WORDS[name]
        if local is not None and name in local:
            return local[name]
        if name in self.variables:
            return self.variables[name]
        if name in self.functions:  # (before the constants: `def e(x) = ...` makes e yours, as a variable e does)
            return Defined(self.functions[name])
        if name in CONSTANTS:
            return self.backend.constant(CONSTANTS[name])
        refuse_reserved(name)  # `wrt += 1`: a keyword read as a name
        if name in self.backend.function_names():
            op = lookup(name)
            return Builtin(name, op.n_in if op is not None else None)
        if type(name) is Prefixed:  # np.sin(x), math.pi: a module's prefix (habits.py)
            raise name.error(self)
        from .suggestions import suggest  # (only on errors: not at start-up)

        known = [*(local or {}), *self.variables, *CONSTANTS]
        raise LanguageError("name", f"unknown name {name!r}{hint(name) or suggest(name, known)}")

    def _callee(self, name: str, local: dict[str, Any] | None) -> Any:
        """What `name(...)` calls: a function value bound to the name (a parameter first,
        as in Python), else a def, else None for a built-in. A name bound to a tensor
        calls the function of that name, if there is one."""
        if local is not None and name in local:  # a parameter holds the name here, whatever else is called so (as in Python)
            value = local[name]
            if isinstance(value, FunctionValue):
                return value
            raise LanguageError("argument", f"{name} is not a function: the parameter {name} holds {describe_value(value)}, "
                                            "which cannot be called")
        value = self.variables.get(name)
        if isinstance(value, FunctionValue):
            return value
        function = self.functions.get(name)
        if function is None and value is not None and name not in self.backend.function_names():
            raise LanguageError("argument", f"{name} is not a function: it holds {describe_value(value)}, which cannot be called")
        if function is None and value is None and name in CONSTANTS:
            raise LanguageError("argument", f"{name} is not a function: it is the constant {name}, which cannot be called")
        return function

    def call_function(self, callee: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call a function value from Python (what a transformation does with its function)."""
        if isinstance(callee, Defined):
            function = callee.function
            if kwargs or len(args) != len(function.params):
                args = _bound(function, args, kwargs)
            if function.rule is not None:
                return self._call_with_rule(function, args, 0)
            params = dict(zip(function.params, args))
            if self.nested_calls >= MAX_NESTED_CALLS:
                raise LanguageError("recursion", f"transformations nested deeper than {MAX_NESTED_CALLS} calls (in {function.signature})")
            self.nested_calls += 1
            try:
                return self.evaluate(function.code, params if callee.closure is None else {**callee.closure, **params}, function)
            finally:
                self.nested_calls -= 1
        if isinstance(callee, Builtin):
            return self._call(callee.name, args, kwargs)
        if isinstance(callee, FunctionValue):  # a transformation calls its function back: one call deeper
            if self.nested_calls >= MAX_NESTED_CALLS:
                raise LanguageError("recursion", f"transformations nested deeper than {MAX_NESTED_CALLS} calls (a transformation calling its "
                                                 "function is one call deeper)")
            self.nested_calls += 1
            try:
                return callee.apply(self, args, kwargs)
            finally:
                self.nested_calls -= 1
        raise LanguageError("argument", f"{describe_value(callee)} is not a function and cannot be called")

    def _call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        builtin = BUILTINS.get(name)
        if builtin is not None:  # a built-in that is not an op (builtins.py)
            if builtin.statement or builtin.loop:
                raise LanguageError("argument", f"{name}(...) is not a function to call here: {builtin.line}")
            if not builtin.expression or (args and isinstance(args[0], FunctionValue)):
                return builtin.run(self, args, kwargs)  # (its arguments as they are: load's are strings)
        try:
            if kwargs or not all_tensors(args):  # (tensors alone, the usual call: nothing to check)
                args = self._operands(name, args, kwargs, builtin)
            return self.backend.call(name, args, kwargs)
        except LanguageError as err:
            if err.kind == "name" and err.message.startswith("unknown function") and name not in HINTS:
                from .suggestions import suggest

                err.message += suggest(name, [*self.functions, *self.backend.function_names()])
            raise

    def _operands(self, name: str, args: list[Any], kwargs: dict[str, Any], builtin: BuiltinDef | None) -> list[Any]:
        """A call's arguments as the backend takes them, each checked; its keywords checked."""
        op = lookup(name)
        # An op whose signature opens with string parameters takes them positionally too:
        # einsum('ij,jk->ik', a, b). Anywhere else a string is refused by _operand.
        strings = len([p for p in op.leading if p not in kwargs]) if op is not None and op.leading else 0
        variables_written = builtin is not None and builtin.expression  # grad(L, (W1, b1)): the compiler's tuple of variables
        # A ragged list literal goes to the backend as it is: concatenate([a, b]) takes it.
        operands = [
            a if type(a) is Tensor or isinstance(a, TensorList) or (k < strings and isinstance(a, str))
            or (k == 1 and isinstance(a, tuple) and variables_written)
            else self._operand(a, name, op)
            for k, a in enumerate(args)
        ]
        if kwargs:
            _parameters(kwargs, name)
        return operands

    @staticmethod
    def _operand(value: Any, where: str, op: Any = None) -> Any:
        if type(value) is Tensor:  # the usual operand, none of the cases below
            return value
        if isinstance(value, TensorList):
            raise value.error()
        if isinstance(value, str):
            # A function's string parameters go by name: gelu(x, approximate='tanh').
            named = op.param_names if op is not None else ()
            hint = f"; give it by name, as in {where}(..., {named[0]}='...')" if named else ""
            raise LanguageError("argument", f"a string cannot be used with {where}{hint}")
        if value is Ellipsis:
            raise LanguageError("argument", f"... cannot be used with {where}: it only indexes, as in x[..., 0]")
        if isinstance(value, tuple):
            raise LanguageError("argument", f"{where} needs a tensor, got {len(value)} result{'s' * (len(value) != 1)}: pick one with [k] or unpack them")
        if value is None:
            raise LanguageError("argument", f"{where} needs a value")
        return _not_function(value, where)


def _loop_budget(message: str, where: str) -> str:
    """A budget's message for a loop that ran over it: the loop as a whole, where it stopped,
    and no guess of a recursion (a loop of many iterations is enough)."""
    return message.replace(RECURSION_GUESS, "") + f" (a loop is one statement, its iterations share the budget; stopped at {where})"


def _spent(steps: Any) -> None:
    """steps.spent() for a block's charge, its budget error placed at the statement."""
    try:
        steps.spent()
    except StepLimitError as err:
        raise LanguageError(err.kind, str(err)) from None


def _file_name_hint(err: LanguageError, name: str, attribute: str) -> None:
    """`load(data.npy)`, `X=data.npy`: an unknown name read as a file's name."""
    from .datafiles import SUFFIXES  # (only on an error: not at start-up)

    if f".{attribute}" in SUFFIXES:
        err.message = (f"unknown name {name!r}; a file's name is a string: load('{name}.{attribute}'), "
                       f"or NAME=@{name}.{attribute} on the command line")  # (instead of a name it may look like)


def _parameters(kwargs: dict[str, Any], where: str) -> None:
    """Refuse a function given as a keyword parameter (`axis=sin`): a parameter is a value."""
    for key, value in kwargs.items():
        if isinstance(value, FunctionValue):
            raise LanguageError("argument", f"{where}: {key} takes a value, got {describe_value(value)}")


TOO_LARGE = "a whole number too large here: an index, a count, a shape or an axis is at most 2**63 - 1"


def _not_function(value: Any, where: str, none: bool = False) -> Any:
    """`value`, unless it is a function used as a value, or None (`none`: where it is an
    index, which None may be)."""
    if isinstance(value, FunctionValue):
        raise LanguageError("argument", f"{describe_value(value)} cannot be used with {where}: call it, as in f(x), to use its value")
    if value is None and not none:
        raise LanguageError("argument", f"None cannot be used with {where}: it only adds an axis in an index, as in x[None]")
    return value


def _bound(function: UserFunction, args: list[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments of a call of a user function in its parameters' order: given by
    position, then by name, as in Python (f(1, y=2), f(y=2, x=1))."""
    params = function.params
    signature = function.signature
    if len(args) > len(params):
        raise LanguageError("argument", f"{signature} takes {len(params)} argument{'s' * (len(params) != 1)}, got {len(args)}")
    for key in kwargs:
        if key not in params:
            raise LanguageError("argument", f"{signature} has no parameter {key!r}")
        if key in params[: len(args)]:
            raise LanguageError("argument", f"{signature}: {key} is given twice, by position and by name")
    missing = [p for p in params[len(args) :] if p not in kwargs]
    if missing:
        raise LanguageError("argument", f"{signature}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing")
    return [*args, *(kwargs[p] for p in params[len(args) :])]


_BUDGETS = frozenset({"steps", "time", "memory"})
_ITERATION = " (in the loop at "


def _in_iteration(err: LanguageError, where: str) -> LanguageError:
    """The error, saying in which iteration it happened (`where`: "i = 3"; of each loop
    around it, innermost first)."""
    if err.message.endswith(")") and _ITERATION in err.message:
        err.message = f"{err.message[:-1]}, in the loop at {where})"
    else:
        err.message += f"{_ITERATION}{where})"
    return err


def _range_bound(value: Any, span: Span | None) -> int:
    """An argument of a loop's range(...): a whole number that a loop's number (a 64-bit
    integer, as x.shape's numbers are) can hold."""
    if isinstance(value, FunctionValue) or isinstance(value, tuple) or value is None or value is Ellipsis:
        raise LanguageError("argument", f"range takes whole numbers, got {describe_value(value)}").at(span)
    bound = to_param(value, "range")
    if not isinstance(bound, int) or isinstance(bound, bool):
        shown = repr(bound) if isinstance(bound, (str, float)) else "a tensor" if isinstance(bound, tuple) else str(bound)
        raise LanguageError("argument", f"range takes whole numbers, got {shown}").at(span)
    if not -(2**63) <= bound < 2**63:
        raise LanguageError("argument", f"range takes whole numbers from -2**63 to 2**63 - 1 (a loop's number is a 64-bit integer), "
                                        f"got {float(bound):.6g}").at(span)
    return bound


def _whole(value: Any) -> int:
    if isinstance(value, FunctionValue | tuple | str) or value is Ellipsis:
        raise LanguageError("argument", f"slice bounds must be whole numbers, got {describe_value(value)}")
    number = float(getattr(value, "data", value))
    if not number.is_integer():
        raise LanguageError("argument", f"slice bounds must be whole numbers, got {number!r}")
    return int(number)


def _statement_form(code: list[Any]) -> tuple[str, str, Span] | None:
    """(the form, the name asked about, its place) for a statement `help(NAME)` (a record
    of builtins.py with `statement`; "" for `help()`), else None: the name is not
    evaluated (a function is not a value to compute)."""
    last = code[-1]
    if last[0] != CALL:
        return None
    form = BUILTINS.get(last[1][0])
    if form is None or not form.statement or last[1][2]:
        return None
    if len(code) == 1 and last[1][1] == 0:
        return form.name, "", last[2]
    if len(code) == 2 and last[1][1] == 1 and code[0][0] == LOAD:
        return form.name, str(code[0][1]), code[0][2]
    raise LanguageError("argument", f"{form.name} takes one name, as in {form.example} (or none: {form.name}())").at(last[2])
