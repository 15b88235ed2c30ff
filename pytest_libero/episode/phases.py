"""The phases of a case's life, as its process reports them and its watchdog times them.

A case tells its phase as it moves on (``episode/case.py``); the case host
(``episode/host/``) kills a process whose phase outlives its allowance
(``episode/host/watchdog.py``) and names the phase in the case's error.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """One phase; the value is the word records and messages use."""

    START = "start"
    """The case's turn came: its process builds the policy's client."""
    POLICY_RESET = "policy_reset"
    """Connecting to the policy and resetting it, before any simulator is paid for."""
    BUILD = "build"
    """Opening the episode: build, reset, init state, settling (ahead of the turn, too)."""
    SET_UP = "set up"
    """Set up ahead of its turn, waiting for it however long the case before it runs."""
    EPISODE = "episode"
    """The control loop has begun."""
    POLICY = "policy"
    """Waiting on a policy call."""
    STEP = "step"
    """A decision arrived or a control ran."""
    EVIDENCE = "evidence"
    """Finishing the evidence files (the video is encoded last)."""


BEFORE_EPISODE = frozenset({Phase.START, Phase.POLICY_RESET, Phase.BUILD, Phase.SET_UP})
"""A case's phases before its episode: the next case's set-up waits for them to end."""
WAITING_ON_POLICY = frozenset({Phase.POLICY_RESET, Phase.POLICY})
"""Phases timed by the policy's limits; a hang in them is the policy's."""
