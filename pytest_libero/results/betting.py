"""A betting test for the mean of a finite population drawn without replacement.

A run that decides early with ``--libero-decide=anytime`` asks about the rate the whole
selection would give: a fixed list of N numbers in [0, 1] (one per case), whose mean is
unknown. Its cases run in a uniformly random order, so the first t of them are a sample
drawn without replacement. Waudby-Smith and Ramdas ("Confidence sequences for sampling
without replacement", NeurIPS 2020) turn such a sample into a test: if the population's
mean is m, the next draw's expected value, given the draws so far, is

    m_t = (N * m - S_{t-1}) / (N - t + 1)        (S_{t-1}: the sum of the draws so far)

so a bettor who stakes ``lam_t * (x_t - m_t)`` at each draw, ``lam_t`` chosen from the
earlier draws only, sees a wealth ``prod (1 + lam_t (x_t - m_t))`` that is a nonnegative
martingale when the mean is m. By Ville's inequality it reaches ``1/alpha`` with
probability at most ``alpha``, at any time, however the stopping time is chosen.

:class:`Wealth` is one such bettor against one boundary ``null`` in one direction
(+1: it bets the mean is above ``null``; -1: below), updated a draw at a time; its stake
is the aGRAPA rule (Waudby-Smith and Ramdas, "Estimating means of bounded random
variables by betting", JRSS-B 2023), truncated so that no draw can take more than a
share ``truncation`` of the wealth. :func:`interval` inverts the same test over every
possible population mean k/N, which gives an anytime-valid interval for the mean.
docs/decide.md has the argument. Pure arithmetic: no records, no files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

TRUNCATION = 0.7
"""The largest share of its wealth a bettor risks on one draw (a draw against the bet
leaves at least 1 - TRUNCATION of it)."""
PRIOR_MEAN = 0.5
PRIOR_VARIANCE = 0.25
"""The estimates a bettor starts from, weighted as one draw (regularised, as in the
paper's plug-in rules)."""

ORDER_SEED = 20260101
"""The fixed order in which :func:`bounded_mean_interval` bets on a run's scores."""

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]


def null_mean_now(population: int, null: float, total: float, seen: int) -> float:
    """The expected value of the next draw if the population's mean is ``null``, given
    ``seen`` draws summing to ``total``; outside [0, 1] when that mean is impossible."""
    return (population * null - total) / (population - seen)


def stake(mean_hat: float, var_hat: float, m_now: float, direction: int,
          truncation: float = TRUNCATION) -> float:
    """aGRAPA's stake toward ``direction``, 0 when the estimate points the other way, and
    at most ``truncation`` of what keeps the wealth nonnegative for any draw in [0, 1].
    No stake when ``m_now`` is 0, 1 or outside: the null is then settled for certain
    (the exact rule's business), and a bet could only divide by zero."""
    if not 0.0 < m_now < 1.0:
        return 0.0
    edge = direction * (mean_hat - m_now)
    if edge <= 0.0:
        return 0.0
    most = truncation / (m_now if direction > 0 else 1.0 - m_now)
    return min(edge / (var_hat + edge * edge), most)


@dataclass
class Wealth:
    """One bettor's wealth against "the population's mean is ``null``" (and, by the
    direction of its bets, against every mean on the far side of ``null``)."""

    population: int
    null: float
    direction: int
    """+1: the bettor gains when draws run above the null; -1: below."""
    truncation: float = TRUNCATION
    seen: int = 0
    total: float = 0.0
    mean_hat: float = PRIOR_MEAN
    var_hat: float = PRIOR_VARIANCE
    _squares: float = PRIOR_VARIANCE
    log_wealth: float = 0.0
    log_peak: float = 0.0
    """The highest the wealth has been (Ville's inequality bounds its maximum)."""

    @property
    def wealth(self) -> float:
        return math.exp(min(self.log_wealth, 700.0))

    @property
    def peak(self) -> float:
        return math.exp(min(self.log_peak, 700.0))

    def observe(self, x: float) -> None:
        """One more draw: stake chosen before it is seen, then the wealth moves."""
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"a draw must lie in [0, 1], got {x}")
        if self.seen >= self.population:
            raise ValueError(f"all {self.population} members have been drawn")
        m_now = null_mean_now(self.population, self.null, self.total, self.seen)
        lam = stake(self.mean_hat, self.var_hat, m_now, self.direction, self.truncation)
        if lam > 0.0:
            self.log_wealth += math.log1p(self.direction * lam * (x - m_now))
            self.log_peak = max(self.log_peak, self.log_wealth)
        self.seen += 1
        self.total += x
        self._squares += (x - self.mean_hat) ** 2
        self.mean_hat = (PRIOR_MEAN + self.total) / (self.seen + 1)
        self.var_hat = self._squares / (self.seen + 1)

    def reached(self, threshold: float) -> bool:
        return self.log_peak >= math.log(threshold)


def _stakes(mean_hat: float, var_hat: float, m_now: Array, direction: int,
            truncation: float) -> Array:
    """:func:`stake` over an array of null means (the same rule, element by element)."""
    inside = (m_now > 0.0) & (m_now < 1.0)
    edge = direction * (mean_hat - m_now)
    safe = np.where(inside, m_now if direction > 0 else 1.0 - m_now, 1.0)
    raw = np.where(edge > 0.0, edge / (var_hat + edge * edge), 0.0)
    with np.errstate(over="ignore"):  # a null mean a hair above 0: an infinite cap
        return np.where(inside, np.minimum(raw, truncation / safe), 0.0)


def _rejected(draws: Sequence[float], grid: Array, null_means: Callable[[float, int], Array],
              alpha: float, truncation: float) -> tuple[Mask, float]:
    """Every mean on ``grid`` whose test a bettor rejected (either direction at ``alpha /
    2``) over ``draws`` in their order, and the draws' total: the one betting update both
    intervals make, ``null_means(total, seen)`` being each null's expected next draw."""
    log_threshold = math.log(2.0 / alpha)
    logs = {+1: np.zeros_like(grid), -1: np.zeros_like(grid)}
    rejected = np.zeros(grid.shape, dtype=bool)
    total, squares, mean_hat, var_hat = 0.0, PRIOR_VARIANCE, PRIOR_MEAN, PRIOR_VARIANCE
    for seen, x in enumerate(draws):
        m_now = null_means(total, seen)
        for direction, log_wealth in logs.items():
            lam = _stakes(mean_hat, var_hat, m_now, direction, truncation)
            log_wealth += np.log1p(np.where(lam > 0.0, direction * lam * (x - m_now), 0.0))
            rejected |= log_wealth >= log_threshold
        total += x
        squares += (x - mean_hat) ** 2
        mean_hat = (PRIOR_MEAN + total) / (seen + 2)
        var_hat = squares / (seen + 2)
    return rejected, total


def interval(draws: Sequence[float], population: int, alpha: float, *,
             truncation: float = TRUNCATION) -> tuple[float, float]:
    """An anytime-valid 1 - ``alpha`` interval for the mean of a population of
    ``population`` members in {0, 1}, from its first ``len(draws)`` draws in a uniformly
    random order: every mean k/N whose test was never rejected (either direction at
    ``alpha / 2``), with the means the draws already rule out for certain removed."""
    grid = np.arange(population + 1, dtype=np.float64) / population

    def null_means(total: float, seen: int) -> Array:  # each null's next draw, without replacement
        return (population * grid - total) / (population - seen)

    rejected, total = _rejected(draws, grid, null_means, alpha, truncation)
    remaining = population - len(draws)
    rejected |= (grid * population < total - 1e-9) | (grid * population > total + remaining + 1e-9)
    kept = np.flatnonzero(~rejected)
    if kept.size == 0:  # every mean rejected: only the certain bounds are left to say
        return total / population, (total + remaining) / population
    return float(grid[kept[0]]), float(grid[kept[-1]])


def bounded_mean_interval(draws: Sequence[float], alpha: float, *, resolution: int = 1000,
                          truncation: float = TRUNCATION) -> tuple[float, float]:
    """A 1 - ``alpha`` interval for the mean of independent draws in [0, 1] (the
    partial-credit score's; not only 0 and 1): the same bettors against every mean on a
    grid of ``resolution`` steps, each mean's next draw expected at the mean itself (an
    unbounded population), and a grid point's rejection widened to the next point out so
    the discretised interval never cuts a mean the test kept. Valid at any number of draws
    (Waudby-Smith and Ramdas 2023's hedged interval), so also at the run's end."""
    grid = np.arange(resolution + 1, dtype=np.float64) / resolution
    if not draws:
        return 0.0, 1.0
    # The bettors see the draws in an order fixed before looking at them: a run's records
    # come suite by suite, and a bettor fed all of one suite first would take the order
    # for evidence. Independent draws stay independent under a fixed permutation.
    shuffled = np.asarray(draws, dtype=np.float64)[
        np.random.default_rng(ORDER_SEED).permutation(len(draws))]
    rejected, total = _rejected(shuffled.tolist(), grid, lambda total, seen: grid, alpha, truncation)
    rejected[0] |= total > 0.0  # a mean of 0 (or 1) allows no other draw
    rejected[-1] |= total < len(draws)
    kept = np.flatnonzero(~rejected)
    if kept.size == 0:
        mean = total / len(draws)
        return mean, mean
    low, high = max(int(kept[0]) - 1, 0), min(int(kept[-1]) + 1, resolution)
    return float(grid[low]), float(grid[high])
