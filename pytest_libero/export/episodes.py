"""A run folder as the episodes of a dataset: which cases, their frames, and what is refused.

Everything that can refuse is checked here, before the dataset's folder exists and
before lerobot is imported: the output folder must be new, the run folder readable, its
evidence level ``full`` (only that level keeps the observations themselves), and every
completed case's folder whole (its files as the record hashed them, its index and
actions one episode). Errored cases are skipped and listed, as are completed cases at
whose controls no observation was taken. The images are decoded and checked against
their sha256 only while the dataset is written (``dataset.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_libero.audit.integrity import altered_files, missing_files
from pytest_libero.audit.timeline import timeline_problem
from pytest_libero.catalog.entries import variant_of
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.controls import read_control_hashes
from pytest_libero.evidence.layout import CONTROLS_NAME, DATASET, FULL, STREAMED, EvidenceError
from pytest_libero.evidence.reader import evidence_level, read_actions, read_observation_hashes
from pytest_libero.export.frames import (
    DECISIONS,
    EVERY_CONTROL,
    FramePlan,
    FrameRuleError,
    LayoutRefused,
    plan_frames,
)
from pytest_libero.files import CorruptLine, new_folder_problem
from pytest_libero.goals.score import derived_score
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.parameters import CONTROL_FREQ_HZ
from pytest_libero.results.run_reader import RunRead, read_run, shown

COPY_CASE = "copy the case folder again from where the run wrote it"
DATASET_OPTION = "--libero-evidence=dataset"


@dataclass(frozen=True)
class EpisodePlan:
    """One completed case as one episode: its record, its folder and its frames."""

    case: str
    folder: Path
    record: CaseRecord
    frames: tuple[FramePlan, ...]


@dataclass(frozen=True)
class Skipped:
    """A case that is not an episode, and why."""

    case: str
    why: str


@dataclass(frozen=True)
class Layout:
    """Which controls are frames (``export/frames.py``), at what rate, and why."""

    name: str
    interval: int
    """K: the actions per frame in the decisions layout (1 in every_control)."""
    why: str

    @property
    def fps(self) -> int:
        return CONTROL_FREQ_HZ // self.interval

    @property
    def every_control(self) -> bool:
        return self.name == EVERY_CONTROL


@dataclass(frozen=True)
class ExportPlan:
    """What an export writes, checked whole before anything is written."""

    read: RunRead
    episodes: tuple[EpisodePlan, ...]
    skipped: tuple[Skipped, ...]
    layout: Layout

    @property
    def run_id(self) -> str:
        return str(self.read.run.get("run_id") or self.read.path.name)

    @property
    def frames(self) -> int:
        return sum(len(e.frames) for e in self.episodes)


def plan_export(run_dir: Path, out: Path) -> ExportPlan:
    """The episodes of ``run_dir`` for a new dataset at ``out``; SetupError, naming the
    folder and the fix, for anything that cannot be exported whole."""
    try:
        os.lstat(out)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:  # a name longer than the system takes, a loop of links
        raise SetupError(f"cannot make {shown(out)} ({exc.strerror or exc}); name a new folder "
                         "where this user can write") from None
    else:
        raise SetupError(f"{shown(out)} exists; lerobot writes a dataset into a new folder only "
                         "(LeRobotDataset.create): name one that does not exist yet")
    if out.resolve().is_relative_to(run_dir.resolve()):
        raise SetupError(f"{shown(out)} lies inside {shown(run_dir)}, the run being exported; an "
                         "export never writes into the evidence it reads: name a folder outside it")
    cannot = new_folder_problem(out)
    if cannot is not None:  # before lerobot loads (seconds) and before anything is read
        raise SetupError(f"cannot make {shown(out)} ({cannot}); name a new folder where this user "
                         "can write")
    read = read_run(run_dir)
    level = str(read.run["plan"].get("evidence", FULL))
    if level not in STREAMED:
        raise SetupError(_level_refusal(run_dir, level))
    layout = _layout(read, run_dir, level)
    order = {case: n for n, case in enumerate(read.run["plan"]["selection_cases"])}
    records = sorted(read.records, key=lambda r: order.get(r["case"], len(order)))
    episodes, skipped = [], []
    for record in records:
        if record["outcome"] == "errored":
            error = record.get("error")
            cause = error["cause"] if error else "unknown"
            skipped.append(Skipped(record["case"], f"errored ({cause})"))
            continue
        episode = _episode(read, record, layout)
        if episode.frames:
            episodes.append(episode)
        else:
            skipped.append(Skipped(record["case"], "completed without a control after an "
                                   "observation: no frame"))
    if not episodes:
        raise SetupError(f"{run_dir} has no completed case with a frame to export"
                         + "".join(f"; {s.case}: {s.why}" for s in skipped[:5]))
    _same_shapes(episodes)
    return ExportPlan(read, tuple(episodes), tuple(skipped), layout)


def _layout(read: RunRead, run_dir: Path, level: str) -> Layout:
    """Every control a frame when the run kept every control's images, else decision
    frames K controls apart; either way a frame's timestamp is its simulated time."""
    if level == DATASET:
        return Layout(EVERY_CONTROL, 1, "the run kept both cameras' images at every control "
                      "(--libero-evidence=dataset): one frame per executed control")
    interval = read.run["plan"].get("replan_interval")
    if type(interval) is not int or interval < 1 or CONTROL_FREQ_HZ % interval:
        raise SetupError(f"{run_dir}: its replan interval K = {shown(interval)} does not divide "
                         f"LeRobot's {CONTROL_FREQ_HZ} controls per second, so decision frames "
                         "K controls apart have no whole frame rate: run it with "
                         f"{DATASET_OPTION} for one frame per control")
    return Layout(DECISIONS, interval, f"the run kept only the delivered observations (evidence "
                  f"level {level}): one frame per decision, every K = {interval} controls, at "
                  f"{CONTROL_FREQ_HZ // interval} fps, with the K actions executed from it")


def _level_refusal(where: Path, level: str) -> str:
    return (f"{where}: its evidence level is {level!r}, which keeps only the sha256 of each "
            "observation, not the images (no observations.<camera>.mkv streams); a dataset "
            "needs the observations themselves: run it with --libero-evidence=full")


def _episode(read: RunRead, record: CaseRecord, layout: Layout) -> EpisodePlan:
    """One completed case's folder, checked whole, and its frames."""
    case = record["case"]
    folder = read.case_folder(case)
    if folder.problem is not None:
        raise SetupError(f"case {shown(case)}: {folder.problem}")
    path = folder.path
    broken = missing_files(path, record) or [
        f"{path / d['field'].removeprefix('file ')} does not have the sha256 its record holds"
        for d in altered_files(path, record)]
    if broken:
        raise SetupError(f"case {shown(case)}: {broken[0]}; the case folder is damaged: {COPY_CASE}")
    try:
        level = evidence_level(path)
        if level not in STREAMED:
            raise SetupError(_level_refusal(path, level))
        counters: dict[str, Any] = dict(record.get("counters") or {})
        chunks = list(read_actions(path))
        off_clock = timeline_problem(record, chunks, read.clock)
        if off_clock is not None:
            raise EvidenceError(off_clock)
        if layout.every_control:
            _check_controls(path, int(counters.get("executed_controls", 0)))
        frames = plan_frames(list(read_observation_hashes(path)), chunks,
                             int(counters.get("executed_controls", 0)), counters.get("held_controls"),
                             layout=layout.name, interval=layout.interval)
    except LayoutRefused as exc:
        raise SetupError(f"case {shown(case)}: {exc}; decision frames would claim times that did "
                         f"not happen: run it with {DATASET_OPTION} for one frame per control") from None
    except (EvidenceError, CorruptLine, FrameRuleError, KeyError, TypeError, ValueError) as exc:
        raise SetupError(f"case {shown(case)}: {path} is damaged ({type(exc).__name__}: "
                         f"{shown(exc)}): {COPY_CASE}") from None
    return EpisodePlan(case, path, record, tuple(frames))


def _check_controls(path: Path, executed: int) -> None:
    """A dataset-level case keeps one line per control, 0 (the settled scene) to the last
    executed, in order: checked here, from the hashes alone, before lerobot loads (a
    control missing, kept twice or out of order is refused by name, not found half way
    through writing the dataset)."""
    kept = read_control_hashes(path)
    if kept is None:
        raise EvidenceError(f"{path / CONTROLS_NAME} is missing, which a case of a run at "
                            "evidence level dataset keeps")
    if len(kept) != executed + 1:
        raise EvidenceError(f"{CONTROLS_NAME} keeps {len(kept)} controls, but the record counts "
                            f"{executed} executed after the settled scene ({executed + 1} in all)")


def _same_shapes(episodes: list[EpisodePlan]) -> None:
    """One dataset has one set of features: every case the same cameras and track."""
    tracks = {str(e.record.get("track", "rgb")) for e in episodes}
    if len(tracks) > 1:
        raise SetupError(f"the cases ran on different tracks ({', '.join(sorted(tracks))}); a "
                         "dataset has one set of features: export a run of one track")


def episode_metadata(plan: ExportPlan, index: int, episode: EpisodePlan) -> dict[str, Any]:
    """What a dataset keeps of each episode beside its frames (docs/export.md)."""
    record = episode.record
    run = plan.read.run
    profile = run["plan"]["profile"]
    variant = variant_of(record["entry"])
    counters: dict[str, Any] = dict(record.get("counters") or {})
    identity = record.get("identity") or {}
    return {
        "episode_index": index,
        "case": episode.case,
        "run_id": plan.run_id,
        "outcome": record["outcome"],
        "cause": record.get("termination") or record.get("truncation"),
        "perturbation": None if variant is None else {
            "kind": variant.kind, "level": variant.level,
            "source": "generated" if "perturbation" in record["entry"] else "libero-pro"},
        "protocol_identity": run["protocol_identity"],
        "variant_identity": record["entry"].get("identity"),
        "profile": {"name": profile.get("name"), "sha256": profile.get("sha256"),
                    "source": profile.get("source")},
        "renderer": identity.get("renderer"),
        "instruction": record["entry"].get("language"),
        "layout": plan.layout.name,
        "frames": len(episode.frames),
        "held_actions": sum(f.held for f in episode.frames),
        "controls": counters.get("executed_controls"),
        "policy_calls": counters.get("policy_calls"),
        "first_success_control": counters.get("first_success_control"),
        "score": derived_score(record),
        "progress": record.get("progress"),
        "track": record.get("track"),
        "replan_interval": (record.get("budget") or {}).get("replan_interval"),
    }
