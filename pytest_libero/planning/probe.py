"""This machine's phase costs: probed once per scene family, then kept per machine and renderer.

The probe (``adapters/cost_probe.py``, about 45 s a suite on a CPU, then a one-case run
timed from outside, ``run_probe.py``, about 30 s) measures each scene family the plan
meets (planning/shapes.py ``scene_family``); its figures are cached in
``$XDG_CACHE_HOME/pytest-libero`` (``~/.cache/pytest-libero``) under a key made of the
machine (its name, processor and cores) and the renderer's fingerprint: a new driver or a
move to a GPU is a new key, ``--refresh`` probes again, and a family the cache does not
hold yet is probed and added. A probe that waited for a core (planning/load.py) says so,
and its figures carry the share that their source line repeats.

The cache is untrusted input (anything may have been put there): it is read only when it
is a regular file of at most :data:`CACHE_LIMIT` bytes (never a device, a FIFO, or a file
read whole), each figure a plain number inside its bound (:data:`BOUNDS`). A cache file
that does not read as one is probed over, and said so in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_libero.files import json_text, read_capped, write_json_atomic
from pytest_libero.planning.figures import HOUR, MINUTE, figure, shown
from pytest_libero.planning.load import BUSY_WAITING, cpu_waiting_s, waiting_share
from pytest_libero.planning.model import CostTable, PhaseCosts
from pytest_libero.planning.report import duration
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped

CACHE_VERSION = "pytest-libero-plan-probe/4"
FIGURES = ("build_s", "reset_s", "physics_s", "render_s", "cpu_per_wall")
"""Each scene family's, from the phase probe."""
RUN_FIGURES = {"call_s": 0.0, "overhead_s": 0.0, "cpu_factor": 1.0}
"""From the probe's short real run (planning/run_probe.py), and each one's value when a
probe gives none."""
BOUNDS: Mapping[str, tuple[float, str]] = {
    "build_s": (HOUR, "s"), "reset_s": (HOUR, "s"), "physics_s": (MINUTE, "s"),
    "render_s": (MINUTE, "s"), "cpu_per_wall": (4096.0, "CPU seconds per second"),
    "call_s": (HOUR, "s"), "overhead_s": (HOUR, "s"), "cpu_factor": (4.0, ""),
    "waiting": (1.0, "")}
"""Each figure's largest plausible value: a build or a reset under an hour, a control's
physics and a camera image under a minute, a call's own work and a run's start and
finish under an hour, a share of time waited at most all of it."""
CACHE_LIMIT = 64 << 10
"""The most bytes of a cache file read: one holds a few hundred a scene family."""
SCENES_LIMIT = 64
"""The most scene families a cache file may hold (LIBERO has five)."""
SUITE_PROBE_S = 45
RUN_PROBE_S = 30

Probe = Callable[[Sequence[str], bool], dict[str, Any]]
"""The probe of some scene families, with the one-case run or not: ``{"suites": {name:
figures}, "call_s": ..., "overhead_s": ...}`` or ``{"error": ...}``."""


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/pytest-libero``; a relative XDG_CACHE_HOME is ignored, as the XDG
    rule says (a cache never depends on the folder plan is started in)."""
    root = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(root) if os.path.isabs(root) else Path.home() / ".cache") / "pytest-libero"


def machine() -> dict[str, Any]:
    """What the figures depend on besides the renderer."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"node": platform.node(), "machine": platform.machine(), "processor": model,
            "cores": os.cpu_count() or 1}


def cache_key(where: Mapping[str, Any], renderer: Mapping[str, Any]) -> str:
    text = json_text([dict(where), renderer.get("sha256"), renderer.get("renderer"),
                      renderer.get("version")])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def phase_costs(scenes: Sequence[str] = ("libero_10",), *, refresh: bool,
                say: Callable[[str], None],
                fingerprint: Callable[[], dict[str, Any]] | None = None,
                probe: Probe | None = None) -> CostTable:
    """This machine's figures for each of ``scenes`` (the first is the table's default),
    from the cache or a new probe of the families it lacks (``refresh``: of all)."""
    from pytest_libero.evidence.renderer import measure_in_child as measure_renderer

    renderer = (fingerprint or measure_renderer)()
    where = machine()
    path = cache_dir() / f"probe-{cache_key(where, renderer)}.json"
    cached: dict[str, Any] = {}
    if not refresh and os.path.lexists(path):
        try:
            cached = _checked(json.loads(read_capped(path, CACHE_LIMIT).decode("utf-8")))
        except (OSError, ValueError, RecursionError) as exc:  # Refused, UTF-8, JSON: ValueErrors
            say(f"the probe cache {path} does not read ({type(exc).__name__}: "
                f"{clipped(str(exc), 200)}); probing again")
    missing = [scene for scene in dict.fromkeys(scenes) if scene not in cached.get("scenes", {})]
    if missing:
        probed = _probed(missing, cached, probe or measure, say)
        try:
            cached = _checked({**probed, "version": CACHE_VERSION, "machine": where,
                               "renderer": renderer})
        except ValueError as exc:  # a figure no real machine gives: said, never cached
            raise SetupError(f"the phase-cost probe's figures are not plausible ({exc}); give a "
                             "finished run to plan from instead (pytest-libero plan --from "
                             "RUN_DIR ...)") from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, cached)
        except OSError as exc:
            say(f"the probe's figures could not be cached at {path} ({exc}); the next plan "
                "probes again")
    return _table(cached, path, scenes)


def _probed(missing: Sequence[str], cached: Mapping[str, Any], probe: Probe,
            say: Callable[[str], None]) -> dict[str, Any]:
    """``cached`` with the ``missing`` families probed (and the one-case run, when the
    cache has none yet), each marked with how long the probe waited for a core."""
    with_run = "call_s" not in cached
    seconds = SUITE_PROBE_S * len(missing) + (RUN_PROBE_S if with_run else 0)
    say(f"probing this machine's phase costs of {', '.join(missing)} (for each, three builds, "
        f"five resets, 40 controls{'; then a one-case run' if with_run else ''}; about "
        f"{duration(seconds)} on a CPU, cached after)")
    before, started = cpu_waiting_s(), time.monotonic()
    found = probe(missing, with_run)
    if "error" in found:
        raise SetupError(f"the phase-cost probe failed: {found['error']}; give a finished run "
                         "to plan from instead (pytest-libero plan --from RUN_DIR ...)")
    wall = time.monotonic() - started
    waited = waiting_share(before, cpu_waiting_s(), wall)
    if waited is not None and waited > BUSY_WAITING:
        say(f"the probe waited for a core {waited:.0%} of its {wall:.0f} s: other work kept this "
            "machine busy, so its figures are slower than a quiet machine's (they are cached "
            "and marked; plan again with --refresh when it is quiet)")
    suites = found.get("suites")
    if not isinstance(suites, dict):
        raise SetupError(f"the phase-cost probe gave no figures of {', '.join(missing)}")
    marked = {name: {**figures, **({} if waited is None else {"waiting": waited})}
              for name, figures in suites.items() if isinstance(figures, dict)}
    run = {name: found[name] for name in (*RUN_FIGURES, "run_s") if name in found}
    return {**cached, **run, "scenes": {**cached.get("scenes", {}), **marked}}


def measure(scenes: Sequence[str], with_run: bool) -> dict[str, Any]:
    """The phase probe in a process of its own, then (``with_run``) the short real run it
    explains, on the first of ``scenes``."""
    from pytest_libero.adapters.cost_probe import measure_in_child
    from pytest_libero.planning.run_probe import measure_run

    found = measure_in_child(scenes)
    if "error" in found or not with_run:
        return found
    return {**found, **measure_run(found["suites"][scenes[0]], scenes[0])}


def _checked(found: Any) -> dict[str, Any]:
    """The cache's figures, each checked against its bound (ValueError naming the first
    that is not one): ``{"scenes": {name: figures}, "call_s", "overhead_s", ...}``."""
    if not isinstance(found, dict):
        raise ValueError(f"it holds a {type(found).__name__}, not a table of figures")
    if found.get("version") != CACHE_VERSION:
        raise ValueError(f"its version is {shown(found.get('version'))}, not {CACHE_VERSION}")
    renderer = found.get("renderer", {})
    if not isinstance(renderer, dict) or not all(
            isinstance(renderer.get(key, ""), str) for key in ("renderer", "backend")):
        raise ValueError(f"its renderer is {shown(renderer)}, not a renderer fingerprint")
    scenes = found.get("scenes")
    if not isinstance(scenes, dict) or not 0 < len(scenes) <= SCENES_LIMIT:
        raise ValueError(f"its scenes are {shown(scenes)}, not a table of 1 to {SCENES_LIMIT} "
                         "scene families")
    checked: dict[str, Any] = {}
    for name, figures in scenes.items():
        if not isinstance(figures, dict):
            raise ValueError(f"scenes[{shown(name)}] is {shown(figures)}, not a table of figures")
        missing = [figure_name for figure_name in FIGURES if figure_name not in figures]
        if missing:
            raise ValueError(f"scenes[{shown(name)}] has no {', '.join(missing)}")
        checked[name] = {key: figure(figures[key], f"scenes[{shown(name)}].{key}", *BOUNDS[key])
                         for key in (*FIGURES, "waiting") if key in figures}
    run = {name: figure(found.get(name, 0.0), name, *BOUNDS[name]) for name in RUN_FIGURES
           if name in found}
    return {**found, **run, "scenes": checked}


def _table(cached: Mapping[str, Any], path: Path, scenes: Sequence[str]) -> CostTable:
    """The cost table of ``scenes``, from checked figures."""
    renderer = cached.get("renderer", {})
    source = (f"the probe cached at {path} (renderer {clipped(renderer.get('renderer', '?'), 80)}, "
              f"{clipped(renderer.get('backend', '?'), 40)})")
    waited = max((cached["scenes"][scene].get("waiting", 0.0) for scene in scenes), default=0.0)
    if waited > BUSY_WAITING:
        source += (f"; measured on a busy machine (the probe waited for a core {waited:.0%} of "
                   "its time): --refresh when it is quiet")
    run = {name: cached.get(name, default) for name, default in RUN_FIGURES.items()}
    factor = run.pop("cpu_factor")
    table = {scene: PhaseCosts(settle_s=0.0, source=source, **run,
                               **{key: cached["scenes"][scene][key] for key in FIGURES
                                  if key != "cpu_per_wall"},
                               cpu_per_wall=cached["scenes"][scene]["cpu_per_wall"] * factor)
             for scene in scenes}
    return CostTable(table[scenes[0]], table)
