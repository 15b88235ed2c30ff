"""The power of compare's paired test, and the fewest pairs that reach a stated power.

``pytest-libero compare`` judges B against A by McNemar's exact two-sided test
(``results.mcnemar``): of the m pairs that disagree, x went B's way, and the difference
is significant when twice the smaller binomial(m, 1/2) tail is below alpha. Over n pairs
drawn independently, a pair disagrees B's way with chance ``b_only`` and A's way with
chance ``a_only``; then m ~ binomial(n, psi), psi = b_only + a_only, and given m,
x ~ binomial(m, phi), phi = b_only / psi. The power is

    sum over m of P(m) * P(x <= c_m or x >= m - c_m | m)

where c_m, the test's critical count, is the largest k with 2 P(binomial(m, 1/2) <= k)
< alpha (no rejection at all when there is none). Every probability is summed from the
binomial law itself (log-gamma terms, exponentiated): no normal approximation. Sums are
cut where the terms left are below 1e-20 of the whole (10 standard deviations of m
about its mean, 14 of x); the log-gamma terms' rounding leaves a relative error of about
1e-10 at tens of thousands of pairs (tests/test_plan_detect.py checks the law against
scipy's, and the critical counts against the exact test's own p-values). No figure
printed can show either.

The exact test's power is not monotone in n (a count crossing its critical value makes
it jump), but over a random number of discordant pairs the jumps average out to a
fraction of a point; :func:`pairs_needed` bisects for the first n that reaches the
target, and tests/test_plan_detect.py checks its neighbours.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

MOST_PAIRS = 200_000
"""The largest sample searched: past it, a claim is said to need more."""
_M_SPAN = 10.0
_X_SPAN = 14.0

Array = npt.NDArray[np.float64]


@lru_cache(maxsize=1)
def _log_factorials() -> Array:
    return np.array([math.lgamma(k + 1.0) for k in range(MOST_PAIRS + 1)], dtype=np.float64)


def _log_pmf(xs: npt.NDArray[np.int64], m: int, p: float) -> Array:
    """log P(binomial(m, p) = x) for each x in ``xs``, 0 < p < 1."""
    lf = _log_factorials()
    result: Array = (lf[m] - lf[xs] - lf[m - xs] + xs * math.log(p) + (m - xs) * math.log1p(-p))
    return result


def binomial_cdf(k: int, m: int, p: float) -> float:
    """P(binomial(m, p) <= k), summed over the smaller side of the law."""
    if k < 0:
        return 0.0
    if k >= m:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    span = int(_X_SPAN * math.sqrt(m * p * (1.0 - p))) + 40
    if k <= m * p:  # the terms fall away below k: sum them down to where they vanish
        xs = np.arange(max(0, k - span), k + 1, dtype=np.int64)
        return float(np.exp(_log_pmf(xs, m, p)).sum())
    xs = np.arange(k + 1, min(m, k + 1 + span) + 1, dtype=np.int64)
    return max(0.0, 1.0 - float(np.exp(_log_pmf(xs, m, p)).sum()))


@lru_cache(maxsize=1 << 17)
def critical(m: int, alpha: float) -> int:
    """The largest x (B's share of ``m`` discordant pairs) that the two-sided exact test
    rejects at ``alpha``: 2 P(binomial(m, 1/2) <= x) < alpha; -1 when none is."""
    if m == 0:
        return -1
    # Start from the normal guess and step to the exact boundary.
    k = max(-1, int(m / 2 - math.sqrt(m) * _z(alpha) / 2) - 1)
    while k + 1 < m / 2 and 2.0 * binomial_cdf(k + 1, m, 0.5) < alpha:
        k += 1
    while k >= 0 and not 2.0 * binomial_cdf(k, m, 0.5) < alpha:
        k -= 1
    return k


@lru_cache(maxsize=16)
def _z(alpha: float) -> float:
    return NormalDist().inv_cdf(1.0 - alpha / 2.0)


def power(n: int, b_only: float, a_only: float, alpha: float) -> float:
    """The chance that n pairs give a significant difference at ``alpha`` (two-sided),
    each pair won by B alone with chance ``b_only`` and by A alone with ``a_only``."""
    if not 0 <= n <= MOST_PAIRS:
        raise ValueError(f"{n} pairs is outside 0 to {MOST_PAIRS:,}")
    psi = b_only + a_only
    if n == 0 or psi <= 0.0:
        return 0.0
    phi = b_only / psi
    if psi >= 1.0:
        ms = np.array([n], dtype=np.int64)
        weights = np.ones(1)
    else:
        spread = _M_SPAN * math.sqrt(n * psi * (1.0 - psi)) + 12
        ms = np.arange(max(0, int(n * psi - spread)), min(n, int(n * psi + spread)) + 1,
                       dtype=np.int64)
        weights = np.exp(_log_pmf(ms, n, psi))
    total = 0.0
    for m, weight in zip(ms.tolist(), weights.tolist()):
        if weight < 1e-20:
            continue
        c = critical(m, alpha)
        if c < 0:
            continue
        total += weight * (binomial_cdf(c, m, phi) + 1.0 - binomial_cdf(m - c - 1, m, phi))
    return min(total, 1.0)


def pairs_needed(b_only: float, a_only: float, target: float, alpha: float) -> int | None:
    """The first n whose power reaches ``target`` (bracketed from the normal
    approximation's n by steps of a quarter, then bisected); None when not even
    :data:`MOST_PAIRS` do."""
    if not 0.0 < target < 1.0:
        raise ValueError(f"a power is between 0 and 1, not {target}")
    if power(MOST_PAIRS, b_only, a_only, alpha) < target:
        return None

    def reaches(n: int) -> bool:
        return power(n, b_only, a_only, alpha) >= target

    guess = min(MOST_PAIRS, max(1, _normal_guess(b_only, a_only, target, alpha)))
    if reaches(guess):
        low, high = int(guess / 1.25), guess
        while low > 0 and reaches(low):
            low, high = int(low / 1.25), low
    else:
        low, high = guess, min(MOST_PAIRS, int(guess * 1.25) + 1)
        while not reaches(high):
            low, high = high, min(MOST_PAIRS, int(high * 1.25) + 1)
    while high - low > 1:
        mid = (low + high) // 2
        if reaches(mid):
            high = mid
        else:
            low = mid
    return high


def _normal_guess(b_only: float, a_only: float, target: float, alpha: float) -> int:
    """The textbook (Connor 1987) n for McNemar's test: a starting point, not the answer."""
    psi, delta = b_only + a_only, abs(b_only - a_only)
    if delta <= 0.0:
        return MOST_PAIRS
    spread = math.sqrt(max(psi - delta * delta, 0.0))
    root = _z(alpha) * math.sqrt(psi) + NormalDist().inv_cdf(target) * spread
    return math.ceil(root * root / (delta * delta)) if root > 0 else 1
