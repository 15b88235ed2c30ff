"""``pytest-libero plan``: a run's cost, predicted before it starts.

It takes the run's own options and reads them as the run does (pytest's parser, the
plugin's settings: the same refusals, before any probe), collects nothing and runs no
case. Then: the phase costs (this machine's probe, cached, or a finished run's timings
with ``--from``), the policy's latency (a few calls to its server, or a stated figure),
the cost model over every case of the plan, for this command's ``-n`` and for 1, 2, 4, ...
workers up to the cores (or GPUs).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_libero.config.decide import DEFAULT_ALPHA, DecideSettings, drawn_order, running_order
from pytest_libero.config.options import option_value
from pytest_libero.config.settings import Settings, read_settings
from pytest_libero.config.workers import parse_gpus
from pytest_libero.files import json_text
from pytest_libero.planning.decided import expected_fraction
from pytest_libero.planning.detect import detect, early, read_baseline, spread
from pytest_libero.planning.figures import HOUR
from pytest_libero.planning.latency import assumptions
from pytest_libero.planning.load import busy_line
from pytest_libero.planning.model import DEFAULT_SUCCESS_SHARE, predict, worker_counts
from pytest_libero.planning.probe import phase_costs
from pytest_libero.planning.report import Planned, plan_lines, plan_object
from pytest_libero.planning.shapes import case_shapes, run_costs, scene_families
from pytest_libero.protocol.digits import decimal
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import echo
from pytest_libero.results.decision import ANYTIME

USAGE_ERROR = 4
NUMBERS: dict[str, tuple[float, str]] = {
    "success_rate": (1.0, "a share from 0 to 1"), "success_share": (1.0, "a share from 0 to 1"),
    "rate": (1.0, "a rate from 0 to 1"),
    "latency_ms": (HOUR * 1000, f"milliseconds from 0 to {HOUR * 1000:,.0f} (an hour per call)")}
"""The command's own numbers: written in ASCII decimal digits, each inside its bounds."""
OPEN: dict[str, str] = {"detect": "a difference of success rates between 0 and 1, both excluded "
                        "(0.02: two points)",
                        "power": "a power between 0 and 1, both excluded (0.8: 80%)"}
"""--detect's numbers: strictly inside (0, 1)."""
DEFAULT_POWER = 0.8


def plan_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-libero plan", description=__doc__.split("\n")[0],
        epilog="Every other argument is the run's own (--libero-profile, --libero-scope, -n, ...).")
    parser.add_argument("--from", dest="from_run", type=Path, metavar="RUN_DIR",
                        help="plan from a finished run's timings instead of this machine's probe")
    parser.add_argument("--refresh", action="store_true", help="probe this machine again")
    parser.add_argument("--latency-ms", help="the policy's milliseconds per call, stated")
    parser.add_argument("--success-rate",
                        help="share of cases assumed to succeed (default: --from's run's, else 0: "
                        "every case runs its cap)")
    parser.add_argument("--success-share",
                        help="how far into its cap a success ends, on average (default: --from's "
                        f"run's, else {DEFAULT_SUCCESS_SHARE})")
    parser.add_argument("--rate", default="0.5",
                        help="--libero-decide: the true success rate its expected share is for")
    parser.add_argument("--detect", metavar="D",
                        help="how many paired episodes compare needs to find a difference of D "
                        "in success rate (0.02: two points) at --baseline's rates, how long they "
                        "take, and what --libero-decide saves (docs/compare.md)")
    parser.add_argument("--power", metavar="P",
                        help=f"--detect: the chance of finding it (default {DEFAULT_POWER})")
    parser.add_argument("--baseline", type=Path, metavar="RUN_DIR",
                        help="--detect: the finished run (A) whose success rates B is compared at")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object (the figures and assumptions) instead of the text")
    return parser


class Planner:
    """A pytest plugin for one planning session: plans at collection, collects nothing."""

    def __init__(self, flags: argparse.Namespace, say: Callable[[str], None]) -> None:
        self.flags, self.say = flags, say
        self.planned: Planned | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        """The plan is the only output: pytest's own report of a collection that collected
        nothing would follow it (the user's ini options, -ra and such, are kept)."""
        reporter = config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool:
        config = session.config
        try:
            settings = read_settings(config)
            if settings is None:
                raise SetupError("pytest-libero plan needs the run's options, --libero-profile first")
            self.planned = planned(settings, config, self.flags, self.say)
        except SetupError as exc:
            raise pytest.UsageError(str(exc)) from None
        if self.flags.json:
            print(json_text(plan_object(self.planned)), flush=True)
        else:
            for line in plan_lines(self.planned):
                print(line, flush=True)
        return True


def planned(settings: Settings, config: pytest.Config, flags: argparse.Namespace,
            say: Callable[[str], None]) -> Planned:
    plan = settings.plan
    native = [e.case_id for e in plan.owned]
    baseline = None if flags.detect is None else read_baseline(flags.baseline)  # before any probe
    order = None
    if settings.decide is not None and settings.decide.mode == "anytime":
        order = running_order(drawn_order(native, settings.decide.order_seed or 0), native, plan.mode)
    shapes = tuple(case_shapes(plan, order))
    busy = busy_line(os.cpu_count() or 1)  # read before a probe adds its own load
    stated = None if flags.latency_ms is None else flags.latency_ms / 1000
    if flags.from_run is not None:
        try:
            costs, assume = run_costs(flags.from_run)
        except ValueError as exc:
            raise SetupError(f"--from {flags.from_run}: {exc}") from None
        if busy is not None:  # said only once the inputs are taken: a refusal stays one line
            say(busy)
        assume = replace(assume, prebuild=settings.prebuild)
        if stated is not None:
            assume = replace(assume, latency_s=stated, latency_source="stated (--latency-ms)")
        if flags.success_rate is not None:
            assume = replace(assume, success_rate=flags.success_rate)
        if flags.success_share is not None:
            assume = replace(assume, success_share=flags.success_share)
    else:
        if busy is not None:
            say(busy)
        costs = phase_costs(scene_families(plan), refresh=flags.refresh, say=say)
        assume = assumptions(
            plan, stated_latency_s=stated, success_rate=flags.success_rate or 0.0,
            success_share=DEFAULT_SUCCESS_SHARE if flags.success_share is None else flags.success_share,
            prebuild=settings.prebuild, say=say)
    cores = os.cpu_count() or 1
    gpus = option_value(config, "gpus")
    counts = worker_counts(cores, len(parse_gpus(gpus)) if gpus else 0)
    asked = int(config.option.numprocesses or 1) if config.pluginmanager.hasplugin("xdist") else 1
    predictions = tuple(predict(shapes, costs, assume, n, cores) for n in counts)
    decided = None if settings.decide is None else expected_fraction(
        settings.decide, settings.gates, native, plan.mode, flags.rate)
    found = None
    if baseline is not None:
        read, rates = baseline
        by_case = {s.case: s for s in shapes}

        def wall(cases: Sequence[str], n: int) -> float:
            return predict(spread([by_case[c] for c in cases], n), costs, assume, asked, cores).wall_s

        found = detect(flags.detect, flags.power, flags.baseline, rates, native, wall)
        deciding = settings.decide or DecideSettings(ANYTIME, alpha=DEFAULT_ALPHA)
        found = replace(found, early=early(deciding, settings.gates.alpha, read, found,
                                           [s.case for s in shapes], plan.mode))
    return Planned(shapes, costs, assume, predictions, predict(shapes, costs, assume, asked, cores),
                   plan.mode, decided, flags.rate if decided is not None else None, found)


def detect_refusal(flags: argparse.Namespace) -> str | None:
    """--detect's numbers checked and read into ``flags`` (the reason when one is not)."""
    if flags.detect is None:
        if flags.power is not None or flags.baseline is not None:
            return "--power and --baseline go with --detect D (the difference to find)"
        return None
    if flags.baseline is None:
        return ("--detect needs --baseline RUN_DIR: the finished run whose success rates the "
                "difference is found at")
    if flags.power is None:
        flags.power = str(DEFAULT_POWER)
    for name, said in OPEN.items():
        text = getattr(flags, name)
        value = decimal(text)
        if value is None or not 0 < value < 1:
            return f"--{name}={echo(text)} is not {said}"
        setattr(flags, name, value)
    return None


def plan_main(argv: Sequence[str], say: Callable[[str], None] | None = None) -> int:
    """The command: 0 with the plan printed, 4 for what the run would refuse."""
    flags, run_args = plan_parser().parse_known_args(list(argv))
    for name, (upper, said) in NUMBERS.items():
        text = getattr(flags, name)
        if text is None:
            continue
        value = decimal(text)
        if value is None or not 0 <= value <= upper:
            print(f"pytest-libero plan: --{name.replace('_', '-')}={echo(text)} is not {said}",
                  file=sys.stderr)
            return USAGE_ERROR
        setattr(flags, name, value)
    refusal = detect_refusal(flags)
    if refusal is not None:
        print(f"pytest-libero plan: {refusal}", file=sys.stderr)
        return USAGE_ERROR
    tell = say or (lambda line: print(f"pytest-libero plan: {line}", file=sys.stderr, flush=True))
    planner = Planner(flags, tell)
    code = pytest.main(["--collect-only", "-p", "no:cacheprovider", *run_args], plugins=[planner])
    if planner.planned is not None:
        return 0
    return int(code) if int(code) else USAGE_ERROR
