"""``pytest-libero compare``, ``table`` and ``card``, and ``export --csv``'s writing.

Each reads finished run folders through the one reader and answers damaged or unfit
input with one line naming it and the fix, exit 4 (argparse's own usage errors too).
compare's exit code is for CI: 0 when no run is significantly worse than the first,
1 when one is.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from pytest_libero.files import json_text
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped
from pytest_libero.publish.card import front_matter, results_section
from pytest_libero.publish.comparison import ALPHA, compare
from pytest_libero.publish.episode_rows import write_csv, write_new
from pytest_libero.publish.pairing import label, pair_runs, read_runs
from pytest_libero.publish.single import run_table
from pytest_libero.publish.tables import comparison_json, render_comparison, render_run, run_json
from pytest_libero.results.run_reader import read_run

COMMANDS = ("compare", "table", "card")
USAGE = 4
REGRESSION = 1


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors exit 4, as every refusal of these commands does."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def _formats(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    for flag, what in (("markdown", "a Markdown table (GitHub's)"),
                       ("latex", "a LaTeX booktabs table with its note"),
                       ("json", "JSON, every number and every case named")):
        group.add_argument(f"--{flag}", dest="form", action="store_const", const=flag, help=what)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pytest-libero")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    comparing = commands.add_parser(
        "compare",
        description="Pair the cases of finished runs of one protocol, selection and budgets "
        "(task, init state and perturbation alike) and compare each run with the first: per "
        "suite and overall, both success rates with 95% Wilson intervals, the difference "
        "with its exact interval, the exact McNemar p-value Holm-adjusted over the suites, "
        "the discordant cases, and the partial-credit score's paired difference. Exit 0 when "
        "no run is significantly worse than the first, 1 when one is, 4 for input that "
        "cannot be compared (docs/compare.md).")
    comparing.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                           help="A (the reference), then B (and more: each against A)")
    comparing.add_argument("--alpha", type=float, default=ALPHA,
                           help="significance level; intervals are at 1 - alpha (default 0.05)")
    _formats(comparing)
    table = commands.add_parser(
        "table",
        description="The success rate of each suite and overall, with 95% Wilson intervals "
        "(and the partial-credit score where the records have one), as compare prints a run.")
    table.add_argument("run", type=Path, metavar="RUN_DIR")
    _formats(table)
    card = commands.add_parser(
        "card",
        description="Print (or write, --out) a README's front matter with the model-index "
        "block (task robotics, dataset LIBERO, the suite as config, the success rate and "
        "its interval) and a Markdown results section with the run id, the protocol "
        "identity and the verify command that re-executes the run.")
    card.add_argument("run", type=Path, metavar="RUN_DIR")
    card.add_argument("--model-name", metavar="NAME",
                      help="the model's name in the model-index (default: the run's profile)")
    card.add_argument("--out", type=Path, metavar="FILE",
                      help="write to FILE, a file that does not exist yet (default: print)")
    return parser


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        if args.command == "compare":
            return _compare(args)
        if args.command == "table":
            return _table(args)
        return _card(args)
    except SetupError as exc:
        print(f"pytest-libero {args.command}: {clipped(str(exc), 2000)}", file=sys.stderr)
        return USAGE


def _compare(args: argparse.Namespace) -> int:
    if len(args.runs) < 2:
        raise SetupError("compare needs two run folders or more: A, then B (each later one is "
                         "compared with A)")
    if not 0.0 < args.alpha < 0.5:
        raise SetupError(f"--alpha {args.alpha:g} is not a significance level; give a number "
                         "between 0 and 0.5, e.g. 0.05")
    reads = read_runs(args.runs)
    comparisons = []
    for other in reads[1:]:
        pairing = pair_runs(reads[0], other)
        if not pairing.pairs:
            raise SetupError(f"{reads[0].path} and {other.path} have no case that completed in "
                             f"both ({pairing.statement()}); compare runs that finished the "
                             "same cases")
        comparisons.append(compare(label(reads[0]), label(other), pairing, args.alpha))
    if args.form == "json":
        print(json_text({"comparisons": [comparison_json(c) for c in comparisons]}, indent=1,
                         sort_keys=False))
    else:
        print("\n".join(render_comparison(c, args.form or "text") for c in comparisons), end="")
    return REGRESSION if any(c.regression for c in comparisons) else 0


def _table(args: argparse.Namespace) -> int:
    read = read_run(args.run)
    table = run_table(read, label(read))
    if args.form == "json":
        print(json_text(run_json(table), indent=1, sort_keys=False))
    else:
        print(render_run(table, args.form or "text"), end="")
    return 0


def _card(args: argparse.Namespace) -> int:
    read = read_run(args.run)
    table = run_table(read, label(read))
    if not any(r.rate.of for r in table.rows):
        raise SetupError(f"{args.run} has no completed case, so there is no rate to put on a "
                         "card; make a card of a run that completed its cases")
    model = args.model_name or read.run["plan"]["profile"]["name"]
    text = front_matter(read, table, model) + "\n" + results_section(read, table, str(args.run))
    if args.out is None:
        print(text, end="")
        return 0
    write_new(args.out, text, "--out", "the card is never written over a file: name a new "
              "one, or print it and paste it")
    print(f"card: {args.out}")
    return 0


def export_csv(run_dir: Path, out: Path) -> int:
    """``pytest-libero export RUN --csv OUT``: the rows written (SetupError otherwise)."""
    return write_csv(read_run(run_dir), out)
