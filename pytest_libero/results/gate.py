"""CI gates on a run: a minimum success rate, a minimum safe-success rate, and no
significant regression.

The regression gate pairs the cases both runs completed and applies an exact one-sided
McNemar test to the discordant pairs: under "no change" each flip is equally likely
to go either way, so the chance of seeing at least this many success-to-failure flips
out of all flips is a binomial tail with p = 1/2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_libero.episode.record import CaseRecord
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.decision import GATE_LABELS
from pytest_libero.results.decision_summary import gate_reason
from pytest_libero.results.layout import RESULTS_NAME
from pytest_libero.results.mcnemar import mcnemar_worse_p
from pytest_libero.results.rates import COMPLETED
from pytest_libero.results.renderers import RendererUse, conflict, joined, renderer_uses
from pytest_libero.results.run_reader import read_run, shown
from pytest_libero.results.summary import SAFETY_CLASSES


@dataclass
class Verdict:
    """A gate's decision with the lines that explain it."""

    passed: bool
    lines: list[str] = field(default_factory=list)


def _incomplete(counts: dict[str, Any]) -> str:
    """The incomplete part of a run, for a gate's line (cases a decided run did not run
    count here too when the decision was not this gate's)."""
    text = f"{counts['errored']} errored and {counts['unattempted']} unattempted case(s)"
    if counts.get("decided"):
        text += (f", and {counts['decided']} not run because the run was decided for other "
                 "gates than this one")
    return text


def min_success_gate(summary: dict[str, Any], threshold: float) -> Verdict:
    """Pass when every selected case completed and the success rate reaches ``threshold``."""
    counts = summary["counts"]
    rate = summary["overall"]["rate"]
    incomplete = counts["errored"] + counts["unattempted"] + counts.get("decided", 0)
    if incomplete:
        return Verdict(False, [
            f"min-success gate FAILED: {_incomplete(counts)}; the evaluation is incomplete, "
            "so no rate is certified"
        ])
    if rate is None or rate < threshold:
        shown = "none" if rate is None else f"{rate:.1%}"
        return Verdict(False, [f"min-success gate FAILED: success rate {shown} < {threshold:.1%}"])
    return Verdict(True, [f"min-success gate passed: success rate {rate:.1%} >= {threshold:.1%}"])


def min_safe_success_gate(summary: dict[str, Any], threshold: float) -> Verdict:
    """Pass when every selected case completed, the adapter recorded a safety verdict, and
    safe successes over completed monitored episodes (vacuous ones included) reach
    ``threshold``. Completed cases without a verdict are named, not counted."""
    counts = summary["counts"]
    incomplete = counts["errored"] + counts["unattempted"] + counts.get("decided", 0)
    if incomplete:
        return Verdict(False, [
            f"min-safe-success gate FAILED: {_incomplete(counts)}; the evaluation is "
            "incomplete, so no rate is certified"
        ])
    safety = summary.get("safety") or {}
    rate = safety.get("safe_success") or {}
    if not rate.get("completed"):
        return Verdict(False, [
            "min-safe-success gate FAILED: no monitored case: the adapter records no safety "
            "(no case has a safety verdict)"
        ])
    classes = safety.get("classes") or {}
    shown = (f"safe-success rate {rate['rate']:.1%} ({rate['successes']} safe successes of "
             f"{rate['completed']} monitored episodes)")
    details = ["  classes: " + ", ".join(f"{classes.get(k, 0)} {k}" for k in SAFETY_CLASSES)]
    if classes.get("unmonitored"):
        details.append(f"  {classes['unmonitored']} completed case(s) without a safety "
                       "verdict are not counted")
    details += [f"  unsafe: {case}" for case in safety.get("unsafe_cases") or []]
    if rate["rate"] < threshold:
        return Verdict(False, [f"min-safe-success gate FAILED: {shown} < {threshold:.1%}",
                               *details])
    return Verdict(True, [f"min-safe-success gate passed: {shown} >= {threshold:.1%}",
                          *details])


def regression_gate(
    baseline: Mapping[str, CaseRecord], current: Mapping[str, CaseRecord], alpha: float
) -> Verdict:
    """Fail when the current run is significantly worse than the baseline on paired cases."""
    paired = sorted(
        case for case in baseline.keys() & current.keys()
        if baseline[case]["outcome"] in COMPLETED and current[case]["outcome"] in COMPLETED
    )
    if not paired:  # nothing compared is no evidence of "not worse"
        shared = len(baseline.keys() & current.keys())
        return Verdict(False, [
            f"baseline gate FAILED: no paired cases (the runs share {shared} case id(s), none "
            "completed in both); the gate cannot say this run is not worse. Compare runs of "
            "the same selection"])
    lost = [c for c in paired if baseline[c]["outcome"] == "success" and current[c]["outcome"] == "failure"]
    gained = [c for c in paired if baseline[c]["outcome"] == "failure" and current[c]["outcome"] == "success"]
    p = mcnemar_worse_p(len(lost), len(gained))
    worse = p < alpha
    lines = [
        f"baseline gate {'FAILED' if worse else 'passed'}: {len(paired)} paired cases, "
        f"{len(lost)} success->failure, {len(gained)} failure->success, exact McNemar "
        f"one-sided p = {p:.4g} (level {alpha:g})"
    ]
    lines += [f"  lost:   {c}" for c in lost]
    lines += [f"  gained: {c}" for c in gained]
    return Verdict(not worse, lines)


def evaluate_gates(
    summary: dict[str, Any],
    records: Mapping[str, CaseRecord],
    *,
    min_success: float | None,
    baseline: Mapping[str, CaseRecord] | None,
    alpha: float,
    stopped: str | None = None,
    min_safe_success: float | None = None,
) -> list[Verdict]:
    """Every gate asked for, the one evaluation for a live run and for a merged one.

    A run that had to stop (``stopped`` says why) fails every gate: incomplete.
    """
    verdicts: list[Verdict] = []
    asked = min_success is not None or baseline is not None or min_safe_success is not None
    if stopped is not None and asked:
        verdicts.append(Verdict(False, [
            f"gates FAILED: the run is incomplete ({summary['counts']['unattempted']} "
            f"unattempted case(s)): {stopped}"
        ]))
    decided = _decided_gates(summary)
    if min_success is not None:
        verdicts.append(decided.get(("min_success", min_success))
                        or min_success_gate(summary, min_success))
    if min_safe_success is not None:
        verdicts.append(decided.get(("min_safe_success", min_safe_success))
                        or min_safe_success_gate(summary, min_safe_success))
    if baseline is not None:
        mixed = conflict(joined(renderer_uses(baseline.values(), where="the baseline"),
                                renderer_uses(records.values(), where="this run")))
        if mixed:
            verdicts.append(Verdict(False, [f"baseline gate FAILED: {mixed}; success rates "
                                            "over images of different renderers are not "
                                            "compared"]))
        else:
            verdicts.append(decided.get(("baseline", alpha))
                            or regression_gate(baseline, records, alpha))
    return verdicts


def _decided_gates(summary: dict[str, Any]) -> dict[tuple[str, float], Verdict]:
    """The gates a decided run's decision settled (``--libero-decide``), by gate and
    threshold: a gate asked for with another threshold (say, at merge) is judged as
    usual, the cases the run did not run then left incomplete."""
    decision = summary.get("decision") or {}
    if not decision.get("verdict"):
        return {}
    found = {}
    how = str(decision["mode"])
    if how != "exact" and decision.get("alpha") is not None:
        how += f", alpha {decision['alpha']:g}"
    when = f"decided after {decision['decided_after']:,} of {decision['of']:,} cases ({how})"
    for gate in decision.get("gates") or []:
        if gate.get("verdict") not in ("pass", "fail"):
            continue
        label = GATE_LABELS.get(gate["gate"], gate["gate"])
        passed = gate["verdict"] == "pass"
        found[(gate["gate"], gate["threshold"])] = Verdict(passed, [
            f"{label} gate {'passed' if passed else 'FAILED'}: {when}: {gate_reason(gate)}"])
    return found


def load_baseline(
    run_dir: Path, expected: str, option: str = "--libero-baseline",
    extra: Mapping[str, str] | None = None,
    against: Sequence[RendererUse] | None = None,
) -> dict[str, CaseRecord]:
    """Records of an earlier run, refused unless it ran the same protocol (and mode) and,
    for each identity beside it that both runs carry (``ood_identity``,
    ``perturb_identity``), the same one; and, given ``against`` (the renderers of the run
    it will judge), unless its images come from that one renderer."""
    read = read_run(run_dir, option, plan=False)
    run = read.run
    pairs = [(run["protocol_identity"], expected)]
    pairs += [(run.get(key), mine) for key, mine in (extra or {}).items()]
    for identity, mine in pairs:
        if identity is not None and identity != mine:
            raise SetupError(
                f"{option}={run_dir} ran protocol {shown(identity)}, this run is "
                f"{mine}; results of different protocols cannot be compared"
            )
    records = read.by_case
    if not records:  # every gate would fail at the run's end, after every case ran
        raise SetupError(f"{option}={run_dir}: its {RESULTS_NAME} holds no whole record (it is "
                         "empty, or holds a torn line only), so there is nothing to compare this "
                         "run with; give a baseline run that recorded its cases")
    if against is not None:
        mixed = conflict(joined(renderer_uses(records.values(), where=f"{option}={run_dir}"),
                                against))
        if mixed:
            raise SetupError(f"{option}={run_dir} cannot judge this run: {mixed}. Success "
                             "rates over images of different renderers are not compared; "
                             "take a baseline rendered by the same renderer")
    return records
