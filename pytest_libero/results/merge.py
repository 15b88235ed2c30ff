"""Merge result folders (shards, resumed or killed runs) into one, refusing mixtures.

Folders merge only when they ran the same protocol identity, the same profile (by
hash) and the same selection, and when every case's images come from one renderer
(``results/renderers.py``); a case present in two folders is refused rather than
silently picking one. A single folder "merges" too: that rebuilds the summary of a
run that was killed before it could write one, with its missing cases unattempted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_libero.episode.record import READABLE_SCHEMAS, CaseRecord
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.folder import RunFolder, new_run_id, read_results
from pytest_libero.results.renderers import conflict, joined, renderer_summary, renderer_uses
from pytest_libero.results.summary import summarize

_Key = Callable[[dict[str, Any]], Any]
_MUST_MATCH: tuple[tuple[str, _Key], ...] = (
    ("protocol identity", lambda run: run["protocol_identity"]),
    ("OOD identity", lambda run: run.get("ood_identity")),
    ("perturbation identity", lambda run: run.get("perturb_identity")),
    ("profile", lambda run: (run["plan"]["profile"]["name"], run["plan"]["profile"]["sha256"])),
    ("policy options", lambda run: run["plan"]["profile"].get("options") or {}),
    ("out-of-bounds rule", lambda run: run["plan"]["profile"].get("out_of_bounds", "error")),
    ("selection", lambda run: run["plan"]["selection"]),
    ("shard count", lambda run: (run["plan"]["shard"] or [1, 1])[1]),
    ("budgets", lambda run: (run["plan"]["budget_mode"], run["plan"]["max_policy_calls"],
                             run["plan"]["replan_interval"], run["plan"]["track"])),
)


def run_difference(run: dict[str, Any], other: dict[str, Any], *, same_shard: bool = False) -> str | None:
    """Why two runs cannot be one evaluation, or None when they can."""
    checks: list[tuple[str, _Key]] = list(_MUST_MATCH)
    if same_shard:
        checks.append(("shard", lambda r: r["plan"]["shard"]))
    for what, key in checks:
        if key(run) != key(other):
            return f"the {what} differs ({key(run)!r} vs {key(other)!r})"
    return None


_RUN_KEYS = ("protocol_identity", "plan")
_PLAN_KEYS = ("profile", "selection", "selection_cases", "shard", "budget_mode",
              "max_policy_calls", "replan_interval", "track", "evidence_class")


def load_run(folder: Path, option: str = "", *, plan: bool = True) -> dict[str, Any]:
    """run.json of a run folder, refused (naming ``option`` and the folder) when it is
    missing, not JSON, or lacks what merging and resuming read (with ``plan=False``,
    only the protocol identity a baseline is compared by)."""
    where = f"{option}={folder}" if option else str(folder)
    path = folder / "run.json"
    if not path.is_file():
        raise SetupError(f"{where}: not a run folder (no run.json)")
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SetupError(f"{where}: run.json is damaged, not JSON ({exc}); the folder cannot "
                         "be used") from None
    if not isinstance(run, dict):
        missing = list(_RUN_KEYS)
    elif not plan:
        missing = [k for k in ("protocol_identity",) if k not in run]
    elif not isinstance(run.get("plan"), dict):
        missing = [k for k in _RUN_KEYS if k not in run] or ["plan as a table"]
    else:
        missing = [k for k in _RUN_KEYS if k not in run]
        missing += [f"plan.{k}" for k in _PLAN_KEYS if k not in run["plan"]]
    if missing:
        raise SetupError(f"{where}: run.json lacks {', '.join(missing)}; it was not written "
                         "by pytest-libero, or it is damaged")
    wrong = _wrong_types(run) if plan else None
    if wrong:
        raise SetupError(f"{where}: run.json's {wrong}; it was not written by pytest-libero, "
                         "or it is damaged")
    schema = record_schema(run)
    if schema not in READABLE_SCHEMAS:
        raise SetupError(f"{where}: its records are {schema}, which this pytest-libero does not "
                         f"read (it reads {', '.join(READABLE_SCHEMAS)}); use the version that "
                         "wrote the folder")
    checked: dict[str, Any] = run
    return checked


def _wrong_types(run: dict[str, Any]) -> str | None:
    """The first run.json field that merging or resuming reads with the wrong type."""
    plan = run["plan"]
    cases = plan["selection_cases"]
    if not isinstance(cases, list) or not all(isinstance(c, str) for c in cases):
        return "plan.selection_cases is not a list of case ids"
    profile = plan["profile"]
    if not isinstance(profile, dict) or not isinstance(profile.get("name"), str):
        return "plan.profile has no name"
    if not isinstance(run["protocol_identity"], str):
        return "protocol_identity is not text"
    return None


def record_schema(run: dict[str, Any]) -> str:
    """The record schema a run folder started with (run.json from before the key: 1).

    Folders of different readable schemas merge and resume: the records are read by one
    converter (``Entry.from_dict``) whatever their schema; a resume names the schema it
    appends with in run.json's ``resumed``."""
    return str(run.get("record_schema", READABLE_SCHEMAS[0]))


def merge_runs(folders: Sequence[Path], out: Path | None = None) -> Path:
    """Write the merged run folder and return its path."""
    if not folders:
        raise SetupError("merge needs at least one run folder")
    runs = [load_run(f) for f in folders]
    first = runs[0]
    for folder, run in zip(folders[1:], runs[1:]):
        difference = run_difference(run, first)
        if difference:
            raise SetupError(f"cannot merge {folder} with {folders[0]}: {difference}")
    per_folder = [read_results(folder) for folder in folders]
    mixed = conflict(joined(*(renderer_uses(found, where=str(folder))
                              for folder, found in zip(folders, per_folder))))
    if mixed:
        raise SetupError(f"cannot merge {', '.join(map(str, folders))}: {mixed}. A merge "
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
                    f"case {case} appears in both {origin[case]} and {folder}; "
                    "a merge never chooses between two episodes of one case"
                )
            if case not in chosen:
                raise SetupError(f"{folder}: results.jsonl holds {case[:60]!r}, a case its "
                                 "run.json did not select; the folder is damaged")
            records[case] = record
            origin[case] = folder
    if out is None:
        here = folders[0].resolve()
        profile_dirs = [p for p in here.parents if p.name == first["plan"]["profile"]["name"]]
        out = (profile_dirs[0] if profile_dirs else here.parent) / f"{new_run_id()}-merged"
    target = RunFolder(out)
    try:
        target.write_json("run.json", {**first, "run_id": target.path.name,
                                       "merged_from": [str(f) for f in folders]})
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
        )
        summary["renderer"] = renderer_summary(renderer_uses(records.values(), first), first)
        target.write_json("summary.json", summary)
    finally:
        target.close()
    return target.path
