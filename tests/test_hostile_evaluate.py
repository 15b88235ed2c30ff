"""``evaluate()`` given hostile policies and keywords (issue 60, classes R4-R7 and R13).

The caller of ``evaluate()`` always gets control back: a lent object whose ``infer``
never returns errors its case at the call timeout, and the call returns soon after the
child pytest ends (the policy's thread is a daemon, left behind with a warning, so the
process still exits); SystemExit and KeyboardInterrupt raised inside ``infer`` are that
case's error, named, and the server goes on to the next case; a run id whose folder
already holds a finished run is refused, never answered with that run's figures; and
task ids, GPUs and workers are bounded before anything is spelled out.

One real run (three cases of two policy calls, in a subprocess with a hard timeout, so
a hang fails the test instead of holding it) serves classes R4 and R5; the rest start
no simulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import pytest
from cli_runs import UNPRIVILEGED
from scripted_runs import make_run

from harness.hostile import Hostile
from pytest_libero import EvaluationRefused, evaluate
from pytest_libero.api.served import CLOSE_S

ROOT = Path(__file__).resolve().parents[1]
SHORT = {"scope": "task_coverage", "suite": "libero_10", "budget_mode": "decisions",
         "max_policy_calls": 2, "replan_interval": 5}
CALL_TIMEOUT_S = 3
HARD_TIMEOUT_S = 420
"""The whole run takes about a minute; before the fix the script never ended."""

MISBEHAVING = textwrap.dedent('''
    import json, sys, threading, time
    import pytest_libero
    from pytest_libero import EvaluationRefused, evaluate

    class Misbehaving:
        """Episode 1: infer raises SystemExit(3); episode 2: KeyboardInterrupt; then it
        never returns."""
        metadata = {}

        def __init__(self):
            self.episodes, self.did, self.again = 0, {}, None

        def reset(self):
            self.episodes += 1
            if self.episodes == 1:  # the same object in a second call while this one runs
                try:
                    evaluate(self, task_ids=[3], results=sys.argv[1], **json.loads(sys.argv[3]))
                    self.again = "ran"
                except EvaluationRefused as exc:
                    self.again = f"refused: {exc}"

        def infer(self, observation):
            what = {1: "SystemExit", 2: "KeyboardInterrupt"}.get(self.episodes, "stuck")
            self.did[observation.language] = what
            if what == "SystemExit":
                raise SystemExit(3)
            if what == "KeyboardInterrupt":
                raise KeyboardInterrupt("pressed inside infer")
            threading.Event().wait()

    policy = Misbehaving()
    found = evaluate(policy, task_ids=[0, 1, 2], results=sys.argv[1], run_id="misbehaving",
                     pytest_args=[f"--libero-call-timeout={sys.argv[2]}"], **json.loads(sys.argv[3]))
    print(json.dumps({"module": pytest_libero.__file__, "returned_at": time.time(),
                      "outcomes": found.outcomes, "did": policy.did, "again": policy.again}),
          flush=True)
''')


@dataclass(frozen=True)
class Misbehaved:
    """The script's end: its exit status, what it printed, and the run's records by what
    the policy did in them."""

    returncode: int
    stdout: str
    stderr: str
    said: dict[str, Any]
    records: dict[str, dict[str, Any]]
    summary_written_at: float


@pytest.fixture(scope="module")
def misbehaved(tmp_path_factory: pytest.TempPathFactory) -> Misbehaved:
    work = tmp_path_factory.mktemp("misbehaving")
    script = work / "misbehaving.py"
    script.write_text(MISBEHAVING)
    done = subprocess.run([sys.executable, str(script), str(work / "results"), str(CALL_TIMEOUT_S),
                           json.dumps(SHORT)], capture_output=True, text=True, timeout=HARD_TIMEOUT_S,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=work)
    assert done.returncode == 0 and done.stdout.strip(), done.stdout + done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert Path(said["module"]).is_relative_to(ROOT), said  # this checkout's package
    run = work / "results" / "evaluate" / "misbehaving"
    lines = (run / "results.jsonl").read_text().splitlines()
    records = {said["did"][r["entry"]["language"]]: r for r in map(json.loads, lines)}
    return Misbehaved(done.returncode, done.stdout, done.stderr, said, records,
                      (run / "summary.json").stat().st_mtime)


@pytest.mark.simulator
def test_an_infer_that_never_returns_gives_control_back(misbehaved: Misbehaved) -> None:
    stuck = misbehaved.records["stuck"]
    assert stuck["outcome"] == "errored", stuck
    assert f"did not answer within call_timeout={CALL_TIMEOUT_S}" in stuck["error"]["message"], stuck["error"]
    # evaluate() returned soon after the child wrote its summary, and the process exited
    # (the fixture's run ended with status 0) with the call still stuck on its thread.
    waited = misbehaved.said["returned_at"] - misbehaved.summary_written_at
    assert 0 <= waited < CLOSE_S + 20, waited
    assert "was still running 10 s after the run ended; it is left behind" in misbehaved.stderr, \
        misbehaved.stderr


@pytest.mark.simulator
@pytest.mark.parametrize(("what", "named"), [
    ("SystemExit", "SystemExit: 3, raised by the policy's infer(): it fails this call only"),
    ("KeyboardInterrupt", "KeyboardInterrupt: pressed inside infer, raised by the policy's infer()"),
], ids=["SystemExit", "KeyboardInterrupt"])
def test_system_exit_and_keyboard_interrupt_from_infer_are_their_case_s_error(
        misbehaved: Misbehaved, what: str, named: str) -> None:
    record = misbehaved.records[what]
    assert record["outcome"] == "errored", record
    message = record["error"]["message"]
    assert message.startswith("your policy object (__main__.Misbehaving) raised on call ") and \
        named in message.splitlines()[0], message
    error = record["error"]
    assert (error["kind"], error["cause"]) == ("policy_transport", "policy"), error
    assert "did not answer" not in message, message  # the exception, not a timeout
    # The server went on: every case was attempted, the one after each of these too.
    assert set(misbehaved.said["outcomes"].values()) == {"errored"} and len(misbehaved.records) == 3
    for noise in ("Task was destroyed", "Event loop is closed", "Traceback", "never awaited"):
        assert noise not in misbehaved.stderr, misbehaved.stderr


@pytest.mark.simulator
def test_the_same_object_in_a_second_call_at_once_is_refused(misbehaved: Misbehaved) -> None:
    assert misbehaved.said["again"] == (
        "refused: this policy object (Misbehaving) is already being evaluated by another evaluate() "
        "call of this process, and one object serves one episode at a time: wait for that call, or "
        "pass a factory"), misbehaved.said
    assert len(misbehaved.records) == 3  # the first call went on, its three cases run


def test_a_run_id_that_already_finished_is_refused_not_returned(tmp_path: Path) -> None:
    made, _ = make_run(tmp_path / "made")
    finished = tmp_path / "results" / "zero" / "finished"
    finished.parent.mkdir(parents=True)
    made.rename(finished)
    summary = (finished / "summary.json").read_bytes()
    with pytest.raises(EvaluationRefused) as refused:
        evaluate("zero", run_id="finished", results=tmp_path / "results", task_ids=[0],  # type: ignore[arg-type]
                 pytest_args=["--libero-isolation=none"], **SHORT)  # refused before any case
    said = str(refused.value)
    assert said.startswith(f"run folder {finished} already exists; a run never overwrites another"), said
    assert len(said.splitlines()) == 1, said
    assert (finished / "summary.json").read_bytes() == summary  # the finished run is untouched


class Endless(Sequence[int]):
    """A sequence of ``size`` ids that fails the test if any is read."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        raise AssertionError(f"element {index} of {self.size} was read")

    def __iter__(self) -> Iterator[int]:
        raise AssertionError(f"the {self.size} elements were iterated")


def itself() -> list[Any]:
    looped: list[Any] = [0]
    looped.append(looped)
    return looped


class Still:
    metadata: dict[str, Any] = {}

    def reset(self) -> None:
        pass

    def infer(self, observation: Any) -> dict[str, Any]:
        raise AssertionError("no case may run")


BOUNDS: dict[str, tuple[dict[str, Any], str]] = {
    "task-ids-trillion": ({"task_ids": Endless(10**12)},
                          "task_ids holds 1000000000000 ids; a LIBERO suite has at most 90 tasks: "
                          "give at most 90"),
    "task-ids-range": ({"task_ids": range(10**12)}, "task_ids holds 1000000000000 ids"),
    "gpus-trillion": ({"gpus": Endless(10**12)},
                      "gpus holds 1000000000000 GPUs; evaluate() takes at most 256: give at most 256"),
    "task-ids-itself": ({"task_ids": itself()},
                        "task_ids holds [0, [...]], a list: give whole numbers, e.g. [0, 1, 4]"),
    "gpus-itself": ({"gpus": itself()}, "gpus holds [0, [...]], a list: give whole numbers"),
    "workers-trillion": ({"workers": 10**12},
                         "workers=1000000000000: give a whole number from 1 to 256 (pytest -n)"),
    "task-ids-text-megabyte": ({"task_ids": "0," * 500_000},
                               "(1000000 characters) is longer than a run takes (10000 characters)"),
    "pytest-args-trillion": ({"pytest_args": Endless(10**12)},
                             "pytest_args holds 1000000000000 arguments: give at most 1000"),
}


@pytest.mark.parametrize("name", list(BOUNDS))
def test_lists_are_bounded_before_they_are_spelled_out(name: str, tmp_path: Path) -> None:
    keywords, said = BOUNDS[name]
    with pytest.raises(EvaluationRefused) as refused:
        evaluate(Still(), results=tmp_path, **keywords)
    text = str(refused.value)
    assert said in text and len(text.splitlines()) == 1 and len(text) < 300, text
    assert not list(tmp_path.iterdir())  # refused in the caller's process: no child, no folder


REPLIES = textwrap.dedent('''
    import json, resource, sys
    import numpy as np
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
    from pytest_libero.api.served import OneObject, serving
    from pytest_libero.policy.contract import Observation
    from pytest_libero.policy.errors import ServerError
    from pytest_libero.policy.openpi.layout import RequestLayout
    from pytest_libero.policy.openpi.transport import WebsocketPolicy

    REPLIES = {"none": None, "text": "move left",
               "billion": {"actions": np.broadcast_to(np.zeros(1), (10**9, 7))}}

    class Answers:
        metadata = {}
        def reset(self): pass
        def infer(self, observation): return REPLIES[sys.argv[2]]

    images = {c: np.zeros((256, 256, 3), np.uint8) for c in ("agentview", "robot0_eye_in_hand")}
    with serving(OneObject(Answers()), close_policies=False) as endpoint:
        client = WebsocketPolicy(endpoint, layout=RequestLayout(counters=True), connect_timeout=10,
                                 call_timeout=60, wait_s=10)
        try:
            client.reset()
            client.infer(Observation("pick it up", images, None, 0, 0))
            print("answered")
        except ServerError as exc:
            print(str(exc).splitlines()[0])
        finally:
            client.close()
    # this process's own peak: ru_maxrss would keep the forking parent's across exec
    status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())
    print(int(status['VmHWM'].split()[0]) // 1024)
''')
ADDRESS_SPACE = 3 << 30
"""The served process's memory limit: a reply spelled out (8 GB) does not fit."""


@pytest.mark.parametrize(("reply", "said"), [
    ("none", "TypeError: infer answered None, not a map (give a dict with 'actions'"),
    ("text", "TypeError: infer answered the text 'move left', not a map"),
    ("billion", "CodecError: $['actions']: the message holds more than 67108864 bytes (this value "
     "alone 56000000000); send a smaller reply"),
], ids=["none", "text", "billion"])
def test_a_reply_that_is_not_one_is_its_call_s_error_and_never_copied(reply: str, said: str) -> None:
    done = subprocess.run([sys.executable, "-c", REPLIES, str(ADDRESS_SPACE), reply], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    line, peak_mb = done.stdout.splitlines()
    assert line.startswith("the policy server at ws://127.0.0.1:") and said in line, line
    assert int(peak_mb) < 1024, peak_mb  # nothing the size of the reply was made
    assert "MemoryError" not in done.stdout + done.stderr and "Traceback" not in done.stderr, done.stderr


READ_ONLY = textwrap.dedent('''
    import sys
    from pytest_libero import EvaluationRefused, evaluate

    class Still:
        metadata = {}
        def reset(self): pass
        def infer(self, observation): raise AssertionError("no case may run")

    try:
        evaluate(Still(), task_ids=[0], results=sys.argv[1], scope="task_coverage", suite="libero_10",
                 pytest_args=["--libero-isolation=none"])  # refused before any case: no forkserver
    except EvaluationRefused as exc:
        print(f"refused: {exc}")
''')


def test_a_results_folder_this_user_cannot_write_is_refused(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    results.chmod(0o555)
    done = subprocess.run([*UNPRIVILEGED, sys.executable, "-c", READ_ONLY, str(results)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and not done.stderr.strip(), done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(f"refused: cannot create the run folder {results}/evaluate/") and \
        line.endswith("(Permission denied); give a results location that is a folder this user can "
                      "write (--libero-results, or merge's --out)"), line
    assert list(results.iterdir()) == []


_MISBEHAVING = "a lent object whose infer {}, served by `evaluate(obj, task_ids=[0, 1, 2])`"
HOSTILE: list[Hostile] = [
    Hostile(4, _MISBEHAVING.format("never returns (the case errored at its timeout, then "
                                   "evaluate() waited forever in the server's close)"),
            "the case errors: \"... did not answer within call_timeout=N s ...\"; evaluate() returns "
            f"at most {CLOSE_S:g} s after the run ends, warning \"a call to the policy (...) was still "
            "running ... it is left behind on its own thread\"; the process exits",
            "tests/test_hostile_evaluate.py::test_an_infer_that_never_returns_gives_control_back"),
    *(Hostile(5, _MISBEHAVING.format(f"raises {what} (the server's event loop died: a transport "
                                     "timeout blamed, later cases unattempted, asyncio tracebacks)"),
              f"that case errors at once: \"your policy object (...) raised on call N: {named} ...\"; "
              "the next cases run; nothing on stderr. A KeyboardInterrupt from infer is the policy's own "
              "(Ctrl-C reaches the caller's main thread, never infer), so it does not stop the run",
              "tests/test_hostile_evaluate.py::test_system_exit_and_keyboard_interrupt_from_infer_are_"
              f"their_case_s_error[{what}]")
      for what, named in (("SystemExit", "SystemExit: 3, raised by the policy's infer(): it fails "
                                          "this call only; the server goes on serving"),
                          ("KeyboardInterrupt", "KeyboardInterrupt: pressed inside infer, raised by "
                                                "the policy's infer()"))),
    Hostile(6, "`evaluate(..., run_id=ID)` where ID's folder holds a finished run (it returned that "
            "run's Evaluation, exit code 4)",
            "EvaluationRefused, one line: \"run folder ... already exists; a run never overwrites "
            "another. Choose another --libero-run-id, ...\"; the folder untouched",
            "tests/test_hostile_evaluate.py::test_a_run_id_that_already_finished_is_refused_not_returned"),
    *(Hostile(7, tried, f"EvaluationRefused before any child, no folder: \"{BOUNDS[name][1]}\"",
              f"tests/test_hostile_evaluate.py::test_lists_are_bounded_before_they_are_spelled_out[{name}]")
      for name, tried in (
          ("task-ids-range", "`task_ids=range(10**12)` (every id was spelled out in the caller's process)"),
          ("gpus-trillion", "`gpus` a sequence of 10^12 GPUs"),
          ("task-ids-itself", "`task_ids` a list that holds itself (RecursionError)"),
          ("gpus-itself", "`gpus` a list that holds itself"),
          ("workers-trillion", "`workers=10**12`"),
          ("task-ids-text-megabyte", "`task_ids` a megabyte of text (the child's command line "
                                     "would not start: E2BIG)"),
          ("pytest-args-trillion", "`pytest_args` a sequence of 10^12 arguments"))),
    Hostile(13, "`evaluate(obj)` called again with the same object while a call serving it runs (here "
            "from the object's own reset(); another thread alike): both served it at once, mixing "
            "two episodes' state in one object",
            "the second call: EvaluationRefused, one line: \"this policy object (...) is already being "
            "evaluated by another evaluate() call of this process ... pass a factory\"; the first "
            "goes on",
            "tests/test_hostile_evaluate.py::test_the_same_object_in_a_second_call_at_once_is_refused"),
    Hostile(13, "`evaluate(obj, results=FOLDER)` where this user cannot write FOLDER (root without "
            "its capabilities)", "EvaluationRefused, one line: \"cannot create the run folder "
            "FOLDER/evaluate/... (Permission denied); give a results location that is a folder this "
            "user can write ...\"; nothing written (it was so already)",
            "tests/test_hostile_evaluate.py::test_a_results_folder_this_user_cannot_write_is_refused"),
    *(Hostile(13, f"a lent object whose infer returns {tried}", f"that case errors: \"the policy "
              f"server at ws://... raised while answering: {said}...\"{also}",
              f"tests/test_hostile_evaluate.py::test_a_reply_that_is_not_one_is_its_call_s_error_and_"
              f"never_copied[{reply}]")
      for reply, tried, said, also in (
          ("none", "None", "TypeError: infer answered None, not a map (give a dict with 'actions'", ""),
          ("text", "a string", "TypeError: infer answered the text 'move left', not a map", ""),
          ("billion", "`{'actions': np.broadcast_to(np.zeros(1), (10**9, 7))}` (the server spelled "
                      "out 56 GB in the caller's process before refusing it)",
           "CodecError: $['actions']: the message holds more than 67108864 bytes (this value alone "
           "56000000000); send a smaller reply", "; nothing of its size is allocated"))),
]
