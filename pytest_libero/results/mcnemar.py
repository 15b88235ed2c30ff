"""Exact McNemar tests on paired outcomes: the one home of the binomial tails.

Only the discordant pairs carry information: under "no difference" each one goes either
way with probability 1/2, so their split is binomial with p = 1/2.
"""

from __future__ import annotations

from math import comb


def mcnemar_worse_p(worse: int, better: int) -> float:
    """Exact one-sided p-value that ``worse`` flips of ``worse + better`` arise by chance."""
    n = worse + better
    if n == 0:
        return 1.0
    tail: int = sum(comb(n, k) for k in range(worse, n + 1))
    return float(tail / 2**n)


def mcnemar_two_sided_p(one_way: int, other_way: int) -> float:
    """Exact two-sided p-value of a split of discordant pairs: twice the smaller tail,
    at most 1 (1 when no pair is discordant)."""
    n = one_way + other_way
    if n == 0:
        return 1.0
    tail: int = sum(comb(n, k) for k in range(min(one_way, other_way) + 1))
    return min(1.0, float(2 * tail / 2**n))
