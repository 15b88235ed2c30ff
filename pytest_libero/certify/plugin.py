"""The pytest plugin behind ``check-server``: its options, the server under test as a
fixture, and each check's verdict kept for the certificate.

A check is a test of ``test_policy_server.py``; its outcome is its verdict, and what it
measured travels as ``record_property("facts", {...})``. A server that cannot be reached
ends the session at once with exit code 2, before any check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_libero.certify.golden import Golden, golden_observations
from pytest_libero.certify.wire import ServerLine
from pytest_libero.config.profiles import Profile, load_profile
from pytest_libero.policy.errors import ServerUnavailable
from pytest_libero.protocol.errors import PolicyTransportError, SetupError

UNREACHABLE = 2


@dataclass
class ServerUnderTest:
    """What every check reaches: the profile, its server and the golden set."""

    profile: Profile
    line: ServerLine
    golden: list[Golden]
    deterministic: bool
    preflight: dict[str, Any]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("check-server")
    group.addoption("--certify-profile", required=True, help="the profile whose server is checked")
    group.addoption("--certify-endpoint", default=None, help="the server's address, instead of "
                    "the profile's")
    group.addoption("--certify-wait", type=float, default=None,
                    help="seconds to wait for the server, instead of the profile's wait_s")
    group.addoption("--certify-deterministic", action="store_true",
                    help="the policy is deterministic: a repeated input must get the same reply")


def pytest_configure(config: pytest.Config) -> None:
    profile = load_profile(config.getoption("--certify-profile"))
    profile = profile.with_overrides(endpoint=config.getoption("--certify-endpoint"),
                                     wait_s=config.getoption("--certify-wait"))
    if not profile.served:
        raise SetupError(f"profile {profile.name!r} runs in-process: check-server checks a "
                         "policy server; give a served profile")
    line = ServerLine(profile)
    try:
        facts = profile.transport_impl.preflight(profile, None)
    except ServerUnavailable as exc:
        pytest.exit(f"check-server: {exc}", returncode=UNREACHABLE)
    except (PolicyTransportError, SetupError) as exc:
        # A server that answers but that the profile cannot use (a vla-eval server asking
        # for a state the profile declares nothing for): the handshake check fails, naming it.
        facts = {"preflight_error": str(exc).splitlines()[0]}
    config.stash[SERVER] = ServerUnderTest(
        profile=profile, line=line, golden=golden_observations(proprio=profile.track != "rgb"),
        deterministic=config.getoption("--certify-deterministic"), preflight=facts)


SERVER = pytest.StashKey[ServerUnderTest]()


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest) -> ServerUnderTest:
    return request.config.stash[SERVER]


class VerdictKeeper:
    """Each check's verdict, in order: its outcome, the first line of why it did not pass,
    and the facts it recorded (registered by the command beside this module)."""

    def __init__(self) -> None:
        self.verdicts: list[dict[str, Any]] = []
        self.config: pytest.Config | None = None

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and not (report.when == "setup" and not report.passed):
            return
        facts = dict(report.user_properties).get("facts", {})
        self.verdicts.append({"check": report.head_line or report.nodeid,
                              "verdict": report.outcome,
                              "why": "" if report.passed else _first_line(report),
                              "facts": facts})


def _first_line(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    text = report.longreprtext.strip().splitlines()
    errors = [line[2:].strip() for line in text if line.startswith("E ")]
    return errors[0] if errors else (text[-1] if text else "")
