"""vla-eval's wire: one binary websocket frame per message, each a msgpack map
``{type, payload, seq, timestamp}``.

Types: ``hello`` (the client speaks first; the server answers with its own, which may
carry ``observation_params``), ``episode_start``, ``observation``, ``action`` (the
server echoes the observation's ``seq``), ``episode_end`` and ``error`` (``payload.error``
says why). Only the client numbers its messages. Arrays travel as str-keyed
``__ndarray__`` maps (raw C-order bytes, dtype string, shape); HWC uint8 images as an
``__image__`` map, PNG by default (lossless), or raw bytes, or JPEG (lossy: the model
then sees other pixels than the protocol delivered, so the profile's identity says so).

Replies are read by openpi's bounded codec (``openpi.codec.unpack``: the same array maps,
no pickle, dtype allow-list, nesting and lengths capped), then checked as a message here.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from typing import Any, Final

import msgpack
import numpy as np

from pytest_libero.policy.arrays import array_fields
from pytest_libero.policy.errors import CodecError, ProtocolViolation
from pytest_libero.policy.openpi.codec import unpack

__all__ = ["IMAGE_FORMATS", "MESSAGE_TYPES", "PROTOCOL_VERSION", "Message", "pack_message",
           "unpack_message"]

PROTOCOL_VERSION: Final = 1
MESSAGE_TYPES: Final = ("hello", "observation", "action", "episode_start", "episode_end", "error")
IMAGE_FORMATS: Final = ("png", "raw", "jpeg")
"""How images travel; vla-eval's own default is PNG."""
WIRE_NAME: Final = "vla-eval's model-server protocol"


@dataclass(frozen=True)
class Message:
    """One decoded message."""

    type: str
    payload: dict[str, Any]
    seq: int


def _image_map(image: np.ndarray, image_format: str) -> dict[str, Any]:
    """An HWC uint8 image as vla-eval's image codec writes it."""
    if image_format == "raw":
        data, dtype, shape = array_fields(image, "an image")
        return {"__image__": True, "format": "raw", "data": data, "dtype": dtype, "shape": shape}
    from PIL import Image  # a dependency of the simulator's stack; only images need it

    buffer = io.BytesIO()
    picture = Image.fromarray(np.ascontiguousarray(image))
    if image_format == "jpeg":
        picture.save(buffer, format="JPEG", quality=95)
    else:
        picture.save(buffer, format="PNG")
    return {"__image__": True, "format": image_format, "data": buffer.getvalue(),
            "shape": list(image.shape)}


def _is_image(array: np.ndarray) -> bool:
    return array.ndim == 3 and array.dtype == np.uint8 and array.shape[2] in (1, 3, 4)


def _to_wire(value: Any, image_format: str, path: str) -> Any:
    if isinstance(value, np.ndarray):
        if _is_image(value):
            return _image_map(value, image_format)
        data, dtype, shape = array_fields(value, path)
        return {"__ndarray__": True, "data": data, "dtype": dtype, "shape": shape}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _to_wire(v, image_format, f"{path}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_wire(v, image_format, f"{path}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    raise CodecError(f"{path}: a {type(value).__name__} cannot travel on {WIRE_NAME}")


def pack_message(kind: str, payload: dict[str, Any], seq: int, *, image_format: str = "png") -> bytes:
    """One message of ``kind`` as the bytes of its frame."""
    assert kind in MESSAGE_TYPES, kind
    tree = {"type": kind, "payload": _to_wire(payload, image_format, "payload"), "seq": seq,
            "timestamp": time.time()}
    data = msgpack.packb(tree, use_bin_type=True)
    assert isinstance(data, bytes)
    return data


def unpack_message(data: bytes, where: str) -> Message:
    """A frame from the server at ``where`` as a :class:`Message`; CodecError for bytes
    that are not a message, ProtocolViolation for a message that breaks the protocol."""
    raw = unpack(data, wire=WIRE_NAME)
    if not isinstance(raw, dict):
        raise ProtocolViolation(f"{where} sent a {type(raw).__name__}, not a message map; is it "
                                f"a vla-eval model server?")
    missing = [key for key in ("type", "payload", "seq", "timestamp") if key not in raw]
    if missing:
        raise ProtocolViolation(f"{where} sent a message without {missing} (it has "
                                f"{sorted(map(str, raw))}); vla-eval messages carry type, "
                                "payload, seq and timestamp")
    kind, payload, seq = raw["type"], raw["payload"], raw["seq"]
    if kind not in MESSAGE_TYPES:
        raise ProtocolViolation(f"{where} sent a message of type {kind!r}, not one of "
                                f"{', '.join(MESSAGE_TYPES)}")
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ProtocolViolation(f"{where} sent a {kind} whose seq is {seq!r}, not an integer")
    if not isinstance(payload, dict):
        raise ProtocolViolation(f"{where} sent a {kind} whose payload is a "
                                f"{type(payload).__name__}, not a map")
    return Message(type=str(kind), payload={str(k): v for k, v in payload.items()}, seq=seq)
