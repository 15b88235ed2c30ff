"""Which case a worker sets up ahead: the item pytest runs next, if it is a case that runs.

The set-up itself is tested with the simulator (tests/test_prebuild.py); here only the
choice, from pytest's own collection, without building anything.
"""

from __future__ import annotations

import pytest

from pytest_libero.session import case_entry

pytest_plugins = ["pytester"]

SKIP_ONE = '''
import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if item.name.endswith("[libero_10-01]"):
            item.add_marker(pytest.mark.skip(reason="skipped by the operator"))
        if item.name.endswith("[libero_10-02]"):
            item.add_marker(pytest.mark.skipif(False, reason="a condition that does not hold"))
        if item.name.endswith("[libero_10-03]"):
            item.add_marker(pytest.mark.skipif(True, reason="a condition that holds"))
'''


def test_the_next_case_is_the_next_item_unless_it_is_skipped_or_not_a_case(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(SKIP_ONE)
    pytester.makepyfile(test_other="def test_not_a_case():\n    pass\n")
    conformance = pytester.path / "test_conformance.py"
    conformance.write_text("from pytest_libero.conformance.test_libero import test_libero_task\n")
    items = pytester.inline_genitems(
        "--libero-profile=zero", "--libero-scope=development", "--libero-task-ids=0-3",
        str(conformance), "test_other.py")[0]
    assert [item.name for item in items] == [
        *(f"test_libero_task[libero_10-0{i}]" for i in range(4)), "test_not_a_case"]
    chosen = [case_entry(item) for item in items]
    assert [entry.case_id if entry else None for entry in chosen] == [
        "libero_10-00", None, "libero_10-02", None, None]
    assert case_entry(None) is None  # the worker's last item: nothing to set up
