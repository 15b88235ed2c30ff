"""A bare LIBERO environment driven as the plugin's adapter drives it: the same
headless set-up, the catalog's entries, the adapter's own render gates. For the
benchmarks' reference loops and the schedule validator's reference schedule."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any


def prepare_simulator() -> None:
    """Headless rendering and a quiet robosuite, exactly as the plugin's adapter does."""
    from pytest_libero.adapters.libero import prepare_simulator_environment

    prepare_simulator_environment()
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def catalog_entry(suite: str, index: int) -> Any:
    """The catalog entry ``suite`` ``index``, native or LIBERO-PRO; exits naming it if none."""
    from pytest_libero.catalog.entries import load_catalog

    for candidate in load_catalog().suite_entries(suite):
        if candidate.index == index:
            return candidate
    raise SystemExit(f"no catalog entry {suite} {index}")


class CameraGate:
    """The adapter's own render gates on a bare env's cameras, switched together.

    Re-install after every ``env.reset()``: a hard reset replaces the sensors.
    """

    def __init__(self, robosuite_env: Any, cameras: Sequence[str], size: int) -> None:
        from pytest_libero.adapters.libero import RenderGate

        self.gates = {}
        for camera in cameras:
            observable = robosuite_env._observables[f"{camera}_image"]
            self.gates[camera] = observable._sensor = RenderGate(observable._sensor, (size, size, 3))

    @property
    def want(self) -> bool:
        return any(gate.wanted for gate in self.gates.values())

    @want.setter
    def want(self, wanted: bool) -> None:
        for gate in self.gates.values():
            gate.wanted = wanted

    @property
    def renders(self) -> dict[str, int]:
        return {camera: gate.renders for camera, gate in self.gates.items()}
