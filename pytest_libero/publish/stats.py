"""The arithmetic of a paired comparison: pure functions, no records, no files.

A comparison of two runs over the same cases is a table of pairs: both succeeded, only
A, only B, neither. Three numbers come out of it here:

* the difference of the two success rates, B minus A, with an exact confidence
  interval: the melded interval of Fay and Lumbard (Statistics in Medicine 40(5), 2021).
  Write n for the pairs, m for the discordant ones and x for those only B succeeded on;
  the difference is psi (2 phi - 1), psi the chance that a pair is discordant and phi the
  chance that a discordant pair goes B's way. Each has an exact (Clopper-Pearson)
  confidence distribution, a Beta law; the difference's limits are the quantiles of
  T (2 B - 1) with T and B drawn from those laws, which keeps the interval's coverage at
  least its level (Fay, Proschan and Brittain, Biometrics 2015) and makes it exclude 0
  exactly when the exact McNemar test rejects (``results.mcnemar``);
* Holm's step-down adjustment of several p-values (one per suite);
* an interval for the mean paired difference of partial-credit scores, which lie in
  [-1, 1]: the betting interval ``results.betting.bounded_mean_interval`` gives for
  numbers in [0, 1], on the differences moved there and back.

The Beta laws' distribution function is the regularized incomplete beta function,
computed here by its continued fraction (numpy, no scipy at run time); tests check it,
and every interval, against scipy and statsmodels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_libero.results.betting import bounded_mean_interval

Array = npt.NDArray[np.float64]

_TINY = 1e-300
_EPS = 1e-15
_MAX_TERMS = 2000
_PANELS = 48
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(16)
_BISECTIONS = 44


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _continued_fraction(a: float, b: float, x: Array) -> Array:
    """The continued fraction of I_x(a, b), evaluated by the modified Lentz method; it
    converges fast where x < (a + 1) / (a + b + 2), where the caller uses it."""
    c = np.ones_like(x)
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
    h = d.copy()
    for k in range(1, _MAX_TERMS):
        for numerator in (k * (b - k) * x / ((a + 2 * k - 1) * (a + 2 * k)),
                          -(a + k) * (a + b + k) * x / ((a + 2 * k) * (a + 2 * k + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
            c = 1.0 + numerator / c
            c = np.where(np.abs(c) < _TINY, _TINY, c)
            step = d * c
            h = h * step
        if np.all(np.abs(step - 1.0) < _EPS):
            break
    result: Array = h
    return result


def beta_cdf(x: Array | float, a: float, b: float) -> Array:
    """P(X <= x) for X ~ Beta(a, b), a, b > 0 (the regularized incomplete beta I_x(a, b));
    0 below 0 and 1 above 1."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    out = np.where(x >= 1.0, 1.0, 0.0)
    inside = (x > 0.0) & (x < 1.0)
    if not inside.any():
        return out
    xs = x[inside]
    log_front = a * np.log(xs) + b * np.log1p(-xs) - _log_beta(a, b)
    direct = xs < (a + 1.0) / (a + b + 2.0)
    values = np.empty_like(xs)
    if direct.any():
        values[direct] = (np.exp(log_front[direct]) / a
                          * _continued_fraction(a, b, xs[direct]))
    if (~direct).any():
        values[~direct] = 1.0 - (np.exp(log_front[~direct]) / b
                                 * _continued_fraction(b, a, 1.0 - xs[~direct]))
    out[inside] = np.clip(values, 0.0, 1.0)
    return out


def beta_pdf(t: Array, a: float, b: float) -> Array:
    """The Beta(a, b) density at points strictly inside (0, 1)."""
    density: Array = np.exp((a - 1.0) * np.log(t) + (b - 1.0) * np.log1p(-t) - _log_beta(a, b))
    return density


@dataclass(frozen=True)
class Law:
    """A Beta law as a Clopper-Pearson confidence distribution gives it: Beta(a, b), where
    a = 0 is all its mass at 0 and b = 0 all its mass at 1."""

    a: float
    b: float

    @property
    def point(self) -> float | None:
        """Where all the mass is, for a law that is one point; None otherwise."""
        return 0.0 if self.a == 0 else 1.0 if self.b == 0 else None

    def cdf(self, x: Array | float) -> Array:
        spot = self.point
        if spot is not None:
            return np.where(np.asarray(x, dtype=np.float64) >= spot, 1.0, 0.0)
        return beta_cdf(x, self.a, self.b)

    def window(self, kink: float) -> Array:
        """Panel edges over where the density lies (40 standard deviations about the
        mean, cut to [0, 1]), with ``kink`` among them when it falls inside."""
        total = self.a + self.b
        mean = self.a / total
        sd = math.sqrt(self.a * self.b / (total * total * (total + 1.0)))
        low, high = max(0.0, mean - 40.0 * sd), min(1.0, mean + 40.0 * sd)
        edges = np.linspace(low, high, _PANELS + 1)
        if low < kink < high:
            edges = np.unique(np.append(edges, kink))
        return edges


def _integral(law: Law, kink: float) -> tuple[Array, Array]:
    """Gauss-Legendre nodes and weights (density included) for integrating over ``law``."""
    edges = law.window(kink)
    mids, halves = (edges[1:] + edges[:-1]) / 2.0, (edges[1:] - edges[:-1]) / 2.0
    t = (mids[:, None] + halves[:, None] * _NODES[None, :]).ravel()
    w = (halves[:, None] * _WEIGHTS[None, :]).ravel()
    t = np.clip(t, 1e-300, 1.0 - 1e-16)
    return t, w * beta_pdf(t, law.a, law.b)


def melded_tail(delta: float, scale: Law, split: Law, *, above: bool) -> float:
    """P(T (2 B - 1) >= delta) (``above``) or P(T (2 B - 1) <= delta), for independent
    T ~ ``scale`` and B ~ ``split``."""
    t_point, b_point = scale.point, split.point
    if b_point is not None:  # D = sign * T
        sign = 2.0 * b_point - 1.0
        if t_point is not None:
            value = t_point * sign
            return float(value >= delta if above else value <= delta)
        if sign > 0:
            below = float(scale.cdf(delta)[()])
            return 1.0 - below if above else below
        below_minus = float(scale.cdf(-delta)[()])  # -T <= delta  <=>  T >= -delta
        return below_minus if above else 1.0 - below_minus
    if t_point is not None:
        if t_point == 0.0:
            return float(delta <= 0.0 if above else delta >= 0.0)
        below = float(split.cdf(0.5 + delta / (2.0 * t_point))[()])
        return 1.0 - below if above else below
    t, w = _integral(scale, abs(delta))
    inner = split.cdf(0.5 + delta / (2.0 * t))
    return float(np.sum(w * ((1.0 - inner) if above else inner)))


def _lower_tail(delta: float, x: int, m: int, n: int) -> float:
    """How plausible a difference as low as ``delta`` is: P(T (2 B - 1) <= delta) with
    B from phi's lower law and T from psi's lower law above 0, its upper law below."""
    scale = Law(m, n - m + 1) if delta > 0 else Law(m + 1, n - m)
    return melded_tail(delta, scale, Law(x, m - x + 1), above=False)


def _upper_tail(delta: float, x: int, m: int, n: int) -> float:
    """The mirror of :func:`_lower_tail`: P(T (2 B - 1) >= delta), B from phi's upper law."""
    scale = Law(m + 1, n - m) if delta > 0 else Law(m, n - m + 1)
    return melded_tail(delta, scale, Law(x + 1, m - x), above=True)


def paired_difference_interval(b_only: int, a_only: int, pairs: int,
                               level: float = 0.95) -> tuple[float, float]:
    """Exact two-sided ``level`` interval for B's success rate minus A's over ``pairs``
    pairs, ``b_only`` of them won by B alone and ``a_only`` by A alone (Fay and Lumbard's
    melded interval; ``pairs`` > 0)."""
    if pairs <= 0 or b_only < 0 or a_only < 0 or b_only + a_only > pairs:
        raise ValueError(f"not a paired table: {b_only} and {a_only} discordant of {pairs} pairs")
    if not 0.0 < level < 1.0:
        raise ValueError(f"a confidence level is between 0 and 1, not {level}")
    x, m, n = b_only, b_only + a_only, pairs
    tail = (1.0 - level) / 2.0
    lower = _root(lambda d: _lower_tail(d, x, m, n) - tail, rising=True)
    upper = _root(lambda d: _upper_tail(d, x, m, n) - tail, rising=False)
    return lower, upper


def _root(function: Callable[[float], float], *, rising: bool) -> float:
    """Where a monotone function of the difference crosses 0 on [-1, 1], by bisection
    (the ends when it does not cross: the whole range is then in the interval)."""
    low, high = -1.0, 1.0
    if rising:  # P(D <= d) - tail: the lower limit is the smallest d where it is >= 0
        if function(low) >= 0:
            return -1.0
    elif function(high) >= 0:  # P(D >= d) - tail: the largest d where it is >= 0
        return 1.0
    for _ in range(_BISECTIONS):
        mid = (low + high) / 2.0
        if (function(mid) >= 0) == rising:
            high = mid
        else:
            low = mid
    return (low + high) / 2.0


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the k-th smallest times
    (count - k + 1), never below an earlier one, at most 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_mean_interval(differences: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """A ``level`` interval for the mean of paired differences in [-1, 1] (B's score minus
    A's): the betting interval for numbers in [0, 1] on (d + 1) / 2, moved back."""
    if not differences:
        return -1.0, 1.0
    low, high = bounded_mean_interval([(d + 1.0) / 2.0 for d in differences], 1.0 - level)
    return 2.0 * low - 1.0, 2.0 * high - 1.0
