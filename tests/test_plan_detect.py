"""``pytest-libero plan --detect D --baseline RUN`` (issue 64 part 5): the power of
compare's exact McNemar test checked against scipy (its binomial law and its exact
binomial test), against an enumeration of every table for a small n and against a Monte
Carlo simulation; the pairs needed falling as D grows; the one-line refusals; and the
command on a real run folder of the plugin (the scripted adapter, tests/decide_adapter.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from decided_runs import run
from scipy import stats

from harness.runs import run_folder
from pytest_libero.config.decide import DecideSettings
from pytest_libero.planning.command import plan_main
from pytest_libero.planning.decided import paired_fraction
from pytest_libero.planning.detect import FEWEST, INDEPENDENT, discordance, spread
from pytest_libero.planning.model import CaseShape
from pytest_libero.planning.power import binomial_cdf, critical, pairs_needed, power
from pytest_libero.results.mcnemar import mcnemar_two_sided_p

ALPHA = 0.05


def test_the_critical_count_is_the_exact_test_s() -> None:
    for m in range(0, 160):
        rejected = [x for x in range(m + 1) if x < m / 2 and mcnemar_two_sided_p(x, m - x) < ALPHA]
        assert critical(m, ALPHA) == max(rejected, default=-1), m
    assert critical(5, ALPHA) == -1 and critical(6, ALPHA) == 0  # 2 / 64 < 0.05 < 2 / 32


@pytest.mark.parametrize(("m", "p"), [(10, 0.5), (37, 0.2), (400, 0.45), (5000, 0.9), (60000, 0.3)])
def test_the_binomial_law_is_scipy_s(m: int, p: float) -> None:
    for k in sorted({0, m // 7, int(m * p) - 3, int(m * p), int(m * p) + 5, m - 1}):
        assert binomial_cdf(k, m, p) == pytest.approx(float(stats.binom.cdf(k, m, p)), rel=1e-9, abs=1e-12)


def test_the_power_of_a_small_n_is_every_table_s_chance_summed() -> None:
    """n = 40: every (only B, only A, both-or-neither) table, its multinomial chance, and
    compare's own p-value (results.mcnemar) on it."""
    n, b_only, a_only = 40, 0.25, 0.08
    reject = 0.0
    for x in range(n + 1):
        for y in range(n - x + 1):
            if mcnemar_two_sided_p(x, y) < ALPHA:
                chances = [b_only, a_only, 1 - b_only - a_only]
                reject += float(stats.multinomial.pmf([x, y, n - x - y], n, chances))
    assert power(n, b_only, a_only, ALPHA) == pytest.approx(reject, abs=1e-10)


@pytest.mark.parametrize(("n", "b_only", "a_only"), [(300, 0.05, 0.02), (1200, 0.70 * 0.35, 0.65 * 0.30),
                                                     (150, 0.06, 0.0)])
def test_the_power_is_a_simulation_s(n: int, b_only: float, a_only: float) -> None:
    """20,000 simulated comparisons, each judged by scipy's exact binomial test."""
    rng = np.random.default_rng(64)
    runs = 20_000
    tables = rng.multinomial(n, [b_only, a_only, 1 - b_only - a_only], size=runs)
    x, y = tables[:, 0], tables[:, 1]
    p = np.minimum(1.0, 2 * stats.binom.cdf(np.minimum(x, y), x + y, 0.5))
    p = np.where(x + y == 0, 1.0, p)
    simulated = float(np.mean(p < ALPHA))
    for one in range(20):  # scipy's own test agrees with the vectorized tail
        if x[one] + y[one]:
            assert stats.binomtest(int(x[one]), int(x[one] + y[one])).pvalue == pytest.approx(p[one])
    se = (simulated * (1 - simulated) / runs) ** 0.5
    assert abs(power(n, b_only, a_only, ALPHA) - simulated) < 4 * se + 1e-9


@pytest.mark.parametrize("assumption", [FEWEST, INDEPENDENT])
@pytest.mark.parametrize("rate", [0.2, 0.5, 0.85])
def test_the_pairs_needed_are_the_first_that_reach_the_power_and_fall_as_d_grows(
        assumption: str, rate: float) -> None:
    found = []
    for d in (0.02, 0.03, 0.05, 0.1):
        chances = discordance(assumption, [(rate, 1.0)], [1.0], d, up=True)
        assert chances is not None
        n = pairs_needed(*chances, 0.8, ALPHA)
        assert n is not None and power(n, *chances, ALPHA) >= 0.8 > power(n - 1, *chances, ALPHA)
        # no sawtooth near the answer: none of the 15 below reaches it, none of the 15 above falls short
        assert all(power(m, *chances, ALPHA) < 0.8 for m in range(max(1, n - 15), n))
        assert all(power(m, *chances, ALPHA) >= 0.8 for m in range(n, n + 15))
        found.append(n)
    assert found == sorted(found, reverse=True) and len(set(found)) == len(found), found
    if assumption == FEWEST:  # the most favourable: six discordant pairs, all one way, reject
        assert found[0] == min(n for n in range(300, 500) if stats.binom.sf(5, n, 0.02) >= 0.8)


def test_a_higher_power_needs_more_pairs_and_a_difference_past_the_rates_is_none() -> None:
    chances = discordance(INDEPENDENT, [(0.5, 1.0)], [1.0], 0.05, up=True)
    assert chances is not None
    low, high = pairs_needed(*chances, 0.8, ALPHA), pairs_needed(*chances, 0.95, ALPHA)
    assert low is not None and high is not None and low < high
    assert discordance(INDEPENDENT, [(0.97, 1.0)], [1.0], 0.05, up=True) is None
    tiny = discordance(INDEPENDENT, [(0.5, 1.0)], [1.0], 0.002, up=True)
    assert tiny is not None and pairs_needed(*tiny, 0.8, ALPHA) is None  # about 2 million: past MOST_PAIRS


def test_n_episodes_like_the_planned_cases() -> None:
    shapes = [CaseShape(f"libero_10-00-s{k}", "libero_10-00", k, 100, 5, 1.2, "libero_10") for k in range(10)]
    assert [s.state for s in spread(shapes, 5)] == [0, 2, 4, 6, 8]
    more = spread(shapes, 25)
    assert len(more) == 25 and len({s.case for s in more}) == 25 and more[10].task == "libero_10-00#1"


def test_the_baseline_gate_s_simulation() -> None:
    baseline = {f"libero_90-{i:02d}": "success" if i % 2 else "failure" for i in range(40)}
    same = paired_fraction(DecideSettings("anytime", alpha=0.05), 0.05, baseline, "fast",
                           lambda case, theirs: 1.0 if theirs == "success" else 0.0, runs=20)
    assert same.verdicts["fail"] == 0.0
    worse = paired_fraction(DecideSettings("anytime", alpha=0.05), 0.05, baseline, "fast",
                            lambda case, theirs: 0.0, runs=20)
    assert worse.verdicts["fail"] == 1.0 and worse.share < same.share


SELECTION = ["--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_90",
             "--libero-task-ids=0-3"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the plugin (scripted adapter): tasks 1 and 2 of 0-3 succeed."""
    where = tmp_path_factory.mktemp("finished")
    run(where, "--libero-task-ids=0-3", success="1,2")
    return run_folder(where / "libero-results")


def plan(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = plan_main(args)
    said = capsys.readouterr()
    return code, said.out, said.err


def test_a_plan_with_detect_against_a_real_run(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan(["--detect", "0.1", "--baseline", str(finished), "--from", str(finished),
                           *SELECTION], capsys)
    assert code == 0, out + err
    lines = out.splitlines()
    [head] = [n for n, line in enumerate(lines) if line.startswith("--detect 10.0 points either way")]
    assert "power 80%" in lines[head] and f"--baseline {finished}" in lines[head]
    row = lines[head + 2].split()
    assert row[:4] == ["libero_90", "50.0%", "of", "4"], lines[head + 2]
    chances = discordance(INDEPENDENT, [(0.5, 1.0)], [1.0], 0.1, up=True)
    assert chances is not None
    assert f"{pairs_needed(*chances, 0.8, ALPHA):,}" in lines[head + 2]
    assert any(line.startswith("--libero-decide (anytime, alpha 0.05, margin 5.0 points) with "
                               "--libero-baseline") for line in lines)
    assert "never 'is B better'" in out

    code, out, err = plan(["--detect", "0.05", "--power", "0.9", "--baseline", str(finished),
                           "--from", str(finished), "--json", *SELECTION], capsys)
    assert code == 0, out + err
    found = json.loads(out)["detect"]
    assert (found["difference"], found["power"], found["alpha"]) == (0.05, 0.9, 0.05)
    [row_object] = found["rows"]
    assert (row_object["group"], row_object["baseline_rate"], row_object["planned_cases"]) == (
        "libero_90", 0.5, 4)
    fewest, independent = row_object["needs"][FEWEST], row_object["needs"][INDEPENDENT]
    assert fewest["pairs"] == pairs_needed(0.05, 0.0, 0.9, ALPHA)
    assert fewest["pairs"] < independent["pairs"] and 0 < fewest["wall_s"] < independent["wall_s"]
    assert found["decide"]["cases"] == 4 and set(found["decide"]["b_worse_by_difference"]) == {
        FEWEST, INDEPENDENT}


@pytest.mark.parametrize(("args", "said"), [
    (["--detect", "0"], "--detect='0' is not a difference of success rates between 0 and 1"),
    (["--detect", "1"], "--detect='1' is not a difference"),
    (["--detect", "nan"], "--detect='nan' is not a difference"),
    (["--detect", "1e309"], "--detect='1e309' is not a difference"),
    (["--detect", "0.02", "--power", "1"], "--power='1' is not a power between 0 and 1"),
    (["--detect", "0.02", "--power", "-0.5"], "--power='-0.5' is not a power"),
    (["--power", "0.9"], "--power and --baseline go with --detect D"),
])
def test_bad_detect_numbers_are_one_line(args: list[str], said: str, finished: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan([*args, "--baseline", str(finished), *SELECTION], capsys)
    assert (code, out) == (4, "") and err.startswith(f"pytest-libero plan: {said}"), err
    assert len(err.splitlines()) == 1


def test_detect_needs_a_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan(["--detect", "0.02", *SELECTION], capsys)
    assert (code, out) == (4, "") and err == (
        "pytest-libero plan: --detect needs --baseline RUN_DIR: the finished run whose success "
        "rates the difference is found at\n")


def test_a_bad_baseline_is_one_line_before_any_probe(finished: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    code, out, err = plan(["--detect", "0.02", "--baseline", str(empty), *SELECTION], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, out, len(lines)) == (4, "", 1), err
    assert lines[0].startswith("ERROR: --baseline") and str(empty) in lines[0] and "probing" not in err
    code, out, err = plan(["--detect", "0.02", "--baseline", str(finished), "--from", str(finished),
                           *SELECTION[:3], "--libero-suite=libero_10", "--libero-task-ids=0-1"], capsys)
    lines = [line for line in err.splitlines() if line.strip() and "busy" not in line]
    assert (code, out, len(lines)) == (4, "", 1), err
    assert "has no completed case in the planned selection's suites (libero_10; it has libero_90)" in lines[0]


def test_the_early_decision_is_not_simulated_over_a_large_selection(
        finished: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Past EARLY_MOST cases (600; here 3) the simulation would take minutes: said, not run."""
    from pytest_libero.planning import detect as detecting
    from pytest_libero.planning import report

    monkeypatch.setattr(detecting, "EARLY_MOST", 3)
    monkeypatch.setattr(report, "EARLY_MOST", 3)
    code, out, err = plan(["--detect", "0.1", "--baseline", str(finished), "--from", str(finished),
                           *SELECTION], capsys)
    assert code == 0, out + err
    assert "not simulated over 4 cases (more than 3: its exact rule's McNemar test" in out
    code, out, err = plan(["--detect", "0.1", "--baseline", str(finished), "--from", str(finished),
                           "--json", *SELECTION], capsys)
    early = json.loads(out)["detect"]["decide"]
    assert (early["simulated"], early["b_worse_by_difference"], early["cases"]) == (False, {}, 4)
