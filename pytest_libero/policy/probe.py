"""Is the profile's policy server there? Its transport is asked, before any case and before each.

The controller probes once before any case (a missing server is a usage error, not a run
of errored cases); a worker probes again before each case, so a server that died is told
apart from one case's bad luck. How a server is probed is its transport's
(``Transport.preflight``, ``Transport.answering``); this module turns what the transport
raises into the usage error that stops the run, or the reason the remaining cases are
left unattempted.
"""

from __future__ import annotations

import time
from typing import Any

from pytest_libero.policy.errors import MetadataTooLarge, ServerUnavailable
from pytest_libero.policy.transport import OnWait, ServedProfile, transport_named
from pytest_libero.protocol.errors import PolicyTransportError, SetupError

__all__ = ["preflight", "server_gone"]


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
    except MetadataTooLarge as exc:
        raise SetupError(f"{_first_line(exc)} (profile {profile.name!r}); no case was run") from None
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
