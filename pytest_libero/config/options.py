"""Operator options: the ``libero`` option group, ini keys, and their validated values.

Every CLI option has an ini twin ``libero_<name>``; a value on the command line wins.
Bad values raise SetupError naming the option and what is allowed, which the plugin
turns into a pytest usage error. Every reader quotes a bad value through
``protocol.text.echo`` (at most 40 of its characters, once), and no value longer than
:data:`MAX_VALUE_CHARS` reaches a reader at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_libero.catalog.selection import (
    PROFILE_SCOPE,
    SelectionRequest,
    parse_init_states,
    parse_ood_kinds,
    parse_shard,
    parse_suites,
    parse_task_ids,
)
from pytest_libero.config.decide import (
    DECIDE_MODES,
    DECIDE_SCORES,
    DEFAULT_ALPHA,
    DEFAULT_MARGIN,
    SUCCESS_SCORE,
    DecideSettings,
)
from pytest_libero.config.numbers import seconds
from pytest_libero.config.plan import Gates, RunPlan, Watchdog, make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.files import folder_name_problem
from pytest_libero.perturb import registry
from pytest_libero.perturb.levels import parse_perturbations
from pytest_libero.policy.builtin.factory import parse_policy_options
from pytest_libero.protocol.clock import REALTIME, SYNCHRONOUS
from pytest_libero.protocol.digits import decimal, whole
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import echo


@dataclass(frozen=True)
class _Option:
    name: str
    help: str
    default: str | None = None
    switch: bool = False
    """A flag (``--libero-realtime``): on when given alone, or ``on``/``off``."""

    @property
    def flag(self) -> str:
        return f"--libero-{self.name}"

    @property
    def dest(self) -> str:
        return "libero_" + self.name.replace("-", "_")


OPTIONS = (
    _Option("profile", "model profile: a shipped name (zero, random, replay, ...) or a path "
            "to a .toml file. Without it no episode runs."),
    _Option("scope", "selection scope: smoke (libero_10 tasks 0-1), development "
            "(libero_10, ids 0-4), task_coverage (--libero-suite + --libero-task-ids), all "
            "(130 entries), ood (every ready LIBERO-PRO entry plus its native twin), profile "
            "(the tasks the profile names in [selection], e.g. demo's; the default for such "
            "a profile)", "smoke"),
    _Option("suite", "suite for scope task_coverage/development: libero_spatial, "
            "libero_object, libero_goal, libero_90, libero_10, or a ready LIBERO-PRO suite "
            "(e.g. libero_goal_task; with scope ood: these LIBERO-PRO suites, comma-separated, "
            "and their twins)"),
    _Option("task-ids", "task ids in native order, e.g. 0,1,4 or 0-9"),
    _Option("mode", "fast (each selected entry once, from init state 0) or full (each "
            "entry from every released init state, on the schedule published LIBERO "
            "results use; validated suites only, see docs/full-mode.md)", "fast"),
    _Option("ood-kind", "scope ood: only these perturbation kinds, e.g. object,position "
            "(object, position, semantic, environment)"),
    _Option("perturb", "add generated perturbations beside each selected case: "
            f"KIND:LEVEL[,KIND:LEVEL...] with KIND one of {', '.join(registry.names())} and LEVEL "
            "1-4, or all (docs/perturbations.md)"),
    _Option("kind", "a perturbation kind of your own for --libero-perturb: module:Class "
            "(comma-separated for several), importable where cases run "
            "(docs/architecture.md)"),
    _Option("realtime", "the realtime track: each reply is usable ceil(its measured latency / "
            "50 ms) controls after its call, on a simulated clock; labelled apart, never "
            "compared with synchronous results (docs/latency.md)", switch=True),
    _Option("init-states", "full mode: run only these init states, e.g. 0,17,49 or 0-9 "
            "(the run is labelled partial, never a full result)"),
    _Option("evidence", "what each case folder keeps: full (every delivered observation, "
            "lossless), replayable (observation hashes, exact actions, the video) or dataset "
            "(full, and both cameras at every control, rendering every control: one dataset "
            "frame per control); default full in fast mode, replayable in full mode"),
    _Option("budget-mode", "horizon (the catalog's per-suite reference horizon) or decisions "
            "(max policy calls x replan interval); default from the profile"),
    _Option("max-policy-calls", "policy-call cap D for budget mode decisions; default from "
            "the profile"),
    _Option("replan-interval", "controls K executed from each chunk before asking again; "
            "default from the profile"),
    _Option("track", "observation track: rgb, or rgb+proprio (reported separately); default "
            "from the profile"),
    _Option("policy-option", "KEY=VALUE passed to the profile's policy factory, repeatable "
            "(e.g. actions=path.npy for replay); ini: one per line"),
    _Option("endpoint", "policy server address, overriding the profile's: ws://HOST:PORT for "
            "openpi-style websocket servers, tcp://HOST:PORT for GR00T's ZeroMQ server"),
    _Option("call-timeout", "seconds one policy call may take before the case errors; "
            "overrides the profile's"),
    _Option("server-wait", "seconds to wait for a policy server that is not answering yet "
            "(before the run and before each case); overrides the profile's policy.wait_s"),
    _Option("out-of-bounds", "an action outside [-1, 1]: error (strict) or clip (clipped "
            "before execution, every clip recorded); overrides the profile's "
            "[action] out_of_bounds"),
    _Option("min-success", "gate: exit 1 unless every case completed and the overall "
            "success rate is at least RATE (0-1)"),
    _Option("min-safe-success", "gate: exit 1 unless every case completed, the adapter "
            "recorded a safety verdict, and the safe-success rate (safe successes over "
            "completed monitored episodes; docs/safety.md) is at least RATE (0-1)"),
    _Option("baseline", "gate: exit 1 when this run is significantly worse than the run "
            "folder RUN_DIR on the paired cases (exact one-sided McNemar)"),
    _Option("baseline-alpha", "significance level of the baseline gate", "0.05"),
    _Option("decide", "stop a gated run once its verdict is settled: exact (native order; "
            "stops when no outcome of the cases left can change any gate's verdict) or "
            "anytime (seeded random order; also a betting test that is wrong with "
            "probability at most --libero-alpha); docs/decide.md"),
    _Option("alpha", "--libero-decide=anytime: the level of the betting test (0-1, "
            "exclusive) [default: 0.05]"),
    _Option("order-seed", "--libero-decide=anytime: the integer seed of the random order "
            "(default: drawn at the run's start, and recorded)"),
    _Option("baseline-margin", "--libero-decide=anytime with --libero-baseline: decide "
            "'not worse by more than MARGIN' (rate points, 0-1) [default: 0.05]"),
    _Option("decide-score", "--libero-decide=anytime with --libero-baseline: what the betting "
            "test compares, case by case: success (the outcome) or progress (the partial-credit "
            "score, docs/records.md); the exact rule stays on success [default: success]"),
    _Option("isolation", "process (each case's simulator in a watched child process: a "
            "crash or hang costs that case only) or none (in the pytest process)", "process"),
    _Option("prebuild", "on (while a case runs, the worker's next case's own process "
            "already builds, resets and settles its environment; same bytes) or off "
            "(isolation=process)", "on"),
    _Option("step-timeout", "watchdog: seconds a control step may take before the case's "
            "simulator is killed (isolation=process)", "120"),
    _Option("build-timeout", "watchdog: seconds building, resetting and settling an "
            "environment may take (isolation=process)", "600"),
    _Option("render", "consumed (render a camera only for the controls whose image a "
            "policy or the video uses; same bytes) or all (every camera, every control)",
            "consumed"),
    _Option("video-stride", "one video frame every N controls", "1"),
    _Option("adapter", "benchmark adapter: a registered name or module:factory", "libero"),
    _Option("shard", "run part I of N (1-based, e.g. 2/4) of the selection, parts balanced "
            "by budget; give every shard the same --libero-run-id"),
    _Option("resume", "continue the interrupted run in RUN_DIR: only its unattempted cases "
            "run, appended to the same folder"),
    _Option("gpus", "GPU indices, one per xdist worker (CUDA_VISIBLE_DEVICES and "
            "MUJOCO_EGL_DEVICE_ID); without -n, one worker per GPU"),
    _Option("wandb", "log the finished run to this W&B project (needs pytest-libero[wandb]; "
            "docs/export.md)"),
    _Option("mlflow", "log the finished run to this MLflow tracking URI (needs "
            "pytest-libero[mlflow]; docs/export.md)"),
    _Option("results", "root folder for result folders (<root>/<profile>/<run id>)",
            "libero-results"),
    _Option("run-id", "name this run's folder; refused if it exists (default: UTC time + "
            "random suffix)"),
)


def register(parser: pytest.Parser) -> None:
    """One option group; every option also an ini key (CLI wins, as in pytest-asyncio)."""
    group = parser.getgroup("libero", "LIBERO evaluation (pytest-libero)")
    for option in OPTIONS:
        repeatable = option.name == "policy-option"
        help_text = option.help + (f" [default: {option.default}]" if option.default else "")
        if option.switch:
            # ``--libero-realtime`` alone is on; ``=on``/``=off`` say it outright.
            group.addoption(option.flag, dest=option.dest, nargs="?", const="on",
                            default=None, help=help_text)
        else:
            group.addoption(option.flag, dest=option.dest,
                            action="append" if repeatable else "store", default=None,
                            help=help_text)
        ini_type: Literal["linelist", "string"] = "linelist" if repeatable else "string"
        parser.addini(
            option.dest,
            help=option.help,
            type=ini_type,
            # "" not the default: option_value supplies it, and option_given can tell an
            # ini value the operator wrote from one left unset.
            default=[] if repeatable else "",
        )


DEFAULTS = {option.name: option.default for option in OPTIONS}
"""The only home of each option's default."""
MAX_VALUE_CHARS = 4096
"""The longest value an option takes (a path's limit, PATH_MAX): a longer one is refused
before anything reads it, so no reader ever holds, or quotes, more."""


def option_value(config: pytest.Config, name: str) -> Any:
    """The CLI value if given, else the ini value (pytest-asyncio's pattern), else the
    option's default."""
    dest = "libero_" + name.replace("-", "_")
    value = config.getoption(dest)
    if value == "":  # --libero-x= with an unset shell variable, say: never a silent default
        raise SetupError(f"--libero-{name}= is empty; give it a value or leave it out")
    if value is None:
        value = config.getini(dest)
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str) and len(item) > MAX_VALUE_CHARS:
            raise SetupError(f"--libero-{name}={echo(item)} is longer than any value it takes "
                             f"(at most {MAX_VALUE_CHARS} characters)")
    return value if value not in ("", []) else DEFAULTS[name]


def option_given(config: pytest.Config, name: str) -> bool:
    """Whether the operator set the option (command line or ini), not left it to its default."""
    dest = "libero_" + name.replace("-", "_")
    return config.getoption(dest) is not None or config.getini(dest) not in ("", [])


MAX_NAME_BYTES = 255
"""The longest file name a file system takes (NAME_MAX)."""


def path_option(config: pytest.Config, name: str) -> str | None:
    """A path option's value, refused with one line when a name in it is longer than any
    file system takes (opening it would fail with ENAMETOOLONG wherever it is read)."""
    value = option_value(config, name)
    if value is not None and any(len(part.encode()) > MAX_NAME_BYTES
                                 for part in Path(str(value)).parts):
        raise SetupError(f"--libero-{name}={echo(value)}: a name in it is longer than "
                         f"{MAX_NAME_BYTES} bytes, more than a file system takes; give an "
                         "existing path")
    return None if value is None else str(value)


WANDB_PROJECT_CHARS = 128
"""W&B's own limit on a project name (``wandb.sdk.wandb_settings``)."""
WANDB_FORBIDDEN = "/\\#?%:"
"""Characters W&B refuses in a project name."""


def wandb_project_problem(text: str) -> str | None:
    """Why W&B would refuse ``text`` as a project name (its own rule), or None."""
    bad = sorted({c for c in text if c in WANDB_FORBIDDEN})
    if bad:
        return f"holds {', '.join(map(repr, bad))}, which W&B refuses in a project name"
    if len(text) > WANDB_PROJECT_CHARS:
        return f"is longer than W&B takes ({WANDB_PROJECT_CHARS} characters)"
    return None


def mlflow_uri_problem(text: str) -> str | None:
    """Why ``text`` cannot be a tracking URI: a part longer than any file system, host
    name or URL path segment takes in practice; or None."""
    if any(len(part.encode()) > MAX_NAME_BYTES for part in text.split("/")):
        return (f"a part of it is longer than {MAX_NAME_BYTES} bytes; give a tracking URI "
                "(http://host:5000, file:///path, sqlite:///mlflow.db)")
    return None


TRACKER_WAIT_VARIABLE = "PYTEST_LIBERO_TRACKER_WAIT"
TRACKER_WAIT_S = 120.0
"""How long a live run's end waits for its trackers by default: W&B waits 90 s for an
unreachable server, MLflow here at most 2 x 30 s (docs/export.md)."""


TRACKER_WAIT_MAX_S = 86400.0
"""The longest wait a run's end takes (a day): more is a typo, and overflows the poll."""


def tracker_wait(environ: Mapping[str, str]) -> float:
    """``PYTEST_LIBERO_TRACKER_WAIT``: seconds in ASCII digits, above 0 and at most a day
    (a usage error otherwise)."""
    text = environ.get(TRACKER_WAIT_VARIABLE)
    if text is None or not text.strip():
        return TRACKER_WAIT_S
    seconds = decimal(text.strip())
    if seconds is None or not 0 < seconds <= TRACKER_WAIT_MAX_S:
        raise SetupError(f"{TRACKER_WAIT_VARIABLE}={echo(text)} is not a number of seconds above 0 "
                         f"(at most {TRACKER_WAIT_MAX_S:g}, a day); unset it for the default "
                         f"({TRACKER_WAIT_S:g} s)")
    return seconds


def wandb_project(config: pytest.Config) -> str | None:
    """``--libero-wandb``, checked by W&B's own rule now: found only when the finished run
    is logged, a bad name would cost the whole run its tracker."""
    value = option_value(config, "wandb")
    if value is None:
        return None
    why = wandb_project_problem(str(value))
    if why is not None:
        raise SetupError(f"--libero-wandb={echo(value)} {why}; give a W&B project name")
    return str(value)


def mlflow_uri(config: pytest.Config) -> str | None:
    """``--libero-mlflow``, refused now when it cannot be a tracking URI (the run is
    logged only at its end)."""
    value = option_value(config, "mlflow")
    if value is None:
        return None
    why = mlflow_uri_problem(str(value))
    if why is not None:
        raise SetupError(f"--libero-mlflow={echo(value)}: {why}")
    return str(value)


def _int_option(config: pytest.Config, name: str) -> int | None:
    value = option_value(config, name)
    if value is None:
        return None
    number = whole(str(value).strip())
    if number is None:
        raise SetupError(f"--libero-{name}={echo(value)} is not an integer (digits 0-9)")
    return number


def _float_option(config: pytest.Config, name: str, *, allow_zero: bool = False) -> float | None:
    value = option_value(config, name)
    if value is None:
        return None
    try:
        return seconds(value, allow_zero=allow_zero)
    except ValueError as exc:
        raise SetupError(f"--libero-{name}={echo(value)} must be {exc}") from None


def build_plan(config: pytest.Config) -> RunPlan | None:
    profile_name = option_value(config, "profile")
    if profile_name is None:
        return None
    if str(profile_name).endswith(".toml") or "/" in str(profile_name):
        path_option(config, "profile")  # a path: a name in it the file system can hold
    task_ids = option_value(config, "task-ids")
    states = option_value(config, "init-states")
    kinds = option_value(config, "ood-kind")
    perturb = option_value(config, "perturb")
    own_kinds = tuple(s.strip() for s in str(option_value(config, "kind") or "").split(",") if s.strip())
    registry.load_all(own_kinds)
    profile = load_profile(profile_name).with_overrides(
        options=parse_policy_options(option_value(config, "policy-option")),
        endpoint=option_value(config, "endpoint"),
        call_timeout=_float_option(config, "call-timeout"),
        wait_s=_float_option(config, "server-wait", allow_zero=True),
        out_of_bounds=option_value(config, "out-of-bounds"),
    )
    # A profile that names its own tasks runs them unless the operator picks a scope.
    own = profile.tasks and not option_given(config, "scope")
    scope = PROFILE_SCOPE if own else option_value(config, "scope")
    selection = SelectionRequest(
        scope=scope,
        suite=parse_suites(suite) if (suite := option_value(config, "suite")) is not None else None,
        task_ids=parse_task_ids(task_ids) if task_ids is not None else None,
        mode=option_value(config, "mode"),
        init_states=parse_init_states(states) if states is not None else None,
        ood_kinds=parse_ood_kinds(kinds) if kinds is not None else None,
        perturbations=parse_perturbations(perturb) if perturb is not None else None,
        tasks=profile.tasks if scope == PROFILE_SCOPE else (),
    )
    return make_plan(
        profile,
        selection,
        budget_mode=option_value(config, "budget-mode"),
        max_policy_calls=_int_option(config, "max-policy-calls"),
        replan_interval=_int_option(config, "replan-interval"),
        track=option_value(config, "track"),
        shard_of=parse_shard(shard) if (shard := option_value(config, "shard")) else None,
        adapter=option_value(config, "adapter"),
        render=option_value(config, "render"),
        video_stride=int(_int_option(config, "video-stride") or 0),
        evidence=option_value(config, "evidence"),
        kinds=own_kinds,
        clock=REALTIME if _switch(config, "realtime") else SYNCHRONOUS,
    )


def _switch(config: pytest.Config, name: str) -> bool:
    """A flag, on the command line or as an ini key (on/off, true/false, 1/0)."""
    value = str(option_value(config, name) or "off").strip().lower()
    if value not in ("on", "off", "true", "false", "1", "0"):
        raise SetupError(f"--libero-{name}={echo(value)}: allowed: on, off (or the flag alone)")
    return value in ("on", "true", "1")


def gates(config: pytest.Config) -> Gates:
    """The operator's CI gates, validated (the baseline folder is read by the recorder)."""
    baseline = path_option(config, "baseline")
    return Gates(
        min_success=_rate_option(config, "min-success"),
        baseline=Path(baseline) if baseline else None,
        alpha=float(_rate_option(config, "baseline-alpha") or 0.0),
        min_safe_success=_rate_option(config, "min-safe-success"),
    )


def _rate_option(config: pytest.Config, name: str) -> float | None:
    value = option_value(config, name)
    if value is None:
        return None
    rate = decimal(str(value).strip())
    if rate is None or not 0.0 <= rate <= 1.0:
        raise SetupError(f"--libero-{name}={echo(value)} must be a number between 0 and 1")
    return rate


def decide(config: pytest.Config, gates: Gates, shard: object) -> DecideSettings | None:
    """``--libero-decide`` and its companions, checked against the gates and the shard."""
    mode = option_value(config, "decide")
    given = [f"--libero-{n}" for n in ("alpha", "order-seed", "baseline-margin", "decide-score")
             if option_value(config, n) is not None]
    if mode is None:
        if given:
            raise SetupError(f"{', '.join(given)} need --libero-decide=anytime")
        return None
    if mode not in DECIDE_MODES:
        raise SetupError(f"--libero-decide={str(mode)[:40]!r}: allowed: {', '.join(DECIDE_MODES)}")
    if not gates.active:
        raise SetupError(f"--libero-decide={mode} stops a run once its gate's verdict is "
                         "settled, and no gate is asked for: add --libero-min-success, "
                         "--libero-min-safe-success or --libero-baseline")
    if shard is not None:
        raise SetupError(f"--libero-decide={mode} cannot be used with --libero-shard: a shard "
                         "sees only its own cases, so it cannot know when the whole run's "
                         "verdict is settled. Decide a run that is not sharded, or gate the "
                         "merged shards (pytest-libero merge --min-success ...)")
    if mode == "exact":
        if given:
            raise SetupError(f"{', '.join(given)} apply to --libero-decide=anytime only; "
                             "exact runs in native order and bets nothing")
        return DecideSettings("exact")
    alpha = _float_between(config, "alpha", DEFAULT_ALPHA, low=0.0, high=1.0, closed=False)
    margin = _float_between(config, "baseline-margin", DEFAULT_MARGIN, low=0.0, high=1.0,
                            closed=True)
    if option_value(config, "baseline-margin") is not None and gates.baseline is None:
        raise SetupError("--libero-baseline-margin applies to --libero-baseline")
    score = option_value(config, "decide-score")
    if score is not None and score not in DECIDE_SCORES:
        raise SetupError(f"--libero-decide-score={echo(score)}: allowed: {', '.join(DECIDE_SCORES)}")
    if score is not None and gates.baseline is None:
        raise SetupError(f"--libero-decide-score={score} compares this run with a baseline, case "
                         "by case: add --libero-baseline=RUN_DIR (the rate gates bet on success)")
    return DecideSettings("anytime", alpha=alpha, order_seed=_int_option(config, "order-seed"),
                          margin=margin, score=score or SUCCESS_SCORE)


def _float_between(config: pytest.Config, name: str, default: float, *, low: float,
                   high: float, closed: bool) -> float:
    value = option_value(config, name)
    if value is None:
        return default
    number = decimal(str(value).strip())
    if number is None:
        number = math.nan
    inside = low <= number < high if closed else low < number < high
    if not inside:
        where = (f"at least {low:g} and below {high:g}" if closed
                 else f"between {low:g} and {high:g}, exclusive")
        raise SetupError(f"--libero-{name}={str(value)[:40]!r} must be a number {where}")
    return number


def run_id(config: pytest.Config) -> str | None:
    """The operator's run id: one folder name, so the run stays under its results root."""
    value = option_value(config, "run-id")
    problem = None if value is None else folder_name_problem(str(value))
    if problem is not None:
        raise SetupError(f"--libero-run-id={echo(value)}: a run id names one folder and "
                         f"{problem}; e.g. --libero-run-id=nightly-42")
    return None if value is None else str(value)


def isolation(config: pytest.Config) -> str:
    mode = option_value(config, "isolation")
    if mode not in ("process", "none"):
        raise SetupError(f"--libero-isolation={echo(mode)}: allowed: process, none")
    return str(mode)


def prebuild(config: pytest.Config) -> bool:
    """Whether the next case's set-up starts while the current case runs."""
    value = option_value(config, "prebuild")
    if value not in ("on", "off"):
        raise SetupError(f"--libero-prebuild={echo(value)}: allowed: on, off")
    return str(value) == "on"


def watchdog(config: pytest.Config, plan: RunPlan) -> Watchdog:
    """Per-phase allowances: the simulator's from the options, the policy's from its
    profile (see :meth:`Watchdog.for_plan`)."""
    return Watchdog.for_plan(
        plan,
        build_s=float(_float_option(config, "build-timeout") or 0.0),
        step_s=float(_float_option(config, "step-timeout") or 0.0),
    )
