"""The plan's probe of this machine (issue 53): the real simulator measured in a process of
its own and a one-case real run timed from outside, the figures cached under the machine
and renderer's key and read back without probing again, and a cache that does not read
probed over with a line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.planning.probe import phase_costs

pytestmark = pytest.mark.simulator


def test_the_probe_measures_caches_and_is_read_back(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    said: list[str] = []
    costs = phase_costs(refresh=False, say=said.append)
    assert said and said[0].startswith("probing this machine's phase costs")
    assert 0.5 < costs.build_s < 60 and 0.2 < costs.reset_s < 60, costs
    assert 0 < costs.physics_s < costs.render_s < 2, costs  # a camera image costs more than physics
    assert 0.3 < costs.cpu_per_wall < 64, costs
    # The one-case run: what its record does not account for (pytest, the case host, the
    # first scene cold, the finish), and each call's own work.
    assert 0.5 < costs.overhead_s < 120 and 0 <= costs.call_s < 2, costs
    [cached] = (tmp_path / "pytest-libero").glob("probe-*.json")
    found = json.loads(cached.read_text())
    assert found["renderer"]["sha256"] and found["machine"]["cores"] >= 1
    assert found["run_s"] > costs.overhead_s  # the run also had its case

    def no_probe() -> dict[str, Any]:
        raise AssertionError("the cache should have answered")

    again = phase_costs(refresh=False, say=said.append, probe=no_probe)
    assert (again.build_s, again.render_s) == (costs.build_s, costs.render_s)
    assert str(cached) in again.source and len(said) == 1

    cached.write_text("{not json")
    fixed = phase_costs(refresh=False, say=said.append,
                        probe=lambda: {k: found[k] for k in ("build_s", "reset_s", "physics_s",
                                                             "render_s", "cpu_per_wall")})
    assert said[1].startswith(f"the probe cache {cached} does not read (JSONDecodeError")
    assert fixed.build_s == costs.build_s and json.loads(cached.read_text())["version"]
