"""The watchdog: how long each phase may go without a sign of life, and what it is
called when a case process does not make it (a hang, a crash, a policy that never
answers, a process that could not start).

The limits themselves are the run's settings (:class:`~pytest_libero.config.plan.Watchdog`:
the simulator's from the options, the policy's from its profile); the phases are
:class:`~pytest_libero.episode.phases.Phase`.
"""

from __future__ import annotations

import math
import signal

from pytest_libero.config.plan import Watchdog
from pytest_libero.episode.phases import WAITING_ON_POLICY, Phase
from pytest_libero.protocol.errors import EnvironmentFault, EpisodeError, PolicyTransportError

EVIDENCE_GRACE_S = 120.0
"""How long finishing a case's evidence files may take (the video is encoded last)."""


def allowance(limits: Watchdog, phase: Phase) -> float:
    """Seconds ``phase`` may last without a sign of life: the policy's own limits for
    waits on the policy, no limit for a set-up waiting for its turn."""
    return {
        Phase.START: limits.build_s,
        Phase.POLICY_RESET: limits.policy_connect_s,
        Phase.BUILD: limits.build_s,
        Phase.SET_UP: math.inf,
        Phase.EPISODE: limits.step_s,
        Phase.POLICY: limits.policy_s,
        Phase.STEP: limits.step_s,
        Phase.EVIDENCE: EVIDENCE_GRACE_S,
    }[phase]


class SimulatorCrash(EnvironmentFault):
    """The case's simulator process died: a signal, or an exit without a record."""

    cause = "simulator_crash"


class SimulatorHang(EnvironmentFault):
    """The case's simulator process stopped reporting progress and was killed."""

    cause = "simulator_hang"


class PolicyHang(PolicyTransportError):
    """The policy gave no answer even past its own limits; the case process was killed."""

    cause = "policy_hang"


class ProcessNotStarted(EnvironmentFault):
    """No case process could be started for the case (no fork, a dead forkserver)."""


def lost_fault(*, hung: bool, phase: Phase, counters: dict[str, int], limits: Watchdog,
               exitcode: int | None, ahead: bool, tail: str) -> EpisodeError:
    """Why a case's process was lost: hung in ``phase`` (killed) or died, with the last
    counters it told, and ``tail`` of its output. ``ahead``: its set-up began while the
    previous case ran."""
    where = (f"during {phase} after {counters.get('executed_controls', 0)} controls, "
             f"{counters.get('policy_calls', 0)} policy calls")
    if ahead and phase in (Phase.BUILD, Phase.SET_UP):
        where += " (its set-up began while the previous case ran)"
    if hung and phase in WAITING_ON_POLICY:
        waited = "connect to" if phase is Phase.POLICY_RESET else "answer from"
        return PolicyHang(
            f"no {waited} {limits.policy_name} for {allowance(limits, phase):.0f}s "
            f"{where}, beyond the policy's own limits (policy.wait_s / call_timeout); the "
            "case process was killed"
        )
    if hung:
        return SimulatorHang(
            f"the simulator process gave no sign of life for {allowance(limits, phase):.0f}s "
            f"{where}; it was killed (raise --libero-step-timeout or --libero-build-timeout "
            f"if this machine is just slow). Output tail:\n{tail}"
        )
    return SimulatorCrash(
        f"the simulator process died ({describe_exit(exitcode)}) {where}. Output tail:\n{tail}"
    )


def describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
