"""The policy faults every transport raises, each with the ``cause`` a record counts.

One module so that a cause means the same thing whichever transport raised it: a
GR00T server that closes its socket and an openpi server that drops its websocket
both end a case as ``connection_lost``.
"""

from __future__ import annotations

from typing import ClassVar

from pytest_libero.protocol.errors import PolicyTransportError

__all__ = [
    "CallTimeout",
    "CodecError",
    "ConnectionLost",
    "MetadataTooLarge",
    "OldPickleServer",
    "ProtocolViolation",
    "ReplyTooLarge",
    "ServerError",
    "ServerUnavailable",
    "TokenRefused",
    "WireError",
]


class ServerUnavailable(PolicyTransportError):
    """Nothing answered at the policy server's address in the time allowed."""

    cause: ClassVar[str] = "server_unavailable"


class CallTimeout(PolicyTransportError):
    """The server did not answer a request within the per-call timeout."""

    cause: ClassVar[str] = "timeout"


class ConnectionLost(PolicyTransportError):
    """The connection closed (or was never opened) when a reply was needed."""

    cause: ClassVar[str] = "connection_lost"

    def __init__(self, message: str, *, code: int | None = None, reason: str = "") -> None:
        """``code``/``reason``: the websocket close code and reason (1006 when the
        connection dropped without a close frame; None when never connected)."""
        super().__init__(message)
        self.code = code
        self.reason = reason


class ServerError(PolicyTransportError):
    """The server reported that its policy failed; ``traceback`` holds its text."""

    cause: ClassVar[str] = "server_error"

    def __init__(self, message: str, *, traceback: str) -> None:
        super().__init__(message)
        self.traceback = traceback


class TokenRefused(ServerError):
    """The server refused the request's API token (or its missing one)."""

    cause: ClassVar[str] = "token_refused"


class ProtocolViolation(PolicyTransportError):
    """The server answered, but not as its protocol says it must."""

    cause: ClassVar[str] = "protocol_violation"


class ReplyTooLarge(ProtocolViolation):
    """A reply past the size a policy server may send (a chunk is a few kilobytes)."""

    cause: ClassVar[str] = "reply_too_large"


class MetadataTooLarge(ProtocolViolation):
    """A policy's metadata past the size a record keeps (``policy.limits``)."""

    cause: ClassVar[str] = "metadata_too_large"


class CodecError(PolicyTransportError):
    """A message could not be written or read in openpi's wire format."""

    cause: ClassVar[str] = "codec"


class WireError(PolicyTransportError):
    """A GR00T message that is not msgpack of the documented shape."""

    cause: ClassVar[str] = "protocol_violation"


class OldPickleServer(WireError):
    """The reply is pickle or torch.save bytes: a server of the older generation."""

    cause: ClassVar[str] = "pickle_reply"
