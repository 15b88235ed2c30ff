"""Run summaries from case records: outcome classes (P11) and success rates.

Pure functions over plain records, shared by the live recorder, the merge command and
the gate, so every path computes the same numbers.

Full mode adds what a run over init states needs: a rate per task over its states, per
suite how much of it the run covers and whether the result stands beside published
full-mode figures (``comparable``), the published figures themselves (marked as such),
and the plan's reasons why the run is partial. Fast mode's summary has none of these
keys: it is exactly what it was before full mode existed.

The safety axis (docs/safety.md) adds a ``safety`` block, in either mode, only when some
record carries the monitor's ``safety``: two-axis classes (native outcome x safety
verdict), the safe-success rate over monitored completed episodes, the engagement
ladder and the unsafe cases. Records without a monitor leave the summary as it was.
Records with a partial-credit score (docs/records.md) add ``score`` (mean and interval)
beside the overall and each suite's rate; records without leave it as it was."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import Catalog, Entry, load_catalog
from pytest_libero.episode.record import CaseRecord
from pytest_libero.protocol.clock import SYNCHRONOUS
from pytest_libero.protocol.parameters import FULL_STATES_PER_TASK
from pytest_libero.results.latency import latency_summary
from pytest_libero.results.published import AVERAGE, PublishedResults, load_published
from pytest_libero.results.rates import COMPLETED, rate_object, success_rate
from pytest_libero.results.robustness import robustness_summary, suite_key
from pytest_libero.results.scores import has_scores, score_object
from pytest_libero.safety.verdict import ENGAGEMENT, VERDICTS

SAFETY_CLASSES = ("safe_success", "unsafe_success", "safe_failure", "unsafe_failure",
                  "vacuous", "unmonitored")
"""Two-axis classes of a completed case; errored cases have none."""


def summarize(
    selected: Sequence[str],
    records: Mapping[str, CaseRecord],
    *,
    mode: str = "fast",
    partial: Sequence[str] = (),
    selection: Mapping[str, Any] | None = None,
    state_fed: str | None = None,
    clock: str = SYNCHRONOUS,
    decided: Sequence[str] | None = None,
    **identity: Any,
) -> dict[str, Any]:
    """Counts of every outcome class and rates per suite and overall.

    ``decided``: a run that decides early (``--libero-decide``) names the cases it did not
    run because its verdict was decided: their own class, ``decided``, neither
    unattempted nor errored (None: a run that decides nothing has no such class).

    ``mode``, ``partial`` and ``selection`` are the plan's (``RunPlan.mode``,
    ``.partial``, ``.as_dict()["selection"]``); in full mode they add the per-task,
    coverage and published-figure keys (:func:`full_mode_summary`). ``state_fed`` is
    what the profile fed as state (``proprio``, ``constant``, ``none``): kept in the
    summary, and set beside published figures whose loop fed another state.
    """
    done = [records[c] for c in selected if c in records]
    skipped = set(decided or ())
    outcomes = Counter(r["outcome"] for r in done)
    by_suite: dict[str, list[CaseRecord]] = {}
    for record in done:
        by_suite.setdefault(suite_key(record), []).append(record)
    summary = {
        **identity,
        "counts": {
            "selected": len(selected),
            "completed": outcomes["success"] + outcomes["failure"],
            "success": outcomes["success"],
            "failure": outcomes["failure"],
            "errored": outcomes["errored"],
            "unattempted": len(selected) - len(done) - len(skipped),
            **({"decided": len(skipped)} if decided is not None else {}),
        },
        "overall": success_rate(done),
        "suites": {suite: success_rate(rs) for suite, rs in by_suite.items()},
        "errored": [r["case"] for r in done if r["outcome"] == "errored"],
        "unattempted": [c for c in selected if c not in records and c not in skipped],
        **({"decided": [c for c in selected if c in skipped]} if decided is not None else {}),
        "clipping": clipping_totals(done),
    }
    latency = latency_summary(done, clock)
    if latency is not None:
        summary["latency"] = latency
    horizons = reply_horizons(done)
    if horizons is not None:
        summary["reply_horizon"] = horizons
    if state_fed is not None:
        # The records may know better (a served policy that said what it fed instead).
        fed = {r["state_fed"] for r in done if r.get("state_fed")}
        state_fed = fed.pop() if len(fed) == 1 else ("mixed" if fed else state_fed)
        summary["state_fed"] = state_fed
    if mode == "full":
        summary.update(full_mode_summary(selected, records, partial=partial, selection=selection,
                                         state_fed=state_fed, decided=skipped))
    robustness = robustness_summary({r["case"]: r for r in done})
    if robustness is not None:
        summary["robustness"] = robustness
    if any("safety" in r for r in done):
        summary["safety"] = safety_summary(done)
        for suite, rate in summary["suites"].items():
            rate["safe_success"] = safe_success_rate(by_suite[suite])
    if has_scores(done):
        summary["overall"]["score"] = score_object(done)
        for suite, rate in summary["suites"].items():
            rate["score"] = score_object(by_suite[suite])
    return summary


def reply_horizons(records: Sequence[CaseRecord]) -> dict[str, Any] | None:
    """How many actions the policy's replies held, over the run, and the note for replies
    shorter than K (said once here, not once per case); None before records had it."""
    held = [int(n) for r in records if (n := r.get("reply_horizon"))]
    if not held:
        return None
    short = [r for r in records if r.get("reply_note")]
    fewest = min(short, key=lambda r: r.get("reply_horizon") or 0) if short else None
    return {"fewest": min(held), "most": max(held), "short_cases": len(short),
            "note": fewest["reply_note"] if fewest is not None else None}


def safety_verdict(record: Mapping[str, Any]) -> str | None:
    """The monitor's verdict (safe, unsafe, vacuous), or None when the record has none."""
    safety = record.get("safety")
    verdict = safety.get("verdict") if isinstance(safety, Mapping) else None
    return str(verdict) if verdict in VERDICTS else None


def safety_class(record: Mapping[str, Any]) -> str | None:
    """The two-axis class of a case: native outcome x safety verdict.

    ``vacuous`` whatever the outcome (a policy that never touched anything is never
    credited as safe); ``safe_success``, ``unsafe_success``, ``safe_failure``,
    ``unsafe_failure``; ``unmonitored`` for a completed case without a verdict (an
    adapter without a monitor, an older record); None for an errored case.
    """
    outcome = record.get("outcome")
    if outcome not in COMPLETED:
        return None
    verdict = safety_verdict(record)
    if verdict is None:
        return "unmonitored"
    if verdict == "vacuous":
        return "vacuous"
    return f"{verdict}_{outcome}"


def safe_success_rate(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """Safe successes over completed episodes with a safety verdict (vacuous included),
    the same object as :func:`success_rate`."""
    classes = [c for r in records if (c := safety_class(r)) not in (None, "unmonitored")]
    return rate_object(classes.count("safe_success"), len(classes))


def safety_summary(records: Sequence[CaseRecord]) -> dict[str, Any]:
    """summary.json's ``safety`` block, over the completed cases of ``records``."""
    completed = [r for r in records if r["outcome"] in COMPLETED]
    classes = Counter(safety_class(r) for r in completed)
    engagement = Counter(r.get("engagement") for r in completed)
    unsafe = [r for r in completed if safety_verdict(r) == "unsafe"]
    return {
        "classes": {name: classes[name] for name in SAFETY_CLASSES},
        "safe_success": safe_success_rate(completed),
        "engagement": {level: engagement[level] for level in ENGAGEMENT},
        "unsafe_cases": [r["case"] for r in unsafe],
        "unsafe": [{"case": r["case"], "class": safety_class(r), "first_event": _first_event(r)}
                   for r in unsafe],
        "events": sum(len(_events(r)) for r in completed if safety_verdict(r) is not None),
    }


def _events(record: CaseRecord) -> list[Mapping[str, Any]]:
    events = (record.get("safety") or {}).get("events") or []
    return [e for e in events if isinstance(e, Mapping)]


def _first_event(record: CaseRecord) -> dict[str, Any] | None:
    """The earliest event (by control), as the record has it; None if it lists none."""
    events = _events(record)
    if not events:
        return None
    first: Mapping[str, Any] = min(events, key=lambda e: int(e.get("control") or 0))
    return dict(first)


def clipping_totals(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """Clipped action values over the run (out_of_bounds = "clip"); zeros when strict."""
    clipped = [t for r in records if (t := r.get("clipping")) and t["values"]]
    return {
        "cases": len(clipped),
        "chunks": sum(t["chunks"] for t in clipped),
        "values": sum(t["values"] for t in clipped),
        "max_excess": max((t["max_excess"] for t in clipped), default=0.0),
    }


def full_mode_summary(
    selected: Sequence[str],
    records: Mapping[str, CaseRecord],
    *,
    partial: Sequence[str] = (),
    selection: Mapping[str, Any] | None = None,
    state_fed: str | None = None,
    decided: frozenset[str] | set[str] = frozenset(),
) -> dict[str, Any]:
    """The full-mode keys of summary.json, over the cases this summary covers.

    A suite is ``comparable`` with published full-mode figures only when nothing in the
    plan makes the run partial (``partial`` empty: all 50 states, reference horizons),
    this summary holds every task of the suite with all 50 states (not one shard's part),
    and every one of those episodes completed. ``not_comparable_because`` says what is
    missing otherwise. Published figures ride along under ``published_figures``, marked
    as not measured by this run.
    """
    catalog = load_catalog()
    published = load_published()
    asked = list((selection or {}).get("init_states") or [])
    asked_all = not asked or set(asked) == set(range(FULL_STATES_PER_TASK))
    grouped = _TaskCases.of(selected, records)
    grouped.decided = set(decided)
    tasks = {task: _task_row(catalog, grouped, task, records) for task in grouped.cases}
    suites = {suite: _suite_row(catalog, grouped, tasks, suite, records, partial=partial,
                                asked_all=asked_all, published=published.block(suite, state_fed))
              for suite in dict.fromkeys(s for s, _ in grouped.suite.values())}
    return {
        "mode": "full",
        "partial": list(partial),
        "init_states": asked or sorted({s for states in grouped.states.values() for s in states}),
        "tasks": tasks,
        "suites": suites,
        "four_suite_average": _four_suite_average(published, grouped, tasks, suites, records,
                                                  state_fed),
    }


@dataclass
class _TaskCases:
    """The native cases a full-mode summary covers, by task (its case id's task part)."""

    cases: dict[str, list[str]] = field(default_factory=dict)
    """Task -> its selected cases, in selection order."""
    states: dict[str, set[int]] = field(default_factory=dict)
    """Task -> the init states its cases name."""
    suite: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Task -> (suite, task index)."""
    decided: set[str] = field(default_factory=set)
    """Cases not run because the run's verdict was decided (``--libero-decide``)."""

    def gaps(self, cases: Sequence[str], recorded: Sequence[CaseRecord]) -> dict[str, int]:
        """How many of ``cases`` errored, were not attempted, and (in a decided run) were
        not run because the verdict was decided."""
        decided = sum(c in self.decided for c in cases)
        found = {"errored": sum(r["outcome"] == "errored" for r in recorded),
                 "unattempted": len(cases) - len(recorded) - decided}
        return {**found, "decided": decided} if decided else found

    @classmethod
    def of(cls, selected: Sequence[str], records: Mapping[str, CaseRecord]) -> _TaskCases:
        grouped = cls()
        for case in selected:
            try:
                case_id = CaseId.parse(case)
            except ValueError:  # not a catalog case id: its record says which task it ran
                if case not in records:
                    continue
                case_id = Entry.from_dict(records[case]["entry"]).id
            if case_id.variant is not None:  # a generated perturbation: the robustness block has it
                continue
            task = str(case_id.task)
            grouped.suite[task] = (case_id.suite, case_id.index)
            grouped.cases.setdefault(task, []).append(case)
            if case_id.state is not None:
                grouped.states.setdefault(task, set()).add(case_id.state)
        return grouped


def _task_row(catalog: Catalog, grouped: _TaskCases, task: str,
              records: Mapping[str, CaseRecord]) -> dict[str, Any]:
    """One task's rate over its states and how many of them ran."""
    cases = grouped.cases[task]
    suite, index = grouped.suite[task]
    recorded = [records[c] for c in cases if c in records]
    return {
        **success_rate(recorded),
        "suite": suite,
        "index": index,
        "name": _task_name(catalog.suite_entries(suite), index, recorded),
        "states": {"selected": len(cases), **grouped.gaps(cases, recorded)},
    }


def _suite_row(catalog: Catalog, grouped: _TaskCases, tasks: Mapping[str, Mapping[str, Any]],
               suite: str, records: Mapping[str, CaseRecord], *, partial: Sequence[str],
               asked_all: bool, published: dict[str, Any]) -> dict[str, Any]:
    """One suite's rate, how much of it the summary covers and whether it is comparable."""
    mine = [t for t in tasks if tasks[t]["suite"] == suite]
    cases = [c for t in mine for c in grouped.cases[t]]
    recorded = [records[c] for c in cases if c in records]
    of = len(catalog.suite_entries(suite))
    per_task = {len(grouped.cases[t]) for t in mine}
    gaps = grouped.gaps(cases, recorded)
    errored, unattempted = gaps["errored"], gaps["unattempted"]
    reasons = list(partial)
    if len(mine) < of:
        reasons.append(f"{len(mine)} of {of} tasks covered")
    short = [t for t in mine if grouped.states.get(t, set()) != set(range(FULL_STATES_PER_TASK))]
    if short and asked_all:  # with a state subset, the plan's reason already says so
        reasons.append(
            f"{len(short)} of {len(mine)} tasks have fewer than {FULL_STATES_PER_TASK} "
            "init states here (one shard's part? merge the shards)"
        )
    if errored or unattempted:
        reasons.append(
            f"{errored} errored and {unattempted} unattempted episode(s): the rate is "
            f"over {len(recorded) - errored} of {len(cases)} episodes"
        )
    if gaps.get("decided"):
        reasons.append(f"{gaps['decided']} episode(s) not run: the run's verdict was decided "
                       f"early; the rate is over {len(recorded) - errored} of {len(cases)} episodes")
    return {
        **success_rate(recorded),
        "tasks": {"selected": len(mine), "of": of, "text": f"{len(mine)} of {of} tasks"},
        "states_per_task": per_task.pop() if len(per_task) == 1 else None,
        "episodes": {"selected": len(cases), **gaps},
        "comparable": not reasons,
        "not_comparable_because": reasons,
        "published_figures": published,
    }


def _four_suite_average(published: PublishedResults, grouped: _TaskCases,
                        tasks: Mapping[str, Mapping[str, Any]],
                        suites: Mapping[str, Mapping[str, Any]],
                        records: Mapping[str, CaseRecord], state_fed: str | None) -> dict[str, Any]:
    """The average over the published four suites: the mean of their rates when all four
    ran, the pooled rate over their episodes, and the published figure."""
    four = list(published.average_suites)
    pooled = [records[c] for s in four if s in suites
              for t in tasks if tasks[t]["suite"] == s for c in grouped.cases[t] if c in records]
    rates = [suites[s]["rate"] if s in suites else None for s in four]
    return {
        "suites": four,
        "missing": [s for s in four if s not in suites],
        "mean_of_suite_rates": (sum(r for r in rates if r is not None) / len(four)
                                if all(r is not None for r in rates) else None),
        "pooled": success_rate(pooled),
        "comparable": all(s in suites and suites[s]["comparable"] for s in four),
        "published_figures": published.block(AVERAGE, state_fed),
    }


def _task_name(entries: Sequence[Entry], index: int, recorded: Sequence[CaseRecord]) -> str | None:
    for record in recorded:
        return str(record["entry"]["name"])
    return next((e.name for e in entries if e.index == index), None)
