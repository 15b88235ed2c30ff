"""A score is derived data (issue 60, classes R1 and R9): every reader recomputes a case's
partial-credit score from its outcome, progress and engagement, and refuses a record whose
``score`` field says otherwise, or that has a score with no progress under it. A baseline
with no whole record is refused before any case.

The run is real (the plugin with the scripted adapter, tests/decide_adapter.py): four
cases, task 0 a success, task 1 a failure that held one goal predicate of two (score 0.5),
tasks 2 and 3 failures that held none (score 0). Each forgery edits task 2's record in
results.jsonl and in its episode.json alike, as a forger would.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_runs import in_process
from decided_runs import read, run

from harness.hostile import Hostile
from harness.runs import run_folder

FORGED = "libero_90-02"
Change = Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("scored")
    done = run(where, "--libero-task-ids=0-3", success="0", held="1")
    assert done.returncode == 1, done.stdout + done.stderr
    folder = run_folder(where / "libero-results")
    assert read(folder, "summary.json")["overall"]["score"]["mean"] == pytest.approx(0.375)
    return folder


def forged(folder: Path, where: Path, change: Change) -> Path:
    """A copy of ``folder`` whose record of FORGED ``change`` edited, in results.jsonl and
    in its case folder's episode.json alike (so the two agree)."""
    copy = where / "forged"
    shutil.copytree(folder, copy)
    lines = [json.loads(line) for line in (copy / "results.jsonl").read_text().splitlines()]
    (copy / "results.jsonl").write_text("".join(
        json.dumps(change(r) if r["case"] == FORGED else r) + "\n" for r in lines))
    episode = copy / "cases" / FORGED / "episode.json"
    episode.write_text(json.dumps(change(json.loads(episode.read_text()))))
    return copy


def without_progress(record: dict[str, Any]) -> dict[str, Any]:
    return {**{k: v for k, v in record.items() if k != "progress"}, "score": 1.0}


def beyond_progress(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "score": 1.0}


def one_line(args: list[str]) -> str:
    code, out, err = in_process(args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, len(lines)) == (2, 1) and "Traceback" not in err, (args, code, out, err)
    return lines[0]


ROWS: list[tuple[Change, str, str, str]] = [
    (without_progress, "a failure's record (score 0) with its `progress` block removed and `score` "
     "set to 1.0, in results.jsonl and episode.json alike (verify said VERIFIED, merge a mean "
     "score of 1.0, a --libero-decide-score=progress baseline was accepted and recorded)",
     "is not a pytest-libero case record: 'score' is 1.0 with no 'progress' to stand on (a "
     "score is derived from the goal's progress, never recorded alone)",
     "verify, merge and export: exit 2, nothing written, one line naming results.jsonl's line"),
    (beyond_progress, "a failure's `score` set to 1.0, its progress (no predicate held) kept, in "
     "results.jsonl and episode.json alike (merge summed it)",
     "has score 1.0, but its outcome, progress and engagement give 0.0 (a score is derived, "
     "never read as written)",
     "merge and export: exit 2, nothing written, one line naming results.jsonl's line; verify: "
     "MISMATCH before any re-execution (\"score differs ... recorded 1.0, recomputed 0.0\")"),
]


@pytest.mark.parametrize(("change", "said"), [
    pytest.param(change, said, id=change.__name__) for change, _, said, _ in ROWS])
def test_a_forged_score_is_refused_by_every_reader(scored: Path, tmp_path: Path, change: Change,
                                                   said: str) -> None:
    folder = forged(scored, tmp_path, change)
    where = f"{folder}/results.jsonl:3: the record of '{FORGED}' "
    merged = one_line(["merge", str(folder), "--out", str(tmp_path / "merged")])
    assert merged.startswith(f"pytest-libero merge: {where}") and said in merged, merged
    exported = one_line(["export", str(folder), "--lerobot", str(tmp_path / "dataset")])
    assert exported.startswith("pytest-libero export: ") and said in exported, exported
    assert not (tmp_path / "merged").exists() and not (tmp_path / "dataset").exists()
    verify = ["verify", str(folder), "--case", FORGED, "--libero-adapter=decide_adapter:Adapter"]
    if change is without_progress:
        verified = one_line(verify)
        assert verified.startswith(f"pytest-libero verify: {where}") and said in verified, verified
        assert not (folder / "verify.json").exists()
    else:
        code, out, err = in_process(verify)
        assert code == 1 and "VERIFIED" not in out, out + err
        verdict = json.loads((folder / "verify.json").read_text())["cases"][0]
        assert verdict["status"] == "mismatch" and verdict["checked"] == {}  # before re-execution
        assert "score differs" in verdict["reason"] and "recorded 1.0, recomputed 0.0" in verdict["reason"]


@pytest.mark.parametrize(("change", "said"), [
    pytest.param(change, said, id=change.__name__) for change, _, said, _ in ROWS])
def test_a_forged_score_is_no_baseline(scored: Path, tmp_path: Path, change: Change, said: str) -> None:
    baseline = forged(scored, tmp_path, change)
    (tmp_path / "new").mkdir()
    done = run(tmp_path / "new", "--libero-task-ids=0-3", f"--libero-baseline={baseline}",
               "--libero-decide=anytime", "--libero-decide-score=progress", held="")
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"{baseline}/results.jsonl:3: the record of '{FORGED}' " in done.stderr and said in done.stderr
    assert "Traceback" not in done.stderr and "INTERNALERROR" not in done.stderr
    assert not (tmp_path / "new" / "libero-results").exists()  # refused before any case


def test_the_untouched_run_merges_with_the_scores_its_progress_gives(scored: Path, tmp_path: Path) -> None:
    code, out, err = in_process(["merge", str(scored), "--out", str(tmp_path / "merged")])
    assert code == 0, out + err
    assert read(tmp_path / "merged", "summary.json")["overall"]["score"]["mean"] == pytest.approx(0.375)


def torn_baseline(folder: Path, where: Path) -> Path:
    """A copy of ``folder`` whose results.jsonl holds the first half of its first line only."""
    copy = where / "torn"
    shutil.copytree(folder, copy)
    first = (copy / "results.jsonl").read_bytes().split(b"\n")[0]
    (copy / "results.jsonl").write_bytes(first[:len(first) // 2])
    return copy


def test_a_baseline_with_no_whole_record_is_refused_before_any_case(scored: Path, tmp_path: Path) -> None:
    baseline = torn_baseline(scored, tmp_path)
    (tmp_path / "new").mkdir()
    done = run(tmp_path / "new", "--libero-task-ids=0-3", f"--libero-baseline={baseline}")
    assert done.returncode == 4, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if "--libero-baseline=" in line]
    assert len(said) == 1 and said[0].endswith(
        f"--libero-baseline={baseline}: its results.jsonl holds no whole record (it is empty, or "
        "holds a torn line only), so there is nothing to compare this run with; give a baseline "
        "run that recorded its cases"), done.stderr
    assert not (tmp_path / "new" / "libero-results").exists()
    line = one_line(["merge", str(scored), "--out", str(tmp_path / "merged"), "--baseline", str(baseline)])
    assert "holds no whole record" in line and not (tmp_path / "merged").exists()


SHORT = {"without_progress": "and no progress", "beyond_progress": "that its progress does not give"}
HOSTILE: list[Hostile] = [
    *(row for change, tried, said, seen in ROWS for row in (
        Hostile(1, tried, f'{seen}: "... the record of \'{FORGED}\' {said}; ..."',
                f"tests/test_hostile_scores.py::test_a_forged_score_is_refused_by_every_reader[{change.__name__}]"),
        Hostile(1, f"a run whose failure has score 1.0 {SHORT[change.__name__]}, as `--libero-baseline` "
                "with `--libero-decide-score=progress` (accepted; run.json recorded the forged score)",
                f'exit 4 before any case, no run folder: "... the record of \'{FORGED}\' {said}; ..."',
                f"tests/test_hostile_scores.py::test_a_forged_score_is_no_baseline[{change.__name__}]"))),
    Hostile(9, "`--libero-baseline` a run whose results.jsonl holds the first half of its only line "
            "(it was accepted; every case ran, then the gate failed with \"no paired cases\")",
            "exit 4 before any case, no run folder: \"--libero-baseline=RUN: its results.jsonl holds "
            "no whole record (it is empty, or holds a torn line only), so there is nothing to compare "
            "this run with; give a baseline run that recorded its cases\"; merge --baseline: exit 2, "
            "the same line",
            "tests/test_hostile_scores.py::test_a_baseline_with_no_whole_record_is_refused_before_any_case"),
]
