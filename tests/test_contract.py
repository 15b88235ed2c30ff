"""P6: every reply passes one gate; bad replies are refused with the reason."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_libero.policy.contract import clip_prefix, validate_chunk, validate_reply
from pytest_libero.protocol.errors import InvalidAction


def test_valid_chunk_becomes_owned_float64() -> None:
    raw = np.zeros((4, 7), dtype=np.float32)
    chunk = validate_chunk(raw)
    assert chunk.dtype == np.float64 and chunk.shape == (4, 7) and chunk.flags.c_contiguous
    assert chunk.base is None or chunk.base is not raw


def test_single_action_is_a_chunk_of_one() -> None:
    assert validate_chunk(np.zeros(7)).shape == (1, 7)


def test_bounds_are_inclusive() -> None:
    assert validate_chunk(np.array([[1, -1, 1, -1, 1, -1, 1.0]])).max() == 1.0


@pytest.mark.parametrize(
    ("actions", "words"),
    [
        (np.zeros((2, 6)), "shape"),
        (np.zeros((2, 8)), "shape"),
        (np.zeros((2, 2, 7)), "shape"),
        (np.zeros((0, 7)), "empty chunk"),
        (np.full((1, 7), np.inf), "non-finite"),
        (np.array([[0, 0, 0, 0, 0, 0, 1.5]]), "normalized range"),
        (np.zeros((1, 7), dtype=np.int64), "dtype int64"),
        (np.zeros((1, 7), dtype=bool), "dtype bool"),
        (np.array([["a"] * 7]), "dtype <U1"),
        (np.array([[None] * 7]), "dtype object"),
        ("0,0,0,0,0,0,1", "is a str"),
        ([[0.0] * 7, [0.0] * 6], "ragged"),
    ],
)
def test_bad_chunks_are_refused(actions: Any, words: str) -> None:
    with pytest.raises(InvalidAction, match=words):
        validate_chunk(actions)


def test_reply_forms() -> None:
    assert validate_reply({"stop": True}).actions is None
    both = validate_reply({"actions": [[0.0] * 7], "stop": True, "server_timing": {}})
    assert both.stop and both.horizon == 1 and "server_timing" in both.extras
    with pytest.raises(InvalidAction, match="not a map"):
        validate_reply([0.0] * 7)
    with pytest.raises(InvalidAction, match="no 'actions'"):
        validate_reply({"action": [0.0] * 7})
    with pytest.raises(InvalidAction, match="'stop' must be a boolean"):
        validate_reply({"stop": "yes"})


def test_clip_mode_passes_overshoots_and_clips_only_what_runs() -> None:
    raw = np.zeros((3, 7))
    raw[0, 6], raw[1, 0], raw[2, 3] = 1.02, -1.5, 7.0
    with pytest.raises(InvalidAction, match="normalized range"):
        validate_reply({"actions": raw})  # strict stays the default
    reply = validate_reply({"actions": raw}, out_of_bounds="clip")
    assert reply.actions is not None and np.array_equal(reply.actions, raw)  # as sent
    executed, clipping = clip_prefix(reply.actions[:2])
    assert clipping is not None and clipping.values == 2
    assert clipping.max_excess == pytest.approx(0.5)
    assert executed[0, 6] == 1.0 and executed[1, 0] == -1.0
    assert np.array_equal(executed[:, :6][0], raw[0, :6])
    inside, none = clip_prefix(np.full((2, 7), 1.0))
    assert none is None and inside.max() == 1.0


@pytest.mark.parametrize(
    ("actions", "words"),
    [
        (np.full((1, 7), np.nan), "non-finite"),
        (np.full((1, 7), np.inf), "non-finite"),
        (np.zeros((2, 6)), "shape"),
        (np.zeros((1, 7), dtype=np.int64), "dtype int64"),
    ],
)
def test_clip_mode_still_refuses_what_is_not_an_overshoot(actions: Any, words: str) -> None:
    with pytest.raises(InvalidAction, match=words):
        validate_reply({"actions": actions}, out_of_bounds="clip")
