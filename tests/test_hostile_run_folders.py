"""Hostile run folders (issue 40, round 3: classes 1, 2, 4, 5, 7, 10, 12, and 14's run-folder
messages): each row is one folder damaged by hand and the one line its readers answer.

The folders are made by hand, without a simulator: a run.json, records as a run writes
them (entries from the installed catalog, a renderer fingerprint, evidence files hashed
with their sizes, a vacuous safety verdict) and case folders holding those files. Every
case a verify row reaches is settled before re-execution, so no simulator starts;
whatever could block or read without end (a FIFO, /dev/zero, a 2 GB file) runs in its
own process with a timeout, or under a memory trace. docs/reliability.md's round-3
table is made from the ``HOSTILE`` rows below (``python -m harness.hostile``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cli_runs
import numpy as np
import pytest
from cli_runs import Said

from harness.hostile import Hostile
from pytest_libero import session
from pytest_libero.audit import verify
from pytest_libero.audit.verify import installed_versions
from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.episode.record import RECORD_SCHEMA
from pytest_libero.evidence.renderer import REFERENCE_FRAME
from pytest_libero.files import LINE_LIMIT
from pytest_libero.files import write_json_atomic as real_write_json
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.identity import protocol_identity
from pytest_libero.results import merge as merge_module
from pytest_libero.results.folder import set_aside_torn_line
from pytest_libero.results.layout import read_json, read_results
from pytest_libero.results.run_reader import read_case_folder
from pytest_libero.safety.signals import SIGNALS_NAME, UNPACKED_LIMIT, Signals

pytest_plugins = ["pytester"]

FILE = "tests/test_hostile_run_folders.py"
CASES = ("libero_10-00", "libero_10-01")
FINGERPRINT = {"frame": REFERENCE_FRAME, "sha256": "a" * 64, "backend": "egl",
               "vendor": "Mesa/X.org", "renderer": "llvmpipe (LLVM 15.0.6, 256 bits)",
               "version": "4.5 (Compatibility Profile) Mesa 22.3.6"}
OTHER = {**FINGERPRINT, "sha256": "b" * 64, "vendor": "NVIDIA Corporation",
         "renderer": "NVIDIA H200/PCIe/SSE2", "version": "4.6.0 NVIDIA 550.54.15"}
COPY = "use the run folder as the run wrote it (copy it again)"
DAMAGED = f"it was not written by pytest-libero, or it is damaged: {COPY}"
BEYOND = f"results.jsonl is damaged beyond a torn last line: {COPY}"
RECORD_BYTES = 8 << 20
TWO_GB = 2 << 30
TIMEOUT = 120
"""Seconds a command that must not block may take, in its own process."""
RUN_ARGS = ("--libero-profile=zero", "--libero-isolation=none", "--libero-scope=task_coverage",
            "--libero-suite=libero_10", "--libero-task-ids=0", "-k", "nothing_runs")
"""A session that selects one case and deselects it: it reads the folder, runs nothing."""


# --- hand-made run folders ------------------------------------------------------------


def signals_bytes() -> bytes:
    """A signals file of an episode that touched nothing: vacuous, idle."""
    empty = np.zeros((0, 1))
    signals = Signals(("basket_1",), (True,), 0.9, empty, empty, empty, empty,
                      empty.astype(bool), empty.astype(bool), empty)
    buffer = io.BytesIO()
    signals.save(buffer)  # type: ignore[arg-type]
    return buffer.getvalue()


def make_record(case_dir: Path, case: str, outcome: str = "failure",
                renderer: dict[str, Any] | None = FINGERPRINT) -> dict[str, Any]:
    """A case record as a run writes it, and its case folder (episode.json included)."""
    case_dir.mkdir(parents=True)
    index = CaseId.parse(case).index
    entry = next(e for e in load_catalog().suite_entries("libero_10") if e.index == index)
    files = {"observations.jsonl": b'{"call": 1}\n', "actions.jsonl": b'{"call": 1}\n',
             SIGNALS_NAME: signals_bytes()}
    for name, data in files.items():
        (case_dir / name).write_bytes(data)
    record: dict[str, Any] = {
        "case": case, "entry": dict(entry.as_dict()), "profile": "zero",
        "evidence_class": "infrastructure", "evidence_level": "full", "track": "rgb",
        "budget": {"mode": "decisions", "control_cap": 1, "cap_source": "decisions",
                   "replan_interval": 1, "max_policy_calls": 1},
        "stop_rule": "ignore", "identity": {} if renderer is None else {"renderer": renderer},
        "policy_metadata": {"policy": "zero"}, "state_fed": "none", "outcome": outcome,
        "termination": None, "truncation": "control_cap",
        "counters": {"policy_calls": 1, "decisions": 1, "executed_controls": 1,
                     "init_controls": 10, "stop_signals": 0, "first_success_control": None,
                     "first_success_policy_call": None},
        "chunks": [{"call": 1, "horizon": 5, "executed": 1, "stop": False}],
        "clipping": {"mode": "error", "chunks": 0, "values": 0, "max_excess": 0.0},
        "error": None, "summary": "no native success", "started_at": 1.0e9, "timings": {},
        "worker": "main", "gpu": None, "egl_device": None, "pid": 1, "renders": None,
        "evidence": {"level": "full", "errors": [], "files": {
            name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for name, data in files.items()}},
        "evidence_dir": str(case_dir), "reply_horizon": 5,
        "safety": {"verdict": "vacuous", "events": [], "first_contact_control": None},
        "engagement": "idle",
    }
    (case_dir / "episode.json").write_text(json.dumps(record, sort_keys=True))
    return record


def make_run(path: Path, cases: tuple[str, ...] = CASES, *, profile: str = "zero",
             renderer: dict[str, Any] | None = FINGERPRINT) -> Path:
    """A run folder of ``cases`` (all selected, each with its case folder)."""
    path.mkdir(parents=True)
    run: dict[str, Any] = {
        "run_id": path.name, "protocol_identity": protocol_identity(),
        "record_schema": RECORD_SCHEMA, "installed": installed_versions(),
        "render": {"backend": "egl", "pyopengl_platform": "egl"},
        "plan": {"profile": {"name": profile, "sha256": "abc"},
                 "selection": {"scope": "task_coverage", "suite": "libero_10", "task_ids": [0, 1]},
                 "selection_cases": list(CASES), "cases": list(CASES), "shard": None,
                 "budget_mode": "decisions", "max_policy_calls": 1, "replan_interval": 1,
                 "track": "rgb", "evidence_class": "infrastructure", "mode": "fast"},
    }
    if renderer is not None:
        run["renderer"] = renderer
    (path / "run.json").write_text(json.dumps(run))
    records = [make_record(path / "cases" / case, case, renderer=renderer) for case in cases]
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def edit_run(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    run = json.loads((folder / "run.json").read_text())
    change(run)
    (folder / "run.json").write_text(json.dumps(run))


def edit_records(folder: Path, change: Callable[[dict[str, Any]], None],
                 cases: tuple[str, ...] = CASES) -> None:
    """Change records in results.jsonl and in their case folders' episode.json alike."""
    lines = []
    for line in (folder / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["case"] in cases:
            change(record)
            episode = folder / "cases" / record["case"] / "episode.json"
            kept = json.loads(episode.read_text())
            change(kept)
            episode.write_text(json.dumps(kept, sort_keys=True))
        lines.append(json.dumps(record))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")


def fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def sparse(path: Path, size: int, head: bytes = b"") -> None:
    """A file of ``size`` bytes that costs no disk: ``head``, then a hole."""
    path.unlink(missing_ok=True)
    with path.open("wb") as stream:
        stream.write(head)
        stream.truncate(size)


def link(path: Path, target: str | Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.symlink_to(target)


def stat_tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root with its size and mtime (a 2 GB file is never read here)."""
    found = {}
    for here, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(here) / name
            st = path.lstat()
            found[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return found


# --- running a command ------------------------------------------------------------------


def command(args: list[str], *, own_process: bool = False,
            unprivileged: bool = False) -> Said:
    """``pytest-libero ARGS``, in a process of its own when asked."""
    if own_process or unprivileged:
        return cli_runs.own_process(args, unprivileged=unprivileged, timeout=TIMEOUT)
    return cli_runs.in_process(args)


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def renderer_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process sessions take the folders' renderer instead of measuring one."""
    monkeypatch.setattr(session, "measure_for_cases", lambda *_: dict(FINGERPRINT))


# --- 1, 2, 4, 5, 12: a damaged folder gets one answer from every reader ----------------


@dataclass(frozen=True)
class Damage:
    """A folder damaged one way, and the line every reader of it answers."""

    id: str
    klass: int
    tried: str
    damage: Callable[[Path], None]
    answer: str
    """``{where}``: the folder as the reader names it (``--option=FOLDER``), ``{folder}``:
    the folder."""
    own_process: bool = False
    """It could block or read without end: each command runs in its own process."""
    sessions: bool = False
    """``--libero-resume`` and ``--libero-baseline`` read it too (through pytest)."""

    @property
    def row(self) -> Hostile:
        shown = self.answer.format(where="RUN", folder="RUN")
        return Hostile(self.klass, self.tried, f"every reader: \"{shown}\"",
                       f"{FILE}::test_every_reader_gives_a_damaged_folder_one_answer[{self.id}]")


def record_change(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda folder: edit_records(folder, change, CASES[:1])


def second_line(folder: Path) -> None:
    first = json.loads((folder / "results.jsonl").read_text().splitlines()[0])
    with (folder / "results.jsonl").open("a") as stream:
        stream.write(json.dumps({**first, "outcome": "success"}) + "\n")


def without_fingerprint(record: dict[str, Any]) -> None:
    del record["identity"]["renderer"]


def record_answer(problem: str, line: int = 1, case: str = CASES[0]) -> str:
    return (f"{{folder}}/results.jsonl:{line}: the record of {case!r} is not a pytest-libero "
            f"case record: {problem}; {BEYOND}")


DAMAGES = (
    Damage("profile-name-empty", 1, "run.json's `plan.profile.name` empty (merge wrote "
           "`/<id>-merged`, at the filesystem root)",
           lambda f: edit_run(f, lambda r: r["plan"]["profile"].update(name="")),
           f"{{where}}: run.json's plan.profile.name is '', not a profile's name; {DAMAGED}"),
    Damage("profile-name-climbs", 1, "run.json's `plan.profile.name` `../../x`",
           lambda f: edit_run(f, lambda r: r["plan"]["profile"].update(name="../../x")),
           f"{{where}}: run.json's plan.profile.name is '../../x', not a profile's name; "
           f"{DAMAGED}"),
    Damage("files-dev-zero", 2, "a record naming `/dev/zero` in `evidence.files` (verify "
           "hashed it until killed)",
           record_change(lambda r: r["evidence"]["files"].update(
               {"/dev/zero": {"bytes": 1, "sha256": "0" * 64}})),
           record_answer("'evidence.files' names '/dev/zero', not a file of the case folder"),
           own_process=True),
    Damage("files-climb", 2, "a record naming `../../run.json` in `evidence.files`",
           record_change(lambda r: r["evidence"]["files"].update(
               {"../../run.json": {"bytes": 1, "sha256": "0" * 64}})),
           record_answer("'evidence.files' names '../../run.json', not a file of the case "
                         "folder")),
    Damage("run-json-fifo", 2, "a FIFO named `run.json`",
           lambda f: fifo(f / "run.json"),
           f"{{where}}: {{folder}}/run.json is a FIFO, not a regular file; {COPY}",
           own_process=True),
    Damage("run-json-dev-zero", 2, "`run.json` a link to `/dev/zero`",
           lambda f: link(f / "run.json", "/dev/zero"),
           f"{{where}}: {{folder}}/run.json is a character device, not a regular file; {COPY}",
           own_process=True),
    Damage("run-json-sparse", 2, "a 1 GB sparse `run.json`",
           lambda f: sparse(f / "run.json", 1 << 30, b"{"),
           f"{{where}}: {{folder}}/run.json holds {1 << 30} bytes, more than a valid one can "
           f"({64 << 20}); {COPY}"),
    Damage("results-fifo", 2, "a FIFO named `results.jsonl`",
           lambda f: fifo(f / "results.jsonl"),
           f"{{where}}: {{folder}}/results.jsonl is a FIFO, not a regular file; {COPY}",
           own_process=True),
    Damage("results-sparse", 2, "a 2 GB sparse `results.jsonl` (it cost 4 GB of memory)",
           lambda f: sparse(f / "results.jsonl", TWO_GB),
           f"{{folder}}/results.jsonl:1: a line of more than {RECORD_BYTES} bytes, longer than "
           f"any line written to it; {BEYOND}"),
    Damage("second-line", 4, "a second results.jsonl line for a case, with another outcome "
           "(verify read the last, `merge --baseline` took it, `safety` counted the case twice)",
           second_line,
           "{folder}/results.jsonl:3: a second line for 'libero_10-00' (the first is line 1); "
           f"one case has one line: {BEYOND}", sessions=True),
    Damage("fingerprint-removed", 5, "the fingerprint removed from the records of a run whose "
           "run.json names its renderer (two such runs merged with `\"mixed\": false`)",
           lambda f: edit_records(f, without_fingerprint),
           "{folder}/results.jsonl:1: the record of 'libero_10-00' carries no renderer "
           "fingerprint (identity.renderer), though its run.json names the run's renderer and "
           f"every record of such a run carries one; {BEYOND}", sessions=True),
    Damage("fingerprint-text", 5, "a record's fingerprint stored as text (read as \"written "
           "before fingerprints\")",
           record_change(lambda r: r["identity"].update(renderer="llvmpipe")),
           record_answer("'identity.renderer' is a str, not a renderer fingerprint"),
           sessions=True),
    Damage("fingerprint-list", 5, "a record's fingerprint stored as a list",
           record_change(lambda r: r["identity"].update(renderer=[FINGERPRINT])),
           record_answer("'identity.renderer' is a list, not a renderer fingerprint")),
    Damage("run-fingerprint-text", 5, "run.json's `renderer` stored as text",
           lambda f: edit_run(f, lambda r: r.update(renderer="llvmpipe")),
           f"{{where}}: run.json's renderer is a str, not a renderer fingerprint; {DAMAGED}"),
    Damage("clipping-table", 12, "`clipping: {\"x\": 1}` (merge left run.json and results.jsonl "
           "without summary.json)",
           record_change(lambda r: r.update(clipping={"x": 1})),
           record_answer("no 'clipping.chunks'")),
    Damage("engagement-list", 12, "an `engagement` list",
           record_change(lambda r: r.update(engagement=["idle"])),
           record_answer("'engagement' is a list")),
    Damage("entry-no-name", 12, "an entry without `name`",
           record_change(lambda r: r["entry"].pop("name")),
           record_answer("no 'entry.name'")),
    Damage("fingerprint-cut", 12, "a truncated renderer table",
           record_change(lambda r: r["identity"]["renderer"].pop("sha256")),
           record_answer("'identity.renderer' lacks sha256, not a renderer fingerprint")),
    Damage("events-number", 12, "`safety.events` a number",
           record_change(lambda r: r["safety"].update(events=5)),
           record_answer("'safety.events' is a int")),
    Damage("error-cut", 12, "an errored record whose `error` lacks its cause",
           record_change(lambda r: r.update(outcome="errored", error={"kind": "evidence"})),
           record_answer("no 'error.cause'")),
)

READERS = {
    "merge": (("merge", "{folder}", "--out", "{out}"), ""),
    "merge-baseline": (("merge", "{good}", "--out", "{out}", "--baseline", "{folder}"),
                       "--baseline"),
    "verify": (("verify", "{folder}"), ""),
    "safety": (("safety", "{folder}"), ""),
}
"""Each command that reads a run folder: its arguments, the option naming the folder."""


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.id for d in DAMAGES])
@pytest.mark.usefixtures("renderer_here")
def test_every_reader_gives_a_damaged_folder_one_answer(
    damage: Damage, tmp_path: Path, pytester: pytest.Pytester
) -> None:
    good = make_run(tmp_path / "zero" / "good")
    folder = make_run(tmp_path / "zero" / "damaged")
    damage.damage(folder)
    out = tmp_path / "merged"
    before = stat_tree(tmp_path)
    for reader, (argv, option) in READERS.items():
        args = [a.format(folder=folder, good=good, out=out) for a in argv]
        code, _, err = command(args, own_process=damage.own_process)
        where = f"{option}={folder}" if option else str(folder)
        prefix = f"pytest-libero {argv[0]}: "
        assert one_line(err) == prefix + damage.answer.format(where=where, folder=folder), reader
        assert code == 2, reader
    if damage.sessions:
        for option in ("--libero-resume", "--libero-baseline"):
            result = pytester.runpytest_inprocess(*RUN_ARGS, f"{option}={folder}")
            assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
            assert [line for line in result.stderr.lines if line.strip()] == [
                "ERROR: " + damage.answer.format(where=f"{option}={folder}", folder=folder)]
    assert stat_tree(tmp_path) == before, "a reader changed or left something"


# --- 1: nothing read from a folder decides where merge writes ---------------------------


@dataclass(frozen=True)
class Placement:
    id: str
    tried: str
    profile: str
    shard: bool = False

    @property
    def row(self) -> Hostile:
        return Hostile(1, self.tried, "merged beside the run, `<results>/<profile>/<id>-merged`; "
                       "run.json's profile name decides nothing (one that is no folder name is "
                       "refused, above)",
                       f"{FILE}::test_merge_without_out_writes_beside_the_run[{self.id}]")


PLACEMENTS = (
    Placement("named-tmp", "run.json's `plan.profile.name` `tmp`, merge without `--out` (it "
              "wrote `/tmp/<id>-merged`)", "tmp"),
    Placement("shard-named-like-its-run", "a shard whose run.json names its profile like the "
              "run folder above it", "run", shard=True),
)


@pytest.mark.parametrize("placement", PLACEMENTS, ids=[p.id for p in PLACEMENTS])
def test_merge_without_out_writes_beside_the_run(placement: Placement, tmp_path: Path) -> None:
    root = tmp_path / "results"
    folder = root / "zero" / "run"
    if placement.shard:
        folder = folder / "shard-1-of-1"
    make_run(folder, profile=placement.profile)
    code, out, err = command(["merge", str(folder)])
    assert code == 0, err
    merged = Path(out.splitlines()[-1].removeprefix("merged: "))
    assert merged.parent == root / "zero" and merged.name.endswith("-merged"), merged
    assert (merged / "summary.json").is_file()
    assert sorted(p.name for p in tmp_path.rglob("*-merged")) == [merged.name]


# --- 2: case-folder files are read as the run wrote them, bounded ----------------------


@dataclass(frozen=True)
class CaseFile:
    """A case folder's file made hostile, and what verify or safety answers."""

    id: str
    tried: str
    damage: Callable[[Path], None]
    """Given the case folder of libero_10-00."""
    verify: str | None
    """verify's reason for libero_10-00 (not verifiable); ``{case}``: the case folder."""
    safety: str | None
    """safety's one line (exit 2), or None: it checks the case as usual (exit 0)."""

    @property
    def row(self) -> Hostile:
        said = [f"verify: not verifiable, \"{self.verify.format(case='CASE')}\""] if self.verify else []
        said.append(f"safety: \"{self.safety.format(case='CASE')}\"" if self.safety else
                    "safety: the verdict, recomputed (no wait)")
        return Hostile(2, self.tried, "; ".join(said),
                       f"{FILE}::test_case_folder_files_are_regular_bounded_and_never_links[{self.id}]")


REGULAR = "not a regular file; the case folder is damaged"
SAFETY_FIX = "the case folder is damaged: copy it again from where the run wrote it"
CASE_FILES = (
    CaseFile("episode-json-fifo", "a FIFO named `episode.json` (verify and safety blocked)",
             lambda c: fifo(c / "episode.json"),
             f"{{case}}/episode.json is a FIFO, {REGULAR}", None),
    CaseFile("episode-json-sparse", "a 2 GB sparse `episode.json` (4 GB of memory)",
             lambda c: sparse(c / "episode.json", TWO_GB),
             f"{{case}}/episode.json holds {TWO_GB} bytes, more than a valid one can "
             f"({RECORD_BYTES}); the case folder is damaged", None),
    CaseFile("episode-json-link", "`episode.json` a link to a record outside the case folder",
             lambda c: link(c / "episode.json", c.parent / "libero_10-01" / "episode.json"),
             f"{{case}}/episode.json is a symbolic link, {REGULAR}", None),
    CaseFile("evidence-fifo", "a FIFO named `actions.jsonl`",
             lambda c: fifo(c / "actions.jsonl"),
             f"{{case}}/actions.jsonl is a FIFO, {REGULAR}", None),
    CaseFile("evidence-dev-zero", "`actions.jsonl` a link to `/dev/zero`",
             lambda c: link(c / "actions.jsonl", "/dev/zero"),
             f"{{case}}/actions.jsonl is a symbolic link, {REGULAR}", None),
    CaseFile("signals-fifo", "a FIFO named `safety.npz`",
             lambda c: fifo(c / SIGNALS_NAME),
             f"{{case}}/safety.npz is a FIFO, {REGULAR}",
             f"pytest-libero safety: {{case}}/safety.npz is a FIFO, not a regular file; "
             f"{SAFETY_FIX}"),
    CaseFile("signals-bomb", "a small `safety.npz` that unpacks to 257 MB",
             lambda c: bomb(c / SIGNALS_NAME), None,
             f"pytest-libero safety: {{case}}/safety.npz unpacks to {UNPACKED_LIMIT + (1 << 20)} "
             f"bytes, more than a valid one can ({UNPACKED_LIMIT}); {SAFETY_FIX}"),
)


def bomb(path: Path) -> None:
    """A zip of a few hundred kilobytes whose arrays would unpack past the limit."""
    path.unlink()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("displacement_m.npy", "w", force_zip64=True) as stream:
            block = bytes(1 << 20)
            for _ in range((UNPACKED_LIMIT >> 20) + 1):
                stream.write(block)


@pytest.mark.parametrize("case_file", CASE_FILES, ids=[c.id for c in CASE_FILES])
def test_case_folder_files_are_regular_bounded_and_never_links(case_file: CaseFile,
                                                                tmp_path: Path) -> None:
    folder = make_run(tmp_path / "zero" / "run")
    case_dir = folder / "cases" / CASES[0]
    case_file.damage(case_dir)
    if case_file.verify is not None:
        code, out, err = command(["verify", str(folder), "--case", CASES[0]], own_process=True)
        assert code == 1, out + err
        [verdict] = json.loads((folder / "verify.json").read_text())["cases"]
        assert (verdict["status"], verdict["reason"]) == (
            "not_verifiable", case_file.verify.format(case=case_dir)), out + err
        assert "renderer here" not in out  # settled before any simulator
    code, out, err = command(["safety", str(folder)], own_process=True)
    if case_file.safety is None:
        assert code == 0 and f"{CASES[0]}: vacuous, idle" in out, out + err
    else:
        assert (code, one_line(err)) == (2, case_file.safety.format(case=case_dir)), out + err


# --- 2: no reader reads more than a valid file holds ------------------------------------


@dataclass(frozen=True)
class Bounded:
    id: str
    tried: str
    damage: Callable[[Path], None]
    read: Callable[[Path], object]
    seen: str

    @property
    def row(self) -> Hostile:
        return Hostile(2, self.tried, self.seen,
                       f"{FILE}::test_no_reader_reads_more_than_a_valid_file_holds[{self.id}]")


def torn_tail(folder: Path) -> None:
    """One whole line, then a 2 GB torn one: what --libero-resume copied aside whole."""
    line = (folder / "results.jsonl").read_text().splitlines()[0] + "\n"
    sparse(folder / "results.jsonl", TWO_GB, line.encode() + b'{"case": ')


BOUNDED = (
    Bounded("results", "a 2 GB sparse `results.jsonl`, read by every command",
            lambda f: sparse(f / "results.jsonl", TWO_GB), read_results,
            f"refused after reading one line's limit ({RECORD_BYTES} bytes); peak memory under "
            "64 MB"),
    Bounded("episode-json", "a 2 GB sparse `episode.json`, read by verify and safety",
            lambda f: sparse(f / "cases" / CASES[0] / "episode.json", TWO_GB),
            lambda f: read_case_folder(f / "cases" / CASES[0]),
            "refused by its size before a byte is read; peak memory under 64 MB"),
    Bounded("run-json", "a 1 GB sparse `run.json`",
            lambda f: sparse(f / "run.json", 1 << 30), lambda f: read_json(f, "run.json"),
            "refused by its size; peak memory under 64 MB"),
    Bounded("torn-tail", "a 2 GB torn last line set aside by `--libero-resume` (it copied all "
            "of it)", torn_tail, set_aside_torn_line,
            f"refused: only the file's last {RECORD_BYTES + 1} bytes are read, nothing is copied "
            "and results.jsonl is left as it was; peak memory under 64 MB"),
)


@pytest.mark.parametrize("bounded", BOUNDED, ids=[b.id for b in BOUNDED])
def test_no_reader_reads_more_than_a_valid_file_holds(bounded: Bounded, tmp_path: Path) -> None:
    folder = make_run(tmp_path / "zero" / "run")
    bounded.damage(folder)
    tracemalloc.start()
    try:
        found = bounded.read(folder)
    except SetupError as exc:
        found = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 64 << 20, peak
    if bounded.id == "episode-json":
        assert "more than a valid one can" in str(found)
    else:
        assert isinstance(found, SetupError), found
    assert not list(folder.glob("results.jsonl.torn-*"))
    assert LINE_LIMIT > RECORD_BYTES  # results.jsonl's lines have the tighter limit


def test_resume_refuses_a_torn_tail_longer_than_a_record(
    tmp_path: Path, pytester: pytest.Pytester, renderer_here: None
) -> None:
    folder = make_run(tmp_path / "zero" / "run")
    torn_tail(folder)
    result = pytester.runpytest_inprocess(*RUN_ARGS, f"--libero-resume={folder}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"results.jsonl:2: a line of more than {RECORD_BYTES} bytes" in result.stderr.str()
    assert (folder / "results.jsonl").stat().st_size == TWO_GB  # left as it was
    assert not list(folder.glob("results.jsonl.torn-*"))


# --- 7: a run killed before its first case merges, its cases unattempted ---------------


@dataclass(frozen=True)
class Killed:
    id: str
    tried: str
    folders: tuple[str, ...]
    """Each folder merged: ``empty`` (results.jsonl empty), ``torn`` (a torn line alone),
    ``normal`` (both cases finished)."""
    unattempted: int

    @property
    def row(self) -> Hostile:
        return Hostile(7, self.tried, f"merged (exit 0), {self.unattempted} of 2 cases "
                       "unattempted; it answered \"different renderers: .\" with exit 2",
                       f"{FILE}::test_a_run_killed_before_its_first_case_merges[{self.id}]")


KILLED = (
    Killed("empty", "an empty results.jsonl", ("empty",), 2),
    Killed("torn-alone", "a torn line alone in results.jsonl", ("torn",), 2),
    Killed("two-killed", "two such folders merged", ("empty", "torn"), 2),
    Killed("with-a-normal-run", "one such folder merged with a run that finished its cases",
           ("torn", "normal"), 0),
    Killed("other-renderer", "one such folder whose run.json names another renderer, merged "
           "with a finished run (no image of it to compare)", ("other", "normal"), 0),
)


@pytest.mark.parametrize("killed", KILLED, ids=[k.id for k in KILLED])
def test_a_run_killed_before_its_first_case_merges(killed: Killed, tmp_path: Path) -> None:
    folders = []
    for n, kind in enumerate(killed.folders):
        folder = make_run(tmp_path / "zero" / f"{kind}-{n}",
                          renderer=OTHER if kind == "other" else FINGERPRINT)
        if kind != "normal":
            (folder / "results.jsonl").write_bytes(b'{"case": "libero_10-0' if kind == "torn"
                                                   else b"")
        folders.append(str(folder))
    code, out, err = command(["merge", *folders, "--out", str(tmp_path / "merged")])
    assert code == 0, out + err
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["counts"]["unattempted"] == killed.unattempted
    assert summary["renderer"]["mixed"] is False


# --- 10: lesser verdict gaps --------------------------------------------------------------


def test_verify_names_a_key_added_to_the_entry(tmp_path: Path) -> None:
    folder = make_run(tmp_path / "zero" / "run")
    edit_records(folder, lambda r: r["entry"].update(colour="red"), CASES[:1])
    code, out, err = command(["verify", str(folder), "--case", CASES[0]])
    assert code == 1, out + err
    [verdict] = json.loads((folder / "verify.json").read_text())["cases"]
    assert verdict["status"] == "mismatch"
    assert verdict["difference"] == {"field": "entry.colour", "recorded": "red",
                                     "catalog": "(absent)"}
    assert verdict["reason"] == VERIFY_EXTRA_KEY
    assert "renderer here" not in out  # no simulator started


VERIFY_EXTRA_KEY = ("entry.colour differs between the record in results.jsonl and the "
                    "installed catalog's entry for this case: recorded \"red\", catalog "
                    "\"(absent)\"")


@dataclass(frozen=True)
class Gap:
    id: str
    tried: str
    damage: Callable[[Path], None]
    safety: str
    """safety's one line (exit 2); ``{folder}``: the run folder."""
    verify: str | None = None
    """verify's reason for libero_10-00 (not verifiable), if it reads the case."""

    @property
    def row(self) -> Hostile:
        said = f"safety: \"{self.safety.format(folder='RUN')}\" (exit 2)"
        if self.verify is not None:
            said += f"; verify: not verifiable, \"{self.verify.format(folder='RUN')}\""
        return Hostile(10, self.tried, said,
                       f"{FILE}::test_a_case_folder_that_is_gone_or_a_link_is_named[{self.id}]")


LINKED = ("{folder}/cases/libero_10-00 is a symbolic link: a case folder is read only as the "
          "run wrote it, never through a link; copy the run folder again")
GAPS = (
    Gap("cases-gone", "`cases/` gone (safety said \"0 of 0 cases\", exit 0)",
        lambda f: shutil.rmtree(f / "cases"),
        "pytest-libero safety: libero_10-00: its record holds a safety verdict, but no case "
        "folder {folder}/cases/libero_10-00: a run folder is verified from its own cases/ only "
        "(copy them with it)"),
    Gap("case-link-loop", "a case folder that is a symbolic link loop (\"no safety signals\")",
        lambda f: link(f / "cases" / CASES[0], f / "cases" / CASES[0]),
        f"pytest-libero safety: libero_10-00: its record holds a safety verdict, but {LINKED}",
        LINKED),
    Gap("case-link-elsewhere", "a case folder that is a link to another folder",
        lambda f: link(f / "cases" / CASES[0], f / "cases" / CASES[1]),
        f"pytest-libero safety: libero_10-00: its record holds a safety verdict, but {LINKED}",
        LINKED),
)


@pytest.mark.parametrize("gap", GAPS, ids=[g.id for g in GAPS])
def test_a_case_folder_that_is_gone_or_a_link_is_named(gap: Gap, tmp_path: Path) -> None:
    folder = make_run(tmp_path / "zero" / "run")
    gap.damage(folder)
    code, out, err = command(["safety", str(folder)], own_process=True)
    assert (code, one_line(err)) == (2, gap.safety.format(folder=folder)), out + err
    if gap.verify is not None:
        code, out, err = command(["verify", str(folder), "--case", CASES[0]], own_process=True)
        [verdict] = json.loads((folder / "verify.json").read_text())["cases"]
        assert (code, verdict["reason"]) == (1, gap.verify.format(folder=folder)), out + err


# --- 12: a merge is written whole or not at all ------------------------------------------


def no_space(target: Path, data: Any) -> Path:
    if target.name == "summary.json":
        raise OSError(28, "No space left on device")
    return real_write_json(target, data)




def broken_summary(*_: Any, **__: Any) -> dict[str, Any]:
    raise KeyError("values")


@dataclass(frozen=True)
class Failing:
    id: str
    tried: str
    attribute: str
    replacement: Callable[..., Any]
    answer: str

    @property
    def row(self) -> Hostile:
        return Hostile(12, self.tried, f"\"{self.answer.format(out='OUT', folder='RUN')}\"; "
                       "nothing is left: not OUT, its hidden work folder, nor a folder made "
                       "to hold it",
                       f"{FILE}::test_a_merge_that_fails_leaves_nothing[{self.id}]")


FAILING = (
    Failing("disk-full", "the disk fills while merge writes summary.json", "write_json_atomic",
            no_space, "pytest-libero merge: cannot create the run folder {out} (No space left "
            "on device); give a results location that is a folder this user can write "
            "(--libero-results, or merge's --out)"),
    Failing("summary-breaks", "a record value the read check let through breaks the summary",
            "summarize", broken_summary,
            "pytest-libero merge: cannot summarize {folder}: a record holds a value the summary "
            f"cannot use (KeyError: 'values'); {DAMAGED}"),
)


@pytest.mark.parametrize("failing", FAILING, ids=[f.id for f in FAILING])
def test_a_merge_that_fails_leaves_nothing(failing: Failing, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_run(tmp_path / "zero" / "run")
    monkeypatch.setattr(merge_module, failing.attribute, failing.replacement)
    out = tmp_path / "out" / "merged"
    code, _, err = command(["merge", str(folder), "--out", str(out)])
    assert (code, one_line(err)) == (2, failing.answer.format(out=out, folder=folder))
    assert not out.parent.exists()  # not the folder, its hidden work folder, nor its parent


# --- 14: merge's and verify's own messages ----------------------------------------------


@dataclass(frozen=True)
class Message:
    id: str
    tried: str
    argv: tuple[str, ...]
    answer: str
    """``{folder}``: the run folder."""
    prepare: Callable[[Path], None] = lambda folder: None
    unprivileged: bool = False

    @property
    def row(self) -> Hostile:
        return Hostile(14, self.tried, f"\"{self.answer.format(folder='RUN')}\" (exit 2)",
                       f"{FILE}::test_merge_and_verify_name_their_own_flags[{self.id}]")


def read_only(folder: Path) -> None:
    folder.chmod(0o555)


MESSAGES = (
    Message("merge-out-empty", "`merge --out ''` (it named `--libero-run-id`)",
            ("merge", "{folder}", "--out", ""),
            "pytest-libero merge: --out is empty; name the new folder (one that does not exist), "
            "or leave --out out for a new run id beside the first folder"),
    Message("merge-out-dev-null", "`merge --out /dev/null` (it named `--libero-run-id`)",
            ("merge", "{folder}", "--out", "/dev/null"),
            "pytest-libero merge: /dev/null already exists; a merge writes a new folder and "
            "never overwrites anything: give --out a path that does not exist"),
    Message("merge-out-in-cases", "`merge --out` inside a source run's `cases/`",
            ("merge", "{folder}", "--out", "{folder}/cases/merged"),
            "pytest-libero merge: --out {folder}/cases/merged lies inside {folder}, a folder "
            "being merged; a merge never writes into a run it reads: give --out a path outside it"),
    Message("verify-case-empty", "`verify --case ''` (it said \"no record of ;\")",
            ("verify", "{folder}", "--case", ""),
            "pytest-libero verify: --case '' names no case: give a case id; its cases: "
            "libero_10-00, libero_10-01"),
    Message("verify-json-a-folder", "`verify.json` cannot be written: a folder in its place (verify "
            "re-executed every case before finding that out)", ("verify", "{folder}"),
            "pytest-libero verify: cannot write {folder}/verify.json (a folder is in the way), "
            "where verify keeps its verdicts; verify a copy this user can write to",
            lambda folder: (folder / "verify.json").mkdir()),
    Message("verify-read-only", "`verify` of a run folder this user cannot write",
            ("verify", "{folder}"),
            "pytest-libero verify: cannot write {folder}/verify.json (Permission denied), where "
            "verify keeps its verdicts; verify a copy this user can write to",
            read_only, unprivileged=True),
)


@pytest.mark.parametrize("message", MESSAGES, ids=[m.id for m in MESSAGES])
def test_merge_and_verify_name_their_own_flags(message: Message, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_run(tmp_path / "zero" / "run")
    message.prepare(folder)

    def no_re_execution(*_: Any) -> None:
        raise AssertionError("verify re-executed a case before refusing")

    monkeypatch.setattr(verify, "precheck", no_re_execution)
    before = stat_tree(tmp_path)
    try:
        code, out, err = command([a.format(folder=folder) for a in message.argv],
                                 unprivileged=message.unprivileged)
    finally:
        folder.chmod(0o755)
    assert (code, one_line(err)) == (2, message.answer.format(folder=folder)), out + err
    assert "--libero-run-id" not in err
    assert stat_tree(tmp_path) == before


# --- the rows of docs/reliability.md's round-3 table ------------------------------------


def rows() -> Iterator[Hostile]:
    for table in (DAMAGES, PLACEMENTS, CASE_FILES, BOUNDED, KILLED, GAPS, FAILING, MESSAGES):
        yield from (item.row for item in table)
    yield Hostile(10, "a key added to a record's `entry` (verify ignored it)",
                  f"verify: mismatch, \"{VERIFY_EXTRA_KEY}\"; no simulator started",
                  f"{FILE}::test_verify_names_a_key_added_to_the_entry")
    yield Hostile(2, "`--libero-resume` of a folder ending in a 2 GB torn line",
                  "refused as a line longer than any record (exit 4); nothing copied, "
                  "results.jsonl left as it was",
                  f"{FILE}::test_resume_refuses_a_torn_tail_longer_than_a_record")


HOSTILE: list[Hostile] = list(rows())
