"""Serve any Python policy on an openpi-compatible websocket server.

    python -m pytest_libero.serve --policy zero --port 8000
    python -m pytest_libero.serve --policy my_pkg.policies:make --option ckpt=/models/a

A model team runs this in its own environment (its Python, CUDA, framework) and points
a websocket profile at it. The server itself is :class:`pytest_libero.policy.server.
PolicyServer`; this module is the command.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from pytest_libero.config.profiles import load_profile
from pytest_libero.policy.contract import Policy
from pytest_libero.policy.factory import build_inprocess, parse_policy_options
from pytest_libero.policy.server import PolicyServer
from pytest_libero.protocol.errors import SetupError


def build_served_policy(spec: str, options: dict[str, Any]) -> Policy:
    """A shipped in-process profile name (zero, random, replay) or ``module:factory``."""
    if ":" in spec:
        policy: Policy = build_inprocess(spec, options, f"--policy {spec}")
        return policy
    profile = load_profile(spec)
    if profile.transport != "inprocess":
        raise SetupError(f"--policy {spec}: profile is not an in-process policy")
    served: Policy = profile.with_overrides(options=options).build_policy()
    return served


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_libero.serve",
        description="Serve a Python policy on an openpi-compatible websocket server.",
    )
    parser.add_argument("--policy", required=True,
                        help="zero, random, replay, or an importable module:factory")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="keyword argument for the policy factory (repeatable)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        policy = build_served_policy(args.policy, parse_policy_options(args.option))
    except SetupError as exc:
        parser.error(str(exc))
    try:
        asyncio.run(PolicyServer(policy).run(args.host, args.port))
    except KeyboardInterrupt:
        pass
    finally:
        policy.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
