"""Which renderers drew a run's images, and the one rule for comparing runs by them.

A run's renderers are read from its records (each carries the fingerprint of the stack
that rendered its images, ``identity.renderer``); a run without records has only the
one its run.json names. Runs are comparable (merge, resume, a baseline) only when all
their images come from one renderer: the same measured fingerprint everywhere, or, for
folders written before fingerprints existed, none recorded anywhere (readable, and
flagged as such; never taken to equal a recorded renderer).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_libero.evidence.renderer import describe, identity, known, measured, standing

NOT_RECORDED = "not recorded"


@dataclass
class RendererUse:
    """One renderer and who rendered with it: the cases, the workers, which run."""

    renderer: dict[str, Any] | None
    """Its identity (``evidence.renderer.identity``); None when none was recorded."""
    cases: list[str] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    """Which runs (folders, "this run") used it."""

    @property
    def key(self) -> str:
        """Equal for one renderer; a failed measurement equals nothing but itself."""
        if self.renderer is None:
            return NOT_RECORDED
        return json.dumps(self.renderer, sort_keys=True)

    def text(self) -> str:
        """The renderer, then who used it: ``X (gw0, gw1: 5 cases in run A)``."""
        who = [", ".join(self.workers)] if self.workers else []
        if self.cases:
            who.append(f"{len(self.cases)} case{'s' if len(self.cases) != 1 else ''}")
        shown = ": ".join(who)
        if self.where:
            shown += (" in " if shown else "") + ", ".join(self.where)
        return describe(self.renderer) + (f" ({shown})" if shown else "")


def record_renderer(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The renderer a record says rendered its images (None in records written before
    renderer fingerprints)."""
    found = (record.get("identity") or {}).get("renderer")
    return dict(found) if isinstance(found, Mapping) else None


def run_renderer(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The renderer run.json names (the controller's), as an identity; None if absent."""
    found = run.get("renderer")
    return identity(found) if isinstance(found, Mapping) else None


def renderer_uses(records: Iterable[Mapping[str, Any]], run: Mapping[str, Any] | None = None,
                  where: str | None = None) -> list[RendererUse]:
    """The distinct renderers of these records, in order of first use; with no records,
    the one run.json names (``run``)."""
    uses: dict[str, RendererUse] = {}
    for record in records:
        use = RendererUse(record_renderer(record))
        use = uses.setdefault(use.key, use)
        use.cases.append(str(record["case"]))
        worker = str(record.get("worker") or "")
        if worker and worker not in use.workers:
            use.workers.append(worker)
    if not uses and run is not None:
        use = RendererUse(run_renderer(run))
        uses[use.key] = use
    for use in uses.values():
        if where:
            use.where.append(where)
    return list(uses.values())


def session_use(renderer: Mapping[str, Any] | None) -> RendererUse:
    """This session's renderer, before it has rendered a case."""
    return RendererUse(None if renderer is None else identity(renderer), where=["this session"])


def joined(*groups: Sequence[RendererUse]) -> list[RendererUse]:
    """Several runs' uses as one list, one entry per renderer."""
    merged: dict[str, RendererUse] = {}
    for group in groups:
        for use in group:
            into = merged.setdefault(use.key, RendererUse(use.renderer))
            into.cases += use.cases
            into.workers += [w for w in use.workers if w not in into.workers]
            into.where += [w for w in use.where if w not in into.where]
    return list(merged.values())


def conflict(uses: Sequence[RendererUse]) -> str | None:
    """Why these images cannot be compared, naming every renderer; None when they can
    (one measured renderer, or none recorded anywhere, or no image at all)."""
    if not uses:  # folders without a finished case: no images to compare
        return None
    if len(uses) == 1 and (uses[0].renderer is None or measured(uses[0].renderer)):
        return None
    if len(uses) == 1:
        return (f"the renderer could not be fingerprinted ({uses[0].text()}), so its images "
                "cannot be matched with any other run's")
    return ("the images come from different renderers: "
            + "; ".join(use.text() for use in uses))


def renderer_summary(uses: Sequence[RendererUse], run: Mapping[str, Any] | None) -> dict[str, Any]:
    """summary.json's ``renderer`` block: each renderer with its cases and workers,
    whether the package knows it, and whether the run mixes renderers."""
    return {
        "run": run_renderer(run or {}),
        "used": [{"renderer": use.renderer, "description": describe(use.renderer),
                  "known": (known(use.renderer) or {}).get("name"),
                  "standing": standing(use.renderer) if use.renderer is not None else None,
                  "cases": len(use.cases), "workers": use.workers}
                 for use in uses],
        "mixed": len(uses) > 1,
        "not_recorded": sum(len(u.cases) for u in uses if u.renderer is None),
    }
