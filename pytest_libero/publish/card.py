"""A model card's numbers: the Hugging Face ``model-index`` block and a results section.

The block is the YAML a model repository's README.md carries in its front matter: one
result per suite (task ``robotics``, dataset ``LIBERO`` with the suite as its config),
each with the success rate in percent and, in the metric's ``args``, the counts and the
95% Wilson interval, beside it the partial-credit score where the records have one. The
Markdown section says the same in a table, with the run id, the protocol identity, what
the numbers are not (infrastructure runs, partial runs), and the command that re-executes
the recorded episodes. The YAML is written by hand from JSON scalars (YAML reads JSON's
quoted strings and numbers as they are), so no YAML library is needed to make it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pytest_libero import __version__
from pytest_libero.publish.comparison import OVERALL
from pytest_libero.publish.single import RunRow, RunTable
from pytest_libero.results.run_reader import RunRead, shown

TASK = {"type": "robotics", "name": "Robot manipulation"}
DATASET = {"name": "LIBERO", "type": "libero"}


def _metrics(r: RunRow) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if r.rate.rate is not None:
        found.append({"type": "success_rate", "name": "Success rate (%)",
                      "value": round(100 * r.rate.rate, 2),
                      "args": {"successes": r.rate.successes, "completed": r.rate.of,
                               "errored": r.errored,
                               "wilson95": [round(100 * r.rate.low, 2), round(100 * r.rate.high, 2)]},
                      "verified": False})
    if r.score is not None:
        found.append({"type": "partial_credit_score", "name": "Partial-credit score (%)",
                      "value": round(100 * r.score.mean, 2),
                      "args": {"scored": r.score.scored,
                               "interval95": [round(100 * r.score.low, 2), round(100 * r.score.high, 2)]},
                      "verified": False})
    return found


def _split(read: RunRead) -> str:
    plan = read.run["plan"]
    mode = plan.get("mode", plan["selection"].get("mode", "fast"))
    if mode != "full":
        return "fast mode, init state 0"
    states = plan["selection"].get("init_states")
    return f"full mode, {len(states)} init states" if states else "full mode"


def model_index(read: RunRead, table: RunTable, model: str) -> list[dict[str, Any]]:
    """The ``model-index`` value: one model, one result per suite with metrics."""
    plan = read.run["plan"]
    args = {"protocol_identity": read.run["protocol_identity"], "budget_mode": plan["budget_mode"],
            "max_policy_calls": plan["max_policy_calls"], "replan_interval": plan["replan_interval"],
            "track": plan["track"], "run_id": read.run.get("run_id", read.path.name)}
    args = {key: value for key, value in args.items() if value is not None}  # the hub drops nulls
    results = []
    for r in table.rows:
        metrics = _metrics(r)
        if not metrics:
            continue
        dataset: dict[str, Any] = dict(DATASET)
        if r.group != OVERALL:
            dataset["config"] = r.group
        dataset.update(split=_split(read), args=args)
        results.append({"task": dict(TASK), "dataset": dataset, "metrics": metrics})
    return [{"name": model, "results": results}]


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def yaml_lines(value: Any, indent: int = 0) -> list[str]:
    """Block-style YAML of JSON data (tables, lists of tables, lists of scalars, scalars)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item and not _flat(item):
                lines.append(f"{pad}{key}:")
                lines += yaml_lines(item, indent + 2)
            else:
                lines.append(f"{pad}{key}: {_inline(item)}")
    elif isinstance(value, list):
        for item in value:
            inner = yaml_lines(item, indent + 2)
            lines.append(f"{pad}- {inner[0].lstrip()}")
            lines += inner[1:]
    else:
        lines.append(f"{pad}{_scalar(value)}")
    return lines


def _flat(item: dict[str, Any] | list[Any]) -> bool:
    """A list of scalars, written inline as ``[a, b]``."""
    return isinstance(item, list) and all(not isinstance(v, (dict, list)) for v in item)


def _inline(item: Any) -> str:
    if isinstance(item, list):
        return "[" + ", ".join(_scalar(v) for v in item) + "]"
    if isinstance(item, dict):
        return "{}"
    return _scalar(item)


def front_matter(read: RunRead, table: RunTable, model: str) -> str:
    return "\n".join(["---", *yaml_lines({"model-index": model_index(read, table, model)}), "---"]) + "\n"


def _caveats(read: RunRead, table: RunTable) -> list[str]:
    plan = read.run["plan"]
    said = []
    if plan.get("evidence_class") == "infrastructure":
        said.append("This run used a built-in infrastructure policy: it checks the pipeline "
                    "and is not a capability claim.")
    partial: Sequence[str] = plan.get("partial") or []
    if partial:
        said.append("A partial run: " + "; ".join(shown(p) for p in partial) + ".")
    if plan.get("mode", plan["selection"].get("mode", "fast")) != "full":
        said.append("Fast mode runs each task once, from its first released init state; "
                    "published LIBERO figures average 50 init states per task.")
    errored = sum(r.errored for r in table.rows if r.group == OVERALL or len(table.rows) == 1)
    if table.not_run or errored:
        said.append(f"{errored} case(s) errored and {table.not_run} were not run: rates are over "
                    "the completed cases.")
    return said


def results_section(read: RunRead, table: RunTable, run_arg: str) -> str:
    """The Markdown section: the table, what it is, and how to check it."""
    scores = any(r.score is not None for r in table.rows)
    lines = ["## Evaluation on LIBERO", "",
             "| Suite | Success rate (%) | 95% Wilson interval | Completed |"
             + (" Score (%) |" if scores else ""),
             "| --- | ---: | ---: | ---: |" + (" ---: |" if scores else "")]
    for r in table.rows:
        rate = "-" if r.rate.rate is None else f"{100 * r.rate.rate:.1f}"
        cells = [r.group, rate, f"{100 * r.rate.low:.1f} to {100 * r.rate.high:.1f}", str(r.rate.of)]
        if scores:
            cells.append("-" if r.score is None else f"{100 * r.score.mean:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    plan = read.run["plan"]
    run_id = shown(read.run.get("run_id", read.path.name))
    lines += ["", f"Measured by pytest-libero {__version__} (run `{run_id}`, "
              f"profile `{shown(plan['profile']['name'])}`) under protocol "
              f"`{shown(read.run['protocol_identity'])}`: {_split(read)}, budget "
              f"{shown(plan['budget_mode'])}, track {shown(plan['track'])}.", ""]
    lines += [line for caveat in _caveats(read, table) for line in (caveat, "")]
    lines += [
              "Every episode is kept with its actions; re-execute them and check each "
              "observation against its recorded hash with:", "", "```", f"pytest-libero verify {run_arg}",
              "```"]
    return "\n".join(lines) + "\n"
