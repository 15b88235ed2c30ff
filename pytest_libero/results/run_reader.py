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
run's files. A case folder is read only as the run wrote it: a real folder (never a
link), its files regular files in it, each read only up to the size a valid one has
(``files.open_regular``); anything else is named, never waited on or followed.

Records are checked with the run that holds them: in a run whose run.json names its
renderer, each carries its own fingerprint (every record of such a run does; a record
without was edited, and would otherwise pass for a folder written before fingerprints).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_libero.episode.record import READABLE_SCHEMAS, CaseRecord
from pytest_libero.episode.record_check import RECORD_LIMIT, record_problem
from pytest_libero.evidence.layout import LEVELS, RECORD_NAME
from pytest_libero.evidence.renderer import fingerprint_problem
from pytest_libero.files import Refused, folder_name_problem, read_capped
from pytest_libero.goals.score import score_disagreement
from pytest_libero.protocol.clock import REALTIME, SYNCHRONOUS
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped
from pytest_libero.results.layout import (
    BEYOND_TORN,
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
    if run.get("render") is not None and not isinstance(run["render"], dict):
        return f"render is a {type_name(run['render'])}, not a table"
    if (run.get("renderer") is not None
            and (problem := fingerprint_problem(run["renderer"])) is not None):
        return f"renderer {problem}, not a renderer fingerprint"
    for key in ("ood_identity", "perturb_identity"):
        if run.get(key) is not None and not isinstance(run[key], str):
            return f"{key} is a {type_name(run[key])}, not text"
    sources = run.get("merged_from")
    if sources is not None and (not isinstance(sources, list)
                                or not all(isinstance(s, str) for s in sources)):
        return "merged_from is not a list of folders"
    plan_ = run.get("plan")
    if not isinstance(plan_, dict):  # only a baseline reads a run.json without its plan
        return None
    return _plan_problem(plan_)


def _plan_problem(plan_: dict[str, Any]) -> str | None:
    """The first field of run.json's plan a command reads with the wrong type, or None."""
    cases = plan_.get("selection_cases", [])
    if not isinstance(cases, list) or not all(isinstance(c, str) for c in cases):
        return "plan.selection_cases is not a list of case ids"
    profile = plan_.get("profile", {"name": "x"})
    if not isinstance(profile, dict) or not isinstance(profile.get("name"), str):
        return "plan.profile has no name"
    if folder_name_problem(profile["name"]) is not None:
        return f"plan.profile.name is {shown(profile['name'])!r}, not a profile's name"
    for key, kind in (("options", dict), ("state_fed", str), ("out_of_bounds", str)):
        if profile.get(key) is not None and not isinstance(profile[key], kind):
            return f"plan.profile.{key} is a {type_name(profile[key])}"
    if plan_.get("mode", "fast") not in ("fast", "full"):
        return f"plan.mode is {shown(plan_['mode'])!r}, not fast or full"
    if plan_.get("evidence", LEVELS[0]) not in LEVELS:
        return f"plan.evidence is {shown(plan_['evidence'])!r}, not {' or '.join(LEVELS)}"
    partial = plan_.get("partial") or []
    if not isinstance(partial, list) or not all(isinstance(p, str) for p in partial):
        return "plan.partial is not a list of reasons"
    if not isinstance(plan_.get("evidence_class", ""), str):
        return f"plan.evidence_class is a {type_name(plan_['evidence_class'])}, not text"
    if not isinstance(plan_.get("adapter", ""), str):
        return f"plan.adapter is a {type_name(plan_['adapter'])}, not an adapter name"
    if plan_.get("clock", SYNCHRONOUS) not in (SYNCHRONOUS, REALTIME):
        return f"plan.clock is {shown(plan_['clock'])!r}, not {SYNCHRONOUS} or {REALTIME}"
    kinds = plan_.get("kinds", [])
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        return "plan.kinds is not a list of module:Class names"
    selection = plan_.get("selection", {})
    if not isinstance(selection, dict):
        return f"plan.selection is a {type_name(plan_['selection'])}, not a table"
    states = selection.get("init_states") or []
    if not isinstance(states, list) or not all(type(s) is int for s in states):
        return "plan.selection.init_states is not a list of init states"
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
    def clock(self) -> str:
        """The simulated clock the run's replies stood on (protocol/clock.py)."""
        return str(self.run["plan"].get("clock", SYNCHRONOUS))

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


def read_run(folder: Path, option: str = "", *, plan: bool = True, scores: bool = True) -> RunRead:
    """run.json and results.jsonl of ``folder``, each checked and the records against the
    run (SetupError naming the file); ``plan=False``: a baseline's, whose run.json need
    hold no more than its protocol identity. A record whose score is not the one its own
    outcome, progress and engagement give is refused (``scores=False``: verify, which
    answers it case by case)."""
    run = load_run(folder, option, plan=plan)
    records = read_results(folder, option)
    problem = _records_problem(run, records, scores)
    if problem is not None:
        raise SetupError(f"{folder / RESULTS_NAME}:{problem}; {BEYOND_TORN}")
    return RunRead(folder, run, records)


def _records_problem(run: dict[str, Any], records: list[CaseRecord], scores: bool = True) -> str | None:
    """``line: what`` for the first record its run.json contradicts, or whose score is
    not its own (``scores``), or None."""
    fingerprinted = run.get("renderer") is not None
    for number, record in enumerate(records, start=1):
        case = shown(record["case"])
        if scores and (forged := score_disagreement(record)) is not None:
            return f"{number}: the record of {case!r} {forged}"
        if fingerprinted and "renderer" not in (record.get("identity") or {}):
            return (f"{number}: the record of {case!r} carries no renderer fingerprint "
                    f"(identity.renderer), though its {RUN_NAME} names the run's renderer and "
                    "every record of such a run carries one")
    return None


def _exists(path: Path) -> bool:
    """Something is at ``path`` (a link, even a broken one, included)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:  # a parent this user cannot search: it is there, unreadable
        return True
    return True


def read_case_folder(path: Path) -> CaseFolder:
    """A case folder and its episode.json, or why either cannot be read."""
    try:
        mode = os.lstat(path).st_mode
        if not stat.S_ISDIR(mode):
            what = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
            return CaseFolder(path, None, f"{shown(path)} is {what}: a case folder is read only "
                              "as the run wrote it, never through a link; copy the run folder "
                              "again")
    except (FileNotFoundError, NotADirectoryError):
        return CaseFolder(path, None, f"no case folder {shown(path)}: a run folder is "
                          "verified from its own cases/ only (copy them with it)")
    except OSError as exc:
        return CaseFolder(path, None, f"cannot read the case folder {shown(path)} "
                          f"({exc.strerror or exc}); give this user read access to it",
                          unreadable=True)
    try:
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
        raw = read_capped(episode, RECORD_LIMIT, links=False).decode("utf-8")
    except Refused as exc:
        return CaseFolder(path, None, f"{clipped(str(exc))}; the case folder is damaged", True)
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
