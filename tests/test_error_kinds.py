"""LanguageError.kind is a closed set: every kind a raise site names is an ErrorKind,
docs/language.md lists exactly that set, and an unknown word fails where it is made."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradcalc.parser import ErrorKind, LanguageError, Session

ROOT = Path(__file__).resolve().parents[1]
LITERAL = re.compile(r'(?:LanguageError\(\s*|file_error\(.*kind=)"([a-z_]+)"')


def test_every_kind_written_at_a_raise_site_is_in_the_set():
    named = {m.group(1) for folder in ("parser", "cli") for path in (ROOT / folder).rglob("*.py")
             for m in LITERAL.finditer(path.read_text())}
    assert named, "the pattern found no raise site"
    assert named <= {k.value for k in ErrorKind}, named - {k.value for k in ErrorKind}


def test_the_docs_list_the_set():
    text = (ROOT / "docs" / "language.md").read_text()
    section = text[text.index("## Errors"):]
    listed = set(re.findall(r"`([a-z]+)`", section[:section.index("line and column:")]))
    assert {k.value for k in ErrorKind} <= listed


def test_an_unknown_kind_fails_where_it_is_made():
    with pytest.raises(ValueError):
        LanguageError("syntaxx", "oops")


@pytest.mark.parametrize(("source", "kind"), [("(a*", "incomplete"), ("x = ", "incomplete"), ("sigmod(1)", "name"),
                                              ("[1, 2] + [1, 2, 3]", "shape"), ("1 +* 2", "syntax")])
def test_kinds_compare_and_serialise_as_their_words(source, kind):
    with pytest.raises(LanguageError) as info:
        Session().run_source(source)
    assert info.value.kind == kind and info.value.kind is ErrorKind(kind)
    assert info.value.as_dict()["kind"] == kind and str(info.value.kind) == kind
