"""Selection (P3): scopes, task ids and shards over the frozen catalog.

Turns operator options into an ordered, deterministic list of entries, so every xdist
worker collects the same cases, and every Slurm shard gets a balanced, disjoint part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import OOD_KINDS, PARAPHRASE_VARIANT, Catalog, Entry
from pytest_libero.catalog.validation import refuse_unvalidated
from pytest_libero.protocol.digits import whole
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.parameters import FULL_STATES_PER_TASK, SUITES
from pytest_libero.protocol.text import ECHO_LIMIT, echo

SCOPES = ("smoke", "development", "task_coverage", "all", "ood", "profile")
PROFILE_SCOPE = "profile"
"""The tasks the profile names (``[selection] tasks``); the default for such a profile."""
MODES = ("fast", "full")
SMOKE_TASK_IDS = (0, 1)
DEVELOPMENT_SUITE = "libero_10"
DEVELOPMENT_TASK_IDS = range(0, 5)
MAX_INDEX = 9_999
"""The largest task id read at all (no suite has 100 tasks): a range is checked against
it before it is expanded, so 0-999999999999 is an error, not a MemoryError."""
MAX_SHARDS = 10_000

@dataclass(frozen=True)
class SelectionRequest:
    """What the operator asked for, before validation."""

    scope: str = "smoke"
    suite: str | None = None
    task_ids: tuple[int, ...] | None = None
    mode: str = "fast"
    init_states: tuple[int, ...] | None = None
    """Full mode only: a subset of the released init states (None: all of them)."""
    ood_kinds: tuple[str, ...] | None = None
    """Scope ood only: the perturbation kinds to keep (None: every kind)."""
    perturbations: tuple[tuple[str, int], ...] | None = None
    """Generated perturbations (kind, level) added beside each selected case."""
    tasks: tuple[str, ...] = ()
    """Scope profile: the task ids the profile names, e.g. ``libero_object-00``."""

    @property
    def states(self) -> tuple[int, ...]:
        """The init states each task runs from in full mode, in native order."""
        if self.init_states is None:
            return tuple(range(FULL_STATES_PER_TASK))
        return self.init_states

    @property
    def partial_states(self) -> bool:
        """A full-mode run over fewer than every released state: never a full result."""
        return self.mode == "full" and self.states != tuple(range(FULL_STATES_PER_TASK))

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "scope": self.scope,
            "suite": self.suite,
            "task_ids": list(self.task_ids) if self.task_ids is not None else None,
            "mode": self.mode,
        }
        if self.mode == "full":
            data["init_states"] = list(self.states)
            data["partial_states"] = self.partial_states
        if self.ood_kinds is not None:
            data["ood_kinds"] = list(self.ood_kinds)
        if self.scope == PROFILE_SCOPE:
            data["tasks"] = list(self.tasks)
        if self.perturbations is not None:
            data["perturbations"] = [f"{kind}:{level}" for kind, level in self.perturbations]
        return data


def parse_task_ids(text: str, option: str = "--libero-task-ids", *,
                   highest: int = MAX_INDEX) -> tuple[int, ...]:
    """Parse "0,1,4" or "0-4" or "0-2,7" into sorted unique ints, each 0..``highest``
    (checked before a range is expanded)."""
    ids: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        read = [whole(end) for end in part.split("-", 1)] if "-" in part[1:] else [whole(part)]
        ends = [end for end in read if end is not None]
        if len(ends) != len(read):  # ASCII digits only: int() would take "１" or "1_0"
            raise SetupError(
                f"{option}: cannot read {echo(part)}; "
                "write indices like 0,1,4 or a range like 0-4"
            ) from None
        outside = [end for end in ends if not 0 <= end <= highest]
        if outside:
            raise SetupError(f"{option}: {str(outside[0])[:20]} is outside 0-{highest}; write "
                             "indices like 0,1,4 or a range like 0-4")
        lo, hi = ends[0], ends[-1]
        if hi < lo:
            raise SetupError(f"{option}: the range {echo(part)} runs backwards; write "
                             f"it low-high, e.g. {hi}-{lo}")
        ids.update(range(lo, hi + 1))
    return tuple(sorted(ids))


def parse_suites(text: str) -> str:
    """``--libero-suite`` as the selection reads it: one suite, or (scope ood) several,
    comma-separated, spaces dropped as every list option's reader drops them."""
    return "".join(text.split())


def parse_ood_kinds(text: str) -> tuple[str, ...]:
    """Parse "object,position" into perturbation kinds, checked, in the catalog's order."""
    asked = {part for part in text.replace(" ", "").split(",") if part}
    unknown = sorted(asked - set(OOD_KINDS))
    if not asked or unknown:
        wrong = ("no kind given" if not unknown  # the value is quoted once, whole or in part
                 else "an unknown kind" if unknown == [text.replace(" ", "")]
                 else f"unknown kind(s) {_names(unknown)}")
        raise SetupError(f"--libero-ood-kind={echo(text)}: {wrong}; allowed: "
                         f"{', '.join(OOD_KINDS)} (comma-separated)")
    return tuple(k for k in OOD_KINDS if k in asked)


def _names(parts: Sequence[str]) -> str:
    """Parts of an option's value, named: as they are, or echoed when long (the first five)."""
    return ", ".join(p if len(p) <= ECHO_LIMIT else echo(p) for p in parts[:5])


def parse_init_states(text: str) -> tuple[int, ...]:
    """Parse "0,17,49" or "0-9" into released init-state indices, checked."""
    states = parse_task_ids(text, "--libero-init-states")  # bounded: at most MAX_INDEX
    outside = [i for i in states if not 0 <= i < FULL_STATES_PER_TASK]
    if not states or outside:
        raise SetupError(
            f"--libero-init-states={echo(text)}: each task has released init states "
            f"0-{FULL_STATES_PER_TASK - 1}; got {outside[:5] or 'none'}"
        )
    return states


def select(catalog: Catalog, request: SelectionRequest) -> list[Entry]:
    """Resolve a selection request into cases in native order, or refuse it clearly.

    Fast mode: one case per selected entry. Full mode: one per (entry, init state),
    task then state, for suites whose schedule validation passed.
    """
    if request.mode not in MODES:
        raise SetupError(f"--libero-mode={echo(request.mode)} is unknown; allowed: {', '.join(MODES)}")
    if request.init_states is not None and request.mode != "full":
        raise SetupError(
            "--libero-init-states needs --libero-mode=full: fast mode starts every "
            "task from init state 0 (P3)"
        )
    if request.ood_kinds is not None and request.scope != "ood":
        raise SetupError(
            "--libero-ood-kind narrows --libero-scope=ood; add --libero-scope=ood, or drop it"
        )
    entries = _select_entries(catalog, request)
    if request.mode == "full":
        refuse_unvalidated(sorted({e.suite for e in entries}))
        entries = [entry.at_state(state) for entry in entries for state in request.states]
    if request.perturbations is not None:
        # Each case, then its perturbed copies: the twin runs beside them in the same run.
        entries = [case for entry in entries
                   for case in (entry, *(entry.perturbed(k, v) for k, v in request.perturbations))]
    ids = [e.case_id for e in entries]
    if len(set(ids)) != len(ids):  # one case, one folder: a second copy would overwrite it
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise SetupError(f"the selection holds {twice[0]} more than once; select each case once")
    return entries


def _select_entries(catalog: Catalog, request: SelectionRequest) -> list[Entry]:
    if request.scope not in SCOPES:
        raise SetupError(
            f"--libero-scope={echo(request.scope)} is unknown; allowed: {', '.join(SCOPES)}"
        )
    named: list[str | None] = (list(request.suite.split(",")) if request.suite
                               and request.scope == "ood" else [request.suite])
    twice = sorted({str(s) for s in named if named.count(s) > 1})
    if twice:
        raise SetupError(f"--libero-suite names {_names(twice)} more than "
                         "once; name each suite once")
    for suite in named:
        if suite is not None and suite not in SUITES:
            catalog.refuse_not_ready(suite)
            if suite not in catalog.ood_suites:
                raise SetupError(
                    f"--libero-suite={echo(suite)} is not a LIBERO suite; allowed: "
                    f"{', '.join(SUITES)}, or a ready LIBERO-PRO suite such as libero_goal_task "
                    "(all of them: --libero-scope=ood; docs/robustness.md)"
                )

    if request.scope == "ood":
        return _ood_with_twins(catalog, request)
    if request.scope == "all":
        _refuse_narrowing(request, "all")
        return list(catalog.entries)
    if request.scope == PROFILE_SCOPE:
        _refuse_narrowing(request, PROFILE_SCOPE)
        return _profile_tasks(catalog, request.tasks)
    if request.scope == "smoke":
        _refuse_narrowing(request, "smoke")
        return _pick(catalog, DEVELOPMENT_SUITE, SMOKE_TASK_IDS)
    if request.scope == "development":
        suite = request.suite or DEVELOPMENT_SUITE
        if suite != DEVELOPMENT_SUITE:
            raise SetupError(
                f"scope 'development' covers {DEVELOPMENT_SUITE} only, not {echo(suite)}; "
                "use --libero-scope=task_coverage for other suites"
            )
        ids = request.task_ids if request.task_ids is not None else SMOKE_TASK_IDS
        outside = [i for i in ids if i not in DEVELOPMENT_TASK_IDS]
        if outside:
            raise SetupError(
                f"scope 'development' allows {DEVELOPMENT_SUITE} task ids 0-4; "
                f"got {outside}. Use --libero-scope=task_coverage for the others"
            )
        return _pick(catalog, suite, ids)
    # task_coverage
    if request.suite is None or request.task_ids is None:
        raise SetupError(
            "scope 'task_coverage' needs both --libero-suite and --libero-task-ids, "
            "e.g. --libero-suite=libero_object --libero-task-ids=0-9"
        )
    return _pick(catalog, request.suite, request.task_ids)


def _profile_tasks(catalog: Catalog, tasks: Sequence[str]) -> list[Entry]:
    """The profile's own tasks, in native order; each must be a native catalog task."""
    if not tasks:
        raise SetupError("--libero-scope=profile: this profile names no tasks of its own "
                         "([selection] tasks = [...] in its file); choose another scope")
    wanted = set()
    for task in tasks:
        case = CaseId.parse(task)
        if not any(e.suite == case.suite and e.index == case.index for e in catalog.entries):
            raise SetupError(f"the profile's [selection] tasks names {task!r}, not a native "
                             "LIBERO task of the catalog; name tasks like libero_object-00")
        wanted.add((case.suite, case.index))
    return [e for e in catalog.entries if (e.suite, e.index) in wanted]


def _ood_with_twins(catalog: Catalog, request: SelectionRequest) -> list[Entry]:
    """Every ready OOD entry (of the asked kinds, or of the named OOD suites) once, after
    each one's native twin once: one run measures both sides of every pair."""
    if request.suite is not None:
        ood = []
        for suite in request.suite.split(","):
            if suite not in catalog.ood_suites:
                raise SetupError(
                    f"scope 'ood' narrows to LIBERO-PRO suites, not {echo(suite)}; e.g. "
                    "--libero-suite=libero_goal_task,libero_goal_swap, or use "
                    "--libero-scope=task_coverage"
                )
            ood += (_pick(catalog, suite, request.task_ids) if request.task_ids is not None
                    else list(catalog.suite_entries(suite)))
    elif request.task_ids is not None:
        raise SetupError("scope 'ood' takes --libero-task-ids only with --libero-suite "
                         "(LIBERO-PRO suites, comma-separated)")
    else:
        ood = list(catalog.ood_entries)
    kinds = request.ood_kinds or OOD_KINDS
    ood = sorted((e for e in ood if _ood_kind(e) in kinds), key=lambda e: kinds.index(_ood_kind(e)))
    if not ood:
        raise SetupError(f"scope 'ood': no ready LIBERO-PRO entry of kind {', '.join(kinds)}"
                         + (f" in {request.suite}" if request.suite else ""))
    twins = {catalog.twin_of(e) for e in ood}
    # A paraphrase (_lan) entry, then its companion: the paraphrase in the twin's own scene.
    ood = [case for e in ood for case in (e, *_companions(catalog, e))]
    return [e for e in catalog.entries if e in twins] + ood


def _companions(catalog: Catalog, entry: Entry) -> tuple[Entry, ...]:
    suite = catalog.ood_suites.get(entry.suite)
    return (catalog.paraphrase_of(entry),) if suite and suite.variant == PARAPHRASE_VARIANT else ()


def _ood_kind(entry: Entry) -> str:
    source = entry.ood
    if source is None:
        raise ValueError(f"{entry.case_id} is not an OOD entry")
    return source.kind


def _refuse_narrowing(request: SelectionRequest, scope: str) -> None:
    if request.suite is not None or request.task_ids is not None:
        raise SetupError(
            f"scope {scope!r} is a fixed selection and takes no --libero-suite or "
            "--libero-task-ids; use --libero-scope=task_coverage to choose tasks"
        )


def _pick(catalog: Catalog, suite: str, ids: Sequence[int]) -> list[Entry]:
    entries = catalog.suite_entries(suite)
    have = [e.index for e in entries]
    allowed = (f"0-{len(entries) - 1}" if have == list(range(len(entries)))
               else ",".join(map(str, have)))
    if not ids:
        raise SetupError(f"no task ids given for {suite}; allowed: {allowed}")
    outside = [i for i in ids if i not in have]
    if outside:
        raise SetupError(f"{suite} has task ids {allowed}; got {outside}")
    wanted = set(ids)
    return [e for e in entries if e.index in wanted]


def parse_shard(text: str) -> tuple[int, int]:
    """Read "I/N" (1-based: 1/2 and 2/2 are the two halves)."""
    index, sep, count = text.partition("/")
    i, n = whole(index.strip()) or 0, whole(count.strip()) or 0  # ASCII digits: never "１"
    if not sep or not 1 <= i <= n or n > MAX_SHARDS:
        raise SetupError(f"--libero-shard={echo(text)}: write I/N with 1 <= I <= N <= "
                         f"{MAX_SHARDS}, e.g. 1/4")
    return i, n


def shard(entries: Sequence[Entry], index: int, count: int, cost: Callable[[Entry], float]) -> list[Entry]:
    """The ``index``-th of ``count`` disjoint parts, balanced by expected cost.

    Longest-processing-time first: the costliest entry goes to the least-loaded part,
    ties broken by native order and part number, so every machine computes the same
    split. Each part keeps native order.
    """
    loads = [0.0] * count
    owner: dict[Entry, int] = {}
    for entry in sorted(entries, key=lambda e: -cost(e)):  # stable: native order on ties
        part = min(range(count), key=lambda p: (loads[p], p))
        owner[entry] = part
        loads[part] += cost(entry)
    return [e for e in entries if owner[e] == index - 1]
