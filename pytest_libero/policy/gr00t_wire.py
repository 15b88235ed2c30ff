"""GR00T's wire format: msgpack maps, numpy arrays as ``np.save`` bytes, never pickle.

A GR00T N1.6 server (Isaac-GR00T's ``PolicyServer``) sends every message as msgpack; an
array is the map ``{"__ndarray_class__": true, "as_npy": <the .npy file's bytes>}`` and
a modality config ``{"__ModalityConfig_class__": true, "as_json": {...}}``. Arrays are
read with ``allow_pickle=False`` so an object array cannot run code. Servers older
than about September 2025 answered with ``torch.save`` (a zip archive) or pickle bytes:
those are recognised by their first bytes and refused with that cause, never loaded.
"""

from __future__ import annotations

import io
from typing import Any, ClassVar

import msgpack
import numpy as np

from pytest_libero.protocol.errors import PolicyTransportError

__all__ = ["OldPickleServer", "WireError", "looks_pickled", "pack", "unpack"]

NDARRAY = "__ndarray_class__"
MODALITY_CONFIG = "__ModalityConfig_class__"
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"


class WireError(PolicyTransportError):
    """A GR00T message that is not msgpack of the documented shape."""

    cause: ClassVar[str] = "protocol_violation"


class OldPickleServer(WireError):
    """The reply is pickle or torch.save bytes: a server of the older generation."""

    cause: ClassVar[str] = "pickle_reply"


def looks_pickled(data: bytes) -> str | None:
    """"torch.save" or "pickle" when ``data`` starts like one of them, else None.

    A pickle of protocol 2 or later opens with 0x80 and its protocol number; in msgpack
    0x80 is an empty map, which can never be followed by more bytes, so the two never
    overlap for a message longer than one byte.
    """
    if data.startswith(_ZIP_MAGIC):
        return "torch.save"
    if len(data) > 1 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return "pickle"
    return None


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        buffer = io.BytesIO()
        np.save(buffer, obj, allow_pickle=False)  # object arrays raise ValueError here
        return {NDARRAY: True, "as_npy": buffer.getvalue()}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot send a {type(obj).__name__} to a GR00T server")


def pack(message: Any) -> bytes:
    """The request as GR00T's server reads it."""
    try:
        data = msgpack.packb(message, default=_encode, use_bin_type=True)
    except (TypeError, ValueError) as exc:
        raise WireError(f"the request cannot be encoded for GR00T's wire: {exc}") from exc
    assert isinstance(data, bytes)
    return data


def _decode(obj: dict[Any, Any]) -> Any:
    if obj.get(NDARRAY) is True:
        raw = obj.get("as_npy")
        if not isinstance(raw, bytes) or not raw.startswith(_NPY_MAGIC):
            raise WireError(f"an {NDARRAY} map whose as_npy is not .npy bytes")
        try:
            return np.load(io.BytesIO(raw), allow_pickle=False)
        except ValueError as exc:  # object arrays need pickle: refused
            raise WireError(f"an array that cannot be read without pickle: {exc}") from exc
    if obj.get(MODALITY_CONFIG) is True:
        return obj.get("as_json")
    return obj


def unpack(data: bytes, what: str) -> Any:
    """Decode one reply; ``what`` names the endpoint and server for the error."""
    try:
        return msgpack.unpackb(data, raw=False, object_hook=_decode, ext_hook=_refuse_ext,
                               strict_map_key=False)
    except WireError as exc:
        raise WireError(f"{what}: {exc}") from None
    except Exception as exc:  # msgpack raises many types for malformed input
        kind = looks_pickled(data)
        if kind is not None:
            raise OldPickleServer(
                f"{what} answered with {kind} bytes, not msgpack: a GR00T server of the "
                "older pickle generation (before about September 2025). They are never "
                "unpickled; serve the checkpoint with a current Isaac-GR00T (N1.6) server"
            ) from None
        raise WireError(
            f"{what} answered with bytes that are not msgpack ({type(exc).__name__}; they "
            f"start {data[:16]!r}); is it a GR00T policy server?"
        ) from None


def _refuse_ext(code: int, payload: bytes) -> Any:
    raise WireError(f"msgpack extension type {code} is not part of GR00T's format")
