"""NAME=VALUE arguments: the one meaning they have in eval, run, check and plot.

VALUE is an expression run like an assignment (it may use names bound before it), or
`@FILE` to load data (docs/cli.md, "Data files").
"""
from __future__ import annotations

from gradcalc.parser import LanguageError, Session, compile_program
from gradcalc.parser.lexer import KEYWORDS, is_name


class BindingError(Exception):
    """A language error inside one NAME=VALUE argument; `source` is that argument, so the
    caret can point into it rather than into EXPR."""

    def __init__(self, error: LanguageError, source: str) -> None:
        super().__init__(error.message)
        self.error, self.source = error, source


def writable_name(name: str) -> bool:
    """A name a binding may give: one the language reads (ASCII: `é=3` would bind what no
    program can use), or a keyword, which the session refuses in its own words."""
    return is_name(name) or name in KEYWORDS


def bind(session: Session, bindings: list[str]) -> None:
    """Run NAME=VALUE (or NAME=@FILE) arguments into `session` as variables, in order (a
    name given twice is an error). Every error is a BindingError."""
    bound: set[str] = set()
    for binding in bindings:
        try:
            _bind(session, binding, bound)
        except LanguageError as err:
            raise BindingError(err, binding) from None


def _bind(session: Session, binding: str, bound: set[str]) -> None:
    loaded = None
    if "@" in binding:  # NAME=@FILE (docs/cli.md, "Data files"); the loaders load only then
        from gradcalc.parser.datafiles import file_bindings

        loaded = file_bindings(binding, session.base_dir, session.header_read)
    if loaded is not None:
        for file_name, data in loaded:
            if file_name in bound:
                raise LanguageError("argument", f"{file_name} is given twice ({binding!r} binds it again); give each name once")
            session.assign(file_name, session.backend.from_array(data))
            bound.add(file_name)
        return

    name, sep, text = binding.partition("=")
    name = name.strip()
    if not sep or not writable_name(name) or not text.strip():
        why = (f"{name} is not a name the language reads (names are ASCII letters, digits and _, as in x_1)"
               if sep and text.strip() and name.isidentifier() else "write NAME=VALUE, as in x=3 or W='randn(3, 3, seed=0)'")
        raise LanguageError("argument", f"bad binding {binding!r}: {why}")
    if name.startswith("__"):
        raise LanguageError("safety", f"bad binding {binding!r}: names starting with '__' are not allowed")
    if name in bound:
        raise LanguageError("argument", f"{name} is given twice ({binding!r} after an earlier {name}=...); give each name once")
    try:
        program = compile_program(text)
        results = session.run(program)
        if len(results) != 1 or getattr(results[-1], "value", None) is None:
            raise LanguageError("argument", f"bad binding {binding!r}: the value is one expression, which gives a number, an array or a function "
                                            "(x=3, x='[1, 2]', f=sin)")
    except LanguageError as err:
        err.message = f"in the value of {name}: {err.message}"
        if err.line == 1 and err.column is not None:  # the value starts after 'NAME='
            shift = binding.index("=") + 1
            err.column += shift
            if err.end_line == 1 and err.end_column is not None:
                err.end_column += shift
        raise BindingError(err, binding) from None
    session.assign(name, results[-1].value)
    bound.add(name)
