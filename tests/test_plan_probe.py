"""The plan's probe of this machine (issue 53): the real simulator measured in a process of
its own and a one-case real run timed from outside, each scene family the plan meets probed
apart (issue 61: libero_spatial's images cost twice libero_object's), the figures cached
under the machine and renderer's key and read back without probing again, a family the cache
lacks probed and added, and a cache that does not read probed over with a line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.planning.probe import phase_costs

pytestmark = pytest.mark.simulator


def test_the_probe_measures_each_scene_family_caches_and_is_read_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    said: list[str] = []
    table = phase_costs(("libero_object", "libero_spatial"), refresh=False, say=said.append)
    assert said and said[-1 if len(said) == 1 else 0].startswith(
        "probing this machine's phase costs of libero_object, libero_spatial")
    for costs in (table.of("libero_object"), table.of("libero_spatial")):
        assert 0.5 < costs.build_s < 60 and 0.2 < costs.reset_s < 60, costs
        assert 0 < costs.physics_s < costs.render_s < 2, costs  # a camera image costs more than physics
        assert 0.3 < costs.cpu_per_wall < 64, costs
        # The one-case run: what its record does not account for (pytest, the case host, the
        # first scene cold, the finish), and each call's own work.
        assert 0.5 < costs.overhead_s < 120 and 0 <= costs.call_s < 2, costs
    # Each family measured on its own scene (how much they differ is bench/plan_accuracy.py's:
    # under another process's load one image's cost swings more than the scenes differ).
    assert table.of("libero_spatial").build_s != table.of("libero_object").build_s, table
    assert table.default == table.of("libero_object")
    [cached] = (tmp_path / "pytest-libero").glob("probe-*.json")
    found = json.loads(cached.read_text())
    assert found["renderer"]["sha256"] and found["machine"]["cores"] >= 1
    assert found["run_s"] > found["overhead_s"]  # the run also had its case
    told = len(said)

    def no_probe(scenes: Sequence[str], with_run: bool) -> dict[str, Any]:
        raise AssertionError("the cache should have answered")

    again = phase_costs(("libero_spatial",), refresh=False, say=said.append, probe=no_probe)
    assert again.default == table.of("libero_spatial") and len(said) == told
    assert str(cached) in again.default.source

    asked: list[tuple[tuple[str, ...], bool]] = []

    def goal_only(scenes: Sequence[str], with_run: bool) -> dict[str, Any]:
        asked.append((tuple(scenes), with_run))
        return {"suites": {"libero_goal": found["scenes"]["libero_object"]}}

    more = phase_costs(("libero_spatial", "libero_goal"), refresh=False, say=said.append,
                       probe=goal_only)
    assert asked == [(("libero_goal",), False)]  # only the family the cache lacks, no second run
    assert said[told].startswith("probing this machine's phase costs of libero_goal (")
    assert more.of("libero_spatial") == table.of("libero_spatial")
    kept = json.loads(cached.read_text())
    assert set(kept["scenes"]) == {"libero_object", "libero_spatial", "libero_goal"}
    assert kept["overhead_s"] == found["overhead_s"]

    cached.write_text("{not json")
    object_only = {"suites": {"libero_object": found["scenes"]["libero_object"]}}
    fixed = phase_costs(("libero_object",), refresh=False, say=said.append,
                        probe=lambda scenes, run: object_only)
    assert any(line.startswith(f"the probe cache {cached} does not read (JSONDecodeError")
               for line in said[told:])
    assert fixed.default.build_s == table.of("libero_object").build_s
    assert json.loads(cached.read_text())["version"]
