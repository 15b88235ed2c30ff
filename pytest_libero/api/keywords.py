"""The one table between ``evaluate``'s keywords and the plugin's options.

Each keyword is an option's name with ``_`` for ``-`` (``task_ids`` is ``--libero-task-ids``)
and means what the option means; its default is the option's (None: the option is not
given). A value is written as the command line spells it: a list of task ids as
``0,1,4``, a number as itself. The plugin checks every value as it checks the command
line's, so a bad one is the same one-line refusal (``evaluate`` raises it as
:class:`~pytest_libero.api.evaluate.EvaluationRefused`). What is spelled is bounded
first, in the caller's process: a list of ids holds ids, not lists, and no more than a
selection can use (``range(10**12)`` is refused by its length, never written out), and
no value is longer than a command line takes. ``docs/options.md`` says which options
have a keyword, and a test holds the two to this table.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Final

from pytest_libero.protocol.text import echo

KEYWORDS: Final[Mapping[str, str]] = {
    "scope": "--libero-scope",
    "suite": "--libero-suite",
    "task_ids": "--libero-task-ids",
    "mode": "--libero-mode",
    "perturb": "--libero-perturb",
    "min_success": "--libero-min-success",
    "decide": "--libero-decide",
    "order_seed": "--libero-order-seed",
    "evidence": "--libero-evidence",
    "budget_mode": "--libero-budget-mode",
    "max_policy_calls": "--libero-max-policy-calls",
    "replan_interval": "--libero-replan-interval",
    "track": "--libero-track",
    "gpus": "--libero-gpus",
    "results": "--libero-results",
    "run_id": "--libero-run-id",
}
"""``evaluate`` keyword -> the plugin option it gives (``workers`` is ``-n``)."""
MAX_TASK_IDS: Final = 90
"""The most task ids a selection can use: LIBERO's largest suite, libero_90, has 90 tasks."""
MAX_GPUS: Final = 256
"""The most GPUs (and workers) one evaluate() call is given: more than any one machine has."""
LIST_LIMITS: Final[Mapping[str, tuple[int, str]]] = {
    "task_ids": (MAX_TASK_IDS, "ids; a LIBERO suite has at most 90 tasks: give at most 90"),
    "gpus": (MAX_GPUS, "GPUs; evaluate() takes at most 256: give at most 256"),
}
"""Keywords that take a list: the longest list each takes, and what its items are."""
MAX_SPELLED: Final = 10_000
"""The longest value spelled on the command line (Linux takes 128 KiB per argument)."""


class Unspellable(ValueError):
    """A keyword's value that is not written out on a command line, in one line naming it
    (``evaluate`` raises it as its EvaluationRefused)."""


def spelled(value: object, keyword: str = "value") -> str:
    """A keyword's value as the command line spells it: text as itself, a list of ids as
    ``0,1,4`` (bounded by :data:`LIST_LIMITS`, each element a whole number or its text)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        limit, items = LIST_LIMITS.get(keyword, (MAX_TASK_IDS, "items: give at most 90"))
        if len(value) > limit:
            raise Unspellable(f"{keyword} holds {len(value)} {items}")
        text = ",".join(_element(item, keyword) for item in value)
    else:
        text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_SPELLED:
        raise Unspellable(f"{keyword}={echo(text)} is longer than a run takes ({MAX_SPELLED} "
                          "characters)")
    return text


def _element(item: object, keyword: str) -> str:
    """One id of a list keyword: a whole number (numpy's too) or its text, never a list."""
    if isinstance(item, str):
        return item
    if not isinstance(item, bool):
        try:
            return str(operator.index(item))  # type: ignore[arg-type]
        except TypeError:
            pass
    raise Unspellable(f"{keyword} holds {echo(item)}, a {type(item).__name__}: give whole "
                      "numbers, e.g. [0, 1, 4]")


MAX_PYTEST_ARGS: Final = 1000
"""The most ``pytest_args`` one call passes on."""


def pytest_arguments(args: Sequence[object]) -> list[str]:
    """``pytest_args`` as the child's arguments: at most :data:`MAX_PYTEST_ARGS`, each text
    no longer than :data:`MAX_SPELLED` (a command line takes no more)."""
    if isinstance(args, str) or not isinstance(args, Sequence):
        raise Unspellable(f"pytest_args is a {type(args).__name__}: give a list of arguments, "
                          "e.g. ['-x']")
    if len(args) > MAX_PYTEST_ARGS:
        raise Unspellable(f"pytest_args holds {len(args)} arguments: give at most {MAX_PYTEST_ARGS}")
    found = [str(arg) for arg in args]
    for arg in found:
        if len(arg) > MAX_SPELLED:
            raise Unspellable(f"pytest_args holds {echo(arg)}, longer than a run takes "
                              f"({MAX_SPELLED} characters)")
    return found


def option_args(values: Mapping[str, object]) -> list[str]:
    """The command-line options ``values`` (keyword -> value, None: not given) stand for."""
    unknown = sorted(set(values) - set(KEYWORDS))
    if unknown:
        raise TypeError(f"evaluate() has no keyword {', '.join(unknown)}; the others are "
                        f"{', '.join(KEYWORDS)} (anything else goes in pytest_args)")
    return [f"{KEYWORDS[name]}={spelled(value, name)}" for name, value in values.items()
            if value is not None]
