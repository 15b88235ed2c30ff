"""Allure results for LIBERO cases: real allure-pytest, real result files, real video.

Nothing of Allure is faked: each test runs pytest in a subprocess (so allure-pytest's
process-global plugin manager holds only that run's listener) with ``--alluredir``,
then reads the *-result.json files it wrote. Records are synthetic but shaped like
``case.run_case``'s; the fixture that reports them stands in for ``libero_case``.

The ``report`` tests render the results as a user does, with ``pytest-libero report``
(which runs Allure 3), and read the report in headless Chromium: the tree LIBERO ->
suite -> task, the categories, the case page's video. They skip unless both are
installed (see ``allure_cli.allure3``).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from allure_cli import allure3 as find_allure3

from harness.runs import run_pytest
from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.perturb.registry import perturbed
from pytest_libero.report.allure import (
    ENVIRONMENT_STEP,
    ERROR_ATTACHMENT,
    RECORD_ATTACHMENT,
    VIDEO_ATTACHMENT,
    write_environment,
)
from pytest_libero.report.allure_config import ALLURE_ENV

VIDEO = "evidence/episode.mp4"
STARTED = round(time.time() - 30, 3)  # an episode that began 30 s ago


def _record(case: str, outcome: str, **extra: Any) -> dict[str, Any]:
    case_id = CaseId.parse(case)
    record: dict[str, Any] = {
        "case": case,
        "entry": {
            "suite": case_id.suite,
            "index": case_id.index,
            "name": "KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it",
            "language": "turn on the stove and put the moka pot on it",
            "bddl_file": "x.bddl",
            "init_states_file": "x.pruned_init",
        },
        "profile": "replay",
        "evidence_class": "infrastructure",
        "track": "rgb",
        "budget": {
            "mode": "horizon", "control_cap": 520, "cap_source": "catalog horizon for libero_10",
            "replan_interval": 5, "max_policy_calls": 520,
        },
        "stop_rule": "immediate",
        "identity": {},
        "policy_metadata": {},
        "outcome": outcome,
        "termination": "success" if outcome == "success" else None,
        "truncation": "voluntary_stop" if outcome == "failure" else None,
        "counters": {
            "policy_calls": 3, "decisions": 2, "executed_controls": 8, "init_controls": 10,
            "stop_signals": 1 if outcome == "failure" else 0,
            "first_success_control": 8 if outcome == "success" else None,
            "first_success_policy_call": 2 if outcome == "success" else None,
        },
        "chunks": [
            {"call": 1, "horizon": 10, "executed": 5, "stop": False},
            {"call": 2, "horizon": 10, "executed": 3, "stop": False},
            {"call": 3, "horizon": 0, "executed": 0, "stop": True},
        ],
        "error": None,
        "summary": {
            "success": "success at control 8 (policy call 2)",
            "failure": "no native success: policy stopped voluntarily after 8 controls, "
            "3 policy calls, 2 decisions",
        }.get(outcome, ""),
        "started_at": STARTED,
        "timings": {"setup_s": 2.5, "episode_s": 4.0},
        "worker": "gw0",
        "gpu": "0",
        "evidence": {"video": VIDEO},
    }
    record.update(extra)
    return record


def _errored(case: str, *, in_setup: bool) -> dict[str, Any]:
    error = {
        "kind": "transport", "cause": "connection_closed", "type": "PolicyTransportError",
        "message": "the policy server closed the connection",
        "traceback": "Traceback (most recent call last):\n  ...\nPolicyTransportError: closed\n",
    }
    return _record(
        case, "errored", error=error,
        summary=f"errored (transport): {error['message']}",
        chunks=[] if in_setup else [{"call": 1, "horizon": 10, "executed": 5, "stop": False}],
        timings={} if in_setup else {"setup_s": 2.5, "episode_s": 1.0},
    )


RECORDS = {
    "libero_10-0": _record(
        "libero_10-0", "success",
        chunks=[{"call": 1, "horizon": 10, "executed": 5, "stop": False,
                 "clipped": {"values": 2, "max_excess": 0.02}},
                {"call": 2, "horizon": 10, "executed": 3, "stop": False}],
        clipping={"mode": "clip", "chunks": 1, "values": 2, "max_excess": 0.02},
        # Set up ahead: began 1.5 s before the turn; its episode started when it ended.
        timings={"setup_s": 2.5, "setup_ahead_s": 1.5, "episode_s": 4.0},
        setup_started_at=STARTED - 1.5,
    ),
    "libero_10-1": _record("libero_10-1", "failure"),
    "libero_10-2": _errored("libero_10-2", in_setup=False),
    "libero_10-3": _errored("libero_10-3", in_setup=True),
}
EXPECTED_STATUS = {
    "libero_10-0": "passed", "libero_10-1": "failed",
    "libero_10-2": "broken", "libero_10-3": "broken",
}

RUN = {
    "run_id": "20250101T000000Z-abcd",
    "source_pin": {"libero_revision": "8f1084e3", "robosuite": "1.4.0"},
    "installed": {"pytest-libero": "0.1.0", "robosuite": None},
    "catalog_sha256": "c" * 64,
    "inventory_sha256": "i" * 64,
    "protocol_identity": "libero-protocol-v1:" + "p" * 32,
    "plan": {
        "profile": {"name": "replay", "sha256": "f" * 64},
        "evidence_class": "infrastructure",
        "track": "rgb", "budget_mode": "horizon", "replan_interval": 5,
    },
}

CONFTEST = """
import json
from pathlib import Path

import pytest

from pytest_libero.report.allure import allure_active, report_case, write_environment

HERE = Path(__file__).parent
RECORDS = json.loads((HERE / "records.json").read_text())
ACTIVE = pytest.StashKey[bool]()


class CaseErrored(Exception):
    pass


@pytest.fixture
def libero_case(request, libero_entry):
    record = RECORDS[libero_entry]
    report_case(record, HERE / "cases" / libero_entry)
    if record["outcome"] == "errored":
        raise CaseErrored(record["summary"])
    return record


def pytest_configure(config):
    config.stash[ACTIVE] = allure_active(config)
    print("allure_active", config.stash[ACTIVE])


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    config = session.config
    if config.stash[ACTIVE] and not hasattr(config, "workerinput"):
        run = json.loads((HERE / "run.json").read_text())
        write_environment(Path(config.getoption("allure_report_dir")), run)
"""

TEST_MODULE = """
import pytest


@pytest.mark.parametrize("libero_entry", {cases!r})
def test_case(libero_case, libero_entry):
    if libero_case["outcome"] != "success":
        pytest.fail(libero_case["summary"], pytrace=False)
"""


def make_mp4(path: Path, frames: int = 10, rate: int = 5) -> Path:
    """A small real H.264 MP4 from ffmpeg's test source, as browsers play it."""
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-y", "-f", "lavfi",
            "-i", f"testsrc=size=160x120:rate={rate}", "-frames:v", str(frames),
            "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart",
            "-threads", "1", str(path),
        ],
        check=True,
    )
    return path


@pytest.fixture(scope="module")
def mp4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_mp4(tmp_path_factory.mktemp("video") / "episode.mp4")


def _project(root: Path, mp4: Path, cases: list[str]) -> None:
    """A test project whose libero_case fixture reports the synthetic records."""
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_cases.py").write_text(TEST_MODULE.format(cases=cases))
    (root / "records.json").write_text(json.dumps(RECORDS))
    (root / "run.json").write_text(json.dumps(RUN))
    for case in cases:
        if case != "libero_10-1":  # one case without a video file: nothing attached
            target = root / "cases" / case / VIDEO
            target.parent.mkdir(parents=True)
            shutil.copyfile(mp4, target)


def _results(alluredir: Path) -> dict[str, dict[str, Any]]:
    """Result files by case id (the hidden entry parameter holds it)."""
    results = {}
    for path in alluredir.glob("*-result.json"):
        result = json.loads(path.read_text())
        params = {p["name"]: p for p in result.get("parameters", [])}
        results[params["libero_entry"]["value"].strip("'")] = result
    return results


def _labels(result: dict[str, Any], name: str) -> list[str]:
    return [label["value"] for label in result["labels"] if label["name"] == name]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # A subprocess: allure-commons keeps listeners in a process-global plugin manager.
    # The libero plugin is off: the project's own fixture stands in for its libero_case.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:libero", *args)


@pytest.fixture(scope="module")
def allure_run(
    tmp_path_factory: pytest.TempPathFactory, mp4: Path
) -> tuple[pytest.RunResult, Path]:
    """One pytest run over all four records, shared by the assertions below."""
    # pytester is function-scoped; this run is shared by the module, so it is made by hand.
    root = tmp_path_factory.mktemp("allure_project")
    _project(root, mp4, list(RECORDS))
    alluredir = root / "allure-results"
    proc = run_pytest(["-p", "no:libero", f"--alluredir={alluredir}", "-rA", str(root)], root,
                      timeout=300)
    result = pytest.RunResult(proc.returncode, proc.stdout.splitlines(),
                              proc.stderr.splitlines(), 0.0)
    return result, alluredir


def test_pytest_outcomes(allure_run: tuple[pytest.RunResult, Path]) -> None:
    result, _ = allure_run
    result.assert_outcomes(passed=1, failed=1, errors=2)


def test_statuses_broken_vs_failed(allure_run: tuple[pytest.RunResult, Path]) -> None:
    results = _results(allure_run[1])
    assert {case: r["status"] for case, r in results.items()} == EXPECTED_STATUS
    assert "CaseErrored" in results["libero_10-2"]["statusDetails"]["message"]
    assert "policy stopped voluntarily" in results["libero_10-1"]["statusDetails"]["message"]


def test_title_description_labels(allure_run: tuple[pytest.RunResult, Path]) -> None:
    result = _results(allure_run[1])["libero_10-1"]
    assert result["name"] == "libero_10-1: turn on the stove and put the moka pot on it"
    assert result["description"].startswith("no native success: policy stopped voluntarily")
    assert "| executed_controls | 8 |" in result["description"]
    assert "**Infrastructure evidence:**" in result["description"]
    assert _labels(result, "parentSuite") == ["LIBERO"]
    assert _labels(result, "suite") == ["libero_10"]
    task = "KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it"
    assert _labels(result, "subSuite") == [task]
    assert _labels(result, "feature") == [task]
    assert _labels(result, "profile") == ["replay"]
    assert _labels(result, "evidence_class") == ["infrastructure"]
    assert _labels(result, "budget_mode") == ["horizon"]
    assert {"profile:replay", "track:rgb", "budget:horizon", "INFRASTRUCTURE EVIDENCE"} <= set(
        _labels(result, "tag")
    )


def test_clipped_actions_are_shown(allure_run: tuple[pytest.RunResult, Path]) -> None:
    results = _results(allure_run[1])
    clipped = results["libero_10-0"]
    assert "| out-of-bounds actions | clipped: 2 value(s) in 1 chunk(s), largest excess 0.02 |" \
        in clipped["description"]
    assert clipped["steps"][1]["name"] == "policy call 1: 10 actions, 5 executed, 2 value(s) clipped"
    assert "| out-of-bounds actions | errors (strict) |" in results["libero_10-1"]["description"]


def test_parameters_keep_history_per_case(allure_run: tuple[pytest.RunResult, Path]) -> None:
    results = _results(allure_run[1])
    params = {p["name"]: p for p in results["libero_10-0"]["parameters"]}
    shown = {name: p["value"] for name, p in params.items() if not p.get("excluded")}
    assert shown == {
        "suite": "'libero_10'", "index": "0", "profile": "'replay'", "track": "'rgb'",
        "budget cap": "'520 controls (horizon)'",
    }
    assert params["worker"]["excluded"] is True
    assert params["gpu"]["excluded"] is True
    assert params["libero_entry"] == {
        "name": "libero_entry", "value": "'libero_10-0'", "excluded": True, "mode": "hidden",
    }
    assert len({r["historyId"] for r in results.values()}) == len(results)


def test_history_ignores_worker_and_gpu(
    pytester: pytest.Pytester, mp4: Path, allure_run: tuple[pytest.RunResult, Path]
) -> None:
    """The same case on another worker and GPU keeps its history id."""
    moved = dict(RECORDS)
    moved["libero_10-0"] = {**RECORDS["libero_10-0"], "worker": "gw7", "gpu": "3"}
    _project(pytester.path, mp4, ["libero_10-0"])
    (pytester.path / "records.json").write_text(json.dumps(moved))
    _run(pytester, f"--alluredir={pytester.path / 'out'}").assert_outcomes(passed=1)
    again = _results(pytester.path / "out")["libero_10-0"]
    first = _results(allure_run[1])["libero_10-0"]
    assert again["historyId"] == first["historyId"]
    assert {p["name"]: p["value"] for p in again["parameters"]}["worker"] == "'gw7'"


def test_steps_rebuilt_with_times(allure_run: tuple[pytest.RunResult, Path]) -> None:
    results = _results(allure_run[1])
    steps = results["libero_10-1"]["steps"]
    assert [s["name"] for s in steps] == [
        ENVIRONMENT_STEP,
        "policy call 1: 10 actions, 5 executed",
        "policy call 2: 10 actions, 3 executed",
        "policy call 3: stop signal",
    ]
    assert all(s["status"] == "passed" for s in steps)
    start = int(STARTED * 1000)
    # The case is timed from its episode's start, not from allure-pytest's call phase.
    assert all(r["start"] == start and r["stop"] - start >= 30_000 for r in results.values())
    assert (steps[0]["start"], steps[0]["stop"]) == (start, start + 2500)
    # The 4 s episode is shared 6:4:1 by executed controls (+1 for the call itself).
    spans = [(s["start"], s["stop"]) for s in steps[1:]]
    assert spans == [(start + 2500, start + 4681), (start + 4681, start + 6136),
                     (start + 6136, start + 6500)]

    errored = results["libero_10-2"]["steps"]
    assert [s["status"] for s in errored] == ["passed", "passed", "broken"]
    assert errored[-1]["name"] == "episode errored (transport): connection_closed"
    assert "closed the connection" in errored[-1]["statusDetails"]["message"]

    # Set up ahead: the step began 1.5 s before the case's turn and took its 2.5 s; the
    # episode's first chunk starts when the set-up ended.
    ahead = results["libero_10-0"]["steps"]
    assert ahead[0]["name"] == f"{ENVIRONMENT_STEP} (1.5 s of it while the previous case ran)"
    began = int((STARTED - 1.5) * 1000)
    assert abs(began - (start - 1500)) <= 1  # milliseconds, from float seconds
    assert (ahead[0]["start"], ahead[0]["stop"]) == (began, began + 2500)
    assert ahead[1]["start"] == began + 2500

    early = results["libero_10-3"]["steps"]
    assert [(s["name"], s["status"]) for s in early] == [(ENVIRONMENT_STEP, "broken")]
    assert "PolicyTransportError" in early[0]["statusDetails"]["trace"]


def test_attachments(allure_run: tuple[pytest.RunResult, Path], mp4: Path) -> None:
    alluredir = allure_run[1]
    results = _results(alluredir)
    for case, result in results.items():
        attachments = {a["name"]: a for a in result["attachments"]}
        record = json.loads((alluredir / attachments[RECORD_ATTACHMENT]["source"]).read_text())
        assert record["case"] == case
        assert attachments[RECORD_ATTACHMENT]["type"] == "application/json"
        if case == "libero_10-1":
            assert VIDEO_ATTACHMENT not in attachments  # no video file in its case folder
        else:
            video = attachments[VIDEO_ATTACHMENT]
            assert video["type"] == "video/mp4"
            assert video["source"].endswith(".mp4")
            assert (alluredir / video["source"]).read_bytes() == mp4.read_bytes()
        if EXPECTED_STATUS[case] == "broken":
            text = (alluredir / attachments[ERROR_ATTACHMENT]["source"]).read_text()
            assert "cause: connection_closed" in text and "Traceback" in text
            assert attachments[ERROR_ATTACHMENT]["type"] == "text/plain"
        else:
            assert ERROR_ATTACHMENT not in attachments


def test_environment_and_categories(allure_run: tuple[pytest.RunResult, Path]) -> None:
    alluredir = allure_run[1]
    properties = (alluredir / "environment.properties").read_text().splitlines()
    assert properties[:7] == [
        "run_id=20250101T000000Z-abcd",
        "evidence_class=infrastructure (built-in policy: proves the harness, not a capability)",
        "profile=replay",
        "profile.sha256=" + "f" * 64,
        "protocol_identity=libero-protocol-v1:" + "p" * 32,
        "catalog_sha256=" + "c" * 64,
        "inventory_sha256=" + "i" * 64,
    ]
    assert "source_pin.libero_revision=8f1084e3" in properties
    assert "installed.robosuite=not installed" in properties
    assert "plan.track=rgb" in properties
    categories = json.loads((alluredir / "categories.json").read_text())
    assert [(c["name"], c["matchedStatuses"]) for c in categories] == [
        ("Infrastructure errors", ["broken"]), ("Native failures", ["failed"]),
    ]


def test_environment_escapes(tmp_path: Path) -> None:
    write_environment(tmp_path / "new", {"run_id": "a\nb", "source_pin": {"x y=z": "c:\\d"}})
    text = (tmp_path / "new" / "environment.properties").read_text()
    assert "run_id=a\\nb\n" in text
    assert "source_pin.x\\ y\\=z=c:\\\\d\n" in text
    assert not list((tmp_path / "new").glob("*.tmp"))


def test_under_xdist(pytester: pytest.Pytester, mp4: Path) -> None:
    """Workers report their own cases; the controller alone writes the environment."""
    pytest.importorskip("xdist")
    _project(pytester.path, mp4, list(RECORDS))
    out = pytester.path / "out"
    result = _run(pytester, "-n", "2", f"--alluredir={out}")
    result.assert_outcomes(passed=1, failed=1, errors=2)
    results = _results(out)
    assert {case: r["status"] for case, r in results.items()} == EXPECTED_STATUS
    assert all(len(r["steps"]) >= 1 for r in results.values())
    assert (out / "environment.properties").is_file()


def test_inactive_without_alluredir(pytester: pytest.Pytester, mp4: Path) -> None:
    """No --alluredir, or allure-pytest disabled: report_case does nothing, outcomes stay."""
    _project(pytester.path, mp4, list(RECORDS))
    for args in ([], ["-p", "no:allure_pytest"]):
        result = _run(pytester, "-s", *args)
        result.assert_outcomes(passed=1, failed=1, errors=2)
        result.stdout.fnmatch_lines(["allure_active False"])
        result.stdout.no_fnmatch_line("*could not report*")
    assert not list(pytester.path.rglob("*-result.json"))


# --- the report a person opens --------------------------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@contextmanager
def _serve(root: Path) -> Iterator[str]:
    """Serve the report over local HTTP: the app fetches its data, which file:// blocks."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _DevTools:
    """One page of headless Chromium, driven over the DevTools protocol.

    ``--dump-dom`` cannot click, and Allure 3 shows a video only once its attachment
    is opened, as a person would. The project's own websockets client speaks the
    protocol, so this needs no chromedriver and no extra package.
    """

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=120))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def wait_event(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while json.loads(self.socket.recv(timeout=deadline - time.monotonic())).get(
            "method"
        ) != method:
            pass

    def goto(self, url: str) -> None:
        self.send("Page.enable")
        # A new document fires a load event; a change of #fragment (the app's routing) does not.
        if "loaderId" in self.send("Page.navigate", url=url):
            self.wait_event("Page.loadEventFired")

    def evaluate(self, script: str) -> Any:
        reply = self.send("Runtime.evaluate", expression=script, awaitPromise=True,
                          returnByValue=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(reply["exceptionDetails"])
        return reply["result"].get("value")


@contextmanager
def _chromium_page(chromium: str, profile: Path) -> Iterator[_DevTools]:
    from websockets.sync.client import connect

    process = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--mute-audio", "--window-size=1280,1000",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        port_file, deadline = profile / "DevToolsActivePort", time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.2)
        port = port_file.read_text().split()[0]
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(f"http://127.0.0.1:{port}/json/list", timeout=30) as reply:
            page = next(t for t in json.load(reply) if t["type"] == "page")
        with connect(page["webSocketDebuggerUrl"], max_size=None, proxy=None) as socket:
            yield _DevTools(socket)
    finally:
        # Only the browser this test started: its own process group.
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# Open the video attachment as a person would, then wait until its first frame decodes.
OPEN_VIDEO = """(async () => {
  const sleep = ms => new Promise(done => setTimeout(done, ms));
  const until = async (probe, ms = 30000) => {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
      const value = probe(); if (value) return value;
    }
    return null;
  };
  const headers = '[data-testid="test-result-attachment-header"]';
  const header = await until(() => [...document.querySelectorAll(headers)]
    .find(h => h.textContent.includes(%(name)s)));
  if (!header) return {error: "no attachment header", text: document.body.innerText};
  header.querySelector("button").click();  // the name's button toggles the preview
  const video = await until(() => document.querySelector("video"));
  if (!video) return {error: "no <video> after opening the attachment"};
  video.scrollIntoView({block: "center"});
  await until(() => video.readyState >= 2);
  await sleep(300);
  return {
    title: document.querySelector('[data-testid="test-result-info-title"]')?.textContent,
    src: video.currentSrc, readyState: video.readyState,
    width: video.videoWidth, height: video.videoHeight, duration: video.duration,
    html: document.documentElement.outerHTML.includes("<video"),
  };
})()"""


@pytest.fixture
def report_tools() -> tuple[str, str]:
    """Allure 3 and Chromium, or a skip saying how to install them (before any run)."""
    allure3, chromium = find_allure3(), _chromium()
    if allure3 is None:
        pytest.skip("no Allure 3 CLI: npm install --prefix /tmp/pytest-libero-tools/allure3 "
                    f"allure@3.18.0 (or set {ALLURE_ENV})")
    if chromium is None:
        pytest.skip("no chromium: apt-get install -y chromium")
    return allure3, chromium


# The Results tab as a person reads it, each case under its groups; then the
# Categories tab, each category with its count (collapsed, so no case is listed).
READ_TREE_AND_CATEGORIES = """(async () => {
  const sleep = ms => new Promise(done => setTimeout(done, ms));
  const until = async (probe, ms = 30000) => {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
      const value = probe(); if (value) return value;
    }
    return null;
  };
  const id = name => `[data-testid="${name}"]`;
  const all = name => [...document.querySelectorAll(id(name))];
  const leaves = await until(() => all("tree-leaf").length && all("tree-leaf"));
  if (!leaves) return {error: "no test in the tree", text: document.body.innerText};
  const path = leaf => {
    const names = [leaf.querySelector(id("tree-leaf-title")).textContent];
    for (let box = leaf.closest(id("tree-content")); box;
         box = box.parentElement.closest(id("tree-content"))) {
      const section = box.previousElementSibling;
      if (section?.matches(id("tree-section"))) {
        names.unshift(section.querySelector(id("tree-section-title")).textContent);
      }
    }
    return names;
  };
  const tree = leaves.map(path);
  document.querySelector(id("nav-tab-categories")).click();
  const sections = await until(() => location.hash === "#categories" &&
    !all("tree-leaf").length && all("tree-section").length && all("tree-section"));
  const categories = (sections || []).map(
    section => section.innerText.split("\\n").map(text => text.trim()).filter(Boolean));
  return {tree, categories};
})()"""


def _report(allure3: str, alluredir: Path, cwd: Path) -> tuple[Path, dict[str, str]]:
    """``pytest-libero report`` as a user runs it; the report and its case ids by case."""
    report = cwd / "report"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_libero.cli", "report", str(alluredir), "-o", str(report)],
        capture_output=True, text=True, timeout=300, cwd=cwd,
        env={**os.environ, ALLURE_ENV: allure3},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"report: {report}" in done.stdout
    # The app routes a test result's page as #<its id in the generated report>.
    ids = {entry["name"].split(":")[0]: key
           for key, entry in json.loads((report / "test-results.json").read_text())["byId"].items()}
    return report, ids


@pytest.mark.report
def test_report_shows_video(
    report_tools: tuple[str, str], allure_run: tuple[pytest.RunResult, Path], tmp_path: Path
) -> None:
    """The report groups LIBERO -> suite -> task, has our categories, plays the MP4."""
    allure3, chromium = report_tools
    report, ids = _report(allure3, allure_run[1], tmp_path)
    with _serve(report) as base, _chromium_page(chromium, tmp_path / "chromium") as page:
        page.goto(f"{base}/")
        shown = page.evaluate(READ_TREE_AND_CATEGORIES)
        page.goto(f"{base}/#{ids['libero_10-0']}")
        seen = page.evaluate(OPEN_VIDEO % {"name": json.dumps(VIDEO_ATTACHMENT)})
        png = base64.b64decode(page.send("Page.captureScreenshot", format="png")["data"])
    shot = Path(os.environ.get("PYTEST_LIBERO_SCREENSHOT", tmp_path / "case-page.png"))
    shot.write_bytes(png)
    assert "error" not in shown, shown
    task = "KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it"
    title = "turn on the stove and put the moka pot on it"
    assert sorted(shown["tree"]) == [["LIBERO", "libero_10", task, f"{case}: {title}"]
                                     for case in sorted(RECORDS)]
    assert shown["categories"] == [["Infrastructure errors", "2"], ["Native failures", "1"]]
    assert "error" not in seen, seen
    assert seen["title"] == "libero_10-0: turn on the stove and put the moka pot on it"
    assert seen["html"] and seen["src"].startswith(f"blob:{base}/")  # fetched, then played
    # Decoded, not just present: the browser has the first frame of the 160x120 H.264.
    assert seen["readyState"] >= 2 and (seen["width"], seen["height"]) == (160, 120), seen
    assert seen["duration"] == pytest.approx(2.0, abs=0.3)
    assert png.startswith(b"\x89PNG")


@pytest.mark.report
@pytest.mark.simulator
def test_real_run_report_plays_the_episode_video(
    report_tools: tuple[str, str], pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """The whole path: a real LIBERO case, ``pytest-libero report``, a browser."""
    allure3, chromium = report_tools
    alluredir = pytester.path / "allure-results"
    result = pytester.runpytest_subprocess(
        "--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
        "--libero-task-ids=0", "--libero-budget-mode=decisions", "--libero-max-policy-calls=2",
        "--libero-replan-interval=1", f"--alluredir={alluredir}",
    )
    result.assert_outcomes(failed=1)
    assert "protocol_identity=libero-protocol-v1:" in (alluredir / "environment.properties").read_text()
    report, ids = _report(allure3, alluredir, tmp_path)
    with _serve(report) as base, _chromium_page(chromium, tmp_path / "chromium") as page:
        page.goto(f"{base}/")
        shown = page.evaluate(READ_TREE_AND_CATEGORIES)
        page.goto(f"{base}/#{ids['libero_10-00']}")
        seen = page.evaluate(OPEN_VIDEO % {"name": json.dumps(VIDEO_ATTACHMENT)})
    entry = load_catalog().suite_entries("libero_10")[0]
    assert shown.get("tree") == [
        ["LIBERO", "libero_10", entry.name, f"libero_10-00: {entry.language}"]
    ], shown
    assert shown["categories"] == [["Native failures", "1"]]  # a zero policy fails natively
    assert "error" not in seen, seen
    assert seen["title"] == f"libero_10-00: {entry.language}"
    assert seen["readyState"] >= 2 and (seen["width"], seen["height"]) == (256, 256), seen
    assert seen["duration"] == pytest.approx(3 / 20, abs=0.1)  # 1 + 2 frames at 20 fps


@pytest.mark.report
def test_report_counts_a_perturbed_case_as_its_own_test_not_a_retry(
    pytester: pytest.Pytester, mp4: Path, tmp_path: Path
) -> None:
    """A twin and two perturbed copies of it are three tests in Allure 3, the failing one
    among them (before case ids keyed history, they were one test, "retried")."""
    allure3 = find_allure3()
    if allure3 is None:
        pytest.skip("no Allure 3 CLI: npm install --prefix /tmp/pytest-libero-tools/allure3 "
                    f"allure@3.18.0 (or set {ALLURE_ENV})")
    twin = "libero_10-00"
    records = {twin: _record(twin, "success")}
    for case, outcome in (("libero_10-00~camera2", "success"), ("libero_10-00~robot2", "failure")):
        variant = CaseId.parse(case).variant
        assert variant is not None
        records[case] = {**_record(twin, outcome), "case": case, "entry": {
            **records[twin]["entry"], "family": "libero", "twin": twin,
            "perturbation": {"kind": variant.kind, "level": variant.level}}}
    _project(pytester.path, mp4, list(records))
    (pytester.path / "records.json").write_text(json.dumps(records))
    alluredir = pytester.path / "allure-results"
    _run(pytester, f"--alluredir={alluredir}").assert_outcomes(passed=2, failed=1)
    report, ids = _report(allure3, alluredir, tmp_path)
    assert sorted(ids) == sorted(records)
    summary = json.loads((report / "summary.json").read_text())
    assert summary["stats"] == {"total": 3, "passed": 2, "failed": 1}, summary
    assert summary["retryTests"] == [] and summary["flakyTests"] == [], summary


@pytest.mark.report
def test_report_keeps_each_kind_apart_by_its_source(
    report_tools: tuple[str, str], pytester: pytest.Pytester, mp4: Path, tmp_path: Path
) -> None:
    """Every generated kind under Perturbations -> kind -> level, LIBERO-PRO's shipped
    kinds of the same names under LIBERO-PRO -> kind -> suite, the paraphrase companion
    apart from its ``_lan`` case: a reader never finds two sources in one group."""
    allure3, chromium = report_tools
    catalog = load_catalog()
    twin = catalog.suite_entries("libero_10")[3]
    shipped = {e.suite: e for e in catalog.ood_entries if e.index == 3}
    lan = shipped["libero_10_lan"]
    entries = [twin, *(perturbed(twin, kind, level) for kind, level in (
        ("position", 2), ("environment", 3), ("object", 1), ("semantic", 4))),
        shipped["libero_10_swap"], shipped["libero_10_object"], shipped["libero_10_with_mug"],
        lan, catalog.paraphrase_of(lan)]
    records = {e.case_id: {**_record(str(e.twin or e.id), "failure"), "case": e.case_id,
                           "entry": dict(e.as_dict())} for e in entries}
    _project(pytester.path, mp4, list(records))
    (pytester.path / "records.json").write_text(json.dumps(records))
    alluredir = pytester.path / "allure-results"
    _run(pytester, f"--alluredir={alluredir}").assert_outcomes(failed=len(records))
    report, _ = _report(allure3, alluredir, tmp_path)
    with _serve(report) as base, _chromium_page(chromium, tmp_path / "chromium") as page:
        page.goto(f"{base}/")
        shown = page.evaluate(READ_TREE_AND_CATEGORIES)
    assert "error" not in shown, shown
    task = twin.name
    generated = "Perturbations"
    assert sorted(shown["tree"]) == sorted([
        ["LIBERO", "libero_10", task, f"libero_10-03: {twin.language}"],
        [generated, "position", "level 2 / libero_10", f"libero_10-03~position2: {twin.language}"],
        [generated, "environment", "level 3 / libero_10",
         f"libero_10-03~environment3: {twin.language}"],
        [generated, "object", "level 1 / libero_10", f"libero_10-03~object1: {twin.language}"],
        [generated, "semantic", "level 4 / libero_10",
         f"libero_10-03~semantic4: {perturbed(twin, 'semantic', 4).language}"],
        ["LIBERO-PRO", "position", "libero_10_swap",
         f"libero_10_swap-03: {shipped['libero_10_swap'].language}"],
        ["LIBERO-PRO", "object", "libero_10_object",
         f"libero_10_object-03: {shipped['libero_10_object'].language}"],
        ["LIBERO-PRO", "environment", "libero_10_with_mug",
         f"libero_10_with_mug-03: {shipped['libero_10_with_mug'].language}"],
        ["LIBERO-PRO", "semantic", "libero_10_lan", f"libero_10_lan-03: {lan.language}"],
        ["LIBERO-PRO", "paraphrase", "libero_10", f"libero_10-03~paraphrase: {lan.language}"],
    ]), shown["tree"]
