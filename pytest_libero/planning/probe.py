"""This machine's phase costs: probed once, then kept per machine and renderer.

The probe (``adapters/cost_probe.py``, then a one-case run timed from outside,
``run_probe.py``) takes about a minute on a CPU, so its figures
are cached in ``$XDG_CACHE_HOME/pytest-libero`` (``~/.cache/pytest-libero``) under a key
made of the machine (its name, processor and cores) and the renderer's fingerprint: a
new driver or a move to a GPU is a new key, and ``--refresh`` probes again. A cache
file that does not read as one is probed over, and said so.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_libero.files import json_text, write_json_atomic
from pytest_libero.planning.model import PhaseCosts
from pytest_libero.protocol.errors import SetupError

CACHE_VERSION = "pytest-libero-plan-probe/3"
FIGURES = ("build_s", "reset_s", "physics_s", "render_s", "cpu_per_wall")
RUN_FIGURES = ("call_s", "overhead_s")
"""From the probe's short real run (planning/run_probe.py); 0 when a probe gives none."""


def cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "pytest-libero"


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


def phase_costs(*, refresh: bool, say: Callable[[str], None],
                fingerprint: Callable[[], dict[str, Any]] | None = None,
                probe: Callable[[], dict[str, Any]] | None = None) -> PhaseCosts:
    """This machine's figures, from the cache or a new probe (``refresh``: always)."""
    from pytest_libero.evidence.renderer import measure_in_child as measure_renderer

    renderer = (fingerprint or measure_renderer)()
    where = machine()
    path = cache_dir() / f"probe-{cache_key(where, renderer)}.json"
    if not refresh and path.exists():
        try:
            return _costs(json.loads(path.read_text(encoding="utf-8")), path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            say(f"the probe cache {path} does not read ({type(exc).__name__}: {exc}); probing again")
    say("probing this machine's phase costs (three builds, five resets, 40 controls, then a "
        "one-case run; about a minute on a CPU, cached after)")
    found = (probe or measure)()
    if "error" in found:
        raise SetupError(f"the phase-cost probe failed: {found['error']}; give a finished run "
                         "to plan from instead (pytest-libero plan --from RUN_DIR ...)")
    found = {**found, "version": CACHE_VERSION, "machine": where, "renderer": renderer}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, found)
    except OSError as exc:
        say(f"the probe's figures could not be cached at {path} ({exc}); the next plan probes again")
    return _costs(found, path)


def measure() -> dict[str, Any]:
    """The phase probe in a process of its own, then the short real run it explains."""
    from pytest_libero.adapters.cost_probe import measure_in_child
    from pytest_libero.planning.run_probe import measure_run

    found = measure_in_child()
    if "error" in found:
        return found
    return {**found, **measure_run(found)}


def _costs(found: Mapping[str, Any], path: Path) -> PhaseCosts:
    if found.get("version") != CACHE_VERSION:
        raise ValueError(f"its version is {found.get('version')!r}, not {CACHE_VERSION}")
    figures = {name: float(found[name]) for name in FIGURES}
    figures.update({name: float(found.get(name, 0.0)) for name in RUN_FIGURES})
    if any(not 0 <= value < math.inf for value in figures.values()):
        raise ValueError("a figure is negative, infinite or not a number")
    renderer = found.get("renderer") or {}
    return PhaseCosts(settle_s=0.0, source=(
        f"the probe cached at {path} (renderer {renderer.get('renderer', '?')}, "
        f"{renderer.get('backend', '?')})"), **figures)
