"""The policy's seconds per call, asked of its server before the run.

A served profile's policy is built as a case builds it (its transport, its endpoint) and
asked a few times on an observation of the run's shape (black images, zero encoders):
the first call is a warm-up, the median of the rest is the figure. A server that does
not answer costs the plan nothing but a line: the latency is then the operator's stated
figure, or none, and marked as assumed. An in-process policy's calls are counted as free.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from pytest_libero.config.plan import RunPlan
from pytest_libero.planning.model import Assumptions
from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.parameters import IMAGE_SIZE

CALLS = 4
WAIT_S = 3.0
"""How long the latency probe waits for a server to answer."""
CAMERAS = ("agentview", "robot0_eye_in_hand")
PROPRIO = 9


def probe_observation(plan: RunPlan) -> Observation:
    language = plan.owned[0].language if plan.owned else "probe"
    images = {camera: np.zeros((IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8) for camera in CAMERAS}
    proprio = np.zeros(PROPRIO, np.float64) if plan.track == "rgb+proprio" else None
    return Observation(language, images, proprio, 0, 0)


def policy_latency(plan: RunPlan, stated_s: float | None, say: Callable[[str], None]) -> tuple[float, str]:
    """Seconds per call and where the figure comes from."""
    if stated_s is not None:
        return stated_s, "stated (--latency-ms)"
    if not plan.profile.served:
        return 0.0, f"in-process policy ({plan.profile.name}): counted as free"
    # A plan waits a few seconds for a server, not the run's whole wait: a server that
    # is not up yet is normal before a run.
    profile = plan.profile.with_overrides(wait_s=min(plan.profile.wait_s, WAIT_S))
    try:
        policy = profile.build_policy()
        try:
            policy.reset()
            seconds = []
            for _ in range(CALLS):
                started = time.perf_counter()
                policy.infer(probe_observation(plan))
                seconds.append(time.perf_counter() - started)
        finally:
            policy.close()
    except Exception as exc:  # any failure of the probe: a line, never the plan
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        say(f"the policy server at {profile.endpoint} did not answer the latency probe "
            f"({type(exc).__name__}: {said}); the plan assumes no wait per call "
            "(give --latency-ms to state one)")
        return 0.0, f"ASSUMED: no server answered at {profile.endpoint}"
    figure = statistics.median(seconds[1:])
    return figure, f"measured: median of {CALLS - 1} calls to {profile.endpoint} after a warm-up"


def assumptions(plan: RunPlan, *, stated_latency_s: float | None, success_rate: float,
                success_share: float, prebuild: bool, say: Callable[[str], None]) -> Assumptions:
    latency, source = policy_latency(plan, stated_latency_s, say)
    return Assumptions(latency_s=latency, latency_source=source, success_rate=success_rate,
                       success_share=success_share, prebuild=prebuild)
