"""Bad input never ends in a traceback: the sweep of wrong inputs, one table row each.

Every row is an argv for ``pytest`` (the plugin) or ``pytest-libero`` (the command), the
exit code it must give (4: pytest usage error; 2: the command's), and the words its
answer must hold: the option or file at fault and the fix. Each row also checks that
no traceback is printed, that the answer is short, and that nothing was written or
changed: a hash of every file in the sandbox (the inputs, an earlier real run and
damaged copies of it) is taken before and after, and the default results root stays
absent. Rows that name ``{run}`` or ``{damaged}`` need the earlier run, made once per
module with the real simulator (about 10 s); the others take well under a second each,
run in-process; the rows marked ``subprocess`` go through the real entry points.
docs/reliability.md holds the same table in words, and a test below keeps the two in step:
add a row to cover a new input, and name it there.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing.forkserver  # noqa: F401  (see below)
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cli_runs
import numpy as np
import pytest
from cli_runs import Said

from harness.runs import run_pytest, run_records

pytest_plugins = ["pytester"]
# pytester's in-process runs drop the modules a run imported: imported there first,
# ``multiprocessing.forkserver`` would come back fresh for every row that measures the
# renderer, each start leaving its forkserver (the simulator loaded, ~700 MB) running
# until this process ends. Imported here, the rows share one.

ONE_CASE = ("--libero-scope=task_coverage", "--libero-suite=libero_10", "--libero-task-ids=0",
            "--libero-budget-mode=decisions", "--libero-max-policy-calls=1",
            "--libero-replan-interval=1")
EARLIER = ("--libero-profile=replay", "--libero-policy-option=actions={inputs}/overshoot.npy",
           "--libero-out-of-bounds=clip", *ONE_CASE)
"""The earlier run: replay of a file whose first action closes the gripper at 1.02,
clipped (and counted) under the clip rule."""
ZERO = ("--libero-profile=zero",)
USAGE = 6
"""argparse's own answers: its usage text (up to five lines), then the error."""
WS = ("--libero-profile=pi0",)


@dataclass(frozen=True)
class Row:
    """One wrong input and the answer it must get."""

    id: str
    argv: tuple[str, ...]
    """``pytest`` or ``pytest-libero`` first; {inputs}, {run}, {damaged}, {results}."""
    exit: int
    words: tuple[str, ...]
    lines: int = 2
    """The most lines the answer (pytest's stderr, the command's stderr) may take."""
    ini: str = ""
    subprocess: bool = False
    unprivileged: bool = False
    """Run as a user whom file permissions bind (root without its capabilities): for the
    folders this user cannot read."""


def pt(id: str, *args: str, words: tuple[str, ...], ini: str = "", sub: bool = False) -> Row:
    return Row(id, ("pytest", *args), 4, words, ini=ini, subprocess=sub)


def cmd(id: str, *args: str, words: tuple[str, ...], lines: int = 2, sub: bool = False,
        unprivileged: bool = False) -> Row:
    return Row(id, ("pytest-libero", *args), 2, words, lines=lines,
               subprocess=sub or unprivileged, unprivileged=unprivileged)


FOLDERS = {
    # name: (how it is made from the earlier run, words its answer must hold)
    "missing": ("no folder at all", ("missing", "not a run folder (no run.json)")),
    "a-file": ("a regular file", ("a-file", "not a run folder (no run.json)")),
    "empty": ("an empty folder", ("empty", "not a run folder (no run.json)")),
    "profile-level": ("the folder that holds run folders", ("profile-level", "no run.json")),
    "no-run-json": ("results.jsonl without run.json", ("no-run-json", "no run.json")),
    "run-json-cut": ("run.json cut short", ("run-json-cut", "run.json is damaged, not JSON")),
    "run-json-list": ("run.json a JSON list", ("run-json-list", "run.json lacks protocol_identity")),
    "no-results": ("run.json without results.jsonl", ("no-results", "has no results.jsonl")),
    "corrupt-line": ("a damaged line before the last", ("corrupt-line/results.jsonl:1",
                                                        "damaged beyond a torn last line")),
    "installed-list": ("run.json's installed a list", ("installed-list", "run.json's installed "
                                                       "is a list", "copy it again")),
    "render-text": ("run.json's render a string", ("render-text", "run.json's render is a str")),
    "cases-text": ("plan.selection_cases a string", ("cases-text",
                                                    "selection_cases is not a list of case ids")),
    "case-number": ("a record whose case is a number", ("case-number/results.jsonl:1",
                                                        "'case' is a int")),
    "no-outcome": ("a record without its outcome", ("no-outcome/results.jsonl:1",
                                                    "no 'outcome'")),
}
"""Run folders a killed run, a half copy or a typo leaves; each fed to every consumer."""


def folder_rows() -> Iterator[Row]:
    for name, (_, words) in FOLDERS.items():
        where = "{damaged}/" + name
        yield pt(f"resume-{name}", *EARLIER, f"--libero-resume={where}", words=words)
        yield pt(f"baseline-{name}", *EARLIER, "--libero-results={results}",
                 f"--libero-baseline={where}", words=words)
        yield cmd(f"merge-{name}", "merge", where, "--out", "{results}/merged", words=words)
        yield cmd(f"verify-{name}", "verify", where, words=words)
        yield cmd(f"safety-{name}", "safety", where, words=words)


ROWS = (
    # --- the two named in the issue, through the real entry points
    pt("replay-outside-range", "--libero-profile=replay",
       "--libero-policy-option=actions={inputs}/overshoot.npy", sub=True,
       words=("overshoot.npy", "row 0, column 6 (gripper) is 1.02", "--libero-out-of-bounds=clip")),
    cmd("safety-nonexistent", "safety", "{inputs}/nonexistent", sub=True,
        words=("nonexistent", "not a run folder (no run.json)")),
    # --- --libero-profile and the profile's fields
    pt("profile-empty", "--libero-profile=", words=("--libero-profile= is empty",)),
    pt("profile-unknown", "--libero-profile=nope", words=("'nope' is not a shipped profile", "zero")),
    pt("profile-missing-file", "--libero-profile={inputs}/missing.toml",
       words=("no profile file at", "missing.toml")),
    pt("profile-a-folder", "--libero-profile={inputs}/empty_dir/", words=("no profile file at",)),
    pt("profile-not-toml", "--libero-profile={inputs}/broken.toml",
       words=("broken.toml", "not valid TOML")),
    pt("profile-not-utf8", "--libero-profile={inputs}/not_utf8.toml",
       words=("not_utf8.toml", "not valid TOML")),
    pt("profile-no-policy", "--libero-profile={inputs}/no_policy.toml",
       words=("no_policy.toml", "policy is missing", "[policy] table")),
    pt("profile-unknown-key", "--libero-profile={inputs}/unknown_key.toml",
       words=("unknown_key.toml", "colour is not a known key")),
    pt("profile-track", "--libero-profile={inputs}/bad_track.toml",
       words=("bad_track.toml", "track is 'depth'", "rgb+proprio")),
    pt("profile-interval-float", "--libero-profile={inputs}/interval_float.toml",
       words=("budget.replan_interval is 1.5", "an integer >= 1")),
    pt("profile-stop-negative", "--libero-profile={inputs}/stop_negative.toml",
       words=("stop.consecutive is -1",)),
    pt("profile-out-of-bounds", "--libero-profile={inputs}/oob_rule.toml",
       words=("action.out_of_bounds is 'wrap'", "error, clip")),
    pt("profile-factory-missing", "--libero-profile={inputs}/no_module.toml",
       words=("no_such_module:make", "cannot be imported", "module:callable")),
    pt("profile-factory-not-a-policy", "--libero-profile={inputs}/not_a_policy.toml",
       words=("os:getcwd returned a str, not a policy", "infer(observation)")),
    pt("profile-endpoint", "--libero-profile={inputs}/bad_endpoint.toml",
       words=("policy.endpoint is 'ws://127.0.0.1:port'", "ws://HOST:PORT")),
    pt("profile-wait", "--libero-profile={inputs}/wait_negative.toml",
       words=("policy.wait_s is -1", "positive number of seconds")),
    pt("profile-constant-overflow", "--libero-profile={inputs}/constant_overflow.toml",
       words=("request.constants.state.values is [300]",)),
    pt("profile-launch-cwd", "--libero-profile={inputs}/launch_cwd.toml",
       words=("launch.cwd is 5", "a non-empty string")),
    pt("profile-name-escapes", "--libero-profile={inputs}/name_escapes.toml",
       words=("name is '../../x'", "a name for one folder")),
    pt("profile-name-nul", "--libero-profile={inputs}/name_nul.toml",
       words=("name is 'a\\x00b'", "a NUL")),
    pt("profile-wait-nan", "--libero-profile={inputs}/wait_nan.toml",
       words=("policy.wait_s is nan", "at most 604800")),
    pt("profile-call-timeout-nan", "--libero-profile={inputs}/call_timeout_nan.toml",
       words=("policy.call_timeout is nan",)),
    pt("profile-constant-nan", "--libero-profile={inputs}/constant_nan.toml",
       words=("request.constants.state.values is [nan]", "finite numbers")),
    # --- selection
    pt("scope", *ZERO, "--libero-scope=huge", words=("--libero-scope='huge'", "smoke")),
    pt("suite", *ZERO, "--libero-scope=task_coverage", "--libero-suite=libero_11",
       "--libero-task-ids=0", words=("--libero-suite='libero_11'", "libero_object")),
    pt("suite-not-ready", *ZERO, "--libero-scope=task_coverage",
       "--libero-suite=libero_10_with_red_box", "--libero-task-ids=0",
       words=("--libero-suite='libero_10_with_red_box'", "not ready", "missing asset")),
    pt("suite-ood-unknown", *ZERO, "--libero-scope=ood", "--libero-suite=libero_goal_task,nope",
       words=("--libero-suite='nope'", "LIBERO-PRO suite")),
    pt("suite-ood-native", *ZERO, "--libero-scope=ood", "--libero-suite=libero_goal",
       words=("scope 'ood'", "'libero_goal'", "libero_goal_task")),
    pt("ood-task-ids-alone", *ZERO, "--libero-scope=ood", "--libero-task-ids=0",
       words=("--libero-task-ids", "--libero-suite")),
    pt("ood-kind-unknown", *ZERO, "--libero-scope=ood", "--libero-ood-kind=colour",
       words=("--libero-ood-kind='colour'", "object, position, semantic, environment")),
    pt("ood-kind-without-scope", *ZERO, "--libero-ood-kind=object",
       words=("--libero-ood-kind", "--libero-scope=ood")),
    pt("ood-task-id-missing", *ZERO, "--libero-scope=ood",
       "--libero-suite=libero_object_temp_y0.5", "--libero-task-ids=1",
       words=("libero_object_temp_y0.5 has task ids 0,2,3", "[1]")),
    pt("ood-full-mode", *ZERO, "--libero-scope=ood", "--libero-suite=libero_goal_task",
       "--libero-mode=full", words=("full mode is refused for", "libero_goal_task")),
    pt("perturb-kind", *ZERO, "--libero-perturb=colour:1",
       words=("--libero-perturb='colour:1'", "camera, light, robot, noise")),
    pt("perturb-level", *ZERO, "--libero-perturb=camera:9", words=("'camera:9'", "LEVEL 1-4")),
    pt("perturb-no-level", *ZERO, "--libero-perturb=camera", words=("'camera'", "KIND:LEVEL")),
    pt("perturb-an-ood-entry", *ZERO, "--libero-scope=ood", "--libero-suite=libero_goal_task",
       "--libero-perturb=camera:1", words=("--libero-perturb", "a perturbation already")),
    pt("task-ids-text", *ZERO, "--libero-task-ids=a", words=("--libero-task-ids", "0-4")),
    pt("task-ids-backwards", *ZERO, "--libero-scope=task_coverage", "--libero-suite=libero_10",
       "--libero-task-ids=5-2", words=("--libero-task-ids", "'5-2' runs backwards", "2-5")),
    pt("task-ids-out-of-range", *ZERO, "--libero-scope=task_coverage",
       "--libero-suite=libero_10", "--libero-task-ids=99", words=("task ids 0-9", "99")),
    pt("mode", *ZERO, "--libero-mode=slow", words=("--libero-mode='slow'", "fast, full")),
    pt("init-states-fast", *ZERO, "--libero-init-states=0-3",
       words=("--libero-init-states needs --libero-mode=full",)),
    pt("init-states-range", *ZERO, "--libero-mode=full", "--libero-init-states=50",
       words=("init states 0-49", "50")),
    pt("shard", *ZERO, "--libero-shard=3/2", words=("--libero-shard='3/2'", "1/4")),
    pt("shard-text", *ZERO, "--libero-shard=x", words=("--libero-shard='x'",)),
    pt("shard-huge", *ZERO, "--libero-shard=1/99999999999999",
       words=("--libero-shard='1/99999999999999'", "N <= 10000")),
    pt("task-ids-huge", *ZERO, "--libero-scope=task_coverage", "--libero-suite=libero_10",
       "--libero-task-ids=0-999999999999", words=("--libero-task-ids", "999999999999 is outside")),
    pt("init-states-huge", *ZERO, "--libero-mode=full", "--libero-init-states=0-99999999999",
       words=("--libero-init-states", "99999999999 is outside")),
    pt("suite-ood-twice", *ZERO, "--libero-scope=ood",
       "--libero-suite=libero_goal_task,libero_goal_task",
       words=("names libero_goal_task more than once", "name each suite once")),
    # --- budgets, track, evidence, rendering
    pt("budget-mode", *ZERO, "--libero-budget-mode=forever",
       words=("--libero-budget-mode='forever'", "horizon, decisions")),
    pt("max-policy-calls-float", *ZERO, "--libero-max-policy-calls=1.5",
       words=("--libero-max-policy-calls='1.5' is not an integer",)),
    pt("max-policy-calls-zero", *ZERO, "--libero-budget-mode=decisions",
       "--libero-max-policy-calls=0", words=("--libero-max-policy-calls", "at least 1")),
    pt("replan-interval", *ZERO, "--libero-replan-interval=x",
       words=("--libero-replan-interval='x' is not an integer",)),
    pt("replan-interval-ini", *ZERO, words=("--libero-replan-interval='x'",),
       ini="[pytest]\nlibero_replan_interval = x\n"),
    pt("track", *ZERO, "--libero-track=depth", words=("--libero-track='depth'", "rgb+proprio")),
    pt("evidence", *ZERO, "--libero-evidence=some", words=("--libero-evidence='some'", "replayable")),
    pt("render", *ZERO, "--libero-render=some", words=("--libero-render='some'", "consumed")),
    pt("video-stride", *ZERO, "--libero-video-stride=0", words=("--libero-video-stride", "at least 1")),
    pt("video-stride-text", *ZERO, "--libero-video-stride=x",
       words=("--libero-video-stride='x' is not an integer",)),
    # --- built-in policies' options
    pt("policy-option-form", *ZERO, "--libero-policy-option=chunk", words=("'chunk'", "KEY=VALUE")),
    pt("policy-option-unknown", *ZERO, "--libero-policy-option=bogus=1",
       words=("ZeroPolicy", "bogus")),
    pt("chunk-text", *ZERO, "--libero-policy-option=chunk=abc", words=("chunk", "'abc'", "at least 1")),
    pt("chunk-fraction", *ZERO, "--libero-policy-option=chunk=2.5",
       words=("chunk must be at least 1, a whole number; got 2.5",)),
    pt("seed-negative", "--libero-profile=random", "--libero-policy-option=seed=-1",
       words=("RandomPolicy", "seed must be at least 0")),
    pt("seed-fraction", "--libero-profile=random", "--libero-policy-option=seed=2.5",
       words=("seed must be at least 0, a whole number; got 2.5",)),
    pt("replay-no-file", "--libero-profile=replay",
       words=("needs an action file", "--libero-policy-option actions=PATH")),
    pt("replay-missing-file", "--libero-profile=replay",
       "--libero-policy-option=actions={inputs}/missing.npy", words=("missing.npy does not exist",)),
    pt("replay-a-folder", "--libero-profile=replay",
       "--libero-policy-option=actions={inputs}/empty_dir", words=("empty_dir is a folder",)),
    pt("replay-not-npy", "--libero-profile=replay", "--libero-policy-option=actions={inputs}/garbage.npy",
       words=("garbage.npy is not a readable .npy array", "numpy.save")),
    pt("replay-objects", "--libero-profile=replay", "--libero-policy-option=actions={inputs}/objects.npy",
       words=("objects.npy is not a readable .npy array",)),
    pt("replay-nan", "--libero-profile=replay", "--libero-policy-option=actions={inputs}/nan.npy",
       words=("nan.npy", "non-finite value nan at (2, 1)")),
    pt("replay-nan-clip", "--libero-profile=replay", "--libero-policy-option=actions={inputs}/nan.npy",
       "--libero-out-of-bounds=clip", words=("nan.npy", "non-finite value nan")),
    pt("replay-inf-clip", "--libero-profile=replay", "--libero-policy-option=actions={inputs}/inf.npy",
       "--libero-out-of-bounds=clip", words=("inf.npy", "non-finite value -inf")),
    pt("replay-width", "--libero-profile=replay", "--libero-policy-option=actions={inputs}/six_wide.npy",
       "--libero-out-of-bounds=clip", words=("six_wide.npy", "shape (4, 6)", "(H, 7)")),
    pt("replay-integers", "--libero-profile=replay", "--libero-policy-option=actions={inputs}/ints.npy",
       words=("ints.npy", "dtype int64")),
    pt("replay-empty", "--libero-profile=replay", "--libero-policy-option=actions={inputs}/empty.npy",
       words=("empty.npy", "empty chunk")),
    # --- the policy server's address and limits
    pt("endpoint-not-ws", *WS, "--libero-endpoint=foo", words=("--libero-endpoint", "'foo'", "ws://HOST:PORT")),
    pt("endpoint-port", *WS, "--libero-endpoint=ws://127.0.0.1:port",
       words=("--libero-endpoint", "no valid port")),
    pt("endpoint-in-process", *ZERO, "--libero-endpoint=ws://127.0.0.1:9",
       words=("--libero-endpoint", "in-process", "websocket profile")),
    pt("policy-option-served", *WS, "--libero-policy-option=chunk=5",
       words=("--libero-policy-option", "served")),
    pt("call-timeout", *ZERO, "--libero-call-timeout=-1",
       words=("--libero-call-timeout='-1'", "positive number of seconds")),
    pt("server-wait", *ZERO, "--libero-server-wait=soon",
       words=("--libero-server-wait='soon'", "zero or more seconds")),
    pt("server-wait-nan", *ZERO, "--libero-server-wait=nan",
       words=("--libero-server-wait='nan'", "zero or more seconds, at most 604800")),
    pt("call-timeout-nan", *ZERO, "--libero-call-timeout=nan",
       words=("--libero-call-timeout='nan'", "positive number of seconds")),
    pt("call-timeout-inf", *ZERO, "--libero-call-timeout=inf",
       words=("--libero-call-timeout='inf'", "at most 604800")),
    pt("out-of-bounds", *ZERO, "--libero-out-of-bounds=wrap",
       words=("--libero-out-of-bounds='wrap'", "error, clip")),
    # --- isolation and watchdog, adapter, GPUs
    pt("isolation", *ZERO, "--libero-isolation=thread",
       words=("--libero-isolation='thread'", "process, none")),
    pt("prebuild", *ZERO, "--libero-prebuild=yes", words=("--libero-prebuild='yes'", "on, off")),
    pt("step-timeout", *ZERO, "--libero-step-timeout=0", words=("--libero-step-timeout='0'",)),
    pt("step-timeout-nan", *ZERO, "--libero-step-timeout=nan",
       words=("--libero-step-timeout='nan'", "positive number of seconds")),
    pt("build-timeout", *ZERO, "--libero-build-timeout=x", words=("--libero-build-timeout='x'",)),
    pt("adapter-unknown", *ZERO, "--libero-adapter=nope",
       words=("--libero-adapter='nope'", "module:factory")),
    pt("adapter-no-module", *ZERO, "--libero-adapter=no_such_module:make",
       words=("--libero-adapter", "No module named 'no_such_module'")),
    pt("adapter-not-an-adapter", *ZERO, "--libero-adapter=os:getcwd",
       words=("--libero-adapter='os:getcwd'", "without open")),
    pt("gpus", *ZERO, "--libero-gpus=a", words=("--libero-gpus='a'", "0,1,2,3")),
    pt("gpus-twice", *ZERO, "--libero-gpus=0,0", words=("--libero-gpus='0,0'", "distinct")),
    # --- gates (read before the run folder is made)
    pt("min-success", *ZERO, *ONE_CASE, "--libero-results={results}", "--libero-min-success=x",
       words=("--libero-min-success='x'", "between 0 and 1")),
    pt("min-safe-success", *ZERO, *ONE_CASE, "--libero-results={results}",
       "--libero-min-safe-success=1.5", words=("--libero-min-safe-success='1.5'",)),
    pt("baseline-alpha", *ZERO, *ONE_CASE, "--libero-results={results}",
       "--libero-baseline-alpha=2", words=("--libero-baseline-alpha='2'",)),
    # --- where results go
    pt("results-a-file", *ZERO, *ONE_CASE, "--libero-results={inputs}/a_file",
       words=("cannot create the run folder", "a_file", "--libero-results")),
    pt("results-under-a-file", *ZERO, *ONE_CASE, "--libero-results={inputs}/a_file/deeper",
       words=("cannot create the run folder", "a_file/deeper", "Not a directory")),
    pt("run-id-escapes", *ZERO, *ONE_CASE, "--libero-results={results}", "--libero-run-id=../x",
       words=("--libero-run-id='../x'", "one folder")),
    pt("run-id-dot", *ZERO, *ONE_CASE, "--libero-results={results}", "--libero-run-id=.",
       words=("--libero-run-id='.'",)),
    pt("run-id-taken", *EARLIER, "--libero-results={earlier_root}", "--libero-run-id=earlier",
       words=("already exists", "--libero-run-id")),
    pt("resume-and-run-id", *EARLIER, "--libero-resume={run}", "--libero-run-id=x",
       words=("--libero-resume continues its own folder", "drop --libero-run-id")),
    pt("resume-other-budget", *EARLIER, "--libero-max-policy-calls=2", "--libero-resume={run}",
       words=("--libero-resume=", "cannot continue that run here", "budgets differs")),
    pt("resume-torn-other-budget", *EARLIER, "--libero-max-policy-calls=2",
       "--libero-resume={damaged}/torn", words=("cannot continue that run here",)),
    # --- damaged run folders, to every consumer
    *folder_rows(),
    cmd("verify-torn", "verify", "{damaged}/torn", words=("torn", "has no finished case")),
    cmd("safety-torn", "safety", "{damaged}/torn", words=("torn", "has no finished case")),
    cmd("safety-bad-signals", "safety", "{damaged}/bad-signals",
        words=("bad-signals/cases/libero_10-00/safety.npz", "not a readable signals file")),
    cmd("safety-unreadable-case", "safety", "{damaged}/unreadable-case", unprivileged=True,
        words=("cannot read the case folder", "unreadable-case/cases/libero_10-00",
               "Permission denied", "read access")),
    cmd("verify-unreadable-run-json", "verify", "{damaged}/unreadable-run-json", unprivileged=True,
        words=("unreadable-run-json: cannot read run.json", "Permission denied", "read access")),
    cmd("merge-unreadable-results", "merge", "{damaged}/unreadable-results", "--out",
        "{results}/m", unprivileged=True,
        words=("cannot read", "unreadable-results/results.jsonl", "read access")),
    cmd("safety-unreadable-results", "safety", "{damaged}/unreadable-results", unprivileged=True,
        words=("cannot read", "unreadable-results/results.jsonl", "read access")),
    # --- the command's flags
    cmd("no-command", words=("required: command",), lines=USAGE),
    cmd("unknown-command", "bogus", words=("invalid choice: 'bogus'",), lines=USAGE),
    cmd("merge-nothing", "merge", words=("RUN_DIR",), lines=USAGE),
    cmd("merge-out-a-file", "merge", "{run}", "--out", "{inputs}/a_file/merged",
        words=("cannot create the run folder", "a_file/merged", "--out")),
    cmd("merge-out-exists", "merge", "{run}", "--out", "{run}", words=("already exists",)),
    cmd("merge-twice", "merge", "{run}", "{run}", "--out", "{results}/m",
        words=("appears in both",)),
    cmd("merge-min-success", "merge", "{run}", "--out", "{results}/m", "--min-success", "2",
        words=("--min-success 2", "between 0 and 1")),
    cmd("merge-min-success-text", "merge", "{run}", "--min-success", "x",
        words=("--min-success", "'x' is not a finite number in digits 0-9"), lines=USAGE),
    cmd("merge-alpha", "merge", "{run}", "--out", "{results}/m", "--baseline-alpha", "5",
        words=("--baseline-alpha 5",)),
    cmd("merge-baseline-cut", "merge", "{run}", "--out", "{results}/m", "--baseline",
        "{damaged}/run-json-cut", words=("--baseline=", "run-json-cut", "not JSON")),
    cmd("merge-baseline-missing", "merge", "{run}", "--out", "{results}/m", "--baseline",
        "{damaged}/missing", words=("--baseline=", "missing", "no run.json")),
    cmd("verify-unknown-case", "verify", "{run}", "--case", "nope",
        words=("no record of nope", "libero_10-00")),
    cmd("verify-jobs", "verify", "{run}", "-n", "0", words=("-n must be at least 1",)),
    cmd("verify-jobs-text", "verify", "{run}", "-n", "x", words=("'x' is not a whole number in digits 0-9",),
        lines=USAGE),
    cmd("safety-threshold-form", "safety", "{run}", "--threshold", "tilt_deg",
        words=("--threshold 'tilt_deg'", "NAME=VALUE")),
    cmd("safety-threshold-text", "safety", "{run}", "--threshold", "tilt_deg=abc",
        words=("--threshold 'tilt_deg=abc'", "tilt_deg=30")),
    cmd("safety-threshold-negative", "safety", "{run}", "--threshold", "tilt_deg=-5",
        words=("--threshold 'tilt_deg=-5'", "positive number")),
    cmd("safety-threshold-unknown", "safety", "{run}", "--threshold", "nope=1",
        words=("unknown threshold(s) nope", "tilt_deg")),
    cmd("report-missing", "report", "{inputs}/missing", words=("missing is not a folder", "--alluredir")),
    cmd("report-a-file", "report", "{inputs}/a_file", words=("a_file is not a folder",)),
    cmd("report-empty", "report", "{inputs}/empty_dir",
        words=("not an Allure results folder", "--alluredir")),
    cmd("report-a-run-folder", "report", "{run}", words=("not an Allure results folder",)),
    cmd("report-config-under-a-file", "report", "{inputs}/allure", "--config",
        "{inputs}/a_file/allurerc.mjs", words=("--config", "a_file/allurerc.mjs", "cannot write it")),
    cmd("report-config-a-folder", "report", "{inputs}/allure", "--config", "{inputs}/empty_dir",
        words=("empty_dir is a folder", "--config")),
    cmd("report-config-foreign", "report", "{inputs}/allure", "--config", "{inputs}/a_file",
        words=("a_file exists and was not written by pytest-libero", "--config")),
)


def needs_run(row: Row) -> bool:
    return any(key in a for a in row.argv for key in ("{run}", "{damaged}", "{earlier_root}"))


def params() -> list[object]:
    return [pytest.param(row, id=row.id, marks=[pytest.mark.simulator] if needs_run(row) else [])
            for row in ROWS]


PROFILES = {
    "broken.toml": b"not [ toml",
    "not_utf8.toml": b"\xff\xfe name",
    "no_policy.toml": b'name = "t"\n',
    "unknown_key.toml": b'name = "t"\ncolour = "red"\n[policy]\nfactory = "a:b"\n',
    "bad_track.toml": b'name = "t"\ntrack = "depth"\n[policy]\nfactory = "a:b"\n',
    "interval_float.toml": b'name = "t"\n[policy]\nfactory = "a:b"\n[budget]\nreplan_interval = 1.5\n',
    "stop_negative.toml": b'name = "t"\n[policy]\nfactory = "a:b"\n[stop]\nconsecutive = -1\n',
    "oob_rule.toml": b'name = "t"\n[policy]\nfactory = "a:b"\n[action]\nout_of_bounds = "wrap"\n',
    "no_module.toml": b'name = "t"\n[policy]\nfactory = "no_such_module:make"\n',
    "not_a_policy.toml": b'name = "t"\n[policy]\nfactory = "os:getcwd"\n',
    "bad_endpoint.toml": b'name = "w"\n[policy]\ntransport = "websocket"\n'
                         b'endpoint = "ws://127.0.0.1:port"\n',
    "wait_negative.toml": b'name = "w"\n[policy]\ntransport = "websocket"\n'
                          b'endpoint = "ws://127.0.0.1:9"\nwait_s = -1\n',
    "constant_overflow.toml": b'name = "w"\n[policy]\ntransport = "websocket"\n'
                              b'endpoint = "ws://127.0.0.1:9"\n[request.constants]\n'
                              b'state = { dtype = "uint8", values = [300] }\n',
    "launch_cwd.toml": b'name = "w"\n[policy]\ntransport = "websocket"\n'
                       b'endpoint = "ws://127.0.0.1:9"\n[launch]\ncommand = ["x"]\ncwd = 5\n',
    "name_escapes.toml": b'name = "../../x"\n[policy]\nfactory = "a:b"\n',
    "name_nul.toml": b'name = "a\\u0000b"\n[policy]\nfactory = "a:b"\n',
    "wait_nan.toml": b'name = "w"\n[policy]\ntransport = "websocket"\n'
                     b'endpoint = "ws://127.0.0.1:9"\nwait_s = nan\n',
    "call_timeout_nan.toml": b'name = "w"\n[policy]\ntransport = "websocket"\n'
                             b'endpoint = "ws://127.0.0.1:9"\ncall_timeout = nan\n',
    "constant_nan.toml": b'name = "w"\n[policy]\ntransport = "websocket"\n'
                         b'endpoint = "ws://127.0.0.1:9"\n[request.constants]\n'
                         b'state = { dtype = "float32", values = [nan] }\n',
}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every input file a row names, under {inputs}."""
    root = tmp_path_factory.mktemp("bad-input")
    inputs = root / "inputs"
    inputs.mkdir()
    overshoot = np.zeros((4, 7))
    overshoot[0, 6] = 1.02  # the gripper, on the very first action the run executes
    np.save(inputs / "overshoot.npy", overshoot)
    nan, inf = np.zeros((4, 7)), np.zeros((4, 7))
    nan[2, 1], inf[1, 0] = np.nan, -np.inf
    np.save(inputs / "nan.npy", nan)
    np.save(inputs / "inf.npy", inf)
    np.save(inputs / "six_wide.npy", np.zeros((4, 6)))
    np.save(inputs / "ints.npy", np.zeros((4, 7), dtype=np.int64))
    np.save(inputs / "empty.npy", np.zeros((0, 7)))
    np.save(inputs / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (inputs / "garbage.npy").write_bytes(b"this is no array\n")
    (inputs / "a_file").write_text("a regular file\n")
    (inputs / "empty_dir").mkdir()
    (inputs / "allure").mkdir()
    (inputs / "allure" / "0-result.json").write_text("{}\n")
    for name, data in PROFILES.items():
        (inputs / name).write_bytes(data)
    return root


def places(root: Path) -> dict[str, str]:
    return {"inputs": str(root / "inputs"), "earlier_root": str(root / "results"),
            "run": str(root / "results" / "replay" / "earlier"),
            "damaged": str(root / "damaged"), "results": str(root / "results-of-refused-runs")}


@pytest.fixture(scope="module")
def earlier_run(sandbox: Path) -> Path:
    """One real run (replay, clip rule, one case, one policy call), then damaged copies."""
    where = places(sandbox)
    args = [a.format(**where) for a in EARLIER]
    result = run_pytest([*args, f"--libero-results={where['earlier_root']}",
                         "--libero-run-id=earlier"], sandbox, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr  # a native failure
    run = Path(where["run"])
    damaged = Path(where["damaged"])
    damaged.mkdir()

    def copy(name: str) -> Path:
        return Path(shutil.copytree(run, damaged / name))

    (damaged / "a-file").write_text("not a folder\n")
    (damaged / "empty").mkdir()
    shutil.copytree(run.parent, damaged / "profile-level")
    (copy("no-run-json") / "run.json").unlink()
    cut = copy("run-json-cut") / "run.json"
    cut.write_bytes(cut.read_bytes()[:120])
    (copy("run-json-list") / "run.json").write_text("[1, 2]\n")
    (copy("no-results") / "results.jsonl").unlink()
    lines = copy("corrupt-line") / "results.jsonl"
    lines.write_text("{not json\n" + lines.read_text())
    torn = copy("torn") / "results.jsonl"
    torn.write_bytes(torn.read_bytes()[:80])  # killed while writing its only line
    (copy("bad-signals") / "cases" / "libero_10-00" / "safety.npz").write_bytes(b"PK\x03\x04cut")
    for name, key, value in (("installed-list", "installed", ["mujoco"]), ("render-text", "render", "egl")):
        edit_json(copy(name) / "run.json", lambda run, k=key, v=value: {**run, k: v})
    edit_json(copy("cases-text") / "run.json",
              lambda run: {**run, "plan": {**run["plan"], "selection_cases": "libero_10-00"}})
    edit_json(copy("case-number") / "results.jsonl", lambda record: {**record, "case": 7})
    edit_json(copy("no-outcome") / "results.jsonl",
              lambda record: {k: v for k, v in record.items() if k != "outcome"})
    # Kept out only a user whom permissions bind: those rows run without root's capabilities.
    (copy("unreadable-case") / "cases" / "libero_10-00").chmod(0)
    (copy("unreadable-run-json") / "run.json").chmod(0)
    (copy("unreadable-results") / "results.jsonl").chmod(0)
    return run


def edit_json(path: Path, change: Any) -> None:
    """Rewrite a JSON file (or each line of a JSON-lines file) through ``change``."""
    if path.suffix == ".jsonl":
        lines = [json.dumps(change(json.loads(line))) for line in path.read_text().splitlines()]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text(json.dumps(change(json.loads(path.read_text()))))


def tree(root: Path) -> dict[str, str]:
    """Every path under root, with each file's sha256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "folder" for p in sorted(root.rglob("*"))}


def run_cli(args: list[str], in_process: bool, unprivileged: bool = False) -> Said:
    if not in_process:
        return cli_runs.own_process(args, unprivileged=unprivileged)
    return cli_runs.in_process(args)


@pytest.mark.parametrize("row", params())
def test_bad_input_gets_one_clear_answer(
    row: Row, sandbox: Path, request: pytest.FixtureRequest, pytester: pytest.Pytester
) -> None:
    if needs_run(row):
        request.getfixturevalue("earlier_run")
    args = [a.format(**places(sandbox)) for a in row.argv[1:]]
    before = tree(sandbox)
    if row.argv[0] == "pytest":
        if row.ini:
            pytester.makeini(row.ini)
        result = (pytester.runpytest_subprocess(*args) if row.subprocess
                  else pytester.runpytest_inprocess(*args))
        code, out, err = int(result.ret), result.stdout.str(), result.stderr.str()
    else:
        code, out, err = run_cli(args, in_process=not row.subprocess,
                                 unprivileged=row.unprivileged)
    text = out + err
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    assert code == row.exit, text
    for word in row.words:
        assert word in text, f"{word!r} not in the answer:\n{text}"
    answer = [line for line in err.splitlines() if line.strip()]
    assert 1 <= len(answer) <= row.lines, text
    assert tree(sandbox) == before, "a refused input wrote or changed something"
    assert not (pytester.path / "libero-results").exists()


@pytest.mark.simulator
def test_replay_file_outside_the_range_is_clipped_and_counted_under_clip(earlier_run: Path) -> None:
    """The strict rule refuses the file (row replay-outside-range); clip runs it."""
    [record] = run_records(earlier_run)
    assert record["clipping"] == {"mode": "clip", "chunks": 1, "values": 1,
                                  "max_excess": pytest.approx(0.02)}
    summary = json.loads((earlier_run / "summary.json").read_text())
    assert summary["clipping"]["values"] == 1 and summary["clipping"]["cases"] == 1


RELIABILITY_DOC = Path(__file__).resolve().parents[1] / "docs" / "reliability.md"


def documented_rows(doc: str) -> tuple[int | None, list[str]]:
    """What docs/reliability.md's "Bad input" section says of this table: the row count
    it states, and every name in the ``rows`` column of its tables."""
    section = doc.split("\n## Bad input\n", 1)[-1].split("\n## ", 1)[0]
    stated = re.search(r"\((\d+) rows", section)
    names: list[str] = []
    in_rows_table = False
    for line in section.splitlines():
        if not line.startswith("|"):
            in_rows_table = False
            continue
        last = line.rstrip().rstrip("|").rsplit("|", 1)[-1].strip()
        if last == "rows":
            in_rows_table = True
        elif in_rows_table and set(last) - set("- "):
            names += re.findall(r"`([^`]+)`", last)
    return (int(stated.group(1)) if stated else None), names


def name_matches(name: str, row_id: str) -> bool:
    """A documented name covers a row: ``*`` is any text, ``<kind>`` a damaged folder."""
    kinds = name.replace("<kind>", "\0").split("\0")
    pattern = "|".join(FOLDERS) if len(kinds) > 1 else ""
    regex = f"({pattern})".join(re.escape(part).replace(r"\*", ".*") for part in kinds)
    return re.fullmatch(regex, row_id) is not None


def disagreements(doc: str, row_ids: list[str]) -> list[str]:
    stated, names = documented_rows(doc)
    found = [f"the doc says {stated} rows; the table has {len(row_ids)}"] if stated != len(row_ids) else []
    found += [f"row {r} is not in the doc" for r in row_ids
              if not any(name_matches(n, r) for n in names)]
    found += [f"the doc names {n}, which is no row" for n in names
              if not any(name_matches(n, r) for r in row_ids)]
    return found


def test_the_reliability_doc_names_every_row() -> None:
    """docs/reliability.md holds this table in words: every row named there, no other."""
    assert disagreements(RELIABILITY_DOC.read_text(encoding="utf-8"), [r.id for r in ROWS]) == []


def test_the_doc_check_finds_each_kind_of_disagreement() -> None:
    doc = ("## Bad input\n\nA sweep (3 rows, ...).\n\n| input | answer | rows |\n| --- | --- | --- |\n"
           "| x | y | `scope`, `task-ids-*`, `safety-<kind>` |\n\n## The decoder\n| a | `gone` |\n")
    assert disagreements(doc, ["scope", "task-ids-text", "safety-missing"]) == []
    assert disagreements(doc, ["scope", "task-ids-text", "safety-missing", "mode"]) == [
        "the doc says 3 rows; the table has 4", "row mode is not in the doc"]
    assert disagreements(doc, ["scope", "safety-missing", "safety-threshold-form"]) == [
        "row safety-threshold-form is not in the doc",
        "the doc names task-ids-*, which is no row"]
