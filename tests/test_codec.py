"""openpi wire codec: round trips, foreign forms, refusals, and robustness to garbage."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openpi_reference_server import server_pack, server_unpack

from pytest_libero.policy.errors import CodecError
from pytest_libero.policy.openpi import codec
from pytest_libero.policy.openpi.codec import MAX_DEPTH, pack, unpack
from pytest_libero.protocol.errors import PolicyTransportError

NUMERIC_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]


def sample(dtype: str, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    return rng.standard_normal(size=shape).astype(dt)


def assert_fresh(arr: Any) -> None:
    """Decoded arrays must be owned, writeable, C-ordered and native-endian."""
    assert isinstance(arr, np.ndarray)
    assert arr.flags.writeable
    assert arr.flags.owndata
    assert arr.flags.c_contiguous
    assert arr.dtype.isnative


def roundtrip(obj: Any) -> Any:
    return unpack(pack(obj))


# --------------------------------------------------------------- round trips


def test_codec_error_is_a_transport_error() -> None:
    assert issubclass(CodecError, PolicyTransportError)
    assert CodecError.kind == "policy_transport"
    assert CodecError.cause == "codec"


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_every_dtype_round_trips(dtype: str) -> None:
    arr = sample(dtype, (4, 5))
    out = roundtrip({"x": arr})["x"]
    assert out.dtype == arr.dtype
    np.testing.assert_array_equal(out, arr)
    assert_fresh(out)


@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i2", ">i8", ">u4", ">f2"])
def test_big_endian_input_round_trips_by_value(dtype: str) -> None:
    arr = sample(dtype.replace(">", "<"), (3, 2)).astype(dtype)
    wire = msgpack.unpackb(pack(arr))
    # Sent little-endian, so torch/jax servers can take it as is.
    assert wire[b"dtype"] == np.dtype(dtype).newbyteorder("<").str
    out = unpack(pack(arr))
    assert out.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(out, arr)
    assert_fresh(out)


@pytest.mark.parametrize(
    "shape", [(), (0,), (3, 0, 2), (7,), (256, 256, 3), (2, 3, 4, 5)], ids=str
)
def test_shapes_round_trip(shape: tuple[int, ...]) -> None:
    arr = sample("uint8", shape)
    out = roundtrip(arr)
    assert out.shape == shape
    np.testing.assert_array_equal(out, arr)
    assert_fresh(out)


def test_fortran_and_strided_input_are_written_in_c_order() -> None:
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    fortran = np.asfortranarray(base)
    flipped = base[::-1, ::-1]  # what LIBERO image preprocessing produces
    for arr in (fortran, flipped, base[:, 1]):
        wire = msgpack.unpackb(pack(arr))
        assert wire[b"data"] == np.ascontiguousarray(arr).tobytes()
        assert wire[b"shape"] == list(arr.shape)
        np.testing.assert_array_equal(unpack(pack(arr)), arr)


def test_contiguous_array_goes_on_the_wire_without_a_copy() -> None:
    arr = np.zeros((256, 256, 3), dtype=np.uint8)
    field = codec._array_to_wire(arr, "$")[b"data"]
    assert isinstance(field, memoryview)
    assert field.obj is arr  # type: ignore[comparison-overlap]


def test_wire_form_is_openpis_bytes_keyed_form() -> None:
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    wire = msgpack.unpackb(pack({"a": arr, "s": np.int64(7)}))
    assert wire["a"] == {
        b"__ndarray__": True,
        b"data": arr.tobytes(),
        b"dtype": "<f4",
        b"shape": [2, 3],
    }
    assert wire["s"] == {b"__npgeneric__": True, b"data": 7, b"dtype": "<i8"}


def test_interoperates_with_an_independent_openpi_codec() -> None:
    obs: dict[str, Any] = {
        "observation/image": sample("uint8", (8, 8, 3)),
        "observation/state": sample("float32", (8,)),
        "prompt": "put the bowl on the plate",
        "step": np.int32(3),
    }
    theirs = server_unpack(pack(obs))
    for key in ("observation/image", "observation/state"):
        np.testing.assert_array_equal(theirs[key], obs[key])
        assert theirs[key].dtype == obs[key].dtype
    assert theirs["prompt"] == obs["prompt"]
    assert theirs["step"] == 3 and isinstance(theirs["step"], np.int32)

    reply = {"actions": sample("float64", (10, 7)), "policy_timing": {"infer_ms": 1.5}}
    ours = unpack(server_pack(reply))
    np.testing.assert_array_equal(ours["actions"], reply["actions"])
    assert ours["policy_timing"] == {"infer_ms": 1.5}
    assert_fresh(ours["actions"])


@pytest.mark.parametrize(
    "value",
    [np.float32(1.5), np.float64(-2.25), np.int8(-3), np.uint64(2**64 - 1), np.bool_(True)],
    ids=lambda v: type(v).__name__,
)
def test_numpy_scalars_round_trip(value: np.generic) -> None:
    out = roundtrip({"v": value})["v"]
    assert type(out) is type(value)
    assert out == value


def test_plain_values_and_nesting_round_trip() -> None:
    obj = {
        "str": "héllo",
        "bytes": b"\x00\xff",
        "int": -(2**63),
        "big": 2**64 - 1,
        "float": 0.125,
        "bool": False,
        "none": None,
        "list": [1, "two", [3.0, None]],
        "tuple": (1, 2),
        "nested": {"a": {"b": {"c": np.arange(3)}}},
        "np_str": np.str_("text"),
    }
    out = roundtrip(obj)
    np.testing.assert_array_equal(out["nested"]["a"]["b"]["c"], np.arange(3))
    out["nested"]["a"]["b"]["c"] = None
    expected = dict(obj, tuple=[1, 2], nested={"a": {"b": {"c": None}}}, np_str="text")
    assert out == expected
    assert type(out["np_str"]) is str


def test_decoded_arrays_are_independent_of_the_message() -> None:
    arr = np.arange(10, dtype=np.int16)
    message = bytearray(pack(arr))
    out = unpack(bytes(message))
    out[0] = 99  # writeable
    assert unpack(bytes(message))[0] == 0
    assert out.base is None or out.base.flags.owndata


# ----------------------------------------------------------- foreign forms


def test_str_keyed_ndarray_form_decodes() -> None:
    arr = sample("float32", (2, 2))
    message = msgpack.packb(
        {
            "actions": {
                "__ndarray__": True,
                "data": arr.tobytes(),
                "dtype": "<f4",
                "shape": [2, 2],
            },
            "scalar": {"__npgeneric__": True, "data": 3, "dtype": "<i4"},
        },
        use_bin_type=True,
    )
    out = unpack(message)
    np.testing.assert_array_equal(out["actions"], arr)
    assert_fresh(out["actions"])
    assert out["scalar"] == 3 and isinstance(out["scalar"], np.int32)


@pytest.mark.parametrize("keys", ["bytes", "str"])
def test_msgpack_numpy_form_decodes_by_hand(keys: str) -> None:
    def k(name: str) -> str | bytes:
        return name.encode() if keys == "bytes" else name

    arr = sample("int32", (3, 4))
    message = msgpack.packb(
        {
            "a": {
                k("nd"): True,
                k("type"): "<i4",
                k("kind"): b"",
                k("shape"): [3, 4],
                k("data"): arr.tobytes(),
            },
            "s": {k("nd"): False, k("type"): "<f8", k("data"): np.float64(2.5).tobytes()},
        },
        use_bin_type=True,
    )
    out = unpack(message)
    np.testing.assert_array_equal(out["a"], arr)
    assert_fresh(out["a"])
    assert out["s"] == 2.5 and isinstance(out["s"], np.float64)


def test_msgpack_numpy_package_output_decodes() -> None:
    mn = pytest.importorskip("msgpack_numpy")
    arr = sample("float32", (5, 7))
    obj = {"arr": arr, "fortran": np.asfortranarray(arr), "s": np.int16(-4), "t": "x"}
    # Its encoder as a default hook only; never patch(), never its decoder.
    message = msgpack.packb(obj, default=mn.encode, use_bin_type=True)
    out = unpack(message)
    np.testing.assert_array_equal(out["arr"], arr)
    np.testing.assert_array_equal(out["fortran"], arr)
    assert out["s"] == -4 and isinstance(out["s"], np.int16)
    assert out["t"] == "x"
    assert_fresh(out["arr"])


def test_ordinary_map_with_an_nd_key_is_left_alone() -> None:
    obj = {"nd": 3, "other": "x"}
    assert unpack(msgpack.packb(obj)) == obj


# -------------------------------------------------------------- refusals


class _WritesMarker:
    """Unpickling this creates a file: proof that something was unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


def test_pickle_payloads_are_never_unpickled(tmp_path: Path) -> None:
    # The payload is live: unpickling it does create its marker.
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_WritesMarker(probe))).close()
    assert probe.exists()

    marker = tmp_path / "marker"
    payload = pickle.dumps(np.array([_WritesMarker(marker)], dtype=object))
    messages = [
        # msgpack-numpy's object-array form: kind O, descr list, pickled data.
        {b"nd": True, b"type": [["", "|O"]], b"kind": b"O", b"shape": [1], b"data": payload},
        {b"nd": True, b"type": "|O", b"kind": b"O", b"shape": [1], b"data": payload},
        # openpi's form claiming an object dtype.
        {b"__ndarray__": True, b"data": payload, b"dtype": "|O", b"shape": [1]},
        {"__ndarray__": True, "data": payload, "dtype": "|O8", "shape": [1]},
    ]
    for message in messages:
        with pytest.raises(CodecError, match="refused"):
            unpack(msgpack.packb({"actions": message}, use_bin_type=True))
    assert not marker.exists()


@pytest.mark.parametrize(
    "dtype", ["<c16", "|V8", "|O", "O", "V4", "<M8[s]", "f4,f4", "(2,)f4", "<f0", "|S0"]
)
def test_refused_dtype_strings(dtype: str) -> None:
    message = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\x00" * 8, b"dtype": dtype, b"shape": [1]}
    )
    with pytest.raises(CodecError, match="refused|dtype"):
        unpack(message)


def test_structured_msgpack_numpy_descr_is_refused() -> None:
    message = msgpack.packb(
        {b"nd": True, b"type": [["a", "<f4"]], b"kind": b"V", b"shape": [1], b"data": b"\0" * 4}
    )
    with pytest.raises(CodecError, match="refused"):
        unpack(message)


@pytest.mark.parametrize(
    "value",
    [
        np.array([1 + 2j]),
        np.array([object()], dtype=object),
        np.zeros(2, dtype=[("a", "<f4")]),
        np.complex64(1j),
        np.datetime64("2020-01-01"),
    ],
    ids=["complex", "object", "structured", "complex-scalar", "datetime"],
)
def test_pack_refuses_unsupported_dtypes_naming_the_path(value: Any) -> None:
    with pytest.raises(CodecError) as info:
        pack({"obs": {"x": [0, value]}})
    assert "$['obs']['x'][1]" in str(info.value)


def test_pack_refuses_other_types_and_huge_ints() -> None:
    with pytest.raises(CodecError, match=r"\$\['a'\].*set"):
        pack({"a": {1, 2}})
    with pytest.raises(CodecError, match=r"\$\[.a.\].*64 bits"):
        pack({"a": 2**70})
    with pytest.raises(CodecError, match="key"):
        pack({1: "int keys are refused by msgpack readers"})


def test_length_mismatch_is_refused() -> None:
    message = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\0" * 7, b"dtype": "<f4", b"shape": [2]}
    )
    with pytest.raises(CodecError, match="needs 8 bytes"):
        unpack(message)


def test_huge_shape_with_little_data_is_refused() -> None:
    message = msgpack.packb(
        {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "<f8", b"shape": [2**31, 2**31]}
    )
    with pytest.raises(CodecError):
        unpack(message)


def test_depth_is_bounded_both_ways() -> None:
    deep: Any = 0
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(CodecError, match="deeper"):
        pack(deep)
    with pytest.raises(CodecError, match="deeper"):
        unpack(msgpack.packb(deep))
    ok: Any = 0
    for _ in range(MAX_DEPTH):
        ok = [ok]
    assert unpack(pack(ok)) == ok
    # Far deeper than Python's recursion limit: still only a CodecError.
    with pytest.raises(CodecError):
        unpack(b"\x91" * 100_000 + b"\x00")


def test_ext_types_and_timestamps_are_refused() -> None:
    with pytest.raises(CodecError, match="extension"):
        unpack(msgpack.packb({"a": msgpack.ExtType(5, b"xx")}))
    with pytest.raises(CodecError, match="timestamp"):
        unpack(msgpack.packb({"a": msgpack.Timestamp(1, 0)}))


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\xc1", id="reserved"),
        pytest.param(b"\x92\x01", id="truncated"),
        pytest.param(b"\x81\xa1a", id="truncated-map"),
        pytest.param(b"\x81\x01\x02", id="int-key"),
        pytest.param(b"\xdd\xff\xff\xff\xff", id="huge-array"),
        pytest.param(b"\x01\x02", id="extra"),
    ],
)
def test_malformed_messages_raise_codec_error(data: bytes) -> None:
    with pytest.raises(CodecError):
        unpack(data)


def test_text_is_not_a_message() -> None:
    with pytest.raises(CodecError, match="binary"):
        unpack("Traceback ...")  # type: ignore[arg-type]


# ---------------------------------------------------------------- fuzzing


def _only_codec_errors(data: bytes) -> None:
    try:
        unpack(data)
    except CodecError:
        pass


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    _only_codec_errors(data)


_VALID = pack(
    {
        "actions": np.arange(70, dtype=np.float32).reshape(10, 7),
        "s": np.int64(3),
        "meta": {"k": [1, "x", b"y", None, 2.5]},
    }
) + msgpack.packb(
    {"a": {"nd": True, "type": "<i2", "kind": b"", "shape": [2], "data": b"\0\0\1\0"}}
)


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_valid_messages(data: st.DataObject) -> None:
    message = bytearray(_VALID[: data.draw(st.integers(1, len(_VALID)))])
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(message) - 1))
        message[i] = data.draw(st.integers(0, 255))
    _only_codec_errors(bytes(message))


_ANY_DTYPE = st.one_of(
    st.sampled_from(["<f4", ">f8", "|u1", "|b1", "<i8", "<f2", "|O", "<c8", "|V4", "<U2", "|S3"]),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.integers(-(2**63), 2**64 - 1),
    st.none(),
)
_FIELD = st.one_of(
    st.binary(max_size=64),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(),
    st.text(max_size=4),
    st.booleans(),
    st.none(),
)
_SHAPE = st.one_of(st.lists(st.integers(-2, 2**40), max_size=5), _FIELD)


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    marker=st.sampled_from(["__ndarray__", "__npgeneric__", "nd"]),
    as_bytes=st.booleans(),
    marker_value=st.one_of(st.booleans(), _FIELD),
    dtype=_ANY_DTYPE,
    data=_FIELD,
    shape=_SHAPE,
    kind=st.one_of(st.sampled_from([b"", b"O", b"V", ""]), _FIELD),
)
def test_fuzz_array_maps(
    marker: str, as_bytes: bool, marker_value: Any, dtype: Any, data: Any, shape: Any, kind: Any
) -> None:
    names = {
        "__ndarray__": ["data", "dtype", "shape"],
        "__npgeneric__": ["data", "dtype"],
        "nd": ["type", "kind", "shape", "data"],
    }[marker]
    values = {"data": data, "dtype": dtype, "type": dtype, "shape": shape, "kind": kind}
    fields: dict[Any, Any] = {marker: marker_value, **{n: values[n] for n in names}}
    if as_bytes:
        fields = {k.encode(): v for k, v in fields.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _only_codec_errors(msgpack.packb({"x": fields}, use_bin_type=True))
