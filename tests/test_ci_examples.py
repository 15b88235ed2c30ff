"""The CI gates users copy (examples/ci/): linted against GitHub's and GitLab's own
schemas, and their steps run as written, from a fresh install of the wheel.

The steps run under bash as the runners run them (GitHub: ``bash -eo pipefail``, each
step a script; GitLab: the job's script lines in one shell), with the file's own
variables and only the ones a test must change overridden: the package (the wheel),
the interpreter, the profile and selection (the demo instead of a checkpoint), the GPUs
(none here) and the run id (the runner's expression). What is checked is the verdict
the job would give: the gate passed, the gate failed, or an infrastructure error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from installs import ROOT, Artifacts, interpreter
from ports import free_port
from venvs import clean_env

pytestmark = pytest.mark.install

EXAMPLES = ROOT / "examples" / "ci"
GITHUB = EXAMPLES / "github-libero-gate.yml"
GITLAB = EXAMPLES / "gitlab-libero-gate.yml"
SCHEMAS = {GITHUB: "vendor.github-workflows", GITLAB: "vendor.gitlab-ci"}
ONE_TASK = ("--libero-scope=task_coverage --libero-suite=libero_10 --libero-task-ids=0 "
            "--libero-budget-mode=decisions --libero-max-policy-calls=1")


def lint(path: Path) -> subprocess.CompletedProcess[str]:
    checker = Path(sys.executable).with_name("check-jsonschema")
    return subprocess.run([str(checker), "--builtin-schema", SCHEMAS.get(path, SCHEMAS[GITHUB]),
                           str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("example", [GITHUB, GITLAB], ids=lambda p: p.name)
def test_the_examples_pass_their_platforms_schema(example: Path, tmp_path: Path) -> None:
    done = lint(example)
    assert done.returncode == 0, done.stdout + done.stderr
    # The linter can fail: the same file with a misspelt key is refused.
    broken = tmp_path / example.name
    text = example.read_text()
    broken.write_text(text.replace("runs-on:", "run-on:") if example == GITHUB
                      else text.replace("  script:", "  scripts:"))
    SCHEMAS[broken] = SCHEMAS[example]
    try:
        refused = lint(broken)
    finally:
        del SCHEMAS[broken]
    assert refused.returncode != 0, refused.stdout


def test_both_examples_run_the_same_evaluation() -> None:
    def evaluation(script: str) -> str:
        start = script.index('"$VENV/bin/python" -m pytest')
        return script[start:script.index("--alluredir=allure-results", start)]

    github = next(step["run"] for step in workflow()["steps"] if step.get("id") == "evaluate")
    gitlab = "\n".join(gitlab_job()["script"])
    assert " ".join(evaluation(github).split()) == " ".join(evaluation(gitlab).split())


def workflow() -> dict[str, Any]:
    return dict(yaml.safe_load(GITHUB.read_text())["jobs"]["libero"])


def gitlab_job() -> dict[str, Any]:
    return dict(yaml.safe_load(GITLAB.read_text())["libero-gate"])


OUTPUT_EXPRESSION = re.compile(r"\$\{\{\s*steps\.(\w+)\.outputs\.(\w+)\s*\|\|\s*'([^']*)'\s*\}\}")
"""The one kind of GitHub expression the steps' own ``env`` uses: a step's output or a default."""


class Workspace:
    """A runner's checkout: verdict.py where the examples expect it, their venv beside."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.root = root
        (root / "ci").mkdir(parents=True)
        shutil.copyfile(EXAMPLES / "verdict.py", root / "ci" / "verdict.py")
        base = interpreter(f"{sys.version_info.major}.{sys.version_info.minor}")
        self.overrides = {"PYTEST_LIBERO": str(wheel), "PYTHON": str(base), "LIBERO_GPUS": "",
                          "LIBERO_RUN_ID": "ci-run", "POLICY_SERVER": "", "LIBERO_WORKERS": "2"}

    def env(self, declared: dict[str, Any], **changes: str) -> dict[str, str]:
        return clean_env(**{**{k: str(v) for k, v in declared.items()}, **self.overrides, **changes})

    def github_step(self, step: dict[str, Any], env: dict[str, str],
                    timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """One ``run:`` step as GitHub's bash shell runs it."""
        script = self.root / "step.sh"
        script.write_text(step["run"])
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout)

    def github_job(self, **changes: str) -> dict[str, subprocess.CompletedProcess[str]]:
        """The workflow's ``run:`` steps in order, by name (``uses:`` steps are GitHub's
        own); a step skips as on a runner: after a failure unless ``always()``, and where
        ``env.POLICY_SERVER`` is empty when it says so."""
        job = workflow()
        env = self.env(job["env"], GITHUB_ACTIONS="true", **changes)
        outputs: dict[tuple[str, str], str] = {}
        ran: dict[str, subprocess.CompletedProcess[str]] = {}
        for step in job["steps"]:
            condition = str(step.get("if", ""))
            if ("run" not in step or ("POLICY_SERVER != ''" in condition and not env["POLICY_SERVER"])
                    or ("always()" not in condition and any(r.returncode for r in ran.values()))):
                continue
            written = self.root / "github-output"
            written.write_text("")
            declared = {name: OUTPUT_EXPRESSION.sub(lambda m: outputs.get((m[1], m[2])) or m[3], str(value))
                        for name, value in step.get("env", {}).items()}
            ran[step["name"]] = self.github_step(step, {**env, **declared, "GITHUB_OUTPUT": str(written)})
            for line in written.read_text().splitlines():
                name, _, value = line.partition("=")
                outputs[(str(step.get("id")), name)] = value
        return ran

    def gitlab_job(self, **changes: str) -> subprocess.CompletedProcess[str]:
        """The job's script lines in one shell, as GitLab's runner runs them."""
        job = gitlab_job()
        script = self.root / "job.sh"
        script.write_text("set -eo pipefail\n" + "\n".join(job["script"]) + "\n")
        return subprocess.run(["bash", str(script)], cwd=self.root, env=self.env(job["variables"], **changes),
                              capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def workspace(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """One runner checkout; the first job's install step makes its venv."""
    return Workspace(tmp_path_factory.mktemp("runner") / "work", artifacts.wheel)


def all_output(ran: dict[str, subprocess.CompletedProcess[str]]) -> str:
    return "\n".join(f"--- {name} (exit {r.returncode})\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
                     for name, r in ran.items())


JUDGE = "Judge the gate"


@pytest.mark.simulator
def test_the_github_job_passes_a_gate_the_demo_meets(workspace: Workspace) -> None:
    ran = workspace.github_job(LIBERO_PROFILE="demo", LIBERO_SELECTION="", LIBERO_MIN_SUCCESS="0.6")
    assert list(ran) == ["Install pytest-libero", "Evaluate (gated, decided early)", JUDGE], all_output(ran)
    assert ran[JUDGE].returncode == 0, all_output(ran)
    assert ran[JUDGE].stdout.startswith("::notice title=LIBERO gate passed::"), all_output(ran)
    run = workspace.root / "libero-results" / "demo" / "ci-run"
    assert (run / "summary.json").is_file() and any((workspace.root / "allure-results").iterdir())


@pytest.mark.simulator
def test_the_gitlab_job_fails_exactly_on_the_gate(workspace: Workspace) -> None:
    done = workspace.gitlab_job(LIBERO_PROFILE="zero", LIBERO_SELECTION=ONE_TASK,
                                LIBERO_MIN_SUCCESS="0.5", LIBERO_RUN_ID="gitlab-gate")
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    assert done.stdout.strip().splitlines()[-1].startswith("LIBERO gate failed: "), done.stdout[-2000:]


def test_an_absent_server_is_an_infrastructure_error_not_a_gate(workspace: Workspace) -> None:
    """pi05 with nothing on its port: the plugin refuses before any case (exit 4)."""
    ran = workspace.github_job(LIBERO_PROFILE="pi05", LIBERO_SELECTION=ONE_TASK,
                               LIBERO_SERVER_WAIT="0", LIBERO_RUN_ID="no-server")
    assert ran[JUDGE].returncode == 2, all_output(ran)
    assert ran[JUDGE].stdout.startswith("::error title=LIBERO infrastructure error::pytest exited 4"), \
        all_output(ran)


@pytest.mark.parametrize(("server", "code", "said"), [
    ("python3 -m http.server $POLICY_PORT --bind 127.0.0.1", 0, ""),
    ("sleep 1; exit 3", 2, "the policy server exited"),
])
def test_the_server_wait_step(server: str, code: int, said: str, workspace: Workspace) -> None:
    wait = next(step for step in workflow()["steps"] if step.get("name") == "Wait for the policy server")
    start = next(step for step in workflow()["steps"] if step.get("name") == "Start the policy server")
    env = workspace.env(workflow()["env"], POLICY_SERVER=server, POLICY_PORT=str(free_port()),
                        POLICY_STARTUP_S="60")
    try:
        assert workspace.github_step(start, env).returncode == 0
        done = workspace.github_step(wait, env, timeout=120)
    finally:
        pid = (workspace.root / "policy-server.pid").read_text().strip()
        subprocess.run(["pkill", "-P", pid], check=False)
        subprocess.run(["kill", pid], check=False, capture_output=True)
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stdout
    os.remove(workspace.root / "policy-server.pid")
