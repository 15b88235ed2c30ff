"""Kinds that move or add objects: each draw is judged once the scene has settled.

Whether moved or added objects stand (no contact but their support, at rest, the goal
not already met) is known only after the settling controls. So such a kind's episode
settles the scene once unperturbed (where each object comes to rest, what touches
already), then per attempt installs the init state anew, applies a draw, settles and
judges; a rejected draw is drawn again, deterministically (the next attempt), and every
rejection is recorded. When every draw is rejected, the task has no room for the level.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from pytest_libero.perturb.contacts import SETTLED, robot_contacts
from pytest_libero.perturb.kind import Context, KindApplied, Perturbation
from pytest_libero.perturb.redraw import first_standing

SCENE_REDRAWS: Final = 12
"""How many deterministic redraws a rejected draw may take (each costs the settling
controls again)."""


def identity_terms() -> dict[str, Any]:
    """What every such kind's draws depend on besides its levels."""
    return {"scene_redraws": SCENE_REDRAWS, "settled": dict(SETTLED)}


class SettledApplied(KindApplied):
    """The draw-settle-judge loop; a kind supplies :meth:`reference`, :meth:`apply`,
    :meth:`judge` and :meth:`placed`."""

    def context(self) -> Context:
        """The scene's names the draw needs."""
        return {}

    def reference(self) -> None:
        """Told once, in the scene settled unperturbed: what touches, where things rest."""

    def apply(self, drawn: Perturbation) -> list[str]:
        """Apply a draw to the scene with the init state installed; why it cannot be."""
        return []

    def judge(self, goal_holds: bool) -> list[str]:
        """Why the settled scene does not stand (empty: it does)."""
        return []

    def placed(self) -> dict[str, Any]:
        """What the record keeps of the accepted draw, beside the drawn parameters."""
        return {}

    def set_up(self, state: np.ndarray) -> None:
        stage = self.stage
        stage.install(state)
        stage.settle()
        self.reference()

        def tried(attempt: int) -> tuple[Perturbation, list[str]]:
            stage.install(state)
            drawn = self.draw(attempt, self.context())
            problems = self.apply(drawn)
            if not problems:
                stage.settle()
                problems = self.judge(bool(stage.env.check_success()))
            return drawn, problems

        drawn, rejected = first_standing(
            SCENE_REDRAWS + 1, tried, 4, lambda last: (
                f"{stage.entry.case_id}: every one of {SCENE_REDRAWS + 1} draws was rejected "
                f"(the last: {'; '.join(last)}); this task has no room for {self.kind.name} "
                f"level {self.level}"))
        self.record = {**drawn.as_dict(), "rejected": rejected, **self.placed()}

    def on_settled(self) -> None:
        assert self.record is not None
        self.record["robot_contacts_at_first_observation"] = robot_contacts(self.stage.env.sim)
