"""One case: open the native episode, run it against the policy, return its record.

The record is plain JSON-ready data; it is the single source for the pytest outcome,
the results line and (later) every report. Nothing here raises for an episode
problem: errors are part of the record.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pytest_libero.adapters import get_adapter
from pytest_libero.catalog import Entry
from pytest_libero.episode import (
    EpisodeListener,
    EpisodeResult,
    call_policy,
    error_record,
    run_episode,
)
from pytest_libero.errors import EpisodeError
from pytest_libero.plan import RunPlan
from pytest_libero.results import write_json_atomic
from pytest_libero.policy.contract import Policy


def run_case_with_evidence(
    plan: RunPlan, entry: Entry, policy: Policy, case_dir: Path
) -> dict[str, Any]:
    """Run the case while streaming its evidence into ``case_dir`` (P10).

    A failure to write evidence errors the case with cause "evidence": a result whose
    evidence is missing cannot be trusted, whatever LIBERO said.
    """
    from pytest_libero.evidence import CaseEvidence, EvidenceError

    evidence: CaseEvidence | None = None
    try:
        evidence = CaseEvidence(case_dir)
    except EvidenceError as exc:
        record = run_case(plan, entry, policy, skip_episode=exc)
    else:
        record = run_case(plan, entry, policy, listener=evidence)
        try:
            record["evidence"] = evidence.close()
        except EvidenceError as exc:
            record["evidence"] = exc.summary
            if record["outcome"] != "errored":
                record["native_outcome"] = record["outcome"]
                record["outcome"] = "errored"
                record["error"] = error_record(exc)
                record["summary"] = f"errored (evidence): {exc}"
    record["evidence_dir"] = str(case_dir)
    write_json_atomic(case_dir / "episode.json", record)
    return record


def run_case(
    plan: RunPlan,
    entry: Entry,
    policy: Policy,
    *,
    adapter_name: str = "libero",
    listener: EpisodeListener | None = None,
    skip_episode: EpisodeError | None = None,
) -> dict[str, Any]:
    """Run the entry's episode and return its full record (P9-P11).

    ``skip_episode`` records the case as errored with that cause without running it
    (the evidence could not even be opened).
    """
    budget = plan.budget_for(entry)
    started = time.time()
    timings: dict[str, float] = {}
    identity: dict[str, Any] = {}
    try:
        if skip_episode is not None:
            raise skip_episode
        # Reach the policy before paying for a simulator: a dead server costs seconds.
        call_policy(policy.reset)
        adapter = get_adapter(adapter_name)
        t0 = time.perf_counter()
        episode = adapter.open(entry, track=plan.track, control_cap=budget.control_cap)
        timings["setup_s"] = round(time.perf_counter() - t0, 3)
    except EpisodeError as exc:
        result = EpisodeResult(outcome="errored", error=error_record(exc))
    except Exception as exc:  # noqa: BLE001 - an adapter that failed to import or construct
        result = EpisodeResult(outcome="errored", error=error_record(exc, kind="environment"))
    else:
        identity = episode.identity
        try:
            t0 = time.perf_counter()
            result = run_episode(
                episode,
                policy,
                budget,
                plan.profile.stop_rule,
                init_controls=episode.init_controls,
                listener=listener,
            )
            timings["episode_s"] = round(time.perf_counter() - t0, 3)
        finally:
            episode.close()
    return {
        "case": entry.case_id,
        "entry": entry.as_dict(),
        "profile": plan.profile.name,
        "evidence_class": plan.evidence_class,
        "track": plan.track,
        "budget": budget.as_dict(),
        "stop_rule": plan.profile.stop_rule.describe(),
        "identity": identity,
        "policy_metadata": dict(policy.metadata),
        "outcome": result.outcome,
        "termination": result.termination,
        "truncation": result.truncation,
        "counters": result.as_dict()["counters"],
        "chunks": result.chunks,
        "error": result.error,
        "summary": result.describe(),
        "started_at": started,
        "timings": timings,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "egl_device": os.environ.get("MUJOCO_EGL_DEVICE_ID"),
    }
