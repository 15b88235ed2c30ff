"""A GR00T-style policy server for tests, written from the documented protocol alone.

It does not use ``pytest_libero.policy.gr00t.wire``: its own few lines speak the wire,
so the client is tested against an independent implementation. ``generation`` picks
the array form it reads and writes, as Isaac-GR00T's two server generations do:

* ``"npy"``: ``{"__ndarray_class__": true, "as_npy": np.save bytes}``, modality configs
  ``{"__ModalityConfig_class__": true, "as_json": ...}``;
* ``"msgpack-numpy"``: the PyPI msgpack-numpy package's own encode/decode (bytes keys
  nd/type/kind/shape/data), object arrays refused before decoding, modality configs
  ``{"__ModalityConfig__": true, "as_json": ...}``;
* ``"both"``: reads either form, writes msgpack-numpy (a later server variant).

A request in the form the server does not read reaches its handler as a plain dict,
and its strict observation check answers as upstream's LIBERO wrapper does (``Video key
'image' must be a numpy array. Got <class 'dict'>``). Two more of upstream's strict
checks, in its words: ``wrapped=False`` is a server started without
``--use-sim-policy-wrapper`` (its policy wants nested observations and answers a flat one
with ``Observation must contain a 'video' key``), and ``answers`` other than ``horizon``
is a model whose replies its modality config does not describe (the output check answers
``Action key 'x's horizon must be 16. Got 4``).

Behaviour, as GR00T N1.6's ``PolicyServer``: one ZeroMQ REP socket on 127.0.0.1, one
request at a time; ``{"endpoint": NAME, "data": {...}}`` (+ ``api_token``) on ``ping``,
``reset``, ``get_modality_config``, ``get_action`` (reply ``[action_dict, info]``, each
action ``(1, horizon, 1)``) and ``kill``; a failure (an unknown endpoint, a handler that
raises, a bad token) answers ``{"error": "..."}``.

Knobs (``hook(endpoint, data, count)`` where count numbers that endpoint's requests
from 1): return None for normal behaviour, :class:`Raw` to send bytes as they are,
:class:`Hang` to sleep before answering normally, :data:`DIE` to close the socket
without answering (a crashed process), or anything else to send it as the reply.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import msgpack_numpy
import numpy as np
import zmq

ACTION_KEYS = ("action.x", "action.y", "action.z", "action.roll", "action.pitch",
               "action.yaw", "action.gripper")
VIDEO_KEYS = ("video.image", "video.wrist_image")
STATE_KEYS = ("state.x", "state.y", "state.z", "state.roll", "state.pitch", "state.yaw",
              "state.gripper")
LANGUAGE_KEY = "annotation.human.action.task_description"
HORIZON = 16
GENERATIONS = ("npy", "msgpack-numpy", "both")


@dataclass
class Raw:
    data: bytes


@dataclass
class Hang:
    seconds: float


DIE = object()
MULTIPART = object()
"""Answer with the normal reply plus a second frame (GR00T's server never does)."""
Hook = Callable[[str, Any, int], Any]


def on(name: str, answer: Any, count: int | None = None) -> Hook:
    """A hook that gives ``answer`` to the endpoint ``name`` (only its ``count``-th
    request when given) and behaves normally otherwise."""
    def hook(endpoint: str, data: Any, n: int) -> Any:
        return answer if endpoint == name and count in (None, n) else None
    return hook


class Canary:
    """Unpickling this creates ``path``: proof, by its absence, that nothing was."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (str(self.path), "w"))


def encode_npy(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        buffer = io.BytesIO()
        np.save(buffer, obj, allow_pickle=False)
        return {"__ndarray_class__": True, "as_npy": buffer.getvalue()}
    raise TypeError(f"cannot pack {type(obj).__name__}")


def decode_npy(obj: dict[Any, Any]) -> Any:
    if "__ndarray_class__" in obj:
        return np.load(io.BytesIO(obj["as_npy"]), allow_pickle=False)
    return obj


def decode_msgpack_numpy(obj: dict[Any, Any]) -> Any:
    """msgpack-numpy's decode, behind the hard boundary upstream puts before it: an
    object array (pickle) is refused, never loaded."""
    if obj.get(b"nd") and obj.get(b"kind") == b"O":
        raise ValueError("object arrays are not supported")
    return msgpack_numpy.decode(obj)


def server_pack(obj: Any, generation: str = "npy") -> bytes:
    default = encode_npy if generation == "npy" else msgpack_numpy.encode
    data = msgpack.packb(obj, default=default)
    assert isinstance(data, bytes)
    return data


def server_unpack(data: bytes, generation: str = "npy") -> Any:
    if generation == "npy":
        hook = decode_npy
    elif generation == "msgpack-numpy":
        hook = decode_msgpack_numpy
    else:
        def hook(obj: dict[Any, Any]) -> Any:
            value = decode_npy(obj)
            return decode_msgpack_numpy(value) if isinstance(value, dict) else value
    return msgpack.unpackb(data, object_hook=hook)


def modality_config(generation: str = "npy", horizon: int = HORIZON,
                    marked: bool = True) -> dict[str, Any]:
    """What GR00T's LIBERO_PANDA embodiment reports, in its wire form (``marked=False``:
    plain maps, as a policy without ModalityConfig objects would send)."""
    marker = "__ModalityConfig_class__" if generation == "npy" else "__ModalityConfig__"

    def config(keys: list[str], steps: int = 1) -> dict[str, Any]:
        body = {"delta_indices": list(range(steps)), "modality_keys": keys}
        return {marker: True, "as_json": body} if marked else body
    return {
        "video": config([k.split(".", 1)[1] for k in VIDEO_KEYS]),
        "state": config([k.split(".", 1)[1] for k in STATE_KEYS]),
        "action": config([k.split(".", 1)[1] for k in ACTION_KEYS], horizon),
        "language": config([LANGUAGE_KEY]),
    }


def check_observation(observation: Any) -> None:
    """The strict checks of upstream's LIBERO wrapper, in its words where it has them."""
    if not isinstance(observation, dict):
        raise ValueError(f"Observation must be a dict. Got {type(observation)}")
    for key in VIDEO_KEYS:
        value = observation.get(key)
        if not isinstance(value, np.ndarray):
            raise ValueError(f"Video key '{key.split('.', 1)[1]}' must be a numpy array. "
                             f"Got {type(value)}")
        if value.dtype != np.uint8 or value.ndim != 5:
            raise ValueError(f"Video key '{key}' must be uint8 (B, T, H, W, C); got "
                             f"{value.dtype} {value.shape}")
    for key in STATE_KEYS:
        value = observation.get(key)
        if not isinstance(value, np.ndarray) or value.dtype != np.float32 or value.ndim != 3:
            raise ValueError(f"State key '{key}' must be a float32 (B, T, D) numpy array. "
                             f"Got {type(value)}")
    if not isinstance(observation.get(LANGUAGE_KEY), list):
        raise ValueError(f"Language key '{LANGUAGE_KEY}' must be a list of strings")


def check_action(actions: dict[str, np.ndarray], horizon: int) -> None:
    """Upstream's strict output check of the sim wrapper, in its words."""
    for key in ACTION_KEYS:
        name = key.split(".", 1)[1]
        if key not in actions:
            raise AssertionError(f"Action key '{key}' must be in action")
        if actions[key].shape[1] != horizon:
            raise AssertionError(f"Action key '{name}'s horizon must be {horizon}. "
                                 f"Got {actions[key].shape[1]}")


def scripted_actions(call: int, horizon: int = HORIZON) -> dict[str, np.ndarray]:
    """A distinct, in-range chunk per call: each axis (1, horizon, 1) float32; the
    gripper in [0, 1] crosses 0.5 so the gr00t_libero transform shows both signs."""
    steps = np.arange(horizon, dtype=np.float32)
    chunk = {key: ((i + 1) * 0.01 + 0.001 * steps + 0.1 * call).reshape(1, horizon, 1)
             for i, key in enumerate(ACTION_KEYS[:-1])}
    gripper = np.where(steps % 3 == 0, 0.9, 0.2).astype(np.float32)
    chunk["action.gripper"] = gripper.reshape(1, horizon, 1)
    return {k: v.astype(np.float32) for k, v in chunk.items()}


class Gr00tReferenceServer:
    """Runs the server in a background thread; see the module doc."""

    def __init__(self, hook: Hook | None = None, *, port: int = 0,
                 api_token: str | None = None, generation: str = "npy",
                 horizon: int = HORIZON, marked: bool = True, wrapped: bool = True,
                 answers: int | None = None) -> None:
        assert generation in GENERATIONS
        self.hook = hook
        self.requested_port = port
        self.api_token = api_token
        self.generation = generation
        self.horizon = horizon
        self.marked = marked
        self.wrapped = wrapped
        self.answers = horizon if answers is None else answers
        """The actions the model answers per call (its config says ``horizon``)."""
        self.requests: list[dict[str, Any]] = []
        """Every decoded request, in arrival order."""
        self.actions: list[dict[str, np.ndarray]] = []
        """Every action dict sent in answer to get_action, in order."""
        self.counts: dict[str, int] = {}
        self.port: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def uri(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"tcp://127.0.0.1:{self.port}"

    def endpoints(self) -> list[str]:
        return [r["endpoint"] for r in self.requests]

    def start(self) -> Gr00tReferenceServer:
        self._thread = threading.Thread(target=self._run, name="gr00t-reference-server",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(5):
            raise RuntimeError("the GR00T reference server did not start")
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> Gr00tReferenceServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        context = zmq.Context()
        sock = context.socket(zmq.REP)
        sock.setsockopt(zmq.LINGER, 0)
        if self.requested_port:
            sock.bind(f"tcp://127.0.0.1:{self.requested_port}")
            self.port = self.requested_port
        else:
            self.port = sock.bind_to_random_port("tcp://127.0.0.1")
        self._ready.set()
        try:
            while not self._stop.is_set():
                if not sock.poll(50):
                    continue
                reply = self._answer(sock.recv())
                if reply is DIE:
                    return
                if reply is MULTIPART:
                    sock.send_multipart([self.pack([scripted_actions(0), {}]), b"extra"])
                    continue
                assert isinstance(reply, bytes)
                sock.send(reply)
        finally:
            sock.close(linger=0)
            context.term()

    def _answer(self, message: bytes) -> object:
        try:
            request = server_unpack(message, self.generation)
            self.requests.append(request)
            if self.api_token is not None and request.get("api_token") != self.api_token:
                return self.pack({"error": "Unauthorized: Invalid API token"})
            endpoint = request.get("endpoint", "get_action")
            count = self.counts[endpoint] = self.counts.get(endpoint, 0) + 1
            data = request.get("data")
            special = self.hook(endpoint, data, count) if self.hook is not None else None
            if special is DIE:
                return DIE
            if isinstance(special, Raw):
                return special.data
            if isinstance(special, Hang):
                time.sleep(special.seconds)
                special = None
            if special is not None:
                return self.pack(special)
            return self.pack(self._default(endpoint, data, count))
        except Exception as exc:  # noqa: BLE001 - the server answers every failure
            return self.pack({"error": str(exc)})

    def pack(self, reply: Any) -> bytes:
        """A reply in this server's generation (``both`` writes msgpack-numpy)."""
        return server_pack(reply, "npy" if self.generation == "npy" else "msgpack-numpy")

    def _default(self, endpoint: str, data: Any, count: int) -> Any:
        if endpoint == "ping":
            return {"status": "ok", "message": "Server is running"}
        if endpoint == "kill":
            self._stop.set()
            return {}
        if endpoint == "reset":
            return {}
        if endpoint == "get_modality_config":
            return modality_config(self.generation, self.horizon, self.marked)
        if endpoint == "get_action":
            if not isinstance(data, dict) or set(data) != {"observation", "options"}:
                raise ValueError(f"get_action data must be {{observation, options}}, got {data!r}")
            if not self.wrapped and "video" not in data["observation"]:
                raise AssertionError("Observation must contain a 'video' key")
            check_observation(data["observation"])
            actions = scripted_actions(count, self.answers)
            check_action(actions, self.horizon)
            self.actions.append(actions)
            return [actions, {}]
        raise ValueError(f"Unknown endpoint: {endpoint}")
