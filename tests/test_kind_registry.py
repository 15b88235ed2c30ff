"""A perturbation kind is one object in one registry: what each shipped kind acts on, that
nothing outside perturb/ names a kind, what registration refuses, and a kind defined
here, in this file, run end to end (collection, a real case beside its twin, the
robustness rows, verify) without a package file edited for it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from harness.runs import records_by_case, run_pytest
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.perturb import registry
from pytest_libero.perturb.kind import Context, Kind, KindApplied, Magnitudes, Moment
from pytest_libero.perturb.levels import level_table, parse_perturbations, perturb_identity
from pytest_libero.protocol.errors import SetupError

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "pytest_libero"


class TintApplied(KindApplied):
    """Dims the scene's headlight: the images change, the physics does not."""

    def on_scene(self) -> None:
        drawn = self.draw()
        headlight = self.stage.env.sim.model.vis.headlight
        headlight.ambient[:] = np.clip(np.asarray(headlight.ambient) * drawn.parameters["factor"], 0, 1)
        headlight.diffuse[:] = np.clip(np.asarray(headlight.diffuse) * drawn.parameters["factor"], 0, 1)
        self.record = {**drawn.as_dict(),
                       "applied": {"ambient": [float(v) for v in headlight.ambient]}}


class Tint(Kind):
    """A kind of this test's own: the headlight scaled by a drawn factor."""

    name = "tint"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        1: {"dim": 0.2}, 2: {"dim": 0.4}, 3: {"dim": 0.6}, 4: {"dim": 0.8}}
    applied = TintApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        return {"factor": round(1.0 - magnitudes["dim"] * float(rng.uniform(0.5, 1.0)), 6)}


def test_each_shipped_kind_acts_at_its_moments() -> None:
    moments = {kind.name: kind.moments() for kind in registry.kinds()}
    assert moments == {
        "camera": (Moment.SCENE,),
        "light": (Moment.SCENE,),
        "robot": (Moment.INIT_STATE, Moment.SETTLED),
        "noise": (Moment.DELIVERY,),
        "position": (Moment.PLACEMENT, Moment.SETTLED),
        "environment": (Moment.SCENE, Moment.PLACEMENT, Moment.SETTLED),
        "object": (Moment.SCENE,),
        "semantic": (Moment.INSTRUCTION,),
        "latency": (Moment.CONTROL,),
    }


def test_the_docs_say_when_each_kind_acts() -> None:
    text = (TESTS.parent / "docs" / "perturbations.md").read_text(encoding="utf-8")
    for kind in registry.kinds():
        row = f"| `{kind.name}` | {', '.join(m.value for m in kind.moments())} |"
        assert row in text, row


def test_the_architecture_doc_s_kind_registers_and_draws() -> None:
    """docs/architecture.md's example kind is real code: it loads, registers and draws."""
    doc = (TESTS.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    source = doc.split("## Adding a perturbation kind", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    space: dict[str, Any] = {}
    exec(compile(source, "architecture.md", "exec"), space)  # noqa: S102 (the project's own doc)
    with registry.registered(space["Dim"]()) as dim:
        assert dim.moments() == (Moment.SCENE,)
        assert parse_perturbations("dim:2") == (("dim", 2),)
        factor = registry.draw("dim", 2, "libero_10-03").parameters["factor"]
        assert 0.6 <= factor <= 0.8


def kind_comparisons(path: Path, kinds: set[str]) -> list[str]:
    """Places in ``path`` that compare something with a kind's name written out."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            named = [v.value for v in values if isinstance(v, ast.Constant) and v.value in kinds]
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno} {name}" for name in named]
    return found


def test_no_code_outside_perturb_compares_a_kind_by_name() -> None:
    kinds = set(registry.names())
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if "perturb" not in path.parts
             for hit in kind_comparisons(path, kinds)]
    assert found == []


def test_the_scan_finds_a_comparison_with_a_kind(tmp_path: Path) -> None:
    sample = PACKAGE / "scan_sample.py"
    try:
        sample.write_text('if kind in ("camera", "x") or other == "noise":\n    pass\n')
        assert kind_comparisons(sample, {"camera", "noise"}) == [
            "scan_sample.py:1 camera", "scan_sample.py:1 noise"]
    finally:
        sample.unlink()


class Nameless(Tint):
    name = "Tint!"


class FewLevels(Tint):
    name = "few"
    levels: ClassVar[dict[int, dict[str, float]]] = {1: {"dim": 0.1}}


class NotApplied(Tint):
    name = "bare"
    applied = object  # type: ignore[assignment]


@pytest.mark.parametrize(("kind", "why"), [
    (Nameless(), "must match"),
    (FewLevels(), "its levels must map each of (1, 2, 3, 4)"),
    (NotApplied(), "must subclass perturb.kind.KindApplied"),
    (registry.kind("camera"), "registered already"),
])
def test_registration_refuses_a_kind_with_the_reason(kind: Kind, why: str) -> None:
    before = registry.names()
    with pytest.raises(ValueError, match="cannot register perturbation kind") as refused:
        registry.register(kind)
    assert why in str(refused.value)
    assert registry.names() == before


def test_a_registered_kind_joins_the_option_the_table_and_the_identity() -> None:
    shipped = perturb_identity("fast")
    with pytest.raises(SetupError, match="KIND one of camera"):
        parse_perturbations("tint:2")
    with registry.registered(Tint()):
        assert registry.names()[-1] == "tint"
        assert parse_perturbations("tint:2,camera:1") == (("camera", 1), ("tint", 2))
        assert level_table()["table"]["tint"]["2"] == {"dim": 0.4}  # type: ignore[index]
        assert perturb_identity("fast") != shipped
        entry = registry.perturbed(load_catalog().entries[0], "tint", 3)
        assert entry.case_id == "libero_spatial-00~tint3" and registry.not_applicable(entry) is None
        drawn = registry.draw("tint", 3, "libero_spatial-00")
        assert drawn.as_dict() == registry.draw("tint", 3, "libero_spatial-00").as_dict()
    assert "tint" not in registry.names() and perturb_identity("fast") == shipped


class SceneLateApplied(KindApplied):
    """Delays each reply by what the scene says: it needs a simulator to answer."""

    def __init__(self, kind: Kind, level: int, stage: Any) -> None:
        super().__init__(kind, level, stage)
        self.controls = int(stage.env.sim.model.nbody) % 3

    def delay(self, policy_call: int, latency_s: float) -> int:
        return self.controls


class SceneLate(Tint):
    name = "scenelate"
    applied = SceneLateApplied


def test_a_record_reader_asks_the_kind_for_its_delays_without_a_simulator() -> None:
    """verify and export check each recorded delay against the kind's own rule
    (``registry.delay_rule``); a kind that needs the scene to answer says so."""
    native = load_catalog().entries[0]
    assert registry.delay_rule(native)(3, 0.5) == 0  # type: ignore[operator]
    late = registry.delay_rule(registry.perturbed(native, "latency", 3))
    assert not isinstance(late, str) and [late(n, 0.0) for n in (1, 2)] == [4, 4]
    with registry.registered(Tint()):  # acts on the scene, never on the clock: 0
        assert registry.delay_rule(registry.perturbed(native, "tint", 1))(1, 0.0) == 0  # type: ignore[operator]
    with registry.registered(SceneLate()):
        said = registry.delay_rule(registry.perturbed(native, "scenelate", 1))
    assert isinstance(said, str) and "'scenelate' cannot say its delays without a simulator" in said
    assert "RuntimeError: no simulator here" in said


@pytest.mark.parametrize(("spec", "said"), [
    ("no_colon", "give module:Class"),
    ("no_such_module_here:Tint", "cannot import it"),
    ("json:dumps", "is a function, not a pytest_libero.perturb.kind.Kind"),
    ("test_kind_registry:Nameless", "must match"),
])
def test_a_bad_kind_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, spec: str, said: str,
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), str(TESTS.parent)]))
    done = pytester.runpytest_subprocess("--libero-profile=zero", f"--libero-kind={spec}",
                                         "--collect-only", "-q")
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    done.stderr.fnmatch_lines([f"*--libero-kind={spec!r}*{said}*"])
    assert "Traceback" not in done.stderr.str()


@pytest.mark.simulator
def test_a_kind_defined_in_a_test_file_runs_beside_its_twin_and_verifies(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    run_id = "tint"
    done = run_pytest(["-q", "--libero-profile=zero", "--libero-scope=development",
                       "--libero-task-ids=0", "--libero-budget-mode=decisions",
                       "--libero-max-policy-calls=1", "--libero-replan-interval=1",
                       "--libero-kind=test_kind_registry:Tint", "--libero-perturb=tint:2",
                       f"--libero-run-id={run_id}", "--collect-only"], tmp_path, env=env, timeout=300)
    assert "test_libero_task[libero_10-00~tint2]" in done.stdout, done.stdout + done.stderr
    done = run_pytest(["-q", "--libero-profile=zero", "--libero-scope=development",
                       "--libero-task-ids=0", "--libero-budget-mode=decisions",
                       "--libero-max-policy-calls=1", "--libero-replan-interval=1",
                       "--libero-kind=test_kind_registry:Tint", "--libero-perturb=tint:2",
                       f"--libero-run-id={run_id}"], tmp_path, env=env, timeout=900)
    run_dir = tmp_path / "libero-results" / "zero" / run_id
    found = records_by_case(run_dir)
    assert sorted(found) == ["libero_10-00", "libero_10-00~tint2"], done.stdout + done.stderr
    twin, tinted = found["libero_10-00"], found["libero_10-00~tint2"]
    assert tinted["outcome"] == twin["outcome"] == "failure"
    assert tinted["perturbation"]["kind"] == "tint" and tinted["perturbation"]["level"] == 2
    assert 0.2 <= 1 - tinted["perturbation"]["parameters"]["factor"] <= 0.4  # dim 0.4 x [0.5, 1]
    # The headlight changes the pictures, never the physics.
    assert tinted["identity"]["settled_state_sha256"] == twin["identity"]["settled_state_sha256"]
    observed = [json.loads((Path(r["evidence_dir"]) / "observations.jsonl").read_text().splitlines()[0])
                for r in (twin, tinted)]
    assert observed[0]["images"]["agentview"] != observed[1]["images"]["agentview"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["plan"]["kinds"] == ["test_kind_registry:Tint"]
    rows = json.loads((run_dir / "summary.json").read_text())["robustness"]
    assert rows["kinds"]["tint"]["paired"]["pairs"] == 1
    assert rows["levels"]["tint"]["2"]["cases"] == 1
    unnamed = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(run_dir)],
                             env=env, capture_output=True, text=True, timeout=300, check=False)
    assert unnamed.returncode == 2 and not (run_dir / "verify.json").exists(), unnamed.stderr
    assert "rerun with --libero-kind=test_kind_registry:Tint" in unnamed.stderr, unnamed.stderr
    verified = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(run_dir),
                               "--libero-kind=test_kind_registry:Tint"],
                              env=env, capture_output=True, text=True, timeout=900, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    verdicts = json.loads((run_dir / "verify.json").read_text())
    assert {v["case"]: v["status"] for v in verdicts["cases"]} == {
        "libero_10-00": "verified", "libero_10-00~tint2": "verified"}
