"""Before re-execution: the record agrees with its case folder and with the catalog.

Re-execution proves the actions and observations; it opens the episode the record's
``entry`` names, so it cannot notice an entry edited consistently (an OOD case's
``level`` changed in both results.jsonl and episode.json), nor a field re-execution
does not recompute (a perturbation parameter changed in episode.json only). So two
checks come first, each naming the first field that differs:

- results.jsonl's line and the case folder's episode.json are the same record, field by
  field (the controller adds ``nodeid`` after the case folder is written: only it may
  differ);
- the record's ``entry`` (suite, index, name, language, files, state, kind, level, twin)
  and its case id are those the installed catalog gives that case, and it holds no key
  the catalog does not write (one added by hand is a difference, never ignored).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_libero.catalog.entries import PARAPHRASE, Entry, load_catalog
from pytest_libero.episode.record import CaseRecord
from pytest_libero.goals.score import case_score
from pytest_libero.perturb import registry
from pytest_libero.perturb.levels import LEVELS
from pytest_libero.protocol.text import MESSAGE_LIMIT, clipped

CONTROLLER_ONLY = ("nodeid",)
"""Record fields results.jsonl holds and episode.json cannot: the controller adds them."""
_OLDER_KEYS = {True: {"kind", "level"}}
"""Entry keys the catalog no longer writes but an older record may hold: schema 1
repeated a generated perturbation's kind and level at the top of its entry."""


@dataclass(frozen=True)
class Difference:
    """The first field where two accounts of one case differ, and both values."""

    field: str
    recorded: Any
    other: Any


def bounded(value: Any) -> Any:
    """``value`` for verify.json and messages: as is when short, else its JSON cut."""
    text = json.dumps(value, sort_keys=True, default=str)
    return value if len(text) <= MESSAGE_LIMIT else clipped(text)


def first_difference(a: Any, b: Any, where: str = "") -> Difference | None:
    """The first place (``perturbation.parameters.yaw_deg``, ``chunks[2]``) where two
    JSON values differ; types count (``1`` is not ``1.0`` is not ``true``)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            inner = f"{where}.{key}" if where else str(key)
            if key not in a or key not in b:
                return Difference(inner, a.get(key, "(absent)"), b.get(key, "(absent)"))
            found = first_difference(a[key], b[key], inner)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for n, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{where}[{n}]")
            if found is not None:
                return found
        if len(a) != len(b):
            return Difference(f"{where} length", len(a), len(b))
        return None
    if type(a) is not type(b) or a != b:
        return Difference(where or "(the record)", a, b)
    return None


def folder_difference(record: CaseRecord, episode: Mapping[str, Any]) -> Difference | None:
    """Where results.jsonl's record and the case folder's episode.json differ."""
    line = {k: v for k, v in record.items() if k not in CONTROLLER_ONLY}
    kept = {k: v for k, v in episode.items() if k not in CONTROLLER_ONLY}
    return first_difference(line, kept)


def catalog_difference(record: CaseRecord) -> Difference | str | None:
    """Where the record's entry differs from the installed catalog's entry for its case
    (a Difference), why the catalog cannot say (text), or None when they agree."""
    data = record["entry"]
    try:
        recorded = Entry.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        return Difference("entry", "an entry lacking or mistyping " + clipped(str(exc), 200),
                          "a catalog entry")
    catalog = load_catalog()
    found = [e for e in catalog.suite_entries(recorded.suite) if e.index == recorded.index]
    if not found:
        return (f"the installed catalog holds no entry {clipped(recorded.suite, 200)!r} index "
                f"{recorded.index}: this pytest-libero cannot say what the case ran")
    expected = found[0]
    if recorded.ood is not None and recorded.ood.kind == PARAPHRASE:
        # A paraphrase companion: the twin's entry sending its _lan entry's paraphrase.
        try:
            expected = catalog.paraphrase_of(catalog.paraphrase_source(recorded))
        except ValueError as exc:
            return clipped(str(exc), 200)
    if recorded.state is not None:
        expected = expected.at_state(recorded.state)
    perturbation = recorded.perturbation
    if perturbation is not None:
        if expected.is_ood:
            return Difference("entry.perturbation", data.get("perturbation"), "(absent)")
        kinds = registry.names()
        if perturbation.kind not in kinds or perturbation.level not in LEVELS:
            return Difference("entry.perturbation", data.get("perturbation"),
                              f"a kind of {', '.join(kinds)} at a level 1-4")
        try:
            expected = registry.perturbed(expected, perturbation.kind, perturbation.level)
        except (KeyError, ValueError) as exc:
            return f"the installed catalog cannot perturb this entry: {clipped(str(exc), 200)}"
    written = expected.as_dict(identity=data.get("identity"))
    extra = sorted(set(data) - set(written) - _OLDER_KEYS.get("perturbation" in data, set()),
                   key=str)
    if extra:  # a key no schema writes: added to the record, never ignored
        return Difference(f"entry.{extra[0]}", dict(data)[extra[0]], "(absent)")
    # A record of this schema is compared as written (types too); an older one, whose
    # entry has other keys, as read.
    difference = (first_difference(dict(data), dict(written)) if set(data) == set(written)
                  else first_difference(recorded.as_dict(), expected.as_dict()))
    if difference is not None:
        return Difference(f"entry.{difference.field}", difference.recorded, difference.other)
    if record["case"] != expected.case_id:
        return Difference("case", record["case"], expected.case_id)
    return None


def score_difference(record: CaseRecord) -> Difference | None:
    """The record's score against the one its outcome, progress and engagement give
    (``goals.score``): a score edited on its own is caught without a simulator."""
    if "progress" not in record:
        return None
    expected = case_score(record["outcome"], record["progress"], record.get("engagement"))
    if record.get("score") != expected:
        return Difference("score", record.get("score", "(absent)"), expected)
    return None
