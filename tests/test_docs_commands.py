"""Every command in README.md and docs/*.md runs as written (issue 61.10).

The commands are the lines of the fenced blocks that start with ``pytest``,
``pytest-libero`` or ``python -m pytest`` (continuation lines joined, a trailing comment
dropped). A ``pytest`` command is collected with ``--collect-only -q``: the plugin reads
and checks every option at configure and collection time and refuses a bad combination
with exit 4, so collection is the run without its episodes. A ``pytest-libero`` command
runs for real against a real run folder made once (a one-case zero-profile run of a few
seconds of simulation), ``plan`` with ``--from`` that folder in place of its probe.

Nothing is skipped quietly: what a command leaves to its reader is replaced as
SUBSTITUTIONS says, what cannot run here is listed in NOT_HERE with the reason, and a
placeholder left over, or an entry of either table that no command uses, fails.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from allure_cli import allure3

from pytest_libero.report.allure_config import ALLURE_ENV

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
BIN = Path(sys.executable).parent

FENCE = re.compile(r"^(?P<indent>[ \t]*)```[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
START = re.compile(r"(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
                   r"(?:pytest-libero|pytest|(?:\S*/)?python3?\s+-m\s+pytest)(?:\s|$)")
"""A command line: optional VAR=value words, then one of the three programs."""
LEFT_OVER = re.compile(r"<[^>]*>|\$|\.\.\.|\bRUN_DIR\b|\bRUN_ID\b")
"""What a placeholder looks like; none may remain after SUBSTITUTIONS."""

RUN_OPTIONS = ("--libero-profile=zero --libero-scope=task_coverage --libero-suite=libero_10 "
               "--libero-task-ids=0 --libero-budget-mode=decisions --libero-max-policy-calls=2 "
               "--libero-replan-interval=2")
"""The run folder the ``pytest-libero`` commands read: one case, two policy calls."""

SUBSTITUTIONS: tuple[tuple[str, str, str], ...] = (
    # (as written, replaced by, why); {run}, {case}, {options} and {python} are this
    # session's run folder, its one case id, the options that made it and this venv's python.
    ("libero-results/pi05/20260301T101500Z-3f2a1c", "{run}", "a pi05 run folder: the session's run"),
    ("libero-results/pi05/20261201T120000Z-ab12cd", "{run}", "likewise"),
    ("libero-results/smolvla/<run id>", "{run}", "likewise"),
    ("/shared/results/pi05/RUN_ID/shard-*-of-8", "{run}",
     "eight shard folders (the shell's glob): merge takes the run folders of one run; "
     "making eight shards would be eight runs"),
    ("/results/pi05/pi05-r1/shard-*-of-8", "{run}", "likewise"),
    ("/shared/results/pi05/RUN_ID/merged", "merged-shared", "a new folder here"),
    ("/results/pi05/pi05-r1/merged", "merged-k8s", "a new folder here"),
    ("RUN_DIR", "{run}", "a run folder: the session's run"),
    ("libero_10-03-s17", "{case}", "a case of that run: the session run's one case"),
    ("<the same options as the interrupted run>", "{options}", "the options that made {run}"),
    ("pytest ... --libero-min-success=0.5", "pytest --libero-profile=pi05 --libero-scope=all "
     "--libero-mode=full --libero-min-success=0.5", "the line above's run"),
    ("state.gripper=0.03,-0.03 ...", "state.gripper=0.03,-0.03", "'and the run's other options'"),
    ('"${SLURM_ARRAY_TASK_ID}/${N}"', "1/8", "Slurm's array task 1 of the script's N=8"),
    ('"${SLURM_ARRAY_JOB_ID}"', "4242", "a Slurm job id"),
    ('"${RESULTS}"', "results", "the script's RESULTS, here"),
    ("$I/$N", "1/8", "the pod's shard: index 0, N=8"),
    ("$WHERE", "--libero-run-id=pi05-r1 --libero-results=results", "a first try's WHERE"),
    (".venv/bin/python", "{python}", "the venv that runs this test"),
)

Done = subprocess.CompletedProcess[str]
"""A command's exit code, stdout and stderr."""

NOT_HERE: dict[str, str] = {
    "pytest-libero export libero-results/pi05/20260301T101500Z-3f2a1c --lerobot datasets/pi05-run":
        "needs pytest-libero[lerobot] (lerobot 0.4.4 or 0.6 with torch, 8 GB); tests/test_lerobot_export.py "
        "(marker lerobot) runs it",
    **{command: "needs a policy server at its endpoint; tests/test_check_server.py runs "
       "check-server against real ones (pytest-libero's, vla-eval's, broken ones)"
       for command in (
           "pytest-libero check-server --profile pi05 --endpoint ws://gpu-box:8000 --deterministic",
           "pytest-libero check-server --profile vla-eval --endpoint ws://127.0.0.1:8000",
           "pytest-libero check-server --profile my_model.toml -- --alluredir allure-results -v")},
}
"""Commands that cannot run here, each with the reason."""

HERE_ENV = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}
"""No W&B account and no network here: W&B's own offline mode (docs/export.md names it)."""


@dataclass(frozen=True)
class Command:
    """One command line of the docs: where it is written and its text, one line."""

    where: str
    text: str


def commands_in(page: Path) -> Iterator[Command]:
    """The command lines of one page's fenced blocks."""
    text = page.read_text(encoding="utf-8")
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
    for block in FENCE.finditer(text):
        first = text.count("\n", 0, block.start("body")) + 1
        pending: list[str] = []
        for offset, line in enumerate(block["body"].splitlines()):
            pending.append(line.strip())
            if line.rstrip().endswith("\\"):
                pending[-1] = pending[-1][:-1].strip()
                continue
            joined, pending = " ".join(pending), []
            joined = re.sub(r"\s+#.*$", "", joined).strip()
            if START.match(joined):
                yield Command(f"{name}:{first + offset}", " ".join(joined.split()))


def doc_commands() -> dict[str, list[str]]:
    """Each distinct command of the docs and every place it is written."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for command in commands_in(page):
            found.setdefault(command.text, []).append(command.where)
    return found


@dataclass(frozen=True)
class Here:
    """What the commands are run with: a folder, and the real run the commands read."""

    folder: Path
    run: Path
    case: str


def substituted(text: str, here: Here) -> str:
    """The command with every placeholder of SUBSTITUTIONS replaced; a placeholder left
    over fails."""
    values = {"run": str(here.run), "case": here.case, "options": RUN_OPTIONS,
              "python": sys.executable}
    for written, instead, _ in SUBSTITUTIONS:
        text = text.replace(written, instead.format(**values))
    left = LEFT_OVER.search(text)
    assert left is None, f"a placeholder no substitution covers: {left[0]!r} in {text}"
    return text


def argv_of(text: str, here: Here) -> tuple[dict[str, str], list[str]]:
    """The environment a command line sets and its argument vector, as it runs here: a
    ``pytest`` run collected only, ``plan`` from the session's run folder."""
    words = shlex.split(substituted(text, here))
    env: dict[str, str] = {}
    while re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[0] == "pytest-libero":
        words[0] = str(BIN / "pytest-libero")
        if words[1] == "plan" and "--from" not in words:  # the probe takes a minute or two
            words[2:2] = ["--from", str(here.run)]
        return env, words
    if words[0] == "pytest":
        words[0] = str(BIN / "pytest")
    return env, [*words, "--collect-only", "-q"]


def environment(env: dict[str, str], here: Here) -> dict[str, str]:
    """The command's own VAR=value words over HERE_ENV; the folder on PYTHONPATH for the
    run folder's kinds (docs/architecture.md's my_kinds.py)."""
    full = {**HERE_ENV, "WANDB_DIR": str(here.folder / "wandb"), "PYTHONPATH": str(here.folder), **env}
    allure = allure_here()
    if allure is not None:
        full[ALLURE_ENV] = allure
    return full


@cache
def allure_here() -> str | None:
    """Allure 3's CLI where the tests find one (asking it its version takes a second)."""
    return allure3()


def run(text: str, here: Here) -> Done:
    """The command in a process of its own: the project's own commands
    (docs/development.md) in its checkout, every other in the folder of ``here``."""
    env, argv = argv_of(text, here)
    cwd = ROOT if text.startswith(".venv/bin/python") else here.folder
    return subprocess.run(argv, cwd=cwd, env={**os.environ, **environment(env, here)},
                          capture_output=True, text=True, timeout=600, check=False)


def collect_each(texts: list[str], here: Here) -> dict[str, Done]:
    """``pytest`` commands collected each in a process of its own, forked from one that is
    warm (tests/tools/collect_each.py): a fraction of a second each instead of two."""
    jobs = []
    for text in texts:
        env, argv = argv_of(text, here)
        assert Path(argv[0]).name == "pytest", text  # pytest.main stands for the script
        jobs.append({"args": argv[1:], "cwd": str(here.folder), "env": environment(env, here)})
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "tools" / "collect_each.py")],
                          input=json.dumps(jobs), capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout)
    return {text: subprocess.CompletedProcess(argv_of(text, here)[1], one["code"], one["stdout"],
                                              one["stderr"])
            for text, one in zip(texts, said, strict=True)}


def refusal(text: str, done: Done) -> str | None:
    """Why the command's outcome is not the docs' promise, or None: exit 0, or for
    ``report`` without Allure 3 here, its documented exit 1 that says so."""
    if done.returncode == 0:
        return None
    if (" report " in f" {text} " and allure_here() is None and done.returncode == 1
            and "Allure 3 was not found" in done.stdout):
        return None
    return f"exit {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def doc_file(page: str, first_line: str) -> str:
    """A file a doc shows in full: the fenced block that opens with ``first_line``."""
    text = (ROOT / page).read_text(encoding="utf-8")
    for block in FENCE.finditer(text):
        if block["body"].startswith(first_line):
            return str(block["body"])
    raise AssertionError(f"{page} has no block opening with {first_line!r}")


def prepared(folder: Path) -> None:
    """The files the commands name that a doc shows: written here as the doc has them.
    ``my_model.toml`` is shown nowhere: the shipped pi05 profile stands in (scale.md
    serves the model over websocket, as pi05's is)."""
    (folder / "my-gr00t.toml").write_text(doc_file("docs/gr00t.md", 'name = "my-gr00t"'))
    (folder / "my_kinds.py").write_text(doc_file("docs/architecture.md", "# my_kinds.py"))
    shipped = ROOT / "pytest_libero" / "data" / "profiles" / "pi05.toml"
    shutil.copyfile(shipped, folder / "my_model.toml")


def program(text: str) -> str:
    """The command's program, past any VAR=value words."""
    return next(word for word in text.split() if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", word))


COMMANDS = doc_commands()
NEEDS_RUN = {text for text in COMMANDS if program(text) == "pytest-libero" or "RUN_DIR" in text}
"""A ``pytest-libero`` command reads a run folder (or the Allure results of one)."""


def cases(needing_run: bool) -> list[Any]:
    chosen = [text for text in COMMANDS if text not in NOT_HERE and (text in NEEDS_RUN) == needing_run]
    return [pytest.param(text, id=COMMANDS[text][0]) for text in chosen]


def forked(text: str) -> bool:
    """Collected by tests/tools/collect_each.py: a ``pytest`` command of the plugin's; the
    project's own suite (``.venv/bin/python -m pytest``) runs as its own process."""
    return program(text) == "pytest"


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> Here:
    """A real run folder, once: the zero profile on libero_10 task 0, two calls, with its
    Allure results as README's ``allure-demo`` and docs/allure.md's ``allure-results``."""
    folder = tmp_path_factory.mktemp("docs-run")
    prepared(folder)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           *RUN_OPTIONS.split(), "--libero-run-id=docs", "--alluredir=allure-demo"],
                          cwd=folder, capture_output=True, text=True, timeout=600, check=False)
    run = folder / "libero-results" / "zero" / "docs"
    assert (run / "results.jsonl").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    shutil.copytree(folder / "allure-demo", folder / "allure-results")
    return Here(folder, run, "libero_10-00")


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Here:
    """A folder with the docs' files and no run: enough for a collection."""
    folder = tmp_path_factory.mktemp("docs-collect")
    prepared(folder)
    return Here(folder, folder / "no-run", "no-case")


@pytest.fixture(scope="module")
def collections(bare: Here) -> dict[str, Done]:
    """Every forked collection of the docs, and REFUSED_PAGE's, done together once."""
    texts = [text for text in COMMANDS if text not in NOT_HERE and text not in NEEDS_RUN and forked(text)]
    return collect_each([*texts, refused_commands(bare.folder)[0]], bare)


def test_the_docs_commands_are_found() -> None:
    """The extraction sees the docs' commands in each form (a regex that stopped matching
    would pass every test below vacuously)."""
    texts = list(COMMANDS)
    assert len(texts) >= 30
    assert {"pytest", "pytest-libero", ".venv/bin/python"} <= {program(text) for text in texts}
    for sub in ("plan", "merge", "verify", "safety", "report", "log", "export"):
        assert any(f"pytest-libero {sub} " in text for text in texts), sub
    slurm = next(text for text in texts if "--libero-shard=" in text and "SLURM" in text)
    assert "--libero-results=" in slurm  # continuation lines joined


def test_the_tables_name_only_written_commands() -> None:
    """An entry that no command uses any more is stale: the table would hide nothing."""
    for text in NOT_HERE:
        assert text in COMMANDS, f"NOT_HERE names a command the docs no longer show: {text}"
    for written, _, _ in SUBSTITUTIONS:
        assert any(written in text for text in COMMANDS), f"unused substitution {written!r}"


@pytest.mark.parametrize("text", cases(needing_run=False))
def test_collects_as_written(text: str, bare: Here,
                             collections: dict[str, Done]) -> None:
    """The docs' ``pytest`` commands: every option accepted, the cases listed."""
    done = collections[text] if forked(text) else run(text, bare)
    assert refusal(text, done) is None, f"{COMMANDS[text]}: {text}\n{refusal(text, done)}"
    assert re.search(r"\d+ tests? collected", done.stdout), done.stdout[-2000:]


@pytest.mark.simulator
@pytest.mark.parametrize("text", cases(needing_run=True))
def test_runs_as_written(text: str, here: Here) -> None:
    """The docs' ``pytest-libero`` commands (and the resume) against a real run folder."""
    done = run(text, here)
    assert refusal(text, done) is None, f"{COMMANDS[text]}: {text}\n{refusal(text, done)}"


REFUSED_PAGE = """\
```
pytest --libero-profile=demo --libero-suite=libero_spatial \\
    --libero-task-ids=0-2                     # the demo's tasks narrowed
pytest-libero plan --libero-profile=zero --libero-suite=libero_spatial --libero-task-ids=0-2
```
"""
"""Two lines as a doc could have written them, each refused: --libero-suite without
--libero-scope=task_coverage under the demo profile (its scope is ``profile``) and under
the zero profile (``smoke``), as issue 61 met it."""


def refused_commands(folder: Path) -> list[str]:
    page = folder / "refused.md"
    page.write_text(REFUSED_PAGE)
    return [command.text for command in commands_in(page)]


def test_a_refused_collection_is_caught(
        bare: Here, collections: dict[str, Done]) -> None:
    """The check of the docs' ``pytest`` lines fails one that the run would refuse."""
    text = refused_commands(bare.folder)[0]
    assert text.endswith("--libero-task-ids=0-2")  # the continuation joined, the comment gone
    done = collections[text]
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    why = refusal(text, done)
    assert why is not None and "use --libero-scope=task_coverage" in why


@pytest.mark.simulator
def test_a_refused_plan_is_caught(here: Here, tmp_path: Path) -> None:
    """Likewise the check of the ``pytest-libero`` lines, on ``plan``."""
    text = refused_commands(tmp_path)[1]
    done = run(text, here)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    why = refusal(text, done)
    assert why is not None and "use --libero-scope=task_coverage" in why
