"""pytest-libero compare, table, card and export --csv on run folders written here
(issue 64): the numbers each form prints, the verdict and exit code, the refusals, and the
card read back by huggingface_hub's own classes, offline. The statistics themselves are
checked against scipy and statsmodels in tests/test_compare_stats.py; a real run's folder
in tests/test_publish_run.py."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_runs import in_process
from huggingface_hub import ModelCard
from huggingface_hub.repocard_data import eval_results_to_model_index, model_index_to_eval_results
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint
from synthetic import synthetic_record

from pytest_libero.protocol.identity import protocol_identity
from pytest_libero.publish.stats import paired_difference_interval

PLAN: dict[str, Any] = {
    "selection": {"scope": "all", "suite": None, "task_ids": None, "mode": "full",
                  "init_states": list(range(10))},
    "shard": None, "budget_mode": "horizon", "max_policy_calls": None, "replan_interval": 5,
    "track": "rgb", "evidence_class": "capability", "mode": "full", "partial": [],
}
CASES = [f"{suite}-{task:02d}-s{state}" for suite in ("libero_10", "libero_spatial")
         for task in range(10) for state in range(10)]
BASE = {c: "success" if (int(c.split("-")[1]) + int(c.split("-s")[1])) % 2 == 0 else "failure"
        for c in CASES}
"""A: half of each suite."""
GAINED = [c for c in CASES if c.startswith("libero_10") and BASE[c] == "failure"][:14] + \
    [c for c in CASES if c.startswith("libero_spatial") and BASE[c] == "failure"][:3]
LOST = [c for c in CASES if c.startswith("libero_10") and BASE[c] == "success"][:2] + \
    [c for c in CASES if c.startswith("libero_spatial") and BASE[c] == "success"][:3]
BETTER = {**BASE, **dict.fromkeys(GAINED, "success"), **dict.fromkeys(LOST, "failure")}
"""B: libero_10 gains 14 and loses 2 (50% -> 62%); libero_spatial gains 3 and loses 3."""

SCORES = {"success": ({"predicates": ["(In a b)", "(On c d)"], "held_at_start": [False, False],
                       "held_at_end": [True, True], "first_held": [3, 5], "most_held": 2,
                       "controls": 9}, 1.0, "success"),
          "failure": ({"predicates": ["(In a b)", "(On c d)"], "held_at_start": [False, False],
                       "held_at_end": [False, False], "first_held": [None, None], "most_held": 1,
                       "controls": 9}, 0.5, "manipulated")}


def write_run(root: Path, name: str, outcomes: Mapping[str, str], *, profile: str = "ckpt",
              selected: list[str] | None = None, scores: bool = False,
              extra: Mapping[str, dict[str, Any]] | None = None, **plan: Any) -> Path:
    """A run folder as the reader takes it: run.json and one record per case."""
    folder = root / profile / name
    folder.mkdir(parents=True)
    cases = list(outcomes) if selected is None else selected
    run = {"run_id": name, "protocol_identity": protocol_identity(),
           "plan": {**PLAN, "profile": {"name": profile, "sha256": "0" * 64}, "cases": cases,
                    "selection_cases": cases, **plan}}
    (folder / "run.json").write_text(json.dumps(run))
    lines = []
    for case, outcome in outcomes.items():
        fields: dict[str, Any] = dict((extra or {}).get(case, {}))
        if outcome == "errored":
            fields["error"] = {"kind": "environment", "cause": "simulator_crash", "message": "boom"}
        elif scores:
            progress, score, engagement = SCORES[outcome]
            fields.update(progress=progress, score=score, engagement=engagement,
                          safety={"verdict": "safe"})
        record = synthetic_record(case, outcome, **fields)
        twin, _, tag = case.partition("~")
        if tag:  # a generated perturbation: its entry names its kind, level and twin
            record["entry"].update(perturbation={"kind": tag.rstrip("0123456789"),
                                                 "level": int(tag[-1])}, twin=twin)
        lines.append(json.dumps(record))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def command(*args: str | Path) -> tuple[int, str, str]:
    return in_process([str(a) for a in args])


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    return (write_run(tmp_path, "a", BASE, scores=True),
            write_run(tmp_path, "b", BETTER, profile="ckpt2", scores=True))


def test_compare_gives_each_suite_s_numbers_as_scipy_and_statsmodels_compute_them(
        runs: tuple[Path, Path]) -> None:
    code, out, err = command("compare", *runs, "--json")
    assert code == 0, err
    (found,) = json.loads(out)["comparisons"]
    suites = {r["group"]: r for r in found["suites"]}
    assert list(suites) == ["libero_10", "libero_spatial"]
    ten = suites["libero_10"]
    assert (ten["pairs"], ten["a"]["successes"], ten["b"]["successes"]) == (100, 50, 62)
    assert ten["a"]["wilson95"] == pytest.approx(proportion_confint(50, 100, method="wilson"), abs=1e-7)
    assert ten["b"]["wilson95"] == pytest.approx(proportion_confint(62, 100, method="wilson"), abs=1e-7)
    assert ten["difference"] == pytest.approx(0.12)
    assert ten["interval"] == pytest.approx(list(paired_difference_interval(14, 2, 100)))
    assert ten["interval"][0] > 0
    assert sorted(ten["only_b"]) == sorted(c for c in GAINED if c.startswith("libero_10"))
    assert sorted(ten["only_a"]) == sorted(c for c in LOST if c.startswith("libero_10"))
    p_values = [stats.binomtest(14, 16).pvalue, stats.binomtest(3, 6).pvalue]
    assert [ten["mcnemar_p"], suites["libero_spatial"]["mcnemar_p"]] == pytest.approx(p_values)
    assert [ten["holm_p"], suites["libero_spatial"]["holm_p"]] == pytest.approx(
        list(multipletests(p_values, method="holm")[1]))
    assert ten["significant"] and not suites["libero_spatial"]["significant"]
    overall = found["overall"]
    assert (overall["pairs"], overall["holm_p"]) == (200, None)
    assert overall["mcnemar_p"] == pytest.approx(stats.binomtest(17, 22).pvalue)
    # Partial credit: a failure scores 0.5, a success 1, so each flip moves the score by 0.5.
    assert ten["score"]["difference"] == pytest.approx((14 - 2) * 0.5 / 100)
    assert ten["score"]["interval"][0] <= ten["score"]["difference"] <= ten["score"]["interval"][1]
    assert not found["regression"] and found["left_out"] == {}


def test_the_verdict_says_which_suite_moved_and_the_exit_code_says_a_regression(
        runs: tuple[Path, Path]) -> None:
    a, b = runs
    code, out, _ = command("compare", a, b)
    assert code == 0
    low, high = paired_difference_interval(14, 2, 100)
    holm_p = 2 * stats.binomtest(14, 16).pvalue
    assert (f"B is better than A on libero_10 by 12.0 points (95% CI {100 * low:.1f} to "
            f"{100 * high:.1f}), p = {holm_p:.3f}; no significant difference on the other suites; "
            "B is better than A overall by 6.0 points") in out
    assert "Holm-adjusted over the 2 suites" in out and "paired 200 of 200 selected cases" in out
    assert "libero_10: only A succeeded: " + ", ".join(c for c in LOST if c.startswith("libero_10")) in out
    code, out, _ = command("compare", b, a)  # the other way round: a significant regression
    assert code == 1
    assert "B is worse than A on libero_10 by 12.0 points" in out
    code, out, _ = command("compare", a, a)
    assert code == 0 and "no significant difference on any suite" in out


def test_several_runs_are_each_compared_with_the_first(tmp_path: Path) -> None:
    a = write_run(tmp_path, "a", BETTER)
    same = write_run(tmp_path, "same", BETTER, profile="same")
    worse = write_run(tmp_path, "worse", BASE, profile="worse")
    code, out, _ = command("compare", a, same, worse, "--json")
    assert code == 1  # the third run is significantly worse than the first
    first, second = json.loads(out)["comparisons"]
    assert (first["b"], second["b"]) == ("same same", "worse worse")
    assert not first["regression"] and second["regression"]


def test_a_subset_of_cases_pairs_and_the_rest_are_named(tmp_path: Path) -> None:
    cases = CASES[:20]
    a = write_run(tmp_path, "a", {c: BASE[c] for c in cases[:19]} | {cases[19]: "errored"},
                  selected=cases)
    b = write_run(tmp_path, "b", {c: BASE[c] for c in cases[2:]}, selected=cases, profile="b")
    code, out, _ = command("compare", a, b, "--json")
    assert code == 0
    (found,) = json.loads(out)["comparisons"]
    assert found["paired"] == 17
    assert found["left_out"] == {"not run in B": cases[:2], "errored in A": [cases[19]]}
    code, out, _ = command("compare", a, b)
    assert "paired 17 of 20 selected cases (left out: 2 not run in B; 1 errored in A)" in out


def test_a_perturbed_case_pairs_with_its_counterpart_in_its_own_row(tmp_path: Path) -> None:
    twins = {"libero_10-00": "success", "libero_10-01": "success"}
    perturbed = {"libero_10-00~camera2": "failure", "libero_10-01~camera2": "success"}
    a = write_run(tmp_path, "a", twins | perturbed)
    b = write_run(tmp_path, "b", twins | {**perturbed, "libero_10-00~camera2": "success"}, profile="b")
    code, out, _ = command("compare", a, b, "--json")
    (found,) = json.loads(out)["comparisons"]
    rows = {r["group"]: r for r in found["suites"]}
    assert set(rows) == {"libero_10", "libero_10~camera2"}
    assert rows["libero_10~camera2"]["only_b"] == ["libero_10-00~camera2"]
    assert rows["libero_10"]["only_a"] == rows["libero_10"]["only_b"] == []


def test_latex_and_markdown_put_the_interval_and_the_mark_beside_each_number(
        runs: tuple[Path, Path]) -> None:
    code, out, _ = command("compare", *runs, "--latex")
    assert code == 0
    body = out.splitlines()
    assert body[body.index("\\toprule") - 1].startswith("\\begin{tabular}{l")
    assert "\\midrule" in body and "\\bottomrule" in body and "\\end{tabular}" in body
    ten = next(line for line in body if line.startswith("libero\\_10 "))
    spatial = next(line for line in body if line.startswith("libero\\_spatial "))
    assert "$+12.0^{*}$ {\\scriptsize [" in ten and "$62.0$ {\\scriptsize [" in ten
    assert "^{*}" not in spatial
    note = body[-1]
    assert note.startswith("{\\footnotesize ") and "McNemar" in note and "Holm" in note
    assert "Wilson" in note and "Fay and Lumbard" in note
    code, out, _ = command("compare", *runs, "--markdown")
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert len({line.count(" | ") for line in table}) == 1  # every row has every column
    assert any(line.startswith("| libero_10 | 100 | 50.0 [") and "+12.0\\* [" in line for line in table)


def test_runs_of_different_budgets_or_selections_are_refused_in_one_line(tmp_path: Path) -> None:
    a = write_run(tmp_path, "a", BASE)
    other_budget = write_run(tmp_path, "b", BASE, profile="b", budget_mode="decisions",
                             max_policy_calls=200)
    code, out, err = command("compare", a, other_budget)
    assert code == 4 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "they differ in their budgets (('horizon', None, 5) vs ('decisions', 200, 5))" in err
    other_selection = write_run(tmp_path, "c", BASE, profile="c",
                                selection={**PLAN["selection"], "init_states": [0]})
    code, _, err = command("compare", a, other_selection)
    assert code == 4 and "they differ in their selection" in err


@pytest.mark.parametrize(("args", "said"), [
    (["compare", "{a}"], "compare needs two run folders or more"),
    (["compare", "{a}", "{a}", "--alpha", "2"], "--alpha 2 is not a significance level"),
    (["compare", "{a}", "{a}", "--latex", "--json"], "not allowed with argument"),
    (["compare", "{a}", "{missing}"], "not a run folder (no run.json)"),
    (["table", "{damaged}"], "run.json"),
    (["card", "{nothing}"], "no completed case"),
])
def test_unfit_input_is_one_line_and_exit_4(tmp_path: Path, args: list[str], said: str) -> None:
    folders = {"a": write_run(tmp_path, "a", BASE), "missing": tmp_path / "missing",
               "nothing": write_run(tmp_path, "n", {"libero_10-00-s0": "errored"}, profile="n")}
    folders["damaged"] = write_run(tmp_path, "d", BASE, profile="d")
    (folders["damaged"] / "run.json").write_text('{"protocol_identity": 3, "plan": []}')
    code, out, err = command(*(arg.format(**folders) for arg in args))
    assert code == 4 and said in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if not line.startswith(("usage:", " "))]) == 1


def test_no_case_completed_in_both_is_refused(tmp_path: Path) -> None:
    a = write_run(tmp_path, "a", {"libero_10-00-s0": "errored"}, selected=["libero_10-00-s0"])
    b = write_run(tmp_path, "b", {"libero_10-00-s0": "success"}, selected=["libero_10-00-s0"],
                  profile="b")
    code, _, err = command("compare", a, b)
    assert code == 4 and "have no case that completed in both" in err


def test_table_counts_errored_cases_apart_and_names_what_did_not_run(tmp_path: Path) -> None:
    cases = CASES[:10] + CASES[100:110]
    outcomes = {c: BASE[c] for c in cases[:-1]} | {cases[0]: "errored"}
    run = write_run(tmp_path, "a", outcomes, selected=cases)
    code, out, err = command("table", run, "--json")
    assert code == 0, err
    found = json.loads(out)
    assert (found["selected"], found["not_run"]) == (20, 1)
    rows = {r["group"]: r for r in found["rows"]}
    assert set(rows) == {"libero_10", "libero_spatial", "overall"}
    ten = rows["libero_10"]
    successes = sum(BASE[c] == "success" for c in cases[1:10])
    assert (ten["cases"], ten["errored"], ten["success"]["completed"]) == (10, 1, 9)
    assert ten["success"]["successes"] == successes
    assert ten["success"]["wilson95"] == pytest.approx(
        proportion_confint(successes, 9, method="wilson"), abs=1e-7)
    code, out, _ = command("table", run)
    assert "20 selected cases, 1 not run" in out and out.splitlines()[0].startswith("suite")


def test_the_csv_has_one_row_per_episode_to_recompute_the_rates_from(tmp_path: Path) -> None:
    outcomes = {**{c: BASE[c] for c in CASES[:5]}, "libero_10-00-s0~camera2": "failure",
                CASES[5]: "errored"}
    extra = {c: {"identity": {"seed": 20260907, "bddl_sha256": "ab" * 32, "state_sha256": "cd" * 32},
                 "counters": {"policy_calls": 3, "decisions": 3, "executed_controls": 15,
                              "first_success_control": None, "first_success_policy_call": None}}
             for c in outcomes}
    extra["libero_10-00-s0~camera2"]["perturbation"] = {"kind": "camera", "level": 2, "seed": 99}
    run = write_run(tmp_path, "a", outcomes, extra=extra, scores=False)
    out = tmp_path / "episodes.csv"
    code, said, err = command("export", run, "--csv", out)
    assert code == 0, err
    assert "exported 7 episodes" in said
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["case"] for r in rows] == list(outcomes)
    perturbed = rows[5]
    assert (perturbed["suite"], perturbed["task_id"], perturbed["init_state"]) == ("libero_10", "0", "0")
    assert (perturbed["variant_source"], perturbed["variant_kind"], perturbed["variant_level"],
            perturbed["perturbation_seed"]) == ("generated", "camera", "2", "99")
    assert rows[0]["seed"] == "20260907" and rows[0]["bddl_sha256"] == "ab" * 32
    assert rows[0]["executed_controls"] == "15" and rows[0]["init_file_sha256"] == ""
    assert rows[6]["outcome"] == "errored" and rows[6]["error_kind"] == "environment"
    native = [r for r in rows if not r["variant_kind"] and r["outcome"] != "errored"]
    assert sum(r["outcome"] == "success" for r in native) == sum(BASE[c] == "success" for c in CASES[:5])
    code, _, err = command("export", run, "--csv", out)  # never over a file
    assert code == 2 and "already exists" in err
    code, _, err = command("export", run, "--csv", run / "episodes.csv")  # nor into the run
    assert code == 2 and "lies inside" in err and not (run / "episodes.csv").exists()


def test_the_csv_refuses_a_damaged_identity_by_name(tmp_path: Path) -> None:
    run = write_run(tmp_path, "a", {"libero_10-00-s0": "success"},
                    extra={"libero_10-00-s0": {"identity": {"seed": "twelve"}}})
    code, _, err = command("export", run, "--csv", tmp_path / "x.csv")
    assert code == 2 and "identity.seed = \"'twelve'\"" not in err
    assert "holds identity.seed" in err and "not an integer" in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def card_metadata(text: str) -> dict[str, Any]:
    assert text.startswith("---\n")
    front, _, _ = text[4:].partition("\n---\n")
    loaded: dict[str, Any] = yaml.safe_load(front)
    return loaded


def test_the_card_is_a_model_index_the_hub_s_classes_read(tmp_path: Path) -> None:
    run = write_run(tmp_path, "a", BETTER, scores=True)
    code, text, err = command("card", run, "--model-name", "org/vla-ckpt")
    assert code == 0, err
    meta = card_metadata(text)
    name, results = model_index_to_eval_results(meta["model-index"])
    assert name == "org/vla-ckpt"
    rates = {(r.dataset_config, r.metric_type): r for r in results}
    ten = rates[("libero_10", "success_rate")]
    assert (ten.task_type, ten.dataset_name, ten.dataset_type) == ("robotics", "LIBERO", "libero")
    assert ten.metric_value == 62.0 and ten.verified is False
    assert ten.metric_args["wilson95"] == pytest.approx(
        [100 * v for v in proportion_confint(62, 100, method="wilson")], abs=0.006)
    assert rates[(None, "success_rate")].metric_value == 56.0  # overall: 112 of 200
    assert rates[("libero_10", "partial_credit_score")].metric_value == 81.0
    assert ten.dataset_args["protocol_identity"] == protocol_identity()
    assert eval_results_to_model_index(name, results) == meta["model-index"]  # nothing lost
    card = ModelCard(text)  # the hub's own parser of a README, offline
    assert card.data.model_name == "org/vla-ckpt" and len(card.data.eval_results) == len(results)
    assert "## Evaluation on LIBERO" in card.text and f"pytest-libero verify {run}" in card.text
    assert "| libero_10 | 62.0 | " in card.text
    written = tmp_path / "README.md"
    assert command("card", run, "--model-name", "org/vla-ckpt", "--out", written)[0] == 0
    assert written.read_text() == text
    code, _, err = command("card", run, "--out", written)
    assert code == 4 and "already exists" in err


def test_the_commands_do_not_import_the_simulator(runs: tuple[Path, Path]) -> None:
    import subprocess
    import sys

    probe = ("import sys\nfrom pytest_libero import cli\n"
             f"cli.main(['compare', {str(runs[0])!r}, {str(runs[1])!r}])\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('libero', 'robosuite', 'mujoco', 'scipy')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
