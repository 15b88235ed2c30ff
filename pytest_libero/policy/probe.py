"""Is a policy server there? Health, then a connection that reads its metadata frame.

One deadline covers both steps, so "wait up to wait_s" means wait_s in all. The
controller probes once before any case (a missing server is a usage error, not a run of
errored cases); a worker probes again before each case, so a server that died is told
apart from one case's bad luck.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from pytest_libero.policy.errors import ServerError, ServerUnavailable, TokenRefused
from pytest_libero.policy.websocket import RETRY_SLEEP_S, WebsocketPolicyClient, check_health
from pytest_libero.protocol.errors import InvalidAction, PolicyTransportError, SetupError


class ServedProfile(Protocol):
    """What a probe needs to know of a profile (config.profiles.Profile has it all)."""

    @property
    def name(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def endpoint(self) -> str | None: ...
    @property
    def wait_s(self) -> float: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def start_hint(self) -> str: ...
    @property
    def transport(self) -> str: ...
    @property
    def api_token(self) -> str | None: ...
    @property
    def api_token_env(self) -> str | None: ...
    def build_policy(self) -> Any: ...


__all__ = [
    "ServedProfile",
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


def _probe(profile: ServedProfile,
           on_wait: Callable[[ServerUnavailable], None] | None = None) -> None:
    """The profile's server answers its health probe within ``wait_s``: openpi's
    metadata frame for websocket profiles, GR00T's ``ping`` for gr00t ones."""
    endpoint = profile.endpoint or ""
    if profile.transport == "gr00t":
        from pytest_libero.policy.gr00t import Gr00tClient  # pyzmq only where it is needed

        with Gr00tClient(endpoint, connect_timeout=profile.connect_timeout,
                         call_timeout=profile.connect_timeout,
                         api_token=profile.api_token) as client:
            client.wait_ready(profile.wait_s, on_wait=on_wait)
        return
    probe_server(endpoint, wait_s=profile.wait_s, connect_timeout=profile.connect_timeout,
                 on_wait=on_wait)


def preflight(profile: ServedProfile,
              on_wait: Callable[[ServerUnavailable], None] | None = None) -> dict[str, Any]:
    """Before any case: the profile's server answers, or the run is a usage error.

    Returns what run.json records of the server (``policy_server``): for GR00T the wire
    generation and the reply's horizon, read from one probe get_action. Raises
    SetupError naming the endpoint, the profile, what was seen and the fix.
    """
    endpoint = profile.endpoint or ""
    try:
        if profile.transport == "gr00t":
            return _gr00t_preflight(profile, on_wait)
        _probe(profile, on_wait=on_wait)
        return {"transport": profile.transport, "endpoint": endpoint}
    except ServerUnavailable as exc:
        raise SetupError(
            f"no policy server answered at {endpoint} within {profile.wait_s:g}s (profile "
            f"{profile.name!r}, {profile.source}); no case was run. Start it first: "
            f"{profile.start_hint}; or point --libero-endpoint at a running server "
            f"(--libero-server-wait sets how long to wait). Last error: {_first_line(exc)}"
        ) from None
    except PolicyTransportError as exc:
        raise SetupError(
            f"the policy server at {endpoint} (profile {profile.name!r}) answered, but not "
            f"as {'a GR00T' if profile.transport == 'gr00t' else 'an openpi'} policy server: "
            f"{_first_line(exc)}"
        ) from None


def _gr00t_preflight(profile: ServedProfile,
                     on_wait: Callable[[ServerUnavailable], None] | None) -> dict[str, Any]:
    """GR00T's preflight (``gr00t.preflight_facts``), its refusals explained."""
    from pytest_libero.policy.gr00t import WireUnknown, preflight_facts

    endpoint = profile.endpoint or ""
    where = f"the GR00T server at {endpoint} (profile {profile.name!r}, {profile.source})"
    policy = profile.build_policy()
    try:
        return preflight_facts(policy, on_wait)
    except TokenRefused:
        raise SetupError(f"{where} refused the API token ({_token_sent(profile)}); no case "
                         "was run. Set policy.api_token_env in the profile to the environment "
                         "variable that holds the token the server was started with, and "
                         "export that variable") from None
    except WireUnknown as exc:
        raise SetupError(f"{_first_line(exc)}; no case was run") from None
    except ServerError as exc:
        raise SetupError(f"{where} answered ping but refused a preflight request (its probe "
                         "get_action is the request every case sends: black images, the "
                         "profile's keys and state constants); no case was run: "
                         f"{_first_line(exc)}") from None
    except InvalidAction as exc:
        raise SetupError(f"{where} answered a probe get_action with actions the profile's "
                         f"[reply] cannot map; no case was run: {_first_line(exc)}") from None
    finally:
        policy.close()


def _token_sent(profile: ServedProfile) -> str:
    """What was sent as the API token, in words, never the token itself."""
    env = profile.api_token_env
    if env is None:
        return "no token was sent: the profile sets no policy.api_token_env"
    if profile.api_token is None:
        return f"no token was sent: policy.api_token_env names {env}, which is not set here"
    return f"the token in ${env} was sent"


def server_gone(profile: ServedProfile) -> str | None:
    """Before a case: None while the server answers within ``wait_s``, else why not.

    Only "nothing answers" counts as gone; a server that answers wrongly lets the case
    run and error with its own cause.
    """
    try:
        _probe(profile)
    except ServerUnavailable as exc:
        return (f"the policy server at {profile.endpoint} stopped answering (nothing for "
                f"{profile.wait_s:g}s: {_first_line(exc)})")
    except PolicyTransportError:
        return None
    return None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
