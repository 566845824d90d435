"""Regenerate parser/standalone.py from parser/grammar.lark (Lark's stand-alone LALR parser).

    python -m gradcalc.parser.generate

The stand-alone module carries the parse tables and a trimmed copy of Lark's runtime, so
a one-shot command neither imports Lark nor analyses the grammar. grammar.lark stays the
source of truth; a test fails when the generated file is out of date.

Every process that parses imports this module, so its import time is start-up time
(docs/performance.md). Lark's generator output is adjusted here, each step checked so a
new Lark version that changes the text fails loudly instead of silently:

- the third-party `regex` module is not imported (Lark probes for it; when installed it
  costs 6 ms and is only needed for `\\p{...}` Unicode categories, which the grammar
  does not use);
- `logging` is not imported (Lark's logger is set to CRITICAL, so every call on it is
  silent; a do-nothing logger behaves the same and saves 2-3 ms);
- `dataclasses` is not imported: Lark's one dataclass, TextSlice, becomes a plain class;
- annotations are not evaluated (`from __future__ import annotations`): Lark's runtime
  annotates every signature with typing generics, and building those at import took
  most of the module's own 5 ms;
- definitions nothing can reach (indenters, transformer variants we never use) are
  dropped, which shrinks the source Python must compile when no .pyc can be written.

The tables stay pickled and compressed: written as Python literals they load no faster
from a .pyc and take 12 ms longer to compile without one.
"""
from __future__ import annotations

import ast
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = (
    "# Generated from grammar.lark by `python -m gradcalc.parser.generate`; do not edit.\n# flake8: noqa\n"
    "from __future__ import annotations  # Lark's annotations are for readers: not built at import\n"
)

# What users of the module (syntax.py, compiler.py, fastpath.py, tests) may import from it; everything
# these reach by name is kept.
PUBLIC = {
    "Lark_StandAlone", "Lark", "Token", "Tree", "Transformer", "Visitor", "Interpreter", "v_args", "Discard",
    "InteractiveParser", "LarkError", "ParseError", "LexError", "UnexpectedInput", "UnexpectedEOF",
    "UnexpectedCharacters", "UnexpectedToken", "VisitError", "GrammarError", "ConfigurationError",
    # the fast path (fastpath.py) reads the lexer's terminals and the parser's tables and callbacks
    "BasicLexer", "PatternStr", "Rule", "Shift", "ExpandSingleChild", "_create_unless", "_regexp_has_newline",
}

_REGEX_PROBE = """try:
    import regex
    _has_regex = True
except ImportError:
    _has_regex = False
"""

_LOGGING = """import logging
from dataclasses import dataclass
from typing import Generic, AnyStr

logger: logging.Logger = logging.getLogger("lark")
logger.addHandler(logging.StreamHandler())
"""

_SILENT_LOGGER = '''from typing import Generic, AnyStr


class _SilentLogger:
    """Stands in for Lark's logger, which is set to CRITICAL: nothing it is given is shown."""

    def _ignore(self, *args, **kwargs):
        pass

    debug = info = warning = error = exception = critical = setLevel = _ignore


logger = _SilentLogger()
'''


def _replace_once(source: str, old: str, new: str) -> str:
    if source.count(old) != 1:
        raise RuntimeError(f"generate.py: Lark's stand-alone output changed; cannot find {old.splitlines()[0]!r}")
    return source.replace(old, new)


def _without_rich_printing(source: str) -> str:
    """Drop Lark's Tree.__rich__ / Tree._rich, which import rich: the parser is not UI."""
    start = source.index("    def __rich__(")
    end = source.index("    def __eq__(", start)
    return source[:start] + source[end:]


def _without_regex_module(source: str, grammar: str) -> str:
    if "\\p{" in grammar:  # Unicode categories need the regex module: keep Lark's probe
        return source
    return _replace_once(source, _REGEX_PROBE, "_has_regex = False  # the grammar uses no \\p{...} categories\n")


def _without_logging(source: str) -> str:
    source = _replace_once(source, _LOGGING, _SILENT_LOGGER)
    return _replace_once(source, "logger.setLevel(logging.CRITICAL)\n", "")


_FROZEN_TEXT_SLICE = """@dataclass(frozen=True)
class TextSlice(Generic[AnyStr]):
    #--
    text: AnyStr
    start: int
    end: int
"""

_PLAIN_TEXT_SLICE = """class TextSlice(Generic[AnyStr]):
    #--
    text: AnyStr
    start: int
    end: int

    def __init__(self, text, start, end):
        self.text, self.start, self.end = text, start, end
        self.__post_init__()

    def __repr__(self):
        return f"TextSlice(text={self.text!r}, start={self.start!r}, end={self.end!r})"
"""


def _without_dataclasses(source: str) -> str:
    """TextSlice as a plain class: Lark's only dataclass, and importing dataclasses cost
    every start-up a few milliseconds."""
    source = _replace_once(source, _FROZEN_TEXT_SLICE, _PLAIN_TEXT_SLICE)
    if "dataclass" in source:
        raise RuntimeError("generate.py: Lark's stand-alone output uses dataclasses somewhere else")
    return source


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return [node.name]
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _used_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _without_unreachable_definitions(source: str) -> str:
    """Keep a top-level definition only if PUBLIC, a statement that always runs (imports,
    registrations) or another kept definition refers to its name."""
    module = ast.parse(source)
    defines = {id(node): _defined_names(node) for node in module.body}
    wanted = set(PUBLIC)
    for node in module.body:
        if not defines[id(node)]:
            wanted |= _used_names(node)
    by_name: dict[str, list[ast.stmt]] = {}
    for node in module.body:
        for name in defines[id(node)]:
            by_name.setdefault(name, []).append(node)
    kept: set[int] = set()
    todo = [name for name in wanted if name in by_name]
    while todo:
        for node in by_name.pop(todo.pop(), []):
            if id(node) not in kept:
                kept.add(id(node))
                todo += [name for name in _used_names(node) if name in by_name]
    lines = source.splitlines(keepends=True)
    drop = [node for node in module.body if defines[id(node)] and id(node) not in kept]
    for node in sorted(drop, key=lambda n: n.lineno, reverse=True):
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        del lines[first - 1:node.end_lineno]
    return "".join(lines)


def standalone_source() -> str:
    from lark import Lark
    from lark.tools.standalone import gen_standalone

    grammar = (HERE / "grammar.lark").read_text()
    parser = Lark(grammar, parser="lalr", start="program", maybe_placeholders=True)
    out = io.StringIO()
    gen_standalone(parser, out=out, compress=True)
    source = _without_rich_printing(out.getvalue())
    source = _without_regex_module(source, grammar)
    source = _without_logging(source)
    source = _without_dataclasses(source)
    source = _without_unreachable_definitions(source)
    source = HEADER + source
    compile(source, "standalone.py", "exec")  # fail here, not at the next import
    return source


def main() -> None:
    (HERE / "standalone.py").write_text(standalone_source())
    print(f"wrote {HERE / 'standalone.py'}", file=sys.stderr)


if __name__ == "__main__":
    main()
