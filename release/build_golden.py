"""Rebuild the golden observations that ``pytest-libero check-server`` sends a policy server.

    MUJOCO_GL=egl python release/build_golden.py           # write pytest_libero/data/golden/
    MUJOCO_GL=egl python release/build_golden.py --check   # exit 1 if the shipped ones differ

Four real first observations, one from each of the four standard suites' first task, as
the protocol delivers them (P4, P5: both cameras flipped on both axes, the proprio vector of
the rgb+proprio track, the instruction): a zero-policy run of one decision a case, read back
from its case folders. Each case's arrays go into ``<case>.npz`` (numpy's own format, no
pickle) and its instruction into ``golden.json``; the files' sha256 are pinned in
``pytest_libero/certify/golden.py``, which this prints.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "pytest_libero" / "data" / "golden"
CASES = ("libero_spatial-00", "libero_object-00", "libero_goal-00", "libero_10-00")


def record_run(work: Path) -> Path:
    """A zero-policy run of one decision in each golden case, on the rgb+proprio track."""
    selection = {case.rsplit("-", 1)[0]: int(case.rsplit("-", 1)[1]) for case in CASES}
    for suite, index in selection.items():
        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        "--libero-profile=zero", "--libero-track=rgb+proprio",
                        "--libero-scope=task_coverage", f"--libero-suite={suite}",
                        f"--libero-task-ids={index}", "--libero-budget-mode=decisions",
                        "--libero-max-policy-calls=1", f"--libero-results={work}"],
                       cwd=work, check=False, capture_output=True)
    return work


def golden_files(work: Path) -> dict[str, bytes]:
    """Each golden file's bytes, from the run's case folders."""
    from pytest_libero.evidence.layout import RECORD_NAME
    from pytest_libero.evidence.reader import read_observations

    files: dict[str, bytes] = {}
    languages: dict[str, str] = {}
    for case in CASES:
        [record_file] = work.glob(f"zero/*/cases/{case}/{RECORD_NAME}")
        record = json.loads(record_file.read_text())
        [(_, images, proprio)] = list(read_observations(record_file.parent))
        assert proprio is not None, "the run was not on the rgb+proprio track"
        buffer = io.BytesIO()
        np.savez_compressed(buffer, agentview=images["agentview"],
                            robot0_eye_in_hand=images["robot0_eye_in_hand"], proprio=proprio)
        files[f"{case}.npz"] = buffer.getvalue()
        languages[case] = record["entry"]["language"]
    files["golden.json"] = (json.dumps({"cases": languages}, indent=1, sort_keys=True) + "\n").encode()
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="golden-") as folder:
        files = golden_files(record_run(Path(folder)))
    stale = [name for name, data in files.items()
             if not (GOLDEN / name).exists() or (GOLDEN / name).read_bytes() != data]
    if args.check:
        print("stale: " + ", ".join(stale) if stale else "the shipped golden observations are current")
        return 1 if stale else 0
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (GOLDEN / name).write_bytes(data)
    for name, data in sorted(files.items()):
        print(f'    "{name}": "{hashlib.sha256(data).hexdigest()}",')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
