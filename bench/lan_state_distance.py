"""How far LIBERO-PRO's paraphrase suites (``_lan``) move the objects: each ``_lan``
task's released init states against its twin's, entry by entry.

    python bench/lan_state_distance.py            # a table for docs/robustness.md
    python bench/lan_state_distance.py --json     # the numbers, one object per task

The BDDL of every ``_lan`` task equals its twin's except ``(:language ...)``; the init
states are its own. Printed per task: whether the BDDL differs anywhere else, the largest
|difference| over all 50 states, the same for state 0 (what fast mode starts from), and
how many of the 50 states differ at all. Reads files only; no simulator.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_libero.catalog.entries import load_catalog  # noqa: E402 (after the path)
from pytest_libero.catalog.inventory import installed_files, load_states  # noqa: E402

LANGUAGE = re.compile(r"\(:language[^)]*\)")


def measure() -> list[dict[str, object]]:
    catalog = load_catalog()
    rows: list[dict[str, object]] = []
    for entry in catalog.ood_entries:
        if not entry.suite.endswith("_lan"):
            continue
        twin = catalog.twin_of(entry)
        own_bddl, own_states = installed_files(entry.bddl_file, entry.init_states_file)
        twin_bddl, twin_states = installed_files(twin.bddl_file, twin.init_states_file)
        a, b = load_states(own_states), load_states(twin_states)
        gap = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
        rows.append({
            "case": entry.case_id, "twin": twin.case_id,
            "bddl_differs_beyond_language": LANGUAGE.sub("", own_bddl.read_text())
            != LANGUAGE.sub("", twin_bddl.read_text()),
            "max_abs_all_states": round(float(gap.max()), 4),
            "max_abs_state_0": round(float(gap[0].max()), 4),
            "states_differing": int((gap.reshape(len(gap), -1).max(axis=1) > 0).sum()),
            "states": len(gap),
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| `_lan` case | twin | BDDL differs beyond the language | max |diff| (50 states) "
          "| max |diff| (state 0) | states differing |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['twin']} | {'yes' if r['bddl_differs_beyond_language'] else 'no'} "
              f"| {r['max_abs_all_states']} | {r['max_abs_state_0']} | "
              f"{r['states_differing']}/{r['states']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
