"""The websocket policy client against an independent openpi-style server on 127.0.0.1."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgpack
import numpy as np
import pytest
from openpi_reference_server import OpenpiReferenceServer, server_pack

from pytest_libero.policy.errors import (
    CallTimeout,
    CodecError,
    ConnectionLost,
    ProtocolViolation,
    ServerError,
    ServerUnavailable,
)
from pytest_libero.policy.openpi.client import WebsocketPolicyClient, check_health, health_url
from pytest_libero.protocol.errors import PolicyTransportError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def client_for(uri: str, **kw: Any) -> WebsocketPolicyClient:
    kw.setdefault("connect_timeout", 3.0)
    kw.setdefault("call_timeout", 3.0)
    return WebsocketPolicyClient(uri, **kw)


def echo(obs: dict[str, Any]) -> dict[str, Any]:
    """Replies with the request id, after sleeping as long as the request asks."""
    time.sleep(float(obs.get("sleep", 0.0)))
    return {"id": obs["id"], "actions": np.full((10, 7), obs["id"], dtype=np.float32)}


@contextmanager
def running(policy: Any = echo, **kw: Any) -> Iterator[OpenpiReferenceServer]:
    server = OpenpiReferenceServer(policy, **kw)
    with server:
        yield server


@contextmanager
def connected(server: OpenpiReferenceServer, **kw: Any) -> Iterator[WebsocketPolicyClient]:
    with client_for(server.uri, **kw) as client:
        client.connect()
        yield client


# ------------------------------------------------------------ exceptions


def test_exception_classes() -> None:
    causes: dict[Any, str] = {
        ServerUnavailable: "server_unavailable",
        CallTimeout: "timeout",
        ConnectionLost: "connection_lost",
        ServerError: "server_error",
        ProtocolViolation: "protocol_violation",
        CodecError: "codec",
    }
    for cls, cause in causes.items():
        assert issubclass(cls, PolicyTransportError)
        assert cls.cause == cause
        assert cls.kind == "policy_transport"


# --------------------------------------------------------------- happy path


def test_metadata_is_read_on_connect() -> None:
    metadata = {"reset_pose": np.arange(7, dtype=np.float32), "name": "ref"}
    with running(metadata=metadata) as server, client_for(server.uri) as client:
        got = client.connect()
        assert got is client.metadata
        assert got["name"] == "ref"
        np.testing.assert_array_equal(got["reset_pose"], metadata["reset_pose"])


def test_empty_metadata_like_libero_configs() -> None:
    with running() as server, connected(server) as client:
        assert client.metadata == {}


def test_infer_round_trip_with_two_images() -> None:
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
    wrist = rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)

    def policy(obs: dict[str, Any]) -> dict[str, Any]:
        assert obs["observation/image"].shape == (256, 256, 3)
        assert obs["observation/image"].dtype == np.uint8
        return {
            "actions": np.ones((10, 7), dtype=np.float32),
            "checksum": int(obs["observation/image"].sum() + obs["observation/wrist_image"].sum()),
            "policy_timing": {"infer_ms": 1.0},
        }

    with running(policy) as server, connected(server) as client:
        request = {
            "observation/image": image[::-1, ::-1],  # flipped views, as LIBERO clients send
            "observation/wrist_image": wrist,
            "prompt": "pick up the black bowl",
        }
        reply = client.infer(request)
        assert reply["checksum"] == int(image.sum() + wrist.sum())
        np.testing.assert_array_equal(reply["actions"], np.ones((10, 7), np.float32))
        assert reply["actions"].flags.writeable
        np.testing.assert_array_equal(server.requests[0]["observation/image"], image[::-1, ::-1])
        np.testing.assert_array_equal(server.requests[0]["observation/wrist_image"], wrist)
        assert server.requests[0]["prompt"] == "pick up the black bowl"
        assert client.last_call_s is not None and 0 < client.last_call_s < 3
        # Strict request/reply keeps working.
        for i in range(5):
            assert client.infer(dict(request, prompt=str(i)))["checksum"] == reply["checksum"]


def test_connect_again_rereads_metadata() -> None:
    with running(metadata={"n": 1}) as server, connected(server) as client:
        server.metadata = {"n": 2}
        assert client.reconnect() == {"n": 2}
        assert server.connections == 2


# --------------------------------------------------------- server not there


def test_waits_for_a_server_that_comes_up() -> None:
    port = free_port()
    server = OpenpiReferenceServer(echo, port=port)
    timer = threading.Timer(0.8, server.start)
    timer.start()
    try:
        with client_for(f"ws://127.0.0.1:{port}") as client:
            start = time.monotonic()
            client.connect(wait_s=5)
            assert 0.5 < time.monotonic() - start < 5
            assert client.infer({"id": 1})["id"] == 1
    finally:
        timer.join()
        server.stop()


def test_server_never_up_fails_quickly_and_clearly() -> None:
    uri = f"ws://127.0.0.1:{free_port()}"
    with client_for(uri) as client:
        start = time.monotonic()
        with pytest.raises(ServerUnavailable) as info:
            client.connect(wait_s=0.5)
        assert time.monotonic() - start < 2
        message = str(info.value)
        assert uri in message
        assert "after 0." in message and "start the server" in message
        assert not client.connected


def test_no_wait_means_one_attempt() -> None:
    with client_for(f"ws://127.0.0.1:{free_port()}") as client:
        with pytest.raises(ServerUnavailable, match="1 attempt;"):
            client.connect()


def test_bad_uri() -> None:
    with pytest.raises(ServerUnavailable, match="ws://HOST:PORT"):
        client_for("http://127.0.0.1:1").connect()


def test_infer_before_connect_raises_connection_lost() -> None:
    with pytest.raises(ConnectionLost, match="connect"):
        client_for("ws://127.0.0.1:1").infer({"id": 1})


# ----------------------------------------------------------------- timeouts


def test_timeout_closes_the_socket_and_a_late_reply_never_answers() -> None:
    with running() as server, connected(server, call_timeout=0.3) as client:
        start = time.monotonic()
        with pytest.raises(CallTimeout, match="call_timeout=0.3"):
            client.infer({"id": 1, "sleep": 1.0})
        assert time.monotonic() - start < 0.9
        assert not client.connected
        # The timed-out socket is never reused.
        with pytest.raises(ConnectionLost, match="late reply"):
            client.infer({"id": 2})
        # The upstream server is single-threaded: the handshake waits for the slow
        # infer to finish, whose late reply goes to the dead socket.
        client.reconnect(wait_s=3)
        reply = client.infer({"id": 3})
        assert reply["id"] == 3
        np.testing.assert_array_equal(reply["actions"], np.full((10, 7), 3, np.float32))
        assert client.infer({"id": 4})["id"] == 4
        assert [r["id"] for r in server.requests] == [1, 3, 4]


def test_delay_knob_times_out() -> None:
    with running(delay_s=0.6) as server, connected(server, call_timeout=0.2) as client:
        with pytest.raises(CallTimeout):
            client.infer({"id": 1})


def test_send_blocked_by_a_busy_server_times_out() -> None:
    """A server stuck in a slow infer stops reading; a large send must not hang."""
    with running() as server, connected(server, call_timeout=0.5) as busy_maker:
        with connected(server, call_timeout=0.5) as client:
            # One client puts the server's event loop to sleep for 2.5 s...
            with pytest.raises(CallTimeout):
                busy_maker.infer({"id": 1, "sleep": 2.5})
            # ...while another sends far more than the socket buffers hold.
            big = np.zeros(32 * 1024 * 1024, dtype=np.uint8)
            start = time.monotonic()
            with pytest.raises(CallTimeout):
                client.infer({"id": 2, "blob": big})
            assert time.monotonic() - start < 1.8  # not until the server wakes
            assert not client.connected


# ---------------------------------------------------------- server failures


def test_server_dies_mid_session() -> None:
    with running(close_after_n=1) as server, connected(server) as client:
        assert client.infer({"id": 1})["id"] == 1
        with pytest.raises(ConnectionLost) as info:
            client.infer({"id": 2})
        assert info.value.code == 1006
        assert "1006" in str(info.value)
        assert not client.connected


def test_server_shut_down_between_calls() -> None:
    server = OpenpiReferenceServer(echo).start()
    with connected(server) as client:
        assert client.infer({"id": 1})["id"] == 1
        server.stop()
        time.sleep(0.2)
        with pytest.raises(ConnectionLost) as info:
            client.infer({"id": 2})
        assert info.value.code == 1001


def test_text_frame_is_a_server_error_with_traceback() -> None:
    def policy(obs: dict[str, Any]) -> dict[str, Any]:
        raise ValueError(f"policy exploded on request {obs['id']}")

    with running(policy) as server, connected(server) as client:
        with pytest.raises(ServerError) as info:
            client.infer({"id": 42})
        assert "Traceback" in info.value.traceback
        assert "ValueError: policy exploded on request 42" in info.value.traceback
        assert "policy exploded on request 42" in str(info.value)
        assert not client.connected
        # The server keeps accepting connections; a new one works.
        server.policy = echo
        client.reconnect()
        assert client.infer({"id": 5})["id"] == 5


def test_text_metadata_frame_is_a_server_error() -> None:
    with running(raw_metadata="Traceback: no model loaded") as server, client_for(server.uri) as client:
        with pytest.raises(ServerError) as info:
            client.connect()
        assert info.value.traceback == "Traceback: no model loaded"
        assert not client.connected


def test_non_map_metadata_is_a_protocol_violation() -> None:
    with running(raw_metadata=msgpack.packb([1, 2])) as server:
        with pytest.raises(ProtocolViolation, match="not a map"):
            client_for(server.uri).connect()


def test_non_map_reply_is_a_protocol_violation() -> None:
    with running(raw_reply=lambda i, obs: server_pack([1, 2, 3])) as server, connected(server) as client:
        with pytest.raises(ProtocolViolation, match="not a map"):
            client.infer({"id": 1})
        assert not client.connected


def test_garbage_reply_is_a_codec_error() -> None:
    with running(raw_reply=lambda i, obs: b"\xc1\xc1") as server, connected(server) as client:
        with pytest.raises(CodecError):
            client.infer({"id": 1})
        assert not client.connected


def test_unsolicited_second_reply_is_caught_before_the_next_request() -> None:
    def twice(i: int, obs: Any) -> list[bytes | str]:
        return [server_pack({"id": obs["id"]}), server_pack({"id": "stale"})]

    with running(raw_reply=twice) as server, connected(server) as client:
        assert client.infer({"id": 1})["id"] == 1
        time.sleep(0.2)
        with pytest.raises(ProtocolViolation, match="nobody asked for"):
            client.infer({"id": 2})
        assert not client.connected


def test_oversized_reply_is_a_protocol_violation() -> None:
    def big(obs: dict[str, Any]) -> dict[str, Any]:
        return {"actions": np.zeros(100_000, dtype=np.float32)}

    with running(big) as server, connected(server, max_message_bytes=64 * 1024) as client:
        with pytest.raises(ProtocolViolation, match="max_message_bytes=65536"):
            client.infer({"id": 1})
        assert not client.connected


def test_unencodable_request_leaves_the_connection_usable() -> None:
    with running() as server, connected(server) as client:
        with pytest.raises(CodecError, match=r"\$\['bad'\]"):
            client.infer({"id": 1, "bad": np.array([1j])})
        assert client.connected
        assert client.infer({"id": 2})["id"] == 2


def test_close_is_idempotent_and_context_manager_closes() -> None:
    with running() as server:
        with connected(server) as client:
            assert client.connected
        assert not client.connected
        client.close()


# ------------------------------------------------------------------- health


def test_health_url() -> None:
    assert health_url("ws://10.0.0.1:8000") == "http://10.0.0.1:8000/healthz"
    assert health_url("wss://h:9/x?y") == "https://h:9/healthz"
    with pytest.raises(ServerUnavailable):
        health_url("tcp://h:1")


def test_healthz_ok() -> None:
    with running() as server:
        check_health(server.uri, timeout=2)


def test_healthz_nothing_listening() -> None:
    with pytest.raises(ServerUnavailable, match="healthz"):
        check_health(f"ws://127.0.0.1:{free_port()}", timeout=2)


def test_healthz_not_200() -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(ServerUnavailable, match="HTTP 503"):
            check_health(f"ws://127.0.0.1:{httpd.server_port}", timeout=2)
    finally:
        httpd.shutdown()
        httpd.server_close()
