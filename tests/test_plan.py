"""``pytest-libero plan`` (issue 53): the cost model by hand, the run's options read as the
run reads them (the same refusals, before any probe), plans from a finished run's
timings, a server that does not answer the latency probe, and a deciding run's expected
share from the decision rule's own simulation. The real probe of the simulator is
tests/test_plan_probe.py's.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from decided_runs import run

from harness.runs import run_folder, run_records
from harness.servers import free_port
from pytest_libero.config.decide import DecideSettings
from pytest_libero.config.plan import Gates
from pytest_libero.planning.command import plan_main
from pytest_libero.planning.decided import expected_fraction
from pytest_libero.planning.model import (
    Assumptions,
    CaseCost,
    CaseShape,
    CostTable,
    PhaseCosts,
    best,
    case_cost,
    chains,
    predict,
    saturation,
    shared_cores,
    worker_counts,
)
from pytest_libero.planning.run_probe import split_run
from pytest_libero.planning.shapes import Tally, renders_per_control, scene_family

COSTS = PhaseCosts(build_s=2.0, reset_s=1.0, settle_s=0.0, physics_s=0.01, render_s=0.1,
                   cpu_per_wall=1.0, source="by hand")


def shapes(count: int, *, states: bool = False) -> list[CaseShape]:
    return [CaseShape(f"libero_10-{0 if states else n:02d}" + (f"-s{n}" if states else ""),
                      "libero_10-00" if states else f"libero_10-{n:02d}", n if states else None,
                      100, 5, 1.2) for n in range(count)]


def test_a_case_s_seconds_by_hand() -> None:
    [shape] = shapes(1)
    cost = case_cost(shape, COSTS, Assumptions())
    assert (cost.setup_s, cost.episode_s, cost.calls) == (3.0, pytest.approx(13.0), 20.0)
    succeeding = case_cost(shape, COSTS, Assumptions(success_rate=0.5, success_share=0.6))
    assert succeeding.episode_s == pytest.approx(13.0 * 0.8)  # half the cases stop at 60%
    waiting = case_cost(shape, COSTS, Assumptions(latency_s=0.5))
    assert waiting.episode_s == pytest.approx(23.0) and waiting.cpu_s == pytest.approx(16.0)


def test_full_mode_keeps_a_task_s_environment_from_state_to_state() -> None:
    first, second, third = shapes(3, states=True)
    assert case_cost(first, COSTS, Assumptions()).setup_s == 3.0  # build and its own reset
    assert case_cost(third, COSTS, Assumptions()).setup_s == 2.0 + 3 * 1.0  # fresh at state 2
    assert case_cost(third, COSTS, Assumptions(), previous=second).setup_s == 1.0  # one reset on


def test_the_three_bounds() -> None:
    four = shapes(4)
    one = predict(four, COSTS, Assumptions(), workers=1, cores=8)
    assert one.bound == "workers" and one.wall_s == pytest.approx(3 + 3 * 13 + 13)  # set-ups hidden
    serial = predict(four, COSTS, Assumptions(prebuild=False), workers=1, cores=8)
    assert serial.wall_s == pytest.approx(4 * 16)
    two = predict(four, COSTS, Assumptions(), workers=2, cores=8)
    assert two.bound == "workers" and two.wall_s == pytest.approx(3 + 13 + 13)
    crowded = predict(four, COSTS, Assumptions(), workers=2, cores=1)
    assert crowded.bound == "cores" and crowded.wall_s == pytest.approx(4 * 16)
    served = predict(four, COSTS, Assumptions(latency_s=0.5), workers=4, cores=8)
    assert served.bound == "policy server" and served.wall_s == pytest.approx(80 * 0.5)
    predictions = [predict(four, COSTS, Assumptions(), n, cores=3) for n in (1, 2, 4)]
    # Two workers' episodes beside their set-ups ahead ask four cores of three: all four run
    # at 0.75 until the set-ups end (4 s), the episodes' last 10 s, then the next two.
    assert predictions[1].wall_s == pytest.approx(3 + 4 + 10 + 13)
    limit = saturation(predictions)
    assert limit is not None and limit.workers == 4 and limit.bound == "cores"
    assert limit.wall_s == pytest.approx(64 / 3) and best(predictions).workers == 4


def test_a_set_up_ahead_hides_only_on_the_cores_the_episodes_leave() -> None:
    busy = replace(COSTS, cpu_per_wall=1.5)
    two = shapes(2)
    # On two cores one worker's episode (13 s at 1.5 cores) beside the next set-up (3 s on
    # one core) asks 2.5 cores: both run at 0.8 until the set-up ends (3.75 s); the episode's
    # last 10 s alone, then the second episode.
    one = predict(two, busy, Assumptions(), 1, cores=2)
    assert one.bounds["workers"] == pytest.approx(3 + 13 + 13)  # a worker alone hides it all
    assert one.bound == "cores" and one.bounds["cores"] == pytest.approx(3 + 3.75 + 10 + 13)
    assert predict(two, busy, Assumptions(), 1, cores=16).bound == "workers"


def test_a_full_mode_task_s_states_go_to_one_worker_whole_and_the_run_s_fixed_cost_is_added() -> None:
    states = shapes(3, states=True)
    other = [CaseShape("libero_10-01-s0", "libero_10-01", 0, 100, 5, 1.2)]
    assert [[s.case for s in unit] for unit in chains([*states[:2], *other, states[2]])] == [
        ["libero_10-00-s0", "libero_10-00-s1", "libero_10-00-s2"], ["libero_10-01-s0"]]
    costs = replace(COSTS, overhead_s=7.0, call_s=0.05)
    two = predict([*states, *other], costs, Assumptions(), workers=2, cores=8)
    # Worker one: the task's three states in its one environment (3 s, then a reset each,
    # never set up ahead), each episode 13 s and 20 calls' own work; worker two the other task.
    assert two.bounds["workers"] == pytest.approx(7.0 + 3 + 1 + 1 + 3 * (13 + 1))
    assert two.wall_s == pytest.approx(two.bounds["workers"])


def test_each_scene_family_costs_its_own_and_a_perturbed_suite_costs_as_its_base() -> None:
    assert scene_family("libero_spatial") == "libero_spatial"
    assert scene_family("libero_goal_task") == "libero_goal"  # LIBERO-PRO: the base's scenes
    spatial = replace(COSTS, render_s=0.2, build_s=1.0, cpu_per_wall=1.5)
    table = CostTable(COSTS, {"libero_spatial": spatial})
    ten, table_top = (CaseShape("a", "a", None, 100, 5, 1.2, scene)
                      for scene in ("libero_10", "libero_spatial"))
    assert case_cost(ten, table, Assumptions()).episode_s == pytest.approx(100 * (0.01 + 1.2 * 0.1))
    assert case_cost(table_top, table, Assumptions()).episode_s == pytest.approx(100 * (0.01 + 1.2 * 0.2))
    assert case_cost(table_top, table, Assumptions()).setup_s == pytest.approx(1.0 + 1.0)
    # The spatial set-up ahead (2 s, one core) fits beside libero_10's one-core episode; the
    # spatial episode takes its own 25 s.
    both = predict([ten, table_top], table, Assumptions(), 1, cores=2)
    assert both.wall_s == pytest.approx(3 + 13 + 25)


def test_a_finished_run_s_cases_cost_each_scene_family_its_own() -> None:
    def record(suite: str, setup_s: float, episode_s: float) -> dict[str, object]:
        return {"outcome": "failure", "entry": {"suite": suite}, "timings": {
            "setup_s": setup_s, "episode_s": episode_s}, "counters": {
            "executed_controls": 100, "policy_calls": 20}, "renders": {"agentview": 100}, "chunks": []}

    tally = Tally()
    for suite, setup_s, episode_s in [("libero_10", 6.0, 10.0), ("libero_spatial", 4.0, 20.0),
                                      ("libero_spatial_swap", 4.0, 20.0)]:
        tally.add(record(suite, setup_s, episode_s))  # type: ignore[arg-type]
    table, _ = tally.table("the run R")
    assert set(table.scenes) == {"libero_10", "libero_spatial"}
    assert table.of("libero_spatial").render_s == pytest.approx(0.2)  # 20 s over 100 images
    assert table.of("libero_10").build_s == pytest.approx(3.0)
    assert table.default.render_s == pytest.approx(50 / 300)  # the whole run's, for any other
    assert table.of("libero_object") == table.default


def test_shared_cores_see_the_cores_a_last_case_leaves_idle() -> None:
    # Three episodes of 10 s alone at 1.5 cores each, on two workers and two cores: the two
    # together ask 3 cores and run at 2/3 speed (both end at 15 s); the third runs alone.
    def case(name: str) -> CaseCost:
        return CaseCost(name, setup_s=0.0, episode_s=10.0, cpu_s=15.0, calls=0.0)

    by_worker = [[case("a"), case("c")], [case("b")]]
    assert shared_cores(by_worker, False, cores=2, start_s=0.0) == pytest.approx(25.0)  # not 45/2
    # The second worker's start (3 s on one core) beside the first episode: 2.5 cores asked,
    # 0.8 speed until 3.75 s; then the two episodes at 2/3 until the first ends (14.25 s),
    # then the second beside the third (18.75 s), then the third alone.
    assert shared_cores(by_worker, False, cores=2, start_s=3.0) == pytest.approx(25.75)
    assert shared_cores(by_worker, False, cores=8, start_s=0.0) == pytest.approx(20.0)


def test_each_worker_past_the_first_starts_beside_it_on_the_cores() -> None:
    costs = replace(COSTS, overhead_s=6.0)
    four = shapes(4)
    # Four cases of 16 CPU seconds; each worker starts pytest and a case host (6 s on a
    # core): the first's start is the fixed cost, the others' load the one core.
    one = predict(four, costs, Assumptions(), workers=1, cores=1)
    assert one.bounds["cores"] == pytest.approx(4 * 16 + 6)
    three = predict(four, costs, Assumptions(), workers=3, cores=1)
    assert three.bound == "cores" and three.wall_s == pytest.approx(4 * 16 + 2 * 6 + 6)
    assert predict([], costs, Assumptions(), workers=3, cores=1).wall_s == 0.0


def test_the_probe_s_run_is_split_into_its_fixed_cost_and_each_call_s_own_work() -> None:
    record = {"timings": {"setup_s": 6.0, "episode_s": 2.2, "evidence_s": 0.3},
              "counters": {"executed_controls": 20, "policy_calls": 4},
              "renders": {"agentview": 20, "robot0_eye_in_hand": 4}}
    phases = {"build_s": 3.0, "reset_s": 1.0, "physics_s": 0.01, "render_s": 0.05}
    split = split_run(record, launched=100.0, ended=115.0, phases=phases)
    # 15 s in all, 8.5 s of them the case's; its set-up 2 s over a warm build and reset.
    assert split["overhead_s"] == pytest.approx(15 - 8.5 + 2)
    # Its episode less 20 controls' physics and 24 images, over 4 calls.
    assert split["call_s"] == pytest.approx((2.2 - 0.2 - 1.2) / 4)
    assert "cpu_factor" not in split  # no CPU seconds measured: the probe's share stands
    # 20 busy CPU seconds over the run: 12.8 of them outside the episode on one core, the
    # episode's 7.2 over its 2.2 s against the probe's 1.0 per second.
    phases = {**phases, "cpu_per_wall": 1.0}
    busy = split_run(record, launched=100.0, ended=115.0, phases=phases, cpu_s=20.0)
    assert busy["cpu_factor"] == pytest.approx(7.2 / 2.2)
    assert split_run(record, launched=100.0, ended=115.0, phases=phases, cpu_s=10.0)["cpu_factor"] == 1.0


def test_worker_counts_double_up_to_the_cores_or_gpus() -> None:
    assert worker_counts(2) == [1, 2]
    assert worker_counts(12) == [1, 2, 4, 8, 12]
    assert worker_counts(2, gpus=4) == [1, 2, 4]


def test_renders_per_control_are_what_a_run_renders() -> None:
    # The demo's libero_10-00 record: 180 controls, K = 5, the video every control:
    # agentview 1 + 180, the wrist 1 + 36 (the first of each: the settled scene).
    assert renders_per_control("consumed", 1, 5) == pytest.approx((180 + 36) / 180)
    assert renders_per_control("all", 1, 5) == 2.0
    assert renders_per_control("consumed", 5, 5) == pytest.approx(0.2 + 0.8 / 5 + 0.2)


def test_a_deciding_run_s_expected_share_is_the_rule_s_own() -> None:
    native = [f"libero_90-{n:02d}" for n in range(10)]
    gates = Gates(min_success=0.5, baseline=None, alpha=0.05)
    # Every case fails: exact decides once 6 of 10 have failed, whatever the order.
    assert expected_fraction(DecideSettings("exact"), gates, native, "fast", 0.0,
                             runs=20) == pytest.approx(0.6)
    anytime = expected_fraction(DecideSettings("anytime", alpha=0.05), gates, native, "fast", 0.0,
                                runs=20)
    assert anytime is not None and anytime <= 0.6
    assert expected_fraction(DecideSettings("exact"), Gates(None, Path("x"), 0.05), native,
                             "fast", 0.5) is None


SELECTION = ["--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
             "--libero-task-ids=0-3"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the plugin (scripted adapter): records with real timings and latencies."""
    where = tmp_path_factory.mktemp("finished")
    run(where, "--libero-task-ids=0-3", success="1")
    return run_folder(where / "libero-results")


def plan(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = plan_main(args)
    said = capsys.readouterr()
    return code, said.out, said.err


@pytest.mark.parametrize(("load", "busy"), [("9.50", True), ("0.00", False)], ids=["busy", "quiet"])
def test_a_busy_machine_is_said_beside_the_plan(load: str, busy: bool, finished: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_libero.planning import load as machine_load

    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"{load} 1.00 1.00 3/300 4242\n")
    monkeypatch.setattr(machine_load, "LOADAVG", loadavg)
    code, out, err = plan(["--from", str(finished), *SELECTION], capsys)
    assert code == 0 and out.startswith("pytest-libero plan: 4 cases"), out + err
    said = [line for line in err.splitlines() if "this machine is busy" in line]
    assert len(said) == busy and all(line.startswith("pytest-libero plan: this machine is busy (1-minute "
                                                     f"load {float(load):.1f} on ") for line in said), err


def test_a_plan_from_a_finished_run(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = run_records(finished)
    code, out, err = plan(["--from", str(finished), *SELECTION, "-n", "2"], capsys)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0] == "pytest-libero plan: 4 cases (libero_10 x 4; fast mode), at most 2,080 controls in all"
    assert f"from the run {finished} ({len(records)} completed cases" in lines[1]
    assert "25% of cases succeed" in lines[2]  # the run's own: task 1 of 0-3
    assert [line.split()[0] for line in lines[4:6]] == ["1", "2"]
    assert lines[5].endswith("<- this command's -n")
    assert lines[-1].startswith("fewest workers for the shortest run: ")
    code, out, _ = plan(["--from", str(finished), "--success-rate", "0", *SELECTION], capsys)
    assert code == 0 and "every case fails and runs its whole control cap" in out
    code, out, _ = plan(["--from", str(finished), "--json", *SELECTION, "-n", "2"], capsys)
    found = json.loads(out)
    assert (found["cases"], found["asked"]["workers"], found["assumptions"]["success_rate"]) == (
        4, 2, 0.25)
    assert [p["workers"] for p in found["predictions"]] == worker_counts(os.cpu_count() or 1)
    assert found["best_workers"] in {p["workers"] for p in found["predictions"]}


@pytest.mark.parametrize(("args", "said"), [
    (["--libero-profile=zero", "--libero-scope=everything"], "--libero-scope='everything' is unknown"),
    (["--libero-scope=smoke"], "pytest-libero plan needs the run's options, --libero-profile first"),
    (["--success-rate", "2", *SELECTION], "--success-rate='2' is not a share from 0 to 1"),
    (["--latency-ms", "-5", *SELECTION], "--latency-ms='-5' is not milliseconds from 0 to 3,600,000"),
])
def test_bad_input_is_the_run_s_refusal_before_any_probe(args: list[str], said: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan(args, capsys)
    assert code == 4 and said in out + err, out + err
    assert "probing" not in out + err


@pytest.fixture
def cached_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine's probe cache, written by hand under the real renderer's key."""
    from pytest_libero.evidence.renderer import measure_in_child
    from pytest_libero.planning.probe import CACHE_VERSION, cache_key, machine

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cached = tmp_path / "cache" / "pytest-libero" / f"probe-{cache_key(machine(), measure_in_child())}.json"
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps({"version": CACHE_VERSION, "scenes": {"libero_10": {
        "build_s": 3.0, "reset_s": 3.0, "physics_s": 0.01, "render_s": 0.12, "cpu_per_wall": 1.0}}}))
    return cached


@pytest.mark.parametrize("figure", ["-1", "NaN", "Infinity", '"fast"'])
def test_a_cached_figure_that_is_no_duration_is_probed_over(figure: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_libero.planning.probe import CACHE_VERSION, cache_key, machine, phase_costs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    renderer = {"sha256": "a" * 64, "renderer": "by hand", "version": "1"}
    cached = tmp_path / "pytest-libero" / f"probe-{cache_key(machine(), renderer)}.json"
    cached.parent.mkdir(parents=True)
    figures = {"build_s": 3.0, "reset_s": 3.0, "physics_s": 0.01, "render_s": 0.12, "cpu_per_wall": 1.0}
    cached.write_text(json.dumps({"version": CACHE_VERSION, "scenes": {"libero_10": figures}})
                      .replace('"build_s": 3.0', f'"build_s": {figure}'))
    said: list[str] = []
    costs = phase_costs(refresh=False, say=said.append, fingerprint=lambda: renderer,
                        probe=lambda scenes, run: {"suites": {
                            scene: {**figures, "build_s": 2.0} for scene in scenes}})
    assert said[0].startswith(f"the probe cache {cached} does not read"), said
    assert costs.default.build_s == 2.0
    assert json.loads(cached.read_text())["scenes"]["libero_10"]["build_s"] == 2.0


def test_a_probe_whose_figures_are_not_plausible_is_refused_and_not_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_libero.planning.probe import phase_costs
    from pytest_libero.protocol.errors import SetupError

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    figures = {"build_s": 3.0, "reset_s": 3.0, "physics_s": 0.01, "render_s": 1e9, "cpu_per_wall": 1.0}
    with pytest.raises(SetupError, match=r"^the phase-cost probe's figures are not plausible "
                       r"\(scenes\['libero_10'\]\.render_s is 1000000000\.0, not a figure from 0 to 60 s\)"):
        phase_costs(refresh=False, say=lambda line: None, fingerprint=lambda: {"sha256": "b" * 64},
                    probe=lambda scenes, run: {"suites": {scene: figures for scene in scenes}})
    assert not list(tmp_path.rglob("probe-*.json"))


def served_profile(tmp_path: Path, port: int) -> Path:
    profile = tmp_path / "served.toml"
    profile.write_text(f'name = "served"\ndescription = "a served policy"\n\n[policy]\n'
                       f'transport = "websocket"\nendpoint = "ws://127.0.0.1:{port}"\n')
    return profile


def test_a_served_policy_s_latency_is_measured(tmp_path: Path, cached_probe: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from scripted_policies import TESTS_DIR

    from harness.servers import serve_argv, serving

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}
    with serving(serve_argv("scripted_policies:Sleeps", port), port, env=env):
        code, out, err = plan([f"--libero-profile={served_profile(tmp_path, port)}",
                               *SELECTION[1:], "-n", "2"], capsys)
    assert code == 0, out + err
    [said] = [line for line in out.splitlines() if line.startswith("assumed: ")]
    latency = float(said.split("policy ")[1].split(" ms per call")[0])
    assert 50 <= latency < 150, said  # the server sleeps 50 ms; the wire and codec add a little
    assert f"measured: median of 3 calls to ws://127.0.0.1:{port} after a warm-up" in said


def test_a_server_that_does_not_answer_is_one_line_and_the_latency_is_marked_assumed(
        tmp_path: Path, cached_probe: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan([f"--libero-profile={served_profile(tmp_path, free_port())}",
                           *SELECTION[1:]], capsys)
    assert code == 0, out + err
    [told] = [line for line in err.splitlines() if "did not answer the latency probe" in line]
    assert told.startswith("pytest-libero plan: the policy server at ws://127.0.0.1:")
    assert "ASSUMED: no server answered at ws://127.0.0.1:" in out
    assert f"from the probe cached at {cached_probe}" in out and "probing" not in err


def test_the_command_says_its_own_options_and_leaves_the_rest_to_the_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_libero import cli

    with pytest.raises(SystemExit) as done:
        cli.main(["plan", "--help"])
    assert done.value.code == 0
    said = capsys.readouterr().out
    assert "--from RUN_DIR" in said and "Every other argument is the run's own" in said
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "predict a run's wall time" in capsys.readouterr().out
