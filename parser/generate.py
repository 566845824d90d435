"""Regenerate parser/standalone.py from parser/grammar.lark (Lark's stand-alone LALR parser).

    python -m gradcalc.parser.generate

The stand-alone module carries the parse tables and a trimmed copy of Lark's runtime, so
a one-shot command imports it in about half the time `import lark` takes (see
docs/performance.md). grammar.lark stays the source of truth; a test fails when the
generated file is out of date.
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = "# Generated from grammar.lark by `python -m gradcalc.parser.generate`; do not edit.\n# flake8: noqa\n"


def _without_rich_printing(source: str) -> str:
    """Drop Lark's Tree.__rich__ / Tree._rich, which import rich: the parser is not UI."""
    start = source.index("    def __rich__(")
    end = source.index("    def __eq__(", start)
    return source[:start] + source[end:]


def standalone_source() -> str:
    from lark import Lark
    from lark.tools.standalone import gen_standalone

    parser = Lark((HERE / "grammar.lark").read_text(), parser="lalr", start="program", maybe_placeholders=True)
    out = io.StringIO()
    gen_standalone(parser, out=out, compress=True)
    return HEADER + _without_rich_printing(out.getvalue())


def main() -> None:
    (HERE / "standalone.py").write_text(standalone_source())
    print(f"wrote {HERE / 'standalone.py'}", file=sys.stderr)


if __name__ == "__main__":
    main()
