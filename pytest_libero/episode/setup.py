"""A case's set-up: its environment built, reset, its init state installed, settled.

Set-up is its own step so that a case process can do it ahead of the case's turn,
while the worker's previous case runs (``episode/host/``), and hand the case what it
built. Done ahead or not, it is the same calls in the same order in a process of the
case's own, so the episode that follows sees the same bytes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pytest_libero.adapters import AdapterCache, load_adapter
from pytest_libero.adapters.base import (
    EPISODE_ATTRIBUTES,
    EPISODE_METHODS,
    Episode,
    missing_members,
    takes_placement,
)
from pytest_libero.catalog.entries import Entry
from pytest_libero.catalog.placement import Placement
from pytest_libero.config.plan import RunPlan
from pytest_libero.perturb import registry
from pytest_libero.protocol.errors import EnvironmentFault


@dataclass
class Setup:
    """What opening a case's episode gave: the episode, or the error that stopped it."""

    case_id: str
    episode: Episode | None
    error: Exception | None
    setup_s: float
    """Seconds the adapter took to open the episode (build, reset, state, settling)."""
    finished_at: float
    """``time.time()`` when it was done: with the case's turn, how much of it overlapped."""

    def close(self) -> None:
        """Close an episode that will not be run (its case errored before the episode)."""
        episode, self.episode = self.episode, None
        if episode is not None:
            episode.close()


def open_episode(plan: RunPlan, entry: Entry, adapters: AdapterCache | None = None,
                 placement: Placement | None = None) -> Setup:
    """Open the entry's settled episode through the plan's adapter; never raises for
    what an adapter or simulator does wrong: that is the Setup's ``error``.

    ``placement`` goes to an adapter whose ``open`` takes it (``adapters/base.py``);
    any other opens the episode fresh, which reaches the same bytes."""
    t0 = time.perf_counter()
    episode: Episode | None = None
    error: Exception | None = None
    try:
        registry.load_all(plan.kinds)  # a case process knows only what its plan names
        adapter = load_adapter(plan.adapter) if adapters is None else adapters.get(plan.adapter)
        placed = {"placement": placement} if placement is not None and takes_placement(adapter) else {}
        episode = adapter.open(
            entry,
            track=plan.track,
            control_cap=plan.budget_for(entry).control_cap,
            render=plan.render,
            video_stride=plan.video_stride,
            **placed,
        )
        missing = missing_members(episode, EPISODE_METHODS, EPISODE_ATTRIBUTES)
        if missing:
            opened = type(episode).__name__
            getattr(episode, "close", lambda: None)()
            episode = None
            raise EnvironmentFault(
                f"the adapter {plan.adapter!r} opened a {opened} without "
                f"{', '.join(missing)}; see pytest_libero/adapters/base.py for what an "
                "episode must provide"
            )
    except Exception as exc:  # noqa: BLE001 - an adapter that failed to import or construct
        error = exc
    return Setup(entry.case_id, episode, error, round(time.perf_counter() - t0, 3), time.time())
