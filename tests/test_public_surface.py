"""The public surface (issue 62): one home, ``pytest_libero``, whose names are pinned here;
each is the object at its defining module's path (which keeps working), imported on first
use (importing the plugin loads neither numpy nor the package's rooms), and typed for a
user's type checker."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pytest_libero

PUBLIC = {
    "evaluate": "pytest_libero.api.evaluate",
    "Evaluation": "pytest_libero.api.evaluation",
    "EvaluationFailed": "pytest_libero.api.evaluate",
    "EvaluationInterrupted": "pytest_libero.api.evaluate",
    "EvaluationRefused": "pytest_libero.api.evaluate",
    "Policy": "pytest_libero.policy.contract",
    "BatchPolicy": "pytest_libero.policy.contract",
    "EpisodeAware": "pytest_libero.policy.contract",
    "Observation": "pytest_libero.policy.contract",
    "Reply": "pytest_libero.policy.contract",
    "Kind": "pytest_libero.perturb.kind",
    "KindApplied": "pytest_libero.perturb.kind",
    "Perturbation": "pytest_libero.perturb.kind",
    "Context": "pytest_libero.perturb.kind",
    "Magnitudes": "pytest_libero.perturb.kind",
    "BenchmarkAdapter": "pytest_libero.adapters.base",
    "Episode": "pytest_libero.adapters.base",
    "CaseRecord": "pytest_libero.episode.record",
}
"""Every name users may import from ``pytest_libero``, and where it is defined. Adding or
removing one is a change to the public surface: this table, ``__all__`` and
docs/architecture.md's "The public surface" change together."""


def test_the_public_names_are_pinned() -> None:
    assert sorted(pytest_libero.__all__) == sorted([*PUBLIC, "__version__", "unsupported_python"])
    assert set(PUBLIC) <= set(dir(pytest_libero))


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_name_is_the_object_at_its_defining_path(name: str) -> None:
    assert getattr(pytest_libero, name) is getattr(importlib.import_module(PUBLIC[name]), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Kinds'"):
        pytest_libero.Kinds  # noqa: B018


def test_importing_the_package_loads_none_of_its_rooms() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, pytest_libero; print(' '.join(sorted(m for m in sys.modules "
         "if m == 'numpy' or m.startswith('pytest_libero.'))))"],
        capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert loaded == [], loaded


def test_a_user_s_type_checker_sees_the_public_names_typed(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent("""
        from pytest_libero import Evaluation, Kind, KindApplied, Observation, Policy, evaluate


        class Still(KindApplied):
            pass


        class Mine(Kind):
            name = "mine"
            applied = Still


        def run(policy: Policy) -> Evaluation:
            return evaluate(policy, suite="libero_10")


        def words(observation: Observation) -> str:
            return observation.language
    """))
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        from pytest_libero import Observation


        def calls(observation: Observation) -> str:
            return observation.policy_calls
    """))
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--cache-dir", str(tmp_path / "cache"), str(good), str(bad)],
                          capture_output=True, text=True, timeout=600, check=False)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith(str(bad)), done.stdout + done.stderr
    assert 'Incompatible return value type (got "int", expected "str")' in errors[0], errors
