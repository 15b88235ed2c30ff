"""What each phase of a case costs on this machine: a short probe of the real simulator.

For each suite asked (a scene family: a suite's scenes share their furniture, textures
and cameras, and a camera image of one suite's table can cost twice another's), task 0
built fresh three times (the median is the build: one build alone varies by a second or
more here), five native resets of one of them timed one by one as full mode makes its
positioning resets (the median is a reset), and controls with no camera rendered
(physics alone) and with every camera rendered (``render="all"``): about 45 s a suite
on a CPU. It runs in a spawned process of its own (the caller never imports the
simulator nor holds a GL context); the caller keys its figures by the renderer's
fingerprint, measured as a run measures it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from pytest_libero import children

BUILDS = 3
RESETS = 5
CONTROLS = 20
PROBE_TIMEOUT_S = 600.0
"""The first suite's bound; each further suite adds :data:`SUITE_TIMEOUT_S`."""
SUITE_TIMEOUT_S = 300.0


def measure(suites: Sequence[str] = ("libero_10",)) -> dict[str, Any]:
    """The probe of each suite, in this process (imports the simulator):
    ``{"suites": {suite: figures}}``."""
    from pytest_libero.adapters.libero import LiberoEpisode
    from pytest_libero.catalog.entries import load_catalog

    catalog = load_catalog()
    entries = {suite: catalog.suite_entries(suite)[0] for suite in suites}
    LiberoEpisode(entries[suites[0]], track="rgb", control_cap=1).close()  # imports, untimed
    return {"suites": {suite: _suite(entry) for suite, entry in entries.items()}}


def _suite(entry: Any) -> dict[str, Any]:
    """One suite's figures, from its task ``entry``."""
    import numpy as np

    from pytest_libero.adapters.libero import LiberoEpisode
    from pytest_libero.adapters.setup_work import compiled_once
    still = np.zeros(7, dtype=np.float64)

    def opened(render: str) -> tuple[Any, float]:
        started = time.perf_counter()
        episode = LiberoEpisode(entry, track="rgb", control_cap=2 * CONTROLS + 1, render=render,
                                video_stride=10 * CONTROLS)
        return episode, time.perf_counter() - started

    first, built = opened("consumed")
    builds = [built]
    physics = _stepping(first, still, observe=False)
    with compiled_once():  # a case's resets copy the scene its build compiled
        first.positioning_reset()
        resets = [_seconds(first.positioning_reset) for _ in range(RESETS)]
    first.close()
    every, built = opened("all")
    builds.append(built)
    cpu = time.process_time()
    rendered = _stepping(every, still, observe=True)
    cpu_per_wall = (time.process_time() - cpu) / max(rendered * CONTROLS, 1e-9)
    every.close()
    while len(builds) < BUILDS:
        episode, built = opened("consumed")
        episode.close()
        builds.append(built)
    reset_s = statistics.median(resets)
    return {"build_s": max(statistics.median(builds) - reset_s, 0.0), "reset_s": reset_s,
            "physics_s": physics, "render_s": max(rendered - physics, 0.0) / 2,
            "cpu_per_wall": cpu_per_wall, "controls": CONTROLS, "builds": BUILDS, "resets": RESETS}


def _seconds(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _stepping(episode: Any, action: Any, *, observe: bool) -> float:
    """Seconds per control over ``CONTROLS`` controls."""
    started = time.perf_counter()
    for _ in range(CONTROLS):
        episode.step(action, observe_next=observe)
    return (time.perf_counter() - started) / CONTROLS


def measure_in_child(suites: Sequence[str] = ("libero_10",),
                     timeout_s: float | None = None) -> dict[str, Any]:
    """:func:`measure` in a spawned process; ``{"error": ...}`` when it could not."""
    if timeout_s is None:
        timeout_s = PROBE_TIMEOUT_S + SUITE_TIMEOUT_S * (len(suites) - 1)
    answer = children.call(measure, tuple(suites), timeout_s=timeout_s)
    if isinstance(answer, children.Returned):
        found: dict[str, Any] = answer.value
        return found
    if isinstance(answer, children.TimedOut):
        return {"error": f"the probe did not finish within {timeout_s:g} s"}
    if isinstance(answer, children.Died):
        return {"error": f"the probe's process died (exit code {answer.exitcode})"}
    return {"error": str(answer)}
