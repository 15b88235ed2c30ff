"""`pytest --libero-profile=demo --alluredir=...`, as the README tells a newcomer to run it.

Every shipped demonstration must still succeed on the pinned stack, at the control its
provenance records, with a video per case: the demo is the evidence that a fresh
installation works, so it has to pass. One run, 2½ to 4 minutes on two CPU cores (README.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.runs import run_folder, run_pytest, run_records
from pytest_libero.data import DEMOS_FOLDER, data_path

pytestmark = pytest.mark.simulator

DEMOS = Path(str(data_path(DEMOS_FOLDER)))


def test_the_demo_passes_every_case_with_a_video(tmp_path: Path) -> None:
    done = run_pytest(["--libero-profile=demo", "--alluredir=allure-demo"], tmp_path,
                      env={**os.environ, "MUJOCO_GL": "egl"}, timeout=1200)
    out = done.stdout
    recorded = {meta["case"]: meta for meta in
                (json.loads(p.read_text()) for p in sorted(DEMOS.glob("*.json")))}
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert f"{len(recorded)} passed" in out.splitlines()[-1], out[-3000:]
    assert "profile demo (infrastructure evidence, not a capability claim)" in out
    assert "  Recorded demonstrations replayed open loop" in out
    run = run_folder(tmp_path / "libero-results", "demo")
    assert f"results: {run}" in out
    plan = json.loads((run / "run.json").read_text())["plan"]
    assert plan["evidence_class"] == "infrastructure" and plan["selection"]["scope"] == "profile"
    records = {r["case"]: r for r in run_records(run)}
    assert sorted(records) == sorted(recorded)
    for case, record in records.items():
        assert record["outcome"] == "success", (case, record.get("summary"))
        # On the pinned stack each demo succeeds where it did when it was recorded.
        first = record["counters"]["first_success_control"]
        assert first == recorded[case]["first_success_control"], case
        assert record["policy_metadata"]["demos"][case] == recorded[case]["actions_sha256"]
        assert (run / "cases" / case / "episode.mp4").stat().st_size > 0, case
    # Allure labels each case infrastructure evidence and names the recording in its panel.
    results = [json.loads(p.read_text()) for p in (tmp_path / "allure-demo").glob("*-result.json")]
    assert sorted(r["status"] for r in results) == ["passed"] * len(recorded)
    for result in results:
        assert {"name": "tag", "value": "INFRASTRUCTURE EVIDENCE"} in result["labels"]
    panel = (tmp_path / "allure-demo" / "environment.properties").read_text()
    assert "profile.description=Recorded demonstrations replayed open loop" in panel
