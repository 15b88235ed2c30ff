"""This machine's phase costs: probed once, then kept per machine and renderer.

The probe (``adapters/cost_probe.py``, then a one-case run timed from outside,
``run_probe.py``) takes about a minute on a CPU, so its figures
are cached in ``$XDG_CACHE_HOME/pytest-libero`` (``~/.cache/pytest-libero``) under a key
made of the machine (its name, processor and cores) and the renderer's fingerprint: a
new driver or a move to a GPU is a new key, and ``--refresh`` probes again.

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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_libero.files import json_text, read_capped, write_json_atomic
from pytest_libero.planning.figures import HOUR, MINUTE, figure, shown
from pytest_libero.planning.model import PhaseCosts
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped

CACHE_VERSION = "pytest-libero-plan-probe/3"
FIGURES = ("build_s", "reset_s", "physics_s", "render_s", "cpu_per_wall")
RUN_FIGURES = ("call_s", "overhead_s")
"""From the probe's short real run (planning/run_probe.py); 0 when a probe gives none."""
BOUNDS: Mapping[str, tuple[float, str]] = {
    "build_s": (HOUR, "s"), "reset_s": (HOUR, "s"), "physics_s": (MINUTE, "s"),
    "render_s": (MINUTE, "s"), "cpu_per_wall": (4096.0, "CPU seconds per second"),
    "call_s": (HOUR, "s"), "overhead_s": (HOUR, "s")}
"""Each figure's largest plausible value: a build or a reset under an hour, a control's
physics and a camera image under a minute, a call's own work and a run's start and
finish under an hour."""
CACHE_LIMIT = 64 << 10
"""The most bytes of a cache file read: one holds a few hundred."""


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


def phase_costs(*, refresh: bool, say: Callable[[str], None],
                fingerprint: Callable[[], dict[str, Any]] | None = None,
                probe: Callable[[], dict[str, Any]] | None = None) -> PhaseCosts:
    """This machine's figures, from the cache or a new probe (``refresh``: always)."""
    from pytest_libero.evidence.renderer import measure_in_child as measure_renderer

    renderer = (fingerprint or measure_renderer)()
    where = machine()
    path = cache_dir() / f"probe-{cache_key(where, renderer)}.json"
    if not refresh and os.path.lexists(path):
        try:
            return _costs(json.loads(read_capped(path, CACHE_LIMIT).decode("utf-8")), path)
        except (OSError, ValueError, RecursionError) as exc:  # Refused, UTF-8, JSON: ValueErrors
            say(f"the probe cache {path} does not read ({type(exc).__name__}: "
                f"{clipped(str(exc), 200)}); probing again")
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


def _costs(found: Any, path: Path) -> PhaseCosts:
    """The cached figures, each checked against its bound (ValueError naming the first
    that is not one)."""
    if not isinstance(found, dict):
        raise ValueError(f"it holds a {type(found).__name__}, not a table of figures")
    if found.get("version") != CACHE_VERSION:
        raise ValueError(f"its version is {shown(found.get('version'))}, not {CACHE_VERSION}")
    missing = [name for name in FIGURES if name not in found]
    if missing:
        raise ValueError(f"it has no {', '.join(missing)}")
    figures = {name: figure(found.get(name, 0.0), name, *BOUNDS[name])
               for name in (*FIGURES, *RUN_FIGURES)}
    renderer = found.get("renderer", {})
    if not isinstance(renderer, dict) or not all(
            isinstance(renderer.get(key, ""), str) for key in ("renderer", "backend")):
        raise ValueError(f"its renderer is {shown(renderer)}, not a renderer fingerprint")
    return PhaseCosts(settle_s=0.0, source=(
        f"the probe cached at {path} (renderer {clipped(renderer.get('renderer', '?'), 80)}, "
        f"{clipped(renderer.get('backend', '?'), 40)})"), **figures)
