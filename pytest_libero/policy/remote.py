"""A policy behind an openpi-compatible websocket server, seen through the contract.

The connection is opened lazily at the first episode (after GET /healthz), so a
server the plugin launches has time to come up. A call that fails closes the socket
(the client never reuses it); the next episode reconnects, so one bad call costs one
case, never the run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pytest_libero.policy.contract import Observation
from pytest_libero.policy.layout import RequestLayout
from pytest_libero.policy.websocket import (
    RETRY_SLEEP_S,
    ServerUnavailable,
    WebsocketPolicyClient,
    check_health,
)


class WebsocketPolicy:
    """Implements the Policy protocol over :class:`WebsocketPolicyClient`."""

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
        """Start an episode: (re)connect if the last one left no usable socket."""
        if self.client.connected:
            return
        if self.connections == 0:
            wait_for_health(self.endpoint, self.wait_s, self.client.connect_timeout)
        metadata = self.client.connect(wait_s=self.wait_s)
        self.metadata = {str(k): v for k, v in metadata.items()}
        self.connections += 1

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        if not self.client.connected:
            self.reset()
        return self.client.infer(self.layout.encode(observation))

    def close(self) -> None:
        self.client.close()


def wait_for_health(endpoint: str, wait_s: float, timeout: float) -> None:
    """Poll GET /healthz until it answers 200 or ``wait_s`` has passed."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            check_health(endpoint, timeout=timeout)
            return
        except ServerUnavailable:
            if time.monotonic() + RETRY_SLEEP_S > deadline:
                raise
            time.sleep(RETRY_SLEEP_S)
