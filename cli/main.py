"""The gradcalc command as typer sees it, built from the declarations in cli/options.py.

Each command becomes a typer command whose parameters are the declared ones, calling the
declared action with every value (cli/entry.py calls the same actions without typer for
a plain invocation). Here only typer is imported at start-up; the engine, the parser,
rich and prompt_toolkit are imported by the actions that use them.
"""
from __future__ import annotations

import difflib
import inspect
import shlex
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from types import GenericAlias
from typing import Annotated, Any

import typer
import typer.core

from gradcalc import __version__

from .common import usage_error
from .options import COMMANDS, GLOBAL_OPTIONS, Argument, Command, Option, OptionError, as_typed, unknown

# click, as typer brings it (its own copy since typer 0.28, the click package before)
_click_exceptions = import_module(typer.BadParameter.__module__)
_click_types = import_module(typer.BadParameter.__module__.rpartition(".")[0] + ".types")


class _Refused(_click_exceptions.UsageError):  # type: ignore[misc, name-defined]
    """A value the declaration does not take, in its words."""


class _Declared(_click_types.ParamType):  # type: ignore[misc, name-defined]
    """An option's value read as the declaration reads it (Option.read), so that a bad one
    is refused in the words the REPL and the notebook use."""

    def __init__(self, option: Option) -> None:
        self.option = option
        self.name = {"int": "integer", "float": "float", "path": "path"}.get(option.kind, "text")

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if not isinstance(value, str):  # a default
            return value
        try:
            read = self.option.read(value)
        except OptionError as err:
            raise _Refused(str(err), ctx) from None
        return Path(read) if self.option.kind == "path" else read

    def shell_complete(self, ctx: Any, param: Any, incomplete: str) -> list[Any]:
        return [typer.core.CompletionItem(c) for c in self.option.choices if c.startswith(incomplete)]


def _declared_words(parse_args: Callable[..., Any]) -> Callable[..., Any]:
    """click's parse_args, with an unknown option, an option without its value and a value
    an option does not take said as the REPL and the notebook say them (`error: ...`, and
    under --json the error document, as every other usage error of a command)."""

    def parse(self: Any, ctx: Any, args: list[str]) -> Any:
        given = list(args)  # (click's parser takes the words off the list it is given)
        try:
            return parse_args(self, ctx, args)
        except _click_exceptions.UsageError as err:
            as_json = _asks_for_json(any(getattr(p, "name", None) == "as_json" for p in self.params), given)
            message = _in_declared_words(self, err)
            if ctx.resilient_parsing or (message is None and not as_json):  # (shell completion reads on past errors)
                raise  # click's own words, with the usage line
            usage_error(message or _with_usage(err, ctx), as_json)

    return parse


def _asks_for_json(has_json: bool, words: list[str]) -> bool:
    """Whether `words`, a command's, give it --json (before any `--`), when it has that option."""
    words = words[: words.index("--")] if "--" in words else words
    return has_json and "--json" in words


def _with_usage(err: Any, ctx: Any) -> str:
    """click's message for an error it alone finds (a missing argument, an extra one), with
    the usage line it would print above it: under --json it is the error document's message."""
    message = err.format_message().rstrip(".")
    return f"{message[:1].lower()}{message[1:]}; usage: {ctx.get_usage().removeprefix('Usage: ').strip()}"


def _in_declared_words(command: Any, err: Any) -> str | None:
    if isinstance(err, _Refused):
        return str(err.message)
    if isinstance(err, _click_exceptions.NoSuchOption):
        known = sorted(name for param in command.params for name in getattr(param, "opts", ()) if name.startswith("-"))
        return str(unknown(err.option_name, known))
    if isinstance(err, _click_exceptions.BadOptionUsage) and "requires" in err.message:  # (click's words for a missing value)
        declared = [p.type.option for p in command.params if err.option_name in getattr(p, "opts", ()) and isinstance(p.type, _Declared)]
        return str(declared[0].missing()) if declared else None
    return None


class _Command(typer.core.TyperCommand):
    parse_args = _declared_words(typer.core.TyperCommand.parse_args)


_WORDS = "gradcalc.words"  # ctx.meta: the words the group was given (its callback no longer sees the command's)


class _Group(typer.core.TyperGroup):
    _parse_args = _declared_words(typer.core.TyperGroup.parse_args)

    def parse_args(self, ctx: Any, args: list[str]) -> Any:
        ctx.meta[_WORDS] = list(args)
        return self._parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """click's lookup, with what a word that is no command was probably meant to be."""
        name = args[0] if args else ""
        if args and self.get_command(ctx, name) is None and not name.startswith("-"):
            ctx.fail(f"No such command {name!r}. {_meant(name, list(self.commands))}")
        return super().resolve_command(ctx, args)


_REPL_WORDS = frozenset({"repl", "shell", "interactive", "console", "ipython", "python"})


def _meant(word: str, commands: list[str]) -> str:
    """A hint for a first word that is no command: the REPL's other names, a script's file
    name, an expression, a misspelt command."""
    if word.lower() in _REPL_WORDS:
        return "The REPL starts with no command: gradcalc"
    if word.endswith(".gc"):
        return f"Run a script with: gradcalc run {word} (or check its checks: gradcalc check {word})"
    close = difflib.get_close_matches(word, commands, n=1)
    if close:
        return f"Did you mean {close[0]!r}?"
    if not word.isidentifier():
        return f"Evaluate an expression with: gradcalc eval {shlex.quote(word)}"
    return f"The commands are {', '.join(sorted(commands))}; with none, the REPL"


app = typer.Typer(
    cls=_Group,
    name="gradcalc",
    help="A command-line autodiff calculator: values, gradients, graphs and gradient checks.\n\n"
    "With no command: the REPL on a terminal, or a script read from piped stdin.",
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=False,
)

_TYPES: dict[str, Any] = {"flag": bool, "int": int, "float": float, "str": str, "expr": str, "path": Path}


def _parameter(declared: Option | Argument) -> inspect.Parameter:
    """The declaration as a typed parameter, the way typer reads a command's signature."""
    kind = _TYPES[declared.kind]
    if isinstance(declared, Argument):
        info: Any = typer.Argument(metavar=declared.metavar, help=declared.help, show_default=False)
        annotation: Any = GenericAlias(list, (kind,)) if declared.many else kind  # (list[kind])
        default: Any = inspect.Parameter.empty if declared.required else None
        if not declared.required:
            annotation = annotation | None
    else:
        info = typer.Option(*declared.names, help=declared.help + _range(declared), metavar=declared.metavar or _metavar(declared),
                            click_type=None if declared.kind == "flag" else _Declared(declared))
        annotation = kind if declared.default is not None or declared.kind == "flag" else kind | None
        default = declared.default
    return inspect.Parameter(declared.key, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[annotation, info])


def _metavar(option: Option) -> str | None:
    """What --help shows for the value, as typer shows its own types: the choices, or the kind."""
    if option.choices:
        return f"[{'|'.join(option.choices)}]"
    bounded = " RANGE" if option.low is not None or option.high is not None else ""
    return {"int": "INTEGER", "float": "FLOAT", "path": "PATH", "str": "TEXT"}.get(option.kind, "") + bounded or None


def _range(option: Option) -> str:
    if option.low is None and option.high is None:
        return ""
    low, high = ("" if bound is None else str(int(bound)) if float(bound).is_integer() else f"{bound:g}" for bound in (option.low, option.high))
    return f"  [{low}<=x<={high}]" if low and high else f"  [x>={low}]" if low else f"  [x<={high}]"


def _plain(values: dict[str, Any], command: Command) -> dict[str, Any]:
    """typer's values as the action takes them (what cli/entry.py passes)."""
    for argument in command.arguments:
        if argument.kind == "expr":
            values[argument.key] = as_typed(values[argument.key])
        elif argument.many and not argument.required and not values[argument.key]:
            values[argument.key] = None
    return values


def _typer_command(command: Command) -> Callable[..., None]:
    def invoke(**values: Any) -> None:
        raise typer.Exit(command.function()(**_plain(values, command)) or 0)

    invoke.__signature__ = inspect.Signature([*map(_parameter, command.arguments), *map(_parameter, command.options)])  # type: ignore[attr-defined]  # typer reads it
    invoke.__doc__ = command.help
    invoke.__name__ = f"{command.name}_command"
    return invoke


for _command in COMMANDS.values():
    app.command(_command.name, cls=_Command)(_typer_command(_command))


def _version(value: bool) -> None:
    if value:
        print(f"gradcalc {__version__}")
        raise typer.Exit()


def main(ctx: typer.Context, **values: Any) -> None:
    """Start the REPL (on a terminal) or run piped stdin as a script.

    Example: echo 'x = 3; x**2' | gradcalc
    """
    if ctx.invoked_subcommand is not None:
        _pass_options_down(ctx, ctx.invoked_subcommand)
        return
    from .actions import default_action

    values.pop("version", None)
    raise typer.Exit(default_action(**values))


_VERSION = inspect.Parameter(
    "version", inspect.Parameter.KEYWORD_ONLY, default=False,
    annotation=Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")],
)
main.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context), _VERSION, *map(_parameter, GLOBAL_OPTIONS)]
)
app.callback(invoke_without_command=True)(main)


def _pass_options_down(ctx: typer.Context, name: str) -> None:
    """`gradcalc --engine scalar eval ...`: an option given before the command becomes that
    command's default (the command's own option still wins); a command that has no such
    option refuses it rather than run without it."""
    accepted = {option.key for option in COMMANDS[name].options}
    defaults: dict[str, Any] = {}
    for option in GLOBAL_OPTIONS:
        source = ctx.get_parameter_source(option.key)
        if source is None or source.name != "COMMANDLINE":  # by name: typer may bring its own click
            continue
        if option.key not in accepted:
            words = ctx.meta.get(_WORDS, [])
            after = words[words.index(name) + 1 :] if name in words else []
            has_json = any(declared.key == "as_json" for declared in COMMANDS[name].options)
            usage_error(f"{option.names[0]} does not apply to `gradcalc {name}`", _asks_for_json(has_json, after))
        defaults[option.key] = ctx.params[option.key]
    if defaults:
        ctx.default_map = {**(ctx.default_map or {}), name: {**((ctx.default_map or {}).get(name) or {}), **defaults}}


def protect_expression(argv: list[str]) -> list[str]:
    """`gradcalc eval '-a*b' a=2` (or `'--a'`) must not read the expression as an option:
    a leading space (which the language ignores; options.as_typed takes it off again)
    keeps it an argument. A token with one
    dash is never an option of eval or plot (but -h, unless h is bound after it); one with two is the expression when
    it is not one of the command's options and no expression came before it."""
    command = next((c for c in _EXPRESSION_COMMANDS if c in argv), None)
    if command is None:
        return argv
    args = list(argv)
    flags, valued = _option_names(command)
    expression_seen = False
    i = args.index(command) + 1
    while i < len(args) and args[i] != "--":
        token = args[i]
        name = token.split("=", 1)[0]
        if token == "-h" and not expression_seen and _binds_h(args[i + 1 :]):  # `gradcalc eval -h h=2`: minus h
            args[i] = " " + token
            expression_seen = True
        elif name in valued and "=" not in token:
            i += 1  # its value follows
        elif name not in flags and name not in valued:
            if (token.startswith("--") and len(token) > 2 and not expression_seen) or (
                    token.startswith("-") and not token.startswith("--") and token != "-h" and len(token) > 1):
                args[i] = " " + token
            expression_seen = True
        i += 1
    return args


def _binds_h(rest: list[str]) -> bool:
    """Whether a binding of h follows: then `-h` is the expression minus h, not a request for help."""
    return any(arg.partition("=")[0].strip() == "h" and "=" in arg for arg in rest)


_EXPRESSION_COMMANDS = [name for name, command in COMMANDS.items() if any(a.kind == "expr" for a in command.arguments)]


def _option_names(command: str) -> tuple[set[str], set[str]]:
    """The command's option names: those that are flags, and those that take a value."""
    flags: set[str] = {"--help", "-h"}  # click adds these itself
    valued: set[str] = set()
    for option in COMMANDS[command].options:
        (flags if option.kind == "flag" else valued).update(option.names)
    return flags, valued
