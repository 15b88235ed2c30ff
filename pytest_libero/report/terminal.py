"""The LIBERO section of the terminal summary: evidence class, counts and rates.

Formatting a run summary is shared by the live session and ``pytest-libero merge``;
:class:`TerminalSummary` prints it at the end of a session.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_libero.protocol.clock import REALTIME
from pytest_libero.results.decision_summary import decision_line
from pytest_libero.results.layout import FIGURE_NAME, SUMMARY_NAME
from pytest_libero.results.recorder import Recorder
from pytest_libero.results.robustness import KIND_LABELS
from pytest_libero.results.summary import SAFETY_CLASSES
from pytest_libero.safety.verdict import ENGAGEMENT

PER_TASK_LINES = 12
"""Full mode prints one line per task up to this many tasks; beyond, the lowest three."""
UNSAFE_LINES = 5
"""The safety section names this many unsafe cases; summary.json lists them all."""


def format_rate(label: str, rate: dict[str, Any]) -> str:
    if rate["rate"] is None:
        return f"{label}: no completed episode"
    low, high = rate["wilson95"]
    return (
        f"{label}: {rate['successes']}/{rate['completed']} = {rate['rate']:.1%} "
        f"(95% Wilson {low:.1%}-{high:.1%})" + score_text(rate.get("score"))
    )


def score_text(score: dict[str, Any] | None) -> str:
    """``; score 0.42 (95% 0.30-0.55)``: the partial-credit mean beside a rate, when the
    records have scores (docs/records.md)."""
    if not score or score.get("mean") is None:
        return ""
    low, high = score["interval95"]
    unscored = f", {score['unscored']} unscored" if score.get("unscored") else ""
    return f"; score {score['mean']:.2f} (95% {low:.2f}-{high:.2f}{unscored})"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """What the terminal shows: the evidence class, every count, every rate."""
    label = (
        " (infrastructure evidence, not a capability claim)"
        if summary.get("evidence_class") == "infrastructure"
        else ""
    )
    if (summary.get("latency") or {}).get("clock") == REALTIME:
        label += (" on the realtime track (each reply usable after its measured latency; "
                  "never compared with synchronous results)")
    counts = summary["counts"]
    lines = [
        f"profile {summary.get('profile')}{label}",
        ", ".join(f"{counts[k]} {k}" for k in counts),
    ]
    lines += renderer_lines(summary.get("renderer"))
    robustness = summary.get("robustness")
    ood_suites = set((robustness or {}).get("suites") or {})
    if summary.get("mode") == "full":
        lines += full_mode_lines(summary)
    else:
        lines += [format_rate(s, r) for s, r in sorted(summary["suites"].items())
                  if s not in ood_suites]
    lines.append(format_rate("overall (native and OOD cases together)" if robustness
                             else "overall", summary["overall"]))
    if robustness:
        lines += robustness_lines(robustness)
    if summary.get("safety"):
        lines += safety_lines(summary["safety"])
    if isinstance(summary.get("decision"), dict):
        lines += decision_lines(summary["decision"])
    horizons = summary.get("reply_horizon") or {}
    if horizons.get("note"):
        lines.append(f"{horizons['note']} ({horizons['short_cases']} of "
                     f"{summary['counts']['completed'] + summary['counts']['errored']} cases)")
    lines += latency_lines(summary.get("latency"))
    clipping = summary.get("clipping") or {}
    if clipping.get("values"):
        lines.append(
            f"clipped actions: {clipping['values']} value(s) in {clipping['chunks']} chunk(s) "
            f"of {clipping['cases']} case(s) were outside [-1, 1] (largest excess "
            f"{clipping['max_excess']:.4g}) and clipped before execution"
        )
    return lines


def latency_lines(block: dict[str, Any] | None) -> list[str]:
    """The policy's latency, as every run measures it, and on a delayed clock what it cost."""
    if not block:
        return []
    ms = ", ".join(f"{key[:-2]} {block[key] * 1000:.1f} ms" for key in ("p50_s", "p95_s", "p99_s", "max_s"))
    lines = [f"latency per call ({block['clock']} track): {ms} over {block['calls']} calls"]
    if block.get("held_control_ratio"):
        lines.append(f"held controls: {block['held_control_ratio']:.1%} of the simulated time; "
                     f"{block['decisions_per_simulated_s']:.2f} decisions per simulated second; "
                     f"{block['stale_actions']} stale actions never ran")
    return lines


def decision_lines(block: dict[str, Any]) -> list[str]:
    """``--libero-decide``: one line, ``decided after 212 of 6,500: FAIL (...)``, or that
    the run reached its end undecided; then the interval on the selection's rate."""
    lines = [decision_line(block)]
    interval = block.get("interval")
    if interval:
        lines.append(f"  the whole selection's success rate: {interval['low']:.1%}-"
                     f"{interval['high']:.1%} ({interval['kind']}, from {interval['over']:,} cases)")
    return lines


def renderer_lines(block: dict[str, Any] | None) -> list[str]:
    """Which renderer drew the run's images and whether the package knows it; every
    renderer, loudly, when the run's workers rendered differently."""
    used: list[dict[str, Any]] = list((block or {}).get("used") or [])
    if not used:
        return []
    if len(used) > 1:
        return [f"RENDERERS DIFFER: this run's images come from {len(used)} renderers, so its "
                "cases are not comparable image for image; merge and baselines refuse it"] + [
            f"  {u['description']} ({', '.join(u['workers']) or 'no worker'}: "
            f"{u['cases']} case{'s' if u['cases'] != 1 else ''})" for u in used]
    if used[0]["renderer"] is None:
        return ["renderer: not recorded (a run written before renderer fingerprints); it "
                "matches no recorded renderer"]
    return [f"renderer: {used[0]['description']} ({used[0]['standing']})"]


def robustness_lines(robustness: dict[str, Any]) -> list[str]:
    """The robustness table, compact: the twins' rate, then per kind (and level, where a
    kind has several) and per OOD suite the OOD rate with the paired comparison."""
    lines = ["robustness: OOD (LIBERO-PRO) and perturbed cases beside their twins in this run "
             "(docs/robustness.md)",
             "  " + format_rate("in-distribution (the twins)", robustness["in_distribution"])]
    for kind, group in robustness.get("kinds", {}).items():
        lines.append(f"  {robustness_row(KIND_LABELS.get(kind, kind), group)}")
        levels = robustness.get("levels", {}).get(kind) or {}
        if len(levels) > 1:
            lines += [f"    {robustness_row(f'level {level}', block)}"
                      for level, block in levels.items()]
    suites = list(robustness.get("suites", {}).items())
    for suite, group in suites[:PER_TASK_LINES]:
        label = f"{suite} ({group.get('shows') or group.get('kind')})"
        lines.append(f"  {robustness_row(label, group)}")
    if len(suites) > PER_TASK_LINES:
        lines.append(f"  {len(suites) - PER_TASK_LINES} more OOD suites in {SUMMARY_NAME} "
                     "(robustness.suites)")
    return lines


def robustness_row(label: str, group: dict[str, Any]) -> str:
    """One row: the perturbed cases' rate (OOD or generated), then their pairs with the
    twins (the four cells, the drop in points and the exact two-sided McNemar p-value)."""
    paired = group.get("paired") or {}
    text = format_rate(label, group)
    if paired.get("pairs"):
        text += (f"; {paired['pairs']} pairs: both {paired['both']}, only twin "
                 f"{paired['only_twin']}, only perturbed {paired['only_perturbed']}, neither "
                 f"{paired['neither']}; drop {paired['drop_points']:+.1f} pts, McNemar "
                 f"p = {paired['mcnemar_p']:.3g}")
        if paired.get("score"):
            text += f"; score drop {paired['score']['drop_points']:+.1f} pts"
    else:
        text += "; no pair with a twin in this run"
    if group.get("unpaired"):
        text += f" ({group['unpaired']} unpaired)"
    return text


def safety_lines(safety: dict[str, Any]) -> list[str]:
    """The safety axis, scored apart from native success: the two-axis classes with the
    safe-success rate, the engagement ladder, and the first unsafe cases with their
    first event."""
    classes = safety.get("classes") or {}
    rate = safety.get("safe_success") or {}
    if rate.get("rate") is None:
        shown = "safe-success: no completed episode with a safety verdict"
    else:
        low, high = rate["wilson95"]
        shown = (f"safe-success {rate['successes']}/{rate['completed']} = {rate['rate']:.1%} "
                 f"(95% Wilson {low:.1%}-{high:.1%})")
    lines = [f"safety: {counted(classes, SAFETY_CLASSES)}; {shown}",
             f"engagement: {counted(safety.get('engagement') or {}, ENGAGEMENT)}"]
    unsafe: list[dict[str, Any]] = list(safety.get("unsafe") or [])
    for item in unsafe[:UNSAFE_LINES]:
        event = item.get("first_event")
        what = (f" ({event.get('predicate')} {event.get('object')} at control "
                f"{event.get('control')})" if event else "")
        lines.append(f"unsafe: {item.get('case')}{what}")
    if len(unsafe) > UNSAFE_LINES:
        lines.append(f"unsafe: {len(unsafe) - UNSAFE_LINES} more in {SUMMARY_NAME} "
                     "(safety.unsafe_cases)")
    return lines


def counted(counts: dict[str, Any], order: tuple[str, ...]) -> str:
    """``3 safe_success, 1 unsafe_success, ...`` in the given order (summary.json, read
    back, has its keys sorted), then any other key."""
    keys = [k for k in order if k in counts] + sorted(set(counts) - set(order))
    return ", ".join(f"{counts[k]} {k}" for k in keys)


def full_mode_lines(summary: dict[str, Any]) -> list[str]:
    """Full mode: cases as tasks x states, why a run is partial, each suite's rate with
    its coverage and comparability, the published figures beside it (marked as not
    measured here), per-task rates when there are few tasks, the four-suite average."""
    tasks: dict[str, dict[str, Any]] = summary.get("tasks") or {}
    cases = summary["counts"]["selected"]
    states = len(summary.get("init_states") or [])
    shape = (f"{len(tasks)} tasks x {states} states" if cases == len(tasks) * states
             else f"{len(tasks)} tasks, up to {states} states each")
    lines = [f"full mode: {cases} cases ({shape})"]
    if summary.get("partial"):
        lines.append(
            f"PARTIAL full-mode run: {'; '.join(summary['partial'])} \u2014 not a full result; "
            "do not compare with published figures"
        )
    few = len(tasks) <= PER_TASK_LINES
    for suite, rate in sorted(summary["suites"].items()):
        per_task = rate.get("states_per_task")
        covered = rate["tasks"]["text"] + (f" x {per_task} states" if per_task else "")
        lines.append(f"{format_rate(suite, rate)}; {covered}")
        if rate.get("comparable"):
            lines.append("  comparable with published full-mode figures: every task, all init "
                         "states, reference horizons, every episode completed")
        else:
            lines.append("  not comparable with published figures: "
                         + "; ".join(rate.get("not_comparable_because") or []))
        lines += published_lines(rate.get("published_figures") or {}, suite)
        mine = sorted((t, r) for t, r in tasks.items() if r.get("suite") == suite)
        if few:
            lines += [f"  {format_rate(t, r)}{_task_gaps(r)}" for t, r in mine]
        elif mine:
            rated = sorted((r["rate"], t) for t, r in mine if r["rate"] is not None)
            lowest = ", ".join(f"{t} {v:.1%}" for v, t in rated[:3])
            lines.append(f"  {len(mine)} tasks: per-task rates in {SUMMARY_NAME} (tasks)"
                         + (f"; lowest: {lowest}" if lowest else ""))
    average = summary.get("four_suite_average") or {}
    if average and not average.get("missing"):
        pooled = average["pooled"]
        mean = average.get("mean_of_suite_rates")
        shown = "no completed episode" if mean is None else f"{mean:.1%} mean of suite rates"
        lines.append(format_rate(f"four-suite average ({shown}); pooled", pooled)
                     + ("" if average.get("comparable") else "; not comparable"))
        lines += published_lines(average.get("published_figures") or {}, "average")
    return lines


def published_line(block: dict[str, Any], suite: str) -> str:
    """One compact line of a suite's published figures, never mistaken for measured ones."""
    figures = block.get("figures") or []
    if not figures:
        return f"published (not measured here): none for {suite} in the kept sources"
    return "published (not measured here): " + ", ".join(
        f"{f['model']} {_percent(f['percent'])}%" for f in figures
    )


def published_lines(block: dict[str, Any], suite: str) -> list[str]:
    """The published figures' line, and the state caveat's line when there is one."""
    caveat = block.get("state_caveat")
    return ["  " + published_line(block, suite)] + ([f"  {caveat}"] if caveat else [])


def _percent(value: float) -> str:
    """A published percentage as its source writes it: 98.0, 96.85."""
    return f"{value:.1f}" if float(value).is_integer() else f"{value:g}"


def _task_gaps(rate: dict[str, Any]) -> str:
    states = rate.get("states") or {}
    gaps = [f"{states[k]} {k}" for k in ("errored", "unattempted", "decided") if states.get(k)]
    return f" [{', '.join(gaps)}]" if gaps else ""


class TerminalSummary:
    """The LIBERO section at the end of the session, from the controller's recorder."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        recorder = self.recorder
        terminalreporter.section("LIBERO")
        lines = summary_lines(recorder.summary())
        description = recorder.plan.profile.description
        if description:  # what the policy is, in its profile's words (demo: a recording)
            lines.insert(1, f"  {description}")
        for line in lines:
            terminalreporter.write_line(line)
        if recorder.stopped is not None:
            terminalreporter.write_line(f"run stopped: {recorder.stopped}", red=True)
        for verdict in recorder.verdicts:
            for line in verdict.lines:
                terminalreporter.write_line(line, red=not verdict.passed, green=verdict.passed)
        for problem in recorder.write_errors:
            terminalreporter.write_line(problem, red=True)
        if recorder.plan.extra_identities:
            terminalreporter.write_line(f"robustness picture: {recorder.folder.path / FIGURE_NAME}")
        terminalreporter.write_line(f"results: {recorder.folder.path}")
