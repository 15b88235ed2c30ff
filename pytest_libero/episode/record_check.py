"""What a case record must be before any reader trusts it: the one check, all the way down.

Every command reads records (results.jsonl's lines, a case folder's episode.json)
through :func:`record_problem`, so a value that would break a reader later (a
summary half written, a merge folder left without its summary.json) is refused at
read time instead, naming the field.

The rule: a record holds ``case``, ``entry`` and ``outcome`` (every reader needs them;
a hand-made record may hold no more). Every other field it holds has its documented
type at every depth (docs/records.md), and a table holds the keys its readers take
from it: clipping its counts, an error its kind, cause and message, an evidence file
its bytes and sha256, a renderer fingerprint its identity keys. An ``entry`` is either
its suite (and index) alone or whole: a variant or an init state is read whole
(``Entry.from_dict``). A ``score`` other than null stands on the record's ``progress``
(it is derived from it). Fields this version does not know are left alone. A record
longer than :data:`RECORD_LIMIT` is never read at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import NATIVE_FAMILY, OOD_FAMILY
from pytest_libero.evidence.layout import LEVELS
from pytest_libero.evidence.renderer import fingerprint_problem
from pytest_libero.files import folder_name_problem
from pytest_libero.goals.progress import progress_problem
from pytest_libero.goals.score import score_disagreement, score_problem
from pytest_libero.safety.verdict import ENGAGEMENT, VERDICTS

RECORD_LIMIT = 8 << 20
"""The most bytes a record may take (a results.jsonl line, an episode.json). A record is
a few kilobytes; a full-mode one listing every chunk of a long episode, tens."""
OUTCOMES = ("success", "failure", "errored")

Shape = Union[tuple[type, ...], "Table", "ListOf", "OneOf", "Check", "Maybe"]
"""A leaf's JSON types (``(int,)``: an integer, never true or false), or one of these."""


@dataclass(frozen=True)
class Table:
    """A JSON object: the keys it must hold, those it may hold, each with its shape;
    ``each`` is the shape of every value of a table keyed by name, ``names`` what such a
    name must be."""

    required: Mapping[str, Shape] = field(default_factory=dict)
    optional: Mapping[str, Shape] = field(default_factory=dict)
    each: Shape | None = None
    names: Callable[[str], str | None] | None = None


@dataclass(frozen=True)
class ListOf:
    item: Shape


@dataclass(frozen=True)
class OneOf:
    """Text, one of these words."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class Maybe:
    """The shape, or null."""

    shape: Shape


@dataclass(frozen=True)
class Check:
    """A rule no shape says: the problem with the value, or None."""

    problem: Callable[[Any], str | None]


TEXT: tuple[type, ...] = (str,)
INT: tuple[type, ...] = (int,)
NUMBER: tuple[type, ...] = (int, float)
TABLE: tuple[type, ...] = (dict,)
NULL = type(None)


def _file_name(name: str) -> str | None:
    problem = folder_name_problem(name)
    return None if problem is None else f"names {name[:60]!r}, not a file of the case folder"


def _case_id(value: Any) -> str | None:
    try:
        CaseId.parse(value)
    except ValueError:
        return f"is {str(value)[:60]!r}, not a case id"
    return None


def _fingerprint(value: Any) -> str | None:
    problem = fingerprint_problem(value)
    return None if problem is None else f"{problem}, not a renderer fingerprint"


ENTRY_WHOLE = Table(
    required={"suite": TEXT, "index": INT, "name": TEXT, "language": TEXT, "bddl_file": TEXT,
              "init_states_file": TEXT},
    optional={"init_state": INT, "family": OneOf((NATIVE_FAMILY, OOD_FAMILY)),
              "language_source": TEXT, "kind": TEXT, "level": INT,
              "perturbation": Table({"kind": TEXT, "level": INT}),
              "twin": Check(_case_id), "identity": TEXT},
)
"""An entry as ``Entry.as_dict`` writes it (schema 1 also had ``kind``, ``level`` at the
top of a generated perturbation's)."""
ENTRY_ALONE = Table({"suite": TEXT}, {"index": INT})
"""An entry by its suite alone: what a native case's rate needs."""

ERROR = Table({"kind": TEXT, "cause": TEXT, "message": TEXT},
              {"type": TEXT, "traceback": TEXT, "full_text": TEXT, "full_text_file": TEXT})
EVENT = Table(optional={"control": INT, "object": TEXT, "predicate": TEXT, "measure": TEXT,
                        "value": NUMBER, "threshold": NUMBER})
EVIDENCE = Table(optional={
    "files": Table(each=Table({"bytes": INT, "sha256": TEXT}), names=_file_name),
    "level": OneOf(LEVELS), "errors": ListOf(TEXT), "format": TEXT,
})
RECORD = Table(
    required={"case": TEXT, "outcome": OneOf(OUTCOMES)},
    optional={
        "profile": TEXT, "evidence_class": TEXT, "evidence_level": OneOf(LEVELS), "track": TEXT,
        "budget": Table(optional={"mode": TEXT, "control_cap": INT, "cap_source": TEXT,
                                  "replan_interval": INT, "max_policy_calls": INT}),
        "stop_rule": TEXT,
        "identity": Table(optional={"renderer": Check(_fingerprint), "perturbation": TABLE}),
        "policy_metadata": TABLE, "state_fed": TEXT,
        "termination": (str, NULL), "truncation": (str, NULL),
        "counters": Table(optional={
            "policy_calls": INT, "decisions": INT, "executed_controls": INT,
            "init_controls": INT, "stop_signals": INT, "first_success_control": (int, NULL),
            "first_success_policy_call": (int, NULL)}),
        "chunks": ListOf(Table(optional={
            "call": INT, "horizon": (int, NULL), "executed": INT, "stop": (bool, NULL),
            "clipped": Table({"values": INT, "max_excess": NUMBER})})),
        "clipping": Table({"chunks": INT, "values": INT, "max_excess": NUMBER}, {"mode": TEXT}),
        "error": Maybe(ERROR),
        "summary": TEXT, "started_at": NUMBER, "setup_started_at": NUMBER,
        "timings": Table(each=NUMBER), "worker": TEXT, "gpu": (str, NULL),
        "egl_device": (str, NULL), "pid": INT, "renders": Maybe(Table(each=INT)),
        "evidence": Maybe(EVIDENCE), "evidence_dir": TEXT, "native_outcome": TEXT,
        "child_exit": (int, NULL), "nodeid": TEXT,
        "safety": Table({"verdict": OneOf(VERDICTS)},
                        {"events": ListOf(EVENT), "first_contact_control": (int, NULL)}),
        "engagement": OneOf(ENGAGEMENT),
        "perturbation": Table(optional={"kind": TEXT, "level": INT, "parameters": TABLE,
                                        "seed": INT, "generator": TEXT, "redraws": INT}),
        "reply_horizon": (int, NULL), "reply_note": TEXT,
        "progress": Check(progress_problem), "score": Check(score_problem),
    },
)
"""A case record (``episode.record.CaseRecord``) as every reader may take it; ``entry``
is checked on its own (:func:`entry_problem`)."""


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def shape_problem(value: Any, shape: Shape, where: str) -> str | None:
    """Why ``value`` (found at ``where``, a dotted path) does not have ``shape``, or None."""
    if isinstance(shape, tuple):
        if any(isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
               for kind in shape):
            return None
        return f"{where!r} is a {_type_name(value)}"
    if isinstance(shape, Maybe):
        return None if value is None else shape_problem(value, shape.shape, where)
    if isinstance(shape, OneOf):
        if not isinstance(value, str):
            return f"{where!r} is a {_type_name(value)}"
        return None if value in shape.words else (
            f"{where!r} is {value[:40]!r} ({', '.join(shape.words)})")
    if isinstance(shape, Check):
        problem = shape.problem(value)
        return None if problem is None else f"{where!r} {problem}"
    if isinstance(shape, ListOf):
        if not isinstance(value, list):
            return f"{where!r} is a {_type_name(value)}"
        return next((p for n, item in enumerate(value)
                     if (p := shape_problem(item, shape.item, f"{where}[{n}]")) is not None), None)
    return _table_problem(value, shape, where)


def _table_problem(value: Any, table: Table, where: str) -> str | None:
    """A table's problem: a key it must hold, then each key's shape (a name the record
    chose is cut: a message never echoes more than a line)."""
    if not isinstance(value, dict):
        return f"{where!r} is a {_type_name(value)}"
    prefix = f"{where}." if where else ""
    for name in table.required:
        if name not in value:
            return f"no {prefix + name!r}"
    for name, shape in [*table.required.items(), *table.optional.items()]:
        if name in value:
            problem = shape_problem(value[name], shape, prefix + name)
            if problem is not None:
                return problem
    if table.each is not None or table.names is not None:
        for name, item in value.items():
            named = table.names(name) if table.names is not None else None
            if named is not None:
                return f"{where!r} {named}"
            problem = (shape_problem(item, table.each, f"{prefix}{name[:60]}")
                       if table.each is not None else None)
            if problem is not None:
                return problem
    return None


def entry_problem(entry: Any) -> str | None:
    """Why a record's ``entry`` is neither its suite alone nor whole, or None."""
    if not isinstance(entry, dict):
        return f"'entry' is a {_type_name(entry)}"
    if set(entry) <= set(ENTRY_ALONE.required) | set(ENTRY_ALONE.optional):
        return shape_problem(entry, ENTRY_ALONE, "entry")
    problem = shape_problem(entry, ENTRY_WHOLE, "entry")
    if problem is None and entry.get("family") == OOD_FAMILY:
        missing = [k for k in ("kind", "level", "twin") if k not in entry]
        if missing:
            return f"'entry' is an OOD case without its {', '.join(missing)}"
    return problem


def record_problem(data: Any) -> str | None:
    """Why ``data`` is not a case record every reader can use, or None (see the module)."""
    if not isinstance(data, dict):
        return f"a {_type_name(data)}, not a record"
    for name in ("case", "entry", "outcome"):
        if name not in data:
            return f"no {name!r}"
    problem = (shape_problem(data, Table({"case": TEXT}), "")
               or entry_problem(data["entry"]) or shape_problem(data, RECORD, ""))
    if problem is None and data["outcome"] == "errored" and data.get("error") is None:
        return "an errored record without its 'error'"
    if problem is None and "progress" not in data and score_disagreement(data) is not None:
        return (f"'score' is {str(data['score'])[:20]} with no 'progress' to stand on (a score "
                "is derived from the goal's progress, never recorded alone)")
    return problem
