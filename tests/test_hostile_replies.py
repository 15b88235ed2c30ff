"""Hostile replies, round 3 (issue 40): the policy does not decide how much is written
(class 3), and nothing it sends is silently coerced (class 8).

The replies go through an episode as a case runs it (``run_episode`` with the case's
evidence writer), from a real websocket server on 127.0.0.1 (the independent openpi
reference server) or, where the path is in-process, from a policy object. Each must
error its case with its cause and leave no line of itself in ``actions.jsonl``. The
metadata rows reach the preflight (a real pytest run), a case's own connection and an
in-process factory; the strict-JSON rows read every file a run writes with a parser that
refuses ``NaN``. The bounds are ``pytest_libero/policy/limits.py``'s.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openpi_reference_server import OpenpiReferenceServer

from harness.hostile import Hostile
from pytest_libero import session
from pytest_libero.catalog.selection import SelectionRequest
from pytest_libero.config.plan import make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.episode.case import run_case
from pytest_libero.episode.loop import run_episode
from pytest_libero.episode.record import record_to_json
from pytest_libero.evidence.layout import ACTIONS_NAME
from pytest_libero.evidence.renderer import not_measured
from pytest_libero.evidence.writer import CaseEvidence
from pytest_libero.files import json_text
from pytest_libero.policy.contract import RAW_REPLY, Observation
from pytest_libero.policy.limits import MAX_METADATA_BYTES
from pytest_libero.policy.openpi.layout import RequestLayout
from pytest_libero.policy.openpi.transport import WebsocketPolicy
from pytest_libero.protocol.budgets import StopRule, decisions_budget
from pytest_libero.protocol.errors import InvalidAction, SetupError

pytest_plugins = ["pytester"]

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_libero"
HOLD = [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]]
CALL_TIMEOUT_S = 60.0
"""A million-step reply is 56 MB to send and decode on a loaded machine."""


class Still:
    """An environment that never succeeds: what the reply does is all there is."""

    def observe(self, policy_calls: int, executed_controls: int) -> Observation:
        image = np.zeros((256, 256, 3), np.uint8)
        return Observation("hold still", {"agentview": image, "robot0_eye_in_hand": image},
                           None, policy_calls, executed_controls)

    def frame(self) -> np.ndarray:
        return np.zeros((256, 256, 3), np.uint8)

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        return False


class Answers:
    """An in-process policy answering every call with ``reply()``."""

    def __init__(self, reply: Callable[[], Any], metadata: dict[str, Any] | None = None) -> None:
        self.reply = reply
        self.metadata: dict[str, Any] = metadata or {}

    def reset(self) -> None:
        pass

    def infer(self, observation: Observation) -> Any:
        return self.reply()

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Reply:
    """One hostile reply: its class, what it is, how it is made and the words its error
    must hold; ``served``: through a real websocket server, else in-process."""

    id: str
    klass: int
    tried: str
    make: Callable[[], Any]
    words: str
    served: bool = True

    @property
    def row(self) -> Hostile:
        where = "a websocket server on 127.0.0.1" if self.served else "an in-process policy"
        return Hostile(self.klass, f"{self.tried} ({where})",
                       f"errored, `invalid_action`: \"{self.words} ...\"; actions.jsonl holds "
                       "no line of it", f"{REPLY_TEST}[{self.id}]")


def _raw_map() -> dict[str, Any]:
    keys = {f"action.{axis}": np.zeros((1, 16, 1), np.float32)
            for axis in ("x", "y", "z", "roll", "pitch", "yaw", "gripper")}
    return {"actions": np.zeros((16, 7)), RAW_REPLY: {**keys, "action.junk": np.zeros(100_000, np.float32)}}


HERE = "tests/test_hostile_replies.py::"
REPLY_TEST = HERE + "test_a_hostile_reply_errors_its_case_and_nothing_of_it_is_written"
REPLIES = (
    Reply("chunk-of-a-million", 3, "a reply of shape (1,000,000, 7): it wrote 75 MB of "
          "actions.jsonl, 15 GB over pi0's 200 calls", lambda: {"actions": np.zeros((1_000_000, 7))},
          "'actions' holds 1,000,000 steps; a chunk holds at most 1,000"),
    Reply("list-of-1001", 3, "a list reply of 1,001 actions", lambda: {"actions": HOLD * 1001},
          "'actions' holds 1,001 steps; a chunk holds at most 1,000"),
    Reply("many-keys", 3, "100,000 keys beside 'actions' (the sweep's 2 million were each "
          "named in actions.jsonl)", lambda: {"actions": HOLD, **{f"k{i}": 0 for i in range(100_000)}},
          "the reply holds 100,000 keys besides 'actions' and 'stop'; at most 64"),
    Reply("long-key", 3, "a key name of 10 MB, recorded whole",
          lambda: {"actions": HOLD, "k" * 10_000_000: 1},
          "the reply holds a key 'kkkkkkkkkkkkkkkkkkkk…kkkkkkkkkkkkkkkkkkkk' (10000000 "
          "characters); a key name is at most 200 characters"),
    Reply("raw-map", 3, "a GR00T action map with an unused key of 100,000 floats (actions.jsonl "
          "keeps the raw map exactly)", _raw_map,
          "the raw action map holds 400,448 bytes of values; at most 56,000", served=False),
    Reply("list-bool", 8, "the list reply [[0, 0, 0, 0, 0, 0, true]]: it ran with gripper 1.0",
          lambda: {"actions": [[0, 0, 0, 0, 0, 0, True]]},
          "'actions' holds the bool True at (0, 6); send floats only"),
    Reply("list-bool-among-floats", 8, "[[0.5, 0.0, 0.0, 0.0, 0.0, 0.0, true]]: numpy read "
          "the bool as 1.0", lambda: {"actions": [[0.5, 0.0, 0.0, 0.0, 0.0, 0.0, True]]},
          "'actions' holds the bool True at (0, 6)"),
    Reply("list-int-among-floats", 8, "[[0.5, 0, 0, 0, 0, 0, -1.0]]: ints among floats, "
          "which an int array would not pass", lambda: {"actions": [[0.5, 0, 0, 0, 0, 0, -1.0]]},
          "'actions' holds the integer 0 at (0, 1); send floats only (a bool is never a number, "
          "and integers are refused as in an int array)"),
    Reply("list-numpy-bool", 8, "a numpy bool among Python floats",
          lambda: {"actions": [[0.5, 0.0, 0.0, 0.0, 0.0, 0.0, np.True_]]},
          "'actions' holds the bool True at (0, 6)", served=False),
    Reply("list-int-row", 8, "a list of two action arrays, the second int64",
          lambda: {"actions": [np.zeros(7), np.zeros(7, dtype=np.int64)]},
          "'actions' holds an array of dtype int64 at (1,)", served=False),
    Reply("stop-one", 8, "{'stop': 1}: a number for a flag", lambda: {"stop": 1},
          "'stop' must be a boolean, got int"),
)


@contextmanager
def policy_for(make: Callable[[], Any], served: bool,
               metadata: dict[str, Any] | None = None) -> Iterator[Any]:
    """A reset policy answering ``make()``: a WebsocketPolicy reaching a reference server
    on 127.0.0.1, or an in-process object."""
    if not served:
        yield Answers(make, metadata)
        return
    with OpenpiReferenceServer(lambda obs: make(), metadata=metadata or {"server": "hostile"},
                               policy_in_thread=True) as server:
        policy = WebsocketPolicy(server.uri, layout=RequestLayout(), connect_timeout=10.0,
                                 call_timeout=CALL_TIMEOUT_S, wait_s=10.0)
        try:
            policy.reset()
            yield policy
        finally:
            policy.close()


def one_call(policy: Any, folder: Path) -> tuple[Any, Path]:
    """One policy call as a case makes it, its evidence written to ``folder``."""
    evidence = CaseEvidence(folder, level="replayable")
    try:
        result = run_episode(Still(), policy, decisions_budget(1, 1), StopRule(None),
                             init_controls=0, listener=evidence)
    finally:
        evidence.close()
    return result, folder / ACTIONS_NAME


@pytest.mark.parametrize("reply", REPLIES, ids=[r.id for r in REPLIES])
def test_a_hostile_reply_errors_its_case_and_nothing_of_it_is_written(reply: Reply, tmp_path: Path) -> None:
    with policy_for(reply.make, reply.served) as policy:
        result, actions = one_call(policy, tmp_path / "case")
    assert result.outcome == "errored" and result.error is not None, result
    assert (result.error["kind"], result.error["cause"]) == ("invalid_action", "invalid_action")
    assert reply.words in result.error["message"], result.error["message"]
    assert actions.read_bytes() == b""  # a reply that failed the contract has no line
    assert len(json_text(result.error)) < 12_000  # what the record keeps of it is bounded


@pytest.mark.parametrize("served", [True, False], ids=["websocket", "in-process"])
@pytest.mark.parametrize("actions", [HOLD * 1000, np.array(HOLD * 1000)], ids=["list", "array"])
def test_the_longest_chunk_of_floats_is_written_whole(actions: Any, served: bool, tmp_path: Path) -> None:
    """The control: a chunk at the bound, of floats, runs and is kept exactly."""
    with policy_for(lambda: {"actions": actions, "note": "fine"}, served) as policy:
        result, written = one_call(policy, tmp_path / "case")
    assert result.outcome == "failure", result.error
    [line] = written.read_text().splitlines()
    record = json.loads(line)
    assert record["horizon"] == 1000 and record["extras"] == ["note"]
    assert len(line) < 100_000  # the bound keeps a line of actions.jsonl under 100 kB


GR00T_TEST = HERE + "test_a_gr00t_action_key_obeys_the_array_rule"


def test_a_gr00t_action_key_obeys_the_array_rule() -> None:
    layout = load_profile("gr00t").settings.layout
    reply: dict[str, Any] = {key: np.zeros((1, 2, 1), np.float32) for key in layout.actions}
    reply[layout.actions[-1]] = [[[0.5], [True]]]
    with pytest.raises(InvalidAction, match=r"holds the bool True at \(0, 1, 0\)"):
        layout.decode(reply, "the GR00T server")
    reply[layout.actions[-1]] = [[[0.5], [1.0]]]  # the same list, floats only: read
    assert layout.decode(reply, "the GR00T server").shape == (2, 7)


# ------------------------------------------------------------------ metadata


def big_metadata(size: int) -> dict[str, Any]:
    return {"server": "hostile", "blob": "m" * size}


PREFLIGHT_TEST = HERE + "test_oversized_server_metadata_is_refused_at_the_preflight"


def test_oversized_server_metadata_is_refused_at_the_preflight(pytester: pytest.Pytester) -> None:
    with OpenpiReferenceServer(lambda obs: {"actions": np.array(HOLD)},
                               metadata=big_metadata(30_000_000)) as server:
        result = pytester.runpytest_subprocess(
            "--libero-profile=pi0", f"--libero-endpoint={server.uri}", "--libero-server-wait=10",
            f"--libero-results={pytester.path / 'results'}", timeout=300)
    err = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    assert len(err) == 1 and err[0].startswith(f"ERROR: the policy server at {server.uri} "
                                                "describes itself in 30,000,033 bytes"), err
    assert f"at most {MAX_METADATA_BYTES:,} are accepted" in err[0] and "no case was run" in err[0]
    assert not (pytester.path / "results").exists()  # before any run folder


CASE_METADATA_TEST = HERE + "test_metadata_past_the_bound_errors_the_case_that_brought_it"


def test_metadata_past_the_bound_errors_the_case_that_brought_it() -> None:
    """A server that grew its metadata after the preflight: the case whose connection
    brought it errors, before any simulator, and its record keeps none of it."""
    plan = make_plan(load_profile("pi0"), SelectionRequest("task_coverage", "libero_10", (0,)),
                     budget_mode="decisions", max_policy_calls=1, replan_interval=1,
                     adapter="libero", render="consumed", video_stride=1)
    with OpenpiReferenceServer(lambda obs: {"actions": np.array(HOLD)},
                               metadata=big_metadata(1_000_000)) as server:
        policy = WebsocketPolicy(server.uri, layout=RequestLayout(), connect_timeout=10.0,
                                 call_timeout=CALL_TIMEOUT_S, wait_s=10.0)
        record = run_case(plan, plan.entries[0], policy)  # reset fails: no simulator is built
        policy.close()
    assert record["outcome"] == "errored" and record["error"] is not None
    assert (record["error"]["kind"], record["error"]["cause"]) == ("policy_transport",
                                                                   "metadata_too_large")
    assert "describes itself in 1,000,0" in record["error"]["message"]
    assert record["policy_metadata"] == {} and len(record_to_json(record)) < 20_000


FACTORY_TEST = HERE + "test_an_in_process_policy_with_oversized_metadata_is_a_usage_error"


def test_an_in_process_policy_with_oversized_metadata_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(big_policy="""
        class Big:
            metadata = {"weights": "w" * 100_000}
            def reset(self): pass
            def infer(self, observation): return {"stop": True}
            def close(self): pass
    """)
    pytester.syspathinsert()
    profile = pytester.makefile(".toml", big='name = "big"\n[policy]\nfactory = "big_policy:Big"\n')
    with pytest.raises(SetupError, match=r"describes itself in 100,0\d\d bytes of metadata; "
                                         r"every case record keeps a copy, so at most 65,536"):
        load_profile(str(profile)).build_policy()


# ------------------------------------------------------------------ strict JSON


def strict(text: str) -> Any:
    """JSON as RFC 8259 has it: a bare NaN or Infinity is refused."""
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


NAN_TEST = HERE + "test_nan_and_infinity_in_metadata_are_written_as_strict_json"
NAN_POLICY = """
import math
import numpy as np

class Odd:
    metadata = {"scale": math.nan, "limits": [math.inf, -math.inf], "f32": np.float32("nan"),
                1: "an int key", "ok": 0.5}
    def reset(self): raise ConnectionError("this policy never starts an episode")
    def infer(self, observation): raise AssertionError("never reached")
    def close(self): pass
"""


def test_nan_and_infinity_in_metadata_are_written_as_strict_json(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "measure_for_cases", lambda *_: not_measured("not measured here"))
    pytester.makepyfile(odd_policy=NAN_POLICY)
    pytester.syspathinsert()
    profile = pytester.makefile(".toml", odd='name = "odd"\n[policy]\nfactory = "odd_policy:Odd"\n')
    result = pytester.runpytest_inprocess(
        f"--libero-profile={profile}", "--libero-isolation=none", "--libero-scope=task_coverage",
        "--libero-suite=libero_10", "--libero-task-ids=0", f"--libero-results={pytester.path / 'r'}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()  # the case errored
    [run] = [path.parent for path in (pytester.path / "r").glob("odd/*/run.json")]
    files = [run / "run.json", run / "summary.json", *run.glob("cases/*/episode.json")]
    [record] = [strict(line) for line in (run / "results.jsonl").read_text().splitlines()]
    for path in files:
        strict(path.read_text())
    assert len(files) == 3
    assert record["policy_metadata"] == {"scale": "NaN", "limits": ["Infinity", "-Infinity"],
                                         "f32": "NaN", "1": "an int key", "ok": 0.5}


def test_json_text_is_strict_and_changes_nothing_else() -> None:
    finite = {"b": [1, 2.5, "x", None, True], "a": {"c": 1e-300}}
    assert json_text(finite) == json.dumps(finite, sort_keys=True)  # the usual: the same bytes
    assert strict(json_text({"x": math.nan, "y": np.float32(-math.inf)})) == {"x": "NaN", "y": "-Infinity"}
    loop: list[Any] = []
    loop.append(loop)
    assert strict(json_text({"loop": loop}))  # a cycle is written as text, deep down, not raised


WRITERS_TEST = HERE + "test_every_json_the_package_writes_goes_through_the_strict_rule"
NOT_FILES = {
    "files.py": "the rule itself",
    "protocol/hashing.py": "canonical bytes to hash, never a file",
    "audit/agreement.py": "a value quoted in a message",
    "audit/verify.py": "values quoted in a message",
    "results/renderers.py": "a key renderers are compared by, never a file",
    "publish/card.py": "a scalar quoted in the model card's YAML, never a JSON file",
}


def test_every_json_the_package_writes_goes_through_the_strict_rule() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in ("dump", "dumps")
                    and isinstance(node.value, ast.Name) and node.value.id == "json"):
                found.append(str(path.relative_to(PACKAGE)))
    assert found and set(found) <= set(NOT_FILES), sorted(set(found) - set(NOT_FILES))


HOSTILE: list[Hostile] = [
    *(reply.row for reply in REPLIES if reply.klass == 3),
    Hostile(3, "30 MB of server metadata (it was copied into every record)",
            "before any case, exit 4, no run folder: \"the policy server at ws://... describes "
            "itself in 30,000,033 bytes of metadata; every case record keeps a copy, so at most "
            "65,536 are accepted ...\"", PREFLIGHT_TEST),
    Hostile(3, "metadata grown to 1 MB after the preflight, on a case's own connection",
            "that case errored before any simulator, `policy_transport` / `metadata_too_large`; "
            "its record's `policy_metadata` is `{}`", CASE_METADATA_TEST),
    Hostile(3, "an in-process policy with 100 kB of metadata",
            "a usage error when the policy is built, before any case", FACTORY_TEST),
    Hostile(3, "NaN, infinity, a float32 NaN and an int key in a policy's metadata (bare `NaN` "
            "made results.jsonl no JSON)", "every file of the run is strict JSON: a non-finite "
            "number is written as the string `\"NaN\"`, `\"Infinity\"` or `\"-Infinity\"`, a key "
            "as a string", NAN_TEST),
    Hostile(3, "a module of the package that writes JSON", "it goes through `files.json_text`, "
            "the one strict rule; a test fails on any other `json.dumps`", WRITERS_TEST),
    *(reply.row for reply in REPLIES if reply.klass == 8),
    Hostile(8, "a GR00T action key sent as a list holding a bool",
            "errored, `invalid_action`: \"... holds the bool True at (0, 1, 0) ...\", the same "
            "array rule", GR00T_TEST),
]
