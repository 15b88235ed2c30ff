"""The certificate check-server writes: what was checked, against what, and each verdict.

A JSON document: the format, pytest-libero's version, the wire and endpoint, the server's
own description (its preflight facts and handshake), the golden set's identity, each
check's verdict with the first line of why it did not pass and what it measured, and
whether every required check passed. Skipped checks (a reset that cannot be told from
chance on a policy whose replies do not repeat) pass nothing and fail nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

from pytest_libero.certify.golden import GOLDEN_SET_SHA256
from pytest_libero.config.profiles import Profile
from pytest_libero.files import write_json_atomic

CERTIFICATE_FORMAT: Final = "pytest-libero-certificate/1"


def certificate(profile: Profile, preflight: dict[str, Any],
                verdicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The certificate of one check-server session."""
    failed = [v["check"] for v in verdicts if v["verdict"] == "failed"]
    return {
        "format": CERTIFICATE_FORMAT,
        "pytest_libero": version("pytest-libero"),
        "wire": profile.transport,
        "endpoint": profile.endpoint,
        "profile": {"name": profile.name, "sha256": profile.sha256},
        "server": preflight,
        "golden_set_sha256": GOLDEN_SET_SHA256,
        "checks": list(verdicts),
        "failed": failed,
        "passed": bool(verdicts) and not failed,
    }


def write_certificate(path: Path, document: dict[str, Any]) -> None:
    write_json_atomic(path, document)
