"""Slurm, end to end: a job array of two shards on a private one-node cluster, merged.

The ``local_slurm`` fixture starts a throwaway cluster on localhost, all of it in one
temp folder: its own MUNGE daemon (own key and socket), ``slurmctld`` and ``slurmd`` in
the foreground as children of this process, on free ports, configured without cgroups
or accounting. The test submits a two-task array whose tasks each run one shard of a
four-case selection with real LIBERO episodes, waits for it, merges the two shard
folders with ``pytest-libero merge`` and checks that the merged run holds every
selected case exactly once. Teardown cancels every job, shuts the cluster down and
kills, by pid, whatever it started that is still alive.

The test skips, saying why, when Slurm is not installed or cannot start here. CI
installs it (``apt-get install -y slurmctld slurmd slurm-client munge``) and sets
PYTEST_LIBERO_REQUIRE_SLURM=1, which turns those skips into failures.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

pytestmark = [pytest.mark.simulator, pytest.mark.slurm]

SLURM_PROGRAMS = ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "scontrol")
MUNGE_PROGRAMS = ("munged",)
INSTALL = "apt-get install -y slurmctld slurmd slurm-client munge"
REQUIRE = "PYTEST_LIBERO_REQUIRE_SLURM"
NODE = "libero1"

START_TIMEOUT_S = 60.0  # munged + slurmctld + slurmd until the node is idle
JOB_TIMEOUT_S = 15 * 60.0  # the whole array; about a minute on two CPU cores
CLIENT_TIMEOUT_S = 30.0  # one sbatch/squeue/scontrol call

SELECTION = [
    "--libero-profile=zero",
    "--libero-scope=development",
    "--libero-task-ids=0-3",
    "--libero-budget-mode=decisions",
    "--libero-max-policy-calls=1",
    "--libero-replan-interval=1",
]
SELECTED = ["libero_10-00", "libero_10-01", "libero_10-02", "libero_10-03"]


class SlurmUnavailable(Exception):
    """Slurm cannot run here; the message says what was observed."""


def unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{REQUIRE}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path.name}: not written)"
    return f"--- {path.name} ---\n" + "\n".join(text[-lines:])


class LocalSlurm:
    """One controller and one node on localhost, everything under ``home``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.conf = home / "slurm.conf"
        self.socket = home / "munge.sock"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "PYTEST_"))}
        self.env["SLURM_CONF"] = str(self.conf)
        self.daemons: dict[str, subprocess.Popen[bytes]] = {}
        # The daemons run in the foreground and log to their output.
        self.logs = [home / f"{n}.out" for n in ("slurmd", "slurmctld", "munged")]

    # -- start ---------------------------------------------------------------------------

    def start(self) -> None:
        self.home.chmod(0o755)  # munged wants its socket's folders searchable by all
        (self.home / "state").mkdir()
        (self.home / "spool").mkdir()
        key = self.home / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o600)
        self._spawn("munged", ["munged", "-F", f"--socket={self.socket}", f"--key-file={key}",
                               f"--pid-file={self.home / 'munged.pid'}",
                               f"--seed-file={self.home / 'munged.seed'}"])
        self._wait("the MUNGE socket", self.socket.exists, 15.0)
        self.conf.write_text(self._config())
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._wait("slurmctld to answer", lambda: self.client(["scontrol", "ping"], check=False)
                   .returncode == 0, START_TIMEOUT_S)
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", NODE])
        self._wait(f"node {NODE} to be idle", lambda: self.node_state() == "idle", START_TIMEOUT_S)

    def _config(self) -> str:
        host = socket.gethostname().split(".")[0]
        user = getpass.getuser()
        h = self.home
        return "\n".join([
            "ClusterName=pytestlibero",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            f"SlurmUser={user}",
            f"SlurmdUser={user}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.socket}",
            f"StateSaveLocation={h / 'state'}",
            f"SlurmdSpoolDir={h / 'spool'}",
            f"SlurmctldPidFile={h / 'slurmctld.pid'}",
            f"SlurmdPidFile={h / 'slurmd.pid'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # No cgroups, accounting or interconnect: none of them exist in a container.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",  # two one-CPU tasks share the node
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",  # the node below, whatever the hardware
            "KillWait=5",
            "MailProg=/bin/true",
            "MinJobAge=600",
            f"NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 "
            f"CPUs={max(2, os.cpu_count() or 1)} RealMemory=1000 State=UNKNOWN",
            f"PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
            "",
        ])

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = (self.home / f"{name}.out").open("wb")
        try:
            self.daemons[name] = subprocess.Popen(argv, env=self.env, stdout=out,
                                                  stderr=subprocess.STDOUT, cwd=self.home,
                                                  start_new_session=True)
        finally:
            out.close()

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for name, proc in self.daemons.items():
                if proc.poll() is not None:
                    raise SlurmUnavailable(
                        f"{name} exited with status {proc.returncode} while waiting for {what}: "
                        f"{self.last_error(name)}\n{self.diagnostics(first=name)}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise SlurmUnavailable(f"gave up after {timeout:.0f} s waiting for {what}"
                                       f"\n{self.diagnostics()}")
            time.sleep(0.5)

    def last_error(self, daemon: str) -> str:
        """The daemon's last error or fatal line, from its log or its own output."""
        lines: list[str] = []
        path = self.home / f"{daemon}.out"
        if path.exists():
            lines = path.read_text(errors="replace").splitlines()
        errors = [line for line in lines if "fatal" in line.lower() or "error" in line.lower()]
        return (errors or lines or ["(no output)"])[-1].strip()

    def node_state(self) -> str:
        done = self.client(["sinfo", "-h", "-N", "-n", NODE, "-o", "%T"], check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    def diagnostics(self, first: str | None = None) -> str:
        """The node's drain reason and the daemons' last lines, the failed daemon first."""
        reason = self.client(["sinfo", "-h", "-R"], check=False).stdout.strip() if self.conf.exists() else ""
        order = sorted(self.logs, key=lambda p: not (first and p.name.startswith(first)))
        return "\n".join([f"sinfo -R: {reason or '-'}"] + [tail(p, 8) for p in order if p.exists()])

    # -- use -----------------------------------------------------------------------------

    def client(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                                  timeout=CLIENT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess(argv, 124, "", f"timed out after {CLIENT_TIMEOUT_S} s")
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}"
                                 f"\n{self.diagnostics()}")
        return done

    def jobs(self) -> list[str]:
        """Every job and array task this cluster still knows as pending or running."""
        done = self.client(["squeue", "-h", "-o", "%i %T"], check=False)
        return [line for line in done.stdout.splitlines() if line.strip()]

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.jobs():
            if time.monotonic() > deadline:
                return False
            time.sleep(2.0)
        return True

    # -- stop ----------------------------------------------------------------------------

    def stop(self) -> list[int]:
        """Cancel every job, shut the daemons down, kill by pid what survives.

        Each step runs even when the one before it failed; returns the pids still alive.
        """
        try:
            if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
                ids = [line.split()[0] for line in self.jobs()]
                if ids:
                    self.client(["scancel", *ids], check=False)
                    self.wait_idle(30.0)
                self.client(["scontrol", "shutdown"], check=False)
        finally:
            try:
                for name in ("slurmd", "slurmctld", "munged"):
                    if name in self.daemons:
                        # MUNGE outlives Slurm's shutdown: it is told at once.
                        self._end(self.daemons[name], grace=0.0 if name == "munged" else 15.0)
            finally:
                # Step daemons and job processes are not our children; each carries our
                # SLURM_CONF in its environment, which no other process does.
                deadline = time.monotonic() + 10.0
                while (pids := self.leftover_pids()) and time.monotonic() < deadline:
                    for pid in pids:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    time.sleep(0.5)
        return pids

    @staticmethod
    def _end(proc: subprocess.Popen[bytes], grace: float) -> None:
        """Wait for a daemon to exit; then SIGTERM, then SIGKILL."""
        for step in (None, proc.terminate, proc.kill):
            if step is not None:
                step()
            try:
                proc.wait(timeout=grace if step is None else 5.0)
                return
            except subprocess.TimeoutExpired:
                continue

    def leftover_pids(self) -> list[int]:
        marker = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker in environ:
                pids.append(int(entry.name))
        return pids


@pytest.fixture
def local_slurm(tmp_path: Path) -> Iterator[LocalSlurm]:
    """A running one-node Slurm cluster on localhost; stopped and cleaned up afterwards."""
    missing = [p for p in SLURM_PROGRAMS + MUNGE_PROGRAMS if shutil.which(p) is None]
    if missing:
        unavailable(f"Slurm is not installed here (missing: {', '.join(missing)}); "
                    f"on Debian or Ubuntu, as root: {INSTALL}")
    # Short: the MUNGE socket path must fit a unix socket address (108 bytes).
    home = Path(tempfile.mkdtemp(prefix="pl-slurm-", dir="/tmp"))
    cluster = LocalSlurm(home)
    try:
        try:
            cluster.start()
        except (SlurmUnavailable, OSError) as exc:
            unavailable(f"a one-node Slurm cluster could not start here: {exc}")
        yield cluster
    finally:
        try:
            survivors = cluster.stop()
        finally:
            kept = tmp_path / "slurm-logs"
            kept.mkdir(exist_ok=True)
            for log in cluster.logs:
                if log.exists():
                    shutil.copy(log, kept / log.name)
            shutil.rmtree(home, ignore_errors=True)
    assert not survivors, f"processes of the test's Slurm cluster survived SIGKILL: {survivors}"


JOB = """#!/bin/bash
# One shard of the selection per array task; the array's job id names the run.
export MUJOCO_GL=egl
cd {work}
{python} -m pytest -p no:cacheprovider -q {selection} \\
    --libero-results={root} \\
    --libero-run-id="${{SLURM_ARRAY_JOB_ID}}" \\
    --libero-shard="${{SLURM_ARRAY_TASK_ID}}/2"
echo $? > {work}/rc-${{SLURM_ARRAY_TASK_ID}}
"""


def test_job_array_shards_merge_into_one_run(local_slurm: LocalSlurm, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "results"
    script = work / "shards.sh"
    script.write_text(JOB.format(work=work, python=sys.executable, selection=" ".join(SELECTION),
                                 root=root))
    submitted = local_slurm.client([
        "sbatch", "--parsable", "--array=1-2", "--cpus-per-task=1", "--job-name=pytest-libero",
        f"--chdir={work}", f"--output={work}/shard-%a.out", str(script),
    ])
    job_id = submitted.stdout.strip().split(";")[0]

    if not local_slurm.wait_idle(JOB_TIMEOUT_S):
        pytest.fail(f"the array did not finish in {JOB_TIMEOUT_S:.0f} s: {local_slurm.jobs()}"
                    f"\n{local_slurm.diagnostics()}")
    outputs = "\n".join(tail(work / f"shard-{i}.out", 40) for i in (1, 2))
    for task in (1, 2):
        rc_file = work / f"rc-{task}"
        assert rc_file.exists(), f"array task {task} never finished its pytest run\n{outputs}"
        # 1: the zero policy fails the tasks natively; anything else is a broken run.
        assert rc_file.read_text().strip() in ("0", "1"), outputs

    run_dir = root / "zero" / job_id
    shards = [run_dir / f"shard-{i}-of-2" for i in (1, 2)]
    parts = []
    for shard in shards:
        assert (shard / "run.json").is_file(), f"{shard} missing\n{outputs}"
        plan = json.loads((shard / "run.json").read_text())["plan"]
        assert plan["selection_cases"] == SELECTED
        ran = [json.loads(line)["case"] for line in (shard / "results.jsonl").read_text().splitlines()]
        assert ran, f"{shard.name} ran nothing"
        assert sorted(ran) == sorted(plan["cases"]), f"{shard.name} ran {ran}, owns {plan['cases']}"
        parts.append(set(ran))
    assert not parts[0] & parts[1], f"the shards overlap: {parts}"
    assert parts[0] | parts[1] == set(SELECTED)

    merged_dir = tmp_path / "merged"
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_libero.cli", "merge", *map(str, shards), "--out", str(merged_dir)],
        capture_output=True, text=True, timeout=120,
    )
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout.strip().splitlines()[-1] == f"merged: {merged_dir}"
    cases = [json.loads(line)["case"] for line in (merged_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(cases) == SELECTED, f"lost or duplicated cases: {cases}"
    counts = json.loads((merged_dir / "summary.json").read_text())["counts"]
    assert counts["selected"] == 4
    assert counts["completed"] == 4
    assert counts["unattempted"] == 0
    assert counts["errored"] == 0
