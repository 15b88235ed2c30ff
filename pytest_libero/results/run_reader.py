"""The one reader of a finished run folder, for every command that reads one.

verify, ``pytest-libero safety``, merge, resume and the baseline gate all read run.json,
results.jsonl and the case folders. A folder damaged by hand, by a half copy or by a
permission (run.json's ``installed`` a list, a record whose case is a number, a case
folder this user cannot open) must give each of them the same clear answer naming the
file and the fix, never a traceback. So the folder is read here, once, its types
checked, and the commands work on what this module returns.

A case's evidence is read from this folder only (``cases/<case>``), or, for a merged
folder that kept none, from the source folders its run.json names: never from the
absolute ``evidence_dir`` a record carries, which in a copied folder points at another
run's files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_libero.episode.record import READABLE_SCHEMAS, CaseRecord, record_problem
from pytest_libero.evidence.layout import RECORD_NAME
from pytest_libero.files import folder_name_problem
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped
from pytest_libero.results.layout import (
    CASES_NAME,
    DAMAGED,
    RESULTS_NAME,
    RUN_NAME,
    case_path,
    named,
    read_json,
    read_results,
    type_name,
)

NAME_LIMIT = 200
"""Characters of an echoed case id or folder name in a message."""
_MAX_SOURCES = 64
"""Folders a merged folder's evidence is looked for in, nested merges included."""

_RUN_KEYS = ("protocol_identity", "plan")
_PLAN_KEYS = ("profile", "selection", "selection_cases", "shard", "budget_mode",
              "max_policy_calls", "replan_interval", "track", "evidence_class")


def shown(text: object) -> str:
    """A name or value from the folder, cut for a message."""
    return clipped(str(text), NAME_LIMIT)


def load_run(folder: Path, option: str = "", *, plan: bool = True) -> dict[str, Any]:
    """run.json of a run folder, refused (naming ``option`` and the folder) when it is
    missing, unreadable, not JSON, or lacks what merging, resuming and verifying read, or
    holds it with the wrong type (with ``plan=False``, only the protocol identity a
    baseline is compared by)."""
    where = named(folder, option)
    run = read_json(folder, RUN_NAME, option)
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
        raise SetupError(f"{where}: {RUN_NAME} lacks {', '.join(missing)}; {DAMAGED}")
    wrong = _wrong_types(run)
    if wrong:
        raise SetupError(f"{where}: {RUN_NAME}'s {wrong}; {DAMAGED}")
    schema = record_schema(run)
    if schema not in READABLE_SCHEMAS:
        raise SetupError(f"{where}: its records are {shown(schema)}, which this pytest-libero "
                         f"does not read (it reads {', '.join(READABLE_SCHEMAS)}); use the "
                         "version that wrote the folder")
    checked: dict[str, Any] = run
    return checked


def _wrong_types(run: dict[str, Any]) -> str | None:
    """The first run.json field a command reads that has the wrong type, or None."""
    if not isinstance(run["protocol_identity"], str):
        return f"protocol_identity is a {type_name(run['protocol_identity'])}, not text"
    installed = run.get("installed")
    if installed is not None and (not isinstance(installed, dict) or not all(
            isinstance(v, (str, type(None))) for v in installed.values())):
        return (f"installed is a {type_name(installed)}, not a table of package versions"
                if not isinstance(installed, dict) else "installed holds a version that is not text")
    for table in ("render", "renderer"):
        if run.get(table) is not None and not isinstance(run[table], dict):
            return f"{table} is a {type_name(run[table])}, not a table"
    sources = run.get("merged_from")
    if sources is not None and (not isinstance(sources, list)
                                or not all(isinstance(s, str) for s in sources)):
        return "merged_from is not a list of folders"
    plan_ = run.get("plan")
    if not isinstance(plan_, dict):  # only a baseline reads a run.json without its plan
        return None
    cases = plan_.get("selection_cases", [])
    if not isinstance(cases, list) or not all(isinstance(c, str) for c in cases):
        return "plan.selection_cases is not a list of case ids"
    profile = plan_.get("profile", {"name": ""})
    if not isinstance(profile, dict) or not isinstance(profile.get("name"), str):
        return "plan.profile has no name"
    if not isinstance(plan_.get("adapter", ""), str):
        return f"plan.adapter is a {type_name(plan_['adapter'])}, not an adapter name"
    kinds = plan_.get("kinds", [])
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        return "plan.kinds is not a list of module:Class names"
    if not isinstance(plan_.get("selection", {}), dict):
        return f"plan.selection is a {type_name(plan_['selection'])}, not a table"
    shard = plan_.get("shard")
    if shard is not None and (not isinstance(shard, list) or len(shard) != 2
                              or not all(type(n) is int for n in shard)):
        return "plan.shard is not null or [index, count]"
    return None


def record_schema(run: dict[str, Any]) -> str:
    """The record schema a run folder started with (run.json from before the key: 1).

    Folders of different readable schemas merge and resume: the records are read by one
    converter (``Entry.from_dict``) whatever their schema; a resume names the schema it
    appends with in run.json's ``resumed``."""
    return str(run.get("record_schema", READABLE_SCHEMAS[0]))


@dataclass(frozen=True)
class CaseFolder:
    """One case's folder as this run folder holds it: where, its own record
    (``episode.json``), or why it cannot be read."""

    path: Path
    episode: dict[str, Any] | None
    """episode.json, a case record (its types checked); None with ``problem``."""
    problem: str | None
    """Why the folder cannot be used (missing, unreadable, no or a damaged episode.json)."""
    readable: bool = False
    """The folder is there and this user can list it (its episode.json may still not
    be usable: ``safety`` needs only its signals file)."""
    source: Path | None = None
    """For a merged folder: the source folder the evidence was found in."""
    unreadable: bool = False
    """There, but this user cannot list it: a reason to answer, not a case without
    evidence."""


@dataclass(frozen=True)
class RunRead:
    """A run folder read once: run.json and every record, their types checked."""

    path: Path
    run: dict[str, Any]
    records: list[CaseRecord]

    @property
    def by_case(self) -> dict[str, CaseRecord]:
        return {r["case"]: r for r in self.records}

    @property
    def adapter(self) -> str:
        return str(self.run["plan"].get("adapter", "libero"))

    @property
    def kinds(self) -> tuple[str, ...]:
        """The perturbation kinds of the operator's own the run registered (``--libero-kind``)."""
        return tuple(self.run["plan"].get("kinds", ()))

    @property
    def installed(self) -> dict[str, str | None]:
        found: dict[str, str | None] = self.run.get("installed") or {}
        return found

    @property
    def render(self) -> dict[str, Any]:
        found: dict[str, Any] = self.run.get("render") or {}
        return found

    def case_folder(self, case: str) -> CaseFolder:
        """The case's folder in this run folder (or in a merged folder's sources),
        read; never the record's ``evidence_dir``."""
        if folder_name_problem(case) is not None:
            return CaseFolder(self.path / CASES_NAME, None,
                              f"the case id {shown(case)!r} is not a folder name; the record "
                              "is damaged")
        local = case_path(self.path, case)
        if _exists(local) or not self.run.get("merged_from"):
            return read_case_folder(local)
        for source in merged_sources(self.path, self.run):
            candidate = case_path(source, case)
            if _exists(candidate):
                found = read_case_folder(candidate)
                return replace(found, source=source)
        return CaseFolder(local, None, f"no case folder {CASES_NAME}/{shown(case)} here nor in "
                          f"the folders this merge was made from ({RUN_NAME}'s merged_from)")


def read_run(folder: Path, option: str = "") -> RunRead:
    """run.json and results.jsonl of ``folder``, checked (SetupError naming the file)."""
    run = load_run(folder, option)
    return RunRead(folder, run, read_results(folder, option))


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a parent this user cannot search: it is there, unreadable
        return True


def read_case_folder(path: Path) -> CaseFolder:
    """A case folder and its episode.json, or why either cannot be read."""
    try:
        if not path.is_dir():
            return CaseFolder(path, None, f"no case folder {shown(path)}: a run folder is "
                              "verified from its own cases/ only (copy them with it)")
        os.listdir(path)
        try:  # listing needs read access, opening a file in it search access too
            os.stat(path / RECORD_NAME)
        except FileNotFoundError:
            pass
    except OSError as exc:
        return CaseFolder(path, None, f"cannot read the case folder {shown(path)} "
                          f"({exc.strerror or exc}); give this user read access to it",
                          unreadable=True)
    episode = path / RECORD_NAME
    try:
        raw = episode.read_text(encoding="utf-8")
    except FileNotFoundError:
        return CaseFolder(path, None, f"{shown(episode)} is missing: the case's own record is "
                          f"gone, so its line in {RESULTS_NAME} cannot be checked", True)
    except OSError as exc:
        return CaseFolder(path, None, f"cannot read {shown(episode)} ({exc.strerror or exc}); "
                          "give this user read access to the case folder", True)
    except UnicodeDecodeError:
        return CaseFolder(path, None, f"{shown(episode)} is not UTF-8 text; the case folder "
                          "is damaged", True)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return CaseFolder(path, None, f"{shown(episode)} is not JSON ({exc}); the case folder "
                          "is damaged", True)
    problem = record_problem(data)
    if problem is not None:
        return CaseFolder(path, None, f"{shown(episode)} is not a case record: {problem}", True)
    return CaseFolder(path, data, None, True)


def merged_sources(folder: Path, run: dict[str, Any]) -> Iterator[Path]:
    """The folders a merged folder was made from, and theirs, in order (relative names,
    as older merges wrote them, are taken from the current folder)."""
    seen: set[Path] = set()
    pending = [Path(s) for s in run.get("merged_from") or []]
    while pending and len(seen) < _MAX_SOURCES:
        source = pending.pop(0)
        if source in seen:
            continue
        seen.add(source)
        yield source
        try:
            inner = read_json(source, RUN_NAME)
        except SetupError:
            continue
        nested = inner.get("merged_from") if isinstance(inner, dict) else None
        if isinstance(nested, list):
            pending += [Path(s) for s in nested if isinstance(s, str)]
