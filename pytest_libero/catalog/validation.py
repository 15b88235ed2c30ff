"""Which suites may run in full mode: those whose schedule validation passed.

Full mode claims its episodes are the ones the published evaluators run. That claim
rests on release/validate_schedule.py, which runs full-mode episodes beside a reference
loop written from openpi's and OpenVLA-OFT's evaluators and compares every delivered
observation. Its committed report (packaged data) is read here; a suite it does not
show passing is refused, with the reason and the command that validates it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from pytest_libero.data import VALIDATION_FILE
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.shipped import need, reading, shipped_json

VALIDATE_COMMAND = "MUJOCO_GL=egl python release/validate_schedule.py --suite SUITE --record"


@cache
def load_validation() -> dict[str, Any]:
    """The committed validation report: per suite, whether its sample matched. A damaged
    one is a usage error naming the file (``protocol.shipped``)."""
    report = shipped_json(VALIDATION_FILE)
    with reading(VALIDATION_FILE):
        for suite, verdict in need(report, "suites", dict).items():
            need(verdict, "passed", bool, f"suites.{suite}.")
    return report


def validated_suites(report: dict[str, Any] | None = None) -> set[str]:
    """Suites whose sampled full-mode episodes matched the reference loop exactly."""
    suites = (report or load_validation()).get("suites", {})
    return {name for name, verdict in suites.items() if verdict.get("passed") is True}


def refuse_unvalidated(suites: Iterable[str], report: dict[str, Any] | None = None) -> None:
    """Raise SetupError naming every suite full mode cannot vouch for yet."""
    missing = [suite for suite in suites if suite not in validated_suites(report)]
    if missing:
        raise SetupError(
            f"full mode is refused for {', '.join(missing)}: no passing validation of the "
            "native schedule for this suite is recorded (full-mode episodes must match the "
            "published evaluators' loop observation for observation; see docs/full-mode.md). "
            f"Validate it with `{VALIDATE_COMMAND}`, or use --libero-mode=fast."
        )
