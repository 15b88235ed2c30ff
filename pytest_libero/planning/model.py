"""What a run will cost, from what each phase of a case costs on this machine.

A case is a set-up (build the environment, its native resets, the state and the
settling controls) and an episode (controls, each a physics step and the renders the
plan consumes, and a policy call every K controls). Its seconds come from
:class:`PhaseCosts` (measured by the probe, or read from a finished run) and the
:class:`Assumptions` the operator can change (the policy's latency, how many cases
succeed and how early). A run's wall time on n workers is the largest of three bounds:

- the workers' own time: cases handed out in order, each (a full-mode task's states
  together) to the first worker free (what xdist's work stealing comes close to), a
  worker's next set-up overlapping its current episode when ``--libero-prebuild`` is on;
- the cores: the same steps played out on shared cores (:func:`shared_cores`; each
  worker past the first starting its own pytest and case host beside the first, every
  running step slowed alike when together they ask more than the cores), and never less
  than every case's CPU seconds spread over the cores (a served policy's waiting is not
  CPU);
- the policy server: its calls one at a time (``python -m pytest_libero.serve`` runs
  every call on one thread);

plus the run's fixed start and finish.

Pure arithmetic: no simulator, no clock. docs/scale.md, *Planning a run*, has the formula
and its limits.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_SUCCESS_SHARE = 0.6
"""A success ends, on average, at this share of its control cap (the shipped demos end
at 0.35-0.8 of theirs); a failure runs its whole cap."""


@dataclass(frozen=True)
class PhaseCosts:
    """Seconds per phase on the machine the plan is for."""

    build_s: float
    """Construct one environment (model, GL context, textures)."""
    reset_s: float
    """One native reset (full mode replays k of them to reach state k)."""
    settle_s: float
    """Install the state and run the settling controls."""
    physics_s: float
    """One control's physics alone (no camera rendered)."""
    render_s: float
    """One camera image at the plan's resolution."""
    cpu_per_wall: float
    """CPU seconds per wall second of a case (the software renderer runs threads of its
    own): how much of the machine's cores one worker takes."""
    source: str
    """Where the figures come from, in words (the probe and its renderer, or a run)."""
    call_s: float = 0.0
    """A policy call's own work besides its images: the observation made, delivered and
    kept as evidence."""
    overhead_s: float = 0.0
    """A run's fixed seconds: its start (pytest, the case host, the first scene compiled
    cold) and its finish (summary, reports)."""


@dataclass(frozen=True)
class CostTable:
    """Phase costs by scene family: a LIBERO suite's scenes cost their own (a camera image
    of libero_spatial's table costs twice one of libero_10's), a perturbed suite costs as
    its base. A family measured apart uses its own figures; any other, the default's."""

    default: PhaseCosts
    scenes: Mapping[str, PhaseCosts] = field(default_factory=dict)

    def of(self, scene: str) -> PhaseCosts:
        return self.scenes.get(scene, self.default)


def table_of(costs: PhaseCosts | CostTable) -> CostTable:
    """One set of figures for every scene, or the table as it is."""
    return costs if isinstance(costs, CostTable) else CostTable(costs)


@dataclass(frozen=True)
class Assumptions:
    """What the plan cannot measure before the run, each stated beside the figure."""

    latency_s: float = 0.0
    """Seconds per policy call (the server's answer, round trip included)."""
    latency_source: str = "in-process policy: no wait"
    success_rate: float = 0.0
    """The share of cases assumed to succeed (0: every case runs its whole cap)."""
    success_share: float = DEFAULT_SUCCESS_SHARE
    prebuild: bool = True
    """A worker's next case sets up while its current one runs (``--libero-prebuild``)."""


@dataclass(frozen=True)
class CaseShape:
    """One case as the plan will run it."""

    case: str
    task: str
    state: int | None
    """Full mode: the init state; None in fast mode."""
    control_cap: int
    replan_interval: int
    renders_per_control: float
    """Camera images rendered per control (the video's, and the policy's at each call)."""
    scene: str = ""
    """Its scene family (:class:`CostTable`): the suite, or a perturbed suite's base."""


@dataclass(frozen=True)
class CaseCost:
    case: str
    setup_s: float
    episode_s: float
    cpu_s: float
    calls: float
    hideable: bool = True
    """Its set-up can run ahead, beside the case before it (not so in a kept environment)."""


def case_cost(shape: CaseShape, table: PhaseCosts | CostTable, assume: Assumptions,
              previous: CaseShape | None = None) -> CaseCost:
    """The expected seconds of one case, after ``previous`` on the same worker (full
    mode keeps a task's environment from one state to the next: fewer resets, no build)."""
    costs = table_of(table).of(shape.scene)
    controls = shape.control_cap * (1.0 - assume.success_rate * (1.0 - assume.success_share))
    calls = controls / shape.replan_interval
    kept = (shape.state is not None and previous is not None and previous.task == shape.task
            and previous.state is not None and previous.state < shape.state)
    if shape.state is None:
        setup = costs.build_s + costs.reset_s + costs.settle_s
    elif kept:
        assert previous is not None and previous.state is not None
        setup = (shape.state - previous.state) * costs.reset_s + costs.settle_s
    else:
        setup = costs.build_s + (shape.state + 1) * costs.reset_s + costs.settle_s
    stepping = controls * (costs.physics_s + shape.renders_per_control * costs.render_s)
    delivering = calls * costs.call_s
    # A set-up is one thread; the stepping renders on the renderer's own threads too.
    return CaseCost(shape.case, setup, stepping + delivering + calls * assume.latency_s,
                    setup + stepping * costs.cpu_per_wall + delivering, calls, hideable=not kept)


@dataclass(frozen=True)
class Prediction:
    """A run's predicted wall time on one worker count, and which bound set it."""

    workers: int
    wall_s: float
    bound: str
    """``workers``, ``cores`` or ``policy server``."""
    bounds: dict[str, float]


def predict(shapes: Sequence[CaseShape], costs: PhaseCosts | CostTable, assume: Assumptions,
            workers: int, cores: int, *, shared: bool = True) -> Prediction:
    """The run's wall time on ``workers`` workers of a machine with ``cores`` cores.

    ``shared=False``: the costs were measured under these very workers' load (the running
    run's own cases), so the cores and the server have slowed them already; only the
    workers' bound applies.
    """
    table = table_of(costs)
    by_worker = _hand_out(shapes, table, assume, workers)
    cases = [c for costs_of in by_worker for c in costs_of]
    # The workers' own time: the same play-out with a core for every step (a set-up run
    # ahead hides wholly); how much the machine's cores let it hide is the cores bound's.
    bounds = {"workers": shared_cores(by_worker, assume.prebuild, math.inf, 0.0)}
    if shared:
        # A worker's start is about the run's fixed seconds on one core; the first's is the
        # overhead added below, the others' compete with it for the cores.
        start = table.default.overhead_s
        starts = (max(workers, 1) - 1) * start if cases else 0.0
        bounds["cores"] = max((sum(c.cpu_s for c in cases) + starts) / max(cores, 1),
                              shared_cores(by_worker, assume.prebuild, cores, start) if cases else 0.0)
        bounds["policy server"] = sum(c.calls for c in cases) * assume.latency_s
    bound = max(bounds, key=lambda name: bounds[name])
    overhead = table.default.overhead_s if shared and cases else 0.0
    return Prediction(workers, bounds[bound] + overhead, bound,
                      {name: value + overhead for name, value in bounds.items()})


def shared_cores(by_worker: Sequence[Sequence[CaseCost]], prebuild: bool, cores: float,
                 start_s: float) -> float:
    """The workers' cases played out on ``cores`` shared cores: each worker's steps in
    order (a start of ``start_s`` on one core for each worker past the first, then each
    set-up on one core and each episode on its own CPU share, a set-up run ahead beside
    the episode before it with ``prebuild``), every running step slowed alike whenever
    together they ask more than the cores (the kernel's fair share). Unlike the sum of CPU
    seconds over the cores, it sees the cores a run leaves idle: a last case running alone
    on a worker while the others have finished."""
    plans = [_steps(cases, prebuild, start_s if n else 0.0) for n, cases in enumerate(by_worker)]
    at = [0] * len(plans)
    clock = 0.0
    while True:
        for n, plan in enumerate(plans):  # past the steps that are done
            while at[n] < len(plan) and all(left <= 1e-9 for left, _ in plan[at[n]]):
                at[n] += 1
        running = [work for n, plan in enumerate(plans) if at[n] < len(plan)
                   for work in plan[at[n]] if work[0] > 1e-9]
        if not running:
            return clock
        asked = sum(demand for _, demand in running)
        rate = min(1.0, max(cores, 1) / asked) if asked > 0 else 1.0
        step = min(left for left, _ in running) / rate
        for work in running:
            work[0] -= step * rate
        clock += step


def _steps(cases: Sequence[CaseCost], prebuild: bool, start_s: float) -> list[list[list[float]]]:
    """One worker's steps, each the works that run together as [seconds alone, cores]; a
    step begins when the one before has ended whole."""
    steps: list[list[list[float]]] = [[[start_s, 1.0]]]
    if cases:
        steps.append([[cases[0].setup_s, 1.0]])
    for current, following in zip(cases, [*cases[1:], None]):
        demand = max(current.cpu_s - current.setup_s, 0.0) / current.episode_s if current.episode_s else 0.0
        episode = [current.episode_s, demand]
        if following is None:
            steps.append([episode])
        elif prebuild and following.hideable:
            steps.append([episode, [following.setup_s, 1.0]])
        else:
            steps += [[episode], [[following.setup_s, 1.0]]]
    return steps


def chains(shapes: Sequence[CaseShape]) -> list[list[CaseShape]]:
    """What one worker takes whole: a full-mode task's states (its chain, which the
    scheduler keeps on one worker for the kept environment), else each case alone."""
    found: dict[str, list[CaseShape]] = {}
    units: list[list[CaseShape]] = []
    for shape in shapes:
        if shape.state is None:
            units.append([shape])
        elif shape.task in found:
            found[shape.task].append(shape)
        else:
            found[shape.task] = [shape]
            units.append(found[shape.task])
    return units


def _hand_out(shapes: Sequence[CaseShape], costs: CostTable, assume: Assumptions,
              workers: int) -> list[list[CaseCost]]:
    """Each chain to the first worker free, in order; a case's cost after that worker's last."""
    free = [(0.0, n) for n in range(max(workers, 1))]
    assigned: list[list[CaseCost]] = [[] for _ in free]
    last: list[CaseShape | None] = [None for _ in free]
    for unit in chains(shapes):
        at, worker = heapq.heappop(free)
        for shape in unit:
            cost = case_cost(shape, costs, assume, last[worker])
            assigned[worker].append(cost)
            last[worker] = shape
            at += cost.setup_s + cost.episode_s
        heapq.heappush(free, (at, worker))
    return assigned


def worker_counts(cores: int, gpus: int = 0) -> list[int]:
    """1, 2, 4, ... up to the cores (or the GPUs, when there are more), and that count."""
    top = max(cores, gpus, 1)
    counts, n = [], 1
    while n < top:
        counts.append(n)
        n *= 2
    return [*counts, top]


def saturation(predictions: Sequence[Prediction]) -> Prediction | None:
    """The first worker count whose wall time a bound other than the workers' sets and
    that no more workers shorten by over 2%: past it, more workers wait on the cores or
    the server. None when none does."""
    ordered = sorted(predictions, key=lambda p: p.workers)
    return next((p for n, p in enumerate(ordered) if p.bound != "workers"
                 and all(later.wall_s >= p.wall_s * 0.98 for later in ordered[n + 1:])), None)


def best(predictions: Sequence[Prediction]) -> Prediction:
    """The fewest workers within 2% of the fastest: more would cost without paying."""
    fastest = min(p.wall_s for p in predictions)
    return min((p for p in predictions if p.wall_s <= fastest * 1.02), key=lambda p: p.workers)
