"""Which runs may be compared, and which of their cases pair.

Two runs compare when they are two evaluations of one thing: the same protocol (and OOD
and perturbation identities), the same selection, budgets, track, clock and perturbation
kinds, and images from one renderer. The profile, its options and its server may differ:
they are what is being compared. A case pairs with the case of the same id in the other
run (the same task, init state and perturbation: a perturbed case with its own
counterpart, never with its twin) when both completed; cases that did not complete in
both, or that one run lacks (a shard, a killed run), are left out and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_libero.episode.record import CaseRecord
from pytest_libero.protocol.clock import SYNCHRONOUS
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.rates import COMPLETED
from pytest_libero.results.renderers import conflict, joined, renderer_uses
from pytest_libero.results.robustness import suite_key
from pytest_libero.results.run_reader import RunRead, read_run, shown

_Key = Callable[[Mapping[str, Any]], Any]
SAME: tuple[tuple[str, _Key], ...] = (
    ("their protocol identity", lambda run: run["protocol_identity"]),
    ("their OOD identity", lambda run: run.get("ood_identity")),
    ("their perturbation identity", lambda run: run.get("perturb_identity")),
    ("their selection", lambda run: run["plan"]["selection"]),
    ("their budgets", lambda run: (run["plan"]["budget_mode"], run["plan"]["max_policy_calls"],
                             run["plan"]["replan_interval"])),
    ("their track", lambda run: run["plan"]["track"]),
    ("their clock", lambda run: run["plan"].get("clock", SYNCHRONOUS)),
    ("their perturbation kinds (--libero-kind)", lambda run: sorted(run["plan"].get("kinds", []))),
)
"""What two runs must share to be compared, and how each is read from run.json."""


def label(read: RunRead) -> str:
    """How a run is named in a table: its profile and run id."""
    return f"{shown(read.run['plan']['profile']['name'])} {shown(read.run.get('run_id', read.path.name))}"


def read_runs(folders: Sequence[Path]) -> list[RunRead]:
    """Every folder read (refused by the reader's one line when damaged), each checked
    against the first; SetupError naming the difference and the fix otherwise."""
    reads = [read_run(folder) for folder in folders]
    first = reads[0]
    for other in reads[1:]:
        for what, key in SAME:
            if key(other.run) != key(first.run):
                raise SetupError(
                    f"{other.path} cannot be compared with {first.path}: they differ in {what} "
                    f"({shown(repr(key(first.run)))} vs {shown(repr(key(other.run)))}); compare "
                    "runs of one protocol, selection and budgets (run both with the same options "
                    "but the profile)")
    mixed = conflict(joined(*(renderer_uses(r.records, where=str(r.path)) for r in reads)))
    if mixed:
        raise SetupError(f"cannot compare {', '.join(str(r.path) for r in reads)}: {mixed}; "
                         "success rates over images of different renderers are not compared: "
                         "run both on one renderer")
    return reads


@dataclass(frozen=True)
class Pair:
    case: str
    group: str
    """The row it is counted in: its suite, or ``<suite>~<kind><level>`` for a perturbed
    case (the grouping summary.json uses)."""
    a: CaseRecord
    b: CaseRecord


@dataclass
class Pairing:
    """The cases two runs both completed, and the rest of the selection, counted."""

    pairs: list[Pair]
    selected: int
    left_out: dict[str, list[str]] = field(default_factory=dict)
    """why -> case ids: not run in A, not run in B, errored in A, errored in B."""

    @property
    def groups(self) -> list[str]:
        return sorted({p.group for p in self.pairs})

    def statement(self) -> str:
        """One line: how many cases pair, and why the others do not."""
        text = f"paired {len(self.pairs)} of {self.selected} selected cases"
        if self.left_out:
            text += " (left out: " + "; ".join(
                f"{len(cases)} {why}" for why, cases in self.left_out.items()) + ")"
        return text


def pair_runs(a: RunRead, b: RunRead) -> Pairing:
    """A's and B's records paired by case id, in selection order."""
    selected: list[str] = list(a.run["plan"]["selection_cases"])
    in_a, in_b = a.by_case, b.by_case
    pairs: list[Pair] = []
    left_out: dict[str, list[str]] = {}
    for case in selected:
        first, second = in_a.get(case), in_b.get(case)
        why = ("not run in A" if first is None else "not run in B" if second is None
               else "errored in A" if first["outcome"] not in COMPLETED
               else "errored in B" if second["outcome"] not in COMPLETED else None)
        if why is not None:
            left_out.setdefault(why, []).append(case)
            continue
        assert first is not None and second is not None
        pairs.append(Pair(case, suite_key(first), first, second))
    return Pairing(pairs, len(selected), left_out)
