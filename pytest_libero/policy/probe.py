"""Is a policy server there? Health, then a connection that reads its metadata frame.

One deadline covers both steps, so "wait up to wait_s" means wait_s in all. The
controller probes once before any case (a missing server is a usage error, not a run of
errored cases); a worker probes again before each case, so a server that died is told
apart from one case's bad luck.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pytest_libero.policy.errors import ServerUnavailable
from pytest_libero.policy.openpi.client import RETRY_SLEEP_S, WebsocketPolicyClient, check_health
from pytest_libero.policy.transport import OnWait, ServedProfile, transport_named
from pytest_libero.protocol.errors import PolicyTransportError, SetupError

__all__ = [
    "connect_within",
    "preflight",
    "probe_server",
    "server_gone",
    "wait_for_health",
]


def wait_for_health(
    endpoint: str,
    deadline: float,
    timeout: float,
    *,
    on_wait: Callable[[ServerUnavailable], None] | None = None,
    still_worth_it: Callable[[], None] | None = None,
) -> None:
    """Poll GET /healthz until it answers 200; raise ServerUnavailable at ``deadline``.

    ``on_wait`` hears the first failure (someone may be watching a terminal);
    ``still_worth_it`` may raise to end the wait early (a launched server that exited).
    At least one attempt is made.
    """
    told = False
    while True:
        try:
            check_health(endpoint, timeout=timeout)
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
    """Open ``client``'s connection (GET /healthz first, unless ``health`` is False) and
    return the metadata frame, all within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    if health:
        wait_for_health(client.uri, deadline, client.connect_timeout, on_wait=on_wait)
    return client.connect(wait_s=max(deadline - time.monotonic(), 0.0))


def preflight(profile: ServedProfile, on_wait: OnWait | None = None) -> dict[str, Any]:
    """Before any case: the profile's server answers as its transport must, or the run
    is a usage error.

    Returns what run.json records of the server (``policy_server``; the transport says
    what). Raises SetupError naming the endpoint, the profile, what was seen and the fix.
    """
    transport = transport_named(profile.transport)
    endpoint = profile.endpoint or ""
    started = time.monotonic()
    try:
        return transport.preflight(profile, on_wait)
    except ServerUnavailable as exc:
        waited = time.monotonic() - started
        within = (f"within {profile.wait_s:g}s" if waited >= profile.wait_s - 1
                  else f"(it gave up after {waited:.1f}s of the {profile.wait_s:g}s wait)")
        raise SetupError(
            f"no policy server answered at {endpoint} {within} (profile "
            f"{profile.name!r}, {profile.source}); no case was run. Start it first: "
            f"{profile.start_hint}; or point --libero-endpoint at a running server "
            f"(--libero-server-wait sets how long to wait). Last error: {_first_line(exc)}"
        ) from None
    except PolicyTransportError as exc:
        raise SetupError(
            f"the policy server at {endpoint} (profile {profile.name!r}) answered, but not "
            f"as {transport.server_kind} policy server: {_first_line(exc)}"
        ) from None


def server_gone(profile: ServedProfile) -> str | None:
    """Before a case: None while the server answers within ``wait_s``, else why not.

    Only "nothing answers" counts as gone; a server that answers wrongly lets the case
    run and error with its own cause.
    """
    try:
        transport_named(profile.transport).answering(profile)
    except ServerUnavailable as exc:
        return (f"the policy server at {profile.endpoint} stopped answering (nothing for "
                f"{profile.wait_s:g}s: {_first_line(exc)})")
    except PolicyTransportError:
        return None
    return None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
