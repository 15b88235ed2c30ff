"""LIBERO success rates published by their authors, shipped for orientation only.

``data/published_results.json`` keeps only figures read in their primary source, each
with that source's title, commit-pinned URL, repository path and commit, and a note on
the protocol behind it. A full-mode summary shows them beside each suite it measured,
under a key that says they are published, not measured; fast mode never shows them
(one init state per task is not the published protocol). They are no part of the
protocol identity: adding a figure changes no run's identity.

Each figure also says what state its loop fed the model (``state_fed``: ``eef_pose``,
the 8-value end-effector state, or ``none``). This protocol never sends an end-effector
pose, so beside a figure whose loop fed state this run did not, the block carries a
one-line ``state_caveat`` (shown by the terminal too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from pytest_libero.protocol.shipped import reading, shipped_json

PUBLISHED_FILE = "published_results.json"
PUBLISHED_SCHEMA = "pytest-libero-published-results/1"
AVERAGE = "average"
"""The key of the mean over the four suites openpi, OpenVLA and OpenVLA-OFT report."""
NOTE = "published by their authors; not measured by this run"
PUBLISHED_STATES = ("eef_pose", "none")


@dataclass(frozen=True)
class PublishedFigure:
    """One model's published LIBERO success rates (percent) and where they come from."""

    label: str
    """Short name for the terminal (``pi05``, ``OpenVLA``)."""
    model: str
    source_title: str
    url: str
    """Commit-pinned URL of the source document."""
    repo: str
    path: str
    commit: str
    protocol: str
    success_percent: Mapping[str, float]
    state_fed: str = "eef_pose"
    """What the figure's loop fed the model as state: ``eef_pose`` or ``none``."""

    def state_differs(self, run_state: str | None) -> bool:
        """Whether its loop fed a state this run (``proprio``/``constant``/``none``) did not."""
        return run_state is not None and self.state_fed != "none" and self.state_fed != run_state

    def as_dict(self, key: str) -> dict[str, Any]:
        """The figure for one suite (or ``average``), as summary.json shows it."""
        return {
            "model": self.label,
            "model_name": self.model,
            "percent": self.success_percent[key],
            "source": self.url,
            "source_title": self.source_title,
            "commit": self.commit,
            "protocol": self.protocol,
            "state_fed": self.state_fed,
        }


@dataclass(frozen=True)
class PublishedResults:
    """Every kept figure, the suites their average spans, and suites none covers."""

    figures: tuple[PublishedFigure, ...]
    average_suites: tuple[str, ...]
    not_published: Mapping[str, str]
    note: str

    def for_suite(self, suite: str) -> list[PublishedFigure]:
        """Figures published for ``suite`` (or ``average``), in the file's order."""
        return [f for f in self.figures if suite in f.success_percent]

    def block(self, suite: str, run_state: str | None = None) -> dict[str, Any]:
        """summary.json's ``published_figures`` for one suite (or the average);
        ``run_state`` is what this run's profile fed as state (``Profile.state_fed``)."""
        figures = self.for_suite(suite)
        data: dict[str, Any] = {
            "note": NOTE,
            "figures": [f.as_dict(suite) for f in figures],
        }
        differ = [f.label for f in figures if f.state_differs(run_state)]
        if differ:
            data["state_caveat"] = (
                f"state differs: {', '.join(differ)} fed the 8-value end-effector state "
                f"(position, axis-angle, gripper); this run fed {run_state} "
                f"({STATE_WORDS.get(run_state or '', run_state)}), so it is not the same "
                "evaluation"
            )
        if suite in self.not_published:
            data["none_because"] = self.not_published[suite]
        return data


STATE_WORDS = {
    "proprio": "7 joint and 2 gripper encoders",
    "constant": "the profile's declared constants",
    "none": "no state",
    "mixed": "different states in different cases",
}


@cache
def load_published() -> PublishedResults:
    """Read and check the packaged figures: every one names a pinned source."""
    with reading(PUBLISHED_FILE):  # a damaged file is a usage error naming it
        return _published(shipped_json(PUBLISHED_FILE))


def _published(data: dict[str, Any]) -> PublishedResults:
    if data.get("schema") != PUBLISHED_SCHEMA:
        raise ValueError(f"{PUBLISHED_FILE}: schema {data.get('schema')!r}, expected {PUBLISHED_SCHEMA}")
    figures = []
    for raw in data["figures"]:
        source = raw["source"]
        commit = str(source["commit"])
        if commit not in str(source["url"]):
            raise ValueError(f"{PUBLISHED_FILE}: {raw['label']}: URL is not pinned to {commit}")
        percent = {str(k): float(v) for k, v in raw["success_percent"].items()}
        if not percent or any(not 0.0 <= v <= 100.0 for v in percent.values()):
            raise ValueError(f"{PUBLISHED_FILE}: {raw['label']}: percentages must be 0-100")
        figures.append(PublishedFigure(
            label=str(raw["label"]),
            model=str(raw["model"]),
            source_title=str(source["title"]),
            url=str(source["url"]),
            repo=str(source["repo"]),
            path=str(source["path"]),
            commit=commit,
            protocol=str(raw["protocol"]),
            success_percent=percent,
            state_fed=_state(raw),
        ))
    return PublishedResults(
        figures=tuple(figures),
        average_suites=tuple(data["average_suites"]),
        not_published=dict(data.get("not_published") or {}),
        note=str(data["note"]),
    )


def _state(raw: Mapping[str, Any]) -> str:
    state = str(raw.get("state_fed"))
    if state not in PUBLISHED_STATES:
        raise ValueError(f"{PUBLISHED_FILE}: {raw['label']}: state_fed {state!r}, expected one "
                         f"of {', '.join(PUBLISHED_STATES)}")
    return state
