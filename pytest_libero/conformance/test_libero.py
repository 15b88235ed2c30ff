"""One natively scored LIBERO episode per selected entry.

The episode runs in the ``libero_case`` fixture (setup), so an infrastructure error
is a pytest error; here only LIBERO's own verdict is checked, so a native failure
is a pytest failure with the reason.
"""

from __future__ import annotations

import pytest

from pytest_libero.episode.record import CaseRecord


def test_libero_task(libero_case: CaseRecord) -> None:
    if libero_case["outcome"] != "success":
        pytest.fail(libero_case["summary"], pytrace=False)
