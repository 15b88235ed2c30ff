"""What an experiment tracker is given of a finished run: one shape for W&B and MLflow.

Read from the run folder only (run.json, results.jsonl, summary.json and the failed
cases' videos, through results/), so a live session, ``pytest-libero log`` on a
finished, resumed or merged run, and W&B and MLflow alike log the same keys. The keys
are documented in docs/export.md; names from the run (suites, kinds) are made tracker
safe by :func:`key`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_libero.catalog.entries import variant_of
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.layout import VIDEO_NAME
from pytest_libero.goals.score import derived_score
from pytest_libero.results.layout import read_summary
from pytest_libero.results.run_reader import RunRead, read_run

Scalar = str | int | float | bool | None
COLUMNS = ("case", "outcome", "cause", "controls", "calls", "perturbation", "score")
"""The per-case table, one row per selected case."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_./ -]")


@dataclass(frozen=True)
class TrackedRun:
    """A run as a tracker keeps it."""

    name: str
    """The run id: the tracker run's name."""
    profile: str
    config: dict[str, Scalar | list[Scalar]]
    metrics: dict[str, float]
    rows: list[list[Scalar]]
    """One per selected case, in selection order; see COLUMNS."""
    failure_videos: dict[str, Path]
    """Case -> its episode.mp4, for each failed case that has one."""


def key(name: str) -> str:
    """A name from the run as both trackers accept it in a key: ``~`` and ``:`` (and any
    other character MLflow refuses) become ``-``: ``libero_10~camera2`` ->
    ``libero_10-camera2``."""
    return _UNSAFE.sub("-", name)


def tracked_run(run_dir: Path) -> TrackedRun:
    """Everything a tracker logs of ``run_dir``; SetupError (naming the file and the fix)
    for a run folder that cannot be read."""
    read = read_run(run_dir)
    summary = read_summary(run_dir)
    profile = str(read.run["plan"]["profile"]["name"])
    return TrackedRun(
        name=str(read.run.get("run_id") or run_dir.name), profile=profile,
        config=run_config(read, summary), metrics=run_metrics(summary),
        rows=case_rows(read), failure_videos=failure_videos(read))


def run_config(read: RunRead, summary: Mapping[str, Any]) -> dict[str, Scalar | list[Scalar]]:
    """The run's configuration: profile, identities, selection, renderer, mode, budgets."""
    run, plan = read.run, read.run["plan"]
    profile, selection = plan["profile"], plan.get("selection") or {}
    used = (summary.get("renderer") or {}).get("used") or []
    config: dict[str, Scalar | list[Scalar]] = {
        "run_id": run.get("run_id"), "profile": profile.get("name"),
        "profile.sha256": profile.get("sha256"), "profile.source": profile.get("source"),
        "evidence_class": plan.get("evidence_class"),
        "protocol_identity": run["protocol_identity"],
        **{name: run[name] for name in ("ood_identity", "perturb_identity") if run.get(name)},
        "selection.scope": selection.get("scope"), "selection.suite": selection.get("suite"),
        "selection.task_ids": selection.get("task_ids"),
        "selection.cases": len(plan["selection_cases"]),
        "mode": plan.get("mode", "fast"), "track": plan.get("track"),
        "clock": plan.get("clock", "synchronous"), "evidence": plan.get("evidence", "full"),
        "budget.mode": plan.get("budget_mode"), "budget.max_policy_calls": plan.get("max_policy_calls"),
        "budget.replan_interval": plan.get("replan_interval"),
        "renderer": "; ".join(str(u.get("description")) for u in used) or None,
        "renderer.sha256": (run.get("renderer") or {}).get("sha256"),
        "pytest_libero": (run.get("installed") or {}).get("pytest-libero"),
    }
    for record in read.records:  # the control cap each suite ran under
        cap = (record.get("budget") or {}).get("control_cap")
        if cap is not None:
            config.setdefault(f"budget.control_cap.{key(record['entry']['suite'])}", cap)
    return config


def _rate(metrics: dict[str, float], prefix: str, rate: Any, counts: bool = True) -> None:
    """A rate object (successes, completed, rate, wilson95) as metrics under ``prefix``."""
    if not isinstance(rate, Mapping):
        return
    if rate.get("rate") is not None:
        metrics[f"{prefix}success_rate"] = float(rate["rate"])
    low, high = (rate.get("wilson95") or [None, None])[:2]
    if rate.get("rate") is not None and low is not None and high is not None:
        metrics[f"{prefix}success_rate_wilson_low"] = float(low)
        metrics[f"{prefix}success_rate_wilson_high"] = float(high)
    for name in ("successes", "completed") if counts else ():
        if isinstance(rate.get(name), int):
            metrics[f"{prefix}{name}"] = float(rate[name])
    score = rate.get("score")
    if isinstance(score, Mapping) and score.get("mean") is not None:
        low, high = (score.get("interval95") or [None, None])[:2]
        metrics[f"{prefix}score"] = float(score["mean"])
        if low is not None and high is not None:
            metrics[f"{prefix}score_low"], metrics[f"{prefix}score_high"] = float(low), float(high)


def run_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """Success rates with their Wilson intervals (overall, per suite), the counts, the
    robustness drops per kind and level, and the latency percentiles when recorded."""
    metrics: dict[str, float] = {}
    _rate(metrics, "", summary.get("overall"), counts=False)  # the counts: counts/
    for name, count in (summary.get("counts") or {}).items():
        if isinstance(count, int):
            metrics[f"counts/{key(name)}"] = float(count)
    for suite, rate in (summary.get("suites") or {}).items():
        _rate(metrics, f"suites/{key(suite)}/", rate)
    robustness = summary.get("robustness") or {}
    _rate(metrics, "robustness/in_distribution/", robustness.get("in_distribution"))
    for kind, group in (robustness.get("kinds") or {}).items():
        _group(metrics, f"robustness/{key(kind)}/", group)
        for level, by_level in ((robustness.get("levels") or {}).get(kind) or {}).items():
            _group(metrics, f"robustness/{key(kind)}/level_{key(str(level))}/", by_level)
    latency = summary.get("latency") or {}
    for name in ("calls", "p50_s", "p95_s", "p99_s", "max_s", "held_control_ratio",
                 "decisions_per_simulated_s", "stale_actions"):
        if isinstance(latency.get(name), (int, float)):
            metrics[f"latency/{name}"] = float(latency[name])
    return metrics


def _group(metrics: dict[str, float], prefix: str, group: Any) -> None:
    """A robustness group: its perturbed success rate, and its paired drop and p-value."""
    if not isinstance(group, Mapping):
        return
    _rate(metrics, prefix, group)
    paired = group.get("paired") or {}
    for name in ("drop_points", "mcnemar_p"):
        if isinstance(paired.get(name), (int, float)):
            metrics[f"{prefix}{name}"] = float(paired[name])
    score = paired.get("score") or {}
    if isinstance(score.get("drop_points"), (int, float)):
        metrics[f"{prefix}score_drop_points"] = float(score["drop_points"])


def case_rows(read: RunRead) -> list[list[Scalar]]:
    """One row per selected case (COLUMNS); unattempted cases have only their outcome."""
    by_case = read.by_case
    order = list(read.run["plan"]["selection_cases"])
    order += [case for case in by_case if case not in set(order)]
    return [_row(case, by_case.get(case)) for case in order]


def _row(case: str, record: CaseRecord | None) -> list[Scalar]:
    if record is None:
        return [case, "unattempted", None, None, None, None, None]
    counters: dict[str, Any] = dict(record.get("counters") or {})
    error = record.get("error")
    if record["outcome"] == "errored":
        cause = error["cause"] if error else None
    else:
        cause = record.get("termination") or record.get("truncation")
    variant = variant_of(record["entry"])
    return [case, record["outcome"], cause, counters.get("executed_controls"),
            counters.get("policy_calls"),
            None if variant is None else f"{variant.kind}:{variant.level}", derived_score(record)]


def failure_videos(read: RunRead) -> dict[str, Path]:
    """The video of each failed case whose folder has one (an errored case is no failure)."""
    found = {}
    for record in read.records:
        if record["outcome"] != "failure":
            continue
        folder = read.case_folder(record["case"])
        video = folder.path / VIDEO_NAME
        if folder.readable and video.is_file():
            found[record["case"]] = video
    return found
