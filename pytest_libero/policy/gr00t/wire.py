"""GR00T's wire: msgpack maps whose numpy arrays travel in one of two forms, never pickle.

Isaac-GR00T's ``PolicyServer`` has used two array forms, and a server reads only its
own (a request in the other form reaches the model as a plain dict):

* ``npy`` (N1.6 until late 2026): ``{"__ndarray_class__": true, "as_npy": <np.save
  bytes>}``; a modality config is ``{"__ModalityConfig_class__": true, "as_json": ..}``.
* ``msgpack-numpy`` (since late 2026): the PyPI msgpack-numpy map with bytes keys,
  ``{b"nd": true, b"type": "<f4", b"kind": b"", b"shape": [..], b"data": <raw bytes>}``;
  a modality config is ``{"__ModalityConfig__": true, "as_json": ..}``.

Replies are read in either form, whatever the request used; each decoded message says
which forms it carried (:class:`Message`), which is how a server's generation is told
(``gr00t.client.decide_wire``). Neither form is ever unpickled: an npy header or a
msgpack-numpy kind that needs pickle (object arrays) is refused, and an npy header is
checked against the bytes that follow before any array is built. Servers older than
about September 2025 answered with ``torch.save`` or pickle bytes: recognised by their
first bytes and refused with that cause, never loaded.
"""

from __future__ import annotations

import ast
import io
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgpack
import numpy as np

from pytest_libero.policy.arrays import (
    array_fields,
    decode_array,
    decode_msgpack_numpy,
    is_msgpack_numpy,
)
from pytest_libero.policy.errors import CodecError, OldPickleServer, WireError

__all__ = ["WIRE_SETTINGS", "Message", "Wire", "looks_pickled", "pack", "unpack"]

NPY_ARRAY = "__ndarray_class__"
NPY_MODALITY_CONFIG = "__ModalityConfig_class__"
MODALITY_CONFIG = "__ModalityConfig__"
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
_NPY_HEADER_MAX = 65535
"""Longest npy header read (np.save writes under 200 bytes for any real array)."""


class Wire(StrEnum):
    """The array form a GR00T server reads: its wire generation."""

    NPY = "npy"
    MSGPACK_NUMPY = "msgpack-numpy"


WIRE_SETTINGS = ("auto", *(w.value for w in Wire))
"""What a profile's ``policy.wire`` may say: a generation, or "auto" (told at preflight)."""


@dataclass(frozen=True)
class Message:
    """A decoded reply and the wire generations whose markers it carried."""

    value: Any
    forms: frozenset[Wire]


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


# ---------------------------------------------------------------------------- pack


def _encoder(wire: Wire) -> Any:
    def encode(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            return _npy_map(obj) if wire is Wire.NPY else _msgpack_numpy_map(obj)
        if isinstance(obj, np.generic):
            return obj.item()
        raise TypeError(f"cannot send a {type(obj).__name__} to a GR00T server")
    return encode


def _npy_map(array: np.ndarray) -> dict[str, Any]:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)  # object arrays raise ValueError here
    return {NPY_ARRAY: True, "as_npy": buffer.getvalue()}


def _msgpack_numpy_map(array: np.ndarray) -> dict[bytes, Any]:
    data, dtype, shape = array_fields(array, "the request")
    return {b"nd": True, b"type": dtype, b"kind": b"", b"shape": shape, b"data": data}


def pack(message: Any, wire: Wire) -> bytes:
    """The request in the array form of ``wire``."""
    try:
        data = msgpack.packb(message, default=_encoder(wire), use_bin_type=True)
    except (TypeError, ValueError, CodecError) as exc:
        raise WireError(f"the request cannot be encoded for GR00T's wire: {exc}") from exc
    assert isinstance(data, bytes)
    return data


# -------------------------------------------------------------------------- unpack


def _read_npy(raw: Any) -> np.ndarray:
    """An ``as_npy`` payload as an array, its header checked against its bytes first."""
    if not isinstance(raw, bytes) or not raw.startswith(_NPY_MAGIC) or len(raw) < 10:
        raise WireError(f"an {NPY_ARRAY} map whose as_npy is not .npy bytes")
    major = raw[6]
    size_bytes = 2 if major == 1 else 4
    if major not in (1, 2, 3):
        raise WireError(f"an .npy payload of format version {major}, which numpy never wrote")
    start = 8 + size_bytes
    header_len = int.from_bytes(raw[8:start], "little")
    if header_len > _NPY_HEADER_MAX or start + header_len > len(raw):
        raise WireError(f"an .npy header of {header_len} bytes in a payload of {len(raw)}")
    try:
        header = ast.literal_eval(raw[start:start + header_len].decode("latin1"))
        descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    except (ValueError, SyntaxError, KeyError, TypeError, MemoryError,
            RecursionError) as exc:
        raise WireError(f"an .npy header that cannot be read: {exc}") from None
    if not isinstance(descr, str) or not isinstance(shape, tuple) or not isinstance(fortran, bool):
        raise WireError(f"an .npy array of dtype {descr!r} that cannot be read without "
                        "pickle (object and structured arrays are never unpickled)")
    data = raw[start + header_len:]
    dims = list(shape[::-1] if fortran else shape)
    array = decode_array(data, descr, dims, "an .npy array")
    return np.ascontiguousarray(array.T) if fortran else array


def unpack(data: bytes, what: str) -> Message:
    """Decode one reply in either array form; ``what`` names the endpoint and server
    in every error."""
    forms: set[Wire] = set()

    def decode(obj: dict[Any, Any]) -> Any:
        if obj.get(NPY_ARRAY) is True:
            forms.add(Wire.NPY)
            return _read_npy(obj.get("as_npy"))
        if obj.get(NPY_MODALITY_CONFIG) is True:
            forms.add(Wire.NPY)
            return obj.get("as_json")
        if obj.get(MODALITY_CONFIG) is True:
            forms.add(Wire.MSGPACK_NUMPY)
            return obj.get("as_json")
        if is_msgpack_numpy(obj):
            forms.add(Wire.MSGPACK_NUMPY)
            return decode_msgpack_numpy(obj)
        return obj

    try:
        value = msgpack.unpackb(data, raw=False, object_hook=decode, ext_hook=_refuse_ext,
                                strict_map_key=False)
    except (WireError, CodecError) as exc:
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
    return Message(value, frozenset(forms))


def _refuse_ext(code: int, payload: bytes) -> Any:
    raise WireError(f"msgpack extension type {code} is not part of GR00T's format")
