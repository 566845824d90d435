"""parser/generate.py trims Lark's stand-alone parser so that it imports fast; these check
that the trimming keeps what users need and leaves out what costs start-up time."""
import subprocess
import sys

from gradcalc.parser import generate, standalone


def test_the_generated_module_keeps_every_public_name():
    missing = [name for name in generate.PUBLIC if not hasattr(standalone, name)]
    assert missing == []


def test_trees_tokens_and_callbacks_live_in_larktree_and_nothing_else_does():
    """generate.py moves what parsing a correct source needs out of standalone.py:
    larktree.py imports only from the standard library, and standalone.py's names for
    those classes are the same objects."""
    from gradcalc.parser import larktree

    for name in generate.TREE_NAMES:
        assert getattr(standalone, name) is getattr(larktree, name), name
        assert getattr(larktree, name).__module__ == larktree.__name__
    import ast

    tree = ast.parse(open(larktree.__file__).read())
    imported = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    assert imported <= {"__future__", "typing", "sys", "copy", "collections"}, imported


def test_the_tree_split_moves_classes_and_copies_what_they_use():
    source = (
        "from __future__ import annotations\n# licence\nimport os\nfrom typing import TypeVar, Generic\n"
        "_T = TypeVar('_T')\n"
        "class Helper:\n    pass\n"
        "_T = TypeVar('_T', bound='Tree')\n"
        "class Tree(Generic[_T]):\n    def f(self):\n        return Helper()\n"
        "class Other:\n    def g(self):\n        return Tree()\n"
    )
    rest, tree_module = generate._split_tree_module(source)
    assert "class Tree" in tree_module and "class Helper" in tree_module and "class Other" not in tree_module
    assert "_T = TypeVar('_T', bound='Tree')" in tree_module and "_T = TypeVar('_T')\n" not in tree_module
    assert "from typing import TypeVar, Generic" in tree_module and "import os" not in tree_module
    assert "# licence" in tree_module
    assert "from .larktree import Helper, Tree" in rest and "class Tree" not in rest and "class Other" in rest


def test_the_generated_module_imports_neither_regex_nor_logging():
    """Lark's runtime probes for the regex module (6 ms when installed) and sets up a
    logger; the generated module does neither, and evaluates no annotations."""
    code = "import sys; import gradcalc.parser.standalone; print('regex' in sys.modules, 'logging' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
    assert standalone.Tree.__init__.__annotations__["data"] == "str"  # a string: never built


def test_unreachable_definitions_are_dropped_and_reachable_ones_kept():
    source = (
        "import os\n"
        "def used_by_public():\n    return 1\n"
        "def unused():\n    return used_by_public()\n"
        "@staticmethod\ndef unused_decorated():\n    pass\n"
        "class Token:\n    x = used_by_public()\n"
        "REGISTRY = {}\n"
        "REGISTRY['k'] = registered\n"
        "def registered():\n    pass\n"
    )
    trimmed = generate._without_unreachable_definitions(source)
    assert "def used_by_public" in trimmed and "class Token" in trimmed and "def registered" in trimmed
    assert "unused" not in trimmed and "@staticmethod" not in trimmed
    assert "REGISTRY = {}" in trimmed and "import os" in trimmed


def test_the_silent_logger_accepts_what_lark_calls():
    for method in ("debug", "info", "warning", "error", "exception", "critical", "setLevel"):
        assert getattr(standalone.logger, method)("message %s", 1) is None


def test_the_prebuilt_parser_was_built_from_the_current_generated_module():
    """prebuilt.py pickles the parser built from standalone.py; after a change to the
    grammar, to generate.py or to the post-lexer's terminals it must be built again."""
    from gradcalc.parser import prebuilt

    assert prebuilt.FINGERPRINT == generate.fingerprint(), "run: python -m gradcalc.parser.generate"


def _outcome(parser, source):
    """The tree and statement ranges, or the error as users see it and what Lark expected
    (as sets: Lark lists them in set order, which differs from process to process)."""
    from gradcalc.parser import syntax

    try:
        return "tree", parser.parse(source), list(parser.options.postlex.statements)
    except standalone.UnexpectedInput as err:
        expected = sorted(getattr(err, "allowed", None) or getattr(err, "expected", None) or [])
        return type(err).__name__, syntax._syntax_error(source, err).as_dict(), expected, err.line, err.column


def test_the_prebuilt_parser_parses_as_the_one_built_from_the_tables():
    from pathlib import Path

    from gradcalc.parser import syntax

    prebuilt, built = syntax.lark_parser(), syntax.build_lark_parser()
    assert prebuilt is not built and type(prebuilt) is type(built)
    sources = [p.read_text() for p in sorted((Path(__file__).parent.parent / "examples").rglob("*.gc"))]
    sources += ["x*2", "3", "x = 3; y = x ** 2\nexp(x).relu()/y", "(a*", "x = if", "1 +* 2", "[[1, 2], [3", "f(x, axis=0)[1:2, ...]",
                "x @ y.T", "check sin(x) wrt x", "a !", "'unterminated", ""]
    assert len(sources) > 15
    for source in sources:
        assert _outcome(prebuilt, source) == _outcome(built, source), source
