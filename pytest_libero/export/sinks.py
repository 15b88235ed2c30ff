"""The two trackers: a :class:`TrackedRun` sent to W&B or to MLflow, through their own
clients, each imported only here and only when asked for.

Each returns one line saying where the run went; any failure is the caller's to turn
into one line of warning (``trackers.py``).
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pytest_libero.export.tracked import COLUMNS, Scalar, TrackedRun, key
from pytest_libero.files import json_text

EXPERIMENT = "pytest-libero"
"""The MLflow experiment runs go to, unless MLFLOW_EXPERIMENT_NAME names another."""
PARAM_LIMIT = 500
"""Characters of a parameter value every MLflow server accepts."""
_QUICK_MLFLOW = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
"""An unreachable server answers in seconds, not minutes (the defaults retry for ~4 min);
a value the operator set wins."""


@contextmanager
def _no_prompt() -> Iterator[None]:
    """W&B asks for a login on a terminal; nothing pytest-libero runs waits for an answer:
    without credentials the login fails at once (``wandb login`` is where to log in)."""
    stdin = sys.stdin
    sys.stdin = io.StringIO()  # not a terminal
    try:
        yield
    finally:
        sys.stdin = stdin


def log_wandb(project: str, run: TrackedRun) -> str:
    """One W&B run in ``project``: the config, the metrics (as the run's summary), the
    case table and a video per failed case."""
    import wandb

    settings = wandb.Settings(silent=True, console="off", save_code=False, disable_git=True,
                              x_disable_stats=True)
    with _no_prompt():
        live = wandb.init(project=project, name=run.name, group=run.profile, job_type="evaluation",
                          config=dict(run.config), settings=settings)
    try:
        logged: dict[str, object] = dict(run.metrics)
        logged["cases"] = wandb.Table(columns=list(COLUMNS), data=run.rows)
        for case, video in run.failure_videos.items():
            logged[f"failure_videos/{key(case)}"] = wandb.Video(str(video), format="mp4")
        live.log(logged)
        where = f"offline, in {live.settings.sync_dir}" if live.offline else live.url
        name = live.name
    except BaseException:
        live.finish(exit_code=1)  # the W&B run says it did not finish well
        raise
    live.finish()
    return f"logged to W&B project {project!r} as run {name!r} ({where})"


@contextmanager
def _quick_mlflow() -> Iterator[None]:
    added = [name for name in _QUICK_MLFLOW if name not in os.environ]
    os.environ.update({name: _QUICK_MLFLOW[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _param(value: Scalar | list[Scalar]) -> str:
    text = value if isinstance(value, str) else json_text(value)
    return text[:PARAM_LIMIT]


def log_mlflow(uri: str, run: TrackedRun) -> str:
    """One MLflow run at ``uri``: the config as params, the metrics, the case table as
    ``cases.json`` and each failed case's video as ``failure_videos/<case>/episode.mp4``."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    with _quick_mlflow():
        client = MlflowClient(tracking_uri=uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
        experiment = client.get_experiment_by_name(name)
        experiment_id = (experiment.experiment_id if experiment is not None
                         else client.create_experiment(name))
        made = client.create_run(experiment_id, run_name=run.name)
        run_id = made.info.run_id
        try:
            now = int(time.time() * 1000)
            params = [Param(k, _param(v)) for k, v in run.config.items()]
            metrics = [Metric(k, v, now, 0) for k, v in run.metrics.items()]
            tags = [RunTag("pytest_libero.profile", run.profile), RunTag("pytest_libero.run_id", run.name)]
            for start in range(0, max(len(params), len(metrics)), 100):  # the batch limits
                client.log_batch(run_id, metrics=metrics[start:start + 100],
                                 params=params[start:start + 100], tags=tags if start == 0 else [])
            client.log_dict(run_id, {"columns": list(COLUMNS), "data": run.rows}, "cases.json")
            for case, video in run.failure_videos.items():
                client.log_artifact(run_id, str(video), f"failure_videos/{case}")
        except BaseException:
            try:
                client.set_terminated(run_id, "FAILED")
            except Exception:  # noqa: BLE001 - the first failure is the one to tell
                pass
            raise
        client.set_terminated(run_id, "FINISHED")
    return f"logged to MLflow {uri} (experiment {name!r}, run {run_id}, named {run.name!r})"
