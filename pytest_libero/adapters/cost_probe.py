"""What each phase of a case costs on this machine: a short probe of the real simulator.

Two fresh libero_10 task 0 episodes, at init states 0 and ``RESET_STATES`` (their
difference is that many native resets), then controls of the second with no camera
rendered (physics alone) and with every camera rendered (``render="all"``): one build,
a few resets, a few dozen controls. It runs in a spawned process of its own (the caller
never imports the simulator nor holds a GL context); the caller keys its figures by the
renderer's fingerprint, measured as a run measures it.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

RESET_STATES = 4
CONTROLS = 20
PROBE_TIMEOUT_S = 600.0


def measure() -> dict[str, Any]:
    """The probe, in this process (imports the simulator)."""
    import numpy as np

    from pytest_libero.adapters.libero import LiberoEpisode
    from pytest_libero.catalog.entries import load_catalog
    entry = load_catalog().suite_entries("libero_10")[0]
    LiberoEpisode(entry, track="rgb", control_cap=1).close()  # imports and caches, untimed
    opened: dict[int, float] = {}
    still = np.zeros(7, dtype=np.float64)
    for state in (0, RESET_STATES):
        started = time.perf_counter()
        episode = LiberoEpisode(entry.at_state(state) if state else entry, track="rgb",
                                control_cap=2 * CONTROLS + 1, render="consumed",
                                video_stride=10 * CONTROLS)
        opened[state] = time.perf_counter() - started
        if state == RESET_STATES:
            physics = _stepping(episode, still, observe=False)
        episode.close()
    every = LiberoEpisode(entry, track="rgb", control_cap=CONTROLS + 1, render="all")
    cpu = time.process_time()
    rendered = _stepping(every, still, observe=True)
    cpu_per_wall = (time.process_time() - cpu) / max(rendered * CONTROLS, 1e-9)
    every.close()
    reset_s = max(opened[RESET_STATES] - opened[0], 0.0) / RESET_STATES
    return {"build_s": max(opened[0] - reset_s, 0.0), "reset_s": reset_s, "physics_s": physics,
            "render_s": max(rendered - physics, 0.0) / 2, "cpu_per_wall": cpu_per_wall,
            "controls": CONTROLS, "reset_states": RESET_STATES}


def _stepping(episode: Any, action: Any, *, observe: bool) -> float:
    """Seconds per control over ``CONTROLS`` controls."""
    started = time.perf_counter()
    for _ in range(CONTROLS):
        episode.step(action, observe_next=observe)
    return (time.perf_counter() - started) / CONTROLS


def _child(send: Any) -> None:
    try:
        send.send(measure())
    except BaseException as exc:  # told to the parent, which says it in one line
        send.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        send.close()


def measure_in_child(timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """:func:`measure` in a spawned process; ``{"error": ...}`` when it could not."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(send,), daemon=True)
    process.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            return {"error": f"the probe did not finish within {timeout_s:g} s"}
        found: dict[str, Any] = receive.recv()
        return found
    except EOFError:
        return {"error": f"the probe's process died (exit code {process.exitcode})"}
    finally:
        receive.close()
        if process.is_alive():
            process.kill()
        process.join(10)
