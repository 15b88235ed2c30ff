"""The policy contract (P5, P6): what a policy sees, what it may answer.

A policy, in-process or behind a socket, receives an :class:`Observation` and answers
a plain mapping: ``{"actions": (H, 7) floats}``, optionally with ``"stop": True``, or
``{"stop": True}`` alone. :func:`validate_reply` is the single gate every answer passes
through, so in-process and remote policies are held to exactly the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np

from pytest_libero.policy.limits import MAX_CHUNK_STEPS, check_chunk_steps, check_extras
from pytest_libero.protocol.errors import InvalidAction
from pytest_libero.protocol.parameters import ACTION_DIM, ACTION_HIGH, ACTION_LOW


@dataclass(frozen=True)
class Observation:
    """What the policy is allowed to see at one decision point, and nothing more.

    ``images`` maps camera name to a contiguous uint8 (256, 256, 3) array already
    rotated by ``[::-1, ::-1]``. ``proprio`` holds 7 arm joint positions and 2 gripper
    encoders on the proprio track, else None. The two counters are accounting
    feedback (how many calls and controls came before), never simulator state.
    """

    language: str
    images: Mapping[str, np.ndarray]
    proprio: np.ndarray | None = None
    policy_calls: int = 0
    executed_controls: int = 0


@dataclass(frozen=True)
class Reply:
    """A validated answer: an action chunk, a stop signal, or both."""

    actions: np.ndarray | None
    stop: bool
    extras: Mapping[str, Any] = field(default_factory=dict)

    @property
    def horizon(self) -> int:
        return 0 if self.actions is None else int(self.actions.shape[0])


@runtime_checkable
class Policy(Protocol):
    """Anything that maps an observation to a reply mapping.

    ``metadata`` is what the policy says about itself (an openpi server's first
    frame); it lands in the run's identity. ``reset`` starts a new episode.
    """

    metadata: Mapping[str, Any]

    def reset(self) -> None: ...

    def infer(self, observation: Observation) -> Mapping[str, Any]: ...

    def close(self) -> None: ...


@runtime_checkable
class BatchPolicy(Policy, Protocol):
    """A policy that answers several episodes' observations in one call.

    Only ``python -m pytest_libero.serve`` uses it (docs/serving.md): it gathers the
    requests of concurrent connections and calls ``infer_batch`` on one of their
    policy objects, the first, with all of them. ``episodes[i]`` is the
    per-connection object (its episode state) that ``observations[i]`` belongs to;
    reply ``i`` answers observation ``i``. In-process runs keep calling ``infer``.
    """

    def infer_batch(
        self, observations: Sequence[Observation], episodes: Sequence[Self]
    ) -> Sequence[Mapping[str, Any]]: ...


@runtime_checkable
class EpisodeAware(Protocol):
    """A policy told which task each episode runs, right after its ``reset``: a wire whose
    server expects it (vla-eval's ``episode_start`` carries the task; CogACT's server,
    say, picks its chunk length by suite). ``task`` holds ``name`` (the instruction sent),
    ``suite`` and ``task_id`` (the native task's; a perturbed case's twin's): never which
    init state, nor anything of a perturbation (P5)."""

    def begin_episode(self, task: Mapping[str, Any]) -> None: ...


STATE_FED_METADATA = "pytest_libero/state_fed"
"""A policy's metadata key saying what it fed the model as state in its profile's
stead ("constant", say: the LeRobot bridge's state=mean); every record keeps it."""

RAW_REPLY = "raw_reply"
"""An extra reply key: the server's reply as it came, before a transport mapped it to
the (H, 7) chunk (GR00T's per-axis action keys); the case folder keeps it exactly."""

OUT_OF_BOUNDS_MODES = ("error", "clip")
"""What an action outside the normalized range does: errors the case (the strict
default) or is clipped to it before execution, each clip recorded."""


@dataclass(frozen=True)
class Clipping:
    """How far a chunk's executed prefix left [-1, 1] before it was clipped."""

    values: int
    max_excess: float


def clip_prefix(prefix: np.ndarray) -> tuple[np.ndarray, Clipping | None]:
    """The prefix clipped to [-1, 1] as robosuite's controllers would clip it, and what
    was clipped (None when nothing was out of range)."""
    excess = np.maximum(prefix - ACTION_HIGH, ACTION_LOW - prefix)
    count = int(np.count_nonzero(excess > 0))
    if count == 0:
        return prefix, None
    clipped = np.clip(prefix, ACTION_LOW, ACTION_HIGH)
    return clipped, Clipping(values=count, max_excess=float(excess.max()))


def validate_reply(raw: object, out_of_bounds: str = "error") -> Reply:
    """Check a reply against P6 and the bounds of ``policy.limits``, and return it as
    float64 actions; never coerce silently.

    With ``out_of_bounds="clip"`` values outside [-1, 1] pass here; the episode clips
    the prefix it executes (:func:`clip_prefix`). NaN, inf, shape and dtype always error.
    """
    if not isinstance(raw, Mapping):
        raise InvalidAction(
            f"the policy replied with a {type(raw).__name__}, not a map; "
            "reply with {'actions': array of shape (H, 7)}"
        )
    stop = raw.get("stop", False)
    if not isinstance(stop, (bool, np.bool_)):
        raise InvalidAction(f"'stop' must be a boolean, got {type(stop).__name__}")
    check_extras(raw, RAW_REPLY)
    extras = {k: v for k, v in raw.items() if k not in ("actions", "stop")}
    if "actions" not in raw:
        if stop:
            return Reply(actions=None, stop=True, extras=extras)
        raise InvalidAction(
            f"the reply has no 'actions' (keys: {sorted(map(str, raw))}); "
            "send {'actions': (H, 7)} or {'stop': true}"
        )
    actions = validate_chunk(raw["actions"], bounded=out_of_bounds == "error")
    return Reply(actions=actions, stop=bool(stop), extras=extras)


def validate_chunk(actions: object, *, bounded: bool = True,
                   longest: int | None = MAX_CHUNK_STEPS) -> np.ndarray:
    """Return the chunk as a (H, 7) float64 array, or raise InvalidAction saying why.

    ``bounded=False`` leaves the range check to the caller (clip mode). At most
    ``longest`` actions (a reply's bound, ``policy.limits``; None for a whole episode's
    file). A list is read by the array rule: floats only, so a bool or an int anywhere in
    it is refused (:func:`float_array`).
    """
    if isinstance(actions, (list, tuple)) and longest is not None:
        check_chunk_steps(len(actions), longest)
    array = float_array(actions, "'actions'")
    if array.dtype.kind != "f":
        raise InvalidAction(
            f"'actions' has dtype {array.dtype}; send float16/32/64 (booleans, integers, "
            "strings and objects are refused so no value is reinterpreted)"
        )
    sent = tuple(array.shape)
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.ndim != 2 or array.shape[1] != ACTION_DIM:
        raise InvalidAction(
            f"'actions' has shape {sent}; expected (H, {ACTION_DIM}) "
            f"or ({ACTION_DIM},): 3 translation, 3 rotation, 1 gripper"
        )
    if array.shape[0] == 0:
        raise InvalidAction("'actions' is an empty chunk (0, 7); send at least one action or stop")
    if longest is not None:
        check_chunk_steps(array.shape[0], longest)
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise InvalidAction(
            f"'actions' holds a non-finite value {array[tuple(bad)]} at {tuple(int(i) for i in bad)}"
        )
    low, high = float(array.min()), float(array.max())
    if bounded and (low < ACTION_LOW or high > ACTION_HIGH):
        raise InvalidAction(
            f"'actions' leaves the normalized range [{ACTION_LOW:g}, {ACTION_HIGH:g}] "
            f"(min {low:.6g}, max {high:.6g}); scale to the OSC_POSE contract "
            "(+-1 = 0.05 m, 0.5 rad; gripper -1 open, +1 close), or let the profile "
            "clip small overshoots ([action] out_of_bounds = \"clip\", or "
            "--libero-out-of-bounds=clip)"
        )
    return np.array(array, dtype=np.float64, order="C")


def float_array(value: object, what: str) -> np.ndarray:
    """``value`` as an array, a list read by the array rule: an array of ints or bools is
    refused (its dtype says so), and so is a list holding one, wherever it stands.

    numpy would read ``[0.5, 0, True]`` as floats, turning the bool into 1.0 and the int
    into 0.0 without a word; here a bool is never a number and an int is not a float, as
    for arrays. Raises InvalidAction naming ``what`` and the first such item (a bool
    before an int); returns arrays as they are, for the caller's dtype check.
    """
    if isinstance(value, np.ndarray):
        return value
    if not isinstance(value, (list, tuple)):
        raise InvalidAction(f"{what} is a {type(value).__name__}; send a float array of shape (H, 7)")
    try:
        array = np.asarray(value)
    except ValueError as exc:
        raise InvalidAction(f"{what} is a ragged list: {exc}") from None
    refuse_non_floats(value, array, what)
    return array


def refuse_non_floats(items: list[Any] | tuple[Any, ...], array: np.ndarray, what: str) -> None:
    """InvalidAction naming the first bool (else int) of the nested list ``items`` that
    numpy read as ``array``; nothing when every number in it is a float."""
    if array.dtype.kind not in "biuf":
        return  # not numbers at all: the dtype check says so
    for wanted in (_is_bool, _is_int):
        found = _first(items, array.ndim, (), wanted)
        if found is not None:
            where, item = found
            raise InvalidAction(
                f"{what} holds {_described(item)} at {where}; send floats only (a bool is "
                "never a number, and integers are refused as in an int array)")


def _is_bool(item: object) -> bool:
    return isinstance(item, (bool, np.bool_)) or (isinstance(item, np.ndarray)
                                                   and item.dtype.kind == "b")


def _is_int(item: object) -> bool:
    return isinstance(item, (int, np.integer)) or (isinstance(item, np.ndarray)
                                                    and item.dtype.kind in "iu")


def _described(item: object) -> str:
    if isinstance(item, np.ndarray):
        return f"an array of dtype {item.dtype}"
    if isinstance(item, (bool, np.bool_)):
        return f"the bool {bool(item)}"
    return f"the integer {int(item)}" if isinstance(item, (int, np.integer)) else repr(item)


def _first(value: object, depth: int, where: tuple[int, ...],
           wanted: Callable[[object], bool]) -> tuple[tuple[int, ...], object] | None:
    """The position and value of the first item of the nested list ``value`` (``depth``
    levels deep) that is ``wanted``, or None. Bounded: numpy has read it as a regular
    array of that depth, and the chunk's length is checked first."""
    if depth == 0 or isinstance(value, np.ndarray):
        return (where, value) if wanted(value) else None
    assert isinstance(value, (list, tuple))
    for index, item in enumerate(value):
        found = _first(item, depth - 1, (*where, index), wanted)
        if found is not None:
            return found
    return None
