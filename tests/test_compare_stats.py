"""compare's statistics (issue 64) against independent computations: scipy's incomplete
beta, quadrature and root finder for the melded interval, scipy's exact binomial test and
statsmodels' exact McNemar for the p-value, statsmodels' Wilson interval and Holm."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from pytest_libero.publish.stats import beta_cdf, holm, paired_difference_interval, paired_mean_interval
from pytest_libero.results.mcnemar import mcnemar_two_sided_p
from pytest_libero.results.rates import wilson_interval


@pytest.mark.parametrize(("a", "b"), [(1, 1), (1, 6500), (3, 5), (300, 6000), (0.5, 0.5),
                                      (2000, 4500), (50, 1), (7, 7)])
def test_the_incomplete_beta_is_scipy_s(a: float, b: float) -> None:
    x = np.concatenate([np.random.default_rng(int(a * 7 + b)).uniform(0, 1, 300),
                        [0.0, 1e-12, a / (a + b), 1 - 1e-12, 1.0, -0.5, 1.5]])
    assert np.max(np.abs(beta_cdf(x, a, b) - special.betainc(a, b, np.clip(x, 0, 1)))) < 1e-10


def _reference(x: int, m: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Fay and Lumbard's melded interval, written again from the paper's definition with
    scipy's Beta laws, adaptive quadrature and Brent's root finder."""
    tail = (1 - level) / 2

    def law_cdf(y: float, a: float, b: float) -> float:
        if a == 0:
            return 1.0 if y >= 0 else 0.0
        if b == 0:
            return 1.0 if y >= 1 else 0.0
        return float(stats.beta.cdf(min(max(y, 0.0), 1.0), a, b))

    def below(d: float) -> float:  # P(T (2B - 1) <= d), B ~ Beta(x, m - x + 1)
        ta, tb = (m, n - m + 1) if d > 0 else (m + 1, n - m)
        if ta == 0:
            return float(d >= 0)
        if tb == 0:
            return law_cdf(0.5 + d / 2, x, m - x + 1)
        if x == 0:
            return float(stats.beta.sf(-d, ta, tb))
        return integrate.quad(lambda t: law_cdf(0.5 + d / (2 * t), x, m - x + 1) * stats.beta.pdf(t, ta, tb),
                              0, 1, points=[abs(d)] if 0 < abs(d) < 1 else None, limit=200,
                              epsabs=1e-13)[0]

    def above(d: float) -> float:  # P(T (2B - 1) >= d), B ~ Beta(x + 1, m - x)
        ta, tb = (m + 1, n - m) if d > 0 else (m, n - m + 1)
        if ta == 0:
            return float(d <= 0)
        if tb == 0:
            return 1 - law_cdf(0.5 + d / 2, x + 1, m - x) if m > x else float(d <= 1)
        if x == m:
            return float(stats.beta.sf(d, ta, tb))
        return integrate.quad(lambda t: (1 - law_cdf(0.5 + d / (2 * t), x + 1, m - x))
                              * stats.beta.pdf(t, ta, tb), 0, 1,
                              points=[abs(d)] if 0 < abs(d) < 1 else None, limit=200, epsabs=1e-13)[0]

    low = -1.0 if below(-1) >= tail else optimize.brentq(lambda d: below(d) - tail, -1, 1, xtol=1e-13)
    high = 1.0 if above(1) >= tail else optimize.brentq(lambda d: above(d) - tail, -1, 1, xtol=1e-13)
    return low, high


@pytest.mark.parametrize(("x", "m", "n"), [(3, 5, 20), (0, 0, 20), (5, 5, 5), (0, 5, 5), (10, 14, 50),
                                           (40, 60, 1000), (2, 3, 6500), (100, 180, 6500), (1, 1, 2),
                                           (0, 3, 10), (7, 7, 30)])
def test_the_difference_interval_is_fay_and_lumbard_s(x: int, m: int, n: int) -> None:
    mine = paired_difference_interval(x, m - x, n)
    assert mine == pytest.approx(_reference(x, m, n), abs=1e-8)
    assert mine[0] <= (2 * x - m) / n <= mine[1]


def test_with_no_discordant_pair_the_interval_has_its_closed_form() -> None:
    # m = 0: the limits are -+ the upper 97.5% Clopper-Pearson limit of 0 of n discordant.
    for n in (1, 5, 40, 500):
        bound = 1 - 0.025 ** (1 / n)
        assert paired_difference_interval(0, 0, n) == pytest.approx((-bound, bound), abs=1e-9)


def test_the_interval_excludes_zero_exactly_when_the_exact_mcnemar_test_rejects() -> None:
    n = 12
    for m in range(1, n + 1):
        for x in range(m + 1):
            low, high = paired_difference_interval(x, m - x, n)
            p = stats.binomtest(x, m, 0.5).pvalue
            assert (low > 0 or high < 0) == (p < 0.05), (x, m, p, low, high)


@pytest.mark.parametrize(("b_only", "a_only"), [(0, 0), (1, 0), (3, 9), (9, 3), (10, 10), (0, 17),
                                                (25, 40), (120, 80)])
def test_the_mcnemar_p_value_is_scipy_s_and_statsmodels_s(b_only: int, a_only: int) -> None:
    p = mcnemar_two_sided_p(b_only, a_only)
    if b_only + a_only:
        assert p == pytest.approx(stats.binomtest(b_only, b_only + a_only, 0.5).pvalue, rel=1e-9)
    table = [[7, a_only], [b_only, 11]]
    assert p == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-9)


@pytest.mark.parametrize(("successes", "n"), [(0, 1), (0, 20), (1, 2), (7, 10), (20, 20), (433, 500),
                                              (3, 6500)])
def test_the_wilson_interval_is_statsmodels(successes: int, n: int) -> None:
    assert wilson_interval(successes, n) == pytest.approx(
        proportion_confint(successes, n, alpha=0.05, method="wilson"), abs=1e-7)


@pytest.mark.parametrize("p_values", [[0.01, 0.04, 0.03, 0.2], [0.5], [0.001, 0.001, 0.9],
                                      [0.04, 0.01], [1.0, 0.02, 0.0125, 0.3, 0.011]])
def test_holm_is_statsmodels(p_values: list[float]) -> None:
    assert holm(p_values) == pytest.approx(list(multipletests(p_values, method="holm")[1]), abs=1e-12)


LADDER = {0.0: 0.4, 0.25: 0.2, 0.5: 0.2, 1.0: 0.2}
"""A's score and its chance."""
CHANGE = {-0.25: 0.1, 0.0: 0.6, 0.25: 0.2, 0.5: 0.1}
"""How B's score moves from A's (then kept in [0, 1]) and its chance."""


def test_the_paired_score_interval_covers_the_mean_at_its_level() -> None:
    mean = sum(pa * pd * (min(max(a + d, 0.0), 1.0) - a)
               for a, pa in LADDER.items() for d, pd in CHANGE.items())
    assert mean == pytest.approx(0.065)
    rng = np.random.default_rng(64)
    covered = 0
    for _ in range(200):
        a = rng.choice(list(LADDER), size=30, p=list(LADDER.values()))
        b = np.clip(a + rng.choice(list(CHANGE), size=30, p=list(CHANGE.values())), 0, 1)
        low, high = paired_mean_interval(list(b - a))
        assert -1 <= low <= float(np.mean(b - a)) <= high <= 1
        covered += low <= mean <= high
    assert covered >= 190  # 95% or more (a betting interval is conservative)
    assert paired_mean_interval([]) == (-1.0, 1.0)
    low, high = paired_mean_interval([0.0] * 50)
    assert low < 0 < high and high - low < 0.5
