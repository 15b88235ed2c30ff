"""pytest-xdist integration: GPU pinning, scheduling, and what workers are told.

GPUs are pinned through execnet worker specs (``popen//env:CUDA_VISIBLE_DEVICES=g``):
xdist replaces a crashed worker with a clone of the same spec, so the replacement
inherits the dead worker's GPU and no GPU ever serves two workers by accident. Worker
ids are never used for the mapping (a replacement gets a new id).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.protocol.digits import whole
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import echo

WORKER_RUN_DIR = "libero_run_dir"
WORKER_CASES = "libero_cases"
WORKER_ORDER = "libero_order"
"""``--libero-decide``: the order the run hands its cases out in (None: collection order)."""


def parse_gpus(text: str) -> tuple[int, ...]:
    """Read "0,1,3" into GPU indices; refuse duplicates and non-numbers."""
    read = [whole(part) for part in text.replace(" ", "").split(",") if part]
    gpus = tuple(g for g in read if g is not None) if None not in read else ()
    if not gpus or any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise SetupError(f"--libero-gpus={echo(text)}: give distinct GPU indices, e.g. 0,1,2,3")
    return gpus


def gpu_spec(gpu: int) -> str:
    """A worker spec whose process sees only this GPU, for CUDA and for EGL rendering."""
    return f"popen//env:CUDA_VISIBLE_DEVICES={gpu}//env:MUJOCO_EGL_DEVICE_ID={gpu}"


def explicit_dist(config: pytest.Config) -> bool:
    """Whether the operator chose an xdist schedule on the command line."""
    return any(arg == "-d" or arg.startswith("--dist") for arg in config.invocation_params.args)


def configure_workers(config: pytest.Config, gpus: Sequence[int]) -> None:
    """Give each worker one GPU; one worker per GPU unless -n says otherwise.

    Runs before xdist's own configure, so xdist starts the workers from these specs.
    """
    count = config.option.numprocesses or len(gpus)
    config.option.numprocesses = count
    config.option.tx = [gpu_spec(gpus[i % len(gpus)]) for i in range(count)]
    if config.option.dist == "no":
        config.option.dist = "worksteal"


def prefer_worksteal(config: pytest.Config) -> None:
    """Episodes differ wildly in length; stealing work keeps every worker busy."""
    if config.option.dist == "load" and not explicit_dist(config):
        config.option.dist = "worksteal"


class XdistController:
    """Registered on the controller only under xdist: tells each worker its run."""

    def __init__(self, run_dir: Path, cases: Sequence[str], mode: str,
                 order: Sequence[str] | None = None,
                 decided: Callable[[], bool] | None = None) -> None:
        self.run_dir = run_dir
        self.cases = list(cases)
        self.mode = mode
        self.order = None if order is None else list(order)
        self.decided = decided
        """``--libero-decide``: whether the run's verdict is decided (no more cases then)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """A run that decides early: its cases one at a time, in its order, none once
        decided. Full mode: each task's states to one worker, in order, so its case
        process runs them in the task's one environment. Unless --dist says otherwise."""
        if explicit_dist(config):
            return None
        if self.decided is not None:
            from pytest_libero.config.decide_scheduling import DecideScheduling

            return DecideScheduling(config, log, self.decided)
        if self.mode != "full":
            return None
        from pytest_libero.config.task_scheduling import TaskScheduling

        return TaskScheduling(config, log)

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_RUN_DIR] = str(self.run_dir)
        node.workerinput[WORKER_CASES] = self.cases
        node.workerinput[WORKER_ORDER] = self.order
