"""The files real runs open: the benchmark's and the demo's cases, run under strace.

MuJoCo reads meshes and textures from C, out of sight of Python's audit hooks, so the
runs are traced at the system-call level (``strace -f -e trace=%file``: every call that
names a path, opens and stats alike; ``--seccomp-bpf`` stops the runs at those calls
only, which took a traced demo from 49 to 43 s on a loaded machine, finding the same
files). A path counts when it names a regular file that exists; which of them the
bundle keeps is ``staging.py``'s choice.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.runs import all_records

BENCH_SUITE = "libero_90"
BENCH_CASES = 32
"""The device run's largest selection: -n 16 with two cases per worker, tasks 0-31
(bench/gpu_throughput.py takes its cases from the front of libero_90)."""
RUN_TIMEOUT_S = 1800.0
_PATH = re.compile(r'"(/(?:[^"\\]|\\.)*)"')
_OPEN = re.compile(r'^(\d+) +openat\(AT_FDCWD, "(/(?:[^"\\]|\\.)*)", ([A-Z_|]+)(.*)$')
_RESUMED = re.compile(r'^(\d+) +<\.\.\. openat resumed>.*= (-?\d+)')


def traced_commands(bench_cases: int = BENCH_CASES) -> list[tuple[str, list[str]]]:
    """The runs whose files the device needs: (label, pytest arguments). ``bench_cases``:
    fewer than the device run's largest selection only for a bundle that runs ``--smoke``
    (the builder's own test)."""
    bench = ["--libero-profile=zero", "--libero-scope=task_coverage", f"--libero-suite={BENCH_SUITE}",
             f"--libero-task-ids=0-{bench_cases - 1}", "--libero-budget-mode=decisions",
             "--libero-max-policy-calls=1", "--libero-replan-interval=5",
             "--libero-policy-option=chunk=5", "-n", "2"]
    # The demo's cases to their first call: the files a case opens are opened by then (its
    # scene, textures, recording, the encoder); the arrival's whole demo proves it.
    demo = ["--libero-profile=demo", "--libero-budget-mode=decisions", "--libero-max-policy-calls=1",
            "-n", "2"]
    return [("bench", bench), ("demo", demo)]


def strace_path() -> str:
    found = shutil.which("strace")
    if found is None:
        raise SystemExit("device bundle: strace is needed to find the asset files real runs open "
                         "(apt-get install strace)")
    return found


def trace_runs(logs: Path, bench_cases: int = BENCH_CASES) -> list[Path]:
    """Each traced command run to its end as a user runs it (a scratch folder of its own,
    ``python -m pytest``); its strace log under ``logs``. A failed run stops the build."""
    logs.mkdir(parents=True, exist_ok=True)
    written = []
    for label, arguments in traced_commands(bench_cases):
        log = logs / f"{label}.strace"
        with tempfile.TemporaryDirectory(prefix=f"bundle-trace-{label}-") as work:
            Path(work, "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
            command = [strace_path(), "-f", "--seccomp-bpf", "-qq", "-e", "trace=%file", "-o", str(log),
                       sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                       f"--libero-results={work}/results", *arguments]
            env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
            done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT_S, check=False)
            outcomes = [record["outcome"] for record in all_records(Path(work) / "results")]
        # The zero policy's cases fail (exit 1): what matters is that every case ran.
        if done.returncode not in (0, 1) or not outcomes or "errored" in outcomes:
            raise SystemExit(f"device bundle: the traced {label} run did not run every case (exit "
                             f"{done.returncode}, outcomes {sorted(set(outcomes))}):\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        written.append(log)
    return written


def opened_files(logs: Iterable[Path], under: Sequence[Path]) -> set[Path]:
    """Every existing regular file below one of ``under`` that a traced call named."""
    roots = tuple(os.path.join(str(root.resolve()), "") for root in under)
    found: set[Path] = set()
    for log in logs:
        with log.open(encoding="utf-8", errors="surrogateescape") as lines:
            for line in lines:
                for match in _PATH.finditer(line):
                    path = match.group(1)
                    if path.startswith(roots) and os.path.isfile(path):
                        found.add(Path(os.path.realpath(path)))
    return found


def read_files(logs: Iterable[Path]) -> set[Path]:
    """Every regular file a traced process opened for reading and got (``openat`` with a
    descriptor back, a call cut in two by another process's output joined again)."""
    found: set[Path] = set()
    pending: dict[str, str] = {}
    for log in logs:
        with log.open(encoding="utf-8", errors="surrogateescape") as lines:
            for line in lines:
                if (opened := _OPEN.match(line)) is not None:
                    pid, path, flags, rest = opened.groups()
                    if "O_WRONLY" in flags or "O_DIRECTORY" in flags:
                        continue
                    if "<unfinished ...>" in rest:
                        pending[pid] = path
                    elif re.search(r"= \d+", rest):
                        found.add(Path(path))
                elif (resumed := _RESUMED.match(line)) is not None:
                    path = pending.pop(resumed.group(1), "")
                    if path and int(resumed.group(2)) >= 0:
                        found.add(Path(path))
    return {Path(os.path.realpath(p)) for p in found if os.path.isfile(p)}
