"""docs/reliability.md's hostile-input tables (rounds 3 and 4) are generated from the
tests' own rows (harness/hostile.py)."""

from __future__ import annotations

import pytest

from harness.hostile import DOC, ROUND_3, ROUNDS, Hostile, Round, documented, render, rows


@pytest.mark.parametrize("sweep", ROUNDS, ids=lambda r: f"round-{r.number}")
def test_the_doc_holds_the_table_the_tests_make(sweep: Round) -> None:
    assert documented(DOC.read_text(encoding="utf-8"), sweep) == render(rows(sweep.modules), sweep), (
        "regenerate it: python -m harness.hostile")


@pytest.mark.parametrize("sweep", ROUNDS, ids=lambda r: f"round-{r.number}")
def test_every_row_names_a_class_and_a_test_that_exists(sweep: Round) -> None:
    for row in rows(sweep.modules):
        assert row.klass in sweep.classes, row
        path, _, name = row.test.partition("::")
        assert name and (DOC.parents[1] / path).is_file(), row
        assert f"def {name.split('[')[0]}(" in (DOC.parents[1] / path).read_text(), row


@pytest.mark.parametrize("sweep", ROUNDS, ids=lambda r: f"round-{r.number}")
def test_every_class_has_a_row(sweep: Round) -> None:
    assert {row.klass for row in rows(sweep.modules)} == set(sweep.classes)


def test_the_table_escapes_what_would_break_it() -> None:
    table = render([Hostile(4, "a | b", "one\nline", "tests/x.py::t")], ROUND_3)
    assert "| 4. One case, one line | a \\| b | one line | `tests/x.py::t` |" in table
