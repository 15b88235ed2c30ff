"""Robustness: OOD and perturbed cases beside their twins in the same run
(docs/robustness.md, docs/perturbations.md).

LIBERO itself no longer separates checkpoints; how far a checkpoint falls when the
scene changes does. Each OOD case (LIBERO-PRO) and each generated perturbation is paired
with its twin (the native case it perturbs, at the same init state in full mode) and
the pairs are counted: both succeeded, only the
twin, only the OOD case, neither. The drop is the twin's rate minus the OOD rate over
the pairs, in percentage points, and the exact two-sided McNemar p-value says whether
the split of discordant pairs could be chance. Rates carry 95% Wilson intervals.

Pure functions over records, so the live summary and ``pytest-libero merge`` compute
the same numbers; a run without OOD cases has no ``robustness`` block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_libero.catalog.entries import OOD_KINDS
from pytest_libero.episode.record import CaseRecord
from pytest_libero.perturb.levels import KINDS as PERTURB_KINDS
from pytest_libero.results.mcnemar import mcnemar_two_sided_p
from pytest_libero.results.rates import COMPLETED, rate_object, success_rate


def has_twin(record: Mapping[str, Any]) -> bool:
    """An OOD case or a generated perturbation: a case with a twin to be paired with."""
    return bool(record.get("entry", {}).get("twin"))


def pair_counts(pairs: Sequence[tuple[CaseRecord, CaseRecord]]) -> dict[str, Any]:
    """(twin, OOD) pairs where both completed: the four cells, both rates, the drop, p."""
    cells = {"both": 0, "only_twin": 0, "only_ood": 0, "neither": 0}
    for twin, ood in pairs:
        key = {(True, True): "both", (True, False): "only_twin",
               (False, True): "only_ood", (False, False): "neither"}[
            (twin["outcome"] == "success", ood["outcome"] == "success")]
        cells[key] += 1
    n = len(pairs)
    twin_successes = cells["both"] + cells["only_twin"]
    ood_successes = cells["both"] + cells["only_ood"]
    return {
        "pairs": n,
        **cells,
        "twin": rate_object(twin_successes, n),
        "ood": rate_object(ood_successes, n),
        "drop_points": 100.0 * (twin_successes - ood_successes) / n if n else None,
        "mcnemar_p": mcnemar_two_sided_p(cells["only_twin"], cells["only_ood"]),
    }


def group_block(ood: Sequence[CaseRecord], records: Mapping[str, CaseRecord]) -> dict[str, Any]:
    """One row of the table: the OOD cases' own rate, then the paired comparison.

    A pair needs both cases completed in this run; an OOD case whose twin is missing or
    errored, or that errored itself, is counted as unpaired, never as a failure."""
    pairs: list[tuple[CaseRecord, CaseRecord]] = []
    for record in ood:
        twin = records.get(str(record["entry"].get("twin")))
        if twin is not None and twin["outcome"] in COMPLETED and record["outcome"] in COMPLETED:
            pairs.append((twin, record))
    return {
        "cases": len(ood),
        "errored": sum(r["outcome"] == "errored" for r in ood),
        **success_rate(ood),
        "paired": pair_counts(pairs),
        "unpaired": len(ood) - len(pairs),
    }


def robustness_summary(records: Mapping[str, CaseRecord]) -> dict[str, Any] | None:
    """summary.json's ``robustness`` block, or None when the run has no OOD case."""
    ood = [r for r in records.values() if has_twin(r)]
    if not ood:
        return None
    twins = {str(r["entry"].get("twin")) for r in ood}
    by_kind = _grouped(ood, lambda r: str(r["entry"].get("kind")))
    levels = {
        kind: {str(level): group_block(rs, records)
               for level, rs in sorted(_grouped(cases, _level).items(), key=lambda kv: int(kv[0]))}
        for kind, cases in by_kind.items()
    }
    suites = {}
    for suite, cases in sorted(_grouped(ood, suite_key).items()):
        entry = cases[0]["entry"]
        suites[suite] = {"kind": entry.get("kind"), "level": entry.get("level"),
                         "base": str(entry.get("twin", "")).split("-")[0],
                         **group_block(cases, records)}
    return {
        "in_distribution": success_rate(records[c] for c in sorted(twins) if c in records),
        "in_distribution_cases": sum(c in records for c in twins),
        "kinds": {kind: group_block(cases, records) for kind, cases in by_kind.items()},
        "levels": levels,
        "suites": suites,
    }


def suite_key(record: Mapping[str, Any]) -> str:
    """The suite a record's rate is filed under: its suite, and ``~<kind><level>`` for a
    generated perturbation, so perturbed cases never mix into their twins' suite rate."""
    entry = record["entry"]
    perturbation = entry.get("perturbation")
    if isinstance(perturbation, Mapping):
        return f"{entry['suite']}~{perturbation['kind']}{perturbation['level']}"
    return str(entry["suite"])


def _level(record: CaseRecord) -> str:
    return str(record["entry"].get("level") or 1)


def _grouped(records: Iterable[CaseRecord], key: Callable[[CaseRecord], str]) -> dict[str, list[CaseRecord]]:
    """Records by ``key``, kinds in the catalog's order, anything else after."""
    groups: dict[str, list[CaseRecord]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    rank = {kind: i for i, kind in enumerate((*OOD_KINDS, *PERTURB_KINDS))}
    return dict(sorted(groups.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
