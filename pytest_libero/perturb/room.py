"""Which environment cases have no room: a frozen table measured with the simulator.

Whether a task's table takes N distractors clear of everything by the margin is known
only by trying: the adapter draws spots, rebuilds the scene and settles it. So
``catalog/build_environment_room.py`` sets up every native task's environment case at
each level once, on the task's fast-mode init state, and commits the ones whose every
draw was rejected, with the adapter's reason. Collection reads this table, so such a
case is skipped before it runs (docs/perturbations.md). The table names what its draws
depended on (:func:`draw_basis`); a table measured under other draws is refused, never
read as if it held.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Final

from pytest_libero.data import ENVIRONMENT_ROOM_FILE, data_path
from pytest_libero.perturb.levels import GENERATOR, PERTURB_SEED, SCENE_REDRAWS, SETTLED, TABLE
from pytest_libero.protocol.errors import SetupError

SCHEMA: Final = "pytest-libero/environment-room/1"
BUILDER: Final = "catalog/build_environment_room.py"


def draw_basis() -> dict[str, Any]:
    """What an environment case's set-up depends on besides the task: the generator, the
    seed, the redraw bound, the settling limits and the kind's level table."""
    return {"generator": GENERATOR, "seed": PERTURB_SEED, "scene_redraws": SCENE_REDRAWS,
            "settled": dict(SETTLED),
            "environment": {str(level): dict(p) for level, p in TABLE["environment"].items()}}


@cache
def room_table() -> dict[str, Any]:
    """The committed table: ``checked`` (task case ids), ``levels``, ``no_room``
    (``<task>~environment<N>`` -> the adapter's reason) and what it was measured with."""
    table: dict[str, Any] = json.loads(data_path(ENVIRONMENT_ROOM_FILE).read_bytes())
    if table.get("schema") != SCHEMA:
        raise SetupError(f"{ENVIRONMENT_ROOM_FILE} has schema {table.get('schema')!r}, not "
                         f"{SCHEMA!r}: rebuild it with MUJOCO_GL=egl python {BUILDER}")
    if table.get("draw_basis") != draw_basis():
        raise SetupError(f"{ENVIRONMENT_ROOM_FILE} was measured under other environment draws "
                         "(generator, seed, redraws or level table changed): rebuild it with "
                         f"MUJOCO_GL=egl python {BUILDER}")
    return table


def no_room(task: str, level: int) -> str | None:
    """Why the environment kind at ``level`` has no room on task ``task`` (its fast-mode
    case id), as measured; None when it was set up, or the task was not measured."""
    table = room_table()
    reason = table["no_room"].get(f"{task}~environment{level}")
    return None if reason is None else str(reason)
