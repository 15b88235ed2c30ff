"""Each reply's place on the simulated clock, as actions.jsonl keeps it, checked without a
simulator against the record and the clock's rules (protocol/clock.py).

Re-execution replays the actions where actions.jsonl puts them, so a delay that no
rule made, or a call sent at a control the clock would not send it at, would otherwise
pass as long as the hashes were updated with it; the export builds its frames from the
same fields. Checked per reply: the record's ``chunks`` say the same; the delay is the
one the clock's rule gives (0 when synchronous, the case's kind's own delay, or on the
realtime clock the call's measured latency in controls); a reply's first executed
action is the one its delay reaches; each call is sent at the control the one before
it makes due. A line written before the clock (no ``sent_at_control``) has none of
this to check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_libero.catalog.entries import Entry
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.layout import ACTIONS_NAME
from pytest_libero.evidence.reader import ChunkRecord
from pytest_libero.perturb import registry
from pytest_libero.protocol.clock import REALTIME, measured_delay
from pytest_libero.protocol.text import echo

DelayRule = Callable[[int, Any], int]
"""The delay a rule gives a call, from its number and its recorded latency."""
COMPARED = ("sent_at_control", "delay_controls", "first_executed_index", "executed", "horizon")
"""What actions.jsonl and the record's chunks both keep of a reply."""


def timeline_problem(record: CaseRecord, chunks: Sequence[ChunkRecord], clock: str) -> str | None:
    """Why the replies in ``chunks`` (actions.jsonl, read) do not stand on the clock the
    run's ``clock`` and the case's perturbation make; None when they do."""
    rule = _rule(record, clock)
    if isinstance(rule, str):
        return rule
    summaries: dict[object, Mapping[str, Any]] = {
        c.get("call"): c for c in record.get("chunks") or [] if isinstance(c, Mapping)}
    interval = record["budget"]["replan_interval"]
    due: tuple[int, str] | None = None
    """The control the next call is due at, and why."""
    for chunk in chunks:
        sent = chunk.sent_at_control
        if sent is None:
            return None  # written before the clock: chunks ran one after another
        where = f"{ACTIONS_NAME}: call {chunk.call}"
        if due is not None and sent != due[0]:
            return f"{where} was sent at control {sent}, but the clock sends it at {due[0]} ({due[1]})"
        if not chunk.complete:
            return None  # the case's last call, cut short by its error
        problem = _reply_problem(chunk, summaries.get(chunk.call), rule, clock, where)
        if problem is not None:
            return problem
        horizon, delay = chunk.horizon or 0, chunk.delay_controls
        due = (sent + max(min(interval, horizon), delay),
               f"call {chunk.call}: sent at {sent}, {horizon} actions, {delay} controls late, "
               f"K = {interval}")
    return None


def _reply_problem(chunk: ChunkRecord, summary: Mapping[str, Any] | None, rule: DelayRule,
                   clock: str, where: str) -> str | None:
    if summary is None or type(chunk.call) is not int:
        return f"{where} is not among the record's chunks"
    line = {"sent_at_control": chunk.sent_at_control, "delay_controls": chunk.delay_controls,
            "first_executed_index": chunk.first_executed_index, "executed": chunk.executed,
            "horizon": chunk.horizon}
    for key in COMPARED:
        theirs = summary.get(key, 0 if key == "delay_controls" else None)
        if type(theirs) is not type(line[key]) or theirs != line[key]:
            return f"{where}'s {key} is {echo(line[key])}, the record's chunks say {echo(theirs)}"
    latency = summary.get("latency_s")
    try:
        expected = rule(chunk.call, latency)
    except Exception as exc:
        return f"{where}: its delay cannot be recomputed ({type(exc).__name__}: {echo(str(exc))})"
    if type(expected) is not int or expected != chunk.delay_controls:
        why = (f"the realtime clock at its measured {echo(latency)} s" if clock == REALTIME
               else "the case's perturbation" if expected else "the synchronous protocol")
        return (f"{where} is recorded {_controls(chunk.delay_controls)} late; {why} makes it "
                f"{echo(expected)}")
    if chunk.executed and chunk.first_executed_index != chunk.delay_controls:
        return (f"{where} first ran its action {chunk.first_executed_index}, but a reply "
                f"{chunk.delay_controls} controls late first runs its action {chunk.delay_controls}")
    return None


def _rule(record: CaseRecord, clock: str) -> DelayRule | str:
    """The delay each reply of this case must have, or why it cannot be known here."""
    if clock == REALTIME:
        return _measured
    try:
        entry = Entry.from_dict(record["entry"])
    except (KeyError, TypeError, ValueError) as exc:
        return f"its entry does not read ({type(exc).__name__}: {echo(str(exc))})"
    return registry.delay_rule(entry)


def _measured(call: int, latency_s: Any) -> int:
    if type(latency_s) not in (int, float) or not 0 <= latency_s < 1e6:
        raise ValueError(f"its latency_s is {echo(latency_s)}, not a number of seconds")
    return measured_delay(float(latency_s))


def _controls(count: int) -> str:
    return f"{count} control{'' if count == 1 else 's'}"
