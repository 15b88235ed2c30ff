"""A paired comparison of two runs: one row per suite and one overall, and the verdict.

Each row counts the pairs of its group (``pairing.Pair.group``): both runs' success rates
over those pairs with 95% Wilson intervals, B minus A with its exact interval
(``stats.paired_difference_interval``), the discordant cases by name, the exact McNemar
p-value and, where both records of a pair have a partial-credit score, the mean score
difference with its interval. The suites' p-values are Holm-adjusted over the suites
compared; a suite differs significantly when its adjusted p-value is below alpha, the
whole when its own p-value is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_libero.publish.pairing import Pair, Pairing
from pytest_libero.publish.stats import holm, paired_difference_interval, paired_mean_interval
from pytest_libero.results.mcnemar import mcnemar_two_sided_p
from pytest_libero.results.rates import wilson_interval
from pytest_libero.results.scores import scored

OVERALL = "overall"
ALPHA = 0.05


@dataclass(frozen=True)
class Rate:
    """Successes over completed episodes, with the 95% Wilson interval."""

    successes: int
    of: int
    low: float
    high: float

    @classmethod
    def of_counts(cls, successes: int, of: int) -> Rate:
        return cls(successes, of, *wilson_interval(successes, of))

    @property
    def rate(self) -> float | None:
        return self.successes / self.of if self.of else None


@dataclass(frozen=True)
class ScoreDifference:
    """Partial credit over the pairs where both cases have a score: means, B - A, interval."""

    pairs: int
    a_mean: float
    b_mean: float
    difference: float
    low: float
    high: float


@dataclass(frozen=True)
class Row:
    group: str
    pairs: int
    a: Rate
    b: Rate
    difference: float
    """B's rate minus A's, a fraction (x100 for points)."""
    low: float
    high: float
    a_only: tuple[str, ...]
    """Cases only A succeeded on: B lost them."""
    b_only: tuple[str, ...]
    p: float
    """Exact two-sided McNemar p-value."""
    p_adjusted: float | None
    """Holm-adjusted over the suites; None on the overall row."""
    score: ScoreDifference | None

    @property
    def p_judged(self) -> float:
        """The p-value the row is judged by: Holm's for a suite, its own overall."""
        return self.p if self.p_adjusted is None else self.p_adjusted

    def significant(self, alpha: float) -> bool:
        return self.p_judged < alpha


def row(group: str, pairs: Sequence[Pair], level: float = 0.95) -> Row:
    """One group's numbers (``p_adjusted`` left None: :func:`compare` fills it)."""
    n = len(pairs)
    a_only = tuple(p.case for p in pairs if p.a["outcome"] == "success" and p.b["outcome"] != "success")
    b_only = tuple(p.case for p in pairs if p.b["outcome"] == "success" and p.a["outcome"] != "success")
    a_wins = sum(p.a["outcome"] == "success" for p in pairs)
    b_wins = sum(p.b["outcome"] == "success" for p in pairs)
    low, high = paired_difference_interval(len(b_only), len(a_only), n, level)
    return Row(group, n, Rate.of_counts(a_wins, n), Rate.of_counts(b_wins, n),
               (b_wins - a_wins) / n, low, high, a_only, b_only,
               mcnemar_two_sided_p(len(b_only), len(a_only)), None, _scores(pairs, level))


def _scores(pairs: Sequence[Pair], level: float) -> ScoreDifference | None:
    both = [(sa, sb) for p in pairs
            if (sa := scored(p.a)) is not None and (sb := scored(p.b)) is not None]
    if not both:
        return None
    differences = [sb - sa for sa, sb in both]
    low, high = paired_mean_interval(differences, level)
    return ScoreDifference(len(both), sum(a for a, _ in both) / len(both),
                           sum(b for _, b in both) / len(both),
                           sum(differences) / len(differences), low, high)


@dataclass(frozen=True)
class Comparison:
    """B against A: the suites' rows, the overall row, and how the cases paired."""

    a: str
    b: str
    pairing: Pairing
    suites: tuple[Row, ...]
    overall: Row
    alpha: float = ALPHA

    @property
    def rows(self) -> tuple[Row, ...]:
        """The suites' rows, then the overall row (alone when there is one suite: it is
        the same numbers)."""
        return self.suites + (self.overall,) if len(self.suites) > 1 else self.suites

    @property
    def regression(self) -> bool:
        """B is significantly worse than A on the whole or on a suite (Holm-adjusted)."""
        return any(r.significant(self.alpha) and r.difference < 0 for r in self.rows)

    def verdict(self) -> str:
        """The plain-words verdict, one line."""
        level = round(100 * (1 - self.alpha))
        said = [_claim(r, level) for r in self.suites if r.significant(self.alpha)]
        if not said:
            said.append("no significant difference on any suite" if len(self.suites) > 1
                        else f"no significant difference on {self.suites[0].group} "
                        f"({_numbers(self.suites[0], level)})")
        elif len(said) < len(self.suites):
            said.append("no significant difference on the other suites")
        if len(self.suites) > 1:
            o = self.overall
            said.append(_claim(o, level) if o.significant(self.alpha)
                        else f"no significant difference overall ({_numbers(o, level)})")
        return f"B ({self.b}) against A ({self.a}): " + "; ".join(said)


def _claim(r: Row, level: int) -> str:
    better = "better" if r.difference > 0 else "worse"
    where = "overall" if r.group == OVERALL else f"on {r.group}"
    return (f"B is {better} than A {where} by {abs(100 * r.difference):.1f} points "
            f"({level}% CI {100 * r.low:.1f} to {100 * r.high:.1f}), p = {p_text(r.p_judged)}")


def _numbers(r: Row, level: int) -> str:
    return (f"B - A = {100 * r.difference:+.1f} points, {level}% CI {100 * r.low:.1f} to "
            f"{100 * r.high:.1f}, p = {p_text(r.p_judged)}")


def p_text(p: float) -> str:
    """A p-value as tables print it: three decimals, or two significant digits below 0.001."""
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def compare(a: str, b: str, pairing: Pairing, alpha: float = ALPHA) -> Comparison:
    """B against A over the pairs: each suite's row, Holm across the suites, the overall row."""
    level = 1.0 - alpha
    groups = pairing.groups
    rows = [row(g, [p for p in pairing.pairs if p.group == g], level) for g in groups]
    adjusted = holm([r.p for r in rows])
    suites = tuple(replace(r, p_adjusted=q) for r, q in zip(rows, adjusted))
    return Comparison(a, b, pairing, suites, row(OVERALL, pairing.pairs, level), alpha)
