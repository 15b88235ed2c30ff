"""A run's episodes as CSV, one row per case record (docs/records.md, "The episode CSV").

Enough to recompute any statistic of the run (or of two runs joined on ``case``) without
pytest-libero: what ran (suite, task, init state, variant and its twin), what happened
(outcome, partial-credit score, counters) and the hashes that tie the row to its
evidence. The record's fields are checked by the run reader; the adapter's identity
table is not, so its seed and hashes are checked here, and a record holding something
else there is refused by name.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_libero.catalog.entries import GeneratedPerturbation, OodSource, variant_of
from pytest_libero.episode.record import CaseRecord
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.layout import RESULTS_NAME
from pytest_libero.results.run_reader import RunRead, shown
from pytest_libero.results.scores import scored

COLUMNS = ("run_id", "case", "suite", "task_id", "task_name", "init_state", "variant_source",
           "variant_kind", "variant_level", "twin", "profile", "outcome", "score",
           "policy_calls", "decisions", "executed_controls", "first_success_control",
           "first_success_policy_call", "error_kind", "seed", "perturbation_seed",
           "bddl_sha256", "init_file_sha256", "state_sha256", "settled_state_sha256")
HASHES = ("bddl_sha256", "init_file_sha256", "state_sha256", "settled_state_sha256")
_HEX = re.compile(r"[0-9a-f]{64}")


def _identity_value(record: CaseRecord, key: str) -> Any:
    identity: Mapping[str, Any] = record.get("identity") or {}
    value = identity.get(key)
    if value is None:
        return None
    fits = (_HEX.fullmatch(value) is not None if isinstance(value, str) else False) \
        if key in HASHES else (type(value) is int)
    if not fits:
        wanted = "a sha256 hex digest" if key in HASHES else "an integer"
        raise SetupError(f"the record of {shown(record['case'])!r} holds identity.{key} = "
                         f"{shown(repr(value))}, not {wanted}"
                         f"; the {RESULTS_NAME} line is damaged: take the run folder again "
                         "from where it was written")
    return value


def row(read: RunRead, record: CaseRecord) -> dict[str, Any]:
    """One episode's row (None for what the record does not hold)."""
    entry: Mapping[str, Any] = record["entry"]
    identity: Mapping[str, Any] = record.get("identity") or {}
    counters: Mapping[str, Any] = record.get("counters") or {}
    variant = variant_of(entry)
    state = entry.get("init_state", identity.get("init_state_index"))
    error = record.get("error")
    perturbation: Mapping[str, Any] = record.get("perturbation") or {}
    return {
        "run_id": read.run.get("run_id", read.path.name), "case": record["case"],
        "suite": entry["suite"], "task_id": entry.get("index"), "task_name": entry.get("name"),
        "init_state": state if type(state) is int else None,
        "variant_source": ("libero-pro" if isinstance(variant, OodSource)
                           else "generated" if isinstance(variant, GeneratedPerturbation) else None),
        "variant_kind": None if variant is None else variant.kind,
        "variant_level": None if variant is None else variant.level,
        "twin": entry.get("twin"), "profile": record.get("profile"),
        "outcome": record["outcome"], "score": scored(record),
        **{key: counters.get(key) for key in ("policy_calls", "decisions", "executed_controls",
                                              "first_success_control", "first_success_policy_call")},
        "error_kind": None if not error else error.get("kind"),
        "seed": _identity_value(record, "seed"),
        "perturbation_seed": perturbation.get("seed"),
        **{key: _identity_value(record, key) for key in HASHES},
    }


def episodes_csv(read: RunRead) -> str:
    """The CSV text: a header, then one row per record in selection order (records of
    cases the selection does not hold are left out: the reader refuses those anyway)."""
    order = {case: i for i, case in enumerate(read.run["plan"]["selection_cases"])}
    records = sorted((r for r in read.records if r["case"] in order), key=lambda r: order[r["case"]])
    if not records:
        raise SetupError(f"{read.path} has no finished case (its {RESULTS_NAME} holds none), so "
                         "there is no episode to export; export a run that recorded its cases")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: "" if v is None else v for k, v in row(read, record).items()})
    return out.getvalue()


def write_csv(read: RunRead, out: Path) -> int:
    """Write the CSV to ``out`` (a file that does not exist yet); the rows written."""
    text = episodes_csv(read)
    if out.resolve().is_relative_to(read.path.resolve()):
        raise SetupError(f"--csv {out} lies inside {read.path}, the run being exported; an "
                         "export never writes into the run it reads: name a file outside it")
    write_new(out, text, "--csv", "the export never overwrites a file: name a new one")
    return text.count("\n") - 1


def write_new(path: Path, text: str, option: str, never: str) -> None:
    """``text`` into ``path``, a file that does not exist yet: what publish writes never
    replaces a file. SetupError naming ``option`` and saying ``never`` when it exists."""
    try:
        with path.open("x", encoding="utf-8", newline="") as stream:
            stream.write(text)
    except FileExistsError:
        raise SetupError(f"{option} {path} already exists; {never}") from None
    except OSError as exc:
        raise SetupError(f"cannot write {option} {path} ({exc.strerror or exc}); name a file in "
                         "a folder this user can write") from None
