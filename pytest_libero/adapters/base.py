"""What a benchmark adapter must provide: the extension point behind ``--libero-adapter``.

An adapter is the only code that touches a simulator. ``--libero-adapter=module:factory``
names a callable that returns a :class:`BenchmarkAdapter`; it is checked when it is
loaded (before any case), and each episode it opens is checked before it is driven, so
a missing method is a clear error naming it, never an AttributeError mid-episode.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pytest_libero.catalog.entries import Entry
from pytest_libero.catalog.placement import Placement
from pytest_libero.policy.contract import Observation

ADAPTER_METHODS = ("open",)
EPISODE_METHODS = ("observe", "step", "frame", "renders", "close")
EPISODE_ATTRIBUTES = ("identity", "init_controls")


class EpisodeEnv(Protocol):
    """The adapter's side of an episode: observe, step one control, close."""

    def observe(self, policy_calls: int, executed_controls: int) -> Observation: ...

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        """Execute one control; return LIBERO's native success after it.

        ``observe_next`` says whether the policy will see the images after this
        control, so an adapter may skip renders nobody consumes.
        """
        ...

    def frame(self) -> np.ndarray:
        """The agentview image after the last control, rotated as the policy sees it."""
        ...


@runtime_checkable
class Episode(EpisodeEnv, Protocol):
    """One opened, settled episode, as the case drives and records it."""

    identity: dict[str, Any]
    """Hashes of what was installed (BDDL, init-state file, the state): the record's."""
    init_controls: int
    """Settling controls run before the first observation, counted apart (P9)."""

    def renders(self) -> dict[str, int] | None:
        """Real renders per camera so far (None when every control renders)."""
        ...

    def close(self) -> None: ...


class BenchmarkAdapter(Protocol):
    """Opens one episode per case."""

    def open(
        self, entry: Entry, *, track: str, control_cap: int, render: str, video_stride: int,
        placement: Placement | None = None,
    ) -> Episode:
        """Open ``entry``'s settled episode.

        ``placement`` is the case host's answer for the case (``catalog/placement.py``):
        in full mode, whether the episode continues in the environment this adapter kept
        from the task's previous state (``placement.continues``), and whether to keep
        this one's for the next (``placement.keep``). It is optional: an adapter whose
        ``open`` neither names it nor takes ``**kwargs`` is never passed it
        (:func:`takes_placement`) and opens every episode fresh, which reaches the same
        episode (docs/full-mode.md).
        """
        ...


def takes_placement(adapter: BenchmarkAdapter) -> bool:
    """Whether the adapter's ``open`` accepts ``placement``: by name, or in ``**kwargs``
    (a subclass of the libero adapter passing its options on). Adapters written before
    the keyword existed are opened as they always were."""
    try:
        parameters = inspect.signature(adapter.open).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature to read
        return False
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind is p.VAR_KEYWORD or (p.name == "placement" and p.kind in named)
               for p in parameters)


def missing_members(
    obj: object, methods: tuple[str, ...], attributes: tuple[str, ...] = ()
) -> list[str]:
    """The methods ``obj`` lacks (or has as something not callable), then its missing
    attributes."""
    return [name for name in methods if not callable(getattr(obj, name, None))] + [
        name for name in attributes if getattr(obj, name, None) is None
    ]
