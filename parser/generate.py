"""Regenerate parser/standalone.py from parser/grammar.lark (Lark's stand-alone LALR parser),
and parser/prebuilt.py: the parser built from it, pickled (see prebuilt_source).

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
import pickle
import subprocess
import sys
import types
import zlib
from pathlib import Path
from typing import Any

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


_EAGER_TABLES = (
    "import pickle, zlib, base64\n",
    "DATA = pickle.loads(zlib.decompress(base64.b64decode(DATA)))\n",
    "MEMO = pickle.loads(zlib.decompress(base64.b64decode(MEMO)))\n",
    "def Lark_StandAlone(**kwargs):\n  return Lark._load_from_dict(DATA, MEMO, **kwargs)\n",
)
_LAZY_TABLES = (
    "import pickle\n",
    "",
    "",
    "def Lark_StandAlone(**kwargs):\n"
    "  import zlib, base64  # the tables are decoded here, not at import: the prebuilt parser needs them not\n"
    "  data, memo = (pickle.loads(zlib.decompress(base64.b64decode(blob))) for blob in (DATA, MEMO))\n"
    "  return Lark._load_from_dict(data, memo, **kwargs)\n",
)


def _lazy_tables(source: str) -> str:
    """Decode the tables when a parser is built, not at import (see prebuilt_source)."""
    for old, new in zip(_EAGER_TABLES, _LAZY_TABLES):
        source = _replace_once(source, old, new)
    return source


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return [node.name]
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _first_line(node: ast.stmt) -> int:
    """Where a top-level statement starts in the source, its decorators included."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


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
        del lines[_first_line(node) - 1:node.end_lineno]
    return "".join(lines)


# What the fast path builds trees with, and what the callbacks pickled in its tables are
# (fastpath.py): moved into parser/larktree.py, so that a command whose source parses
# never imports the rest of Lark's runtime (3 to 4 ms). standalone.py imports them back.
TREE_NAMES = ("Tree", "Token", "ExpandSingleChild", "ChildFilterLALR", "ChildFilterLALR_NoPlaceholders")
TREE_HEADER = (
    "# Generated from grammar.lark by `python -m gradcalc.parser.generate`, split out of standalone.py; do not edit.\n"
    "# flake8: noqa\n"
    "from __future__ import annotations  # Lark's annotations are for readers: not built at import\n"
    '"""Lark\'s parse trees, tokens and tree-building callbacks: all that parsing a correct\n'
    'source needs of Lark\'s runtime (fastpath.py); the rest of it stays in standalone.py."""\n'
)


def _split_tree_module(source: str) -> tuple[str, str]:
    """(standalone.py without the definitions TREE_NAMES reach, larktree.py with them).

    Classes and functions move, and standalone.py imports them back where the first one
    stood; a plain assignment they use (a TypeVar) is copied, the last one before its
    first user; an import is copied when they use a name it binds. Lark's licence
    comment heads both files."""
    module = ast.parse(source)
    body = module.body
    by_name: dict[str, list[ast.stmt]] = {}
    for node in body:
        for name in _defined_names(node):
            by_name.setdefault(name, []).append(node)
    moved: list[ast.stmt] = []
    todo, seen = list(TREE_NAMES), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        for node in by_name[name]:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                moved.append(node)
                todo += [used for used in _used_names(node) if used in by_name]
    used = set().union(*(_used_names(node) for node in moved))
    copied = []
    for name in sorted(used & set(by_name)):
        first_user = min(node.lineno for node in moved if name in _used_names(node))
        before = [node for node in by_name[name] if isinstance(node, ast.Assign) and node.lineno < first_user]
        if before and not any(isinstance(node, (ast.ClassDef, ast.FunctionDef)) for node in by_name[name]):
            copied.append(before[-1])
            used |= _used_names(before[-1])
    plain_imports = [node for node in body if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", "") != "__future__"]
    imports = [node for node in plain_imports if {(alias.asname or alias.name).split(".")[0] for alias in node.names} & used]
    lines = source.splitlines(keepends=True)

    def text(node: ast.stmt) -> str:
        return "".join(lines[_first_line(node) - 1:node.end_lineno])

    first_import = min(node.lineno for node in plain_imports)
    licence = "".join(line for line in lines[:first_import - 1] if line.startswith("#") and "do not edit" not in line and "noqa" not in line)
    tree_module = TREE_HEADER + licence + "\n" + "".join(text(node) for node in imports) + "\n\n" + "\n\n".join(
        text(node) for node in sorted(copied + moved, key=lambda n: n.lineno)
    )
    names = sorted({node.name for node in moved})  # type: ignore[attr-defined]
    first = min(moved, key=lambda n: n.lineno)
    for node in sorted(moved, key=lambda n: n.lineno, reverse=True):
        replacement = [f"from .larktree import {', '.join(names)}\n"] if node is first else []
        lines[_first_line(node) - 1:node.end_lineno] = replacement
    return "".join(lines), tree_module


def generated_sources() -> tuple[str, str]:
    """standalone.py and larktree.py, from grammar.lark and the installed Lark."""
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
    source = _lazy_tables(source)
    source = _without_unreachable_definitions(source)
    source, tree_module = _split_tree_module(HEADER + source)
    compile(source, "standalone.py", "exec")  # fail here, not at the next import
    compile(tree_module, "larktree.py", "exec")
    return source, tree_module


PREBUILT_HEADER = '''# Generated by `python -m gradcalc.parser.generate` from standalone.py; do not edit.
"""The parser of syntax.lark_parser() and the fast path's tables, built and pickled ahead of time (generate.py)."""
'''
# What most one-line programs pass through: the lexers of these parser states (and the
# fast path's cached gotos) are built before pickling, so a one-shot command does not
# build them again.
WARM_UP = ("x = 3", "x*2", "3", "y = exp(-x) + sin(x, 2)[0] / 2 ** x", "x.sum(axis=0) @ [[1, 2.5], [3, 4]]")


def fingerprint() -> str:
    """What the prebuilt parser and tables are built from: the generated module (grammar
    tables and Lark's runtime), the post-lexer's terminals and the fast path's code. tests/test_generated_parser.py checks
    that prebuilt.py was built from the current ones."""
    import hashlib

    from .syntax import _BracketNewlines

    text = "".join((HERE / name).read_text() for name in ("standalone.py", "larktree.py", "fastpath.py")) + repr(_BracketNewlines.always_accept)
    return hashlib.sha256(text.encode()).hexdigest()


class _ModulePickler(pickle.Pickler):
    """Lark's lexer keeps the `re` module itself; a module pickles as its import."""

    def reducer_override(self, obj: object) -> Any:
        if isinstance(obj, types.ModuleType):
            return __import__, (obj.__name__,)
        return NotImplemented


def _pickled(obj: object) -> bytes:
    buffer = io.BytesIO()
    _ModulePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return zlib.compress(buffer.getvalue(), 9)


def prebuilt_source() -> str:
    """prebuilt.py: syntax.lark_parser()'s parser, built from standalone.py, warmed up on
    WARM_UP and pickled (zlib-compressed bytes; a .pyc holds them as they are); and the
    fast path's tables read from it, their caches filled by the same sources.

    Building the parser from the tables took a one-shot command about 10% of importing
    NumPy (docs/performance.md); unpickling the finished objects takes a fraction of that.
    Every parse starts on the fast path, which needs only its own tables (about a third
    of the parser's unpickling time), so a command without a syntax error never loads
    the parser. Run in a process that imported the current standalone.py (main() starts one)."""
    from . import fastpath
    from .syntax import build_lark_parser

    parser = build_lark_parser()
    tables = fastpath.build_tables(parser)
    for source in WARM_UP:
        parser.parse(source)
        if fastpath.parse(source, tables) is None:
            raise RuntimeError(f"the fast path gives up on {source!r}")
    return (
        f"{PREBUILT_HEADER}FINGERPRINT = {fingerprint()!r}\nPARSER = {_pickled(parser)!r}\nTABLES = {_pickled(tables)!r}\n"
    )


def main() -> None:
    standalone, tree_module = generated_sources()
    for name, text in (("larktree.py", tree_module), ("standalone.py", standalone)):
        (HERE / name).write_text(text)
        print(f"wrote {HERE / name}", file=sys.stderr)
    # A fresh process imports the standalone.py just written (this one has the old one).
    code = "from gradcalc.parser import generate; print(generate.prebuilt_source(), end='')"
    prebuilt = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    (HERE / "prebuilt.py").write_text(prebuilt)
    print(f"wrote {HERE / 'prebuilt.py'}", file=sys.stderr)


if __name__ == "__main__":
    main()
