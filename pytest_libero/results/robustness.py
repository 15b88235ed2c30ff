"""Robustness: OOD and perturbed cases beside their twins in the same run
(docs/robustness.md, docs/perturbations.md).

LIBERO itself no longer separates checkpoints; how far a checkpoint falls when the
scene changes does. Each OOD case (LIBERO-PRO) and each generated perturbation is paired
with its twin (the native case it perturbs, at the same init state in full mode) and
the pairs are counted: both succeeded, only the twin, only the perturbed case, neither.
The drop is the twin's rate minus the perturbed rate over the pairs, in percentage
points, and the exact two-sided McNemar p-value says whether the split of discordant
pairs could be chance. Rates carry 95% Wilson intervals. Where the pairs' records have
partial-credit scores, the paired drop in mean score stands beside the drop in success.

Pure functions over records (each entry read by ``Entry.from_dict``, either record
schema), so the live summary and ``pytest-libero merge`` compute the same numbers; a
run without OOD or perturbed cases has no ``robustness`` block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_libero.catalog.case_id import VARIANT_MARK
from pytest_libero.catalog.entries import (
    OOD_KINDS,
    PARAPHRASE,
    PARAPHRASE_VARIANT,
    Entry,
    GeneratedPerturbation,
    OodSource,
    Variant,
    load_catalog,
    variant_of,
)
from pytest_libero.episode.record import CaseRecord
from pytest_libero.perturb import registry
from pytest_libero.results.mcnemar import mcnemar_two_sided_p
from pytest_libero.results.rates import COMPLETED, rate_object, success_rate
from pytest_libero.results.scores import paired_scores


def entry_of(record: Mapping[str, Any]) -> Entry:
    """The record's entry, read by the one converter (either record schema)."""
    return Entry.from_dict(record["entry"])


def has_twin(record: Mapping[str, Any]) -> bool:
    """An OOD case or a generated perturbation: a case with a twin to be paired with."""
    return variant_of(record["entry"]) is not None


def pair_counts(pairs: Sequence[tuple[CaseRecord, CaseRecord]]) -> dict[str, Any]:
    """(twin, perturbed) pairs where both completed: the four cells, both rates, the
    drop, p. The perturbed side is an OOD case or a generated perturbation alike."""
    cells = {"both": 0, "only_twin": 0, "only_perturbed": 0, "neither": 0}
    for twin, perturbed in pairs:
        key = {(True, True): "both", (True, False): "only_twin",
               (False, True): "only_perturbed", (False, False): "neither"}[
            (twin["outcome"] == "success", perturbed["outcome"] == "success")]
        cells[key] += 1
    n = len(pairs)
    twin_successes = cells["both"] + cells["only_twin"]
    perturbed_successes = cells["both"] + cells["only_perturbed"]
    return {
        "pairs": n,
        **cells,
        "twin": rate_object(twin_successes, n),
        "perturbed": rate_object(perturbed_successes, n),
        "drop_points": 100.0 * (twin_successes - perturbed_successes) / n if n else None,
        "mcnemar_p": mcnemar_two_sided_p(cells["only_twin"], cells["only_perturbed"]),
        **({"score": score} if (score := paired_scores(pairs)) is not None else {}),
    }


def group_block(perturbed: Sequence[CaseRecord], records: Mapping[str, CaseRecord]) -> dict[str, Any]:
    """One row of the table: the perturbed cases' own rate, then the paired comparison.

    A pair needs both cases completed in this run; a perturbed case whose twin is missing
    or errored, or that errored itself, is counted as unpaired, never as a failure."""
    pairs: list[tuple[CaseRecord, CaseRecord]] = []
    unproven = [r for r in perturbed if not proven(r)]
    counted = [r for r in perturbed if proven(r)]
    for record in counted:
        twin = records.get(str(entry_of(record).twin))
        if twin is not None and twin["outcome"] in COMPLETED and record["outcome"] in COMPLETED:
            pairs.append((twin, record))
    return {
        "cases": len(perturbed),
        "errored": sum(r["outcome"] == "errored" for r in perturbed),
        **success_rate(counted),
        "paired": pair_counts(pairs),
        "unpaired": len(perturbed) - len(pairs),
        **({"unproven": len(unproven)} if unproven else {}),
    }


def proven(record: Mapping[str, Any]) -> bool:
    """Whether a completed perturbed case's record proves its perturbation was applied: one
    that does not is never counted (an errored one is not counted anyway)."""
    return record["outcome"] not in COMPLETED or registry.unproven(
        entry_of(record), record.get("perturbation")) is None


def robustness_summary(records: Mapping[str, CaseRecord]) -> dict[str, Any] | None:
    """summary.json's ``robustness`` block, or None when the run has no OOD or perturbed case."""
    perturbed = [r for r in records.values() if has_twin(r)]
    if not perturbed:
        return None
    twins = {str(entry_of(r).twin) for r in perturbed}
    by_kind = _grouped(perturbed, lambda r: group_key(_variant(r)))
    levels = {
        kind: {str(level): group_block(rs, records)
               for level, rs in sorted(_grouped(cases, _level).items(), key=lambda kv: int(kv[0]))}
        for kind, cases in by_kind.items()
    }
    suites = {}
    for suite, cases in sorted(_grouped(perturbed, suite_key).items()):
        entry = entry_of(cases[0])
        variant = _variant(cases[0])
        suites[suite] = {"kind": variant.kind, "level": variant.level, "source": _source(cases[0]),
                         "base": entry.twin.suite if entry.twin else None,
                         **_shows(entry), **group_block(cases, records)}
    return {
        "in_distribution": success_rate(records[c] for c in sorted(twins) if c in records),
        "in_distribution_cases": sum(c in records for c in twins),
        "kinds": {kind: {"source": _source(cases[0]), **group_block(cases, records)}
                  for kind, cases in by_kind.items()},
        "levels": levels,
        "suites": suites,
    }


GENERATED_MARK = "generated:"
"""Before a generated kind named like one of LIBERO-PRO's (position, environment, ...)."""


def group_key(variant: Variant) -> str:
    """The row a case's rate is pooled into: its kind, and its source where the kind's
    name is shared. LIBERO-PRO's shipped position suites are ``position`` (as always);
    the generated position kind is ``generated:position``: the two change the scene in
    different ways and are never pooled into one rate."""
    if isinstance(variant, GeneratedPerturbation) and variant.kind in OOD_KINDS:
        return f"{GENERATED_MARK}{variant.kind}"
    return variant.kind


PARAPHRASE_ALONE = "paraphrase alone (the twin's scene and init state)"
PARAPHRASE_PLACED = "paraphrase with LIBERO-PRO's placements (its own init states)"
KIND_LABELS = {PARAPHRASE: PARAPHRASE_ALONE}
"""How a report names a kind whose key alone would not say what it measures."""


def _shows(entry: Entry) -> dict[str, str]:
    """A paraphrase row says which of the two it is: LIBERO-PRO's ``_lan`` suites change
    the instruction and the placements; a companion, the instruction alone."""
    if entry.ood is not None and entry.ood.kind == PARAPHRASE:
        return {"shows": PARAPHRASE_ALONE}
    suite = load_catalog().ood_suites.get(entry.suite)
    if suite is not None and suite.variant == PARAPHRASE_VARIANT:
        return {"shows": PARAPHRASE_PLACED}
    return {}


def suite_key(record: Mapping[str, Any]) -> str:
    """The suite a record's rate is filed under: its suite, and its case id's variant tag
    (``~<kind><level>``) for a generated perturbation, so perturbed cases never mix into
    their twins' suite rate."""
    suite, variant = str(record["entry"]["suite"]), variant_of(record["entry"])
    tag = None if variant is None else variant.tag
    return suite if tag is None else f"{suite}{VARIANT_MARK}{tag}"


def _variant(record: Mapping[str, Any]) -> Variant:
    variant = variant_of(record["entry"])
    if variant is None:
        raise ValueError(f"{record.get('case')} is a native case: it has no variant")
    return variant


def _source(record: CaseRecord) -> str:
    """``libero-pro`` (shipped files) or ``generated`` (drawn at run time)."""
    return "libero-pro" if isinstance(_variant(record), OodSource) else "generated"


def _level(record: CaseRecord) -> str:
    return str(_variant(record).level)


def _grouped(records: Iterable[CaseRecord], key: Callable[[CaseRecord], str]) -> dict[str, list[CaseRecord]]:
    """Records by ``key``, kinds in the catalog's order, anything else after."""
    groups: dict[str, list[CaseRecord]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    generated = registry.names()
    order = (*OOD_KINDS, *(k for k in generated if k not in OOD_KINDS),
             *(f"{GENERATED_MARK}{k}" for k in generated if k in OOD_KINDS))
    rank = {kind: i for i, kind in enumerate(order)}
    return dict(sorted(groups.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
