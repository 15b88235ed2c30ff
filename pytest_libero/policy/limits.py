"""How much a policy may have written: the bounds on what a reply and its metadata hold.

Everything a policy sends is recorded: each reply's chunk in ``actions.jsonl``, the names
of its other keys, a GR00T server's raw action map, and the policy's metadata in every
case record. Unbounded, the server would decide how much is written: one reply of a
million steps was 75 MB of ``actions.jsonl``, 15 GB over pi0's 200 calls, and 30 MB of
metadata was copied into every record. Each bound below sits far above what any real
policy sends. A reply past one breaks the action contract (``invalid_action``: its case
errors, nothing of it is written); metadata past its bound is refused before any case,
at the preflight (``metadata_too_large``), or errors the case whose connection brought it.
docs/models.md, "What a policy may send", lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from pytest_libero.files import json_text
from pytest_libero.policy.errors import MetadataTooLarge
from pytest_libero.protocol.errors import InvalidAction
from pytest_libero.protocol.parameters import ACTION_DIM
from pytest_libero.protocol.text import echo

__all__ = [
    "MAX_CHUNK_STEPS",
    "MAX_EXTRA_KEYS",
    "MAX_KEY_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_RAW_REPLY_BYTES",
    "check_chunk_steps",
    "check_extras",
    "check_metadata",
    "metadata_bytes",
    "recorded_metadata",
]

MAX_CHUNK_STEPS: Final = 1_000
"""Actions one reply may hold (H). pi0 and pi0.5 plan 50, ACT 100, GR00T 16, OpenVLA-OFT
8: a thousand, 50 s of control at 20 Hz, is generous, and keeps a line of actions.jsonl
under 100 kB."""
MAX_EXTRA_KEYS: Final = 64
"""Keys a reply may hold besides ``actions`` and ``stop`` (actions.jsonl names each)."""
MAX_KEY_CHARS: Final = 200
"""Characters of one such key's name, and of a key of GR00T's raw action map."""
MAX_RAW_REPLY_BYTES: Final = MAX_CHUNK_STEPS * ACTION_DIM * 8
"""Bytes of the values of a GR00T server's raw action map, which actions.jsonl keeps
exactly: as much as the longest chunk in float64 (56,000)."""
MAX_METADATA_BYTES: Final = 65_536
"""Bytes of a policy's metadata as a record writes it (its JSON): every case record keeps
a copy. openpi's metadata frames are under a kilobyte, GR00T's modality config a few."""


def check_chunk_steps(steps: int, longest: int = MAX_CHUNK_STEPS) -> None:
    """InvalidAction for a chunk of more than ``longest`` actions."""
    if steps > longest:
        raise InvalidAction(
            f"'actions' holds {steps:,} steps; a chunk holds at most {longest:,} "
            "(a policy plans ahead tens of steps: pi0 50, GR00T 16); send the next "
            "actions in the next reply")


def check_extras(reply: Mapping[Any, Any], raw_reply_key: str) -> None:
    """InvalidAction for a reply with too many other keys, or one with too long a name,
    and for a raw action map (under ``raw_reply_key``) past its bounds."""
    extra = len(reply) - ("actions" in reply) - ("stop" in reply)
    _check_keys(reply, extra, "the reply")
    raw = reply.get(raw_reply_key)
    if isinstance(raw, Mapping):
        _check_keys(raw, len(raw), "the raw action map")
        size = sum(_raw_size(value) for value in raw.values())
        if size > MAX_RAW_REPLY_BYTES:
            raise InvalidAction(
                f"the raw action map holds {size:,} bytes of values; at most "
                f"{MAX_RAW_REPLY_BYTES:,} are kept (the longest chunk's worth); send the "
                "action keys only")


def _check_keys(table: Mapping[Any, Any], count: int, what: str) -> None:
    if count > MAX_EXTRA_KEYS:
        raise InvalidAction(
            f"{what} holds {count:,} keys besides 'actions' and 'stop'; at most "
            f"{MAX_EXTRA_KEYS} are accepted (actions.jsonl names each)")
    for key in table:
        name = key if isinstance(key, str) else str(key)
        if len(name) > MAX_KEY_CHARS:
            raise InvalidAction(
                f"{what} holds a key {echo(name)}; a key name is at most {MAX_KEY_CHARS} "
                "characters")


def _raw_size(value: Any) -> int:
    """Bytes a raw reply value takes: an array's data, or the text of anything else."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (str, bytes)):
        return len(value)
    try:
        return int(np.asarray(value).nbytes)
    except (ValueError, TypeError):  # ragged, or nothing numpy reads
        return len(repr(value))


def metadata_bytes(metadata: Mapping[str, Any]) -> int:
    """Bytes of ``metadata`` as a record writes it."""
    return len(json_text(dict(metadata)).encode("utf-8"))


def recorded_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What a record keeps of ``metadata``: all of it, or nothing when it is past the
    bound (the case's error says how large it was)."""
    return dict(metadata) if metadata_bytes(metadata) <= MAX_METADATA_BYTES else {}


def check_metadata(metadata: Mapping[str, Any], where: str) -> None:
    """MetadataTooLarge when ``metadata`` (what ``where`` says about itself) is past
    :data:`MAX_METADATA_BYTES`."""
    size = metadata_bytes(metadata)
    if size > MAX_METADATA_BYTES:
        raise MetadataTooLarge(
            f"{where} describes itself in {size:,} bytes of metadata; every case record "
            f"keeps a copy, so at most {MAX_METADATA_BYTES:,} are accepted: send what "
            "identifies the model (a name, a checkpoint, a few settings), not its data")
