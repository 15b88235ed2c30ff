"""One episode's control loop: budgets, chunk prefixes, counters, stop rules (P6-P9).

This module never touches the simulator; it drives anything shaped like
:class:`EpisodeEnv`, which keeps the rules testable with a fake and lets the real
adapter stay a thin translation layer."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pytest_libero.adapters.base import EpisodeEnv
from pytest_libero.episode.record import (
    ChunkSummary,
    ClippingRecord,
    CountersRecord,
    ErrorRecord,
    Outcome,
)
from pytest_libero.policy.contract import (
    Clipping,
    Observation,
    Policy,
    Reply,
    clip_prefix,
    validate_reply,
)
from pytest_libero.protocol.budgets import Budget, StopRule
from pytest_libero.protocol.clock import ChunkTiming, Clock
from pytest_libero.protocol.errors import EnvironmentFault, EpisodeError, PolicyTransportError
from pytest_libero.protocol.text import MESSAGE_LIMIT, clipped


class EpisodeListener(Protocol):
    """Receives evidence as it happens, so nothing is kept in memory for later."""

    def on_observation(self, call: int, observation: Observation) -> None: ...

    def on_decision(self, call: int, reply: Reply) -> None:
        """A valid reply arrived; its prefix is about to execute."""
        ...

    def on_reply(self, call: int, reply: Reply, timing: ChunkTiming) -> None:
        """Nothing more of this reply can run: when it was sent and usable, what of it ran."""
        ...

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray],
                   call: int | None = None) -> None:
        """``frame`` renders on demand, so a listener that skips frames costs nothing;
        ``call``: the reply the action came from (None: a hold)."""
        ...


class _Silent:
    def on_observation(self, call: int, observation: Observation) -> None:
        pass

    def on_decision(self, call: int, reply: Reply) -> None:
        pass

    def on_reply(self, call: int, reply: Reply, timing: ChunkTiming) -> None:
        pass

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray],
                   call: int | None = None) -> None:
        pass


class Tee:
    """Hands every event to several listeners, in order."""

    def __init__(self, *listeners: EpisodeListener) -> None:
        self.listeners = listeners

    def on_observation(self, call: int, observation: Observation) -> None:
        for listener in self.listeners:
            listener.on_observation(call, observation)

    def on_decision(self, call: int, reply: Reply) -> None:
        for listener in self.listeners:
            listener.on_decision(call, reply)

    def on_reply(self, call: int, reply: Reply, timing: ChunkTiming) -> None:
        for listener in self.listeners:
            listener.on_reply(call, reply, timing)

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray],
                   call: int | None = None) -> None:
        for listener in self.listeners:
            listener.on_control(control, action, frame, call)


@dataclass
class Counters:
    """P9: each counter kept on its own; none is derived from another."""

    policy_calls: int = 0
    decisions: int = 0
    executed_controls: int = 0
    init_controls: int = 0
    stop_signals: int = 0
    first_success_control: int | None = None
    first_success_policy_call: int | None = None
    held_controls: int = 0
    """Controls with no usable action (a late reply): no motion, the last gripper command."""
    stale_actions: int = 0
    """Actions that arrived too late to run (the head of a late chunk)."""

    def as_record(self) -> CountersRecord:
        return CountersRecord(
            policy_calls=self.policy_calls,
            decisions=self.decisions,
            executed_controls=self.executed_controls,
            init_controls=self.init_controls,
            stop_signals=self.stop_signals,
            first_success_control=self.first_success_control,
            first_success_policy_call=self.first_success_policy_call,
            held_controls=self.held_controls,
            stale_actions=self.stale_actions,
        )


@dataclass
class ClipTally:
    """Clipped actions summed over an episode (out_of_bounds = "clip")."""

    chunks: int = 0
    values: int = 0
    max_excess: float = 0.0

    def add(self, clipping: Clipping) -> None:
        self.chunks += 1
        self.values += clipping.values
        self.max_excess = max(self.max_excess, clipping.max_excess)

    def as_record(self, mode: str) -> ClippingRecord:
        return ClippingRecord(mode=mode, chunks=self.chunks, values=self.values,
                              max_excess=self.max_excess)


@dataclass
class EpisodeResult:
    """The native outcome of one episode with its counters and any error."""

    outcome: Outcome = "failure"
    termination: str | None = None  # "success" when LIBERO's check fired
    truncation: str | None = None  # control_cap | policy_call_cap | voluntary_stop
    counters: Counters = field(default_factory=Counters)
    chunks: list[ChunkSummary] = field(default_factory=list)
    error: ErrorRecord | None = None
    clipping: ClipTally = field(default_factory=ClipTally)

    def describe(self) -> str:
        """One line a person reads in the pytest report."""
        c = self.counters
        if self.outcome == "success":
            return (
                f"success at control {c.first_success_control} "
                f"(policy call {c.first_success_policy_call})"
            )
        if self.outcome == "errored" and self.error is not None:
            return f"errored ({self.error['kind']}): {self.error['message']}"
        reason = {
            "control_cap": "control cap reached",
            "policy_call_cap": "policy-call cap reached",
            "voluntary_stop": "policy stopped voluntarily",
        }.get(self.truncation or "", "ended")
        return (
            f"no native success: {reason} after {c.executed_controls} controls, "
            f"{c.policy_calls} policy calls, {c.decisions} decisions"
        )


TRACEBACK_LIMIT = 4 * MESSAGE_LIMIT
"""Characters of a traceback a record keeps (its last ones: where it was raised)."""


def error_record(exc: BaseException, kind: str | None = None) -> ErrorRecord:
    """The record of ``exc``, its texts cut to bounded lengths; when anything was cut,
    ``full_text`` holds all of it (the server's own text too) until the case writes it to
    its folder's error.txt (``episode.case``)."""
    message = str(exc) or type(exc).__name__
    trace = "".join(traceback.format_exception(exc))
    record: ErrorRecord = {
        "kind": str(kind or getattr(exc, "kind", "error")),
        "cause": str(getattr(exc, "cause", type(exc).__name__)),
        "type": type(exc).__name__,
        "message": clipped(message),
        "traceback": trace if len(trace) <= TRACEBACK_LIMIT
        else f"[{len(trace) - TRACEBACK_LIMIT} characters cut]...{trace[-TRACEBACK_LIMIT:]}",
    }
    server_text = str(getattr(exc, "traceback", "") or "")
    if len(message) > MESSAGE_LIMIT or len(trace) > TRACEBACK_LIMIT or len(server_text) > MESSAGE_LIMIT:
        record["full_text"] = trace + (f"\n--- the server's text ---\n{server_text}\n"
                                       if server_text else "")
    return record


Delays = Callable[[int, float], int]
"""A call's delay in controls, from its number and its measured latency in seconds."""


def synchronous(call: int, latency_s: float) -> int:
    """The synchronous protocol: every reply is usable at once."""
    return 0


def run_episode(
    env: EpisodeEnv,
    policy: Policy,
    budget: Budget,
    stop_rule: StopRule,
    *,
    init_controls: int,
    listener: EpisodeListener | None = None,
    out_of_bounds: str = "error",
    delays: Delays = synchronous,
) -> EpisodeResult:
    """Drive one episode to native success, truncation or error; never raise.

    The policy must already be reset for this episode (see ``case.run_case``). Each
    control's action comes from the simulated clock (protocol/clock.py): with every
    delay 0, each reply's first K actions run before the next call. With
    ``out_of_bounds="clip"`` each executed action is clipped to [-1, 1] first and the
    clips are tallied per chunk and for the episode.
    """
    result = EpisodeResult()
    result.counters.init_controls = init_controls
    episode = _Episode(env, budget, listener or _Silent(), result, Clock(budget.replan_interval))
    consecutive_stops = 0
    try:
        while not episode.over():
            reply = episode.call(policy, out_of_bounds, delays)
            if episode.run_until_next_call():
                result.outcome = "success"
                result.termination = "success"
                break
            if reply.stop:
                result.counters.stop_signals += 1
                consecutive_stops += 1
                if stop_rule.consecutive is not None and consecutive_stops >= stop_rule.consecutive:
                    result.truncation = "voluntary_stop"
                    break
            else:
                consecutive_stops = 0
        episode.finish(everything=True)
    except EpisodeError as exc:
        result.outcome = "errored"
        result.error = error_record(exc)
    result.counters.held_controls = episode.clock.held
    return result


class _Episode:
    """One episode's calls and controls on the simulated clock, and what it tells the
    listener: each reply once nothing more of it can run, in call order."""

    def __init__(self, env: EpisodeEnv, budget: Budget, sink: EpisodeListener,
                 result: EpisodeResult, clock: Clock) -> None:
        self.env, self.budget, self.sink, self.result, self.clock = env, budget, sink, result, clock
        self.replies: dict[int, Reply] = {}
        self.clips: dict[int, ClipTally] = {}

    def over(self) -> bool:
        """Whether the next call may not be made: the control cap or the call cap is reached."""
        counters, budget = self.result.counters, self.budget
        if counters.executed_controls >= budget.control_cap:
            self.result.truncation = "control_cap"
        elif counters.policy_calls >= budget.max_policy_calls:
            self.result.truncation = "policy_call_cap"
        return self.result.truncation is not None

    def call(self, policy: Policy, out_of_bounds: str, delays: Delays) -> Reply:
        """Send the next call with this control's observation; the reply joins the clock."""
        counters = self.result.counters
        sent_at = counters.executed_controls
        observation = _call_env(self.env.observe, counters.policy_calls, sent_at)
        call = counters.policy_calls + 1
        self.sink.on_observation(call, observation)
        counters.policy_calls = call  # a call counts once made, answered or not
        started = time.perf_counter()
        raw = call_policy(policy.infer, observation)
        latency = time.perf_counter() - started
        reply = validate_reply(raw, out_of_bounds)
        self.sink.on_decision(call, reply)
        if reply.actions is not None:
            counters.decisions += 1
        delay = delays(call, latency)
        if type(delay) is not int or delay < 0:
            raise EnvironmentFault(f"the delay of call {call} is {delay!r}, not a count of controls")
        self.clock.send(ChunkTiming(call, sent_at, delay, round(latency, 6), reply.horizon),
                        reply.actions)
        self.replies[call] = reply
        return reply

    def run_until_next_call(self) -> bool:
        """Run the controls up to the next call (or the control cap); True at native success."""
        counters, budget = self.result.counters, self.budget
        due = self.clock.next_call_at()
        end = min(budget.control_cap, due)
        # The images before the next call are seen only if the budget allows that call.
        another = counters.policy_calls < budget.max_policy_calls and due < budget.control_cap
        success = False
        while counters.executed_controls < end and not success:
            control = counters.executed_controls
            action, source = self.clock.action(control)
            self.finish(everything=False)  # a reply this one replaced is told before it runs
            if source is not None:
                action, clipping = clip_prefix(action[None, :])
                action = action[0]
                if clipping is not None:
                    self.clips.setdefault(source.call, ClipTally()).add(clipping)
            success = _call_env(self.env.step, action, another and control + 1 == due)
            counters.executed_controls += 1
            self.sink.on_control(counters.executed_controls, action, self.env.frame,
                                 None if source is None else source.call)
            if success:
                counters.first_success_control = counters.executed_controls
                counters.first_success_policy_call = counters.policy_calls
        self.finish(everything=success)
        return success

    def finish(self, *, everything: bool) -> None:
        """Tell the listener of every reply nothing more of which can run."""
        for timing in self.clock.finished(everything=everything):
            reply = self.replies.pop(timing.call)
            chunk: ChunkSummary = {
                "call": timing.call, "horizon": reply.horizon, "executed": timing.executed,
                "stop": reply.stop, "sent_at_control": timing.sent_at,
                "usable_at_control": timing.usable_at, "delay_controls": timing.delay,
                "latency_s": timing.latency_s, "first_executed_index": timing.first_executed,
            }
            tally = self.clips.pop(timing.call, None)
            if tally is not None:
                chunk["clipped"] = {"values": tally.values, "max_excess": tally.max_excess}
                self.result.clipping.add(Clipping(tally.values, tally.max_excess))
            self.result.counters.stale_actions += timing.stale
            self.result.chunks.append(chunk)
            self.sink.on_reply(timing.call, reply, timing)


def _guarded(fault: type[EpisodeError], who: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; any exception that is not already classified becomes ``fault``."""
    try:
        return fn(*args)
    except EpisodeError:
        raise
    except Exception as exc:
        raise fault(f"the {who} raised {type(exc).__name__}: {exc}") from exc


def _call_env(fn: Callable[..., Any], *args: Any) -> Any:
    return _guarded(EnvironmentFault, "simulator", fn, *args)


def call_policy(fn: Callable[..., Any], *args: Any) -> Any:
    return _guarded(PolicyTransportError, "policy", fn, *args)
