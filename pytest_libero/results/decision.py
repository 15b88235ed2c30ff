"""Deciding a gated run early (``--libero-decide``): the rule over the records as they come.

:class:`DecideSpec` is what run.json keeps under ``decide``: the mode, alpha, the order
the cases were drawn in and the gates with their inputs (the baseline's outcomes
included), so the decision can be recomputed from the run folder alone.
:class:`Tracker` takes the records in the order the controller received them and
answers, after each, whether the run's verdict is decided:

- the exact rule (``exact.py``), on every finished case, in either mode: a gate whose
  verdict no outcome left can change is decided;
- in ``anytime`` mode, also the betting test (``betting.py``) of each gate, fed only the
  longest prefix of the drawn order whose cases have all finished, so the order in which
  cases finish (successes end sooner) cannot bias it. Each gate's two bettors (against
  "the rate is below the threshold" and against "at or above it") share alpha / k, k
  being the gates tested, and the first to reach k / alpha decides the gate.

The run is decided once a gate fails, or every gate passes. Pure: records in, a
:class:`Decision` out; what it says (its line, summary.json's block, the interval) is
``decision_summary.py``'s, the controller's plumbing ``decider.py``'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_libero.config.decide import DECIDE_SCORES, PROGRESS_SCORE, SUCCESS_SCORE
from pytest_libero.episode.record import CaseRecord
from pytest_libero.goals.score import derived_score
from pytest_libero.protocol.text import echo
from pytest_libero.results.betting import Wealth
from pytest_libero.results.exact import FAIL, PASS, Exact, baseline_rule, safe_success_rule, success_rule
from pytest_libero.results.layout import RUN_NAME
from pytest_libero.results.summary import safety_class

EXACT = "exact"
ANYTIME = "anytime"
MODES = (EXACT, ANYTIME)
GATE_LABELS = {"min_success": "min-success", "min_safe_success": "min-safe-success",
               "baseline": "baseline"}


@dataclass(frozen=True)
class DecideSpec:
    """What a run decides and from what: run.json's ``decide`` block."""

    mode: str
    order: tuple[str, ...]
    """The cases in the order they were drawn (anytime: seeded, uniformly random; exact:
    the native order)."""
    alpha: float | None = None
    order_seed: int | None = None
    margin: float = 0.05
    min_success: float | None = None
    min_safe_success: float | None = None
    baseline_alpha: float | None = None
    """McNemar's level, when a baseline gate is asked for (None: no baseline gate)."""
    baseline: Mapping[str, str] = field(default_factory=dict)
    """The baseline's outcome (success or failure) of each selected case it completed."""
    running: tuple[str, ...] = ()
    """The order cases are handed out in, when it is not ``order`` (full mode: the drawn
    order's first part, then the rest in native order; docs/decide.md)."""
    score: str = SUCCESS_SCORE
    """What the baseline gate's betting test compares per case: success, or progress (the
    partial-credit score; the exact rule stays on success)."""
    baseline_scores: Mapping[str, float] = field(default_factory=dict)
    """score progress: the baseline's score of each selected case it completed with one."""

    @property
    def gates(self) -> list[str]:
        found = [("min_success", self.min_success), ("min_safe_success", self.min_safe_success),
                 ("baseline", self.baseline_alpha)]
        return [key for key, value in found if value is not None]

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "alpha": self.alpha, "order_seed": self.order_seed,
                "margin": self.margin, "order": list(self.order),
                "running": list(self.running or self.order),
                "gates": {"min_success": self.min_success,
                          "min_safe_success": self.min_safe_success,
                          "baseline_alpha": self.baseline_alpha},
                "baseline": dict(self.baseline) if self.baseline_alpha is not None else None,
                **({"score": self.score, "baseline_scores": dict(self.baseline_scores)}
                   if self.score != SUCCESS_SCORE else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecideSpec:
        """The block as run.json holds it, every field of its own type and range
        (ValueError naming the first that is not: nothing is coerced, so a seed of 7.9 is
        refused, never read as 7)."""
        try:
            if not isinstance(data, Mapping):
                raise ValueError(f"it is a {type(data).__name__}, not a table")
            gates = data["gates"]
            if not isinstance(gates, Mapping):
                raise ValueError(f"gates is a {type(gates).__name__}, not a table")
            mode = data["mode"]
            if mode not in MODES:
                raise ValueError(f"mode is {echo(mode)}; a run writes one of {', '.join(MODES)}")
            order = _cases(data["order"], "order")
            running = _cases(data.get("running") or [], "running")
            return cls(mode=mode, order=order, running=() if running == order else running,
                       alpha=_level(data.get("alpha"), "alpha", required=mode == ANYTIME),
                       order_seed=_seed(data.get("order_seed"), required=mode == ANYTIME),
                       margin=_rate(data.get("margin", 0.05), "margin", required=True) or 0.0,
                       min_success=_rate(gates.get("min_success"), "gates.min_success"),
                       min_safe_success=_rate(gates.get("min_safe_success"), "gates.min_safe_success"),
                       baseline_alpha=_level(gates.get("baseline_alpha"), "gates.baseline_alpha"),
                       baseline=_outcomes(data.get("baseline")),
                       score=_score(data.get("score", SUCCESS_SCORE)),
                       baseline_scores=_scores(data.get("baseline_scores")))
        except (KeyError, ValueError) as exc:
            said = f"{exc.args[0]} is missing" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"{RUN_NAME}'s decide block does not read ({said})") from None


def _number(value: Any, name: str) -> float:
    """A finite JSON number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} is {echo(value)}, not a finite number")
    return float(value)


def _rate(value: Any, name: str, *, required: bool = False) -> float | None:
    """A threshold or margin: a number in [0, 1], or None where it may be absent."""
    if value is None and not required:
        return None
    number = _number(value, name)
    if not 0 <= number <= 1:
        raise ValueError(f"{name} is {echo(value)}, outside [0, 1]")
    return number


def _level(value: Any, name: str, *, required: bool = False) -> float | None:
    """A significance level: a number in (0, 1), or None where it may be absent."""
    if value is None and not required:
        return None
    number = _number(value, name)
    if not 0 < number < 1:
        raise ValueError(f"{name} is {echo(value)}, outside (0, 1)")
    return number


def _seed(value: Any, *, required: bool) -> int | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"order_seed is {echo(value)}, not a whole number")
    return value


def _cases(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(case, str) for case in value):
        raise ValueError(f"{name} is not a list of case ids")
    return tuple(value)


def _outcomes(value: Any) -> dict[str, str]:
    """The baseline's outcome of each case: success or failure."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and v in ("success", "failure") for k, v in value.items()):
        raise ValueError("baseline is not a table of case ids to success or failure")
    return dict(value)


def _score(value: Any) -> str:
    if value not in DECIDE_SCORES:
        raise ValueError(f"score is {echo(value)}; a run writes one of {', '.join(DECIDE_SCORES)}")
    return str(value)


def _scores(value: Any) -> dict[str, float]:
    """The baseline's score of each case: a number in [0, 1]."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError("baseline_scores is not a table of case ids to scores")
    return {case: float(_rate(v, f"baseline_scores[{echo(case)}]", required=True) or 0.0)
            for case, v in value.items()}


@dataclass
class GateState:
    """One gate while the run goes: its exact counts, its bettors, its verdict."""

    key: str
    threshold: float
    population: frozenset[str] | None
    """The cases this gate's test draws from (None: every selected case)."""
    size: int
    bettors: tuple[Wealth, Wealth] | None = None
    """(against "below", against "at or above"): a pass, then a fail; None in exact mode."""
    limit: float = 0.0
    verdict: str | None = None
    by: str | None = None
    at: int | None = None
    suspended: str | None = None
    """Why the betting test stopped for this gate (a case it cannot score)."""
    exact: Exact = field(default_factory=lambda: Exact(None))

    def statistic(self) -> dict[str, Any]:
        found: dict[str, Any] = {"exact": self.exact.bound}
        if self.bettors is not None:
            passing, failing = self.bettors
            found["wealth_pass"] = passing.wealth
            found["wealth_fail"] = failing.wealth
            found["threshold"] = self.limit
            found["draws"] = passing.seen
            if self.suspended:
                found["suspended"] = self.suspended
        return found

    def as_dict(self) -> dict[str, Any]:
        return {"gate": self.key, "threshold": self.threshold, "verdict": self.verdict,
                "by": self.by, "decided_after": self.at, "statistic": self.statistic()}


@dataclass(frozen=True)
class Decision:
    """The run's decision: its verdict, when it came and what each gate said."""

    mode: str
    alpha: float | None
    order_seed: int | None
    verdict: str
    decided_after: int
    """Cases whose outcomes the verdict rests on: the drawn order's prefix for the
    betting test, the finished cases for the exact rule."""
    of: int
    prefix: int
    """The drawn order's prefix the betting test had seen (0 in exact mode)."""
    gates: tuple[dict[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "alpha": self.alpha, "order_seed": self.order_seed,
                "verdict": self.verdict, "decided_after": self.decided_after, "of": self.of,
                "prefix": self.prefix, "gates": [dict(g) for g in self.gates]}



class Tracker:
    """The decision over records in arrival order (:meth:`add` one at a time)."""

    def __init__(self, spec: DecideSpec, selected: Sequence[str]) -> None:
        self.spec = spec
        self.selected = list(selected)
        self._chosen = set(self.selected)
        self.finished: dict[str, CaseRecord] = {}
        self.prefix = 0
        self.decision: Decision | None = None
        tested = spec.gates
        self.gates = [self._gate(key, len(tested)) for key in tested]
        self._baseline_left = {"success": 0, "failure": 0}
        for case in selected:
            outcome = spec.baseline.get(case)
            if outcome in self._baseline_left:
                self._baseline_left[outcome] += 1
        self._counts: dict[str, int] = {}
        self.interval_cache: tuple[tuple[int, int], dict[str, Any] | None] | None = None

    def _gate(self, key: str, tested: int) -> GateState:
        spec = self.spec
        if key == "baseline":
            compared = spec.baseline_scores if spec.score == PROGRESS_SCORE else spec.baseline
            population = frozenset(c for c in self.selected if c in compared)
            gate = GateState(key, float(spec.baseline_alpha or 0.0), population, len(population))
            nulls = ((1.0 - spec.margin) / 2.0, 0.5)  # D > -margin; D < 0 (x = (d + 1) / 2)
        else:
            threshold = spec.min_success if key == "min_success" else spec.min_safe_success
            gate = GateState(key, float(threshold or 0.0), None, len(self.selected))
            nulls = (gate.threshold, gate.threshold)
        if spec.mode == ANYTIME and spec.alpha is not None and gate.size:
            gate.bettors = (Wealth(gate.size, nulls[0], +1), Wealth(gate.size, nulls[1], -1))
            gate.limit = tested / spec.alpha
        return gate

    def add(self, record: CaseRecord) -> Decision | None:
        """One more finished case; the decision once there is one (it never changes)."""
        case = record["case"]
        if case in self.finished or case not in self._chosen:
            return self.decision
        self.finished[case] = record
        self._count(record)
        if self.decision is not None:
            return self.decision
        for gate in self.gates:
            self._exact(gate)
        if self.spec.mode == ANYTIME:
            self._advance()
        return self._settle()

    def _count(self, record: CaseRecord) -> None:
        counts = self._counts
        outcome = str(record["outcome"])
        counts[outcome] = counts.get(outcome, 0) + 1
        safety = safety_class(record)
        if safety is not None:
            counts[f"safety:{safety}"] = counts.get(f"safety:{safety}", 0) + 1
        base = self.spec.baseline.get(record["case"])
        if base in self._baseline_left:
            self._baseline_left[base] -= 1
            if outcome in ("success", "failure"):
                change = {("success", "failure"): "lost", ("failure", "success"): "gained"}
                key = change.get((base, outcome), "same")
                counts[f"pair:{key}"] = counts.get(f"pair:{key}", 0) + 1

    def _exact(self, gate: GateState) -> None:
        c = self._counts
        left = len(self.selected) - len(self.finished)
        if gate.key == "min_success":
            gate.exact = success_rule(c.get("success", 0), c.get("failure", 0), c.get("errored", 0),
                                      left, gate.threshold)
        elif gate.key == "min_safe_success":
            counted = sum(v for k, v in c.items() if k.startswith("safety:")
                          and k != "safety:unmonitored")
            gate.exact = safe_success_rule(c.get("safety:safe_success", 0), counted,
                                           c.get("errored", 0), left, gate.threshold)
        else:
            paired = sum(c.get(f"pair:{k}", 0) for k in ("lost", "gained", "same"))
            gate.exact = baseline_rule(c.get("pair:lost", 0), c.get("pair:gained", 0),
                                       self._baseline_left["success"], self._baseline_left["failure"],
                                       paired + sum(self._baseline_left.values()), gate.threshold)
        if gate.verdict is None and gate.exact.verdict is not None:
            gate.verdict, gate.by, gate.at = gate.exact.verdict, EXACT, len(self.finished)

    def _advance(self) -> None:
        """Feed the bettors every case of the drawn order up to the first unfinished one."""
        order = self.spec.order
        while self.prefix < len(order) and order[self.prefix] in self.finished:
            record = self.finished[order[self.prefix]]
            self.prefix += 1
            for gate in self.gates:
                if gate.verdict is None and gate.bettors is not None and not gate.suspended:
                    self._feed(gate, record)

    def _feed(self, gate: GateState, record: CaseRecord) -> None:
        assert gate.bettors is not None
        if gate.population is not None and record["case"] not in gate.population:
            return
        x = draw(gate.key, record, self.spec.baseline.get(record["case"]),
                 self.spec.baseline_scores.get(record["case"]) if self.spec.score == PROGRESS_SCORE
                 else None)
        if isinstance(x, str):
            gate.suspended = x
            return
        for bettor in gate.bettors:
            bettor.observe(x)
        passing, failing = gate.bettors
        for verdict, bettor in ((FAIL, failing), (PASS, passing)):
            if bettor.reached(gate.limit):
                gate.verdict, gate.by, gate.at = verdict, ANYTIME, self.prefix
                return

    def _settle(self) -> Decision | None:
        verdicts = [g.verdict for g in self.gates]
        if FAIL in verdicts:
            verdict = FAIL
            deciding = [g for g in self.gates if g.verdict == FAIL]
        elif verdicts and all(v == PASS for v in verdicts):
            verdict = PASS
            deciding = self.gates
        else:
            return None
        self.decision = Decision(
            mode=self.spec.mode, alpha=self.spec.alpha, order_seed=self.spec.order_seed,
            verdict=verdict, decided_after=max(int(g.at or 0) for g in deciding),
            of=len(self.selected), prefix=self.prefix,
            gates=tuple(g.as_dict() for g in self.gates))
        return self.decision

    def state(self) -> tuple[dict[str, Any], ...]:
        """Every gate as it stands (for an undecided run's summary)."""
        return tuple(g.as_dict() for g in self.gates)


def draw(gate: str, record: CaseRecord, baseline: str | None,
         baseline_score: float | None = None) -> float | str:
    """The number a gate's test draws for a finished case, in [0, 1]; or why the test
    cannot score it (then it stops for that gate, and the exact rule goes on). With
    ``baseline_score`` the baseline gate draws the difference of the two scores, which is
    as bounded as that of the outcomes: (mine - theirs + 1) / 2."""
    outcome = record["outcome"]
    if outcome == "errored":
        return f"{record['case']} errored"
    if gate == "baseline" and baseline_score is not None:
        mine = derived_score(record)
        if mine is None:
            return f"{record['case']} has no score"
        return (mine - baseline_score + 1) / 2.0
    if gate == "min_success":
        return 1.0 if outcome == "success" else 0.0
    if gate == "min_safe_success":
        safety = safety_class(record)
        if safety == "unmonitored":
            return f"{record['case']} has no safety verdict"
        return 1.0 if safety == "safe_success" else 0.0
    mine = 1 if outcome == "success" else 0
    theirs = 1 if baseline == "success" else 0
    return (mine - theirs + 1) / 2.0


def recompute(spec: DecideSpec, selected: Sequence[str],
              records: Iterable[CaseRecord]) -> Tracker:
    """The tracker after every record, in the order given (results.jsonl's)."""
    tracker = Tracker(spec, selected)
    for record in records:
        tracker.add(record)
    return tracker


def decided_cases(tracker: Tracker) -> list[str]:
    """The selected cases not run because the verdict was decided, in selection order."""
    if tracker.decision is None:
        return []
    return [c for c in tracker.selected if c not in tracker.finished]
