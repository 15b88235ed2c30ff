"""Numpy arrays as raw bytes in a msgpack map, both ways, never through pickle.

Every policy wire carries an array the same way underneath: its raw C-order bytes, a
dtype string and a shape, in a map whose keys name the form (openpi's ``__ndarray__``
maps, written and read by its codec; the PyPI msgpack-numpy maps, which openpi's codec
reads and GR00T's wire writes and reads). This module holds what those forms share: an
array's fields for sending, the bounded decoder, and the msgpack-numpy form itself, read
field by field without importing msgpack-numpy (that package unpickles object arrays,
and a reply from a policy server is untrusted input).

Choices, and why:

* Only plain dtypes travel (bool, signed/unsigned ints, floats, fixed-width bytes and
  unicode). Object, void (structured) and complex dtypes are refused in both
  directions: object arrays can only be carried by pickle, and no policy sends the
  others.
* Multi-byte arrays are sent little-endian. Servers hand arrays to torch or jax, which
  refuse non-native byte orders, and every openpi server runs little-endian. Values are
  unchanged; only the byte order of big-endian input is swapped.
* An array that is already C-contiguous and little-endian goes onto the wire through a
  memoryview, without a copy. Anything else (Fortran order, flipped views such as
  ``img[::-1, ::-1]``) is copied once into C order.
* Every decoded array is a fresh, writeable array in native byte order that owns its
  memory, so callers may modify it and the message buffer can be freed.
* An array's data must be exactly ``prod(shape) * itemsize`` bytes, so a small message
  cannot become a large array.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import numpy as np

from pytest_libero.policy.errors import CodecError

__all__ = [
    "ARRAY_KINDS",
    "MAX_NDIM",
    "SCALAR_KINDS",
    "array_fields",
    "decode_array",
    "decode_msgpack_numpy",
    "field_of",
    "has_field",
    "is_msgpack_numpy",
    "parse_dtype",
]

MAX_NDIM: Final = 32
"""Most array dimensions accepted on decode (numpy itself allows 64)."""

ARRAY_KINDS: Final = frozenset("biufSU")
SCALAR_KINDS: Final = frozenset("biuf")
# A plain dtype string: optional byte order, kind letter, item size. Anything else
# (structured descriptions, "O", "V8", "c16", sub-array shapes) is refused before
# numpy gets to interpret it.
_DTYPE_RE: Final = re.compile(r"[<>|=]?[biufSU][0-9]{1,6}")
_REFUSED_HINT: Final = (
    "only bool, integer, float, bytes and unicode arrays travel; convert the value "
    "(e.g. arr.astype(np.float32)) or send it another way"
)
_LITTLE: Final = np.dtype("=u2").str.startswith("<")


def array_fields(arr: np.ndarray[Any, Any], path: str) -> tuple[memoryview, str, list[int]]:
    """An array as it travels in either map form (openpi's, msgpack-numpy's): its raw
    C-order little-endian bytes (a view, no copy when already so), dtype string and shape.

    Raises ``CodecError`` naming ``path`` for a dtype that never travels.
    """
    if arr.dtype.kind not in ARRAY_KINDS or arr.dtype.fields is not None:
        raise CodecError(f"{path}: array dtype {arr.dtype} is refused; {_REFUSED_HINT}")
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and not _LITTLE):
        arr = arr.astype(arr.dtype.newbyteorder("<"), order="C")
    if not arr.flags.c_contiguous:
        # (Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.)
        arr = arr.copy(order="C")
    return arr.data, arr.dtype.str, list(arr.shape)


def parse_dtype(raw: Any, kinds: frozenset[str], what: str) -> np.dtype[Any]:
    """A plain dtype string (str or ASCII bytes) of one of ``kinds`` as its dtype; anything
    else raises ``CodecError`` naming ``what``, before numpy interprets it."""
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
    dtype = parse_dtype(dtype_raw, ARRAY_KINDS, what)
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


def field_of(obj: dict[Any, Any], name: str) -> Any:
    """Look a field up under its bytes key, then its str key."""
    key = name.encode()
    if key in obj:
        return obj[key]
    return obj.get(name)


def has_field(obj: dict[Any, Any], name: str) -> bool:
    return name.encode() in obj or name in obj


_MSGPACK_NUMPY_KEYS: Final = frozenset(
    [b"nd", b"type", b"kind", b"shape", b"data", "nd", "type", "kind", "shape", "data"]
)


def is_msgpack_numpy(obj: dict[Any, Any]) -> bool:
    """Whether a map is an array or scalar in the PyPI msgpack-numpy form."""
    return (has_field(obj, "nd") and has_field(obj, "type") and has_field(obj, "data")
            and all(k in _MSGPACK_NUMPY_KEYS for k in obj))


def decode_msgpack_numpy(obj: dict[Any, Any]) -> Any:
    """A msgpack-numpy map as its numpy value; object arrays (kind "O") are refused."""
    what = "msgpack-numpy"
    kind = field_of(obj, "kind")
    if kind not in (None, b"", ""):
        raise CodecError(
            f"{what}: array kind {kind!r} is refused (object arrays would need "
            f"unpickling, which is never done); {_REFUSED_HINT}"
        )
    nd = field_of(obj, "nd")
    if nd is True:
        return decode_array(
            field_of(obj, "data"), field_of(obj, "type"), field_of(obj, "shape"), what
        )
    if nd is False:
        # A scalar: its raw bytes, one item long.
        dtype = parse_dtype(field_of(obj, "type"), SCALAR_KINDS, what)
        data = field_of(obj, "data")
        if not isinstance(data, bytes) or len(data) != dtype.itemsize:
            raise CodecError(
                f"{what}: scalar of dtype {dtype.str} needs {dtype.itemsize} bytes"
            )
        return np.frombuffer(data, dtype=dtype)[0].astype(dtype.newbyteorder("="))
    raise CodecError(f"{what}: field 'nd' must be true or false, got {nd!r}")
