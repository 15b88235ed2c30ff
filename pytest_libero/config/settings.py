"""Every operator setting of one session, read and checked once.

pytest hands each hook the same ``config``; reading options from it again in every
case would re-parse and re-check them per case (and could disagree with the first
read). :func:`read_settings` reads them all once per process, on the controller and on
each xdist worker alike; the hooks and the case runner only look at the result.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_libero.config.decide import DecideSettings
from pytest_libero.config.options import (
    TRACKER_WAIT_S,
    build_plan,
    decide,
    gates,
    isolation,
    mlflow_uri,
    path_option,
    prebuild,
    run_id,
    tracker_wait,
    wandb_project,
    watchdog,
)
from pytest_libero.config.plan import Gates, RunPlan, Watchdog
from pytest_libero.protocol.errors import SetupError


@dataclass(frozen=True)
class Trackers:
    """Experiment trackers the finished run is logged to, once, on the controller
    (``--libero-wandb``, ``--libero-mlflow``; docs/export.md)."""

    wandb: str | None = None
    """The W&B project."""
    mlflow: str | None = None
    """The MLflow tracking URI."""
    wait_s: float = TRACKER_WAIT_S
    """How long a live run waits for the trackers at its end (``PYTEST_LIBERO_TRACKER_WAIT``)."""


@dataclass(frozen=True)
class Settings:
    """What the operator asked for, checked: the plan and how its cases are run."""

    plan: RunPlan
    isolation: str
    """``process`` (each case's simulator in a watched child) or ``none``."""
    prebuild: bool
    """Whether the next case sets up while the current one runs."""
    watchdog: Watchdog
    run_id: str | None
    gates: Gates
    results_root: Path
    """Where new run folders go (``<root>/<profile>/<run id>``), absolute."""
    resume: Path | None
    """The interrupted run this session finishes, if any."""
    decide: DecideSettings | None = None
    """``--libero-decide``: stop once the gates' verdict is settled (None: run every case)."""
    trackers: Trackers = Trackers()


def read_settings(config: pytest.Config) -> Settings | None:
    """The session's settings, or None without ``--libero-profile`` (no case runs).

    Raises SetupError for any bad value, naming the option and the fix.
    """
    plan = build_plan(config)
    if plan is None:
        return None
    resume = path_option(config, "resume")
    chosen_id = run_id(config)
    if resume:
        clashing = ["--libero-run-id"] if chosen_id else []
        if config.getoption("libero_results") is not None:
            clashing.append("--libero-results")
        if clashing:
            raise SetupError(f"--libero-resume continues its own folder; drop {', '.join(clashing)}")
    root = Path(str(path_option(config, "results")))
    chosen_gates = gates(config)
    return Settings(
        plan=plan,
        isolation=isolation(config),
        prebuild=prebuild(config),
        watchdog=watchdog(config, plan),
        run_id=chosen_id,
        gates=chosen_gates,
        results_root=root if root.is_absolute() else config.invocation_params.dir / root,
        resume=Path(resume) if resume else None,
        decide=decide(config, chosen_gates, plan.shard),
        trackers=Trackers(wandb_project(config), mlflow_uri(config), tracker_wait(os.environ)),
    )
