"""Whose GL stack renders this process's cases: its fingerprint, measured where they render.

Case processes (``episode/host``) are forked from the process's forkserver, so the
fingerprint is measured in a process forked from that same server: the same libraries,
environment (``MUJOCO_GL``, ``MUJOCO_EGL_DEVICE_ID``, ``CUDA_VISIBLE_DEVICES``) and
device as the cases. Started here first, the server is started as the case host starts
it (its preload, and the scene of ``first`` compiled once: the caller passes None for a
run of one case), so measuring costs only the frame itself. With
``--libero-isolation=none`` the cases render in this process, and so does the fingerprint.
A process that runs no case (the controller of xdist workers) measures in a spawned
process that ends at once.
"""

from __future__ import annotations

from typing import Any

from pytest_libero.catalog.entries import Entry
from pytest_libero.episode.host.launch import case_forkserver
from pytest_libero.evidence.renderer import measure, measure_in_child


def measure_for_cases(isolation: str, first: Entry | None) -> dict[str, Any]:
    """The fingerprint of the stack this process's cases render with; ``first`` is the
    first case it will run (its scene warms the forkserver, as the case host does)."""
    if isolation == "none":
        return measure()
    with case_forkserver(first) as context:
        return measure_in_child(context)


def measure_apart() -> dict[str, Any]:
    """The fingerprint of this machine's stack, for a process that renders nothing itself."""
    return measure_in_child()
