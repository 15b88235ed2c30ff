"""The one table between ``evaluate``'s keywords and the plugin's options.

Each keyword is an option's name with ``_`` for ``-`` (``task_ids`` is ``--libero-task-ids``)
and means what the option means; its default is the option's (None: the option is not
given). A value is written as the command line spells it: a list of task ids as
``0,1,4``, a number as itself. The plugin checks every value as it checks the command
line's, so a bad one is the same one-line refusal (``evaluate`` raises it as
:class:`~pytest_libero.inloop.evaluate.EvaluationRefused`). ``docs/options.md`` says
which options have a keyword, and a test holds the two to this table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

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


def spelled(value: object) -> str:
    """A keyword's value as the command line spells it."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        return ",".join(spelled(v) for v in value)
    return str(value)


def option_args(values: Mapping[str, object]) -> list[str]:
    """The command-line options ``values`` (keyword -> value, None: not given) stand for."""
    unknown = sorted(set(values) - set(KEYWORDS))
    if unknown:
        raise TypeError(f"evaluate() has no keyword {', '.join(unknown)}; the others are "
                        f"{', '.join(KEYWORDS)} (anything else goes in pytest_args)")
    return [f"{KEYWORDS[name]}={spelled(value)}" for name, value in values.items() if value is not None]
