"""One episode's control loop: budgets, chunk prefixes, counters, stop rules (P6-P9).

This module never touches the simulator; it drives anything shaped like
:class:`EpisodeEnv`, which keeps the rules testable with a fake and lets the real
adapter stay a thin translation layer."""

from __future__ import annotations

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
from pytest_libero.protocol.errors import EnvironmentFault, EpisodeError, PolicyTransportError
from pytest_libero.protocol.text import MESSAGE_LIMIT, clipped


class EpisodeListener(Protocol):
    """Receives evidence as it happens, so nothing is kept in memory for later."""

    def on_observation(self, call: int, observation: Observation) -> None: ...

    def on_decision(self, call: int, reply: Reply) -> None:
        """A valid reply arrived; its prefix is about to execute."""
        ...

    def on_reply(self, call: int, reply: Reply, executed: int) -> None: ...

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray]) -> None:
        """``frame`` renders on demand, so a listener that skips frames costs nothing."""
        ...


class _Silent:
    def on_observation(self, call: int, observation: Observation) -> None:
        pass

    def on_decision(self, call: int, reply: Reply) -> None:
        pass

    def on_reply(self, call: int, reply: Reply, executed: int) -> None:
        pass

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray]) -> None:
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

    def on_reply(self, call: int, reply: Reply, executed: int) -> None:
        for listener in self.listeners:
            listener.on_reply(call, reply, executed)

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray]) -> None:
        for listener in self.listeners:
            listener.on_control(control, action, frame)


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

    def as_record(self) -> CountersRecord:
        return CountersRecord(
            policy_calls=self.policy_calls,
            decisions=self.decisions,
            executed_controls=self.executed_controls,
            init_controls=self.init_controls,
            stop_signals=self.stop_signals,
            first_success_control=self.first_success_control,
            first_success_policy_call=self.first_success_policy_call,
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


def run_episode(
    env: EpisodeEnv,
    policy: Policy,
    budget: Budget,
    stop_rule: StopRule,
    *,
    init_controls: int,
    listener: EpisodeListener | None = None,
    out_of_bounds: str = "error",
) -> EpisodeResult:
    """Drive one episode to native success, truncation or error; never raise.

    The policy must already be reset for this episode (see ``case.run_case``). With
    ``out_of_bounds="clip"`` each executed prefix is clipped to [-1, 1] first and the
    clips are tallied per chunk and for the episode.
    """
    sink: EpisodeListener = listener or _Silent()
    result = EpisodeResult()
    counters = result.counters
    counters.init_controls = init_controls
    consecutive_stops = 0
    try:
        while True:
            if counters.executed_controls >= budget.control_cap:
                result.truncation = "control_cap"
                break
            if counters.policy_calls >= budget.max_policy_calls:
                result.truncation = "policy_call_cap"
                break
            observation = _call_env(env.observe, counters.policy_calls, counters.executed_controls)
            call = counters.policy_calls + 1
            sink.on_observation(call, observation)
            counters.policy_calls = call  # a call counts once made, answered or not
            raw = call_policy(policy.infer, observation)
            reply = validate_reply(raw, out_of_bounds)
            sink.on_decision(call, reply)
            executed = 0
            clipping = None
            if reply.actions is not None:
                counters.decisions += 1
                remaining = budget.control_cap - counters.executed_controls
                prefix, clipping = clip_prefix(reply.actions[: min(budget.replan_interval, remaining)])
                if clipping is not None:
                    result.clipping.add(clipping)
                # The images after a chunk are seen only if the budget allows a next call.
                another = (call < budget.max_policy_calls
                           and counters.executed_controls + len(prefix) < budget.control_cap)
                for n, action in enumerate(prefix, start=1):
                    success = _call_env(env.step, action, another and n == len(prefix))
                    counters.executed_controls += 1
                    executed += 1
                    sink.on_control(counters.executed_controls, action, env.frame)
                    if success:
                        counters.first_success_control = counters.executed_controls
                        counters.first_success_policy_call = call
                        break
            chunk: ChunkSummary = {
                "call": call, "horizon": reply.horizon, "executed": executed, "stop": reply.stop
            }
            if clipping is not None:
                chunk["clipped"] = {"values": clipping.values, "max_excess": clipping.max_excess}
            result.chunks.append(chunk)
            sink.on_reply(call, reply, executed)
            if counters.first_success_control is not None:
                result.outcome = "success"
                result.termination = "success"
                break
            if reply.stop:
                counters.stop_signals += 1
                consecutive_stops += 1
                if stop_rule.consecutive is not None and consecutive_stops >= stop_rule.consecutive:
                    result.truncation = "voluntary_stop"
                    break
            else:
                consecutive_stops = 0
    except EpisodeError as exc:
        result.outcome = "errored"
        result.error = error_record(exc)
    return result


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
