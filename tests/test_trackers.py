"""Runs logged to experiment trackers (issue 43), offline: W&B in its offline mode, read
back from its own run file with its own reader; MLflow with a file store, read back
through ``MlflowClient``. The run folders are tests/scripted_runs.py's (real loop, real
evidence, real summary), and a live session's is a real one with its one case
deselected, so no episode runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cli_runs
import pytest
from cli_runs import Said
from mlflow.tracking import MlflowClient
from scripted_runs import Played, make_run

from harness.servers import free_port
from pytest_libero import session
from pytest_libero.evidence.renderer import not_measured
from pytest_libero.export.tracked import COLUMNS, key, tracked_run
from pytest_libero.results.layout import SUMMARY_NAME, read_summary

pytest_plugins = ["pytester"]

# MlflowClient is imported above, while tests are collected, not first inside an
# in-process pytest run: such a run unloads the modules it imported, and the yaml C
# extension MLflow writes with fails once imported a second time in one process
# ("EmitterError: expected SCALAR, ...").

LIVE_ARGS = ("--libero-profile=zero", "--libero-isolation=none", "--libero-scope=task_coverage",
             "--libero-suite=libero_10", "--libero-task-ids=0", "-k", "nothing_runs",
             "-p", "no:cacheprovider")
"""One selected case, deselected: the session writes its run folder and summary only."""
TRACKER_PACKAGES = ("wandb", "mlflow", "lerobot", "torch")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Played]]:
    return make_run(tmp_path_factory.mktemp("run"))


def command(*argv: str) -> Said:
    return cli_runs.in_process(argv)


# -- what is logged -----------------------------------------------------------------------


def test_the_logged_keys_come_from_the_summary_and_the_records(run: tuple[Path, dict[str, Played]]) -> None:
    folder, _ = run
    summary = read_summary(folder)
    tracked = tracked_run(folder)
    metrics = tracked.metrics
    assert metrics["success_rate"] == summary["overall"]["rate"] == 1 / 3
    assert [metrics[f"success_rate_wilson_{e}"] for e in ("low", "high")] == summary["overall"]["wilson95"]
    assert metrics["suites/libero_10-latency2/success_rate"] == 0.0  # ~ made tracker-safe
    assert metrics["counts/errored"] == 1 and metrics["counts/selected"] == 4
    assert metrics["robustness/latency/drop_points"] == 100.0
    assert metrics["robustness/latency/level_2/drop_points"] == 100.0
    assert metrics["latency/p95_s"] == summary["latency"]["p95_s"]
    assert all("success" in name for name in metrics if "rate" in name)
    assert tracked.config["profile"] == "scripted" and tracked.config["evidence"] == "full"
    assert tracked.config["protocol_identity"] == "libero-protocol-v1:" + "0" * 32
    assert tracked.config["budget.replan_interval"] == 2
    assert tracked.config["budget.control_cap.libero_10"] == 8
    assert tracked.rows == [
        ["libero_10-00", "success", "success", 7, 4, None, None],
        ["libero_10-00~latency2", "failure", "control_cap", 8, 4, "latency:2", None],
        ["libero_10-01", "errored", "environment", 2, 2, None, None],
        ["libero_10-02", "failure", "voluntary_stop", 0, 1, None, None]]
    assert sorted(tracked.failure_videos) == ["libero_10-00~latency2", "libero_10-02"]
    assert key("generated:position") == "generated-position"


def test_a_run_without_latency_or_robustness_logs_neither(tmp_path: Path) -> None:
    from scripted_runs import Episode

    folder, _ = make_run(tmp_path, {"libero_10-00": Episode()}, unattempted=("libero_10-01",))
    summary = json.loads((folder / SUMMARY_NAME).read_text())
    del summary["latency"]
    (folder / SUMMARY_NAME).write_text(json.dumps(summary))
    tracked = tracked_run(folder)
    assert not any(name.startswith(("latency/", "robustness/")) for name in tracked.metrics)
    assert tracked.rows[-1] == ["libero_10-01", "unattempted", None, None, None, None, None]


# -- W&B, offline -------------------------------------------------------------------------


def wandb_env(where: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return {**env, "WANDB_MODE": "offline", "WANDB_DIR": str(where),
            **{f"WANDB_{name}_DIR": str(where / name.lower()) for name in ("CONFIG", "CACHE", "DATA")}}


def wandb_run_file(where: Path) -> dict[str, Any]:
    """An offline run's records, read with wandb's own reader of its run file."""
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal.datastore import DataStore

    (path,) = where.glob("wandb/offline-run-*/run-*.wandb")
    store = DataStore()
    store.open_for_scan(str(path))
    found: dict[str, Any] = {"history": {}, "files": [], "dir": path.parent}
    while (data := store.scan_data()) is not None:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            found["run"] = record.run
            found["config"] = {i.key: json.loads(i.value_json) for i in record.run.config.update}
        elif kind == "history":
            found["history"].update({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                     for i in record.history.item})
        elif kind == "files":
            found["files"] += [f.path for f in record.files.files]
    return found


def test_log_to_w_and_b_offline_reads_back_from_its_run_file(
    run: tuple[Path, dict[str, Played]], tmp_path: Path
) -> None:
    folder, _ = run
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "log", str(folder),
                           "--wandb", "pytest-libero-test"], capture_output=True, text=True,
                          timeout=300, env=wandb_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("pytest-libero: logged to W&B project 'pytest-libero-test' as run "
                                  f"'{folder.name}' (offline, in {tmp_path}/wandb/offline-run-")
    got = wandb_run_file(tmp_path)
    tracked = tracked_run(folder)
    assert (got["run"].project, got["run"].display_name, got["run"].run_group,
            got["run"].job_type) == ("pytest-libero-test", folder.name, "scripted", "evaluation")
    assert {k: v for k, v in got["config"].items() if k != "_wandb"} == tracked.config
    assert {k: got["history"][k] for k in tracked.metrics} == tracked.metrics
    table = json.loads((got["dir"] / "files" / got["history"]["cases/path"]).read_text())
    assert table["columns"] == list(COLUMNS) and table["data"] == tracked.rows
    for case, video in tracked.failure_videos.items():
        logged = got["dir"] / "files" / got["history"][f"failure_videos/{key(case)}/path"]
        assert logged.read_bytes() == video.read_bytes(), case


def test_w_and_b_without_credentials_on_a_terminal_asks_nothing(
    run: tuple[Path, dict[str, Played]], tmp_path: Path
) -> None:
    """W&B prompts for a login where stdin and stderr are terminals; the run is not
    logged there instead, in one line, and nothing waits for an answer."""
    env = {k: v for k, v in wandb_env(tmp_path).items() if k not in ("WANDB_MODE", "NETRC")}
    env["HOME"] = str(tmp_path / "home")  # no ~/.netrc
    controller, terminal = os.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "log", str(run[0]),
                               "--wandb", "p"], stdin=terminal, stderr=terminal,
                              stdout=subprocess.PIPE, text=True, timeout=120, env=env, cwd=tmp_path)
        os.close(terminal)
        said = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal's other end is closed
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(controller)
    lines = [line for line in said.decode(errors="replace").splitlines() if line.strip()]
    assert done.returncode == 1 and done.stdout == "", said
    assert lines == [f"pytest-libero: could not log the run to W&B 'p' (UsageError: No API key "
                     f"configured. Use `wandb login` to log in.); try again later with: "
                     f"pytest-libero log {run[0]} --wandb p"], said


# -- MLflow, a file store -----------------------------------------------------------------


def mlflow_runs(store: Path) -> list[Any]:
    client = MlflowClient(tracking_uri=store.as_uri())
    experiment = client.get_experiment_by_name("pytest-libero")
    return [] if experiment is None else list(client.search_runs([experiment.experiment_id]))


def test_log_to_mlflow_reads_back_through_its_client(
    run: tuple[Path, dict[str, Played]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps file stores behind it
    folder, _ = run
    store = tmp_path / "mlruns"
    code, out, err = command("log", str(folder), "--mlflow", store.as_uri())
    assert code == 0, out + err
    (logged,) = mlflow_runs(store)
    assert out.strip() == (f"pytest-libero: logged to MLflow {store.as_uri()} (experiment "
                           f"'pytest-libero', run {logged.info.run_id}, named '{folder.name}')")
    tracked = tracked_run(folder)
    assert logged.info.run_name == folder.name and logged.info.status == "FINISHED"
    assert logged.data.metrics == tracked.metrics
    assert logged.data.params == {k: v if isinstance(v, str) else json.dumps(v)
                                  for k, v in tracked.config.items()}
    assert logged.data.tags["pytest_libero.profile"] == "scripted"
    client = MlflowClient(tracking_uri=store.as_uri())
    table_file = client.download_artifacts(logged.info.run_id, "cases.json", str(tmp_path))
    table = json.loads(Path(table_file).read_text())
    assert table == {"columns": list(COLUMNS), "data": tracked.rows}
    for case, video in tracked.failure_videos.items():
        got = client.download_artifacts(logged.info.run_id, f"failure_videos/{case}/episode.mp4",
                                        str(tmp_path / key(case)))
        assert hashlib.sha256(Path(got).read_bytes()).digest() == hashlib.sha256(video.read_bytes()).digest()


def test_an_unreachable_tracker_is_one_line_and_a_refusal_of_the_log_command(
    run: tuple[Path, dict[str, Played]]
) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    code, out, err = command("log", str(run[0]), "--mlflow", uri)
    assert time.monotonic() - started < 60  # not MLflow's four minutes of retries
    assert (code, out) == (1, "") and len(err.splitlines()) == 1, err
    assert err.startswith(f"pytest-libero: could not log the run to MLflow '{uri}' (MlflowException: ")
    assert err.rstrip().endswith(f"try again later with: pytest-libero log {run[0]} --mlflow {uri}")


def test_a_missing_tracker_package_is_one_line_saying_how_to_install_it(
    run: tuple[Path, dict[str, Played]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed, whatever is here
    code, out, err = command("log", str(run[0]), "--wandb", "p")
    assert (code, out, err) == (1, "", "pytest-libero: logging to W&B needs wandb: pip install "
                                       "'pytest-libero[wandb]'; the run is not logged there\n")


def test_the_log_command_refuses_what_it_cannot_log(
    run: tuple[Path, dict[str, Played]], tmp_path: Path
) -> None:
    assert command("log", str(run[0]))[0] == 2
    assert "name a tracker: --wandb PROJECT or --mlflow TRACKING_URI" in command("log", str(run[0]))[2]
    folder, _ = make_run(tmp_path)
    (folder / SUMMARY_NAME).unlink()
    code, out, err = command("log", str(folder), "--mlflow", (tmp_path / "m").as_uri())
    assert (code, err) == (2, f"pytest-libero log: {folder} has no summary.json: the run stopped "
                              f"before writing it; pytest-libero merge {folder} writes it anew, "
                              "in a new folder\n")
    assert not (tmp_path / "m").exists()


# -- a live session -----------------------------------------------------------------------


@pytest.fixture
def no_renderer(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process sessions skip measuring the renderer: no case renders here."""
    monkeypatch.setattr(session, "measure_for_cases", lambda *_: not_measured("not measured here"))


@pytest.mark.usefixtures("no_renderer")
def test_a_session_logs_once_after_its_summary_and_its_exit_code_is_its_own(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setitem(sys.modules, "wandb", None)
    store = pytester.path / "mlruns"
    plain = pytester.runpytest_inprocess(*LIVE_ARGS, "--libero-run-id=plain")
    logged = pytester.runpytest_inprocess(*LIVE_ARGS, "--libero-run-id=logged", "--libero-wandb=p",
                                          f"--libero-mlflow={store.as_uri()}")
    unreachable = pytester.runpytest_inprocess(*LIVE_ARGS, "--libero-run-id=unreachable",
                                               f"--libero-mlflow=http://127.0.0.1:{free_port()}")
    assert plain.ret == logged.ret == unreachable.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    said = logged.stdout.lines + logged.stderr.lines
    assert [line for line in said if "W&B" in line] == [
        "pytest-libero: logging to W&B needs wandb: pip install 'pytest-libero[wandb]'; "
        "the run is not logged there"]  # once, before the run
    assert [line for line in said if "MLflow" in line][0].startswith(
        f"pytest-libero: logged to MLflow {store.as_uri()} (experiment 'pytest-libero', run ")
    (one,) = mlflow_runs(store)  # once: the controller's
    summary = read_summary(pytester.path / "libero-results" / "zero" / "logged")
    assert one.info.run_name == "logged"
    assert one.data.metrics["counts/unattempted"] == summary["counts"]["unattempted"] == 1
    warned = [line for line in unreachable.stdout.lines if "could not log" in line]
    assert len(warned) == 1 and "MLflow" in warned[0], unreachable.stdout.str()


@pytest.mark.parametrize(("argument", "said"), [
    ("--libero-wandb=team/project", "--libero-wandb='team/project' holds '/', which W&B refuses "
     "in a project name; give a W&B project name"),
    (f"--libero-wandb={'p' * 129}", "is longer than W&B takes (128 characters); give a W&B "
     "project name"),
    (f"--libero-mlflow=http://{'h' * 300}:5000", "a part of it is longer than 255 bytes; give a "
     "tracking URI (http://host:5000, file:///path, sqlite:///mlflow.db)"),
])
def test_a_tracker_target_no_tracker_takes_is_refused_before_the_run(
    pytester: pytest.Pytester, argument: str, said: str
) -> None:
    """Logged only at the session's end, a bad project name would cost a whole run's
    tracking; it is refused first, as a usage error, with no run folder."""
    result = pytester.runpytest_inprocess(*LIVE_ARGS, argument)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in result.stderr.lines if line.strip()]
    assert line.startswith("ERROR: --libero-") and line.endswith(said), line
    assert not (pytester.path / "libero-results").exists()


def test_nothing_is_imported_unless_asked_for(tmp_path: Path) -> None:
    """``pytest --help``, a plain run and the command line import no tracker, lerobot or torch."""
    probe = f"""
import sys, pytest
import pytest_libero.cli, pytest_libero.plugin
what = sys.argv[1]
if what == "help":
    pytest.main(["--help"])
else:
    pytest.main([*{list(LIVE_ARGS)!r}, "--libero-results={tmp_path / 'results'}"])
print("imported:", sorted({{m.split(".")[0] for m in sys.modules}} & {set(TRACKER_PACKAGES)!r}))
"""
    for what in ("help", "run"):
        done = subprocess.run([sys.executable, "-c", probe, what], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
        assert done.stdout.strip().splitlines()[-1] == "imported: []", done.stdout[-2000:] + done.stderr


@pytest.mark.usefixtures("no_renderer")
def test_the_session_end_readers_of_summary_json_listen_to_the_run_s_end(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorder writes summary.json and then calls pytest_libero_run_finished; what
    reads summary.json at the session's end listens there, whatever the order in which
    plugins were registered or their session-finish hooks run."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    names = pytester.path / "plugins.json"
    pytester.makeconftest(f"""
        import json
        def pytest_unconfigure(config):
            manager = config.pluginmanager
            listening = [manager.get_name(impl.plugin)
                         for impl in manager.hook.pytest_libero_run_finished.get_hookimpls()]
            finishing = [manager.get_name(impl.plugin)
                         for impl in manager.hook.pytest_sessionfinish.get_hookimpls()]
            open({str(names)!r}, "w").write(json.dumps([listening, finishing]))
        """)
    pytester.runpytest_inprocess(*LIVE_ARGS, f"--alluredir={pytester.path / 'allure'}",
                                 f"--libero-mlflow={(pytester.path / 'mlruns').as_uri()}")
    listening, finishing = json.loads(names.read_text())
    assert {"libero-allure-environment", "libero-trackers"} <= set(listening)
    assert "libero-recorder" in finishing
    assert not {"libero-allure-environment", "libero-trackers"} & set(finishing)
