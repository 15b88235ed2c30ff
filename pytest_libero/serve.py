"""Serve any Python policy on an openpi-compatible websocket server.

    python -m pytest_libero.serve --policy zero --port 8000
    python -m pytest_libero.serve --policy my_pkg.policies:make --option ckpt=/models/a
    python -m pytest_libero.serve --policy my_pkg.policies:make --max-batch 8 --batch-wait-ms 5

A model team runs this in its own environment (its Python, CUDA, framework) and points
a websocket profile at it. The server itself is :class:`pytest_libero.policy.openpi.server.
PolicyServer`; this module is the command. The factory is called once at startup and
again whenever more episodes run at once than objects exist, so it should share loaded
weights between the objects it builds (docs/serving.md).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import Any

from pytest_libero.config.profiles import load_profile
from pytest_libero.policy.builtin.factory import build_inprocess, parse_policy_options
from pytest_libero.policy.contract import Policy
from pytest_libero.policy.openpi.server import PolicyServer
from pytest_libero.protocol.digits import decimal_arg, whole_arg
from pytest_libero.protocol.errors import SetupError


def build_served_policy(spec: str, options: dict[str, Any]) -> Policy:
    """A shipped in-process profile name (zero, random, replay, demo) or ``module:factory``."""
    if ":" in spec:
        policy: Policy = build_inprocess(spec, options, f"--policy {spec}")
        return policy
    profile = load_profile(spec)
    if profile.served:
        raise SetupError(f"--policy {spec}: profile is not an in-process policy")
    served: Policy = profile.with_overrides(options=options).build_policy()
    return served


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_libero.serve",
        description="Serve a Python policy on an openpi-compatible websocket server.",
    )
    parser.add_argument("--policy", required=True,
                        help="zero, random, replay, demo, or an importable module:factory")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="keyword argument for the policy factory (repeatable)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=whole_arg, default=8000)
    parser.add_argument("--max-batch", type=whole_arg, default=16, metavar="N",
                        help="most concurrent requests per infer_batch call (default 16); "
                             "a policy without infer_batch is called one request at a time")
    parser.add_argument("--batch-wait-ms", type=decimal_arg, default=0.0, metavar="W",
                        help="how long a batch waits after its first request for more "
                             "(default 0: it takes what is already waiting)")
    args = parser.parse_args(argv)
    if args.max_batch < 1 or args.batch_wait_ms < 0:
        parser.error("--max-batch must be at least 1 and --batch-wait-ms at least 0")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        factory = functools.partial(build_served_policy, args.policy,
                                    parse_policy_options(args.option))
        server = PolicyServer(factory, max_batch=args.max_batch, batch_wait_ms=args.batch_wait_ms)
    except SetupError as exc:
        parser.error(str(exc))
    try:
        asyncio.run(server.run(args.host, args.port))
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
