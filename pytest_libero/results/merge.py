"""Merge result folders (shards, resumed or killed runs) into one, refusing mixtures.

Folders merge only when they ran the same protocol identity, the same profile (by
hash) and the same selection, and when every case's images come from one renderer
(``results/renderers.py``); a case present in two folders is refused rather than
silently picking one. A single folder "merges" too: that rebuilds the summary of a
run that was killed before it could write one, with its missing cases unattempted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_libero.episode.record import CaseRecord
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped
from pytest_libero.results.decider import decide_key, tracker_of
from pytest_libero.results.decision import decided_cases
from pytest_libero.results.decision_summary import summary_block
from pytest_libero.results.folder import RunFolder
from pytest_libero.results.layout import RESULTS_NAME, RUN_NAME, SUMMARY_NAME, new_run_id
from pytest_libero.results.renderers import conflict, joined, renderer_summary, renderer_uses
from pytest_libero.results.run_reader import read_run, shown
from pytest_libero.results.summary import summarize

_Key = Callable[[dict[str, Any]], Any]
_MUST_MATCH: tuple[tuple[str, _Key], ...] = (
    ("protocol identity", lambda run: run["protocol_identity"]),
    ("OOD identity", lambda run: run.get("ood_identity")),
    ("perturbation identity", lambda run: run.get("perturb_identity")),
    ("profile", lambda run: (run["plan"]["profile"]["name"], run["plan"]["profile"].get("sha256"))),
    ("policy options", lambda run: run["plan"]["profile"].get("options") or {}),
    ("out-of-bounds rule", lambda run: run["plan"]["profile"].get("out_of_bounds", "error")),
    ("selection", lambda run: run["plan"]["selection"]),
    ("shard count", lambda run: (run["plan"]["shard"] or [1, 1])[1]),
    ("budgets", lambda run: (run["plan"]["budget_mode"], run["plan"]["max_policy_calls"],
                             run["plan"]["replan_interval"], run["plan"]["track"])),
    ("early decision (--libero-decide)", decide_key),
)


def run_difference(run: dict[str, Any], other: dict[str, Any], *, same_shard: bool = False) -> str | None:
    """Why two runs cannot be one evaluation, or None when they can."""
    checks: list[tuple[str, _Key]] = list(_MUST_MATCH)
    if same_shard:
        checks.append(("shard", lambda r: r["plan"]["shard"]))
    for what, key in checks:
        if key(run) != key(other):
            return f"the {what} differs ({shown(repr(key(run)))} vs {shown(repr(key(other)))})"
    return None


def merge_runs(folders: Sequence[Path], out: Path | None = None) -> Path:
    """Write the merged run folder and return its path."""
    if not folders:
        raise SetupError("merge needs at least one run folder")
    read = [read_run(f) for f in folders]
    first = read[0].run
    for folder, one in zip(folders[1:], read[1:]):
        difference = run_difference(one.run, first)
        if difference:
            raise SetupError(f"cannot merge {folder} with {folders[0]}: {difference}")
    per_folder = [one.records for one in read]
    mixed = conflict(joined(*(renderer_uses(found, where=str(folder))
                              for folder, found in zip(folders, per_folder))))
    if mixed:
        raise SetupError(f"cannot merge {', '.join(map(str, folders))}: {clipped(mixed)}. A merge "
                         "never pools images of different renderers: keep these runs apart")
    selected: list[str] = list(first["plan"]["selection_cases"])
    chosen = set(selected)
    records: dict[str, CaseRecord] = {}
    origin: dict[str, Path] = {}
    for folder, found in zip(folders, per_folder):
        for record in found:
            case = record["case"]
            if case in records:
                raise SetupError(
                    f"case {shown(case)} appears in both {origin[case]} and {folder}; "
                    "a merge never chooses between two episodes of one case"
                )
            if case not in chosen:
                raise SetupError(f"{folder}: {RESULTS_NAME} holds {shown(case)!r}, a case its "
                                 f"{RUN_NAME} did not select; the folder is damaged")
            records[case] = record
            origin[case] = folder
    if out is None:
        here = folders[0].resolve()
        profile_dirs = [p for p in here.parents if p.name == first["plan"]["profile"]["name"]]
        out = (profile_dirs[0] if profile_dirs else here.parent) / f"{new_run_id()}-merged"
    decided = tracker_of(first, selected, [r for found in per_folder for r in found])
    target = RunFolder(out)
    try:
        target.write_json(RUN_NAME, {**first, "run_id": target.path.name,
                                     "merged_from": [str(f.resolve()) for f in folders]})
        for case in selected:
            if case in records:
                target.append_result(records[case])
        summary = summarize(
            selected, records,
            run_id=target.path.name,
            profile=first["plan"]["profile"]["name"],
            evidence_class=first["plan"]["evidence_class"],
            protocol_identity=first["protocol_identity"],
            **{key: first[key] for key in ("ood_identity", "perturb_identity") if first.get(key)},
            # Full mode from the plan in run.json; folders from before full mode are fast.
            mode=first["plan"].get("mode", "fast"),
            partial=first["plan"].get("partial") or [],
            selection=first["plan"]["selection"],
            state_fed=first["plan"]["profile"].get("state_fed"),  # absent before it existed
            decided=None if decided is None else decided_cases(decided),
        )
        summary["renderer"] = renderer_summary(renderer_uses(records.values(), first), first)
        if decided is not None:
            summary["decision"] = summary_block(decided)
        target.write_json(SUMMARY_NAME, summary)
    finally:
        target.close()
    return target.path
