"""The case record: one typed shape for what a case was, what happened and why.

The record is built once per case (``episode.case``), travels from a worker to the
controller as JSON inside its test report, and is the line results.jsonl keeps and the
input of summaries, gates, merges and Allure. Its JSON form *is* this shape: the
TypedDicts below (and the catalog's ``EntryRecord``, which ``Entry.as_dict`` and
``Entry.from_dict`` write and read) type the plain dict, so there is no second encoding
to drift apart.
docs/records.md describes every field. ``RECORD_SCHEMA`` goes into run.json; a change
of shape that readers must know about raises its version.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, cast

from pytest_libero.catalog.entries import EntryRecord
from pytest_libero.episode.record_check import record_problem
from pytest_libero.files import json_text
from pytest_libero.goals.progress import ProgressRecord

RECORD_SCHEMA = "pytest-libero-record/2"
READABLE_SCHEMAS = ("pytest-libero-record/1", RECORD_SCHEMA)
"""The record shapes this version reads. Schema 2 stopped repeating a generated
perturbation's kind and level at the top of ``entry`` (it keeps them under
``perturbation``) and renamed summary.json's ``only_ood``/``ood`` pair keys to
``only_perturbed``/``perturbed``; :meth:`Entry.from_dict` reads either entry."""
RECORD_PROPERTY = "libero_record"
"""The user property that carries a case's record in its test reports."""
UNATTEMPTED_PROPERTY = "libero_unattempted"
"""Set on a case left unattempted because the run had to stop; holds why and how to
finish the run."""

Outcome = Literal["success", "failure", "errored"]


class BudgetRecord(TypedDict):
    """The budget (P7) and where its control cap came from."""

    mode: str
    control_cap: int
    cap_source: str
    replan_interval: int
    max_policy_calls: int


class CountersRecord(TypedDict):
    """P9: each counter kept on its own."""

    policy_calls: int
    decisions: int
    executed_controls: int
    init_controls: int
    stop_signals: int
    first_success_control: int | None
    first_success_policy_call: int | None
    held_controls: NotRequired[int]
    """Controls with no usable action: no motion, the last gripper (0 when synchronous)."""
    stale_actions: NotRequired[int]
    """Actions that arrived too late to run, the heads of late chunks."""


class ClipRecord(TypedDict):
    """What clipping changed in one chunk's executed prefix."""

    values: int
    max_excess: float


class ChunkSummary(TypedDict):
    """One policy reply as the episode used it."""

    call: int
    horizon: int
    executed: int
    """How many of its actions ran, from ``first_executed_index`` on."""
    stop: bool
    sent_at_control: NotRequired[int]
    """The control whose observation the call carried (protocol/clock.py)."""
    usable_at_control: NotRequired[int]
    delay_controls: NotRequired[int]
    latency_s: NotRequired[float]
    """Wall seconds around the call, as the evaluator saw it."""
    first_executed_index: NotRequired[int | None]
    clipped: NotRequired[ClipRecord]


class ClippingRecord(TypedDict):
    """Clipped actions summed over the case; zeros in strict mode."""

    mode: str
    chunks: int
    values: int
    max_excess: float


class ErrorRecord(TypedDict):
    """Why a case errored (P11): whose fault (kind), what exactly (cause), the rest."""

    kind: str
    cause: str
    type: str
    message: str
    """Cut to 2,000 characters (the whole text: ``full_text_file``)."""
    traceback: str
    """Its last 8,000 characters when longer."""
    full_text: NotRequired[str]
    """Only between the error and the case's folder: everything that was cut."""
    full_text_file: NotRequired[str]
    """When a text was cut: the case folder's file that holds all of it (error.txt)."""


class CaseRecord(TypedDict):
    """One case, as every reader sees it."""

    case: str
    entry: EntryRecord
    profile: str
    evidence_class: str
    evidence_level: NotRequired[str]
    """What the case folder keeps (``--libero-evidence``): "full", "replayable" or "dataset".
    Absent in records written before evidence levels: read as "full"."""
    track: str
    budget: BudgetRecord
    stop_rule: str
    identity: dict[str, Any]
    """The adapter's hashes of what it installed (BDDL, init-state file, the state)."""
    policy_metadata: dict[str, Any]
    state_fed: NotRequired[str]
    """What the profile fed the model as state: ``proprio`` (the rgb+proprio track),
    ``constant`` (declared constants) or ``none``. Absent in older records."""
    outcome: Outcome
    termination: str | None
    truncation: str | None
    counters: CountersRecord
    chunks: list[ChunkSummary]
    clipping: NotRequired[ClippingRecord]
    """Absent in records written before clipping existed: read as strict, none clipped."""
    error: ErrorRecord | None
    summary: str
    started_at: float
    """The case's turn: when its worker handed it to its process (``time.time()``)."""
    setup_started_at: NotRequired[float]
    """When a set-up done ahead of the turn began (``--libero-prebuild``); absent when
    the case set up at its turn."""
    timings: dict[str, float]
    worker: str
    gpu: str | None
    egl_device: str | None
    pid: int
    renders: NotRequired[dict[str, int] | None]
    evidence: NotRequired[dict[str, Any] | None]
    evidence_dir: NotRequired[str]
    native_outcome: NotRequired[str]
    """What LIBERO said before an evidence failure errored the case."""
    child_exit: NotRequired[int | None]
    nodeid: NotRequired[str]
    safety: NotRequired[dict[str, Any]]
    """The safety axis (docs/safety.md): verdict, events, first contact; absent when the
    adapter has no monitor or the environment never opened."""
    engagement: NotRequired[str]
    """idle, reached, manipulated or success; absent with ``safety``."""
    progress: NotRequired[ProgressRecord]
    """Each goal predicate's course (docs/records.md); absent in older records and from
    adapters that do not track it."""
    score: NotRequired[float | None]
    """The partial-credit score in [0, 1] (``goals.score``); null for an errored case;
    absent with ``progress``."""
    perturbation: NotRequired[dict[str, Any]]
    """A generated perturbation as drawn and applied: kind, level, parameters, seed,
    generator, redraws (docs/perturbations.md); absent for unperturbed cases."""
    reply_horizon: NotRequired[int | None]
    """The fewest actions any reply of the case held (None when none held actions);
    ``chunks`` keeps each reply's own. Absent in older records."""
    reply_note: NotRequired[str]
    """Present when ``reply_horizon`` is below the replan interval K: says so in words."""


def short_chunk_note(reply_horizon: int | None, replan_interval: int, *, served: bool) -> str | None:
    """The words for replies shorter than K (the contract allows them: not an error, but
    the run executes fewer actions per call than its profile says), else None."""
    if reply_horizon is None or reply_horizon >= replan_interval:
        return None
    who = "the server" if served else "the policy"
    return (f"{who} answers {reply_horizon} actions per call; the profile executes up to "
            f"{replan_interval}")


def record_from_json(data: Any) -> CaseRecord:
    """A record read back from JSON (results.jsonl, a report's user property), checked
    whole (``record_check.record_problem``); ValueError naming the field otherwise."""
    problem = record_problem(data)
    if problem is not None:
        case = data.get("case") if isinstance(data, dict) else None
        where = f"the record of {str(case)[:60]!r}" if isinstance(case, str) else "a record"
        raise ValueError(f"{where} is not a pytest-libero case record: {problem}")
    return cast(CaseRecord, data)


def record_to_json(record: CaseRecord) -> str:
    """The record as one line of JSON (results.jsonl, the report's user property)."""
    return json_text(record)
