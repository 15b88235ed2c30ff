"""``pytest_libero.evaluate`` from a Python process, on the real simulator (issue 51).

A policy object in this process is served from a thread of it over the real websocket
wire, and the suite runs in a child pytest: the demo's recordings replayed by an object
pass their task; an object that raises errors its case and not the run; two calls in one
process, a call after one that raised and a call after an interrupted one work, each
leaving its port free; a profile name and an endpoint go the command line's way; and bad
input is refused before any case, in the command line's words.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.servers import free_port, serve_argv, serving
from pytest_libero import Evaluation, EvaluationRefused, evaluate
from pytest_libero.api.keywords import KEYWORDS
from pytest_libero.config.profiles import load_profile

pytestmark = pytest.mark.simulator

ROOT = Path(__file__).resolve().parents[1]
SHORT = {"scope": "task_coverage", "suite": "libero_10", "budget_mode": "decisions",
         "max_policy_calls": 2, "replan_interval": 5}


class Still:
    """Holds the arm still; raises on the calls named in ``raise_on`` (counted over the run)."""

    metadata: dict[str, Any] = {}

    def __init__(self, raise_on: tuple[int, ...] = ()) -> None:
        self.calls, self.raise_on = 0, raise_on

    def reset(self) -> None:
        pass

    def infer(self, observation: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls in self.raise_on:
            raise ArithmeticError(f"the policy broke on call {self.calls}")
        return {"actions": np.zeros((5, 7))}


def closed(endpoint_port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", endpoint_port), timeout=1).close()
    except OSError:
        return True
    return False


def port_of(found: Evaluation) -> int:
    run = json.loads((found.run_dir / "run.json").read_text())
    return int(run["plan"]["profile"]["endpoint"].rsplit(":", 1)[1])


def test_a_policy_object_replaying_the_demo_passes_and_the_summary_is_the_run_s(tmp_path: Path) -> None:
    demo = load_profile("demo").build_policy()  # an object of this process: its recordings
    told: list[tuple[int, int, int]] = []
    found = evaluate(demo, scope="task_coverage", suite="libero_spatial", task_ids=[0],
                     min_success=1.0, results=tmp_path, progress=lambda *a: told.append(a))
    assert found.exit_code == 0 and found.gate == "passed", found
    assert found.outcomes == {"libero_spatial-00": "success"} and found.success_rate == 1.0
    assert found.summary == json.loads((found.run_dir / "summary.json").read_text())
    assert found.suites == {"libero_spatial": 1.0} and found.interval[1] == 1.0
    assert found.score == 1.0  # a success scores 1
    assert told[-1] == (1, 1, 1)
    profile = json.loads((found.run_dir / "run.json").read_text())["plan"]["profile"]
    assert profile["description"].endswith("evaluate: pytest_libero.policy.builtin.demo.DemoPolicy"), profile
    assert closed(port_of(found))


def test_an_object_raising_errors_its_case_and_the_next_call_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = Still(raise_on=(2,))
    found = evaluate(policy, task_ids=[0, 1], results=tmp_path, **SHORT)  # type: ignore[arg-type]
    assert found.outcomes == {"libero_10-00": "errored", "libero_10-01": "failure"}, found.outcomes
    record = json.loads((found.run_dir / "results.jsonl").read_text().splitlines()[0])
    message = record["error"]["message"]  # told in the object's terms, not as a server's fault
    assert message.startswith(f"your policy object ({Still.__module__}.Still) raised on call 2: "
                              "ArithmeticError: the policy broke on call 2"), message
    assert record["error"]["cause"] == "policy" and "ws://" not in record["summary"], record
    assert found.exit_code == 1 and closed(port_of(found))
    # Called from inside a test run (an xdist worker, options in PYTEST_ADDOPTS): the child is
    # a run of its own, none of them in it.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--libero-scope=nothing-such")
    again = evaluate(policy, task_ids=[2], results=tmp_path, **SHORT)  # type: ignore[arg-type]
    assert again.outcomes == {"libero_10-02": "failure"} and again.run_dir != found.run_dir
    assert json.loads((again.run_dir / "results.jsonl").read_text())["worker"] == "main"


def test_a_profile_name_and_an_endpoint_go_the_command_line_s_way(tmp_path: Path) -> None:
    by_name = evaluate("zero", task_ids=[0], results=tmp_path, **SHORT)  # type: ignore[arg-type]
    assert by_name.run_dir.parent.name == "zero" and by_name.outcomes == {"libero_10-00": "failure"}
    port = free_port()
    with serving(serve_argv("zero", port), port):
        by_endpoint = evaluate(f"ws://127.0.0.1:{port}", task_ids=[0], results=tmp_path, **SHORT)  # type: ignore[arg-type]
    assert by_endpoint.outcomes == {"libero_10-00": "failure"}
    profile = json.loads((by_endpoint.run_dir / "run.json").read_text())["plan"]["profile"]
    assert profile["endpoint"] == f"ws://127.0.0.1:{port}"


class Batched(Still):
    """A factory's object with ``infer_batch``: every request of the run comes through it,
    and each call's batch size is kept in the list the factory's objects share."""

    def __init__(self, batches: list[int], heard: dict[str, list[float]]) -> None:
        super().__init__()
        self.batches, self.heard = batches, heard

    def infer_batch(self, observations: list[Any], episodes: list[Any]) -> list[dict[str, Any]]:
        self.batches.append(len(observations))
        for observation in observations:  # when each task's calls came: one case, one connection
            self.heard.setdefault(observation.language, []).append(time.monotonic())
        return [episode.infer(observation) for observation, episode in zip(observations, episodes)]

    def close(self) -> None:
        self.closed = True


def marked(mark: str) -> list[int]:
    """The processes other than this one whose environment holds ``mark``: what this
    test's evaluate() started and left running."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            held = mark.encode() in environ.read_bytes()
            state = (environ.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if held and state != "Z" and int(environ.parent.name) != os.getpid():
            found.append(int(environ.parent.name))
    return found


def test_a_factory_serves_two_workers_batched_and_the_gpus_pin_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mark = f"evaluate-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("PYTEST_LIBERO_TEST_MARK", mark)  # inherited by all the run starts
    batches: list[int] = []
    built: list[Batched] = []
    heard: dict[str, list[float]] = {}

    def factory() -> Batched:
        built.append(Batched(batches, heard))
        return built[-1]

    found = evaluate(factory, task_ids=[0, 1, 2], workers=2, gpus=[0], results=tmp_path,
                     **SHORT)  # type: ignore[arg-type]
    assert found.outcomes == {f"libero_10-0{i}": "failure" for i in range(3)}, found.outcomes
    records = [json.loads(line) for line in (found.run_dir / "results.jsonl").read_text().splitlines()]
    assert {r["worker"] for r in records} == {"gw0", "gw1"}
    assert {(r["gpu"], r["egl_device"]) for r in records} == {("0", "0")}
    assert all(r["policy_metadata"]["pytest_libero/server"]["infer_batch"] for r in records)
    assert sum(batches) == 3 * 2 and sum(b.calls for b in built) == 6  # 2 calls per case, all batched
    windows = sorted((min(times), max(times)) for times in heard.values())
    assert len(windows) == 3, heard
    if any(later[0] < earlier[1] for earlier, later in zip(windows, windows[1:])):
        assert len(built) >= 2  # two cases' calls interleaved: a second object served the second
    assert all(getattr(b, "closed", False) for b in built)  # a factory's objects are closed
    assert closed(port_of(found))
    assert marked(mark) == []  # the workers' forkservers were gone before evaluate() returned


INTERRUPTED = textwrap.dedent('''
    import json, os, signal, sys
    import numpy as np
    from pytest_libero import EvaluationInterrupted, evaluate

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started as a background job
    asked = []

    class Still:
        metadata = {}
        def reset(self): pass
        def infer(self, observation): return {"actions": np.zeros((5, 7))}

    def told(done, total, successes):
        if done >= 1 and not asked:
            asked.append(done)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C once the first case ended

    short = dict(scope="task_coverage", suite="libero_10", task_ids=[0, 1, 2], budget_mode="decisions",
                 max_policy_calls=2, replan_interval=5)
    try:
        evaluate(Still(), progress=told, run_id="cut", results=sys.argv[1], **short)
    except EvaluationInterrupted as exc:
        assert isinstance(exc, KeyboardInterrupt)
        print(json.dumps({"said": str(exc), "run_dir": str(exc.run_dir)}), flush=True)
        stopped = json.loads((exc.run_dir / "summary.json").read_text())
        print(json.dumps(stopped), flush=True)
        found = evaluate(Still(), resume=exc.run_dir, **short)  # the rest, in the same folder
        print(json.dumps({"outcomes": found.outcomes, "run_dir": str(found.run_dir)}))
''')


def test_an_interrupted_call_says_where_its_run_is_and_a_call_resumes_it(tmp_path: Path) -> None:
    script = tmp_path / "interrupt.py"
    script.write_text(INTERRUPTED)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "results")], capture_output=True,
                          text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    interrupted, cut, resumed = map(json.loads, done.stdout.splitlines())
    run_dir = tmp_path / "results" / "evaluate" / "cut"
    assert interrupted["run_dir"] == str(run_dir), interrupted
    completed, left = cut["counts"]["completed"], cut["unattempted"]
    assert completed >= 1 and left and completed + len(left) == 3, cut
    assert interrupted["said"] == (f"evaluate() was interrupted with {len(left)} case(s) unattempted; the "
                                   f"run is at {run_dir}: finish it with evaluate(<the same policy and "
                                   f"keywords>, resume={str(run_dir)!r})"), interrupted
    assert cut["stopped"] == (f"interrupted (Ctrl-C or SIGINT) with {len(left)} case(s) unattempted; finish "
                              f"the run with the same command plus --libero-resume={run_dir} (and without "
                              "--libero-run-id or --libero-results)"), cut["stopped"]
    assert resumed == {"outcomes": {f"libero_10-0{i}": "failure" for i in range(3)}, "run_dir": str(run_dir)}
    records = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(records) == 3, records  # each case once: the resumed call ran only what was left


def test_the_training_loop_example_prints_its_curve(tmp_path: Path) -> None:
    example = ROOT / "examples" / "training" / "evaluate_in_loop.py"
    done = subprocess.run([sys.executable, str(example), "--steps", "2", "--every", "2", "--tasks", "0",
                           "--results", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith("step 2: success 0% (0%-79%), score 0.00, gate failed, 1 cases run, "), line
    assert (tmp_path / "evaluate").is_dir() and not done.stderr.strip(), done.stderr


@pytest.mark.parametrize(("policy", "kwargs", "error", "said"), [
    (object(), {}, TypeError, "needs a profile name, an endpoint (ws://HOST:PORT), a policy object"),
    (Still(), {"workers": 2}, EvaluationRefused, "serves one episode at a time, and 2 workers"),
    (Still(), {"gpus": [0, 1]}, EvaluationRefused, "and 2 workers would run 2 at once: pass a factory"),
    (Still(), {"gpus": "0,0"}, EvaluationRefused, "--libero-gpus='0,0': give distinct GPU indices"),
    (Still(), {"workers": 0}, EvaluationRefused, "workers=0: give a whole number from 1 to 256"),
    (Still(), {"scope": "everything"}, EvaluationRefused,
     "--libero-scope='everything' is unknown; allowed: smoke, development"),
    (Still(), {"task_ids": "x"}, EvaluationRefused, "--libero-task-ids"),
    ("no_such_profile", {}, EvaluationRefused, "no_such_profile"),
    (Still(), {"resume": "libero-results/evaluate/cut", "run_id": "again"}, EvaluationRefused,
     "resume continues its own run folder: drop run_id and results"),
], ids=["no-policy", "object-with-workers", "object-with-gpus", "bad-gpus", "no-workers",
        "bad-scope", "bad-task-ids", "unknown-profile", "resume-with-run-id"])
def test_bad_input_is_refused_before_any_case(policy: Any, kwargs: dict[str, Any], error: type,
                                               said: str, tmp_path: Path) -> None:
    with pytest.raises(error, match=None) as raised:
        evaluate(policy, results=tmp_path, **kwargs)
    assert said in str(raised.value) and len(str(raised.value).splitlines()) == 1, raised.value
    assert not list(tmp_path.glob("*/*/results.jsonl"))  # no case ran


def test_an_unknown_keyword_and_an_object_without_infer_are_type_errors(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'suites'"):
        evaluate(Still(), suites=["libero_10"])  # type: ignore[call-arg]

    class NoReset:
        metadata: dict[str, Any] = {}

        def infer(self, observation: Any) -> None: ...

    with pytest.raises(TypeError, match="has no reset: a policy has infer"):
        evaluate(NoReset(), results=tmp_path)


def test_every_keyword_is_an_option_and_docs_options_md_lists_them() -> None:
    from pytest_libero.api.evaluate import USAGE_ERROR
    from pytest_libero.config.options import OPTIONS

    assert USAGE_ERROR == pytest.ExitCode.USAGE_ERROR

    names = {f"--libero-{option.name}" for option in OPTIONS}
    assert set(KEYWORDS.values()) <= names
    assert all(keyword.replace("_", "-") == option.removeprefix("--libero-")
               for keyword, option in KEYWORDS.items())
    doc = (ROOT / "docs" / "options.md").read_text()
    section = doc.split("## From Python: `evaluate`", 1)[1]
    for keyword, option in KEYWORDS.items():
        assert f"| `{keyword}` | `{option}` |" in section, keyword
