"""openpi's msgpack wire format, written and read without pickle.

openpi sends numpy arrays as msgpack maps with BYTES keys::

    {b"__ndarray__": True, b"data": <raw C-order bytes>, b"dtype": "<f4", b"shape": [..]}

and numpy scalars as ``{b"__npgeneric__": True, b"data": <item>, b"dtype": "<f4"}``.
``pack`` writes exactly that. ``unpack`` also reads two foreign forms that policy
servers are seen to send: the same maps with str keys (vla-evaluation-harness) and
the PyPI ``msgpack-numpy`` form (``nd``/``type``/``kind``/``shape``/``data``). It reads
their fields itself and never imports msgpack-numpy: that package unpickles object
arrays, and a reply from a policy server is untrusted input.

Choices, and why:

* Only plain dtypes travel (bool, signed/unsigned ints, floats, fixed-width bytes and
  unicode). Object, void (structured) and complex dtypes are refused in both
  directions: object arrays can only be carried by pickle, and no openpi policy sends
  the others.
* Multi-byte arrays are sent little-endian. Servers hand arrays to torch or jax, which
  refuse non-native byte orders, and every openpi server runs little-endian. Values are
  unchanged; only the byte order of big-endian input is swapped.
* An array that is already C-contiguous and little-endian goes onto the wire through a
  memoryview, without a copy. Anything else (Fortran order, flipped views such as
  ``img[::-1, ::-1]``) is copied once into C order.
* Every decoded array is a fresh, writeable array in native byte order that owns its
  memory, so callers may modify it and the message buffer can be freed.
* Decoding is bounded: msgpack's own length limits are tied to the message size,
  nesting is capped at ``MAX_DEPTH``, and an array's data must be exactly
  ``prod(shape) * itemsize`` bytes, so a small message cannot become a large array.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import msgpack
import numpy as np

from pytest_libero.policy.errors import CodecError

__all__ = [
    "MAX_DEPTH",
    "array_fields",
    "decode_array",
    "decode_msgpack_numpy",
    "is_msgpack_numpy",
    "pack",
    "unpack",
]

MAX_DEPTH: Final = 32
"""Deepest container nesting accepted either way; real observations are 2-3 deep."""

MAX_NDIM: Final = 32
"""Most array dimensions accepted on decode (numpy itself allows 64)."""

_ARRAY_KINDS: Final = frozenset("biufSU")
_SCALAR_KINDS: Final = frozenset("biuf")
# A plain dtype string: optional byte order, kind letter, item size. Anything else
# (structured descriptions, "O", "V8", "c16", sub-array shapes) is refused before
# numpy gets to interpret it.
_DTYPE_RE: Final = re.compile(r"[<>|=]?[biufSU][0-9]{1,6}")
_REFUSED_HINT: Final = (
    "only bool, integer, float, bytes and unicode arrays travel; convert the value "
    "(e.g. arr.astype(np.float32)) or send it another way"
)


# --------------------------------------------------------------------------- pack


def pack(obj: Any) -> bytes:
    """Encode ``obj`` as one openpi msgpack message.

    Accepts maps with str/bytes keys (msgpack readers refuse others by default),
    lists, tuples, str, bytes, int, float, bool, None, numpy arrays and numpy
    scalars. Raises ``CodecError`` naming the key path of the first value that
    cannot travel.
    """
    tree = _to_wire(obj, "$", 0)
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


def _to_wire(obj: Any, path: str, depth: int) -> Any:
    """Rebuild ``obj`` from types msgpack writes natively, checking as it goes."""
    if isinstance(obj, np.generic):
        return _scalar_to_wire(obj, path)
    if isinstance(obj, int) and not -(2**63) <= obj < 2**64:
        raise CodecError(
            f"{path}: integer {obj} does not fit in 64 bits; send it as a float or str"
        )
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return obj
    if isinstance(obj, np.ndarray):
        return _array_to_wire(obj, path)
    if isinstance(obj, (dict, list, tuple)) and depth >= MAX_DEPTH:
        raise CodecError(
            f"{path}: nested deeper than {MAX_DEPTH} levels; flatten the message"
        )
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
            out[key] = _to_wire(value, _path(path, key), depth + 1)
        return out
    if isinstance(obj, (list, tuple)):
        return [_to_wire(v, _path(path, i), depth + 1) for i, v in enumerate(obj)]
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    raise CodecError(
        f"{path}: a {type(obj).__module__}.{type(obj).__qualname__} cannot travel; "
        "send numpy arrays, numbers, str, bytes, lists or maps"
    )


def _array_to_wire(arr: np.ndarray[Any, Any], path: str) -> dict[bytes, Any]:
    data, dtype, shape = array_fields(arr, path)
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


def array_fields(arr: np.ndarray[Any, Any], path: str) -> tuple[memoryview, str, list[int]]:
    """An array as it travels in either map form (openpi's, msgpack-numpy's): its raw
    C-order little-endian bytes (a view, no copy when already so), dtype string and shape.

    Raises ``CodecError`` naming ``path`` for a dtype that never travels.
    """
    if arr.dtype.kind not in _ARRAY_KINDS or arr.dtype.fields is not None:
        raise CodecError(f"{path}: array dtype {arr.dtype} is refused; {_REFUSED_HINT}")
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and not _LITTLE):
        arr = arr.astype(arr.dtype.newbyteorder("<"), order="C")
    if not arr.flags.c_contiguous:
        # (Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.)
        arr = arr.copy(order="C")
    return arr.data, arr.dtype.str, list(arr.shape)


def _scalar_to_wire(value: np.generic[Any], path: str) -> Any:
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.bytes_):
        return bytes(value)
    if value.dtype.kind not in _SCALAR_KINDS:
        raise CodecError(
            f"{path}: numpy scalar of dtype {value.dtype} is refused; "
            "send bool, integer or float scalars"
        )
    dtype = value.dtype
    if dtype.byteorder == ">":
        dtype = dtype.newbyteorder("<")
    return {b"__npgeneric__": True, b"data": value.item(), b"dtype": dtype.str}


_LITTLE: Final = np.dtype("=u2").str.startswith("<")


# ------------------------------------------------------------------------- unpack


def unpack(data: bytes) -> Any:
    """Decode one message in openpi's format (or a tolerated foreign form).

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
            "is the server speaking openpi's websocket protocol?"
        ) from exc
    _check_tree(obj)
    return obj


def _refuse_ext(code: int, payload: bytes) -> Any:
    raise CodecError(
        f"msgpack extension type {code} is not part of openpi's format; "
        "the server must send arrays as __ndarray__ maps"
    )


def _check_tree(root: Any) -> None:
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
                "msgpack timestamps are not part of openpi's format; send numbers"
            )
        else:
            continue
        if depth >= MAX_DEPTH:
            raise CodecError(
                f"message nested deeper than {MAX_DEPTH} levels; "
                "is the server speaking openpi's websocket protocol?"
            )
        stack.extend((child, depth + 1) for child in children)


def _field(obj: dict[Any, Any], name: str) -> Any:
    """Look a field up under its bytes key, then its str key."""
    key = name.encode()
    if key in obj:
        return obj[key]
    return obj.get(name)


def _has(obj: dict[Any, Any], name: str) -> bool:
    return name.encode() in obj or name in obj


_MSGPACK_NUMPY_KEYS: Final = frozenset(
    [b"nd", b"type", b"kind", b"shape", b"data", "nd", "type", "kind", "shape", "data"]
)


def is_msgpack_numpy(obj: dict[Any, Any]) -> bool:
    """Whether a map is an array or scalar in the PyPI msgpack-numpy form."""
    return (_has(obj, "nd") and _has(obj, "type") and _has(obj, "data")
            and all(k in _MSGPACK_NUMPY_KEYS for k in obj))


def _decode_map(obj: dict[Any, Any]) -> Any:
    """msgpack object_hook: turn array and scalar maps into numpy values."""
    if _has(obj, "__ndarray__"):
        return decode_array(
            _field(obj, "data"), _field(obj, "dtype"), _field(obj, "shape"), "__ndarray__"
        )
    if _has(obj, "__npgeneric__"):
        return _decode_npgeneric(_field(obj, "data"), _field(obj, "dtype"))
    if is_msgpack_numpy(obj):
        return decode_msgpack_numpy(obj)
    return obj


def _parse_dtype(raw: Any, kinds: frozenset[str], what: str) -> np.dtype[Any]:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("ascii")
        except UnicodeDecodeError:
            raw = repr(raw)
    if not isinstance(raw, str) or not _DTYPE_RE.fullmatch(raw):
        raise CodecError(
            f"{what}: dtype {raw!r} is refused (object, void, complex and structured "
            f"dtypes are never decoded, nothing is unpickled); {_REFUSED_HINT}"
        )
    try:
        dtype = np.dtype(raw)
    except TypeError as exc:
        raise CodecError(f"{what}: dtype {raw!r} is not a numpy dtype") from exc
    if dtype.kind not in kinds or dtype.itemsize == 0:
        raise CodecError(f"{what}: dtype {raw!r} is refused; {_REFUSED_HINT}")
    return dtype


def decode_array(data: Any, dtype_raw: Any, shape_raw: Any, what: str) -> Any:
    """Raw C-order bytes as a fresh native array, once the dtype is a plain one and the
    bytes are exactly what the shape needs (a small message never becomes a big array)."""
    dtype = _parse_dtype(dtype_raw, _ARRAY_KINDS, what)
    if not isinstance(data, bytes):
        raise CodecError(
            f"{what}: array data is a {type(data).__name__}, expected bytes; "
            "the sender must put the raw array bytes in a msgpack bin field"
        )
    if not isinstance(shape_raw, list) or len(shape_raw) > MAX_NDIM:
        raise CodecError(
            f"{what}: array shape {shape_raw!r} is not a list of at most "
            f"{MAX_NDIM} sizes"
        )
    shape: list[int] = []
    for dim in shape_raw:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < 2**62:
            raise CodecError(f"{what}: array shape {shape_raw!r} has a bad size {dim!r}")
        shape.append(dim)
    count = math.prod(shape)
    if count * dtype.itemsize != len(data):
        raise CodecError(
            f"{what}: array of shape {tuple(shape)} and dtype {dtype.str} needs "
            f"{count * dtype.itemsize} bytes of data but the message carries "
            f"{len(data)}; the message is corrupt or was built by a different codec"
        )
    native = dtype.newbyteorder("=")
    try:
        if count == 0:
            return np.empty(shape, dtype=native)
        flat = np.frombuffer(data, dtype=dtype, count=count)
        # astype copies: the result owns its memory, is writeable and native-endian.
        return flat.reshape(shape).astype(native, order="C", copy=True)
    except (ValueError, TypeError, MemoryError) as exc:
        raise CodecError(f"{what}: cannot build the array: {exc}") from exc


def _decode_npgeneric(data: Any, dtype_raw: Any) -> Any:
    dtype = _parse_dtype(dtype_raw, _SCALAR_KINDS, "__npgeneric__")
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


def decode_msgpack_numpy(obj: dict[Any, Any]) -> Any:
    """A msgpack-numpy map as its numpy value; object arrays (kind "O") are refused."""
    what = "msgpack-numpy"
    kind = _field(obj, "kind")
    if kind not in (None, b"", ""):
        raise CodecError(
            f"{what}: array kind {kind!r} is refused (object arrays would need "
            f"unpickling, which is never done); {_REFUSED_HINT}"
        )
    nd = _field(obj, "nd")
    if nd is True:
        return decode_array(
            _field(obj, "data"), _field(obj, "type"), _field(obj, "shape"), what
        )
    if nd is False:
        # A scalar: its raw bytes, one item long.
        dtype = _parse_dtype(_field(obj, "type"), _SCALAR_KINDS, what)
        data = _field(obj, "data")
        if not isinstance(data, bytes) or len(data) != dtype.itemsize:
            raise CodecError(
                f"{what}: scalar of dtype {dtype.str} needs {dtype.itemsize} bytes"
            )
        return np.frombuffer(data, dtype=dtype)[0].astype(dtype.newbyteorder("="))
    raise CodecError(f"{what}: field 'nd' must be true or false, got {nd!r}")
