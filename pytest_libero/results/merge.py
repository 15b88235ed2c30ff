"""Merge result folders (shards, resumed or killed runs) into one, refusing mixtures.

Folders merge only when they ran the same protocol identity, the same profile (by
hash) and the same selection, and when every case's images come from one renderer
(``results/renderers.py``); a case present in two folders is refused rather than
silently picking one. A single folder "merges" too: that rebuilds the summary of a
run that was killed before it could write one, with its missing cases unattempted
(one killed before its first case ended included: all of them).

Where the new folder goes is :func:`destination`'s alone, and it is written whole or
not at all: a merge never leaves a half-written folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_libero.episode.record import CaseRecord, record_to_json
from pytest_libero.files import staged_folder, write_json_atomic, write_text_atomic
from pytest_libero.protocol.clock import SYNCHRONOUS
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped
from pytest_libero.results.decider import decide_key, tracker_of
from pytest_libero.results.decision import decided_cases
from pytest_libero.results.decision_summary import summary_block
from pytest_libero.results.folder import unwritable
from pytest_libero.results.layout import (
    DAMAGED,
    RESULTS_NAME,
    RUN_NAME,
    SUMMARY_NAME,
    new_run_id,
    profile_folder,
)
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


def merge_runs(folders: Sequence[Path], out: Path | str | None = None) -> Path:
    """Write the merged run folder and return its path: everything is read, checked and
    summarized first, then the folder is written whole (``files.staged_folder``), so a
    refusal or a failure leaves nothing behind."""
    if not folders:
        raise SetupError("merge needs at least one run folder")
    read = [read_run(f) for f in folders]
    first = read[0].run
    for folder, one in zip(folders[1:], read[1:]):
        difference = run_difference(one.run, first)
        if difference:
            raise SetupError(f"cannot merge {folder} with {folders[0]}: {difference}")
    mixed = conflict(joined(*(renderer_uses(one.records, where=str(folder))
                              for folder, one in zip(folders, read))))
    if mixed:
        raise SetupError(f"cannot merge {', '.join(map(str, folders))}: {clipped(mixed)}. A merge "
                         "never pools images of different renderers: keep these runs apart")
    selected: list[str] = list(first["plan"]["selection_cases"])
    chosen = set(selected)
    records: dict[str, CaseRecord] = {}
    origin: dict[str, Path] = {}
    for folder, one in zip(folders, read):
        for record in one.records:
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
    target = destination(out, folders)
    decided = tracker_of(first, selected, [r for one in read for r in one.records], folders)
    summary = merged_summary(first, selected, records, target.name, folders, decided)
    try:
        with staged_folder(target) as work:
            write_json_atomic(work / RUN_NAME, {**first, "run_id": target.name,
                                                "merged_from": [str(f.resolve()) for f in folders]})
            write_text_atomic(work / RESULTS_NAME, "".join(
                record_to_json(records[case]) + "\n" for case in selected if case in records))
            write_json_atomic(work / SUMMARY_NAME, summary)
    except (FileExistsError, NotADirectoryError):
        raise unwritable(target, "a file is in the way") from None
    except OSError as exc:
        raise unwritable(target, exc.strerror or str(exc)) from None
    return target


def destination(out: Path | str | None, sources: Sequence[Path]) -> Path:
    """Where a merge writes: ``--out``, or a new run id in the first folder's profile
    folder (beside it; for a shard, beside its run). Nothing read from a folder decides
    it, so no run.json can send a merge outside the results root; and it is never a path
    that exists nor one inside a folder being merged (a merge never writes into a run it
    reads, its cases/ included)."""
    if out is None:
        target = profile_folder(sources[0].resolve()) / f"{new_run_id()}-merged"
    elif not str(out):
        raise SetupError("--out is empty; name the new folder (one that does not exist), or "
                         "leave --out out for a new run id beside the first folder")
    else:
        target = Path(out)
    if os.path.lexists(target):
        raise SetupError(f"{target} already exists; a merge writes a new folder and never "
                         "overwrites anything: give --out a path that does not exist")
    resolved = target.resolve()
    for source in sources:
        if resolved.is_relative_to(source.resolve()):
            raise SetupError(f"--out {target} lies inside {source}, a folder being merged; a "
                             "merge never writes into a run it reads: give --out a path outside it")
    return target


def merged_summary(first: dict[str, Any], selected: list[str], records: dict[str, CaseRecord],
                   run_id: str, folders: Sequence[Path], decided: Any = None) -> dict[str, Any]:
    """summary.json of the merged folder, computed before anything is written."""
    plan = first["plan"]
    try:
        summary = summarize(
            selected, records,
            run_id=run_id,
            profile=plan["profile"]["name"],
            evidence_class=plan["evidence_class"],
            protocol_identity=first["protocol_identity"],
            **{key: first[key] for key in ("ood_identity", "perturb_identity") if first.get(key)},
            # Full mode from the plan in run.json; folders from before full mode are fast.
            mode=plan.get("mode", "fast"),
            partial=plan.get("partial") or [],
            selection=plan["selection"],
            state_fed=plan["profile"].get("state_fed"),  # absent before it existed
            clock=plan.get("clock", SYNCHRONOUS),
            decided=None if decided is None else decided_cases(decided),
        )
        summary["renderer"] = renderer_summary(renderer_uses(records.values(), first), first)
        if decided is not None:
            summary["decision"] = summary_block(decided)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a check missed it
        raise SetupError(f"cannot summarize {', '.join(map(str, folders))}: a record holds a "
                         f"value the summary cannot use ({type(exc).__name__}: "
                         f"{clipped(str(exc), 200)}); {DAMAGED}") from None
    return summary
