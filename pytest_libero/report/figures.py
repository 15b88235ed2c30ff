"""The robustness picture: OOD success per kind and level beside the in-distribution rate.

Drawn from summary.json alone (its ``robustness`` block), so a live run, a merged run
and a copied folder draw the same picture. It is a small hand-written SVG: one row per
kind and per level of a kind with several levels, a bar for the OOD success rate with
its 95% Wilson interval as a whisker, a tick for the twins' rate over the same pairs,
and a dashed line at the in-distribution rate, with the numbers written beside.
No plotting library is needed for bars and lines, and the text stays searchable.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from html import escape
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.files import write_text_atomic
from pytest_libero.protocol.errors import SetupError
from pytest_libero.report.allure import write_figure_result
from pytest_libero.results.layout import FIGURE_NAME, read_summary
from pytest_libero.results.robustness import KIND_LABELS
from pytest_libero.results.run_reader import load_run

_LEFT, _BAR_W, _RIGHT, _ROW_H, _TOP = 200, 360, 330, 30, 58
_WIDTH = _LEFT + _BAR_W + _RIGHT


def figure_rows(robustness: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(label, group) in drawing order: each kind, then its levels when it has several."""
    rows: list[tuple[str, Mapping[str, Any]]] = []
    for kind, group in (robustness.get("kinds") or {}).items():
        rows.append((KIND_LABELS.get(kind, kind), group))
        levels = (robustness.get("levels") or {}).get(kind) or {}
        if len(levels) > 1:
            rows += [(f"{kind} level {level}", block) for level, block in levels.items()]
    return rows


def robustness_svg(summary: Mapping[str, Any]) -> str:
    """The picture as SVG text; ``summary`` must hold a ``robustness`` block."""
    robustness = summary["robustness"]
    rows = figure_rows(robustness)
    height = _TOP + _ROW_H * (len(rows) + 1) + 30
    native = robustness.get("in_distribution") or {}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_WIDTH} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{_WIDTH}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="15" font-weight="bold">Robustness: OOD and '
        f'perturbed cases beside their twins ({escape(str(summary.get("profile", "")))})</text>',
        '<text x="10" y="38" fill="#555">bar: OOD success rate, whisker: 95% Wilson '
        'interval, black tick: the twins over the same pairs, dashed: in-distribution</text>',
    ]
    for tick in range(0, 101, 25):
        x = _x(tick / 100)
        parts.append(f'<line x1="{x}" y1="{_TOP - 6}" x2="{x}" y2="{height - 26}" stroke="#eee"/>')
        parts.append(f'<text x="{x}" y="{height - 12}" text-anchor="middle" fill="#555">'
                     f'{tick}%</text>')
    parts.append(_row(0, "in-distribution (twins)", native, None, "#4c78a8", ""))
    for n, (label, group) in enumerate(rows, start=1):
        paired = group.get("paired") or {}
        parts.append(_row(n, label, group, paired.get("twin"), "#e45756", _pair_text(paired)))
    if native.get("rate") is not None:
        x = _x(native["rate"])
        parts.append(f'<line class="in-distribution" x1="{x}" y1="{_TOP - 6}" x2="{x}" '
                     f'y2="{height - 26}" stroke="#4c78a8" stroke-dasharray="4 3"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_figure(run_dir: Path) -> Path | None:
    """Draw ``run_dir/robustness.svg`` from its summary.json; None when it has no OOD case.

    A summary.json missing or damaged is refused (SetupError) as every command refuses it."""
    summary = read_summary(run_dir)
    if not summary.get("robustness"):
        return None
    path = run_dir / FIGURE_NAME
    write_text_atomic(path, robustness_svg(summary))
    return path


def _x(rate: float) -> float:
    return round(_LEFT + _BAR_W * max(0.0, min(1.0, rate)), 1)


def _row(n: int, label: str, rate: Mapping[str, Any], twin: Mapping[str, Any] | None,
         colour: str, extra: str) -> str:
    y = _TOP + n * _ROW_H
    parts = [f'<g class="row" data-label="{escape(label)}">',
             f'<text x="{_LEFT - 8}" y="{y + 15}" text-anchor="end">{escape(label)}</text>']
    value = rate.get("rate")
    if value is None:
        parts.append(f'<text x="{_LEFT + 4}" y="{y + 15}" fill="#555">no completed case</text>')
    else:
        low, high = rate.get("wilson95") or (0.0, 1.0)
        parts += [
            f'<rect class="bar" x="{_LEFT}" y="{y + 4}" width="{_x(value) - _LEFT}" height="16" '
            f'fill="{colour}" data-rate="{value:.6f}"/>',
            f'<line class="interval" x1="{_x(low)}" y1="{y + 12}" x2="{_x(high)}" y2="{y + 12}" '
            'stroke="#222" stroke-width="1.5"/>',
        ]
        if twin and twin.get("rate") is not None:
            x = _x(twin["rate"])
            parts.append(f'<line class="twin" x1="{x}" y1="{y + 1}" x2="{x}" y2="{y + 23}" '
                         'stroke="black" stroke-width="3"/>')
        parts.append(
            f'<text x="{_LEFT + _BAR_W + 8}" y="{y + 15}">{rate["successes"]}/{rate["completed"]}'
            f' = {value:.0%} [{low:.0%}-{high:.0%}]{escape(extra)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _pair_text(paired: Mapping[str, Any]) -> str:
    if not paired.get("pairs"):
        return "; no pair with its twin"
    text = f"; drop {paired['drop_points']:+.1f} pts, p={paired['mcnemar_p']:.2g}"
    score = paired.get("score")
    if score:  # the paired drop in partial-credit score beside the drop in success
        text += f"; score drop {score['drop_points']:+.1f} pts"
    return text


class RobustnessFigure:
    """Draws the picture once the recorder has written summary.json (a wrapper: it runs
    after every other session-finish hook), and files it in the Allure results too."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        yield
        try:
            figure = write_figure(self.run_dir)
            alluredir = session.config.getoption("allure_report_dir", default=None)
            if figure is not None and alluredir:
                write_figure_result(Path(alluredir), figure, load_run(self.run_dir))
        except (OSError, SetupError) as exc:  # the picture is lost, never the run's outcome
            session.config.issue_config_time_warning(
                pytest.PytestWarning(f"pytest-libero: could not draw {FIGURE_NAME}: {exc}"),
                stacklevel=2)
