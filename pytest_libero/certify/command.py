"""``pytest-libero check-server``: run the checks against a profile's server, write the
certificate, exit 0 (every required check passed), 1 (one failed, named), 2 (no server
answered) or 4 (a usage error: an unknown profile, an in-process one, an unchecked wire).

The checks run as a pytest session of their own (``test_policy_server.py`` with
``plugin.py``), so each is a pytest case with its Allure entry where allure-pytest is
installed and ``--alluredir`` is given after ``--``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_libero.certify import test_policy_server
from pytest_libero.certify.certificate import certificate, write_certificate
from pytest_libero.certify.plugin import SERVER, UNREACHABLE, VerdictKeeper
from pytest_libero.certify.wire import ServerLine
from pytest_libero.config.profiles import load_profile
from pytest_libero.protocol.errors import SetupError

USAGE = 4
DEFAULT_WAIT_S = 10.0
"""A server that is not up costs this long, not the profile's wait for a loading model."""


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="pytest-libero check-server",
        description="Check a policy server against the contract with golden observations, "
                    "no simulator; write a certificate (docs/check_server.md).")
    made.add_argument("--profile", required=True, help="the served profile (a name or a .toml)")
    made.add_argument("--endpoint", help="the server's address, instead of the profile's")
    made.add_argument("--wait", type=float, default=DEFAULT_WAIT_S, metavar="S",
                      help=f"how long to wait for the server to answer (default {DEFAULT_WAIT_S:g} "
                      "s; a loading model may need the profile's own wait)")
    made.add_argument("--deterministic", action="store_true",
                      help="the policy is deterministic: a repeated input must get the same reply")
    made.add_argument("--out", type=Path, default=Path("certificate.json"),
                      help="where the certificate goes (default: ./certificate.json)")
    made.add_argument("pytest_args", nargs="*", help="after --: pytest's own options "
                      "(--alluredir DIR, -v)")
    return made


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    try:
        profile = load_profile(args.profile)
        profile = profile.with_overrides(endpoint=args.endpoint, wait_s=args.wait)
        if not profile.served:
            raise SetupError(f"profile {profile.name!r} runs in-process; check-server checks a "
                             "policy server: give a served profile")
        ServerLine(profile)
    except SetupError as exc:
        print(f"pytest-libero check-server: error: {exc}", file=sys.stderr)
        return USAGE
    keeper = VerdictKeeper()
    checks = Path(test_policy_server.__file__)
    options = ["-p", "pytest_libero.certify.plugin", "-p", "no:cacheprovider",
               "-W", "ignore::pytest.PytestAssertRewriteWarning",
               "--rootdir", str(checks.parent), "-c", os.devnull,
               "--certify-profile", args.profile,
               *(["--certify-endpoint", args.endpoint] if args.endpoint else []),
               "--certify-wait", str(args.wait),
               *(["--certify-deterministic"] if args.deterministic else []),
               *args.pytest_args, str(checks)]
    code = pytest.main(options, plugins=[keeper])
    if code == UNREACHABLE and not keeper.verdicts:
        return UNREACHABLE
    if keeper.config is None or SERVER not in keeper.config.stash:
        return int(code)
    under_test = keeper.config.stash[SERVER]
    document = certificate(under_test.profile, under_test.preflight, keeper.verdicts)
    write_certificate(args.out, document)
    failed = document["failed"]
    print(f"check-server: {len(keeper.verdicts) - len(failed)} of {len(keeper.verdicts)} checks "
          f"passed or were skipped; certificate: {args.out}")
    for name in failed:
        print(f"check-server: FAILED {name}", file=sys.stderr)
    return 0 if document["passed"] else 1
