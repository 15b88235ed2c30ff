"""The tables in four forms: the terminal's text, Markdown, LaTeX (booktabs) and JSON.

One list of cells per row serves the three text forms; each form decides how a number
and its interval are written and how the table is framed. LaTeX puts the interval
beside each number and a mark beside each significant difference, and ends with the
note that says which test, which interval and which correction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_libero.publish.comparison import OVERALL, Comparison, Rate, Row, p_text
from pytest_libero.publish.single import RunTable

FORMATS = ("text", "markdown", "latex", "json")
NAMED_CASES = 12
"""Discordant cases the text forms name per suite and side (JSON names all)."""
MARK = "*"


@dataclass(frozen=True)
class Number:
    """A value in points (or a rate in percent) with its interval."""

    value: float | None
    low: float
    high: float
    signed: bool = False
    mark: bool = False


def _plain(n: Number) -> str:
    if n.value is None:
        return "-"
    value = f"{n.value:+.1f}" if n.signed else f"{n.value:.1f}"
    return f"{value}{MARK if n.mark else ''} [{n.low:.1f}, {n.high:.1f}]"


def _latex_number(n: Number) -> str:
    if n.value is None:
        return "--"
    value = f"{n.value:+.1f}" if n.signed else f"{n.value:.1f}"
    mark = "^{*}" if n.mark else ""
    return f"${value}{mark}$ {{\\scriptsize [{n.low:.1f}, {n.high:.1f}]}}"


def _rate(rate: Rate) -> Number:
    return Number(None if rate.rate is None else 100 * rate.rate, 100 * rate.low, 100 * rate.high)


Cell = str | int | Number


def _comparison_grid(c: Comparison) -> tuple[list[str], list[list[Cell]]]:
    scores = any(r.score is not None for r in c.rows)
    header = ["suite", "pairs", "A %", "B %", "B - A (points)", "only A", "only B",
              "p", "p (Holm)"] + (["score B - A (points)"] if scores else [])
    grid: list[list[Cell]] = []
    for r in c.rows:
        cells: list[Cell] = [
            r.group, r.pairs, _rate(r.a), _rate(r.b),
            Number(100 * r.difference, 100 * r.low, 100 * r.high, True, r.significant(c.alpha)),
            len(r.a_only), len(r.b_only), p_text(r.p),
            "-" if r.p_adjusted is None else p_text(r.p_adjusted)]
        if scores:
            s = r.score
            cells.append("-" if s is None else Number(100 * s.difference, 100 * s.low,
                                                      100 * s.high, True))
        grid.append(cells)
    return header, grid


def _run_grid(t: RunTable) -> tuple[list[str], list[list[Cell]]]:
    scores = any(r.score is not None for r in t.rows)
    header = ["suite", "cases", "completed", "errored", "success %"] + (["score"] if scores else [])
    grid: list[list[Cell]] = []
    for r in t.rows:
        cells: list[Cell] = [r.group, r.cases, r.rate.of, r.errored, _rate(r.rate)]
        if scores:
            cells.append("-" if r.score is None else Number(100 * r.score.mean, 100 * r.score.low,
                                                            100 * r.score.high))
        grid.append(cells)
    return header, grid


def _text_grid(header: list[str], grid: list[list[Cell]]) -> list[str]:
    shown = [header] + [[_plain(c) if isinstance(c, Number) else str(c) for c in row] for row in grid]
    widths = [max(len(row[i]) for row in shown) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in shown]
    return [lines[0], "-" * len(lines[0]), *lines[1:]]


def _markdown_grid(header: list[str], grid: list[list[Cell]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    body = [line([(_plain(c) if isinstance(c, Number) else str(c)).replace("|", "\\|")
                  .replace(MARK, "\\*") for c in row]) for row in grid]
    return [line(header), line(["---"] + ["---:"] * (len(header) - 1)), *body]


def latex_text(text: str) -> str:
    """Text safe inside a LaTeX table cell."""
    for plain, escaped in (("\\", "\\textbackslash{}"), ("_", "\\_"), ("%", "\\%"), ("&", "\\&"),
                           ("#", "\\#"), ("~", "\\textasciitilde{}"), ("$", "\\$")):
        text = text.replace(plain, escaped)
    return text


def _latex_grid(header: list[str], grid: list[list[Cell]], note: str) -> list[str]:
    columns = "l" + "r" * (len(header) - 1)
    out = [f"\\begin{{tabular}}{{{columns}}}", "\\toprule",
           " & ".join(latex_text(h) for h in header) + " \\\\", "\\midrule"]
    for row in grid:
        if row[0] == OVERALL:
            out.append("\\midrule")
        out.append(" & ".join(_latex_number(c) if isinstance(c, Number) else latex_text(str(c))
                              for c in row) + " \\\\")
    out += ["\\bottomrule", "\\end{tabular}", "", f"{{\\footnotesize {latex_text(note)}}}"]
    return out


def comparison_note(c: Comparison) -> str:
    """What the numbers are: the footnote of every form."""
    level = round(100 * (1 - c.alpha))
    k = len(c.suites)
    note = (f"{c.pairing.statement()}. Rates over the paired episodes, with {level}% Wilson "
            f"intervals; B - A in percentage points with the exact {level}% interval of "
            "Fay and Lumbard (2021); p: exact two-sided McNemar test")
    note += (f", Holm-adjusted over the {k} suites (p (Holm)); {MARK}: adjusted p < {c.alpha:g}"
             if k > 1 else f"; {MARK}: p < {c.alpha:g}")
    if k > 1:
        note += f" (overall: its own p < {c.alpha:g})"
    if any(r.score is not None for r in c.rows):
        note += (f"; score: mean paired difference of partial-credit scores, {level}% betting "
                 "interval (Waudby-Smith and Ramdas, 2023)")
    return note + "."


def _discordant_lines(c: Comparison) -> list[str]:
    lines = []
    for r in c.suites:
        for side, cases in (("only A succeeded", r.a_only), ("only B succeeded", r.b_only)):
            if cases:
                named = ", ".join(cases[:NAMED_CASES])
                more = len(cases) - NAMED_CASES
                lines.append(f"{r.group}: {side}: {named}"
                             + (f" and {more} more (--json lists all)" if more > 0 else ""))
    return lines


def render_comparison(c: Comparison, form: str) -> str:
    header, grid = _comparison_grid(c)
    note = comparison_note(c)
    legend = [f"A: {c.a}", f"B: {c.b}"]
    if form == "latex":
        return "\n".join([f"% {line}" for line in legend]
                         + [f"% {c.verdict()}"] + _latex_grid(header, grid, note)) + "\n"
    if form == "markdown":
        discordant = [f"- {line}" for line in _discordant_lines(c)]
        return "\n".join([*(f"- {line}" for line in legend), "", *_markdown_grid(header, grid), "",
                          *([*discordant, ""] if discordant else []),
                          f"**{c.verdict()}**", "", f"<sub>{note}</sub>"]) + "\n"
    return "\n".join([*legend, *_text_grid(header, grid), *_discordant_lines(c), c.verdict(),
                      note]) + "\n"


def render_run(t: RunTable, form: str) -> str:
    header, grid = _run_grid(t)
    note = (f"{t.label}: {t.selected} selected cases, {t.not_run} not run. Success rates over "
            "completed cases with 95% Wilson intervals; errored cases are counted apart, "
            "never as failures")
    if any(r.score is not None for r in t.rows):
        note += "; score: mean partial-credit score with its 95% betting interval"
    note += "."
    if form == "latex":
        return "\n".join(_latex_grid(header, grid, note)) + "\n"
    if form == "markdown":
        return "\n".join([*_markdown_grid(header, grid), "", f"<sub>{note}</sub>"]) + "\n"
    return "\n".join([*_text_grid(header, grid), note]) + "\n"


def _rate_json(rate: Rate) -> dict[str, Any]:
    return {"successes": rate.successes, "completed": rate.of, "rate": rate.rate,
            "wilson95": [rate.low, rate.high]}


def comparison_json(c: Comparison) -> dict[str, Any]:
    def one(r: Row) -> dict[str, Any]:
        return {"group": r.group, "pairs": r.pairs, "a": _rate_json(r.a), "b": _rate_json(r.b),
                "difference": r.difference, "interval": [r.low, r.high],
                "only_a": list(r.a_only), "only_b": list(r.b_only), "mcnemar_p": r.p,
                "holm_p": r.p_adjusted, "significant": r.significant(c.alpha),
                "score": None if r.score is None else {
                    "pairs": r.score.pairs, "a_mean": r.score.a_mean, "b_mean": r.score.b_mean,
                    "difference": r.score.difference, "interval": [r.score.low, r.score.high]}}

    return {"a": c.a, "b": c.b, "alpha": c.alpha, "paired": len(c.pairing.pairs),
            "selected": c.pairing.selected, "left_out": c.pairing.left_out,
            "suites": [one(r) for r in c.suites], "overall": one(c.overall),
            "regression": c.regression, "verdict": c.verdict(), "note": comparison_note(c)}


def run_json(t: RunTable) -> dict[str, Any]:
    return {"run": t.label, "selected": t.selected, "not_run": t.not_run,
            "rows": [{"group": r.group, "cases": r.cases, "errored": r.errored,
                      "success": _rate_json(r.rate),
                      "score": None if r.score is None else {
                          "scored": r.score.scored, "mean": r.score.mean,
                          "interval95": [r.score.low, r.score.high]}} for r in t.rows]}
