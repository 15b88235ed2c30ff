"""docs/reliability.md's round-3 table is generated from the tests' own rows (harness/hostile.py)."""

from __future__ import annotations

from harness.hostile import CLASSES, DOC, MODULES, Hostile, documented, render, rows


def test_the_doc_holds_the_table_the_tests_make() -> None:
    assert documented(DOC.read_text(encoding="utf-8")) == render(rows()), (
        "regenerate it: python -m harness.hostile")


def test_every_row_names_a_class_and_a_test_that_exists() -> None:
    for row in rows():
        assert row.klass in CLASSES, row
        path, _, name = row.test.partition("::")
        assert name and (DOC.parents[1] / path).is_file(), row
        assert f"def {name.split('[')[0]}(" in (DOC.parents[1] / path).read_text(), row


def test_every_class_has_a_row() -> None:
    assert MODULES == () or {row.klass for row in rows()} == set(CLASSES)


def test_the_table_escapes_what_would_break_it() -> None:
    table = render([Hostile(4, "a | b", "one\nline", "tests/x.py::t")])
    assert "| 4. One case, one line | a \\| b | one line | `tests/x.py::t` |" in table
