"""A policy behind an openpi-compatible websocket server, seen through the contract.

The connection is opened at the start of each episode (the first one after GET
/healthz), so a server the plugin launches has time to come up. A call that fails
closes the socket (the client never reuses it) and errors its case; the next episode
connects afresh, so one bad call costs one case, never the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_libero.policy.contract import Observation
from pytest_libero.policy.layout import RequestLayout
from pytest_libero.policy.probe import connect_within
from pytest_libero.policy.websocket import WebsocketPolicyClient


class WebsocketPolicy:
    """Implements the Policy protocol over :class:`WebsocketPolicyClient`.

    Each episode gets its own connection: pytest-libero's server resets its policy
    before a connection's first request, so a connection is the episode boundary
    whatever the request layout sends (see policy/server.py).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        layout: RequestLayout,
        connect_timeout: float,
        call_timeout: float,
        wait_s: float,
    ) -> None:
        self.endpoint = endpoint
        self.layout = layout
        self.wait_s = wait_s
        self.client = WebsocketPolicyClient(
            endpoint, connect_timeout=connect_timeout, call_timeout=call_timeout
        )
        self.metadata: Mapping[str, Any] = {}
        self.connections = 0

    def reset(self) -> None:
        """Start an episode on a new connection, waiting up to ``wait_s`` for the server."""
        self.client.close()
        metadata = connect_within(self.client, self.wait_s, health=self.connections == 0)
        self.metadata = {str(k): v for k, v in metadata.items()}
        self.connections += 1

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        return self.client.infer(self.layout.encode(observation))

    def close(self) -> None:
        self.client.close()
