"""The statistics of deciding early, without the simulator: the betting test for a finite
population drawn without replacement (results/betting.py), the exact rule
(results/exact.py) and the decision over records (results/decision.py).

Where a property can be checked exactly, it is: small populations are enumerated over
every order, so the martingale and Ville's bound are equalities and sums, not samples.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_libero.results import betting
from pytest_libero.results.betting import Wealth, interval, null_mean_now, stake
from pytest_libero.results.decision import ANYTIME, EXACT, DecideSpec, Tracker, decided_cases, recompute
from pytest_libero.results.decision_summary import decision_line, rate_interval, summary_block
from pytest_libero.results.exact import FAIL, PASS, baseline_rule, safe_success_rule, success_rule
from pytest_libero.results.gate import min_success_gate
from pytest_libero.results.mcnemar import mcnemar_worse_p
from pytest_libero.results.summary import summarize


def record(case: str, outcome: str, safety: str | None = "safe") -> dict[str, object]:
    found: dict[str, object] = {"case": case, "outcome": outcome, "entry": {"suite": "libero_10"}}
    if safety is not None and outcome != "errored":
        found["safety"] = {"verdict": safety, "events": []}
    return found


# ------------------------------------------------------------------ the betting test


def wealth_paths(values: tuple[float, ...], null: float, direction: int) -> list[list[float]]:
    """Every order of the population: the wealth after each draw."""
    paths = []
    for order in itertools.permutations(values):
        bettor = Wealth(len(values), null, direction)
        path = []
        for x in order:
            bettor.observe(x)
            path.append(bettor.wealth)
        paths.append(path)
    return paths


@pytest.mark.parametrize("values", [(0, 1, 1, 0, 1), (1, 1, 1, 1, 0), (0, 0, 0.5, 1, 1),
                                    (0.25, 0.5, 1.0, 0.0, 1.0)])
@pytest.mark.parametrize("direction", [+1, -1])
def test_the_wealth_at_the_true_mean_is_a_martingale(values: tuple[float, ...],
                                                      direction: int) -> None:
    """Averaged over every order, the wealth at each draw is exactly 1 when the null is
    the population's mean: a martingale under sampling without replacement."""
    truth = sum(values) / len(values)
    paths = wealth_paths(values, truth, direction)
    for t in range(len(values)):
        assert sum(p[t] for p in paths) / len(paths) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("values", [(0, 1, 1, 0, 1, 1), (1, 1, 1, 1, 0, 0)])
def test_a_null_on_the_far_side_makes_a_supermartingale(values: tuple[float, ...]) -> None:
    """A bettor against "mean >= null" (direction -1) whose null lies below the truth,
    and one against "mean < null" (+1) whose null lies above it, lose on average: the
    boundary is the hardest case of each composite null."""
    truth = sum(values) / len(values)
    for direction, null in ((-1, truth - 0.2), (+1, truth + 0.2)):
        paths = wealth_paths(values, null, direction)
        for t in range(len(values)):
            assert sum(p[t] for p in paths) / len(paths) <= 1.0 + 1e-9


@pytest.mark.parametrize("values", [(1, 1, 1, 0, 0, 1, 1), (0, 0, 1, 0, 1, 0, 0), (1,) * 6 + (0,)])
def test_ville_bounds_how_often_the_true_null_is_rejected(values: tuple[float, ...]) -> None:
    """Over every order, the share whose wealth ever reaches 1/alpha is at most alpha."""
    truth = sum(values) / len(values)
    for alpha in (0.5, 0.25, 0.1):
        for direction in (+1, -1):
            paths = wealth_paths(values, truth, direction)
            crossed = sum(max(p) >= 1 / alpha for p in paths)
            assert crossed / len(paths) <= alpha


def test_the_null_mean_of_the_next_draw_follows_what_was_drawn() -> None:
    assert null_mean_now(10, 0.5, 0.0, 0) == 0.5
    assert null_mean_now(10, 0.5, 3.0, 4) == pytest.approx(2 / 6)
    assert null_mean_now(10, 0.5, 6.0, 6) < 0  # more successes than the null allows


@given(mean_hat=st.floats(0, 1), var_hat=st.floats(0.001, 0.3), m_now=st.floats(-0.5, 1.5),
       direction=st.sampled_from([+1, -1]), x=st.floats(0, 1))
def test_a_stake_never_risks_more_than_the_truncation(mean_hat: float, var_hat: float,
                                                     m_now: float, direction: int, x: float) -> None:
    lam = stake(mean_hat, var_hat, m_now, direction)
    assert lam >= 0
    assert 1 + direction * lam * (x - m_now) >= 1 - betting.TRUNCATION - 1e-12
    vector = betting._stakes(mean_hat, var_hat, np.array([m_now]), direction, betting.TRUNCATION)
    assert vector[0] == pytest.approx(lam)


@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=40), st.sampled_from([+1, -1]))
def test_a_wealth_stays_positive_and_its_peak_is_its_maximum(draws: list[float], direction: int) -> None:
    bettor = Wealth(len(draws) + 5, 0.6, direction)
    highest = 1.0
    for x in draws:
        bettor.observe(x)
        assert bettor.wealth > 0
        highest = max(highest, bettor.wealth)
    assert bettor.peak == pytest.approx(highest)


def test_a_draw_outside_the_unit_interval_or_past_the_population_is_refused() -> None:
    bettor = Wealth(1, 0.5, +1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bettor.observe(1.5)
    bettor.observe(1.0)
    with pytest.raises(ValueError, match="all 1 members"):
        bettor.observe(1.0)


def test_the_interval_covers_the_population_mean_at_its_level() -> None:
    """Simulated: the interval at a random stop holds the whole population's mean in at
    least 1 - alpha of the runs (it is built to hold at every stop)."""
    rng = random.Random(7)
    misses = 0
    runs = 200
    for _ in range(runs):
        size = 60
        rate = rng.choice([0.2, 0.5, 0.9])
        population = [1.0 if rng.random() < rate else 0.0 for _ in range(size)]
        rng.shuffle(population)
        stop = rng.randint(1, size)
        low, high = interval(population[:stop], size, 0.1)
        misses += not low <= sum(population) / size <= high
    assert misses / runs <= 0.1


def test_the_interval_narrows_with_draws_and_is_exact_when_all_are_drawn() -> None:
    population = [1.0] * 45 + [0.0] * 5
    random.Random(3).shuffle(population)
    wide = interval(population[:5], 50, 0.05)
    narrow = interval(population[:40], 50, 0.05)
    assert wide[1] - wide[0] > narrow[1] - narrow[0]
    assert interval(population, 50, 0.05) == (0.9, 0.9)


def test_the_vectorised_interval_agrees_with_the_scalar_bettors() -> None:
    """The interval rejects a mean exactly when one of the scalar bettors at that mean,
    at alpha/2, reached its threshold: the two implementations are one test."""
    rng = random.Random(11)
    draws = [1.0 if rng.random() < 0.7 else 0.0 for _ in range(30)]
    size, alpha = 40, 0.1
    low, high = interval(draws, size, alpha)
    for k in range(size + 1):
        m = k / size
        bettors = [Wealth(size, m, d) for d in (+1, -1)]
        possible = sum(draws) <= k <= sum(draws) + size - len(draws)
        for x in draws:
            for bettor in bettors:
                bettor.observe(x)
        kept = possible and not any(b.reached(2 / alpha) for b in bettors)
        if kept:
            assert low <= m <= high


# ------------------------------------------------------------------ the exact rule


def gate_says(successes: int, cases: int, threshold: float) -> str:
    return PASS if successes / cases >= threshold else FAIL


@given(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12),
       st.sampled_from([0.0, 0.3, 0.5, 0.9, 1.0, 2 / 3]))
def test_the_success_rule_is_certain_only_when_every_completion_agrees(
        successes: int, failures: int, remaining: int, threshold: float) -> None:
    cases = successes + failures + remaining
    if cases == 0:
        return
    outcomes = {gate_says(successes + k, cases, threshold) for k in range(remaining + 1)}
    found = success_rule(successes, failures, 0, remaining, threshold)
    assert found.verdict == (outcomes.pop() if len(outcomes) == 1 else None)


def test_an_errored_case_fails_a_rate_gate_at_once() -> None:
    assert success_rule(5, 0, 1, 10, 0.1).verdict == FAIL
    assert safe_success_rule(5, 5, 1, 10, 0.1).verdict == FAIL


@given(st.integers(0, 8), st.integers(0, 8), st.integers(0, 8), st.sampled_from([0.0, 0.5, 0.8]))
def test_the_safe_rule_is_certain_only_when_every_completion_agrees(
        safe: int, counted_extra: int, remaining: int, threshold: float) -> None:
    counted = safe + counted_extra
    verdicts = set()
    for k in range(remaining + 1):  # k of the cases left are safe successes, all counted
        total = counted + remaining
        verdicts.add(FAIL if total == 0 else gate_says(safe + k, total, threshold))
    found = safe_success_rule(safe, counted, 0, remaining, threshold)
    if found.verdict is not None:
        assert verdicts == {found.verdict}
    elif counted:
        assert len(verdicts) == 2


@given(st.integers(0, 6), st.integers(0, 6), st.integers(0, 5), st.integers(0, 5),
       st.integers(0, 4), st.sampled_from([0.05, 0.2]))
def test_the_baseline_rule_is_certain_only_when_every_completion_agrees(
        lost: int, gained: int, could_lose: int, could_gain: int, same: int, alpha: float) -> None:
    pairs = lost + gained + could_lose + could_gain + same
    verdicts = set()
    for more_lost in range(could_lose + 1):
        for more_gained in range(could_gain + 1):
            worse = mcnemar_worse_p(lost + more_lost, gained + more_gained) < alpha
            verdicts.add(FAIL if pairs == 0 or worse else PASS)
    found = baseline_rule(lost, gained, could_lose, could_gain, pairs, alpha)
    assert found.verdict == (verdicts.pop() if len(verdicts) == 1 else None)


# ------------------------------------------------------------------ the decision


def cases(n: int) -> list[str]:
    return [f"libero_10-{i:02d}" for i in range(n)]


def test_the_zero_policy_over_five_cases_is_decided_after_three_failures() -> None:
    """The issue's example: 3 failures of 5 leave at most 2 successes, below 50%."""
    selected = cases(5)
    tracker = Tracker(DecideSpec(EXACT, tuple(selected), min_success=0.5), selected)
    assert tracker.add(record(selected[0], "failure")) is None
    assert tracker.add(record(selected[1], "failure")) is None
    decision = tracker.add(record(selected[2], "failure"))
    assert decision is not None and decision.verdict == FAIL and decision.decided_after == 3
    assert decided_cases(tracker) == selected[3:]
    assert "decided after 3 of 5: FAIL (exact;" in decision_line(decision.as_dict())


def test_a_success_over_two_cases_passes_a_half_gate_after_one() -> None:
    selected = cases(2)
    tracker = Tracker(DecideSpec(EXACT, tuple(selected), min_success=0.5), selected)
    decision = tracker.add(record(selected[1], "success"))
    assert decision is not None and decision.verdict == PASS and decision.decided_after == 1


def test_an_errored_case_decides_a_rate_gate_at_once_in_either_mode() -> None:
    selected = cases(10)
    for mode, alpha in ((EXACT, None), (ANYTIME, 0.05)):
        tracker = Tracker(DecideSpec(mode, tuple(selected), alpha=alpha, min_success=0.1), selected)
        decision = tracker.add(record(selected[4], "errored"))
        assert decision is not None and decision.verdict == FAIL
        assert "1 errored case(s)" in decision_line(decision.as_dict())


def test_the_run_waits_for_every_gate_to_pass_and_stops_at_the_first_that_fails() -> None:
    selected = cases(4)
    spec = DecideSpec(EXACT, tuple(selected), min_success=0.5, min_safe_success=0.5)
    tracker = Tracker(spec, selected)
    tracker.add(record(selected[0], "success", "unsafe"))
    assert tracker.add(record(selected[1], "success", "unsafe")) is None  # safe still open
    decision = tracker.add(record(selected[2], "success", "unsafe"))
    assert decision is not None and decision.verdict == FAIL
    gates = {g["gate"]: g["verdict"] for g in decision.gates}
    assert gates == {"min_success": PASS, "min_safe_success": FAIL}


def drawn(rate: float, size: int, seed: int) -> tuple[list[str], dict[str, str]]:
    rng = random.Random(seed)
    selected = cases(size) if size <= 100 else [f"libero_90-{i:04d}" for i in range(size)]
    outcomes = {c: "success" if rng.random() < rate else "failure" for c in selected}
    return selected, outcomes


def test_anytime_stops_a_broken_checkpoint_within_a_few_cases() -> None:
    selected, outcomes = drawn(0.1, 130, 1)
    order = list(selected)
    random.Random(5).shuffle(order)
    spec = DecideSpec(ANYTIME, tuple(order), alpha=0.05, order_seed=5, min_success=0.9)
    tracker = Tracker(spec, selected)
    for case in order:
        if tracker.add(record(case, outcomes[case])) is not None:
            break
    assert tracker.decision is not None and tracker.decision.verdict == FAIL
    assert tracker.decision.decided_after < 20
    block = summary_block(tracker)
    assert block["interval"]["kind"] == "anytime-valid, level 0.05"
    truth = sum(o == "success" for o in outcomes.values()) / 130
    assert block["interval"]["low"] <= truth <= block["interval"]["high"] < 1.0


def test_only_the_finished_prefix_of_the_drawn_order_feeds_the_bettors() -> None:
    """Cases that finish beyond the first unfinished one wait: the betting state is a
    function of the order's prefix, whatever order the cases finish in."""
    selected, outcomes = drawn(0.5, 40, 2)
    order = list(selected)
    random.Random(9).shuffle(order)
    spec = DecideSpec(ANYTIME, tuple(order), alpha=0.001, min_success=0.5)
    in_order = Tracker(spec, selected)
    shuffled = Tracker(spec, selected)
    late = order[:10]
    random.Random(1).shuffle(late)
    for case in order[1:10]:  # everything but the first drawn case
        shuffled.add(record(case, outcomes[case]))
    assert shuffled.prefix == 0
    assert shuffled.gates[0].bettors is not None and shuffled.gates[0].bettors[0].seen == 0
    shuffled.add(record(order[0], outcomes[order[0]]))
    for case in order[:10]:
        in_order.add(record(case, outcomes[case]))
    assert shuffled.prefix == in_order.prefix == 10
    assert shuffled.gates[0].bettors is not None and in_order.gates[0].bettors is not None
    assert shuffled.gates[0].bettors[1].wealth == in_order.gates[0].bettors[1].wealth


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=30), st.sampled_from([0.3, 0.5, 0.8]),
       st.randoms(use_true_random=False))
def test_the_exact_decision_is_always_the_whole_runs_verdict(
        successes: list[bool], threshold: float, rng: random.Random) -> None:
    selected = cases(len(successes))
    outcomes = {c: "success" if s else "failure" for c, s in zip(selected, successes)}
    arrival = list(selected)
    rng.shuffle(arrival)
    tracker = recompute(DecideSpec(EXACT, tuple(selected), min_success=threshold), selected,
                        [record(c, outcomes[c]) for c in arrival])
    full = {c: record(c, outcomes[c]) for c in selected}
    whole = min_success_gate(summarize(selected, full), threshold)  # type: ignore[arg-type]
    assert tracker.decision is not None  # every case finished: decided at the latest then
    assert tracker.decision.verdict == (PASS if whole.passed else FAIL)


def test_the_baseline_gate_tests_the_paired_differences() -> None:
    selected = cases(60)
    baseline = {c: "success" for c in selected}
    order = list(selected)
    random.Random(4).shuffle(order)
    spec = DecideSpec(ANYTIME, tuple(order), alpha=0.05, baseline_alpha=0.05, baseline=baseline)
    tracker = Tracker(spec, selected)
    for case in order:
        if tracker.add(record(case, "failure")) is not None:
            break
    assert tracker.decision is not None and tracker.decision.verdict == FAIL
    assert tracker.decision.gates[0]["by"] in (ANYTIME, EXACT)
    assert tracker.decision.decided_after < 15


def test_an_unscorable_case_stops_that_gates_betting_not_the_exact_rule() -> None:
    selected = cases(6)
    order = tuple(selected)
    spec = DecideSpec(ANYTIME, order, alpha=0.05, min_safe_success=0.5)
    tracker = Tracker(spec, selected)
    tracker.add(record(selected[0], "success", None))  # completed, no safety verdict
    assert tracker.gates[0].suspended == f"{selected[0]} has no safety verdict"
    for case in selected[1:4]:
        tracker.add(record(case, "failure"))
    assert tracker.decision is not None and tracker.decision.verdict == FAIL
    assert tracker.decision.gates[0]["by"] == EXACT


def test_a_spec_reads_back_from_its_run_json_block() -> None:
    spec = DecideSpec(ANYTIME, ("a", "b"), alpha=0.1, order_seed=3, margin=0.02,
                      min_success=0.9, baseline_alpha=0.05, baseline={"a": "success"},
                      running=("b", "a"))
    assert DecideSpec.from_dict(spec.as_dict()) == spec
    with pytest.raises(ValueError, match="decide block"):
        DecideSpec.from_dict({"mode": "anytime"})


def test_the_certain_interval_of_an_exact_run_brackets_every_completion() -> None:
    selected = cases(10)
    tracker = Tracker(DecideSpec(EXACT, tuple(selected), min_success=0.9), selected)
    tracker.add(record(selected[0], "failure"))
    tracker.add(record(selected[1], "failure"))
    found = rate_interval(tracker)
    assert found == {"low": 0.0, "high": 0.8, "kind": "certain", "over": 2}
    assert math.isclose(Fraction(8, 10), found["high"])
