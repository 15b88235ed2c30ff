"""Is an openpi server there? GET /healthz, then a connection that reads its metadata frame.

One deadline covers both steps, so "wait up to wait_s" means wait_s in all. The
websocket transport probes this way before any case and before each one; the launcher
waits on the health check alone while the server it started comes up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pytest_libero.policy.errors import ServerUnavailable
from pytest_libero.policy.openpi.client import RETRY_SLEEP_S, WebsocketPolicyClient, check_health

__all__ = ["connect_within", "probe_server", "wait_for_health"]


def wait_for_health(
    endpoint: str,
    deadline: float,
    timeout: float,
    *,
    on_wait: Callable[[ServerUnavailable], None] | None = None,
    still_worth_it: Callable[[], None] | None = None,
    path: str = "/healthz",
) -> None:
    """Poll GET ``path`` until it answers 200; raise ServerUnavailable at ``deadline``.

    ``on_wait`` hears the first failure (someone may be watching a terminal);
    ``still_worth_it`` may raise to end the wait early (a launched server that exited).
    At least one attempt is made.
    """
    told = False
    while True:
        try:
            check_health(endpoint, timeout=timeout, path=path)
            return
        except ServerUnavailable as exc:
            if still_worth_it is not None:
                still_worth_it()
            if time.monotonic() + RETRY_SLEEP_S > deadline:
                raise
            if on_wait is not None and not told:
                on_wait(exc)
                told = True
            time.sleep(RETRY_SLEEP_S)


def probe_server(
    endpoint: str,
    *,
    wait_s: float,
    connect_timeout: float,
    on_wait: Callable[[ServerUnavailable], None] | None = None,
) -> dict[Any, Any]:
    """The server's metadata frame, read within ``wait_s``; the connection is closed.

    Raises ServerUnavailable when nothing answers in time, and the client's other
    errors (ProtocolViolation, ServerError) when something answers wrongly.
    """
    with WebsocketPolicyClient(
        endpoint, connect_timeout=connect_timeout, call_timeout=connect_timeout
    ) as client:
        return connect_within(client, wait_s, on_wait=on_wait)


def connect_within(
    client: WebsocketPolicyClient,
    wait_s: float,
    *,
    health: bool = True,
    on_wait: Callable[[ServerUnavailable], None] | None = None,
) -> dict[Any, Any]:
    """Open ``client``'s connection (its health check first, unless ``health`` is False) and
    return the metadata frame, all within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    if health:
        wait_for_health(client.uri, deadline, client.connect_timeout, on_wait=on_wait,
                        path=client.health_path)
    return client.connect(wait_s=max(deadline - time.monotonic(), 0.0))
