"""The ``pytest-libero`` command: work on result folders outside a pytest session."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from pytest_libero.errors import SetupError
from pytest_libero.merge import merge_runs
from pytest_libero.summary import summary_lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytest-libero", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser(
        "merge",
        help="merge result folders of shards, resumed or killed runs into a new one",
        description="Merge run folders that share protocol identity, profile and "
        "selection; cases missing from all of them are unattempted.",
    )
    merge.add_argument("folders", nargs="+", type=Path, metavar="RUN_DIR")
    merge.add_argument("--out", type=Path, help="the new folder (must not exist); default: "
                       "a new run id beside the first folder")
    args = parser.parse_args(argv)
    try:
        merged = merge_runs(args.folders, args.out)
    except SetupError as exc:
        parser.exit(2, f"pytest-libero merge: {exc}\n")
    summary = json.loads((merged / "summary.json").read_text())
    for line in summary_lines(summary):
        print(line)
    print(f"merged: {merged}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
