"""The controller's side of ``--libero-decide``: the spec a run records, the decision kept
as records arrive, and the signal that stops the cases left.

:class:`Decider` hears each record once it is kept (``pytest_libero_case_recorded``,
hookspecs.py; a resumed run's records, too, from the recorder). Once the decision is
made, the decider writes ``decision.json`` into the run folder (atomically): every
process that would start a case looks for it first and starts none (an xdist worker's
queued case, which the controller can no longer take back, is skipped as decided), and
the controller's scheduler hands out no more (``config/decide_scheduling.py``). Without
xdist, :class:`DecidedLoop` stops pytest's run loop itself. Cases already running finish
and are recorded: they count in the rates, not in the decision.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.config.decide import (
    PROGRESS_SCORE,
    SUCCESS_SCORE,
    DecideSettings,
    draw_seed,
    drawn_order,
    running_order,
)
from pytest_libero.config.plan import Gates, RunPlan
from pytest_libero.episode.record import CaseRecord
from pytest_libero.files import json_text, write_json_atomic
from pytest_libero.goals.score import derived_score
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.decision import ANYTIME, DecideSpec, Tracker, recompute
from pytest_libero.results.decision_summary import decision_line, summary_block
from pytest_libero.results.layout import DAMAGED, DECISION_NAME, RUN_NAME, SUMMARY_NAME, read_json
from pytest_libero.results.rates import COMPLETED
from pytest_libero.results.run_reader import shown


def decide_spec(decide: DecideSettings, gates: Gates, plan: RunPlan,
                baseline: Mapping[str, CaseRecord] | None,
                previous: Mapping[str, Any] | None = None) -> DecideSpec:
    """The spec of this run: a new one (its seed given or drawn now), or the one a resumed
    run recorded (its seed, unless this command gives one: then they are compared)."""
    native = [e.case_id for e in plan.owned]
    seed = None
    order: tuple[str, ...] = tuple(native)
    if decide.mode == ANYTIME:
        recorded = previous.get("order_seed") if previous else None
        seed = decide.order_seed if decide.order_seed is not None else (
            int(recorded) if isinstance(recorded, int) else draw_seed())
        order = drawn_order(native, seed)
    outcomes = {c: str(r["outcome"]) for c, r in (baseline or {}).items()
                if r["outcome"] in COMPLETED}
    scores = baseline_scores(decide, baseline or {}, native)
    running = running_order(order, native, plan.mode) if decide.mode == ANYTIME else order
    return DecideSpec(
        mode=decide.mode, order=order, alpha=decide.alpha, order_seed=seed, margin=decide.margin,
        min_success=gates.min_success, min_safe_success=gates.min_safe_success,
        baseline_alpha=gates.alpha if gates.baseline is not None else None,
        baseline={c: outcomes[c] for c in native if c in outcomes},
        running=() if running == order else running, score=decide.score, baseline_scores=scores)


def baseline_scores(decide: DecideSettings, baseline: Mapping[str, CaseRecord],
                    native: Sequence[str]) -> dict[str, float]:
    """``--libero-decide-score=progress``: the baseline's score of each selected case it
    completed with one; refused when it has none (a baseline recorded before scores)."""
    if decide.score != PROGRESS_SCORE:
        return {}
    scores = {c: score for c in native if (r := baseline.get(c)) is not None
              and r["outcome"] in COMPLETED and (score := derived_score(r)) is not None}
    if not scores:
        raise SetupError("--libero-decide-score=progress compares each case's partial-credit "
                         "score with the baseline's, and the baseline run has no completed case "
                         "of this selection with a score (it was recorded before pytest-libero "
                         "recorded progress, or by an adapter that does not): compare on success "
                         "(--libero-decide-score=success), or run the baseline again")
    return scores


def decide_key(run: Mapping[str, Any]) -> str:
    """What two folders (or a folder and the command resuming it) must share to be one
    run: whether it decides early, and then its mode, alpha, seed, margin, gates, the
    baseline's outcomes and the orders drawn, as one line."""
    block = run.get("decide")
    if not isinstance(block, Mapping):
        return "none: every case runs"
    baseline = json_text([block.get("baseline"), block.get("baseline_scores")]).encode()
    gates = block.get("gates")
    asked = ", ".join(f"{k}={v}" for k, v in sorted(gates.items()) if v is not None) if isinstance(
        gates, Mapping) else repr(gates)
    orders = json_text([block.get("order"), block.get("running")]).encode()
    return (f"{block.get('mode')}, alpha {block.get('alpha')}, seed {block.get('order_seed')}, "
            f"margin {block.get('margin')}, score {block.get('score', SUCCESS_SCORE)}, gates {asked}, "
            f"baseline outcomes "
            f"{hashlib.sha256(baseline).hexdigest()[:12]}, orders "
            f"{hashlib.sha256(orders).hexdigest()[:12]}")


def recorded_spec(run: Mapping[str, Any], selected: Sequence[str],
                  folders: Sequence[Path] = ()) -> DecideSpec | None:
    """run.json's decide block, read strictly; None for a run that decides nothing. The
    orders it records are recomputed from its seed and selection and must be those: a run
    folder never chooses which cases its decision reads first. A folder among
    ``folders`` that holds a decision while run.json decides nothing is refused."""
    block = run.get("decide")
    if block is None:
        kept = [str(folder) for folder in folders if (folder / DECISION_NAME).is_file()]
        if kept:
            raise SetupError(f"{kept[0]} holds {DECISION_NAME}, but its {RUN_NAME} decides "
                             f"nothing (decide is null); {DAMAGED}")
        return None
    try:
        spec = DecideSpec.from_dict(block)
    except ValueError as exc:
        raise SetupError(f"{exc}; {DAMAGED}") from None
    plan = run.get("plan")
    mode = plan.get("mode") if isinstance(plan, Mapping) else None
    problem = order_problem(spec, selected, str(mode))
    if problem:
        raise SetupError(f"{RUN_NAME}'s decide block does not read ({problem}); {DAMAGED}")
    return spec


def tracker_of(run: Mapping[str, Any], selected: Sequence[str], records: Sequence[CaseRecord],
               folders: Sequence[Path] = ()) -> Tracker | None:
    """The decision of a run folder (:func:`recorded_spec`) recomputed from its records in
    the order given (results.jsonl's); None for a run that decides nothing."""
    spec = recorded_spec(run, selected, folders)
    return None if spec is None else recompute(spec, selected, records)


def order_problem(spec: DecideSpec, selected: Sequence[str], mode: str) -> str | None:
    """How the recorded order or running order differs from what the recorded seed
    draws from the selection (exact: the native order), or None."""
    drawn = tuple(selected) if spec.mode != ANYTIME or spec.order_seed is None else drawn_order(
        selected, spec.order_seed)
    running = running_order(drawn, selected, mode) if spec.mode == ANYTIME else drawn
    for name, recorded, expected in (("order", spec.order, drawn),
                                     ("running", spec.running or spec.order, running)):
        if recorded == expected:
            continue
        at = next((i for i, (a, b) in enumerate(zip(recorded, expected)) if a != b),
                  min(len(recorded), len(expected)))
        source = (f"the order seed {spec.order_seed} draws from" if spec.mode == ANYTIME
                  else "the native order of")
        return (f"{name} is not {source} its {len(expected)} selected cases: "
                f"{len(recorded)} recorded, first different at position {at + 1} "
                f"({shown(recorded[at]) if at < len(recorded) else 'none'} where "
                f"{shown(expected[at]) if at < len(expected) else 'none'} belongs)")
    return None


class Decider:
    """The decision of one session's run, kept as records arrive (:meth:`observe`; in a
    session, a listener of the records), and ``decision.json`` written once it is made."""

    def __init__(self, spec: DecideSpec, selected: Sequence[str], folder: Path) -> None:
        self.spec = spec
        self.tracker = Tracker(spec, selected)
        self.folder = folder
        self.write_error: str | None = None

    @property
    def decided(self) -> bool:
        return self.tracker.decision is not None

    @property
    def running(self) -> tuple[str, ...]:
        """The order this run hands its cases out in."""
        return self.spec.running or self.spec.order

    def pytest_libero_case_recorded(self, record: CaseRecord) -> None:
        """Each case's record, already in results.jsonl (so decision.json never counts a
        record the run folder lacks)."""
        self.observe(record)

    def observe(self, record: CaseRecord) -> None:
        before = self.decided
        decision = self.tracker.add(record)
        if decision is not None and not before:
            try:
                block = decision.as_dict()
                write_json_atomic(self.folder / DECISION_NAME, {**block, "line": decision_line(block)})
            except OSError as exc:  # the cases left then run: nothing is lost but time
                self.write_error = f"could not write {self.folder / DECISION_NAME}: {exc}"


def check_decision(run: Mapping[str, Any], records: Sequence[CaseRecord],
                   folder: Path) -> dict[str, Any] | None:
    """``pytest-libero verify``: the decision recomputed from run.json and results.jsonl
    (in its order) beside the one the run recorded (summary.json's, else decision.json's);
    None for a run that decides nothing."""
    plan = run.get("plan") or {}
    tracker = tracker_of(run, list(plan.get("selection_cases") or []), records, [folder])
    if tracker is None:
        return None
    block = summary_block(tracker)
    mine = {k: block.get(k) for k in ("mode", "verdict", "decided_after", "of")}
    recorded = None
    for name in (SUMMARY_NAME, DECISION_NAME):
        try:  # bounded, a regular file only (layout.read_json); damaged or absent: not recorded
            found = read_json(folder, name) if (folder / name).is_file() else None
        except SetupError:
            continue
        found = found.get("decision", found) if name == SUMMARY_NAME and isinstance(found, dict) else found
        if isinstance(found, dict) and "verdict" in found:
            recorded = {k: found.get(k) for k in mine}
            break
    return {"recomputed": mine, "recorded": recorded,
            "agrees": None if recorded is None else recorded == mine,
            "line": decision_line(block)}


def decided_line(run_dir: Path) -> str | None:
    """The decision's line when this run's verdict is decided (``decision.json`` is
    there), else None: the check every process makes before it starts a case."""
    if not (run_dir / DECISION_NAME).is_file():
        return None
    try:
        found = read_json(run_dir, DECISION_NAME)
    except SetupError:  # there, but unreadable: still decided
        return "decided"
    return str(found.get("line", "decided")) if isinstance(found, dict) else "decided"


class DecidedLoop:
    """Without xdist: pytest's run loop, stopped once the run is decided (the next case,
    set up ahead, is discarded with its process at the session's end)."""

    def __init__(self, decider: Decider) -> None:
        self.decider = decider

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if session.testsfailed or session.config.option.collectonly:
            return None  # pytest's own loop says what to say
        items = session.items
        for i, item in enumerate(items):
            if self.decider.decided:
                break
            following = items[i + 1] if i + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=following)
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        return True
