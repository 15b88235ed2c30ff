"""Full mode's case list through pytest: every (entry, state) once, shards balanced."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

CASE = re.compile(r"test_libero_task\[(libero_\w+-\d\d-s\d+)\]")


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--libero-profile=zero", "--libero-mode=full",
                                "--collect-only", "-q", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    return CASE.findall(result.stdout.str())


def test_scope_all_lists_6500_cases_task_then_state(pytester: pytest.Pytester) -> None:
    cases = collected(pytester, "--libero-scope=all")
    assert len(cases) == len(set(cases)) == 6500
    assert cases[:2] == ["libero_spatial-00-s0", "libero_spatial-00-s1"]
    assert cases[-1] == "libero_10-09-s49"


def test_shards_split_cases_disjointly_and_evenly(pytester: pytest.Pytester) -> None:
    selection = ["--libero-scope=task_coverage", "--libero-suite=libero_10",
                 "--libero-task-ids=0-2", "--libero-init-states=0-4"]
    whole = collected(pytester, *selection)
    parts = [collected(pytester, *selection, f"--libero-shard={i}/4") for i in range(1, 5)]
    assert sorted(sum(parts, [])) == sorted(whole) and len(whole) == 15
    assert sorted(len(p) for p in parts) == [3, 4, 4, 4]  # equal cost: counts differ by one
    for part in parts:
        assert part == [c for c in whole if c in part]  # each part keeps native order
