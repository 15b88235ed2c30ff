"""The case id: the one place that writes and reads it, in every form.

A case id names one case of a run: the pytest id, the key of results.jsonl and
summaries, the folder ``cases/<case id>/``, the seed of a generated perturbation. Its
grammar::

    <suite>-<index>[-s<state>][~<kind>[<level>]]

    libero_10-03                  a native task (fast mode)
    libero_10-03-s17              full mode: released init state 17
    libero_object_temp_x0.1-00    a LIBERO-PRO (OOD) entry: its own suite
    libero_10-03~camera2          a variant of a case: a generated perturbation
    libero_10-00-s17~camera2      both

The part after ``~`` is a variant tag: a lowercase kind (letters and underscores) and an
optional level, so a new perturbation kind, or a variant without a level (a companion
case), is a new tag value, never new parsing code. Suites hold no ``-`` or ``~``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

VARIANT_MARK: Final = "~"
STATE_MARK: Final = "-s"
_SUITE = r"[A-Za-z0-9_.]+"
KIND_PATTERN = r"[a-z]+(?:_[a-z]+)*"
"""A variant's kind as a case id spells it (a perturbation kind's name must match it)."""
_FORM: Final = re.compile(
    rf"(?P<suite>{_SUITE})-(?P<index>\d+)(?:-s(?P<state>\d+))?"
    rf"(?:~(?P<kind>{KIND_PATTERN})(?P<level>\d+)?)?"
)
FORMS: Final = ("libero_10-03", "libero_10-03-s17", "libero_10-03~camera2",
                "libero_10-03-s17~camera2")


@dataclass(frozen=True)
class VariantTag:
    """What a case id says after ``~``: the variant's kind and, when it has one, its level."""

    kind: str
    level: int | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(KIND_PATTERN, self.kind) or (self.level is not None and self.level < 0):
            raise ValueError(f"not a variant tag: kind {self.kind!r}, level {self.level!r} "
                             "(a lowercase kind of letters and underscores, a level >= 0)")

    def __str__(self) -> str:
        return self.kind if self.level is None else f"{self.kind}{self.level}"


@dataclass(frozen=True)
class CaseId:
    """One case: a suite's task, the init state it starts from in full mode, and a variant."""

    suite: str
    index: int
    state: int | None = None
    """The released init state of a full-mode case; None in fast mode."""
    variant: VariantTag | None = None
    """A variant of the case (a generated perturbation); None for the case itself."""

    def __post_init__(self) -> None:
        if not re.fullmatch(_SUITE, self.suite) or self.index < 0 or (
                self.state is not None and self.state < 0):
            raise ValueError(f"cannot make a case id of suite {self.suite!r}, index {self.index!r}, "
                             f"state {self.state!r}: a suite has no '-' or '~', numbers are >= 0")

    def __str__(self) -> str:
        text = f"{self.suite}-{self.index:02d}"
        if self.state is not None:
            text += f"{STATE_MARK}{self.state}"
        if self.variant is not None:
            text += f"{VARIANT_MARK}{self.variant}"
        return text

    @classmethod
    def parse(cls, text: str) -> CaseId:
        """The case id ``text`` names, or ValueError saying which forms there are."""
        match = _FORM.fullmatch(text)
        if match is None:
            raise ValueError(f"not a LIBERO case id: {text!r} (forms: {', '.join(FORMS)})")
        state, kind, level = match["state"], match["kind"], match["level"]
        return cls(
            suite=match["suite"], index=int(match["index"]),
            state=None if state is None else int(state),
            variant=None if kind is None else VariantTag(kind, None if level is None else int(level)),
        )

    @property
    def task(self) -> CaseId:
        """The task, whatever its state and variant: what a full-mode worker keeps together."""
        return CaseId(self.suite, self.index)

    @property
    def base(self) -> CaseId:
        """This case without its variant: the case a generated perturbation is paired with."""
        return replace(self, variant=None)

    def at_state(self, state: int | None) -> CaseId:
        return replace(self, state=state)

    def with_variant(self, variant: VariantTag | None) -> CaseId:
        return replace(self, variant=variant)

    def parameters(self) -> dict[str, object]:
        """The id's parts by name, as a report lists them: suite, index, ``init state`` in
        full mode, ``variant`` for a variant. Together they tell every case apart."""
        parts: dict[str, object] = {"suite": self.suite, "index": self.index}
        if self.state is not None:
            parts["init state"] = self.state
        if self.variant is not None:
            parts["variant"] = str(self.variant)
        return parts
