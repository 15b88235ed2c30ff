"""openpi's msgpack wire format, written and read without pickle.

openpi sends numpy arrays as msgpack maps with BYTES keys::

    {b"__ndarray__": True, b"data": <raw C-order bytes>, b"dtype": "<f4", b"shape": [..]}

and numpy scalars as ``{b"__npgeneric__": True, b"data": <item>, b"dtype": "<f4"}``.
``pack`` writes exactly that. ``unpack`` also reads two foreign forms that policy
servers are seen to send: the same maps with str keys (vla-evaluation-harness) and
the PyPI ``msgpack-numpy`` form (``nd``/``type``/``kind``/``shape``/``data``). It reads
their fields itself and never imports msgpack-numpy: that package unpickles object
arrays, and a reply from a policy server is untrusted input.

The arrays themselves go through ``policy.arrays``, which GR00T's wire shares: only
plain dtypes travel (object, void and complex dtypes are refused both ways), multi-byte
arrays are sent little-endian and without a copy when already C-ordered, every decoded
array is a fresh, writeable, native-endian array, and an array's data must be exactly
``prod(shape) * itemsize`` bytes. Numpy scalars travel as bool, integer or float
``__npgeneric__`` maps, or as plain str and bytes. Decoding is bounded besides:
msgpack's own length limits are tied to the message size, and nesting is capped at
``MAX_DEPTH``.
"""

from __future__ import annotations

from typing import Any, Final

import msgpack
import numpy as np

from pytest_libero.policy.arrays import (
    SCALAR_KINDS,
    array_fields,
    decode_array,
    decode_msgpack_numpy,
    field_of,
    has_field,
    is_msgpack_numpy,
    parse_dtype,
)
from pytest_libero.policy.errors import CodecError

__all__ = ["MAX_DEPTH", "pack", "unpack"]

MAX_DEPTH: Final = 32
"""Deepest container nesting accepted either way; real observations are 2-3 deep."""

# --------------------------------------------------------------------------- pack


def pack(obj: Any, *, limit: int | None = None) -> bytes:
    """Encode ``obj`` as one openpi msgpack message.

    Accepts maps with str/bytes keys (msgpack readers refuse others by default),
    lists, tuples, str, bytes, int, float, bool, None, numpy arrays and numpy
    scalars. Raises ``CodecError`` naming the key path of the first value that
    cannot travel. ``limit``: the most bytes its arrays, strings and items may add up
    to, counted before any is copied (a server's reply: a policy answering with a
    broadcast array of 10**9 elements is refused, not spelled out in its memory).
    """
    tree = _to_wire(obj, "$", 0, _Budget(limit))
    try:
        data = msgpack.packb(tree, use_bin_type=True)
    except (OverflowError, ValueError, TypeError) as exc:  # e.g. an int past 64 bits
        raise CodecError(
            f"cannot encode the message: {exc}; "
            "keep integers within 64 bits and send only plain values"
        ) from exc
    assert isinstance(data, bytes)
    return data


def _path(parent: str, key: object) -> str:
    return f"{parent}[{key!r}]"


class _Budget:
    """What a message may still spend (None: no limit), charged before anything is copied."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.left = limit, limit

    def charge(self, size: int, path: str) -> None:
        if self.left is None or self.limit is None:
            return
        self.left -= size
        if self.left < 0:
            raise CodecError(f"{path}: the message holds more than {self.limit} bytes (this value "
                             f"alone {size}); send a smaller reply")


def _to_wire(obj: Any, path: str, depth: int, budget: _Budget) -> Any:
    """Rebuild ``obj`` from types msgpack writes natively, checking as it goes."""
    if isinstance(obj, np.generic):
        return _scalar_to_wire(obj, path)
    if isinstance(obj, int) and not -(2**63) <= obj < 2**64:
        raise CodecError(
            f"{path}: integer {obj} does not fit in 64 bits; send it as a float or str"
        )
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        budget.charge(len(obj) if isinstance(obj, (str, bytes)) else 8, path)
        return obj
    if isinstance(obj, np.ndarray):
        budget.charge(obj.nbytes, path)
        return _array_to_wire(obj, path)
    if isinstance(obj, (dict, list, tuple)) and depth >= MAX_DEPTH:
        raise CodecError(
            f"{path}: nested deeper than {MAX_DEPTH} levels; flatten the message"
        )
    if isinstance(obj, (dict, list, tuple)):
        budget.charge(len(obj), path)
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if isinstance(key, np.str_):
                key = str(key)
            if not isinstance(key, (str, bytes)):
                raise CodecError(
                    f"{path}: map key {key!r} is a {type(key).__name__}; "
                    "use str keys (openpi observation keys are str)"
                )
            out[key] = _to_wire(value, _path(path, key), depth + 1, budget)
        return out
    if isinstance(obj, (list, tuple)):
        return [_to_wire(v, _path(path, i), depth + 1, budget) for i, v in enumerate(obj)]
    if isinstance(obj, (bytearray, memoryview)):
        budget.charge(len(obj), path)
        return bytes(obj)
    raise CodecError(
        f"{path}: a {type(obj).__module__}.{type(obj).__qualname__} cannot travel; "
        "send numpy arrays, numbers, str, bytes, lists or maps"
    )


def _array_to_wire(arr: np.ndarray[Any, Any], path: str) -> dict[bytes, Any]:
    data, dtype, shape = array_fields(arr, path)
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


def _scalar_to_wire(value: np.generic[Any], path: str) -> Any:
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.bytes_):
        return bytes(value)
    if value.dtype.kind not in SCALAR_KINDS:
        raise CodecError(
            f"{path}: numpy scalar of dtype {value.dtype} is refused; "
            "send bool, integer or float scalars"
        )
    dtype = value.dtype
    if dtype.byteorder == ">":
        dtype = dtype.newbyteorder("<")
    return {b"__npgeneric__": True, b"data": value.item(), b"dtype": dtype.str}


# ------------------------------------------------------------------------- unpack


def unpack(data: bytes, *, wire: str = "openpi's websocket protocol") -> Any:
    """Decode one message in openpi's format (or a tolerated foreign form); ``wire`` names
    the protocol the server was expected to speak (vla-eval's shares these maps).

    Raises only ``CodecError``, for garbage as for refused content.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(
            f"expected a binary message, got {type(data).__name__}; "
            "a text frame is a server error, not a message"
        )
    size = len(data)
    try:
        obj = msgpack.unpackb(
            data,
            raw=False,
            use_list=True,
            strict_map_key=True,
            object_hook=_decode_map,
            ext_hook=_refuse_ext,
            timestamp=0,
            max_str_len=size,
            max_bin_len=size,
            max_array_len=size,
            max_map_len=size,
            max_ext_len=size,
        )
    except CodecError:
        raise
    except Exception as exc:  # msgpack raises many types for malformed input
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise CodecError(
            f"not a valid msgpack message ({detail}; it starts {bytes(data[:16])!r}); "
            f"is the server speaking {wire}?"
        ) from exc
    _check_tree(obj, wire)
    return obj


def _refuse_ext(code: int, payload: bytes) -> Any:
    raise CodecError(
        f"msgpack extension type {code} is not part of openpi's or vla-eval's format; "
        "the server must send arrays as __ndarray__ maps"
    )


def _check_tree(root: Any, wire: str) -> None:
    """Cap nesting depth and reject non-plain leaves, without recursing."""
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, dict):
            children: Any = obj.values()
        elif isinstance(obj, list):
            children = obj
        elif isinstance(obj, msgpack.Timestamp):
            raise CodecError(
                "msgpack timestamps are not part of openpi's or vla-eval's format; send numbers"
            )
        else:
            continue
        if depth >= MAX_DEPTH:
            raise CodecError(
                f"message nested deeper than {MAX_DEPTH} levels; "
                f"is the server speaking {wire}?"
            )
        stack.extend((child, depth + 1) for child in children)


def _decode_map(obj: dict[Any, Any]) -> Any:
    """msgpack object_hook: turn array and scalar maps into numpy values."""
    if has_field(obj, "__ndarray__"):
        return decode_array(
            field_of(obj, "data"), field_of(obj, "dtype"), field_of(obj, "shape"), "__ndarray__"
        )
    if has_field(obj, "__npgeneric__"):
        return _decode_npgeneric(field_of(obj, "data"), field_of(obj, "dtype"))
    if is_msgpack_numpy(obj):
        return decode_msgpack_numpy(obj)
    return obj


def _decode_npgeneric(data: Any, dtype_raw: Any) -> Any:
    dtype = parse_dtype(dtype_raw, SCALAR_KINDS, "__npgeneric__")
    if not isinstance(data, (bool, int, float)):
        raise CodecError(
            f"__npgeneric__: scalar data {type(data).__name__} is not a number"
        )
    try:
        with np.errstate(all="raise"):  # 1e300 as float32: an error, not a warning
            return dtype.newbyteorder("=").type(data)
    except (OverflowError, ValueError, TypeError, FloatingPointError) as exc:
        raise CodecError(
            f"__npgeneric__: {data!r} does not fit dtype {dtype.str}: {exc}"
        ) from exc
