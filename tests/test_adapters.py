"""--libero-adapter: a third-party adapter is checked against the BenchmarkAdapter
Protocol when it is loaded, and each episode it opens before it is driven."""

from __future__ import annotations

import pytest

from harness.runs import run_folder, run_records

pytest_plugins = ["pytester"]

ADAPTERS = '''
class NoOpen:
    pass


class OpensHalfAnEpisode:
    def open(self, entry, *, track, control_cap, render, video_stride):
        return HalfEpisode()


class HalfEpisode:
    identity = {}
    init_controls = 0

    def observe(self, policy_calls, executed_controls):
        raise AssertionError("never driven")

    def step(self, action, observe_next=True):
        raise AssertionError("never driven")

    def close(self):
        pass
'''


@pytest.mark.parametrize(("adapter", "words"), [
    ("no_such_module:make", "cannot import no_such_module:make"),
    ("adapters_under_test:Missing", "cannot import adapters_under_test:Missing"),
    ("adapters_under_test:NoOpen", "returned a NoOpen without open; a benchmark adapter needs open("),
    ("nonsense", "no such adapter; give libero or module:factory"),
])
def test_an_adapter_that_cannot_work_is_a_usage_error(
    pytester: pytest.Pytester, adapter: str, words: str
) -> None:
    pytester.makepyfile(adapters_under_test=ADAPTERS)
    pytester.syspathinsert()
    result = pytester.runpytest("--libero-profile=zero", f"--libero-adapter={adapter}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--libero-adapter={adapter!r}*{words}*"])
    assert not (pytester.path / "libero-results").exists()


def test_an_episode_missing_a_member_errors_its_case_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(adapters_under_test=ADAPTERS)
    pytester.syspathinsert()
    result = pytester.runpytest("--libero-profile=zero",
                                "--libero-adapter=adapters_under_test:OpensHalfAnEpisode",
                                "--libero-scope=task_coverage", "--libero-suite=libero_10",
                                "--libero-task-ids=0", "--libero-isolation=none")  # no scene to warm
    result.assert_outcomes(errors=1)
    [record] = run_records(run_folder(pytester.path / "libero-results"))
    assert (record["error"]["kind"], record["error"]["cause"]) == ("environment", "environment")
    assert "opened a HalfEpisode without frame, renders" in record["error"]["message"]
