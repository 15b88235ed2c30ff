"""Which GL backend the simulator renders with, as the controller and the case see it.

Image bytes are comparable under one renderer only (docs/reliability.md, "The renderer is
part of the evidence"): the adapter sets this choice before the simulator is imported,
run.json records it, and verify refuses to compare image hashes across it. One
function, kept here so that none of those readers depends on the simulator adapter.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping

ROBOSUITE_ESCAPE_WARNING = ("invalid escape sequence", r".*[\\/]robosuite[\\/]")
"""robosuite's own ``__init__.py`` holds a string with an invalid escape: compiling it warns
(SyntaxWarning from Python 3.12, DeprecationWarning before), which an install without
bytecode (uv's default) or a ``-B`` case host prints on every run. Message and module
(the compiler names the file's path) match that one warning and nothing else."""


def headless_rendering(environ: Mapping[str, str]) -> dict[str, str]:
    """MUJOCO_GL and PYOPENGL_PLATFORM as the simulator will see them: EGL unless the
    operator chose otherwise (what run.json records, too)."""
    backend = environ.get("MUJOCO_GL", "egl")
    chosen = {"MUJOCO_GL": backend}
    if backend == "egl" or "PYOPENGL_PLATFORM" in environ:
        chosen["PYOPENGL_PLATFORM"] = environ.get("PYOPENGL_PLATFORM", "egl")
    return chosen


def prepare_simulator_environment() -> None:
    """Pick the headless renderer and quiet robosuite's import-time warnings (its macro
    file's log line and :data:`ROBOSUITE_ESCAPE_WARNING`).

    Must run before robosuite or mujoco is imported; the operator's own
    MUJOCO_GL / PYOPENGL_PLATFORM win if set.
    """
    for name, value in headless_rendering(os.environ).items():
        os.environ.setdefault(name, value)
    logging.getLogger("robosuite_logs").setLevel(logging.ERROR)
    message, module = ROBOSUITE_ESCAPE_WARNING
    for category in (SyntaxWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
